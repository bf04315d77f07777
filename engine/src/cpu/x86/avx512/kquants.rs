//! The Q4_K and Q6_K prompt tiles (one weight row × `RN` activation rows) in 512-bit registers
//! with VNNI: activation rows go in pairs, one per 256-bit half of a zmm, against the weight
//! row's sub-block broadcast to both halves; `maddubs` then `vpdpwssd` (the scale multiply and
//! the accumulation in one) replace AVX2's `maddubs`, `madd` and `add`. Per half the integer
//! lanes are exactly AVX2's `tile_q4_k` / `tile_q6_k`'s (the same wrapping i32 sums), and so are
//! the scale products, fused multiply-adds, the mins term (AVX2's 128-bit lanes, four activation
//! rows per zmm) and the horizontal sums: every output is bit for bit the AVX2 table's (tested).
//!
//! The tiles read the activations in row pairs (`cpu::row_pairs`): each register's two rows
//! are one 64-byte load, where the row-major layout took two loads and an insert (port 5, which
//! the 512-bit `maddubs`/`vpdpwssd` pair leaves as the only other vector port), and Q4_K's sums
//! of 32 quants come precomputed instead of being formed for every weight row. With both, prefill of the default model went from 518-535 to 540-572 tok/s here
//! (2-core AVX-512 VNNI Xeon, alternating runs of `companion bench`).

use std::arch::x86_64::*;

use crate::cpu::formats::q4_k::BYTES as Q4_K_BYTES;
use crate::cpu::formats::{QK_K, q6_k::BYTES as Q6_K_BYTES};
use crate::cpu::quantize::Q8KRows;
use crate::cpu::row_pairs::{
    PAIR_BSUMS, PAIR_D, PAIR_QS, PairLayout, Q8KPairs, QUAD_SUMS32, SUB, SUBS,
};
use crate::cpu::x86::avx2::kquants::{
    f16_pair, f16_splat, prompt_q4_k as avx2_prompt_q4_k, q4_k_mins_and_scales, q6_values,
    scale_shuffle_k4, tile_q4_k as avx2_tile_q4_k, tile_q6_k as avx2_tile_q6_k,
};
use crate::cpu::x86::{hsum, hsum_i32, prefetch_tile, tiled_fold};

/// The two halves of `a` as AVX2 vectors.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
fn split_ps(a: __m512) -> (__m256, __m256) {
    (
        _mm512_castps512_ps256(a),
        _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(a))),
    )
}

/// The two halves of `a` as AVX2 vectors.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
fn split_si(a: __m512i) -> (__m256i, __m256i) {
    (_mm512_castsi512_si256(a), _mm512_extracti64x4_epi64::<1>(a))
}

/// The pair layout of `q` if it has this table's (a block per half) and covers rows
/// `i0..i0 + rn` in whole quads; `nb` super-blocks of a weight row of `block_bytes` are
/// checked against it.
fn paired_rows<'a>(
    w: &[u8],
    block_bytes: usize,
    q: &'a Q8KRows,
    i0: usize,
    rn: usize,
) -> Option<&'a Q8KPairs> {
    let pairs = q
        .pairs
        .as_ref()
        .filter(|p| p.layout == PairLayout::Halves)?;
    let nb = q.blocks_per_row;
    let (p_end, q_end) = ((i0 + rn) / 2, (i0 + rn) / 4);
    assert!(
        i0.is_multiple_of(4)
            && rn.is_multiple_of(4)
            && w.len() == nb * block_bytes
            && pairs.qs.len() >= p_end * nb * PAIR_QS
            && pairs.bsums.len() >= p_end * nb * PAIR_BSUMS
            && pairs.d.len() >= p_end * nb * PAIR_D
            && pairs.sums32.len() >= q_end * nb * QUAD_SUMS32,
        "weight row and paired activation rows disagree"
    );
    Some(pairs)
}

/// `sumi[p] += madd(sc, maddubs(wq, q8))` for every pair `p` from `pair0` of sub-block `s` of
/// super-block `i`.
///
/// # Safety
/// Pairs `pair0..pair0 + RP` of `pairs` must hold super-block `i` (`nb` per pair).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
unsafe fn pair_dots<const RP: usize>(
    wq: __m256i,
    sc: __m256i,
    pairs: &Q8KPairs,
    (pair0, nb, i, s): (usize, usize, usize, usize),
    sumi: &mut [__m512i; RP],
) {
    let wq = _mm512_broadcast_i64x4(wq);
    let sc = _mm512_broadcast_i64x4(sc);
    for (p, sum) in sumi.iter_mut().enumerate() {
        let at = (((pair0 + p) * nb + i) * SUBS + s) * 2 * SUB;
        // SAFETY: the caller's guarantee; an unaligned 64-byte load.
        let q8 = unsafe { _mm512_loadu_si512(pairs.qs.as_ptr().add(at).cast()) };
        *sum = _mm512_dpwssd_epi32(*sum, _mm512_maddubs_epi16(wq, q8), sc);
    }
}

