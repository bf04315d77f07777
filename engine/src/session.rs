//! A session: the token ids of one conversation and their KV cache. Operations follow
//! llama.cpp's memory contract (`llama-memory.h`): append (prefill in chunks, step), remove a
//! suffix (truncate), clear; snapshot and restore live in [`crate::snapshot`].

use serde::{Deserialize, Serialize};

use crate::model::Hidden;

use crate::error::Result;
use crate::kv_cache::KvCache;
use crate::model::{Model, Output};

/// The size of one session (`Engine::new_session_with`): its context is decided once, from
/// this, by [`crate::kv_cache::context_for_budget`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionConfig {
    /// Tokens the session should hold; lowered to the model's maximum and to what the budget
    /// allows.
    pub context: usize,
    /// Largest number of tokens one forward step writes (sizes the sliding-window rings).
    pub prefill_chunk: usize,
    /// Bytes the session's K/V may take at its full context; `None`: no limit.
    pub memory_budget_bytes: Option<u64>,
}

#[derive(Debug)]
pub struct Session {
    cache: KvCache,
    tokens: Vec<u32>,
    /// The hidden state after the last token, while it is still the last: lets a generation
    /// whose prompt is exactly what is cached (a sent draft) start without re-running a token.
    last_hidden: Option<Hidden>,
    /// The positions that hold pictures (`prefill_image`): their token ids are placeholders,
    /// so they never count as matching a token list, and a prefix is kept only whole.
    images: Vec<ImageSpan>,
}

/// A picture a session holds: its positions and which picture it is ([`RgbImage::digest`]),
/// so that a prompt holding the same picture there reuses it ([`Session::reusable_prefix`]).
///
/// [`RgbImage::digest`]: crate::vision::RgbImage::digest
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageSpan {
    pub positions: std::ops::Range<usize>,
    pub digest: [u8; 32],
}

impl Session {
    pub(crate) fn new(cache: KvCache) -> Self {
        Session {
            cache,
            tokens: Vec::new(),
            last_hidden: None,
            images: Vec::new(),
        }
    }

    /// The pictures the session holds, in position order.
    pub fn image_spans(&self) -> &[ImageSpan] {
        &self.images
    }

    /// How many leading positions already hold what `parts` would put there: equal token ids
    /// outside pictures, and each picture whole where the same picture (by
    /// [`ImageSpan::digest`]) already sits at the same positions. `per_image` is how many
    /// positions a picture takes.
    pub fn reusable_prefix(&self, parts: &[crate::vision::PromptPart], per_image: usize) -> usize {
        use crate::vision::PromptPart;
        let mut pos = 0;
        for part in parts {
            match part {
                PromptPart::Ids(ids) => {
                    // text never matches a picture's placeholder positions
                    let limit = self
                        .images
                        .iter()
                        .find(|s| s.positions.end > pos)
                        .map_or(self.tokens.len(), |s| s.positions.start)
                        .min(self.tokens.len());
                    let held = &self.tokens[pos.min(limit)..limit];
                    let same = common_prefix(held, ids);
                    pos += same;
                    if same < ids.len() {
                        return pos;
                    }
                }
                PromptPart::Image(image) => {
                    let here = self.images.iter().find(|s| s.positions.start == pos);
                    match here {
                        Some(span)
                            if span.positions.len() == per_image
                                && span.digest == image.digest() =>
                        {
                            pos = span.positions.end;
                        }
                        _ => return pos,
                    }
                }
            }
        }
        pos
    }

    pub fn tokens(&self) -> &[u32] {
        &self.tokens
    }

    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    pub fn context(&self) -> usize {
        self.cache.context()
    }

    /// The most tokens one forward step may take (a speculative check's batch included).
    pub fn chunk(&self) -> usize {
        self.cache.chunk()
    }

    pub fn remaining(&self) -> usize {
        self.context() - self.len()
    }

    pub fn kv_bytes_per_token(&self) -> usize {
        self.cache.bytes_per_token()
    }

    pub fn kv_allocated_bytes(&self) -> usize {
        self.cache.allocated_bytes()
    }

    pub(crate) fn cache(&self) -> &KvCache {
        &self.cache
    }

    /// An assistant's drafting reads the cache (`model::assistant`); it writes nothing.
    pub(crate) fn cache_mut(&mut self) -> &mut KvCache {
        &mut self.cache
    }

    /// For restore: the cache and token list, to be refilled together.
    pub(crate) fn parts_mut(&mut self) -> (&mut KvCache, &mut Vec<u32>, &mut Vec<ImageSpan>) {
        self.last_hidden = None;
        self.images.clear();
        (&mut self.cache, &mut self.tokens, &mut self.images)
    }

    /// Whether the hidden state after the last cached token is kept (see `sync_to`).
    pub fn has_last_hidden(&self) -> bool {
        self.last_hidden.is_some()
    }

    pub fn clear(&mut self) {
        self.cache.clear();
        self.tokens.clear();
        self.last_hidden = None;
        self.images.clear();
    }

    /// Append `tokens` and return the last position's hidden state.
    pub fn prefill(&mut self, model: &Model, tokens: &[u32]) -> Result<Hidden> {
        let result = model.forward(tokens, &mut self.cache, Output::Last);
        self.sync_tokens(tokens, result.is_ok());
        self.last_hidden = result.as_ref().ok().cloned();
        result
    }

