//! Quantized matrix multiplication for the block formats whose activations are quantized to
//! Q8_0 (Q5_0 and Q8_0 weights), with ggml's numerics and an AVX2 kernel.
//!
//! candle 0.11 has no SIMD dot product for Q5_0 (its scalar `vec_dot_unopt` was 40% of decode
//! time) and multiplies prompt rows one at a time. This follows ggml: each activation row is
//! quantized to Q8_0 as `quantize_row_q8_0` does (scale 127/amax, round half to even, f16
//! scale); each block's integer dot is scaled by both f16 scales (`ggml_vec_dot_q5_0_q8_0`,
//! `ggml_vec_dot_q8_0_q8_0`). Decode (and batches under 64 rows) split the work across weight
//! rows, each read once for all activation rows of the call; prompts split it across
//! activation rows, each task passing its tiles over groups of weight rows kept in L2 and
//! writing whole output rows (see `fill_prompt`; Q5_0 groups are unpacked once per task into
//! an offset form that needs no sign trick, see `fill_prompt_q5_0`).
//!
//! Tested against dequantize-then-multiply below.

use super::scratch;
use crate::gguf::WeightBytes;
use half::f16;
use rayon::prelude::*;

pub const QK: usize = 32;
const Q5_0_BYTES: usize = 22;
const Q8_0_BYTES: usize = 34;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockFormat {
    Q5_0,
    Q8_0,
}

impl BlockFormat {
    pub fn block_bytes(self) -> usize {
        match self {
            BlockFormat::Q5_0 => Q5_0_BYTES,
            BlockFormat::Q8_0 => Q8_0_BYTES,
        }
    }
}

/// A weight matrix `[n, k]` in ggml block layout (row-major, `k / 32` blocks per row).
#[derive(Debug)]
pub struct BlockMatrix {
    format: BlockFormat,
    data: WeightBytes,
    n: usize,
    k: usize,
}

/// Activations quantized to Q8_0: per row, `k / 32` blocks of (f16 scale as f32, 32 × i8).
pub struct Q8Rows {
    scales: Vec<f32>,
    quants: Vec<i8>,
    blocks_per_row: usize,
}

