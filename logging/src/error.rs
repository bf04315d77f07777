//! Why the log could not be installed. The callers go on without a log (and say so): a log is
//! never a reason for Companion not to start.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot write the log in {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the log level settings “{directives}” cannot be read: {reason}")]
    Filter { directives: String, reason: String },
    #[error("a log is already installed in this process")]
    AlreadyInstalled,
}

impl Error {
    /// A short stable code, as the other crates' errors have.
    pub fn code(&self) -> &'static str {
        match self {
            Error::Io { .. } => "log_io",
            Error::Filter { .. } => "log_filter",
            Error::AlreadyInstalled => "log_installed",
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
