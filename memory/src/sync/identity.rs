//! A database that finds itself copied: a backup restored onto a new phone (while the old one
//! goes on, or after it wrote more), a database file copied to a second Mac. Two copies share
//! one device id, so each would take the other's files for its own and never apply them, and
//! one copy folding "its" segments into a snapshot would delete the other's.
//!
//! A copy shows itself in its own directory in one of two ways:
//! - a file with a number this database never gave out: it numbers its files below
//!   `next_segment` (raised in the transaction that queues them in `sync_outgoing`, before any
//!   reaches the folder), so a segment or snapshot numbered at or above it was written by
//!   another copy — or by this database before it was rolled back to an older state, which is
//!   the same thing;
//! - a `progress.json` whose mark this database did not write: each write of it carries a new
//!   random mark, remembered (the last [`MARKS_KEPT`]) in `sync_state.progress_marks` before the
//!   file is written, and a round that wrote segments always writes it. Two live copies that
//!   wrote the same segment number at once (the folder keeping one of them, or both as a
//!   conflict copy) are told apart by this, which numbers alone cannot do.
//!
//! The copy that sees either takes a new device id and
//! sends its whole state under it (every row and tombstone, with their stamps: applying it
//! again anywhere changes nothing that is already there); the old id's directory is then
//! another device's to it, so it applies what the other copy wrote, including changes made
//! after the backup it was restored from. A false alarm costs one full export.

use super::folder::{self, FileKind};
use std::path::Path;

use super::folder::Progress;
use super::outgoing::queue_segments;
use super::{SyncOptions, export, state};
use crate::error::Result;
use crate::store::Store;

/// How many of its last `progress.json` marks a database recognises: more than the two a
/// kill between remembering a mark and writing the file needs, so that a database pointed back
/// to a folder it left a while ago still knows its own file there.
pub(super) const MARKS_KEPT: usize = 16;

/// A new identity taken by [`Store::new_identity_if_copied`].
pub(super) struct NewIdentity {
    /// The device id this database had.
    pub previous: String,
    /// The segments queued under the new id (names), and the records in them.
    pub files: Vec<String>,
    pub records: usize,
}

impl Store {
    /// When `own_files` (the names in this device's directory `own_dir`) or its
    /// `progress.json` show that another copy of this database writes there, take a new device
    /// id and queue the whole state in `sync_outgoing` under it. One transaction: a kill leaves
    /// the old identity or the new one with everything queued.
    pub(super) fn new_identity_if_copied(
        &self,
        own_dir: &Path,
        own_files: &[String],
        opts: &SyncOptions,
    ) -> Result<Option<NewIdentity>> {
        // an unreadable or half-written progress file proves nothing: read again next round
        let progress_mark = opts
            .io
            .read(&own_dir.join("progress.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<Progress>(&b).ok())
            .and_then(|p| p.mark);
        self.in_transaction(|tx| {
            let st = state(tx)?;
            let numbered = own_files.iter().find(|n| match folder::parse_name(n) {
                Some(FileKind::Segment(k)) | Some(FileKind::Snapshot(k)) => k >= st.next_segment,
                None => false,
            });
            let marks = progress_marks(tx)?;
            let marked = progress_mark
                .as_ref()
                .filter(|m| !marks.contains(m))
                .map(|_| "progress.json");
            let Some(foreign) = numbered.map(String::as_str).or(marked) else {
                return Ok(None);
            };
            tracing::warn!(
                device = %st.device,
                file = %foreign,
                "this database was copied (another copy wrote in its sync directory): it takes a new device id"
            );
            // what was queued under the old id is part of the whole state sent below
            tx.execute("DELETE FROM sync_outgoing", [])?;
            tx.execute(
                "UPDATE sync_state SET device = lower(hex(randomblob(8))), exported = 0",
                [],
            )?;
            let device = state(tx)?.device;
            let records = export::whole_state(tx, &self.images)?;
            let files = queue_segments(tx, &device, 1, &records, opts)?;
            tx.execute(
                "UPDATE sync_state SET next_segment = ?1",
                [1 + files.len() as i64],
            )?;
            Ok(Some(NewIdentity {
                previous: st.device,
                files,
                records: records.len(),
            }))
        })
    }

    /// A new mark for `progress.json`, remembered before the file is written.
    pub(super) fn new_progress_mark(&self) -> Result<String> {
        self.in_transaction(|tx| {
            let mark: String =
                tx.query_row("SELECT lower(hex(randomblob(8)))", [], |r| r.get(0))?;
            let mut marks = progress_marks(tx)?;
            marks.push(mark.clone());
            let keep = marks.len().saturating_sub(MARKS_KEPT);
            tx.execute(
                "UPDATE sync_state SET progress_marks = ?1",
                [marks[keep..].join(" ")],
            )?;
            Ok(mark)
        })
    }
}

/// The marks of this database's last `progress.json` writes, oldest first.
fn progress_marks(conn: &rusqlite::Connection) -> Result<Vec<String>> {
    let marks: String =
        conn.query_row("SELECT progress_marks FROM sync_state", [], |r| r.get(0))?;
    Ok(marks.split_whitespace().map(str::to_string).collect())
}
