//! PDF to text, bounded. The text layer comes from `pdf-extract` (pure Rust, on `lopdf`), which
//! trusts the file: it inflates every compressed stream whole (a 1 MB file whose content stream
//! inflates to 1 GiB took 2.1 GB of memory; a 64 MB one would take 64 GB), it follows a form
//! XObject that draws itself until the stack overflows (the process aborts), and it draws a
//! form as often as it is referenced, so forms that each draw the next twice take 2^depth
//! times the work. So, before pdf-extract sees the document:
//!
//! - while lopdf loads it, every stream's filters (Flate, LZW, ASCII85: the ones lopdf
//!   decodes) are run into a bounded buffer; a stream that would inflate past
//!   [`MAX_STREAM_BYTES`] is emptied and marked, and the document refused;
//! - the pages and the forms they draw are walked once (memoized): a form that draws itself,
//!   forms nested deeper than [`MAX_FORM_DEPTH`], more than [`MAX_FORM_DRAWS`] form draws or
//!   more than [`MAX_CONTENT_BYTES`] of content to interpret in all refuse the document;
//! - a page whose chain of parents loops (pdf-extract looks inherited keys up through it by
//!   recursion) refuses the document;
//! - the whole extraction runs on a thread with a known, ample stack ([`STACK_BYTES`]), its
//!   panics caught (pdf-extract panics on some malformed files).
//!
//! lopdf itself bounds the nesting of arrays and dictionaries (100 levels). Limits are in the
//! spirit of pdf.js's and PDFium's (PDFium stops forms nested past 32 levels).

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use lopdf::{Dictionary, Document, Object, ObjectId, Stream};

use crate::error::{Error, Result};

/// Largest a single stream may inflate to.
pub const MAX_STREAM_BYTES: u64 = 64 << 20;
/// Most content (page and form streams, inflated) interpreted for one document, counting a
/// form as often as it is drawn.
pub const MAX_CONTENT_BYTES: u64 = 512 << 20;
/// Most forms drawn for one document (each draw costs pdf-extract a fresh inflate and parse).
pub const MAX_FORM_DRAWS: u64 = 200_000;
/// Deepest nesting of forms drawing forms.
pub const MAX_FORM_DEPTH: usize = 32;
/// Stack of the extraction thread.
const STACK_BYTES: usize = 64 << 20;

const REFUSED: &str = "CompanionRefused";

/// The text layer of the PDF `bytes` (read from `path`, which names it in errors).
pub(crate) fn pdf_text(path: &Path, bytes: &[u8]) -> Result<String> {
    guarded(path, || extract(bytes))
}

/// Run `work` on the PDF on a thread with a known, ample stack, its panics caught (see the
/// module docs), its refusal worded for the file at `path`.
pub(crate) fn guarded<T: Send>(
    path: &Path,
    work: impl FnOnce() -> std::result::Result<T, Refusal> + Send + std::panic::UnwindSafe,
) -> Result<T> {
    let run = std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("pdf-extract".into())
            .stack_size(STACK_BYTES)
            .spawn_scoped(scope, || {
                std::panic::catch_unwind(work).unwrap_or_else(|panic| {
                    let message = panic
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| panic.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "the file is damaged".into());
                    Err(Refusal::Damaged(message))
                })
            })
            .map(|t| t.join())
    });
    let path = PathBuf::from(path);
    match run {
        Ok(Ok(Ok(value))) => Ok(value),
        Ok(Ok(Err(Refusal::Damaged(message)))) => Err(Error::Pdf { path, message }),
        Ok(Ok(Err(Refusal::TooComplex(reason)))) => Err(Error::TooComplex {
            path,
            format: "pdf",
            reason,
        }),
        Ok(Ok(Err(Refusal::Unsupported(reason)))) => Err(Error::NoText {
            path,
            hint: Some(reason),
        }),
        // the thread could not start, or died past catch_unwind
        Ok(Err(_)) => Err(Error::Pdf {
            path,
            message: "the file is damaged".into(),
        }),
        Err(e) => Err(Error::Unreadable { path, source: e }),
    }
}

#[derive(Debug)]
pub(crate) enum Refusal {
    Damaged(String),
    TooComplex(String),
    /// Readable, but holding nothing Companion reads (a page picture in a format it lacks).
    Unsupported(String),
}

