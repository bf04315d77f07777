//! Quantized matrix multiplication for the block formats whose activations are quantized to
//! Q8_0 (Q5_0 and Q8_0 weights), with ggml's numerics: the work schedule. The inner loops are
//! the kernel table's (`cpu::kernels()`: portable, AVX2, …).
//!
//! candle 0.11 has no SIMD dot product for Q5_0 (its scalar `vec_dot_unopt` was 40% of decode
//! time) and multiplies prompt rows one at a time. This follows ggml: each activation row is
//! quantized to Q8_0 as `quantize_row_q8_0` does (scale 127/amax, round half to even, f16
//! scale); each block's integer dot is scaled by both f16 scales (`ggml_vec_dot_q5_0_q8_0`,
//! `ggml_vec_dot_q8_0_q8_0`). Decode (and batches under 64 rows) split the work across weight
//! rows, each read once for all activation rows of the call; prompts split it across
//! activation rows, each task passing its tiles over groups of weight rows kept in L2 and
//! writing whole output rows (see `fill_prompt`; where the table has offset tiles, Q5_0 groups
//! are unpacked once per task into an offset form that needs no sign trick, see
//! `fill_prompt_q5_0`).
//!
//! Tested against dequantize-then-multiply below, on every kernel table this CPU runs.

use half::f16;
use rayon::prelude::*;

use super::formats::{BlockFormat, QK, q5_0};
use super::quantize::Q8Rows;
use super::row_pairs::{PairLayout, Q8Pairs};
use super::scratch;
use super::{BlockKernels, Kernels, OffsetKernels, kernels};
use crate::gguf::WeightBytes;

/// A weight matrix `[n, k]` in ggml block layout (row-major, `k / 32` blocks per row).
#[derive(Debug)]
pub struct BlockMatrix {
    format: BlockFormat,
    data: WeightBytes,
    n: usize,
    k: usize,
}

impl BlockMatrix {
    pub fn new(
        format: BlockFormat,
        data: impl Into<WeightBytes>,
        n: usize,
        k: usize,
    ) -> Option<Self> {
        let data = data.into();
        (k.is_multiple_of(QK) && data.len() == n * (k / QK) * format.block_bytes())
            .then_some(BlockMatrix { format, data, n, k })
    }

    pub fn format(&self) -> BlockFormat {
        self.format
    }

    pub fn rows(&self) -> usize {
        self.n
    }

    pub fn cols(&self) -> usize {
        self.k
    }

    fn row_bytes(&self) -> usize {
        self.k / QK * self.format.block_bytes()
    }

