//! F16 weights (Gemma 4's `per_layer_model_proj`, which llama-quantize never quantizes) times
//! f32 activations, as ggml's CPU does it: the activations are rounded to f16 first (the F16
//! type's `vec_dot_type` is F16), then each dot product runs in f32 over four 8-lane
//! accumulators of 32 values a step (`ggml_vec_dot_f16`, `GGML_F16_STEP` 32), which are reduced
//! pairwise (`GGML_F32x8_REDUCE`); a tail shorter than 32 is added value by value.

use half::f16;
use half::slice::HalfFloatSliceExt;
use rayon::prelude::*;

use crate::gguf::WeightBytes;

#[derive(Debug)]
pub(crate) struct F16Matrix {
    data: WeightBytes,
    n: usize,
    k: usize,
}

/// Output rows per parallel task.
const ROWS_PER_TASK: usize = 64;

impl F16Matrix {
    /// `data` holds `n` rows of `k` little-endian f16 values.
    pub fn new(data: impl Into<WeightBytes>, n: usize, k: usize) -> Option<Self> {
        let data = data.into();
        (data.len() == n.checked_mul(k)?.checked_mul(2)?).then_some(F16Matrix { data, n, k })
    }

    pub fn rows(&self) -> usize {
        self.n
    }

    pub fn cols(&self) -> usize {
        self.k
    }

    fn row(&self, r: usize) -> &[u8] {
        &self.data[r * self.k * 2..(r + 1) * self.k * 2]
    }

    pub fn dequantize_row(&self, r: usize, out: &mut [f32]) {
        for (o, b) in out.iter_mut().zip(self.row(r).chunks_exact(2)) {
            *o = f16::from_le_bytes([b[0], b[1]]).to_f32();
        }
    }

    /// `x` `[m, k]` → `[m, n]`.
    pub fn matmul(&self, x: &[f32], m: usize) -> Vec<f32> {
        let k = self.k;
        // the activations as ggml sees them: rounded to f16
        let mut halves = vec![f16::ZERO; m * k];
        halves.convert_from_f32_slice(x);
        let mut xr = vec![0f32; m * k];
        halves.convert_to_f32_slice(&mut xr);
        // each task widens its weight rows once and multiplies them with every input row
        let tasks: Vec<Vec<f32>> = (0..self.n.div_ceil(ROWS_PER_TASK))
            .into_par_iter()
            .map(|t| {
                let r0 = t * ROWS_PER_TASK;
                let rows = ROWS_PER_TASK.min(self.n - r0);
                let mut w = vec![0f32; k];
                let mut part = vec![0f32; rows * m];
                for j in 0..rows {
                    self.dequantize_row(r0 + j, &mut w);
                    for i in 0..m {
                        part[j * m + i] = dot(&w, &xr[i * k..(i + 1) * k]);
                    }
                }
                part
            })
            .collect();
        let mut out = vec![0f32; m * self.n];
        for (t, part) in tasks.iter().enumerate() {
            let r0 = t * ROWS_PER_TASK;
            for (j, col) in part.chunks_exact(m).enumerate() {
                for (i, &v) in col.iter().enumerate() {
                    out[i * self.n + r0 + j] = v;
                }
            }
        }
        out
    }
}

/// ggml's `ggml_vec_dot_f16` summation order on 8-lane vectors.
fn dot(w: &[f32], x: &[f32]) -> f32 {
    let steps = w.len() / 32;
    let mut acc = [[0f32; 8]; 4];
    for s in 0..steps {
        for (j, a) in acc.iter_mut().enumerate() {
            let at = s * 32 + j * 8;
            for (l, lane) in a.iter_mut().enumerate() {
                *lane = w[at + l].mul_add(x[at + l], *lane);
            }
        }
    }
    // GGML_F32x8_REDUCE: 0 += 2, 1 += 3, then 0 += 1, then the 8 lanes
    let add = |a: [f32; 8], b: [f32; 8]| -> [f32; 8] { std::array::from_fn(|l| a[l] + b[l]) };
    let lanes = add(add(acc[0], acc[2]), add(acc[1], acc[3]));
    let halves: [f32; 4] = std::array::from_fn(|l| lanes[l] + lanes[l + 4]);
    let mut sum = ((halves[0] + halves[1]) + (halves[2] + halves[3])) as f64;
    for i in steps * 32..w.len() {
        sum += (w[i] * x[i]) as f64;
    }
    sum as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_product_of_rounded_values() {
        let (n, k, m) = (70, 100, 3);
        let w: Vec<f32> = (0..n * k)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 70.0)
            .collect();
        let bytes: Vec<u8> = w
            .iter()
            .flat_map(|&v| f16::from_f32(v).to_le_bytes())
            .collect();
        let x: Vec<f32> = (0..m * k)
            .map(|i| ((i * 13 % 29) as f32 - 14.0) / 9.0)
            .collect();
        let mat = F16Matrix::new(bytes, n, k).expect("shape");
        let got = mat.matmul(&x, m);
        let r = |v: f32| f16::from_f32(v).to_f32() as f64;
        for i in 0..m {
            for j in 0..n {
                let want: f64 = (0..k).map(|c| r(w[j * k + c]) * r(x[i * k + c])).sum();
                assert!((got[i * n + j] as f64 - want).abs() < 1e-3, "{i},{j}");
            }
        }
    }

    #[test]
    fn a_wrong_byte_count_is_refused() {
        assert!(F16Matrix::new(vec![0u8; 10], 2, 3).is_none());
    }
}
