//! Documents and their chunk summaries: the durable half of a map-reduce summarization job.
//! A document is identified by what was read and how — the content's SHA-256, the model and
//! the job's settings (`UNIQUE (sha256, model, settings)`) — not by its path, so a renamed
//! file is still known and an edited one is new. Each chunk summary is committed as soon as it
//! is made, so a cancelled or crashed job loses at most the chunk in progress; a document with
//! a final summary is finished and is not summarized again unless the caller resets it.

use rusqlite::{OptionalExtension, params};
use serde::{Deserialize, Serialize};

use super::Store;
use crate::error::{Error, Result};
use crate::types::{DocumentId, now_ms};

/// What makes two summarizations the same job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DocumentKey {
    /// SHA-256 of the file's bytes, lowercase hex.
    pub sha256: String,
    /// The model that summarizes (e.g. its file's SHA-256).
    pub model: String,
    /// Everything else that changes the result (context, summary length, prompt version), as
    /// canonical JSON.
    pub settings: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DocumentRecord {
    pub id: DocumentId,
    /// Where the file was last read from.
    pub path: String,
    pub key: DocumentKey,
    pub byte_count: u64,
    /// Level-0 chunks, once known.
    pub chunk_count: Option<usize>,
    /// The final summary; `None` while the job is unfinished.
    pub summary: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
}

/// One stored summary: of chunk `idx` of the document (level 0), or of group `idx` of the
/// summaries of level `level - 1`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChunkSummary {
    pub level: usize,
    pub idx: usize,
    /// Tokens of the text that was summarized.
    pub input_tokens: usize,
    pub summary: String,
}

/// Totals over a document's stored summaries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DocumentTotals {
    /// Levels of summaries (level 0: the chunks').
    pub levels: usize,
    /// Tokens of the text the level-0 summaries summarized.
    pub input_tokens: usize,
    /// Summaries of every level.
    pub summaries: usize,
}

const COLUMNS: &str =
    "id, path, sha256, model, settings, byte_count, chunk_count, summary, created_at, updated_at";

fn record(r: &rusqlite::Row<'_>) -> rusqlite::Result<DocumentRecord> {
    Ok(DocumentRecord {
        id: DocumentId(r.get(0)?),
        path: r.get(1)?,
        key: DocumentKey {
            sha256: r.get(2)?,
            model: r.get(3)?,
            settings: r.get(4)?,
        },
        byte_count: r.get::<_, i64>(5)?.max(0) as u64,
        chunk_count: r.get::<_, Option<i64>>(6)?.map(|n| n.max(0) as usize),
        summary: r.get(7)?,
        created_at: r.get(8)?,
        updated_at: r.get(9)?,
    })
}

impl Store {
    /// The job for `key`: the existing row (its path brought up to date) or a new one.
    pub fn open_document(
        &self,
        key: &DocumentKey,
        path: &str,
        byte_count: u64,
    ) -> Result<DocumentRecord> {
        let now = now_ms();
        self.in_transaction(|tx| {
            tx.execute(
                "INSERT INTO documents (path, sha256, byte_count, model, settings, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)
                 ON CONFLICT (sha256, model, settings) DO UPDATE SET path = excluded.path",
                params![path, key.sha256, byte_count as i64, key.model, key.settings, now],
            )?;
            Ok(())
        })?;
        self.find_document(key)?.ok_or_else(|| {
            Error::InvalidArgument(format!("document {} vanished while opened", key.sha256))
        })
    }

    /// The document row for `key`, finished or not.
    pub fn find_document(&self, key: &DocumentKey) -> Result<Option<DocumentRecord>> {
        Ok(self
            .conn
            .query_row(
                &format!(
                    "SELECT {COLUMNS} FROM documents WHERE sha256 = ?1 AND model = ?2 AND settings = ?3"
                ),
                params![key.sha256, key.model, key.settings],
                record,
            )
            .optional()?)
    }

    /// The finished summary for `key`, if this content was already summarized this way.
    pub fn finished_document(&self, key: &DocumentKey) -> Result<Option<DocumentRecord>> {
        Ok(self.find_document(key)?.filter(|d| d.summary.is_some()))
    }

