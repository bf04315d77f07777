//! The Q4_K and Q6_K prompt tiles with `smmla` (i8mm): the `nrc == 2` branches of ggml's
//! `ggml_vec_dot_q4_K_q8_K` and `ggml_vec_dot_q6_K_q8_K` (`ggml-cpu/arch/arm/quants.c`),
//! widened from 2 × 2 to 2 weight rows × `RN` activation rows.
//!
//! As in ggml, the two weight rows' decoded values are interleaved in 8-byte rows
//! (`vzip1q_s64` / `vzip2q_s64`) and each `smmla` adds the four 8-value dots
//! `[w0·ya, w0·yb, w1·ya, w1·yb]`; per sub-block these are scaled by `[s0, s0, s1, s1]`
//! (`vmlaq_s32`). Unlike ggml, the activations arrive already interleaved
//! (`cpu::row_pairs::PairLayout::Smmla`, built once per quantization), so each activation
//! operand is one load where ggml zips it again for every pair of weight rows.
//!
//! The mins (Q4_K) and the −32 offset (Q6_K) come from the activations' `bsums` as in the
//! one-row kernel (`super::kquants`), and the float step per super-block is the one-row
//! kernel's (`acc −= dmin·Σmins; acc += d·sumi` for Q4_K, `acc += d·(isum − 32·Σ)` for Q6_K,
//! products `y.d · w.d`), four outputs to a vector. The integers are exact in any order, so
//! every output equals the one-row kernel's bit for bit. Activations without this layout
//! (quantized by another table) go through the dotprod tiles instead, with the same results.
//!
//! Instructions per super-block (256 values) and output, counted from the source as in the
//! table of `super` (loads included, scalar scale unpacking left out); ours at 2 × 8, ggml's
//! at 2 × 2:
//! - Q4_K: ~32 / ~58. Per pair of activation rows (4 outputs): 32 operand loads, 32 `smmla`,
//!   8 `mla`, ~21 for the mins (bsums, `smull` pairs, `addp`) and ~12 float: ~26 per output;
//!   the weight decode (16 loads, 32 `and`/`ushr`, 32 `zip`, ~20 for the scale vectors) is
//!   shared by 16 outputs: ~6 each. ggml zips the activations again for every pair of weight
//!   rows (32 `zip` more), builds each sub-block's scale vector through memory and shares its
//!   decode by 4 outputs only.
//! - Q6_K: ~50 / ~104. Per pair: 32 loads, 32 `smmla`, 16 `mla`, ~33 for the −32 term,
//!   ~6 float: ~31 per output; the decode (per 16 values and two rows: 4 loads, ~10 bit ops,
//!   2 `zip`, ~3 for the scale vector) ~19 per output.
//!
//! The dotprod table's 1 × 8 tiles, which these replace on i8mm CPUs: ~45 (Q4_K), ~65 (Q6_K).

use std::arch::aarch64::*;

use super::dot::{Sdot, f16_at, interleave, load16, load16_i8, smmla, sums4};
use super::kquants::{bsums, dot_i16x8, q6_values, rows};
use super::kquants::{tile_q4_k as one_row_q4_k, tile_q6_k as one_row_q6_k};
use crate::cpu::formats::q4_k::{BYTES as Q4_K_BYTES, scales_mins as q4_k_scales_mins};
use crate::cpu::formats::{QK_K, q6_k::BYTES as Q6_K_BYTES};
use crate::cpu::quantize::{BSUMS, Q8KRows};
use crate::cpu::row_pairs::{PAIR_QS, PairLayout, Q8KPairs};

/// The `smmla` layout of `q` if it has one and rows `i0..i0 + rn` fall in whole pairs; two
/// weight rows of `block_bytes` super-blocks are checked against it.
pub(super) fn smmla_rows<'a>(
    w: [&[u8]; 2],
    block_bytes: usize,
    q: &'a Q8KRows,
    i0: usize,
    rn: usize,
) -> Option<&'a Q8KPairs> {
    let whole_pairs = i0.is_multiple_of(2) && rn.is_multiple_of(2);
    let pairs = q
        .pairs
        .as_ref()
        .filter(|p| p.layout == PairLayout::Smmla && whole_pairs)?;
    let nb = q.blocks_per_row;
    let end = i0 + rn;
    assert!(
        w.iter().all(|w| w.len() == nb * block_bytes)
            && pairs.qs.len() >= end / 2 * nb * PAIR_QS
            && q.d.len() >= end * nb
            && q.bsums.len() >= end * nb * BSUMS,
        "weight rows and paired activation rows disagree"
    );
    Some(pairs)
}

/// Q4_K's 6-bit scale of sub-block `s`, from `formats::q4_k::scales_mins`' unpacking.
fn q4_k_scale(utmp: &[u32; 4], s: usize) -> i32 {
    (utmp[s / 4] >> (8 * (s % 4))) as u8 as i32
}

/// `[a, a, b, b]`.
#[inline]
#[target_feature(enable = "neon")]
fn pairs_of(a: i32, b: i32) -> int32x4_t {
    vcombine_s32(vdup_n_s32(a), vdup_n_s32(b))
}

