//! Attention with ggml's CPU flash-attention numerics, bit for bit (llama.cpp b11434,
//! `ggml/src/ggml-cpu/ops.cpp`, `ggml_compute_forward_flash_attn_ext_f16`), as its x86-64
//! build with AVX-512 computes them, on any CPU. llama.cpp's CPU path (flash attention on, an
//! f16 cache) picks one of three kernels per call, and each rounds differently:
//! - 64 query rows or more: the tiled kernel. Q stays f32; a tile of scores is a matrix
//!   product, so each score is one fused multiply-add chain over the head dimension in order;
//!   probabilities come from `ggml_v_expf` (a polynomial, not libm) and are summed 16 at a time
//!   (`ggml_vec_soft_max_f32`); the V tile is added by another matrix product.
//! - fewer rows: one query at a time (`…_one_chunk`). Q is rounded to f16, each score is
//!   `ggml_vec_dot_f16` (four 16-lane accumulators, then a fixed reduction), the softmax is
//!   updated key by key with libm's `expf`, and the weighted V sum is kept **in f16**, rounded
//!   after every key.
//! - one query (a decode step) over 512 cache cells or more: the same per-key loop over
//!   `THREADS` equal chunks of the cells, whose partial results are then merged in f32
//!   (`ggml_flash_attn_ext_reduce_partials`). The chunks follow ggml's thread count; this
//!   module uses llama.cpp's with two threads, the count the references were recorded with.
//!
//! Which cells a kernel visits, and in which order, is the cache's slot order; the number of
//! cells (`n_kv`, which decides the split) is llama.cpp's: the used cells padded to 256,
//! within the cache's size (`llama_kv_cache::get_n_kv`).

use half::f16;
use half::slice::HalfFloatSliceExt;
use rayon::prelude::*;

use super::GgmlAttentionKernels;
use super::attention::Inputs;
use super::gemm::gemm_acc;

/// Query rows from which ggml uses the tiled kernel (`ggml_fa_tile_config::Q`).
const TILE_Q: usize = 64;
/// Keys per tile of the tiled kernel (`ggml_fa_tile_config::KV`).
const TILE_KV: usize = 64;
/// Cells from which a one-query call is split (`use_split_kv_path`: `nek1 >= 512`).
const SPLIT_FROM: usize = 512;
/// ggml's threads for the split: llama.cpp run with `-t 2`, as the references were.
const THREADS: usize = 2;
/// `n_kv` is padded to this (`llama_kv_cache::get_n_kv`).
const N_KV_PAD: usize = 256;

/// llama.cpp's `n_kv` for a cache of `capacity` cells of which the first `filled` were used.
pub(crate) fn n_kv(capacity: usize, filled: usize) -> usize {
    capacity.min(N_KV_PAD.max(filled.div_ceil(N_KV_PAD) * N_KV_PAD))
}

/// Returns `[seq, n_head * d]`, as [`super::attention::attention`] does, with the inner loops
/// of `kernels`.
pub(crate) fn attention(x: &Inputs<'_>, kernels: &GgmlAttentionKernels) -> Vec<f32> {
    let (seq, n_head, d) = (x.seq, x.n_head, x.d);
    let mut out = super::scratch::overwritten(seq * n_head * d);
    // ggml's x86 build tiles any head size; our tile's V product takes multiples of 8 (every
    // Gemma's), and other sizes go one query at a time rather than fail
    if seq >= TILE_Q && d.is_multiple_of(8) {
        let items: Vec<(usize, usize)> = (0..n_head)
            .flat_map(|h| (0..seq).step_by(TILE_Q).map(move |q0| (h, q0)))
            .collect();
        let tiles: Vec<Vec<f32>> = items
            .par_iter()
            .map(|&(h, q0)| tiled(x, kernels, h, q0, TILE_Q.min(seq - q0)))
            .collect();
        for (&(h, q0), tile) in items.iter().zip(&tiles) {
            for (tq, row) in tile.chunks_exact(d).enumerate() {
                out[((q0 + tq) * n_head + h) * d..][..d].copy_from_slice(row);
            }
        }
    } else {
        let split = seq == 1 && x.cells >= SPLIT_FROM;
        out.par_chunks_mut(d).enumerate().for_each(|(idx, dst)| {
            let (qi, h) = (idx / n_head, idx % n_head);
            if split {
                split_query(x, kernels, h, qi, dst);
            } else {
                one_chunk(x, kernels, h, qi, 0..x.used).finish(dst);
            }
        });
    }
    out
}

