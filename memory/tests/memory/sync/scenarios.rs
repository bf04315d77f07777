//! Sync scenarios, each a point of the design: what syncs, deletions against edits, a file
//! from a newer Companion, a kill at any point of a round, compaction and a late joiner.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use memory::sync::folder::{FolderIo, OsFolder};
use memory::{NewSummary, NewToolCall, Role, SyncOptions, ToolOutcome};

use super::{Device, Rng, Visible, carry, settle, texts};

fn two(dir: &Path) -> (Device, Device) {
    (Device::new(dir, "mac"), Device::new(dir, "iphone"))
}

#[test]
fn everything_that_syncs_arrives_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let (mac, phone) = two(dir.path());
    let s = &mac.store;
    let c = s
        .create_conversation(
            "Trip",
            Some("gemma"),
            &serde_json::json!({"temperature": 0.5}),
        )
        .unwrap();
    mac.append(&c.id, Role::User, "Where should we go in 日本?");
    mac.reply(&c.id, "Kyoto in autumn.", false);
    mac.reply(&c.id, "And Nara", true);
    s.rename_conversation(&c.id, "Trip to Japan").unwrap();
    s.set_pinned(&c.id, true).unwrap();
    s.add_summary(
        &c.id,
        &NewSummary {
            first_seq: 0,
            last_seq: 1,
            text: "they plan a trip".into(),
            token_count: 4,
            model: "gemma".into(),
        },
    )
    .unwrap();
    s.add_note("Packing", "umbrella", Some(&c.id)).unwrap();
    let r = s
        .add_reminder("book the train", 1_900_000_000_000, None)
        .unwrap();
    s.complete_reminder(r.id).unwrap();
    s.record_tool_call(&NewToolCall {
        conversation_id: Some(c.id.clone()),
        tool: "list_files".into(),
        arguments: serde_json::json!({"path": "."}),
        outcome: ToolOutcome::Ok,
        error_code: None,
        duration_ms: 3,
        at: None,
    })
    .unwrap();
    // stays on the Mac: its KV snapshot and its folder grants
    s.grant_folder("/Users/me/Documents", memory::GrantMode::Read)
        .unwrap();

    let report = mac.round();
    assert_eq!(report.wrote.len(), 1, "{report:?}");
    carry(&[&mac, &phone], &mut Rng(1), false);
    let report = phone.round();
    assert_eq!(report.applied_files.len(), 1, "{report:?}");
    assert!(report.notices.is_empty());
    assert_eq!(mac.visible(), phone.visible());
    assert!(phone.store.folder_grants().unwrap().is_empty());
    assert_eq!(phone.store.search("Kyoto", 5).unwrap().len(), 1);
    assert_eq!(phone.store.search_notes("umbrella", 5).unwrap().len(), 1);

    // a second round with nothing new writes nothing and applies nothing, and leaves the
    // folder as it was (or the other device's watch would take it for news, and so on)
    let own = mac
        .folder
        .join("companion-sync")
        .join(mac.store.sync_device().unwrap());
    let listing = || {
        std::fs::read_dir(&own)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (e.file_name(), e.metadata().unwrap().modified().unwrap())
            })
            .collect::<std::collections::BTreeMap<_, _>>()
    };
    let before = listing();
    assert!(mac.round().wrote.is_empty());
    assert!(phone.round().applied_files.is_empty());
    let after = listing();
    assert_eq!(before, after);
    // the phone continues the conversation; the Mac sees it in order
    phone.append(&c.id, Role::User, "What about Osaka?");
    phone.round();
    carry(&[&mac, &phone], &mut Rng(1), false);
    mac.round();
    assert_eq!(mac.visible(), phone.visible());
    let texts = texts(&mac, &c.id);
    assert_eq!(
        texts,
        [
            "Where should we go in 日本?",
            "Kyoto in autumn.",
            "And Nara",
            "What about Osaka?"
        ]
    );
    let status = phone.store.sync_status().unwrap();
    assert_eq!(status.unsent, 0);
    assert_eq!(status.peers.len(), 1);
}

