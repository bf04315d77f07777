//! Streaming detokenization that only ever yields whole UTF-8 characters: a character spread
//! over several byte-fallback tokens comes out once, whole (cf. candle-examples'
//! `token_output_stream.rs`, which re-decodes; we keep bytes and cut at character boundaries).

use std::sync::Arc;

use super::Vocab;

pub struct TokenStream {
    vocab: Arc<Vocab>,
    pending: Vec<u8>,
}

impl TokenStream {
    pub(crate) fn new(vocab: Arc<Vocab>) -> Self {
        TokenStream {
            vocab,
            pending: Vec::new(),
        }
    }

    /// Add one token; returns the text that is now complete, if any.
    pub fn push(&mut self, id: u32) -> Option<String> {
        self.pending.extend_from_slice(self.vocab.piece(id));
        self.take_complete()
    }

    /// Whatever remains at the end of generation; an incomplete character becomes U+FFFD.
    pub fn finish(&mut self) -> Option<String> {
        if self.pending.is_empty() {
            return None;
        }
        let text = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        Some(text)
    }

    fn take_complete(&mut self) -> Option<String> {
        let mut out = String::new();
        loop {
            match std::str::from_utf8(&self.pending) {
                Ok(s) => {
                    out.push_str(s);
                    self.pending.clear();
                    break;
                }
                Err(e) => {
                    let valid = e.valid_up_to();
                    // Safe: `valid_up_to` bytes are valid UTF-8.
                    out.push_str(std::str::from_utf8(&self.pending[..valid]).unwrap_or_default());
                    match e.error_len() {
                        // An incomplete character at the end: wait for more bytes.
                        None => {
                            self.pending.drain(..valid);
                            break;
                        }
                        // Bytes that can never become valid: replace them and go on.
                        Some(bad) => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            self.pending.drain(..valid + bad);
                        }
                    }
                }
            }
        }
        (!out.is_empty()).then_some(out)
    }
}
