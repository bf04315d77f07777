//! CPU attention over the f16 cache. Two kernels, picked by the kernel table:
//!
//! - On x86-64 (the AVX2 and AVX-512 tables) it is llama.cpp's own CPU flash attention, bit for
//!   bit ([`super::ggml_attention`]): its tiled kernel for 64 query rows or more, its one-query
//!   kernel (V summed in f16) below that, its split for a decode step over 512 cells or more.
//!   That is what puts the CPU path at llama.cpp's own distance from the references (issue 43:
//!   random-weight Gemma 3 and 4 files amplify any last-bit difference in attention into
//!   0.05-0.14 mean |Δ logprob|). Like llama.cpp's, its result for a query depends on how many
//!   queries came with it, so a prompt prefilled in chunks (or typed as drafts) continues as
//!   llama.cpp's server continues a cached prompt, not bit for bit as one prefilled at once.
//! - Elsewhere (portable, NEON) it is the chunk-invariant kernel below, which follows ggml's
//!   tiled prompt kernel (`ggml/src/ggml-cpu/ops.cpp`, `ggml_compute_forward_flash_attn_ext_tiled`)
//!   for every batch. Q stays f32 and K and V (stored as f16) are read as f32; slots are
//!   visited in tiles of 64; an online softmax keeps each query row's running max `M` and sum
//!   `S` (rescaling the row's output when the max grows); the probabilities of a tile of 64
//!   queries times the V tile are one f32 matrix product ([`gemm_acc`]); at the end each row is
//!   divided by `S`. A tile no query may see is skipped, which is what makes a causal prompt
//!   cost half a square. Fewer than 64 query rows (decode, short drafts) take exactly the same
//!   steps one query at a time: each score is one 8-lane fused multiply-add chain over the head
//!   dimension and one horizontal sum in both paths, the softmax updates are the same code, and
//!   a V row is added with the same fused multiply-adds in the same order as the matrix product
//!   adds it. So a query's output does not depend on how many queries were computed with it,
//!   bit for bit. (llama.cpp's ARM build computes its one-query kernel in NEON f16 arithmetic,
//!   which this does not follow.)
//!
//! Working directly on the cache avoids building a mask tensor and copying K/V.

use half::f16;
use half::slice::HalfFloatSliceExt;
use rayon::prelude::*;

use super::gemm::gemm_acc;

/// Slots per tile (ggml `GGML_FA_TILE_KV`).
const TILE_KV: usize = 64;
/// Query rows per tile (ggml `GGML_FA_TILE_Q`), and the batch from which tiles are used.
const TILE_Q: usize = 64;

/// Which slots a query may see: the position each slot holds (`None`: empty), for
/// sliding-window layers the window, and whether later positions are hidden.
pub(crate) struct Visibility<'a> {
    pub slot_pos: SlotPositions<'a>,
    pub window: Option<usize>,
    /// Keys after the query's position are hidden (false: an image's block of rows sees all
    /// of itself, llama.cpp's non-causal batch, `llama_set_causal_attn`; and a vision
    /// encoder's patches see every patch). The window still hides keys too far behind.
    pub causal: bool,
}

pub(crate) enum SlotPositions<'a> {
    /// Slot i holds position i (global layers).
    Identity,
    /// A ring: slot i holds `ring[i]`.
    Ring(&'a [Option<usize>]),
}

impl Visibility<'_> {
    #[inline]
    pub(crate) fn visible(&self, slot: usize, q_pos: usize) -> bool {
        let p = match self.slot_pos {
            SlotPositions::Identity => slot,
            SlotPositions::Ring(r) => match r[slot] {
                Some(p) => p,
                None => return false,
            },
        };
        (p <= q_pos || !self.causal) && self.window.is_none_or(|w| q_pos.saturating_sub(p) < w)
    }
}

