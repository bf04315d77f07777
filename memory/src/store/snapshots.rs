//! L3 KV snapshots: the engine's snapshot bytes (opaque here) in one file per conversation in
//! a folder beside the database, with a row that says what they were made with. A file is
//! written durably (temporary name, sync, rename, sync of the folder: `files.rs`) before its
//! row is committed, so a crash — power loss included — leaves either the old snapshot or the
//! new one, never half of one, and a snapshot reported saved is there after it; files without
//! a row are swept at open.
//!
//! File names are built only from valid conversation ids (UUIDs, see
//! [`ConversationId::is_valid`]) and a name read back from a row is used only when it is one
//! this code could have made, so no id or row can name a path outside the folder. Snapshots
//! are invalidated when the model or the format changes, and the least recently used are
//! pruned beyond the disk budget.

use std::path::PathBuf;

use rusqlite::{OptionalExtension, params};

use super::Store;
use super::files::write_durably;
use crate::error::{Error, Result};
use crate::types::{ConversationId, SnapshotInfo, SnapshotKey, now_ms};

const EXTENSION: &str = "kv";

impl Store {
    /// Store `bytes` as the conversation's snapshot (replacing any previous one), then prune
    /// others beyond the disk budget. Returns false when the snapshot alone exceeds the budget
    /// and was therefore not kept.
    pub fn save_snapshot(
        &self,
        conversation: &ConversationId,
        key: &SnapshotKey,
        token_count: i64,
        bytes: &[u8],
    ) -> Result<bool> {
        if bytes.len() as u64 > self.snapshot_budget_bytes {
            tracing::info!(
                bytes = bytes.len(),
                "snapshot larger than the disk budget; not kept"
            );
            self.delete_snapshot(conversation)?;
            return Ok(false);
        }
        self.conversation(conversation)?;
        let name = snapshot_file_name(conversation)?;
        let now = now_ms();
        let dir = &self.snapshot_dir;
        let target = dir.join(&name);
        write_durably(&*self.files, dir, &name, &format!("{name}.tmp"), bytes)
            .map_err(|e| Error::io("write the snapshot", &target, e))?;
        let old = self.in_transaction(|tx| {
            let old = take_snapshot_row(tx, conversation)?;
            tx.execute(
                "INSERT INTO kv_snapshots (conversation_id, model_sha256, format_version,
                    token_count, byte_count, file, created_at, last_used_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7)",
                params![
                    conversation.as_str(),
                    key.model_sha256,
                    key.format_version,
                    token_count,
                    bytes.len() as i64,
                    name,
                    now
                ],
            )?;
            Ok(old)
        });
        let old = match old {
            Ok(old) => old,
            Err(e) => {
                self.remove_snapshot_file(&name);
                return Err(e);
            }
        };
        if let Some(old) = old.filter(|o| *o != name) {
            self.remove_snapshot_file(&old);
        }
        self.prune_snapshots()?;
        Ok(true)
    }

    /// The conversation's snapshot bytes when one exists and was made with `key`. A snapshot
    /// made with another model or format is deleted; an unreadable file is forgotten.
    pub fn load_snapshot(
        &self,
        conversation: &ConversationId,
        key: &SnapshotKey,
    ) -> Result<Option<Vec<u8>>> {
        let Some(info) = self.snapshot_info(conversation)? else {
            return Ok(None);
        };
        if info.key != *key {
            tracing::info!(conversation = %conversation, "snapshot made with another model or format; dropped");
            self.delete_snapshot(conversation)?;
            return Ok(None);
        }
        let file: String = self.conn.query_row(
            "SELECT file FROM kv_snapshots WHERE conversation_id = ?1",
            [conversation.as_str()],
            |r| r.get(0),
        )?;
        let read = match self.snapshot_path(&file) {
            Some(path) => self.files.read(&path),
            None => Err(std::io::ErrorKind::InvalidData.into()),
        };
        match read {
            Ok(bytes) if bytes.len() as i64 == info.byte_count => {
                self.conn.execute(
                    "UPDATE kv_snapshots SET last_used_at = ?2 WHERE conversation_id = ?1",
                    params![conversation.as_str(), now_ms()],
                )?;
                Ok(Some(bytes))
            }
            Ok(_) | Err(_) => {
                tracing::warn!(conversation = %conversation, file, "snapshot file missing or damaged; dropped");
                self.delete_snapshot(conversation)?;
                Ok(None)
            }
        }
    }

    pub fn snapshot_info(&self, conversation: &ConversationId) -> Result<Option<SnapshotInfo>> {
        Ok(self
            .conn
            .query_row(
                "SELECT model_sha256, format_version, token_count, byte_count, created_at, last_used_at
                 FROM kv_snapshots WHERE conversation_id = ?1",
                [conversation.as_str()],
                |r| {
                    Ok(SnapshotInfo {
                        conversation_id: conversation.clone(),
                        key: SnapshotKey {
                            model_sha256: r.get(0)?,
                            format_version: r.get(1)?,
                        },
                        token_count: r.get(2)?,
                        byte_count: r.get(3)?,
                        created_at: r.get(4)?,
                        last_used_at: r.get(5)?,
                    })
                },
            )
            .optional()?)
    }

    pub fn delete_snapshot(&self, conversation: &ConversationId) -> Result<()> {
        let file = self.in_transaction(|tx| take_snapshot_row(tx, conversation))?;
        if let Some(file) = file {
            self.remove_snapshot_file(&file);
        }
        Ok(())
    }

    /// Drop every snapshot not made with `key` (the model or the format changed). Returns how
    /// many were dropped.
    pub fn invalidate_snapshots(&self, key: &SnapshotKey) -> Result<usize> {
        let stale: Vec<String> = {
            let mut stmt = self.conn.prepare(
                "SELECT conversation_id FROM kv_snapshots
                 WHERE model_sha256 != ?1 OR format_version != ?2",
            )?;
            stmt.query_map(params![key.model_sha256, key.format_version], |r| r.get(0))?
                .collect::<rusqlite::Result<_>>()?
        };
        for id in &stale {
            self.delete_snapshot(&ConversationId(id.clone()))?;
        }
        Ok(stale.len())
    }

    /// Bytes all snapshots take on disk.
    pub fn snapshot_bytes(&self) -> Result<i64> {
        Ok(self.conn.query_row(
            "SELECT coalesce(sum(byte_count), 0) FROM kv_snapshots",
            [],
            |r| r.get(0),
        )?)
    }

    /// Delete the least recently used snapshots until the rest fit the budget.
    fn prune_snapshots(&self) -> Result<()> {
        let rows: Vec<(String, i64)> = {
            let mut stmt = self.conn.prepare(
                "SELECT conversation_id, byte_count FROM kv_snapshots ORDER BY last_used_at DESC, created_at DESC",
            )?;
            stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<rusqlite::Result<_>>()?
        };
        let mut total: u64 = 0;
        for (id, bytes) in rows {
            total += bytes.max(0) as u64;
            if total > self.snapshot_budget_bytes {
                tracing::info!(conversation = id, "snapshot pruned (disk budget)");
                self.delete_snapshot(&ConversationId(id))?;
            }
        }
        Ok(())
    }

    /// The path of the snapshot file `file` names, when it is a name this code makes.
    fn snapshot_path(&self, file: &str) -> Option<PathBuf> {
        if is_snapshot_file_name(file) {
            Some(self.snapshot_dir.join(file))
        } else {
            tracing::warn!("a snapshot row names a file outside the snapshot folder; ignored");
            None
        }
    }

    pub(crate) fn remove_snapshot_file(&self, file: &str) {
        let Some(path) = self.snapshot_path(file) else {
            return;
        };
        if let Err(e) = self.files.remove(&path)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(path = %path.display(), error = %e, "cannot remove a snapshot file");
        }
    }

    /// Remove files in the snapshot folder that no row references (a crash between writing a
    /// file and committing its row, or between committing and removing the old file).
    pub(crate) fn sweep_snapshot_files(&self) -> Result<()> {
        let Ok(entries) = self.files.list(&self.snapshot_dir) else {
            return Ok(());
        };
        let known: std::collections::HashSet<String> = {
            let mut stmt = self.conn.prepare("SELECT file FROM kv_snapshots")?;
            stmt.query_map([], |r| r.get(0))?
                .collect::<rusqlite::Result<_>>()?
        };
        for name in entries {
            if is_snapshot_file_name(&name) && !known.contains(&name) {
                self.remove_snapshot_file(&name);
            }
        }
        Ok(())
    }
}

