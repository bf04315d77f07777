//! The local agent's tables (schema step 3): notes and their search, reminders, granted
//! folders, the tool-call audit log, and the upgrade of a version-2 database to them.

use anyhow::Result;
use memory::{ConversationId, GrantMode, NewToolCall, Store, ToolOutcome};

fn open(dir: &tempfile::TempDir) -> Store {
    Store::open(dir.path().join("companion.db"))
        .expect("opens")
        .store
}

#[test]
fn a_version_2_database_is_upgraded_with_its_data_and_gets_the_agent_tables() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("v2.db");
    {
        let raw = rusqlite::Connection::open(&path)?;
        raw.execute_batch(include_str!("../fixtures/schema-v2.sql"))?;
    }
    let store = Store::open(&path)?.store;
    // the old data is all there
    assert_eq!(store.list_conversations(0, 10)?.len(), 2);
    assert_eq!(store.search("maple", 10)?.len(), 1);
    assert_eq!(store.search("公园", 10)?.len(), 1);
    let docs = store.documents()?;
    assert_eq!(docs.len(), 1);
    assert_eq!(store.chunk_summaries(docs[0].id)?.len(), 2);
    // and the new tables work
    assert!(store.notes(0, 10)?.is_empty());
    store.add_note("Kyoto", "book the ryokan", None)?;
    assert_eq!(store.search_notes("ryokan", 10)?.len(), 1);
    store.add_reminder("call the ryokan", 1_900_000_000_000, None)?;
    assert_eq!(store.reminders(false, 10)?.len(), 1);
    let raw = rusqlite::Connection::open(&path)?;
    let version: i64 = raw.pragma_query_value(None, "user_version", |r| r.get(0))?;
    assert_eq!(version, memory::store::schema::SCHEMA_VERSION);
    assert_eq!(store.integrity_check()?, "ok");
    Ok(())
}

#[test]
fn notes_are_kept_listed_newest_first_and_searched_by_every_word() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let store = open(&dir);
    let conversation = ConversationId("c-1".into());
    let a = store.add_note(
        "Garden",
        "Plant the tomatoes in May, basil beside them.",
        None,
    )?;
    std::thread::sleep(std::time::Duration::from_millis(5));
    let b = store.add_note(
        "旅行计划",
        "明天去公园散步，然后买菜。",
        Some(&conversation),
    )?;
    let listed = store.notes(0, 10)?;
    assert_eq!(
        listed.iter().map(|n| n.id).collect::<Vec<_>>(),
        vec![b.id, a.id]
    );
    assert_eq!(listed[0].conversation_id, Some(conversation));
    assert_eq!(store.note_count()?, 2);

    let hits = store.search_notes("TOMATOES basil", 10)?;
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].note.id, a.id);
    let (s, e) = hits[0].highlights[0];
    assert_eq!(hits[0].snippet[s..e].to_lowercase(), "tomatoes");
    // every word must match: one that is absent excludes the note
    assert!(store.search_notes("tomatoes potatoes", 10)?.is_empty());
    // the title is searched too, and CJK by characters in order
    assert_eq!(store.search_notes("garden", 10)?.len(), 1);
    assert_eq!(store.search_notes("公园", 10)?[0].note.id, b.id);
    assert!(store.search_notes("园公", 10)?.is_empty());
    assert!(store.search_notes("  ?! ", 10)?.is_empty());

    assert!(store.delete_note(a.id)?);
    assert!(!store.delete_note(a.id)?);
    assert!(store.search_notes("tomatoes", 10)?.is_empty());
    assert!(store.note(a.id)?.is_none());
    Ok(())
}

#[test]
fn a_note_without_a_title_or_too_long_is_refused() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let store = open(&dir);
    let e = store.add_note("   ", "text", None).unwrap_err();
    assert_eq!(e.code(), "invalid_argument");
    let long = "x".repeat(memory::MAX_NOTE_TEXT_BYTES + 1);
    assert!(store.add_note("t", &long, None).is_err());
    assert_eq!(store.note_count()?, 0);
    Ok(())
}

#[test]
fn reminders_fall_due_once_and_can_be_done() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let store = open(&dir);
    let later = store.add_reminder("water the plants", 2_000, None)?;
    assert_eq!(store.next_reminder_due()?, Some(2_000));
    let soon = store.add_reminder("call mum", 1_000, None)?;
    assert_eq!(store.next_reminder_due()?, Some(1_000));
    assert_eq!(
        store
            .reminders(false, 10)?
            .iter()
            .map(|r| r.id)
            .collect::<Vec<_>>(),
        vec![soon.id, later.id],
        "soonest first"
    );
    assert_eq!(store.due_reminders(1_500)?, vec![soon.clone()]);
    store.mark_reminder_notified(soon.id)?;
    assert!(
        store.due_reminders(1_500)?.is_empty(),
        "shown once, not again"
    );
    assert_eq!(
        store.next_reminder_due()?,
        Some(2_000),
        "a shown one is not waited for"
    );
    assert_eq!(store.due_reminders(2_500)?.len(), 1);
    store.complete_reminder(later.id)?;
    assert!(store.due_reminders(2_500)?.is_empty());
    assert_eq!(store.next_reminder_due()?, None, "nothing left to wait for");
    assert_eq!(store.reminders(false, 10)?.len(), 1);
    assert_eq!(store.reminders(true, 10)?.len(), 2);
    assert!(store.reminder(later.id)?.and_then(|r| r.done_at).is_some());
    assert!(store.add_reminder(" ", 1, None).is_err());
    assert!(store.complete_reminder(memory::ReminderId(999)).is_err());
    assert!(store.delete_reminder(later.id)?);
    Ok(())
}

