//! Power loss, simulated: the store runs on a SQLite VFS and a snapshot file system that hold
//! every write until it is synced (`crash_vfs.rs`, `crash_files.rs`). A conversation goes
//! through three exchanges — each reply streamed with a checkpoint per piece, then a KV
//! snapshot saved, with a WAL checkpoint by another connection in between — and the power is
//! cut at each I/O operation in turn (every write, truncate, sync, rename, removal), losing
//! either every unsynced write or a random subset of them (seeded). After each cut, before the
//! store's own recovery runs: the database passes `PRAGMA integrity_check` and every message
//! reported committed is there (a reply with at least the text of its last checkpoint). Then
//! the store opens (recovery: the reply cut off is stopped, orphan files swept) and the
//! snapshot is the last one reported saved, or the one being saved at the cut — whole — and
//! nothing else. `--nocapture` prints the crash points tried.

mod crash;
mod crash_files;
mod crash_vfs;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use memory::{
    ConversationId, MessageStatus, NewMessage, ReplyRecorder, Role, SnapshotKey, Store, StoreConfig,
};

use crash::Rng;
use crash_files::CrashFiles;

const PIECES: [&str; 6] = ["The ", "keeper ", "lit ", "the ", "lamp ", "at dusk."];

fn key() -> SnapshotKey {
    SnapshotKey {
        model_sha256: "m".into(),
        format_version: 1,
    }
}

fn snapshot_bytes(turn: u8) -> Vec<u8> {
    (0..40_000u32)
        .map(|i| (i as u8).wrapping_mul(31) ^ turn)
        .collect()
}

/// What the scenario was told is committed, as it went.
#[derive(Default)]
struct Committed {
    /// Message id → (status, text) as last reported committed.
    messages: BTreeMap<i64, (MessageStatus, String)>,
    /// The snapshot last reported saved, and one being saved when the power went.
    snapshot: Option<Vec<u8>>,
    saving: Option<Vec<u8>>,
    /// What the scenario was doing at the cut.
    phase: &'static str,
}

fn config(dir: &Path, files: &Arc<CrashFiles>, vfs: bool) -> StoreConfig {
    let mut c = StoreConfig::new(dir.join("companion.db"));
    c.files = files.clone();
    c.vfs = vfs.then(|| crash_vfs::NAME.to_string());
    c
}

fn scenario(
    store: &Store,
    checkpointer: &rusqlite::Connection,
    conversation: &ConversationId,
    log: &mut Committed,
) -> anyhow::Result<()> {
    for turn in 0..3u8 {
        log.phase = "message";
        let m = store.append_message(
            conversation,
            &NewMessage::complete(Role::User, format!("question {turn}"), None),
        )?;
        log.messages.insert(m.id.0, (m.status, m.text));
        log.phase = "reply";
        let mut reply = ReplyRecorder::begin(store, conversation)?.with_interval(Duration::ZERO);
        log.messages
            .insert(reply.id().0, (MessageStatus::Streaming, String::new()));
        for piece in PIECES {
            reply.push(store, piece)?;
            log.messages.insert(
                reply.id().0,
                (MessageStatus::Streaming, reply.text().to_string()),
            );
        }
        let m = reply.finish(store, MessageStatus::Complete, Some(6), None)?;
        log.messages.insert(m.id.0, (m.status, m.text));
        log.phase = "wal checkpoint";
        checkpointer.query_row("PRAGMA wal_checkpoint(RESTART)", [], |_| Ok(()))?;
        log.phase = "snapshot";
        let bytes = snapshot_bytes(turn);
        log.saving = Some(bytes.clone());
        assert!(store.save_snapshot(conversation, &key(), 100, &bytes)?);
        log.snapshot = log.saving.take();
    }
    log.phase = "done";
    Ok(())
}

