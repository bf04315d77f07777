//! Gemma 3: llama.cpp `src/models/gemma3.cpp` and its `load_arch_hparams`. Five of every six
//! layers slide when the file sets a window (pattern 6, or the file's array); the sliding
//! layers use rope base 10000 (`rope.freq_base_swa` when given) without the linear scaling,
//! which applies to the global layers only; QK norms and post-norms; a final soft-cap only when
//! the file sets one (llama.cpp resets it to 0 before reading); queries scaled by
//! 1/√head_dim, except the 27B's 1/√(n_embd/n_head); `output.weight` used when present.

use super::read::Reader;
use super::rules::{BlockRules, Dims, Rules, inverse_sqrt};
use crate::error::Result;
use crate::gguf::keys;

pub(super) struct Gemma3;

/// Layers of Gemma 3 27B, the one size that scales queries by the width per head.
const LAYERS_27B: usize = 62;

impl Rules for Gemma3 {
    fn window(&self, r: &Reader<'_>) -> Result<Option<usize>> {
        Ok(r.opt_usize(keys::SLIDING_WINDOW)?.filter(|&w| w > 0))
    }

    fn sliding(&self, r: &Reader<'_>, n_layer: usize) -> Result<Vec<bool>> {
        r.sliding_pattern(n_layer, 6)
    }

    fn rope_swa(&self, r: &Reader<'_>, _base_full: f32, _scale_full: f32) -> Result<(f32, f32)> {
        Ok((
            r.opt_f32(keys::ROPE_FREQ_BASE_SWA)?.unwrap_or(10_000.0),
            1.0,
        ))
    }

    fn q_scale(&self, head_dim: usize, dims: &Dims) -> f32 {
        if dims.n_layer == LAYERS_27B {
            inverse_sqrt(dims.n_embd / dims.n_head0)
        } else {
            inverse_sqrt(head_dim)
        }
    }

    fn blocks(&self) -> BlockRules {
        BlockRules {
            qk_norm: true,
            v_norm: false,
            post_norms: true,
            v_from_k: false,
            own_swa_heads: false,
            output_scale: false,
            rope_freqs_on_global: false,
        }
    }

    fn softcaps(&self, r: &Reader<'_>) -> Result<(Option<f32>, Option<f32>)> {
        Ok((None, r.softcap(keys::FINAL_LOGIT_SOFTCAPPING, None)?))
    }

    fn tied_output(&self, r: &Reader<'_>) -> bool {
        !r.has_tensor(keys::OUTPUT)
    }
}