fn extract(bytes: &[u8]) -> std::result::Result<String, Refusal> {
    let doc = load(bytes)?;
    let damaged = |e: &dyn std::fmt::Display| Refusal::Damaged(e.to_string());
    let mut text = String::new();
    {
        let mut output = pdf_extract::PlainTextOutput::new(&mut text);
        pdf_extract::output_doc(&doc, &mut output).map_err(|e| damaged(&e))?;
    }
    Ok(text)
}

/// The document, loaded with every stream vetted and the walk over its pages and forms done
/// (see the module docs); decrypted with the empty password when it is encrypted.
pub(crate) fn load(bytes: &[u8]) -> std::result::Result<Document, Refusal> {
    let damaged = |e: &dyn std::fmt::Display| Refusal::Damaged(e.to_string());
    let options = lopdf::LoadOptions {
        filter: Some(vet),
        ..Default::default()
    };
    let mut doc = Document::load_mem_with_options(bytes, options).map_err(|e| damaged(&e))?;
    // lopdf skips the load hook for an encrypted file: its streams are vetted here instead
    // (all but its object streams, which lopdf inflated while loading)
    let encrypted = doc.is_encrypted();
    if encrypted {
        // as pdf-extract does: the empty user password opens most "encrypted" PDFs
        doc.decrypt("").map_err(|e| damaged(&e))?;
    }
    check(&doc, encrypted)?;
    Ok(doc)
}

/// lopdf's per-object hook at load: a stream that inflates past the limit is emptied and
/// marked, before lopdf (or pdf-extract, later) inflates it.
fn vet(id: ObjectId, object: &mut Object) -> Option<(ObjectId, Object)> {
    if let Object::Stream(stream) = object
        && decoded(stream, MAX_STREAM_BYTES).is_err()
    {
        stream.content.clear();
        stream.dict.remove(b"Filter");
        stream.dict.set(REFUSED, true);
    }
    // lopdf keeps the object it was given (mutated in place); the value returned is unused
    Some((id, Object::Null))
}

pub(crate) struct TooBig;

/// The stream's content after the filters lopdf would run on it (Flate, LZW, ASCII85, in
/// order, until one it does not decode), never holding more than `limit` bytes.
pub(crate) fn decoded(stream: &Stream, limit: u64) -> std::result::Result<Vec<u8>, TooBig> {
    let Ok(filters) = stream.filters() else {
        return Ok(stream.content.clone());
    };
    let mut data = stream.content.clone();
    for filter in filters {
        data = match filter {
            b"FlateDecode" => inflate(&data, limit)?,
            b"LZWDecode" => lzw(&data, limit)?,
            b"ASCII85Decode" => ascii85(&data),
            _ => break,
        };
        if data.len() as u64 > limit {
            return Err(TooBig);
        }
    }
    Ok(data)
}

pub(crate) fn inflate(input: &[u8], limit: u64) -> std::result::Result<Vec<u8>, TooBig> {
    let bounded = |reader: &mut dyn Read| {
        let mut out = Vec::new();
        let result = reader.take(limit + 1).read_to_end(&mut out);
        (out, result.is_ok())
    };
    let (mut out, ok) = bounded(&mut flate2::read::ZlibDecoder::new(input));
    // lopdf retries a failed zlib stream as raw deflate after its 2-byte header
    if !ok && out.is_empty() && input.len() > 2 {
        out = bounded(&mut flate2::read::DeflateDecoder::new(&input[2..])).0;
    }
    if out.len() as u64 > limit {
        return Err(TooBig);
    }
    Ok(out)
}

pub(crate) fn lzw(input: &[u8], limit: u64) -> std::result::Result<Vec<u8>, TooBig> {
    let mut decoder = weezl::decode::Decoder::with_tiff_size_switch(weezl::BitOrder::Msb, 8);
    let mut out = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut rest = input;
    loop {
        let r = decoder.decode_bytes(rest, &mut buf);
        out.extend_from_slice(&buf[..r.consumed_out]);
        if out.len() as u64 > limit {
            return Err(TooBig);
        }
        rest = &rest[r.consumed_in..];
        match r.status {
            Ok(weezl::LzwStatus::Ok) if r.consumed_in > 0 || r.consumed_out > 0 => {}
            _ => return Ok(out),
        }
    }
}

