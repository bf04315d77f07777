//! The store's public behaviour: opening, upgrading, refusing and recovering databases;
//! conversations and messages; streaming checkpoints; KV snapshot files.

use std::time::Duration;

use anyhow::Result;
use memory::{
    ConversationId, Error, MessageStatus, NewMessage, ReplyRecorder, Role, SnapshotKey, Store,
    StoreConfig,
};

fn open(dir: &tempfile::TempDir) -> Store {
    Store::open(dir.path().join("companion.db"))
        .expect("opens")
        .store
}

fn key(model: &str) -> SnapshotKey {
    SnapshotKey {
        model_sha256: model.into(),
        format_version: 1,
    }
}

#[test]
fn a_fresh_database_has_the_latest_schema_and_its_pragmas() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let store = open(&dir);
    let raw = rusqlite::Connection::open(store.path())?;
    let version: i64 = raw.pragma_query_value(None, "user_version", |r| r.get(0))?;
    assert_eq!(version, memory::store::schema::SCHEMA_VERSION);
    let mode: String = raw.pragma_query_value(None, "journal_mode", |r| r.get(0))?;
    assert_eq!(mode, "wal");
    assert_eq!(store.integrity_check()?, "ok");
    Ok(())
}

#[test]
fn a_version_1_database_is_upgraded_with_its_data_and_becomes_searchable() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("old.db");
    {
        let raw = rusqlite::Connection::open(&path)?;
        raw.execute_batch(include_str!("../fixtures/schema-v1.sql"))?;
    }
    let opened = Store::open(&path)?;
    assert!(opened.recovery.is_none());
    let store = opened.store;
    let list = store.list_conversations(0, 10)?;
    assert_eq!(list.len(), 2);
    assert_eq!(list[0].conversation.title, "Trip to Kyoto", "pinned first");
    assert!(list[0].conversation.pinned);
    let kyoto = list[0].conversation.id.clone();
    let messages = store.messages(&kyoto)?;
    assert_eq!(messages.len(), 4);
    assert_eq!(messages[3].status, MessageStatus::Stopped);
    assert_eq!(
        messages[1].timings,
        Some(serde_json::json!({"ttftSeconds": 0.05}))
    );
    assert_eq!(store.summaries(&kyoto)?.len(), 1);
    // the v2 step built the search index from the old rows
    let hits = store.search("maple", 10)?;
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].seq, Some(1));
    assert_eq!(store.search("公园", 10)?.len(), 1);
    assert_eq!(store.search("kyoto", 10)?.len(), 2, "title and message");
    let raw = rusqlite::Connection::open(&path)?;
    let version: i64 = raw.pragma_query_value(None, "user_version", |r| r.get(0))?;
    assert_eq!(version, memory::store::schema::SCHEMA_VERSION);
    Ok(())
}

#[test]
fn a_version_2_database_is_upgraded_and_its_writerless_abandoned_reply_stopped() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("old.db");
    {
        let raw = rusqlite::Connection::open(&path)?;
        raw.execute_batch(include_str!("../fixtures/schema-v2-abandoned-reply.sql"))?;
    }
    let store = Store::open(&path)?.store;
    let id = store.resolve_conversation("3a4b5c6d")?;
    let messages = store.messages(&id)?;
    assert_eq!(messages.len(), 2);
    assert_eq!(
        messages[1].status,
        MessageStatus::Stopped,
        "no writer holds it"
    );
    assert_eq!(messages[1].text, "Keepers trimmed the wicks every night");
    assert_eq!(store.search("wicks", 5)?.len(), 1, "indexed once stopped");
    let raw = rusqlite::Connection::open(&path)?;
    let version: i64 = raw.pragma_query_value(None, "user_version", |r| r.get(0))?;
    assert_eq!(version, memory::store::schema::SCHEMA_VERSION);
    Ok(())
}

#[test]
fn a_version_3_database_keeps_its_agent_data_and_its_writerless_reply_is_stopped() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("v3.db");
    {
        let raw = rusqlite::Connection::open(&path)?;
        raw.execute_batch(include_str!("../fixtures/schema-v3.sql"))?;
    }
    let store = Store::open(&path)?.store;
    let chinese = store.resolve_conversation("7d1e5b9a")?;
    let messages = store.messages(&chinese)?;
    assert_eq!(messages.len(), 2);
    assert_eq!(
        messages[1].status,
        MessageStatus::Stopped,
        "no writer holds it"
    );
    assert_eq!(messages[1].text, "好主意，公园里");
    assert_eq!(store.search_notes("ryokan", 10)?.len(), 1);
    assert_eq!(store.reminders(false, 10)?.len(), 1);
    assert_eq!(store.folder_grants()?.len(), 1);
    assert_eq!(
        store.folder_grants()?[0].bookmark,
        None,
        "v6: no bookmark before"
    );
    assert_eq!(store.reminders(false, 10)?[0].external_id, None);
    assert_eq!(store.tool_calls(None, 0, 10)?.len(), 1);
    assert_eq!(store.search("maple", 10)?.len(), 1);
    let raw = rusqlite::Connection::open(&path)?;
    let version: i64 = raw.pragma_query_value(None, "user_version", |r| r.get(0))?;
    assert_eq!(version, memory::store::schema::SCHEMA_VERSION);
    assert_eq!(store.integrity_check()?, "ok");
    Ok(())
}

