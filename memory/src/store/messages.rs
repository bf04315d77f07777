//! Messages: appended whole when complete; a reply being generated is inserted as `streaming`,
//! checkpointed as it grows (each checkpoint one small committed UPDATE, see
//! [`crate::ReplyRecorder`] for the pacing) and finished in one transaction with its final
//! status. Messages enter the search index when they are finished. A message's pictures
//! (`images.rs`) are linked in the transaction that inserts it and read back with it.

use rusqlite::{OptionalExtension, Row, params};

use super::{ImageFolder, Store, images};
use crate::error::{Error, Result};
use crate::types::{ConversationId, Message, MessageId, MessageStatus, NewMessage, Role, now_ms};

const COLUMNS: &str =
    "id, conversation_id, seq, role, text, token_count, status, created_at, updated_at, timings";

fn message_from_row(row: &Row<'_>) -> rusqlite::Result<Message> {
    let role: String = row.get(3)?;
    let status: String = row.get(6)?;
    let timings: Option<String> = row.get(9)?;
    let bad = |what: &str, value: String| {
        rusqlite::Error::FromSqlConversionFailure(
            0,
            rusqlite::types::Type::Text,
            format!("unknown message {what} `{value}`").into(),
        )
    };
    Ok(Message {
        id: MessageId(row.get(0)?),
        conversation_id: ConversationId(row.get(1)?),
        seq: row.get(2)?,
        role: Role::parse(&role).ok_or_else(|| bad("role", role.clone()))?,
        text: row.get(4)?,
        token_count: row.get(5)?,
        status: MessageStatus::parse(&status).ok_or_else(|| bad("status", status.clone()))?,
        created_at: row.get(7)?,
        updated_at: row.get(8)?,
        timings: timings.and_then(|t| serde_json::from_str(&t).ok()),
        images: Vec::new(),
    })
}

impl Store {
    /// Append a message at the end of the conversation; it is committed when this returns.
    pub fn append_message(&self, conversation: &ConversationId, m: &NewMessage) -> Result<Message> {
        let id = self.in_transaction(|tx| {
            let id = insert_message(tx, &self.images, conversation, m, None)?;
            if m.status != MessageStatus::Streaming {
                crate::search::index_message(tx, conversation, id, &m.text)?;
            }
            Ok(id)
        })?;
        self.message(id)
    }

    pub fn message(&self, id: MessageId) -> Result<Message> {
        let mut message = self
            .conn
            .query_row(
                &format!("SELECT {COLUMNS} FROM messages WHERE id = ?1"),
                [id.0],
                message_from_row,
            )
            .optional()?
            .ok_or(Error::MessageNotFound(id.0))?;
        message.images = images::of_message(&self.conn, id)?;
        Ok(message)
    }

    /// Every message of the conversation in order, with its pictures.
    pub fn messages(&self, conversation: &ConversationId) -> Result<Vec<Message>> {
        self.conversation(conversation)?;
        let mut stmt = self.conn.prepare(&format!(
            "SELECT {COLUMNS} FROM messages WHERE conversation_id = ?1 ORDER BY seq"
        ))?;
        let rows = stmt.query_map([conversation.as_str()], message_from_row)?;
        let mut messages: Vec<Message> = rows.collect::<rusqlite::Result<_>>()?;
        let mut pictures = images::of_conversation(&self.conn, conversation)?;
        for m in &mut messages {
            m.images = pictures.remove(&m.id.0).unwrap_or_default();
        }
        Ok(messages)
    }

    /// Start a reply: an empty assistant message in the `streaming` state, owned by this
    /// store's writer lock (see `writers.rs`) until it is finished.
    pub fn begin_reply(&self, conversation: &ConversationId) -> Result<MessageId> {
        self.in_transaction(|tx| {
            let id = insert_message(
                tx,
                &self.images,
                conversation,
                &NewMessage {
                    role: Role::Assistant,
                    text: String::new(),
                    token_count: None,
                    status: MessageStatus::Streaming,
                    timings: None,
                    images: Vec::new(),
                },
                None,
            )?;
            tx.execute(
                "UPDATE messages SET writer = ?2 WHERE id = ?1",
                params![id.0, self.writer_id()],
            )?;
            Ok(id)
        })
    }

    /// Save the text of a reply generated so far (committed on return).
    pub fn checkpoint_reply(&self, id: MessageId, text: &str) -> Result<()> {
        let n = self.conn.execute(
            "UPDATE messages SET text = ?2, updated_at = ?3 WHERE id = ?1 AND status = 'streaming'",
            params![id.0, text, now_ms()],
        )?;
        if n == 0 {
            return Err(Error::MessageNotFound(id.0));
        }
        Ok(())
    }

