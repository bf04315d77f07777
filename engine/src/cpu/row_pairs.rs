//! Quantized activation rows rearranged for prompt tiles that read two activation rows per
//! register: the AVX-512 K-quant and Q5_0 offset tiles, one row per 256-bit half
//! ([`PairLayout::Halves`]), and i8mm's K-quant tiles, whose `smmla` operands are two rows of
//! 8 bytes ([`PairLayout::Smmla`]). What such a tile reads per register sits in one
//! contiguous run, where the row-major layouts
//! ([`super::quantize::Q8KRows`], [`Q8Rows`] with its [`super::blocks::LaneSums`]) need two
//! loads and an insert per register, and per-row terms the tiles used to recompute for every
//! weight row (Q4_K's sums of 32 quants for its mins term) are formed once per quantization.
//!
//! The values are the row-major ones moved, or combined exactly as the tiles combined them
//! (the sums of 32 are `_mm_hadd_epi16`'s wrapping i16 sums), so outputs do not change. Building
//! it copies the quants once: a matmul then reads each activation byte once per weight row, so
//! the copy is well under 1% of a prompt matmul's activation traffic.

use rayon::prelude::*;

use super::formats::{QK, QK_K};
use super::quantize::{BSUMS, Q8Rows};

/// Quants of one sub-block (32 values) of one row.
pub(crate) const SUB: usize = 32;
/// Sub-blocks per super-block.
pub(crate) const SUBS: usize = QK_K / SUB;

/// How a table's tiles want a pair's quants interleaved: in runs of [`PairLayout::run`] bytes,
/// alternating between the pair's two rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PairLayout {
    /// Runs of a sub-block (32 bytes): one row per 256-bit half of a 512-bit register.
    Halves,
    /// Runs of 8 bytes: each 16 bytes are an `smmla` operand, two rows of 8 (ggml's
    /// `vzip1q_s64` / `vzip2q_s64` of two rows, done once per quantization).
    #[cfg_attr(not(target_arch = "aarch64"), allow(dead_code))]
    Smmla,
}

impl PairLayout {
    /// Bytes of one row before the other row's turn.
    pub(crate) const fn run(self) -> usize {
        match self {
            PairLayout::Halves => SUB,
            PairLayout::Smmla => 8,
        }
    }
}

/// `m` rows of `k` quants in pairs: `[pair p][run][row 2p: run, row 2p + 1: run]`, runs of
/// `run` quants (a divisor of every block size, so each block of a pair stays contiguous:
/// `[pair][block][run]`). Rows past the last whole pair are left out. Across the compute
/// threads for prompts of 64 rows or more.
pub(crate) fn interleave_rows(qs: &[i8], m: usize, k: usize, run: usize) -> Vec<i8> {
    let mut out = vec![0i8; m / 2 * 2 * k];
    let pair = |(p, dst): (usize, &mut [i8])| {
        for half in 0..2 {
            let src = &qs[(2 * p + half) * k..][..k];
            for (r, src) in src.chunks_exact(run).enumerate() {
                dst[(2 * r + half) * run..][..run].copy_from_slice(src);
            }
        }
    };
    if k == 0 {
        return out;
    }
    if m >= 64 {
        out.par_chunks_exact_mut(2 * k).enumerate().for_each(pair);
    } else {
        out.chunks_exact_mut(2 * k).enumerate().for_each(pair);
    }
    out
}

/// Q8_K activations in row pairs (and quads), see the module docs. Rows past the last whole
/// pair (quad) are not in the pair (quad) arrays: AVX-512's tiles cover whole quads, i8mm's
/// whole pairs. The sums and scales are AVX-512's alone (`Halves`); for `Smmla` they are
/// empty, as its tiles read the row-major ones.
#[derive(Debug, Clone)]
pub(crate) struct Q8KPairs {
    pub layout: PairLayout,
    /// `[pair p][block][run][row 2p: run of quants, row 2p + 1: run of quants]`, runs of
    /// `layout.run()` quants.
    pub qs: Vec<i8>,
    /// `[pair p][block][row 2p: 16 sums of 16, row 2p + 1: 16 sums of 16]`.
    pub bsums: Vec<i16>,
    /// `[pair p][block][row 2p's d × 8, row 2p + 1's d × 8]`.
    pub d: Vec<f32>,
    /// `[quad q][block][row 4q + r: 8 sums of 32 quants]`, r = 0..4.
    pub sums32: Vec<i16>,
}

/// One pair's sums and scales to fill, with the pair's index.
type PairSums<'a, S> = (usize, (&'a mut [S], &'a mut [f32]));

