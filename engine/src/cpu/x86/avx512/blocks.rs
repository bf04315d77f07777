//! The offset-form Q5_0 prompt tile in 512-bit registers with VNNI: each zmm holds two
//! activation rows' blocks side by side (two 256-bit halves), the weight block broadcast to
//! both, and `vpdpbusd` forms each half's eight 4-value lane sums in one instruction where AVX2
//! needs `maddubs` + `madd`. Per half, the integers (exact: offset values 0..31 times bytes
//! within ±127 never saturate `maddubs` either), their conversion, the scale product and the
//! fused multiply-add are AVX2's `offset_tile`'s, and the final horizontal sum is AVX2's `hsum`
//! of that half: every output is bit for bit the AVX2 table's (tested).
//!
//! The activation blocks, their lane sums and scales are read in row pairs
//! (`cpu::row_pairs::Q8Pairs`): one 64-byte load each per register instead of two loads and an
//! insert (quants, sums) or two broadcasts and a blend (scales). That took prefill of the
//! default model from 540-572 to 583-600 tok/s here, on top of the K-quant tiles' pairs.

use std::arch::x86_64::*;

use crate::cpu::blocks::{LaneSums, OffsetGroup};
use crate::cpu::formats::QK;
use crate::cpu::quantize::Q8Rows;
use crate::cpu::row_pairs::Q8Pairs;
use crate::cpu::x86::avx2::blocks::{offset_group as avx2_offset_group, offset_tile};
use crate::cpu::x86::hsum;

/// Weight rows per tile.
const TILE_M: usize = 4;
/// Activation row pairs per tile (8 rows).
const TILE_P: usize = 4;

/// A whole offset group × activation rows `i0..i0 + rows`: `TILE_M` × `2·TILE_P` tiles, the
/// edges in AVX2's tiles (see `cpu::OffsetGroupFn`).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
#[allow(clippy::too_many_arguments)] // the table's signature
pub(crate) unsafe fn offset_group(
    group: &OffsetGroup,
    width: usize,
    q: &Q8Rows,
    sums: &LaneSums,
    i0: usize,
    rows: usize,
    dst: &mut [f32],
    g0: usize,
) {
    let Some(pairs) = sums.pairs.as_ref().filter(|_| i0.is_multiple_of(2)) else {
        // SAFETY: AVX2 is part of this table's features; the same results.
        return unsafe { avx2_offset_group(group, width, q, sums, i0, rows, dst, g0) };
    };
    let n = dst.len() / rows.max(1);
    let mut store = |j0: usize, i: usize, acc: &[f32], rm: usize, rn: usize| {
        for r in 0..rm {
            for c in 0..rn {
                dst[(i + c) * n + g0 + j0 + r] = acc[r * rn + c];
            }
        }
    };
    const RN: usize = 2 * TILE_P;
    let mut i = 0;
    while i + RN <= rows {
        let mut j = 0;
        while j + TILE_M <= width {
            // SAFETY: this table is built only where AVX-512 F/BW/VL/VNNI, AVX2, FMA and F16C
            // were detected; the tile's rows are within the group and `q` (asserted inside).
            let acc = unsafe { pair_tile::<TILE_M, TILE_P, RN>(group, j, q, pairs, i0 + i) };
            store(j, i, acc.as_flattened(), TILE_M, RN);
            j += TILE_M;
        }
        for j in j..width {
            // SAFETY: as above.
            let acc = unsafe { pair_tile::<1, TILE_P, RN>(group, j, q, pairs, i0 + i) };
            store(j, i, acc.as_flattened(), 1, RN);
        }
        i += RN;
    }
    // fewer than 8 rows left: AVX2's tiles (the same results)
    while i + 4 <= rows {
        for j in 0..width {
            // SAFETY: as above (AVX2 is part of this table's features).
            let acc = unsafe { offset_tile::<1, 4>(group, j, q, sums, i0 + i) };
            store(j, i, acc.as_flattened(), 1, 4);
        }
        i += 4;
    }
    for i in i..rows {
        for j in 0..width {
            // SAFETY: as above.
            let acc = unsafe { offset_tile::<1, 1>(group, j, q, sums, i0 + i) };
            store(j, i, acc.as_flattened(), 1, 1);
        }
    }
}

/// Rows `j..j + RM` of an offset group times activation rows `i0..i0 + 2·RP`, as `[rm][rn]`.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
#[allow(clippy::needless_range_loop)] // indices as in AVX2's `offset_tile`, which this mirrors
unsafe fn pair_tile<const RM: usize, const RP: usize, const RN: usize>(
    group: &OffsetGroup,
    j: usize,
    q: &Q8Rows,
    pairs: &Q8Pairs,
    i0: usize,
) -> [[f32; RN]; RM] {
    const { assert!(RN == 2 * RP) };
    let k = group.k;
    let nb = k / QK;
    let pair0 = i0 / 2;
    assert!(
        i0.is_multiple_of(2)
            && (j + RM) * k <= group.values.len()
            && (j + RM) * nb <= group.scales.len()
            && q.blocks_per_row == nb
            && (pair0 + RP) * nb * 2 * QK <= pairs.quants.len()
            && (pair0 + RP) * nb * 16 <= pairs.neg_lanes.len()
            && (pair0 + RP) * nb * 16 <= pairs.scales.len()
    );
    let v = group.values.as_ptr();
    let mut acc = [[_mm512_setzero_ps(); RP]; RM];
    for b in 0..nb {
        let mut x = [_mm512_setzero_si512(); RM];
        let mut d = [_mm512_setzero_ps(); RM];
        for rm in 0..RM {
            // SAFETY: row j + rm of the group is in bounds (asserted above).
            unsafe {
                x[rm] = _mm512_broadcast_i64x4(_mm256_loadu_si256(
                    v.add((j + rm) * k + b * QK) as *const __m256i
                ));
                d[rm] = _mm512_set1_ps(*group.scales.get_unchecked((j + rm) * nb + b));
            }
        }
        for rp in 0..RP {
            let at = (pair0 + rp) * nb + b;
            // SAFETY: pair `pair0 + rp`'s block `b` is in bounds (asserted above); unaligned
            // 64-byte loads.
            let (y, neg_s, dy) = unsafe {
                (
                    _mm512_loadu_si512(pairs.quants.as_ptr().add(at * 2 * QK).cast()),
                    _mm512_loadu_si512(pairs.neg_lanes.as_ptr().add(at * 16).cast()),
                    _mm512_loadu_ps(pairs.scales.as_ptr().add(at * 16)),
                )
            };
            for rm in 0..RM {
                // −s + v·y: AVX2's `dot − s`, exactly (no i32 here comes near overflow)
                let p = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(neg_s, x[rm], y));
                acc[rm][rp] = _mm512_fmadd_ps(_mm512_mul_ps(d[rm], dy), p, acc[rm][rp]);
            }
        }
    }
    let mut out = [[0f32; RN]; RM];
    for rm in 0..RM {
        for rp in 0..RP {
            let a = acc[rm][rp];
            out[rm][2 * rp] = hsum(_mm512_castps512_ps256(a));
            out[rm][2 * rp + 1] = hsum(_mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(
                _mm512_castps_pd(a),
            )));
        }
    }
    out
}