#[test]
fn a_database_from_a_newer_companion_is_refused_and_left_untouched() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("new.db");
    {
        let raw = rusqlite::Connection::open(&path)?;
        raw.execute_batch("CREATE TABLE future (x); PRAGMA user_version = 99;")?;
    }
    let before = std::fs::read(&path)?;
    match Store::open(&path) {
        Err(e @ Error::SchemaTooNew { found: 99, .. }) => {
            assert_eq!(e.code(), "database_too_new");
            assert!(e.to_string().contains("left untouched"));
        }
        Err(other) => panic!("unexpected error {other}"),
        Ok(_) => panic!("a newer schema was opened"),
    }
    assert_eq!(std::fs::read(&path)?, before);
    assert!(!dir.path().join("new.db-wal").exists());
    Ok(())
}

#[test]
fn a_file_that_is_not_a_database_is_moved_aside_and_a_fresh_one_started() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("companion.db");
    let junk = b"this is not sqlite at all, just some bytes that a user put here ".repeat(100);
    std::fs::write(&path, &junk)?;
    let opened = Store::open(&path)?;
    let recovery = opened.recovery.expect("recovered");
    assert_eq!(
        std::fs::read(&recovery.moved_to)?,
        junk,
        "kept, not deleted"
    );
    assert!(
        recovery
            .moved_to
            .file_name()
            .unwrap()
            .to_string_lossy()
            .contains(".corrupt-")
    );
    assert!(recovery.message().contains("new, empty database"));
    let store = opened.store;
    assert!(store.list_conversations(0, 10)?.is_empty());
    store.create_conversation("works", None, &serde_json::json!({}))?;
    Ok(())
}

#[test]
fn a_damaged_database_is_moved_aside_too() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("companion.db");
    {
        let store = open(&dir);
        let c = store.create_conversation("soon damaged", None, &serde_json::json!({}))?;
        for i in 0..200 {
            store.append_message(
                &c.id,
                &NewMessage::complete(Role::User, format!("message {i} {}", "x".repeat(200)), None),
            )?;
        }
    }
    // keep the 100-byte header, overwrite the pages after the first with garbage
    let mut bytes = std::fs::read(&path)?;
    assert!(bytes.len() > 8192);
    for b in bytes[4096..].iter_mut() {
        *b = 0x5A;
    }
    std::fs::write(&path, &bytes)?;
    let opened = Store::open(&path)?;
    assert!(opened.recovery.is_some(), "damage detected at open");
    assert!(opened.store.list_conversations(0, 10)?.is_empty());
    Ok(())
}

#[test]
fn conversations_list_rename_pin_resolve_and_delete() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let store = open(&dir);
    let mut ids = Vec::new();
    for i in 0..5 {
        let c = store.create_conversation(
            &format!("chat {i}"),
            Some("m"),
            &serde_json::json!({"n": i}),
        )?;
        ids.push(c.id);
        std::thread::sleep(Duration::from_millis(3));
    }
    let titles = |list: Vec<memory::ConversationListItem>| {
        list.into_iter()
            .map(|c| c.conversation.title)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        titles(store.list_conversations(0, 2)?),
        ["chat 4", "chat 3"]
    );
    assert_eq!(
        titles(store.list_conversations(2, 2)?),
        ["chat 2", "chat 1"]
    );
    assert_eq!(titles(store.list_conversations(4, 2)?), ["chat 0"]);
    store.append_message(&ids[1], &NewMessage::complete(Role::User, "bump", Some(1)))?;
    store.set_pinned(&ids[0], true)?;
    assert_eq!(
        titles(store.list_conversations(0, 3)?),
        ["chat 0", "chat 1", "chat 4"]
    );
    store.rename_conversation(&ids[2], "renamed")?;
    assert_eq!(store.conversation(&ids[2])?.title, "renamed");
    assert_eq!(store.search("renamed", 5)?.len(), 1);
    assert_eq!(store.resolve_conversation(&ids[3].as_str()[..13])?, ids[3]);
    assert!(matches!(
        store.resolve_conversation("zzzz"),
        Err(Error::ConversationNotFound(_))
    ));
    // delete takes messages, summaries, search entries and the snapshot with it
    store.save_snapshot(&ids[1], &key("m"), 3, b"kv bytes")?;
    store.add_summary(
        &ids[1],
        &memory::NewSummary {
            first_seq: 0,
            last_seq: 0,
            text: "s".into(),
            token_count: 1,
            model: "m".into(),
        },
    )?;
    store.delete_conversation(&ids[1])?;
    assert!(matches!(
        store.conversation(&ids[1]),
        Err(Error::ConversationNotFound(_))
    ));
    assert!(store.search("bump", 5)?.is_empty());
    assert_eq!(store.snapshot_bytes()?, 0);
    let files = std::fs::read_dir(dir.path().join("companion.db.snapshots"))?.count();
    assert_eq!(files, 0);
    assert!(matches!(
        store.delete_conversation(&ids[1]),
        Err(Error::ConversationNotFound(_))
    ));
    Ok(())
}

