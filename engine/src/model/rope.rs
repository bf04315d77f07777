//! Rotary position tables. Gemma uses NEOX-style RoPE (llama.cpp `LLAMA_ROPE_TYPE_NEOX`):
//! within the first `n_rot` values of a head, value `i` pairs with `i + n_rot/2`; the values
//! past `n_rot` pass through. Tables are only as long as the context in use (not the model's
//! training context). The host tables serve our kernels; device tensors are built only for
//! the candle backend.

use candle_core::{Device, Result, Tensor};

use crate::arch::RopeSpec;

#[derive(Debug, Clone)]
pub struct RopeTable {
    cos: Vec<f32>,
    sin: Vec<f32>,
    /// Pairs rotated: `n_rot / 2`.
    half: usize,
    head_dim: usize,
    device: Option<(Tensor, Tensor)>,
}

impl RopeTable {
    /// `factors`: the per-pair frequency divisors (`rope_freqs`) when the spec uses them.
    pub fn new(
        spec: &RopeSpec,
        factors: Option<&[f32]>,
        len: usize,
        device: Option<&Device>,
    ) -> Result<Self> {
        let half = spec.n_rot / 2;
        // Computed exactly as ggml's `ggml_rope_cache_init` and `rope_yarn` do, in f32: theta
        // starts at the position and is multiplied by base^(-2/n_rot) once per pair; each
        // pair's angle is `freq_scale · (theta / factor)` (no YaRN extrapolation: linear
        // scaling has `ext_factor` 0). Matching its rounding keeps our logits closest to
        // llama.cpp's at long positions.
        let theta_scale = spec.base.powf(-2.0 / spec.n_rot as f32);
        let mut cos = Vec::with_capacity(len * half);
        let mut sin = Vec::with_capacity(len * half);
        for pos in 0..len {
            let mut theta = pos as f32;
            for i in 0..half {
                let factor = factors.and_then(|f| f.get(i)).copied().unwrap_or(1.0);
                let angle = spec.freq_scale * (theta / factor);
                cos.push(angle.cos());
                sin.push(angle.sin());
                theta *= theta_scale;
            }
        }
        let device = match device {
            Some(d) => Some((
                Tensor::from_vec(cos.clone(), (len, half), d)?,
                Tensor::from_vec(sin.clone(), (len, half), d)?,
            )),
            None => None,
        };
        Ok(RopeTable {
            cos,
            sin,
            half,
            head_dim: spec.head_dim,
            device,
        })
    }

    /// The device copies of the cos and sin tables (`[positions, n_rot / 2]`, f32).
    #[cfg(any(feature = "cuda", feature = "metal", feature = "metal-emulated"))]
    pub(crate) fn device_tables(&self) -> Option<(&Tensor, &Tensor)> {
        self.device.as_ref().map(|(c, s)| (c, s))
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
            candle_core::bail!("rope: no device tables for the host backend");
        };
        let seq = x.dim(2)?;
        let cos = cos.narrow(0, start, seq)?;
        let sin = sin.narrow(0, start, seq)?;
        let n_rot = 2 * self.half;
        if n_rot == self.head_dim {
            return candle_nn::rotary_emb::rope(&x.contiguous()?, &cos, &sin);
        }
        let rotated = x.narrow(3, 0, n_rot)?.contiguous()?;
        let rotated = candle_nn::rotary_emb::rope(&rotated, &cos, &sin)?;
        let rest = x.narrow(3, n_rot, self.head_dim - n_rot)?;
        Tensor::cat(&[&rotated, &rest], 3)
    }

    /// Rotate rows in place: `x` is `[seq, heads, head_dim]`, row `i` at position `start + i`
    /// (ggml `rotate_pairs`: `x0' = x0·cos − x1·sin`, `x1' = x0·sin + x1·cos`).
    pub fn apply_host(&self, x: &mut [f32], heads: usize, start: usize) {
        let half = self.half;
        let d = self.head_dim;
        for (i, row) in x.chunks_exact_mut(heads * d).enumerate() {
            let at = (start + i) * half;
            let (cos, sin) = (&self.cos[at..at + half], &self.sin[at..at + half]);
            for head in row.chunks_exact_mut(d) {
                let (a, b) = head[..2 * half].split_at_mut(half);
                for j in 0..half {
                    let (x0, x1) = (a[j], b[j]);
                    a[j] = x0.mul_add(cos[j], -(x1 * sin[j]));
                    b[j] = x0.mul_add(sin[j], x1 * cos[j]);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(n_rot: usize, head_dim: usize, freq_scale: f32, freq_factors: bool) -> RopeSpec {
        RopeSpec {
            base: 10_000.0,
            freq_scale,
            n_rot,
            head_dim,
            freq_factors,
        }
    }

    #[test]
    fn position_zero_is_the_identity_and_rotation_keeps_the_norm() {
        let t = RopeTable::new(&spec(8, 8, 1.0, false), None, 4, None).unwrap();
        let mut x: Vec<f32> = (0..16).map(|i| i as f32 - 3.5).collect();
        let orig = x.clone();
        t.apply_host(&mut x, 1, 0);
        assert_eq!(&x[..8], &orig[..8]);
        let norm = |v: &[f32]| v.iter().map(|a| a * a).sum::<f32>();
        assert!((norm(&x[8..]) - norm(&orig[8..])).abs() < 1e-3);
        assert_ne!(&x[8..], &orig[8..]);
    }

    #[test]
    fn values_past_n_rot_pass_through_and_linear_scaling_slows_the_angle() {
        let t = RopeTable::new(&spec(4, 8, 1.0, false), None, 3, None).unwrap();
        let mut x = vec![1.0f32; 8 * 3];
        t.apply_host(&mut x, 1, 0);
        assert!(x[8 + 4..16].iter().all(|&v| v == 1.0));
        // freq_scale 1/8 at position 8 is the unscaled angle at position 1
        let slow = RopeTable::new(&spec(4, 8, 0.125, false), None, 9, None).unwrap();
        assert!((slow.cos[8 * 2] - t.cos[2]).abs() < 1e-6);
    }

    #[test]
    fn a_huge_frequency_factor_stops_a_pair_from_rotating() {
        let factors = [1.0, 1e30];
        let t = RopeTable::new(&spec(4, 4, 1.0, true), Some(&factors), 5, None).unwrap();
        for pos in 0..5 {
            assert_eq!(t.cos[pos * 2 + 1], 1.0);
            assert!(t.sin[pos * 2 + 1].abs() < 1e-20);
        }
        assert_ne!(t.sin[4 * 2], 0.0);
    }
}
