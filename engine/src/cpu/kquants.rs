//! Quantized matrix multiplication for ggml's K-quant weight formats Q4_K and Q6_K (super-blocks
//! of 256 values), whose activations are quantized to Q8_K, with ggml's numerics: the work
//! schedule. The inner loops are the kernel table's (`cpu::kernels()`).
//!
//! Follows ggml (llama.cpp `ggml/src`): block layouts `block_q4_K` / `block_q6_K`
//! (`ggml-common.h`); `dequantize_row_q4_K`, `dequantize_row_q6_K`, `quantize_row_q8_K_ref` and
//! `get_scale_min_k4` (`ggml-quants.c`); the dot products `ggml_vec_dot_q4_K_q8_K` and
//! `ggml_vec_dot_q6_K_q8_K`, as their `__AVX2__` branches (`ggml-cpu/arch/x86/quants.c`) and as
//! the portable `_generic` versions (`ggml-cpu/quants.c`) for CPUs without AVX2+FMA+F16C. The
//! integer part of every dot product is exact and identical in both kernels; only the f32
//! scaling and accumulation order differ between them, as between ggml's two versions.
//!
//! llama.cpp's x86 build also orders the f32 part differently by batch size (differences near
//! 1e-7 relative, which a random-weight model amplifies into visible log-prob differences); the
//! x86 tables follow it output for output:
//! - Q4_K weights (row count a multiple of 8, as in every Gemma) are repacked and multiplied by
//!   `ggml_gemv_q4_K_8x8_q8_K` (one fold per super-block) for the last `m mod 4` activation
//!   rows, by `ggml_gemm_q4_K_8x8_q8_K` (one fold per pair of sub-blocks) for the others
//!   (`x86::q4_k_fold`): the decode and tail kernels fold per super-block, the prompt tiles per
//!   pair;
//! - Q6_K goes through `vec_dot_q6_K_q8_K` below 8 activation rows and through ggml's tiled
//!   K-quant matmul from 8 (`ggml-cpu/tiled/`, `x86::tiled_fold`): `KKernels::tiled`.
//!
//! The portable and aarch64 tables keep `vec_dot`'s order throughout.
//!
//! Work is split across output rows, as in `q8_matmul`. The one-row AVX2 kernel decodes a
//! weight super-block (Q4_K: 6-bit scales and mins unpacked, nibbles split; Q6_K: low nibbles
//! and high bit pairs recombined) for every activation row it meets, which for a prompt is most
//! of the work. So where the table has them (AVX2), the rows go through register tiles
//! (`x86::avx2::kquants::tile_q4_k`, `tile_q6_k`) that decode each 32-value sub-block of `RM` weight rows once and dot it
//! with `RN` activation rows, each activation vector loaded once for the `RM` weight rows:
//!
//! - prompts (m ≥ 4): 1 weight row × 8 activation rows, then 1 × 4 for the rest, the one-row
//!   kernel for the last m mod 4. Measured against 2 × 4, 1 × 4, 1 × 6, 1 × 12, 2 × 2 and
//!   others: the 8 i32 sums plus the decoded sub-block and its scales about fill the 16
//!   registers, and one weight row per tile leaves the decode to be shared 8 ways.
//!   With i8mm (aarch64), 2 weight rows × 8, then 2 × 4: `smmla` multiplies two weight rows
//!   by two activation rows in one instruction (`aarch64::kquants_i8mm`), so its tiles take
//!   weight rows in pairs, and activations come quantized in pairs too (`row_pairs`).
//! - decode (and m < 4), Q4_K: 4 weight rows × 1 activation row, four independent chains with
//!   each activation vector loaded once. Q6_K keeps the one-row kernel: its tiles measured no
//!   faster, as its decode is per weight row either way and is most of the work.
//!
//! A tile computes every output's i32 lanes exactly as the one-row kernel does (integer sums
//! are exact in any order) and then the f32 operations of the schedule above, so its results
//! are what llama.cpp's kernel for that row and batch gives, bit for bit. Within a task, tiles walk activation
//! tiles outermost (a tile's rows stay in L1) over groups of weight rows of at most
//! `GROUP_BYTES` (which stay in L2), so activations stream from memory once per group rather
//! than once per weight row.
//!
//! Tested against dequantize-then-multiply, and every table's tiles against llama.cpp's
//! schedule for the batch (`expected`), below.

use rayon::prelude::*;

use super::formats::{KFormat, QK_K};
use super::quantize::Q8KRows;
use super::{KDot, KKernels, KPanel, KPrompt, KTile, Kernels, RowSums, kernels};
use crate::gguf::WeightBytes;

/// A weight matrix `[n, k]` in ggml K-quant layout (row-major, `k / 256` blocks per row).
#[derive(Debug)]
pub struct KMatrix {
    format: KFormat,
    data: WeightBytes,
    n: usize,
    k: usize,
}

