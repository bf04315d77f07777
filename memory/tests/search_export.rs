//! Search (English and Chinese) and export/import.

use anyhow::Result;
use memory::{Error, MessageStatus, NewMessage, NewSummary, Role, Store};

fn store(dir: &tempfile::TempDir) -> Store {
    Store::open(dir.path().join("companion.db"))
        .expect("opens")
        .store
}

#[test]
fn search_finds_english_and_chinese_words_with_snippets() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let s = store(&dir);
    let a = s
        .create_conversation("Cooking", None, &serde_json::json!({}))?
        .id;
    let b = s
        .create_conversation("中文练习", None, &serde_json::json!({}))?
        .id;
    s.append_message(
        &a,
        &NewMessage::complete(
            Role::User,
            "How long should I boil pasta for a carbonara?",
            None,
        ),
    )?;
    s.append_message(
        &a,
        &NewMessage::complete(
            Role::Assistant,
            "Boiling takes about ten minutes; keep the water salted.",
            None,
        ),
    )?;
    s.append_message(
        &b,
        &NewMessage::complete(Role::User, "北京的天气怎么样？我明天要去长城。", None),
    )?;
    s.append_message(
        &b,
        &NewMessage::complete(Role::Assistant, "明天北京晴朗，适合去长城。", None),
    )?;

    let hits = s.search("carbonara", 10)?;
    assert_eq!(hits.len(), 1);
    assert_eq!(
        (hits[0].conversation_id.clone(), hits[0].seq),
        (a.clone(), Some(0))
    );
    let (x, y) = hits[0].highlights[0];
    assert_eq!(&hits[0].snippet[x..y], "carbonara");
    // stemming: "boil" finds "boil" and "Boiling"
    let boil = s.search("boil", 10)?;
    assert_eq!(boil.len(), 2, "{boil:?}");
    // prefix while typing
    assert_eq!(s.search("carbo", 10)?.len(), 1);
    // two-character Chinese words, inside sentences without spaces
    let hits = s.search("长城", 10)?;
    assert_eq!(hits.len(), 2);
    assert!(hits.iter().all(|h| h.conversation_id == b));
    let (x, y) = hits[0].highlights[0];
    assert_eq!(&hits[0].snippet[x..y], "长城");
    assert_eq!(s.search("天气", 10)?.len(), 1);
    // characters present but not adjacent do not match the word
    assert!(s.search("京长", 10)?.is_empty());
    // several terms must all match; titles are searched too
    assert_eq!(s.search("北京 晴朗", 10)?.len(), 1);
    let t = s.search("练习", 10)?;
    assert_eq!((t.len(), t[0].message_id), (1, None));
    // FTS syntax in user input is text, not an error
    assert!(s.search("\"AND OR NOT(", 10)?.is_empty());
    assert!(s.search("   ", 10)?.is_empty());
    Ok(())
}

#[test]
fn json_export_and_import_round_trip_exactly() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let s = store(&dir);
    let c = s.create_conversation(
        "Round trip ✓",
        Some("gemma"),
        &serde_json::json!({"temperature": 0.2, "system": "Be brief."}),
    )?;
    s.set_pinned(&c.id, true)?;
    s.append_message(
        &c.id,
        &NewMessage::complete(Role::User, "Hello\n\n```rust\nfn main() {}\n```", Some(12)),
    )?;
    s.append_message(
        &c.id,
        &NewMessage {
            role: Role::Assistant,
            text: "Hi — 你好".into(),
            token_count: Some(5),
            status: MessageStatus::Stopped,
            timings: Some(serde_json::json!({"ttft": 0.1})),
        },
    )?;
    s.add_summary(
        &c.id,
        &NewSummary {
            first_seq: 0,
            last_seq: 1,
            text: "greetings".into(),
            token_count: 2,
            model: "gemma".into(),
        },
    )?;
    let json = s.export_json(&c.id)?;

    let other_dir = tempfile::tempdir()?;
    let other = store(&other_dir);
    let id = other.import_json(&json, false)?;
    assert_eq!(id, c.id);
    assert_eq!(
        other.export_json(&id)?,
        json,
        "export → import → export is the identity"
    );
    assert_eq!(
        other.search("你好", 5)?.len(),
        1,
        "imported messages are searchable"
    );

    // the same id again is refused; as a copy it gets a new id
    assert!(matches!(
        other.import_json(&json, false),
        Err(Error::ConversationExists(_))
    ));
    let copy = other.import_json(&json, true)?;
    assert_ne!(copy, c.id);
    assert_eq!(other.messages(&copy)?.len(), 2);

    assert!(matches!(
        other.import_json("{\"format\":\"x\"}", false),
        Err(Error::InvalidExport(_))
    ));
    let wrong = json.replace("companion.conversation", "something.else");
    assert!(matches!(
        other.import_json(&wrong, true),
        Err(Error::InvalidExport(_))
    ));
    Ok(())
}

#[test]
fn markdown_export_reads_as_a_transcript() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let s = store(&dir);
    let c = s.create_conversation("Plans", Some("gemma"), &serde_json::json!({}))?;
    s.append_message(&c.id, &NewMessage::complete(Role::User, "What now?", None))?;
    let mut stopped = NewMessage::complete(Role::Assistant, "Let us", None);
    stopped.status = MessageStatus::Stopped;
    s.append_message(&c.id, &stopped)?;
    let md = s.export_markdown(&c.id)?;
    assert!(md.starts_with("# Plans\n"));
    assert!(md.contains("## You\n\nWhat now?\n"));
    assert!(md.contains("## Companion (stopped)\n\nLet us\n"));
    Ok(())
}
