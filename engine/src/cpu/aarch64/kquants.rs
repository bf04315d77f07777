//! Q4_K and Q6_K weights against Q8_K activations on NEON: the `__ARM_NEON` branches of
//! ggml's `ggml_vec_dot_q4_K_q8_K` and `ggml_vec_dot_q6_K_q8_K` (`ggml-cpu/arch/arm/quants.c`),
//! written once as a tile of `RM` weight rows × `RN` activation rows; the one-row kernel is
//! the 1 × 1 tile, so every tile computes each output exactly as the one-row kernel does.
//!
//! Integers (exact, as in every table): Q4_K's nibbles are split with `vandq_u8` /
//! `vshrq_n_u8`; Q6_K's 6-bit values are recombined with ggml's shifts and masks (0..63,
//! unsigned, so no sign trick); each 32 (Q4_K) or 16 (Q6_K) values go through
//! `ggml_vdotq_s32` and are scaled by their sub-block scale in i32 — ggml reduces each
//! product with `vaddvq_s32` first, which gives the same integer. Q4_K's mins and Q6_K's −32
//! come from the activations' `bsums` (`vmull_s16` pairs, as ggml).
//!
//! Floats, per super-block and output, in ggml's order: Q4_K `sumf -= dmin·Σmins;
//! sumf += d·sumi` with `d = d_y · d_w`, `dmin = d_y · dmin_w`; Q6_K
//! `sum += (d_w · d_y) · (isum − 32·isum_mins)`. Each is one scalar chain per output (ggml's
//! order), which a tile runs four outputs to a vector.

use std::arch::aarch64::*;

use super::dot::{Dot, f16_at, load16, load16_i8, sums4};
use crate::cpu::formats::q4_k::{BYTES as Q4_K_BYTES, scales_mins as q4_k_scales_mins};
use crate::cpu::formats::{QK_K, q6_k::BYTES as Q6_K_BYTES};
use crate::cpu::quantize::{BSUMS, Q8KRow, Q8KRows};

fn check_lengths(w: &[u8], block_bytes: usize, y: Q8KRow<'_>) -> usize {
    let nb = w.len() / block_bytes;
    assert!(
        w.len() == nb * block_bytes
            && y.d.len() == nb
            && y.qs.len() == nb * QK_K
            && y.bsums.len() == nb * BSUMS,
        "weight row and activation row lengths disagree"
    );
    nb
}

/// The 16 bsums of block `i` of `y`.
#[inline]
#[target_feature(enable = "neon")]
pub(super) fn bsums(y: Q8KRow<'_>, i: usize) -> (int16x8_t, int16x8_t) {
    let s = &y.bsums[i * BSUMS..(i + 1) * BSUMS];
    // SAFETY: 16 readable i16 (the slice above).
    unsafe { (vld1q_s16(s.as_ptr()), vld1q_s16(s.as_ptr().add(8))) }
}

/// `Σ a·b` over 8 i16 pairs, exactly (ggml's `vmull_s16` low/high pair and `vaddvq_s32`).
#[inline]
#[target_feature(enable = "neon")]
pub(super) fn dot_i16x8(a: int16x8_t, b: int16x8_t) -> int32x4_t {
    vaddq_s32(
        vmull_s16(vget_low_s16(a), vget_low_s16(b)),
        vmull_high_s16(a, b),
    )
}

/// Reduces the lane vectors of `N` outputs to their sums, four outputs per vector where
/// `N` allows.
#[inline]
#[target_feature(enable = "neon")]
fn reduce<const N: usize>(lanes: &[int32x4_t; N]) -> [i32; N] {
    let mut out = [0i32; N];
    if N.is_multiple_of(4) {
        for g in (0..N).step_by(4) {
            let s = sums4(lanes[g], lanes[g + 1], lanes[g + 2], lanes[g + 3]);
            // SAFETY: four writable i32 at g (g + 4 <= N).
            unsafe { vst1q_s32(out.as_mut_ptr().add(g), s) };
        }
    } else {
        for (o, l) in out.iter_mut().zip(lanes) {
            *o = vaddvq_s32(*l);
        }
    }
    out
}

/// `acc[o] = acc[o] + a[o] · f32(s[o])` (or `-` with `SUB`), four outputs per vector where
/// `N` allows: the same IEEE operations per output either way.
#[inline]
#[target_feature(enable = "neon")]
fn mul_add<const N: usize, const SUB: bool>(acc: &mut [f32; N], a: &[f32; N], s: &[i32; N]) {
    if N.is_multiple_of(4) {
        for g in (0..N).step_by(4) {
            // SAFETY: four readable / writable values at g (g + 4 <= N) in each array.
            unsafe {
                let p = vmulq_f32(
                    vld1q_f32(a.as_ptr().add(g)),
                    vcvtq_f32_s32(vld1q_s32(s.as_ptr().add(g))),
                );
                let v = vld1q_f32(acc.as_ptr().add(g));
                let v = if SUB {
                    vsubq_f32(v, p)
                } else {
                    vaddq_f32(v, p)
                };
                vst1q_f32(acc.as_mut_ptr().add(g), v);
            }
        }
    } else {
        for o in 0..N {
            let p = a[o] * s[o] as f32;
            acc[o] = if SUB { acc[o] - p } else { acc[o] + p };
        }
    }
}

