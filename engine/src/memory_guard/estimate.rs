//! How much memory a model needs before it is loaded, from its GGUF header alone.
//!
//! The formula (bytes), for the CPU build where everything lives in the process:
//!
//! ```text
//! total   = weights + kv_cache + rope + compute + runtime
//! weights = the GGUF file's size              (memory-mapped; a forward pass touches every
//!                                              tensor page, loading touches the metadata)
//! kv      = (n_global × context + n_sliding × min(window + chunk, context))
//!           × 2 × n_kv_head × head_dim × element_bytes      (kv_budget::KvShape::full_bytes)
//! rope    = 2 tables × context × head_dim × 4                (cos and sin of head_dim/2, f32)
//! compute = 4 × chunk × (3·n_embd + 2·n_head·head_dim + 2·n_kv_head·head_dim + 2·n_ff)
//!           + 8 × n_vocab                                    (one prefill step's activations,
//!                                                             the logits and the sampler's copy)
//! runtime = 256 × n_vocab + 12 MiB                           (the tokenizer's vocabulary maps,
//!                                                             code, stacks, allocator)
//! ```
//!
//! The runtime term is calibrated against peak RSS (`VmHWM`) of `companion generate` on the
//! default model with its context filled; the other terms are exact sizes of what the engine
//! allocates. `tests/tests/memory_guard.rs` checks the total against measured peaks at 512,
//! 2048 and 8192 tokens of context. As llama.cpp sizes `n_ctx` before allocating, the
//! estimate is for a *full* context: the KV cache grows in pages and reaches it only then.

use serde::{Deserialize, Serialize};

use crate::gguf::{GemmaConfig, ModelFile};
use crate::kv_budget::KvShape;

const TOKENIZER_BYTES_PER_ENTRY: u64 = 256;
const RUNTIME_BASE_BYTES: u64 = 12 << 20;

/// The dimensions of a model that decide its memory use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelShape {
    pub file_bytes: u64,
    pub n_vocab: usize,
    pub n_embd: usize,
    pub n_head: usize,
    pub head_dim: usize,
    pub n_ff: usize,
    /// The longest context the model was trained for.
    pub max_context: usize,
    pub kv: KvShape,
}

impl ModelShape {
    pub fn of_config(config: &GemmaConfig, file_bytes: u64, element_bytes: usize) -> Self {
        ModelShape {
            file_bytes,
            n_vocab: config.n_vocab,
            n_embd: config.n_embd,
            n_head: config.n_head,
            head_dim: config.head_dim,
            n_ff: config.n_ff,
            max_context: config.context_length,
            kv: KvShape::of(config, element_bytes),
        }
    }

    /// The shape of an opened (not loaded) GGUF file.
    pub fn of_file(file: &ModelFile, element_bytes: usize) -> Self {
        Self::of_config(file.config(), file.file_size(), element_bytes)
    }
}

/// The estimate for one model at one context, term by term.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryEstimate {
    pub context: usize,
    pub prefill_chunk: usize,
    pub weights_bytes: u64,
    pub kv_cache_bytes: u64,
    pub rope_bytes: u64,
    pub compute_bytes: u64,
    pub runtime_bytes: u64,
    pub total_bytes: u64,
}

impl MemoryEstimate {
    pub fn new(shape: &ModelShape, context: usize, prefill_chunk: usize) -> Self {
        let chunk = prefill_chunk.min(context).max(1) as u64;
        let weights_bytes = shape.file_bytes;
        let kv_cache_bytes = shape
            .kv
            .full_bytes(context, prefill_chunk.min(context).max(1));
        let rope_bytes = 2 * context as u64 * shape.head_dim as u64 * 4;
        let per_token = 3 * shape.n_embd
            + 2 * shape.n_head * shape.head_dim
            + 2 * shape.kv.n_kv_head * shape.head_dim
            + 2 * shape.n_ff;
        let compute_bytes = 4 * chunk * per_token as u64 + 8 * shape.n_vocab as u64;
        let runtime_bytes = TOKENIZER_BYTES_PER_ENTRY * shape.n_vocab as u64 + RUNTIME_BASE_BYTES;
        MemoryEstimate {
            context,
            prefill_chunk,
            weights_bytes,
            kv_cache_bytes,
            rope_bytes,
            compute_bytes,
            runtime_bytes,
            total_bytes: weights_bytes
                + kv_cache_bytes
                + rope_bytes
                + compute_bytes
                + runtime_bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_estimate_adds_up_and_grows_with_the_context() {
        let shape = crate::memory_guard::catalog::GEMMA_SIZES[0].shape();
        let small = MemoryEstimate::new(&shape, 512, 512);
        let large = MemoryEstimate::new(&shape, 8192, 512);
        assert_eq!(
            small.total_bytes,
            small.weights_bytes
                + small.kv_cache_bytes
                + small.rope_bytes
                + small.compute_bytes
                + small.runtime_bytes
        );
        // 270M: 18 layers × 512 positions × 1 KiB of f16 K and V
        assert_eq!(small.kv_cache_bytes, 18 * 512 * 1024);
        assert!(large.total_bytes > small.total_bytes);
        assert_eq!(large.weights_bytes, small.weights_bytes);
    }
}
