//! Sync through a folder the user owns (an iCloud Drive container, a Syncthing or Dropbox
//! folder, a network share): no server, nothing sent anywhere by Companion. Each round
//! writes this device's changes as new immutable files in its own directory of the folder
//! and applies the files of the other devices (see [`folder`] for the layout).
//!
//! Why a row log of our own rather than SQLite's session extension: a changeset carries rows
//! by primary key, and messages, summaries, notes and reminders have integer row ids that
//! differ on every device; its conflict handler decides per row in the order files arrive,
//! not by a clock, so two devices applying the same files in different orders could differ;
//! and it would carry every table, where KV snapshots, models, grants and settings must stay
//! on their device. Here each synced row has a stable uid, each change a stamp of the hybrid
//! logical clock ([`clock`]), set by triggers (schema version 7) so that no write path can
//! forget one, and each record the row's whole state ([`record`]), merged field by field by
//! stamp ([`apply`]), so the outcome is the same in every order of delivery.
//!
//! What syncs: conversations (title, pin, settings, deletion), messages (appended, with their
//! pictures inside their records; a reply stopped or edited as a newer body; deleted by an
//! edit or a regeneration, which takes the pictures no other message has), summaries,
//! notes, reminders and the tool-call log. What stays on the device: KV snapshots (device-
//! and model-specific: a conversation that came from another device is prefilled from its
//! summaries and recent turns, as after a model switch), the model library, folder grants
//! and their bookmarks, the API token, documents' chunk summaries and settings.
//!
//! A misbehaving folder loses nothing: a partial, damaged or conflicting file is skipped and
//! read again next round; a file from a newer format waits, with a notice, for an update;
//! each file is applied in one transaction that also records it as applied, so a kill at
//! any point leaves either all of it or none. A database that finds itself copied (a backup
//! restored on a second device) takes a new device id ([`identity`]). A device deletes only
//! its own files, and only segments that every device seen in the last
//! [`SyncOptions::peer_expiry_ms`] has applied; they are replaced by a snapshot of the whole
//! state, from which a device that joins late or comes back after months starts.

pub mod clock;
pub mod folder;
pub mod record;

mod apply;
mod export;
mod identity;
mod outgoing;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rusqlite::{OptionalExtension, Transaction, TransactionBehavior, params};
use serde::Serialize;

use crate::error::{Error, Result};
use crate::store::{ImageFolder, Store};
use crate::types::now_ms;
use apply::{Effects, Outcome};
use folder::{FileKind, FolderIo, OsFolder, Progress, Unreadable};
use record::Record;

/// An unchanged progress file is written again after this long, so that the other devices
/// know this one is still there (see [`SyncOptions::peer_expiry_ms`]).
const PROGRESS_REFRESH_MS: i64 = 24 * 3600 * 1000;

/// How a round behaves; the defaults are the app's.
#[derive(Clone)]
pub struct SyncOptions {
    /// The folder's file operations.
    pub io: Arc<dyn FolderIo>,
    /// The newest file format this Companion applies.
    pub newest_format: u32,
    /// At most this many records per segment file.
    pub records_per_segment: usize,
    /// Fold this device's segments into a snapshot once this many more are applied everywhere.
    pub compact_after: u64,
    /// A device not seen for this long no longer holds back compaction; when it comes back it
    /// starts from the snapshots.
    pub peer_expiry_ms: i64,
    /// A file larger than this is not read (a hostile or broken one would fill the memory);
    /// it is skipped with a notice.
    pub max_file_bytes: u64,
}

impl Default for SyncOptions {
    fn default() -> Self {
        SyncOptions {
            io: Arc::new(OsFolder),
            newest_format: folder::FORMAT,
            records_per_segment: 2000,
            compact_after: 32,
            peer_expiry_ms: 60 * 24 * 3600 * 1000,
            max_file_bytes: 1 << 30,
        }
    }
}

/// A file that was not applied, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Notice {
    /// The file, relative to the sync folder.
    pub file: String,
    /// `damaged` (read again next round), `newer_format` (applied after an update), `invalid`
    /// (its records are not Companion's), `too_large` or `io`.
    pub code: &'static str,
    pub message: String,
}