/// `RM` weight rows × activation rows `i0..i0 + RN` of Q4_K; `N` = `RM · RN`.
///
/// # Safety
/// As `D::dot`.
#[inline]
#[target_feature(enable = "neon")]
#[allow(clippy::needless_range_loop)] // [rm][rn] indices, as the x86 tiles
pub(crate) unsafe fn tile_q4_k<D: Dot, const RM: usize, const RN: usize, const N: usize>(
    w: [&[u8]; RM],
    y: [Q8KRow<'_>; RN],
    out: &mut [[f32; RN]; RM],
) {
    debug_assert_eq!(N, RM * RN);
    let nb = check_lengths(w[0], Q4_K_BYTES, y[0]);
    for (w, y) in w.iter().flat_map(|w| y.iter().map(move |y| (w, y))) {
        check_lengths(w, Q4_K_BYTES, *y);
    }
    let m4b = vdupq_n_u8(0x0F);
    let mut acc = [0f32; N];
    for i in 0..nb {
        let blk: [&[u8]; RM] =
            std::array::from_fn(|rm| &w[rm][i * Q4_K_BYTES..(i + 1) * Q4_K_BYTES]);
        let utmp: [[u32; 4]; RM] = std::array::from_fn(|rm| q4_k_scales_mins(&blk[rm][4..16]));
        // sums of each 32-value sub-block (ggml's `vpaddq_s16` of the 16 bsums)
        let q8sums: [int16x8_t; RN] = std::array::from_fn(|rn| {
            let (a, b) = bsums(y[rn], i);
            vpaddq_s16(a, b)
        });
        let mut mins_lanes = [vdupq_n_s32(0); N];
        for rm in 0..RM {
            let mins = vreinterpretq_s16_u16(vmovl_u8(vcreate_u8(
                u64::from(utmp[rm][2]) | (u64::from(utmp[rm][3]) << 32),
            )));
            for rn in 0..RN {
                mins_lanes[rm * RN + rn] = dot_i16x8(q8sums[rn], mins);
            }
        }
        let mut lanes = [vdupq_n_s32(0); N];
        for j in 0..QK_K / 64 {
            let mut lo = [[vdupq_n_s8(0); 2]; RM];
            let mut hi = [[vdupq_n_s8(0); 2]; RM];
            for rm in 0..RM {
                let b0 = load16(blk[rm], 16 + 32 * j);
                let b1 = load16(blk[rm], 16 + 32 * j + 16);
                lo[rm] = [
                    vreinterpretq_s8_u8(vandq_u8(b0, m4b)),
                    vreinterpretq_s8_u8(vandq_u8(b1, m4b)),
                ];
                hi[rm] = [
                    vreinterpretq_s8_u8(vshrq_n_u8::<4>(b0)),
                    vreinterpretq_s8_u8(vshrq_n_u8::<4>(b1)),
                ];
            }
            for rn in 0..RN {
                let at = i * QK_K + 64 * j;
                let q8: [int8x16_t; 4] = std::array::from_fn(|k| load16_i8(y[rn].qs, at + 16 * k));
                for rm in 0..RM {
                    let scale_l = (utmp[rm][j / 2] >> (16 * (j % 2))) as u8 as i32;
                    let scale_h = (utmp[rm][j / 2] >> (16 * (j % 2) + 8)) as u8 as i32;
                    // SAFETY: the caller's guarantee.
                    let (p1, p2) = unsafe {
                        (
                            D::dot(D::dot(vdupq_n_s32(0), lo[rm][0], q8[0]), lo[rm][1], q8[1]),
                            D::dot(D::dot(vdupq_n_s32(0), hi[rm][0], q8[2]), hi[rm][1], q8[3]),
                        )
                    };
                    let l = &mut lanes[rm * RN + rn];
                    *l = vmlaq_n_s32(vmlaq_n_s32(*l, p1, scale_l), p2, scale_h);
                }
            }
        }
        let sumi = reduce(&lanes);
        let summins = reduce(&mins_lanes);
        let mut d = [0f32; N];
        let mut dmin = [0f32; N];
        for rm in 0..RM {
            let (dw, dminw) = (f16_at(blk[rm], 0), f16_at(blk[rm], 2));
            for rn in 0..RN {
                d[rm * RN + rn] = y[rn].d[i] * dw;
                dmin[rm * RN + rn] = y[rn].d[i] * dminw;
            }
        }
        mul_add::<N, true>(&mut acc, &dmin, &summins);
        mul_add::<N, false>(&mut acc, &d, &sumi);
    }
    for rm in 0..RM {
        for rn in 0..RN {
            out[rm][rn] = acc[rm * RN + rn];
        }
    }
}

/// Q6_K's 16 values `16k..16k + 16` of 128-value half `h` (0..63), as ggml forms them: the
/// low nibbles (k < 4) or high nibbles (k ≥ 4) of ql bytes `64h + 16(k % 4)..`, or'd with
/// bit pair `k / 2` of qh bytes `128 + 32h + 16(k % 2)..`, shifted to bits 4–5.
#[inline]
#[target_feature(enable = "neon")]
pub(super) fn q6_values(blk: &[u8], h: usize, k: usize) -> int8x16_t {
    let ql = load16(blk, 64 * h + 16 * (k % 4));
    let qh = load16(blk, 128 + 32 * h + 16 * (k % 2));
    let m4b = vdupq_n_u8(0x0F);
    let mone = vdupq_n_u8(3);
    let low = if k < 4 {
        vandq_u8(ql, m4b)
    } else {
        vshrq_n_u8::<4>(ql)
    };
    let pair = match k / 2 {
        0 => qh,
        1 => vshrq_n_u8::<2>(qh),
        2 => vshrq_n_u8::<4>(qh),
        _ => vshrq_n_u8::<6>(qh),
    };
    vreinterpretq_s8_u8(vorrq_u8(low, vshlq_n_u8::<4>(vandq_u8(pair, mone))))
}

/// `RM` weight rows × activation rows of Q6_K; `N` = `RM · RN`.
///
/// # Safety
/// As `D::dot`.
#[inline]
#[target_feature(enable = "neon")]
#[allow(clippy::needless_range_loop)] // [rm][rn] indices, as the x86 tiles
pub(crate) unsafe fn tile_q6_k<D: Dot, const RM: usize, const RN: usize, const N: usize>(
    w: [&[u8]; RM],
    y: [Q8KRow<'_>; RN],
    out: &mut [[f32; RN]; RM],
) {
    debug_assert_eq!(N, RM * RN);
    let nb = check_lengths(w[0], Q6_K_BYTES, y[0]);
    for (w, y) in w.iter().flat_map(|w| y.iter().map(move |y| (w, y))) {
        check_lengths(w, Q6_K_BYTES, *y);
    }
    let mut acc = [0f32; N];
    for i in 0..nb {
        let blk: [&[u8]; RM] =
            std::array::from_fn(|rm| &w[rm][i * Q6_K_BYTES..(i + 1) * Q6_K_BYTES]);
        let scales: [&[u8]; RM] = blk.map(|b| &b[192..208]);
        let mut mins_lanes = [vdupq_n_s32(0); N];
        for rm in 0..RM {
            let sc = vreinterpretq_s8_u8(load16(scales[rm], 0));
            let (s0, s1) = (vmovl_s8(vget_low_s8(sc)), vmovl_high_s8(sc));
            for rn in 0..RN {
                let (a, b) = bsums(y[rn], i);
                mins_lanes[rm * RN + rn] = vaddq_s32(dot_i16x8(a, s0), dot_i16x8(b, s1));
            }
        }
        let mut lanes = [vdupq_n_s32(0); N];
        for h in 0..QK_K / 128 {
            for k in 0..8 {
                let x: [int8x16_t; RM] = std::array::from_fn(|rm| q6_values(blk[rm], h, k));
                for rn in 0..RN {
                    let q8 = load16_i8(y[rn].qs, i * QK_K + 128 * h + 16 * k);
                    for rm in 0..RM {
                        let scale = scales[rm][8 * h + k] as i8 as i32;
                        // SAFETY: the caller's guarantee.
                        let p = unsafe { D::dot(vdupq_n_s32(0), x[rm], q8) };
                        let l = &mut lanes[rm * RN + rn];
                        *l = vmlaq_n_s32(*l, p, scale);
                    }
                }
            }
        }
        let isum = reduce(&lanes);
        let isum_mins = reduce(&mins_lanes);
        let total: [i32; N] =
            std::array::from_fn(|o| isum[o].wrapping_sub(isum_mins[o].wrapping_mul(32)));
        let mut d = [0f32; N];
        for rm in 0..RM {
            let dw = f16_at(blk[rm], 208);
            for rn in 0..RN {
                d[rm * RN + rn] = dw * y[rn].d[i];
            }
        }
        mul_add::<N, false>(&mut acc, &d, &total);
    }
    for rm in 0..RM {
        for rn in 0..RN {
            out[rm][rn] = acc[rm * RN + rn];
        }
    }
}

/// The activation rows `i0..i0 + RN` of `q`.
pub(crate) fn rows<const RN: usize>(q: &Q8KRows, i0: usize) -> [Q8KRow<'_>; RN] {
    std::array::from_fn(|rn| q.row(i0 + rn))
}
