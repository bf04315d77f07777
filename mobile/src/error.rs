//! The plugin's errors: what iOS refused or could not do, said so that the app can tell the
//! user what to do.

use serde::{Serialize, Serializer};

pub type Result<T> = std::result::Result<T, Error>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Only iOS has this (the document picker, EventKit, background time).
    #[error("{0} exists only on iOS")]
    Unsupported(&'static str),
    /// The bookmark no longer opens its folder: the user revoked access, or the folder was
    /// deleted or its provider removed.
    #[error("iOS no longer lets Companion open this folder ({0}); pick it again in Folders")]
    BookmarkRevoked(String),
    /// The user did not allow access (Reminders).
    #[error("{0}")]
    Denied(String),
    /// iOS answered with an error.
    #[error("iOS could not {action}: {message}")]
    Native { action: String, message: String },
    #[error("the iOS bridge: {0}")]
    Bridge(String),
}

impl Error {
    pub fn code(&self) -> &'static str {
        match self {
            Error::Unsupported(_) => "unsupported",
            Error::BookmarkRevoked(_) => "bookmark_revoked",
            Error::Denied(_) => "permission_denied",
            Error::Native { .. } => "native",
            Error::Bridge(_) => "bridge",
        }
    }
}

impl Serialize for Error {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_string())
    }
}
