//! Tools that live outside Companion — a Model Context Protocol server's — joined to the
//! toolbox beside the built-in ones, under the same trust: the exact arguments are shown and
//! the user approves every call, unless the server marks the tool read-only *and* the user
//! allowed that server's read-only tools; every call is in the audit log; what comes back is
//! data, cut to the tool-result budget. The agent knows nothing of MCP itself: the `mcp`
//! crate implements [`ExternalTools`].

use std::sync::atomic::AtomicBool;

use serde_json::Value;

use crate::error::HostError;
use crate::tool::Tool;

/// One tool of another program.
#[derive(Debug, Clone, PartialEq)]
pub struct ExternalTool {
    /// Named `server/tool`, so it can never be taken for a built-in one. `writes` is set
    /// unless the call may run without asking (see [`ExternalTool::pre_approved`]).
    pub tool: Tool,
    /// Where it lives, as the user named it in the configuration.
    pub server: String,
    /// The server says the tool only reads (`readOnlyHint`) and the user allowed that
    /// server's read-only tools: it runs without asking.
    pub pre_approved: bool,
    /// What "yes for this conversation" is remembered under: the tool and the server's
    /// configuration, so that a server reconfigured to another program is asked again.
    pub approval_key: String,
}

/// What an external tool returned: its text for the model, and the same as data.
#[derive(Debug, Clone, PartialEq)]
pub struct ExternalOutput {
    pub text: String,
    pub data: Value,
    /// The tool itself reported an error (MCP's `isError`): the text says what.
    pub is_error: bool,
}

/// Programs whose tools the agent may call.
pub trait ExternalTools: Send + Sync {
    /// The tools available now (a server that failed to start has none).
    fn tools(&self) -> Vec<ExternalTool>;

    /// Calls `name` (as [`ExternalTool::tool`] names it). A server that hangs, crashes or
    /// answers nonsense ends the call with an error, never blocking the caller past its
    /// timeout; `cancel` set (the user stopped the turn) ends it at once.
    fn call(
        &self,
        name: &str,
        arguments: &Value,
        cancel: Option<&AtomicBool>,
    ) -> Result<ExternalOutput, HostError>;
}