/// `[f(w0, ya), f(w0, yb), f(w1, ya), f(w1, yb)]` for activation rows `ya = row`, `yb = row + 1`
/// of super-block `i`: the order of `smmla`'s outputs.
#[inline]
#[target_feature(enable = "neon")]
fn outer4(w: [f32; 2], q: &Q8KRows, row: usize, i: usize) -> float32x4_t {
    let nb = q.blocks_per_row;
    let (ya, yb) = (q.d[row * nb + i], q.d[(row + 1) * nb + i]);
    let (y, w) = ([ya, yb, ya, yb], [w[0], w[0], w[1], w[1]]);
    // y.d · w.d, the one-row kernel's operand order (IEEE products commute anyway)
    // SAFETY: four readable f32 each.
    unsafe { vmulq_f32(vld1q_f32(y.as_ptr()), vld1q_f32(w.as_ptr())) }
}

/// The 16 bytes of activation pair `pair` at `at` (a multiple of 16) of its super-block `i`.
#[inline]
#[target_feature(enable = "neon")]
fn operand(pairs: &Q8KPairs, nb: usize, pair: usize, i: usize, at: usize) -> int8x16_t {
    load16_i8(&pairs.qs, (pair * nb + i) * PAIR_QS + at)
}

/// Writes the pairs' `[w0·ya, w0·yb, w1·ya, w1·yb]` vectors into `out[weight][activation]`.
#[inline]
#[target_feature(enable = "neon")]
fn store<const RN: usize, const RP: usize>(acc: &[float32x4_t; RP], out: &mut [[f32; RN]; 2]) {
    for (p, a) in acc.iter().enumerate() {
        let mut v = [0f32; 4];
        // SAFETY: four writable f32.
        unsafe { vst1q_f32(v.as_mut_ptr(), *a) };
        out[0][2 * p..2 * p + 2].copy_from_slice(&v[..2]);
        out[1][2 * p..2 * p + 2].copy_from_slice(&v[2..]);
    }
}

/// Two Q4_K weight rows × activation rows `i0..i0 + RN` (`RP` = `RN / 2` pairs).
///
/// # Safety
/// The CPU must have dotprod and i8mm.
#[inline]
#[target_feature(enable = "neon")]
pub(crate) unsafe fn tile_q4_k<const RN: usize, const RP: usize>(
    w: [&[u8]; 2],
    q: &Q8KRows,
    i0: usize,
    out: &mut [[f32; RN]; 2],
) {
    const { assert!(RN == 2 * RP) };
    let Some(pairs) = smmla_rows(w, Q4_K_BYTES, q, i0, RN) else {
        // not quantized for this table: dotprod's one-row tiles, with the same results
        for (w, out) in w.iter().zip(out.iter_mut()) {
            let out = std::array::from_mut(out);
            // SAFETY: the caller's guarantee (dotprod).
            unsafe { one_row_q4_k::<Sdot, 1, RN, RN>([w], rows(q, i0), out) };
        }
        return;
    };
    let nb = q.blocks_per_row;
    let m4b = vdupq_n_u8(0x0F);
    let mut acc = [vdupq_n_f32(0.0); RP];
    for i in 0..nb {
        let blk: [&[u8]; 2] = std::array::from_fn(|r| &w[r][i * Q4_K_BYTES..][..Q4_K_BYTES]);
        let utmp = blk.map(|b| q4_k_scales_mins(&b[4..16]));
        let mut visum = [vdupq_n_s32(0); RP];
        for j in 0..QK_K / 64 {
            // 64 values of each weight row: low nibbles (sub-block 2j), then high (2j + 1)
            let x: [[int8x16_t; 4]; 2] = std::array::from_fn(|r| {
                let (b0, b1) = (load16(blk[r], 16 + 32 * j), load16(blk[r], 32 + 32 * j));
                [
                    vreinterpretq_s8_u8(vandq_u8(b0, m4b)),
                    vreinterpretq_s8_u8(vandq_u8(b1, m4b)),
                    vreinterpretq_s8_u8(vshrq_n_u8::<4>(b0)),
                    vreinterpretq_s8_u8(vshrq_n_u8::<4>(b1)),
                ]
            });
            let xw: [(int8x16_t, int8x16_t); 4] =
                std::array::from_fn(|c| interleave(x[0][c], x[1][c]));
            for k in 0..2 {
                let s = 2 * j + k;
                let scale = pairs_of(q4_k_scale(&utmp[0], s), q4_k_scale(&utmp[1], s));
                for (p, visum) in visum.iter_mut().enumerate() {
                    let pair = i0 / 2 + p;
                    let mut vr = vdupq_n_s32(0);
                    for l in 0..2 {
                        let (c, at) = (2 * k + l, 2 * (64 * j + 32 * k + 16 * l));
                        // SAFETY: the caller's guarantee (i8mm).
                        vr = unsafe {
                            let lo = smmla(vr, xw[c].0, operand(pairs, nb, pair, i, at));
                            smmla(lo, xw[c].1, operand(pairs, nb, pair, i, at + 16))
                        };
                    }
                    *visum = vmlaq_s32(*visum, vr, scale);
                }
            }
        }
        // the mins: Σ over sub-blocks of min · (sum of the activation sub-block)
        let mins = utmp.map(|u| {
            vreinterpretq_s16_u16(vmovl_u8(vcreate_u8(
                u64::from(u[2]) | (u64::from(u[3]) << 32),
            )))
        });
        let dw = blk.map(|b| f16_at(b, 0));
        let dminw = blk.map(|b| f16_at(b, 2));
        for (p, (acc, visum)) in acc.iter_mut().zip(visum).enumerate() {
            let row = i0 + 2 * p;
            let y = [row, row + 1].map(|r| {
                let (a, b) = bsums(q.row(r), i);
                vpaddq_s16(a, b)
            });
            let summins = sums4(
                dot_i16x8(y[0], mins[0]),
                dot_i16x8(y[1], mins[0]),
                dot_i16x8(y[0], mins[1]),
                dot_i16x8(y[1], mins[1]),
            );
            let dmin = outer4(dminw, q, row, i);
            let d = outer4(dw, q, row, i);
            *acc = vsubq_f32(*acc, vmulq_f32(dmin, vcvtq_f32_s32(summins)));
            *acc = vaddq_f32(*acc, vmulq_f32(d, vcvtq_f32_s32(visum)));
        }
    }
    store(&acc, out);
}

