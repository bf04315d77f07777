//! Conversations over Companion's engine and memory — the glue the app (`src-tauri`) and the
//! CLI share, so that neither engine (candle) nor memory (SQLite) knows the other:
//!
//! - [`ConversationManager`]: open (snapshot or re-prefill), send a turn (summarize, stream
//!   with checkpoints, commit), switch and close (snapshot);
//! - [`EngineSummarizer`]: memory's `Summarizer` written with the engine;
//! - [`documents`]: summarizing a document far longer than the context, as a resumable job;
//! - [`models`]: the model library — import (checked, hashed, copied through a temporary
//!   file), verify, switch with a self-check, remove;
//! - [`prompt`]: how summaries and messages become the engine's chat prompt;
//! - [`completion`]: one completion for a program other than the app (the local API), on
//!   a session of its own, tools and JSON formats under the grammar;
//! - [`agent_loop`]: the agent loop on the model — constrained tool calls, results in the context;
//! - [`tools`]: the agent's tools on the store (notes, reminders, search, audit log) and on
//!   the document job (summarize_file), and the sandbox from the grants the store keeps.

pub mod agent_loop;
pub mod completion;
pub mod documents;
pub mod error;
pub mod manager;
pub mod models;
pub mod paired;
pub mod picture;
pub mod prompt;
pub mod summarizer;
pub mod tools;

pub use documents::{DecodeTotals, DocumentJob, DocumentParams, DocumentSummary, JobProgress};
pub use error::{Error, Result};
pub use manager::{
    ConversationManager, ManagerConfig, Resume, ToolTurn, ToolTurnCall, Tools, Turn, TurnEvent,
};
pub use picture::Picture;
pub use summarizer::EngineSummarizer;
