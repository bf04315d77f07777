//! The Q4_K and Q6_K prompt tiles (one weight row × `RN` activation rows) in 512-bit registers
//! with VNNI: activation rows go in pairs, one per 256-bit half of a zmm, against the weight
//! row's sub-block broadcast to both halves; `maddubs` then `vpdpwssd` (the scale multiply and
//! the accumulation in one) replace AVX2's `maddubs`, `madd` and `add`. Per half the integer
//! lanes are exactly AVX2's `tile_q4_k` / `tile_q6_k`'s (the same wrapping i32 sums), and so are
//! the scale products, fused multiply-adds, the mins term (kept in AVX2's 128-bit form) and the
//! horizontal sums: every output is bit for bit the AVX2 table's (tested).

use std::arch::x86_64::*;

use crate::cpu::formats::q4_k::{BYTES as Q4_K_BYTES, scales_mins as q4_k_scales_mins};
use crate::cpu::formats::{QK_K, q6_k::BYTES as Q6_K_BYTES};
use crate::cpu::quantize::{BSUMS, Q8KRow, Q8KRows};
use crate::cpu::x86::avx2::kquants::{f16_pair, f16_splat, q6_values, scale_shuffle_k4, tile_rows};
use crate::cpu::x86::{hsum, prefetch_tile};

/// The two halves of `a` as AVX2 vectors.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
fn split_ps(a: __m512) -> (__m256, __m256) {
    (
        _mm512_castps512_ps256(a),
        _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(a))),
    )
}

/// Two 8-lane vectors as one zmm.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
fn join_si(lo: __m256i, hi: __m256i) -> __m512i {
    _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo), hi)
}

/// 32 activation quants at `at` of rows `a` and `b`, one per half.
///
/// # Safety
/// `at + 32` must not exceed either row's `qs.len()`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
unsafe fn q8_pair(a: &Q8KRow<'_>, b: &Q8KRow<'_>, at: usize) -> __m512i {
    // SAFETY: the caller guarantees 32 quants at `at` of both rows; unaligned loads.
    unsafe {
        join_si(
            _mm256_loadu_si256(a.qs.as_ptr().add(at).cast()),
            _mm256_loadu_si256(b.qs.as_ptr().add(at).cast()),
        )
    }
}

/// `sumi[p] += madd(sc, maddubs(wq, q8))` for every pair `p` of `y`, one sub-block.
///
/// # Safety
/// As [`q8_pair`] for every row of `y`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
unsafe fn pair_dots<const RP: usize, const RN: usize>(
    wq: __m256i,
    sc: __m256i,
    y: &[Q8KRow<'_>; RN],
    at: usize,
    sumi: &mut [__m512i; RP],
) {
    let wq = _mm512_broadcast_i64x4(wq);
    let sc = _mm512_broadcast_i64x4(sc);
    for (p, s) in sumi.iter_mut().enumerate() {
        // SAFETY: the caller's guarantee.
        let q8 = unsafe { q8_pair(&y[2 * p], &y[2 * p + 1], at) };
        *s = _mm512_dpwssd_epi32(*s, _mm512_maddubs_epi16(wq, q8), sc);
    }
}

/// `acc[p] += (d_y · d_w) · f32(sumi[p])` per half, as AVX2's `accumulate_block`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
fn accumulate<const RP: usize, const RN: usize>(
    acc: &mut [__m512; RP],
    sumi: &[__m512i; RP],
    dw: __m256,
    y: &[Q8KRow<'_>; RN],
    i: usize,
) {
    // `dw` holds one value in every lane
    let dw = _mm512_broadcastss_ps(_mm256_castps256_ps128(dw));
    for p in 0..RP {
        let dy = _mm512_mask_blend_ps(
            0xFF00,
            _mm512_set1_ps(y[2 * p].d[i]),
            _mm512_set1_ps(y[2 * p + 1].d[i]),
        );
        acc[p] = _mm512_fmadd_ps(_mm512_mul_ps(dy, dw), _mm512_cvtepi32_ps(sumi[p]), acc[p]);
    }
}

/// One weight row of Q4_K × activation rows `i0..i0 + RN` (`RN = 2·RP`).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(crate) fn tile_q4_k<const RP: usize, const RN: usize>(
    w: [&[u8]; 1],
    q: &Q8KRows,
    i0: usize,
    out: &mut [[f32; RN]; 1],
) {
    const { assert!(RN == 2 * RP) };
    let y = tile_rows::<1, RN>(&w, Q4_K_BYTES, q, i0);
    let nb = q.blocks_per_row;
    let m4 = _mm256_set1_epi8(0xF);
    let mut acc = [_mm512_setzero_ps(); RP];
    let mut acc_m = [_mm_setzero_ps(); RN];
    for i in 0..nb {
        let blk = &w[0][i * Q4_K_BYTES..(i + 1) * Q4_K_BYTES];
        prefetch_tile::<1>(w[0], i, Q4_K_BYTES);
        let dd = f16_pair(u32::from_le_bytes([blk[0], blk[1], blk[2], blk[3]]));
        let dw = _mm256_broadcastss_ps(dd);
        let dminw = _mm_broadcastss_ps(_mm_movehdup_ps(dd));
        let utmp = q4_k_scales_mins(&blk[4..16]);
        let mins_and_scales = _mm256_cvtepu8_epi16(_mm_set_epi32(
            utmp[3] as i32,
            utmp[2] as i32,
            utmp[1] as i32,
            utmp[0] as i32,
        ));
        let mins = _mm256_extracti128_si256::<1>(mins_and_scales);
        let sc128 = _mm256_extracti128_si256::<0>(mins_and_scales);
        let scales = _mm256_set_m128i(sc128, sc128);
        for rn in 0..RN {
            // SAFETY: block `i < nb` of each row's `d` and 16 `bsums` (checked in `tile_rows`).
            let (d, q8sums) = unsafe {
                (
                    *y[rn].d.get_unchecked(i),
                    _mm256_loadu_si256(y[rn].bsums.as_ptr().add(i * BSUMS).cast()),
                )
            };
            let q8s = _mm_hadd_epi16(
                _mm256_extracti128_si256::<0>(q8sums),
                _mm256_extracti128_si256::<1>(q8sums),
            );
            let prod = _mm_madd_epi16(mins, q8s);
            acc_m[rn] = _mm_fmadd_ps(
                _mm_mul_ps(_mm_set1_ps(-d), dminw),
                _mm_cvtepi32_ps(prod),
                acc_m[rn],
            );
        }
        let mut sumi = [_mm512_setzero_si512(); RP];
        for j in 0..QK_K / 64 {
            // SAFETY: bytes 16 + 32j .. +32 of the block's 144; unaligned load.
            let bits = unsafe {
                _mm256_loadu_si256(w[0].as_ptr().add(i * Q4_K_BYTES + 16 + 32 * j).cast())
            };
            let lo = _mm256_and_si256(bits, m4);
            let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(bits), m4);
            let sc_lo = _mm256_shuffle_epi8(scales, scale_shuffle_k4(2 * j));
            let sc_hi = _mm256_shuffle_epi8(scales, scale_shuffle_k4(2 * j + 1));
            // SAFETY: quants 64j .. 64j + 64 of block `i` (checked in `tile_rows`).
            unsafe {
                pair_dots(lo, sc_lo, &y, i * QK_K + 64 * j, &mut sumi);
                pair_dots(hi, sc_hi, &y, i * QK_K + 64 * j + 32, &mut sumi);
            }
        }
        accumulate(&mut acc, &sumi, dw, &y, i);
    }
    for p in 0..RP {
        let (lo, hi) = split_ps(acc[p]);
        for (rn, half) in [(2 * p, lo), (2 * p + 1, hi)] {
            let a = acc_m[rn];
            let a = _mm_add_ps(a, _mm_movehl_ps(a, a));
            let a = _mm_add_ss(a, _mm_movehdup_ps(a));
            out[0][rn] = hsum(half) + _mm_cvtss_f32(a);
        }
    }
}

