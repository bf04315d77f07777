//! Clean-up of extracted text, fed in pieces of any size: Unix line ends, no stray NULs or
//! byte-order marks, no trailing spaces on lines, at most one blank line between paragraphs
//! (PDF text layers are full of runs of them), nothing blank at either end. It works line by
//! line and keeps only the line in progress — and of a very long line only its tail — so a
//! document streamed through it is never held whole.

/// A line in progress longer than this is written out up to its trailing whitespace (which
/// is all that the line's end can still change).
const LINE_LIMIT: usize = 16 * 1024;

/// The streaming normalizer: [`Normalizer::push`] text as it is decoded, then
/// [`Normalizer::finish`]. Whole lines come out; the last, unfinished one waits.
#[derive(Debug, Default)]
pub struct Normalizer {
    /// The line in progress (no `\n` yet).
    line: String,
    /// Blank lines since the last line written.
    blank_run: usize,
    /// A line has been written: what follows needs a separator.
    started: bool,
    /// The start of the line in progress has been written already.
    open_line: bool,
}

impl Normalizer {
    pub fn new() -> Normalizer {
        Normalizer::default()
    }

    /// Take `text`; append to `out` what is final.
    pub fn push(&mut self, text: &str, out: &mut String) {
        let mut rest = text;
        while let Some(newline) = rest.find('\n') {
            if self.line.is_empty() {
                self.emit(&rest[..newline], out);
            } else {
                self.line.push_str(&rest[..newline]);
                let line = std::mem::take(&mut self.line);
                self.emit(&line, out);
                self.line = line;
                self.line.clear();
            }
            rest = &rest[newline + 1..];
        }
        self.line.push_str(rest);
        if self.line.len() > LINE_LIMIT {
            self.write_line_start(out);
        }
    }

    /// Write the long line in progress up to its trailing whitespace.
    fn write_line_start(&mut self, out: &mut String) {
        let keep_from = self.line.trim_end().len();
        if keep_from == 0 {
            // all whitespace so far: nothing that could be written
            self.line.clear();
            return;
        }
        let start: String = self.line.drain(..keep_from).collect();
        if !self.open_line {
            self.separate(out);
            // a line's leading whitespace is kept, as for short lines
        }
        self.open_line = true;
        push_clean(&start, out);
    }

    fn separate(&mut self, out: &mut String) {
        if self.started {
            out.push_str(if self.blank_run > 0 { "\n\n" } else { "\n" });
        }
        self.started = true;
        self.blank_run = 0;
    }

    /// The end of the text: the last line goes out.
    pub fn finish(&mut self, out: &mut String) {
        let line = std::mem::take(&mut self.line);
        self.emit(&line, out);
    }

    fn emit(&mut self, line: &str, out: &mut String) {
        let line = line.trim_end_matches(['\r', ' ', '\t']);
        if std::mem::take(&mut self.open_line) {
            // the end of a long line whose start is out already
            push_clean(line, out);
            return;
        }
        if line.trim().is_empty() {
            self.blank_run += 1;
            return;
        }
        self.separate(out);
        push_clean(line, out);
    }
}

fn push_clean(text: &str, out: &mut String) {
    if text.contains(['\u{0}', '\u{feff}']) {
        out.push_str(&text.replace(['\u{0}', '\u{feff}'], ""));
    } else {
        out.push_str(text);
    }
}

/// Normalize a whole text at once.
pub fn normalize(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut normalizer = Normalizer::new();
    normalizer.push(raw, &mut out);
    normalizer.finish(&mut out);
    out
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
    fn pieces_of_any_size_give_the_same_text() {
        let raw = "\n\ntitle  \r\n\r\nfirst line\nsecond\u{0} line\n\n\n\nlast\t\n";
        let whole = normalize(raw);
        for size in 1..raw.len() {
            let mut out = String::new();
            let mut n = Normalizer::new();
            let mut i = 0;
            while i < raw.len() {
                let mut j = (i + size).min(raw.len());
                while !raw.is_char_boundary(j) {
                    j += 1;
                }
                n.push(&raw[i..j], &mut out);
                i = j;
            }
            n.finish(&mut out);
            assert_eq!(out, whole, "pieces of {size} bytes");
        }
    }

    #[test]
    fn a_very_long_line_is_written_as_it_comes_and_ends_the_same() {
        let long = format!("  {}end  ", "word ".repeat(10_000));
        let raw = format!("a\n\n{long}\nb");
        let mut out = String::new();
        let mut n = Normalizer::new();
        for piece in raw.as_bytes().chunks(1000) {
            n.push(std::str::from_utf8(piece).unwrap(), &mut out);
            assert!(n.line.len() <= LINE_LIMIT + 1000);
        }
        n.finish(&mut out);
        assert_eq!(out, normalize(&raw));
        assert_eq!(out, format!("a\n\n{}\nb", long.trim_end()));
    }

    #[test]
    fn a_line_with_no_end_waits_for_the_rest() {
        let mut out = String::new();
        let mut n = Normalizer::new();
        n.push("one\ntw", &mut out);
        assert_eq!(out, "one");
        n.push("o", &mut out);
        assert_eq!(out, "one");
        n.finish(&mut out);
        assert_eq!(out, "one\ntwo");
    }
}