/// What a round did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SyncReport {
    pub device: String,
    /// Files this device wrote.
    pub wrote: Vec<String>,
    pub wrote_records: usize,
    /// Files of other devices applied.
    pub applied_files: Vec<String>,
    /// Records that changed something here.
    pub applied_records: usize,
    /// Records waiting for a parent that has not arrived.
    pub waiting: usize,
    pub notices: Vec<Notice>,
    /// This device's segments folded into a snapshot (its number), if any were.
    pub compacted: Option<u64>,
    /// Set when this database found another copy of itself writing under its device id (a
    /// backup restored on a second device, a copied database file): the id it had. It took a
    /// new one (`device`), sent its whole state under it, and now applies the old id's files
    /// as another device's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub copied_from: Option<String>,
}

/// Another device as this one knows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Peer {
    pub device: String,
    /// Every segment up to this one applied here.
    pub through: u64,
    /// When this device last applied one of its files (ms).
    pub seen_at: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SyncStatus {
    pub device: String,
    /// The folder of the last round.
    pub folder: Option<String>,
    pub last_round_at: Option<i64>,
    pub last_error: Option<String>,
    /// Rows changed here and not yet written to the folder.
    pub unsent: usize,
    pub waiting: usize,
    pub peers: Vec<Peer>,
}

struct State {
    device: String,
    exported: u64,
    next_segment: u64,
}

fn state(conn: &rusqlite::Connection) -> Result<State> {
    Ok(conn.query_row(
        "SELECT device, exported, next_segment FROM sync_state",
        [],
        |r| {
            Ok(State {
                device: r.get(0)?,
                exported: r.get::<_, i64>(1)? as u64,
                next_segment: r.get::<_, i64>(2)?.max(1) as u64,
            })
        },
    )?)
}

fn io_notice(file: &Path, root: &Path, action: &str, e: std::io::Error) -> Notice {
    Notice {
        file: relative(file, root),
        code: "io",
        message: format!("cannot {action} it: {e}"),
    }
}

fn relative(file: &Path, root: &Path) -> String {
    file.strip_prefix(root.parent().unwrap_or(root))
        .unwrap_or(file)
        .display()
        .to_string()
}

impl Store {
    /// This device's sync id.
    pub fn sync_device(&self) -> Result<String> {
        Ok(state(&self.conn)?.device)
    }

    /// One round with the default options.
    pub fn sync_round(&self, folder: &Path) -> Result<SyncReport> {
        self.sync_round_with(folder, &SyncOptions::default())
    }

    /// One round: write this device's changes, apply the others', publish progress, fold old
    /// segments. A file that cannot be applied is a notice, not an error; an error is a
    /// folder that cannot be used at all (missing, not writable, the disk full).
    pub fn sync_round_with(&self, folder: &Path, opts: &SyncOptions) -> Result<SyncReport> {
        let outcome = self.round(folder, opts);
        let error = match &outcome {
            Ok(report) if report.notices.is_empty() => None,
            Ok(report) => Some(
                report
                    .notices
                    .iter()
                    .map(|n| format!("{}: {}", n.file, n.message))
                    .collect::<Vec<_>>()
                    .join("; "),
            ),
            Err(e) => Some(e.to_string()),
        };
        self.conn.execute(
            "UPDATE sync_state SET folder = ?1, last_round_at = ?2, last_error = ?3",
            params![folder.display().to_string(), now_ms(), error],
        )?;
        outcome
    }

    fn round(&self, folder: &Path, opts: &SyncOptions) -> Result<SyncReport> {
        if !folder.is_dir() {
            return Err(Error::InvalidArgument(format!(
                "the sync folder {} does not exist or is not a folder",
                folder.display()
            )));
        }
        let root = folder.join(folder::ROOT);
        let list_own = |device: &str| {
            let mine = root.join(device);
            opts.io.list(&mine).map_err(|e| Error::io("read", &mine, e))
        };
        let mut device = self.sync_device()?;
        let mut own_files = list_own(&device)?;
        let copied = self.new_identity_if_copied(&root.join(&device), &own_files, opts)?;
        if copied.is_some() {
            device = self.sync_device()?;
            own_files = list_own(&device)?;
        }
        let mine = root.join(&device);
        let mut report = SyncReport {
            device: device.clone(),
            ..Default::default()
        };
        if let Some(copied) = copied {
            report.copied_from = Some(copied.previous);
            report.wrote_records = copied.records;
            report.wrote = (copied.files.iter())
                .map(|name| format!("{}/{device}/{name}", folder::ROOT))
                .collect();
        }
        self.export_changes(&own_files, opts, &mut report)?;
        self.flush_outgoing(&mine, opts)?;
        self.apply_others(&root, &device, opts, &mut report)?;
        self.publish_progress(&mine, &device, opts, !report.wrote.is_empty())?;
        report.compacted = self.fold_own_segments(&root, &device, opts)?;
        report.waiting = self
            .conn
            .query_row("SELECT count(*) FROM sync_pending", [], |r| {
                r.get::<_, i64>(0)
            })? as usize;
        Ok(report)
    }