#[test]
fn concurrent_edits_resolve_by_the_later_stamp_the_same_everywhere() {
    let dir = tempfile::tempdir().unwrap();
    let (mac, phone) = two(dir.path());
    let c = mac.conversation("one");
    settle(&[&mac, &phone], &mut Rng(2));
    // both rename and both append while apart; the phone's clock runs an hour ahead
    phone.skew_clock(3_600_000);
    mac.store
        .rename_conversation(&c.id, "from the mac")
        .unwrap();
    phone
        .store
        .rename_conversation(&c.id, "from the phone")
        .unwrap();
    mac.store.set_pinned(&c.id, true).unwrap();
    mac.append(&c.id, Role::User, "mac says hi");
    phone.append(&c.id, Role::User, "phone says hi");
    settle(&[&mac, &phone], &mut Rng(2));
    assert_eq!(mac.visible(), phone.visible());
    let conversation = mac.store.conversation(&c.id).unwrap();
    // the phone's rename has the later stamp; the pin was made only on the Mac and stays
    assert_eq!(conversation.title, "from the phone");
    assert!(conversation.pinned);
    assert_eq!(mac.store.messages(&c.id).unwrap().len(), 2);
}

#[test]
fn a_deleted_conversation_takes_its_messages_and_keeps_out_older_edits() {
    let dir = tempfile::tempdir().unwrap();
    let (mac, phone) = two(dir.path());
    let c = mac.conversation("doomed");
    mac.append(&c.id, Role::User, "first");
    settle(&[&mac, &phone], &mut Rng(3));
    // the phone appends a reply (an edit of the conversation) before it hears of the deletion;
    // the Mac deletes later (its clock is ahead), so the deletion wins over the phone's change
    mac.skew_clock(60_000);
    phone.append(&c.id, Role::Assistant, "an answer the phone wrote");
    phone.round();
    mac.store.delete_conversation(&c.id).unwrap();
    // one tombstone, the conversation's: its messages go with it without one each
    let conn = rusqlite::Connection::open(&mac.db).unwrap();
    let tombstones: Vec<String> = conn
        .prepare("SELECT kind FROM sync_clocks WHERE field = '~'")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(tombstones, ["conversation"]);
    mac.round();
    carry(&[&mac, &phone], &mut Rng(3), false);
    phone.round();
    mac.round();
    settle(&[&mac, &phone], &mut Rng(3));
    assert_eq!(mac.visible(), phone.visible());
    assert!(phone.store.conversation(&c.id).is_err());
    assert!(phone.store.search("answer", 5).unwrap().is_empty());

    // a deletion loses to a later change: the phone's rename after hearing of it brings the
    // conversation back, without the messages the deletion took
    let d = mac.conversation("kept");
    mac.append(&d.id, Role::User, "old message");
    settle(&[&mac, &phone], &mut Rng(3));
    mac.store.delete_conversation(&d.id).unwrap();
    phone.skew_clock(3_600_000);
    phone
        .store
        .rename_conversation(&d.id, "renamed later")
        .unwrap();
    phone.append(&d.id, Role::User, "new message");
    settle(&[&mac, &phone], &mut Rng(3));
    assert_eq!(mac.visible(), phone.visible());
    let kept = mac.store.conversation(&d.id).unwrap();
    assert_eq!(kept.title, "renamed later");
    let texts = texts(&mac, &d.id);
    assert_eq!(texts, ["new message"]);
}

#[test]
fn a_regenerated_reply_replaces_the_old_one_everywhere() {
    let dir = tempfile::tempdir().unwrap();
    let (mac, phone) = two(dir.path());
    let c = mac.conversation("regen");
    mac.append(&c.id, Role::User, "question");
    mac.reply(&c.id, "first answer", false);
    settle(&[&mac, &phone], &mut Rng(4));
    mac.store.truncate_messages(&c.id, 1).unwrap();
    mac.reply(&c.id, "second answer", false);
    settle(&[&mac, &phone], &mut Rng(4));
    assert_eq!(mac.visible(), phone.visible());
    let texts = texts(&phone, &c.id);
    assert_eq!(texts, ["question", "second answer"]);
}

