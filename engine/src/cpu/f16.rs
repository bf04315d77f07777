//! F16 weights (Gemma 4's `per_layer_model_proj`, which llama-quantize never quantizes) times
//! f32 activations, as ggml's CPU does it: the activations are rounded to f16 first (the F16
//! type's `vec_dot_type` is F16), then each output is an f32 dot product whose order depends on
//! the instruction set and on how many activation rows are multiplied at once:
//! - one row: `ggml_vec_dot_f16` — `GGML_F16_STEP` values a step into four accumulators of
//!   `GGML_F16_EPR` lanes (AVX2: 32 and 8, AVX-512: 64 and 16), reduced 0+2, 1+3, 0+1, then
//!   across lanes; a tail shorter than a step added value by value in double;
//! - two rows or more, on x86: llamafile's `tinyBLAS` (`ggml-cpu/llamafile/sgemm.cpp`, which
//!   `ggml_compute_forward_mul_mat` tries first for F16 × F16) — one accumulator of 8 (AVX2)
//!   or 16 (AVX-512) lanes over the whole row, the tail loaded zero-padded, then its `hsum`.
//!
//! Other CPUs take the AVX2 one-row order for every row: the portable table through the
//! reference loops, the aarch64 tables through NEON kernels in that order
//! (`cpu::aarch64::f16`). Gemma 4 on those is not held to llama.cpp's bits: llama.cpp's ARM
//! build multiplies F16 in f16 arithmetic (see `cpu::kquants`).

use half::f16;
use half::slice::HalfFloatSliceExt;
use rayon::prelude::*;

use super::Isa;
use crate::gguf::WeightBytes;

#[derive(Debug)]
pub(crate) struct F16Matrix {
    data: WeightBytes,
    n: usize,
    k: usize,
}

/// Output rows per parallel task.
const ROWS_PER_TASK: usize = 64;

impl F16Matrix {
    /// `data` holds `n` rows of `k` little-endian f16 values.
    pub fn new(data: impl Into<WeightBytes>, n: usize, k: usize) -> Option<Self> {
        let data = data.into();
        (data.len() == n.checked_mul(k)?.checked_mul(2)?).then_some(F16Matrix { data, n, k })
    }

    pub fn rows(&self) -> usize {
        self.n
    }

    pub fn cols(&self) -> usize {
        self.k
    }

    fn row(&self, r: usize) -> &[u8] {
        &self.data[r * self.k * 2..(r + 1) * self.k * 2]
    }

    pub fn dequantize_row(&self, r: usize, out: &mut [f32]) {
        for (o, b) in out.iter_mut().zip(self.row(r).chunks_exact(2)) {
            *o = f16::from_le_bytes([b[0], b[1]]).to_f32();
        }
    }

    /// `x` `[m, k]` → `[m, n]` = x · Wᵀ, each row summed as `sums` says.
    pub fn matmul_as(&self, x: &[f32], m: usize, sums: super::RowSums) -> Vec<f32> {
        let table = super::kernels();
        let order = Order::of(table.isa, sums.batch(m));
        self.product(
            order,
            table.f16.as_ref().filter(|f| f.lanes == order.lanes()),
            x,
            m,
        )
    }

    /// The product in `order`, through `fast` (a table's kernels for that order's lanes) or
    /// the reference loops.
    fn product(&self, order: Order, fast: Option<&F16Kernels>, x: &[f32], m: usize) -> Vec<f32> {
        let k = self.k;
        // the activations as ggml sees them: rounded to f16
        let mut halves = vec![f16::ZERO; m * k];
        halves.convert_from_f32_slice(x);
        let mut xr = vec![0f32; m * k];
        halves.convert_to_f32_slice(&mut xr);
        let tasks: Vec<Vec<f32>> = (0..self.n.div_ceil(ROWS_PER_TASK))
            .into_par_iter()
            .map(|t| {
                let r0 = t * ROWS_PER_TASK;
                let rows = ROWS_PER_TASK.min(self.n - r0);
                let mut part = vec![0f32; rows * m];
                match fast {
                    Some(f) => self.task_fast(f, order, r0, &xr, m, &mut part),
                    None => self.task_reference(order, r0, &xr, m, &mut part),
                }
                part
            })
            .collect();
        // each task's part is `[m, rows]`: a row of the output takes a run of it whole
        let mut out = vec![0f32; m * self.n];
        for (t, part) in tasks.iter().enumerate() {
            let r0 = t * ROWS_PER_TASK;
            let rows = part.len() / m.max(1);
            for (i, run) in part.chunks_exact(rows.max(1)).enumerate() {
                out[i * self.n + r0..][..rows].copy_from_slice(run);
            }
        }
        out
    }

    /// Weight rows `r0..` × every activation row into `part` (`[m, rows]`), by the reference
    /// loops: each weight row widened once and multiplied with every input row.
    fn task_reference(&self, order: Order, r0: usize, xr: &[f32], m: usize, part: &mut [f32]) {
        let (k, dot) = (self.k, order.dot());
        let rows = part.len() / m;
        let mut w = vec![0f32; k];
        for j in 0..rows {
            self.dequantize_row(r0 + j, &mut w);
            for i in 0..m {
                part[i * rows + j] = dot(&w, &xr[i * k..(i + 1) * k]);
            }
        }
    }

