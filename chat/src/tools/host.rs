//! [`StoreHost`]: the agent's database side on `memory::Store`. Store errors keep their own
//! stable codes (`disk_full`, `invalid_argument`, …) on their way into tool results.

use agent::{
    AuditEntry, CallOutcome, ConversationHit, ConversationKey, HostError, NoteMatch, NoteView,
    ReminderView, ToolHost,
};
use memory::{ConversationId, NewToolCall, Store, ToolOutcome};

/// The tools' database: conversations, notes, reminders and the audit log of one store.
pub struct StoreHost<'a> {
    pub store: &'a Store,
    /// Where reminders also go on a platform that has its own (EventKit on iOS).
    pub platform_reminders: Option<&'a dyn PlatformReminders>,
}

impl<'a> StoreHost<'a> {
    pub fn new(store: &'a Store) -> Self {
        StoreHost {
            store,
            platform_reminders: None,
        }
    }
}

/// The platform's own reminders (the Reminders app on iOS, through the mobile plugin): a
/// reminder the agent creates is kept in the store and also put there, so that the platform
/// alerts the user even when Companion is not running.
pub trait PlatformReminders {
    /// Put the reminder there; its identifier there, or why not (access refused, say).
    fn create(&self, text: &str, due_at: i64) -> Result<String, String>;
}

pub(crate) fn host_error(e: memory::Error) -> HostError {
    HostError::new(e.code(), e.to_string())
}

fn conversation(key: &ConversationKey) -> Option<ConversationId> {
    key.as_ref().map(|c| ConversationId(c.clone()))
}

fn note_view(n: memory::Note) -> NoteView {
    NoteView {
        id: n.id.0,
        title: n.title,
        text: n.text,
        updated_at: n.updated_at,
    }
}

fn reminder_view(r: memory::Reminder) -> ReminderView {
    ReminderView {
        id: r.id.0,
        text: r.text,
        due_at: r.due_at,
        done: r.done_at.is_some(),
    }
}

impl ToolHost for StoreHost<'_> {
    fn search_conversations(
        &self,
        query: &str,
        limit: usize,
    ) -> Result<Vec<ConversationHit>, HostError> {
        let hits = self.store.search(query, limit as i64).map_err(host_error)?;
        Ok(hits
            .into_iter()
            .map(|h| ConversationHit {
                conversation_id: h.conversation_id.0,
                title: h.conversation_title,
                role: h.role.map(|r| r.as_str().to_string()),
                snippet: h.snippet,
            })
            .collect())
    }

    fn add_note(
        &self,
        key: &ConversationKey,
        title: &str,
        text: &str,
    ) -> Result<NoteView, HostError> {
        self.store
            .add_note(title, text, conversation(key).as_ref())
            .map(note_view)
            .map_err(host_error)
    }

    fn list_notes(&self, limit: usize) -> Result<(Vec<NoteView>, usize), HostError> {
        let notes = self.store.notes(0, limit as i64).map_err(host_error)?;
        let total = self.store.note_count().map_err(host_error)?;
        Ok((
            notes.into_iter().map(note_view).collect(),
            total.max(0) as usize,
        ))
    }

    fn search_notes(&self, query: &str, limit: usize) -> Result<Vec<NoteMatch>, HostError> {
        let hits = self
            .store
            .search_notes(query, limit as i64)
            .map_err(host_error)?;
        Ok(hits
            .into_iter()
            .map(|h| NoteMatch {
                note: note_view(h.note),
                snippet: h.snippet,
            })
            .collect())
    }

    fn create_reminder(
        &self,
        key: &ConversationKey,
        text: &str,
        due_at: i64,
    ) -> Result<ReminderView, HostError> {
        let reminder = self
            .store
            .add_reminder(text, due_at, conversation(key).as_ref())
            .map_err(host_error)?;
        if let Some(platform) = self.platform_reminders {
            match platform.create(&reminder.text, reminder.due_at) {
                Ok(external) => self
                    .store
                    .set_reminder_external_id(reminder.id, &external)
                    .map_err(host_error)?,
                // kept here all the same: the app shows it when it falls due
                Err(e) => {
                    tracing::warn!(error = %e, "the reminder is not in the platform's reminders")
                }
            }
        }
        Ok(reminder_view(reminder))
    }

    fn list_reminders(
        &self,
        include_done: bool,
        limit: usize,
    ) -> Result<Vec<ReminderView>, HostError> {
        let reminders = self
            .store
            .reminders(include_done, limit as i64)
            .map_err(host_error)?;
        Ok(reminders.into_iter().map(reminder_view).collect())
    }

    fn record_call(&self, entry: &AuditEntry) -> Result<(), HostError> {
        self.store
            .record_tool_call(&NewToolCall {
                conversation_id: conversation(&entry.conversation),
                tool: entry.tool.clone(),
                arguments: entry.arguments.clone(),
                outcome: match entry.outcome {
                    CallOutcome::Ok => ToolOutcome::Ok,
                    CallOutcome::Error => ToolOutcome::Error,
                    CallOutcome::Denied => ToolOutcome::Denied,
                },
                error_code: entry.error_code.clone(),
                duration_ms: entry.duration_ms as i64,
                at: Some(entry.started_at),
            })
            .map(|_| ())
            .map_err(host_error)
    }
}
