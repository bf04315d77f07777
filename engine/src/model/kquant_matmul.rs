//! Quantized matrix multiplication for ggml's K-quant weight formats Q4_K and Q6_K (super-blocks
//! of 256 values), whose activations are quantized to Q8_K, with ggml's numerics and an AVX2
//! kernel.
//!
//! Follows ggml (llama.cpp `ggml/src`): block layouts `block_q4_K` / `block_q6_K`
//! (`ggml-common.h`); `dequantize_row_q4_K`, `dequantize_row_q6_K`, `quantize_row_q8_K_ref` and
//! `get_scale_min_k4` (`ggml-quants.c`); the dot products `ggml_vec_dot_q4_K_q8_K` and
//! `ggml_vec_dot_q6_K_q8_K`, as their `__AVX2__` branches (`ggml-cpu/arch/x86/quants.c`) and as
//! the portable `_generic` versions (`ggml-cpu/quants.c`) for CPUs without AVX2+FMA+F16C. The
//! integer part of every dot product is exact and identical in both kernels; only the f32
//! scaling and accumulation order differ between them, as between ggml's two versions.
//!
//! llama.cpp's CPU backend on AVX2 by default repacks Q4_K weights whose row count is a
//! multiple of 8 and multiplies them with `ggml_gemv_q4_K_8x8_q8_K` instead: the same integer
//! sums, scaled and accumulated in f32 in a different order (differences near 1e-7 relative).
//!
//! Work is split across output rows, as in `q8_matmul`. The one-row AVX2 kernel decodes a
//! weight super-block (Q4_K: 6-bit scales and mins unpacked, nibbles split; Q6_K: low nibbles
//! and high bit pairs recombined) for every activation row it meets, which for a prompt is most
//! of the work. So on AVX2 the rows go through register tiles (`avx2::tile_q4_k`,
//! `avx2::tile_q6_k`) that decode each 32-value sub-block of `RM` weight rows once and dot it
//! with `RN` activation rows, each activation vector loaded once for the `RM` weight rows:
//!
//! - prompts (m ≥ 4): 1 weight row × 8 activation rows, then 1 × 4 for the rest, the one-row
//!   kernel for the last m mod 4. Measured against 2 × 4, 1 × 4, 1 × 6, 1 × 12, 2 × 2 and
//!   others: the 8 i32 sums plus the decoded sub-block and its scales about fill the 16
//!   registers, and one weight row per tile leaves the decode to be shared 8 ways.
//! - decode (and m < 4), Q4_K: 4 weight rows × 1 activation row, four independent chains with
//!   each activation vector loaded once. Q6_K keeps the one-row kernel: its tiles measured no
//!   faster, as its decode is per weight row either way and is most of the work.
//!
//! A tile computes every output's i32 lanes exactly as the one-row kernel does (integer sums
//! are exact in any order) and then the same f32 operations in the same order per super-block
//! (`d_y · d_w`, one FMA into 8 lanes, ggml's horizontal sum), so its results are identical to
//! the one-row kernel's, bit for bit. Within a task, tiles walk activation tiles outermost (a
//! tile's rows stay in L1) over groups of weight rows of at most `GROUP_BYTES` (which stay in
//! L2), so activations stream from memory once per group rather than once per weight row.
//!
//! Tested against dequantize-then-multiply, and the tiles against the one-row kernel, below.

use crate::gguf::WeightBytes;
use half::f16;
use rayon::prelude::*;

/// Values per super-block (ggml `QK_K`).
pub const QK_K: usize = 256;
const Q4_K_BYTES: usize = 144;
const Q6_K_BYTES: usize = 210;
/// Q8_K keeps one sum per 16 quants.
const BSUMS: usize = QK_K / 16;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KFormat {
    /// `block_q4_K`: f16 d, f16 dmin, 12 bytes of 6-bit scales and mins, 128 bytes of nibbles.
    Q4K,
    /// `block_q6_K`: 128 bytes low nibbles, 64 bytes high 2-bit pairs, 16 i8 scales, f16 d.
    Q6K,
}

impl KFormat {
    pub fn block_bytes(self) -> usize {
        match self {
            KFormat::Q4K => Q4_K_BYTES,
            KFormat::Q6K => Q6_K_BYTES,
        }
    }
}

/// A weight matrix `[n, k]` in ggml K-quant layout (row-major, `k / 256` blocks per row).
#[derive(Debug)]
pub struct KMatrix {
    format: KFormat,
    data: WeightBytes,
    n: usize,
    k: usize,
}

/// Activations quantized like ggml `quantize_row_q8_K`: per row, `k / 256` blocks of an f32
/// scale, 256 × i8 and 16 sums of 16 quants (the sums let Q4_K's mins and Q6_K's −32 offset be
/// applied once per block instead of per value).
#[derive(Debug, Clone)]
pub struct Q8KRows {
    d: Vec<f32>,
    qs: Vec<i8>,
    bsums: Vec<i16>,
    rows: usize,
    blocks_per_row: usize,
}

/// One activation row of a [`Q8KRows`], as the kernels read it.
#[derive(Clone, Copy)]
struct Q8KRow<'a> {
    d: &'a [f32],
    qs: &'a [i8],
    bsums: &'a [i16],
}