/// Per pair and block: quants, sums of 16, scales.
pub(crate) const PAIR_QS: usize = 2 * QK_K;
pub(crate) const PAIR_BSUMS: usize = 2 * BSUMS;
pub(crate) const PAIR_D: usize = 16;
/// Per quad and block: sums of 32.
pub(crate) const QUAD_SUMS32: usize = 4 * SUBS;

impl Q8KPairs {
    /// The rearrangement of `m` rows of `nb` super-blocks (`d`, `qs`, `bsums` row-major as in
    /// [`super::quantize::Q8KRows`]); across the compute threads for prompts of 64 rows or more.
    pub(crate) fn new(
        layout: PairLayout,
        d: &[f32],
        qs: &[i8],
        bsums: &[i16],
        m: usize,
        nb: usize,
    ) -> Self {
        let (pairs, quads) = match layout {
            PairLayout::Halves => (m / 2, m / 4),
            PairLayout::Smmla => (0, 0),
        };
        let mut out = Q8KPairs {
            layout,
            qs: interleave_rows(qs, m, nb * QK_K, layout.run()),
            bsums: vec![0; pairs * nb * PAIR_BSUMS],
            d: vec![0.0; pairs * nb * PAIR_D],
            sums32: vec![0; quads * nb * QUAD_SUMS32],
        };
        let pair = |(p, (bsums_p, d_p)): PairSums<'_, i16>| {
            for i in 0..nb {
                for half in 0..2 {
                    let (row, blk) = (2 * p + half, (2 * p + half) * nb + i);
                    bsums_p[i * PAIR_BSUMS + half * BSUMS..][..BSUMS]
                        .copy_from_slice(&bsums[blk * BSUMS..][..BSUMS]);
                    d_p[i * PAIR_D + half * 8..][..8].fill(d[row * nb + i]);
                }
            }
        };
        let quad = |(q, sums_q): (usize, &mut [i16])| {
            for i in 0..nb {
                for r in 0..4 {
                    let blk = (4 * q + r) * nb + i;
                    let b = &bsums[blk * BSUMS..][..BSUMS];
                    for (l, s) in sums_q[i * QUAD_SUMS32 + r * SUBS..][..SUBS]
                        .iter_mut()
                        .enumerate()
                    {
                        *s = b[2 * l].wrapping_add(b[2 * l + 1]);
                    }
                }
            }
        };
        if m >= 64 {
            out.bsums
                .par_chunks_exact_mut(nb * PAIR_BSUMS)
                .zip(out.d.par_chunks_exact_mut(nb * PAIR_D))
                .enumerate()
                .for_each(pair);
            out.sums32
                .par_chunks_exact_mut(nb * QUAD_SUMS32)
                .enumerate()
                .for_each(quad);
        } else if nb > 0 {
            out.bsums
                .chunks_exact_mut(nb * PAIR_BSUMS)
                .zip(out.d.chunks_exact_mut(nb * PAIR_D))
                .enumerate()
                .for_each(pair);
            out.sums32
                .chunks_exact_mut(nb * QUAD_SUMS32)
                .enumerate()
                .for_each(quad);
        }
        out
    }
}

/// Q8_0 activations (with the offset form's lane sums) in row pairs; rows past the last whole
/// pair are not in it.
// only x86's offset tiles read it (as `LaneSums`)
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
#[derive(Debug, Clone)]
pub(crate) struct Q8Pairs {
    /// `[pair p][block][row 2p: 32 quants, row 2p + 1: 32 quants]`.
    pub quants: Vec<i8>,
    /// `[pair p][block][row 2p: 8 negated lane sums, row 2p + 1: 8]`: negated, so that they
    /// start the tile's `vpdpbusd` sums instead of being subtracted after them (the same i32).
    pub neg_lanes: Vec<i32>,
    /// `[pair p][block][row 2p's scale × 8, row 2p + 1's scale × 8]`.
    pub scales: Vec<f32>,
}

