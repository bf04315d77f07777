//! The Q5_0 / Q8_0 prompt tile with `smmla` (i8mm): ggml's `nrc == 2` branch of
//! `ggml_vec_dot_q8_0_q8_0` / `ggml_vec_dot_q5_0_q8_0` (`ggml-cpu/arch/arm/quants.c`),
//! widened from 2 × 2 to the table's 2 weight rows × 4 activation rows. Two weight rows'
//! 8-byte pieces are interleaved (`vzip1q_s64` / `vzip2q_s64`, as ggml's `l0..l3`), and so
//! are two activation rows' (`r0..r3`): once per quantization where the table asks for it
//! (`Q8Rows::smmla_pairs`), else here as in ggml. Four `smmla` per block and row pair give
//! the four whole-block i32 dots `[w0·ya, w0·yb, w1·ya, w1·yb]`. Those are the integers the
//! one-row kernel sums, and the float step after them is the one-row kernel's
//! (`super::blocks::scale_in`), so every output equals `super::blocks::dot`'s, bit for bit.

use std::arch::aarch64::*;

use super::blocks::{act_scales4, block_bytes, lane, scale_in, values};
use super::dot::{f16_at, interleave, load16_i8, smmla};
use crate::cpu::formats::QK;
use crate::cpu::quantize::Q8Rows;

/// The activations as `smmla` operands (`Q8Rows::smmla_pairs`), where quantized so and rows
/// `i0..i0 + 4` fall in whole pairs.
pub(super) fn operand_pairs(q: &Q8Rows, i0: usize) -> Option<&[i8]> {
    let nb = q.blocks_per_row;
    q.smmla_pairs
        .as_deref()
        .filter(|p| i0.is_multiple_of(2) && p.len() >= (i0 + 4) * nb * QK)
}

/// See the module docs.
///
/// # Safety
/// The CPU must have i8mm.
#[inline]
#[target_feature(enable = "neon")]
#[allow(clippy::needless_range_loop)] // [rm][rn] indices, as the x86 tiles
pub(crate) unsafe fn prompt_tile<const Q5: bool>(
    w: [&[u8]; 2],
    q: &Q8Rows,
    i0: usize,
    out: &mut [[f32; 4]; 2],
) {
    let bb = block_bytes::<Q5>();
    let nb = w[0].len() / bb;
    assert!(
        w.iter().all(|r| r.len() == nb * bb)
            && q.blocks_per_row == nb
            && (i0 + 4) * nb <= q.scales.len()
            && q.quants.len() == q.scales.len() * QK,
        "weight rows and activation rows disagree"
    );
    let pairs = operand_pairs(q, i0);
    let mut acc = [vdupq_n_f32(0.0); 2];
    for b in 0..nb {
        let blk: [&[u8]; 2] = std::array::from_fn(|r| &w[r][b * bb..(b + 1) * bb]);
        let (x0, x1) = (values::<Q5>(blk[0]), values::<Q5>(blk[1]));
        let (l0, l1) = interleave(x0.0, x1.0);
        let (l2, l3) = interleave(x0.1, x1.1);
        // [w0·y0, w0·y1, w1·y0, w1·y1] and the same for activation rows 2, 3
        let mut c = [vdupq_n_s32(0); 2];
        for (pair, c) in c.iter_mut().enumerate() {
            let [r0, r1, r2, r3] = match pairs {
                // quantized as operands already: four loads
                Some(p) => {
                    let at = ((i0 / 2 + pair) * nb + b) * 2 * QK;
                    std::array::from_fn(|r| load16_i8(p, at + 16 * r))
                }
                None => {
                    let ya = (i0 + 2 * pair) * nb + b;
                    let yb = ya + nb;
                    let (r0, r1) =
                        interleave(load16_i8(&q.quants, ya * QK), load16_i8(&q.quants, yb * QK));
                    let (r2, r3) = interleave(
                        load16_i8(&q.quants, ya * QK + 16),
                        load16_i8(&q.quants, yb * QK + 16),
                    );
                    [r0, r1, r2, r3]
                }
            };
            // SAFETY: the caller's guarantee (i8mm).
            *c = unsafe { smmla(smmla(smmla(smmla(*c, l0, r0), l1, r1), l2, r2), l3, r3) };
        }
        let (c01, c23) = (vreinterpretq_s64_s32(c[0]), vreinterpretq_s64_s32(c[1]));
        // weight row 0 against activation rows 0..4, then weight row 1
        let s = [
            vreinterpretq_s32_s64(vzip1q_s64(c01, c23)),
            vreinterpretq_s32_s64(vzip2q_s64(c01, c23)),
        ];
        let dy = act_scales4(q, i0, b);
        for rm in 0..2 {
            acc[rm] = scale_in(acc[rm], s[rm], vdupq_n_f32(f16_at(blk[rm], 0)), dy);
        }
    }
    for rm in 0..2 {
        for rn in 0..4 {
            out[rm][rn] = lane(acc[rm], rn);
        }
    }
}
