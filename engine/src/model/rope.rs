//! Rotary position tables. Gemma uses NEOX-style RoPE (llama.cpp `LLAMA_ROPE_TYPE_NEOX`: pairs
//! `(i, i + d/2)`), which is candle-nn's non-interleaved `rope`. Tables are only as long as the
//! context in use (not the model's 32k training context), one per base.

use candle_core::{Device, Result, Tensor};

#[derive(Debug, Clone)]
pub struct RopeTable {
    cos: Tensor,
    sin: Tensor,
}

impl RopeTable {
    pub fn new(base: f32, head_dim: usize, len: usize, device: &Device) -> Result<Self> {
        let half = head_dim / 2;
        // Computed exactly as ggml's `ggml_rope_cache_init` does, in f32: theta starts at the
        // position and is multiplied by base^(-2/d) once per pair. Matching its rounding keeps
        // our logits closest to llama.cpp's at long positions.
        let theta_scale = base.powf(-2.0 / head_dim as f32);
        let mut cos = Vec::with_capacity(len * half);
        let mut sin = Vec::with_capacity(len * half);
        for pos in 0..len {
            let mut theta = pos as f32;
            for _ in 0..half {
                cos.push(theta.cos());
                sin.push(theta.sin());
                theta *= theta_scale;
            }
        }
        Ok(RopeTable {
            cos: Tensor::from_vec(cos, (len, half), device)?,
            sin: Tensor::from_vec(sin, (len, half), device)?,
        })
    }

    pub fn len(&self) -> usize {
        self.cos.dims()[0]
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Rotate `x` of shape `[1, heads, seq, head_dim]` for positions `start..start+seq`.
    pub fn apply(&self, x: &Tensor, start: usize) -> Result<Tensor> {
        let seq = x.dim(2)?;
        let cos = self.cos.narrow(0, start, seq)?;
        let sin = self.sin.narrow(0, start, seq)?;
        candle_nn::rotary_emb::rope(&x.contiguous()?, &cos, &sin)
    }
}