/// One weight row of Q6_K × activation rows `i0..i0 + RN` (`RN = 2·RP`).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(crate) fn tile_q6_k<const RP: usize, const RN: usize>(
    w: [&[u8]; 1],
    q: &Q8KRows,
    i0: usize,
    out: &mut [[f32; RN]; 1],
) {
    const { assert!(RN == 2 * RP) };
    let y = tile_rows::<1, RN>(&w, Q6_K_BYTES, q, i0);
    let nb = q.blocks_per_row;
    let mut acc = [_mm512_setzero_ps(); RP];
    for i in 0..nb {
        let blk = &w[0][i * Q6_K_BYTES..(i + 1) * Q6_K_BYTES];
        prefetch_tile::<1>(w[0], i, Q6_K_BYTES);
        // SAFETY: bytes 192..208 of the block's 210 are the 16 scales; unaligned load.
        let scales = [unsafe { _mm_loadu_si128(blk.as_ptr().add(192).cast()) }];
        let dw = f16_splat(u16::from_le_bytes([blk[208], blk[209]]));
        let scales_16 = _mm256_cvtepi8_epi16(scales[0]);
        // the −32 offset term starts each row's i32 sums, as in AVX2's tile
        let mut sumi = [_mm512_setzero_si512(); RP];
        for (p, s) in sumi.iter_mut().enumerate() {
            let start = |rn: usize| {
                // SAFETY: 16 `bsums` of block `i` (checked in `tile_rows`); unaligned load.
                let q8sums =
                    unsafe { _mm256_loadu_si256(y[rn].bsums.as_ptr().add(i * BSUMS).cast()) };
                let q8sclsub = _mm256_slli_epi32::<5>(_mm256_madd_epi16(q8sums, scales_16));
                _mm256_sub_epi32(_mm256_setzero_si256(), q8sclsub)
            };
            *s = join_si(start(2 * p), start(2 * p + 1));
        }
        let blocks: [*const u8; 1] = [w[0][i * Q6_K_BYTES..].as_ptr()];
        for h in 0..QK_K / 128 {
            let at = i * QK_K + 128 * h;
            // SAFETY: the block and quant offsets are in bounds as `q6_values` and `pair_dots`
            // require (checked in `tile_rows`).
            unsafe {
                let (v, sc) = q6_values::<0, 1>(&blocks, h, &scales);
                pair_dots(v[0], sc[0], &y, at, &mut sumi);
                let (v, sc) = q6_values::<1, 1>(&blocks, h, &scales);
                pair_dots(v[0], sc[0], &y, at + 32, &mut sumi);
                let (v, sc) = q6_values::<2, 1>(&blocks, h, &scales);
                pair_dots(v[0], sc[0], &y, at + 64, &mut sumi);
                let (v, sc) = q6_values::<3, 1>(&blocks, h, &scales);
                pair_dots(v[0], sc[0], &y, at + 96, &mut sumi);
            }
        }
        accumulate(&mut acc, &sumi, dw, &y, i);
    }
    for p in 0..RP {
        let (lo, hi) = split_ps(acc[p]);
        out[0][2 * p] = hsum(lo);
        out[0][2 * p + 1] = hsum(hi);
    }
}
