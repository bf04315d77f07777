//! The errors of reading a document, each worded for the person who picked the file.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read {path}: {source}")]
    Unreadable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is empty")]
    Empty { path: PathBuf },
    #[error("{path} looks like a binary file, not a document (supported: .txt, .md, .html, .pdf)")]
    Binary { path: PathBuf },
    #[error("{path} has no extractable text{}", hint_suffix(.hint))]
    NoText { path: PathBuf, hint: Option<String> },
    #[error("{path} is not a PDF that can be read: {message}")]
    Pdf { path: PathBuf, message: String },
    #[error(
        "{path} is a {size_mb} MB {format} file; Companion reads {format} files of up to {limit_mb} MB whole (save it as a .txt file to summarize any length)"
    )]
    TooLarge {
        path: PathBuf,
        format: &'static str,
        size_mb: u64,
        limit_mb: u64,
    },
    /// A file built to take far more time or memory to read than its size says (a
    /// decompression bomb, thousands of nested elements, a form that draws itself).
    #[error(
        "{path} cannot be read safely as {format}: {reason} (if it is a real document, save its text as a .txt file)"
    )]
    TooComplex {
        path: PathBuf,
        format: &'static str,
        reason: String,
    },
}

fn hint_suffix(hint: &Option<String>) -> String {
    hint.as_ref().map(|h| format!(" ({h})")).unwrap_or_default()
}

impl Error {
    /// A stable, machine-readable code for the IPC edge and `--json` output.
    pub fn code(&self) -> &'static str {
        match self {
            Error::Unreadable { .. } => "document_unreadable",
            Error::Empty { .. } => "document_empty",
            Error::Binary { .. } => "document_binary",
            Error::NoText { .. } => "document_no_text",
            Error::Pdf { .. } => "document_bad_pdf",
            Error::TooLarge { .. } => "document_too_large",
            Error::TooComplex { .. } => "document_too_complex",
        }
    }
}

pub type Result<T> = std::result::Result<T, Error>;
