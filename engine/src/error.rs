//! The engine's error type. Every variant reads as a sentence a user can act on: the CLI prints
//! `Display` as its one-line message and the app maps variants to `{code, message}`.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "model file not found: {}. Fetch the default model with `scripts/fetch-model`, or pass --model PATH to a Gemma GGUF file",
        path.display()
    )]
    ModelNotFound { path: PathBuf },

    #[error("cannot read {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("{} is not a usable GGUF model: {reason}", path.display())]
    InvalidModel { path: PathBuf, reason: String },

    #[error(
        "{} is a `{architecture}` model, which Companion cannot run: supported architectures are {supported}",
        path.display()
    )]
    UnsupportedArchitecture {
        path: PathBuf,
        architecture: String,
        supported: &'static str,
    },

    /// A Gemma file that asks for something the engine does not implement (mixture of
    /// experts, an embedding model, a projector file, …): `what` says which.
    #[error("{} cannot be run: {what}", path.display())]
    UnsupportedModel { path: PathBuf, what: String },

    #[error("the tokenizer could not be built from the GGUF vocabulary: {0}")]
    Tokenizer(String),

    #[error(
        "the context is full: {needed} tokens are needed but the context holds {capacity} ({over} too many)"
    )]
    ContextFull {
        needed: usize,
        capacity: usize,
        over: usize,
    },

    #[error(
        "the prompt is {tokens} tokens, longer than the context of {context} tokens: shorten it or raise the context size"
    )]
    PromptTooLong { tokens: usize, context: usize },

    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    #[error(
        "a KV-cache memory budget of {budget} bytes is too small: even {tokens} tokens need {needed} bytes; raise the budget"
    )]
    MemoryBudgetTooSmall {
        budget: u64,
        tokens: usize,
        needed: u64,
    },

    /// Not even the smallest useful context fits in the memory the device can spare.
    #[error(
        "not enough memory: the model needs about {} even with a context of {context} tokens, but only {} is available; close other apps or choose a smaller model",
        crate::memory_guard::megabytes(*needed),
        crate::memory_guard::megabytes(*available)
    )]
    InsufficientMemory {
        needed: u64,
        available: u64,
        context: usize,
    },

    /// A KV snapshot made by another model, layout or format version: the session stays empty
    /// and the conversation must be prefilled again.
    #[error(
        "the KV snapshot does not fit this engine: its {field} is {found}, this engine's is {expected}"
    )]
    SnapshotMismatch {
        field: &'static str,
        expected: String,
        found: String,
    },

    #[error("the KV snapshot is damaged: {0}")]
    SnapshotCorrupt(String),

    /// An error reported by the engine thread for one request, as its event carried it.
    #[error("{message}")]
    Request { code: String, message: String },

    #[error("the engine thread has stopped")]
    EngineStopped,

    /// The token constraint of a request (a tool call's grammar) could not go on.
    #[error("the output constraint failed: {0}")]
    Constraint(String),

    #[error("tensor computation failed: {0}")]
    Candle(#[from] candle_core::Error),
}

impl Error {
    /// A stable machine-readable code for the IPC edge and for tests.
    pub fn code(&self) -> &str {
        match self {
            Error::ModelNotFound { .. } => "model_not_found",
            Error::Io { .. } => "io",
            Error::InvalidModel { .. } => "invalid_model",
            Error::UnsupportedArchitecture { .. } => "unsupported_architecture",
            Error::UnsupportedModel { .. } => "unsupported_model",
            Error::Tokenizer(_) => "tokenizer",
            Error::ContextFull { .. } => "context_full",
            Error::PromptTooLong { .. } => "prompt_too_long",
            Error::InvalidArgument(_) => "invalid_argument",
            Error::MemoryBudgetTooSmall { .. } => "memory_budget_too_small",
            Error::InsufficientMemory { .. } => "insufficient_memory",
            Error::SnapshotMismatch { .. } => "snapshot_mismatch",
            Error::SnapshotCorrupt(_) => "snapshot_corrupt",
            Error::Request { code, .. } => code,
            Error::EngineStopped => "engine_stopped",
            Error::Constraint(_) => "constraint_failed",
            Error::Candle(_) => "compute",
        }
    }

    pub(crate) fn context_full(needed: usize, capacity: usize) -> Self {
        Error::ContextFull {
            needed,
            capacity,
            over: needed.saturating_sub(capacity),
        }
    }
}

pub type Result<T> = std::result::Result<T, Error>;