    /// Finish a reply with its final text and status, in one transaction.
    pub fn finish_reply(
        &self,
        id: MessageId,
        text: &str,
        status: MessageStatus,
        token_count: Option<i64>,
        timings: Option<&serde_json::Value>,
    ) -> Result<Message> {
        self.in_transaction(|tx| {
            let conversation: String = tx
                .query_row(
                    "SELECT conversation_id FROM messages WHERE id = ?1",
                    [id.0],
                    |r| r.get(0),
                )
                .optional()?
                .ok_or(Error::MessageNotFound(id.0))?;
            let now = now_ms();
            tx.execute(
                "UPDATE messages SET text = ?2, status = ?3, token_count = ?4, timings = ?5,
                    updated_at = ?6 WHERE id = ?1",
                params![
                    id.0,
                    text,
                    status.as_str(),
                    token_count,
                    timings.map(|t| t.to_string()),
                    now
                ],
            )?;
            tx.execute(
                "UPDATE conversations SET updated_at = max(updated_at, ?2) WHERE id = ?1",
                params![conversation, now],
            )?;
            crate::search::index_message(tx, &ConversationId(conversation), id, text)
        })?;
        self.message(id)
    }

    /// A reply whose process died mid-stream keeps what was checkpointed, marked `stopped`.
    pub(crate) fn finish_abandoned_reply(&self, id: i64) -> Result<()> {
        self.in_transaction(|tx| {
            let (conversation, text): (String, String) = tx.query_row(
                "SELECT conversation_id, text FROM messages WHERE id = ?1",
                [id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )?;
            tx.execute("UPDATE messages SET status = 'stopped' WHERE id = ?1", [id])?;
            crate::search::index_message(tx, &ConversationId(conversation), MessageId(id), &text)
        })
    }

    pub fn set_token_count(&self, id: MessageId, token_count: i64) -> Result<()> {
        self.conn.execute(
            "UPDATE messages SET token_count = ?2 WHERE id = ?1",
            params![id.0, token_count],
        )?;
        Ok(())
    }

    /// Delete the messages from position `seq` on (editing a message or regenerating a reply),
    /// with the summaries that covered any of them, the conversation's KV snapshot and the
    /// pictures no other message has.
    pub fn truncate_messages(&self, conversation: &ConversationId, seq: i64) -> Result<()> {
        let (file, pictures) = self.in_transaction(|tx| {
            tx.execute(
                "DELETE FROM search_index WHERE kind = 'message' AND message_id IN
                    (SELECT id FROM messages WHERE conversation_id = ?1 AND seq >= ?2)",
                params![conversation.as_str(), seq],
            )?;
            let deleted = tx.execute(
                "DELETE FROM messages WHERE conversation_id = ?1 AND seq >= ?2",
                params![conversation.as_str(), seq],
            )?;
            tx.execute(
                "DELETE FROM summaries WHERE conversation_id = ?1 AND last_seq >= ?2",
                params![conversation.as_str(), seq],
            )?;
            // only a change counts as one: `updated_at` moves with a stamped change (sync
            // relies on it being no later than one, `sync::apply::after_deletion`)
            if deleted > 0 {
                tx.execute(
                    "UPDATE conversations SET updated_at = max(updated_at, ?2) WHERE id = ?1",
                    params![conversation.as_str(), now_ms()],
                )?;
            }
            let pictures = images::take_unlinked(tx)?;
            Ok((
                super::snapshots::take_snapshot_row(tx, conversation)?,
                pictures,
            ))
        })?;
        if let Some(file) = file {
            self.remove_snapshot_file(&file);
        }
        self.remove_image_files(&pictures);
        Ok(())
    }
}

/// Insert `m` at position `seq` (default: after the last message) with its pictures, whose
/// files must be in `folder`; touches the conversation.
pub(crate) fn insert_message(
    tx: &rusqlite::Transaction<'_>,
    folder: &ImageFolder,
    conversation: &ConversationId,
    m: &NewMessage,
    at: Option<(i64, i64, i64)>,
) -> Result<MessageId> {
    let exists: Option<i64> = tx
        .query_row(
            "SELECT 1 FROM conversations WHERE id = ?1",
            [conversation.as_str()],
            |r| r.get(0),
        )
        .optional()?;
    if exists.is_none() {
        return Err(Error::ConversationNotFound(conversation.to_string()));
    }
    let now = now_ms();
    let (seq, created, updated) = match at {
        Some(at) => at,
        None => {
            let seq: i64 = tx.query_row(
                "SELECT coalesce(max(seq) + 1, 0) FROM messages WHERE conversation_id = ?1",
                [conversation.as_str()],
                |r| r.get(0),
            )?;
            tx.execute(
                "UPDATE conversations SET updated_at = max(updated_at, ?2) WHERE id = ?1",
                params![conversation.as_str(), now],
            )?;
            (seq, now, now)
        }
    };
    tx.execute(
        &format!(
            "INSERT INTO messages ({COLUMNS}) VALUES (NULL, ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"
        ),
        params![
            conversation.as_str(),
            seq,
            m.role.as_str(),
            m.text,
            m.token_count,
            m.status.as_str(),
            created,
            updated,
            m.timings.as_ref().map(|t| t.to_string())
        ],
    )?;
    let id = MessageId(tx.last_insert_rowid());
    images::attach(tx, folder, id, &m.images)?;
    Ok(id)
}
