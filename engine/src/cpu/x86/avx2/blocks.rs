//! Q5_0 and Q8_0 weights against Q8_0 activations: ggml's AVX2 formulation (`ggml-cpu/arch/x86/quants.c`): `mul_sum_i8_pairs_float`
//! (sign trick + maddubs + madd), one fused multiply-add per block into 8 float lanes.
use crate::cpu::blocks::{LaneSums, OffsetGroup};
use crate::cpu::formats::{QK, q5_0::BYTES as Q5_0_BYTES, q8_0::BYTES as Q8_0_BYTES};
use crate::cpu::quantize::Q8Rows;
use crate::cpu::x86::{hsum, prefetch_tile};
use std::arch::x86_64::*;

#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn mul_sum_i8_pairs_float(x: __m256i, y: __m256i) -> __m256 {
    let ax = _mm256_sign_epi8(x, x);
    let sy = _mm256_sign_epi8(y, x);
    let dot = _mm256_maddubs_epi16(ax, sy);
    let sums = _mm256_madd_epi16(dot, _mm256_set1_epi16(1));
    _mm256_cvtepi32_ps(sums)
}

/// An f16 scale converted to f32 in all 8 lanes: a word broadcast and one F16C
/// conversion. (The `half` crate's conversion is a call per block; a scalar
/// insert-and-convert compiled to `vpinsrw` into the accumulator's register, which chained
/// every block behind the previous block's FMA.)
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn f16_splat(lo: u8, hi: u8) -> __m256 {
    _mm256_cvtph_ps(_mm_set1_epi16(i16::from_le_bytes([lo, hi])))
}

/// 32 bits → 32 bytes, 0xFF where the bit is set (ggml `bytes_from_bits_32`).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn bytes_from_bits_32(bits: u32) -> __m256i {
    let shuf = _mm256_setr_epi64x(
        0x0000000000000000,
        0x0101010101010101,
        0x0202020202020202,
        0x0303030303030303,
    );
    let r = _mm256_shuffle_epi8(_mm256_set1_epi32(bits as i32), shuf);
    let mask = _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe_u64 as i64);
    let r = _mm256_or_si256(r, mask);
    _mm256_cmpeq_epi8(r, _mm256_set1_epi64x(-1))
}

/// 16 bytes of nibbles → 32 bytes: low nibbles first, then high (ggml `bytes_from_nibbles_32`).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn bytes_from_nibbles_32(p: &[u8]) -> __m256i {
    assert!(p.len() >= 16);
    // SAFETY: 16 readable bytes, checked above; unaligned load.
    let tmp = unsafe { _mm_loadu_si128(p.as_ptr() as *const __m128i) };
    let bytes = _mm256_insertf128_si256(_mm256_castsi128_si256(tmp), _mm_srli_epi16(tmp, 4), 1);
    _mm256_and_si256(_mm256_set1_epi8(0x0F), bytes)
}

/// A Q5_0 block's 32 values as signed bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn q5_0_block(blk: &[u8]) -> __m256i {
    let qh = u32::from_le_bytes([blk[2], blk[3], blk[4], blk[5]]);
    let qx = bytes_from_nibbles_32(&blk[6..22]);
    // where the fifth bit is 0 the value is nibble - 16: set the high nibble to 0xF
    let hi = _mm256_andnot_si256(bytes_from_bits_32(qh), _mm256_set1_epi8(0xF0u8 as i8));
    _mm256_or_si256(qx, hi)
}

/// A Q5_0 block's values in offset form, `x + 16` (0..=31): nibble | fifth bit << 4.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn q5_0_offset_values(blk: &[u8], out: &mut [u8]) {
    assert!(blk.len() >= Q5_0_BYTES && out.len() >= QK);
    let qh = u32::from_le_bytes([blk[2], blk[3], blk[4], blk[5]]);
    let v = _mm256_or_si256(
        bytes_from_nibbles_32(&blk[6..22]),
        _mm256_and_si256(bytes_from_bits_32(qh), _mm256_set1_epi8(0x10)),
    );
    // SAFETY: 32 writable bytes, checked above; unaligned store.
    unsafe { _mm256_storeu_si256(out.as_mut_ptr() as *mut __m256i, v) };
}