impl Q8Pairs {
    /// The rearrangement of `q` and its lane sums (`lanes`, 8 per block, row-major).
    pub(crate) fn new(q: &Q8Rows, lanes: &[i32]) -> Self {
        let nb = q.blocks_per_row;
        let m = q.scales.len().checked_div(nb).unwrap_or(0);
        let pairs = m / 2;
        let mut out = Q8Pairs {
            quants: interleave_rows(&q.quants, m, nb * QK, QK),
            neg_lanes: vec![0; pairs * nb * 16],
            scales: vec![0.0; pairs * nb * 16],
        };
        let pair = |(p, (lanes_p, scales_p)): PairSums<'_, i32>| {
            for b in 0..nb {
                for half in 0..2 {
                    let blk = (2 * p + half) * nb + b;
                    for (n, &l) in lanes_p[(2 * b + half) * 8..][..8]
                        .iter_mut()
                        .zip(&lanes[blk * 8..][..8])
                    {
                        *n = -l;
                    }
                    scales_p[(2 * b + half) * 8..][..8].fill(q.scales[blk]);
                }
            }
        };
        if m >= 64 {
            out.neg_lanes
                .par_chunks_exact_mut(nb * 16)
                .zip(out.scales.par_chunks_exact_mut(nb * 16))
                .enumerate()
                .for_each(pair);
        } else if nb > 0 {
            out.neg_lanes
                .chunks_exact_mut(nb * 16)
                .zip(out.scales.chunks_exact_mut(nb * 16))
                .enumerate()
                .for_each(pair);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_and_quads_hold_the_rows_values_in_place() {
        let (m, nb) = (6, 2);
        let qs: Vec<i8> = (0..m * nb * QK_K).map(|v| (v % 251) as i8).collect();
        let bsums: Vec<i16> = qs
            .chunks_exact(16)
            .map(|c| c.iter().map(|&q| q as i16).sum())
            .collect();
        let d: Vec<f32> = (0..m * nb).map(|v| v as f32 + 0.5).collect();
        let p = Q8KPairs::new(PairLayout::Halves, &d, &qs, &bsums, m, nb);
        assert_eq!(p.qs.len(), 3 * nb * PAIR_QS);
        let smmla = Q8KPairs::new(PairLayout::Smmla, &d, &qs, &bsums, m, nb);
        assert_eq!(p.sums32.len(), nb * QUAD_SUMS32);
        for row in 0..m {
            let (pair, half) = (row / 2, row % 2);
            for i in 0..nb {
                for s in 0..SUBS {
                    let at = ((pair * nb + i) * SUBS + s) * 2 * SUB + half * SUB;
                    assert_eq!(
                        p.qs[at..at + SUB],
                        qs[(row * nb + i) * QK_K + s * SUB..][..SUB]
                    );
                }
                // smmla operands: 8 quants of row 2p, the same 8 of row 2p + 1, ...
                for v in 0..QK_K {
                    let at = (pair * nb + i) * PAIR_QS + v / 8 * 16 + half * 8 + v % 8;
                    assert_eq!(smmla.qs[at], qs[(row * nb + i) * QK_K + v]);
                }
                let at = (pair * nb + i) * PAIR_BSUMS + half * BSUMS;
                assert_eq!(
                    p.bsums[at..at + BSUMS],
                    bsums[(row * nb + i) * BSUMS..][..BSUMS]
                );
                let at = (pair * nb + i) * PAIR_D + half * 8;
                assert!(p.d[at..at + 8].iter().all(|&v| v == d[row * nb + i]));
                if row < 4 {
                    let at = i * QUAD_SUMS32 + row * SUBS;
                    for l in 0..SUBS {
                        let quants = &qs[(row * nb + i) * QK_K + l * SUB..][..SUB];
                        let sum: i16 = quants.iter().map(|&q| q as i16).sum();
                        assert_eq!(p.sums32[at + l], sum);
                    }
                }
            }
        }
    }

    #[test]
    fn q8_pairs_hold_the_rows_blocks_lane_sums_and_scales() {
        let (m, k) = (5, 96);
        let nb = k / QK;
        let x: Vec<f32> = (0..m * k).map(|v| (v % 37) as f32 - 18.0).collect();
        let q = Q8Rows::quantize(&x, m, k);
        let lanes: Vec<i32> = (0..m * nb * 8).map(|v| v as i32 * 3 - 7).collect();
        let p = Q8Pairs::new(&q, &lanes);
        assert_eq!(p.quants.len(), 2 * nb * 2 * QK, "the fifth row has no pair");
        for row in 0..4 {
            let (pair, half) = (row / 2, row % 2);
            for b in 0..nb {
                let blk = row * nb + b;
                let at = (pair * nb + b) * 2 + half;
                assert_eq!(p.quants[at * QK..][..QK], q.quants[blk * QK..][..QK]);
                for l in 0..8 {
                    assert_eq!(p.neg_lanes[at * 8 + l], -lanes[blk * 8 + l]);
                    assert_eq!(p.scales[at * 8 + l], q.scales[blk]);
                }
            }
        }
    }
}