impl KMatrix {
    /// `None` unless `k` is a multiple of 256 and `data` holds exactly `n` rows of blocks.
    pub fn new(format: KFormat, data: impl Into<WeightBytes>, n: usize, k: usize) -> Option<Self> {
        let data = data.into();
        (k.is_multiple_of(QK_K) && data.len() == n * (k / QK_K) * format.block_bytes())
            .then_some(KMatrix { format, data, n, k })
    }

    pub fn format(&self) -> KFormat {
        self.format
    }

    pub fn rows(&self) -> usize {
        self.n
    }

    pub fn cols(&self) -> usize {
        self.k
    }

    fn row_bytes(&self) -> usize {
        self.k / QK_K * self.format.block_bytes()
    }

    fn row(&self, r: usize) -> &[u8] {
        &self.data[r * self.row_bytes()..(r + 1) * self.row_bytes()]
    }

    /// Dequantize row `r` into `out` (`k` values), as ggml `dequantize_row_q4_K` /
    /// `dequantize_row_q6_K` do (same f32 operations in the same order).
    pub fn dequantize_row(&self, r: usize, out: &mut [f32]) {
        let bb = self.format.block_bytes();
        for (b, y) in self.row(r).chunks_exact(bb).zip(out.chunks_exact_mut(QK_K)) {
            self.format.dequantize(b, y);
        }
    }