    /// This format's kernels in `table`.
    fn kernels<'t>(&self, table: &'t Kernels) -> &'t BlockKernels {
        match self.format {
            BlockFormat::Q5_0 => &table.q5_0,
            BlockFormat::Q8_0 => &table.q8_0,
        }
    }

    /// Dequantize row `r` into `out` (`k` values): the embedding lookup.
    pub fn dequantize_row(&self, r: usize, out: &mut [f32]) {
        let row = &self.data[r * self.row_bytes()..(r + 1) * self.row_bytes()];
        for (b, out) in row
            .chunks_exact(self.format.block_bytes())
            .zip(out.chunks_exact_mut(QK))
        {
            self.format.dequantize(b, out);
        }
    }

    /// `x` `[m, k]` → `[m, n]` = x · Wᵀ.
    pub fn matmul(&self, x: &[f32], m: usize) -> Vec<f32> {
        Self::matmul_many(&[self], x, m).pop().unwrap_or_default()
    }

    /// Several matrices with the same input width times the same `x` `[m, k]`: the input is
    /// quantized once and every matrix's rows are split into one parallel loop, so a layer's
    /// Q, K and V (or gate and up) projections cost one fork-join instead of three (two).
    pub fn matmul_many(mats: &[&BlockMatrix], x: &[f32], m: usize) -> Vec<Vec<f32>> {
        Self::matmul_many_on(kernels(), mats, x, m)
    }

    /// [`Self::matmul_many`] with the kernels of `table`.
    pub(crate) fn matmul_many_on(
        table: &Kernels,
        mats: &[&BlockMatrix],
        x: &[f32],
        m: usize,
    ) -> Vec<Vec<f32>> {
        let Some(first) = mats.first() else {
            return Vec::new();
        };
        debug_assert!(
            mats.iter().all(|w| w.k == first.k),
            "matmul_many: widths differ"
        );
        let q = Q8Rows::quantize_on(table, x, m, first.k);
        let threads = rayon::current_num_threads();
        if m >= PROMPT_SPLIT_ROWS {
            // Prompts: tasks own runs of activation rows and write whole `[m, n]` output rows,
            // so no transpose follows (see `fill_prompt`). Every task unpacks the whole Q5_0
            // matrix to offset form, so tasks are few: two per thread (four per thread had
            // the unpacking at ~2.6% of a prefill; two took prefill from 601-618 to 630-642
            // tok/s here and left it unchanged beside a busy loop, where stealing still
            // balances the threads).
            let rows_per_task = (m / (threads * 2)).max(TILE_N).next_multiple_of(TILE_N);
            let mut outs: Vec<Vec<f32>> =
                mats.iter().map(|w| scratch::overwritten(m * w.n)).collect();
            let mut tasks: Vec<(&BlockMatrix, usize, &mut [f32])> = Vec::new();
            for (w, out) in mats.iter().zip(outs.iter_mut()) {
                for (t, dst) in out.chunks_mut(rows_per_task * w.n).enumerate() {
                    tasks.push((w, t * rows_per_task, dst));
                }
            }
            let offset = table.q5_0_offset.as_ref();
            let sums = offset
                .filter(|_| mats.iter().any(|w| w.format == BlockFormat::Q5_0))
                .map(|o| {
                    // the offset tiles that read pairs (AVX-512) want a block per half
                    let halves = table.row_pairs == Some(PairLayout::Halves);
                    (o, LaneSums::new(&q, o, halves))
                });
            tasks
                .into_par_iter()
                .for_each(|(w, i0, dst)| match (&sums, w.format) {
                    (Some((o, sums)), BlockFormat::Q5_0) => {
                        w.fill_prompt_q5_0(&q, o, sums, i0, dst)
                    }
                    _ => w.fill_prompt(w.kernels(table), &q, i0, dst),
                });
            return outs;
        }
        // out_t[r][i]: each task owns a contiguous run of one matrix's weight rows.
        let mut outs: Vec<Vec<f32>> = mats.iter().map(|w| scratch::overwritten(w.n * m)).collect();
        let mut tasks: Vec<(&BlockMatrix, usize, &mut [f32])> = Vec::new();
        for (w, out_t) in mats.iter().zip(outs.iter_mut()) {
            let rows_per_task = (w.n / (threads * 8)).clamp(16, 4096);
            for (t, dst) in out_t.chunks_mut(rows_per_task * m).enumerate() {
                tasks.push((w, t * rows_per_task, dst));
            }
        }
        tasks
            .into_par_iter()
            .for_each(|(w, r0, dst)| w.fill_rows(w.kernels(table), &q, m, r0, dst));
        if m == 1 {
            return outs;
        }
        mats.iter()
            .zip(outs)
            .map(|(w, out_t)| {
                let out = super::transpose::transpose(&out_t, w.n, m);
                scratch::release(out_t);
                out
            })
            .collect()
    }

    /// `dst[i * n + j]` = weight row `j` · activation row `i0 + i`, for the activation rows
    /// `dst` holds. Weight rows go in groups of `GROUP_ROWS` (56 KiB of Q8_0 at width 640),
    /// which stay in L2 while every activation tile of the task passes over them. (Q5_0 with
    /// AVX2 takes `fill_prompt_q5_0`, which also unpacks each group once.)
    fn fill_prompt(&self, table: &BlockKernels, q: &Q8Rows, i0: usize, dst: &mut [f32]) {
        let n = self.n;
        let rows = dst.len() / n;
        let row_bytes = self.row_bytes();
        let kernel = table.dot;
        for g0 in (0..n).step_by(GROUP_ROWS) {
            let g1 = (g0 + GROUP_ROWS).min(n);
            let bytes = &self.data[g0 * row_bytes..g1 * row_bytes];
            let row = |j: usize| &bytes[j * row_bytes..(j + 1) * row_bytes];
            let width = g1 - g0;
            let mut i = 0;
            if let Some(tile) = table.prompt {
                while i + TILE_N <= rows {
                    let mut j = 0;
                    while j + TILE_M <= width {
                        let w: [&[u8]; TILE_M] = std::array::from_fn(|rm| row(j + rm));
                        let mut acc = [[0f32; TILE_N]; TILE_M];
                        tile(w, q, i0 + i, &mut acc);
                        for (rm, acc_row) in acc.iter().enumerate() {
                            for (rn, &v) in acc_row.iter().enumerate() {
                                dst[(i + rn) * n + g0 + j + rm] = v;
                            }
                        }
                        j += TILE_M;
                    }
                    for j in j..width {
                        for rn in 0..TILE_N {
                            dst[(i + rn) * n + g0 + j] = kernel(row(j), q, i0 + i + rn);
                        }
                    }
                    i += TILE_N;
                }
            }
            for i in i..rows {
                for j in 0..width {
                    dst[i * n + g0 + j] = kernel(row(j), q, i0 + i);
                }
            }
        }
    }

    /// [`Self::fill_prompt`] for Q5_0 where the kernel table has offset tiles (AVX2), on each
    /// group unpacked to *offset* form: a
    /// Q5_0 value `x = v - 16` is kept as `v = x + 16` (0..=31, the nibble and fifth bit as
    /// they are) and the f16 scales as f32. `maddubs` takes `v` directly as its unsigned side,
    /// so no sign trick is needed, and `x·y = v·y - 16·y`: each 4-value lane subtracts
    /// `16 · Σ y` of its activation bytes ([`LaneSums`], once per activation block). The lane
    /// integers, hence every float operation after them, are those of the Q8_0 tile, so the
    /// results are identical; the tile does one vector op less per product (a subtraction
    /// instead of two sign ops) and keeps only `v`, not also its magnitude, live per row.
    fn fill_prompt_q5_0(
        &self,
        q: &Q8Rows,
        kernels: &OffsetKernels,
        sums: &LaneSums,
        i0: usize,
        dst: &mut [f32],
    ) {
        let n = self.n;
        let rows = dst.len() / n;
        let k = self.k;
        let nb = k / QK;
        let row_bytes = self.row_bytes();
        debug_assert_eq!(dst.len(), rows * n);
        let mut group = OffsetGroup {
            values: vec![0u8; GROUP_ROWS * k],
            scales: vec![0f32; GROUP_ROWS * nb],
            k,
        };
        for g0 in (0..n).step_by(GROUP_ROWS) {
            let g1 = (g0 + GROUP_ROWS).min(n);
            let width = g1 - g0;
            group.unpack(&self.data[g0 * row_bytes..g1 * row_bytes], kernels);
            (kernels.group)(&group, width, q, sums, i0, rows, dst, g0);
        }
    }

    /// `dst[j * m + i]` = weight row `r0 + j` · activation row `i`.
    fn fill_rows(&self, table: &BlockKernels, q: &Q8Rows, m: usize, r0: usize, dst: &mut [f32]) {
        let row_bytes = self.row_bytes();
        let kernel = table.dot;
        let tile = table.prompt;
        let tile_1 = table.decode;
        let rows = dst.len() / m;
        let row = |j: usize| &self.data[(r0 + j) * row_bytes..(r0 + j + 1) * row_bytes];
        let mut j = 0;
        if let Some(tile_1) = tile_1.filter(|_| m == 1) {
            while j + ROWS_1 <= rows {
                let w: [&[u8]; ROWS_1] = std::array::from_fn(|rm| row(j + rm));
                let mut acc = [[0f32; 1]; ROWS_1];
                tile_1(w, q, 0, &mut acc);
                for (rm, a) in acc.iter().enumerate() {
                    dst[j + rm] = a[0];
                }
                j += ROWS_1;
            }
        }
        // Prompt rows: 2 weight rows × 4 activation rows at a time, so each weight
        // block is decoded once per 4 rows and each activation block serves 2 rows.
        if let Some(tile) = tile.filter(|_| m >= TILE_N) {
            while j + TILE_M <= rows {
                let w: [&[u8]; TILE_M] = std::array::from_fn(|rm| row(j + rm));
                let mut i = 0;
                while i + TILE_N <= m {
                    let mut acc = [[0f32; TILE_N]; TILE_M];
                    tile(w, q, i, &mut acc);
                    for (rm, acc_row) in acc.iter().enumerate() {
                        dst[(j + rm) * m + i..][..TILE_N].copy_from_slice(acc_row);
                    }
                    i += TILE_N;
                }
                for i in i..m {
                    for (rm, w) in w.iter().enumerate() {
                        dst[(j + rm) * m + i] = kernel(w, q, i);
                    }
                }
                j += TILE_M;
            }
        }
        for j in j..rows {
            let w = row(j);
            for i in 0..m {
                dst[j * m + i] = kernel(w, q, i);
            }
        }
    }
}