/// A layer's attention inputs: `q` `[n_head, seq, d]` (already scaled) for the positions
/// `start..start + seq`; `k`, `v` the layer's cache `[n_kv, slots, d]` of which the first
/// `used` slots are live.
pub(crate) struct Inputs<'a> {
    pub q: &'a [f32],
    pub k: &'a [f16],
    pub v: &'a [f16],
    pub slots: usize,
    pub used: usize,
    pub n_head: usize,
    pub n_kv: usize,
    pub d: usize,
    pub start: usize,
    pub seq: usize,
    pub vis: &'a Visibility<'a>,
    /// `cap · tanh(score / cap)` on every score (Gemma 2's attention soft-cap).
    pub softcap: Option<f32>,
    /// Every score is multiplied by this (ggml's `kq_scale` of `ggml_flash_attn_ext`): 1 for
    /// the language model, whose queries come scaled; a vision encoder's 1/√head_dim.
    pub kq_scale: f32,
    /// llama.cpp's `n_kv` for this step (`ggml_attention::n_kv`).
    pub cells: usize,
}

impl Inputs<'_> {
    pub(crate) fn query(&self, h: usize, qi: usize) -> &[f32] {
        &self.q[(h * self.seq + qi) * self.d..][..self.d]
    }

    /// K and V rows of head `h`'s KV head.
    pub(crate) fn kv(&self, h: usize) -> (&[f16], &[f16]) {
        let kvh = h / (self.n_head / self.n_kv);
        let base = kvh * self.slots * self.d;
        let len = self.used * self.d;
        (&self.k[base..base + len], &self.v[base..base + len])
    }
}

/// Returns `[seq, n_head * d]`; see the module docs.
pub(crate) fn attention(inputs: &Inputs<'_>) -> Vec<f32> {
    match super::kernels().ggml_attention.as_ref() {
        Some(kernels) => super::ggml_attention::attention(inputs, kernels),
        None if inputs.kq_scale != 1.0 => {
            // this kernel takes its queries scaled
            let q: Vec<f32> = inputs.q.iter().map(|v| v * inputs.kq_scale).collect();
            chunk_invariant(&Inputs {
                q: &q,
                kq_scale: 1.0,
                ..*inputs
            })
        }
        None => chunk_invariant(inputs),
    }
}

/// The kernel of the module docs: a query's output whatever the batch it came in.
fn chunk_invariant(inputs: &Inputs<'_>) -> Vec<f32> {
    let (seq, n_head, d) = (inputs.seq, inputs.n_head, inputs.d);
    // every row is written: a query tile's copy, or `one_query`'s (which starts from zeros)
    let mut out = super::scratch::overwritten(seq * n_head * d);
    // the tile's V product takes head sizes in multiples of 8 (every Gemma's); other sizes go
    // one query at a time, which gives the same results
    if seq >= TILE_Q && d.is_multiple_of(8) {
        let items: Vec<(usize, usize)> = (0..n_head)
            .flat_map(|h| (0..seq).step_by(TILE_Q).map(move |q0| (h, q0)))
            .collect();
        let tiles: Vec<Vec<f32>> = items
            .par_iter()
            .map(|&(h, q0)| query_tile(inputs, h, q0, TILE_Q.min(seq - q0)))
            .collect();
        for (&(h, q0), tile) in items.iter().zip(&tiles) {
            for (tq, row) in tile.chunks_exact(d).enumerate() {
                out[((q0 + tq) * n_head + h) * d..][..d].copy_from_slice(row);
            }
        }
    } else {
        // one work item per (query, head): out row layout [seq, n_head, d]
        out.par_chunks_mut(d).enumerate().for_each(|(idx, dst)| {
            let (qi, h) = (idx / n_head, idx % n_head);
            one_query(inputs, h, qi, dst);
        });
    }
    out
}

/// The running softmax of one query row: max and sum so far.
struct Softmax {
    max: f32,
    sum: f32,
}

impl Softmax {
    const EMPTY: Softmax = Softmax {
        max: f32::NEG_INFINITY,
        sum: 0.0,
    };

    /// Take a tile's scores (`-inf` where not visible): they become probabilities relative to
    /// the new max, and `out` (the row's weighted V sum so far) is rescaled if the max grew.
    /// ggml: `ggml_vec_max_f32`, `expf(Mold - Mnew)`, `ggml_vec_soft_max_f32` (sum in double).
    fn update(&mut self, scores: &mut [f32], out: &mut [f32]) {
        let tile_max = scores.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b));
        if tile_max == f32::NEG_INFINITY {
            scores.fill(0.0);
            return;
        }
        let new_max = self.max.max(tile_max);
        if new_max > self.max {
            let ms = (self.max - new_max).exp();
            out.iter_mut().for_each(|o| *o *= ms);
            self.sum *= ms;
        }
        self.max = new_max;
        let mut sum = 0f64;
        for s in scores.iter_mut() {
            *s = if *s == f32::NEG_INFINITY {
                0.0
            } else {
                (*s - new_max).exp()
            };
            sum += *s as f64;
        }
        self.sum += sum as f32;
    }

    fn finish(&self, out: &mut [f32]) {
        let inv = if self.sum == 0.0 { 0.0 } else { 1.0 / self.sum };
        out.iter_mut().for_each(|o| *o *= inv);
    }
}

