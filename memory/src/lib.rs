//! Companion's conversation memory, on SQLite (rusqlite, bundled, with FTS5). It knows
//! nothing of the model: token counts and summaries come from the glue through plain numbers
//! and the [`Summarizer`] trait, KV snapshots are opaque bytes.
//!
//! - [`store`]: the database (pragmas, schema upgrades by `PRAGMA user_version`, recovery of a
//!   corrupt file), conversations, messages and their pictures, summaries, KV snapshot files,
//!   documents and their chunk summaries; notes, reminders, granted folders and the tool-call
//!   audit log for the local agent; the model library;
//! - [`policy`] and [`compaction`]: the L2 tier — when to summarize what;
//! - [`reply`]: checkpointing a reply while it streams;
//! - [`search`]: full-text search (English and CJK); [`export`]: Markdown and JSON;
//! - [`sync`]: conversations, notes and reminders synced through a folder the user owns.

pub mod compaction;
pub mod error;
pub mod export;
pub mod policy;
pub mod reply;
pub mod search;
pub mod store;
pub mod summarizer;
pub mod sync;
pub mod types;

pub use compaction::{CompactionOutcome, PromptParts};
pub use error::{Error, Result};
pub use export::{ConversationExport, Imported};
pub use policy::PolicyConfig;
pub use reply::ReplyRecorder;
pub use search::SearchHit;
pub use store::{
    AssistantRecord, ChunkSummary, DocumentKey, DocumentRecord, DocumentTotals, FolderGrant,
    GrantMode, IMAGE_MIME_TYPES, MAX_IMAGE_BYTES, MAX_NOTE_TEXT_BYTES, MAX_NOTE_TITLE_BYTES,
    MAX_REMINDER_TEXT_BYTES, ModelId, ModelRecord, NewModel, NewToolCall, Note, NoteHit, NoteId,
    Opened, PairedFile, Pairing, ProjectorRecord, Recovery, Reminder, ReminderId, Store,
    StoreConfig, ToolCallId, ToolCallRecord, ToolOutcome, default_data_dir, default_database_path,
    store_files,
};
pub use summarizer::{Summarizer, SummaryRequest, SummaryText};
pub use sync::{Notice, Peer, SyncOptions, SyncReport, SyncStatus};
pub use types::*;
