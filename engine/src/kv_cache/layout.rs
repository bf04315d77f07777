//! What a session's KV cache is made of, and so how large it is: the layers that store K and V,
//! each with its width, the sliding window, the element size and the page size. Shared by the
//! cache itself (`super`), the budget (`super::budget`), the memory estimate and the catalog.
//!
//! The cache costs, per storing layer and position, K and V of `n_kv_head × head_dim` f16
//! each. Sliding-window layers hold a ring of `window + chunk` positions whatever the context;
//! global layers hold the whole context, grown in pages of [`PAGE_SIZE`] positions.

use crate::arch::ModelArch;

/// Positions a global layer grows by at a time.
pub const PAGE_SIZE: usize = 256;

/// Bytes of one stored K or V value: f16 on every backend.
pub const ELEMENT_BYTES: usize = 2;

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
            element_bytes: ELEMENT_BYTES,
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
            element_bytes: ELEMENT_BYTES,
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
