//! The L2 tier over the store, with a deterministic summarizer: a long conversation is kept
//! under the high-water mark, summaries chain and merge, and the newest message stays.

use anyhow::Result;
use memory::{NewMessage, PolicyConfig, Role, Store, Summarizer, SummaryRequest, SummaryText};

/// "Summarizes" by counting: a fixed-size summary that names what it covered.
struct Counting {
    calls: Vec<SummaryRequest>,
}

impl Summarizer for Counting {
    fn summarize(
        &mut self,
        request: &SummaryRequest,
    ) -> Result<SummaryText, Box<dyn std::error::Error + Send + Sync>> {
        self.calls.push(request.clone());
        Ok(SummaryText {
            text: format!(
                "{} summaries and {} messages",
                request.earlier_summaries.len(),
                request.messages.len()
            ),
            token_count: request.max_tokens / 2,
            model: "test".into(),
        })
    }
}

struct Failing;

impl Summarizer for Failing {
    fn summarize(
        &mut self,
        _: &SummaryRequest,
    ) -> Result<SummaryText, Box<dyn std::error::Error + Send + Sync>> {
        Err("the model is busy".into())
    }
}

#[test]
fn a_long_conversation_stays_under_the_high_water_mark() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let s = Store::open(dir.path().join("c.db"))?.store;
    let c = s
        .create_conversation("long", None, &serde_json::json!({}))?
        .id;
    let config = PolicyConfig {
        summary_max_tokens: 80,
        ..PolicyConfig::for_context(1024)
    };
    let system_tokens = 40;
    let mut summarizer = Counting { calls: Vec::new() };
    for turn in 0..40 {
        s.append_message(
            &c,
            &NewMessage::complete(Role::User, format!("question {turn}"), Some(30 + turn % 7)),
        )?;
        let outcome = s.compact(&c, &config, system_tokens, &mut summarizer)?;
        assert!(outcome.overflow.is_none());
        assert!(
            outcome.prompt_tokens <= 768,
            "turn {turn}: {}",
            outcome.prompt_tokens
        );
        let parts = s.prompt_parts(&c)?;
        let last = parts
            .messages
            .last()
            .expect("the new message is in the prompt");
        assert_eq!(last.text, format!("question {turn}"));
        s.append_message(
            &c,
            &NewMessage::complete(Role::Assistant, format!("answer {turn}"), Some(60)),
        )?;
    }
    assert!(
        summarizer.calls.len() >= 5,
        "{} summaries",
        summarizer.calls.len()
    );
    assert!(
        summarizer
            .calls
            .iter()
            .any(|r| r.messages.is_empty() && r.earlier_summaries.len() >= 2),
        "summaries were merged at some point"
    );
    // every message is still in the database
    assert_eq!(s.messages(&c)?.len(), 80);
    Ok(())
}

#[test]
fn a_failing_summarizer_is_an_error_and_changes_nothing() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let s = Store::open(dir.path().join("c.db"))?.store;
    let c = s.create_conversation("x", None, &serde_json::json!({}))?.id;
    for i in 0..10 {
        s.append_message(
            &c,
            &NewMessage::complete(
                if i % 2 == 0 {
                    Role::User
                } else {
                    Role::Assistant
                },
                "x",
                Some(100),
            ),
        )?;
    }
    let err = s
        .compact(&c, &PolicyConfig::for_context(1024), 10, &mut Failing)
        .unwrap_err();
    assert_eq!(err.code(), "summarizer_failed");
    assert!(s.summaries(&c)?.is_empty());
    assert_eq!(s.prompt_parts(&c)?.messages.len(), 10);
    Ok(())
}