/// `out[l] = 16 · Σ y[4l..4l + 4]` for one activation block.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn lane_sums(y: &[i8], out: &mut [i32]) {
    assert!(y.len() >= QK && out.len() >= 8);
    // SAFETY: 32 readable bytes and 8 writable lanes, checked above; unaligned.
    unsafe {
        let y = _mm256_loadu_si256(y.as_ptr() as *const __m256i);
        let s = _mm256_madd_epi16(
            _mm256_maddubs_epi16(_mm256_set1_epi8(16), y),
            _mm256_set1_epi16(1),
        );
        _mm256_storeu_si256(out.as_mut_ptr() as *mut __m256i, s);
    }
}

/// The offset-form Q5_0 prompt tile: weight rows × activation rows.
pub(crate) const OFFSET_TILE_M: usize = 2;
pub(crate) const OFFSET_TILE_N: usize = 4;

/// A whole offset group × activation rows `i0..i0 + rows` in `OFFSET_TILE_M` × `OFFSET_TILE_N`
/// tiles, the edges in 1 × 4 and 1 × 1 (see `cpu::OffsetGroupFn`).
#[target_feature(enable = "avx2,fma,f16c")]
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
    let mut i = 0;
    while i + OFFSET_TILE_N <= rows {
        let mut j = 0;
        while j + OFFSET_TILE_M <= width {
            // SAFETY: the caller's table was built where AVX2/FMA/F16C were detected.
            let acc =
                unsafe { offset_tile::<OFFSET_TILE_M, OFFSET_TILE_N>(group, j, q, sums, i0 + i) };
            store(j, i, acc.as_flattened(), OFFSET_TILE_M, OFFSET_TILE_N);
            j += OFFSET_TILE_M;
        }
        for j in j..width {
            // SAFETY: as above.
            let acc = unsafe { offset_tile::<1, OFFSET_TILE_N>(group, j, q, sums, i0 + i) };
            store(j, i, acc.as_flattened(), 1, OFFSET_TILE_N);
        }
        i += OFFSET_TILE_N;
    }
    for i in i..rows {
        for j in 0..width {
            // SAFETY: as above.
            let acc = unsafe { offset_tile::<1, 1>(group, j, q, sums, i0 + i) };
            store(j, i, acc.as_flattened(), 1, 1);
        }
    }
}

/// Rows `j..j + RM` of an offset group times activation rows `i0..i0 + RN`: per block,
/// `maddubs(v, y)`, pairs summed to i32 lanes, the lane sums of `y` subtracted — the
/// same lane integers as `mul_sum_i8_pairs_float` gives for `x = v - 16` — then the same
/// conversion, scale product and fused multiply-add as [`tile`].
#[target_feature(enable = "avx2,fma,f16c")]
#[allow(clippy::needless_range_loop)] // indices as in `tile`, whose loops this mirrors
pub(crate) unsafe fn offset_tile<const RM: usize, const RN: usize>(
    group: &OffsetGroup,
    j: usize,
    q: &Q8Rows,
    sums: &LaneSums,
    i0: usize,
) -> [[f32; RN]; RM] {
    let k = group.k;
    let nb = k / QK;
    assert!(
        (j + RM) * k <= group.values.len()
            && (j + RM) * nb <= group.scales.len()
            && (i0 + RN) * nb <= q.scales.len()
            && q.blocks_per_row == nb
            && sums.lanes.len() == q.scales.len() * 8
    );
    let ones = _mm256_set1_epi16(1);
    let v = group.values.as_ptr();
    let mut acc = [[_mm256_setzero_ps(); RN]; RM];
    for b in 0..nb {
        let mut x = [_mm256_setzero_si256(); RM];
        let mut d = [_mm256_setzero_ps(); RM];
        for rm in 0..RM {
            // SAFETY: rows j..j + RM of the group are in bounds (asserted above).
            unsafe {
                x[rm] = _mm256_loadu_si256(v.add((j + rm) * k + b * QK) as *const __m256i);
                d[rm] = _mm256_set1_ps(*group.scales.get_unchecked((j + rm) * nb + b));
            }
        }
        for rn in 0..RN {
            let qi = (i0 + rn) * nb + b;
            // SAFETY: activation block qi and its lane sums are in bounds (asserted above).
            let (y, s, dy) = unsafe {
                (
                    _mm256_loadu_si256(q.quants.as_ptr().add(qi * QK) as *const __m256i),
                    _mm256_loadu_si256(sums.lanes.as_ptr().add(qi * 8) as *const __m256i),
                    _mm256_set1_ps(*q.scales.get_unchecked(qi)),
                )
            };
            for rm in 0..RM {
                let dot = _mm256_madd_epi16(_mm256_maddubs_epi16(x[rm], y), ones);
                let p = _mm256_cvtepi32_ps(_mm256_sub_epi32(dot, s));
                acc[rm][rn] = _mm256_fmadd_ps(_mm256_mul_ps(d[rm], dy), p, acc[rm][rn]);
            }
        }
    }
    let mut out = [[0f32; RN]; RM];
    for rm in 0..RM {
        for rn in 0..RN {
            out[rm][rn] = hsum(acc[rm][rn]);
        }
    }
    out
}

