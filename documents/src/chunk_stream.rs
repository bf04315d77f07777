//! [`split`] over a text that arrives in pieces, holding a bounded window of it: the window
//! (64 KiB to start with) is cut at its last paragraph break (else line break, else space),
//! split, and every chunk but the last is final; the last one, which more text might have
//! joined, goes back to the front of the window with the text that follows. Memory is the
//! window and the chunks of one window, whatever the document's size. The same text in the
//! same pieces always gives the same chunks, which is what lets a stored job resume by chunk
//! index.

use std::collections::VecDeque;

use crate::chunk::split;

/// Text gathered before it is split.
const WINDOW: usize = 64 * 1024;

/// A chunk of a streamed text: its text (trimmed) and its token count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkText {
    pub text: String,
    pub tokens: usize,
}

/// Chunks of at most `max_tokens` tokens of the text `read` gives piece by piece (`None` at
/// the end; the text is the pieces' concatenation), counted by `count`. An iterator of
/// results: the first error ends it.
pub struct ChunkStream<R, C> {
    read: R,
    count: C,
    max_tokens: usize,
    window: String,
    /// Bytes the window is filled to before it is split; doubled while a window gives no
    /// final chunk (a single chunk's text larger than the window).
    target: usize,
    ready: VecDeque<ChunkText>,
    ended: bool,
    failed: bool,
    /// The largest the window has been, in bytes: what bounds this stream's memory.
    high_water: usize,
}

impl<E, R, C> ChunkStream<R, C>
where
    R: FnMut() -> Result<Option<String>, E>,
    C: FnMut(&str) -> Result<usize, E>,
{
    pub fn new(read: R, max_tokens: usize, count: C) -> Self {
        ChunkStream {
            read,
            count,
            max_tokens,
            window: String::new(),
            target: WINDOW,
            ready: VecDeque::new(),
            ended: false,
            failed: false,
            high_water: 0,
        }
    }

    /// The most text the stream has held at once, in bytes.
    pub fn high_water(&self) -> usize {
        self.high_water
    }

    /// Split the window once more: `Ok(true)` when chunks are ready or the text has ended.
    fn refill(&mut self) -> Result<bool, E> {
        while !self.ended && self.window.len() < self.target {
            match (self.read)()? {
                Some(piece) => self.window.push_str(&piece),
                None => self.ended = true,
            }
        }
        self.high_water = self.high_water.max(self.window.len());
        if self.ended {
            let chunks = split(&self.window, self.max_tokens, &mut self.count)?;
            let window = std::mem::take(&mut self.window);
            self.ready.extend(chunks.iter().map(|c| ChunkText {
                text: c.text(&window).to_string(),
                tokens: c.tokens,
            }));
            return Ok(true);
        }
        let cut = cut_point(&self.window);
        let chunks = split(&self.window[..cut], self.max_tokens, &mut self.count)?;
        let Some((last, done)) = chunks.split_last().filter(|(_, done)| !done.is_empty()) else {
            if chunks.is_empty() {
                // only blank text before the cut
                self.window.drain(..cut);
            } else {
                self.target *= 2;
            }
            return Ok(false);
        };
        self.ready.extend(done.iter().map(|c| ChunkText {
            text: c.text(&self.window).to_string(),
            tokens: c.tokens,
        }));
        self.window.drain(..last.start);
        self.target = WINDOW.max(self.window.len() * 2);
        Ok(true)
    }
}

impl<E, R, C> Iterator for ChunkStream<R, C>
where
    R: FnMut() -> Result<Option<String>, E>,
    C: FnMut(&str) -> Result<usize, E>,
{
    type Item = Result<ChunkText, E>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(chunk) = self.ready.pop_front() {
                return Some(Ok(chunk));
            }
            if self.failed || (self.ended && self.window.is_empty()) {
                return None;
            }
            match self.refill() {
                Ok(_) => {}
                Err(e) => {
                    self.failed = true;
                    return Some(Err(e));
                }
            }
        }
    }
}

