//! Reminders: a text and the moment it is due (milliseconds since the epoch, UTC). The app
//! shows a reminder when it falls due and marks it notified, so it is shown once; the user
//! marks it done. Parsing "tomorrow 9:00" is the agent's business, not the store's.

use rusqlite::{OptionalExtension, params};
use serde::{Deserialize, Serialize};

use super::Store;
use crate::error::{Error, Result};
use crate::types::{ConversationId, now_ms};

/// The longest reminder text, in bytes.
pub const MAX_REMINDER_TEXT_BYTES: usize = 4096;

/// A reminder's row id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ReminderId(pub i64);

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Reminder {
    pub id: ReminderId,
    pub text: String,
    pub due_at: i64,
    pub conversation_id: Option<ConversationId>,
    pub created_at: i64,
    /// When the app showed it, once it was due.
    pub notified_at: Option<i64>,
    /// When the user marked it done.
    pub done_at: Option<i64>,
    /// Its identifier in the platform's own reminders (EventKit's `calendarItemIdentifier` on
    /// iOS), when it was also put there: the platform then alerts the user itself.
    pub external_id: Option<String>,
}

const COLUMNS: &str =
    "id, text, due_at, conversation_id, created_at, notified_at, done_at, external_id";

fn reminder(r: &rusqlite::Row<'_>) -> rusqlite::Result<Reminder> {
    Ok(Reminder {
        id: ReminderId(r.get(0)?),
        text: r.get(1)?,
        due_at: r.get(2)?,
        conversation_id: r.get::<_, Option<String>>(3)?.map(ConversationId),
        created_at: r.get(4)?,
        notified_at: r.get(5)?,
        done_at: r.get(6)?,
        external_id: r.get(7)?,
    })
}

impl Store {
    pub fn add_reminder(
        &self,
        text: &str,
        due_at: i64,
        conversation: Option<&ConversationId>,
    ) -> Result<Reminder> {
        let text = text.trim();
        if text.is_empty() {
            return Err(Error::InvalidArgument(
                "a reminder needs a text saying what to remember".into(),
            ));
        }
        if text.len() > MAX_REMINDER_TEXT_BYTES {
            return Err(Error::InvalidArgument(format!(
                "a reminder's text is limited to {MAX_REMINDER_TEXT_BYTES} bytes"
            )));
        }
        let now = now_ms();
        self.conn.execute(
            "INSERT INTO reminders (text, due_at, conversation_id, created_at) VALUES (?1, ?2, ?3, ?4)",
            params![text, due_at, conversation.map(|c| c.as_str()), now],
        )?;
        Ok(Reminder {
            id: ReminderId(self.conn.last_insert_rowid()),
            text: text.to_string(),
            due_at,
            conversation_id: conversation.cloned(),
            created_at: now,
            notified_at: None,
            done_at: None,
            external_id: None,
        })
    }

    /// The reminder was also put in the platform's own reminders, under `external_id`.
    pub fn set_reminder_external_id(&self, id: ReminderId, external_id: &str) -> Result<()> {
        self.conn.execute(
            "UPDATE reminders SET external_id = ?2 WHERE id = ?1",
            params![id.0, external_id],
        )?;
        Ok(())
    }

    pub fn reminder(&self, id: ReminderId) -> Result<Option<Reminder>> {
        Ok(self
            .conn
            .query_row(
                &format!("SELECT {COLUMNS} FROM reminders WHERE id = ?1"),
                [id.0],
                reminder,
            )
            .optional()?)
    }

    /// Reminders by due time, soonest first; done ones only when asked.
    pub fn reminders(&self, include_done: bool, limit: i64) -> Result<Vec<Reminder>> {
        let filter = if include_done {
            ""
        } else {
            "WHERE done_at IS NULL"
        };
        let mut stmt = self.conn.prepare(&format!(
            "SELECT {COLUMNS} FROM reminders {filter} ORDER BY due_at, id LIMIT ?1"
        ))?;
        let rows = stmt.query_map([limit.max(0)], reminder)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Reminders due at `now` that were neither shown nor done: what the app shows next.
    pub fn due_reminders(&self, now: i64) -> Result<Vec<Reminder>> {
        let mut stmt = self.conn.prepare(&format!(
            "SELECT {COLUMNS} FROM reminders
             WHERE due_at <= ?1 AND notified_at IS NULL AND done_at IS NULL
             ORDER BY due_at, id"
        ))?;
        let rows = stmt.query_map([now], reminder)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// When the next reminder not yet shown nor done falls due (it may be past already): how
    /// long the app's reminder watch may sleep.
    pub fn next_reminder_due(&self) -> Result<Option<i64>> {
        Ok(self.conn.query_row(
            "SELECT MIN(due_at) FROM reminders WHERE notified_at IS NULL AND done_at IS NULL",
            [],
            |r| r.get(0),
        )?)
    }

    /// The app showed the reminder.
    pub fn mark_reminder_notified(&self, id: ReminderId) -> Result<()> {
        self.touch_reminder("notified_at", id)
    }

    /// The user is done with the reminder.
    pub fn complete_reminder(&self, id: ReminderId) -> Result<()> {
        self.touch_reminder("done_at", id)
    }

    /// Delete a reminder; `false` when there was none with this id.
    pub fn delete_reminder(&self, id: ReminderId) -> Result<bool> {
        Ok(self
            .conn
            .execute("DELETE FROM reminders WHERE id = ?1", [id.0])?
            > 0)
    }

    fn touch_reminder(&self, column: &'static str, id: ReminderId) -> Result<()> {
        let changed = self.conn.execute(
            &format!("UPDATE reminders SET {column} = COALESCE({column}, ?2) WHERE id = ?1"),
            params![id.0, now_ms()],
        )?;
        if changed == 0 {
            return Err(Error::InvalidArgument(format!(
                "reminder {} does not exist",
                id.0
            )));
        }
        Ok(())
    }
}
