//! Rotary position tables. Gemma uses NEOX-style RoPE (llama.cpp `LLAMA_ROPE_TYPE_NEOX`: pairs
//! `(i, i + d/2)`), which is candle-nn's non-interleaved `rope`. Tables are only as long as the
//! context in use (not the model's 32k training context), one per base. The host copy serves
//! the CPU forward pass; device tensors are built only for GPU devices.

use candle_core::{Device, Result, Tensor};

#[derive(Debug, Clone)]
pub struct RopeTable {
    cos: Vec<f32>,
    sin: Vec<f32>,
    half: usize,
    device: Option<(Tensor, Tensor)>,
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
        let device = if device.is_cpu() {
            None
        } else {
            Some((
                Tensor::from_vec(cos.clone(), (len, half), device)?,
                Tensor::from_vec(sin.clone(), (len, half), device)?,
            ))
        };
        Ok(RopeTable {
            cos,
            sin,
            half,
            device,
        })
    }

    pub fn len(&self) -> usize {
        self.cos.len() / self.half.max(1)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Rotate `x` of shape `[1, heads, seq, head_dim]` for positions `start..start+seq`.
    pub fn apply(&self, x: &Tensor, start: usize) -> Result<Tensor> {
        let Some((cos, sin)) = &self.device else {
            candle_core::bail!("rope: no device tables on the CPU");
        };
        let seq = x.dim(2)?;
        let cos = cos.narrow(0, start, seq)?;
        let sin = sin.narrow(0, start, seq)?;
        candle_nn::rotary_emb::rope(&x.contiguous()?, &cos, &sin)
    }

    /// Rotate rows in place: `x` is `[seq, heads, head_dim]`, row `i` at position `start + i`
    /// (ggml `rope_yarn` with no scaling: `x0' = x0·cos − x1·sin`, `x1' = x0·sin + x1·cos`).
    pub fn apply_host(&self, x: &mut [f32], heads: usize, start: usize) {
        let half = self.half;
        let d = 2 * half;
        for (i, row) in x.chunks_exact_mut(heads * d).enumerate() {
            let at = (start + i) * half;
            let (cos, sin) = (&self.cos[at..at + half], &self.sin[at..at + half]);
            for head in row.chunks_exact_mut(d) {
                let (a, b) = head.split_at_mut(half);
                for j in 0..half {
                    let (x0, x1) = (a[j], b[j]);
                    a[j] = x0 * cos[j] - x1 * sin[j];
                    b[j] = x0 * sin[j] + x1 * cos[j];
                }
            }
        }
    }
}
