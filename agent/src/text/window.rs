//! `read_file`'s window: at most `length` bytes of a file's text from `offset`, ending at a
//! line end where one is near, with the offset to continue from. For a text file the offset
//! counts bytes of the file and only the head (to know the encoding and refuse binary data)
//! and the window itself are read, so reading anywhere in a 1 GB file costs one window. For
//! HTML and PDF, which must be parsed whole, it counts bytes of the extracted text. Either
//! way the caller passes back the `next` it was given, never a number of its own making.

use super::{Encoding, Kind, ReadAt, document_error, parsed_text, read_head};
use crate::error::{Error, Result};

/// A piece of a file's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Window {
    pub text: String,
    /// Where it starts and where the next one would (`None`: this is the end).
    pub start: u64,
    pub next: Option<u64>,
    /// Size of what offsets count: the file's bytes (text files) or its extracted text's
    /// (HTML, PDF).
    pub total: u64,
    pub kind: Kind,
    /// Bytes read from the file to make it.
    pub bytes_read: u64,
}

/// Read the window of `file` (`len` bytes, named `name`) at `offset`.
pub(crate) fn read_window(
    file: &mut impl ReadAt,
    len: u64,
    name: &str,
    shown: &str,
    offset: u64,
    length: usize,
) -> Result<Window> {
    let (head, encoding, kind) = read_head(file, name, shown)?;
    if kind != Kind::Text {
        let text = parsed_text(file, len, kind, shown)?;
        let (start, end) = text_window(&text, offset, length);
        return Ok(Window {
            text: text[start..end].to_string(),
            start: start as u64,
            next: (end < text.len()).then_some(end as u64),
            total: text.len() as u64,
            kind,
            bytes_read: len,
        });
    }
    let mut start = offset.max(encoding.start());
    if let Encoding::Utf16 { .. } = encoding {
        start -= start % 2;
    }
    let mut bytes_read = head.len() as u64;
    if start >= len {
        return Ok(Window {
            text: String::new(),
            start: len,
            next: None,
            total: len,
            kind,
            bytes_read,
        });
    }
    // three bytes more, so a window that starts inside a UTF-8 character can skip its tail
    let mut bytes = file.read_at_most(start, length + 3, shown)?;
    bytes_read += bytes.len() as u64;
    if let Encoding::Bytes { .. } = encoding {
        let skip = bytes
            .iter()
            .take(3)
            .take_while(|b| is_continuation(**b))
            .count();
        bytes.drain(..skip);
        start += skip as u64;
    }
    bytes.truncate(length);
    let at_end = start + bytes.len() as u64 >= len;
    if !at_end {
        let keep = cut(&bytes, encoding);
        bytes.truncate(keep);
    }
    let next = start + bytes.len() as u64;
    let mut text = decode(&bytes, encoding, shown)?;
    // `documents` drops a text's trailing line end; windows that end at one keep it, so that
    // windows read one after another join into the text
    if !at_end && ends_with_newline(&bytes, encoding) && !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    Ok(Window {
        text,
        start,
        next: (next < len).then_some(next),
        total: len,
        kind,
        bytes_read,
    })
}

fn ends_with_newline(bytes: &[u8], encoding: Encoding) -> bool {
    match encoding {
        Encoding::Utf16 {
            little_endian: true,
        } => bytes.ends_with(&[b'\n', 0]),
        Encoding::Utf16 {
            little_endian: false,
        } => bytes.ends_with(&[0, b'\n']),
        Encoding::Bytes { .. } => bytes.ends_with(b"\n"),
    }
}

fn is_continuation(b: u8) -> bool {
    b & 0xC0 == 0x80
}

/// Where to end a window that is not the file's end: after its last line end when that
/// keeps at least half of it, else at the end of the last whole UTF-8 character (a
/// legacy double-byte character may be cut there; the next window starts at the same byte).
fn cut(bytes: &[u8], encoding: Encoding) -> usize {
    let half = bytes.len() / 2;
    match encoding {
        Encoding::Utf16 { little_endian } => {
            let newline: [u8; 2] = if little_endian {
                [b'\n', 0]
            } else {
                [0, b'\n']
            };
            let units = bytes.len() / 2;
            (0..units)
                .rev()
                .map(|u| u * 2)
                .find(|&i| bytes[i..i + 2] == newline)
                .map(|i| i + 2)
                .filter(|&end| end >= half)
                .unwrap_or(units * 2)
        }
        Encoding::Bytes { .. } => {
            if let Some(i) = bytes.iter().rposition(|&b| b == b'\n')
                && i + 1 >= half
            {
                return i + 1;
            }
            let mut end = bytes.len();
            // back off over an incomplete character at the end
            let mut back = 0;
            while back < 3 && end > 0 && is_continuation(bytes[end - 1]) {
                end -= 1;
                back += 1;
            }
            if end > 0 && bytes[end - 1] >= 0xC0 {
                let lead = bytes[end - 1];
                let width = if lead >= 0xF0 {
                    4
                } else if lead >= 0xE0 {
                    3
                } else {
                    2
                };
                if back + 1 < width {
                    return end - 1;
                }
            }
            bytes.len()
        }
    }
}

