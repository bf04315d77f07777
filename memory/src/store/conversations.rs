//! Conversations: create, list (pinned first, then most recent, paged), rename, pin, delete
//! (its messages, summaries, snapshot and the pictures no other conversation has go with
//! it), and ids given by a unique prefix.

use rusqlite::{OptionalExtension, Row, params};

use super::Store;
use crate::error::{Error, Result};
use crate::types::{Conversation, ConversationId, ConversationListItem, now_ms};

const COLUMNS: &str = "id, title, created_at, updated_at, model, settings, pinned";

pub(crate) fn conversation_from_row(row: &Row<'_>) -> rusqlite::Result<Conversation> {
    let settings: String = row.get(5)?;
    Ok(Conversation {
        id: ConversationId(row.get(0)?),
        title: row.get(1)?,
        created_at: row.get(2)?,
        updated_at: row.get(3)?,
        model: row.get(4)?,
        settings: serde_json::from_str(&settings).unwrap_or(serde_json::Value::Null),
        pinned: row.get::<_, i64>(6)? != 0,
    })
}

impl Store {
    pub fn create_conversation(
        &self,
        title: &str,
        model: Option<&str>,
        settings: &serde_json::Value,
    ) -> Result<Conversation> {
        let now = now_ms();
        let conversation = Conversation {
            id: ConversationId::new_random(),
            title: title.to_string(),
            created_at: now,
            updated_at: now,
            model: model.map(str::to_string),
            settings: settings.clone(),
            pinned: false,
        };
        self.in_transaction(|tx| {
            insert_conversation(tx, &conversation)?;
            crate::search::index_title(tx, &conversation.id, &conversation.title)
        })?;
        Ok(conversation)
    }

    pub fn conversation(&self, id: &ConversationId) -> Result<Conversation> {
        self.conn
            .query_row(
                &format!("SELECT {COLUMNS} FROM conversations WHERE id = ?1"),
                [id.as_str()],
                conversation_from_row,
            )
            .optional()?
            .ok_or_else(|| Error::ConversationNotFound(id.to_string()))
    }

    /// The conversation whose id is `text` or starts with it (as git resolves short hashes).
    pub fn resolve_conversation(&self, text: &str) -> Result<ConversationId> {
        let text = text.trim();
        if text.is_empty() {
            return Err(Error::ConversationNotFound(String::new()));
        }
        let pattern = format!("{}%", text.replace(['%', '_', '\\'], ""));
        let mut stmt = self
            .conn
            .prepare("SELECT id FROM conversations WHERE id = ?1 OR id LIKE ?2 LIMIT 3")?;
        let ids: Vec<String> = stmt
            .query_map(params![text, pattern], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        if let Some(exact) = ids.iter().find(|id| *id == text) {
            return Ok(ConversationId(exact.clone()));
        }
        match ids.len() {
            0 => Err(Error::ConversationNotFound(text.to_string())),
            1 => Ok(ConversationId(ids[0].clone())),
            _ => Err(Error::AmbiguousConversation(text.to_string())),
        }
    }

    /// Pinned conversations first, then the most recently updated; `limit` rows after
    /// skipping `offset`.
    pub fn list_conversations(&self, offset: i64, limit: i64) -> Result<Vec<ConversationListItem>> {
        let mut stmt = self.conn.prepare(&format!(
            "SELECT {COLUMNS},
                (SELECT count(*) FROM messages m WHERE m.conversation_id = c.id),
                (SELECT substr(m.text, 1, 120) FROM messages m WHERE m.conversation_id = c.id
                   ORDER BY m.seq DESC LIMIT 1)
             FROM conversations c
             ORDER BY pinned DESC, updated_at DESC, id
             LIMIT ?1 OFFSET ?2"
        ))?;
        let rows = stmt.query_map(params![limit.max(0), offset.max(0)], |row| {
            Ok(ConversationListItem {
                conversation: conversation_from_row(row)?,
                message_count: row.get(7)?,
                preview: row.get(8)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    pub fn rename_conversation(&self, id: &ConversationId, title: &str) -> Result<()> {
        self.in_transaction(|tx| {
            let n = tx.execute(
                "UPDATE conversations SET title = ?2, updated_at = max(updated_at, ?3) WHERE id = ?1",
                params![id.as_str(), title, now_ms()],
            )?;
            if n == 0 {
                return Err(Error::ConversationNotFound(id.to_string()));
            }
            crate::search::index_title(tx, id, title)
        })
    }

    /// Pinning does not change the recency order among pinned or unpinned conversations.
    pub fn set_pinned(&self, id: &ConversationId, pinned: bool) -> Result<()> {
        let n = self.conn.execute(
            "UPDATE conversations SET pinned = ?2 WHERE id = ?1",
            params![id.as_str(), pinned as i64],
        )?;
        if n == 0 {
            return Err(Error::ConversationNotFound(id.to_string()));
        }
        Ok(())
    }

    pub fn set_settings(&self, id: &ConversationId, settings: &serde_json::Value) -> Result<()> {
        let n = self.conn.execute(
            "UPDATE conversations SET settings = ?2 WHERE id = ?1",
            params![id.as_str(), settings.to_string()],
        )?;
        if n == 0 {
            return Err(Error::ConversationNotFound(id.to_string()));
        }
        Ok(())
    }

    pub fn set_model(&self, id: &ConversationId, model: &str) -> Result<()> {
        self.conn.execute(
            "UPDATE conversations SET model = ?2 WHERE id = ?1",
            params![id.as_str(), model],
        )?;
        Ok(())
    }

    /// Delete a conversation with its messages, summaries, search entries, KV snapshot and
    /// the pictures no other conversation has.
    pub fn delete_conversation(&self, id: &ConversationId) -> Result<()> {
        let (file, pictures) = self.in_transaction(|tx| {
            let file: Option<String> = tx
                .query_row(
                    "SELECT file FROM kv_snapshots WHERE conversation_id = ?1",
                    [id.as_str()],
                    |r| r.get(0),
                )
                .optional()?;
            tx.execute(
                "DELETE FROM search_index WHERE conversation_id = ?1",
                [id.as_str()],
            )?;
            let n = tx.execute("DELETE FROM conversations WHERE id = ?1", [id.as_str()])?;
            if n == 0 {
                return Err(Error::ConversationNotFound(id.to_string()));
            }
            // its messages' links went with them (ON DELETE CASCADE)
            Ok((file, super::images::take_unlinked(tx)?))
        })?;
        if let Some(file) = file {
            self.remove_snapshot_file(&file);
        }
        self.remove_image_files(&pictures);
        Ok(())
    }
}

pub(crate) fn insert_conversation(tx: &rusqlite::Transaction<'_>, c: &Conversation) -> Result<()> {
    let exists: bool = tx
        .query_row(
            "SELECT 1 FROM conversations WHERE id = ?1",
            [c.id.as_str()],
            |_| Ok(true),
        )
        .optional()?
        .unwrap_or(false);
    if exists {
        return Err(Error::ConversationExists(c.id.to_string()));
    }
    tx.execute(
        &format!("INSERT INTO conversations ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"),
        params![
            c.id.as_str(),
            c.title,
            c.created_at,
            c.updated_at,
            c.model,
            c.settings.to_string(),
            c.pinned as i64
        ],
    )?;
    Ok(())
}
