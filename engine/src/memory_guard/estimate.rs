//! How much memory a model needs before it is loaded, from its GGUF header alone.
//!
//! The formula (bytes), for the CPU build where everything lives in the process:
//!
//! ```text
//! total   = weights + kv_cache + rope + compute + runtime
//! weights = the GGUF file's size              (memory-mapped; a forward pass touches every
//!           − gathered tables                  tensor page, loading touches the metadata;
//!                                              a table read only by rows — Gemma 4's
//!                                              per-layer token embeddings, the token
//!                                              embeddings when the output is untied — has
//!                                              only the rows of tokens seen resident)
//! kv      = Σ over layers that store K and V:  (global: context, sliding: min(window + chunk,
//!           context)) × 2 × n_kv_head × head_dim × 2 (f16)   (kv_cache::KvShape::full_bytes;
//!           Gemma 4's shared layers store nothing)
//! rope    = Σ over rope tables: context × n_rot × 4          (cos and sin of n_rot/2, f32)
//! compute = 4 × chunk × (3·n_embd + 2·q + 2·kv + 2·n_ff + 2·ple)
//!           + 8 × n_vocab                                    (one prefill step's activations
//!                                                             at the widest layer, the per-layer
//!                                                             inputs, the logits and the
//!                                                             sampler's copy)
//!           + 8 × (MAX_DRAFT + 1) × n_vocab                  (a speculative check's logits, a
//!                                                             row per token checked, while the
//!                                                             product is laid out: `speculate`;
//!                                                             +10 MB at peak measured here)
//! runtime = 256 × n_vocab + 12 MiB                           (the tokenizer's vocabulary maps,
//!                                                             code, stacks, allocator)
//!           + 4 MiB on Linux                                 (the move of the weights onto huge
//!                                                             pages, `gguf::resident`: a 2 MiB
//!                                                             chunk in flight; prompt passes
//!                                                             hold the move back, so it resumes
//!                                                             with the context full, and the
//!                                                             peak then rose by 3.5-4.5 MB)
//! ```
//!
//! The runtime term is calibrated against peak RSS (`VmHWM`) of `companion generate` on the
//! default model with its context filled; the other terms are exact sizes of what the engine
//! allocates. `cli/tests/companion/memory.rs` checks the total against measured peaks at 512, 2048 and
//! 8192 tokens of context. As llama.cpp sizes `n_ctx` before allocating, the estimate is for a
//! *full* context: the KV cache grows in pages and reaches it only then. Every product
//! saturates: a hostile header cannot wrap the estimate into a small number.

use serde::{Deserialize, Serialize};

use crate::arch::ModelArch;
use crate::error::Result;
use crate::gguf::ModelFile;
use crate::kv_cache::KvShape;

const TOKENIZER_BYTES_PER_ENTRY: u64 = 256;
const RUNTIME_BASE_BYTES: u64 = 12 << 20;
/// The huge-page move's share of the peak (see the module docs); no move off Linux.
const HUGE_PAGE_MOVE_BYTES: u64 = if cfg!(target_os = "linux") {
    4 << 20
} else {
    0
};

/// The dimensions of a model that decide its memory use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelShape {
    pub file_bytes: u64,
    /// Bytes of the tables read only row by row (gathered), which stay mostly on disk: the
    /// per-layer token embeddings of Gemma 4's E-series (1.9 GB of E2B's 3.4 GB Q4_K_M file),
    /// and the token embeddings when the output has a matrix of its own.
    pub gathered_bytes: u64,
    pub n_vocab: usize,
    pub n_embd: usize,
    /// Widest query projection of any layer (`n_head × head_dim`).
    pub q_width: usize,
    /// Widest K (or V) projection of any layer.
    pub kv_width: usize,
    pub n_ff: usize,
    /// Values of the per-layer inputs per token (Gemma 4 E-series), 0 without.
    pub per_layer_width: usize,
    /// `n_rot` of each RoPE table.
    pub rope_dims: Vec<usize>,
    /// The longest context the model was trained for.
    pub max_context: usize,
    pub kv: KvShape,
}

impl ModelShape {
    pub fn of_arch(arch: &ModelArch, file_bytes: u64) -> Self {
        ModelShape {
            file_bytes,
            gathered_bytes: 0,
            n_vocab: arch.n_vocab,
            n_embd: arch.n_embd,
            q_width: arch.max_q_width(),
            kv_width: arch.max_kv_width(),
            n_ff: arch.max_ff(),
            per_layer_width: arch.per_layer_input.map_or(0, |p| p * arch.n_layer()),
            rope_dims: arch.ropes.iter().map(|r| r.n_rot).collect(),
            max_context: arch.context_length,
            kv: KvShape::of(arch),
        }
    }

    /// The shape of an opened (not loaded) GGUF file; fails as [`ModelArch::of`] does.
    pub fn of_file(file: &ModelFile) -> Result<Self> {
        let arch = ModelArch::of(file)?;
        use crate::gguf::keys;
        let mut gathered = file
            .tensor_data_bytes(keys::PER_LAYER_TOKEN_EMBD)
            .unwrap_or(0);
        if file.has_tensor(keys::OUTPUT) {
            gathered =
                gathered.saturating_add(file.tensor_data_bytes(keys::TOKEN_EMBD).unwrap_or(0));
        }
        Ok(ModelShape {
            gathered_bytes: gathered.min(file.file_size()),
            ..Self::of_arch(&arch, file.file_size())
        })
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
        let weights_bytes = shape.file_bytes.saturating_sub(shape.gathered_bytes);
        let kv_cache_bytes = shape
            .kv
            .full_bytes(context, prefill_chunk.min(context).max(1));
        let rope_bytes = shape
            .rope_dims
            .iter()
            .map(|&n_rot| {
                (context as u64)
                    .saturating_mul(n_rot as u64)
                    .saturating_mul(4)
            })
            .fold(0u64, u64::saturating_add);
        let per_token = [
            3 * shape.n_embd,
            2 * shape.q_width,
            2 * shape.kv_width,
            2 * shape.n_ff,
            2 * shape.per_layer_width,
        ]
        .iter()
        .fold(0u64, |a, &b| a.saturating_add(b as u64));
        let check_rows = crate::speculate::MAX_DRAFT as u64 + 1;
        let compute_bytes = (4 * chunk)
            .saturating_mul(per_token)
            .saturating_add(8u64.saturating_mul(shape.n_vocab as u64))
            .saturating_add((8 * check_rows).saturating_mul(shape.n_vocab as u64));
        let runtime_bytes = TOKENIZER_BYTES_PER_ENTRY
            .saturating_mul(shape.n_vocab as u64)
            .saturating_add(RUNTIME_BASE_BYTES)
            .saturating_add(HUGE_PAGE_MOVE_BYTES);
        let total_bytes = [
            weights_bytes,
            kv_cache_bytes,
            rope_bytes,
            compute_bytes,
            runtime_bytes,
        ]
        .iter()
        .fold(0u64, |a, &b| a.saturating_add(b));
        MemoryEstimate {
            context,
            prefill_chunk,
            weights_bytes,
            kv_cache_bytes,
            rope_bytes,
            compute_bytes,
            runtime_bytes,
            total_bytes,
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