/// Per activation block, the 8 lanes `16 · (y[4l] + y[4l+1] + y[4l+2] + y[4l+3])`: what the
/// offset form of Q5_0 subtracts (see `BlockMatrix::fill_prompt_q5_0`); with the activations
/// in row pairs too where the table's tiles read them so (`Kernels::row_pairs`).
// only x86's offset tiles read the sums and `k` (no other table has offset kernels)
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub struct LaneSums {
    pub(crate) lanes: Vec<i32>,
    pub(crate) pairs: Option<Q8Pairs>,
}

impl LaneSums {
    fn new(q: &Q8Rows, kernels: &OffsetKernels, row_pairs: bool) -> Self {
        let nb = q.blocks_per_row;
        let m = q.scales.len().checked_div(nb).unwrap_or(0);
        let mut lanes = vec![0i32; q.scales.len() * 8];
        let row = |(out, y): (&mut [i32], &[i8])| {
            for (out, y) in out.chunks_exact_mut(8).zip(y.chunks_exact(QK)) {
                (kernels.lane_sums)(y, out);
            }
        };
        // prompts: hundreds of rows, split across the compute threads
        if m >= 64 {
            lanes
                .par_chunks_exact_mut(nb * 8)
                .zip(q.quants.par_chunks_exact(nb * QK))
                .for_each(row);
        } else if nb > 0 {
            lanes
                .chunks_exact_mut(nb * 8)
                .zip(q.quants.chunks_exact(nb * QK))
                .for_each(row);
        }
        let pairs = row_pairs.then(|| Q8Pairs::new(q, &lanes));
        LaneSums { lanes, pairs }
    }
}