    /// This format's kernels in `table`.
    fn kernels<'t>(&self, table: &'t Kernels) -> &'t KKernels {
        match self.format {
            KFormat::Q4K => &table.q4_k,
            KFormat::Q6K => &table.q6_k,
        }
    }

    /// `x` `[m, k]` → `[m, n]` = x · Wᵀ.
    pub fn matmul(&self, x: &[f32], m: usize) -> Vec<f32> {
        self.matmul_as(x, m, RowSums::Batched)
    }

    /// [`Self::matmul`], each row summed as `sums` says.
    pub fn matmul_as(&self, x: &[f32], m: usize, sums: RowSums) -> Vec<f32> {
        self.matmul_on(kernels(), x, m, sums)
    }

    /// [`Self::matmul_as`] with the kernels of `table`.
    pub(crate) fn matmul_on(
        &self,
        table: &Kernels,
        x: &[f32],
        m: usize,
        sums: RowSums,
    ) -> Vec<f32> {
        let q = Q8KRows::quantize_on(table, x, m, self.k);
        let mut out = super::scratch::overwritten(m * self.n);
        self.matmul_q_on(table, &q, m, sums, &mut out);
        out
    }

    /// `out` `[m, n]` = activations · Wᵀ, with activations already quantized (one quantization
    /// can serve every matrix that reads the same input, e.g. Q, K and V).
    ///
    /// # Panics
    /// If `q` does not hold `m` rows of `k` values or `out` is not `m * n` long.
    pub fn matmul_q(&self, q: &Q8KRows, m: usize, out: &mut [f32]) {
        self.matmul_q_on(kernels(), q, m, RowSums::Batched, out)
    }

    fn matmul_q_on(&self, table: &Kernels, q: &Q8KRows, m: usize, sums: RowSums, out: &mut [f32]) {
        let panel = match self.format {
            KFormat::Q4K => table.q4_k_panel,
            KFormat::Q6K => table.q6_k_panel,
        };
        let table = self.kernels(table);
        assert_eq!(q.rows, m, "Q8KRows holds {} rows, not {m}", q.rows);
        assert_eq!(
            q.blocks_per_row * QK_K,
            self.k,
            "Q8KRows width does not match the weight's"
        );
        assert_eq!(out.len(), m * self.n, "output must be m * n long");
        if m == 0 {
            return; // nothing to write, and rayon refuses chunks of length 0
        }
        if m == 1 {
            // One activation row: `[n]` in weight-row order is already the output layout.
            self.dot_rows(table, None, q, RowSums::Batched, out);
            return;
        }
        // Tasks own contiguous runs of weight rows, so they write `[n, m]`; transpose after.
        let mut out_t = super::scratch::overwritten(self.n * m);
        self.dot_rows(table, panel, q, sums, &mut out_t);
        super::transpose::transpose_into(&out_t, self.n, m, out);
        super::scratch::release(out_t);
    }

    /// `out_t[r * m + i]` = weight row `r` · activation row `i` (`m` = `q.rows`). The tiles give
    /// the one-row kernel's results bit for bit; the panels and the tiled order (llama.cpp's
    /// x86 gemm and tiled matmul) do not, so [`RowSums::AsOneRow`] leaves them out.
    fn dot_rows(
        &self,
        table: &KKernels,
        panel: Option<KPanel>,
        q: &Q8KRows,
        sums: RowSums,
        out_t: &mut [f32],
    ) {
        let m = q.rows;
        let batched = sums == RowSums::Batched;
        let panel = panel.filter(|_| batched);
        let tiled = table.tiled.filter(|_| batched && m >= TILED_MIN_ROWS);
        // A table's panel for this format where it has one (whole panels of weight rows): the
        // activation rows it takes (in fours) and the one-row kernel for the rest — Q4_K: ggml's
        // gemm for the fours, its gemv for the rest (`q4_k_fold`); Q6_K: the tiled order for
        // all, from `TILED_MIN_ROWS` rows (`tiled_fold`).
        let plan = panel
            .filter(|_| self.n.is_multiple_of(PANEL_ROWS))
            .and_then(|p| match self.format {
                KFormat::Q4K if m >= PROMPT_TAIL => Some((p, table.dot)),
                KFormat::Q6K => tiled.map(|t| (p, t.dot)),
                _ => None,
            });
        if let Some((panel, kernel)) = plan {
            let m_panel = m - m % 4;
            let rows_per_task = self.rows_per_task().next_multiple_of(PANEL_ROWS);
            return self.par_tasks_of(rows_per_task, m, out_t, |r0, dst| {
                let mut scratch = Vec::new();
                for (j, dst) in dst.chunks_mut(PANEL_ROWS * m).enumerate() {
                    let w = std::array::from_fn(|r| self.row(r0 + PANEL_ROWS * j + r));
                    panel(&w, q, m_panel, &mut scratch, dst);
                    for (r, w) in w.iter().enumerate() {
                        for i in m_panel..m {
                            dst[r * m + i] = kernel(w, q.row(i));
                        }
                    }
                }
            });
        }
        if let Some(tiled) = tiled {
            let kernel = tiled.dot;
            return self.par_tasks(m, out_t, |r0, dst| match tiled.prompt {
                KPrompt::OneRow(tile, tail) => self.prompt_tiled(tile, tail, q, r0, dst, kernel),
                KPrompt::TwoRows(tile, tail) => self.prompt_tiled(tile, tail, q, r0, dst, kernel),
            });
        }
        let kernel = table.dot;
        if m < PROMPT_TAIL {
            // Decode, and prompts too short for a prompt tile: the table may take several weight
            // rows per pass (AVX2 does for Q4_K; its Q6_K tiles did not beat the one-row kernel,
            // as the 6-bit recombination is per weight row either way and is most of the work).
            if let Some(tile) = table
                .decode
                .filter(|_| self.row_bytes() * Q4K_DECODE_ROWS <= DECODE_TILE_BYTES)
            {
                return self.par_tasks(m, out_t, |r0, dst| {
                    self.dot_tiled::<Q4K_DECODE_ROWS>(q, r0, dst, kernel, |j0, j1, dst| {
                        self.tile_pass(tile, q, r0, j0..j1, 0, dst)
                    })
                });
            }
        } else if let Some(prompt) = match sums {
            RowSums::Batched => table.prompt,
            RowSums::AsOneRow => table.one_row_prompt.or(table.prompt),
        } {
            return self.par_tasks(m, out_t, |r0, dst| match prompt {
                KPrompt::OneRow(tile, tail) => self.prompt_tiled(tile, tail, q, r0, dst, kernel),
                KPrompt::TwoRows(tile, tail) => self.prompt_tiled(tile, tail, q, r0, dst, kernel),
            });
        }
        self.par_tasks(m, out_t, |r0, dst| {
            for (j, dst_row) in dst.chunks_exact_mut(m).enumerate() {
                let w = self.row(r0 + j);
                for (i, d) in dst_row.iter_mut().enumerate() {
                    *d = kernel(w, q.row(i));
                }
            }
        });
    }

    /// A prompt task's weight rows `r0..` (`dst`, `[rows, m]`): `tile` over whole tiles of
    /// activation rows, `tail` over the whole tails left, the one-row kernel for the rest.
    fn prompt_tiled<const RM: usize>(
        &self,
        tile: KTile<RM, PROMPT_TILE>,
        tail: KTile<RM, PROMPT_TAIL>,
        q: &Q8KRows,
        r0: usize,
        dst: &mut [f32],
        kernel: KDot,
    ) {
        self.dot_tiled::<RM>(q, r0, dst, kernel, |j0, j1, dst| {
            let i = self.tile_pass(tile, q, r0, j0..j1, 0, dst);
            self.tile_pass(tail, q, r0, j0..j1, i, dst)
        })
    }

    /// Splits `out_t` (`[n, m]`) into tasks of contiguous weight rows; `task(r0, dst)` fills
    /// rows `r0..` of it.
    fn par_tasks(&self, m: usize, out_t: &mut [f32], task: impl Fn(usize, &mut [f32]) + Sync) {
        self.par_tasks_of(self.rows_per_task(), m, out_t, task)
    }

    fn rows_per_task(&self) -> usize {
        (self.n / (rayon::current_num_threads() * 8)).clamp(16, 4096)
    }

    /// [`Self::par_tasks`] with `rows_per_task` weight rows a task.
    fn par_tasks_of(
        &self,
        rows_per_task: usize,
        m: usize,
        out_t: &mut [f32],
        task: impl Fn(usize, &mut [f32]) + Sync,
    ) {
        out_t
            .par_chunks_mut(rows_per_task * m)
            .enumerate()
            .for_each(|(t, dst)| task(t * rows_per_task, dst));
    }

    /// Weight rows `r0..r0 + dst.len() / m` · all `m` activation rows into `dst` (`[rows, m]`),
    /// in groups of weight rows of about `GROUP_BYTES` (which stay in L2 while every activation
    /// row meets them, so activations are streamed once per group rather than once per weight
    /// row). `tiles(j0, j1, dst)` covers weight rows `j0..j1` (relative to `r0`; a multiple of
    /// `RM` of them) with activation rows from 0 up to the row it returns; the rest (activation
    /// rows past the last whole tile, weight rows past the last whole `RM`) goes through the
    /// one-row kernel.
    fn dot_tiled<const RM: usize>(
        &self,
        q: &Q8KRows,
        r0: usize,
        dst: &mut [f32],
        kernel: KDot,
        tiles: impl Fn(usize, usize, &mut [f32]) -> usize,
    ) {
        let m = q.rows;
        let rows = dst.len() / m;
        // Groups of equal size (a multiple of RM): none over GROUP_BYTES by more than RM - 1
        // rows (or one row, where a row alone is over).
        let max_rows = (GROUP_BYTES / self.row_bytes()).max(1);
        let group = rows
            .div_ceil(rows.div_ceil(max_rows).max(1))
            .next_multiple_of(RM);
        for g0 in (0..rows).step_by(group) {
            let g1 = (g0 + group).min(rows);
            let tiled = g1 - (g1 - g0) % RM;
            let i_end = tiles(g0, tiled, dst);
            for j in g0..g1 {
                let w = self.row(r0 + j);
                for i in if j < tiled { i_end } else { 0 }..m {
                    dst[j * m + i] = kernel(w, q.row(i));
                }
            }
        }
    }

    /// `tile` over weight rows `rows` (relative to `r0`, a multiple of `RM` of them) and whole
    /// tiles of activation rows from `i`, activation tile outermost; returns the first activation
    /// row not covered.
    fn tile_pass<const RM: usize, const RN: usize>(
        &self,
        tile: KTile<RM, RN>,
        q: &Q8KRows,
        r0: usize,
        rows: std::ops::Range<usize>,
        mut i: usize,
        dst: &mut [f32],
    ) -> usize {
        let m = q.rows;
        while i + RN <= m {
            for j in rows.clone().step_by(RM) {
                let w: [&[u8]; RM] = std::array::from_fn(|rm| self.row(r0 + j + rm));
                let mut acc = [[0f32; RN]; RM];
                tile(w, q, i, &mut acc);
                for (rm, acc_row) in acc.iter().enumerate() {
                    dst[(j + rm) * m + i..][..RN].copy_from_slice(acc_row);
                }
            }
            i += RN;
        }
        i
    }
}

