//! `gemm_acc` in NEON register tiles (`cpu::gemm` has the contract and the portable loop):
//! 4 rows × 8 columns (two vectors), `k` innermost, one fused multiply-add (`vfmaq_f32`) per
//! value in the same order as the portable `mul_add` chain, so the results are its, bit for
//! bit. ggml's `simd_gemm` (`ggml-cpu/simd-gemm.h`) has the same shape.

use std::arch::aarch64::*;

const RM: usize = 4;

#[target_feature(enable = "neon")]
pub(crate) fn gemm_acc(c: &mut [f32], a: &[f32], b: &[f32], m: usize, k: usize, n: usize) {
    assert!(n.is_multiple_of(8) && c.len() >= m * n && a.len() >= m * k && b.len() >= k * n);
    for j in (0..n).step_by(8) {
        let mut i = 0;
        while i + RM <= m {
            tile::<RM>(c, a, b, i, j, k, n);
            i += RM;
        }
        for i in i..m {
            tile::<1>(c, a, b, i, j, k, n);
        }
    }
}

/// Rows `i..i + R`, columns `j..j + 8`.
#[inline]
#[target_feature(enable = "neon")]
fn tile<const R: usize>(
    c: &mut [f32],
    a: &[f32],
    b: &[f32],
    i: usize,
    j: usize,
    k: usize,
    n: usize,
) {
    assert!((i + R) * n <= c.len() && (i + R) * k <= a.len() && k * n <= b.len() && j + 8 <= n);
    // SAFETY: every index below is within the bounds asserted above.
    unsafe {
        let mut acc = [[vdupq_n_f32(0.0); 2]; R];
        for (r, row) in acc.iter_mut().enumerate() {
            let p = c.as_ptr().add((i + r) * n + j);
            *row = [vld1q_f32(p), vld1q_f32(p.add(4))];
        }
        for kk in 0..k {
            let p = b.as_ptr().add(kk * n + j);
            let (b0, b1) = (vld1q_f32(p), vld1q_f32(p.add(4)));
            for (r, row) in acc.iter_mut().enumerate() {
                let x = vdupq_n_f32(*a.get_unchecked((i + r) * k + kk));
                row[0] = vfmaq_f32(row[0], x, b0);
                row[1] = vfmaq_f32(row[1], x, b1);
            }
        }
        for (r, row) in acc.iter().enumerate() {
            let p = c.as_mut_ptr().add((i + r) * n + j);
            vst1q_f32(p, row[0]);
            vst1q_f32(p.add(4), row[1]);
        }
    }
}