    /// As [`Self::task_reference`], by a table's kernels: tiles of `F16_TILE_ROWS` weight rows
    /// × `F16_TILE_COLS` activation rows where tinyBLAS's order holds, one output at a time
    /// for what is left.
    fn task_fast(
        &self,
        f: &F16Kernels,
        order: Order,
        r0: usize,
        xr: &[f32],
        m: usize,
        part: &mut [f32],
    ) {
        let k = self.k;
        let rows = part.len() / m;
        let x = |i: usize| &xr[i * k..(i + 1) * k];
        if let Order::VecDot(_) = order {
            for j in 0..rows {
                for i in 0..m {
                    part[i * rows + j] = (f.vec_dot)(self.row(r0 + j), x(i));
                }
            }
            return;
        }
        let (tiled_rows, tiled_cols) = (rows - rows % F16_TILE_ROWS, m - m % F16_TILE_COLS);
        // Activation tiles outside, the task's weight rows inside: the task's rows (64 × k
        // halves) stay in the core's L2 while each activation tile is read once. The other
        // way round streamed every activation row from memory once per weight tile, 16 times
        // per task (a vision encoder's 4096 patch rows are 19-70 MB). Each output's own sum
        // is the same either way.
        for i in (0..tiled_cols).step_by(F16_TILE_COLS) {
            let xs: [&[f32]; F16_TILE_COLS] = std::array::from_fn(|c| x(i + c));
            for j in (0..tiled_rows).step_by(F16_TILE_ROWS) {
                let w: [&[u8]; F16_TILE_ROWS] = std::array::from_fn(|r| self.row(r0 + j + r));
                let mut out = [[0f32; F16_TILE_COLS]; F16_TILE_ROWS];
                (f.tile)(w, xs, &mut out);
                for (r, o) in out.iter().enumerate() {
                    for (c, &v) in o.iter().enumerate() {
                        part[(i + c) * rows + j + r] = v;
                    }
                }
            }
        }
        for j in 0..tiled_rows {
            for i in tiled_cols..m {
                part[i * rows + j] = (f.tiny_blas)(self.row(r0 + j), x(i));
            }
        }
        for j in tiled_rows..rows {
            for i in 0..m {
                part[i * rows + j] = (f.tiny_blas)(self.row(r0 + j), x(i));
            }
        }
    }
}

/// Weight rows per F16 tile of a table (`F16Kernels::tile`), and activation rows.
pub(crate) const F16_TILE_ROWS: usize = 4;
pub(crate) const F16_TILE_COLS: usize = 6;

/// A table's F16 kernels, for the orders of `lanes`-lane registers: F16 weight bytes × f32
/// activations already rounded through f16.
pub(crate) struct F16Kernels {
    pub lanes: usize,
    /// `ggml_vec_dot_f16` (one activation row).
    pub vec_dot: fn(&[u8], &[f32]) -> f32,
    /// tinyBLAS, one output.
    pub tiny_blas: fn(&[u8], &[f32]) -> f32,
    /// tinyBLAS, `F16_TILE_ROWS` × `F16_TILE_COLS` outputs.
    pub tile: F16Tile,
}

/// `F16_TILE_ROWS` weight rows × `F16_TILE_COLS` activation rows into `out[weight][activation]`.
pub(crate) type F16Tile =
    fn([&[u8]; F16_TILE_ROWS], [&[f32]; F16_TILE_COLS], &mut [[f32; F16_TILE_COLS]; F16_TILE_ROWS]);

/// Which of ggml's F16 dot products an output gets (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Order {
    /// `ggml_vec_dot_f16` with `LANES`-lane accumulators.
    VecDot(usize),
    /// `tinyBLAS` with one `LANES`-lane accumulator.
    TinyBlas(usize),
}

impl Order {
    fn lanes(self) -> usize {
        match self {
            Order::VecDot(l) | Order::TinyBlas(l) => l,
        }
    }

    fn of(isa: Isa, m: usize) -> Self {
        match (isa, m) {
            (Isa::Avx512, 1) => Order::VecDot(16),
            (Isa::Avx512, _) => Order::TinyBlas(16),
            (Isa::Avx2, 2..) => Order::TinyBlas(8),
            _ => Order::VecDot(8),
        }
    }

    fn dot(self) -> fn(&[f32], &[f32]) -> f32 {
        match self {
            Order::VecDot(16) => vec_dot::<16>,
            Order::VecDot(_) => vec_dot::<8>,
            Order::TinyBlas(16) => tiny_blas::<16>,
            Order::TinyBlas(_) => tiny_blas::<8>,
        }
    }
}