/// One run: set up, cut the power at operation `at` (never with `None`), check. Returns the
/// phase the cut fell in and how many operations the scenario made.
fn run(at: Option<u64>, rng: &mut Rng, partial: bool) -> (&'static str, u64) {
    let dir = tempfile::tempdir().unwrap();
    let files = Arc::new(CrashFiles::default());
    crash::arm(None);
    let store = Store::open_with(config(dir.path(), &files, true))
        .unwrap()
        .store;
    let conversation = store
        .create_conversation("lighthouse", None, &serde_json::json!({}))
        .unwrap()
        .id;
    let checkpointer = rusqlite::Connection::open_with_flags_and_vfs(
        dir.path().join("companion.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE,
        crash_vfs::NAME,
    )
    .unwrap();
    checkpointer.busy_timeout(Duration::from_secs(5)).unwrap();
    crash_vfs::settle();
    files.settle();

    crash::arm(at);
    let mut log = Committed::default();
    let result = scenario(&store, &checkpointer, &conversation, &mut log);
    let ops = crash::ops();
    // a cut numbered past the operations this run made (their count varies by one or two
    // with SQLite's checkpoints) is a run without a cut
    if !crash::crashed() {
        result.expect("no cut, no error");
        log.phase = "done";
    }
    // the machine is off: nothing more reaches the disk
    drop(checkpointer);
    drop(store);
    crash_vfs::power_off(rng, partial);
    files.power_off(rng, partial);
    crash::arm(None);
    let context = format!("cut at operation {at:?} ({}, partial {partial})", log.phase);

    // as the disk was found, before any recovery of ours: SQLite's default VFS on the files
    let db = dir.path().join("companion.db");
    {
        let raw = rusqlite::Connection::open(&db).unwrap();
        let check: String = raw
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .unwrap();
        assert_eq!(check, "ok", "{context}");
        for (id, (status, text)) in &log.messages {
            let (found_status, found_text): (String, String) = raw
                .query_row(
                    "SELECT status, text FROM messages WHERE id = ?1",
                    [id],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .unwrap_or_else(|e| panic!("{context}: message {id} lost: {e}"));
            if *status == MessageStatus::Streaming {
                assert!(
                    found_text.starts_with(text.as_str()),
                    "{context}: reply {id} has {found_text:?}, checkpointed {text:?}"
                );
            } else {
                assert_eq!(
                    (found_status.as_str(), found_text.as_str()),
                    (status.as_str(), text.as_str()),
                    "{context}: message {id}"
                );
            }
        }
    }

    // the store's recovery, then the snapshot
    let store = Store::open_with(config(dir.path(), &files, false))
        .unwrap()
        .store;
    assert_eq!(store.integrity_check().unwrap(), "ok", "{context}");
    for m in store.messages(&conversation).unwrap() {
        assert_ne!(m.status, MessageStatus::Streaming, "{context}: recovered");
    }
    let loaded = store.load_snapshot(&conversation, &key()).unwrap();
    let allowed = [log.snapshot.clone(), log.saving.clone()];
    match &loaded {
        None => assert!(
            log.snapshot.is_none(),
            "{context}: the saved snapshot is gone"
        ),
        Some(bytes) => assert!(
            allowed.iter().any(|a| a.as_ref() == Some(bytes)),
            "{context}: a snapshot that was never saved ({} bytes)",
            bytes.len()
        ),
    }
    if let Some(bytes) = &loaded {
        assert_eq!(
            store
                .snapshot_info(&conversation)
                .unwrap()
                .unwrap()
                .byte_count,
            bytes.len() as i64
        );
    }
    let left = files.durable_names(&dir.path().join("companion.db.snapshots"));
    drop(store);
    // the sweep at open removed every file no row names (durably or not, only the file of
    // the snapshot in force may be left)
    let reopened = Store::open_with(config(dir.path(), &files, false))
        .unwrap()
        .store;
    let in_force = usize::from(reopened.snapshot_info(&conversation).unwrap().is_some());
    let listed = memory::store::files::SnapshotFiles::list(
        &*files,
        &dir.path().join("companion.db.snapshots"),
    )
    .unwrap();
    assert_eq!(
        listed.len(),
        in_force,
        "{context}: files left {listed:?} (durable {left:?})"
    );
    (log.phase, ops)
}

#[test]
fn no_committed_message_or_saved_snapshot_is_lost_to_a_power_cut() {
    crash_vfs::register();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let (_, total) = run(None, &mut rng, false);
    assert!(
        total > 50,
        "the scenario does I/O through the shims: {total} operations"
    );
    let mut phases: BTreeMap<&str, usize> = BTreeMap::new();
    let mut tried = 0;
    for at in 1..=total {
        for partial in [false, true] {
            let (phase, _) = run(Some(at), &mut rng, partial);
            *phases.entry(phase).or_default() += 1;
            tried += 1;
        }
    }
    eprintln!(
        "{tried} power cuts ({total} I/O operations, each with every unsynced write lost and with a random subset kept): {phases:?}"
    );
    assert!(
        phases.get("reply").copied().unwrap_or(0) >= 20,
        "{phases:?}"
    );
    assert!(
        phases.get("snapshot").copied().unwrap_or(0) >= 10,
        "{phases:?}"
    );
}
