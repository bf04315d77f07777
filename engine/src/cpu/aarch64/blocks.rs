//! Q5_0 and Q8_0 weights against Q8_0 activations on NEON: ggml's `ggml_vec_dot_q5_0_q8_0`
//! and `ggml_vec_dot_q8_0_q8_0` (`ggml-cpu/arch/arm/quants.c`) — the fifth bits of Q5_0
//! expanded through ggml's `table_b2b_1` (`(!b) << 4` per bit) and subtracted from the
//! nibbles, each 32-value block dotted in two `ggml_vdotq_s32` steps — and the register
//! tiles built from the same steps.
//!
//! Float order: each block's exact i32 dot is scaled by `d_w · d_y` and added to one f32 sum
//! per output, block after block (`acc + s · d`, an unfused multiply and add). That is the
//! order of ggml's i8mm path (`nrc == 2`: `vmlaq_f32(sumv0, vcvtq_f32_s32(mmla), scale)`),
//! which llama.cpp runs for prompts on CPUs with i8mm, and — as integer sums are exact — the
//! order of the portable kernel too, so the one-row kernels here give the portable table's
//! results bit for bit. ggml's one-row dotprod path keeps four lanes per block instead; we
//! do not, so that the `smmla` prompt tile (which yields whole-block sums) computes exactly
//! what the one-row kernel computes and a prompt's rows do not depend on how they were tiled.

use std::arch::aarch64::*;

use super::dot::{Dot, f16_at, f16x4_to_f32, load16, load16_i8, sums4};
use crate::cpu::formats::{QK, q5_0::BYTES as Q5_0_BYTES, q8_0::BYTES as Q8_0_BYTES};
use crate::cpu::quantize::Q8Rows;

/// ggml `table_b2b_1`: for each byte `v`, 8 bytes, byte `i` = `(!bit i of v) << 4`.
static TABLE_B2B_1: [u64; 256] = {
    let mut t = [0u64; 256];
    let mut v = 0;
    while v < 256 {
        let mut i = 0;
        while i < 8 {
            if (v >> i) & 1 == 0 {
                t[v] |= 0x10 << (8 * i);
            }
            i += 1;
        }
        v += 1;
    }
    t
};

/// Bytes per block of the format.
#[inline]
pub(crate) const fn block_bytes<const Q5: bool>() -> usize {
    if Q5 { Q5_0_BYTES } else { Q8_0_BYTES }
}

/// A block's 32 signed values, 0..16 and 16..32: Q8_0's bytes as they are; Q5_0's nibbles
/// minus `(!fifth bit) << 4` (ggml's `vsubq_s8(v0_0l, qhl0)`).
#[inline]
#[target_feature(enable = "neon")]
pub(crate) fn values<const Q5: bool>(blk: &[u8]) -> (int8x16_t, int8x16_t) {
    if Q5 {
        let qh = u32::from_le_bytes([blk[2], blk[3], blk[4], blk[5]]);
        let bits = |shift: u32| TABLE_B2B_1[((qh >> shift) & 0xFF) as usize];
        let lo_h = vcombine_u8(vcreate_u8(bits(0)), vcreate_u8(bits(8)));
        let hi_h = vcombine_u8(vcreate_u8(bits(16)), vcreate_u8(bits(24)));
        let qs = load16(blk, 6);
        let lo = vsubq_u8(vandq_u8(qs, vdupq_n_u8(0x0F)), lo_h);
        let hi = vsubq_u8(vshrq_n_u8::<4>(qs), hi_h);
        (vreinterpretq_s8_u8(lo), vreinterpretq_s8_u8(hi))
    } else {
        (
            vreinterpretq_s8_u8(load16(blk, 2)),
            vreinterpretq_s8_u8(load16(blk, 18)),
        )
    }
}

/// The exact i32 dot of one weight block's values with activation block `qi`, as four lanes.
///
/// # Safety
/// As `D::dot`.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn block_lanes<D: Dot>(x: (int8x16_t, int8x16_t), q: &Q8Rows, qi: usize) -> int32x4_t {
    let y0 = load16_i8(&q.quants, qi * QK);
    let y1 = load16_i8(&q.quants, qi * QK + 16);
    // SAFETY: the caller's guarantee.
    unsafe { D::dot(D::dot(vdupq_n_s32(0), x.0, y0), x.1, y1) }
}

fn check<const Q5: bool>(w: &[u8], q: &Q8Rows, rows: usize) -> usize {
    let nb = w.len() / block_bytes::<Q5>();
    assert!(
        w.len() == nb * block_bytes::<Q5>()
            && q.blocks_per_row == nb
            && rows * nb <= q.scales.len()
            && q.quants.len() == q.scales.len() * QK,
        "weight row and activation rows disagree"
    );
    nb
}

/// One weight row · activation row `i`.
///
/// # Safety
/// As `D::dot`.
#[inline]
#[target_feature(enable = "neon")]
pub(crate) unsafe fn dot<D: Dot, const Q5: bool>(w: &[u8], q: &Q8Rows, i: usize) -> f32 {
    let nb = check::<Q5>(w, q, i + 1);
    let bb = block_bytes::<Q5>();
    let mut acc = 0f32;
    for (b, blk) in w.chunks_exact(bb).enumerate() {
        let qi = i * nb + b;
        // SAFETY: the caller's guarantee.
        let s = vaddvq_s32(unsafe { block_lanes::<D>(values::<Q5>(blk), q, qi) });
        acc += s as f32 * (f16_at(blk, 0) * q.scales[qi]);
    }
    acc
}

