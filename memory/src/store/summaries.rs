//! L2 summaries as rows: which messages they cover, their text and size, the model that wrote
//! them. Which ones are in force is decided by [`crate::policy::active_summaries`].

use rusqlite::params;

use super::Store;
use crate::error::{Error, Result};
use crate::types::{ConversationId, NewSummary, Summary, SummaryId, now_ms};

impl Store {
    pub fn add_summary(&self, conversation: &ConversationId, s: &NewSummary) -> Result<Summary> {
        if s.first_seq > s.last_seq {
            return Err(Error::InvalidArgument(format!(
                "a summary cannot cover messages {}..={}",
                s.first_seq, s.last_seq
            )));
        }
        let now = now_ms();
        let id = self.in_transaction(|tx| {
            insert_summary(tx, conversation, s, now)?;
            Ok(SummaryId(tx.last_insert_rowid()))
        })?;
        Ok(Summary {
            id,
            conversation_id: conversation.clone(),
            first_seq: s.first_seq,
            last_seq: s.last_seq,
            text: s.text.clone(),
            token_count: s.token_count,
            model: s.model.clone(),
            created_at: now,
        })
    }

    /// Every summary of the conversation, oldest first.
    pub fn summaries(&self, conversation: &ConversationId) -> Result<Vec<Summary>> {
        let mut stmt = self.conn.prepare(
            "SELECT id, first_seq, last_seq, text, token_count, model, created_at
             FROM summaries WHERE conversation_id = ?1 ORDER BY id",
        )?;
        let rows = stmt.query_map([conversation.as_str()], |r| {
            Ok(Summary {
                id: SummaryId(r.get(0)?),
                conversation_id: conversation.clone(),
                first_seq: r.get(1)?,
                last_seq: r.get(2)?,
                text: r.get(3)?,
                token_count: r.get(4)?,
                model: r.get(5)?,
                created_at: r.get(6)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }
}

pub(crate) fn insert_summary(
    tx: &rusqlite::Transaction<'_>,
    conversation: &ConversationId,
    s: &NewSummary,
    created_at: i64,
) -> Result<()> {
    tx.execute(
        "INSERT INTO summaries (conversation_id, first_seq, last_seq, text, token_count, model, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![
            conversation.as_str(),
            s.first_seq,
            s.last_seq,
            s.text,
            s.token_count,
            s.model,
            created_at
        ],
    )?;
    Ok(())
}