#[test]
fn a_streaming_reply_is_checkpointed_and_survives_its_process() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("companion.db");
    let store = open(&dir);
    let c = store.create_conversation("t", None, &serde_json::json!({}))?;
    store.append_message(&c.id, &NewMessage::complete(Role::User, "hello", Some(1)))?;
    let mut reply = ReplyRecorder::begin(&store, &c.id)?.with_interval(Duration::from_millis(20));
    reply.push(&store, "Helsinki")?;
    std::thread::sleep(Duration::from_millis(25));
    reply.tick(&store)?;
    // another connection (another process) sees the checkpoint
    let raw = rusqlite::Connection::open(&path)?;
    let (text, status): (String, String) = raw.query_row(
        "SELECT text, status FROM messages WHERE id = ?1",
        [reply.id().0],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    assert_eq!((text.as_str(), status.as_str()), ("Helsinki", "streaming"));
    // the process dies here: nothing finishes the reply. Later it is found abandoned.
    let id = reply.id();
    drop(reply);
    raw.execute(
        "UPDATE messages SET updated_at = updated_at - 60000 WHERE id = ?1",
        [id.0],
    )?;
    drop(store);
    let store = open(&dir);
    let m = store.message(id)?;
    assert_eq!(
        (m.text.as_str(), m.status),
        ("Helsinki", MessageStatus::Stopped)
    );
    assert_eq!(
        store.search("helsinki", 5)?.len(),
        1,
        "indexed once finished"
    );
    Ok(())
}

/// A reply that has been quiet for a minute (a long prefill, a thermal pause) while its store
/// is alive is not stopped by another store opening the same database — another process such
/// as a document job or the CLI — and its writer's next checkpoint still succeeds. Once its
/// store is gone, the next open stops it. No clock decides either way.
#[test]
fn another_store_never_stops_a_live_reply_only_one_whose_writer_is_gone() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("companion.db");
    let writer = open(&dir);
    let c = writer.create_conversation("t", None, &serde_json::json!({}))?;
    let mut reply = ReplyRecorder::begin(&writer, &c.id)?.with_interval(Duration::ZERO);
    reply.push(&writer, "The keeper climbed")?;
    let raw = rusqlite::Connection::open(&path)?;
    raw.execute(
        "UPDATE messages SET updated_at = updated_at - 60000 WHERE id = ?1",
        [reply.id().0],
    )?;
    let other = open(&dir);
    assert_eq!(
        other.message(reply.id())?.status,
        MessageStatus::Streaming,
        "a live reply was stopped by another store"
    );
    drop(other);
    reply.push(&writer, " the stairs")?;
    let m = reply.finish(&writer, MessageStatus::Complete, None, None)?;
    assert_eq!(m.text, "The keeper climbed the stairs");

    // a writer that goes away mid-reply: its reply is stopped at the next open, at once
    let mut reply = ReplyRecorder::begin(&writer, &c.id)?.with_interval(Duration::ZERO);
    reply.push(&writer, "Then the storm")?;
    let id = reply.id();
    drop(reply);
    let bystander = open(&dir);
    assert_eq!(bystander.message(id)?.status, MessageStatus::Streaming);
    drop(writer);
    let after = open(&dir);
    let m = after.message(id)?;
    assert_eq!(
        (m.text.as_str(), m.status),
        ("Then the storm", MessageStatus::Stopped)
    );
    // the writers' folder keeps only the lock files of live stores
    drop((after, bystander));
    let store = open(&dir);
    let locks = std::fs::read_dir(dir.path().join("companion.db.writers"))?.count();
    assert_eq!(locks, 1, "only the open store's lock is left");
    drop(store);
    Ok(())
}