/// Weight rows of a table's K-quant prompt panels (`Kernels::q4_k_panel`, `q6_k_panel`).
pub(crate) const PANEL_ROWS: usize = 16;

/// Prompt tiles: one weight row × 8 activation rows, then one × 4 for what is left.
pub(crate) const PROMPT_TILE: usize = 8;
pub(crate) const PROMPT_TAIL: usize = 4;
/// The fewest activation rows llama.cpp's x86 build multiplies with its tiled K-quant matmul
/// (`ggml_tiled_min_batch`), whose order a table's `KKernels::tiled` follows.
pub(crate) const TILED_MIN_ROWS: usize = 8;
/// Decode (and m < `PROMPT_TAIL`): weight rows per Q4_K tile.
pub(crate) const Q4K_DECODE_ROWS: usize = 4;
/// Most bytes of the weight rows of one decode tile: a tile of longer rows (a down projection's:
/// 4 rows of 5760 bytes in Gemma 3 4B) read them at ~22 GB/s here against ~40 row by row, while
/// shorter rows are faster in tiles (the same layer's gate and up: ~25.5 ms a token row by row,
/// ~21 in tiles; `companion bench --profile`, alternating builds).
const DECODE_TILE_BYTES: usize = 8192;
/// Most weight bytes per group of `dot_tiled`: well inside an L2 cache.
const GROUP_BYTES: usize = 128 << 10;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::quantize::BSUMS;
    use half::f16;

    struct Lcg(u64);

    impl Lcg {
        fn next(&mut self) -> u32 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (self.0 >> 33) as u32
        }

        fn bytes(&mut self, n: usize) -> Vec<u8> {
            (0..n).map(|_| self.next() as u8).collect()
        }

        /// A small positive f16, like a real super-block scale.
        fn scale(&mut self, max: f32) -> [u8; 2] {
            f16::from_f32((self.next() % 1000) as f32 / 1000.0 * max + max / 100.0).to_le_bytes()
        }
    }

    /// Random Q4_K blocks: random scales/mins (all 6-bit patterns) and nibbles.
    fn random_q4_k(n_blocks: usize, seed: u64) -> Vec<u8> {
        let mut rng = Lcg(seed);
        let mut out = Vec::new();
        for _ in 0..n_blocks {
            out.extend_from_slice(&rng.scale(0.002));
            out.extend_from_slice(&rng.scale(0.004));
            out.extend(rng.bytes(12 + 128));
        }
        out
    }

    /// Random Q6_K blocks: random low nibbles, high bits and i8 scales.
    fn random_q6_k(n_blocks: usize, seed: u64) -> Vec<u8> {
        let mut rng = Lcg(seed);
        let mut out = Vec::new();
        for _ in 0..n_blocks {
            out.extend(rng.bytes(128 + 64 + 16));
            out.extend_from_slice(&rng.scale(0.0005));
        }
        out
    }

    fn random_blocks(format: KFormat, n_blocks: usize, seed: u64) -> Vec<u8> {
        match format {
            KFormat::Q4K => random_q4_k(n_blocks, seed),
            KFormat::Q6K => random_q6_k(n_blocks, seed),
        }
    }

    /// Activations with occasional outliers, as real hidden states have.
    fn activations(m: usize, k: usize) -> Vec<f32> {
        (0..m * k)
            .map(|i| {
                ((i * 2654435761usize % 1000) as f32 / 500.0 - 1.0)
                    * if i % 97 == 0 { 20.0 } else { 1.0 }
            })
            .collect()
    }

    fn dequantize_q8k(q: &Q8KRows) -> Vec<f32> {
        q.qs.iter()
            .enumerate()
            .map(|(j, &v)| q.d[j / QK_K] * v as f32)
            .collect()
    }

    /// Against dequantize(weights) · dequantize(quantize_q8_K(x)), summed in f64: the kernels'
    /// integer part is exact, so only their f32 scaling and accumulation may differ.
    fn check(format: KFormat, seed: u64, n: usize, k: usize, m: usize) {
        let w = KMatrix::new(format, random_blocks(format, n * k / QK_K, seed), n, k).unwrap();
        let x = activations(m, k);
        let got = w.matmul(&x, m);
        let xq = dequantize_q8k(&Q8KRows::quantize(&x, m, k));
        let mut row = vec![0f32; k];
        for r in 0..n {
            w.dequantize_row(r, &mut row);
            for i in 0..m {
                let want: f64 = row
                    .iter()
                    .zip(&xq[i * k..(i + 1) * k])
                    .map(|(&a, &b)| a as f64 * b as f64)
                    .sum();
                let g = got[i * n + r] as f64;
                assert!(
                    (want - g).abs() <= 1e-4 * (1.0 + want.abs()),
                    "{format:?} r{r} i{i}: {want} vs {g}"
                );
            }
        }
    }

    #[test]
    fn q4_k_matmul_matches_dequantized_product() {
        check(KFormat::Q4K, 7, 70, 512, 1);
        check(KFormat::Q4K, 8, 70, 512, 5);
    }

    #[test]
    fn q6_k_matmul_matches_dequantized_product() {
        check(KFormat::Q6K, 9, 70, 512, 1);
        check(KFormat::Q6K, 10, 70, 512, 5);
    }

    #[test]
    fn matmul_q_reuses_quantized_activations() {
        let (n, k, m) = (40, 256, 3);
        let x = activations(m, k);
        let q = Q8KRows::quantize(&x, m, k);
        for format in [KFormat::Q4K, KFormat::Q6K] {
            let w = KMatrix::new(format, random_blocks(format, n * k / QK_K, 11), n, k).unwrap();
            let mut out = vec![f32::NAN; m * n];
            w.matmul_q(&q, m, &mut out);
            assert_eq!(out, w.matmul(&x, m), "{format:?}");
        }
    }

    /// Every kernel table this CPU runs gives the portable kernels' results (integer sums
    /// exact; the float scaling and sums may differ in their last bits, as ggml's two do).
    #[test]
    fn every_kernel_table_agrees_with_the_portable_one() {
        let (n, k) = (37, 1024);
        let portable = crate::cpu::table(crate::cpu::Isa::Portable);
        for format in [KFormat::Q4K, KFormat::Q6K] {
            let w = KMatrix::new(format, random_blocks(format, n * k / QK_K, 3), n, k).unwrap();
            for m in [1, 3, 5, 9] {
                let x = activations(m, k);
                let want = w.matmul_on(portable, &x, m, RowSums::Batched);
                for table in crate::cpu::tables() {
                    let got = w.matmul_on(table, &x, m, RowSums::Batched);
                    for (a, b) in got.iter().zip(&want) {
                        assert!(
                            (a - b).abs() <= 1e-5 * (1.0 + b.abs()),
                            "{format:?} m {m} {}: {a} vs {b}",
                            table.isa
                        );
                    }
                }
            }
        }
    }

    /// The tables of one family (x86-64: AVX2, AVX-512; aarch64: NEON, dotprod, i8mm) agree bit
    /// for bit (prompt tiles, tails and leftover rows, both formats).
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
            let (n, k) = (21, 768);
            for format in [KFormat::Q4K, KFormat::Q6K] {
                let w =
                    KMatrix::new(format, random_blocks(format, n * k / QK_K, 17), n, k).unwrap();
                for m in [1, 3, 4, 5, 8, 9, 13, 16] {
                    let mut x = activations(m, k);
                    x[..QK_K].fill(0.0); // an all-zero activation block (d = 0)
                    let want = w.matmul_on(narrowest, &x, m, RowSums::Batched);
                    for table in &tables {
                        let got = w.matmul_on(table, &x, m, RowSums::Batched);
                        let same = got
                            .iter()
                            .zip(&want)
                            .all(|(a, b)| a.to_bits() == b.to_bits());
                        assert!(
                            same,
                            "{format:?} m {m}: {} differs from {}",
                            table.isa, narrowest.isa
                        );
                        // activations quantized by a table without row pairs: a table whose
                        // tiles read pairs falls back to row-major tiles, with the same results
                        let q = Q8KRows::quantize_on(narrowest, &x, m, k);
                        let mut unpaired = vec![f32::NAN; m * n];
                        w.matmul_q_on(table, &q, m, RowSums::Batched, &mut unpaired);
                        assert!(
                            unpaired
                                .iter()
                                .zip(&want)
                                .all(|(a, b)| a.to_bits() == b.to_bits()),
                            "{format:?} m {m}: {} on unpaired rows",
                            table.isa
                        );
                    }
                }
            }
        }
    }

    /// ggml's `ggml_gemm_q4_K_8x8_q8_K` for one output (x86-64 `repack.cpp`): each pair of
    /// 32-value sub-blocks' exact integer sums folded in by `x86::q4_k_fold`.
    #[cfg(target_arch = "x86_64")]
    fn q4_k_gemm_reference(w: &[u8], y: crate::cpu::quantize::Q8KRow<'_>) -> f32 {
        use crate::cpu::formats::{f16_at, q4_k};
        let mut acc = [0f32; 2];
        for (b, blk) in w.chunks_exact(q4_k::BYTES).enumerate() {
            let qs = &blk[16..];
            for j in 0..4 {
                let (mut sum, mut min_sum) = (0i32, 0i32);
                for h in 0..2 {
                    let (sc, m) = q4_k::get_scale_min_k4(2 * j + h, &blk[4..16]);
                    let at = b * QK_K + 64 * j + 32 * h;
                    let dot: i32 = (0..32)
                        .map(|l| {
                            let q = qs[32 * j + l];
                            let v = if h == 0 { q & 0xF } else { q >> 4 };
                            v as i32 * y.qs[at + l] as i32
                        })
                        .sum();
                    let bsum: i32 = y.bsums[b * BSUMS + 4 * j + 2 * h..][..2]
                        .iter()
                        .map(|&v| v as i32)
                        .sum();
                    sum += sc as i32 * dot;
                    min_sum += m as i32 * bsum;
                }
                crate::cpu::x86::q4_k_fold(
                    &mut acc,
                    sum,
                    min_sum,
                    f16_at(blk, 0),
                    f16_at(blk, 2),
                    y.d[b],
                );
            }
        }
        acc[0] - acc[1]
    }

    /// What the kernels must give for output (weight row `w`, activation row `i` of `m`): the
    /// table's one-row kernel, except where llama.cpp's x86 build multiplies a batch in another
    /// order — Q4_K's repacked gemm for the first `m − m mod 4` rows of a batch of 4 or more,
    /// Q6_K's tiled matmul for batches of `TILED_MIN_ROWS` or more.
    fn expected(
        table: &Kernels,
        format: KFormat,
        w: &[u8],
        q: &Q8KRows,
        m: usize,
        i: usize,
    ) -> f32 {
        let kk = match format {
            KFormat::Q4K => &table.q4_k,
            KFormat::Q6K => &table.q6_k,
        };
        #[cfg(target_arch = "x86_64")]
        if format == KFormat::Q4K && table.isa.family() == "x86-64" && i < m - m % 4 {
            return q4_k_gemm_reference(w, q.row(i));
        }
        match kk.tiled {
            Some(tiled) if m >= TILED_MIN_ROWS => (tiled.dot)(w, q.row(i)),
            _ => (kk.dot)(w, q.row(i)),
        }
    }

    /// `matmul_q` (tiles) against [`expected`], bit for bit, for activation rows 1..=13:
    /// decode, prompt tiles with and without the tail tile and leftover rows, below and above
    /// the tiled-matmul threshold.
    fn assert_tiles_exact(format: KFormat, n: usize, k: usize, seed: u64) {
        let w = KMatrix::new(format, random_blocks(format, n * k / QK_K, seed), n, k).unwrap();
        for m in 1..=13 {
            let mut x = activations(m, k);
            x[..QK_K].fill(0.0); // one all-zero activation block (d = 0)
            let q = Q8KRows::quantize(&x, m, k);
            let mut out = vec![f32::NAN; m * n];
            w.matmul_q(&q, m, &mut out);
            for r in 0..n {
                for i in 0..m {
                    let want = expected(kernels(), format, w.row(r), &q, m, i);
                    assert_eq!(
                        out[i * n + r].to_bits(),
                        want.to_bits(),
                        "{format:?} n{n} m{m} r{r} i{i}: {} vs {want}",
                        out[i * n + r]
                    );
                }
            }
        }
    }

    /// The tiles must give exactly what llama.cpp's schedule gives for every output: weight
    /// rows not a multiple of any tile height, split over several tasks.
    #[test]
    fn tiles_match_llamacpp_schedule_exactly() {
        for format in [KFormat::Q4K, KFormat::Q6K] {
            assert_tiles_exact(format, 37, 1024, 21);
        }
    }

    /// As above with whole panels of weight rows (`Kernels::q4_k_panel`, `q6_k_panel`, where
    /// the table has them), on one thread and on two (tasks of whole panels).
    #[test]
    fn panels_match_llamacpp_schedule_exactly() {
        for threads in [1, 2] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            for format in [KFormat::Q4K, KFormat::Q6K] {
                pool.install(|| assert_tiles_exact(format, 3 * PANEL_ROWS, 1024, 23));
            }
        }
    }

    /// As above with tasks of more weight rows than one group of `dot_tiled` holds (one
    /// thread: tasks of n / 8 rows), so that groups and the last partial group are exercised.
    #[test]
    fn tiles_match_llamacpp_schedule_across_weight_groups() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        for format in [KFormat::Q4K, KFormat::Q6K] {
            let n = 8 * (GROUP_BYTES / format.block_bytes() * 3 / 2) + 3;
            pool.install(|| assert_tiles_exact(format, n, QK_K, 22));
        }
    }

    #[test]
    fn mismatched_shapes_are_rejected() {
        let w = KMatrix::new(KFormat::Q4K, random_q4_k(2, 1), 1, 512).unwrap();
        assert!(KMatrix::new(KFormat::Q4K, random_q4_k(2, 1), 1, 256).is_none());
        assert!(KMatrix::new(KFormat::Q6K, random_q6_k(2, 1), 2, 500).is_none());
        let q = Q8KRows::quantize(&activations(1, 256), 1, 256);
        let r = std::panic::catch_unwind(|| w.matmul_q(&q, 1, &mut [0.0]));
        assert!(r.is_err());
    }

    #[test]
    fn scale_unpacking_matches_get_scale_min_k4() {
        let mut rng = Lcg(5);
        for _ in 0..500 {
            let s = rng.bytes(12);
            let utmp = crate::cpu::formats::q4_k::scales_mins(&s);
            for j in 0..8 {
                let unpacked = (
                    (utmp[j / 4] >> (8 * (j % 4))) as u8,
                    (utmp[2 + j / 4] >> (8 * (j % 4))) as u8,
                );
                assert_eq!(
                    unpacked,
                    crate::cpu::formats::q4_k::get_scale_min_k4(j, &s),
                    "{s:?} sub-block {j}"
                );
            }
        }
    }

    #[test]
    fn q4_k_dequantizes_a_hand_built_block() {
        let mut b = vec![0u8; crate::cpu::formats::q4_k::BYTES];
        b[0..2].copy_from_slice(&f16::from_f32(1.0).to_le_bytes());
        b[2..4].copy_from_slice(&f16::from_f32(0.5).to_le_bytes());
        let s = &mut b[4..16];
        s[0] = 0b01_000011; // scale 0 = 3; top bits 01 are scale 4's bits 4–5
        s[4] = 0b10_000101; // min 0 = 5; top bits 10 are min 4's bits 4–5
        s[1] = 2; // scale 1
        s[5] = 1; // min 1
        s[8] = 0x72; // scale 4 = 2 | 1 << 4 = 18, min 4 = 7 | 2 << 4 = 39
        s[9] = 0x31; // scale 5 = 1, min 5 = 3
        b[16] = 0x9A; // value 0: nibble 10 (sub-block 0); value 32: nibble 9 (sub-block 1)
        b[16 + 64] = 0x03; // value 128: nibble 3 (sub-block 4); value 160: nibble 0 (sub-block 5)
        let w = KMatrix::new(KFormat::Q4K, b, 1, QK_K).unwrap();
        let mut y = vec![0f32; QK_K];
        w.dequantize_row(0, &mut y);
        assert_eq!(y[0], 3.0 * 10.0 - 0.5 * 5.0);
        assert_eq!(y[1], -0.5 * 5.0);
        assert_eq!(y[32], 2.0 * 9.0 - 0.5 * 1.0);
        assert_eq!(y[128], 18.0 * 3.0 - 0.5 * 39.0);
        assert_eq!(y[160], -0.5 * 3.0);
        assert_eq!(y[64], 0.0); // sub-block 2: scale and min 0
    }

    #[test]
    fn q6_k_dequantizes_a_hand_built_block() {
        let mut b = vec![0u8; crate::cpu::formats::q6_k::BYTES];
        b[208..210].copy_from_slice(&f16::from_f32(0.5).to_le_bytes());
        let sc: [i8; 16] = [2, 7, -3, 0, 4, 0, 5, 0, -1, 0, 0, 0, 0, 0, 0, 0];
        for (dst, s) in b[192..208].iter_mut().zip(sc) {
            *dst = s as u8;
        }
        b[0] = 0x5A; // low nibbles of values 0 (0xA) and 64 (0x5)
        b[32] = 0x0F; // low nibbles of values 32 (0xF) and 96 (0x0)
        b[128] = 0b11_10_01_00; // high bits of values 0, 32, 64, 96
        b[64] = 0x01; // second half: value 128
        b[128 + 32] = 0b11; // high bits of value 128
        let w = KMatrix::new(KFormat::Q6K, b, 1, QK_K).unwrap();
        let mut y = vec![0f32; QK_K];
        w.dequantize_row(0, &mut y);
        assert_eq!(y[0], 0.5 * 2.0 * (0xA - 32) as f32);
        assert_eq!(y[32], 0.5 * -3.0 * ((0xF | 1 << 4) - 32) as f32);
        assert_eq!(y[64], 0.5 * 4.0 * ((0x5 | 2 << 4) - 32) as f32);
        assert_eq!(y[96], 0.5 * 5.0 * ((3 << 4) - 32) as f32);
        assert_eq!(y[16], 0.5 * 7.0 * -32.0); // sub-block 1 has its own scale
        assert_eq!(y[128], -0.5 * ((1 | 3 << 4) - 32) as f32); // d · scale 8 (−1)
    }

    #[test]
    fn nearest_int_rounds_half_to_even() {
        for (x, want) in [
            (2.5, 2),
            (3.5, 4),
            (-2.5, -2),
            (-126.5, -126),
            (126.51, 127),
            (-0.49, 0),
            (127.0, 127),
        ] {
            assert_eq!(crate::cpu::quantize::nearest_int(x), want, "{x}");
        }
    }

    #[test]
    fn many_rows_quantize_as_each_row_alone() {
        let (m, k) = (70, 512); // past the row count that splits across threads
        let x: Vec<f32> = (0..m * k)
            .map(|i| ((i * 7919) % 1013) as f32 / 97.0 - 5.0)
            .collect();
        let all = Q8KRows::quantize(&x, m, k);
        for i in 0..m {
            let one = Q8KRows::quantize(&x[i * k..(i + 1) * k], 1, k);
            let (a, b) = (all.row(i), one.row(0));
            assert_eq!((a.d, a.qs, a.bsums), (b.d, b.qs, b.bsums), "row {i}");
        }
    }

    #[test]
    fn q8_k_quantization_round_trips() {
        let (m, k) = (3, 512);
        let mut x = activations(m, k);
        x[QK_K..2 * QK_K].fill(0.0); // row 0, block 1: all zero
        let q = Q8KRows::quantize(&x, m, k);
        let xq = dequantize_q8k(&q);
        assert_eq!(q.d[1], 0.0);
        assert!(q.qs[QK_K..2 * QK_K].iter().all(|&v| v == 0));
        assert!(q.bsums[BSUMS..2 * BSUMS].iter().all(|&v| v == 0));
        for (b, xb) in x.chunks_exact(QK_K).enumerate() {
            let qb = &q.qs[b * QK_K..(b + 1) * QK_K];
            // the value of largest magnitude maps to -127 (the scale carries its sign)
            let (at, _) =
                xb.iter().enumerate().fold(
                    (0, 0f32),
                    |a, (j, v)| if v.abs() > a.1 { (j, v.abs()) } else { a },
                );
            if q.d[b] != 0.0 {
                assert_eq!(qb[at], -127, "block {b}");
            }
            for (j, (&v, &r)) in xb.iter().zip(&xq[b * QK_K..(b + 1) * QK_K]).enumerate() {
                assert!(
                    (v - r).abs() <= q.d[b].abs() * 0.5 * (1.0 + 1e-5),
                    "block {b} value {j}: {v} vs {r}"
                );
            }
            for (s, q16) in q.bsums[b * BSUMS..(b + 1) * BSUMS]
                .iter()
                .zip(qb.chunks_exact(16))
            {
                assert_eq!(
                    *s as i32,
                    q16.iter().map(|&v| v as i32).sum::<i32>(),
                    "block {b}"
                );
            }
        }
    }

    /// [`RowSums::AsOneRow`]: every row of a product of 2 to 11 rows is, bit for bit, what a
    /// product of that row alone gives, on every table this CPU runs — with whole panels of
    /// weight rows (where x86 multiplies batches in ggml's gemm and tiled orders) and without.
    #[test]
    fn as_one_row_every_row_is_its_one_row_product() {
        let k = 1024;
        for n in [96, 90] {
            for format in [KFormat::Q4K, KFormat::Q6K] {
                let w = KMatrix::new(format, random_blocks(format, n * k / QK_K, 3), n, k).unwrap();
                for table in crate::cpu::tables() {
                    for m in 2..12 {
                        let x = activations(m, k);
                        let all = w.matmul_on(table, &x, m, RowSums::AsOneRow);
                        for i in 0..m {
                            let one =
                                w.matmul_on(table, &x[i * k..(i + 1) * k], 1, RowSums::Batched);
                            for r in 0..n {
                                assert_eq!(
                                    one[r].to_bits(),
                                    all[i * n + r].to_bits(),
                                    "{format:?} {} n {n} m {m}: row {i}, output {r}",
                                    table.isa
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}
