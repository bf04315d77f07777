//! Row-wise host operations of the forward pass on plain `f32` slices: RMSNorm and the GELU
//! gate, as ggml's CPU ops compute them. (On two cores a decode step is ~30 small ops per
//! layer; running each through candle's own thread pool, whose spinning workers took a quarter
//! of the CPU from the matmul threads, is what the host backend avoids.)
//!
//! RMSNorm sums squares in f64 (`ggml_compute_forward_rms_norm_f32`), then multiplies by the
//! weight; GELU is the tanh form read from ggml's f16 table.

use half::f16;
use rayon::prelude::*;

/// `out = rmsnorm(x) · w` row by row, rows of `w.len()` values.
pub(crate) fn rms_norm_into(x: &[f32], w: &[f32], eps: f32, out: &mut [f32]) {
    let n = w.len();
    let norm = |(row, dst): (&[f32], &mut [f32])| {
        let s = rms_scale(row, eps);
        for ((o, &v), &g) in dst.iter_mut().zip(row).zip(w) {
            *o = v * s * g;
        }
    };
    if x.len() / n >= PARALLEL_ROWS {
        x.par_chunks_exact(n)
            .zip(out.par_chunks_exact_mut(n))
            .for_each(norm);
    } else {
        x.chunks_exact(n)
            .zip(out.chunks_exact_mut(n))
            .for_each(norm);
    }
}

/// Row counts from which row-wise steps are split across the compute threads (prompts).
const PARALLEL_ROWS: usize = 64;

/// In-place RMSNorm of every `width`-wide row (Q/K/V heads, projections), times `w` when
/// given (`w.len() == width`).
pub(crate) fn rms_norm_rows(x: &mut [f32], w: Option<&[f32]>, width: usize, eps: f32) {
    let n = width;
    let norm = |row: &mut [f32]| {
        let s = rms_scale(row, eps);
        match w {
            Some(w) => {
                for (v, &g) in row.iter_mut().zip(w) {
                    *v = *v * s * g;
                }
            }
            None => row.iter_mut().for_each(|v| *v *= s),
        }
    };
    if x.len() / n >= PARALLEL_ROWS {
        x.par_chunks_exact_mut(n).for_each(norm);
    } else {
        x.chunks_exact_mut(n).for_each(norm);
    }
}

/// ggml: `sum += (ggml_float)(x·x)` in f64, `scale = 1/sqrtf(mean + eps)` in f32.
#[inline]
fn rms_scale(row: &[f32], eps: f32) -> f32 {
    let sum: f64 = row.iter().map(|&v| (v * v) as f64).sum();
    let mean = (sum / row.len() as f64) as f32;
    1.0 / (mean + eps).sqrt()
}

/// ggml's `ggml_norm` then `ggml_mul` by `w` and `ggml_add` of `b` over rows of `w.len()`
/// (a vision tower's layer norm), in the order llama.cpp's AVX-512 build sums
/// (`ggml-cpu/ops.cpp`, `ggml_compute_forward_norm_f32`): the mean from a double sum, the
/// variance from blocks of 16 squares each reduced as `_mm512_reduce_add_ps` does (halves of
/// 8, 4, 2, 1) and added in double, the rest one by one.
pub(crate) fn layer_norm_into(x: &[f32], w: &[f32], b: &[f32], eps: f32, out: &mut [f32]) {
    let n = w.len();
    // a vision tower's 4096 patches: rows split across the compute threads
    x.par_chunks_exact(n)
        .zip(out.par_chunks_exact_mut(n))
        .for_each(|(row, o)| layer_norm_row(row, w, b, eps, o));
}

fn layer_norm_row(row: &[f32], w: &[f32], b: &[f32], eps: f32, o: &mut [f32]) {
    let n = w.len();
    let sum: f64 = row.iter().map(|&v| f64::from(v)).sum();
    let mean = sum as f32 / n as f32;
    let mut var = 0f64;
    let blocks = n / 16 * 16;
    for (block, dst) in row[..blocks].chunks_exact(16).zip(o.chunks_exact_mut(16)) {
        let mut sq = [0f32; 16];
        for ((d, s), &v) in dst.iter_mut().zip(sq.iter_mut()).zip(block) {
            *d = v - mean;
            *s = *d * *d;
        }
        let mut width = 8;
        while width > 0 {
            for i in 0..width {
                sq[i] += sq[i + width];
            }
            width /= 2;
        }
        var += f64::from(sq[0]);
    }
    for (d, &v) in o[blocks..].iter_mut().zip(&row[blocks..]) {
        *d = v - mean;
        var += f64::from(*d * *d);
    }
    let scale = 1.0 / ((var / n as f64) as f32 + eps).sqrt();
    for ((d, &wv), &bv) in o.iter_mut().zip(w).zip(b) {
        *d = *d * scale * wv + bv;
    }
}

/// `x = gelu(x)` (ggml `ggml_vec_gelu_f32` with `GGML_GELU_FP16`: the f16 table between -10
/// and 10, 0 below, `x` above).
pub(crate) fn gelu_in_place(x: &mut [f32]) {
    let table = gelu_table();
    x.par_chunks_mut(8192).for_each(|part| {
        for v in part {
            *v = geglu_one(*v, 1.0, f16::from_f32(*v).to_bits(), table);
        }
    });
}