/// ASCII85 (PDF 32000-1 §7.4.3): it shrinks its input, but for `z`, four zeros per byte.
pub(crate) fn ascii85(input: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(input.len());
    let (mut group, mut n) = (0u32, 0);
    for &c in input {
        match c {
            b'~' => break,
            b'z' if n == 0 => out.extend_from_slice(&[0; 4]),
            b'!'..=b'u' => {
                group = group.wrapping_mul(85).wrapping_add(u32::from(c - b'!'));
                n += 1;
                if n == 5 {
                    out.extend_from_slice(&group.to_be_bytes());
                    (group, n) = (0, 0);
                }
            }
            _ => {}
        }
    }
    if n > 1 {
        for _ in n..5 {
            group = group.wrapping_mul(85).wrapping_add(84);
        }
        out.extend_from_slice(&group.to_be_bytes()[..n - 1]);
    }
    out
}

/// The walk over pages and forms (see the module docs).
fn check(doc: &Document, vet_all: bool) -> std::result::Result<(), Refusal> {
    let too_complex = |s: String| Err(Refusal::TooComplex(s));
    for object in doc.objects.values() {
        if let Object::Stream(s) = object
            && (s.dict.has(REFUSED.as_bytes())
                || (vet_all && decoded(s, MAX_STREAM_BYTES).is_err()))
        {
            return too_complex(format!(
                "a compressed stream in it inflates past {} MB",
                MAX_STREAM_BYTES >> 20
            ));
        }
    }
    let mut walk = Walk {
        doc,
        memo: HashMap::new(),
        path: Vec::new(),
        total: Cost::default(),
    };
    let empty = Dictionary::new();
    for page_id in doc.get_pages().into_values() {
        let Ok(page) = doc.get_dictionary(page_id) else {
            continue;
        };
        parents_end(doc, page)?;
        let resources = inherited_resources(doc, page)?.unwrap_or(&empty);
        let mut content = Vec::new();
        for id in doc.get_page_contents(page_id) {
            if let Ok(stream) = doc.get_object(id).and_then(Object::as_stream) {
                content.extend(decoded(stream, MAX_STREAM_BYTES).map_err(|_| too_big())?);
            }
        }
        let cost = walk.content(&content, resources)?;
        walk.add(cost)?;
    }
    Ok(())
}

fn too_big() -> Refusal {
    Refusal::TooComplex(format!(
        "a compressed stream in it inflates past {} MB",
        MAX_STREAM_BYTES >> 20
    ))
}

/// Deepest chain of page-tree parents a page may have (a real tree is a few levels deep).
const MAX_PAGE_TREE_DEPTH: usize = 64;

/// A page's chain of parents ends. pdf-extract looks every inherited key (`MediaBox`,
/// `Resources`, …) up through the parents by recursion, so a chain that loops (a page its own
/// parent) overflows its stack, which aborts the process: refused here, whatever the keys.
fn parents_end(doc: &Document, page: &Dictionary) -> std::result::Result<(), Refusal> {
    let mut node = page;
    for _ in 0..MAX_PAGE_TREE_DEPTH {
        match node.get_deref(b"Parent", doc).and_then(Object::as_dict) {
            Ok(parent) => node = parent,
            Err(_) => return Ok(()),
        }
    }
    Err(Refusal::TooComplex("its page tree loops".into()))
}

/// A page's resources, looked up through its parents as pdf-extract does, refusing a parent
/// chain that loops or goes on past any real page tree.
pub(crate) fn inherited_resources<'a>(
    doc: &'a Document,
    page: &'a Dictionary,
) -> std::result::Result<Option<&'a Dictionary>, Refusal> {
    let mut node = page;
    for _ in 0..MAX_PAGE_TREE_DEPTH {
        if let Ok(res) = node.get_deref(b"Resources", doc).and_then(Object::as_dict) {
            return Ok(Some(res));
        }
        match node.get_deref(b"Parent", doc).and_then(Object::as_dict) {
            Ok(parent) => node = parent,
            Err(_) => return Ok(None),
        }
    }
    Err(Refusal::TooComplex("its page tree loops".into()))
}

/// What drawing some content costs pdf-extract: the content bytes it interprets and the forms
/// it draws, counting a form as often as it is drawn.
#[derive(Debug, Clone, Copy, Default)]
struct Cost {
    bytes: u64,
    draws: u64,
}

impl Cost {
    fn plus(self, other: Cost) -> std::result::Result<Cost, Refusal> {
        let sum = Cost {
            bytes: self.bytes.saturating_add(other.bytes),
            draws: self.draws.saturating_add(other.draws),
        };
        if sum.bytes > MAX_CONTENT_BYTES {
            return Err(Refusal::TooComplex(format!(
                "drawing its pages would take over {} MB of content",
                MAX_CONTENT_BYTES >> 20
            )));
        }
        if sum.draws > MAX_FORM_DRAWS {
            return Err(Refusal::TooComplex(format!(
                "drawing its pages would draw forms over {MAX_FORM_DRAWS} times"
            )));
        }
        Ok(sum)
    }
}

