//! Conversation memory end to end on the real model: resuming from a KV snapshot continues
//! exactly as an uninterrupted session; without a snapshot the conversation is prefilled again;
//! a long conversation at a small context keeps going through summaries, never losing the
//! system prompt or the newest message. The figures printed here are the measurements
//! (`cargo test --release -p companion-tests --test end_to_end -- conversations:: --nocapture`).

use std::sync::atomic::AtomicBool;
use std::time::Instant;

use anyhow::Result;
use chat::{ConversationManager, ManagerConfig, Resume, Turn, TurnEvent};
use companion_tests::spawn_engine;
use engine::{GenerateParams, SamplingParams};
use memory::Store;

fn greedy(max_tokens: usize) -> GenerateParams {
    GenerateParams {
        max_tokens,
        sampling: SamplingParams {
            temperature: 0.0,
            repetition_penalty: 1.1,
            ..SamplingParams::default()
        },
        ..GenerateParams::default()
    }
}

/// Send `text`; returns the turn and the seconds from `start` to the first streamed piece.
fn send_timed(
    m: &mut ConversationManager,
    text: &str,
    params: &GenerateParams,
    start: Instant,
) -> Result<(Turn, f64)> {
    let mut first = None;
    let turn = m.send(text, params, &AtomicBool::new(false), &mut |e| {
        if let TurnEvent::Text(_) = e {
            first.get_or_insert_with(|| start.elapsed().as_secs_f64());
        }
    })?;
    let ttft = first.unwrap_or_else(|| start.elapsed().as_secs_f64());
    Ok((turn, ttft))
}

/// A paragraph of about `words` words that differs with `seed`.
fn passage(seed: usize, words: usize) -> String {
    const WORDS: [&str; 16] = [
        "river", "lantern", "harvest", "mountain", "letter", "garden", "winter", "bridge",
        "market", "violin", "harbor", "meadow", "engine", "orchard", "compass", "station",
    ];
    (0..words)
        .map(|i| WORDS[(i * 7 + seed * 13 + i / 5) % WORDS.len()])
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn resume_from_a_snapshot_continues_exactly_and_faster_than_prefilling_again() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let engine = spawn_engine(4096);
    let store = Store::open(dir.path().join("c.db"))?.store;
    let mut m = ConversationManager::new(engine.clone(), store, ManagerConfig::for_engine(&engine));
    let id = m.create("long conversation")?;
    for turn in 0..4 {
        let text = format!(
            "Here are my notes, part {turn}: {}. What do they remind you of?",
            passage(turn, 330)
        );
        m.send(&text, &greedy(24), &AtomicBool::new(false), &mut |_| {})?;
    }
    let tokens = engine.session_tokens()?.len();
    assert!(tokens >= 1500, "the conversation holds {tokens} tokens");
    let key = m.snapshot_key()?;
    let snapshot = engine.snapshot()?;
    let next = "Thank you. Now summarize all my notes in one sentence.";

    // the reference: the same session, never closed
    let (live, _) = send_timed(&mut m, next, &greedy(32), Instant::now())?;
    let seq = live.user.seq;

    // the app restarts: a new manager on the same database, the engine's session empty, the
    // conversation as it was before `next`, with the snapshot taken then
    drop(m);
    let db = dir.path().join("c.db");
    let restart = |snapshot: Option<&[u8]>| -> Result<ConversationManager> {
        let store = Store::open(&db)?.store;
        store.truncate_messages(&id, seq)?;
        if let Some(bytes) = snapshot {
            store.save_snapshot(&id, &key, tokens as i64, bytes)?;
        }
        engine.reset_session()?;
        Ok(ConversationManager::new(
            engine.clone(),
            store,
            ManagerConfig::for_engine(&engine),
        ))
    };
    let mut m = restart(Some(&snapshot))?;
    let start = Instant::now();
    assert_eq!(m.open(&id)?, Resume::Snapshot { tokens });
    let (resumed, ttft_snapshot) = send_timed(&mut m, next, &greedy(32), start)?;
    assert_eq!(
        resumed.generation.ids, live.generation.ids,
        "a restored session continues exactly as the uninterrupted one"
    );
    assert!(resumed.generation.stats.reused_tokens >= tokens * 9 / 10);

    // no snapshot: the prompt is prefilled again from the stored messages
    drop(m);
    let mut m = restart(None)?;
    let start = Instant::now();
    let how = m.open(&id)?;
    assert!(
        matches!(how, Resume::Reprefill { tokens: t } if t >= 1500),
        "{how:?}"
    );
    let (reprefilled, ttft_reprefill) = send_timed(&mut m, next, &greedy(32), start)?;
    assert!(!reprefilled.generation.ids.is_empty());
    eprintln!(
        "resume of a {tokens}-token conversation: first token {:.0} ms after open from the snapshot, {:.0} ms from re-prefill",
        ttft_snapshot * 1e3,
        ttft_reprefill * 1e3
    );
    assert!(
        ttft_snapshot < ttft_reprefill,
        "the snapshot path is the fast one"
    );
    Ok(())
}

