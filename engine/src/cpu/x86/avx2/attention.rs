//! Attention's inner loops with AVX2/F16C: the scores (`dot`, four keys at a time) and
//! `mad`, the same fused multiply-add chains as the portable ones in `cpu::attention`.

use crate::cpu::x86::hsum;
use half::f16;
use std::arch::x86_64::*;

#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn load_f16(p: &[f16], i: usize) -> __m256 {
    assert!(i + 8 <= p.len());
    // SAFETY: 8 halves in bounds (checked above); `f16` is a transparent u16.
    unsafe { _mm256_cvtph_ps(_mm_loadu_si128(p.as_ptr().add(i) as *const __m128i)) }
}

/// The scores of `q` against `keys` (1 to 4) consecutive keys of `k`: per key one 8-lane
/// FMA chain over `q.len()` (a multiple of 8) values, then `hsum`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn scores4(q: &[f32], k: &[f16], keys: usize) -> [f32; 4] {
    let d = q.len();
    assert!(keys <= 4 && k.len() >= keys * d && d.is_multiple_of(8));
    let mut acc = [_mm256_setzero_ps(); 4];
    for i in (0..d).step_by(8) {
        // SAFETY: i + 8 <= d.
        let qv = unsafe { _mm256_loadu_ps(q.as_ptr().add(i)) };
        for (j, a) in acc.iter_mut().enumerate().take(keys) {
            *a = _mm256_fmadd_ps(load_f16(k, j * d + i), qv, *a);
        }
    }
    std::array::from_fn(|j| hsum(acc[j]))
}

/// `out.len() == v.len()`, a multiple of 8.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn mad(out: &mut [f32], v: &[f16], p: f32) {
    let pv = _mm256_set1_ps(p);
    for i in (0..out.len()).step_by(8) {
        // SAFETY: i + 8 <= out.len() == v.len().
        unsafe {
            let o = out.as_mut_ptr().add(i);
            _mm256_storeu_ps(o, _mm256_fmadd_ps(pv, load_f16(v, i), _mm256_loadu_ps(o)));
        }
    }
}