/// A group of Q5_0 weight rows in offset form: values `x + 16` as bytes, row after row, and
/// each block's scale as f32.
pub struct OffsetGroup {
    pub(crate) values: Vec<u8>,
    pub(crate) scales: Vec<f32>,
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    pub(crate) k: usize,
}

impl OffsetGroup {
    /// Unpack whole Q5_0 rows (at most `GROUP_ROWS`) into the front of the buffers.
    fn unpack(&mut self, rows: &[u8], kernels: &OffsetKernels) {
        for ((b, v), s) in rows
            .chunks_exact(q5_0::BYTES)
            .zip(self.values.chunks_exact_mut(QK))
            .zip(self.scales.iter_mut())
        {
            *s = f16::from_le_bytes([b[0], b[1]]).to_f32();
            (kernels.unpack)(b, v);
        }
    }
}

/// Prompt rows: 2 weight rows × 4 activation rows per tile.
pub(crate) const TILE_M: usize = 2;
/// From this many activation rows, tasks split the activation rows rather than the weight
/// rows (enough rows for every thread to get several tiles' worth).
const PROMPT_SPLIT_ROWS: usize = 64;
/// Weight rows a prompt task keeps hot while its activation tiles pass over them.
const GROUP_ROWS: usize = 128;
pub(crate) const TILE_N: usize = 4;
/// One activation row (decode): 4 weight rows per tile — four independent accumulator chains,
/// and each activation block loaded once for four rows.
pub(crate) const ROWS_1: usize = 4;

