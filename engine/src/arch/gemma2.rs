//! Gemma 2: llama.cpp `src/models/gemma2.cpp` and its `load_arch_hparams`. Every other layer
//! slides (pattern 2; window 4096 when the file sets none) and the sliding layers copy the
//! global rope base and scale; post-attention and post-FFN norms; attention and final
//! soft-caps (llama.cpp's defaults 50 and 30 when the keys are absent); queries scaled by
//! 1/√head_dim, except the 27B's 1/√(n_embd/n_head) (gemma_pytorch's config, as llama.cpp).

use super::read::Reader;
use super::rules::{BlockRules, Dims, Rules, inverse_sqrt};
use crate::error::Result;
use crate::gguf::keys;

pub(super) struct Gemma2;

/// Layers of Gemma 2 27B, the one size that scales queries by the width per head.
const LAYERS_27B: usize = 46;

impl Rules for Gemma2 {
    fn window(&self, r: &Reader<'_>) -> Result<Option<usize>> {
        Ok(Some(r.opt_usize(keys::SLIDING_WINDOW)?.unwrap_or(4096)))
    }

    fn sliding(&self, r: &Reader<'_>, n_layer: usize) -> Result<Vec<bool>> {
        r.sliding_pattern(n_layer, 2)
    }

    fn rope_swa(&self, r: &Reader<'_>, base_full: f32, scale_full: f32) -> Result<(f32, f32)> {
        Ok((
            r.opt_f32(keys::ROPE_FREQ_BASE_SWA)?.unwrap_or(base_full),
            scale_full,
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
            qk_norm: false,
            v_norm: false,
            post_norms: true,
            v_from_k: false,
            own_swa_heads: false,
            output_scale: false,
            rope_freqs_on_global: false,
        }
    }

    fn softcaps(&self, r: &Reader<'_>) -> Result<(Option<f32>, Option<f32>)> {
        Ok((
            r.softcap(keys::ATTN_LOGIT_SOFTCAPPING, Some(50.0))?,
            r.softcap(keys::FINAL_LOGIT_SOFTCAPPING, Some(30.0))?,
        ))
    }

    fn tied_output(&self, _r: &Reader<'_>) -> bool {
        true
    }
}