/// `ggml_v_expf` (`vec.h`, the AVX-512 version) for one lane: exp through a degree-5
/// polynomial on the reduced argument and a scale by 2^n.
// only x86 tables (and the tests' reference loops) call it
#[cfg_attr(not(any(test, target_arch = "x86_64")), allow(dead_code))]
#[inline(always)]
fn ggml_expf(x: f32) -> f32 {
    let r = f32::from_bits(0x4b40_0000); // 0x1.8p23
    let z = x.mul_add(f32::from_bits(0x3fb8_aa3b), r); // 0x1.715476p+0
    let n = z - r;
    let b = (-n).mul_add(
        f32::from_bits(0x35bf_be8e),                  // 0x1.7f7d1cp-20
        (-n).mul_add(f32::from_bits(0x3f31_7200), x), // 0x1.62e4p-1
    );
    if n.abs() > 192.0 || n.is_nan() {
        return if n <= 0.0 { 0.0 } else { f32::INFINITY };
    }
    let u = b * b;
    let j = f32::from_bits(0x3c07_2010) // 0x1.0e4020p-7
        .mul_add(b, f32::from_bits(0x3d2b_9f17)) // 0x1.573e2ep-5
        .mul_add(
            u,
            f32::from_bits(0x3e2a_af33).mul_add(b, f32::from_bits(0x3eff_fedb)), // 0x1.555e66p-3, 0x1.fffdb6p-2
        )
        .mul_add(u, f32::from_bits(0x3f7f_fff6).mul_add(b, 1.0)); // 0x1.ffffecp-1
    // _mm512_scalef_ps: j · 2^n rounded once (exact in f64: |n| <= 192, then to f32)
    let two_n = f64::from_bits(((n as i64 + 1023) as u64) << 52);
    (j as f64 * two_n) as f32
}

/// `ggml_vec_soft_max_f32` on a tile row (64 scores): `exp(x - max)` in place, summed 16 at a
/// time into a double.
// only x86 tables (and the tests' reference loops) call it
#[cfg_attr(not(any(test, target_arch = "x86_64")), allow(dead_code))]
#[inline(always)]
pub(crate) fn soft_max_row(row: &mut [f32], max: f32) -> f64 {
    let mut sum = 0f64;
    for group in row.chunks_exact_mut(16) {
        let mut lanes = [0f32; 16];
        for (lane, s) in lanes.iter_mut().zip(group.iter_mut()) {
            *s = ggml_expf(*s - max);
            *lane = *s;
        }
        sum += super::f16::reduce_lanes(&lanes) as f64;
    }
    sum
}

/// The tiled kernel for queries `q0..q0 + rows` of head `h` (`…_flash_attn_ext_tiled`): each
/// score one fused multiply-add chain over the head dimension and the V tile added by another
/// (`simd_gemm`, which [`gemm_acc`] follows), the softmax through `ggml_v_expf`.
fn tiled(
    x: &Inputs<'_>,
    kernels: &GgmlAttentionKernels,
    h: usize,
    q0: usize,
    rows: usize,
) -> Vec<f32> {
    let d = x.d;
    let (k, v) = x.kv(h);
    let q = &x.q[(h * x.seq + q0) * d..][..rows * d];
    let mut out = vec![0f32; rows * d];
    let mut m = vec![f32::NEG_INFINITY; rows];
    let mut s = vec![0f32; rows];
    let mut k32 = vec![0f32; TILE_KV * d];
    let mut k_t = vec![0f32; d * TILE_KV];
    let mut v32 = vec![0f32; TILE_KV * d];
    let mut scores = vec![0f32; rows * TILE_KV];
    for ic in (0..x.used).step_by(TILE_KV) {
        let kv = TILE_KV.min(x.used - ic);
        let seen = |tq: usize, tk: usize| tk < kv && x.vis.visible(ic + tk, x.start + q0 + tq);
        if !(0..rows).any(|tq| (0..kv).any(|tk| seen(tq, tk))) {
            continue;
        }
        // K tile as f32, transposed to [d, TILE_KV], zero past the live keys
        k32[kv * d..].fill(0.0);
        k[ic * d..(ic + kv) * d].convert_to_f32_slice(&mut k32[..kv * d]);
        super::transpose::transpose_into(&k32, TILE_KV, d, &mut k_t);
        scores.fill(0.0);
        gemm_acc(&mut scores, q, &k_t, rows, d, TILE_KV);
        for (tq, row) in scores.chunks_exact_mut(TILE_KV).enumerate() {
            // ggml scales by `kq_scale`, divided by the cap first where there is one
            if let Some(cap) = x.softcap {
                let scale = x.kq_scale / cap;
                row.iter_mut().for_each(|v| *v = cap * (*v * scale).tanh());
            } else {
                row.iter_mut().for_each(|v| *v *= x.kq_scale);
            }
            for (tk, sv) in row.iter_mut().enumerate() {
                if !seen(tq, tk) {
                    *sv = f32::NEG_INFINITY;
                }
            }
        }
        v32[kv * d..].fill(0.0);
        v[ic * d..(ic + kv) * d].convert_to_f32_slice(&mut v32[..kv * d]);
        for tq in 0..rows {
            let row = &mut scores[tq * TILE_KV..][..TILE_KV];
            let tile_max = row.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b));
            if tile_max == f32::NEG_INFINITY {
                row.fill(0.0);
                continue;
            }
            let new_max = m[tq].max(tile_max);
            if new_max > m[tq] {
                let ms = (m[tq] - new_max).exp();
                out[tq * d..][..d].iter_mut().for_each(|o| *o *= ms);
                s[tq] *= ms;
            }
            m[tq] = new_max;
            s[tq] = (s[tq] as f64 + (kernels.soft_max)(row, new_max)) as f32;
        }
        gemm_acc(&mut out, &scores, &v32, rows, TILE_KV, d);
    }
    for (tq, acc) in out.chunks_exact_mut(d).enumerate() {
        let inv = if s[tq] == 0.0 { 0.0 } else { 1.0 / s[tq] };
        acc.iter_mut().for_each(|o| *o *= inv);
    }
    out
}