/// Where to cut a window so that the text after the cut is what more text can join: after
/// its last paragraph break, else its last line break, else its last whitespace, else the
/// whole window (one unbroken run, which the splitter cuts anywhere anyway).
fn cut_point(window: &str) -> usize {
    if let Some(i) = window.rfind("\n\n") {
        return i + 2;
    }
    if let Some(i) = window.rfind('\n') {
        return i + 1;
    }
    match window.rfind(char::is_whitespace) {
        Some(i) if i > 0 => i,
        _ => window.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Result<usize, String> {
        Ok(s.split_whitespace().count())
    }

    /// `text` in pieces of about `size` bytes cut after line ends.
    fn pieces(text: &str, size: usize) -> impl FnMut() -> Result<Option<String>, String> {
        let mut out: VecDeque<String> = VecDeque::new();
        let mut current = String::new();
        for line in text.split_inclusive('\n') {
            current.push_str(line);
            if current.len() >= size {
                out.push_back(std::mem::take(&mut current));
            }
        }
        if !current.is_empty() {
            out.push_back(current);
        }
        move || Ok(out.pop_front())
    }

    fn text_of(paragraphs: usize) -> String {
        (0..paragraphs)
            .map(|p| {
                (0..(p % 7 + 3))
                    .map(|s| format!("Sentence {s} of paragraph {p} has some words in it."))
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect::<Vec<_>>()
            .join("\n\n")
    }

    #[test]
    fn a_small_text_gives_the_chunks_of_split() {
        let text = text_of(20);
        let whole: Vec<_> = split(&text, 60, words).unwrap();
        let streamed: Vec<_> = ChunkStream::new(pieces(&text, 100), 60, words)
            .collect::<Result<_, _>>()
            .unwrap();
        let whole: Vec<_> = whole
            .iter()
            .map(|c| ChunkText {
                text: c.text(&text).to_string(),
                tokens: c.tokens,
            })
            .collect();
        assert_eq!(streamed, whole);
    }

    #[test]
    fn a_long_text_is_chunked_in_a_bounded_window_covering_every_word() {
        let text = text_of(10_000); // about 3 MB
        assert!(text.len() > 30 * WINDOW);
        let mut stream = ChunkStream::new(pieces(&text, 4096), 200, words);
        let mut words_seen = 0;
        let mut chunks = 0;
        for chunk in stream.by_ref() {
            let chunk = chunk.unwrap();
            assert!(chunk.tokens <= 200 && chunk.tokens == words(&chunk.text).unwrap());
            words_seen += chunk.tokens;
            chunks += 1;
        }
        assert_eq!(words_seen, words(&text).unwrap());
        assert!(chunks > 1000);
        // the window never holds much more than its target and one piece
        assert!(stream.high_water() <= 2 * WINDOW, "{}", stream.high_water());
        // and the same text in the same pieces gives the same chunks
        let again: Vec<_> = ChunkStream::new(pieces(&text, 4096), 200, words)
            .map(|c| c.unwrap().text)
            .collect();
        assert_eq!(again.len(), chunks);
    }

    #[test]
    fn one_unbroken_run_larger_than_the_window_still_ends_in_chunks() {
        let text = "word ".repeat(40_000); // 200 KB on one line
        let chunks: Vec<_> = ChunkStream::new(pieces(&text, 1 << 20), 1000, words)
            .collect::<Result<_, _>>()
            .unwrap();
        assert!(chunks.iter().all(|c| c.tokens <= 1000));
        assert_eq!(chunks.iter().map(|c| c.tokens).sum::<usize>(), 40_000);
    }

    #[test]
    fn errors_end_the_stream() {
        let mut stream = ChunkStream::new(|| Err("disk gone".to_string()), 10, words);
        assert_eq!(stream.next(), Some(Err("disk gone".to_string())));
        assert_eq!(stream.next(), None);
        let mut blank = ChunkStream::new(pieces("  \n\n  ", 10), 10, words);
        assert_eq!(blank.next(), None);
    }
}