    /// Every document, most recently updated first.
    pub fn documents(&self) -> Result<Vec<DocumentRecord>> {
        let mut stmt = self.conn.prepare(&format!(
            "SELECT {COLUMNS} FROM documents ORDER BY updated_at DESC, id DESC"
        ))?;
        let rows = stmt.query_map([], record)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Record how many level-0 chunks the document has.
    pub fn set_document_chunk_count(&self, id: DocumentId, chunk_count: usize) -> Result<()> {
        self.touch_document(
            "UPDATE documents SET chunk_count = ?2, updated_at = ?3 WHERE id = ?1",
            id,
            chunk_count as i64,
        )
    }

    /// Store one chunk summary at once (replacing one at the same level and index).
    pub fn put_chunk_summary(&self, id: DocumentId, chunk: &ChunkSummary) -> Result<()> {
        let now = now_ms();
        self.in_transaction(|tx| {
            tx.execute(
                "INSERT OR REPLACE INTO document_chunks (document_id, level, idx, input_tokens, summary, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    id.0,
                    chunk.level as i64,
                    chunk.idx as i64,
                    chunk.input_tokens as i64,
                    chunk.summary,
                    now
                ],
            )?;
            tx.execute(
                "UPDATE documents SET updated_at = ?2 WHERE id = ?1",
                params![id.0, now],
            )?;
            Ok(())
        })
    }

    /// The stored chunk summaries, by level then index: what a resumed job need not redo.
    pub fn chunk_summaries(&self, id: DocumentId) -> Result<Vec<ChunkSummary>> {
        let mut stmt = self.conn.prepare(
            "SELECT level, idx, input_tokens, summary FROM document_chunks
             WHERE document_id = ?1 ORDER BY level, idx",
        )?;
        let rows = stmt.query_map([id.0], |r| {
            Ok(ChunkSummary {
                level: r.get::<_, i64>(0)?.max(0) as usize,
                idx: r.get::<_, i64>(1)?.max(0) as usize,
                input_tokens: r.get::<_, i64>(2)?.max(0) as usize,
                summary: r.get(3)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// One stored summary, or `None` when it has not been made yet: what a streaming job reads
    /// instead of holding a whole level in memory.
    pub fn chunk_summary(
        &self,
        id: DocumentId,
        level: usize,
        idx: usize,
    ) -> Result<Option<ChunkSummary>> {
        Ok(self
            .conn
            .query_row(
                "SELECT input_tokens, summary FROM document_chunks
                 WHERE document_id = ?1 AND level = ?2 AND idx = ?3",
                params![id.0, level as i64, idx as i64],
                |r| {
                    Ok(ChunkSummary {
                        level,
                        idx,
                        input_tokens: r.get::<_, i64>(0)?.max(0) as usize,
                        summary: r.get(1)?,
                    })
                },
            )
            .optional()?)
    }

    /// What the document's stored summaries add up to, counted by SQLite rather than by
    /// loading every summary.
    pub fn document_totals(&self, id: DocumentId) -> Result<DocumentTotals> {
        let (levels, tokens, summaries): (Option<i64>, Option<i64>, i64) = self.conn.query_row(
            "SELECT MAX(level) + 1, SUM(CASE WHEN level = 0 THEN input_tokens END), COUNT(*)
             FROM document_chunks WHERE document_id = ?1",
            [id.0],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )?;
        Ok(DocumentTotals {
            levels: levels.unwrap_or(0).max(0) as usize,
            input_tokens: tokens.unwrap_or(0).max(0) as usize,
            summaries: summaries.max(0) as usize,
        })
    }

    /// Set the final summary: the document is finished.
    pub fn finish_document(&self, id: DocumentId, summary: &str) -> Result<()> {
        let now = now_ms();
        let changed = self.conn.execute(
            "UPDATE documents SET summary = ?2, updated_at = ?3 WHERE id = ?1",
            params![id.0, summary, now],
        )?;
        if changed == 0 {
            return Err(Error::InvalidArgument(format!(
                "document {} does not exist",
                id.0
            )));
        }
        Ok(())
    }

    /// Forget the document's chunk summaries and final summary, so that it is done again.
    pub fn reset_document(&self, id: DocumentId) -> Result<()> {
        let now = now_ms();
        self.in_transaction(|tx| {
            tx.execute("DELETE FROM document_chunks WHERE document_id = ?1", [id.0])?;
            tx.execute(
                "UPDATE documents SET summary = NULL, chunk_count = NULL, updated_at = ?2 WHERE id = ?1",
                params![id.0, now],
            )?;
            Ok(())
        })
    }

    fn touch_document(&self, sql: &str, id: DocumentId, value: i64) -> Result<()> {
        let changed = self.conn.execute(sql, params![id.0, value, now_ms()])?;
        if changed == 0 {
            return Err(Error::InvalidArgument(format!(
                "document {} does not exist",
                id.0
            )));
        }
        Ok(())
    }
}
