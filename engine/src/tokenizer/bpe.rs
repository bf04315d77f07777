//! Gemma 4's tokenizer as a `tokenizers::Model`: llama.cpp's `llm_tokenizer_bpe_session` with
//! the `LLAMA_VOCAB_PRE_TYPE_GEMMA4` pre-tokenizer (`src/llama-vocab.cpp`), ported as is.
//!
//! The text (spaces already `▁`, no space prefix) is split only into runs of newlines and
//! runs of anything else (`[^\n]+|[\n]+`); a newline run that is itself a token stays whole
//! (llama.cpp PR 21343). Every other run is split into UTF-8 characters and merged pairwise by
//! the lowest merge rank first, the leftmost on ties, with no splitting at spaces. A final
//! symbol that is not a token becomes its UTF-8 bytes as `<0xXX>` tokens.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokenizers::{Model, Token};

use super::spm::NoTrainer;
use super::vocab::Vocab;

#[derive(Debug, Clone)]
pub struct BpeModel {
    vocab: Arc<Vocab>,
}

impl BpeModel {
    pub fn new(vocab: Arc<Vocab>) -> Self {
        BpeModel { vocab }
    }

    /// (id, byte range) of every token of `text`.
    pub(crate) fn bpe(&self, text: &str) -> Vec<(u32, usize, usize)> {
        let mut out = Vec::new();
        for (start, word) in newline_runs(text) {
            if word.bytes().all(|b| b == b'\n')
                && let Some(id) = self.vocab.id_of(word)
            {
                out.push((id, start, start + word.len()));
                continue;
            }
            self.word(word, start, &mut out);
        }
        out
    }

    fn word(&self, word: &str, offset: usize, out: &mut Vec<(u32, usize, usize)>) {
        let mut symbols: Vec<Symbol> = word
            .char_indices()
            .enumerate()
            .map(|(i, (start, ch))| Symbol {
                start,
                len: ch.len_utf8(),
                prev: i as isize - 1,
                next: i as isize + 1,
                id: self.vocab.id_of(&word[start..start + ch.len_utf8()]),
            })
            .collect();
        if let Some(last) = symbols.last_mut() {
            last.next = -1;
        }
        let mut queue = BinaryHeap::new();
        for i in 1..symbols.len() {
            self.push_bigram(&symbols, i as isize - 1, i as isize, &mut queue);
        }
        while let Some(b) = queue.pop() {
            let (l, r) = (b.left as usize, b.right as usize);
            // outdated: one side was merged since this pair was queued
            if symbols[l].len == 0
                || symbols[r].len == 0
                || symbols[l].id != Some(b.left_id)
                || symbols[r].id != Some(b.right_id)
            {
                continue;
            }
            symbols[l].len += symbols[r].len;
            symbols[l].id = self
                .vocab
                .id_of(&word[symbols[l].start..symbols[l].start + symbols[l].len]);
            symbols[r].len = 0;
            symbols[l].next = symbols[r].next;
            let after = symbols[r].next;
            if after >= 0 {
                symbols[after as usize].prev = b.left;
            }
            let (prev, next) = (symbols[l].prev, symbols[l].next);
            self.push_bigram(&symbols, prev, b.left, &mut queue);
            self.push_bigram(&symbols, b.left, next, &mut queue);
        }
        let mut i = if symbols.is_empty() { -1 } else { 0 };
        while i >= 0 {
            let s = &symbols[i as usize];
            let (a, z) = (offset + s.start, offset + s.start + s.len);
            match s.id {
                Some(id) => out.push((id, a, z)),
                None => {
                    // llama.cpp drops a byte that has no `<0xXX>` token; every Gemma
                    // vocabulary has all 256
                    for (j, byte) in word[s.start..s.start + s.len].bytes().enumerate() {
                        if let Some(id) = self.vocab.byte_id(byte) {
                            out.push((id, a + j, a + j + 1));
                        }
                    }
                }
            }
            i = s.next;
        }
    }

    fn push_bigram(
        &self,
        symbols: &[Symbol],
        left: isize,
        right: isize,
        queue: &mut BinaryHeap<Bigram>,
    ) {
        if left < 0 || right < 0 {
            return;
        }
        let (l, r) = (&symbols[left as usize], &symbols[right as usize]);
        let (Some(left_id), Some(right_id)) = (l.id, r.id) else {
            return;
        };
        let Some(rank) = self.vocab.merge_rank(left_id, right_id) else {
            return;
        };
        queue.push(Bigram {
            rank,
            left,
            right,
            left_id,
            right_id,
        });
    }
}

/// `[^\n]+|[\n]+`: (byte offset, run) in order.
fn newline_runs(text: &str) -> Vec<(usize, &str)> {
    let mut runs = Vec::new();
    let bytes = text.as_bytes();
    let mut start = 0;
    while start < bytes.len() {
        let newline = bytes[start] == b'\n';
        let mut end = start + 1;
        while end < bytes.len() && (bytes[end] == b'\n') == newline {
            end += 1;
        }
        runs.push((start, &text[start..end]));
        start = end;
    }
    runs
}

struct Symbol {
    start: usize,
    len: usize,
    prev: isize,
    next: isize,
    id: Option<u32>,
}

/// A candidate merge; the heap's top is the lowest rank, ties to the leftmost
/// (llama.cpp `llm_bigram_bpe::comparator`).
struct Bigram {
    rank: u32,
    left: isize,
    right: isize,
    left_id: u32,
    right_id: u32,
}

impl Ord for Bigram {
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .rank
            .cmp(&self.rank)
            .then_with(|| other.left.cmp(&self.left))
    }
}

impl PartialOrd for Bigram {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Bigram {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Bigram {}

impl Model for BpeModel {
    type Trainer = NoTrainer<BpeModel>;

    fn tokenize(&self, sequence: &str) -> tokenizers::Result<Vec<Token>> {
        Ok(self
            .bpe(sequence)
            .into_iter()
            .map(|(id, a, b)| Token::new(id, self.vocab.token(id).to_string(), (a, b)))
            .collect())
    }

    fn token_to_id(&self, token: &str) -> Option<u32> {
        self.vocab.id_of(token)
    }

    fn id_to_token(&self, id: u32) -> Option<String> {
        ((id as usize) < self.vocab.len()).then(|| self.vocab.token(id).to_string())
    }

    fn get_vocab(&self) -> HashMap<String, u32> {
        (0..self.vocab.len() as u32)
            .map(|id| (self.vocab.token(id).to_string(), id))
            .collect()
    }

    fn get_vocab_size(&self) -> usize {
        self.vocab.len()
    }

    fn save(&self, _folder: &Path, _prefix: Option<&str>) -> tokenizers::Result<Vec<PathBuf>> {
        Err("the vocabulary lives in the GGUF file; there is nothing to save".into())
    }

    fn get_trainer(&self) -> Self::Trainer {
        NoTrainer::default()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn newline_runs_alternate() {
        let runs = super::newline_runs("a b\n\ncd\n");
        assert_eq!(runs, vec![(0, "a b"), (3, "\n\n"), (5, "cd"), (7, "\n")]);
        assert!(super::newline_runs("").is_empty());
    }
}