/// Dots of `TILE_M` weight rows with activation rows `i0..i0 + TILE_N`: the same per-block
/// products and sums as `dot_q5_0`/`dot_q8_0` (so results are identical), with each weight
/// block decoded once and each activation block loaded once. `w` are consecutive rows of
/// one matrix, which the prefetch relies on (`prefetch_tile`).
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn tile<const Q5: bool, const TILE_M: usize, const TILE_N: usize>(
    w: [&[u8]; TILE_M],
    q: &Q8Rows,
    i0: usize,
    out: &mut [[f32; TILE_N]; TILE_M],
) {
    let bb = if Q5 { Q5_0_BYTES } else { Q8_0_BYTES };
    let nb = w[0].len() / bb;
    let mut acc = [[_mm256_setzero_ps(); TILE_N]; TILE_M];
    for b in 0..nb {
        let mut wx = [_mm256_setzero_si256(); TILE_M];
        let mut wd = [_mm256_setzero_ps(); TILE_M];
        prefetch_tile::<TILE_M>(w[0], b, bb);
        for rm in 0..TILE_M {
            let blk = &w[rm][b * bb..(b + 1) * bb];
            wd[rm] = f16_splat(blk[0], blk[1]);
            wx[rm] = if Q5 {
                q5_0_block(blk)
            } else {
                // SAFETY: a Q8_0 block has 32 quant bytes after its 2-byte scale.
                unsafe { _mm256_loadu_si256(blk.as_ptr().add(2) as *const __m256i) }
            };
        }
        // `acc` is [rm][rn]: this loop walks its second index, the activation row
        #[allow(clippy::needless_range_loop)]
        for rn in 0..TILE_N {
            let qi = (i0 + rn) * q.blocks_per_row + b;
            // SAFETY: block qi of the activation quants is in bounds (qi < m · blocks).
            let qy =
                unsafe { _mm256_loadu_si256(q.quants.as_ptr().add(qi * QK) as *const __m256i) };
            let dy = _mm256_set1_ps(q.scales[qi]);
            for rm in 0..TILE_M {
                let p = mul_sum_i8_pairs_float(wx[rm], qy);
                acc[rm][rn] = _mm256_fmadd_ps(_mm256_mul_ps(wd[rm], dy), p, acc[rm][rn]);
            }
        }
    }
    for rm in 0..TILE_M {
        for rn in 0..TILE_N {
            out[rm][rn] = hsum(acc[rm][rn]);
        }
    }
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_q5_0(w: &[u8], q: &Q8Rows, i: usize) -> f32 {
    let mut acc = _mm256_setzero_ps();
    let nb = w.len() / Q5_0_BYTES;
    for b in 0..nb {
        let blk = &w[b * Q5_0_BYTES..(b + 1) * Q5_0_BYTES];
        let qi = i * q.blocks_per_row + b;
        let d = _mm256_mul_ps(f16_splat(blk[0], blk[1]), _mm256_set1_ps(q.scales[qi]));
        let qx = q5_0_block(blk);
        let qy = unsafe { _mm256_loadu_si256(q.quants.as_ptr().add(qi * QK) as *const __m256i) };
        let p = mul_sum_i8_pairs_float(qx, qy);
        acc = _mm256_fmadd_ps(d, p, acc);
    }
    hsum(acc)
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_q8_0(w: &[u8], q: &Q8Rows, i: usize) -> f32 {
    let mut acc = _mm256_setzero_ps();
    let nb = w.len() / Q8_0_BYTES;
    for b in 0..nb {
        let blk = &w[b * Q8_0_BYTES..(b + 1) * Q8_0_BYTES];
        let qi = i * q.blocks_per_row + b;
        let d = _mm256_mul_ps(f16_splat(blk[0], blk[1]), _mm256_set1_ps(q.scales[qi]));
        let qx = unsafe { _mm256_loadu_si256(blk.as_ptr().add(2) as *const __m256i) };
        let qy = unsafe { _mm256_loadu_si256(q.quants.as_ptr().add(qi * QK) as *const __m256i) };
        let p = mul_sum_i8_pairs_float(qx, qy);
        acc = _mm256_fmadd_ps(d, p, acc);
    }
    hsum(acc)
}
