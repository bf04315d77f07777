//! Gemma 4, dense and the E-series: llama.cpp `src/models/gemma4.cpp` and its
//! `load_arch_hparams`. The window is required and which layers slide is the file's
//! `sliding_window_pattern` array; sliding layers have heads of their own size
//! (`key_length_swa`, `rope.dimension_count_swa`) and rope base 10000 without scaling, global
//! layers divide their frequencies by `rope_freqs` (proportional rope); Q and K are RMS-normed
//! and V too, without a weight, so queries are not scaled (1.0); a layer without `attn_v` takes
//! V from the raw K projection; `layer_output_scale`; the last `shared_kv_layers` layers attend
//! over an earlier layer's cache; per-layer embeddings (E2B, E4B); a final soft-cap (30 when
//! the key is absent); `output.weight` used when present.

use super::read::Reader;
use super::rules::{BlockRules, Dims, Rules};
use crate::error::Result;
use crate::gguf::keys;

pub(super) struct Gemma4;

impl Rules for Gemma4 {
    fn window(&self, r: &Reader<'_>) -> Result<Option<usize>> {
        Ok(Some(r.usize(keys::SLIDING_WINDOW)?))
    }

    fn sliding(&self, r: &Reader<'_>, n_layer: usize) -> Result<Vec<bool>> {
        let key = r.key(keys::SLIDING_WINDOW_PATTERN);
        let pattern = r
            .bool_array(&key)?
            .ok_or_else(|| r.invalid(format!("required metadata key `{key}` is missing")))?;
        if pattern.len() != n_layer {
            return Err(r.invalid(format!(
                "`{key}` has {} entries for {n_layer} layers",
                pattern.len()
            )));
        }
        Ok(pattern)
    }

    fn rope_swa(&self, r: &Reader<'_>, _base_full: f32, _scale_full: f32) -> Result<(f32, f32)> {
        Ok((
            r.opt_f32(keys::ROPE_FREQ_BASE_SWA)?.unwrap_or(10_000.0),
            1.0,
        ))
    }

    fn shared_kv_layers(&self, r: &Reader<'_>) -> Result<usize> {
        Ok(r.opt_usize(keys::SHARED_KV_LAYERS)?.unwrap_or(0))
    }

    fn per_layer_input(&self, r: &Reader<'_>) -> Result<Option<usize>> {
        Ok(r.opt_usize(keys::EMBEDDING_LENGTH_PER_LAYER)?
            .filter(|&p| p > 0))
    }

    fn q_scale(&self, _head_dim: usize, _dims: &Dims) -> f32 {
        1.0
    }

    fn blocks(&self) -> BlockRules {
        BlockRules {
            qk_norm: true,
            v_norm: true,
            post_norms: true,
            v_from_k: true,
            own_swa_heads: true,
            output_scale: true,
            rope_freqs_on_global: true,
        }
    }

    fn softcaps(&self, r: &Reader<'_>) -> Result<(Option<f32>, Option<f32>)> {
        Ok((None, r.softcap(keys::FINAL_LOGIT_SOFTCAPPING, Some(30.0))?))
    }

    fn tied_output(&self, r: &Reader<'_>) -> bool {
        !r.has_tensor(keys::OUTPUT)
    }
}
