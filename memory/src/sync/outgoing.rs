//! This device's outgoing files: its changes read into segments that wait in the database
//! (`sync_outgoing`) until they are in the folder, so a kill between the two writes them
//! later under the same names and with the same bytes.

use std::path::Path;

use rusqlite::{Transaction, params};

use super::folder::{self, FileKind};
use super::record::Record;
use super::{SyncOptions, SyncReport, export, state};
use crate::error::{Error, Result};
use crate::store::Store;

/// About this many bytes of pictures per segment at most (one message's may pass it), so that
/// a round with many pictures writes several files of a size a phone reads comfortably,
/// rather than one that could pass [`SyncOptions::max_file_bytes`].
const PICTURE_BYTES_PER_SEGMENT: usize = 64 << 20;

/// Queue `records` as segments `first`, `first + 1`, … of `device` (at most
/// `records_per_segment` records and about [`PICTURE_BYTES_PER_SEGMENT`] of pictures each);
/// returns their names.
pub(super) fn queue_segments(
    tx: &Transaction<'_>,
    device: &str,
    first: u64,
    records: &[Record],
    opts: &SyncOptions,
) -> Result<Vec<String>> {
    let mut chunks: Vec<&[Record]> = Vec::new();
    let (mut start, mut pictures) = (0, 0);
    for (i, r) in records.iter().enumerate() {
        let full = i - start >= opts.records_per_segment.max(1)
            || (i > start && pictures + r.picture_bytes() > PICTURE_BYTES_PER_SEGMENT);
        if full {
            chunks.push(&records[start..i]);
            (start, pictures) = (i, 0);
        }
        pictures += r.picture_bytes();
    }
    if start < records.len() {
        chunks.push(&records[start..]);
    }
    let mut names = Vec::new();
    for (i, chunk) in chunks.into_iter().enumerate() {
        let kind = FileKind::Segment(first + i as u64);
        let name = folder::file_name(kind);
        tx.execute(
            "INSERT OR REPLACE INTO sync_outgoing (name, bytes) VALUES (?1, ?2)",
            params![name, folder::encode(device, kind, chunk)],
        )?;
        names.push(name);
    }
    Ok(names)
}

impl Store {
    /// Read this device's changes since its last segment into new segments, kept in the
    /// database until they are in the folder (so a kill between the two writes them later,
    /// under the same names and with the same bytes).
    pub(super) fn export_changes(
        &self,
        own_files: &[String],
        opts: &SyncOptions,
        report: &mut SyncReport,
    ) -> Result<()> {
        self.in_transaction(|tx| {
            let st = state(tx)?;
            let (rows, newest) = export::changed_since(tx, &st.device, st.exported)?;
            if rows.is_empty() {
                return Ok(());
            }
            let mut records = Vec::new();
            for (kind, uid) in rows {
                records.extend(export::records_for(tx, &self.images, kind, &uid)?);
            }
            export::sort_for_writing(&mut records);
            // never reuse a number already in the folder: other devices would take it as
            // applied (a number at or above `next_segment` made this database take a new id
            // above, so this only guards against a directory changed under it since)
            let in_folder = own_files
                .iter()
                .filter_map(|n| match folder::parse_name(n) {
                    Some(FileKind::Segment(n)) | Some(FileKind::Snapshot(n)) => Some(n),
                    None => None,
                })
                .max()
                .unwrap_or(0);
            let first = st.next_segment.max(in_folder + 1);
            let names = queue_segments(tx, &st.device, first, &records, opts)?;
            let next = first + names.len() as u64;
            for name in names {
                report
                    .wrote
                    .push(format!("{}/{}/{name}", folder::ROOT, st.device));
            }
            report.wrote_records += records.len();
            tx.execute(
                "UPDATE sync_state SET exported = ?1, next_segment = ?2",
                params![newest as i64, next as i64],
            )?;
            Ok(())
        })
    }

    pub(super) fn flush_outgoing(&self, mine: &Path, opts: &SyncOptions) -> Result<()> {
        let outgoing: Vec<(String, Vec<u8>)> = {
            let mut stmt = self
                .conn
                .prepare("SELECT name, bytes FROM sync_outgoing ORDER BY name")?;
            let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
            rows.collect::<rusqlite::Result<_>>()?
        };
        for (name, bytes) in outgoing {
            let path = mine.join(&name);
            opts.io
                .write_atomic(&path, &bytes)
                .map_err(|e| Error::io("write", &path, e))?;
            self.conn
                .execute("DELETE FROM sync_outgoing WHERE name = ?1", [&name])?;
        }
        Ok(())
    }
}
