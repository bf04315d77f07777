//! A document file to plain text. The format comes from the extension (`.txt`, `.text`, `.md`,
//! `.markdown`, `.html`, `.htm`, `.xhtml`, `.pdf`), or, for any other name, from the content:
//! `%PDF-` is a PDF, a leading `<!doctype html` or `<html` is HTML, anything else that decodes
//! is text. Markdown is kept as written: the model reads it well, and stripping its marks
//! would lose headings. HTML goes through `html2text` (html5ever's parser, the WHATWG
//! algorithm browsers follow), which drops scripts and styles and decodes entities. PDFs give
//! their text layer through `pdf-extract` (pure Rust, on `lopdf`); a scanned PDF has none.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::decode::decode;
use crate::error::{Error, Result};

/// Wide enough that html2text never wraps a paragraph: line breaks inside a paragraph would
/// only cost tokens.
const HTML_WIDTH: usize = 1 << 16;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text,
    Markdown,
    Html,
    Pdf,
}

impl Format {
    pub fn name(self) -> &'static str {
        match self {
            Format::Text => "text",
            Format::Markdown => "markdown",
            Format::Html => "html",
            Format::Pdf => "pdf",
        }
    }

    fn from_extension(path: &Path) -> Option<Format> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        Some(match ext.as_str() {
            "txt" | "text" => Format::Text,
            "md" | "markdown" => Format::Markdown,
            "html" | "htm" | "xhtml" => Format::Html,
            "pdf" => Format::Pdf,
            _ => return None,
        })
    }

    fn sniff(bytes: &[u8]) -> Format {
        if bytes.starts_with(b"%PDF-") {
            return Format::Pdf;
        }
        let head = String::from_utf8_lossy(&bytes[..bytes.len().min(512)]).to_ascii_lowercase();
        let head = head.trim_start_matches('\u{feff}').trim_start();
        if head.starts_with("<!doctype html") || head.starts_with("<html") {
            Format::Html
        } else {
            Format::Text
        }
    }
}

/// A document's text and what it was read from.
#[derive(Debug, Clone)]
pub struct Extracted {
    pub text: String,
    pub format: Format,
    /// The encoding the text was decoded from; `None` for PDFs, which carry their own.
    pub encoding: Option<&'static str>,
    /// Size of the file in bytes.
    pub byte_count: u64,
    /// SHA-256 of the file's bytes, lowercase hex: what identifies the content.
    pub sha256: String,
}

/// Read and extract the file at `path`.
pub fn extract(path: &Path) -> Result<Extracted> {
    let bytes = std::fs::read(path).map_err(|source| Error::Unreadable {
        path: path.to_path_buf(),
        source,
    })?;
    extract_bytes(path, &bytes)
}

/// Extract `bytes`, read from `path` (which names the file in errors and gives the format).
pub fn extract_bytes(path: &Path, bytes: &[u8]) -> Result<Extracted> {
    let path_buf = || path.to_path_buf();
    if bytes.is_empty() {
        return Err(Error::Empty { path: path_buf() });
    }
    let format = Format::from_extension(path).unwrap_or_else(|| Format::sniff(bytes));
    let (raw, encoding) = match format {
        Format::Pdf => (pdf_text(path, bytes)?, None),
        Format::Text | Format::Markdown | Format::Html => {
            let decoded = decode(bytes).ok_or_else(|| Error::Binary { path: path_buf() })?;
            let text = if format == Format::Html {
                html_text(&decoded.text)
            } else {
                decoded.text
            };
            (text, Some(decoded.encoding))
        }
    };
    let text = normalize(&raw);
    if text.is_empty() {
        let hint = match format {
            Format::Pdf => {
                Some("it may be scanned pages; Companion does not read text in images".to_string())
            }
            Format::Html => Some("the page has markup but no text".to_string()),
            Format::Text | Format::Markdown => Some("only whitespace".to_string()),
        };
        return Err(Error::NoText {
            path: path_buf(),
            hint,
        });
    }
    Ok(Extracted {
        text,
        format,
        encoding,
        byte_count: bytes.len() as u64,
        sha256: hex_sha256(bytes),
    })
}

fn html_text(html: &str) -> String {
    // html2text only fails on a broken reader or an impossible width; a string never breaks
    html2text::config::plain_no_decorate()
        .allow_width_overflow()
        .string_from_read(html.as_bytes(), HTML_WIDTH)
        .unwrap_or_default()
}

fn pdf_text(path: &Path, bytes: &[u8]) -> Result<String> {
    let pdf_error = |message: String| Error::Pdf {
        path: PathBuf::from(path),
        message,
    };
    // pdf-extract panics on some malformed files instead of returning an error; a damaged PDF
    // must end in a message, not take the caller (the app's engine thread) down with it.
    match std::panic::catch_unwind(|| pdf_extract::extract_text_from_mem(bytes)) {
        Ok(Ok(text)) => Ok(text),
        Ok(Err(e)) => Err(pdf_error(e.to_string())),
        Err(panic) => {
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "the file is damaged".into());
            Err(pdf_error(message))
        }
    }
}

/// Unix line ends, no stray NULs or byte-order marks, no trailing spaces on lines, at most one
/// blank line between paragraphs (PDF text layers are full of runs of them), trimmed.
fn normalize(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut blank_run = 0usize;
    for line in raw.split('\n') {
        let line = line
            .trim_end_matches(['\r', ' ', '\t'])
            .replace(['\u{0}', '\u{feff}'], "");
        if line.trim().is_empty() {
            blank_run += 1;
            continue;
        }
        if !out.is_empty() {
            out.push_str(if blank_run > 0 { "\n\n" } else { "\n" });
        }
        blank_run = 0;
        out.push_str(&line);
    }
    out
}

fn hex_sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_keeps_paragraphs_and_drops_noise() {
        assert_eq!(
            normalize("\r\n  a  \r\nb\r\n\r\n\r\n\n c\u{feff}\t\n\n"),
            "  a\nb\n\n c"
        );
    }

    #[test]
    fn the_format_comes_from_the_extension_then_the_content() {
        let p = Path::new("x.HTM");
        assert_eq!(Format::from_extension(p), Some(Format::Html));
        assert_eq!(Format::from_extension(Path::new("x.bin")), None);
        assert_eq!(Format::sniff(b"%PDF-1.4"), Format::Pdf);
        assert_eq!(Format::sniff(b"\n  <!DOCTYPE html><p>x"), Format::Html);
        assert_eq!(Format::sniff(b"hello"), Format::Text);
    }
}
