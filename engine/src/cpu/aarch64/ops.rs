//! Row-wise kernels on NEON: Q8_0 activation quantization and the GELU gate's f32 → f16
//! rounding.
//!
//! Quantization follows ggml's NEON `quantize_row_q8_0` (`ggml-cpu/arch/arm/quants.c`): the
//! block maximum with `vabsq_f32` / `vmaxq_f32` / `vmaxvq_f32`, `vmulq_n_f32` by the inverse
//! scale and `vcvtnq_s32_f32` (round to nearest, ties to even). One deliberate difference:
//! ggml's NEON code multiplies by `1 / (amax / 127)`, its reference and x86 code by
//! `127 / amax`; the two can differ in the last bit and so flip a rounding. We keep
//! `127 / amax`, so that the quantized activations — integers — are the portable and x86
//! tables' exactly. (Q8_K has no NEON version in ggml either: the portable loop serves.)

use std::arch::aarch64::*;

use half::f16;

use crate::cpu::formats::QK;
use crate::cpu::ops::geglu_one;

use super::dot::f32x4_to_f16;

/// `cpu::quantize::quantize_q8_0_blocks` with NEON; the same quants and scales.
#[target_feature(enable = "neon")]
pub(crate) fn quantize_q8_0(x: &[f32], quants: &mut [i8], scales: &mut [f32]) {
    for ((xb, qb), scale) in x
        .chunks_exact(QK)
        .zip(quants.chunks_exact_mut(QK))
        .zip(scales.iter_mut())
    {
        // SAFETY: `xb` holds 32 values: eight loads of four.
        let v: [float32x4_t; 8] =
            std::array::from_fn(|j| unsafe { vld1q_f32(xb.as_ptr().add(4 * j)) });
        let a: [float32x4_t; 8] = std::array::from_fn(|j| vabsq_f32(v[j]));
        let m = vmaxq_f32(
            vmaxq_f32(vmaxq_f32(a[0], a[1]), vmaxq_f32(a[2], a[3])),
            vmaxq_f32(vmaxq_f32(a[4], a[5]), vmaxq_f32(a[6], a[7])),
        );
        let amax = vmaxvq_f32(m);
        let d = amax / 127.0;
        let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
        for (j, q) in qb.chunks_exact_mut(8).enumerate() {
            let lo = vcvtnq_s32_f32(vmulq_n_f32(v[2 * j], id));
            let hi = vcvtnq_s32_f32(vmulq_n_f32(v[2 * j + 1], id));
            // |x · id| <= 127: the saturating narrowings are exact
            let q16 = vcombine_s16(vqmovn_s32(lo), vqmovn_s32(hi));
            // SAFETY: `q` holds 8 bytes.
            unsafe { vst1_s8(q.as_mut_ptr(), vqmovn_s16(q16)) };
        }
        *scale = f16::from_f32(d).to_f32();
    }
}

/// `cpu::ops::geglu_portable` with the f32 → f16 rounding done four values at a time by
/// `fcvtn` (round to nearest even, as `half`); the same results.
#[target_feature(enable = "neon")]
pub(crate) fn geglu(gate: &mut [f32], up: &[f32], table: &[f16]) {
    let mut gates = gate.chunks_exact_mut(4);
    let mut ups = up.chunks_exact(4);
    for (g, u) in (&mut gates).zip(&mut ups) {
        let mut bits = [0u16; 4];
        // SAFETY: `g` holds 4 values and `bits` 4 halves.
        unsafe { vst1_u16(bits.as_mut_ptr(), f32x4_to_f16(vld1q_f32(g.as_ptr()))) };
        for j in 0..4 {
            g[j] = geglu_one(g[j], u[j], bits[j], table);
        }
    }
    for (g, &u) in gates.into_remainder().iter_mut().zip(ups.remainder()) {
        *g = geglu_one(*g, u, f16::from_f32(*g).to_bits(), table);
    }
}