impl BlockMatrix {
    pub fn new(
        format: BlockFormat,
        data: impl Into<WeightBytes>,
        n: usize,
        k: usize,
    ) -> Option<Self> {
        let data = data.into();
        (k % QK == 0 && data.len() == n * (k / QK) * format.block_bytes()).then_some(BlockMatrix {
            format,
            data,
            n,
            k,
        })
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

    /// Dequantize row `r` into `out` (`k` values): the embedding lookup.
    pub fn dequantize_row(&self, r: usize, out: &mut [f32]) {
        let row = &self.data[r * self.row_bytes()..(r + 1) * self.row_bytes()];
        for (b, out) in row
            .chunks_exact(self.format.block_bytes())
            .zip(out.chunks_exact_mut(QK))
        {
            let d = f16::from_le_bytes([b[0], b[1]]).to_f32();
            match self.format {
                BlockFormat::Q8_0 => {
                    for (o, &q) in out.iter_mut().zip(&b[2..34]) {
                        *o = d * (q as i8) as f32;
                    }
                }
                BlockFormat::Q5_0 => {
                    let vals = q5_0_values(b);
                    for (o, v) in out.iter_mut().zip(vals) {
                        *o = d * v as f32;
                    }
                }
            }
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
        let Some(first) = mats.first() else {
            return Vec::new();
        };
        debug_assert!(
            mats.iter().all(|w| w.k == first.k),
            "matmul_many: widths differ"
        );
        let q = Q8Rows::quantize(x, m, first.k);
        let threads = rayon::current_num_threads();
        if m >= PROMPT_SPLIT_ROWS {
            // Prompts: tasks own runs of activation rows and write whole `[m, n]` output rows,
            // so no transpose follows (see `fill_prompt`).
            let rows_per_task = (m / (threads * 4)).max(TILE_N).next_multiple_of(TILE_N);
            let mut outs: Vec<Vec<f32>> = mats.iter().map(|w| scratch::zeroed(m * w.n)).collect();
            let mut tasks: Vec<(&BlockMatrix, usize, &mut [f32])> = Vec::new();
            for (w, out) in mats.iter().zip(outs.iter_mut()) {
                for (t, dst) in out.chunks_mut(rows_per_task * w.n).enumerate() {
                    tasks.push((w, t * rows_per_task, dst));
                }
            }
            let sums = mats
                .iter()
                .any(|w| w.format == BlockFormat::Q5_0)
                .then(|| LaneSums::new(&q))
                .flatten();
            tasks
                .into_par_iter()
                .for_each(|(w, i0, dst)| match (&sums, w.format) {
                    (Some(sums), BlockFormat::Q5_0) => w.fill_prompt_q5_0(&q, sums, i0, dst),
                    _ => w.fill_prompt(&q, i0, dst),
                });
            return outs;
        }
        // out_t[r][i]: each task owns a contiguous run of one matrix's weight rows.
        let mut outs: Vec<Vec<f32>> = mats.iter().map(|w| scratch::zeroed(w.n * m)).collect();
        let mut tasks: Vec<(&BlockMatrix, usize, &mut [f32])> = Vec::new();
        for (w, out_t) in mats.iter().zip(outs.iter_mut()) {
            let rows_per_task = (w.n / (threads * 8)).clamp(16, 4096);
            for (t, dst) in out_t.chunks_mut(rows_per_task * m).enumerate() {
                tasks.push((w, t * rows_per_task, dst));
            }
        }
        tasks
            .into_par_iter()
            .for_each(|(w, r0, dst)| w.fill_rows(&q, m, r0, dst));
        if m == 1 {
            return outs;
        }
        mats.iter()
            .zip(outs)
            .map(|(w, out_t)| {
                let out = transpose(&out_t, w.n, m);
                scratch::release(out_t);
                out
            })
            .collect()
    }

    /// `dst[i * n + j]` = weight row `j` · activation row `i0 + i`, for the activation rows
    /// `dst` holds. Weight rows go in groups of `GROUP_ROWS` (56 KiB of Q8_0 at width 640),
    /// which stay in L2 while every activation tile of the task passes over them. (Q5_0 with
    /// AVX2 takes `fill_prompt_q5_0`, which also unpacks each group once.)
    fn fill_prompt(&self, q: &Q8Rows, i0: usize, dst: &mut [f32]) {
        let n = self.n;
        let rows = dst.len() / n;
        let row_bytes = self.row_bytes();
        let format = self.format;
        for g0 in (0..n).step_by(GROUP_ROWS) {
            let g1 = (g0 + GROUP_ROWS).min(n);
            let bytes = &self.data[g0 * row_bytes..g1 * row_bytes];
            let row = |j: usize| &bytes[j * row_bytes..(j + 1) * row_bytes];
            let width = g1 - g0;
            let kernel = kernel_for(format);
            let mut i = 0;
            if let Some(tile) = tile_for::<TILE_M, TILE_N>(format) {
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

    /// [`Self::fill_prompt`] for Q5_0 with AVX2, on each group unpacked to *offset* form: a
    /// Q5_0 value `x = v - 16` is kept as `v = x + 16` (0..=31, the nibble and fifth bit as
    /// they are) and the f16 scales as f32. `maddubs` takes `v` directly as its unsigned side,
    /// so no sign trick is needed, and `x·y = v·y - 16·y`: each 4-value lane subtracts
    /// `16 · Σ y` of its activation bytes ([`LaneSums`], once per activation block). The lane
    /// integers, hence every float operation after them, are those of the Q8_0 tile, so the
    /// results are identical; the tile does one vector op less per product (a subtraction
    /// instead of two sign ops) and keeps only `v`, not also its magnitude, live per row.
    #[cfg(target_arch = "x86_64")]
    fn fill_prompt_q5_0(&self, q: &Q8Rows, sums: &LaneSums, i0: usize, dst: &mut [f32]) {
        let n = self.n;
        let rows = dst.len() / n;
        let k = self.k;
        let nb = k / QK;
        let row_bytes = self.row_bytes();
        let mut group = OffsetGroup {
            values: vec![0u8; GROUP_ROWS * k],
            scales: vec![0f32; GROUP_ROWS * nb],
            k,
        };
        for g0 in (0..n).step_by(GROUP_ROWS) {
            let g1 = (g0 + GROUP_ROWS).min(n);
            let width = g1 - g0;
            group.unpack(&self.data[g0 * row_bytes..g1 * row_bytes]);
            let mut store = |j0: usize, i: usize, acc: &[f32], rm: usize, rn: usize| {
                for r in 0..rm {
                    for c in 0..rn {
                        dst[(i + c) * n + g0 + j0 + r] = acc[r * rn + c];
                    }
                }
            };
            let mut i = 0;
            while i + OFFSET_TILE_N <= rows {
                let mut j = 0;
                while j + OFFSET_TILE_M <= width {
                    // SAFETY: AVX2/FMA/F16C were detected by the caller (`LaneSums::new`).
                    let acc = unsafe {
                        avx2::offset_tile::<OFFSET_TILE_M, OFFSET_TILE_N>(
                            &group,
                            j,
                            q,
                            sums,
                            i0 + i,
                        )
                    };
                    store(j, i, acc.as_flattened(), OFFSET_TILE_M, OFFSET_TILE_N);
                    j += OFFSET_TILE_M;
                }
                for j in j..width {
                    // SAFETY: as above.
                    let acc = unsafe {
                        avx2::offset_tile::<1, OFFSET_TILE_N>(&group, j, q, sums, i0 + i)
                    };
                    store(j, i, acc.as_flattened(), 1, OFFSET_TILE_N);
                }
                i += OFFSET_TILE_N;
            }
            for i in i..rows {
                for j in 0..width {
                    // SAFETY: as above.
                    let acc = unsafe { avx2::offset_tile::<1, 1>(&group, j, q, sums, i0 + i) };
                    store(j, i, acc.as_flattened(), 1, 1);
                }
            }
        }
    }

    #[cfg(not(target_arch = "x86_64"))]
    fn fill_prompt_q5_0(&self, q: &Q8Rows, _: &LaneSums, i0: usize, dst: &mut [f32]) {
        self.fill_prompt(q, i0, dst)
    }

    /// `dst[j * m + i]` = weight row `r0 + j` · activation row `i`.
    fn fill_rows(&self, q: &Q8Rows, m: usize, r0: usize, dst: &mut [f32]) {
        let row_bytes = self.row_bytes();
        let kernel = kernel_for(self.format);
        let tile = tile_for::<TILE_M, TILE_N>(self.format);
        let tile_1 = tile_for::<ROWS_1, 1>(self.format);
        let rows = dst.len() / m;
        let row = |j: usize| &self.data[(r0 + j) * row_bytes..(r0 + j + 1) * row_bytes];
        let mut j = 0;
        if let Some(tile_1) = tile_1.filter(|_| m == 1) {
            while j + ROWS_1 <= rows {
                let w: [&[u8]; ROWS_1] = std::array::from_fn(|rm| row(j + rm));
                let mut acc = [[0f32; 1]; ROWS_1];
                tile_1(w, &q, 0, &mut acc);
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
                    tile(w, &q, i, &mut acc);
                    for (rm, acc_row) in acc.iter().enumerate() {
                        dst[(j + rm) * m + i..][..TILE_N].copy_from_slice(acc_row);
                    }
                    i += TILE_N;
                }
                for i in i..m {
                    for (rm, w) in w.iter().enumerate() {
                        dst[(j + rm) * m + i] = kernel(w, &q, i);
                    }
                }
                j += TILE_M;
            }
        }
        for j in j..rows {
            let w = row(j);
            for i in 0..m {
                dst[j * m + i] = kernel(w, &q, i);
            }
        }
    }
}

/// `[rows, cols]` → `[cols, rows]`. Blocks of `T` output rows are split across the compute
/// threads; each block goes through `T × T` tiles gathered on the stack, so that both the reads
/// and the writes are runs of `T` contiguous values. (Writing one value into each of 16 output
/// rows in turn, as a plain tiled loop does, put 16 cache lines 8 KiB apart — one L1 set, 8
/// ways — in play at once whenever `rows` is a power of two: a 2048 × 512 transpose took
/// 6–9 ms, 15% of the multiplication it followed.)
pub(crate) fn transpose(src: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut out = scratch::zeroed(rows * cols);
    transpose_into(src, rows, cols, &mut out);
    out
}

/// [`transpose`] into `out` (`rows * cols` long).
pub(crate) fn transpose_into(src: &[f32], rows: usize, cols: usize, out: &mut [f32]) {
    const T: usize = 16;
    debug_assert_eq!(out.len(), rows * cols);
    if rows == 0 || cols == 0 {
        return;
    }
    out.par_chunks_mut(T * rows)
        .enumerate()
        .for_each(|(b, block)| {
            let c0 = b * T;
            let width = block.len() / rows;
            let mut tile = [[0f32; T]; T];
            for r0 in (0..rows).step_by(T) {
                let height = T.min(rows - r0);
                for dr in 0..height {
                    let run = &src[(r0 + dr) * cols + c0..][..width];
                    for (dc, &v) in run.iter().enumerate() {
                        tile[dc][dr] = v;
                    }
                }
                for (dc, column) in tile.iter().enumerate().take(width) {
                    block[dc * rows + r0..][..height].copy_from_slice(&column[..height]);
                }
            }
        });
}

impl Q8Rows {
    /// ggml `quantize_row_q8_0`: per block, `id = 127 / amax`, `q = round_ties_even(x · id)`,
    /// scale stored as f16(amax / 127).
    pub fn quantize(x: &[f32], m: usize, k: usize) -> Self {
        let blocks_per_row = k / QK;
        let mut scales = vec![0f32; m * blocks_per_row];
        let mut quants = vec![0i8; m * k];
        let row = |((x, q), s): ((&[f32], &mut [i8]), &mut [f32])| quantize_blocks(x, q, s);
        // prompts: hundreds of rows, split across the compute threads
        if m >= 64 {
            x.par_chunks_exact(k)
                .zip(quants.par_chunks_exact_mut(k))
                .zip(scales.par_chunks_exact_mut(blocks_per_row))
                .for_each(row);
        } else {
            x.chunks_exact(k)
                .zip(quants.chunks_exact_mut(k))
                .zip(scales.chunks_exact_mut(blocks_per_row))
                .for_each(row);
        }
        Q8Rows {
            scales,
            quants,
            blocks_per_row,
        }
    }
}

/// Per activation block, the 8 lanes `16 · (y[4l] + y[4l+1] + y[4l+2] + y[4l+3])`: what the
/// offset form of Q5_0 subtracts (see `BlockMatrix::fill_prompt_q5_0`).
pub struct LaneSums(Vec<i32>);

impl LaneSums {
    /// `None` where the CPU lacks AVX2/FMA/F16C (the offset tile is AVX2 only).
    fn new(q: &Q8Rows) -> Option<Self> {
        #[cfg(target_arch = "x86_64")]
        if simd_available() {
            let blocks = q.scales.len();
            let mut sums = vec![0i32; blocks * 8];
            for (b, out) in sums.chunks_exact_mut(8).enumerate() {
                // SAFETY: the CPU features were detected just above.
                unsafe { avx2::lane_sums(&q.quants[b * QK..(b + 1) * QK], out) };
            }
            return Some(LaneSums(sums));
        }
        let _ = q;
        None
    }
}

/// A group of Q5_0 weight rows in offset form: values `x + 16` as bytes, row after row, and
/// each block's scale as f32.
struct OffsetGroup {
    values: Vec<u8>,
    scales: Vec<f32>,
    k: usize,
}

impl OffsetGroup {
    /// Unpack whole Q5_0 rows (at most `GROUP_ROWS`) into the front of the buffers.
    #[cfg(target_arch = "x86_64")]
    fn unpack(&mut self, rows: &[u8]) {
        for ((b, v), s) in rows
            .chunks_exact(Q5_0_BYTES)
            .zip(self.values.chunks_exact_mut(QK))
            .zip(self.scales.iter_mut())
        {
            *s = f16::from_le_bytes([b[0], b[1]]).to_f32();
            // SAFETY: AVX2/FMA/F16C were detected before any offset group is made.
            unsafe { avx2::q5_0_offset_values(b, v) };
        }
    }
}

/// Quantize whole blocks of `x` into `quants` and `scales` (one per block).
fn quantize_blocks(x: &[f32], quants: &mut [i8], scales: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if simd_available() {
        // SAFETY: the CPU features were detected just above.
        unsafe { quantize_blocks_avx2(x, quants, scales) };
        return;
    }
    quantize_blocks_portable(x, quants, scales)
}

/// The same loop compiled with AVX2: `round_ties_even` becomes an inline `vroundps` instead of a
/// call to libm's `rintf` per value (3% of prefill time).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
fn quantize_blocks_avx2(x: &[f32], quants: &mut [i8], scales: &mut [f32]) {
    quantize_blocks_portable(x, quants, scales)
}

#[inline(always)]
fn quantize_blocks_portable(x: &[f32], quants: &mut [i8], scales: &mut [f32]) {
    for ((xb, qb), scale) in x
        .chunks_exact(QK)
        .zip(quants.chunks_exact_mut(QK))
        .zip(scales.iter_mut())
    {
        let amax = xb.iter().fold(0f32, |a, v| a.max(v.abs()));
        let d = amax / 127.0;
        let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
        for (q, v) in qb.iter_mut().zip(xb) {
            *q = (v * id).round_ties_even() as i8;
        }
        *scale = f16::from_f32(d).to_f32();
    }
}

/// The 32 signed values of a Q5_0 block: `(nibble | high_bit << 4) - 16`.
#[inline]
fn q5_0_values(b: &[u8]) -> [i8; 32] {
    let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
    let qs = &b[6..22];
    let mut v = [0i8; 32];
    for j in 0..16 {
        let lo = (qs[j] & 0x0F) | ((((qh >> j) & 1) as u8) << 4);
        let hi = (qs[j] >> 4) | ((((qh >> (j + 16)) & 1) as u8) << 4);
        v[j] = lo as i8 - 16;
        v[j + 16] = hi as i8 - 16;
    }
    v
}

type Kernel = fn(&[u8], &Q8Rows, usize) -> f32;

#[cfg(target_arch = "x86_64")]
fn simd_available() -> bool {
    std::arch::is_x86_feature_detected!("avx2")
        && std::arch::is_x86_feature_detected!("fma")
        && std::arch::is_x86_feature_detected!("f16c")
}

/// Prompt rows: 2 weight rows × 4 activation rows per tile.
const TILE_M: usize = 2;
/// From this many activation rows, tasks split the activation rows rather than the weight
/// rows (enough rows for every thread to get several tiles' worth).
const PROMPT_SPLIT_ROWS: usize = 64;
/// Weight rows a prompt task keeps hot while its activation tiles pass over them.
const GROUP_ROWS: usize = 128;
const TILE_N: usize = 4;
/// The offset-form Q5_0 prompt tile (`fill_prompt_q5_0`): weight rows × activation rows.
const OFFSET_TILE_M: usize = 2;
const OFFSET_TILE_N: usize = 4;
/// One activation row (decode): 4 weight rows per tile — four independent accumulator chains,
/// and each activation block loaded once for four rows.
const ROWS_1: usize = 4;
type Tile<const RM: usize, const RN: usize> = fn([&[u8]; RM], &Q8Rows, usize, &mut [[f32; RN]; RM]);

fn tile_for<const RM: usize, const RN: usize>(format: BlockFormat) -> Option<Tile<RM, RN>> {
    #[cfg(target_arch = "x86_64")]
    {
        if simd_available() {
            return Some(match format {
                // SAFETY: the CPU features the kernel needs were detected above.
                BlockFormat::Q5_0 => {
                    |w, q, i, out| unsafe { avx2::tile::<true, RM, RN>(w, q, i, out) }
                }
                BlockFormat::Q8_0 => {
                    |w, q, i, out| unsafe { avx2::tile::<false, RM, RN>(w, q, i, out) }
                }
            });
        }
    }
    let _ = format;
    None
}

fn kernel_for(format: BlockFormat) -> Kernel {
    #[cfg(target_arch = "x86_64")]
    {
        if simd_available() {
            return match format {
                BlockFormat::Q5_0 => |w, q, i| unsafe { avx2::dot_q5_0(w, q, i) },
                BlockFormat::Q8_0 => |w, q, i| unsafe { avx2::dot_q8_0(w, q, i) },
            };
        }
    }
    match format {
        BlockFormat::Q5_0 => dot_scalar::<true>,
        BlockFormat::Q8_0 => dot_scalar::<false>,
    }
}

fn dot_scalar<const Q5: bool>(w: &[u8], q: &Q8Rows, i: usize) -> f32 {
    let bb = if Q5 { Q5_0_BYTES } else { Q8_0_BYTES };
    let mut acc = 0f32;
    for (b, blk) in w.chunks_exact(bb).enumerate() {
        let qi = i * q.blocks_per_row + b;
        let y = &q.quants[qi * QK..(qi + 1) * QK];
        let xs: [i8; 32] = if Q5 {
            q5_0_values(blk)
        } else {
            std::array::from_fn(|j| blk[2 + j] as i8)
        };
        let s: i32 = xs.iter().zip(y).map(|(&a, &b)| a as i32 * b as i32).sum();
        let d = f16::from_le_bytes([blk[0], blk[1]]).to_f32();
        acc += d * q.scales[qi] * s as f32;
    }
    acc
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    //! ggml's AVX2 formulation (`ggml-cpu/arch/x86/quants.c`): `mul_sum_i8_pairs_float`
    //! (sign trick + maddubs + madd), one fused multiply-add per block into 8 float lanes.
    use super::super::x86::{hsum, prefetch_tile};
    use super::{Q5_0_BYTES, Q8_0_BYTES, Q8Rows, QK};
    use std::arch::x86_64::*;

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn mul_sum_i8_pairs_float(x: __m256i, y: __m256i) -> __m256 {
        let ax = _mm256_sign_epi8(x, x);
        let sy = _mm256_sign_epi8(y, x);
        let dot = _mm256_maddubs_epi16(ax, sy);
        let sums = _mm256_madd_epi16(dot, _mm256_set1_epi16(1));
        _mm256_cvtepi32_ps(sums)
    }

    /// An f16 scale converted to f32 in all 8 lanes: a word broadcast and one F16C
    /// conversion. (The `half` crate's conversion is a call per block; a scalar
    /// insert-and-convert compiled to `vpinsrw` into the accumulator's register, which chained
    /// every block behind the previous block's FMA.)
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn f16_splat(lo: u8, hi: u8) -> __m256 {
        _mm256_cvtph_ps(_mm_set1_epi16(i16::from_le_bytes([lo, hi])))
    }

    /// 32 bits → 32 bytes, 0xFF where the bit is set (ggml `bytes_from_bits_32`).
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn bytes_from_bits_32(bits: u32) -> __m256i {
        let shuf = _mm256_setr_epi64x(
            0x0000000000000000,
            0x0101010101010101,
            0x0202020202020202,
            0x0303030303030303,
        );
        let r = _mm256_shuffle_epi8(_mm256_set1_epi32(bits as i32), shuf);
        let mask = _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe_u64 as i64);
        let r = _mm256_or_si256(r, mask);
        _mm256_cmpeq_epi8(r, _mm256_set1_epi64x(-1))
    }

    /// 16 bytes of nibbles → 32 bytes: low nibbles first, then high (ggml `bytes_from_nibbles_32`).
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn bytes_from_nibbles_32(p: &[u8]) -> __m256i {
        assert!(p.len() >= 16);
        // SAFETY: 16 readable bytes, checked above; unaligned load.
        let tmp = unsafe { _mm_loadu_si128(p.as_ptr() as *const __m128i) };
        let bytes = _mm256_insertf128_si256(_mm256_castsi128_si256(tmp), _mm_srli_epi16(tmp, 4), 1);
        _mm256_and_si256(_mm256_set1_epi8(0x0F), bytes)
    }

    /// A Q5_0 block's 32 values as signed bytes.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn q5_0_block(blk: &[u8]) -> __m256i {
        let qh = u32::from_le_bytes([blk[2], blk[3], blk[4], blk[5]]);
        let qx = bytes_from_nibbles_32(&blk[6..22]);
        // where the fifth bit is 0 the value is nibble - 16: set the high nibble to 0xF
        let hi = _mm256_andnot_si256(bytes_from_bits_32(qh), _mm256_set1_epi8(0xF0u8 as i8));
        _mm256_or_si256(qx, hi)
    }

    /// A Q5_0 block's values in offset form, `x + 16` (0..=31): nibble | fifth bit << 4.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn q5_0_offset_values(blk: &[u8], out: &mut [u8]) {
        assert!(blk.len() >= Q5_0_BYTES && out.len() >= QK);
        let qh = u32::from_le_bytes([blk[2], blk[3], blk[4], blk[5]]);
        let v = _mm256_or_si256(
            bytes_from_nibbles_32(&blk[6..22]),
            _mm256_and_si256(bytes_from_bits_32(qh), _mm256_set1_epi8(0x10)),
        );
        // SAFETY: 32 writable bytes, checked above; unaligned store.
        unsafe { _mm256_storeu_si256(out.as_mut_ptr() as *mut __m256i, v) };
    }

    /// `out[l] = 16 · Σ y[4l..4l + 4]` for one activation block.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn lane_sums(y: &[i8], out: &mut [i32]) {
        assert!(y.len() >= QK && out.len() >= 8);
        // SAFETY: 32 readable bytes and 8 writable lanes, checked above; unaligned.
        unsafe {
            let y = _mm256_loadu_si256(y.as_ptr() as *const __m256i);
            let s = _mm256_madd_epi16(
                _mm256_maddubs_epi16(_mm256_set1_epi8(16), y),
                _mm256_set1_epi16(1),
            );
            _mm256_storeu_si256(out.as_mut_ptr() as *mut __m256i, s);
        }
    }