/// Up to `TILE_Q` queries `q0..q0 + rows` of head `h`: `[rows, d]`.
fn query_tile(x: &Inputs<'_>, h: usize, q0: usize, rows: usize) -> Vec<f32> {
    let d = x.d;
    let (k, v) = x.kv(h);
    let q = &x.q[(h * x.seq + q0) * d..][..rows * d];
    let mut out = vec![0f32; rows * d];
    let mut softmax: Vec<Softmax> = (0..rows).map(|_| Softmax::EMPTY).collect();
    let mut widened = vec![0f32; TILE_KV * d];
    let mut scores = vec![0f32; rows * TILE_KV];
    for ic in (0..x.used).step_by(TILE_KV) {
        let kv = TILE_KV.min(x.used - ic);
        let k_tile = &k[ic * d..(ic + kv) * d];
        let mut any = false;
        for (tq, row) in scores.chunks_exact_mut(TILE_KV).enumerate() {
            let q_row = &q[tq * d..][..d];
            any |= tile_scores(
                q_row,
                k_tile,
                |tk| x.vis.visible(ic + tk, x.start + q0 + tq),
                row,
            );
        }
        if !any {
            continue;
        }
        for (tq, row) in scores.chunks_exact_mut(TILE_KV).enumerate() {
            soft_cap(row, x.softcap);
            softmax[tq].update(row, &mut out[tq * d..][..d]);
        }
        // the V tile as f32 [TILE_KV, d], zero past the live slots
        widened[kv * d..].fill(0.0);
        v[ic * d..(ic + kv) * d].convert_to_f32_slice(&mut widened[..kv * d]);
        gemm_acc(&mut out, &scores, &widened, rows, TILE_KV, d);
    }
    for (tq, row) in out.chunks_exact_mut(d).enumerate() {
        softmax[tq].finish(row);
    }
    out
}

/// One query `qi` of head `h` into `out` (`d` values): the steps of `query_tile` for one row.
fn one_query(x: &Inputs<'_>, h: usize, qi: usize, out: &mut [f32]) {
    let d = x.d;
    let (k, v) = x.kv(h);
    let q = x.query(h, qi);
    out.fill(0.0);
    let mut softmax = Softmax::EMPTY;
    let mut scores = [0f32; TILE_KV];
    let mad = mad_fn(d);
    for ic in (0..x.used).step_by(TILE_KV) {
        let kv = TILE_KV.min(x.used - ic);
        let k_tile = &k[ic * d..(ic + kv) * d];
        if !tile_scores(
            q,
            k_tile,
            |tk| x.vis.visible(ic + tk, x.start + qi),
            &mut scores,
        ) {
            continue;
        }
        soft_cap(&mut scores, x.softcap);
        softmax.update(&mut scores, out);
        for (tk, &p) in scores.iter().enumerate().take(kv) {
            if p != 0.0 {
                mad(out, &v[(ic + tk) * d..][..d], p);
            }
        }
    }
    softmax.finish(out);
}

/// ggml's CPU flash attention with `logit_softcap` (`ops.cpp`): the scale is divided by the
/// cap once, then `s = cap · tanhf(s · scale)`; masked scores stay `-inf`.
fn soft_cap(scores: &mut [f32], cap: Option<f32>) {
    let Some(cap) = cap else { return };
    let scale = 1.0 / cap;
    for s in scores.iter_mut().filter(|s| **s != f32::NEG_INFINITY) {
        *s = cap * (*s * scale).tanh();
    }
}

type MadFn = fn(&mut [f32], &[f16], f32);