    fn apply_others(
        &self,
        root: &Path,
        device: &str,
        opts: &SyncOptions,
        report: &mut SyncReport,
    ) -> Result<()> {
        let mut devices: Vec<String> = opts
            .io
            .list(root)
            .map_err(|e| Error::io("read", root, e))?
            .into_iter()
            .filter(|d| folder::is_device_id(d) && d != device)
            .collect();
        devices.sort();
        for other in devices {
            let dir = root.join(&other);
            let names = match opts.io.list(&dir) {
                Ok(n) => n,
                Err(e) => {
                    report.notices.push(io_notice(&dir, root, "read", e));
                    continue;
                }
            };
            let mut files: Vec<(FileKind, String)> = names
                .into_iter()
                .filter_map(|n| folder::parse_name(&n).map(|k| (k, n)))
                .collect();
            // the newest snapshot first, then the segments after what it and earlier rounds
            // covered, in order; copies of one file next to each other (the first applied wins)
            files.sort_by(|a, b| match (a.0, b.0) {
                (FileKind::Snapshot(x), FileKind::Snapshot(y)) => y.cmp(&x).then(a.1.cmp(&b.1)),
                (FileKind::Snapshot(_), FileKind::Segment(_)) => std::cmp::Ordering::Less,
                (FileKind::Segment(_), FileKind::Snapshot(_)) => std::cmp::Ordering::Greater,
                (FileKind::Segment(x), FileKind::Segment(y)) => x.cmp(&y).then(a.1.cmp(&b.1)),
            });
            for (kind, name) in files {
                if self.already_applied(&other, kind)? {
                    continue;
                }
                let path = dir.join(&name);
                match opts.io.size(&path) {
                    Ok(size) if size > opts.max_file_bytes => {
                        report.notices.push(Notice {
                            file: relative(&path, root),
                            code: "too_large",
                            message: format!(
                                "not read: {size} bytes, more than a sync file of Companion's can be ({} bytes)",
                                opts.max_file_bytes
                            ),
                        });
                        continue;
                    }
                    Ok(_) => {}
                    Err(e) => {
                        report.notices.push(io_notice(&path, root, "read", e));
                        continue;
                    }
                }
                let bytes = match opts.io.read(&path) {
                    Ok(b) => b,
                    Err(e) => {
                        report.notices.push(io_notice(&path, root, "read", e));
                        continue;
                    }
                };
                let notice = |code, message| Notice {
                    file: relative(&path, root),
                    code,
                    message,
                };
                let (header, records) = match folder::decode(&bytes, opts.newest_format) {
                    Ok(decoded) => decoded,
                    Err(Unreadable::Damaged(why)) => {
                        report.notices.push(notice(
                            "damaged",
                            format!("skipped for now, read again next round: {why}"),
                        ));
                        continue;
                    }
                    Err(Unreadable::NewerFormat(v)) => {
                        report.notices.push(notice(
                            "newer_format",
                            format!(
                                "written by a newer Companion (sync format {v}; this one reads up to {}); it is applied once Companion is updated",
                                opts.newest_format
                            ),
                        ));
                        continue;
                    }
                };
                if header.device != other || header.file_kind() != Some(kind) {
                    report.notices.push(notice(
                        "invalid",
                        "its header names another device or file".into(),
                    ));
                    continue;
                }
                match self.apply_file(&other, kind, &records) {
                    Ok(applied) => {
                        report.applied_records += applied;
                        report.applied_files.push(relative(&path, root));
                    }
                    Err(Error::InvalidArgument(why)) => {
                        report.notices.push(notice("invalid", why));
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(())
    }

    fn already_applied(&self, device: &str, kind: FileKind) -> Result<bool> {
        let through: u64 = self
            .conn
            .query_row(
                "SELECT through FROM sync_peers WHERE device = ?1",
                [device],
                |r| r.get::<_, i64>(0),
            )
            .optional()?
            .unwrap_or(0) as u64;
        Ok(match kind {
            FileKind::Snapshot(n) => n <= through,
            FileKind::Segment(n) => {
                n <= through
                    || self
                        .conn
                        .query_row(
                            "SELECT 1 FROM sync_applied WHERE device = ?1 AND segment = ?2",
                            params![device, n as i64],
                            |_| Ok(()),
                        )
                        .optional()?
                        .is_some()
            }
        })
    }

    /// Apply one file's records in one transaction, which also records the file as applied.
    fn apply_file(&self, device: &str, kind: FileKind, records: &[Record]) -> Result<usize> {
        for r in records {
            apply::validate(r)?;
        }
        let tx = Transaction::new_unchecked(&self.conn, TransactionBehavior::Immediate)?;
        tx.execute("UPDATE sync_state SET applying = 1", [])?;
        let mut fx = Effects::default();
        for r in records {
            if let Outcome::Waiting(parent) = apply::apply(&tx, &self.images, r, &mut fx)? {
                tx.execute(
                    "INSERT OR IGNORE INTO sync_pending (parent, record) VALUES (?1, ?2)",
                    params![parent, serde_json::to_string(r).unwrap_or_default()],
                )?;
            }
        }
        retry_pending(&tx, &self.images, &mut fx)?;
        apply::finish(&tx, &mut fx)?;
        let pictures = crate::store::images::take_unlinked(&tx)?;
        let newest = records
            .iter()
            .flat_map(|r| r.stamps())
            .map(|s| s.hlc)
            .max()
            .unwrap_or(0);
        tx.execute(
            "UPDATE sync_state SET clock = max(clock, ?1)",
            [newest as i64],
        )?;
        tx.execute(
            "INSERT OR IGNORE INTO sync_peers (device) VALUES (?1)",
            [device],
        )?;
        match kind {
            FileKind::Segment(n) => {
                tx.execute(
                    "INSERT OR IGNORE INTO sync_applied (device, segment) VALUES (?1, ?2)",
                    params![device, n as i64],
                )?;
            }
            FileKind::Snapshot(n) => {
                tx.execute(
                    "UPDATE sync_peers SET through = max(through, ?2) WHERE device = ?1",
                    params![device, n as i64],
                )?;
            }
        }
        advance_through(&tx, device)?;
        tx.execute(
            "UPDATE sync_peers SET seen_at = ?2 WHERE device = ?1",
            params![device, now_ms()],
        )?;
        tx.execute("UPDATE sync_state SET applying = 0", [])?;
        tx.commit()?;
        for file in &fx.files_to_remove {
            self.remove_snapshot_file(file);
        }
        self.remove_image_files(&pictures);
        Ok(fx.applied)
    }

    /// Write `progress.json` when it changed, is a day old, or this round `wrote` segments (so
    /// that another copy of this database writing under the same id sees a mark it does not
    /// know: `identity`).
    fn publish_progress(
        &self,
        mine: &Path,
        device: &str,
        opts: &SyncOptions,
        wrote: bool,
    ) -> Result<()> {
        let through = {
            let mut stmt = self
                .conn
                .prepare("SELECT device, through FROM sync_peers")?;
            let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get::<_, i64>(1)? as u64)))?;
            rows.collect::<rusqlite::Result<_>>()?
        };
        let path = mine.join("progress.json");
        // unchanged, and said within the day: not written again, so that a round here does not
        // look like news to the other devices (each would then run a round that writes its own)
        if !wrote
            && let Ok(bytes) = opts.io.read(&path)
            && let Ok(old) = serde_json::from_slice::<Progress>(&bytes)
            && old.through == through
            && old.written_at > now_ms() - PROGRESS_REFRESH_MS
        {
            return Ok(());
        }
        let progress = Progress {
            companion_sync: folder::FORMAT,
            device: device.to_string(),
            through,
            written_at: now_ms(),
            mark: Some(self.new_progress_mark()?),
        };
        let bytes = serde_json::to_vec_pretty(&progress).unwrap_or_default();
        opts.io
            .write_atomic(&path, &bytes)
            .map_err(|e| Error::io("write", &path, e))
    }

    /// Fold this device's segments that every recently seen device has applied into one
    /// snapshot of the whole state, then delete them (and older snapshots).
    fn fold_own_segments(
        &self,
        root: &Path,
        device: &str,
        opts: &SyncOptions,
    ) -> Result<Option<u64>> {
        let mine = root.join(device);
        let own: Vec<(FileKind, String)> = opts
            .io
            .list(&mine)
            .map_err(|e| Error::io("read", &mine, e))?
            .into_iter()
            .filter_map(|n| folder::parse_name(&n).map(|k| (k, n)))
            .collect();
        // a file numbered past what this database gave out is another copy's, written since
        // this round began (`identity` takes a new id next round): fold nothing now
        let given_out = state(&self.conn)?.next_segment;
        if own.iter().any(|(k, _)| match k {
            FileKind::Segment(n) | FileKind::Snapshot(n) => *n >= given_out,
        }) {
            return Ok(None);
        }
        let last_segment = own
            .iter()
            .filter_map(|(k, _)| match k {
                FileKind::Segment(n) => Some(*n),
                _ => None,
            })
            .max()
            .unwrap_or(0);
        let snapshot = own
            .iter()
            .filter_map(|(k, _)| match k {
                FileKind::Snapshot(n) => Some(*n),
                _ => None,
            })
            .max()
            .unwrap_or(0);
        // how far every device seen lately has applied ours; a device whose progress cannot
        // be read holds compaction back
        let mut everywhere = last_segment;
        for other in opts.io.list(root).map_err(|e| Error::io("read", root, e))? {
            if !folder::is_device_id(&other) || other == device {
                continue;
            }
            let path = root.join(&other).join("progress.json");
            let progress: Option<Progress> = match opts.io.read(&path) {
                Ok(bytes) => serde_json::from_slice(&bytes).ok(),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(_) => None,
            };
            match progress {
                Some(p) if p.written_at < now_ms() - opts.peer_expiry_ms => continue,
                Some(p) => everywhere = everywhere.min(p.through.get(device).copied().unwrap_or(0)),
                None => return Ok(None),
            }
        }
        if everywhere < snapshot + opts.compact_after || everywhere == 0 {
            return Ok(None);
        }
        let records = export::whole_state(&self.conn, &self.images)?;
        let name = folder::file_name(FileKind::Snapshot(everywhere));
        let path = mine.join(&name);
        let bytes = folder::encode(device, FileKind::Snapshot(everywhere), &records);
        opts.io
            .write_atomic(&path, &bytes)
            .map_err(|e| Error::io("write", &path, e))?;
        for (kind, file) in own {
            let old = match kind {
                FileKind::Segment(n) => n <= everywhere,
                FileKind::Snapshot(n) => n < everywhere,
            };
            if old {
                let path = mine.join(file);
                opts.io
                    .remove(&path)
                    .map_err(|e| Error::io("remove", &path, e))?;
            }
        }
        Ok(Some(everywhere))
    }

    /// Where sync stands, for `companion sync status` and the app's settings.
    pub fn sync_status(&self) -> Result<SyncStatus> {
        let st = state(&self.conn)?;
        let (folder, last_round_at, last_error): (Option<String>, Option<i64>, Option<String>) =
            self.conn.query_row(
                "SELECT folder, last_round_at, last_error FROM sync_state",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )?;
        let (rows, _) = export::changed_since(&self.conn, &st.device, st.exported)?;
        let waiting = self
            .conn
            .query_row("SELECT count(*) FROM sync_pending", [], |r| {
                r.get::<_, i64>(0)
            })? as usize;
        let peers = {
            let mut stmt = self
                .conn
                .prepare("SELECT device, through, seen_at FROM sync_peers ORDER BY device")?;
            let rows = stmt.query_map([], |r| {
                Ok(Peer {
                    device: r.get(0)?,
                    through: r.get::<_, i64>(1)? as u64,
                    seen_at: r.get(2)?,
                })
            })?;
            rows.collect::<rusqlite::Result<_>>()?
        };
        Ok(SyncStatus {
            device: st.device,
            folder,
            last_round_at,
            last_error,
            unsent: rows.len(),
            waiting,
            peers,
        })
    }

    /// Sync with `folder` from now on (the app's background rounds follow it), or stop
    /// (`None`): nothing already written in the folder is removed.
    pub fn set_sync_folder(&self, folder: Option<&Path>) -> Result<()> {
        self.conn.execute(
            "UPDATE sync_state SET folder = ?1, last_error = NULL",
            [folder.map(|f| f.display().to_string())],
        )?;
        Ok(())
    }

    /// The folder of the last round (or the one set), if any.
    pub fn sync_folder(&self) -> Result<Option<PathBuf>> {
        Ok(self
            .conn
            .query_row("SELECT folder FROM sync_state", [], |r| {
                r.get::<_, Option<String>>(0)
            })?
            .map(PathBuf::from))
    }
}

/// Apply what waited for a parent, as long as that makes progress.
fn retry_pending(tx: &Transaction<'_>, images: &ImageFolder, fx: &mut Effects) -> Result<()> {
    loop {
        let waiting: Vec<(String, String)> = {
            let mut stmt = tx.prepare("SELECT parent, record FROM sync_pending")?;
            let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
            rows.collect::<rusqlite::Result<_>>()?
        };
        let mut progress = false;
        for (parent, text) in waiting {
            let done = match serde_json::from_str::<Record>(&text) {
                Ok(record) => {
                    !matches!(apply::apply(tx, images, &record, fx)?, Outcome::Waiting(_))
                }
                Err(_) => true,
            };
            if done {
                tx.execute(
                    "DELETE FROM sync_pending WHERE parent = ?1 AND record = ?2",
                    params![parent, text],
                )?;
                progress = true;
            }
        }
        if !progress {
            return Ok(());
        }
    }
}

/// Move a device's `through` past every segment applied in sequence after it.
fn advance_through(tx: &Transaction<'_>, device: &str) -> Result<()> {
    let mut through: i64 = tx.query_row(
        "SELECT through FROM sync_peers WHERE device = ?1",
        [device],
        |r| r.get(0),
    )?;
    loop {
        let next = tx
            .query_row(
                "SELECT 1 FROM sync_applied WHERE device = ?1 AND segment = ?2",
                params![device, through + 1],
                |_| Ok(()),
            )
            .optional()?;
        if next.is_none() {
            break;
        }
        through += 1;
    }
    tx.execute(
        "UPDATE sync_peers SET through = ?2 WHERE device = ?1",
        params![device, through],
    )?;
    tx.execute(
        "DELETE FROM sync_applied WHERE device = ?1 AND segment <= ?2",
        params![device, through],
    )?;
    Ok(())
}

/// The schema upgrade to version 7 stamps the rows that were there before, as this device's
/// changes, so that the first round writes them all. Messages are stamped in their order.
pub(crate) fn stamp_existing_rows(conn: &rusqlite::Connection) -> Result<()> {
    let device: String = conn.query_row("SELECT device FROM sync_state", [], |r| r.get(0))?;
    let mut clock: u64 = 0;
    let mut stamp = |conn: &rusqlite::Connection,
                     kind: &str,
                     uid: &str,
                     fields: &[&str],
                     at_ms: i64|
     -> Result<()> {
        clock = (clock + 1).max(clock::from_millis(at_ms));
        for f in fields {
            conn.execute(
                "INSERT OR REPLACE INTO sync_clocks (kind, uid, field, hlc, device)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![kind, uid, f, clock as i64, device],
            )?;
        }
        Ok(())
    };
    let rows = |sql: &str| -> Result<Vec<(String, i64)>> {
        let mut stmt = conn.prepare(sql)?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    };
    for (uid, at) in rows("SELECT id, created_at FROM conversations ORDER BY created_at")? {
        stamp(
            conn,
            "conversation",
            &uid,
            &["created", "title", "pinned", "settings"],
            at,
        )?;
    }
    for (uid, at) in rows("SELECT uid, created_at FROM messages ORDER BY conversation_id, seq")? {
        stamp(conn, "message", &uid, &["created", "body"], at)?;
    }
    for (uid, at) in rows("SELECT uid, created_at FROM summaries ORDER BY id")? {
        stamp(conn, "summary", &uid, &["created"], at)?;
    }
    for (uid, at) in rows("SELECT uid, created_at FROM notes ORDER BY id")? {
        stamp(conn, "note", &uid, &["created", "title", "text"], at)?;
    }
    for (uid, at) in rows("SELECT uid, created_at FROM reminders ORDER BY id")? {
        stamp(conn, "reminder", &uid, &["created", "state"], at)?;
    }
    for (uid, at) in rows("SELECT uid, created_at FROM tool_calls ORDER BY id")? {
        stamp(conn, "tool_call", &uid, &["created"], at)?;
    }
    conn.execute("UPDATE sync_state SET clock = ?1", [clock as i64])?;
    Ok(())
}