/// The kernels one lane at a time, each loop as the AVX-512 build runs it: the reference the
/// tables' kernels are tested against.
#[cfg(test)]
pub(crate) mod portable {
    use half::f16;

    /// `ggml_vec_dot_f16` (AVX-512: four 16-lane f32 accumulators over steps of 64 values,
    /// reduced 0+2, 1+3, 0+1, then across lanes; the rest one by one in double).
    pub(crate) fn dot_f16(x: &[f16], y: &[f16]) -> f32 {
        let n = x.len().min(y.len());
        let np = n & !63;
        let mut acc = [[0f32; 16]; 4];
        for i in (0..np).step_by(64) {
            for (j, a) in acc.iter_mut().enumerate() {
                for (l, lane) in a.iter_mut().enumerate() {
                    let at = i + j * 16 + l;
                    *lane = x[at].to_f32().mul_add(y[at].to_f32(), *lane);
                }
            }
        }
        let add =
            |a: [f32; 16], b: [f32; 16]| -> [f32; 16] { std::array::from_fn(|l| a[l] + b[l]) };
        let lanes = add(add(acc[0], acc[2]), add(acc[1], acc[3]));
        let mut sum = crate::cpu::f16::reduce_lanes(&lanes) as f64;
        for i in np..n {
            sum += (x[i].to_f32() * y[i].to_f32()) as f64;
        }
        sum as f32
    }

    /// `ggml_vec_mad_f16`: `y = f16(fma(x, v, y))`.
    pub(crate) fn mad_f16(y: &mut [f16], x: &[f16], v: f32) {
        for (a, &xv) in y.iter_mut().zip(x) {
            *a = f16::from_f32(xv.to_f32().mul_add(v, a.to_f32()));
        }
    }

    /// `ggml_vec_scale_f16`.
    pub(crate) fn scale_f16(y: &mut [f16], v: f32) {
        y.iter_mut()
            .for_each(|a| *a = f16::from_f32(a.to_f32() * v));
    }

    pub(crate) fn soft_max(row: &mut [f32], max: f32) -> f64 {
        super::soft_max_row(row, max)
    }

    pub(crate) const KERNELS: crate::cpu::GgmlAttentionKernels = crate::cpu::GgmlAttentionKernels {
        dot_f16,
        mad_f16,
        scale_f16,
        soft_max,
    };
}

/// One query's running result over some cells: max, sum and the weighted V sum (still to be
/// divided by the sum).
struct Partial {
    max: f32,
    sum: f32,
    acc: Vec<f32>,
}

impl Partial {
    fn finish(&self, out: &mut [f32]) {
        let inv = if self.sum == 0.0 { 0.0 } else { 1.0 / self.sum };
        for (o, &a) in out.iter_mut().zip(&self.acc) {
            *o = a * inv;
        }
    }
}

