//! Q4_K and Q6_K weights against Q8_K activations in plain loops: ggml's
//! `ggml_vec_dot_q4_K_q8_K_generic` and `ggml_vec_dot_q6_K_q8_K_generic` (`ggml-cpu/quants.c`).

use crate::cpu::formats::q4_k::{self, BYTES as Q4_K_BYTES};
use crate::cpu::formats::q6_k::BYTES as Q6_K_BYTES;
use crate::cpu::formats::{QK_K, f16_at};
use crate::cpu::quantize::{BSUMS, Q8KRow};

/// ggml `ggml_vec_dot_q4_K_q8_K_generic`: eight i32 lanes per block, scaled into eight f32 sums;
/// the mins term `dmin · Σ m·bsum` goes into a separate scalar.
pub fn dot_q4_k(w: &[u8], y: Q8KRow<'_>) -> f32 {
    let mut sums = [0f32; 8];
    let mut sumf = 0f32;
    for (i, blk) in w.chunks_exact(Q4_K_BYTES).enumerate() {
        let mut aux8 = [0i8; QK_K];
        for (a, q4) in aux8.chunks_exact_mut(64).zip(blk[16..144].chunks_exact(32)) {
            let (lo, hi) = a.split_at_mut(32);
            for ((l, h), &q) in lo.iter_mut().zip(hi.iter_mut()).zip(q4) {
                *l = (q & 0xF) as i8;
                *h = (q >> 4) as i8;
            }
        }
        let utmp = q4_k::scales_mins(&blk[4..16]);
        let scales: [u8; 8] = std::array::from_fn(|j| (utmp[j / 4] >> (8 * (j % 4))) as u8);
        let mins: [u8; 8] = std::array::from_fn(|j| (utmp[2 + j / 4] >> (8 * (j % 4))) as u8);
        let bsums = &y.bsums[i * BSUMS..(i + 1) * BSUMS];
        let sumi: i32 = (0..BSUMS)
            .map(|j| bsums[j] as i32 * mins[j / 2] as i32)
            .sum();
        let q8 = &y.qs[i * QK_K..(i + 1) * QK_K];
        let mut aux32 = [0i32; 8];
        for ((a, q), &scale) in aux8.chunks_exact(32).zip(q8.chunks_exact(32)).zip(&scales) {
            for (a8, q8) in a.chunks_exact(8).zip(q.chunks_exact(8)) {
                for l in 0..8 {
                    aux32[l] += scale as i32 * (q8[l] as i16 * a8[l] as i16) as i32;
                }
            }
        }
        let d = f16_at(blk, 0) * y.d[i];
        for (s, &a) in sums.iter_mut().zip(&aux32) {
            *s += d * a as f32;
        }
        let dmin = f16_at(blk, 2) * y.d[i];
        sumf -= dmin * sumi as f32;
    }
    for s in sums {
        sumf += s;
    }
    sumf
}

/// ggml `ggml_vec_dot_q6_K_q8_K_generic`: values decoded to `q − 32`, eight i32 lanes per
/// block scaled into eight f32 sums.
pub fn dot_q6_k(w: &[u8], y: Q8KRow<'_>) -> f32 {
    let mut sums = [0f32; 8];
    for (i, blk) in w.chunks_exact(Q6_K_BYTES).enumerate() {
        let mut aux8 = [0i8; QK_K];
        for part in 0..2 {
            let ql = &blk[64 * part..64 * part + 64];
            let qh = &blk[128 + 32 * part..128 + 32 * part + 32];
            let a = &mut aux8[128 * part..128 * part + 128];
            for l in 0..32 {
                a[l] = ((ql[l] & 0xF) | ((qh[l] & 3) << 4)) as i8 - 32;
                a[l + 32] = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) as i8 - 32;
                a[l + 64] = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i8 - 32;
                a[l + 96] = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i8 - 32;
            }
        }
        let q8 = &y.qs[i * QK_K..(i + 1) * QK_K];
        let mut aux32 = [0i32; 8];
        for ((a, q), &scale) in aux8
            .chunks_exact(16)
            .zip(q8.chunks_exact(16))
            .zip(&blk[192..208])
        {
            let scale = scale as i8 as i32;
            for (a8, q8) in a.chunks_exact(8).zip(q.chunks_exact(8)) {
                for l in 0..8 {
                    aux32[l] += scale * (q8[l] as i16 * a8[l] as i16) as i32;
                }
            }
        }
        let d = f16_at(blk, 208) * y.d[i];
        for (s, &a) in sums.iter_mut().zip(&aux32) {
            *s += d * a as f32;
        }
    }
    let mut sumf = 0f32;
    for s in sums {
        sumf += s;
    }
    sumf
}