#[test]
fn a_file_from_a_newer_companion_waits_for_an_update() {
    let dir = tempfile::tempdir().unwrap();
    let (mac, phone) = two(dir.path());
    mac.store.add_note("n", "from the future", None).unwrap();
    mac.round();
    // rewrite the Mac's segment as a newer format would write it
    let mac_id = mac.store.sync_device().unwrap();
    let seg = mac
        .folder
        .join("companion-sync")
        .join(&mac_id)
        .join("seg-00000001.jsonl");
    let text = std::fs::read_to_string(&seg).unwrap();
    std::fs::write(
        &seg,
        text.replacen("\"companion_sync\":1", "\"companion_sync\":2", 1),
    )
    .unwrap();
    carry(&[&mac, &phone], &mut Rng(5), false);
    let report = phone.round();
    assert_eq!(report.notices.len(), 1);
    assert_eq!(report.notices[0].code, "newer_format");
    assert!(
        report.notices[0].message.contains("updated"),
        "{}",
        report.notices[0].message
    );
    assert_eq!(phone.store.note_count().unwrap(), 0);
    assert!(phone.store.sync_status().unwrap().last_error.is_some());
    // the same Companion, updated: it reads format 2 (this file's records are format 1's)
    let upgraded = SyncOptions {
        newest_format: 2,
        ..SyncOptions::default()
    };
    let report = phone
        .store
        .sync_round_with(&phone.folder, &upgraded)
        .unwrap();
    assert!(report.notices.is_empty(), "{:?}", report.notices);
    assert_eq!(phone.store.note_count().unwrap(), 1);
}

