//! CPU attention with llama.cpp's numerics: ggml's `flash_attn_ext` CPU kernel
//! (`ggml/src/ggml-cpu/ops.cpp`, `ggml_compute_forward_flash_attn_ext_f16_one_chunk`), which is
//! what llama.cpp runs on CPU by default (`flash_attn = auto`). Per query row:
//! Q is rounded to f16; each visible key gives `s = dot(K, Q)` (f32 accumulation) plus the
//! mask; an online softmax keeps the running max `M` and sum `S`; the V accumulator is an
//! **f16** vector, rescaled and accumulated with rounding at every step; at the end it is
//! divided by `S`. Keys are visited in slot order. K and V hold f16-representable values.
//!
//! Working directly on the cache also avoids building a mask tensor and copying K/V.

use half::f16;
use rayon::prelude::*;

/// Which slots a query may see: the position each slot holds (`None`: empty) and, for
/// sliding-window layers, the window.
pub(crate) struct Visibility<'a> {
    pub slot_pos: SlotPositions<'a>,
    pub window: Option<usize>,
}

pub(crate) enum SlotPositions<'a> {
    /// Slot i holds position i (global layers).
    Identity,
    /// A ring: slot i holds `ring[i]`.
    Ring(&'a [Option<usize>]),
}

impl Visibility<'_> {
    #[inline]
    fn visible(&self, slot: usize, q_pos: usize) -> bool {
        let p = match self.slot_pos {
            SlotPositions::Identity => slot,
            SlotPositions::Ring(r) => match r[slot] {
                Some(p) => p,
                None => return false,
            },
        };
        p <= q_pos && self.window.is_none_or(|w| q_pos - p < w)
    }
}

/// `q`: `[n_head, seq, d]` (already scaled); `k`, `v`: the layer's cache `[n_kv, slots, d]`
/// of which the first `used` slots are live. Returns `[seq, n_head * d]`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn attention(
    q: &[f32],
    k: &[f16],
    v: &[f16],
    slots: usize,
    used: usize,
    n_head: usize,
    n_kv: usize,
    d: usize,
    start: usize,
    seq: usize,
    vis: &Visibility<'_>,
) -> Vec<f32> {
    let group = n_head / n_kv;
    let mut out = vec![0f32; seq * n_head * d];
    // one work item per (query, head): out row layout [seq, n_head, d]
    out.par_chunks_mut(d).enumerate().for_each(|(idx, dst)| {
        let qi = idx / n_head;
        let h = idx % n_head;
        let kvh = h / group;
        let qrow = &q[(h * seq + qi) * d..(h * seq + qi + 1) * d];
        let kbase = kvh * slots * d;
        one_row(
            qrow,
            &k[kbase..kbase + used * d],
            &v[kbase..kbase + used * d],
            d,
            |s| vis.visible(s, start + qi),
            dst,
        );
    });
    out
}

fn one_row(
    q: &[f32],
    k: &[f16],
    v: &[f16],
    d: usize,
    visible: impl Fn(usize) -> bool,
    out: &mut [f32],
) {
    #[cfg(target_arch = "x86_64")]
    {
        if d % 32 == 0 && simd::available() {
            // SAFETY: AVX2, FMA and F16C were detected at run time; lengths are multiples of 32.
            unsafe { simd::one_row(q, k, v, d, visible, out) };
            return;
        }
    }
    one_row_scalar(q, k, v, d, visible, out)
}

fn one_row_scalar(
    q: &[f32],
    k: &[f16],
    v: &[f16],
    d: usize,
    visible: impl Fn(usize) -> bool,
    out: &mut [f32],
) {
    let q16: Vec<f32> = q.iter().map(|&x| f16::from_f32(x).to_f32()).collect();
    let mut acc = vec![f16::ZERO; d];
    let mut m = f32::NEG_INFINITY;
    let mut sum = 0f32;
    let used = k.len() / d;
    for slot in 0..used {
        if !visible(slot) {
            continue;
        }
        let krow = &k[slot * d..(slot + 1) * d];
        let s = dot(krow, &q16);
        let (ms, vs);
        if s > m {
            let old = m;
            m = s;
            ms = (old - m).exp();
            vs = 1.0;
            scale_f16(&mut acc, ms);
        } else {
            ms = 1.0;
            vs = (s - m).exp();
        }
        mad_f16(&mut acc, &v[slot * d..(slot + 1) * d], vs);
        sum = sum * ms + vs;
    }
    let inv = if sum == 0.0 { 0.0 } else { 1.0 / sum };
    for (o, a) in out.iter_mut().zip(&acc) {
        *o = a.to_f32() * inv;
    }
}

