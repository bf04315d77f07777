//! A database that finds itself copied: a backup restored onto a new phone (while the old one
//! goes on, or after it wrote more), a database file copied to a second Mac. Two copies share
//! one device id, so each would take the other's files for its own and never apply them, and
//! one copy folding "its" segments into a snapshot would delete the other's.
//!
//! A copy shows itself by a file in its own directory with a number it never gave out: this
//! database numbers its files below `next_segment` (raised in the transaction that writes them
//! into `sync_outgoing`, before any reaches the folder), so a segment or snapshot numbered at
//! or above it was written by another copy — or by this database before it was rolled back to
//! an older state, which is the same thing. The copy that sees it takes a new device id and
//! sends its whole state under it (every row and tombstone, with their stamps: applying it
//! again anywhere changes nothing that is already there); the old id's directory is then
//! another device's to it, so it applies what the other copy wrote, including changes made
//! after the backup it was restored from. A false alarm costs one full export.

use super::folder::{self, FileKind};
use super::outgoing::queue_segments;
use super::{SyncOptions, export, state};
use crate::error::Result;
use crate::store::Store;

impl Store {
    /// When `own_files` (the names in this device's directory) show that another copy of this
    /// database writes there, take a new device id and queue the whole state in
    /// `sync_outgoing` under it; returns the previous id. One transaction: a kill leaves the
    /// old identity or the new one with everything queued.
    pub(super) fn new_identity_if_copied(
        &self,
        own_files: &[String],
        opts: &SyncOptions,
    ) -> Result<Option<String>> {
        self.in_transaction(|tx| {
            let st = state(tx)?;
            let foreign = own_files.iter().find(|n| match folder::parse_name(n) {
                Some(FileKind::Segment(k)) | Some(FileKind::Snapshot(k)) => k >= st.next_segment,
                None => false,
            });
            let Some(foreign) = foreign else {
                return Ok(None);
            };
            tracing::warn!(
                device = %st.device,
                file = %foreign,
                "this database was copied (a file in its sync directory has a number it never gave out): it takes a new device id"
            );
            // what was queued under the old id is part of the whole state sent below
            tx.execute("DELETE FROM sync_outgoing", [])?;
            tx.execute(
                "UPDATE sync_state SET device = lower(hex(randomblob(8))), exported = 0",
                [],
            )?;
            let device = state(tx)?.device;
            let records = export::whole_state(tx)?;
            let queued = queue_segments(tx, &device, 1, &records, opts)?;
            tx.execute(
                "UPDATE sync_state SET next_segment = ?1",
                [1 + queued.len() as i64],
            )?;
            Ok(Some(st.device))
        })
    }
}
