//! The common Gemma 3 sizes at 4-bit (Q4_K_M), for advice before a model is downloaded
//! (`companion doctor`, the app's model panel). Dimensions are those of the GGUF headers of
//! `gemma-3-{270m,1b,4b}-it` (llama.cpp `LLM_ARCH_GEMMA3` hparams); file sizes are the
//! published Q4_K_M files', rounded — approximate, as a different quantization mix shifts them
//! by a few percent. The 270M entry is the default model, exactly.

use serde::Serialize;

use super::estimate::ModelShape;
use crate::kv_cache::KvShape;

/// One catalog entry.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GemmaSize {
    pub name: &'static str,
    /// Approximate parameter count.
    pub parameters: u64,
    pub file_bytes: u64,
    pub n_layer: usize,
    pub n_embd: usize,
    pub n_head: usize,
    pub n_kv_head: usize,
    pub head_dim: usize,
    pub n_ff: usize,
    pub sliding_window: usize,
    pub max_context: usize,
}

impl GemmaSize {
    /// The memory shape, KV stored as f16.
    pub fn shape(&self) -> ModelShape {
        // every sixth layer is global (llama.cpp `set_swa_pattern(6)`)
        let n_global = self.n_layer / 6;
        ModelShape {
            file_bytes: self.file_bytes,
            gathered_bytes: 0,
            n_vocab: 262_144,
            n_embd: self.n_embd,
            q_width: self.n_head * self.head_dim,
            kv_width: self.n_kv_head * self.head_dim,
            n_ff: self.n_ff,
            per_layer_width: 0,
            rope_dims: vec![self.head_dim, self.head_dim],
            max_context: self.max_context,
            kv: KvShape::uniform(
                n_global,
                self.n_layer - n_global,
                self.n_kv_head * self.head_dim,
                Some(self.sliding_window),
            ),
        }
    }
}

pub const GEMMA_SIZES: [GemmaSize; 3] = [
    GemmaSize {
        name: "Gemma 3 270M (Q4_K_M)",
        parameters: 268_000_000,
        file_bytes: 253_113_024,
        n_layer: 18,
        n_embd: 640,
        n_head: 4,
        n_kv_head: 1,
        head_dim: 256,
        n_ff: 2048,
        sliding_window: 512,
        max_context: 32_768,
    },
    GemmaSize {
        name: "Gemma 3 1B (Q4_K_M)",
        parameters: 1_000_000_000,
        file_bytes: 806_000_000,
        n_layer: 26,
        n_embd: 1152,
        n_head: 4,
        n_kv_head: 1,
        head_dim: 256,
        n_ff: 6912,
        sliding_window: 512,
        max_context: 32_768,
    },
    GemmaSize {
        name: "Gemma 3 4B (Q4_K_M)",
        parameters: 3_880_000_000,
        file_bytes: 2_490_000_000,
        n_layer: 34,
        n_embd: 2560,
        n_head: 8,
        n_kv_head: 4,
        head_dim: 256,
        n_ff: 10_240,
        sliding_window: 1024,
        max_context: 131_072,
    },
];