/// `gate = gelu(gate) · up`, as ggml's CPU `ggml_vec_geglu_f32` computes it in llama.cpp's
/// default build (`GGML_GELU_FP16`): the gate is rounded to f16 and GELU read from a 64K-entry
/// table of f16 values; below -10 the result is 0, from 10 up it is the gate itself. Besides
/// following llama.cpp, the table replaces a libm `tanhf` per value (8% of prefill time).
pub(crate) fn geglu(gate: &mut [f32], up: &[f32]) {
    // prompts: 512 × 2048 values per layer, worth splitting across the compute threads
    const PART: usize = 8192;
    if gate.len() >= 2 * PART {
        gate.par_chunks_mut(PART)
            .zip(up.par_chunks(PART))
            .for_each(|(g, u)| geglu_part(g, u));
    } else {
        geglu_part(gate, up);
    }
}

fn geglu_part(gate: &mut [f32], up: &[f32]) {
    (super::kernels().geglu)(gate, up, gelu_table())
}

/// The reference loop of [`geglu`] on one part: `half`'s f32 → f16 rounding, value by value.
pub(crate) fn geglu_portable(gate: &mut [f32], up: &[f32], table: &[f16]) {
    for (g, &u) in gate.iter_mut().zip(up) {
        *g = geglu_one(*g, u, f16::from_f32(*g).to_bits(), table);
    }
}

#[inline(always)]
pub(crate) fn geglu_one(x: f32, u: f32, x16: u16, table: &[f16]) -> f32 {
    if x <= -10.0 {
        0.0
    } else if x >= 10.0 {
        x * u
    } else {
        table[x16 as usize].to_f32() * u
    }
}

/// ggml `ggml_table_gelu_f16`: `f16(gelu(f32(h)))` for every f16 bit pattern `h`.
pub(crate) fn gelu_table() -> &'static [f16] {
    static TABLE: std::sync::OnceLock<Vec<f16>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        (0..=u16::MAX)
            .map(|bits| f16::from_f32(gelu(f16::from_bits(bits).to_f32())))
            .collect()
    })
}

/// GELU, tanh approximation (ggml `ggml_gelu_f32`), as GCC compiles it for llama.cpp's table:
/// ggml's C is built in GNU mode, where floating-point contraction is on, so
/// `1.0f + GELU_COEF_A*x*x` becomes one fused multiply-add. Without it one table entry in a few
/// thousand rounds to the neighbouring f16.
#[inline]
fn gelu(x: f32) -> f32 {
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    const COEF_A: f32 = 0.044715;
    0.5 * x * (1.0 + (SQRT_2_OVER_PI * x * (COEF_A * x).mul_add(x, 1.0)).tanh())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rms_norm_scales_rows_to_unit_rms() {
        let x = [3.0f32, 4.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0];
        let mut out = [0f32; 8];
        rms_norm_into(&x, &[1.0, 1.0, 2.0, 1.0], 0.0, &mut out);
        // row 0: rms = sqrt(25/4) = 2.5
        assert!((out[0] - 1.2).abs() < 1e-6 && (out[1] - 1.6).abs() < 1e-6);
        // row 1: rms 1; the weight doubles the third value
        assert_eq!(&out[4..], &[1.0, 1.0, 2.0, 1.0]);
    }

    #[test]
    fn geglu_reads_gelu_from_the_f16_table() {
        let mut gate = vec![-12.0, -1.0, 0.0, 0.5, 1.0, 3.0, 11.0];
        let up = vec![2.0; gate.len()];
        let want: Vec<f32> = gate
            .iter()
            .map(|&x: &f32| match x {
                x if x <= -10.0 => 0.0,
                x if x >= 10.0 => 2.0 * x,
                // f16 in, f16 out: within two f16 roundings of the exact value
                x => 2.0 * gelu(x),
            })
            .collect();
        geglu(&mut gate, &up);
        for (g, w) in gate.iter().zip(&want) {
            assert!((g - w).abs() <= 2e-3 * (1.0 + w.abs()), "{g} vs {w}");
        }
        assert_eq!(gate[0], 0.0);
        assert_eq!(gate[6], 22.0);
    }

    #[test]
    fn parallel_and_simd_geglu_equal_the_scalar_one() {
        let n = 40_003; // several parallel parts and a SIMD remainder
        let gate: Vec<f32> = (0..n).map(|i| (i as f32 * 0.000_61).sin() * 12.0).collect();
        let up: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).cos()).collect();
        let table = gelu_table();
        let want: Vec<f32> = gate
            .iter()
            .zip(&up)
            .map(|(&g, &u)| geglu_one(g, u, f16::from_f32(g).to_bits(), table))
            .collect();
        let mut got = gate.clone();
        geglu(&mut got, &up);
        assert_eq!(got, want);
    }

    #[test]
    fn gelu_matches_known_values() {
        assert_eq!(gelu(0.0), 0.0);
        assert!((gelu(1.0) - 0.841_192).abs() < 1e-5);
        assert!((gelu(-3.0) - -0.003_637_4).abs() < 1e-5);
    }
}
