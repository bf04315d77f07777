//! `C += A · B` on small row-major f32 matrices: the two products of tiled attention (scores
//! `Q · Kᵀ` and `P · V`), as ggml's `simd_gemm` (`ggml-cpu/simd-gemm.h`) computes them. Every
//! output is one fused multiply-add chain over `k` in order, whatever the tiling, so a row's
//! result does not depend on how many rows are multiplied with it.

/// `c[m × n] += a[m × k] · b[k × n]`, all row-major; `n` a multiple of 8.
pub(crate) fn gemm_acc(c: &mut [f32], a: &[f32], b: &[f32], m: usize, k: usize, n: usize) {
    assert!(n.is_multiple_of(8), "gemm_acc: n must be a multiple of 8");
    assert!(c.len() >= m * n && a.len() >= m * k && b.len() >= k * n);
    (super::kernels().gemm_acc)(c, a, b, m, k, n)
}

/// The reference loop (every table's `gemm_acc` gives its results bit for bit).
pub(crate) fn gemm_acc_portable(c: &mut [f32], a: &[f32], b: &[f32], m: usize, k: usize, n: usize) {
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
        for table in crate::cpu::tables() {
            let mut got = c0.clone();
            (table.gemm_acc)(&mut got, &a, &b, m, k, n);
            assert_eq!(got, want, "{}", table.isa);
        }
        // a row alone gives the same as in the batch
        let mut one = vec![0f32; n];
        let mut batch = vec![0f32; m * n];
        gemm_acc(&mut one, &a[3 * k..4 * k], &b, 1, k, n);
        gemm_acc(&mut batch, &a, &b, m, k, n);
        assert_eq!(&batch[3 * n..4 * n], &one[..]);
    }
}