impl KMatrix {
    /// `None` unless `k` is a multiple of 256 and `data` holds exactly `n` rows of blocks.
    pub fn new(format: KFormat, data: impl Into<WeightBytes>, n: usize, k: usize) -> Option<Self> {
        let data = data.into();
        (k.is_multiple_of(QK_K) && data.len() == n * (k / QK_K) * format.block_bytes())
            .then_some(KMatrix { format, data, n, k })
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
            match self.format {
                KFormat::Q4K => dequantize_q4_k(b, y),
                KFormat::Q6K => dequantize_q6_k(b, y),
            }
        }
    }

    /// `x` `[m, k]` → `[m, n]` = x · Wᵀ.
    pub fn matmul(&self, x: &[f32], m: usize) -> Vec<f32> {
        let q = Q8KRows::quantize(x, m, self.k);
        let mut out = super::scratch::zeroed(m * self.n);
        self.matmul_q(&q, m, &mut out);
        out
    }

    /// `out` `[m, n]` = activations · Wᵀ, with activations already quantized (one quantization
    /// can serve every matrix that reads the same input, e.g. Q, K and V).
    ///
    /// # Panics
    /// If `q` does not hold `m` rows of `k` values or `out` is not `m * n` long.
    pub fn matmul_q(&self, q: &Q8KRows, m: usize, out: &mut [f32]) {
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
            self.dot_rows(q, 1, out);
            return;
        }
        // Tasks own contiguous runs of weight rows, so they write `[n, m]`; transpose after.
        let mut out_t = super::scratch::zeroed(self.n * m);
        self.dot_rows(q, m, &mut out_t);
        super::q8_matmul::transpose_into(&out_t, self.n, m, out);
        super::scratch::release(out_t);
    }

    /// `out_t[r * m + i]` = weight row `r` · activation row `i`.
    fn dot_rows(&self, q: &Q8KRows, m: usize, out_t: &mut [f32]) {
        let kernel = kernel_for(self.format);
        if m < PROMPT_TAIL {
            // Decode, and prompts too short for a prompt tile: Q4_K takes several weight rows
            // per pass. Q6_K stays on the one-row kernel, which its tiles did not beat here: its
            // 6-bit recombination is per weight row either way and is most of the work.
            let tile = match self.format {
                KFormat::Q4K => tile_for::<Q4K_DECODE_ROWS, 1>(self.format),
                KFormat::Q6K => None,
            };
            if let Some(tile) = tile {
                return self.par_tasks(m, out_t, |r0, dst| {
                    self.dot_tiled::<Q4K_DECODE_ROWS>(q, r0, dst, kernel, |j0, j1, dst| {
                        self.tile_pass(tile, q, r0, j0..j1, 0, dst)
                    })
                });
            }
        } else if let (Some(tile), Some(tail)) = (
            tile_for::<1, PROMPT_TILE>(self.format),
            tile_for::<1, PROMPT_TAIL>(self.format),
        ) {
            return self.par_tasks(m, out_t, |r0, dst| {
                self.dot_tiled::<1>(q, r0, dst, kernel, |j0, j1, dst| {
                    let i = self.tile_pass(tile, q, r0, j0..j1, 0, dst);
                    self.tile_pass(tail, q, r0, j0..j1, i, dst)
                })
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

    /// Splits `out_t` (`[n, m]`) into tasks of contiguous weight rows; `task(r0, dst)` fills
    /// rows `r0..` of it.
    fn par_tasks(&self, m: usize, out_t: &mut [f32], task: impl Fn(usize, &mut [f32]) + Sync) {
        let rows_per_task = (self.n / (rayon::current_num_threads() * 8)).clamp(16, 4096);
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
        kernel: Kernel,
        tiles: impl Fn(usize, usize, &mut [f32]) -> usize,
    ) {
        let m = q.rows;
        let rows = dst.len() / m;
        // Groups of equal size (a multiple of RM), none over GROUP_BYTES unless one row is.
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
        tile: Tile<RM, RN>,
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

impl Q8KRows {
    /// ggml `quantize_row_q8_K_ref` for each of the `m` rows of `x` (`[m, k]`, `k % 256 == 0`):
    /// per block, `max` is the value of largest magnitude (with its sign),
    /// `iscale = -127 / max`, `q = min(127, nearest_int(iscale · x))`, `d = 1 / iscale`; an
    /// all-zero block gets `d = 0` and zero quants.
    ///
    /// # Panics
    /// If `k` is not a multiple of 256 or `x` is not `m * k` long.
    pub fn quantize(x: &[f32], m: usize, k: usize) -> Self {
        assert!(
            k.is_multiple_of(QK_K),
            "k = {k} is not a multiple of {QK_K}"
        );
        assert_eq!(x.len(), m * k, "x must be m * k long");
        let blocks = m * k / QK_K;
        let nb = k / QK_K;
        let mut d = vec![0f32; blocks];
        let mut qs = vec![0i8; m * k];
        let mut bsums = vec![0i16; blocks * BSUMS];
        let row = |(((x, q), s), d): (((&[f32], &mut [i8]), &mut [i16]), &mut [f32])| {
            quantize_row_q8_k(x, q, s, d)
        };
        // prompts: hundreds of rows, split across the compute threads
        if m >= 64 {
            x.par_chunks_exact(k)
                .zip(qs.par_chunks_exact_mut(k))
                .zip(bsums.par_chunks_exact_mut(nb * BSUMS))
                .zip(d.par_chunks_exact_mut(nb))
                .for_each(row);
        } else {
            x.chunks_exact(k)
                .zip(qs.chunks_exact_mut(k))
                .zip(bsums.chunks_exact_mut(nb * BSUMS))
                .zip(d.chunks_exact_mut(nb))
                .for_each(row);
        }
        Q8KRows {
            d,
            qs,
            bsums,
            rows: m,
            blocks_per_row: k / QK_K,
        }
    }

    fn row(&self, i: usize) -> Q8KRow<'_> {
        let nb = self.blocks_per_row;
        Q8KRow {
            d: &self.d[i * nb..(i + 1) * nb],
            qs: &self.qs[i * nb * QK_K..(i + 1) * nb * QK_K],
            bsums: &self.bsums[i * nb * BSUMS..(i + 1) * nb * BSUMS],
        }
    }
}

/// One row of [`Q8KRows::quantize`]: `x` `[k]` into quants, block sums and scales.
fn quantize_row_q8_k(x: &[f32], qs: &mut [i8], bsums: &mut [i16], d: &mut [f32]) {
    for (((xb, qb), sb), db) in x
        .chunks_exact(QK_K)
        .zip(qs.chunks_exact_mut(QK_K))
        .zip(bsums.chunks_exact_mut(BSUMS))
        .zip(d.iter_mut())
    {
        let mut max = 0f32;
        let mut amax = 0f32;
        for &v in xb {
            if v.abs() > amax {
                amax = v.abs();
                max = v;
            }
        }
        if amax == 0.0 {
            // ggml leaves bsums unset here; zero is what they would sum to.
            *db = 0.0;
            continue;
        }
        // -127, not -128: ggml keeps every quant within ±127 for its IQ2 AVX kernels.
        let iscale = -127.0 / max;
        for (q, &v) in qb.iter_mut().zip(xb) {
            *q = nearest_int(iscale * v).min(127) as i8;
        }
        for (s, q16) in sb.iter_mut().zip(qb.chunks_exact(16)) {
            *s = q16.iter().map(|&q| q as i16).sum();
        }
        *db = 1.0 / iscale;
    }
}

/// ggml `nearest_int`: adding 1.5·2²³ leaves the rounded integer (ties to even) in the low
/// mantissa bits. Valid for |x| ≤ 2²² − 1, which |iscale · x| ≤ 127 always is.
#[inline]
fn nearest_int(x: f32) -> i32 {
    let bits = (x + 12_582_912.0).to_bits() as i32;
    (bits & 0x007f_ffff) - 0x0040_0000
}

#[inline]
fn f16_at(b: &[u8], at: usize) -> f32 {
    f16::from_le_bytes([b[at], b[at + 1]]).to_f32()
}

/// ggml `get_scale_min_k4`: scale and min of Q4_K sub-block `j` (0..8) from the 12 packed bytes.
/// Sub-blocks 0–3 use the low 6 bits of bytes 0–3 (scales) and 4–7 (mins); sub-blocks 4–7 take
/// their low 4 bits from bytes 8–11 and their top 2 bits from the spare top bits of bytes 0–7.
#[inline]
fn get_scale_min_k4(j: usize, q: &[u8]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    }
}

const KMASK1: u32 = 0x3f3f_3f3f;
const KMASK2: u32 = 0x0f0f_0f0f;
const KMASK3: u32 = 0x0303_0303;

/// The dot kernels' form of `get_scale_min_k4` for all 8 sub-blocks at once (the `utmp` dance
/// in `ggml_vec_dot_q4_K_q8_K`): the little-endian bytes of words 0–1 are the 8 scales, of
/// words 2–3 the 8 mins.
#[inline]
fn q4_k_scales_mins(s: &[u8]) -> [u32; 4] {
    let word = |i: usize| u32::from_le_bytes([s[4 * i], s[4 * i + 1], s[4 * i + 2], s[4 * i + 3]]);
    let mut utmp = [word(0), word(1), word(2), 0];
    utmp[3] = ((utmp[2] >> 4) & KMASK2) | (((utmp[1] >> 6) & KMASK3) << 4);
    let uaux = utmp[1] & KMASK1;
    utmp[1] = (utmp[2] & KMASK2) | (((utmp[0] >> 6) & KMASK3) << 4);
    utmp[2] = uaux;
    utmp[0] &= KMASK1;
    utmp
}

/// ggml `dequantize_row_q4_K` for one block: `d·sc·q − dmin·m` per 32-value sub-block.
fn dequantize_q4_k(b: &[u8], y: &mut [f32]) {
    let d = f16_at(b, 0);
    let min = f16_at(b, 2);
    let scales = &b[4..16];
    let qs = &b[16..144];
    for (g, (q, y)) in qs.chunks_exact(32).zip(y.chunks_exact_mut(64)).enumerate() {
        let (sc, m) = get_scale_min_k4(2 * g, scales);
        let (d1, m1) = (d * sc as f32, min * m as f32);
        let (sc, m) = get_scale_min_k4(2 * g + 1, scales);
        let (d2, m2) = (d * sc as f32, min * m as f32);
        let (lo, hi) = y.split_at_mut(32);
        for ((l, h), &q) in lo.iter_mut().zip(hi.iter_mut()).zip(q) {
            *l = d1 * (q & 0xF) as f32 - m1;
            *h = d2 * (q >> 4) as f32 - m2;
        }
    }
}

/// ggml `dequantize_row_q6_K` for one block: `d·sc·(q − 32)` per 16-value sub-block.
fn dequantize_q6_k(b: &[u8], y: &mut [f32]) {
    let d = f16_at(b, 208);
    // Two halves of 128 values: 64 low-nibble bytes, 32 high-bit bytes and 8 scales each.
    for part in 0..2 {
        let ql = &b[64 * part..64 * part + 64];
        let qh = &b[128 + 32 * part..128 + 32 * part + 32];
        let sc = &b[192 + 8 * part..192 + 8 * part + 8];
        let y = &mut y[128 * part..128 * part + 128];
        for l in 0..32 {
            let is = l / 16;
            let q1 = ((ql[l] & 0xF) | ((qh[l] & 3) << 4)) as i8 - 32;
            let q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) as i8 - 32;
            let q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i8 - 32;
            let q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i8 - 32;
            // C evaluates `d * sc[is] * q` left to right.
            y[l] = d * (sc[is] as i8) as f32 * q1 as f32;
            y[l + 32] = d * (sc[is + 2] as i8) as f32 * q2 as f32;
            y[l + 64] = d * (sc[is + 4] as i8) as f32 * q3 as f32;
            y[l + 96] = d * (sc[is + 6] as i8) as f32 * q4 as f32;
        }
    }
}

type Kernel = fn(&[u8], Q8KRow<'_>) -> f32;

#[cfg(target_arch = "x86_64")]
fn simd_available() -> bool {
    std::arch::is_x86_feature_detected!("avx2")
        && std::arch::is_x86_feature_detected!("fma")
        && std::arch::is_x86_feature_detected!("f16c")
}

fn kernel_for(format: KFormat) -> Kernel {
    #[cfg(target_arch = "x86_64")]
    {
        if simd_available() {
            return match format {
                // SAFETY: AVX2, FMA and F16C were detected on this CPU just above.
                KFormat::Q4K => |w, y| unsafe { avx2::vec_dot_q4_k_q8_k(w, y) },
                // SAFETY: as above.
                KFormat::Q6K => |w, y| unsafe { avx2::vec_dot_q6_k_q8_k(w, y) },
            };
        }
    }
    match format {
        KFormat::Q4K => vec_dot_q4_k_q8_k_generic,
        KFormat::Q6K => vec_dot_q6_k_q8_k_generic,
    }
}

/// Prompt tiles: one weight row × 8 activation rows, then one × 4 for what is left.
const PROMPT_TILE: usize = 8;
const PROMPT_TAIL: usize = 4;
/// Decode (and m < `PROMPT_TAIL`): weight rows per Q4_K tile.
const Q4K_DECODE_ROWS: usize = 4;
/// Most weight bytes per group of `dot_tiled`: well inside an L2 cache.
const GROUP_BYTES: usize = 128 << 10;

/// Dots of `RM` weight rows with activation rows `i0..i0 + RN`, into `out[weight][activation]`.
type Tile<const RM: usize, const RN: usize> =
    fn([&[u8]; RM], &Q8KRows, usize, &mut [[f32; RN]; RM]);

fn tile_for<const RM: usize, const RN: usize>(format: KFormat) -> Option<Tile<RM, RN>> {
    #[cfg(target_arch = "x86_64")]
    {
        if simd_available() {
            return Some(match format {
                // SAFETY: AVX2, FMA and F16C were detected on this CPU just above.
                KFormat::Q4K => |w, q, i0, out| unsafe { avx2::tile_q4_k(w, q, i0, out) },
                // SAFETY: as above.
                KFormat::Q6K => |w, q, i0, out| unsafe { avx2::tile_q6_k(w, q, i0, out) },
            });
        }
    }
    let _ = format;
    None
}

/// ggml `ggml_vec_dot_q4_K_q8_K_generic`: eight i32 lanes per block, scaled into eight f32 sums;
/// the mins term `dmin · Σ m·bsum` goes into a separate scalar.
fn vec_dot_q4_k_q8_k_generic(w: &[u8], y: Q8KRow<'_>) -> f32 {
    let mut sums = [0f32; 8];
    let mut sumf = 0f32;
    for (i, blk) in w.chunks_exact(Q4_K_BYTES).enumerate() {
        let mut aux8 = [0i8; QK_K];
        for (a, q4) in aux8.chunks_exact_mut(64).zip(blk[16..144].chunks_exact(32)) {
            let (lo, hi) = a.split_at_mut(32);
            for ((l, h), &q) in lo.iter_mut().zip(hi.iter_mut()).zip(q4) {
                *l = (q & 0xF) as i8;
                *h = (q >> 4) as i8;
            }
        }
        let utmp = q4_k_scales_mins(&blk[4..16]);
        let scales: [u8; 8] = std::array::from_fn(|j| (utmp[j / 4] >> (8 * (j % 4))) as u8);
        let mins: [u8; 8] = std::array::from_fn(|j| (utmp[2 + j / 4] >> (8 * (j % 4))) as u8);
        let bsums = &y.bsums[i * BSUMS..(i + 1) * BSUMS];
        let sumi: i32 = (0..BSUMS)
            .map(|j| bsums[j] as i32 * mins[j / 2] as i32)
            .sum();
        let q8 = &y.qs[i * QK_K..(i + 1) * QK_K];
        let mut aux32 = [0i32; 8];
        for ((a, q), &scale) in aux8.chunks_exact(32).zip(q8.chunks_exact(32)).zip(&scales) {
            for (a8, q8) in a.chunks_exact(8).zip(q.chunks_exact(8)) {
                for l in 0..8 {
                    aux32[l] += scale as i32 * (q8[l] as i16 * a8[l] as i16) as i32;
                }
            }
        }
        let d = f16_at(blk, 0) * y.d[i];
        for (s, &a) in sums.iter_mut().zip(&aux32) {
            *s += d * a as f32;
        }
        let dmin = f16_at(blk, 2) * y.d[i];
        sumf -= dmin * sumi as f32;
    }
    for s in sums {
        sumf += s;
    }
    sumf
}

/// ggml `ggml_vec_dot_q6_K_q8_K_generic`: values decoded to `q − 32`, eight i32 lanes per
/// block scaled into eight f32 sums.
fn vec_dot_q6_k_q8_k_generic(w: &[u8], y: Q8KRow<'_>) -> f32 {
    let mut sums = [0f32; 8];
    for (i, blk) in w.chunks_exact(Q6_K_BYTES).enumerate() {
        let mut aux8 = [0i8; QK_K];
        for part in 0..2 {
            let ql = &blk[64 * part..64 * part + 64];
            let qh = &blk[128 + 32 * part..128 + 32 * part + 32];
            let a = &mut aux8[128 * part..128 * part + 128];
            for l in 0..32 {
                a[l] = ((ql[l] & 0xF) | ((qh[l] & 3) << 4)) as i8 - 32;
                a[l + 32] = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) as i8 - 32;
                a[l + 64] = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i8 - 32;
                a[l + 96] = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i8 - 32;
            }
        }
        let q8 = &y.qs[i * QK_K..(i + 1) * QK_K];
        let mut aux32 = [0i32; 8];
        for ((a, q), &scale) in aux8
            .chunks_exact(16)
            .zip(q8.chunks_exact(16))
            .zip(&blk[192..208])
        {
            let scale = scale as i8 as i32;
            for (a8, q8) in a.chunks_exact(8).zip(q.chunks_exact(8)) {
                for l in 0..8 {
                    aux32[l] += scale * (q8[l] as i16 * a8[l] as i16) as i32;
                }
            }
        }
        let d = f16_at(blk, 208) * y.d[i];
        for (s, &a) in sums.iter_mut().zip(&aux32) {
            *s += d * a as f32;
        }
    }
    let mut sumf = 0f32;
    for s in sums {
        sumf += s;
    }
    sumf
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    //! The `__AVX2__` branches of ggml's `ggml_vec_dot_q4_K_q8_K` and `ggml_vec_dot_q6_K_q8_K`
    //! (`ggml-cpu/arch/x86/quants.c`), intrinsic for intrinsic but for the f16 → f32 scale
    //! conversions (inline F16C, as ggml's `GGML_FP16_TO_FP32` on x86), and the tiles built from
    //! the same operations (see the module above). Weight quants are unsigned
    //! (Q4_K nibbles 0..15, Q6_K values 0..63 before the −32), so `maddubs` takes them directly:
    //! its pairwise i16 sums stay below 2·63·127 and never saturate. Q4_K's mins and Q6_K's −32
    //! are applied through the activations' `bsums`.
    use super::super::x86::{hsum, prefetch_tile};
    use super::{BSUMS, Q4_K_BYTES, Q6_K_BYTES, Q8KRow, Q8KRows, QK_K, q4_k_scales_mins};
    use std::arch::x86_64::*;

    /// ggml `get_scale_shuffle_k4(i)`: bytes `2i, 2i+1` repeated, broadcasting i16 lane `i`.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn scale_shuffle_k4(i: usize) -> __m256i {
        _mm256_set1_epi16((((2 * i + 1) << 8) | (2 * i)) as i16)
    }

    /// Q6_K scales `2i` (eight times) and `2i+1` (eight times) as i16, one per `maddubs` pair
    /// of a 32-value group: `_mm_shuffle_epi8(scales, get_scale_shuffle(i))` widened, as ggml.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn q6_scales(scales: __m128i, i: usize) -> __m256i {
        // the bytes of ggml's `get_scale_shuffle(i)`
        let lo = (2 * i as u64) * 0x0101_0101_0101_0101;
        let hi = (2 * i as u64 + 1) * 0x0101_0101_0101_0101;
        _mm256_cvtepi8_epi16(_mm_shuffle_epi8(
            scales,
            _mm_set_epi64x(hi as i64, lo as i64),
        ))
    }

    fn check_lengths(w: &[u8], block_bytes: usize, y: Q8KRow<'_>) -> usize {
        let nb = w.len() / block_bytes;
        assert!(
            w.len() == nb * block_bytes
                && y.d.len() == nb
                && y.qs.len() == nb * QK_K
                && y.bsums.len() == nb * BSUMS,
            "weight row and activation row lengths disagree"
        );
        nb
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) fn vec_dot_q4_k_q8_k(w: &[u8], y: Q8KRow<'_>) -> f32 {
        let nb = check_lengths(w, Q4_K_BYTES, y);
        let m4 = _mm256_set1_epi8(0xF);
        let mut acc = _mm256_setzero_ps();
        let mut acc_m = _mm_setzero_ps();
        for i in 0..nb {
            let blk = &w[i * Q4_K_BYTES..(i + 1) * Q4_K_BYTES];
            let dd = f16_pair(u32::from_le_bytes([blk[0], blk[1], blk[2], blk[3]]));
            let d = y.d[i] * _mm_cvtss_f32(dd);
            let dmin = -y.d[i] * _mm_cvtss_f32(_mm_movehdup_ps(dd));
            let utmp = q4_k_scales_mins(&blk[4..16]);
            // 8 scales then 8 mins, widened to i16.
            let mins_and_scales = _mm256_cvtepu8_epi16(_mm_set_epi32(
                utmp[3] as i32,
                utmp[2] as i32,
                utmp[1] as i32,
                utmp[0] as i32,
            ));

            // SAFETY: `bsums` holds `nb * 16` i16 (checked above), so the 32 bytes from block
            // `i`'s sums are in bounds; the load is unaligned.
            let q8sums = unsafe { _mm256_loadu_si256(y.bsums.as_ptr().add(i * BSUMS).cast()) };
            // Sums of each 32-value sub-block, paired with its min.
            let q8s = _mm_hadd_epi16(
                _mm256_extracti128_si256::<0>(q8sums),
                _mm256_extracti128_si256::<1>(q8sums),
            );
            let prod = _mm_madd_epi16(_mm256_extracti128_si256::<1>(mins_and_scales), q8s);
            acc_m = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(prod), acc_m);

            let sc128 = _mm256_extracti128_si256::<0>(mins_and_scales);
            let scales = _mm256_set_m128i(sc128, sc128);

            let q4 = blk[16..].as_ptr();
            let q8 = y.qs[i * QK_K..].as_ptr();
            let mut sumi = _mm256_setzero_si256();
            for j in 0..QK_K / 64 {
                let scale_l = _mm256_shuffle_epi8(scales, scale_shuffle_k4(2 * j));
                let scale_h = _mm256_shuffle_epi8(scales, scale_shuffle_k4(2 * j + 1));

                // SAFETY: the block's 128 quant bytes start at offset 16 of its 144, so
                // `32 * j + 32 <= 128` bytes are in bounds; unaligned load.
                let q4bits = unsafe { _mm256_loadu_si256(q4.add(32 * j).cast()) };
                let q4l = _mm256_and_si256(q4bits, m4);
                let q4h = _mm256_and_si256(_mm256_srli_epi16::<4>(q4bits), m4);

                // SAFETY: block `i` has 256 activation quants (checked above) and
                // `64 * j + 64 <= 256`; unaligned loads.
                let (q8l, q8h) = unsafe {
                    (
                        _mm256_loadu_si256(q8.add(64 * j).cast()),
                        _mm256_loadu_si256(q8.add(64 * j + 32).cast()),
                    )
                };
                let p16l = _mm256_madd_epi16(scale_l, _mm256_maddubs_epi16(q4l, q8l));
                let p16h = _mm256_madd_epi16(scale_h, _mm256_maddubs_epi16(q4h, q8h));
                sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p16l, p16h));
            }
            acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
        }
        let acc_m = _mm_add_ps(acc_m, _mm_movehl_ps(acc_m, acc_m));
        let acc_m = _mm_add_ss(acc_m, _mm_movehdup_ps(acc_m));
        hsum(acc) + _mm_cvtss_f32(acc_m)
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) fn vec_dot_q6_k_q8_k(w: &[u8], y: Q8KRow<'_>) -> f32 {
        let nb = check_lengths(w, Q6_K_BYTES, y);
        let m3 = _mm256_set1_epi8(3);
        let m15 = _mm256_set1_epi8(15);
        let mut acc = _mm256_setzero_ps();
        for i in 0..nb {
            let blk = &w[i * Q6_K_BYTES..(i + 1) * Q6_K_BYTES];
            prefetch_tile::<1>(w, i, Q6_K_BYTES);
            // y.d[i] · d in every lane.
            let d = _mm256_mul_ps(
                _mm256_set1_ps(y.d[i]),
                f16_splat(u16::from_le_bytes([blk[208], blk[209]])),
            );
            let q4 = blk.as_ptr();
            let qh = blk[128..].as_ptr();
            let q8 = y.qs[i * QK_K..].as_ptr();

            // SAFETY: 16 bsums of block `i` (32 bytes, checked above) and the block's 16 scale
            // bytes at offset 192 of 210 are in bounds; unaligned loads.
            let (q8sums, scales) = unsafe {
                (
                    _mm256_loadu_si256(y.bsums.as_ptr().add(i * BSUMS).cast()),
                    _mm_loadu_si128(blk[192..].as_ptr().cast()),
                )
            };
            // The −32 offset of every value, taken out once: 32 · Σ scale · bsum.
            let scales_16 = _mm256_cvtepi8_epi16(scales);
            let q8sclsub = _mm256_slli_epi32::<5>(_mm256_madd_epi16(q8sums, scales_16));

            let mut sumi = _mm256_setzero_si256();
            for j in 0..QK_K / 128 {
                // SAFETY: `64 * j + 64 <= 128` low-nibble bytes, `32 * j + 32 <= 64` high-bit
                // bytes (at offset 128 of 210) and `128 * j + 128 <= 256` activation quants of
                // block `i`: all in bounds; unaligned loads.
                let (q4bits1, q4bits2, q4bits_h, q8_0, q8_1, q8_2, q8_3) = unsafe {
                    (
                        _mm256_loadu_si256(q4.add(64 * j).cast()),
                        _mm256_loadu_si256(q4.add(64 * j + 32).cast()),
                        _mm256_loadu_si256(qh.add(32 * j).cast()),
                        _mm256_loadu_si256(q8.add(128 * j).cast()),
                        _mm256_loadu_si256(q8.add(128 * j + 32).cast()),
                        _mm256_loadu_si256(q8.add(128 * j + 64).cast()),
                        _mm256_loadu_si256(q8.add(128 * j + 96).cast()),
                    )
                };

                let q4h_0 = _mm256_slli_epi16::<4>(_mm256_and_si256(q4bits_h, m3));
                let q4h_1 =
                    _mm256_slli_epi16::<2>(_mm256_and_si256(q4bits_h, _mm256_set1_epi8(12)));
                let q4h_2 = _mm256_and_si256(q4bits_h, _mm256_set1_epi8(48));
                let q4h_3 =
                    _mm256_srli_epi16::<2>(_mm256_and_si256(q4bits_h, _mm256_set1_epi8(-64)));

                let q4_0 = _mm256_or_si256(_mm256_and_si256(q4bits1, m15), q4h_0);
                let q4_1 = _mm256_or_si256(_mm256_and_si256(q4bits2, m15), q4h_1);
                let q4_2 = _mm256_or_si256(
                    _mm256_and_si256(_mm256_srli_epi16::<4>(q4bits1), m15),
                    q4h_2,
                );
                let q4_3 = _mm256_or_si256(
                    _mm256_and_si256(_mm256_srli_epi16::<4>(q4bits2), m15),
                    q4h_3,
                );

                let is = 4 * j;
                let p16_0 =
                    _mm256_madd_epi16(q6_scales(scales, is), _mm256_maddubs_epi16(q4_0, q8_0));
                let p16_1 =
                    _mm256_madd_epi16(q6_scales(scales, is + 1), _mm256_maddubs_epi16(q4_1, q8_1));
                let p16_2 =
                    _mm256_madd_epi16(q6_scales(scales, is + 2), _mm256_maddubs_epi16(q4_2, q8_2));
                let p16_3 =
                    _mm256_madd_epi16(q6_scales(scales, is + 3), _mm256_maddubs_epi16(q4_3, q8_3));

                sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p16_0, p16_1));
                sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p16_2, p16_3));
            }
            let sumi = _mm256_sub_epi32(sumi, q8sclsub);
            acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sumi), acc);
        }
        hsum(acc)
    }

    /// The two f16 values in `bits` (the first in the low half) as f32 lanes 0 and 1, through
    /// F16C: exact, as `half`'s conversion, without its call. The 32-bit move writes the whole
    /// register, so the conversion waits on nothing else.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn f16_pair(bits: u32) -> __m128 {
        _mm_cvtph_ps(_mm_cvtsi32_si128(bits as i32))
    }

    /// The f16 `bits` as f32 in all 8 lanes: a word broadcast (a load of its own) and one F16C
    /// conversion. Converting only lane 0 lets LLVM insert the 16 bits (`vpinsrw`) into
    /// whatever register is free, which was the accumulator: every block then waited on the
    /// previous block's FMA.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn f16_splat(bits: u16) -> __m256 {
        _mm256_cvtph_ps(_mm_set1_epi16(bits as i16))
    }

    /// The activation rows `i0..i0 + RN` with their lengths checked against `nb` blocks, and
    /// `nb` weight blocks of `block_bytes` in each of `w`.
    fn tile_rows<'a, const RM: usize, const RN: usize>(
        w: &[&[u8]; RM],
        block_bytes: usize,
        q: &'a Q8KRows,
        i0: usize,
    ) -> [Q8KRow<'a>; RN] {
        let y: [Q8KRow<'a>; RN] = std::array::from_fn(|rn| q.row(i0 + rn));
        for (rm, rn) in (0..RM).flat_map(|rm| (0..RN).map(move |rn| (rm, rn))) {
            check_lengths(w[rm], block_bytes, y[rn]);
        }
        y
    }

    /// `sumi[rm][rn] += madd(sc[rm], maddubs(wq[rm], q8))` for the 32 activation quants at
    /// `at` of each row `y[rn]`: one 32-value sub-block for every pair of a tile, each
    /// activation vector loaded once.
    ///
    /// # Safety
    /// `at + 32` must not exceed any `y[rn].qs.len()`.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn sub_block_dots<const RM: usize, const RN: usize>(
        wq: &[__m256i; RM],
        sc: &[__m256i; RM],
        y: &[Q8KRow<'_>; RN],
        at: usize,
        sumi: &mut [[__m256i; RN]; RM],
    ) {
        for rn in 0..RN {
            // SAFETY: the caller guarantees 32 quants at `at`; unaligned load.
            let q8 = unsafe { _mm256_loadu_si256(y[rn].qs.as_ptr().add(at).cast()) };
            for rm in 0..RM {
                let p16 = _mm256_madd_epi16(sc[rm], _mm256_maddubs_epi16(wq[rm], q8));
                sumi[rm][rn] = _mm256_add_epi32(sumi[rm][rn], p16);
            }
        }
    }

    /// Sub-block `4h + K` of each Q6_K block at `blocks[rm]`: its 32 values (0..63, before the
    /// −32) and its scale pairs, as `vec_dot_q6_k_q8_k` forms them.
    ///
    /// # Safety
    /// Each `blocks[rm]` must point to a whole 210-byte block and `h` must be 0 or 1.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn q6_values<const K: usize, const RM: usize>(
        blocks: &[*const u8; RM],
        h: usize,
        scales: &[__m128i; RM],
    ) -> ([__m256i; RM], [__m256i; RM]) {
        let m15 = _mm256_set1_epi8(15);
        let mut q = [_mm256_setzero_si256(); RM];
        let mut sc = [_mm256_setzero_si256(); RM];
        for rm in 0..RM {
            // SAFETY: ql bytes 64h + 32(K % 2) .. +32 of 128 and qh bytes 128 + 32h .. +32 of
            // the block's 210 (the caller's guarantee); unaligned loads.
            let (ql, qh) = unsafe {
                (
                    _mm256_loadu_si256(blocks[rm].add(64 * h + 32 * (K % 2)).cast()),
                    _mm256_loadu_si256(blocks[rm].add(128 + 32 * h).cast()),
                )
            };
            let lo = if K < 2 {
                _mm256_and_si256(ql, m15)
            } else {
                _mm256_and_si256(_mm256_srli_epi16::<4>(ql), m15)
            };
            let hi = match K {
                0 => _mm256_slli_epi16::<4>(_mm256_and_si256(qh, _mm256_set1_epi8(3))),
                1 => _mm256_slli_epi16::<2>(_mm256_and_si256(qh, _mm256_set1_epi8(12))),
                2 => _mm256_and_si256(qh, _mm256_set1_epi8(48)),
                _ => _mm256_srli_epi16::<2>(_mm256_and_si256(qh, _mm256_set1_epi8(-64))),
            };
            q[rm] = _mm256_or_si256(lo, hi);
            sc[rm] = q6_scales(scales[rm], 4 * h + K);
        }
        (q, sc)
    }
    /// `acc += (d_y · d_w) · f32(sumi)` for every tile output: one super-block's integer sums
    /// scaled in, as the one-row kernels' `y.d[i] * d`.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn accumulate_block<const RM: usize, const RN: usize>(
        acc: &mut [[__m256; RN]; RM],
        sumi: &[[__m256i; RN]; RM],
        dw: &[__m256; RM],
        dy: &[__m256; RN],
    ) {
        for rm in 0..RM {
            for rn in 0..RN {
                let d = _mm256_mul_ps(dy[rn], dw[rm]);
                acc[rm][rn] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sumi[rm][rn]), acc[rm][rn]);
            }
        }
    }

    /// `vec_dot_q4_k_q8_k` for `RM` weight rows × `RN` activation rows at once. Per super-block,
    /// each weight row's scales, mins and f16 factors are unpacked once and each activation
    /// row's sub-block sums formed once; per 32-value sub-block, each weight row's nibbles and
    /// scale are split out once and each activation vector loaded once. Every output gets the
    /// same i32 lanes and the same f32 operations in the same order as the one-row kernel, so
    /// the results are identical. `w` are consecutive rows of one matrix, which the prefetch
    /// relies on (`prefetch_tile`); so for `tile_q6_k`.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) fn tile_q4_k<const RM: usize, const RN: usize>(
        w: [&[u8]; RM],
        q: &Q8KRows,
        i0: usize,
        out: &mut [[f32; RN]; RM],
    ) {
        let y = tile_rows::<RM, RN>(&w, Q4_K_BYTES, q, i0);
        let nb = q.blocks_per_row;
        let m4 = _mm256_set1_epi8(0xF);
        let mut acc = [[_mm256_setzero_ps(); RN]; RM];
        let mut acc_m = [[_mm_setzero_ps(); RN]; RM];
        for i in 0..nb {
            let mut dw = [_mm256_setzero_ps(); RM];
            let mut dminw = [_mm_setzero_ps(); RM];
            let mut mins = [_mm_setzero_si128(); RM];
            let mut scales = [_mm256_setzero_si256(); RM];
            prefetch_tile::<RM>(w[0], i, Q4_K_BYTES);
            for rm in 0..RM {
                let blk = &w[rm][i * Q4_K_BYTES..(i + 1) * Q4_K_BYTES];
                let dd = f16_pair(u32::from_le_bytes([blk[0], blk[1], blk[2], blk[3]]));
                dw[rm] = _mm256_broadcastss_ps(dd);
                dminw[rm] = _mm_broadcastss_ps(_mm_movehdup_ps(dd));
                let utmp = q4_k_scales_mins(&blk[4..16]);
                let mins_and_scales = _mm256_cvtepu8_epi16(_mm_set_epi32(
                    utmp[3] as i32,
                    utmp[2] as i32,
                    utmp[1] as i32,
                    utmp[0] as i32,
                ));
                mins[rm] = _mm256_extracti128_si256::<1>(mins_and_scales);
                let sc128 = _mm256_extracti128_si256::<0>(mins_and_scales);
                scales[rm] = _mm256_set_m128i(sc128, sc128);
            }
            let mut dy = [_mm256_setzero_ps(); RN];
            for rn in 0..RN {
                // SAFETY: block `i < nb` of each row's `d` and 16 `bsums` (checked in
                // `tile_rows`); unaligned loads.
                let (d, q8sums) = unsafe {
                    (
                        *y[rn].d.get_unchecked(i),
                        _mm256_loadu_si256(y[rn].bsums.as_ptr().add(i * BSUMS).cast()),
                    )
                };
                dy[rn] = _mm256_set1_ps(d);
                let q8s = _mm_hadd_epi16(
                    _mm256_extracti128_si256::<0>(q8sums),
                    _mm256_extracti128_si256::<1>(q8sums),
                );
                // dmin = −d_y · dmin_w, as the one-row kernel's `-y.d[i] * dmin`.
                let ndy = _mm_set1_ps(-d);
                for rm in 0..RM {
                    let prod = _mm_madd_epi16(mins[rm], q8s);
                    acc_m[rm][rn] = _mm_fmadd_ps(
                        _mm_mul_ps(ndy, dminw[rm]),
                        _mm_cvtepi32_ps(prod),
                        acc_m[rm][rn],
                    );
                }
            }
            let mut sumi = [[_mm256_setzero_si256(); RN]; RM];
            // Bytes 32j.. of the nibbles: sub-block 2j in the low nibbles, 2j + 1 in the high.
            for j in 0..QK_K / 64 {
                let mut lo = [_mm256_setzero_si256(); RM];
                let mut hi = [_mm256_setzero_si256(); RM];
                let mut sc_lo = [_mm256_setzero_si256(); RM];
                let mut sc_hi = [_mm256_setzero_si256(); RM];
                for rm in 0..RM {
                    // SAFETY: bytes 16 + 32j .. +32 of the block's 144; unaligned load.
                    let bits = unsafe {
                        _mm256_loadu_si256(w[rm].as_ptr().add(i * Q4_K_BYTES + 16 + 32 * j).cast())
                    };
                    lo[rm] = _mm256_and_si256(bits, m4);
                    hi[rm] = _mm256_and_si256(_mm256_srli_epi16::<4>(bits), m4);
                    sc_lo[rm] = _mm256_shuffle_epi8(scales[rm], scale_shuffle_k4(2 * j));
                    sc_hi[rm] = _mm256_shuffle_epi8(scales[rm], scale_shuffle_k4(2 * j + 1));
                }
                // SAFETY: quants 64j .. 64j + 64 of block `i` (checked in `tile_rows`).
                unsafe {
                    sub_block_dots(&lo, &sc_lo, &y, i * QK_K + 64 * j, &mut sumi);
                    sub_block_dots(&hi, &sc_hi, &y, i * QK_K + 64 * j + 32, &mut sumi);
                }
            }
            accumulate_block(&mut acc, &sumi, &dw, &dy);
        }
        for rm in 0..RM {
            for rn in 0..RN {
                let a = acc_m[rm][rn];
                let a = _mm_add_ps(a, _mm_movehl_ps(a, a));
                let a = _mm_add_ss(a, _mm_movehdup_ps(a));
                out[rm][rn] = hsum(acc[rm][rn]) + _mm_cvtss_f32(a);
            }
        }
    }

    /// `vec_dot_q6_k_q8_k` for `RM` weight rows × `RN` activation rows at once, in the manner
    /// of `tile_q4_k`: each weight row's 6-bit values of a 32-value sub-block recombined once
    /// and used for every activation row. The −32 offset term starts each i32 sum instead of
    /// being subtracted at the end (the same wrapping integer result).
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) fn tile_q6_k<const RM: usize, const RN: usize>(
        w: [&[u8]; RM],
        q: &Q8KRows,
        i0: usize,
        out: &mut [[f32; RN]; RM],
    ) {
        let y = tile_rows::<RM, RN>(&w, Q6_K_BYTES, q, i0);
        let nb = q.blocks_per_row;
        let mut acc = [[_mm256_setzero_ps(); RN]; RM];
        for i in 0..nb {
            let mut dw = [_mm256_setzero_ps(); RM];
            let mut scales = [_mm_setzero_si128(); RM];
            prefetch_tile::<RM>(w[0], i, Q6_K_BYTES);
            for rm in 0..RM {
                let blk = &w[rm][i * Q6_K_BYTES..(i + 1) * Q6_K_BYTES];
                // SAFETY: bytes 192..208 of the block's 210 are the 16 scales; unaligned load.
                scales[rm] = unsafe { _mm_loadu_si128(blk.as_ptr().add(192).cast()) };
                dw[rm] = f16_splat(u16::from_le_bytes([blk[208], blk[209]]));
            }
            let mut dy = [_mm256_setzero_ps(); RN];
            let mut sumi = [[_mm256_setzero_si256(); RN]; RM];
            for rn in 0..RN {
                // SAFETY: block `i < nb` of each row's `d` and 16 `bsums` (checked in
                // `tile_rows`); unaligned load.
                let (d, q8sums) = unsafe {
                    (
                        *y[rn].d.get_unchecked(i),
                        _mm256_loadu_si256(y[rn].bsums.as_ptr().add(i * BSUMS).cast()),
                    )
                };
                dy[rn] = _mm256_set1_ps(d);
                for rm in 0..RM {
                    let scales_16 = _mm256_cvtepi8_epi16(scales[rm]);
                    let q8sclsub = _mm256_slli_epi32::<5>(_mm256_madd_epi16(q8sums, scales_16));
                    sumi[rm][rn] = _mm256_sub_epi32(_mm256_setzero_si256(), q8sclsub);
                }
            }
            // Each 128-value half `h`: sub-block 4h + k from ql bytes 64h + 32(k % 2).., low
            // nibbles for k = 0, 1 and high for k = 2, 3, with bit pair k of qh bytes 32h...
            for h in 0..QK_K / 128 {
                let blocks: [*const u8; RM] =
                    std::array::from_fn(|rm| w[rm][i * Q6_K_BYTES..].as_ptr());
                let at = i * QK_K + 128 * h;
                // SAFETY: the block and quant offsets are in bounds as `q6_values` and
                // `sub_block_dots` require (checked in `tile_rows`).
                unsafe {
                    let (q, sc) = q6_values::<0, RM>(&blocks, h, &scales);
                    sub_block_dots(&q, &sc, &y, at, &mut sumi);
                    let (q, sc) = q6_values::<1, RM>(&blocks, h, &scales);
                    sub_block_dots(&q, &sc, &y, at + 32, &mut sumi);
                    let (q, sc) = q6_values::<2, RM>(&blocks, h, &scales);
                    sub_block_dots(&q, &sc, &y, at + 64, &mut sumi);
                    let (q, sc) = q6_values::<3, RM>(&blocks, h, &scales);
                    sub_block_dots(&q, &sc, &y, at + 96, &mut sumi);
                }
            }
            accumulate_block(&mut acc, &sumi, &dw, &dy);
        }
        for rm in 0..RM {
            for rn in 0..RN {
                out[rm][rn] = hsum(acc[rm][rn]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn scalar_and_simd_kernels_agree() {
        let (n, k, m) = (8, 1024, 3);
        let q = Q8KRows::quantize(&activations(m, k), m, k);
        for (format, generic) in [
            (KFormat::Q4K, vec_dot_q4_k_q8_k_generic as Kernel),
            (KFormat::Q6K, vec_dot_q6_k_q8_k_generic as Kernel),
        ] {
            let data = random_blocks(format, n * k / QK_K, 3);
            let kernel = kernel_for(format);
            let rb = k / QK_K * format.block_bytes();
            for w in data.chunks_exact(rb) {
                for i in 0..m {
                    let (a, b) = (kernel(w, q.row(i)), generic(w, q.row(i)));
                    assert!(
                        (a - b).abs() <= 1e-5 * (1.0 + b.abs()),
                        "{format:?}: {a} vs {b}"
                    );
                }
            }
        }
    }

    /// `matmul_q` (tiles) against the one-row kernel, bit for bit, for activation rows 1..=9:
    /// decode, prompt tiles with and without the tail tile and leftover rows.
    fn assert_tiles_exact(format: KFormat, n: usize, k: usize, seed: u64) {
        let w = KMatrix::new(format, random_blocks(format, n * k / QK_K, seed), n, k).unwrap();
        let kernel = kernel_for(format);
        for m in 1..=9 {
            let mut x = activations(m, k);
            x[..QK_K].fill(0.0); // one all-zero activation block (d = 0)
            let q = Q8KRows::quantize(&x, m, k);
            let mut out = vec![f32::NAN; m * n];
            w.matmul_q(&q, m, &mut out);
            for r in 0..n {
                for i in 0..m {
                    let want = kernel(w.row(r), q.row(i));
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

    /// The tiles must give exactly what the one-row kernel gives for every output: weight rows
    /// not a multiple of any tile height, split over several tasks.
    #[test]
    fn tiles_match_one_row_kernel_exactly() {
        for format in [KFormat::Q4K, KFormat::Q6K] {
            assert_tiles_exact(format, 37, 1024, 21);
        }
    }

    /// As above with tasks of more weight rows than one group of `dot_tiled` holds (one
    /// thread: tasks of n / 8 rows), so that groups and the last partial group are exercised.
    #[test]
    fn tiles_match_one_row_kernel_across_weight_groups() {
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
            let utmp = q4_k_scales_mins(&s);
            for j in 0..8 {
                let unpacked = (
                    (utmp[j / 4] >> (8 * (j % 4))) as u8,
                    (utmp[2 + j / 4] >> (8 * (j % 4))) as u8,
                );
                assert_eq!(unpacked, get_scale_min_k4(j, &s), "{s:?} sub-block {j}");
            }
        }
    }

    #[test]
    fn q4_k_dequantizes_a_hand_built_block() {
        let mut b = vec![0u8; Q4_K_BYTES];
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
        let mut b = vec![0u8; Q6_K_BYTES];
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
            assert_eq!(nearest_int(x), want, "{x}");
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
}
