//! F16 weights × f32 activations (already rounded through f16, as ggml's `vec_dot_type` F16
//! makes them) in 256-bit registers: `ggml_vec_dot_f16` for one activation row and llamafile's
//! tinyBLAS for more, lane for lane and in the same order as `cpu::f16`'s reference loops for
//! 8 lanes (tested bit for bit): F16C widens the weights exactly, every lane is one fused
//! multiply-add per value, the lanes are reduced by `cpu::f16::reduce_lanes`. The tile runs
//! its weight rows two at a time (AVX2 has 16 registers), each output still one accumulator
//! over the whole row.

use std::arch::x86_64::*;

use crate::cpu::f16::{F16_TILE_COLS, F16_TILE_ROWS, reduce_lanes};

/// 8 f16 weights at value `at` of `w` (bytes), widened; lanes past `len` values are zero.
///
/// # Safety
/// `w` must hold `2 * (at + 8)` bytes, or `len - at < 8` and `2 * len` bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn weights8(w: &[u8], at: usize, len: usize) -> __m256 {
    if at + 8 <= len {
        // SAFETY: the caller's guarantee; unaligned load.
        _mm256_cvtph_ps(unsafe { _mm_loadu_si128(w.as_ptr().add(2 * at).cast()) })
    } else {
        let mut part = [0u8; 16];
        part[..2 * (len - at)].copy_from_slice(&w[2 * at..2 * len]);
        // SAFETY: 16 bytes from a 16-byte array.
        _mm256_cvtph_ps(unsafe { _mm_loadu_si128(part.as_ptr().cast()) })
    }
}

/// 8 activations at `at` of `x`; lanes past `x.len()` are zero.
///
/// # Safety
/// `at < x.len()`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn values8(x: &[f32], at: usize) -> __m256 {
    if at + 8 <= x.len() {
        // SAFETY: in bounds; unaligned load.
        unsafe { _mm256_loadu_ps(x.as_ptr().add(at)) }
    } else {
        let mut part = [0f32; 8];
        part[..x.len() - at].copy_from_slice(&x[at..]);
        // SAFETY: 8 floats from an 8-float array.
        unsafe { _mm256_loadu_ps(part.as_ptr()) }
    }
}

#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn lanes(v: __m256) -> [f32; 8] {
    let mut out = [0f32; 8];
    // SAFETY: 8 floats into an 8-float array.
    unsafe { _mm256_storeu_ps(out.as_mut_ptr(), v) };
    out
}

/// `ggml_vec_dot_f16` with 8-lane accumulators (`cpu::f16::vec_dot::<8>`): steps of 32
/// values into four accumulators, reduced 0+2, 1+3, then across lanes; the tail value by
/// value in double.
///
/// # Panics
/// If `w` is not `2 * x.len()` bytes.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn vec_dot(w: &[u8], x: &[f32]) -> f32 {
    let k = x.len();
    assert_eq!(
        w.len(),
        2 * k,
        "F16 row and activation row lengths disagree"
    );
    let steps = k / 32;
    let mut acc = [_mm256_setzero_ps(); 4];
    for s in 0..steps {
        for (j, a) in acc.iter_mut().enumerate() {
            let at = s * 32 + 8 * j;
            // SAFETY: `at + 8 <= steps * 32 <= k`.
            let (wv, xv) = unsafe { (weights8(w, at, k), values8(x, at)) };
            *a = _mm256_fmadd_ps(wv, xv, *a);
        }
    }
    let sum = _mm256_add_ps(_mm256_add_ps(acc[0], acc[2]), _mm256_add_ps(acc[1], acc[3]));
    let mut sum = reduce_lanes(&lanes(sum)) as f64;
    for i in steps * 32..k {
        let wv = half::f16::from_le_bytes([w[2 * i], w[2 * i + 1]]).to_f32();
        sum += (wv * x[i]) as f64;
    }
    sum as f32
}

/// tinyBLAS for `F16_TILE_ROWS` weight rows × `F16_TILE_COLS` activation rows
/// (`cpu::f16::tiny_blas::<8>` for each output), two weight rows at a time: one 8-lane
/// accumulator per output over the whole row, the last chunk zero-padded, then reduced.
///
/// # Panics
/// If a weight row is not `2 * k` bytes or an activation row not `k` values.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn tile(
    w: [&[u8]; F16_TILE_ROWS],
    x: [&[f32]; F16_TILE_COLS],
    out: &mut [[f32; F16_TILE_COLS]; F16_TILE_ROWS],
) {
    let k = x[0].len();
    assert!(
        w.iter().all(|r| r.len() == 2 * k) && x.iter().all(|r| r.len() == k),
        "F16 rows and activation rows disagree"
    );
    const { assert!(F16_TILE_ROWS.is_multiple_of(2)) };
    for r0 in (0..F16_TILE_ROWS).step_by(2) {
        let mut acc = [[_mm256_setzero_ps(); F16_TILE_COLS]; 2];
        for at in (0..k).step_by(8) {
            // SAFETY: `at < k`; every row holds `k` values (checked above).
            let wv: [__m256; 2] = std::array::from_fn(|r| unsafe { weights8(w[r0 + r], at, k) });
            for (c, xr) in x.iter().enumerate() {
                // SAFETY: as above.
                let xv = unsafe { values8(xr, at) };
                for r in 0..2 {
                    acc[r][c] = _mm256_fmadd_ps(wv[r], xv, acc[r][c]);
                }
            }
        }
        for (r, a) in acc.iter().enumerate() {
            for (o, a) in out[r0 + r].iter_mut().zip(a) {
                *o = reduce_lanes(&lanes(*a));
            }
        }
    }
}

/// tinyBLAS for one output.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn tiny_blas(w: &[u8], x: &[f32]) -> f32 {
    let k = x.len();
    assert_eq!(
        w.len(),
        2 * k,
        "F16 row and activation row lengths disagree"
    );
    let mut acc = _mm256_setzero_ps();
    for at in (0..k).step_by(8) {
        // SAFETY: `at < k` and both rows hold `k` values.
        let (wv, xv) = unsafe { (weights8(w, at, k), values8(x, at)) };
        acc = _mm256_fmadd_ps(wv, xv, acc);
    }
    reduce_lanes(&lanes(acc))
}