#[cfg(test)]
mod tests {
    use super::*;

    fn quantize_q8_0_weights(w: &[f32]) -> Vec<u8> {
        let mut out = Vec::new();
        for b in w.chunks_exact(QK) {
            let amax = b.iter().fold(0f32, |a, v| a.max(v.abs()));
            let d = amax / 127.0;
            let id = if d != 0.0 { 1.0 / d } else { 0.0 };
            out.extend_from_slice(&f16::from_f32(d).to_le_bytes());
            out.extend(b.iter().map(|v| (v * id).round() as i8 as u8));
        }
        out
    }

    fn random_q5_0(n_blocks: usize, seed: u64) -> Vec<u8> {
        let mut s = seed;
        let mut next = || {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 33) as u32
        };
        let mut out = Vec::new();
        for _ in 0..n_blocks {
            let d = f16::from_f32((next() % 1000) as f32 / 50_000.0 + 0.001);
            out.extend_from_slice(&d.to_le_bytes());
            out.extend_from_slice(&next().to_le_bytes());
            for _ in 0..16 {
                out.push(next() as u8);
            }
        }
        out
    }

    fn activations(m: usize, k: usize) -> Vec<f32> {
        (0..m * k)
            .map(|i| {
                ((i * 2654435761usize % 1000) as f32 / 500.0 - 1.0)
                    * if i % 97 == 0 { 20.0 } else { 1.0 }
            })
            .collect()
    }

    /// Against dequantize(weights) · dequantize(quantize_q8_0(x)): exact up to float sums.
    fn check(format: BlockFormat, data: Vec<u8>, n: usize, k: usize, m: usize) {
        let w = BlockMatrix::new(format, data, n, k).unwrap();
        let x = activations(m, k);
        let got = w.matmul(&x, m);
        let q = Q8Rows::quantize(&x, m, k);
        let xq: Vec<f32> = (0..m * k)
            .map(|i| q.scales[i / QK] * q.quants[i] as f32)
            .collect();
        let mut row = vec![0f32; k];
        for r in 0..n {
            w.dequantize_row(r, &mut row);
            for i in 0..m {
                let want: f32 = row
                    .iter()
                    .zip(&xq[i * k..(i + 1) * k])
                    .map(|(a, b)| a * b)
                    .sum();
                let g = got[i * n + r];
                assert!(
                    (want - g).abs() <= 1e-4 * (1.0 + want.abs()),
                    "{format:?} r{r} i{i}: {want} vs {g}"
                );
            }
        }
    }

    #[test]
    fn q5_0_matmul_matches_dequantized_product() {
        let (n, k) = (70, 256);
        check(BlockFormat::Q5_0, random_q5_0(n * k / QK, 7), n, k, 1);
        check(BlockFormat::Q5_0, random_q5_0(n * k / QK, 8), n, k, 5);
        // odd weight rows and activation rows past a whole tile: tiles plus both remainders
        check(BlockFormat::Q5_0, random_q5_0(71 * k / QK, 9), 71, k, 11);
    }

    /// Prompts (m >= 64) split the activation rows across tasks, unpack Q5_0 groups to offset
    /// form and write `[m, n]` directly; every row's result must be the one it gets alone, bit
    /// for bit.
    #[test]
    fn prompt_rows_equal_each_row_alone() {
        let (n, k, m) = (GROUP_ROWS + 3, 128, 70);
        let x = activations(m, k);
        let w8: Vec<f32> = activations(n, k).iter().map(|v| v * 0.3).collect();
        for (format, data) in [
            (BlockFormat::Q5_0, random_q5_0(n * k / QK, 11)),
            (BlockFormat::Q8_0, quantize_q8_0_weights(&w8)),
        ] {
            check(format, data.clone(), n, k, m);
            let w = BlockMatrix::new(format, data, n, k).unwrap();
            let all = w.matmul(&x, m);
            for i in [0, 1, 63, 69] {
                let alone = w.matmul(&x[i * k..(i + 1) * k], 1);
                assert_eq!(&all[i * n..(i + 1) * n], &alone[..], "{format:?} row {i}");
            }
        }
    }

    #[test]
    fn q8_0_matmul_matches_dequantized_product() {
        let (n, k) = (40, 128);
        let w: Vec<f32> = activations(n, k).iter().map(|v| v * 0.3).collect();
        check(BlockFormat::Q8_0, quantize_q8_0_weights(&w), n, k, 1);
        check(BlockFormat::Q8_0, quantize_q8_0_weights(&w), n, k, 3);
        check(BlockFormat::Q8_0, quantize_q8_0_weights(&w), n, k, 9);
    }

    /// Every schedule (decode tiles, prompt tiles, the one-row kernel for what is left) gives
    /// each row of a small batch what that row alone gives, bit for bit, on every table: what
    /// lets a speculative check (`RowSums::AsOneRow`) take these products as they are.
    #[test]
    fn small_batches_give_every_row_its_one_row_result() {
        let (n, k) = (GROUP_ROWS + 5, 640);
        let w8: Vec<f32> = activations(n, k).iter().map(|v| v * 0.3).collect();
        for (format, data) in [
            (BlockFormat::Q5_0, random_q5_0(n * k / QK, 3)),
            (BlockFormat::Q8_0, quantize_q8_0_weights(&w8)),
        ] {
            let w = BlockMatrix::new(format, data, n, k).unwrap();
            for table in crate::cpu::tables() {
                for m in 2..12 {
                    let x = activations(m, k);
                    let all = BlockMatrix::matmul_many_on(table, &[&w], &x, m)
                        .pop()
                        .unwrap();
                    for i in 0..m {
                        let one = BlockMatrix::matmul_many_on(table, &[&w], &x[i * k..][..k], 1)
                            .pop()
                            .unwrap();
                        for r in 0..n {
                            assert_eq!(
                                one[r].to_bits(),
                                all[i * n + r].to_bits(),
                                "{format:?} {} m {m}: row {i}, output {r}",
                                table.isa
                            );
                        }
                    }
                }
            }
        }
    }

    /// Every kernel table this CPU runs gives the portable table's results: the integer sums
    /// are exact, the float scaling and sums may differ in their last bits.
    #[test]
    fn every_kernel_table_agrees_with_the_portable_one() {
        let (n, k) = (GROUP_ROWS + 5, 512);
        let w8: Vec<f32> = activations(n, k).iter().map(|v| v * 0.3).collect();
        let portable = crate::cpu::table(crate::cpu::Isa::Portable);
        for (format, data) in [
            (BlockFormat::Q5_0, random_q5_0(n * k / QK, 3)),
            (BlockFormat::Q8_0, quantize_q8_0_weights(&w8)),
        ] {
            let w = BlockMatrix::new(format, data, n, k).unwrap();
            for m in [1, 2, 5, 70] {
                let x = activations(m, k);
                let want = BlockMatrix::matmul_many_on(portable, &[&w], &x, m)
                    .pop()
                    .unwrap();
                for table in crate::cpu::tables() {
                    let got = BlockMatrix::matmul_many_on(table, &[&w], &x, m)
                        .pop()
                        .unwrap();
                    for (a, b) in got.iter().zip(&want) {
                        assert!(
                            (a - b).abs() <= 1e-4 * (1.0 + b.abs()),
                            "{format:?} m {m} {}: {a} vs {b}",
                            table.isa
                        );
                    }
                }
            }
        }
    }

    /// The tables of one family agree bit for bit: a prompt (x86's offset tiles and their
    /// edges, aarch64's `smmla` tiles; both formats) gives the narrowest table's results on
    /// every wider table of its family this CPU runs (AVX2 → AVX-512, NEON → dotprod → i8mm).
    #[test]
    fn wider_tables_of_a_family_equal_its_narrowest_bit_for_bit() {
        for family in ["x86-64", "aarch64"] {
            let tables: Vec<_> = crate::cpu::tables()
                .into_iter()
                .filter(|t| t.isa.family() == family)
                .collect();
            let Some(narrowest) = tables.first() else {
                continue; // not this family's CPU: nothing to compare
            };
            let (n, k) = (GROUP_ROWS + 7, 320);
            let w8: Vec<f32> = activations(n, k).iter().map(|v| v * 0.3).collect();
            for (format, data) in [
                (BlockFormat::Q5_0, random_q5_0(n * k / QK, 13)),
                (BlockFormat::Q8_0, quantize_q8_0_weights(&w8)),
            ] {
                let w = BlockMatrix::new(format, data, n, k).unwrap();
                for m in [64, 70, 77, 3] {
                    let x = activations(m, k);
                    let want = BlockMatrix::matmul_many_on(narrowest, &[&w], &x, m)
                        .pop()
                        .unwrap();
                    for table in &tables {
                        let got = BlockMatrix::matmul_many_on(table, &[&w], &x, m)
                            .pop()
                            .unwrap();
                        let same = got
                            .iter()
                            .zip(&want)
                            .all(|(a, b)| a.to_bits() == b.to_bits());
                        assert!(
                            same,
                            "{format:?} m {m}: {} differs from {}",
                            table.isa, narrowest.isa
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn many_rows_quantize_as_each_row_alone() {
        let (m, k) = (70, 96); // past the row count that splits across threads
        let x = activations(m, k);
        let all = Q8Rows::quantize(&x, m, k);
        for i in 0..m {
            let one = Q8Rows::quantize(&x[i * k..(i + 1) * k], 1, k);
            assert_eq!(&all.quants[i * k..(i + 1) * k], &one.quants[..], "row {i}");
            assert_eq!(&all.scales[i * 3..(i + 1) * 3], &one.scales[..], "row {i}");
        }
    }

    #[test]
    fn transpose_swaps_rows_and_columns() {
        let (rows, cols) = (37, 21);
        let src: Vec<f32> = (0..rows * cols).map(|i| i as f32).collect();
        let t = crate::cpu::transpose::transpose(&src, rows, cols);
        for r in 0..rows {
            for c in 0..cols {
                assert_eq!(t[c * rows + r], src[r * cols + c]);
            }
        }
    }

    #[test]
    fn q5_0_values_decode_the_fifth_bit() {
        let mut b = vec![0u8; 22];
        b[2] = 0b1; // value 0 has its fifth bit set
        b[6] = 0x3F; // value 0 low nibble 0xF, value 16 low nibble 0x3
        let v = q5_0::values(&b);
        assert_eq!(v[0], 0x1F - 16);
        assert_eq!(v[16], 3 - 16);
        assert_eq!(v[1], -16);
    }
}
