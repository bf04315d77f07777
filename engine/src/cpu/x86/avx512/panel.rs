//! The Q4_K prompt panel: `PANEL_ROWS` (16) weight rows × every activation row of a prompt, in
//! the shape of ggml's repacked `ggml_gemm_q4_K_8x8_q8_K` (`ggml-cpu/arch/x86/repack.cpp`):
//! a zmm's 32-bit lane `r` is weight row `r`, so every integer sum and every fold stays in its
//! lane and nothing is summed across lanes. The 16 rows are repacked once into `scratch` —
//! nibbles unpacked, four quants of a row per lane, scales and mins widened per lane — and then
//! meet every activation row, four at a time, with each activation's four quants broadcast
//! into all lanes (`maddubs`, then `vpdpwssd` with the row's sub-block scale).
//!
//! The results are the prompt tiles' bit for bit (tested against the AVX2 table): integer sums
//! are exact, and each lane folds every pair of sub-blocks in with `q4_k_fold`'s operations —
//! `acc = fma(f32(Σ scale·q4·q8), d_w·d_y, acc)`, `acc_min = fma(f32(Σ min·bsum), dmin_w·d_y,
//! acc_min)`, the output `acc − acc_min`.

use std::arch::x86_64::*;

use crate::cpu::formats::QK_K;
use crate::cpu::formats::q4_k::{BYTES as Q4_K_BYTES, scales_mins};
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
    let nb = q.blocks_per_row;
    assert!(
        w.iter().all(|r| r.len() == nb * Q4_K_BYTES)
            && m.is_multiple_of(4)
            && m <= q.rows
            && dst.len() >= PANEL_ROWS * q.rows
            && q.qs.len() >= q.rows * nb * QK_K
            && q.bsums.len() >= q.rows * nb * BSUMS
            && q.d.len() >= q.rows * nb,
        "weight rows, activation rows and output disagree"
    );
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
            let mut out = [0f32; PANEL_ROWS];
            // SAFETY: 16 floats into a 16-float array.
            unsafe { _mm512_storeu_ps(out.as_mut_ptr(), _mm512_sub_ps(acc[a], acc_min[a])) };
            for (r, v) in out.into_iter().enumerate() {
                dst[r * q.rows + a0 + a] = v;
            }
        }
    }
}