#[test]
fn granted_folders_are_kept_with_their_mode_and_revoked() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let store = open(&dir);
    store.grant_folder("/home/u/Documents", GrantMode::Read)?;
    store.grant_folder("/home/u/Projects", GrantMode::Write)?;
    // granting again changes the mode, not the order
    store.grant_folder("/home/u/Documents", GrantMode::Write)?;
    let grants = store.folder_grants()?;
    assert_eq!(grants.len(), 2);
    assert_eq!(grants[0].path, "/home/u/Documents");
    assert_eq!(grants[0].mode, GrantMode::Write);
    assert!(store.grant_folder("relative/dir", GrantMode::Read).is_err());
    assert!(store.revoke_folder("/home/u/Documents")?);
    assert!(!store.revoke_folder("/home/u/Documents")?);
    assert_eq!(store.folder_grants()?.len(), 1);
    Ok(())
}

#[test]
fn a_bookmarked_grant_keeps_its_bookmark_until_ios_refreshes_it() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let store = open(&dir);
    let path = "/private/var/mobile/Library/Mobile Documents/Garden";
    store.grant_folder_with(path, GrantMode::Read, Some(b"bookmark-1"))?;
    assert_eq!(
        store.folder_grants()?[0].bookmark.as_deref(),
        Some(&b"bookmark-1"[..])
    );
    // a mode change without a new bookmark keeps the one there
    store.grant_folder(path, GrantMode::Write)?;
    let g = &store.folder_grants()?[0];
    assert_eq!(
        (g.mode, g.bookmark.as_deref()),
        (GrantMode::Write, Some(&b"bookmark-1"[..]))
    );
    // iOS said it was stale and made another
    assert!(store.refresh_grant_bookmark(path, b"bookmark-2")?);
    assert_eq!(
        store.folder_grants()?[0].bookmark.as_deref(),
        Some(&b"bookmark-2"[..])
    );
    assert!(!store.refresh_grant_bookmark("/elsewhere", b"x")?);
    // the bookmark never reaches the webview
    let json = serde_json::to_value(&store.folder_grants()?[0])?;
    assert!(json.get("bookmark").is_none(), "{json}");

    let r = store.add_reminder("call mum", 1_000, None)?;
    assert_eq!(store.reminder(r.id)?.unwrap().external_id, None);
    store.set_reminder_external_id(r.id, "EK-1")?;
    assert_eq!(
        store.reminder(r.id)?.unwrap().external_id.as_deref(),
        Some("EK-1")
    );
    Ok(())
}

#[test]
fn tool_calls_are_recorded_with_their_exact_arguments_newest_first() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let store = open(&dir);
    let c = ConversationId("conv".into());
    let args = serde_json::json!({"path": "docs/a.txt", "offset": 0});
    store.record_tool_call(&NewToolCall {
        conversation_id: Some(c.clone()),
        tool: "read_file".into(),
        arguments: args.clone(),
        outcome: ToolOutcome::Ok,
        error_code: None,
        duration_ms: 3,
        at: Some(1_000),
    })?;
    store.record_tool_call(&NewToolCall {
        conversation_id: None,
        tool: "add_note".into(),
        arguments: serde_json::json!({"title": "t", "text": "x"}),
        outcome: ToolOutcome::Denied,
        error_code: Some("denied".into()),
        duration_ms: 0,
        at: Some(2_000),
    })?;
    let all = store.tool_calls(None, 0, 10)?;
    assert_eq!(all.len(), 2);
    assert_eq!(all[0].tool, "add_note");
    assert_eq!(all[0].outcome, ToolOutcome::Denied);
    assert_eq!(all[0].error_code.as_deref(), Some("denied"));
    assert_eq!(all[1].arguments, args);
    let of_c = store.tool_calls(Some(&c), 0, 10)?;
    assert_eq!(of_c.len(), 1);
    assert_eq!(of_c[0].duration_ms, 3);
    assert_eq!(of_c[0].created_at, 1_000);
    assert_eq!(store.clear_tool_calls()?, 2);
    assert!(store.tool_calls(None, 0, 10)?.is_empty());
    Ok(())
}
