//! The GELU gate with the f32 → f16 rounding of the table lookup done 8 values at a time by
//! F16C (`cpu::ops::geglu_portable` is the reference; the results are the same).

use half::f16;

use crate::cpu::ops::geglu_one;

/// The same with the f32 → f16 rounding done 8 values at a time by F16C (`half`'s conversion is
/// a call per value).
#[target_feature(enable = "avx,f16c")]
pub(crate) fn geglu(gate: &mut [f32], up: &[f32], table: &[f16]) {
    use std::arch::x86_64::*;
    let mut bits = [0u16; 8];
    let mut gates = gate.chunks_exact_mut(8);
    let mut ups = up.chunks_exact(8);
    for (g, u) in (&mut gates).zip(&mut ups) {
        // SAFETY: `g` holds 8 values and `bits` 8 halves; unaligned load and store.
        unsafe {
            let v = _mm256_loadu_ps(g.as_ptr());
            _mm_storeu_si128(
                bits.as_mut_ptr() as *mut __m128i,
                _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(v),
            );
        }
        for j in 0..8 {
            g[j] = geglu_one(g[j], u[j], bits[j], table);
        }
    }
    for (g, &u) in gates.into_remainder().iter_mut().zip(ups.remainder()) {
        *g = geglu_one(*g, u, f16::from_f32(*g).to_bits(), table);
    }
}
