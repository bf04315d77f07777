//! How large a session's KV cache is, and how large it may be under a memory budget.
//!
//! The cache (see [`crate::kv_cache`]) costs, per storing layer and position, K and V of
//! `n_kv_head × head_dim` f16 each. Sliding-window layers hold a ring of `window + chunk`
//! positions whatever the context; global layers hold the whole context, grown in pages of
//! [`PAGE_SIZE`] positions. A session's context is decided once, when it is created: the
//! largest that the caller asked for, the model allows and — when a budget is given — whose
//! *full* cache fits the budget, so that a session never runs out of memory halfway through a
//! conversation (llama.cpp likewise sizes `n_ctx` up front and fails early when it cannot).

use serde::{Deserialize, Serialize};

use crate::arch::ModelArch;
use crate::error::{Error, Result};

/// Positions a global layer grows by at a time.
pub const PAGE_SIZE: usize = 256;

/// The size of one session.
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

/// One storing layer's share of the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KvLayerShape {
    pub sliding: bool,
    /// `n_kv_head × head_dim`: values of K (and as many of V) per position.
    pub width: usize,
}

/// The dimensions of a model's KV cache that decide its size: the layers that store K and V
/// (Gemma 4's shared layers store none), each with its own width.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KvShape {
    pub layers: Vec<KvLayerShape>,
    /// Sliding window; `None` when every layer is global.
    pub window: Option<usize>,
    pub element_bytes: usize,
}

impl KvShape {
    /// The cache shape the description implies, stored as f16 (every backend's cache).
    pub fn of(arch: &ModelArch) -> Self {
        KvShape {
            layers: arch
                .storing_layers()
                .map(|(_, l)| KvLayerShape {
                    sliding: l.sliding,
                    width: l.kv_width(),
                })
                .collect(),
            window: arch.window,
            element_bytes: crate::kv_cache::ELEMENT_BYTES,
        }
    }

    /// `n_global` and `n_sliding` layers of one width (the catalog's Gemma 3 sizes).
    pub fn uniform(n_global: usize, n_sliding: usize, width: usize, window: Option<usize>) -> Self {
        let layer = |sliding| KvLayerShape { sliding, width };
        KvShape {
            layers: (0..n_sliding)
                .map(|_| layer(true))
                .chain((0..n_global).map(|_| layer(false)))
                .collect(),
            window,
            element_bytes: crate::kv_cache::ELEMENT_BYTES,
        }
    }

    /// Bytes of K and V for one position of every layer that stores.
    pub fn bytes_per_position(&self, sliding: bool) -> u64 {
        self.layers
            .iter()
            .filter(|l| l.sliding == sliding)
            .map(|l| (2 * l.width * self.element_bytes) as u64)
            .sum()
    }

    /// Ring slots of a sliding layer: a whole chunk can be written before attention without
    /// overwriting a key an earlier query of the same chunk still needs.
    pub fn ring(&self, context: usize, chunk: usize) -> usize {
        self.window
            .map_or(context, |w| w.saturating_add(chunk))
            .min(context)
    }

    /// Bytes of the whole cache once `context` positions are written.
    pub fn full_bytes(&self, context: usize, chunk: usize) -> u64 {
        let global = self
            .bytes_per_position(false)
            .saturating_mul(context as u64);
        let sliding = self
            .bytes_per_position(true)
            .saturating_mul(self.ring(context, chunk) as u64);
        global.saturating_add(sliding)
    }
}