/// The sum of `LANES` (8 or 16) lanes as x86 reduces a register: AVX-512's
/// `_mm512_reduce_add_ps` as GCC's header computes it (halves of 8, then of 4, then pairs),
/// AVX2's `hsum_float_8` / tinyBLAS's `hsum` (halves of 4, then pairs).
pub(crate) fn reduce_lanes<const LANES: usize>(v: &[f32; LANES]) -> f32 {
    const { assert!(LANES == 8 || LANES == 16) };
    let mut t = [0f32; 16];
    t[..LANES].copy_from_slice(v);
    let mut len = LANES;
    while len > 4 {
        len /= 2;
        for i in 0..len {
            t[i] += t[i + len];
        }
    }
    (t[0] + t[2]) + (t[1] + t[3])
}

/// `ggml_vec_dot_f16` (one activation row).
fn vec_dot<const LANES: usize>(w: &[f32], x: &[f32]) -> f32 {
    let step = 4 * LANES;
    let steps = w.len() / step;
    let mut acc = [[0f32; LANES]; 4];
    for s in 0..steps {
        for (j, a) in acc.iter_mut().enumerate() {
            let at = s * step + j * LANES;
            for (l, lane) in a.iter_mut().enumerate() {
                *lane = w[at + l].mul_add(x[at + l], *lane);
            }
        }
    }
    // GGML_F32x{8,16}_REDUCE: 0 += 2, 1 += 3, then 0 += 1, then the lanes
    let add =
        |a: [f32; LANES], b: [f32; LANES]| -> [f32; LANES] { std::array::from_fn(|l| a[l] + b[l]) };
    let lanes = add(add(acc[0], acc[2]), add(acc[1], acc[3]));
    let mut sum = reduce_lanes(&lanes) as f64;
    for i in steps * step..w.len() {
        sum += (w[i] * x[i]) as f64;
    }
    sum as f32
}

/// llamafile's `tinyBLAS` for one output (two activation rows or more, x86).
fn tiny_blas<const LANES: usize>(w: &[f32], x: &[f32]) -> f32 {
    let mut acc = [0f32; LANES];
    for (wc, xc) in w.chunks(LANES).zip(x.chunks(LANES)) {
        // a short last chunk is `load_partial`'s zero-padded vector: its missing lanes add 0·0
        // (which turns a −0 lane into +0)
        for (l, a) in acc.iter_mut().enumerate() {
            let (wv, xv) = (wc.get(l).copied(), xc.get(l).copied());
            *a = wv.unwrap_or(0.0).mul_add(xv.unwrap_or(0.0), *a);
        }
    }
    reduce_lanes(&acc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_product_of_rounded_values() {
        let (n, k, m) = (70, 100, 3);
        let w: Vec<f32> = (0..n * k)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 70.0)
            .collect();
        let bytes: Vec<u8> = w
            .iter()
            .flat_map(|&v| f16::from_f32(v).to_le_bytes())
            .collect();
        let x: Vec<f32> = (0..m * k)
            .map(|i| ((i * 13 % 29) as f32 - 14.0) / 9.0)
            .collect();
        let mat = F16Matrix::new(bytes, n, k).expect("shape");
        let got = mat.matmul_as(&x, m, crate::cpu::RowSums::Batched);
        let r = |v: f32| f16::from_f32(v).to_f32() as f64;
        for i in 0..m {
            for j in 0..n {
                let want: f64 = (0..k).map(|c| r(w[j * k + c]) * r(x[i * k + c])).sum();
                assert!((got[i * n + j] as f64 - want).abs() < 1e-3, "{i},{j}");
            }
        }
    }

    /// Every table's F16 kernels give the reference loops' results bit for bit, in both
    /// orders, tiles and leftovers (rows and columns not filling a tile, a row length that is
    /// not a whole number of steps).
    #[test]
    fn table_kernels_equal_the_reference_loops_bit_for_bit() {
        for table in crate::cpu::tables() {
            let Some(f) = table.f16.as_ref() else {
                continue;
            };
            for (n, k) in [(70, 100), (9, 1536), (5, 7)] {
                let w: Vec<f32> = (0..n * k)
                    .map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0)
                    .collect();
                let bytes: Vec<u8> = w
                    .iter()
                    .flat_map(|&v| f16::from_f32(v).to_le_bytes())
                    .collect();
                let mat = F16Matrix::new(bytes, n, k).expect("shape");
                for m in [1, 2, 5, 6, 7, 13] {
                    let x: Vec<f32> = (0..m * k)
                        .map(|i| ((i * 13 % 29) as f32 - 14.0) / 3.0)
                        .collect();
                    for order in [Order::VecDot(f.lanes), Order::TinyBlas(f.lanes)] {
                        let want = mat.product(order, None, &x, m);
                        let got = mat.product(order, Some(f), &x, m);
                        assert!(
                            got.iter()
                                .zip(&want)
                                .all(|(a, b)| a.to_bits() == b.to_bits()),
                            "{} {order:?} n {n} k {k} m {m}",
                            table.isa
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn a_wrong_byte_count_is_refused() {
        assert!(F16Matrix::new(vec![0u8; 10], 2, 3).is_none());
    }
}