/// A new file name for the conversation's snapshot: its id, then a fresh random part, so no two
/// saves share a name (a crash between a rename and its row's commit must not leave an old row
/// naming new bytes). Refuses an id that is not valid: ids reach file names only from here.
fn snapshot_file_name(conversation: &ConversationId) -> Result<String> {
    if !conversation.is_valid() {
        return Err(Error::InvalidArgument(
            "this conversation's id is not a valid one, so its snapshot cannot be stored".into(),
        ));
    }
    let unique = uuid::Uuid::new_v4().simple();
    Ok(format!("{}-{unique}.{EXTENSION}", conversation.as_str()))
}

/// Whether `name` is one [`snapshot_file_name`] makes (or its temporary name): letters, digits,
/// `-` and `.` only, not starting with a dot, ending `.kv` or `.kv.tmp`. Such a name cannot
/// leave the snapshot folder.
fn is_snapshot_file_name(name: &str) -> bool {
    !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
        && (name.ends_with(&format!(".{EXTENSION}"))
            || name.ends_with(&format!(".{EXTENSION}.tmp")))
}

/// Delete the conversation's snapshot row inside `tx`; returns its file for removal after
/// the commit.
pub(crate) fn take_snapshot_row(
    tx: &rusqlite::Transaction<'_>,
    conversation: &ConversationId,
) -> Result<Option<String>> {
    let file: Option<String> = tx
        .query_row(
            "SELECT file FROM kv_snapshots WHERE conversation_id = ?1",
            [conversation.as_str()],
            |r| r.get(0),
        )
        .optional()?;
    tx.execute(
        "DELETE FROM kv_snapshots WHERE conversation_id = ?1",
        [conversation.as_str()],
    )?;
    Ok(file)
}