/// `acc[l] + f32(s[l]) · (dw[l] · dy[l])` in every lane: the one-row kernel's float step.
#[inline]
#[target_feature(enable = "neon")]
pub(crate) fn scale_in(
    acc: float32x4_t,
    s: int32x4_t,
    dw: float32x4_t,
    dy: float32x4_t,
) -> float32x4_t {
    vaddq_f32(acc, vmulq_f32(vcvtq_f32_s32(s), vmulq_f32(dw, dy)))
}

/// Activation scales of rows `i0..i0 + 4` at block `b`.
#[inline]
#[target_feature(enable = "neon")]
pub(crate) fn act_scales4(q: &Q8Rows, i0: usize, b: usize) -> float32x4_t {
    let nb = q.blocks_per_row;
    let s = [
        q.scales[i0 * nb + b],
        q.scales[(i0 + 1) * nb + b],
        q.scales[(i0 + 2) * nb + b],
        q.scales[(i0 + 3) * nb + b],
    ];
    // SAFETY: four readable f32.
    unsafe { vld1q_f32(s.as_ptr()) }
}

/// The f16 scales of four weight blocks, as f32.
#[inline]
#[target_feature(enable = "neon")]
pub(crate) fn weight_scales4(blocks: [&[u8]; 4]) -> float32x4_t {
    let h = blocks.map(|b| u16::from_le_bytes([b[0], b[1]]));
    // SAFETY: four readable u16.
    f16x4_to_f32(unsafe { vld1_u16(h.as_ptr()) })
}

/// Decode: 4 consecutive weight rows × activation row `i` (`cpu::blocks::ROWS_1`): four
/// independent sums, one per lane, each activation block loaded once.
///
/// # Safety
/// As `D::dot`.
#[inline]
#[target_feature(enable = "neon")]
pub(crate) unsafe fn decode_tile<D: Dot, const Q5: bool>(
    w: [&[u8]; 4],
    q: &Q8Rows,
    i: usize,
    out: &mut [[f32; 1]; 4],
) {
    let bb = block_bytes::<Q5>();
    let nb = check::<Q5>(w[0], q, i + 1);
    for r in &w[1..] {
        check::<Q5>(r, q, i + 1);
    }
    let mut acc = vdupq_n_f32(0.0);
    for b in 0..nb {
        let blk: [&[u8]; 4] = std::array::from_fn(|r| &w[r][b * bb..(b + 1) * bb]);
        let qi = i * nb + b;
        // SAFETY: the caller's guarantee.
        let lanes: [int32x4_t; 4] =
            std::array::from_fn(|r| unsafe { block_lanes::<D>(values::<Q5>(blk[r]), q, qi) });
        let s = sums4(lanes[0], lanes[1], lanes[2], lanes[3]);
        acc = scale_in(acc, s, weight_scales4(blk), vdupq_n_f32(q.scales[qi]));
    }
    for (r, o) in out.iter_mut().enumerate() {
        o[0] = lane(acc, r);
    }
}

/// Lane `l` of `v`.
#[inline]
#[target_feature(enable = "neon")]
pub(crate) fn lane(v: float32x4_t, l: usize) -> f32 {
    let mut a = [0f32; 4];
    // SAFETY: four writable f32.
    unsafe { vst1q_f32(a.as_mut_ptr(), v) };
    a[l]
}

/// Prompt: 2 weight rows × activation rows `i0..i0 + 4` (`cpu::blocks::TILE_M`, `TILE_N`),
/// each weight block decoded once and each activation block loaded once; per weight row one
/// vector of four sums (lane = activation row).
///
/// # Safety
/// As `D::dot`.
#[inline]
#[target_feature(enable = "neon")]
#[allow(clippy::needless_range_loop)] // [rm][rn] indices, as the x86 tiles
pub(crate) unsafe fn prompt_tile<D: Dot, const Q5: bool>(
    w: [&[u8]; 2],
    q: &Q8Rows,
    i0: usize,
    out: &mut [[f32; 4]; 2],
) {
    let bb = block_bytes::<Q5>();
    let nb = check::<Q5>(w[0], q, i0 + 4);
    check::<Q5>(w[1], q, i0 + 4);
    let mut acc = [vdupq_n_f32(0.0); 2];
    for b in 0..nb {
        let blk: [&[u8]; 2] = std::array::from_fn(|r| &w[r][b * bb..(b + 1) * bb]);
        let x = [values::<Q5>(blk[0]), values::<Q5>(blk[1])];
        let mut lanes = [[vdupq_n_s32(0); 4]; 2];
        for rn in 0..4 {
            let qi = (i0 + rn) * nb + b;
            for rm in 0..2 {
                // SAFETY: the caller's guarantee.
                lanes[rm][rn] = unsafe { block_lanes::<D>(x[rm], q, qi) };
            }
        }
        let dy = act_scales4(q, i0, b);
        for rm in 0..2 {
            let l = &lanes[rm];
            let s = sums4(l[0], l[1], l[2], l[3]);
            acc[rm] = scale_in(acc[rm], s, vdupq_n_f32(f16_at(blk[rm], 0)), dy);
        }
    }
    for rm in 0..2 {
        for rn in 0..4 {
            out[rm][rn] = lane(acc[rm], rn);
        }
    }
}
