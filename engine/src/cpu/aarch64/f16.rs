//! F16 weights × f32 activations (already rounded through f16, as ggml's `vec_dot_type` F16
//! makes them) on NEON, in the 8-lane orders of `cpu::f16`'s reference loops, bit for bit
//! (tested): each 8-lane accumulator is two 4-lane registers (lanes 0..4 and 4..8), `fcvtl`
//! widens the weights exactly, every lane is one fused multiply-add per value, and the lanes
//! are reduced as `cpu::f16::reduce_lanes::<8>` (lane `l` + `l+4`, then `(0+2) + (1+3)`).
//!
//! Gemma 4's `per_layer_model_proj` (8960 × 1536 for E2B) is F16; before these kernels ARM ran
//! it through the scalar reference loops. Every aarch64 table takes `ggml_vec_dot_f16`'s
//! order for any number of activation rows (`cpu::f16::Order::of`): llama.cpp's ARM build
//! multiplies F16 in NEON f16 arithmetic, which is not followed (see `cpu::kquants`). The
//! tinyBLAS kernels are here so that the table is whole and tested; no ARM product uses them.

use std::arch::aarch64::*;

use super::dot::f16x4_to_f32;
use crate::cpu::f16::{F16_TILE_COLS, F16_TILE_ROWS};

/// An 8-lane f32 value: lanes 0..4 and 4..8.
type F32x8 = [float32x4_t; 2];

/// 8 f16 weights at value `at` of `w` (bytes), widened; lanes past `len` values are zero.
///
/// # Panics
/// If `w` holds fewer than `2 * min(at + 8, len)` bytes.
#[inline]
#[target_feature(enable = "neon")]
fn weights8(w: &[u8], at: usize, len: usize) -> F32x8 {
    let h = if at + 8 <= len {
        assert!(2 * (at + 8) <= w.len());
        // SAFETY: 16 readable bytes (checked above); NEON loads need no alignment.
        unsafe { vld1q_u16(w.as_ptr().add(2 * at).cast()) }
    } else {
        let mut part = [0u8; 16];
        part[..2 * (len - at)].copy_from_slice(&w[2 * at..2 * len]);
        // SAFETY: 16 bytes from a 16-byte array.
        unsafe { vld1q_u16(part.as_ptr().cast()) }
    };
    [
        f16x4_to_f32(vget_low_u16(h)),
        f16x4_to_f32(vget_high_u16(h)),
    ]
}

/// 8 activations at `at` of `x`; lanes past `x.len()` are zero.
#[inline]
#[target_feature(enable = "neon")]
fn values8(x: &[f32], at: usize) -> F32x8 {
    let mut part = [0f32; 8];
    let v = if at + 8 <= x.len() {
        &x[at..at + 8]
    } else {
        part[..x.len() - at].copy_from_slice(&x[at..]);
        &part[..]
    };
    // SAFETY: 8 floats in `v`.
    unsafe { [vld1q_f32(v.as_ptr()), vld1q_f32(v.as_ptr().add(4))] }
}

#[inline]
#[target_feature(enable = "neon")]
fn fma8(acc: F32x8, a: F32x8, b: F32x8) -> F32x8 {
    [vfmaq_f32(acc[0], a[0], b[0]), vfmaq_f32(acc[1], a[1], b[1])]
}

#[inline]
#[target_feature(enable = "neon")]
fn add8(a: F32x8, b: F32x8) -> F32x8 {
    [vaddq_f32(a[0], b[0]), vaddq_f32(a[1], b[1])]
}

/// `cpu::f16::reduce_lanes::<8>`: lane `l` + `l+4`, then `(0+2) + (1+3)`.
#[inline]
#[target_feature(enable = "neon")]
fn reduce8(v: F32x8) -> f32 {
    let s = vaddq_f32(v[0], v[1]);
    let t = [
        vgetq_lane_f32::<0>(s),
        vgetq_lane_f32::<1>(s),
        vgetq_lane_f32::<2>(s),
        vgetq_lane_f32::<3>(s),
    ];
    (t[0] + t[2]) + (t[1] + t[3])
}

#[inline]
#[target_feature(enable = "neon")]
fn zero8() -> F32x8 {
    [vdupq_n_f32(0.0); 2]
}

/// `ggml_vec_dot_f16` with 8-lane accumulators (`cpu::f16::vec_dot::<8>`): steps of 32
/// values into four accumulators, reduced 0+2, 1+3, then across lanes; the tail value by
/// value in double.
///
/// # Panics
/// If `w` is not `2 * x.len()` bytes.
#[target_feature(enable = "neon")]
pub(crate) fn vec_dot(w: &[u8], x: &[f32]) -> f32 {
    let k = x.len();
    assert_eq!(
        w.len(),
        2 * k,
        "F16 row and activation row lengths disagree"
    );
    let steps = k / 32;
    let mut acc = [zero8(); 4];
    for s in 0..steps {
        for (j, a) in acc.iter_mut().enumerate() {
            let at = s * 32 + 8 * j;
            *a = fma8(*a, weights8(w, at, k), values8(x, at));
        }
    }
    let sum = add8(add8(acc[0], acc[2]), add8(acc[1], acc[3]));
    let mut sum = reduce8(sum) as f64;
    for i in steps * 32..k {
        let wv = half::f16::from_le_bytes([w[2 * i], w[2 * i + 1]]).to_f32();
        sum += (wv * x[i]) as f64;
    }
    sum as f32
}

/// tinyBLAS for one output (`cpu::f16::tiny_blas::<8>`): one 8-lane accumulator over the
/// whole row, the last chunk zero-padded, then reduced.
#[target_feature(enable = "neon")]
pub(crate) fn tiny_blas(w: &[u8], x: &[f32]) -> f32 {
    let k = x.len();
    assert_eq!(
        w.len(),
        2 * k,
        "F16 row and activation row lengths disagree"
    );
    let mut acc = zero8();
    for at in (0..k).step_by(8) {
        acc = fma8(acc, weights8(w, at, k), values8(x, at));
    }
    reduce8(acc)
}

/// tinyBLAS for `F16_TILE_ROWS` weight rows × `F16_TILE_COLS` activation rows, two weight
/// rows at a time (2 × 6 outputs of two registers each, 24 of the 32 vector registers).
///
/// # Panics
/// If a weight row is not `2 * k` bytes or an activation row not `k` values.
#[target_feature(enable = "neon")]
pub(crate) fn tile(
    w: [&[u8]; F16_TILE_ROWS],
    x: [&[f32]; F16_TILE_COLS],
    out: &mut [[f32; F16_TILE_COLS]; F16_TILE_ROWS],
) {
    let k = x[0].len();
    assert!(
        w.iter().all(|r| r.len() == 2 * k) && x.iter().all(|r| r.len() == k),
        "F16 rows and activation rows disagree"
    );
    const { assert!(F16_TILE_ROWS.is_multiple_of(2)) };
    for r0 in (0..F16_TILE_ROWS).step_by(2) {
        let mut acc = [[zero8(); F16_TILE_COLS]; 2];
        for at in (0..k).step_by(8) {
            let wv = [weights8(w[r0], at, k), weights8(w[r0 + 1], at, k)];
            for (c, xr) in x.iter().enumerate() {
                let xv = values8(xr, at);
                for r in 0..2 {
                    acc[r][c] = fma8(acc[r][c], wv[r], xv);
                }
            }
        }
        for (r, a) in acc.iter().enumerate() {
            for (o, a) in out[r0 + r].iter_mut().zip(a) {
                *o = reduce8(*a);
            }
        }
    }
}