/// `acc[p] += (d_y · d_w) · f32(sumi[p])` per half, as AVX2's `accumulate_block`.
///
/// # Safety
/// As [`pair_dots`].
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
unsafe fn accumulate<const RP: usize>(
    acc: &mut [__m512; RP],
    sumi: &[__m512i; RP],
    dw: __m256,
    pairs: &Q8KPairs,
    (pair0, nb, i): (usize, usize, usize),
) {
    // `dw` holds one value in every lane
    let dw = _mm512_broadcastss_ps(_mm256_castps256_ps128(dw));
    for p in 0..RP {
        // SAFETY: the caller's guarantee; 16 scales, an unaligned load.
        let dy = unsafe { _mm512_loadu_ps(pairs.d.as_ptr().add(((pair0 + p) * nb + i) * PAIR_D)) };
        acc[p] = _mm512_fmadd_ps(_mm512_mul_ps(dy, dw), _mm512_cvtepi32_ps(sumi[p]), acc[p]);
    }
}

/// Lanes `0..8` of the result: the sums of all i32 lanes of each activation row of `sumi`
/// (pair `p`'s low half is row `2p`, its high half row `2p + 1`), in row order; pairs past
/// `RP` count as zero. Exact integer sums in another order than one `hsum` per row: the same
/// values.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
fn row_sums<const RP: usize>(sumi: &[__m512i; RP]) -> __m256i {
    const { assert!(RP <= 4) };
    // 128-bit lanes 0 and 1 hold row 2p's eight lanes, 2 and 3 row 2p + 1's: fold 1 onto 0
    // and 3 onto 2
    let s: [__m512i; 4] = std::array::from_fn(|p| match sumi.get(p) {
        Some(&z) => _mm512_add_epi32(z, _mm512_shuffle_i64x2::<0b10_11_00_01>(z, z)),
        None => _mm512_setzero_si512(),
    });
    // a 4×4 transpose in every 128-bit lane, then the rows' four lanes added
    let t0 = _mm512_unpacklo_epi32(s[0], s[1]);
    let t1 = _mm512_unpackhi_epi32(s[0], s[1]);
    let t2 = _mm512_unpacklo_epi32(s[2], s[3]);
    let t3 = _mm512_unpackhi_epi32(s[2], s[3]);
    let r = _mm512_add_epi32(
        _mm512_add_epi32(_mm512_unpacklo_epi64(t0, t2), _mm512_unpackhi_epi64(t0, t2)),
        _mm512_add_epi32(_mm512_unpacklo_epi64(t1, t3), _mm512_unpackhi_epi64(t1, t3)),
    );
    // 128-bit lane 0: rows 0, 2, 4, 6; lane 2: rows 1, 3, 5, 7
    let even = _mm512_castsi512_si128(r);
    let odd = _mm512_extracti32x4_epi32::<2>(r);
    _mm256_setr_m128i(_mm_unpacklo_epi32(even, odd), _mm_unpackhi_epi32(even, odd))
}

