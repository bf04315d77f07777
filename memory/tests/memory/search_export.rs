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
            images: Vec::new(),
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
    // pictures came later: an export without any is the JSON it was before them
    assert!(!json.contains("\"images\""), "{json}");

    let other_dir = tempfile::tempdir()?;
    let other = store(&other_dir);
    let imported = other.import_json(&json, false)?;
    assert_eq!(imported.replaced_id, None);
    let id = imported.id;
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
    let copy = other.import_json(&json, true)?.id;
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

/// An export is a file from anywhere, and a conversation's id becomes part of its KV snapshot's
/// file name: an id that is not a UUID (`../../x`, an absolute path, anything else) is replaced
/// on import, and said so; no snapshot is ever written outside the snapshot folder, even for a
/// conversation whose bad id was already in the database, and a row naming a file elsewhere
/// removes nothing there.
#[test]
fn an_unsafe_imported_id_is_replaced_and_no_snapshot_leaves_its_folder() -> Result<()> {
    let key = memory::SnapshotKey {
        model_sha256: "m".into(),
        format_version: 1,
    };
    let root = tempfile::tempdir()?;
    let data = root.path().join("a/b");
    std::fs::create_dir_all(&data)?;
    let s = Store::open(data.join("companion.db"))?.store;
    let c = s.create_conversation("hostile", None, &serde_json::json!({}))?;
    s.append_message(&c.id, &NewMessage::complete(Role::User, "hi", None))?;
    let json = s.export_json(&c.id)?;
    s.delete_conversation(&c.id)?;
    let outside = || -> Vec<String> {
        let mut found = Vec::new();
        let mut dirs = vec![root.path().to_path_buf()];
        while let Some(d) = dirs.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    dirs.push(p);
                } else if !p.starts_with(&data) {
                    found.push(p.display().to_string());
                }
            }
        }
        found
    };
    let absolute = root.path().join("abs").display().to_string();
    for bad in [
        "../../escaped",
        absolute.as_str(),
        "aéééééééé",
        "",
        "0F6C3C1E-2D0A-4C58-9A51-3B7C1C0E7A11",
    ] {
        let hostile = json.replace(c.id.as_str(), bad);
        let imported = match s.import_json(&hostile, false) {
            Ok(i) => i,
            Err(Error::InvalidExport(_)) if bad.is_empty() => continue,
            Err(e) => return Err(e.into()),
        };
        assert_eq!(imported.replaced_id.as_deref(), Some(bad), "{bad:?} kept");
        assert!(imported.id.is_valid());
        assert_eq!(s.messages(&imported.id)?.len(), 1);
        assert!(s.save_snapshot(&imported.id, &key, 1, b"kv")?);
        assert_eq!(s.load_snapshot(&imported.id, &key)?, Some(b"kv".to_vec()));
    }
    assert_eq!(outside(), Vec::<String>::new());

    // defence in depth: a bad id or a bad file name already in the database (an older
    // Companion imported it) reaches no path outside the folder
    let raw = rusqlite::Connection::open(data.join("companion.db"))?;
    raw.execute(
        "INSERT INTO conversations (id, title, created_at, updated_at) VALUES ('../../old', 't', 0, 0)",
        [],
    )?;
    let old = memory::ConversationId("../../old".into());
    let err = s.save_snapshot(&old, &key, 1, b"kv").unwrap_err();
    assert_eq!(err.code(), "invalid_argument", "{err}");
    let victim = root.path().join("a/victim.kv");
    std::fs::write(&victim, b"keep me")?;
    raw.execute(
        "INSERT INTO kv_snapshots VALUES ('../../old', 'm', 1, 1, 7, '../../victim.kv', 0, 0)",
        [],
    )?;
    assert_eq!(
        s.load_snapshot(&old, &key)?,
        None,
        "not read through the row"
    );
    s.delete_conversation(&old)?;
    assert_eq!(
        std::fs::read(&victim)?,
        b"keep me",
        "not removed through the row"
    );
    std::fs::remove_file(&victim)?;
    assert_eq!(outside(), Vec::<String>::new());
    Ok(())
}
