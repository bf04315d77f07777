//! An opened document: what it is (format, encoding, size, SHA-256) and a stream of its text.
//!
//! Memory stays bounded whatever the file's size for the text formats (`.txt`, `.md`, and
//! anything sniffed as text): opening reads the file once in blocks — hashing it, checking
//! that it is UTF-8 or feeding the legacy-encoding detector, looking for binary data in its
//! head — and the text is then decoded again from the file, block by block, when it is read.
//! HTML and PDF are parsed whole (html5ever builds the page's tree, `pdf-extract` needs the
//! file's cross-reference table), so they are held in memory while parsed, and their
//! extracted text after that; to keep that bounded too, files of those formats larger than
//! [`MAX_PARSED_BYTES`] are refused with a message that says to save them as text.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use encoding_rs::{Decoder, Encoding, UTF_8};
use sha2::{Digest, Sha256};

use crate::decode::{decode, looks_binary};
use crate::error::{Error, Result};
use crate::extract::Format;
use crate::html::html_text;
use crate::normalize::{Normalizer, normalize};
use crate::pdf::pdf_text;
use crate::pdf_pages::{PagePicture, PictureData, pdf_page_pictures};

/// The largest HTML or PDF file read (its parser holds it whole, with its tree or objects).
pub const MAX_PARSED_BYTES: u64 = 64 << 20;

/// Bytes read from the file at a time.
const BLOCK: usize = 64 * 1024;
/// How much of the start of a file decides its format and whether it is binary.
const HEAD: usize = 8192;

/// A document ready to be read: see the module docs.
#[derive(Debug)]
pub struct Document {
    pub path: PathBuf,
    pub format: Format,
    /// The encoding the text is decoded from; `None` for PDFs, which carry their own.
    pub encoding: Option<&'static str>,
    /// Size of the file in bytes.
    pub byte_count: u64,
    /// SHA-256 of the file's bytes, lowercase hex: what identifies the content.
    pub sha256: String,
    body: Body,
}

#[derive(Debug)]
enum Body {
    /// Decoded from these bytes (a file's, or given) when read.
    Encoded {
        source: Source,
        encoding: &'static Encoding,
        /// Bytes of the byte-order mark to skip.
        skip: usize,
    },
    /// Extracted whole at opening (HTML, PDF), normalized.
    Text(String),
    /// Pictures to be read by a vision encoder: a scanned PDF's pages (no text layer), or a
    /// picture given as the document.
    Pages(Vec<PagePicture>),
}

#[derive(Debug)]
enum Source {
    File,
    Memory(Vec<u8>),
}

impl Document {
    /// Open the file at `path`: refuse what cannot be a document (missing, empty, binary, no
    /// text) before anything else is done with it.
    pub fn open(path: &Path) -> Result<Document> {
        let format = Format::from_extension(path);
        if let Some(parsed @ (Format::Html | Format::Pdf | Format::Picture)) = format {
            return Document::from_bytes_as(path, read_all(path, parsed)?, format, false);
        }
        let mut file = open_file(path)?;
        let mut scan = Scan::default();
        let mut block = vec![0u8; BLOCK];
        let mut format = format;
        loop {
            let n = read_block(&mut file, &mut block, path)?;
            if n == 0 {
                break;
            }
            scan.feed(&block[..n]);
            if format.is_none() && scan.head_done() {
                format = Some(Format::sniff(&scan.head));
            }
            if matches!(format, Some(Format::Html | Format::Pdf | Format::Picture)) {
                break;
            }
        }
        let format = format.unwrap_or_else(|| Format::sniff(&scan.head));
        if matches!(format, Format::Html | Format::Pdf | Format::Picture) {
            // sniffed from its content: parsed whole after all
            drop(file);
            return Document::from_bytes_as(path, read_all(path, format)?, Some(format), false);
        }
        scan.into_document(path, format, Source::File)
    }

    /// A document from bytes already in memory, read from `path` (which names it in errors and
    /// gives the format).
    pub fn from_bytes(path: &Path, bytes: Vec<u8>) -> Result<Document> {
        let format = Format::from_extension(path);
        Document::from_bytes_as(path, bytes, format, true)
    }

