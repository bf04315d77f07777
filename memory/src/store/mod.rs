//! The SQLite store: one database file (WAL, foreign keys, a busy timeout, full sync so a
//! committed message survives power loss), its schema upgrades, and the recovery of a corrupt
//! file, which is moved aside with a timestamp — never deleted — before a fresh database is
//! started. KV snapshots are files in a folder beside the database (see `snapshots.rs`), and so
//! are the pictures attached to messages (see `images.rs`); each
//! open store holds a writer lock in another (see `writers.rs`), which is how a reply left
//! `streaming` is known to be abandoned. Every write transaction begins IMMEDIATE (takes the
//! write lock first), so a busy database makes it wait out the busy timeout at its start
//! instead of failing with "database is locked" between its read and its write.

mod conversations;
mod documents;
pub mod files;
mod grants;
pub(crate) mod images;
mod messages;
mod models;
mod notes;
mod paired;
mod reminders;
pub mod schema;
mod snapshots;
mod summaries;
mod tool_calls;
mod writers;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rusqlite::{Connection, ErrorCode, OpenFlags, TransactionBehavior};

use crate::error::{Error, Result};
use crate::types::now_ms;
use files::{OsFiles, SnapshotFiles};

/// Default disk budget for KV snapshots; the least recently used are pruned beyond it.
pub const DEFAULT_SNAPSHOT_BUDGET_BYTES: u64 = 1 << 30;

/// How long a connection waits for another's lock before "database is locked".
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// A streaming reply written by a Companion from before writer locks (no writer recorded) and
/// not checkpointed for this long is taken as abandoned: the old rule, kept for those rows
/// only, since their writer cannot be asked.
const LEGACY_ABANDONED_REPLY_MS: i64 = 10_000;

#[derive(Debug, Clone)]
pub struct StoreConfig {
    pub path: PathBuf,
    pub snapshot_budget_bytes: u64,
    /// The files KV snapshots are written with (the operating system's by default; a
    /// fault-injection test gives its own).
    pub files: Arc<dyn SnapshotFiles>,
    /// The SQLite VFS to open the database with (`None`: SQLite's default; a fault-injection
    /// test registers its own).
    pub vfs: Option<String>,
}

impl StoreConfig {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        StoreConfig {
            path: path.into(),
            snapshot_budget_bytes: DEFAULT_SNAPSHOT_BUDGET_BYTES,
            files: Arc::new(OsFiles),
            vfs: None,
        }
    }
}

/// The file that was found corrupt and where it went.
#[derive(Debug, Clone)]
pub struct Recovery {
    pub moved_to: PathBuf,
    pub reason: String,
}

impl Recovery {
    /// What to tell the user.
    pub fn message(&self) -> String {
        format!(
            "The conversation database could not be read ({}). It was kept as {} and a new, empty database was started.",
            self.reason,
            self.moved_to.display()
        )
    }
}

pub struct Opened {
    pub store: Store,
    /// Set when a corrupt file was moved aside.
    pub recovery: Option<Recovery>,
}

/// The owner of the conversation database.
pub struct Store {
    pub(crate) conn: Connection,
    path: PathBuf,
    snapshot_dir: PathBuf,
    snapshot_budget_bytes: u64,
    files: Arc<dyn SnapshotFiles>,
    /// The picture files, beside the database.
    pub(crate) images: images::ImageFolder,
    writers_dir: PathBuf,
    /// Held for the store's lifetime: tells other stores this one is alive.
    writer: writers::WriterLock,
}

impl Store {
    pub fn open(path: impl Into<PathBuf>) -> Result<Opened> {
        Self::open_with(StoreConfig::new(path))
    }

