//! Companion's Model Context Protocol client: the tools of MCP servers — programs on this
//! machine speaking over stdio, or servers at a URL speaking Streamable HTTP — joined to the
//! agent beside its own tools, named `server/tool`, under the same approvals and audit
//! ([`agent::ExternalTools`]). Built on the official Rust SDK, `rmcp`.
//!
//! - [`McpConfig`]: the servers, in the ecosystem's `mcpServers` JSON;
//! - [`McpHub`]: every server started and kept for the run; its status, its tools, calls with
//!   a deadline; a server that hangs, crashes or answers nonsense fails only its own calls;
//! - results become text for the model (binary content named, never inlined) and data for
//!   the UI.
//!
//! It knows the agent's types, and neither candle nor SQLite (DESIGN.md); `chat`, the CLI and
//! the app hand a hub to the toolbox.

mod config;
mod connection;
mod content;
mod error;
mod hub;

pub use config::{DEFAULT_CALL_TIMEOUT, McpConfig, START_TIMEOUT, ServerConfig, Transport};
pub use connection::{MAX_DESCRIPTION_CHARS, MAX_SCHEMA_BYTES, MAX_TOOLS_PER_SERVER};
pub use error::{Error, Result};
pub use hub::{McpHub, ServerStatus, ToolStatus};
