//! Gemma (1) and CodeGemma: llama.cpp `src/models/gemma.cpp`. No sliding window, no QK norms,
//! no post-norms, no soft-caps; queries scaled by 1/√head_dim; the output tied to the
//! embedding (llama.cpp duplicates `token_embd`).

use super::read::Reader;
use super::rules::{BlockRules, Dims, Rules, inverse_sqrt};
use crate::error::Result;

pub(super) struct Gemma;

impl Rules for Gemma {
    fn window(&self, _r: &Reader<'_>) -> Result<Option<usize>> {
        Ok(None)
    }

    fn sliding(&self, _r: &Reader<'_>, n_layer: usize) -> Result<Vec<bool>> {
        Ok(vec![false; n_layer])
    }

    fn rope_swa(&self, _r: &Reader<'_>, base_full: f32, scale_full: f32) -> Result<(f32, f32)> {
        // no layer slides; the values are never used
        Ok((base_full, scale_full))
    }

    fn q_scale(&self, head_dim: usize, _dims: &Dims) -> f32 {
        inverse_sqrt(head_dim)
    }

    fn blocks(&self) -> BlockRules {
        BlockRules {
            qk_norm: false,
            v_norm: false,
            post_norms: false,
            v_from_k: false,
            own_swa_heads: false,
            output_scale: false,
            rope_freqs_on_global: false,
        }
    }

    fn softcaps(&self, _r: &Reader<'_>) -> Result<(Option<f32>, Option<f32>)> {
        Ok((None, None))
    }

    fn tied_output(&self, _r: &Reader<'_>) -> bool {
        true
    }
}
