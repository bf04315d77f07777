//! What can go wrong with a server, each in one sentence a user can act on.

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read the MCP configuration {path}: {source}")]
    ConfigRead {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Config(String),
    #[error("the MCP server \"{server}\" could not be started: {problem}")]
    Start { server: String, problem: String },
    #[error("the MCP server \"{server}\" did not finish starting within {seconds} s")]
    StartTimeout { server: String, seconds: u64 },
    #[error("there is no MCP tool named `{0}`")]
    UnknownTool(String),
    #[error("{tool} did not answer within {seconds} s; the call was abandoned")]
    CallTimeout { tool: String, seconds: u64 },
    #[error(
        "the MCP server \"{server}\" has stopped; {tool} could not run (restart it from the Servers panel, or run the command again)"
    )]
    ServerGone { server: String, tool: String },
    #[error("{tool} failed in its server: {problem}")]
    Call { tool: String, problem: String },
    #[error(
        "stdio MCP servers cannot run on iOS (apps may not start programs); use a server with a `url`"
    )]
    StdioUnsupported,
    #[error("you stopped {tool}; the server was told to cancel it")]
    Cancelled { tool: String },
}

impl Error {
    /// A stable, machine-readable code.
    pub fn code(&self) -> &'static str {
        match self {
            Error::ConfigRead { .. } | Error::Config(_) => "mcp_config",
            Error::Start { .. } => "mcp_start_failed",
            Error::StartTimeout { .. } => "mcp_start_timeout",
            Error::UnknownTool(_) => "unknown_tool",
            Error::CallTimeout { .. } => "mcp_timeout",
            Error::ServerGone { .. } => "mcp_server_gone",
            Error::Call { .. } => "mcp_call_failed",
            Error::StdioUnsupported => "mcp_stdio_unsupported",
            Error::Cancelled { .. } => "cancelled",
        }
    }
}

impl From<Error> for agent::HostError {
    fn from(e: Error) -> Self {
        agent::HostError::new(e.code(), e.to_string())
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