    pub fn open_with(config: StoreConfig) -> Result<Opened> {
        let path = config.path.clone();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| Error::io("create", dir, e))?;
        }
        match Self::open_existing(&config) {
            Ok(store) => Ok(Opened {
                store,
                recovery: None,
            }),
            Err(Error::Sqlite(e)) if is_corruption(&e) => {
                let reason = e.to_string();
                let moved_to = move_aside(&path)?;
                tracing::warn!(path = %path.display(), moved_to = %moved_to.display(), %reason, "corrupt conversation database moved aside");
                let store = Self::open_existing(&config)?;
                Ok(Opened {
                    store,
                    recovery: Some(Recovery { moved_to, reason }),
                })
            }
            Err(e) => Err(e),
        }
    }

    fn open_existing(config: &StoreConfig) -> Result<Store> {
        let path = &config.path;
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let mut conn = match &config.vfs {
            Some(vfs) => Connection::open_with_flags_and_vfs(path, flags, vfs.as_str())?,
            None => Connection::open_with_flags(path, flags)?,
        };
        conn.busy_timeout(BUSY_TIMEOUT)?;
        // Reading the schema and a quick check up front turns a non-SQLite or damaged file into
        // an error here, where it can be moved aside, rather than on some later write.
        let check = quick_check(&conn)?;
        if check != "ok" {
            return Err(Error::Sqlite(rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CORRUPT),
                Some(check),
            )));
        }
        // A newer schema is refused before anything (even the journal mode) is written.
        let version = schema::user_version(&conn)?;
        if version > schema::SCHEMA_VERSION {
            return Err(Error::SchemaTooNew {
                path: path.clone(),
                found: version,
                supported: schema::SCHEMA_VERSION,
            });
        }
        enable_wal(&conn)?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        schema::migrate(&mut conn, path)?;
        let snapshot_dir = sibling_dir(path, "snapshots");
        let writers_dir = sibling_dir(path, "writers");
        let writer = writers::WriterLock::acquire(&writers_dir)?;
        let store = Store {
            conn,
            path: path.clone(),
            snapshot_dir,
            snapshot_budget_bytes: config.snapshot_budget_bytes,
            files: config.files.clone(),
            images: images::ImageFolder::new(sibling_dir(path, "images"), config.files.clone()),
            writers_dir,
            writer,
        };
        writers::sweep(&store.writers_dir, store.writer.id());
        store.recover_abandoned_replies()?;
        store.sweep_snapshot_files()?;
        Ok(store)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// This store's writer id, recorded on the replies it streams.
    pub(crate) fn writer_id(&self) -> &str {
        self.writer.id()
    }

    /// Replies left `streaming` by a store that is gone (its process died, or it was dropped
    /// mid-reply) keep their text and become `stopped`. A reply whose writer still holds its
    /// lock is left alone however long it has been quiet.
    fn recover_abandoned_replies(&self) -> Result<()> {
        let rows: Vec<(i64, Option<String>, i64)> = {
            let mut stmt = self.conn.prepare(
                "SELECT id, writer, updated_at FROM messages WHERE status = 'streaming'",
            )?;
            stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
                .collect::<rusqlite::Result<_>>()?
        };
        let mut alive = std::collections::HashMap::new();
        for (id, writer, updated_at) in rows {
            let abandoned = match writer {
                None => updated_at < now_ms() - LEGACY_ABANDONED_REPLY_MS,
                Some(w) if w == self.writer_id() => false,
                Some(w) => !*alive
                    .entry(w)
                    .or_insert_with_key(|w| writers::is_alive(&self.writers_dir, w)),
            };
            if abandoned {
                self.finish_abandoned_reply(id)?;
            }
        }
        Ok(())
    }

    /// Run `f` in one transaction, begun IMMEDIATE (see the module docs).
    pub(crate) fn in_transaction<T>(
        &self,
        f: impl FnOnce(&rusqlite::Transaction<'_>) -> Result<T>,
    ) -> Result<T> {
        let tx = rusqlite::Transaction::new_unchecked(&self.conn, TransactionBehavior::Immediate)?;
        let out = f(&tx)?;
        tx.commit()?;
        Ok(out)
    }

    /// Fold the write-ahead log into the database file (`PRAGMA wal_checkpoint(TRUNCATE)`),
    /// so that the file alone holds every committed write: before iOS suspends the app, which
    /// it may then end without another word. Every commit is already durable (synchronous
    /// FULL); this only makes the next start's recovery work nothing. `false` when a reader
    /// kept part of the log from being folded (it is folded later).
    pub fn checkpoint(&self) -> Result<bool> {
        let (busy, _, _): (i64, i64, i64) =
            self.conn
                .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                })?;
        Ok(busy == 0)
    }

    /// `PRAGMA integrity_check`: "ok" for a sound database.
    pub fn integrity_check(&self) -> Result<String> {
        Ok(self
            .conn
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))?)
    }
}

/// `PRAGMA quick_check(1)`. Another store creating the schema meanwhile (stores opening a
/// fresh database together) can change it under the check: SQLite then fails the check's
/// reading of the search index's virtual table with SQLITE_SCHEMA ("vtable constructor
/// failed"), which, unlike a plain statement, it does not retry itself. The check is read
/// again, a few times, as SQLite does for statements.
fn quick_check(conn: &Connection) -> Result<String> {
    let mut tries = 0;
    loop {
        match conn.query_row("PRAGMA quick_check(1)", [], |r| r.get(0)) {
            Err(e) if e.sqlite_error_code() == Some(ErrorCode::SchemaChanged) && tries < 10 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(2));
            }
            other => return Ok(other?),
        }
    }
}