#[test]
fn a_finished_reply_is_committed_with_its_status_and_timings() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let store = open(&dir);
    let c = store.create_conversation("t", None, &serde_json::json!({}))?;
    let mut reply = ReplyRecorder::begin(&store, &c.id)?;
    for piece in ["The ", "answer ", "is 42."] {
        reply.push(&store, piece)?;
    }
    let timings = serde_json::json!({"decodeTokensPerSecond": 50.0});
    let m = reply.finish(&store, MessageStatus::Complete, Some(6), Some(&timings))?;
    assert_eq!(m.text, "The answer is 42.");
    assert_eq!(m.token_count, Some(6));
    assert_eq!(m.timings, Some(timings));
    assert_eq!(store.messages(&c.id)?.len(), 1);
    // editing: drop from a position on
    store.append_message(&c.id, &NewMessage::complete(Role::User, "more", None))?;
    store.truncate_messages(&c.id, 1)?;
    assert_eq!(store.messages(&c.id)?.len(), 1);
    assert!(store.search("more", 5)?.is_empty());
    Ok(())
}

#[test]
fn snapshots_are_replaced_invalidated_and_pruned_least_recently_used() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let mut config = StoreConfig::new(dir.path().join("companion.db"));
    config.snapshot_budget_bytes = 2500;
    let store = Store::open_with(config)?.store;
    let new = |t: &str| -> Result<ConversationId> {
        Ok(store
            .create_conversation(t, None, &serde_json::json!({}))?
            .id)
    };
    let (a, b, c) = (new("a")?, new("b")?, new("c")?);
    assert!(store.save_snapshot(&a, &key("m1"), 10, &[1u8; 1000])?);
    assert!(
        store.save_snapshot(&a, &key("m1"), 12, &[2u8; 1000])?,
        "replaces"
    );
    assert_eq!(store.snapshot_bytes()?, 1000);
    std::thread::sleep(Duration::from_millis(3));
    assert!(store.save_snapshot(&b, &key("m1"), 10, &[3u8; 1000])?);
    std::thread::sleep(Duration::from_millis(3));
    // a is used: b becomes the least recently used
    assert_eq!(store.load_snapshot(&a, &key("m1"))?, Some(vec![2u8; 1000]));
    std::thread::sleep(Duration::from_millis(3));
    assert!(store.save_snapshot(&c, &key("m1"), 10, &[4u8; 1000])?);
    assert!(store.snapshot_info(&b)?.is_none(), "b pruned");
    assert!(store.snapshot_info(&a)?.is_some() && store.snapshot_info(&c)?.is_some());
    assert!(
        !store.save_snapshot(&c, &key("m1"), 10, &[5u8; 3000])?,
        "over budget alone"
    );
    assert!(store.snapshot_info(&c)?.is_none());
    // another model: dropped on load, or all at once
    assert_eq!(store.load_snapshot(&a, &key("m2"))?, None);
    assert!(store.snapshot_info(&a)?.is_none());
    store.save_snapshot(&a, &key("m1"), 10, &[1u8; 10])?;
    store.save_snapshot(&b, &key("m2"), 10, &[1u8; 10])?;
    assert_eq!(store.invalidate_snapshots(&key("m2"))?, 1);
    assert!(store.snapshot_info(&b)?.is_some());
    let files: Vec<_> = std::fs::read_dir(dir.path().join("companion.db.snapshots"))?.collect();
    assert_eq!(files.len(), 1, "no file left behind");
    Ok(())
}

#[test]
fn orphan_snapshot_files_are_swept_and_a_missing_file_is_forgotten() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let snapdir = dir.path().join("companion.db.snapshots");
    let a = {
        let store = open(&dir);
        let a = store
            .create_conversation("a", None, &serde_json::json!({}))?
            .id;
        store.save_snapshot(&a, &key("m"), 1, b"abc")?;
        a
    };
    std::fs::write(snapdir.join("left-by-a-crash.kv.tmp"), b"partial")?;
    let store = open(&dir);
    assert_eq!(std::fs::read_dir(&snapdir)?.count(), 1);
    for f in std::fs::read_dir(&snapdir)? {
        std::fs::remove_file(f?.path())?;
    }
    assert_eq!(store.load_snapshot(&a, &key("m"))?, None);
    assert!(store.snapshot_info(&a)?.is_none());
    Ok(())
}

/// Processes starting together on a fresh database (the app and a CLI command): each upgrade
/// step runs once, under the write lock, and every one of them opens the database.
#[test]
fn stores_opening_a_fresh_database_at_once_all_open_it() -> Result<()> {
    for _ in 0..5 {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("companion.db");
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(4));
        let opened: Vec<_> = (0..4)
            .map(|_| {
                let (path, barrier) = (path.clone(), barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    Store::open(&path).map(|o| o.store.integrity_check())
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|t| t.join().expect("no panic"))
            .collect();
        for result in opened {
            assert_eq!(result?.map_err(anyhow::Error::from)?, "ok");
        }
    }
    Ok(())
}
