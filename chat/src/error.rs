//! Errors of a conversation turn: the engine's, the store's, and a message too long for the
//! context. Each has a stable code for the IPC edge.

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
}

impl Error {
    pub fn code(&self) -> &str {
        match self {
            Error::Engine(e) => e.code(),
            Error::Memory(e) => e.code(),
            Error::MessageTooLong { .. } => "message_too_long",
            Error::NoConversation => "no_conversation",
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