    /// Rows `j..j + RM` of an offset group times activation rows `i0..i0 + RN`: per block,
    /// `maddubs(v, y)`, pairs summed to i32 lanes, the lane sums of `y` subtracted — the
    /// same lane integers as `mul_sum_i8_pairs_float` gives for `x = v - 16` — then the same
    /// conversion, scale product and fused multiply-add as [`tile`].
    #[target_feature(enable = "avx2,fma,f16c")]
    #[allow(clippy::needless_range_loop)] // indices as in `tile`, whose loops this mirrors
    pub(super) unsafe fn offset_tile<const RM: usize, const RN: usize>(
        group: &super::OffsetGroup,
        j: usize,
        q: &Q8Rows,
        sums: &super::LaneSums,
        i0: usize,
    ) -> [[f32; RN]; RM] {
        let k = group.k;
        let nb = k / QK;
        assert!(
            (j + RM) * k <= group.values.len()
                && (j + RM) * nb <= group.scales.len()
                && (i0 + RN) * nb <= q.scales.len()
                && q.blocks_per_row == nb
                && sums.0.len() == q.scales.len() * 8
        );
        let ones = _mm256_set1_epi16(1);
        let v = group.values.as_ptr();
        let mut acc = [[_mm256_setzero_ps(); RN]; RM];
        for b in 0..nb {
            let mut x = [_mm256_setzero_si256(); RM];
            let mut d = [_mm256_setzero_ps(); RM];
            for rm in 0..RM {
                // SAFETY: rows j..j + RM of the group are in bounds (asserted above).
                unsafe {
                    x[rm] = _mm256_loadu_si256(v.add((j + rm) * k + b * QK) as *const __m256i);
                    d[rm] = _mm256_set1_ps(*group.scales.get_unchecked((j + rm) * nb + b));
                }
            }
            for rn in 0..RN {
                let qi = (i0 + rn) * nb + b;
                // SAFETY: activation block qi and its lane sums are in bounds (asserted above).
                let (y, s, dy) = unsafe {
                    (
                        _mm256_loadu_si256(q.quants.as_ptr().add(qi * QK) as *const __m256i),
                        _mm256_loadu_si256(sums.0.as_ptr().add(qi * 8) as *const __m256i),
                        _mm256_set1_ps(*q.scales.get_unchecked(qi)),
                    )
                };
                for rm in 0..RM {
                    let dot = _mm256_madd_epi16(_mm256_maddubs_epi16(x[rm], y), ones);
                    let p = _mm256_cvtepi32_ps(_mm256_sub_epi32(dot, s));
                    acc[rm][rn] = _mm256_fmadd_ps(_mm256_mul_ps(d[rm], dy), p, acc[rm][rn]);
                }
            }
        }
        let mut out = [[0f32; RN]; RM];
        for rm in 0..RM {
            for rn in 0..RN {
                out[rm][rn] = hsum(acc[rm][rn]);
            }
        }
        out
    }

