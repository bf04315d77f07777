//! The agent's errors. Each is one sentence a user (or the model, which gets it as the tool's
//! result) can act on, and has a stable short `code()` for the IPC edge, `--json` output and
//! the audit log. Paths in messages are shown as the tools show them (`grant/relative/path`),
//! never with file contents.

use std::path::PathBuf;

/// What a [`crate::ToolHost`] or [`crate::FileSummarizer`] reports: its own stable code (the
/// store's or the engine's) and its one-line message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct HostError {
    pub code: String,
    pub message: String,
}

impl HostError {
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        HostError {
            code: code.into(),
            message: message.into(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("there is no tool named `{0}`")]
    UnknownTool(String),
    #[error("{tool}: {problem}")]
    InvalidArguments { tool: String, problem: String },
    #[error("no folder is granted: grant one first (in the app's Folders panel, or --allow DIR)")]
    NoGrant,
    #[error("outside the granted folders: {path}{}", hint_suffix(.hint))]
    OutsideGrants { path: String, hint: Option<String> },
    #[error("{path} is hidden; tools do not list or read hidden files")]
    Hidden { path: String },
    #[error("{path} holds Companion's own data; tools do not list or read it")]
    Private { path: String },
    #[error("no such file or folder: {path}")]
    NotFound { path: String },
    #[error("{path} is a folder, not a file (list it with list_folder)")]
    NotAFile { path: String },
    #[error("{path} is a file, not a folder")]
    NotAFolder { path: String },
    #[error("not a text file: {path} (tools read .txt, .md, .html, .pdf and other plain text)")]
    NotText { path: String },
    #[error("the path is too long (at most {limit} bytes, and {name_limit} per name): {path}")]
    PathTooLong {
        path: String,
        limit: usize,
        name_limit: usize,
    },
    #[error("{path} is a loop of symbolic links")]
    SymlinkLoop { path: String },
    #[error("{path} changed while it was being opened; try again")]
    Changed { path: String },
    #[error("{path} is in a folder granted read-only; grant it with \"may write\" to change it")]
    ReadOnly { path: String },
    #[error("you declined {tool}; nothing was changed")]
    Denied { tool: String },
    #[error(
        "this turn has already read {limit_mb} MB of files, all it may; ask again in a new message"
    )]
    TurnBudgetSpent { limit_mb: u64 },
    #[error("cannot compute `{expression}`: {problem}")]
    Calculation { expression: String, problem: String },
    #[error("cannot read `{when}` as a time: {problem}")]
    InvalidTime { when: String, problem: String },
    #[error("summarizing needs the model, which is not available here")]
    SummarizerUnavailable,
    #[error("cannot grant {path}: {problem}")]
    BadGrant { path: PathBuf, problem: String },
    #[error("cannot {action} {path}: {source}")]
    Io {
        action: &'static str,
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Document(#[from] documents::Error),
    #[error(transparent)]
    Host(#[from] HostError),
}

fn hint_suffix(hint: &Option<String>) -> String {
    hint.as_ref().map(|h| format!(" ({h})")).unwrap_or_default()
}

impl Error {
    /// A stable, machine-readable code.
    pub fn code(&self) -> &str {
        match self {
            Error::UnknownTool(_) => "unknown_tool",
            Error::InvalidArguments { .. } => "invalid_arguments",
            Error::NoGrant => "no_grant",
            Error::OutsideGrants { .. } => "outside_grants",
            Error::Hidden { .. } => "hidden",
            Error::Private { .. } => "private_data",
            Error::NotFound { .. } => "not_found",
            Error::NotAFile { .. } => "not_a_file",
            Error::NotAFolder { .. } => "not_a_folder",
            Error::NotText { .. } => "not_text",
            Error::PathTooLong { .. } => "path_too_long",
            Error::SymlinkLoop { .. } => "symlink_loop",
            Error::Changed { .. } => "changed_while_opening",
            Error::ReadOnly { .. } => "read_only",
            Error::Denied { .. } => "denied",
            Error::TurnBudgetSpent { .. } => "turn_budget_spent",
            Error::Calculation { .. } => "invalid_expression",
            Error::InvalidTime { .. } => "invalid_time",
            Error::SummarizerUnavailable => "summarizer_unavailable",
            Error::BadGrant { .. } => "bad_grant",
            Error::Io { .. } => "io",
            Error::Document(e) => e.code(),
            Error::Host(e) => &e.code,
        }
    }

    pub(crate) fn invalid(tool: &str, problem: impl Into<String>) -> Self {
        Error::InvalidArguments {
            tool: tool.to_string(),
            problem: problem.into(),
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