    /// `in_memory`: the bytes are not the file's (or there is no file), so a text body keeps
    /// them to be decoded from.
    fn from_bytes_as(
        path: &Path,
        bytes: Vec<u8>,
        format: Option<Format>,
        in_memory: bool,
    ) -> Result<Document> {
        let path_buf = || path.to_path_buf();
        if bytes.is_empty() {
            return Err(Error::Empty { path: path_buf() });
        }
        let format = format.unwrap_or_else(|| Format::sniff(&bytes));
        let sha256 = hex(Sha256::digest(&bytes).as_slice());
        let pages = |pages: Vec<PagePicture>| Document {
            path: path_buf(),
            format,
            encoding: None,
            byte_count: bytes.len() as u64,
            sha256: sha256.clone(),
            body: Body::Pages(pages),
        };
        let (text, encoding) = match format {
            Format::Picture => {
                return Ok(pages(vec![PagePicture {
                    page: 1,
                    picture: PictureData::File(bytes.clone()),
                }]));
            }
            Format::Pdf => {
                let text = pdf_text(path, &bytes)?;
                if normalize(&text).trim().is_empty() {
                    // no text layer: a scan, whose pages are pictures
                    let pictures = pdf_page_pictures(path, &bytes)?;
                    if !pictures.is_empty() {
                        return Ok(pages(pictures));
                    }
                }
                (text, None)
            }
            Format::Html => {
                let decoded = decode(&bytes).ok_or_else(|| Error::Binary { path: path_buf() })?;
                (html_text(path, &decoded.text)?, Some(decoded.encoding))
            }
            Format::Text | Format::Markdown => {
                let mut scan = Scan::default();
                scan.feed(&bytes);
                let source = if in_memory {
                    Source::Memory(bytes)
                } else {
                    Source::File
                };
                return scan.into_document(path, format, source);
            }
        };
        let text = normalize(&text);
        let document = Document {
            path: path_buf(),
            format,
            encoding,
            byte_count: bytes.len() as u64,
            sha256,
            body: Body::Text(text),
        };
        document.ensure_text()?;
        Ok(document)
    }

    /// The pages to read as pictures: a scanned PDF's (no text layer), or the one picture
    /// given as the document. `None` for a document with text.
    pub fn pictures(&self) -> Option<&[PagePicture]> {
        match &self.body {
            Body::Pages(pages) => Some(pages),
            _ => None,
        }
    }

    /// The same document, its pictures read: `text` (what a vision encoder's model read in
    /// them) as its text. Refused like any document without text when `text` has none.
    pub fn read_as(&self, text: &str) -> Result<Document> {
        let document = Document {
            path: self.path.clone(),
            format: self.format,
            encoding: None,
            byte_count: self.byte_count,
            sha256: self.sha256.clone(),
            body: Body::Text(normalize(text)),
        };
        document.ensure_text()?;
        Ok(document)
    }

    /// The document's text, normalized, in pieces of about 64 KiB that end at line ends.
    /// A document of pictures ([`Self::pictures`]) has none: refused with a hint.
    pub fn text(&self) -> Result<TextStream<'_>> {
        let inner = match &self.body {
            Body::Pages(_) => {
                return Err(Error::NoText {
                    path: self.path.clone(),
                    hint: Some(
                        "its pages are pictures: they are read with the model's vision projector, when it has one"
                            .into(),
                    ),
                });
            }
            Body::Text(text) => Stream::Text(Some(text)),
            Body::Encoded {
                source,
                encoding,
                skip,
            } => {
                let reader: Box<dyn Read + '_> = match source {
                    Source::File => {
                        let mut file = open_file(&self.path)?;
                        std::io::copy(&mut (&mut file).take(*skip as u64), &mut std::io::sink())
                            .map_err(|source| self.unreadable(source))?;
                        Box::new(file)
                    }
                    Source::Memory(bytes) => Box::new(&bytes[*skip..]),
                };
                Stream::Decoded {
                    reader,
                    decoder: encoding.new_decoder_without_bom_handling(),
                    normalizer: Normalizer::new(),
                    block: vec![0u8; BLOCK],
                    decoded: String::new(),
                    done: false,
                }
            }
        };
        Ok(TextStream {
            path: &self.path,
            inner,
        })
    }

    /// The whole text in one string: for callers that know the document is small.
    pub fn read_to_string(&self) -> Result<String> {
        let mut out = String::new();
        let mut stream = self.text()?;
        while let Some(piece) = stream.next_piece()? {
            out.push_str(&piece);
        }
        Ok(out)
    }

    /// Refuse a document with nothing but whitespace; only the start of the text is decoded
    /// for a document that has some.
    fn ensure_text(&self) -> Result<()> {
        let mut stream = self.text()?;
        while let Some(piece) = stream.next_piece()? {
            if !piece.trim().is_empty() {
                return Ok(());
            }
        }
        let hint = match self.format {
            Format::Pdf => "and no page pictures to read",
            Format::Picture => "a picture",
            Format::Html => "the page has markup but no text",
            Format::Text | Format::Markdown => "only whitespace",
        };
        Err(Error::NoText {
            path: self.path.clone(),
            hint: Some(hint.to_string()),
        })
    }

    fn unreadable(&self, source: std::io::Error) -> Error {
        Error::Unreadable {
            path: self.path.clone(),
            source,
        }
    }
}

/// What one pass over a text file learns: its hash and size, its head, whether it is UTF-8,
/// and the legacy-encoding detector's view of it.
struct Scan {
    hasher: Sha256,
    byte_count: u64,
    head: Vec<u8>,
    /// Still valid UTF-8 so far; `carry` holds a character cut by the end of a block.
    utf8: bool,
    carry: Vec<u8>,
    detector: chardetng::EncodingDetector,
}