/// The context a session gets: `requested` lowered to `max`, then, under a budget, to the
/// largest multiple of [`PAGE_SIZE`] whose full cache fits (the requested context itself is
/// kept when it fits, page multiple or not). Fails when not even one page fits.
pub fn context_for_budget(
    shape: &KvShape,
    requested: usize,
    max: usize,
    chunk: usize,
    budget: Option<u64>,
) -> Result<usize> {
    let wanted = requested.min(max);
    if wanted < 2 {
        return Err(Error::InvalidArgument(format!(
            "a session needs a context of at least 2 tokens, not {wanted}"
        )));
    }
    let Some(budget) = budget else {
        return Ok(wanted);
    };
    if shape.full_bytes(wanted, chunk) <= budget {
        return Ok(wanted);
    }
    // full_bytes grows with the context: the answer is the last page multiple that fits.
    let mut pages = (wanted - 1) / PAGE_SIZE;
    while pages > 0 && shape.full_bytes(pages * PAGE_SIZE, chunk) > budget {
        pages -= 1;
    }
    if pages == 0 {
        let tokens = PAGE_SIZE.min(wanted);
        return Err(Error::MemoryBudgetTooSmall {
            budget,
            tokens,
            needed: shape.full_bytes(tokens, chunk),
        });
    }
    Ok(pages * PAGE_SIZE)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Gemma 3 270M: 18 layers of which 3 are global, one KV head of 256, window 512 (f32
    /// values here, as the tests were written).
    fn gemma_270m() -> KvShape {
        KvShape {
            element_bytes: 4,
            ..KvShape::uniform(3, 15, 256, Some(512))
        }
    }

    #[test]
    fn full_bytes_counts_rings_once_and_globals_per_position() {
        let s = gemma_270m();
        assert_eq!(s.bytes_per_position(false), 3 * 2048);
        assert_eq!(s.bytes_per_position(true), 15 * 2048);
        // 3 × 4096 + 15 × (512 + 64) positions
        assert_eq!(s.full_bytes(4096, 64), (3 * 4096 + 15 * 576) * 2048);
        // a context shorter than the ring caps the ring
        assert_eq!(s.full_bytes(100, 64), 18 * 100 * 2048);
    }

    #[test]
    fn no_budget_keeps_the_request_up_to_the_maximum() {
        let s = gemma_270m();
        assert_eq!(context_for_budget(&s, 1000, 4096, 64, None).unwrap(), 1000);
        assert_eq!(context_for_budget(&s, 9000, 4096, 64, None).unwrap(), 4096);
    }

    #[test]
    fn a_budget_picks_the_largest_page_multiple_that_fits() {
        let s = gemma_270m();
        let ring = 15 * 576 * 2048;
        // room for exactly 1024 global positions, and a little more
        let budget = ring + 3 * 1024 * 2048 + 5000;
        assert_eq!(
            context_for_budget(&s, 4096, 4096, 64, Some(budget)).unwrap(),
            1024
        );
        // one byte less than 1024 need: down a page
        let tight = ring + 3 * 1024 * 2048 - 1;
        assert_eq!(
            context_for_budget(&s, 4096, 4096, 64, Some(tight)).unwrap(),
            768
        );
        // a request that fits is kept as it is
        assert_eq!(
            context_for_budget(&s, 1000, 4096, 64, Some(budget)).unwrap(),
            1000
        );
    }

    #[test]
    fn a_budget_below_one_page_is_an_error_saying_what_one_page_needs() {
        let s = gemma_270m();
        let needed = s.full_bytes(PAGE_SIZE, 64);
        match context_for_budget(&s, 4096, 4096, 64, Some(needed - 1)) {
            Err(Error::MemoryBudgetTooSmall {
                budget,
                tokens,
                needed: n,
            }) => {
                assert_eq!((budget, tokens, n), (needed - 1, PAGE_SIZE, needed));
            }
            other => panic!("expected MemoryBudgetTooSmall, got {other:?}"),
        }
        assert_eq!(
            context_for_budget(&s, 4096, 4096, 64, Some(needed)).unwrap(),
            PAGE_SIZE
        );
    }

    #[test]
    fn a_context_under_two_tokens_is_refused() {
        assert!(context_for_budget(&gemma_270m(), 1, 4096, 64, None).is_err());
    }
}