struct Walk<'a> {
    doc: &'a Document,
    /// What a form costs to draw once (itself and what it draws), by form and resources.
    memo: HashMap<(ObjectId, usize), Cost>,
    /// The forms being drawn, outermost first.
    path: Vec<ObjectId>,
    total: Cost,
}

impl<'a> Walk<'a> {
    fn add(&mut self, cost: Cost) -> std::result::Result<(), Refusal> {
        self.total = self.total.plus(cost)?;
        Ok(())
    }

    /// What drawing `content` with `resources` costs, forms included.
    fn content(
        &mut self,
        content: &[u8],
        resources: &'a Dictionary,
    ) -> std::result::Result<Cost, Refusal> {
        let mut cost = Cost {
            bytes: content.len() as u64,
            draws: 0,
        };
        let xobjects = resources
            .get_deref(b"XObject", self.doc)
            .and_then(Object::as_dict)
            .ok();
        let Some(xobjects) = xobjects else {
            return Ok(cost);
        };
        for name in drawn_names(content) {
            let Ok(id) = xobjects.get(name).and_then(Object::as_reference) else {
                continue;
            };
            let Ok(form) = self.doc.get_object(id).and_then(Object::as_stream) else {
                continue;
            };
            if form.dict.get(b"Subtype").and_then(Object::as_name).ok() != Some(b"Form") {
                continue;
            }
            let form_resources = form
                .dict
                .get_deref(b"Resources", self.doc)
                .and_then(Object::as_dict)
                .unwrap_or(resources);
            let key = (id, form_resources as *const Dictionary as usize);
            let once = match self.memo.get(&key) {
                Some(&c) => c,
                None => {
                    if self.path.contains(&id) {
                        return Err(Refusal::TooComplex("a form in it draws itself".into()));
                    }
                    if self.path.len() >= MAX_FORM_DEPTH {
                        return Err(Refusal::TooComplex(format!(
                            "its forms nest more than {MAX_FORM_DEPTH} deep"
                        )));
                    }
                    let inner = decoded(form, MAX_STREAM_BYTES).map_err(|_| too_big())?;
                    self.path.push(id);
                    let c = self.content(&inner, form_resources);
                    self.path.pop();
                    let c = c?.plus(Cost { bytes: 0, draws: 1 })?;
                    self.memo.insert(key, c);
                    c
                }
            };
            // past the whole budget already: refused before the pages are summed
            cost = cost.plus(once)?;
        }
        Ok(cost)
    }
}

/// The names drawn by `Do` in a content stream: `/Name Do`. A cheap scan, not a parse: a `Do`
/// inside a string or inline image only makes the estimate larger, never smaller.
fn drawn_names(content: &[u8]) -> Vec<&[u8]> {
    let is_space = |b: u8| matches!(b, b' ' | b'\n' | b'\r' | b'\t' | b'\x0c' | 0);
    let is_delimiter = |b: u8| b"()<>[]{}/%".contains(&b);
    let mut names = Vec::new();
    let mut i = 0;
    while let Some(at) = content[i..].windows(2).position(|w| w == b"Do") {
        let at = i + at;
        i = at + 2;
        let ends = content
            .get(at + 2)
            .is_none_or(|&b| is_space(b) || is_delimiter(b));
        if !ends || at == 0 || !is_space(content[at - 1]) {
            continue;
        }
        let mut end = at;
        while end > 0 && is_space(content[end - 1]) {
            end -= 1;
        }
        let mut start = end;
        while start > 0 && !is_space(content[start - 1]) && !is_delimiter(content[start - 1]) {
            start -= 1;
        }
        if start > 0 && content[start - 1] == b'/' && start < end {
            names.push(&content[start..end]);
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drawn_names_are_found_in_content() {
        let names = drawn_names(b"q /Im1 Do Q /Fm2  Do\n(x) Tj /NotDrawn Tf Dox /X Do");
        assert_eq!(names, [&b"Im1"[..], b"Fm2", b"X"]);
    }

    #[test]
    fn ascii85_decodes_as_the_spec_says() {
        assert_eq!(ascii85(b"87cURD]i,\"Ebo80~>"), b"Hello World!");
        assert_eq!(ascii85(b"z~>"), [0; 4]);
    }
}