/// Put the database in WAL mode (once: it is a property of the file). The switch needs every
/// other connection's lock released, and SQLite answers "database is locked" at once rather
/// than through the busy handler when stores open a fresh database together, so it is retried
/// within the busy timeout, as the handler would.
fn enable_wal(conn: &Connection) -> Result<()> {
    let mode: String = conn.pragma_query_value(None, "journal_mode", |r| r.get(0))?;
    if mode.eq_ignore_ascii_case("wal") {
        return Ok(());
    }
    let deadline = std::time::Instant::now() + BUSY_TIMEOUT;
    loop {
        match conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get::<_, String>(0)) {
            Ok(_) => return Ok(()),
            Err(e)
                if e.sqlite_error_code() == Some(ErrorCode::DatabaseBusy)
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// Where Companion keeps its conversations when not told otherwise: `$COMPANION_DB`, else
/// `$XDG_DATA_HOME/companion/companion.db` (`~/.local/share/…` on Linux,
/// `~/Library/Application Support/Companion/…` on macOS).
pub fn default_database_path() -> PathBuf {
    if let Some(p) = std::env::var_os("COMPANION_DB").filter(|p| !p.is_empty()) {
        return p.into();
    }
    default_data_dir().join("companion.db")
}

/// The platform's data folder for Companion (`~/Library/Application Support/Companion`, or
/// `$XDG_DATA_HOME/companion`, else `~/.local/share/companion`), whatever `COMPANION_DB` says:
/// a database moved elsewhere does not make the folder it was moved to Companion's.
pub fn default_data_dir() -> PathBuf {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    // the app's container on iOS has the same Library/Application Support
    let base = if cfg!(any(target_os = "macos", target_os = "ios")) {
        home.map(|h| h.join("Library/Application Support/Companion"))
    } else {
        std::env::var_os("XDG_DATA_HOME")
            .filter(|p| !p.is_empty())
            .map(PathBuf::from)
            .or_else(|| home.map(|h| h.join(".local/share")))
            .map(|d| d.join("companion"))
    };
    base.unwrap_or_else(|| PathBuf::from("."))
}

/// `NAME.what` beside the database `NAME`.
/// Every file and folder a store at `db` keeps beside itself: the database, SQLite's WAL,
/// shared-memory and journal files, the KV snapshot and picture folders and the writer
/// locks. The one place that names them, so that whoever must keep them private (the agent's sandbox)
/// cannot fall behind when a new one is added.
pub fn store_files(db: &Path) -> Vec<PathBuf> {
    let name = db
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "companion.db".into());
    let mut files: Vec<PathBuf> = ["", "-wal", "-shm", "-journal"]
        .iter()
        .map(|suffix| db.with_file_name(format!("{name}{suffix}")))
        .collect();
    files.push(sibling_dir(db, "snapshots"));
    files.push(sibling_dir(db, "images"));
    files.push(sibling_dir(db, "writers"));
    files
}

fn sibling_dir(db: &Path, what: &str) -> PathBuf {
    let name = db
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "companion.db".into());
    db.with_file_name(format!("{name}.{what}"))
}

fn is_corruption(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt)
    )
}

/// Rename the database (and its WAL and shared-memory files) to `NAME.corrupt-TIMESTAMP`.
fn move_aside(path: &Path) -> Result<PathBuf> {
    // 20261130T031000Z: sortable and valid in file names everywhere
    let stamp = crate::types::rfc3339(now_ms()).replace([':', '-'], "");
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut target = path.with_file_name(format!("{name}.corrupt-{stamp}"));
    let mut n = 1;
    while target.exists() {
        target = path.with_file_name(format!("{name}.corrupt-{stamp}-{n}"));
        n += 1;
    }
    std::fs::rename(path, &target).map_err(|e| Error::io("move aside", path, e))?;
    for suffix in ["-wal", "-shm"] {
        let side = path.with_file_name(format!("{name}{suffix}"));
        if side.exists() {
            let to = target.with_file_name(format!(
                "{}{suffix}",
                target
                    .file_name()
                    .map(|n| n.to_string_lossy())
                    .unwrap_or_default()
            ));
            std::fs::rename(&side, &to).map_err(|e| Error::io("move aside", &side, e))?;
        }
    }
    Ok(target)
}