/// The scores of query row `q` against the (up to 64) keys of `k_tile`, `-inf` for a slot the
/// query may not see and past the tile's keys; whether any slot was visible. Each score is
/// one 8-lane FMA chain over the head dimension, then a horizontal sum; keys go four at a
/// time so that four chains are in flight.
fn tile_scores(
    q: &[f32],
    k_tile: &[f16],
    visible: impl Fn(usize) -> bool,
    out: &mut [f32],
) -> bool {
    let d = q.len();
    let kv = k_tile.len() / d;
    let mut any = false;
    out.fill(f32::NEG_INFINITY);
    if let Some(simd) = super::kernels()
        .attention
        .as_ref()
        .filter(|_| d.is_multiple_of(8))
    {
        let mut tk = 0;
        while tk < kv {
            let keys = 4.min(kv - tk);
            let seen: [bool; 4] = std::array::from_fn(|j| j < keys && visible(tk + j));
            if seen.iter().any(|&s| s) {
                let s = (simd.scores4)(q, &k_tile[tk * d..(tk + keys) * d], keys);
                for j in 0..keys {
                    if seen[j] {
                        out[tk + j] = s[j];
                        any = true;
                    }
                }
            }
            tk += 4;
        }
        return any;
    }
    for tk in 0..kv {
        if visible(tk) {
            out[tk] = dot(&k_tile[tk * d..][..d], q);
            any = true;
        }
    }
    any
}

fn mad_fn(d: usize) -> MadFn {
    match super::kernels().attention.as_ref() {
        Some(simd) if d.is_multiple_of(32) => simd.mad,
        _ => mad,
    }
}

/// `k · q`: 8 lanes, each a fused multiply-add chain, then summed.
pub(crate) fn dot(k: &[f16], q: &[f32]) -> f32 {
    let mut lanes = [0f32; 8];
    let chunks = k.len() / 8;
    for c in 0..chunks {
        for (l, lane) in lanes.iter_mut().enumerate() {
            *lane = k[c * 8 + l].to_f32().mul_add(q[c * 8 + l], *lane);
        }
    }
    let mut s: f32 = lanes.iter().sum();
    for i in chunks * 8..k.len() {
        s += k[i].to_f32() * q[i];
    }
    s
}