#[inline]
fn dot(a: &[f16], b: &[f32]) -> f32 {
    // 8 independent lanes, as ggml's SIMD dot keeps several accumulators.
    let mut lanes = [0f32; 8];
    let chunks = a.len() / 8;
    for c in 0..chunks {
        for l in 0..8 {
            lanes[l] += a[c * 8 + l].to_f32() * b[c * 8 + l];
        }
    }
    let mut s: f32 = lanes.iter().sum();
    for i in chunks * 8..a.len() {
        s += a[i].to_f32() * b[i];
    }
    s
}

/// `acc = f16(f32(acc) * s)`, ggml's `ggml_vec_scale_f16`.
#[inline]
fn scale_f16(acc: &mut [f16], s: f32) {
    for a in acc.iter_mut() {
        *a = f16::from_f32(a.to_f32() * s);
    }
}

/// `acc = f16(f32(acc) + v * s)`, ggml's `ggml_vec_mad_f16` (V is f16-exact). Plain `a + x*s`
/// rather than `mul_add`: without compile-time FMA, `mul_add` is a slow libm call.
#[inline]
fn mad_f16(acc: &mut [f16], v: &[f16], s: f32) {
    for (a, &x) in acc.iter_mut().zip(v) {
        *a = f16::from_f32(a.to_f32() + x.to_f32() * s);
    }
}

#[cfg(target_arch = "x86_64")]
mod simd {
    //! The same loop with ggml's AVX2/F16C vector helpers: `ggml_vec_dot_f16` (four 8-lane
    //! FMA accumulators over 32-element steps), `ggml_vec_scale_f16` and `ggml_vec_mad_f16`
    //! (convert the f16 accumulator to f32, multiply or fuse-multiply-add, convert back with
    //! round-to-nearest-even).
    use super::super::x86::hsum;
    use half::f16;
    use std::arch::x86_64::*;

    pub(super) fn available() -> bool {
        std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma")
            && std::arch::is_x86_feature_detected!("f16c")
    }

    /// `f16` is a transparent 16-bit value: its slices are read as raw halves.
    #[inline]
    fn bits(p: &[f16]) -> &[u16] {
        // SAFETY: `half::f16` is `#[repr(transparent)]` over `u16`; same size and alignment.
        unsafe { std::slice::from_raw_parts(p.as_ptr() as *const u16, p.len()) }
    }

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn load_f16(p: &[u16], i: usize) -> __m256 {
        // SAFETY: callers pass i + 8 <= p.len().
        unsafe { _mm256_cvtph_ps(_mm_loadu_si128(p.as_ptr().add(i) as *const __m128i)) }
    }

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn store_f16(p: &mut [u16], i: usize, v: __m256) {
        // SAFETY: callers pass i + 8 <= p.len().
        unsafe {
            _mm_storeu_si128(
                p.as_mut_ptr().add(i) as *mut __m128i,
                _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(v),
            )
        }
    }

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn load_f32(p: &[f32], i: usize) -> __m256 {
        // SAFETY: callers pass i + 8 <= p.len().
        unsafe { _mm256_loadu_ps(p.as_ptr().add(i)) }
    }