/// One weight row of Q4_K × activation rows `i0..i0 + RN` (`RN = 2·RP`, whole quads), on
/// the pair layout (AVX2's tile where `q` has none: the same results). The mins terms of four
/// activation rows come from one register (lane group `r`: row `r`'s); the rows' sums and
/// mins terms of a pair of sub-blocks are folded in for all rows at once, lane `rn` of a
/// register being activation row `rn` — per lane the same operations as `q4_k_fold`. With
/// `GEMV`, each super-block's sums are folded in once, as ggml's gemv (one activation row)
/// does: every output is then the one-row kernel's, bit for bit (`RowSums::AsOneRow`).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(crate) fn tile_q4_k<const RP: usize, const RN: usize, const GEMV: bool>(
    w: [&[u8]; 1],
    q: &Q8KRows,
    i0: usize,
    out: &mut [[f32; RN]; 1],
) {
    // whole quads of rows: the mins' sums come four rows to a register
    const { assert!(RN == 2 * RP && RN.is_multiple_of(4) && RN <= 8) };
    let Some(pairs) = paired_rows(w[0], Q4_K_BYTES, q, i0, RN) else {
        return match GEMV {
            true => avx2_tile_q4_k::<1, RN, false>(w, q, i0, out),
            false => avx2_prompt_q4_k::<RN>(w, q, i0, out),
        };
    };
    let nb = q.blocks_per_row;
    let (pair0, quad0) = (i0 / 2, i0 / 4);
    let m4 = _mm256_set1_epi8(0xF);
    // lane `rn` of the two: `Σ f32(sum)·(d_w·d_y)` and `Σ f32(min term)·(dmin_w·d_y)`
    let (mut acc, mut acc_min) = (_mm256_setzero_ps(), _mm256_setzero_ps());
    for i in 0..nb {
        let blk = &w[0][i * Q4_K_BYTES..(i + 1) * Q4_K_BYTES];
        prefetch_tile::<1>(w[0], i, Q4_K_BYTES);
        let dd = f16_pair(u32::from_le_bytes([blk[0], blk[1], blk[2], blk[3]]));
        let (dw, dminw) = (_mm_cvtss_f32(dd), _mm_cvtss_f32(_mm_movehdup_ps(dd)));
        let mins_and_scales = q4_k_mins_and_scales(blk);
        let mins = _mm512_broadcast_i32x4(_mm256_extracti128_si256::<1>(mins_and_scales));
        let sc128 = _mm256_extracti128_si256::<0>(mins_and_scales);
        let scales = _mm256_set_m128i(sc128, sc128);
        // the mins terms of four rows per register: lane group `r` holds row `r`'s four, lane
        // `j` of a group the term of sub-blocks 2j and 2j + 1
        let mut min_prods = [_mm512_setzero_si512(); 2];
        for (qd, prod) in min_prods.iter_mut().enumerate().take(RN / 4) {
            let at = (quad0 + qd) * nb + i;
            // SAFETY: quad `quad0 + qd`'s super-block `i` (checked in `paired_rows`);
            // unaligned load.
            let q8s =
                unsafe { _mm512_loadu_si512(pairs.sums32.as_ptr().add(at * QUAD_SUMS32).cast()) };
            *prod = _mm512_madd_epi16(mins, q8s);
        }
        // the rows' scales: pair `p` holds row 2p's in lanes 0..8, row 2p + 1's in 8..16
        let mut dy = [0f32; 8];
        for (rn, d) in dy.iter_mut().enumerate().take(RN) {
            // SAFETY: pair `pair0 + rn / 2`'s scales of super-block `i` (`paired_rows`).
            *d = unsafe {
                *pairs
                    .d
                    .as_ptr()
                    .add(((pair0 + rn / 2) * nb + i) * PAIR_D + 8 * (rn % 2))
            };
        }
        // SAFETY: 8 floats from an 8-float array.
        let dy = unsafe { _mm256_loadu_ps(dy.as_ptr()) };
        let d_sum = _mm256_mul_ps(_mm256_set1_ps(dw), dy);
        let d_min = _mm256_mul_ps(_mm256_set1_ps(dminw), dy);
        // the super-block's exact integer sums, for the gemv's one fold
        let (mut block_sums, mut block_mins) =
            ([_mm512_setzero_si512(); RP], _mm256_setzero_si256());
        for j in 0..QK_K / 64 {
            let mut sumi = [_mm512_setzero_si512(); RP];
            // SAFETY: bytes 16 + 32j .. +32 of the block's 144; unaligned load.
            let bits = unsafe {
                _mm256_loadu_si256(w[0].as_ptr().add(i * Q4_K_BYTES + 16 + 32 * j).cast())
            };
            let lo = _mm256_and_si256(bits, m4);
            let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(bits), m4);
            let sc_lo = _mm256_shuffle_epi8(scales, scale_shuffle_k4(2 * j));
            let sc_hi = _mm256_shuffle_epi8(scales, scale_shuffle_k4(2 * j + 1));
            // SAFETY: pairs `pair0..pair0 + RP` hold super-block `i` (checked in `paired_rows`).
            unsafe {
                pair_dots(lo, sc_lo, pairs, (pair0, nb, i, 2 * j), &mut sumi);
                pair_dots(hi, sc_hi, pairs, (pair0, nb, i, 2 * j + 1), &mut sumi);
            }
            // lane `j` of every lane group: row 4·qd + r's mins term of this pair of sub-blocks
            let pick = _mm512_add_epi32(
                _mm512_set1_epi32(j as i32),
                _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 0, 0, 0, 0, 0, 0, 0),
            );
            let min8 =
                _mm512_castsi512_si256(_mm512_permutex2var_epi32(min_prods[0], pick, min_prods[1]));
            if GEMV {
                for (total, s) in block_sums.iter_mut().zip(&sumi) {
                    *total = _mm512_add_epi32(*total, *s);
                }
                block_mins = _mm256_add_epi32(block_mins, min8);
            } else {
                // ggml's gemm folds every pair of sub-blocks in (see `q4_k_fold`)
                acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(row_sums(&sumi)), d_sum, acc);
                acc_min = _mm256_fmadd_ps(_mm256_cvtepi32_ps(min8), d_min, acc_min);
            }
        }
        if GEMV {
            acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(row_sums(&block_sums)), d_sum, acc);
            acc_min = _mm256_fmadd_ps(_mm256_cvtepi32_ps(block_mins), d_min, acc_min);
        }
    }
    let mut rows = [0f32; 8];
    // SAFETY: 8 floats into an 8-float array.
    unsafe { _mm256_storeu_ps(rows.as_mut_ptr(), _mm256_sub_ps(acc, acc_min)) };
    out[0].copy_from_slice(&rows[..RN]);
}

