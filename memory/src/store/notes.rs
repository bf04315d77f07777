//! Notes the user (or the agent, with the user's approval) keeps in the database: a title and
//! a text, full-text searchable like messages — the same FTS5 tokenizer, CJK indexed one
//! character per token and snippets cut from the original text (see `search.rs`).

use rusqlite::{OptionalExtension, params};
use serde::{Deserialize, Serialize};

use super::Store;
use crate::error::{Error, Result};
use crate::search::{fts_query, highlight_terms, segment, snippet};
use crate::types::{ConversationId, now_ms};

/// The longest title and text a note may have, in bytes: a note is a few paragraphs, not a
/// document.
pub const MAX_NOTE_TITLE_BYTES: usize = 1024;
pub const MAX_NOTE_TEXT_BYTES: usize = 64 * 1024;

/// A note's row id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct NoteId(pub i64);

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Note {
    pub id: NoteId,
    pub title: String,
    pub text: String,
    /// The conversation it was written from, if any.
    pub conversation_id: Option<ConversationId>,
    pub created_at: i64,
    pub updated_at: i64,
}

/// A note matching a search, with a snippet of its text around the first match.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NoteHit {
    pub note: Note,
    pub snippet: String,
    /// Byte ranges of `snippet` that match query terms.
    pub highlights: Vec<(usize, usize)>,
}

const COLUMNS: &str = "id, title, text, conversation_id, created_at, updated_at";

fn note(r: &rusqlite::Row<'_>) -> rusqlite::Result<Note> {
    Ok(Note {
        id: NoteId(r.get(0)?),
        title: r.get(1)?,
        text: r.get(2)?,
        conversation_id: r.get::<_, Option<String>>(3)?.map(ConversationId),
        created_at: r.get(4)?,
        updated_at: r.get(5)?,
    })
}

/// What the index holds for a note: its title, then its text.
pub(crate) fn body(title: &str, text: &str) -> String {
    segment(&format!("{title}\n{text}"))
}

impl Store {
    /// Keep a new note.
    pub fn add_note(
        &self,
        title: &str,
        text: &str,
        conversation: Option<&ConversationId>,
    ) -> Result<Note> {
        let title = title.trim();
        if title.is_empty() {
            return Err(Error::InvalidArgument("a note needs a title".into()));
        }
        if title.len() > MAX_NOTE_TITLE_BYTES || text.len() > MAX_NOTE_TEXT_BYTES {
            return Err(Error::InvalidArgument(format!(
                "a note's title is limited to {MAX_NOTE_TITLE_BYTES} bytes and its text to {} KiB",
                MAX_NOTE_TEXT_BYTES / 1024
            )));
        }
        let now = now_ms();
        let id = self.in_transaction(|tx| {
            tx.execute(
                "INSERT INTO notes (title, text, conversation_id, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?4)",
                params![title, text, conversation.map(|c| c.as_str()), now],
            )?;
            let id = tx.last_insert_rowid();
            tx.execute(
                "INSERT INTO notes_index (body, note_id) VALUES (?1, ?2)",
                params![body(title, text), id],
            )?;
            Ok(NoteId(id))
        })?;
        Ok(Note {
            id,
            title: title.to_string(),
            text: text.to_string(),
            conversation_id: conversation.cloned(),
            created_at: now,
            updated_at: now,
        })
    }

    pub fn note(&self, id: NoteId) -> Result<Option<Note>> {
        Ok(self
            .conn
            .query_row(
                &format!("SELECT {COLUMNS} FROM notes WHERE id = ?1"),
                [id.0],
                note,
            )
            .optional()?)
    }

    /// Notes, most recently changed first.
    pub fn notes(&self, offset: i64, limit: i64) -> Result<Vec<Note>> {
        let mut stmt = self.conn.prepare(&format!(
            "SELECT {COLUMNS} FROM notes ORDER BY updated_at DESC, id DESC LIMIT ?1 OFFSET ?2"
        ))?;
        let rows = stmt.query_map(params![limit.max(0), offset.max(0)], note)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    pub fn note_count(&self) -> Result<i64> {
        Ok(self
            .conn
            .query_row("SELECT COUNT(*) FROM notes", [], |r| r.get(0))?)
    }

    /// Notes whose title or text matches every term of `query` (as [`Store::search`] matches
    /// messages), best first.
    pub fn search_notes(&self, query: &str, limit: i64) -> Result<Vec<NoteHit>> {
        let Some(fts) = fts_query(query) else {
            return Ok(Vec::new());
        };
        let terms = highlight_terms(query);
        let mut stmt = self.conn.prepare(&format!(
            "SELECT {} FROM notes_index s JOIN notes n ON n.id = s.note_id
             WHERE notes_index MATCH ?1 ORDER BY rank LIMIT ?2",
            COLUMNS
                .split(", ")
                .map(|c| format!("n.{c}"))
                .collect::<Vec<_>>()
                .join(", ")
        ))?;
        let rows = stmt.query_map(params![fts, limit.max(0)], note)?;
        let mut hits = Vec::new();
        for row in rows {
            let note = row?;
            let (snippet, highlights) = snippet(&format!("{}: {}", note.title, note.text), &terms);
            hits.push(NoteHit {
                note,
                snippet,
                highlights,
            });
        }
        Ok(hits)
    }

    /// Delete a note; `false` when there was none with this id.
    pub fn delete_note(&self, id: NoteId) -> Result<bool> {
        self.in_transaction(|tx| {
            tx.execute("DELETE FROM notes_index WHERE note_id = ?1", [id.0])?;
            Ok(tx.execute("DELETE FROM notes WHERE id = ?1", [id.0])? > 0)
        })
    }
}
