//! Attention's inner loops on NEON: the scores (four keys at a time) and `mad`, with f16 K/V
//! widened by `fcvtl`. Each score is the x86 kernel's 8-lane fused multiply-add chain (two
//! 4-lane registers for lanes 0..4 and 4..8) and its horizontal sum (lanes `l + l+4`, then
//! `(0+2) + (1+3)`, ggml's `hsum_float_8`), so scores equal the AVX2 table's bit for bit;
//! `mad` is one fused multiply-add per value, as the portable loop and `gemm_acc`.

use std::arch::aarch64::*;

use half::f16;

use super::dot::f16x4_to_f32;

/// Values `i..i + 8` of `p` as two f32 vectors.
#[inline]
#[target_feature(enable = "neon")]
fn load_f16x8(p: &[f16], i: usize) -> (float32x4_t, float32x4_t) {
    assert!(i + 8 <= p.len());
    // SAFETY: 8 halves in bounds (checked above); `f16` is a transparent u16.
    let h = unsafe { vld1q_u16(p.as_ptr().add(i).cast()) };
    (
        f16x4_to_f32(vget_low_u16(h)),
        f16x4_to_f32(vget_high_u16(h)),
    )
}

/// ggml `hsum_float_8` on lanes `lo` (0..4) and `hi` (4..8).
#[inline]
#[target_feature(enable = "neon")]
fn hsum8(lo: float32x4_t, hi: float32x4_t) -> f32 {
    let s = vaddq_f32(lo, hi);
    let t = vadd_f32(vget_low_f32(s), vget_high_f32(s));
    vget_lane_f32::<0>(t) + vget_lane_f32::<1>(t)
}

/// The scores of `q` against `keys` (1 to 4) consecutive keys of `k` (`cpu::AttentionKernels`).
#[target_feature(enable = "neon")]
pub(crate) fn scores4(q: &[f32], k: &[f16], keys: usize) -> [f32; 4] {
    let d = q.len();
    assert!(keys <= 4 && k.len() >= keys * d && d.is_multiple_of(8));
    let mut acc = [[vdupq_n_f32(0.0); 2]; 4];
    for i in (0..d).step_by(8) {
        // SAFETY: i + 8 <= d.
        let (q0, q1) = unsafe {
            (
                vld1q_f32(q.as_ptr().add(i)),
                vld1q_f32(q.as_ptr().add(i + 4)),
            )
        };
        for (j, a) in acc.iter_mut().enumerate().take(keys) {
            let (k0, k1) = load_f16x8(k, j * d + i);
            a[0] = vfmaq_f32(a[0], k0, q0);
            a[1] = vfmaq_f32(a[1], k1, q1);
        }
    }
    std::array::from_fn(|j| hsum8(acc[j][0], acc[j][1]))
}

/// `out += v · p` (`out.len() == v.len()`, a multiple of 8).
#[target_feature(enable = "neon")]
pub(crate) fn mad(out: &mut [f32], v: &[f16], p: f32) {
    assert!(out.len() == v.len() && out.len().is_multiple_of(8));
    let pv = vdupq_n_f32(p);
    for i in (0..out.len()).step_by(8) {
        let (v0, v1) = load_f16x8(v, i);
        // SAFETY: i + 8 <= out.len().
        unsafe {
            let o = out.as_mut_ptr().add(i);
            vst1q_f32(o, vfmaq_f32(vld1q_f32(o), pv, v0));
            vst1q_f32(o.add(4), vfmaq_f32(vld1q_f32(o.add(4)), pv, v1));
        }
    }
}