/// One weight row of Q6_K × activation rows `i0..i0 + RN` (`RN = 2·RP`, whole quads), on
/// the pair layout (AVX2's tile where `q` has none: the same results). `TILED` as AVX2's.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(crate) fn tile_q6_k<const RP: usize, const RN: usize, const TILED: bool>(
    w: [&[u8]; 1],
    q: &Q8KRows,
    i0: usize,
    out: &mut [[f32; RN]; 1],
) {
    const { assert!(RN == 2 * RP && RN.is_multiple_of(4)) };
    let Some(pairs) = paired_rows(w[0], Q6_K_BYTES, q, i0, RN) else {
        return avx2_tile_q6_k::<1, RN, TILED>(w, q, i0, out);
    };
    let nb = q.blocks_per_row;
    let pair0 = i0 / 2;
    let mut acc = [_mm512_setzero_ps(); RP];
    if TILED {
        *out = [[0.0; RN]; 1];
    }
    for i in 0..nb {
        let blk = &w[0][i * Q6_K_BYTES..(i + 1) * Q6_K_BYTES];
        prefetch_tile::<1>(w[0], i, Q6_K_BYTES);
        // SAFETY: bytes 192..208 of the block's 210 are the 16 scales; unaligned load.
        let scales = [unsafe { _mm_loadu_si128(blk.as_ptr().add(192).cast()) }];
        let dw = f16_splat(u16::from_le_bytes([blk[208], blk[209]]));
        let scales_16 = _mm512_broadcast_i64x4(_mm256_cvtepi8_epi16(scales[0]));
        // the −32 offset term starts each row's i32 sums, as in AVX2's tile
        let mut sumi = [_mm512_setzero_si512(); RP];
        for (p, s) in sumi.iter_mut().enumerate() {
            let at = ((pair0 + p) * nb + i) * PAIR_BSUMS;
            // SAFETY: pair `pair0 + p`'s 2 × 16 sums of super-block `i` (checked in
            // `paired_rows`); unaligned load.
            let q8sums = unsafe { _mm512_loadu_si512(pairs.bsums.as_ptr().add(at).cast()) };
            let q8sclsub = _mm512_slli_epi32::<5>(_mm512_madd_epi16(q8sums, scales_16));
            *s = _mm512_sub_epi32(_mm512_setzero_si512(), q8sclsub);
        }
        let blocks: [*const u8; 1] = [w[0][i * Q6_K_BYTES..].as_ptr()];
        for h in 0..QK_K / 128 {
            let at = (pair0, nb, i, 4 * h);
            // SAFETY: the block offsets are in bounds as `q6_values` requires (the block is
            // whole), and pairs `pair0..pair0 + RP` hold super-block `i` (`paired_rows`).
            unsafe {
                let (v, sc) = q6_values::<0, 1>(&blocks, h, &scales);
                pair_dots(v[0], sc[0], pairs, at, &mut sumi);
                let (v, sc) = q6_values::<1, 1>(&blocks, h, &scales);
                pair_dots(v[0], sc[0], pairs, (at.0, nb, i, 4 * h + 1), &mut sumi);
                let (v, sc) = q6_values::<2, 1>(&blocks, h, &scales);
                pair_dots(v[0], sc[0], pairs, (at.0, nb, i, 4 * h + 2), &mut sumi);
                let (v, sc) = q6_values::<3, 1>(&blocks, h, &scales);
                pair_dots(v[0], sc[0], pairs, (at.0, nb, i, 4 * h + 3), &mut sumi);
            }
        }
        if TILED {
            let dw = _mm256_cvtss_f32(dw);
            for (p, s) in sumi.iter().enumerate() {
                let d = &pairs.d[((pair0 + p) * nb + i) * PAIR_D..];
                let (lo, hi) = split_si(*s);
                tiled_fold(&mut out[0][2 * p], hsum_i32(lo), dw, d[0]);
                tiled_fold(&mut out[0][2 * p + 1], hsum_i32(hi), dw, d[8]);
            }
        } else {
            // SAFETY: as above.
            unsafe { accumulate(&mut acc, &sumi, dw, pairs, (pair0, nb, i)) };
        }
    }
    if !TILED {
        for p in 0..RP {
            let (lo, hi) = split_ps(acc[p]);
            out[0][2 * p] = hsum(lo);
            out[0][2 * p + 1] = hsum(hi);
        }
    }
}
