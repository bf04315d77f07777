//! The decode K-quant kernels (one activation row × 4 weight rows of Q4_K, × 1 of Q6_K) in
//! 512-bit registers with VNNI. Decode reads every weight once, and on this machine's 2-core
//! AVX-512 EPYC (a plain 2-thread read reaches 37-72 GB/s, with neighbours) it is partly bound
//! by the instructions that unpack and multiply the quants: AVX2's kernels spend three
//! (`maddubs`, `madd`, `add`) per 32 quants of a weight row, these two (`maddubs`, `vpdpwssd`)
//! per 64. A 65536×2560 matrix streamed from memory, alternating tables in one process: Q4_K
//! 45-47 → 50-55 GB/s, Q6_K 50-56 → 62-69 GB/s (its 4-row tile only reached 41: Q6_K
//! stays row by row, as in the AVX2 table).
//!
//! A zmm holds two 32-value sub-blocks side by side (the low half one, the high half the
//! next), against the 64 activation quants they meet, which are contiguous. Every i32 lane of
//! the low half accumulates exactly what lane `l` of AVX2's register accumulates for the even
//! sub-blocks, the high half for the odd ones; integer sums are exact, so adding the two halves
//! (Q6_K) or all sixteen lanes (Q4_K) gives AVX2's integers, and the f32 operations after it
//! are AVX2's one by one: every output is bit for bit `vec_dot_q4_k_q8_k` /
//! `vec_dot_q6_k_q8_k::<false>`'s (tested against the AVX2 table), which are llama.cpp's x86
//! gemv and `ggml_vec_dot_q6_K_q8_K`.

use std::arch::x86_64::*;

use crate::cpu::formats::q4_k::BYTES as Q4_K_BYTES;
use crate::cpu::formats::{QK_K, q6_k::BYTES as Q6_K_BYTES};
use crate::cpu::quantize::{BSUMS, Q8KRow, Q8KRows};
use crate::cpu::x86::avx2::kquants::{
    check_lengths, f16_pair, f16_splat, q4_k_mins_and_scales, tile_rows,
};
use crate::cpu::x86::{hsum, hsum_i32_4, prefetch_tile, q4_k_fold};

/// i16 lanes `0..16` of `a`, then `b` in lanes `16..32`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
fn halves(a: __m256i, b: __m256i) -> __m512i {
    _mm512_inserti64x4::<1>(_mm512_castsi256_si512(a), b)
}

/// Every i16 lane of the low half `lo`, of the high half `hi`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
fn halves_i16(lo: i16, hi: i16) -> __m512i {
    halves(_mm256_set1_epi16(lo), _mm256_set1_epi16(hi))
}

/// `RM` consecutive Q4_K weight rows · activation row `i0`: per super-block, each row's
/// `Σ scale·q4·q8` over 16 lanes and its mins term, folded in once (`q4_k_fold`, the gemv's).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(crate) fn q4_k<const RM: usize>(
    w: [&[u8]; RM],
    q: &Q8KRows,
    i0: usize,
    out: &mut [[f32; 1]; RM],
) {
    let [y] = tile_rows::<RM, 1>(&w, Q4_K_BYTES, q, i0);
    q4_k_rows(w, y, out)
}

/// One Q4_K weight row · one activation row: `vec_dot_q4_k_q8_k`'s result (the gemv's fold).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(crate) fn vec_dot_q4_k(w: &[u8], y: Q8KRow<'_>) -> f32 {
    check_lengths(w, Q4_K_BYTES, y);
    let mut out = [[0f32; 1]];
    q4_k_rows([w], y, &mut out);
    out[0][0]
}

