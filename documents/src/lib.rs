//! Companion's documents, as text: what a file says and how to cut it into pieces a model can
//! read. This crate knows neither candle nor SQLite — the summarization job that glues it to the
//! engine and the memory store lives in `chat` (see `chat::documents`).
//!
//! - [`extract`]: a `.txt`, `.md`, `.html` or `.pdf` file (text layer) to plain text, with its
//!   encoding detected (UTF-8, UTF-16 with a byte-order mark, the common legacy encodings) and
//!   typed errors for what cannot be read;
//! - [`chunk`]: split text on paragraph, then sentence boundaries into chunks of at most N
//!   tokens, counted by the caller's tokenizer.

pub mod chunk;
pub mod decode;
pub mod error;
pub mod extract;

pub use chunk::{Chunk, split};
pub use error::{Error, Result};
pub use extract::{Extracted, Format, extract, extract_bytes};
