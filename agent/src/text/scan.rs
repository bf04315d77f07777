//! `search_files`' view of a file: its text line by line, streamed in blocks and decoded in
//! the encoding `documents` detects on the head, with every line cut into pieces of at most
//! the line cap, so neither a huge file nor one without line ends takes more memory than a
//! block and a line. A NUL byte further on (a binary tail, a sparse hole) ends the scan of a
//! file: it is no longer text. HTML and PDF are extracted whole by `documents` (within the
//! size it parses), then split the same way.

use std::io::Read;
use std::ops::ControlFlow;

use super::{Encoding, HEAD_BYTES, Kind, parsed_text, read_head};
use crate::error::{Error, Result};

const BLOCK: usize = 64 * 1024;

/// How a scan ended.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Scanned {
    pub bytes_read: u64,
    /// Stopped at `max_bytes` before the end of the file.
    pub cut: bool,
    /// Not text (from the start, or binary data further on).
    pub binary: bool,
    /// An HTML or PDF file larger than what may still be read, not searched.
    pub too_large: bool,
}

/// Call `on_line(number, text)` for each line (1-based) of `file`, reading at most
/// `max_bytes`. A line longer than `line_max` bytes comes in several pieces with one number.
pub(crate) fn scan_lines<F: Read + std::io::Seek>(
    file: &mut F,
    len: u64,
    name: &str,
    shown: &str,
    max_bytes: u64,
    line_max: usize,
    on_line: &mut dyn FnMut(u64, &str) -> ControlFlow<()>,
) -> Result<Scanned> {
    let mut out = Scanned::default();
    let (head, encoding, kind) = match read_head(file, name, shown) {
        Ok(found) => found,
        Err(Error::NotText { .. }) => {
            out.binary = true;
            out.bytes_read = len.min(HEAD_BYTES as u64);
            return Ok(out);
        }
        Err(e) => return Err(e),
    };
    out.bytes_read = head.len() as u64;
    if kind != Kind::Text {
        if len > max_bytes {
            out.too_large = true;
            return Ok(out);
        }
        let text = match parsed_text(file, len, kind, shown) {
            Ok(text) => text,
            // a damaged or textless page is not a match, not a failed search
            Err(_) => {
                out.bytes_read = len;
                return Ok(out);
            }
        };
        out.bytes_read = len;
        let mut lines = Lines::new(line_max);
        let _ = lines.push(&text, on_line);
        lines.finish(on_line);
        return Ok(out);
    }
    let decoder_encoding = match encoding {
        Encoding::Utf16 {
            little_endian: true,
        } => encoding_rs::UTF_16LE,
        Encoding::Utf16 {
            little_endian: false,
        } => encoding_rs::UTF_16BE,
        Encoding::Bytes { .. } => legacy_or_utf8(&head),
    };
    let mut decoder = decoder_encoding.new_decoder_without_bom_handling();
    let io = |e| Error::Io {
        action: "read",
        path: shown.into(),
        source: e,
    };
    file.seek(std::io::SeekFrom::Start(encoding.start()))
        .map_err(io)?;
    out.bytes_read = encoding.start();
    let mut block = vec![0u8; BLOCK];
    let mut decoded = String::new();
    let mut lines = Lines::new(line_max);
    loop {
        if out.bytes_read >= max_bytes {
            out.cut = out.bytes_read < len;
            break;
        }
        let want = BLOCK.min((max_bytes - out.bytes_read) as usize);
        let n = read_some(file, &mut block[..want]).map_err(io)?;
        let mut last = n == 0;
        let mut bytes = &block[..n];
        out.bytes_read += n as u64;
        // text up to a NUL byte is searched; what follows is not text
        if matches!(encoding, Encoding::Bytes { .. })
            && let Some(nul) = bytes.iter().position(|&b| b == 0)
        {
            bytes = &bytes[..nul];
            out.binary = true;
            last = true;
        }
        decoded.clear();
        decoded.reserve(decoder.max_utf8_buffer_length(n).unwrap_or(n * 3 + 16));
        let _ = decoder.decode_to_string(bytes, &mut decoded, last);
        if lines.push(&decoded, on_line).is_break() {
            return Ok(out);
        }
        if last {
            break;
        }
    }
    lines.finish(on_line);
    Ok(out)
}

/// The encoding of a text file's head: UTF-8 when it is (a character cut by the end of the
/// head is fine), else `documents`' guess among the legacy encodings.
fn legacy_or_utf8(head: &[u8]) -> &'static encoding_rs::Encoding {
    match std::str::from_utf8(head) {
        Ok(_) => encoding_rs::UTF_8,
        Err(e) if e.error_len().is_none() => encoding_rs::UTF_8,
        Err(_) => documents::decode::decode(head)
            .and_then(|d| encoding_rs::Encoding::for_label(d.encoding.as_bytes()))
            .unwrap_or(encoding_rs::UTF_8),
    }
}

