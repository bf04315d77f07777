//! The K-quant prompt panels: `PANEL_ROWS` (16) weight rows × every activation row of a prompt,
//! in the shape of ggml's repacked `ggml_gemm_q4_K_8x8_q8_K` (`ggml-cpu/arch/x86/repack.cpp`):
//! a zmm's 32-bit lane `r` is weight row `r`, so every integer sum and every fold stays in its
//! lane and nothing is summed across lanes. The 16 rows are repacked once into `scratch` —
//! nibbles unpacked, four quants of a row per lane, scales and mins widened per lane — and then
//! meet every activation row, four at a time, with each activation's four quants broadcast
//! into all lanes (`maddubs`, then `vpdpwssd` with the row's sub-block scale).
//!
//! The results are the prompt tiles' bit for bit (tested against llama.cpp's schedule): integer
//! sums are exact, and each lane folds as the tiles do — Q4_K every pair of sub-blocks with
//! `q4_k_fold`'s operations (`acc = fma(f32(Σ scale·q4·q8), d_w·d_y, acc)`, `acc_min =
//! fma(f32(Σ min·bsum), dmin_w·d_y, acc_min)`, the output `acc − acc_min`); Q6_K (ggml's tiled
//! matmul, from 8 activation rows) every super-block with `tiled_fold`'s (`acc = fma(f32(Σ
//! scale·q6·q8 − 32·Σ scale·bsum)·d_w, d_y, acc)`).

use std::arch::x86_64::*;

use crate::cpu::formats::QK_K;
use crate::cpu::formats::q4_k::{BYTES as Q4_K_BYTES, scales_mins};
use crate::cpu::formats::q6_k::BYTES as Q6_K_BYTES;
use crate::cpu::kquants::PANEL_ROWS;
use crate::cpu::quantize::{BSUMS, Q8KRows};

/// Bytes of one repacked super-block: the unpacked quants (4 pairs of sub-blocks × 2 halves ×
/// 8 groups of four quants × 64 bytes), 8 sub-block scales and 4 pairs of mins as i16 lanes
/// (64 bytes each), and `d`, `dmin` as 16 f32.
const QUANTS: usize = 4 * 2 * 8 * 64;
const SCALES: usize = QUANTS;
const MINS: usize = SCALES + 8 * 64;
const D: usize = MINS + 4 * 64;
const DMIN: usize = D + 64;
const RECORD: usize = DMIN + 64;

/// Bytes of one repacked Q6_K super-block: the values 0..63 (16 sub-blocks of 16 × 4 groups
/// of four × 64 bytes), each sub-block's scale as the row's two i16 lanes, the scales of
/// sub-blocks 2k and 2k + 1 as one pair of i16 per row (for the −32 term), and `d` as 16 f32.
const Q6_QUANTS: usize = 16 * 4 * 64;
const Q6_SCALES: usize = Q6_QUANTS;
const Q6_SCALE_PAIRS: usize = Q6_SCALES + 16 * 64;
const Q6_D: usize = Q6_SCALE_PAIRS + 8 * 64;
const Q6_RECORD: usize = Q6_D + 64;

/// The blocks per row, with the panel's shapes checked: every weight row `nb` blocks of
/// `block_bytes`, `m` a multiple of 4 within `q`, `dst` `PANEL_ROWS` rows of `q.rows`.
fn check(w: &[&[u8]; PANEL_ROWS], block_bytes: usize, q: &Q8KRows, m: usize, dst: &[f32]) -> usize {
    let nb = q.blocks_per_row;
    assert!(
        w.iter().all(|r| r.len() == nb * block_bytes)
            && m.is_multiple_of(4)
            && m <= q.rows
            && dst.len() >= PANEL_ROWS * q.rows
            && q.qs.len() >= q.rows * nb * QK_K
            && q.bsums.len() >= q.rows * nb * BSUMS
            && q.d.len() >= q.rows * nb,
        "weight rows, activation rows and output disagree"
    );
    nb
}

