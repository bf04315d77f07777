//! The offset-form Q5_0 prompt tile in 512-bit registers with VNNI: each zmm holds two
//! activation rows' blocks side by side (two 256-bit halves), the weight block broadcast to
//! both, and `vpdpbusd` forms each half's eight 4-value lane sums in one instruction where AVX2
//! needs `maddubs` + `madd`. Per half, the integers (exact: offset values 0..31 times bytes
//! within ±127 never saturate `maddubs` either), their conversion, the scale product and the
//! fused multiply-add are AVX2's `offset_tile`'s, and the final horizontal sum is AVX2's `hsum`
//! of that half: every output is bit for bit the AVX2 table's (tested).

use std::arch::x86_64::*;

use crate::cpu::blocks::{LaneSums, OffsetGroup};
use crate::cpu::formats::QK;
use crate::cpu::quantize::Q8Rows;
use crate::cpu::x86::avx2::blocks::offset_tile;
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
            let acc = unsafe { pair_tile::<TILE_M, TILE_P, RN>(group, j, q, sums, i0 + i) };
            store(j, i, acc.as_flattened(), TILE_M, RN);
            j += TILE_M;
        }
        for j in j..width {
            // SAFETY: as above.
            let acc = unsafe { pair_tile::<1, TILE_P, RN>(group, j, q, sums, i0 + i) };
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

/// Two 32-byte runs as the halves of one zmm.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
unsafe fn halves(lo: *const u8, hi: *const u8) -> __m512i {
    // SAFETY: the caller guarantees 32 readable bytes at each; unaligned loads.
    unsafe {
        _mm512_inserti64x4::<1>(
            _mm512_castsi256_si512(_mm256_loadu_si256(lo as *const __m256i)),
            _mm256_loadu_si256(hi as *const __m256i),
        )
    }
}

/// Rows `j..j + RM` of an offset group times activation rows `i0..i0 + 2·RP`, as `[rm][rn]`.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
#[allow(clippy::needless_range_loop)] // indices as in AVX2's `offset_tile`, which this mirrors
unsafe fn pair_tile<const RM: usize, const RP: usize, const RN: usize>(
    group: &OffsetGroup,
    j: usize,
    q: &Q8Rows,
    sums: &LaneSums,
    i0: usize,
) -> [[f32; RN]; RM] {
    const { assert!(RN == 2 * RP) };
    let k = group.k;
    let nb = k / QK;
    assert!(
        (j + RM) * k <= group.values.len()
            && (j + RM) * nb <= group.scales.len()
            && (i0 + 2 * RP) * nb <= q.scales.len()
            && q.blocks_per_row == nb
            && sums.0.len() == q.scales.len() * 8
    );
    let v = group.values.as_ptr();
    let quants = q.quants.as_ptr() as *const u8;
    let lane_sums = sums.0.as_ptr() as *const u8;
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
            let (qa, qb) = ((i0 + 2 * rp) * nb + b, (i0 + 2 * rp + 1) * nb + b);
            // SAFETY: activation blocks qa and qb and their 8 lane sums are in bounds
            // (asserted above).
            let (y, s, dy) = unsafe {
                (
                    halves(quants.add(qa * QK), quants.add(qb * QK)),
                    halves(lane_sums.add(qa * 32), lane_sums.add(qb * 32)),
                    _mm512_mask_blend_ps(
                        0xFF00,
                        _mm512_set1_ps(*q.scales.get_unchecked(qa)),
                        _mm512_set1_ps(*q.scales.get_unchecked(qb)),
                    ),
                )
            };
            for rm in 0..RM {
                let dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), x[rm], y);
                let p = _mm512_cvtepi32_ps(_mm512_sub_epi32(dot, s));
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
