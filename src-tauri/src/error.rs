//! The error every command returns: a stable `code` and one sentence, `message`, that says what
//! happened and what to do next. It serializes as `{code, message}` (DESIGN.md: never
//! `Result<_, String>` at the IPC edge).

use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[error("{message}")]
pub struct AppError {
    pub code: String,
    pub message: String,
}

impl AppError {
    pub fn new(code: &str, message: impl Into<String>) -> Self {
        AppError {
            code: code.to_string(),
            message: message.into(),
        }
    }

    /// The engine is still loading, or failed to load.
    pub fn not_ready() -> Self {
        AppError::new(
            "not_ready",
            "The model is not loaded yet; wait for it to finish loading, or import a model in the model panel.",
        )
    }

    /// The worker that runs the engine is gone (it cannot happen unless the app is closing).
    pub fn worker_gone() -> Self {
        AppError::new(
            "worker_stopped",
            "The engine stopped; restart Companion to go on. Your conversations are saved.",
        )
    }

    /// A bug stopped what was asked; the worker recovered and goes on.
    pub fn worker_panic() -> Self {
        AppError::new(
            "worker_panic",
            "Companion met an internal error and stopped what it was doing; it has recovered, so try again. The details are in the log (Settings → Open log folder).",
        )
    }
}

impl From<chat::Error> for AppError {
    fn from(e: chat::Error) -> Self {
        AppError::new(e.code(), sentence(&e.to_string()))
    }
}

impl From<memory::Error> for AppError {
    fn from(e: memory::Error) -> Self {
        AppError::new(e.code(), sentence(&e.to_string()))
    }
}

impl From<engine::Error> for AppError {
    fn from(e: engine::Error) -> Self {
        AppError::new(e.code(), sentence(&e.to_string()))
    }
}

impl From<tauri::Error> for AppError {
    fn from(e: tauri::Error) -> Self {
        AppError::new("app", sentence(&format!("the app could not do that: {e}")))
    }
}

pub type Result<T, E = AppError> = std::result::Result<T, E>;

/// Library messages are lower-case clauses ("cannot open …"); the UI shows sentences.
pub fn sentence(text: &str) -> String {
    let text = text.trim();
    let mut chars = text.chars();
    let mut out: String = match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => return "Something went wrong.".into(),
    };
    if !out.ends_with(['.', '!', '?']) {
        out.push('.');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_become_sentences() {
        assert_eq!(sentence("cannot open x; try y"), "Cannot open x; try y.");
        assert_eq!(sentence("Done."), "Done.");
        assert_eq!(sentence(" "), "Something went wrong.");
        assert_eq!(sentence("été"), "Été.");
    }

    #[test]
    fn serializes_as_code_and_message() {
        let e = AppError::new("x", "Y.");
        assert_eq!(
            serde_json::to_value(&e).unwrap(),
            serde_json::json!({"code": "x", "message": "Y."})
        );
    }
}
