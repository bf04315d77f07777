//! What the agent cannot do itself, as traits the glue (`chat`) implements — the agent knows
//! neither SQLite nor the model (DESIGN.md's dependency rule):
//!
//! - [`ToolHost`]: the app's database — conversation search, notes, reminders, and the audit
//!   log of every call;
//! - [`FileSummarizer`]: summarizing a file with the model (the resumable document job),
//!   reporting progress as it goes.
//!
//! The records here are the agent's own view; `chat` maps the store's rows onto them.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::HostError;
use crate::tool::ToolProgress;

/// Which conversation a call belongs to (the audit log's and "yes for this conversation"'s
/// key); `None` for calls made outside any, such as `companion tools call`.
pub type ConversationKey = Option<String>;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConversationHit {
    pub conversation_id: String,
    pub title: String,
    /// `user`, `assistant` or `system`; `None` when the title matched.
    pub role: Option<String>,
    pub snippet: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NoteView {
    pub id: i64,
    pub title: String,
    pub text: String,
    /// Milliseconds since the epoch.
    pub updated_at: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NoteMatch {
    pub note: NoteView,
    pub snippet: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReminderView {
    pub id: i64,
    pub text: String,
    /// Milliseconds since the epoch.
    pub due_at: i64,
    pub done: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CallOutcome {
    Ok,
    Error,
    /// The user said no.
    Denied,
}

/// One call, as the audit log keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditEntry {
    pub conversation: ConversationKey,
    pub tool: String,
    /// Exactly as the call gave them.
    pub arguments: Value,
    pub outcome: CallOutcome,
    pub error_code: Option<String>,
    pub duration_ms: u64,
    /// When the call started, milliseconds since the epoch.
    pub started_at: i64,
}

/// The database side of the tools.
pub trait ToolHost {
    fn search_conversations(
        &self,
        query: &str,
        limit: usize,
    ) -> Result<Vec<ConversationHit>, HostError>;
    fn add_note(
        &self,
        conversation: &ConversationKey,
        title: &str,
        text: &str,
    ) -> Result<NoteView, HostError>;
    /// Newest first, at most `limit`, with the total count.
    fn list_notes(&self, limit: usize) -> Result<(Vec<NoteView>, usize), HostError>;
    fn search_notes(&self, query: &str, limit: usize) -> Result<Vec<NoteMatch>, HostError>;
    fn create_reminder(
        &self,
        conversation: &ConversationKey,
        text: &str,
        due_at: i64,
    ) -> Result<ReminderView, HostError>;
    /// Soonest first; done ones only when asked.
    fn list_reminders(
        &self,
        include_done: bool,
        limit: usize,
    ) -> Result<Vec<ReminderView>, HostError>;
    /// Keep `entry` in the audit log. A failure here is logged, never hidden from the user as
    /// a tool failure and never blocks the result.
    fn record_call(&self, entry: &AuditEntry) -> Result<(), HostError>;
}

/// A file the sandbox resolved, checked and opened, for the summarizer.
///
/// The document job reads files by path (`documents::Document::open`), so it opens the file
/// again; [`FileToSummarize::still_the_same`] tells whether `path` still names the file the
/// sandbox opened (same device and inode), which the summarizer checks before and after the
/// job, so that a file swapped in between is not summarized for the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileToSummarize {
    /// Canonical and absolute: inside a grant, no symlink, no hidden or private part.
    pub path: PathBuf,
    /// How tools name it (`grant/relative/path`).
    pub shown: String,
    pub byte_count: u64,
    pub identity: FileIdentity,
}

/// A file's device and inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileIdentity {
    pub device: u64,
    pub inode: u64,
}

impl FileIdentity {
    pub(crate) fn of(meta: &std::fs::Metadata) -> Self {
        use std::os::unix::fs::MetadataExt;
        FileIdentity {
            device: meta.dev(),
            inode: meta.ino(),
        }
    }
}

impl FileToSummarize {
    /// `path` leads, without any symlink, to the file the sandbox opened.
    pub fn still_the_same(&self) -> bool {
        use std::os::unix::fs::MetadataExt;
        match std::fs::symlink_metadata(&self.path) {
            Ok(meta) => {
                meta.is_file()
                    && FileIdentity {
                        device: meta.dev(),
                        inode: meta.ino(),
                    } == self.identity
            }
            Err(_) => false,
        }
    }
}

/// A finished summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileSummary {
    pub summary: String,
    /// Chunks the document was cut into.
    pub chunks: usize,
    /// Answered from the store: summarized before, nothing generated.
    pub from_store: bool,
}

/// Summarizing with the model. `progress` is called as the job goes; its reports are the
/// tool's progress.
pub trait FileSummarizer {
    fn summarize(
        &self,
        file: &FileToSummarize,
        progress: &mut dyn FnMut(ToolProgress),
    ) -> Result<FileSummary, HostError>;
}