/// `RM` consecutive Q4_K weight rows · `y` (lengths checked).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
fn q4_k_rows<const RM: usize>(w: [&[u8]; RM], y: Q8KRow<'_>, out: &mut [[f32; 1]; RM]) {
    let nb = y.d.len();
    let m4 = _mm512_set1_epi8(0xF);
    // the low nibbles (sub-block 2j) in the low half, the high ones (2j + 1) in the high half
    let nibble_shift = halves_i16(0, 4);
    // scale `2j` in every i16 lane of the low half, `2j + 1` in the high half
    let scale_index: [__m512i; 4] =
        std::array::from_fn(|j| halves_i16(2 * j as i16, 2 * j as i16 + 1));
    let mut acc = [[0f32; 2]; RM];
    for i in 0..nb {
        prefetch_tile::<RM>(w[0], i, Q4_K_BYTES);
        // SAFETY: block `i`'s 256 quants and 16 sums (checked in `tile_rows`); unaligned loads.
        let (q8, q8sums) = unsafe {
            let at = y.qs.as_ptr().add(i * QK_K);
            (
                [0, 1, 2, 3].map(|j| _mm512_loadu_si512(at.add(64 * j).cast())),
                _mm256_loadu_si256(y.bsums.as_ptr().add(i * BSUMS).cast()),
            )
        };
        let q8s = _mm_hadd_epi16(
            _mm256_extracti128_si256::<0>(q8sums),
            _mm256_extracti128_si256::<1>(q8sums),
        );
        let dy = y.d[i];
        for rm in 0..RM {
            let blk = &w[rm][i * Q4_K_BYTES..(i + 1) * Q4_K_BYTES];
            let dd = f16_pair(u32::from_le_bytes([blk[0], blk[1], blk[2], blk[3]]));
            let mins_and_scales = q4_k_mins_and_scales(blk);
            let min_term = _mm_madd_epi16(_mm256_extracti128_si256::<1>(mins_and_scales), q8s);
            let scales = _mm512_castsi256_si512(mins_and_scales);
            let mut sumi = _mm512_setzero_si512();
            for (j, q8j) in q8.iter().enumerate() {
                // SAFETY: bytes 16 + 32j .. +32 of the block's 144; unaligned load.
                let bits = unsafe {
                    _mm512_broadcast_i64x4(_mm256_loadu_si256(blk.as_ptr().add(16 + 32 * j).cast()))
                };
                let wq = _mm512_and_si512(_mm512_srlv_epi16(bits, nibble_shift), m4);
                let sc = _mm512_permutexvar_epi16(scale_index[j], scales);
                sumi = _mm512_dpwssd_epi32(sumi, _mm512_maddubs_epi16(wq, *q8j), sc);
            }
            q4_k_fold(
                &mut acc[rm],
                _mm512_reduce_add_epi32(sumi),
                hsum_i32_4(min_term),
                _mm_cvtss_f32(dd),
                _mm_cvtss_f32(_mm_movehdup_ps(dd)),
                dy,
            );
        }
    }
    for (o, a) in out.iter_mut().zip(&acc) {
        o[0] = a[0] - a[1];
    }
}

/// One Q6_K weight row · one activation row: `vec_dot_q6_k_q8_k::<false>`'s result.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(crate) fn vec_dot_q6_k(w: &[u8], y: Q8KRow<'_>) -> f32 {
    check_lengths(w, Q6_K_BYTES, y);
    let mut out = [[0f32; 1]];
    q6_k_rows([w], y, &mut out);
    out[0][0]
}

