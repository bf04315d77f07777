//! File text for the tools, always through an already-opened handle (the sandbox's) and with
//! bounded memory. The `documents` crate does the decoding and extraction — encodings (a
//! byte-order mark, UTF-8, a legacy guess by chardetng), binary refusal, normalization, HTML
//! and PDF text — on the bounded pieces this module reads:
//!
//! - [`window`]: `read_file`'s capped window of a file's text;
//! - [`scan`]: `search_files`' line-by-line stream with a line-length cap.
//!
//! HTML and PDF must be parsed whole, so they are read whole, up to `documents`' own
//! [`documents::document::MAX_PARSED_BYTES`]; every other file is treated as text and never
//! read whole.

pub(crate) mod scan;
pub(crate) mod window;

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use crate::error::{Error, Result};

/// How much of the start of a file decides whether it is binary and how it is encoded
/// (`documents` uses the same).
pub(crate) const HEAD_BYTES: usize = 8192;

/// Formats that are parsed whole rather than streamed as text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Text,
    Html,
    Pdf,
}

impl Kind {
    /// By extension, as `documents` decides (`.html`, `.htm`, `.xhtml`, `.pdf`), else by
    /// content as `documents` sniffs it (`%PDF-`, a leading `<!doctype html` or `<html`).
    pub(crate) fn of(name: &str, head: &[u8]) -> Kind {
        let ext = Path::new(name)
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase);
        match ext.as_deref() {
            Some("html" | "htm" | "xhtml") => return Kind::Html,
            Some("pdf") => return Kind::Pdf,
            Some("txt" | "text" | "md" | "markdown") => return Kind::Text,
            _ => {}
        }
        if head.starts_with(b"%PDF-") {
            return Kind::Pdf;
        }
        let start = String::from_utf8_lossy(&head[..head.len().min(512)]).to_ascii_lowercase();
        let start = start.trim_start_matches('\u{feff}').trim_start();
        if start.starts_with("<!doctype html") || start.starts_with("<html") {
            Kind::Html
        } else {
            Kind::Text
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::Text => "text",
            Kind::Html => "html",
            Kind::Pdf => "pdf",
        }
    }
}

/// A text file's encoding as far as the stream needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Encoding {
    /// UTF-8 (after a byte-order mark of this many bytes) or a legacy encoding: ASCII
    /// newlines, no NUL bytes in text.
    Bytes {
        bom: usize,
    },
    Utf16 {
        little_endian: bool,
    },
}

impl Encoding {
    pub(crate) fn from_head(head: &[u8]) -> Encoding {
        if head.starts_with(&[0xEF, 0xBB, 0xBF]) {
            Encoding::Bytes { bom: 3 }
        } else if head.starts_with(&[0xFF, 0xFE]) {
            Encoding::Utf16 {
                little_endian: true,
            }
        } else if head.starts_with(&[0xFE, 0xFF]) {
            Encoding::Utf16 {
                little_endian: false,
            }
        } else {
            Encoding::Bytes { bom: 0 }
        }
    }

    pub(crate) fn start(self) -> u64 {
        match self {
            Encoding::Bytes { bom } => bom as u64,
            Encoding::Utf16 { .. } => 2,
        }
    }
}

/// Read the head of `file` (named `name`), tell its kind and encoding, and refuse a binary
/// one (a PDF is binary by nature: `documents` judges its text layer).
pub(crate) fn read_head(
    file: &mut impl ReadAt,
    name: &str,
    shown: &str,
) -> Result<(Vec<u8>, Encoding, Kind)> {
    let head = file.read_at_most(0, HEAD_BYTES, shown)?;
    let encoding = Encoding::from_head(&head);
    let kind = Kind::of(name, &head);
    if kind != Kind::Pdf
        && matches!(encoding, Encoding::Bytes { .. })
        && documents::decode::looks_binary(&head)
    {
        return Err(Error::NotText { path: shown.into() });
    }
    Ok((head, encoding, kind))
}

/// Reads at an offset, bounded.
pub(crate) trait ReadAt {
    fn read_at_most(&mut self, offset: u64, max: usize, shown: &str) -> Result<Vec<u8>>;
}

impl<F: Read + Seek> ReadAt for F {
    fn read_at_most(&mut self, offset: u64, max: usize, shown: &str) -> Result<Vec<u8>> {
        let io = |e| Error::Io {
            action: "read",
            path: shown.into(),
            source: e,
        };
        self.seek(SeekFrom::Start(offset)).map_err(io)?;
        let mut out = Vec::with_capacity(max.min(1 << 20));
        self.take(max as u64).read_to_end(&mut out).map_err(io)?;
        Ok(out)
    }
}

/// A whole HTML or PDF file's text, through `documents`. Refused, before it is read, when
/// larger than `documents` parses.
pub(crate) fn parsed_text(
    file: &mut impl ReadAt,
    len: u64,
    kind: Kind,
    shown: &str,
) -> Result<String> {
    let limit = documents::document::MAX_PARSED_BYTES;
    if len > limit {
        return Err(documents::Error::TooLarge {
            path: shown.into(),
            format: kind.name(),
            size_mb: len.div_ceil(1 << 20),
            limit_mb: limit >> 20,
        }
        .into());
    }
    let bytes = file.read_at_most(0, limit as usize, shown)?;
    let document = documents::Document::from_bytes(Path::new(shown), bytes)
        .map_err(|e| document_error(e, shown))?;
    document
        .read_to_string()
        .map_err(|e| document_error(e, shown))
}

/// `documents`' refusal of a binary file is the sandbox's `not a text file`.
pub(crate) fn document_error(e: documents::Error, shown: &str) -> Error {
    match e {
        documents::Error::Binary { .. } => Error::NotText { path: shown.into() },
        other => Error::Document(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_follow_documents_rules() {
        assert_eq!(Kind::of("a.PDF", b""), Kind::Pdf);
        assert_eq!(Kind::of("a.htm", b""), Kind::Html);
        assert_eq!(Kind::of("a.txt", b"%PDF-1.4"), Kind::Text);
        assert_eq!(Kind::of("noext", b"%PDF-1.4"), Kind::Pdf);
        assert_eq!(Kind::of("page", b"\n <!DOCTYPE html><p>"), Kind::Html);
        assert_eq!(Kind::of("a.rs", b"fn main() {}"), Kind::Text);
    }

    #[test]
    fn byte_order_marks_pick_the_encoding() {
        assert_eq!(
            Encoding::from_head(b"\xEF\xBB\xBFhi"),
            Encoding::Bytes { bom: 3 }
        );
        assert_eq!(
            Encoding::from_head(b"\xFF\xFEh\0"),
            Encoding::Utf16 {
                little_endian: true
            }
        );
        assert_eq!(Encoding::from_head(b"hi"), Encoding::Bytes { bom: 0 });
    }
}
