//! `gemm_acc` in AVX2/FMA register tiles (`cpu::gemm` has the contract and the portable loop).

use std::arch::x86_64::*;

/// Register tiles of `RM` rows × `RN` vectors of 8 columns, columns outermost: a strip of
/// `b` (`k` × 16 values: 16 KiB at `k` = 256) stays in L1 while every row block of `a`
/// passes over it. Rows past the last whole block go one at a time, columns past the last
/// whole strip 8 at a time.
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn gemm_acc(c: &mut [f32], a: &[f32], b: &[f32], m: usize, k: usize, n: usize) {
    const RM: usize = 4;
    const RN: usize = 2;
    let mut j = 0;
    while j < n {
        let wide = j + 8 * RN <= n;
        let mut i = 0;
        while i + RM <= m {
            // SAFETY: rows i..i + RM and the strip's columns are in bounds (checked by the
            // caller: c is m × n, a is m × k, b is k × n).
            unsafe {
                if wide {
                    tile::<RM, RN>(c, a, b, i, j, k, n)
                } else {
                    tile::<RM, 1>(c, a, b, i, j, k, n)
                }
            };
            i += RM;
        }
        while i < m {
            unsafe {
                if wide {
                    tile::<1, RN>(c, a, b, i, j, k, n)
                } else {
                    tile::<1, 1>(c, a, b, i, j, k, n)
                }
            };
            i += 1;
        }
        j += if wide { 8 * RN } else { 8 };
    }
}

#[inline(always)]
unsafe fn tile<const RM: usize, const RN: usize>(
    c: &mut [f32],
    a: &[f32],
    b: &[f32],
    i: usize,
    j: usize,
    k: usize,
    n: usize,
) {
    unsafe {
        let mut acc = [[_mm256_setzero_ps(); RN]; RM];
        for (r, row) in acc.iter_mut().enumerate() {
            for (v, x) in row.iter_mut().enumerate() {
                *x = _mm256_loadu_ps(c.as_ptr().add((i + r) * n + j + 8 * v));
            }
        }
        for kk in 0..k {
            let mut bv = [_mm256_setzero_ps(); RN];
            for (v, x) in bv.iter_mut().enumerate() {
                *x = _mm256_loadu_ps(b.as_ptr().add(kk * n + j + 8 * v));
            }
            for (r, row) in acc.iter_mut().enumerate() {
                let x = _mm256_set1_ps(*a.get_unchecked((i + r) * k + kk));
                for (v, out) in row.iter_mut().enumerate() {
                    *out = _mm256_fmadd_ps(x, bv[v], *out);
                }
            }
        }
        for (r, row) in acc.iter().enumerate() {
            for (v, x) in row.iter().enumerate() {
                _mm256_storeu_ps(c.as_mut_ptr().add((i + r) * n + j + 8 * v), *x);
            }
        }
    }
}
