//! Activation quantization, as ggml's CPU quantizes matmul inputs: Q8_0 blocks of 32 for Q5_0
//! and Q8_0 weights (`quantize_row_q8_0`), Q8_K super-blocks of 256 with sums of 16 for the
//! K-quants (`quantize_row_q8_K_ref`). The loops here are the reference; a kernel table may
//! run them compiled for its instruction set (the results are the same).

use half::f16;
use rayon::prelude::*;

use super::formats::{QK, QK_K};

/// Q8_K keeps one sum per 16 quants.
pub const BSUMS: usize = QK_K / 16;

/// Activations quantized to Q8_0: per row, `k / 32` blocks of (f16 scale as f32, 32 × i8).
pub struct Q8Rows {
    pub(crate) scales: Vec<f32>,
    pub(crate) quants: Vec<i8>,
    pub(crate) blocks_per_row: usize,
    /// The quants again as `smmla` operands (`row_pairs::interleave_rows`, runs of 8), for a
    /// table whose block prompt tiles read them so (i8mm); `None` for decode.
    #[cfg_attr(not(target_arch = "aarch64"), allow(dead_code))]
    pub(crate) smmla_pairs: Option<Vec<i8>>,
}

impl Q8Rows {
    /// ggml `quantize_row_q8_0`: per block, `id = 127 / amax`, `q = round_ties_even(x · id)`,
    /// scale stored as f16(amax / 127).
    pub fn quantize(x: &[f32], m: usize, k: usize) -> Self {
        Self::quantize_on(super::kernels(), x, m, k)
    }

    /// [`Self::quantize`] with the kernels of `table`.
    pub(crate) fn quantize_on(table: &super::Kernels, x: &[f32], m: usize, k: usize) -> Self {
        let blocks_per_row = k / QK;
        let mut scales = vec![0f32; m * blocks_per_row];
        let mut quants = vec![0i8; m * k];
        let quantize = table.quantize_q8_0;
        let row = |((x, q), s): ((&[f32], &mut [i8]), &mut [f32])| quantize(x, q, s);
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
        let smmla = super::row_pairs::PairLayout::Smmla;
        let smmla_pairs = (table.row_pairs == Some(smmla) && m >= super::blocks::TILE_N)
            .then(|| super::row_pairs::interleave_rows(&quants, m, k, smmla.run()));
        Q8Rows {
            scales,
            quants,
            blocks_per_row,
            smmla_pairs,
        }
    }
}

/// ggml `quantize_row_q8_0` on whole blocks of `x`, into `quants` and `scales` (one per
/// block). Kernel tables may compile it again with their target features.
#[inline(always)]
pub fn quantize_q8_0_blocks(x: &[f32], quants: &mut [i8], scales: &mut [f32]) {
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

/// Activations quantized like ggml `quantize_row_q8_K`: per row, `k / 256` blocks of an f32
/// scale, 256 × i8 and 16 sums of 16 quants (the sums let Q4_K's mins and Q6_K's −32 offset be
/// applied once per block instead of per value).
#[derive(Debug, Clone)]
pub struct Q8KRows {
    pub(crate) d: Vec<f32>,
    pub(crate) qs: Vec<i8>,
    pub(crate) bsums: Vec<i16>,
    pub(crate) rows: usize,
    pub(crate) blocks_per_row: usize,
    /// The same rows in pairs, for tables whose prompt tiles read them so
    /// (`Kernels::row_pairs`); `None` for fewer than `kquants::PROMPT_TAIL` rows.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))] // only AVX-512 tiles read it
    pub(crate) pairs: Option<super::row_pairs::Q8KPairs>,
}

/// One activation row of a [`Q8KRows`], as the kernels read it.
#[derive(Clone, Copy)]
pub(crate) struct Q8KRow<'a> {
    pub d: &'a [f32],
    pub qs: &'a [i8],
    pub bsums: &'a [i16],
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
        Self::quantize_on(super::kernels(), x, m, k)
    }

    /// [`Self::quantize`] with the kernels of `table`.
    pub(crate) fn quantize_on(table: &super::Kernels, x: &[f32], m: usize, k: usize) -> Self {
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
        let quantize = table.quantize_q8_k;
        // one row's input, quants, block sums and scales, as the zipped chunks below nest them
        type Row<'a> = (((&'a [f32], &'a mut [i8]), &'a mut [i16]), &'a mut [f32]);
        let row = |(((x, q), s), d): Row<'_>| quantize(x, q, s, d);
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
        let pairs = table
            .row_pairs
            .filter(|_| m >= super::kquants::PROMPT_TAIL)
            .map(|layout| super::row_pairs::Q8KPairs::new(layout, &d, &qs, &bsums, m, nb));
        Q8KRows {
            d,
            qs,
            bsums,
            rows: m,
            blocks_per_row: nb,
            pairs,
        }
    }

    pub(crate) fn row(&self, i: usize) -> Q8KRow<'_> {
        let nb = self.blocks_per_row;
        Q8KRow {
            d: &self.d[i * nb..(i + 1) * nb],
            qs: &self.qs[i * nb * QK_K..(i + 1) * nb * QK_K],
            bsums: &self.bsums[i * nb * BSUMS..(i + 1) * nb * BSUMS],
        }
    }
}

/// One row of [`Q8KRows::quantize`]: `x` `[k]` into quants, block sums and scales.
pub fn quantize_q8_k_row(x: &[f32], qs: &mut [i8], bsums: &mut [i16], d: &mut [f32]) {
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
pub(crate) fn nearest_int(x: f32) -> i32 {
    let bits = (x + 12_582_912.0).to_bits() as i32;
    (bits & 0x007f_ffff) - 0x0040_0000
}