/// Lane `r` of `v` into `dst[r * stride + i]`: activation row `i`'s outputs of the panel's rows.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
fn store(v: __m512, dst: &mut [f32], stride: usize, i: usize) {
    let mut out = [0f32; PANEL_ROWS];
    // SAFETY: 16 floats into a 16-float array.
    unsafe { _mm512_storeu_ps(out.as_mut_ptr(), v) };
    for (r, v) in out.into_iter().enumerate() {
        dst[r * stride + i] = v;
    }
}

/// Weight rows `w` (16, each `nb` Q4_K blocks) repacked for [`panel_q4_k`].
fn repack(w: &[&[u8]; PANEL_ROWS], nb: usize, scratch: &mut Vec<u8>) {
    scratch.clear();
    scratch.resize(nb * RECORD, 0);
    for (i, rec) in scratch.chunks_exact_mut(RECORD).enumerate() {
        for (r, row) in w.iter().enumerate() {
            let blk = &row[i * Q4_K_BYTES..(i + 1) * Q4_K_BYTES];
            let utmp = scales_mins(&blk[4..16]);
            let bytes: [u8; 16] = std::array::from_fn(|b| (utmp[b / 4] >> (8 * (b % 4))) as u8);
            let (scales, mins) = (&bytes[..8], &bytes[8..]);
            for j in 0..4 {
                for g in 0..8 {
                    for b in 0..4 {
                        let q = blk[16 + 32 * j + 4 * g + b];
                        rec[((2 * j) * 8 + g) * 64 + 4 * r + b] = q & 0xF;
                        rec[((2 * j + 1) * 8 + g) * 64 + 4 * r + b] = q >> 4;
                    }
                }
                for h in 0..2 {
                    rec[MINS + j * 64 + 4 * r + 2 * h] = mins[2 * j + h];
                }
            }
            for (sb, &s) in scales.iter().enumerate() {
                // both i16 lanes of the row's 32-bit lane: `maddubs` leaves two pair sums there
                rec[SCALES + sb * 64 + 4 * r] = s;
                rec[SCALES + sb * 64 + 4 * r + 2] = s;
            }
            let d = half::f16::from_le_bytes([blk[0], blk[1]]).to_f32();
            let dmin = half::f16::from_le_bytes([blk[2], blk[3]]).to_f32();
            rec[D + 4 * r..D + 4 * r + 4].copy_from_slice(&d.to_le_bytes());
            rec[DMIN + 4 * r..DMIN + 4 * r + 4].copy_from_slice(&dmin.to_le_bytes());
        }
    }
}

