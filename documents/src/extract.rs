//! A document file to plain text. The format comes from the extension (`.txt`, `.text`, `.md`,
//! `.markdown`, `.html`, `.htm`, `.xhtml`, `.pdf`, and pictures: `.png`, `.jpg`, `.jpeg`,
//! `.webp`, `.gif`), or, for any other name, from the content: `%PDF-` is a PDF, a picture
//! file's signature a picture, a leading `<!doctype html` or `<html` is HTML, anything else
//! that decodes is text. Markdown is kept as written: the model reads it well, and stripping its marks
//! would lose headings. HTML goes through html5ever and `html2text` (`html.rs`), PDFs give
//! their text layer through `pdf-extract` (`pdf.rs`; a scanned PDF has none), each bounded in
//! time and memory against files built to exhaust them.

use std::path::Path;

use crate::document::Document;
use crate::error::Result;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text,
    Markdown,
    Html,
    Pdf,
    /// A photo or a scan given as the document: PNG, JPEG, WebP or GIF, read by a vision
    /// encoder rather than as text.
    Picture,
}

impl Format {
    pub fn name(self) -> &'static str {
        match self {
            Format::Text => "text",
            Format::Markdown => "markdown",
            Format::Html => "html",
            Format::Pdf => "pdf",
            Format::Picture => "picture",
        }
    }

    pub(crate) fn from_extension(path: &Path) -> Option<Format> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        Some(match ext.as_str() {
            "txt" | "text" => Format::Text,
            "md" | "markdown" => Format::Markdown,
            "html" | "htm" | "xhtml" => Format::Html,
            "pdf" => Format::Pdf,
            "png" | "jpg" | "jpeg" | "webp" | "gif" => Format::Picture,
            _ => return None,
        })
    }

    pub(crate) fn sniff(bytes: &[u8]) -> Format {
        if bytes.starts_with(b"%PDF-") {
            return Format::Pdf;
        }
        let webp = bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP";
        if bytes.starts_with(b"\x89PNG\r\n\x1a\n")
            || bytes.starts_with(&[0xFF, 0xD8, 0xFF])
            || bytes.starts_with(b"GIF87a")
            || bytes.starts_with(b"GIF89a")
            || webp
        {
            return Format::Picture;
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

/// A document's whole text and what it was read from: for small documents and tests. A long
/// document is read piece by piece through [`Document::text`] instead.
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
    whole(Document::open(path)?)
}

/// Extract `bytes`, read from `path` (which names the file in errors and gives the format).
pub fn extract_bytes(path: &Path, bytes: &[u8]) -> Result<Extracted> {
    whole(Document::from_bytes(path, bytes.to_vec())?)
}

fn whole(document: Document) -> Result<Extracted> {
    Ok(Extracted {
        text: document.read_to_string()?,
        format: document.format,
        encoding: document.encoding,
        byte_count: document.byte_count,
        sha256: document.sha256,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_format_comes_from_the_extension_then_the_content() {
        let p = Path::new("x.HTM");
        assert_eq!(Format::from_extension(p), Some(Format::Html));
        assert_eq!(Format::from_extension(Path::new("x.bin")), None);
        assert_eq!(Format::sniff(b"%PDF-1.4"), Format::Pdf);
        assert_eq!(Format::sniff(b"\n  <!DOCTYPE html><p>x"), Format::Html);
        assert_eq!(Format::sniff(b"hello"), Format::Text);
        assert_eq!(Format::sniff(b"\x89PNG\r\n\x1a\n...."), Format::Picture);
        assert_eq!(Format::sniff(b"RIFF\0\0\0\0WEBPVP8 "), Format::Picture);
        assert_eq!(
            Format::from_extension(Path::new("scan.JPG")),
            Some(Format::Picture)
        );
    }
}