/// `…_one_chunk` for query `qi` of head `h` over the cells `range`: Q rounded to f16, a score
/// per visible key, the softmax updated key by key and the V sum kept in f16.
fn one_chunk(
    x: &Inputs<'_>,
    kernels: &GgmlAttentionKernels,
    h: usize,
    qi: usize,
    range: std::ops::Range<usize>,
) -> Partial {
    let d = x.d;
    let (k, v) = x.kv(h);
    let mut q = vec![f16::ZERO; d];
    q.convert_from_f32_slice(x.query(h, qi));
    let pos = x.start + qi;
    let mut max = f32::NEG_INFINITY;
    let mut sum = 0f32;
    let mut acc = vec![f16::ZERO; d];
    for ic in range {
        if ic >= x.used || !x.vis.visible(ic, pos) {
            continue;
        }
        let mut s = (kernels.dot_f16)(&k[ic * d..][..d], &q);
        match x.softcap {
            Some(cap) => s = cap * (s * (x.kq_scale / cap)).tanh(),
            None => s *= x.kq_scale,
        }
        let (ms, vs);
        if s > max {
            ms = (max - s).exp();
            max = s;
            vs = 1.0;
            (kernels.scale_f16)(&mut acc, ms);
        } else {
            ms = 1.0;
            vs = (s - max).exp();
        }
        (kernels.mad_f16)(&mut acc, &v[ic * d..][..d], vs);
        sum = sum.mul_add(ms, vs);
    }
    let mut acc32 = vec![0f32; d];
    acc.convert_to_f32_slice(&mut acc32);
    Partial {
        max,
        sum,
        acc: acc32,
    }
}

