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
    /// The tool-call grammar could not be built (a bug: our schemas are checked).
    #[error("the tool-call grammar could not be built: {0}")]
    Grammar(String),
}

impl Error {
    pub fn code(&self) -> &str {
        match self {
            Error::Engine(e) => e.code(),
            Error::Memory(e) => e.code(),
            Error::MessageTooLong { .. } => "message_too_long",
            Error::NoConversation => "no_conversation",
            Error::NothingToRegenerate => "nothing_to_regenerate",
            Error::NotEditable => "not_editable",
            Error::Document(e) => e.code(),
            Error::ContextTooSmall { .. } => "context_too_small",
            Error::Cancelled { .. } => "cancelled",
            Error::Grammar(_) => "grammar",
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