#[test]
fn a_damaged_or_hostile_file_is_skipped_and_nothing_is_half_applied() {
    let dir = tempfile::tempdir().unwrap();
    let (mac, phone) = two(dir.path());
    let c = mac.conversation("c");
    mac.append(&c.id, Role::User, "hello");
    mac.round();
    carry(&[&mac, &phone], &mut Rng(6), false);
    let mac_id = mac.store.sync_device().unwrap();
    let dest = phone.folder.join("companion-sync").join(&mac_id);
    let seg = dest.join("seg-00000001.jsonl");
    let good = std::fs::read(&seg).unwrap();
    // half of it
    std::fs::write(&seg, &good[..good.len() / 2]).unwrap();
    let report = phone.round();
    assert_eq!(report.notices[0].code, "damaged");
    assert!(phone.store.list_conversations(0, 10).unwrap().is_empty());
    // well-formed, checksummed, but with a record that is not ours: refused whole
    let hostile_body = format!(
        "{}\n{}\n",
        serde_json::json!({"kind": "note", "uid": "abc", "conversation": null, "created_at": 1,
            "updated_at": 1, "created": {"hlc": 5, "device": mac_id},
            "title": {"value": "t", "at": {"hlc": 5, "device": mac_id}},
            "text": {"value": "x", "at": {"hlc": 5, "device": mac_id}}}),
        serde_json::json!({"kind": "message", "uid": "m1", "conversation": c.id.as_str(),
            "role": "<start_of_turn>", "created_at": 1, "created": {"hlc": 5, "device": mac_id},
            "body": {"value": {"text": "x", "status": "complete", "updated_at": 1},
                     "at": {"hlc": 5, "device": mac_id}}}),
    );
    use sha2::Digest;
    let sum: String = sha2::Sha256::digest(hostile_body.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let header = serde_json::json!({"companion_sync": 1, "device": mac_id, "segment": 7,
        "records": 2, "sha256": sum});
    std::fs::write(
        dest.join("seg-00000007.jsonl"),
        format!("{header}\n{hostile_body}"),
    )
    .unwrap();
    let report = phone.round();
    let invalid: Vec<_> = report
        .notices
        .iter()
        .filter(|n| n.code == "invalid")
        .collect();
    assert_eq!(invalid.len(), 1, "{:?}", report.notices);
    assert!(
        invalid[0].message.contains("role"),
        "{}",
        invalid[0].message
    );
    assert_eq!(
        phone.store.note_count().unwrap(),
        0,
        "the file's first record was applied"
    );
    // larger than a sync file can be: not even read
    let small = SyncOptions {
        max_file_bytes: 64,
        ..SyncOptions::default()
    };
    let report = phone.store.sync_round_with(&phone.folder, &small).unwrap();
    assert!(
        report.notices.iter().any(|n| n.code == "too_large"),
        "{:?}",
        report.notices
    );
    // the whole file arrives later: applied
    std::fs::write(&seg, &good).unwrap();
    std::fs::remove_file(dest.join("seg-00000007.jsonl")).unwrap();
    let report = phone.round();
    assert!(report.notices.is_empty(), "{:?}", report.notices);
    assert_eq!(phone.store.messages(&c.id).unwrap().len(), 1);
}

/// Fails every folder operation from the `fail_at`-th on: a process killed at that point.
struct KilledAt {
    ops: AtomicUsize,
    fail_at: usize,
}

impl KilledAt {
    fn step(&self) -> std::io::Result<()> {
        if self.ops.fetch_add(1, Ordering::SeqCst) >= self.fail_at {
            return Err(std::io::Error::other("killed"));
        }
        Ok(())
    }
}

impl FolderIo for KilledAt {
    fn list(&self, dir: &Path) -> std::io::Result<Vec<String>> {
        self.step()?;
        OsFolder.list(dir)
    }
    fn read(&self, path: &Path) -> std::io::Result<Vec<u8>> {
        self.step()?;
        OsFolder.read(path)
    }
    fn size(&self, path: &Path) -> std::io::Result<u64> {
        self.step()?;
        OsFolder.size(path)
    }
    fn write_atomic(&self, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
        self.step()?;
        OsFolder.write_atomic(path, bytes)
    }
    fn remove(&self, path: &Path) -> std::io::Result<()> {
        self.step()?;
        OsFolder.remove(path)
    }
}

#[test]
fn a_kill_at_any_point_of_a_round_loses_nothing() {
    let mut fail_at = 0;
    loop {
        let dir = tempfile::tempdir().unwrap();
        let (mac, phone) = two(dir.path());
        let c = mac.conversation("c");
        mac.append(&c.id, Role::User, "one");
        phone.store.add_note("phone note", "text", None).unwrap();
        mac.round();
        phone.round();
        carry(&[&mac, &phone], &mut Rng(7), false);
        mac.append(&c.id, Role::User, "two");
        // compaction on every round, so that it is among the points a kill can hit
        let opts = SyncOptions {
            io: Arc::new(KilledAt {
                ops: AtomicUsize::new(0),
                fail_at,
            }),
            compact_after: 1,
            ..SyncOptions::default()
        };
        let killed = mac.store.sync_round_with(&mac.folder, &opts);
        let completed = killed.is_ok();
        settle(&[&mac, &phone], &mut Rng(7));
        assert_eq!(
            mac.visible(),
            phone.visible(),
            "killed at operation {fail_at}"
        );
        assert_eq!(phone.store.messages(&c.id).unwrap().len(), 2);
        assert_eq!(mac.store.note_count().unwrap(), 1);
        if completed {
            break;
        }
        fail_at += 1;
    }
    assert!(
        fail_at >= 5,
        "a round has more points to kill than {fail_at}"
    );
}

#[test]
fn old_segments_fold_into_a_snapshot_that_a_late_device_starts_from() {
    let dir = tempfile::tempdir().unwrap();
    let (mac, phone) = two(dir.path());
    let opts = SyncOptions {
        compact_after: 3,
        ..SyncOptions::default()
    };
    let c = mac.conversation("long");
    let mut rng = Rng(8);
    for i in 0..8 {
        mac.append(&c.id, Role::User, &format!("message {i}"));
        mac.store.sync_round_with(&mac.folder, &opts).unwrap();
        carry(&[&mac, &phone], &mut rng, false);
        phone.store.sync_round_with(&phone.folder, &opts).unwrap();
        carry(&[&mac, &phone], &mut rng, false);
    }
    let report = mac.store.sync_round_with(&mac.folder, &opts).unwrap();
    let mac_id = mac.store.sync_device().unwrap();
    let own: Vec<String> = std::fs::read_dir(mac.folder.join("companion-sync").join(&mac_id))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    assert!(
        own.iter().any(|n| n.starts_with("snapshot-")),
        "{own:?} {report:?}"
    );
    assert!(
        own.iter().filter(|n| n.starts_with("seg-")).count() < 4,
        "segments applied everywhere are gone: {own:?}"
    );
    // a device that joins now starts from the snapshot plus the tail
    carry(&[&mac, &phone], &mut rng, false);
    let late = Device::new(dir.path(), "ipad");
    for entry in std::fs::read_dir(mac.folder.join("companion-sync")).unwrap() {
        let entry = entry.unwrap();
        let to = late.folder.join("companion-sync").join(entry.file_name());
        std::fs::create_dir_all(&to).unwrap();
        for f in std::fs::read_dir(entry.path()).unwrap() {
            let f = f.unwrap();
            std::fs::copy(f.path(), to.join(f.file_name())).unwrap();
        }
    }
    let report = late.round();
    assert!(report.notices.is_empty(), "{:?}", report.notices);
    assert_eq!(late.store.messages(&c.id).unwrap().len(), 8);
    settle(&[&mac, &phone, &late], &mut rng);
    assert_eq!(mac.visible(), late.visible());
    assert_eq!(phone.visible(), late.visible());
}

#[test]
fn a_database_from_before_sync_sends_what_it_had() {
    let dir = tempfile::tempdir().unwrap();
    let old = dir.path().join("old.db");
    let conn = rusqlite::Connection::open(&old).unwrap();
    conn.execute_batch(include_str!("../../fixtures/schema-v3.sql"))
        .unwrap();
    drop(conn);
    let mac = Device {
        store: memory::Store::open(&old).unwrap().store,
        db: old.clone(),
        folder: dir.path().join("mac-sync"),
    };
    std::fs::create_dir_all(&mac.folder).unwrap();
    let before = mac.visible();
    assert!(!before.conversations.is_empty() && !before.messages.is_empty());
    let phone = Device::new(dir.path(), "iphone");
    settle(&[&mac, &phone], &mut Rng(9));
    // the fixture's search index was built by an older segmenter; the phone's by today's
    let (mut on_mac, mut on_phone) = (mac.visible(), phone.visible());
    on_mac.search.clear();
    on_phone.search.clear();
    assert_eq!(on_mac, on_phone);
    assert_eq!(
        on_mac,
        Visible {
            search: vec![],
            ..before
        }
    );
    assert_eq!(phone.store.search("公园", 5).unwrap().len(), 2);
}

#[test]
fn a_device_gone_for_months_holds_nothing_back_and_catches_up_from_the_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let (mac, phone) = two(dir.path());
    let old = Device::new(dir.path(), "old-ipad");
    let opts = SyncOptions {
        compact_after: 2,
        ..SyncOptions::default()
    };
    let c = mac.conversation("c");
    let mut rng = Rng(10);
    // the iPad syncs once, then is put in a drawer
    mac.append(&c.id, Role::User, "before the drawer");
    settle(&[&mac, &phone, &old], &mut rng);
    let old_id = old.store.sync_device().unwrap();
    // its progress, as the others see it, is three months old
    for view in [&mac.folder, &phone.folder] {
        let path = view
            .join("companion-sync")
            .join(&old_id)
            .join("progress.json");
        let mut progress: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        progress["written_at"] = serde_json::json!(memory::types::now_ms() - 90 * 86_400_000);
        std::fs::write(&path, serde_json::to_vec(&progress).unwrap()).unwrap();
    }
    for i in 0..6 {
        mac.append(&c.id, Role::User, &format!("while it was away {i}"));
        mac.store.sync_round_with(&mac.folder, &opts).unwrap();
        carry(&[&mac, &phone], &mut rng, false);
        phone.store.sync_round_with(&phone.folder, &opts).unwrap();
        carry(&[&mac, &phone], &mut rng, false);
    }
    let mac_id = mac.store.sync_device().unwrap();
    let own: Vec<String> = std::fs::read_dir(mac.folder.join("companion-sync").join(&mac_id))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    assert!(
        own.iter().any(|n| n.starts_with("snapshot-")),
        "the absent device held compaction back: {own:?}"
    );
    // back from the drawer: its view of the folder is what the cloud has now
    std::fs::remove_dir_all(old.folder.join("companion-sync").join(&mac_id)).unwrap();
    settle(&[&mac, &phone, &old], &mut rng);
    assert_eq!(texts(&old, &c.id).len(), 7);
    assert_eq!(mac.visible(), old.visible());
}