/// Decode a window through `documents` (the encoding detected on the window, normalized).
fn decode(bytes: &[u8], encoding: Encoding, shown: &str) -> Result<String> {
    if bytes.is_empty() {
        return Ok(String::new());
    }
    let owned = match encoding {
        Encoding::Utf16 { little_endian } => {
            if bytes.len() < 2 {
                return Ok(String::new());
            }
            // the byte-order mark tells `documents` how to read a window from the middle
            let bom: [u8; 2] = if little_endian {
                [0xFF, 0xFE]
            } else {
                [0xFE, 0xFF]
            };
            [&bom[..], bytes].concat()
        }
        Encoding::Bytes { .. } => {
            if bytes.contains(&0) {
                return Err(Error::NotText { path: shown.into() });
            }
            bytes.to_vec()
        }
    };
    // a text name, so that `documents` reads the bytes as text whatever the file is called
    match documents::Document::from_bytes(std::path::Path::new("window.txt"), owned) {
        Ok(document) => document
            .read_to_string()
            .map_err(|e| document_error(e, shown)),
        Err(documents::Error::Empty { .. } | documents::Error::NoText { .. }) => Ok(String::new()),
        Err(e) => Err(document_error(e, shown)),
    }
}

/// The byte range of `text` to show from `offset`: on character boundaries, ending at a line
/// end when that keeps at least half.
fn text_window(text: &str, offset: u64, length: usize) -> (usize, usize) {
    let mut start = (offset.min(text.len() as u64)) as usize;
    while !text.is_char_boundary(start) {
        start -= 1;
    }
    let mut end = (start + length).min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    if end < text.len()
        && let Some(i) = text[start..end].rfind('\n')
        && i + 1 >= (end - start) / 2
    {
        end = start + i + 1;
    }
    (start, end)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    fn window(bytes: &[u8], name: &str, offset: u64, length: usize) -> Result<Window> {
        let mut c = Cursor::new(bytes.to_vec());
        read_window(&mut c, bytes.len() as u64, name, "t/x", offset, length)
    }

    #[test]
    fn windows_end_at_line_ends_and_chain_to_the_whole_text() {
        let text = "first line\nsecond line\nthird line is longer\nlast\n";
        let mut offset = 0;
        let mut out = String::new();
        loop {
            let w = window(text.as_bytes(), "a.txt", offset, 24).unwrap();
            assert!(w.text.len() <= 24);
            out.push_str(&w.text);
            match w.next {
                Some(n) => offset = n,
                None => break,
            }
        }
        assert_eq!(out, text.trim_end());
    }

    #[test]
    fn a_window_never_cuts_a_utf8_character() {
        let text = "é".repeat(50);
        let w = window(text.as_bytes(), "a.txt", 0, 11).unwrap();
        assert_eq!(w.text, "é".repeat(5));
        assert_eq!(w.next, Some(10));
        // an offset inside a character moves to the next one
        let w = window(text.as_bytes(), "a.txt", 11, 4).unwrap();
        assert_eq!((w.start, w.text.as_str()), (12, "éé"));
    }

    #[test]
    fn utf16_windows_from_the_middle_decode() {
        let mut bytes = vec![0xFF, 0xFE];
        bytes.extend(
            "línea uno\nlínea dos\n"
                .encode_utf16()
                .flat_map(|u| u.to_le_bytes()),
        );
        let w = window(&bytes, "a.txt", 0, 24).unwrap();
        assert_eq!(w.text, "línea uno\n");
        let w = window(&bytes, "a.txt", w.next.unwrap(), 1000).unwrap();
        assert_eq!(w.text, "línea dos");
        assert_eq!(w.next, None);
    }

    #[test]
    fn binary_is_refused_in_the_head_or_further_on() {
        let e = window(b"\x7fELF\x02\x01\x01\0\0\0", "a.bin", 0, 100).unwrap_err();
        assert_eq!(e.code(), "not_text");
        let mut bytes = b"text\n".repeat(2000);
        bytes.extend([0u8; 100]);
        assert!(window(&bytes, "a", 0, 100).is_ok());
        let e = window(&bytes, "a", 9990, 100).unwrap_err();
        assert_eq!(e.code(), "not_text");
    }

    #[test]
    fn reading_past_the_end_is_an_empty_last_window() {
        let w = window(b"abc", "a.txt", 99, 10).unwrap();
        assert_eq!((w.text.as_str(), w.next, w.total), ("", None, 3));
    }

    #[test]
    fn html_offsets_count_the_extracted_text() {
        let html =
            b"<html><body><p>One paragraph.</p><script>evil()</script><p>Two.</p></body></html>";
        let w = window(html, "p.html", 0, 1000).unwrap();
        assert!(
            w.text.contains("One paragraph.") && w.text.contains("Two."),
            "{}",
            w.text
        );
        assert!(!w.text.contains("evil"));
        assert_eq!(w.kind, Kind::Html);
        assert_eq!(w.total, w.text.len() as u64);
    }

    #[test]
    fn text_windows_stay_on_boundaries() {
        assert_eq!(text_window("aé\nb", 2, 10), (1, 5));
        assert_eq!(text_window("aaaa\nbbbb\ncc", 0, 11), (0, 10));
    }
}
