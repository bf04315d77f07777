//! `C += A · B` on small row-major f32 matrices: the two products of tiled attention (scores
//! `Q · Kᵀ` and `P · V`), as ggml's `simd_gemm` (`ggml-cpu/simd-gemm.h`) computes them. Every
//! output is one fused multiply-add chain over `k` in order, whatever the tiling, so a row's
//! result does not depend on how many rows are multiplied with it.

/// `c[m × n] += a[m × k] · b[k × n]`, all row-major; `n` a multiple of 8.
pub(crate) fn gemm_acc(c: &mut [f32], a: &[f32], b: &[f32], m: usize, k: usize, n: usize) {
    assert!(n.is_multiple_of(8), "gemm_acc: n must be a multiple of 8");
    assert!(c.len() >= m * n && a.len() >= m * k && b.len() >= k * n);
    #[cfg(target_arch = "x86_64")]
    {
        if avx2::available() {
            // SAFETY: the CPU features were detected; the lengths were checked above.
            unsafe { avx2::gemm_acc(c, a, b, m, k, n) };
            return;
        }
    }
    gemm_acc_portable(c, a, b, m, k, n)
}

fn gemm_acc_portable(c: &mut [f32], a: &[f32], b: &[f32], m: usize, k: usize, n: usize) {
    for i in 0..m {
        let c_row = &mut c[i * n..(i + 1) * n];
        for kk in 0..k {
            let x = a[i * k + kk];
            for (cv, &bv) in c_row.iter_mut().zip(&b[kk * n..(kk + 1) * n]) {
                *cv = x.mul_add(bv, *cv);
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    pub(super) fn available() -> bool {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    }

    /// Register tiles of `RM` rows × `RN` vectors of 8 columns, columns outermost: a strip of
    /// `b` (`k` × 16 values: 16 KiB at `k` = 256) stays in L1 while every row block of `a`
    /// passes over it. Rows past the last whole block go one at a time, columns past the last
    /// whole strip 8 at a time.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn gemm_acc(
        c: &mut [f32],
        a: &[f32],
        b: &[f32],
        m: usize,
        k: usize,
        n: usize,
    ) {
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiles_and_remainders_equal_the_plain_product_bit_for_bit() {
        let (m, k, n) = (7, 13, 40);
        let f = |i: usize| ((i * 7919 % 211) as f32 / 211.0 - 0.5) * 3.0;
        let a: Vec<f32> = (0..m * k).map(f).collect();
        let b: Vec<f32> = (0..k * n).map(|i| f(i + 5)).collect();
        let c0: Vec<f32> = (0..m * n).map(|i| f(i + 9)).collect();
        let mut want = c0.clone();
        gemm_acc_portable(&mut want, &a, &b, m, k, n);
        let mut got = c0;
        gemm_acc(&mut got, &a, &b, m, k, n);
        assert_eq!(got, want);
        // a row alone gives the same as in the batch
        let mut one = vec![0f32; n];
        let mut batch = vec![0f32; m * n];
        gemm_acc(&mut one, &a[3 * k..4 * k], &b, 1, k, n);
        gemm_acc(&mut batch, &a, &b, m, k, n);
        assert_eq!(&batch[3 * n..4 * n], &one[..]);
    }
}