/// `RM` consecutive Q6_K weight rows · `y` (lengths checked), as
/// `vec_dot_q6_k_q8_k::<false>`: per super-block the 8 i32 lanes (the two halves added), the
/// −32 offset term taken out, scaled into 8 f32 lanes; summed across lanes at the end.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
fn q6_k_rows<const RM: usize>(w: [&[u8]; RM], y: Q8KRow<'_>, out: &mut [[f32; 1]; RM]) {
    let nb = y.d.len();
    let (m3, m15) = (_mm512_set1_epi8(3), _mm512_set1_epi8(15));
    // the high bits of sub-blocks 4h + K, K = 0..4, are bits 2K, 2K + 1 of `qh[32h..]`: the
    // pair (K, K + 1) shifts them down by (2K, 2K + 2) in the two halves
    let high_shift = [halves_i16(0, 2), halves_i16(4, 6)];
    // sub-blocks 4h + K and 4h + K + 1 take scales b, b + 1 (low half) and b + 2, b + 3
    // (high half), b = 8h + 2K, eight lanes each (ggml `get_scale_shuffle`)
    let scale_index: [__m512i; 4] = std::array::from_fn(|pair| {
        let b = 4 * pair as i16;
        halves(
            _mm256_setr_m128i(_mm_set1_epi16(b), _mm_set1_epi16(b + 1)),
            _mm256_setr_m128i(_mm_set1_epi16(b + 2), _mm_set1_epi16(b + 3)),
        )
    });
    let mut acc = [_mm256_setzero_ps(); RM];
    for i in 0..nb {
        prefetch_tile::<RM>(w[0], i, Q6_K_BYTES);
        // SAFETY: block `i`'s 256 quants and 16 sums (checked in `tile_rows`); unaligned loads.
        let (q8, q8sums) = unsafe {
            let at = y.qs.as_ptr().add(i * QK_K);
            (
                [0, 1, 2, 3].map(|p| _mm512_loadu_si512(at.add(64 * p).cast())),
                _mm256_loadu_si256(y.bsums.as_ptr().add(i * BSUMS).cast()),
            )
        };
        let dy = _mm256_set1_ps(y.d[i]);
        for rm in 0..RM {
            let blk = &w[rm][i * Q6_K_BYTES..(i + 1) * Q6_K_BYTES];
            let d = _mm256_mul_ps(dy, f16_splat(u16::from_le_bytes([blk[208], blk[209]])));
            // SAFETY: the block's 16 scale bytes at offset 192 of 210; unaligned load.
            let scales = unsafe { _mm_loadu_si128(blk.as_ptr().add(192).cast()) };
            let scales_16 = _mm256_cvtepi8_epi16(scales);
            let q8sclsub = _mm256_slli_epi32::<5>(_mm256_madd_epi16(q8sums, scales_16));
            let scales = _mm512_castsi256_si512(scales_16);
            let mut sumi = _mm512_setzero_si512();
            for h in 0..QK_K / 128 {
                // SAFETY: low-nibble bytes 64h .. +64 of 128 and high-bit bytes 128 + 32h ..
                // +32 of the block's 210; unaligned loads.
                let (ql, qh) = unsafe {
                    (
                        _mm512_loadu_si512(blk.as_ptr().add(64 * h).cast()),
                        _mm512_broadcast_i64x4(_mm256_loadu_si256(
                            blk.as_ptr().add(128 + 32 * h).cast(),
                        )),
                    )
                };
                // sub-blocks 4h, 4h + 1: the low nibbles; 4h + 2, 4h + 3: the high ones
                let low = [
                    _mm512_and_si512(ql, m15),
                    _mm512_and_si512(_mm512_srli_epi16::<4>(ql), m15),
                ];
                for (k, low) in low.into_iter().enumerate() {
                    let high = _mm512_and_si512(_mm512_srlv_epi16(qh, high_shift[k]), m3);
                    let v = _mm512_or_si512(low, _mm512_slli_epi16::<4>(high));
                    let pair = 2 * h + k;
                    let sc = _mm512_permutexvar_epi16(scale_index[pair], scales);
                    sumi = _mm512_dpwssd_epi32(sumi, _mm512_maddubs_epi16(v, q8[pair]), sc);
                }
            }
            let sum8 = _mm256_add_epi32(
                _mm512_castsi512_si256(sumi),
                _mm512_extracti64x4_epi64::<1>(sumi),
            );
            let sum8 = _mm256_sub_epi32(sum8, q8sclsub);
            acc[rm] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sum8), acc[rm]);
        }
    }
    for (o, a) in out.iter_mut().zip(acc) {
        o[0] = hsum(a);
    }
}
