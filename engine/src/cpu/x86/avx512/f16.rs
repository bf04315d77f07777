//! F16 weights × f32 activations (already rounded through f16, as ggml's `vec_dot_type` F16
//! makes them) in 512-bit registers: `ggml_vec_dot_f16` for one activation row and llamafile's
//! tinyBLAS for more, lane for lane and in the same order as `cpu::f16`'s reference loops for
//! 16 lanes (tested bit for bit): F16C widens the weights exactly, every lane is one fused
//! multiply-add per value, the lanes are reduced by `cpu::f16::reduce_lanes`.

use std::arch::x86_64::*;

use crate::cpu::f16::{F16_TILE_COLS, F16_TILE_ROWS, reduce_lanes};

/// 16 f16 weights at value `at` of `w` (bytes), widened; lanes past `len` values are zero.
///
/// # Safety
/// `w` must hold `2 * (at + 16)` bytes, or `len - at < 16` and `2 * len` bytes.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
unsafe fn weights16(w: &[u8], at: usize, len: usize) -> __m512 {
    let p = w.as_ptr().wrapping_add(2 * at);
    if at + 16 <= len {
        // SAFETY: the caller's guarantee; unaligned load.
        _mm512_cvtph_ps(unsafe { _mm256_loadu_si256(p.cast()) })
    } else {
        let mask = (1u16 << (len - at)) - 1;
        // SAFETY: a masked load reads only the `len - at` values inside `w`.
        _mm512_cvtph_ps(unsafe { _mm256_maskz_loadu_epi16(mask, p.cast()) })
    }
}

/// 16 activations at `at` of `x`; lanes past `x.len()` are zero.
///
/// # Safety
/// `at < x.len()`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
unsafe fn values16(x: &[f32], at: usize) -> __m512 {
    let p = x.as_ptr().wrapping_add(at);
    if at + 16 <= x.len() {
        // SAFETY: in bounds; unaligned load.
        unsafe { _mm512_loadu_ps(p) }
    } else {
        let mask = (1u16 << (x.len() - at)) - 1;
        // SAFETY: a masked load reads only the lanes inside `x`.
        unsafe { _mm512_maskz_loadu_ps(mask, p) }
    }
}

#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
fn lanes(v: __m512) -> [f32; 16] {
    let mut out = [0f32; 16];
    // SAFETY: 16 floats into a 16-float array.
    unsafe { _mm512_storeu_ps(out.as_mut_ptr(), v) };
    out
}

/// `ggml_vec_dot_f16` with 16-lane accumulators (`cpu::f16::vec_dot::<16>`): steps of 64
/// values into four accumulators, reduced 0+2, 1+3, then across lanes; the tail value by
/// value in double.
///
/// # Panics
/// If `w` is not `2 * x.len()` bytes.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
pub(crate) fn vec_dot(w: &[u8], x: &[f32]) -> f32 {
    let k = x.len();
    assert_eq!(
        w.len(),
        2 * k,
        "F16 row and activation row lengths disagree"
    );
    let steps = k / 64;
    let mut acc = [_mm512_setzero_ps(); 4];
    for s in 0..steps {
        for (j, a) in acc.iter_mut().enumerate() {
            let at = s * 64 + 16 * j;
            // SAFETY: `at + 16 <= steps * 64 <= k`.
            let (wv, xv) = unsafe { (weights16(w, at, k), values16(x, at)) };
            *a = _mm512_fmadd_ps(wv, xv, *a);
        }
    }
    let sum = _mm512_add_ps(_mm512_add_ps(acc[0], acc[2]), _mm512_add_ps(acc[1], acc[3]));
    let mut sum = reduce_lanes(&lanes(sum)) as f64;
    for i in steps * 64..k {
        let wv = half::f16::from_le_bytes([w[2 * i], w[2 * i + 1]]).to_f32();
        sum += (wv * x[i]) as f64;
    }
    sum as f32
}

/// tinyBLAS for `F16_TILE_ROWS` weight rows × `F16_TILE_COLS` activation rows
/// (`cpu::f16::tiny_blas::<16>` for each output): one 16-lane accumulator per output over the
/// whole row, the last chunk zero-padded, then reduced.
///
/// # Panics
/// If a weight row is not `2 * k` bytes or an activation row not `k` values.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
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
    let mut acc = [[_mm512_setzero_ps(); F16_TILE_COLS]; F16_TILE_ROWS];
    for at in (0..k).step_by(16) {
        // SAFETY: `at < k`; every row holds `k` values (checked above).
        let wv: [__m512; F16_TILE_ROWS] =
            std::array::from_fn(|r| unsafe { weights16(w[r], at, k) });
        for (c, xr) in x.iter().enumerate() {
            // SAFETY: as above.
            let xv = unsafe { values16(xr, at) };
            for r in 0..F16_TILE_ROWS {
                acc[r][c] = _mm512_fmadd_ps(wv[r], xv, acc[r][c]);
            }
        }
    }
    for (o, a) in out.iter_mut().zip(&acc) {
        for (o, a) in o.iter_mut().zip(a) {
            *o = reduce_lanes(&lanes(*a));
        }
    }
}

/// tinyBLAS for one output.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
pub(crate) fn tiny_blas(w: &[u8], x: &[f32]) -> f32 {
    let k = x.len();
    assert_eq!(
        w.len(),
        2 * k,
        "F16 row and activation row lengths disagree"
    );
    let mut acc = _mm512_setzero_ps();
    for at in (0..k).step_by(16) {
        // SAFETY: `at < k` and both rows hold `k` values.
        let (wv, xv) = unsafe { (weights16(w, at, k), values16(x, at)) };
        acc = _mm512_fmadd_ps(wv, xv, acc);
    }
    reduce_lanes(&lanes(acc))
}