    /// Dots of `TILE_M` weight rows with activation rows `i0..i0 + TILE_N`: the same per-block
    /// products and sums as `dot_q5_0`/`dot_q8_0` (so results are identical), with each weight
    /// block decoded once and each activation block loaded once. `w` are consecutive rows of
    /// one matrix, which the prefetch relies on (`prefetch_tile`).
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn tile<const Q5: bool, const TILE_M: usize, const TILE_N: usize>(
        w: [&[u8]; TILE_M],
        q: &Q8Rows,
        i0: usize,
        out: &mut [[f32; TILE_N]; TILE_M],
    ) {
        let bb = if Q5 { Q5_0_BYTES } else { Q8_0_BYTES };
        let nb = w[0].len() / bb;
        let mut acc = [[_mm256_setzero_ps(); TILE_N]; TILE_M];
        for b in 0..nb {
            let mut wx = [_mm256_setzero_si256(); TILE_M];
            let mut wd = [_mm256_setzero_ps(); TILE_M];
            prefetch_tile::<TILE_M>(w[0], b, bb);
            for rm in 0..TILE_M {
                let blk = &w[rm][b * bb..(b + 1) * bb];
                wd[rm] = f16_splat(blk[0], blk[1]);
                wx[rm] = if Q5 {
                    q5_0_block(blk)
                } else {
                    // SAFETY: a Q8_0 block has 32 quant bytes after its 2-byte scale.
                    unsafe { _mm256_loadu_si256(blk.as_ptr().add(2) as *const __m256i) }
                };
            }
            for rn in 0..TILE_N {
                let qi = (i0 + rn) * q.blocks_per_row + b;
                // SAFETY: block qi of the activation quants is in bounds (qi < m · blocks).
                let qy =
                    unsafe { _mm256_loadu_si256(q.quants.as_ptr().add(qi * QK) as *const __m256i) };
                let dy = _mm256_set1_ps(q.scales[qi]);
                for rm in 0..TILE_M {
                    let p = mul_sum_i8_pairs_float(wx[rm], qy);
                    acc[rm][rn] = _mm256_fmadd_ps(_mm256_mul_ps(wd[rm], dy), p, acc[rm][rn]);
                }
            }
        }
        for rm in 0..TILE_M {
            for rn in 0..TILE_N {
                out[rm][rn] = hsum(acc[rm][rn]);
            }
        }
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn dot_q5_0(w: &[u8], q: &Q8Rows, i: usize) -> f32 {
        let mut acc = _mm256_setzero_ps();
        let nb = w.len() / Q5_0_BYTES;
        for b in 0..nb {
            let blk = &w[b * Q5_0_BYTES..(b + 1) * Q5_0_BYTES];
            let qi = i * q.blocks_per_row + b;
            let d = _mm256_mul_ps(f16_splat(blk[0], blk[1]), _mm256_set1_ps(q.scales[qi]));
            let qx = q5_0_block(blk);
            let qy =
                unsafe { _mm256_loadu_si256(q.quants.as_ptr().add(qi * QK) as *const __m256i) };
            let p = mul_sum_i8_pairs_float(qx, qy);
            acc = _mm256_fmadd_ps(d, p, acc);
        }
        hsum(acc)
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn dot_q8_0(w: &[u8], q: &Q8Rows, i: usize) -> f32 {
        let mut acc = _mm256_setzero_ps();
        let nb = w.len() / Q8_0_BYTES;
        for b in 0..nb {
            let blk = &w[b * Q8_0_BYTES..(b + 1) * Q8_0_BYTES];
            let qi = i * q.blocks_per_row + b;
            let d = _mm256_mul_ps(f16_splat(blk[0], blk[1]), _mm256_set1_ps(q.scales[qi]));
            let qx = unsafe { _mm256_loadu_si256(blk.as_ptr().add(2) as *const __m256i) };
            let qy =
                unsafe { _mm256_loadu_si256(q.quants.as_ptr().add(qi * QK) as *const __m256i) };
            let p = mul_sum_i8_pairs_float(qx, qy);
            acc = _mm256_fmadd_ps(d, p, acc);
        }
        hsum(acc)
    }
}

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

    #[test]
    fn scalar_and_simd_kernels_agree() {
        let (n, k) = (8, 512);
        let data = random_q5_0(n * k / QK, 3);
        let x = activations(2, k);
        let q = Q8Rows::quantize(&x, 2, k);
        let kernel = kernel_for(BlockFormat::Q5_0);
        let rb = k / QK * Q5_0_BYTES;
        for r in 0..n {
            for i in 0..2 {
                let w = &data[r * rb..(r + 1) * rb];
                let a = kernel(w, &q, i);
                let b = dot_scalar::<true>(w, &q, i);
                assert!((a - b).abs() <= 1e-4 * (1.0 + b.abs()), "{a} vs {b}");
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
        let t = transpose(&src, rows, cols);
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
        let v = q5_0_values(&b);
        assert_eq!(v[0], 0x1F - 16);
        assert_eq!(v[16], 3 - 16);
        assert_eq!(v[1], -16);
    }
}
