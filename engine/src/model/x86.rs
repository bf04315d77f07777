//! AVX helpers shared by the CPU kernels (`q8_matmul`, `kquant_matmul`, `flash_attention`).

use std::arch::x86_64::*;

/// Sum of the 8 lanes (ggml `hsum_float_8`).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn hsum(v: __m256) -> f32 {
    let lo = _mm256_castps256_ps128(v);
    let hi = _mm256_extractf128_ps(v, 1);
    let s = _mm_add_ps(lo, hi);
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    let s = _mm_add_ss(s, _mm_movehdup_ps(s));
    _mm_cvtss_f32(s)
}