/// Weight rows `w` (`PANEL_ROWS` consecutive rows) × activation rows `0..m` of `q` (`m` a
/// multiple of 4: ggml's gemm takes rows in fours) into `dst[r * q.rows + i]`. `scratch` is
/// reused between calls.
///
/// # Panics
/// If a weight row is not `q.blocks_per_row` Q4_K blocks, `m` is not a multiple of 4 or past
/// `q.rows`, or `dst` is shorter than `PANEL_ROWS * q.rows`.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(crate) fn panel_q4_k(
    w: &[&[u8]; PANEL_ROWS],
    q: &Q8KRows,
    m: usize,
    scratch: &mut Vec<u8>,
    dst: &mut [f32],
) {
    let nb = check(w, Q4_K_BYTES, q, m, dst);
    repack(w, nb, scratch);
    let rec = |i: usize, at: usize| scratch[i * RECORD + at..].as_ptr();
    for a0 in (0..m).step_by(4) {
        let mut acc = [_mm512_setzero_ps(); 4];
        let mut acc_min = [_mm512_setzero_ps(); 4];
        for i in 0..nb {
            // SAFETY: each record is RECORD bytes; the offsets below are inside it.
            let (dw, dminw) = unsafe {
                (
                    _mm512_loadu_ps(rec(i, D).cast()),
                    _mm512_loadu_ps(rec(i, DMIN).cast()),
                )
            };
            let dy: [f32; 4] = std::array::from_fn(|a| q.d[(a0 + a) * nb + i]);
            let d_sum = dy.map(|d| _mm512_mul_ps(dw, _mm512_set1_ps(d)));
            let d_min = dy.map(|d| _mm512_mul_ps(dminw, _mm512_set1_ps(d)));
            // each row's 32-value sub-block sums (pairs of its 16-value `bsums`), exact in i16
            let sums32: [[i16; 8]; 4] = std::array::from_fn(|a| {
                let b = &q.bsums[((a0 + a) * nb + i) * BSUMS..][..BSUMS];
                std::array::from_fn(|sb| b[2 * sb].wrapping_add(b[2 * sb + 1]))
            });
            let qs: [*const i8; 4] =
                std::array::from_fn(|a| q.qs[((a0 + a) * nb + i) * QK_K..].as_ptr());
            for j in 0..4 {
                let mut sumi = [_mm512_setzero_si512(); 4];
                for h in 0..2 {
                    let sb = 2 * j + h;
                    // SAFETY: inside the record, as above.
                    let sc = unsafe { _mm512_loadu_si512(rec(i, SCALES + sb * 64).cast()) };
                    for g in 0..8 {
                        // SAFETY: inside the record, as above.
                        let wq = unsafe { _mm512_loadu_si512(rec(i, (sb * 8 + g) * 64).cast()) };
                        for (a, s) in sumi.iter_mut().enumerate() {
                            // SAFETY: quants 32·sb + 4g .. +4 of this row's block `i` (256 of
                            // them, checked above); an unaligned 4-byte read.
                            let x = unsafe {
                                std::ptr::read_unaligned(qs[a].add(32 * sb + 4 * g).cast::<i32>())
                            };
                            let p = _mm512_maddubs_epi16(wq, _mm512_set1_epi32(x));
                            *s = _mm512_dpwssd_epi32(*s, p, sc);
                        }
                    }
                }
                // SAFETY: inside the record, as above.
                let mins = unsafe { _mm512_loadu_si512(rec(i, MINS + j * 64).cast()) };
                for a in 0..4 {
                    let pair = (sums32[a][2 * j] as u16 as u32)
                        | ((sums32[a][2 * j + 1] as u16 as u32) << 16);
                    let min_term = _mm512_madd_epi16(mins, _mm512_set1_epi32(pair as i32));
                    acc[a] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi[a]), d_sum[a], acc[a]);
                    acc_min[a] =
                        _mm512_fmadd_ps(_mm512_cvtepi32_ps(min_term), d_min[a], acc_min[a]);
                }
            }
        }
        for a in 0..4 {
            store(_mm512_sub_ps(acc[a], acc_min[a]), dst, q.rows, a0 + a);
        }
    }
}

/// Q6_K weight rows `w` (16, each `nb` blocks) repacked for [`panel_q6_k`]. Value `p` of a
/// block (ggml `dequantize_row_q6_K`): `p = 128n + 32k + l` takes the low (k < 2) or high
/// nibble of `ql[64n + 32(k % 2) + l]`, bits `2k, 2k + 1` of `qh[32n + l]` above it, and the
/// scale of sub-block `p / 16`.
fn repack_q6_k(w: &[&[u8]; PANEL_ROWS], nb: usize, scratch: &mut Vec<u8>) {
    scratch.clear();
    scratch.resize(nb * Q6_RECORD, 0);
    for (i, rec) in scratch.chunks_exact_mut(Q6_RECORD).enumerate() {
        for (r, row) in w.iter().enumerate() {
            let blk = &row[i * Q6_K_BYTES..(i + 1) * Q6_K_BYTES];
            let (ql, qh, scales) = (&blk[..128], &blk[128..192], &blk[192..208]);
            for p in 0..QK_K {
                let (n, k, l) = (p / 128, p % 128 / 32, p % 32);
                let byte = ql[64 * n + 32 * (k % 2) + l];
                let low = if k < 2 { byte & 0xF } else { byte >> 4 };
                let high = (qh[32 * n + l] >> (2 * k)) & 3;
                let (sb, g, b) = (p / 16, p % 16 / 4, p % 4);
                rec[(sb * 4 + g) * 64 + 4 * r + b] = low | (high << 4);
            }
            for (sb, &s) in scales.iter().enumerate() {
                let s = (s as i8 as i16).to_le_bytes();
                let at = Q6_SCALES + sb * 64 + 4 * r;
                rec[at..at + 2].copy_from_slice(&s);
                rec[at + 2..at + 4].copy_from_slice(&s);
                let pair = Q6_SCALE_PAIRS + sb / 2 * 64 + 4 * r + 2 * (sb % 2);
                rec[pair..pair + 2].copy_from_slice(&s);
            }
            let d = half::f16::from_le_bytes([blk[208], blk[209]]).to_f32();
            rec[Q6_D + 4 * r..Q6_D + 4 * r + 4].copy_from_slice(&d.to_le_bytes());
        }
    }
}