    /// `d % 32 == 0`.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn one_row(
        q: &[f32],
        k: &[f16],
        v: &[f16],
        d: usize,
        visible: impl Fn(usize) -> bool,
        out: &mut [f32],
    ) {
        // Q rounded to f16, as ggml converts it for the f16 K dot product.
        let mut q16 = vec![0u16; d];
        for i in (0..d).step_by(8) {
            store_f16(&mut q16, i, load_f32(q, i));
        }
        let mut qf = vec![0f32; d];
        for i in (0..d).step_by(8) {
            // SAFETY: i + 8 <= d.
            unsafe { _mm256_storeu_ps(qf.as_mut_ptr().add(i), load_f16(&q16, i)) };
        }
        let mut acc = vec![0u16; d];
        let mut m = f32::NEG_INFINITY;
        let mut sum = 0f32;
        let used = k.len() / d;
        for slot in 0..used {
            if !visible(slot) {
                continue;
            }
            let krow = bits(&k[slot * d..(slot + 1) * d]);
            let mut s4 = [_mm256_setzero_ps(); 4];
            for i in (0..d).step_by(32) {
                for (j, s) in s4.iter_mut().enumerate() {
                    *s = _mm256_fmadd_ps(load_f16(krow, i + 8 * j), load_f32(&qf, i + 8 * j), *s);
                }
            }
            let s = hsum(_mm256_add_ps(
                _mm256_add_ps(s4[0], s4[2]),
                _mm256_add_ps(s4[1], s4[3]),
            ));
            let (ms, vs);
            if s > m {
                let old = m;
                m = s;
                ms = (old - m).exp();
                vs = 1.0;
                let f = _mm256_set1_ps(ms);
                for i in (0..d).step_by(8) {
                    let a = _mm256_mul_ps(load_f16(&acc, i), f);
                    store_f16(&mut acc, i, a);
                }
            } else {
                ms = 1.0;
                vs = (s - m).exp();
            }
            let vrow = bits(&v[slot * d..(slot + 1) * d]);
            let f = _mm256_set1_ps(vs);
            for i in (0..d).step_by(8) {
                let a = _mm256_fmadd_ps(load_f16(vrow, i), f, load_f16(&acc, i));
                store_f16(&mut acc, i, a);
            }
            sum = sum * ms + vs;
        }
        let inv = _mm256_set1_ps(if sum == 0.0 { 0.0 } else { 1.0 / sum });
        for i in (0..d).step_by(8) {
            // SAFETY: i + 8 <= d == out.len().
            unsafe {
                _mm256_storeu_ps(
                    out.as_mut_ptr().add(i),
                    _mm256_mul_ps(load_f16(&acc, i), inv),
                )
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn to_f16(x: &[f32]) -> Vec<f16> {
        x.iter().map(|&v| f16::from_f32(v)).collect()
    }

    /// Against a plain f32 softmax attention: equal within f16 accumulation error.
    #[test]
    fn matches_reference_softmax_attention() {
        let (n_head, n_kv, d, slots, seq) = (4, 2, 16, 10, 3);
        let start = 5;
        let f = |i: usize| ((i * 7919 % 113) as f32 / 113.0 - 0.5) * 0.7;
        let r16 = |x: f32| f16::from_f32(x).to_f32();
        let q: Vec<f32> = (0..n_head * seq * d).map(f).collect();
        let k: Vec<f32> = (0..n_kv * slots * d).map(|i| r16(f(i + 3))).collect();
        let v: Vec<f32> = (0..n_kv * slots * d).map(|i| r16(f(i + 11))).collect();
        let used = start + seq;
        let vis = Visibility {
            slot_pos: SlotPositions::Identity,
            window: Some(4),
        };
        let (k16, v16) = (to_f16(&k), to_f16(&v));
        let out = attention(
            &q, &k16, &v16, slots, used, n_head, n_kv, d, start, seq, &vis,
        );
        for qi in 0..seq {
            for h in 0..n_head {
                let kvh = h / (n_head / n_kv);
                let qp = start + qi;
                let qrow = &q[(h * seq + qi) * d..][..d];
                let scores: Vec<(usize, f32)> = (0..used)
                    .filter(|&s| s <= qp && qp - s < 4)
                    .map(|s| {
                        let kr = &k[(kvh * slots + s) * d..][..d];
                        (s, kr.iter().zip(qrow).map(|(a, b)| a * b).sum())
                    })
                    .collect();
                let mx = scores.iter().map(|x| x.1).fold(f32::NEG_INFINITY, f32::max);
                let z: f32 = scores.iter().map(|x| (x.1 - mx).exp()).sum();
                for j in 0..d {
                    let want: f32 = scores
                        .iter()
                        .map(|&(s, sc)| (sc - mx).exp() / z * v[(kvh * slots + s) * d + j])
                        .sum();
                    let got = out[(qi * n_head + h) * d + j];
                    assert!(
                        (want - got).abs() < 2e-3,
                        "q{qi} h{h} j{j}: {want} vs {got}"
                    );
                }
            }
        }
    }

    #[test]
    fn simd_and_scalar_rows_agree() {
        let d = 64;
        let used = 40;
        let f = |i: usize| ((i * 7919 % 113) as f32 / 113.0 - 0.5) * 3.0;
        let r16 = |x: f32| f16::from_f32(x).to_f32();
        let q: Vec<f32> = (0..d).map(f).collect();
        let k: Vec<f32> = (0..used * d).map(|i| r16(f(i + 5))).collect();
        let v: Vec<f32> = (0..used * d).map(|i| r16(f(i + 17))).collect();
        let mut a = vec![0f32; d];
        let mut b = vec![0f32; d];
        let (k, v) = (to_f16(&k), to_f16(&v));
        one_row(&q, &k, &v, d, |s| s % 3 != 1, &mut a);
        one_row_scalar(&q, &k, &v, d, |s| s % 3 != 1, &mut b);
        for (x, y) in a.iter().zip(&b) {
            // f16 accumulation: one f16 ulp of difference from fused vs separate rounding
            assert!((x - y).abs() <= 2e-3 * (1.0 + y.abs()), "{x} vs {y}");
        }
    }
}