impl Default for Scan {
    fn default() -> Self {
        Scan {
            hasher: Sha256::new(),
            byte_count: 0,
            head: Vec::with_capacity(HEAD),
            utf8: true,
            carry: Vec::new(),
            detector: chardetng::EncodingDetector::new(chardetng::Iso2022JpDetection::Deny),
        }
    }
}

impl Scan {
    fn feed(&mut self, bytes: &[u8]) {
        self.hasher.update(bytes);
        self.byte_count += bytes.len() as u64;
        if self.head.len() < HEAD {
            let take = (HEAD - self.head.len()).min(bytes.len());
            self.head.extend_from_slice(&bytes[..take]);
        }
        if self.utf8 {
            self.carry.extend_from_slice(bytes);
            match std::str::from_utf8(&self.carry) {
                Ok(_) => self.carry.clear(),
                // a character cut at the end of the block: keep its start for the next one
                Err(e) if e.error_len().is_none() => {
                    let valid = e.valid_up_to();
                    self.carry.drain(..valid);
                }
                Err(_) => {
                    self.utf8 = false;
                    self.carry = Vec::new();
                }
            }
        }
        self.detector.feed(bytes, false);
    }

    fn head_done(&self) -> bool {
        self.head.len() >= HEAD
    }

    fn into_document(mut self, path: &Path, format: Format, source: Source) -> Result<Document> {
        let path_buf = path.to_path_buf();
        if self.byte_count == 0 {
            return Err(Error::Empty { path: path_buf });
        }
        self.detector.feed(&[], true);
        // the order of `decode::decode`: a byte-order mark, binary data, UTF-8, a guess
        let (encoding, skip) = match Encoding::for_bom(&self.head) {
            Some(found) => found,
            None if looks_binary(&self.head) => return Err(Error::Binary { path: path_buf }),
            None if self.utf8 && self.carry.is_empty() => (UTF_8, 0),
            None => (
                self.detector.guess(None, chardetng::Utf8Detection::Allow),
                0,
            ),
        };
        let document = Document {
            path: path_buf,
            format,
            encoding: Some(encoding.name()),
            byte_count: self.byte_count,
            sha256: hex(self.hasher.finalize().as_slice()),
            body: Body::Encoded {
                source,
                encoding,
                skip,
            },
        };
        document.ensure_text()?;
        Ok(document)
    }
}

/// A document's text, piece by piece; see [`Document::text`].
pub struct TextStream<'a> {
    path: &'a Path,
    inner: Stream<'a>,
}

enum Stream<'a> {
    Text(Option<&'a str>),
    Decoded {
        reader: Box<dyn Read + 'a>,
        decoder: Decoder,
        normalizer: Normalizer,
        block: Vec<u8>,
        decoded: String,
        done: bool,
    },
}

impl TextStream<'_> {
    /// The next piece of normalized text, or `None` at the end. Pieces end at line ends, so
    /// the text is their concatenation.
    pub fn next_piece(&mut self) -> Result<Option<String>> {
        match &mut self.inner {
            Stream::Text(text) => Ok(text.take().map(str::to_string)),
            Stream::Decoded {
                reader,
                decoder,
                normalizer,
                block,
                decoded,
                done,
            } => {
                let mut out = String::new();
                while out.is_empty() && !*done {
                    let n = read_block(reader, block, self.path)?;
                    let last = n == 0;
                    decoded.clear();
                    decoded.reserve(decoder.max_utf8_buffer_length(n).unwrap_or(n * 3 + 16));
                    // with room for the worst case, one call decodes the whole block
                    let _ = decoder.decode_to_string(&block[..n], decoded, last);
                    normalizer.push(decoded, &mut out);
                    if last {
                        normalizer.finish(&mut out);
                        *done = true;
                    }
                }
                Ok((!out.is_empty()).then_some(out))
            }
        }
    }
}

fn open_file(path: &Path) -> Result<File> {
    let file = File::open(path).map_err(|source| Error::Unreadable {
        path: path.to_path_buf(),
        source,
    })?;
    // a directory opens on Unix; reading it fails with a clear OS message below
    Ok(file)
}

/// The whole file, for a format whose parser needs it all: refused beyond
/// [`MAX_PARSED_BYTES`].
fn read_all(path: &Path, format: Format) -> Result<Vec<u8>> {
    let unreadable = |source| Error::Unreadable {
        path: path.to_path_buf(),
        source,
    };
    let size = std::fs::metadata(path).map_err(unreadable)?.len();
    if size > MAX_PARSED_BYTES {
        return Err(Error::TooLarge {
            path: path.to_path_buf(),
            format: format.name(),
            size_mb: size.div_ceil(1 << 20),
            limit_mb: MAX_PARSED_BYTES >> 20,
        });
    }
    std::fs::read(path).map_err(unreadable)
}

fn read_block(reader: &mut impl Read, block: &mut [u8], path: &Path) -> Result<usize> {
    loop {
        match reader.read(block) {
            Ok(n) => return Ok(n),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(source) => {
                return Err(Error::Unreadable {
                    path: path.to_path_buf(),
                    source,
                });
            }
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