/// A decode step over `x.cells` ≥ 512 cells: [`THREADS`] chunks, merged as
/// `ggml_flash_attn_ext_reduce_partials` merges them.
fn split_query(
    x: &Inputs<'_>,
    kernels: &GgmlAttentionKernels,
    h: usize,
    qi: usize,
    out: &mut [f32],
) {
    let cells = x.cells;
    let chunk = cells.div_ceil(THREADS);
    let mut total = Partial {
        max: f32::NEG_INFINITY,
        sum: 0.0,
        acc: vec![0.0; x.d],
    };
    for t in 0..THREADS {
        let start = t * chunk;
        if start >= cells {
            continue;
        }
        let part = one_chunk(x, kernels, h, qi, start..(start + chunk).min(cells));
        if part.sum == 0.0 {
            continue;
        }
        let new_max = total.max.max(part.max);
        let scale_old = (total.max - new_max).exp();
        let scale_new = (part.max - new_max).exp();
        for (t_acc, &p_acc) in total.acc.iter_mut().zip(&part.acc) {
            *t_acc = t_acc.mul_add(scale_old, p_acc * scale_new);
        }
        total.sum = total.sum.mul_add(scale_old, part.sum * scale_new);
        total.max = new_max;
    }
    total.finish(out);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ggml_expf_is_close_to_exp_and_exact_at_zero() {
        assert_eq!(ggml_expf(0.0), 1.0);
        for i in -800..=0 {
            let x = i as f32 * 0.1;
            let (got, want) = (ggml_expf(x), x.exp());
            assert!(
                (got - want).abs() <= want * 3e-7 + f32::MIN_POSITIVE,
                "{x}: {got} {want}"
            );
        }
        assert_eq!(ggml_expf(f32::NEG_INFINITY), 0.0);
    }

    fn values(n: usize, seed: usize, scale: f32) -> Vec<f32> {
        (0..n)
            .map(|i| (((i + seed) * 7919 % 251) as f32 / 251.0 - 0.5) * scale)
            .collect()
    }

    fn halves(n: usize, seed: usize, scale: f32) -> Vec<f16> {
        values(n, seed, scale)
            .iter()
            .map(|&v| f16::from_f32(v))
            .collect()
    }

    /// Each table's inner loops against the one-lane-at-a-time reference, bit for bit, on
    /// lengths with and without a tail.
    #[test]
    fn table_kernels_equal_the_reference_bit_for_bit() {
        let tables: Vec<_> = crate::cpu::tables()
            .into_iter()
            .filter_map(|t| t.ggml_attention.as_ref().map(|k| (t.isa, k)))
            .collect();
        for (isa, k) in tables {
            for n in [64, 128, 256, 71, 8, 5] {
                let (x, y) = (halves(n, 1, 3.0), halves(n, 2, 3.0));
                let (got, want) = ((k.dot_f16)(&x, &y), (portable::dot_f16)(&x, &y));
                assert_eq!(got.to_bits(), want.to_bits(), "{isa:?} dot n {n}");
                let (mut a, mut b) = (halves(n, 3, 2.0), halves(n, 3, 2.0));
                (k.mad_f16)(&mut a, &x, 0.37);
                portable::mad_f16(&mut b, &x, 0.37);
                assert_eq!(a, b, "{isa:?} mad n {n}");
                (k.scale_f16)(&mut a, 0.61);
                portable::scale_f16(&mut b, 0.61);
                assert_eq!(a, b, "{isa:?} scale n {n}");
            }
            let mut row = values(TILE_KV, 4, 20.0);
            row[5] = f32::NEG_INFINITY;
            let mut want = row.clone();
            let (s, t) = (
                (k.soft_max)(&mut row, 9.0),
                portable::soft_max(&mut want, 9.0),
            );
            assert_eq!((s.to_bits(), row), (t.to_bits(), want), "{isa:?} soft_max");
        }
    }

    /// A causal window over `slots` cells, `seq` queries from `start`.
    fn run(
        kernels: &GgmlAttentionKernels,
        (seq, start, cells): (usize, usize, usize),
        window: usize,
        d: usize,
    ) -> (Vec<f32>, Vec<f32>) {
        use super::super::attention::{SlotPositions, Visibility};
        let (n_head, n_kv, slots) = (4, 2, start + seq);
        let q = values(n_head * seq * d, 5, 1.5);
        let (k, v) = (
            halves(n_kv * slots * d, 6, 1.5),
            halves(n_kv * slots * d, 7, 1.5),
        );
        let vis = Visibility {
            slot_pos: SlotPositions::Identity,
            window: Some(window),
            causal: true,
        };
        let inputs = Inputs {
            q: &q,
            k: &k,
            v: &v,
            slots,
            used: slots,
            n_head,
            n_kv,
            d,
            start,
            seq,
            vis: &vis,
            softcap: Some(30.0),
            kq_scale: 1.0,
            cells,
        };
        let out = attention(&inputs, kernels);
        // plain two-pass softmax attention in f64, soft-capped
        let mut want = vec![0f32; out.len()];
        for qi in 0..seq {
            for h in 0..n_head {
                let (kh, vh) = inputs.kv(h);
                let qp = start + qi;
                let qrow = inputs.query(h, qi);
                let scores: Vec<(usize, f64)> = (0..slots)
                    .filter(|&s| s <= qp && qp - s < window)
                    .map(|s| {
                        let dot: f64 = kh[s * d..][..d]
                            .iter()
                            .zip(qrow)
                            .map(|(a, &b)| a.to_f64() * b as f64)
                            .sum();
                        (s, 30.0 * (dot / 30.0).tanh())
                    })
                    .collect();
                let mx = scores.iter().map(|x| x.1).fold(f64::NEG_INFINITY, f64::max);
                let z: f64 = scores.iter().map(|x| (x.1 - mx).exp()).sum();
                for j in 0..d {
                    want[(qi * n_head + h) * d + j] = (scores
                        .iter()
                        .map(|&(s, sc)| (sc - mx).exp() / z * vh[s * d + j].to_f64())
                        .sum::<f64>()) as f32;
                }
            }
        }
        (out, want)
    }

    /// The three kernels (tiled, one query, a split decode step) compute attention; the one-query
    /// ones keep V in f16, hence the tolerance.
    #[test]
    fn each_kernel_computes_windowed_soft_capped_attention() {
        // the last: a head size the tile does not take goes one query at a time
        for (case, d) in [
            ((70, 30, 256), 64),
            ((3, 97, 256), 64),
            ((1, 700, 768), 64),
            ((1, 20, 256), 64),
            ((70, 30, 256), 36),
        ] {
            let (got, want) = run(&portable::KERNELS, case, 600, d);
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!((g - w).abs() < 4e-3, "{case:?} d {d} [{i}]: {g} vs {w}");
            }
        }
    }

    /// Whole attention through each table equals it through the reference loops, bit for bit.
    #[test]
    fn table_attention_equals_the_reference_bit_for_bit() {
        for t in crate::cpu::tables() {
            let Some(k) = t.ggml_attention.as_ref() else {
                continue;
            };
            for case in [(70, 30, 256), (3, 97, 256), (1, 700, 768)] {
                let got = run(k, case, 600, 64).0;
                let want = run(&portable::KERNELS, case, 600, 64).0;
                assert_eq!(got, want, "{:?} {case:?}", t.isa);
            }
        }
    }

    #[test]
    fn llamacpp_pads_n_kv_to_256_within_the_cache() {
        assert_eq!(n_kv(512, 1), 256);
        assert_eq!(n_kv(512, 257), 512);
        assert_eq!(n_kv(512, 600), 512);
        assert_eq!(n_kv(4096, 1119), 1280);
        assert_eq!(n_kv(100, 50), 100);
    }
}