    /// Append a picture's rows (a vision encoder's output, [`crate::vision`]) in one step
    /// whose rows see one another. Its positions hold `placeholder` in the token list (the
    /// model's image soft token), so that positions and lengths stay one per row; a cache
    /// that holds a picture is reused only as a whole (see `sync_to`).
    pub fn prefill_image(
        &mut self,
        model: &Model,
        image: &crate::vision::ImageEmbeddings,
        digest: [u8; 32],
        placeholder: u32,
    ) -> Result<()> {
        self.last_hidden = None;
        let start = self.tokens.len();
        let result = model.forward_image(&image.rows, &mut self.cache);
        self.sync_tokens(&vec![placeholder; image.tokens], result.is_ok());
        if result.is_ok() {
            self.images.push(ImageSpan {
                positions: start..start + image.tokens,
                digest,
            });
        }
        result
    }

    /// One fused decode step (CUDA, see `backend::cuda_decode`): append `token` and return the
    /// next token, sampled on the device. No hidden state is kept.
    pub(crate) fn step_fused(
        &mut self,
        model: &Model,
        token: u32,
        step: usize,
        sampling: &crate::model::FusedSampling,
        draws: &mut dyn FnMut() -> f32,
    ) -> Result<u32> {
        self.last_hidden = None;
        let result = model.fused_step(&mut self.cache, token, step, sampling, draws);
        self.sync_tokens(&[token], result.is_ok());
        result
    }

    /// One decode step: append one token and return its hidden state.
    pub fn step(&mut self, model: &Model, token: u32) -> Result<Hidden> {
        self.prefill(model, &[token])
    }

    /// Append `tokens` in calls of at most `chunk` tokens, asking `stop` before each one
    /// whether to give up (a newer draft has arrived). Returns how many tokens were appended;
    /// fewer than `tokens.len()` only when `stop` said so. What was appended stays cached.
    pub fn prefill_until(
        &mut self,
        model: &Model,
        tokens: &[u32],
        chunk: usize,
        stop: &dyn Fn() -> bool,
    ) -> Result<usize> {
        self.cache.check_room(tokens.len())?;
        let mut done = 0;
        for part in tokens.chunks(chunk.max(1)) {
            if stop() {
                break;
            }
            self.prefill(model, part)?;
            done += part.len();
        }
        Ok(done)
    }

    /// Append `tokens` and return every position's hidden state (for scoring).
    pub fn prefill_all(&mut self, model: &Model, tokens: &[u32]) -> Result<Hidden> {
        let result = model.forward(tokens, &mut self.cache, Output::All);
        self.sync_tokens(tokens, result.is_ok());
        self.last_hidden = None;
        result
    }

    /// Append `tokens` and return every position's hidden state, each computed as a one-token
    /// step at its position computes it (a speculative check, `crate::speculate`).
    pub(crate) fn check(&mut self, model: &Model, tokens: &[u32]) -> Result<Hidden> {
        let result = model.forward(tokens, &mut self.cache, Output::AllAsDecode);
        self.sync_tokens(tokens, result.is_ok());
        self.last_hidden = None;
        result
    }

    fn sync_tokens(&mut self, tokens: &[u32], ok: bool) {
        if ok {
            self.tokens.extend_from_slice(tokens);
        } else if self.cache.len() != self.tokens.len() {
            // the model cleared a half-written cache
            self.tokens.clear();
            self.images.clear();
        }
    }

    /// Keep only the first `n` tokens. When a sliding-window ring has already overwritten
    /// keys the prefix still needs, the prefix is re-prefilled from scratch.
    /// A cut inside a picture keeps the tokens before it; a prefix holding a picture that
    /// would have to be re-prefilled is dropped (the picture's rows are not kept).
    pub fn truncate(&mut self, model: &Model, n: usize) -> Result<()> {
        if n >= self.tokens.len() {
            return Ok(());
        }
        let n = self
            .images
            .iter()
            .find(|span| span.positions.contains(&n) && span.positions.start < n)
            .map_or(n, |span| span.positions.start);
        self.last_hidden = None;
        self.images.retain(|span| span.positions.end <= n);
        if self.cache.truncate(n) {
            self.tokens.truncate(n);
            return Ok(());
        }
        if !self.images.is_empty() {
            self.clear();
            return Ok(());
        }
        let keep: Vec<u32> = self.tokens[..n].to_vec();
        self.clear();
        if !keep.is_empty() {
            self.prefill(model, &keep)?;
        }
        Ok(())
    }

    /// Make the session hold exactly `tokens`, reusing the longest common prefix already in
    /// the cache. Returns the hidden state of the last token when any token was processed.
    /// At least one token is always (re)processed so that logits for the next token exist.
    pub fn sync_to(&mut self, model: &Model, tokens: &[u32]) -> Result<Option<Hidden>> {
        // exactly what is held, pictures included (a prompt `Engine::prefill_parts` just
        // prefilled): nothing to run
        if self.tokens == tokens
            && let Some(h) = &self.last_hidden
        {
            return Ok(Some(h.clone()));
        }
        // otherwise a picture's placeholders match nothing: the text after it is not reused
        let first_image = self
            .images
            .first()
            .map_or(usize::MAX, |span| span.positions.start);
        let common = common_prefix(&self.tokens, tokens).min(first_image);
        // keep one token to re-run if the whole target is already cached
        let keep = common.min(tokens.len().saturating_sub(1));
        self.truncate(model, keep)?;
        let rest = &tokens[self.tokens.len()..];
        if rest.is_empty() {
            return Ok(None);
        }
        self.prefill(model, rest).map(Some)
    }
}

pub fn common_prefix(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

#[cfg(test)]
mod tests {
    #[test]
    fn common_prefix_counts_equal_leading_ids() {
        assert_eq!(super::common_prefix(&[1, 2, 3], &[1, 2, 4]), 2);
        assert_eq!(super::common_prefix(&[], &[1]), 0);
        assert_eq!(super::common_prefix(&[1, 2], &[1, 2, 3]), 2);
    }
}