fn read_some(file: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    loop {
        match file.read(buf) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

/// Splits decoded text into numbered lines of bounded length.
struct Lines {
    line: String,
    number: u64,
    max: usize,
    stopped: bool,
}

impl Lines {
    fn new(max: usize) -> Self {
        Lines {
            line: String::new(),
            number: 1,
            max: max.max(4),
            stopped: false,
        }
    }

    fn push(
        &mut self,
        mut text: &str,
        on_line: &mut dyn FnMut(u64, &str) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        if self.stopped {
            return ControlFlow::Break(());
        }
        while !text.is_empty() {
            let (piece, newline) = match text.find('\n') {
                Some(i) => (&text[..i], Some(i)),
                None => (text, None),
            };
            let mut rest = piece;
            // fill the line up to the cap; a full line goes out as one piece
            loop {
                let room = self.max - self.line.len();
                if rest.len() <= room {
                    self.line.push_str(rest);
                    break;
                }
                let mut cut = room;
                while !rest.is_char_boundary(cut) {
                    cut -= 1;
                }
                self.line.push_str(&rest[..cut]);
                rest = &rest[cut..];
                self.emit(on_line)?;
            }
            match newline {
                Some(i) => {
                    self.emit(on_line)?;
                    self.number += 1;
                    text = &text[i + 1..];
                }
                None => break,
            }
        }
        ControlFlow::Continue(())
    }

    fn emit(&mut self, on_line: &mut dyn FnMut(u64, &str) -> ControlFlow<()>) -> ControlFlow<()> {
        let line = self.line.trim_end_matches('\r');
        let flow = if line.is_empty() {
            ControlFlow::Continue(())
        } else {
            on_line(self.number, line)
        };
        self.line.clear();
        if flow.is_break() {
            self.stopped = true;
        }
        flow
    }

    fn finish(&mut self, on_line: &mut dyn FnMut(u64, &str) -> ControlFlow<()>) {
        if !self.stopped {
            let _ = self.emit(on_line);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    fn lines(
        bytes: &[u8],
        name: &str,
        max_bytes: u64,
        line_max: usize,
    ) -> (Vec<(u64, String)>, Scanned) {
        let mut out = Vec::new();
        let mut c = Cursor::new(bytes.to_vec());
        let scanned = scan_lines(
            &mut c,
            bytes.len() as u64,
            name,
            "t/x",
            max_bytes,
            line_max,
            &mut |n, l| {
                out.push((n, l.to_string()));
                ControlFlow::Continue(())
            },
        )
        .unwrap();
        (out, scanned)
    }

    #[test]
    fn lines_are_numbered_and_long_ones_come_in_pieces() {
        let (got, s) = lines(b"one\r\ntwo\n\nabcdefghij\nend", "a.txt", 1 << 20, 4);
        assert_eq!(
            got,
            vec![
                (1, "one".into()),
                (2, "two".into()),
                (4, "abcd".into()),
                (4, "efgh".into()),
                (4, "ij".into()),
                (5, "end".into())
            ]
        );
        assert!(!s.cut && !s.binary);
    }

    #[test]
    fn the_byte_cap_cuts_the_scan_and_says_so() {
        let text = "line of text\n".repeat(20_000);
        let (got, s) = lines(text.as_bytes(), "a.txt", 100_000, 4096);
        assert!(s.cut);
        assert!(s.bytes_read <= 100_000);
        assert!(got.len() < 20_000 && got.len() > 7_000);
    }

    #[test]
    fn legacy_and_utf16_files_are_decoded() {
        let (sjis, _, _) = encoding_rs::SHIFT_JIS
            .encode("これは日本語の文章です。\n吾輩は猫である。名前はまだ無い。\n");
        let (got, _) = lines(&sjis, "a.txt", 1 << 20, 4096);
        assert_eq!(got[1].1, "吾輩は猫である。名前はまだ無い。");
        let mut utf16 = vec![0xFE, 0xFF];
        utf16.extend("a\nbé\n".encode_utf16().flat_map(|u| u.to_be_bytes()));
        let (got, _) = lines(&utf16, "a.txt", 1 << 20, 4096);
        assert_eq!(got, vec![(1, "a".into()), (2, "bé".into())]);
    }

    #[test]
    fn binary_files_and_binary_tails_end_the_scan() {
        let (got, s) = lines(b"\0\0\0\x01\x02", "a.bin", 1 << 20, 4096);
        assert!(got.is_empty() && s.binary);
        let mut bytes = b"text line\n".repeat(10_000);
        bytes.extend(vec![0u8; 200_000]);
        let (got, s) = lines(&bytes, "a", 1 << 30, 4096);
        assert!(s.binary);
        assert_eq!(got.len(), 10_000, "the text before the hole is searched");
        assert!(
            s.bytes_read < 200_000,
            "stopped at the hole, read {}",
            s.bytes_read
        );
    }
}
