//! What each Gemma generation decides when its file is read, one implementation per generation
//! (`gemma.rs` … `gemma4.rs`), as llama.cpp b11434 has one `load_arch_hparams` and one graph
//! per family (`src/llama-model.cpp`, `src/models/gemma*.cpp`). Everything the generations
//! read alike — layer counts, widths, head counts and sizes, rope bases and linear scaling,
//! the checks and limits — is the shared reading in `read.rs`, which asks these rules where
//! the generations differ.

use super::Family;
use super::read::Reader;
use crate::error::Result;

/// The widths and counts the rules may depend on, read before them.
pub(super) struct Dims {
    pub n_layer: usize,
    pub n_embd: usize,
    /// The first layer's query head count.
    pub n_head0: usize,
}

/// Per-layer facts a generation fixes (beyond what the shared reading reads per layer).
pub(super) struct BlockRules {
    /// RMS norms on Q and K heads (`attn_q_norm`, `attn_k_norm`).
    pub qk_norm: bool,
    /// An RMS norm without weight on V heads.
    pub v_norm: bool,
    /// `post_attention_norm` and `post_ffw_norm`.
    pub post_norms: bool,
    /// A layer without `attn_v` takes V from the raw K projection (else the file is refused).
    pub v_from_k: bool,
    /// Sliding layers have heads of their own size (`key_length_swa`, `rope.dimension_count_swa`).
    pub own_swa_heads: bool,
    /// `layer_output_scale` is read when the file has it.
    pub output_scale: bool,
    /// Global layers divide their rope frequencies by `rope_freqs` when the file has it.
    pub rope_freqs_on_global: bool,
}

pub(super) trait Rules {
    /// The sliding window (tokens a sliding layer sees, itself included), if the generation
    /// has one.
    fn window(&self, r: &Reader<'_>) -> Result<Option<usize>>;

    /// Which layers slide, for a model that has a window.
    fn sliding(&self, r: &Reader<'_>, n_layer: usize) -> Result<Vec<bool>>;

    /// The sliding layers' rope base and frequency scale, from the global layers' ones.
    fn rope_swa(&self, r: &Reader<'_>, base_full: f32, scale_full: f32) -> Result<(f32, f32)>;

    /// How many of the last layers attend over an earlier layer's cache.
    fn shared_kv_layers(&self, _r: &Reader<'_>) -> Result<usize> {
        Ok(0)
    }

    /// Width of the per-layer embeddings, if the model has them.
    fn per_layer_input(&self, _r: &Reader<'_>) -> Result<Option<usize>> {
        Ok(None)
    }

    /// What queries are multiplied by before attention, for heads of `head_dim`.
    fn q_scale(&self, head_dim: usize, dims: &Dims) -> f32;

    fn blocks(&self) -> BlockRules;

    /// The attention and the final soft-caps.
    fn softcaps(&self, r: &Reader<'_>) -> Result<(Option<f32>, Option<f32>)>;

    /// Whether the token embedding is also the output projection.
    fn tied_output(&self, r: &Reader<'_>) -> bool;
}

/// The rules of `family`.
pub(super) fn of(family: Family) -> &'static dyn Rules {
    match family {
        Family::Gemma => &super::gemma::Gemma,
        Family::Gemma2 => &super::gemma2::Gemma2,
        Family::Gemma3 => &super::gemma3::Gemma3,
        Family::Gemma4 => &super::gemma4::Gemma4,
    }
}

/// `1/√head_dim`, the query scale of every generation before Gemma 4 (gemma_pytorch's
/// `query_pre_attn_scalar` = head_dim), except where a model says otherwise.
pub(super) fn inverse_sqrt(x: usize) -> f32 {
    1.0 / (x as f32).sqrt()
}
