//! The memory crate's error: each variant is a sentence a user can act on, with a stable
//! `code()` for the IPC edge.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "the conversation database {path} was written by a newer Companion (schema version {found}; this one knows up to {supported}); it was left untouched — update Companion to open it"
    )]
    SchemaTooNew {
        path: PathBuf,
        found: i64,
        supported: i64,
    },
    #[error("the disk is full: {0}. Free some space and try again; nothing already saved was lost")]
    DiskFull(String),
    #[error("no conversation matches `{0}`")]
    ConversationNotFound(String),
    #[error("`{0}` matches more than one conversation; give more of its id")]
    AmbiguousConversation(String),
    #[error("no model in the library matches `{0}` (`companion models list` shows them)")]
    ModelNotFound(String),
    #[error(
        "`{0}` matches more than one model; give its name and version (`name v2`) or more of its sha256"
    )]
    AmbiguousModel(String),
    #[error("{0} is the model in use; choose another model first (`companion models use NAME`)")]
    ModelInUse(String),
    #[error("message {0} does not exist")]
    MessageNotFound(i64),
    #[error("a conversation with id {0} already exists")]
    ConversationExists(String),
    #[error("not a Companion conversation export: {0}")]
    InvalidExport(String),
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    #[error(
        "the picture is {} MiB; Companion keeps pictures of up to {} MiB",
        .0.div_ceil(1 << 20),
        crate::store::MAX_IMAGE_BYTES >> 20
    )]
    ImageTooLarge(usize),
    #[error("pictures must be PNG, JPEG, WebP or GIF; this one is `{0}`")]
    ImageType(String),
    #[error(
        "a picture of this conversation (sha256 {}…) is missing from the data folder",
        short_sha(.0)
    )]
    ImageMissing(String),
    #[error(
        "a picture of this conversation (sha256 {}…) is damaged in the data folder: its bytes no longer match",
        short_sha(.0)
    )]
    ImageCorrupt(String),
    #[error("the summarizer failed: {0}")]
    Summarizer(String),
    #[error("cannot {action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("database error: {0}")]
    Sqlite(rusqlite::Error),
}

impl Error {
    /// A stable, machine-readable code for the IPC edge and `--json` output.
    pub fn code(&self) -> &'static str {
        match self {
            Error::SchemaTooNew { .. } => "database_too_new",
            Error::DiskFull(_) => "disk_full",
            Error::ConversationNotFound(_) => "conversation_not_found",
            Error::AmbiguousConversation(_) => "conversation_ambiguous",
            Error::ModelNotFound(_) => "model_not_found",
            Error::AmbiguousModel(_) => "model_ambiguous",
            Error::ModelInUse(_) => "model_in_use",
            Error::MessageNotFound(_) => "message_not_found",
            Error::ConversationExists(_) => "conversation_exists",
            Error::InvalidExport(_) => "invalid_export",
            Error::InvalidArgument(_) => "invalid_argument",
            Error::ImageTooLarge(_) => "image_too_large",
            Error::ImageType(_) => "image_type_unsupported",
            Error::ImageMissing(_) => "image_missing",
            Error::ImageCorrupt(_) => "image_corrupt",
            Error::Summarizer(_) => "summarizer_failed",
            Error::Io { .. } => "io",
            Error::Sqlite(_) => "database",
        }
    }

    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        // ENOSPC (28 on Linux and Darwin) reads better as the disk being full
        if source.raw_os_error() == Some(28) {
            return Error::DiskFull(format!("cannot {action} {}", path.into().display()));
        }
        Error::Io {
            action,
            path: path.into(),
            source,
        }
    }
}

/// The start of a sha256, enough for a person to tell pictures apart.
fn short_sha(sha: &str) -> &str {
    sha.get(..12).unwrap_or(sha)
}

impl From<rusqlite::Error> for Error {
    fn from(e: rusqlite::Error) -> Self {
        if let rusqlite::Error::SqliteFailure(f, _) = &e
            && f.code == rusqlite::ErrorCode::DiskFull
        {
            return Error::DiskFull(e.to_string());
        }
        Error::Sqlite(e)
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