pub(crate) use conversations::insert_conversation;
pub use documents::{ChunkSummary, DocumentKey, DocumentRecord, DocumentTotals};
pub use grants::{FolderGrant, GrantMode};
pub(crate) use images::ImageFolder;
pub use images::{IMAGE_MIME_TYPES, MAX_IMAGE_BYTES};
pub(crate) use messages::insert_message;
pub use models::{ModelId, ModelRecord, NewModel};
pub(crate) use notes::body as note_index_body;
pub use notes::{MAX_NOTE_TEXT_BYTES, MAX_NOTE_TITLE_BYTES, Note, NoteHit, NoteId};
pub use paired::{AssistantRecord, PairedFile, Pairing, ProjectorRecord};
pub use reminders::{MAX_REMINDER_TEXT_BYTES, Reminder, ReminderId};
pub(crate) use snapshots::take_snapshot_row;
pub(crate) use summaries::insert_summary;
pub use tool_calls::{NewToolCall, ToolCallId, ToolCallRecord, ToolOutcome};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{NewMessage, Role};

    /// A full disk, simulated by capping the database's page count (SQLite then fails writes
    /// with SQLITE_FULL, as on a full disk): a clear error, and nothing committed is lost.
    #[test]
    fn a_full_disk_is_a_clear_error_and_loses_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("c.db")).unwrap().store;
        let c = store
            .create_conversation("full", None, &serde_json::json!({}))
            .unwrap();
        store
            .append_message(&c.id, &NewMessage::complete(Role::User, "kept", None))
            .unwrap();
        let pages: i64 = store
            .conn
            .query_row("PRAGMA page_count", [], |r| r.get(0))
            .unwrap();
        store
            .conn
            .pragma_update(None, "max_page_count", pages + 2)
            .unwrap();
        let big = "x".repeat(64 * 1024);
        let err = (0..100)
            .find_map(|_| {
                store
                    .append_message(&c.id, &NewMessage::complete(Role::User, big.clone(), None))
                    .err()
            })
            .expect("the database filled up");
        assert_eq!(err.code(), "disk_full", "{err}");
        assert!(err.to_string().contains("nothing already saved was lost"));
        let messages = store.messages(&c.id).unwrap();
        assert_eq!(messages[0].text, "kept");
        assert_eq!(store.integrity_check().unwrap(), "ok");
    }

    /// A read-then-write transaction while another connection writes: begun IMMEDIATE, it
    /// holds the write lock from its start, so the other writer waits (its busy handler runs)
    /// and neither fails. Begun DEFERRED, the other writer would commit between the read and
    /// the write, and the write would fail at once with "database is locked" (SQLITE_BUSY,
    /// which no busy timeout retries, since the transaction's snapshot is stale).
    #[test]
    fn a_read_then_write_transaction_is_not_failed_by_another_writer() {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::mpsc;

        static OTHER_WAITED: AtomicBool = AtomicBool::new(false);
        fn waiting(_: i32) -> bool {
            OTHER_WAITED.store(true, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(1));
            true
        }

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.db");
        let store = Store::open(&path).unwrap().store;
        let c = store
            .create_conversation("busy", None, &serde_json::json!({}))
            .unwrap();
        let (go, started) = mpsc::channel::<()>();
        let (committed, done) = mpsc::channel::<rusqlite::Result<()>>();
        let other = std::thread::spawn(move || {
            let conn = Connection::open(&path).unwrap();
            conn.busy_handler(Some(waiting)).unwrap();
            started.recv().unwrap();
            let r = conn
                .execute(
                    "UPDATE conversations SET title = 'other' WHERE id = ?1",
                    [c.id.as_str()],
                )
                .map(|_| ());
            committed.send(r).unwrap();
        });
        let c2 = store.conversation(&store.list_conversations(0, 1).unwrap()[0].conversation.id);
        let id = c2.unwrap().id;
        let result = store.in_transaction(|tx| {
            let title: String = tx.query_row(
                "SELECT title FROM conversations WHERE id = ?1",
                [id.as_str()],
                |r| r.get(0),
            )?;
            go.send(()).unwrap();
            // wait until the other writer has either committed or is waiting for our lock
            loop {
                if OTHER_WAITED.load(Ordering::SeqCst) {
                    break;
                }
                match done.try_recv() {
                    Ok(r) => {
                        r.unwrap();
                        break;
                    }
                    Err(_) => std::thread::yield_now(),
                }
            }
            tx.execute(
                "UPDATE conversations SET title = ?2 WHERE id = ?1",
                rusqlite::params![id.as_str(), format!("{title}!")],
            )?;
            Ok(())
        });
        result.expect("the read-then-write transaction commits");
        other.join().unwrap();
        assert_eq!(
            store.conversation(&id).unwrap().title,
            "other",
            "the other writer ran after"
        );
    }
}
