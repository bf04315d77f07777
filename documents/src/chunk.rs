//! Text to chunks of at most N tokens, cut where a reader would pause: between paragraphs
//! (blank lines) first, then between sentences (`.`, `!`, `?` before a space, the CJK full
//! stops `。！？` anywhere, and line breaks, which separate verses, list items and table rows),
//! and only as a last resort inside a sentence (at a space where there is one). Token counts
//! come from the caller, so this crate needs no tokenizer; pieces are counted once each and
//! every chunk once more as a whole, so the cost is linear in the text. Chunks are byte ranges
//! of the text, not copies: the list costs a few words per chunk whatever the document's size.

use std::ops::Range;

/// Tokens assumed for the seam between two pieces joined into one chunk: the separator itself
/// and a merge across the boundary. The chunk is counted exactly before it is accepted.
const SEAM_TOKENS: usize = 2;

/// A piece of the text: `text[start..end]`, of `tokens` tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chunk {
    pub start: usize,
    pub end: usize,
    pub tokens: usize,
}

impl Chunk {
    pub fn text<'a>(&self, source: &'a str) -> &'a str {
        &source[self.start..self.end]
    }
}

/// Split `text` into chunks of at most `max_tokens` tokens each (as `count` counts them),
/// trimmed of surrounding whitespace, in order, covering all non-blank text.
pub fn split<E>(
    text: &str,
    max_tokens: usize,
    mut count: impl FnMut(&str) -> Result<usize, E>,
) -> Result<Vec<Chunk>, E> {
    let max_tokens = max_tokens.max(1);
    let mut pieces = Vec::new();
    for paragraph in paragraphs(text) {
        let tokens = count(&text[paragraph.clone()])?;
        if tokens <= max_tokens {
            pieces.push(Chunk {
                start: paragraph.start,
                end: paragraph.end,
                tokens,
            });
            continue;
        }
        for sentence in sentences(text, paragraph) {
            let tokens = count(&text[sentence.clone()])?;
            if tokens <= max_tokens {
                pieces.push(Chunk {
                    start: sentence.start,
                    end: sentence.end,
                    tokens,
                });
            } else {
                hard_split(text, sentence, max_tokens, &mut count, &mut pieces)?;
            }
        }
    }
    pack(text, &pieces, max_tokens, &mut count)
}

/// Greedy packing of consecutive pieces; a chunk whose exact count is over the limit gives its
/// last piece back to the next chunk.
fn pack<E>(
    text: &str,
    pieces: &[Chunk],
    max_tokens: usize,
    count: &mut impl FnMut(&str) -> Result<usize, E>,
) -> Result<Vec<Chunk>, E> {
    let mut chunks = Vec::new();
    let mut first = 0;
    while first < pieces.len() {
        let mut last = first;
        let mut estimate = pieces[first].tokens;
        while last + 1 < pieces.len()
            && estimate + SEAM_TOKENS + pieces[last + 1].tokens <= max_tokens
        {
            last += 1;
            estimate += SEAM_TOKENS + pieces[last].tokens;
        }
        loop {
            let (start, end) = (pieces[first].start, pieces[last].end);
            let tokens = if first == last {
                pieces[first].tokens
            } else {
                count(&text[start..end])?
            };
            if tokens <= max_tokens || first == last {
                chunks.push(Chunk { start, end, tokens });
                break;
            }
            last -= 1;
        }
        first = last + 1;
    }
    Ok(chunks)
}

/// Non-blank paragraphs, trimmed, separated by blank lines.
fn paragraphs(text: &str) -> impl Iterator<Item = Range<usize>> + '_ {
    let mut offset = 0;
    text.split("\n\n").filter_map(move |part| {
        let start = offset;
        offset += part.len() + 2;
        trimmed(text, start..start + part.len())
    })
}

/// Sentences of `range`, trimmed, each ending after its closing punctuation.
fn sentences(text: &str, range: Range<usize>) -> Vec<Range<usize>> {
    let s = &text[range.clone()];
    let mut out = Vec::new();
    let mut start = 0;
    let mut chars = s.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let end = i + c.len_utf8();
        let boundary = match c {
            '\n' | '。' | '！' | '？' => true,
            '.' | '!' | '?' => chars.peek().is_none_or(|&(_, n)| n.is_whitespace()),
            _ => false,
        };
        if boundary {
            // closing quotes and brackets belong to the sentence they close
            let mut end = end;
            while let Some(&(j, n)) = chars.peek() {
                if matches!(n, '"' | '\'' | ')' | ']' | '”' | '’' | '」' | '』' | '）') {
                    end = j + n.len_utf8();
                    chars.next();
                } else {
                    break;
                }
            }
            out.extend(trimmed(text, range.start + start..range.start + end));
            start = end;
        }
    }
    out.extend(trimmed(text, range.start + start..range.end));
    out
}