/// Two Q6_K weight rows × activation rows `i0..i0 + RN` (`RP` = `RN / 2` pairs).
///
/// # Safety
/// The CPU must have dotprod and i8mm.
#[inline]
#[target_feature(enable = "neon")]
pub(crate) unsafe fn tile_q6_k<const RN: usize, const RP: usize>(
    w: [&[u8]; 2],
    q: &Q8KRows,
    i0: usize,
    out: &mut [[f32; RN]; 2],
) {
    const { assert!(RN == 2 * RP) };
    let Some(pairs) = smmla_rows(w, Q6_K_BYTES, q, i0, RN) else {
        // as in `tile_q4_k`
        for (w, out) in w.iter().zip(out.iter_mut()) {
            let out = std::array::from_mut(out);
            // SAFETY: the caller's guarantee (dotprod).
            unsafe { one_row_q6_k::<Sdot, 1, RN, RN>([w], rows(q, i0), out) };
        }
        return;
    };
    let nb = q.blocks_per_row;
    let mut acc = [vdupq_n_f32(0.0); RP];
    for i in 0..nb {
        let blk: [&[u8]; 2] = std::array::from_fn(|r| &w[r][i * Q6_K_BYTES..][..Q6_K_BYTES]);
        let scales: [&[u8]; 2] = blk.map(|b| &b[192..208]);
        let mut visum = [vdupq_n_s32(0); RP];
        for h in 0..QK_K / 128 {
            for k in 0..8 {
                // 16 values (one sub-block and scale) of each weight row, interleaved
                let (xl, xh) = interleave(q6_values(blk[0], h, k), q6_values(blk[1], h, k));
                let s = 8 * h + k;
                let scale = pairs_of(scales[0][s] as i8 as i32, scales[1][s] as i8 as i32);
                let at = 2 * (128 * h + 16 * k);
                for (p, visum) in visum.iter_mut().enumerate() {
                    let pair = i0 / 2 + p;
                    // SAFETY: the caller's guarantee (i8mm).
                    let vr = unsafe {
                        let lo = smmla(vdupq_n_s32(0), xl, operand(pairs, nb, pair, i, at));
                        smmla(lo, xh, operand(pairs, nb, pair, i, at + 16))
                    };
                    *visum = vmlaq_s32(*visum, vr, scale);
                }
            }
        }
        // the −32 of every value: Σ over sub-blocks of scale · (sum of the activations)
        let sc = scales.map(|s| {
            let v = vreinterpretq_s8_u8(load16(s, 0));
            (vmovl_s8(vget_low_s8(v)), vmovl_high_s8(v))
        });
        let dw = blk.map(|b| f16_at(b, 208));
        for (p, (acc, visum)) in acc.iter_mut().zip(visum).enumerate() {
            let row = i0 + 2 * p;
            let y = [row, row + 1].map(|r| bsums(q.row(r), i));
            let dot = |y: (int16x8_t, int16x8_t), s: (int16x8_t, int16x8_t)| {
                vaddq_s32(dot_i16x8(y.0, s.0), dot_i16x8(y.1, s.1))
            };
            let bias = sums4(
                dot(y[0], sc[0]),
                dot(y[1], sc[0]),
                dot(y[0], sc[1]),
                dot(y[1], sc[1]),
            );
            // wrapping i32, as the one-row kernel's `isum − 32·isum_mins`
            let total = vsubq_s32(visum, vshlq_n_s32::<5>(bias));
            let d = outer4(dw, q, row, i);
            *acc = vaddq_f32(*acc, vmulq_f32(d, vcvtq_f32_s32(total)));
        }
    }
    store(&acc, out);
}
