//! SentencePiece tokenization as a `tokenizers::Model`: llama.cpp's `llm_tokenizer_spm`
//! (`src/llama-vocab.cpp`) ported as is.
//!
//! The text (spaces already `▁`) is split into UTF-8 characters; every adjacent pair whose
//! concatenation is a vocabulary token goes into a priority queue ordered by that token's score
//! (ties: leftmost first); the best pair is merged and its new neighbours are queued, until
//! nothing merges. Each final symbol is its token, or `<0xXX>` byte tokens when the vocabulary
//! lacks it.
//!
//! Expressing SPM as a `tokenizers` BPE model needed one merge rule per way of splitting every
//! token — about a million strings to build and hash — which made building the tokenizer the
//! slowest part of loading (1.2 s of 1.5 s). This model needs only the vocabulary's index.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokenizers::{AddedToken, Model, Token, Trainer};

use super::vocab::Vocab;

#[derive(Debug, Clone)]
pub struct SpmModel {
    vocab: Arc<Vocab>,
}

impl SpmModel {
    pub fn new(vocab: Arc<Vocab>) -> Self {
        SpmModel { vocab }
    }

    /// llama.cpp `llm_tokenizer_spm_session::tokenize`, returning (id, byte range) pairs.
    fn spm(&self, text: &str) -> Vec<(u32, usize, usize)> {
        let mut symbols: Vec<Symbol> = Vec::with_capacity(text.len());
        for (i, (start, ch)) in text.char_indices().enumerate() {
            symbols.push(Symbol {
                start,
                len: ch.len_utf8(),
                prev: i as isize - 1,
                next: i as isize + 1,
            });
        }
        if let Some(last) = symbols.last_mut() {
            last.next = -1;
        }
        let mut queue = BinaryHeap::new();
        for i in 1..symbols.len() {
            self.try_add_bigram(text, &symbols, i as isize - 1, i as isize, &mut queue);
        }
        while let Some(b) = queue.pop() {
            let (l, r) = (b.left as usize, b.right as usize);
            // stale: one side was merged since this pair was queued
            if symbols[l].len == 0
                || symbols[r].len == 0
                || symbols[l].len + symbols[r].len != b.size
            {
                continue;
            }
            symbols[l].len += symbols[r].len;
            symbols[r].len = 0;
            symbols[l].next = symbols[r].next;
            let after = symbols[r].next;
            if after >= 0 {
                symbols[after as usize].prev = b.left;
            }
            let (prev, next) = (symbols[l].prev, symbols[l].next);
            self.try_add_bigram(text, &symbols, prev, b.left, &mut queue);
            self.try_add_bigram(text, &symbols, b.left, next, &mut queue);
        }
        let mut out = Vec::new();
        let mut i = if symbols.is_empty() { -1 } else { 0 };
        while i >= 0 {
            let s = &symbols[i as usize];
            let piece = &text[s.start..s.start + s.len];
            match self.vocab.id_of(piece) {
                Some(id) => out.push((id, s.start, s.start + s.len)),
                None => {
                    for (j, byte) in piece.bytes().enumerate() {
                        let id = self.vocab.byte_id(byte).unwrap_or(self.vocab.unk_id);
                        out.push((id, s.start + j, s.start + j + 1));
                    }
                }
            }
            i = s.next;
        }
        out
    }

    fn try_add_bigram(
        &self,
        text: &str,
        symbols: &[Symbol],
        left: isize,
        right: isize,
        queue: &mut BinaryHeap<Bigram>,
    ) {
        if left < 0 || right < 0 {
            return;
        }
        let (l, r) = (&symbols[left as usize], &symbols[right as usize]);
        let size = l.len + r.len;
        let Some(id) = self.vocab.id_of(&text[l.start..l.start + size]) else {
            return;
        };
        queue.push(Bigram {
            score: self.vocab.score(id),
            left,
            right,
            size,
        });
    }
}

struct Symbol {
    start: usize,
    len: usize,
    prev: isize,
    next: isize,
}

/// A candidate merge; the heap's top is the highest score, ties to the leftmost
/// (llama.cpp `llm_bigram_spm::comparator`).
struct Bigram {
    score: f32,
    left: isize,
    right: isize,
    size: usize,
}

impl Ord for Bigram {
    fn cmp(&self, other: &Self) -> Ordering {
        self.score
            .total_cmp(&other.score)
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

impl Model for SpmModel {
    type Trainer = NoTrainer<SpmModel>;

    fn tokenize(&self, sequence: &str) -> tokenizers::Result<Vec<Token>> {
        Ok(self
            .spm(sequence)
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

/// `tokenizers::Model` requires a trainer type; a GGUF vocabulary is never trained here.
pub struct NoTrainer<M>(std::marker::PhantomData<M>);

impl<M> Default for NoTrainer<M> {
    fn default() -> Self {
        NoTrainer(std::marker::PhantomData)
    }
}

impl<M: Model + Sync> Trainer for NoTrainer<M> {
    type Model = M;

    fn should_show_progress(&self) -> bool {
        false
    }

    fn train(&self, _model: &mut M) -> tokenizers::Result<Vec<AddedToken>> {
        Err("training a GGUF vocabulary is not supported".into())
    }

    fn feed<I, S, F>(&mut self, _iterator: I, _process: F) -> tokenizers::Result<()>
    where
        I: Iterator<Item = S> + Send,
        S: AsRef<str> + Send,
        F: Fn(&str) -> tokenizers::Result<Vec<String>> + Sync,
    {
        Err("training a GGUF vocabulary is not supported".into())
    }
}