/// `out += v · p`, one fused multiply-add per value, as the matrix product does it.
pub(crate) fn mad(out: &mut [f32], v: &[f16], p: f32) {
    for (o, x) in out.iter_mut().zip(v) {
        *o = p.mul_add(x.to_f32(), *o);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn to_f16(x: &[f32]) -> Vec<f16> {
        x.iter().map(|&v| f16::from_f32(v)).collect()
    }

    /// A plain two-pass softmax attention in f64 against `attention`, for a query count that
    /// takes the one-query path (`seq` < 64) or the tiled one.
    fn check_against_reference(seq: usize, start: usize, slots: usize, window: usize) {
        let (n_head, n_kv, d) = (4, 2, 32);
        let f = |i: usize| ((i * 7919 % 113) as f32 / 113.0 - 0.5) * 0.7;
        let r16 = |x: f32| f16::from_f32(x).to_f32();
        let q: Vec<f32> = (0..n_head * seq * d).map(f).collect();
        let k: Vec<f32> = (0..n_kv * slots * d).map(|i| r16(f(i + 3))).collect();
        let v: Vec<f32> = (0..n_kv * slots * d).map(|i| r16(f(i + 11))).collect();
        let used = start + seq;
        let vis = Visibility {
            slot_pos: SlotPositions::Identity,
            window: Some(window),
            causal: true,
        };
        let (k16, v16) = (to_f16(&k), to_f16(&v));
        let out = chunk_invariant(&Inputs {
            q: &q,
            k: &k16,
            v: &v16,
            slots,
            used,
            n_head,
            n_kv,
            d,
            start,
            seq,
            vis: &vis,
            softcap: None,
            kq_scale: 1.0,
            cells: 256,
        });
        for qi in 0..seq {
            for h in 0..n_head {
                let kvh = h / (n_head / n_kv);
                let qp = start + qi;
                let qrow = &q[(h * seq + qi) * d..][..d];
                let scores: Vec<(usize, f64)> = (0..used)
                    .filter(|&s| s <= qp && qp - s < window)
                    .map(|s| {
                        let kr = &k[(kvh * slots + s) * d..][..d];
                        (
                            s,
                            kr.iter()
                                .zip(qrow)
                                .map(|(a, b)| *a as f64 * *b as f64)
                                .sum(),
                        )
                    })
                    .collect();
                let mx = scores.iter().map(|x| x.1).fold(f64::NEG_INFINITY, f64::max);
                let z: f64 = scores.iter().map(|x| (x.1 - mx).exp()).sum();
                for j in 0..d {
                    let want: f64 = scores
                        .iter()
                        .map(|&(s, sc)| (sc - mx).exp() / z * v[(kvh * slots + s) * d + j] as f64)
                        .sum();
                    let got = out[(qi * n_head + h) * d + j] as f64;
                    assert!(
                        (want - got).abs() < 1e-5,
                        "seq {seq} q{qi} h{h} j{j}: {want} vs {got}"
                    );
                }
            }
        }
    }

    #[test]
    fn one_query_at_a_time_matches_reference_softmax_attention() {
        check_against_reference(3, 5, 10, 4);
        // more slots than one tile, a window cutting through tiles
        check_against_reference(5, 150, 160, 100);
    }

    #[test]
    fn query_tiles_match_reference_softmax_attention() {
        // a tail tile of queries, tiles of slots partly and wholly outside the window
        check_against_reference(70, 130, 210, 90);
        check_against_reference(64, 0, 64, 1000);
    }

    /// What a prompt prefilled in chunks relies on: a query's output is the same whether it
    /// is computed in a tile or alone, bit for bit.
    #[test]
    fn a_query_in_a_tile_equals_the_query_alone() {
        let (n_head, n_kv, d, slots) = (2, 1, 64, 200);
        let f = |i: usize| ((i * 7919 % 127) as f32 / 127.0 - 0.5) * 4.0;
        let q: Vec<f32> = (0..n_head * 100 * d).map(f).collect();
        let k = to_f16(&(0..slots * d).map(|i| f(i + 1)).collect::<Vec<_>>());
        let v = to_f16(&(0..slots * d).map(|i| f(i + 2)).collect::<Vec<_>>());
        let vis = Visibility {
            slot_pos: SlotPositions::Identity,
            window: None,
            causal: true,
        };
        let inputs = |q: &'_ [f32], used, start, seq| {
            chunk_invariant(&Inputs {
                q,
                k: &k,
                v: &v,
                slots,
                used,
                n_head,
                n_kv,
                d,
                start,
                seq,
                vis: &vis,
                softcap: None,
                kq_scale: 1.0,
                cells: 256,
            })
        };
        let tiled = inputs(&q, 100, 0, 100);
        for qi in [0, 37, 99] {
            for h in 0..n_head {
                let q1 = &q[(h * 100 + qi) * d..][..d];
                let mut alone_q = vec![0f32; n_head * d];
                alone_q[h * d..(h + 1) * d].copy_from_slice(q1);
                // the query alone, at its position, seeing the same slots
                let used = qi + 1;
                let alone = inputs(&alone_q, used, qi, 1);
                let a = &alone[h * d..(h + 1) * d];
                let t = &tiled[(qi * n_head + h) * d..][..d];
                assert_eq!(a, t, "q{qi} h{h}");
            }
        }
    }

    #[test]
    fn simd_and_portable_scores_and_mad_agree() {
        let d = 64;
        let f = |i: usize| ((i * 7919 % 113) as f32 / 113.0 - 0.5) * 3.0;
        let q: Vec<f32> = (0..d).map(f).collect();
        let k = to_f16(&(0..7 * d).map(|i| f(i + 5)).collect::<Vec<_>>());
        let mut got = [0f32; TILE_KV];
        assert!(tile_scores(&q, &k, |tk| tk != 2, &mut got));
        for tk in 0..TILE_KV {
            let want = if tk < 7 && tk != 2 {
                dot(&k[tk * d..][..d], &q)
            } else {
                f32::NEG_INFINITY
            };
            assert!((got[tk] - want).abs() < 1e-4 || got[tk] == want, "{tk}");
        }
        let mut a: Vec<f32> = (0..d).map(|i| f(i + 9)).collect();
        let mut b = a.clone();
        mad_fn(d)(&mut a, &k[..d], 0.37);
        mad(&mut b, &k[..d], 0.37);
        assert_eq!(a, b);
    }
}
