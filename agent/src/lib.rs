//! Companion's local agent: the tools the model may call, the schemas of their arguments,
//! and the sandbox of folders the user granted. It knows neither candle nor SQLite
//! (DESIGN.md): what needs the database or the model comes through the [`ToolHost`] and
//! [`FileSummarizer`] traits, which `chat` implements; file text comes through `documents`.
//!
//! - [`Toolbox`]: one call — validate the arguments ([`schema`]), ask before a write
//!   ([`approval`]), run the tool inside the [`Sandbox`] and the [`Limits`], record it
//!   ([`AuditEntry`]);
//! - [`declarations`]: every tool with its one-line description and JSON Schema;
//! - [`Sandbox`]: granted folders opened once with cap-std, every path resolved beneath them;
//! - [`text`]: bounded reads of file text (a window; a stream of lines);
//! - [`clock`] and [`calc`]: local time, reminder times, arithmetic;
//! - [`ExternalTools`]: other programs' tools (MCP servers, through the `mcp` crate) under
//!   the same approvals and audit;
//! - [`calls`]: tool calls in the model's format — declarations, transcript, call grammar,
//!   parsing.
//!
//! Tool results are data. [`ToolOutput::text_for_model`] is plain text: the engine must
//! tokenize it (and file contents in general) as text, never parsing special-token strings
//! such as `<end_of_turn>` in it, so a file cannot forge a turn or a tool call; and the agent
//! loop must present it as a tool's result, not as the user's words.

pub mod approval;
pub mod calc;
pub mod calls;
pub mod clock;
pub mod error;
pub mod external;
pub mod host;
pub mod limits;
pub mod sandbox;
pub mod schema;
pub mod text;
pub mod tool;
pub mod toolbox;
pub mod tools;

pub use approval::{Approval, ApprovalAnswer, ApprovalRequest, DenyWrites, RememberedApprovals};
pub use error::{Error, HostError, Result};
pub use external::{ExternalOutput, ExternalTool, ExternalTools};
pub use host::{
    AuditEntry, CallOutcome, ConversationHit, ConversationKey, FileIdentity, FileSummarizer,
    FileSummary, FileToSummarize, NoteMatch, NoteView, ReminderView, ToolHost,
};
pub use limits::{Limits, TurnBudget};
pub use sandbox::{GrantInfo, GrantMode, GrantSpec, Location, Sandbox};
pub use tool::{Tool, ToolCall, ToolOutput, ToolProgress};
pub use toolbox::{CallContext, Toolbox, error_output};
pub use tools::declarations;
