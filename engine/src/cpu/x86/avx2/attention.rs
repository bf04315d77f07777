//! ggml's flash-attention inner loops with AVX2, FMA and F16C, in the order llama.cpp's x86
//! build with AVX-512 runs them (`cpu::ggml_attention` holds the portable versions, which
//! these equal bit for bit — tested there): a 16-lane accumulator is two 256-bit halves, and
//! f16 values are converted by F16C, rounding to nearest even as `_mm512_cvtps_ph(x, 0)`.

use crate::cpu::f16::reduce_lanes;
use half::f16;
use std::arch::x86_64::*;

/// 8 halves at `p[i..]` as f32.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn load(p: &[f16], i: usize) -> __m256 {
    assert!(i + 8 <= p.len());
    // SAFETY: 8 halves in bounds (checked above); `f16` is a transparent u16.
    unsafe { _mm256_cvtph_ps(_mm_loadu_si128(p.as_ptr().add(i).cast())) }
}

/// `v` rounded to 8 halves at `p[i..]`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn store(p: &mut [f16], i: usize, v: __m256) {
    assert!(i + 8 <= p.len());
    // SAFETY: as `load`.
    unsafe {
        _mm_storeu_si128(
            p.as_mut_ptr().add(i).cast(),
            _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(v),
        )
    }
}

/// `ggml_vec_dot_f16` as its AVX-512 build computes it: 64 values a step into four 16-lane
/// accumulators, reduced 0+2, 1+3, 0+1 and across lanes; a tail added in double.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn dot_f16(x: &[f16], y: &[f16]) -> f32 {
    let n = x.len().min(y.len());
    let np = n & !63;
    // accumulator j is (acc[2j], acc[2j + 1]): lanes 0..8 and 8..16
    let mut acc = [_mm256_setzero_ps(); 8];
    for i in (0..np).step_by(64) {
        for (h, a) in acc.iter_mut().enumerate() {
            let at = i + 8 * h;
            *a = _mm256_fmadd_ps(load(x, at), load(y, at), *a);
        }
    }
    let lo = _mm256_add_ps(_mm256_add_ps(acc[0], acc[4]), _mm256_add_ps(acc[2], acc[6]));
    let hi = _mm256_add_ps(_mm256_add_ps(acc[1], acc[5]), _mm256_add_ps(acc[3], acc[7]));
    let mut lanes = [0f32; 16];
    // SAFETY: 16 floats of room.
    unsafe {
        _mm256_storeu_ps(lanes.as_mut_ptr(), lo);
        _mm256_storeu_ps(lanes.as_mut_ptr().add(8), hi);
    }
    let mut sum = reduce_lanes(&lanes) as f64;
    for i in np..n {
        sum += (x[i].to_f32() * y[i].to_f32()) as f64;
    }
    sum as f32
}

/// `ggml_vec_mad_f16`: `y = f16(x · v + y)`, one rounding per value.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn mad_f16(y: &mut [f16], x: &[f16], v: f32) {
    let n = y.len().min(x.len());
    let vv = _mm256_set1_ps(v);
    let np = n & !7;
    for i in (0..np).step_by(8) {
        store(y, i, _mm256_fmadd_ps(load(x, i), vv, load(y, i)));
    }
    for i in np..n {
        y[i] = f16::from_f32(x[i].to_f32().mul_add(v, y[i].to_f32()));
    }
}

/// `ggml_vec_scale_f16`: `y = f16(y · v)`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn scale_f16(y: &mut [f16], v: f32) {
    let n = y.len();
    let vv = _mm256_set1_ps(v);
    let np = n & !7;
    for i in (0..np).step_by(8) {
        store(y, i, _mm256_mul_ps(load(y, i), vv));
    }
    for a in &mut y[np..] {
        *a = f16::from_f32(a.to_f32() * v);
    }
}

/// `ggml_vec_soft_max_f32` on a tile row, compiled with FMA (its `ggml_v_expf` is fused
/// multiply-adds: without FMA each would be a library call).
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn soft_max(row: &mut [f32], max: f32) -> f64 {
    crate::cpu::ggml_attention::soft_max_row(row, max)
}
