//! Errors of a conversation turn or a document job: the engine's, the store's, the document's,
//! a message too long for the context, a cancelled job. Each has a stable code for the IPC edge.

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Engine(#[from] engine::Error),
    #[error(transparent)]
    Memory(#[from] memory::Error),
    #[error(
        "your message needs {tokens} tokens with the conversation's newest turns, more than the {context}-token context can answer; shorten it or start a new conversation"
    )]
    MessageTooLong { tokens: usize, context: usize },
    #[error("no conversation is open")]
    NoConversation,
    #[error("there is no message of yours to answer again in this conversation")]
    NothingToRegenerate,
    #[error("only your own messages in the open conversation can be edited")]
    NotEditable,
    #[error(transparent)]
    Document(#[from] documents::Error),
    #[error(
        "a {context}-token context is too small to summarize with {summary_tokens}-token summaries; use a larger context or shorter summaries"
    )]
    ContextTooSmall {
        context: usize,
        summary_tokens: usize,
    },
    #[error(
        "cancelled after {done} of {total} summaries; they are kept, and the same job resumes from there"
    )]
    Cancelled { done: usize, total: usize },
    #[error("`{0}` is not a sha256: give the 64 hex digits published with the model")]
    BadSha256(String),
    #[error(
        "{path} is not the file you expected: its sha256 is {found}, not {expected}. It was not imported; download it again"
    )]
    Sha256Mismatch {
        path: std::path::PathBuf,
        expected: String,
        found: String,
    },
    #[error(
        "not enough free disk space in {dir} to import this model: it needs {} MB, {} MB are free. Nothing was copied",
        needed / 1_000_000,
        free / 1_000_000
    )]
    NotEnoughSpace {
        needed: u64,
        free: u64,
        dir: std::path::PathBuf,
    },
    #[error("the file of {model} is gone ({path}); import it again or remove it from the library")]
    ModelFileMissing {
        model: String,
        path: std::path::PathBuf,
    },
    #[error(
        "{model} is damaged: its file {path} has sha256 {found}, not the {expected} it had when imported; import it again"
    )]
    ModelDamaged {
        model: String,
        path: std::path::PathBuf,
        expected: String,
        found: String,
    },
    #[error("the model does not work: {0}")]
    ModelNotWorking(String),
    /// A Gemma 4 assistant or a vision projector imported where no model of the library is
    /// one it is for.
    #[error("{1}")]
    PairedFitsNoModel(memory::Pairing, String),
    #[error("{model} failed its self-check, so {kept} stays in use: {reason}")]
    SelfCheckFailed {
        model: String,
        reason: String,
        kept: String,
    },
    #[error("cannot {action} {path}: {source}")]
    ModelIo {
        action: &'static str,
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    /// The tool-call grammar could not be built (a bug: our schemas are checked).
    #[error("the tool-call grammar could not be built: {0}")]
    Grammar(String),
    /// A local API client asked for something Companion cannot do as asked.
    #[error("{0}")]
    InvalidRequest(String),
    /// A picture that cannot be read (not a picture, too large, damaged).
    #[error("{0}")]
    Picture(String),
    /// Pictures given to a model without its vision projector.
    #[error(
        "{model} reads no pictures: pictures need its vision projector (an mmproj file) imported beside it"
    )]
    NoProjector { model: String },
}

impl Error {
    pub fn code(&self) -> &str {
        match self {
            Error::Engine(e) => e.code(),
            Error::Memory(e) => e.code(),
            Error::MessageTooLong { .. } => "message_too_long",
            Error::Picture(_) => "bad_picture",
            Error::NoProjector { .. } => "no_projector",
            Error::NoConversation => "no_conversation",
            Error::NothingToRegenerate => "nothing_to_regenerate",
            Error::NotEditable => "not_editable",
            Error::Document(e) => e.code(),
            Error::ContextTooSmall { .. } => "context_too_small",
            Error::Cancelled { .. } => "cancelled",
            Error::Grammar(_) => "grammar",
            Error::InvalidRequest(_) => "invalid_request",
            Error::BadSha256(_) => "invalid_argument",
            Error::Sha256Mismatch { .. } => "sha256_mismatch",
            Error::NotEnoughSpace { .. } => "disk_full",
            Error::ModelFileMissing { .. } => "model_file_missing",
            Error::ModelNotWorking(_) => "model_not_working",
            Error::PairedFitsNoModel(memory::Pairing::Assistant, _) => "assistant_fits_no_model",
            Error::PairedFitsNoModel(memory::Pairing::Projector, _) => "projector_fits_no_model",
            Error::ModelDamaged { .. } => "model_damaged",
            Error::SelfCheckFailed { .. } => "self_check_failed",
            // ENOSPC (28 on Linux and Darwin): the disk filled up during the copy
            Error::ModelIo { source, .. } if source.raw_os_error() == Some(28) => "disk_full",
            Error::ModelIo { .. } => "io",
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