/// Cut a run of text with no sentence boundary into pieces of at most `max_tokens`, each the
/// longest prefix that fits (found by bisection over character boundaries), moved back to the
/// last space when there is one in its second half.
fn hard_split<E>(
    text: &str,
    range: Range<usize>,
    max_tokens: usize,
    count: &mut impl FnMut(&str) -> Result<usize, E>,
    pieces: &mut Vec<Chunk>,
) -> Result<(), E> {
    let mut start = range.start;
    while start < range.end {
        let rest = &text[start..range.end];
        let bounds: Vec<usize> = rest.char_indices().map(|(i, c)| i + c.len_utf8()).collect();
        // the largest k such that rest[..bounds[k]] fits; one character always goes
        let (mut lo, mut hi) = (0usize, bounds.len() - 1);
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            if count(&rest[..bounds[mid]])? <= max_tokens {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        let mut cut = bounds[lo];
        let mut half = cut / 2;
        while !rest.is_char_boundary(half) {
            half -= 1;
        }
        if cut < rest.len()
            && let Some(space) = rest[half..cut].rfind(char::is_whitespace)
            && half + space > 0
        {
            cut = half + space;
        }
        if let Some(piece) = trimmed(text, start..start + cut) {
            let tokens = count(&text[piece.clone()])?;
            pieces.push(Chunk {
                start: piece.start,
                end: piece.end,
                tokens,
            });
        }
        start += cut.max(1);
        while start < range.end && !text.is_char_boundary(start) {
            start += 1;
        }
    }
    Ok(())
}

fn trimmed(text: &str, range: Range<usize>) -> Option<Range<usize>> {
    let s = &text[range.clone()];
    let lead = s.len() - s.trim_start().len();
    let body = s.trim();
    (!body.is_empty()).then(|| range.start + lead..range.start + lead + body.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One token a word (CJK: a character), like a crude tokenizer.
    fn words(s: &str) -> Result<usize, std::convert::Infallible> {
        Ok(s.split_whitespace()
            .map(|w| w.chars().filter(|c| *c as u32 > 0x2e80).count().max(1))
            .sum())
    }

    fn texts<'a>(text: &'a str, chunks: &[Chunk]) -> Vec<&'a str> {
        chunks.iter().map(|c| c.text(text)).collect()
    }

    #[test]
    fn paragraphs_are_packed_until_the_limit() {
        let text = "one two three\n\nfour five\n\n\n\nsix seven eight nine";
        let chunks = split(text, 7, words).unwrap();
        assert_eq!(
            texts(text, &chunks),
            ["one two three\n\nfour five", "six seven eight nine"]
        );
        assert!(chunks.iter().all(|c| c.tokens <= 7));
    }

    #[test]
    fn a_long_paragraph_is_cut_between_sentences() {
        let text = "Alpha beta gamma. Delta epsilon! Zeta eta theta? Iota kappa.";
        let chunks = split(text, 5, words).unwrap();
        assert_eq!(
            texts(text, &chunks),
            [
                "Alpha beta gamma.",
                "Delta epsilon!",
                "Zeta eta theta?",
                "Iota kappa."
            ]
        );
        // a decimal point is not a full stop
        let chunks = split("Pi is 3.14 exactly. Yes.", 4, words).unwrap();
        assert_eq!(
            texts("Pi is 3.14 exactly. Yes.", &chunks),
            ["Pi is 3.14 exactly.", "Yes."]
        );
    }

    #[test]
    fn cjk_sentences_end_at_their_full_stops() {
        let text = "今天天气很好。我们去公园吧！你觉得呢？好的。";
        let chunks = split(text, 14, words).unwrap();
        assert_eq!(
            texts(text, &chunks),
            ["今天天气很好。", "我们去公园吧！你觉得呢？", "好的。"]
        );
    }

    #[test]
    fn a_sentence_longer_than_the_limit_is_cut_at_spaces() {
        let text = "a b c d e f g h i j";
        let chunks = split(text, 4, words).unwrap();
        assert!(chunks.iter().all(|c| c.tokens <= 4), "{chunks:?}");
        assert_eq!(texts(text, &chunks).join(" "), text);
        let cjk = "一二三四五六七八九十";
        let chunks = split(cjk, 3, words).unwrap();
        assert_eq!(texts(cjk, &chunks).concat(), cjk);
        assert!(chunks.iter().all(|c| c.tokens <= 3));
    }

    #[test]
    fn an_overestimated_seam_is_corrected_by_the_exact_count() {
        // a counter under which joining costs more than the seam allowance
        let costly = |s: &str| -> Result<usize, ()> {
            Ok(words(s).unwrap() + s.matches("\n\n").count() * 5)
        };
        let text = "a b\n\nc d\n\ne f";
        let chunks = split(text, 6, costly).unwrap();
        assert!(
            chunks.iter().all(|c| costly(c.text(text)).unwrap() <= 6),
            "{chunks:?}"
        );
        assert_eq!(chunks.len(), 3);
    }

    #[test]
    fn counting_errors_pass_through() {
        assert_eq!(split("x", 3, |_| Err::<usize, _>("no")), Err("no"));
        assert!(split("  \n\n ", 3, words).unwrap().is_empty());
    }
}
