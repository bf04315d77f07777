//! Companion's documents, as text: what a file says and how to cut it into pieces a model can
//! read. This crate knows neither candle nor SQLite — the summarization job that glues it to the
//! engine and the memory store lives in `chat` (see `chat::documents`).
//!
//! - [`Document`]: a `.txt`, `.md`, `.html` or `.pdf` file (text layer) opened, checked and
//!   read as a stream of plain text (a scanned PDF, or a photo, as the pictures of its pages:
//!   [`PagePicture`]), with its encoding detected (UTF-8, UTF-16 with a
//!   byte-order mark, the common legacy encodings) and typed errors for what cannot be read;
//!   a text file is never held whole in memory;
//! - [`extract`]: the same, whole, for small documents;
//! - [`chunk`]: split text on paragraph, then sentence boundaries into chunks of at most N
//!   tokens, counted by the caller's tokenizer; [`ChunkStream`] does it over a stream of text
//!   in a bounded window.

pub mod chunk;
pub mod chunk_stream;
pub mod decode;
pub mod document;
pub mod error;
pub mod extract;
pub mod html;
pub mod normalize;
pub mod pdf;
pub mod pdf_pages;

pub use chunk::{Chunk, split};
pub use chunk_stream::{ChunkStream, ChunkText};
pub use document::{Document, TextStream};
pub use error::{Error, Result};
pub use extract::{Extracted, Format, extract, extract_bytes};
pub use pdf_pages::{PagePicture, PictureData};