#[test]
fn forty_turns_at_a_1024_token_context_run_through_summaries() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let engine = spawn_engine(1024);
    let store = Store::open(dir.path().join("c.db"))?.store;
    let mut config = ManagerConfig::for_engine(&engine);
    config.system_prompt =
        Some("You are Companion, a helpful assistant. The user's name is Ada.".into());
    config.policy.summary_max_tokens = 96;
    let mut m = ConversationManager::new(engine.clone(), store, config);
    let id = m.create("forty turns")?;
    let params = greedy(48);
    let mut sizes = Vec::new();
    for turn in 0..40 {
        let text = format!(
            "Turn {turn}. {} Tell me something about it.",
            passage(turn, 25 + turn % 4 * 15)
        );
        let t = m.send(&text, &params, &AtomicBool::new(false), &mut |_| {})?;
        let prompt = t.generation.stats.prompt_tokens;
        sizes.push((prompt, t.summaries_made));
        assert!(prompt + 48 <= 1024, "turn {turn}: a {prompt}-token prompt");
        // the prompt starts with the system prompt and ends with the user's newest message
        let history = m.history()?;
        assert!(
            history[0].content.starts_with("You are Companion"),
            "turn {turn}"
        );
        let last_user = history
            .iter()
            .rev()
            .find(|c| c.role == engine::Role::User)
            .unwrap();
        assert_eq!(last_user.content, text, "turn {turn}");
    }
    let summaries = m.store().summaries(&id)?;
    assert!(!summaries.is_empty(), "summaries were written");
    assert_eq!(
        m.store().messages(&id)?.len(),
        80,
        "every message kept in L3"
    );
    eprintln!(
        "40 turns at context 1024: {} summaries written; prompt tokens per turn (summaries made before it): {}",
        summaries.len(),
        sizes
            .iter()
            .map(|(p, s)| if *s > 0 {
                format!("{p}(+{s})")
            } else {
                p.to_string()
            })
            .collect::<Vec<_>>()
            .join(" ")
    );
    Ok(())
}

#[test]
fn a_conversation_reopened_on_another_model_says_so_and_is_read_again() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("c.db");
    let manager = |engine: &engine::EngineHandle| -> Result<ConversationManager> {
        Ok(ConversationManager::new(
            engine.clone(),
            Store::open(&db)?.store,
            ManagerConfig::for_engine(engine),
        ))
    };
    let real = spawn_engine(1024);
    let mut m = manager(&real)?;
    let id = m.create("two models")?;
    m.send(
        "Hello there.",
        &greedy(4),
        &AtomicBool::new(false),
        &mut |_| {},
    )?;
    drop(m);
    real.reset_session()?;
    let how = manager(&real)?.open(&id)?;
    assert!(
        matches!(how, Resume::Snapshot { .. } | Resume::Reprefill { .. }),
        "the same model: {how:?}"
    );

    // another model (a small random-weight Gemma 3 of the family fixtures)
    let other = engine::EngineHandle::spawn(engine::EngineConfig {
        model_path: std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/gemma-family/gemma3-gqa.q8_0.gguf"),
        context: 1024,
        warm_up: false,
        ..engine::EngineConfig::default()
    })?;
    let mut m = manager(&other)?;
    let how = m.open(&id)?;
    assert!(
        matches!(how, Resume::OtherModel { tokens } if tokens > 0),
        "another model: {how:?}"
    );
    // a turn on it makes it the conversation's model
    m.send("And now?", &greedy(4), &AtomicBool::new(false), &mut |_| {})?;
    drop(m);
    other.reset_session()?;
    let how = manager(&other)?.open(&id)?;
    assert!(!matches!(how, Resume::OtherModel { .. }), "{how:?}");
    Ok(())
}