/// Q6_K weight rows `w` (`PANEL_ROWS` consecutive rows) × activation rows `0..m` of `q` (`m` a
/// multiple of 4) into `dst[r * q.rows + i]`, in ggml's tiled order (`tiled_fold`: a batch of
/// at least 8 rows). `scratch` is reused between calls.
///
/// # Panics
/// As [`panel_q4_k`].
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(crate) fn panel_q6_k(
    w: &[&[u8]; PANEL_ROWS],
    q: &Q8KRows,
    m: usize,
    scratch: &mut Vec<u8>,
    dst: &mut [f32],
) {
    let nb = check(w, Q6_K_BYTES, q, m, dst);
    repack_q6_k(w, nb, scratch);
    let rec = |i: usize, at: usize| scratch[i * Q6_RECORD + at..].as_ptr();
    for a0 in (0..m).step_by(4) {
        let mut acc = [_mm512_setzero_ps(); 4];
        for i in 0..nb {
            let qs: [*const i8; 4] =
                std::array::from_fn(|a| q.qs[((a0 + a) * nb + i) * QK_K..].as_ptr());
            let mut sumi = [_mm512_setzero_si512(); 4];
            for sb in 0..16 {
                // SAFETY: each record is Q6_RECORD bytes; the offsets below are inside it.
                let sc = unsafe { _mm512_loadu_si512(rec(i, Q6_SCALES + sb * 64).cast()) };
                for g in 0..4 {
                    // SAFETY: inside the record, as above.
                    let wq = unsafe { _mm512_loadu_si512(rec(i, (sb * 4 + g) * 64).cast()) };
                    for (a, s) in sumi.iter_mut().enumerate() {
                        // SAFETY: quants 16·sb + 4g .. +4 of this row's block `i` (256 of
                        // them, checked above); an unaligned 4-byte read.
                        let x = unsafe {
                            std::ptr::read_unaligned(qs[a].add(16 * sb + 4 * g).cast::<i32>())
                        };
                        let p = _mm512_maddubs_epi16(wq, _mm512_set1_epi32(x));
                        *s = _mm512_dpwssd_epi32(*s, p, sc);
                    }
                }
            }
            // SAFETY: inside the record, as above.
            let dw = unsafe { _mm512_loadu_ps(rec(i, Q6_D).cast()) };
            for a in 0..4 {
                // the −32 offset of every value: 32 · Σ scale · bsum, per row
                let b = &q.bsums[((a0 + a) * nb + i) * BSUMS..][..BSUMS];
                let mut offset = _mm512_setzero_si512();
                for k in 0..8 {
                    let pair = (b[2 * k] as u16 as u32) | ((b[2 * k + 1] as u16 as u32) << 16);
                    // SAFETY: inside the record, as above.
                    let scales =
                        unsafe { _mm512_loadu_si512(rec(i, Q6_SCALE_PAIRS + k * 64).cast()) };
                    offset = _mm512_dpwssd_epi32(offset, scales, _mm512_set1_epi32(pair as i32));
                }
                let sum = _mm512_sub_epi32(sumi[a], _mm512_slli_epi32::<5>(offset));
                let dy = _mm512_set1_ps(q.d[(a0 + a) * nb + i]);
                acc[a] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(sum), dw), dy, acc[a]);
            }
        }
        for (a, acc) in acc.iter().enumerate() {
            store(*acc, dst, q.rows, a0 + a);
        }
    }
}
