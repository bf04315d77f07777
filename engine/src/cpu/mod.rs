//! The CPU kernels, laid out as ggml's `ggml-cpu/` is (one dispatch layer over per-ISA inner
//! loops), so that a new instruction set is a new module, not edits across the kernels:
//!
//! - [`formats`]: the block formats (Q5_0, Q8_0, Q4_K, Q6_K) — layouts and dequantization;
//! - [`quantize`]: activation quantization (Q8_0, Q8_K);
//! - [`blocks`], [`kquants`], [`f16`], [`attention`], [`gemm`], [`ops`], [`transpose`]: the
//!   work schedules — how a matmul, an attention or a row-wise op is split into tasks and
//!   tiles — calling the inner loops through the kernel table;
//! - [`Kernels`]: the table of inner loops, one per instruction set: [`portable`] (every CPU)
//!   and `x86::avx2`, `x86::avx512`, `aarch64` (`neon`, `dotprod`, `i8mm`); built once, for the widest set [`features`] detects at run time (or a
//!   narrower one `COMPANION_CPU_KERNELS` asks for);
//! - [`scratch`]: the reused activation buffers of the forward pass.
//!
//! Every table computes the same integer sums; tiles give the one-row kernels' results bit for
//! bit; float sums follow ggml's order per instruction set. Tests run every table this CPU can
//! run against the portable one.

#[cfg(target_arch = "aarch64")]
pub mod aarch64;
pub mod attention;
pub mod blocks;
pub mod f16;
pub mod features;
pub mod formats;
pub mod gemm;
pub(crate) mod ggml_attention;
pub mod kquants;
pub mod ops;
pub mod portable;
pub mod quantize;
pub(crate) mod row_pairs;
pub mod scratch;
pub mod transpose;
#[cfg(target_arch = "x86_64")]
pub mod x86;

use std::sync::OnceLock;

use half::f16 as F16;

pub use features::Isa;
use quantize::{Q8KRow, Q8KRows, Q8Rows};

/// How a product of several activation rows sums each of them. llama.cpp's x86 kernels sum in
/// an order that depends on the batch (K-quant tiles from 4 or 8 rows, tinyBLAS from 2, the
/// attention's split only for one query), so a row multiplied in a batch can differ in its last
/// bits from the same row alone, and a near tie can flip. A speculative check must give every
/// row exactly what a decode step would (`crate::speculate`): it asks for [`RowSums::AsOneRow`],
/// every row through the one-row kernels and schedule, the weights still read once for all rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RowSums {
    /// The fastest order for the batch (llama.cpp's own, batch size included).
    #[default]
    Batched,
    /// Each row as a batch of one sums it.
    AsOneRow,
}

impl RowSums {
    /// The batch size whose order a product of `m` rows follows.
    pub(crate) fn batch(self, m: usize) -> usize {
        match self {
            RowSums::Batched => m,
            RowSums::AsOneRow => m.min(1),
        }
    }
}

/// One Q5_0 or Q8_0 weight row · activation row `i` of a [`Q8Rows`].
pub(crate) type BlockDot = fn(&[u8], &Q8Rows, usize) -> f32;
/// `RM` consecutive weight rows × activation rows `i..i + RN`, into `out[weight][activation]`.
pub(crate) type BlockTile<const RM: usize, const RN: usize> =
    fn([&[u8]; RM], &Q8Rows, usize, &mut [[f32; RN]; RM]);
/// One K-quant weight row · one Q8_K activation row.
pub(crate) type KDot = fn(&[u8], Q8KRow<'_>) -> f32;
/// As [`BlockTile`] for K-quants.
pub(crate) type KTile<const RM: usize, const RN: usize> =
    fn([&[u8]; RM], &Q8KRows, usize, &mut [[f32; RN]; RM]);
/// A Q5_0 group in offset form (`width` weight rows) × activation rows `i0..i0 + rows`, into
/// `dst[i * n + g0 + j]` (`n` = `dst.len() / rows`): each table tiles it its own way.
pub(crate) type OffsetGroupFn = fn(
    group: &blocks::OffsetGroup,
    width: usize,
    q: &Q8Rows,
    sums: &blocks::LaneSums,
    i0: usize,
    rows: usize,
    dst: &mut [f32],
    g0: usize,
);

/// `kquants::PANEL_ROWS` consecutive K-quant weight rows × activation rows `0..m` (a multiple
/// of 4) into `dst[r * rows + i]`, with a scratch buffer reused between calls.
pub(crate) type KPanel =
    fn(&[&[u8]; kquants::PANEL_ROWS], &Q8KRows, usize, &mut Vec<u8>, &mut [f32]);

/// Kernels of one 32-value block format.
pub(crate) struct BlockKernels {
    pub dot: BlockDot,
    /// Prompt tile (`blocks::TILE_M` × `blocks::TILE_N`).
    pub prompt: Option<BlockTile<{ blocks::TILE_M }, { blocks::TILE_N }>>,
    /// Decode tile (`blocks::ROWS_1` weight rows × one activation row).
    pub decode: Option<BlockTile<{ blocks::ROWS_1 }, 1>>,
}

/// Q5_0 prompts in offset form (see `BlockMatrix::fill_prompt_q5_0`).
pub(crate) struct OffsetKernels {
    /// A block's values as `x + 16`.
    pub unpack: fn(&[u8], &mut [u8]),
    /// An activation block's 8 lanes of `16 · Σ y`.
    pub lane_sums: fn(&[i8], &mut [i32]),
    pub group: OffsetGroupFn,
}

/// Kernels of one K-quant format.
pub(crate) struct KKernels {
    pub dot: KDot,
    /// Prompt tiles (m ≥ `kquants::PROMPT_TAIL`).
    pub prompt: Option<KPrompt>,
    /// Decode tile (`kquants::Q4K_DECODE_ROWS` weight rows × one activation row).
    pub decode: Option<KTile<{ kquants::Q4K_DECODE_ROWS }, 1>>,
    /// Prompt tiles whose every output is `dot`'s bit for bit, where `prompt`'s are not (x86
    /// Q4_K: `prompt` folds as ggml's gemm, `dot` as its gemv), for [`RowSums::AsOneRow`];
    /// `None`: `prompt`'s already are.
    pub one_row_prompt: Option<KPrompt>,
    /// Where llama.cpp multiplies batches of at least `kquants::TILED_MIN_ROWS` rows in a
    /// different order than it multiplies fewer (x86 Q6_K, see `x86::tiled_fold`): the one-row
    /// kernel and prompt tiles for those batches.
    pub tiled: Option<KTiled>,
}

/// A table's kernels for batches of at least `kquants::TILED_MIN_ROWS` activation rows.
#[derive(Clone, Copy)]
pub(crate) struct KTiled {
    pub dot: KDot,
    pub prompt: KPrompt,
}

/// A table's K-quant prompt tiles: × `kquants::PROMPT_TILE` activation rows, then
/// × `kquants::PROMPT_TAIL` for what is left.
#[derive(Clone, Copy)]
pub(crate) enum KPrompt {
    /// One weight row per tile (AVX2, AVX-512, NEON, dotprod).
    OneRow(
        KTile<1, { kquants::PROMPT_TILE }>,
        KTile<1, { kquants::PROMPT_TAIL }>,
    ),
    /// Two weight rows per tile (i8mm: `smmla` multiplies two weight rows by two activation
    /// rows at once).
    #[cfg_attr(not(target_arch = "aarch64"), allow(dead_code))]
    TwoRows(
        KTile<2, { kquants::PROMPT_TILE }>,
        KTile<2, { kquants::PROMPT_TAIL }>,
    ),
}

/// Attention's inner loops (`attention` has the portable ones).
pub(crate) struct AttentionKernels {
    /// Scores of a query against 1 to 4 consecutive keys (head size a multiple of 8).
    pub scores4: fn(&[f32], &[F16], usize) -> [f32; 4],
    /// `out += v · p` (head size a multiple of 32).
    pub mad: fn(&mut [f32], &[F16], f32),
}

/// ggml's flash-attention inner loops (`ggml_attention`), on tables whose attention follows
/// llama.cpp's x86 build bit for bit.
pub(crate) struct GgmlAttentionKernels {
    /// `ggml_vec_dot_f16` in the AVX-512 build's order.
    pub dot_f16: fn(&[F16], &[F16]) -> f32,
    /// `ggml_vec_mad_f16`: `y = f16(x · v + y)`.
    pub mad_f16: fn(&mut [F16], &[F16], f32),
    /// `ggml_vec_scale_f16`: `y = f16(y · v)`.
    pub scale_f16: fn(&mut [F16], f32),
    /// `ggml_vec_soft_max_f32` on a tile row: `exp(x − max)` in place, and the sum.
    pub soft_max: fn(&mut [f32], f32) -> f64,
}

/// Quantizes rows to Q8_K: `(x, quants, block sums, scales)`.
pub(crate) type QuantizeQ8K = fn(&[f32], &mut [i8], &mut [i16], &mut [f32]);
/// `c[m × n] += a[m × k] · b[k × n]`, row-major: `(c, a, b, m, k, n)`.
pub(crate) type GemmAcc = fn(&mut [f32], &[f32], &[f32], usize, usize, usize);

/// The inner loops of one instruction set.
pub struct Kernels {
    pub isa: Isa,
    pub(crate) quantize_q8_0: fn(&[f32], &mut [i8], &mut [f32]),
    pub(crate) quantize_q8_k: QuantizeQ8K,
    /// Whether the prompt tiles read activations in row pairs, and in which layout
    /// ([`row_pairs`]: AVX-512's K-quant and Q5_0 offset tiles, i8mm's K-quant tiles), so a
    /// prompt's activations are also laid out so.
    pub(crate) row_pairs: Option<row_pairs::PairLayout>,
    pub(crate) q5_0: BlockKernels,
    pub(crate) q8_0: BlockKernels,
    pub(crate) q5_0_offset: Option<OffsetKernels>,
    pub(crate) q4_k: KKernels,
    pub(crate) q6_k: KKernels,
    /// K-quant prompts in panels of weight rows with lanes for rows, as ggml's repacked Q4_K
    /// gemm (`x86::avx512::panel`); none: the prompt tiles.
    pub(crate) q4_k_panel: Option<KPanel>,
    pub(crate) q6_k_panel: Option<KPanel>,
    pub(crate) attention: Option<AttentionKernels>,
    /// Where attention is llama.cpp's x86 flash attention (`ggml_attention`) rather than the
    /// chunk-invariant kernel of `attention`.
    pub(crate) ggml_attention: Option<GgmlAttentionKernels>,
    pub(crate) gemm_acc: GemmAcc,
    pub(crate) geglu: fn(&mut [f32], &[f32], &[F16]),
    /// F16 weight products in ggml's order for this set's register width (`f16`; none: the
    /// reference loops).
    pub(crate) f16: Option<f16::F16Kernels>,
}

/// The table the engine uses: the widest set this CPU runs (or the one asked for).
pub fn kernels() -> &'static Kernels {
    static CHOSEN: OnceLock<&'static Kernels> = OnceLock::new();
    CHOSEN.get_or_init(|| {
        let isa = features::chosen();
        tracing::debug!(%isa, "CPU kernels");
        table(isa)
    })
}

/// The table of `isa`, built on first use.
///
/// # Panics
/// If this CPU cannot run `isa` (only sets from [`features::available`] may be asked for).
pub fn table(isa: Isa) -> &'static Kernels {
    assert!(
        features::available().contains(&isa),
        "this CPU cannot run the {isa} kernels"
    );
    static PORTABLE: OnceLock<Kernels> = OnceLock::new();
    #[cfg(target_arch = "x86_64")]
    static AVX2: OnceLock<Kernels> = OnceLock::new();
    #[cfg(target_arch = "x86_64")]
    static AVX512: OnceLock<Kernels> = OnceLock::new();
    #[cfg(target_arch = "aarch64")]
    static NEON: OnceLock<Kernels> = OnceLock::new();
    #[cfg(target_arch = "aarch64")]
    static DOTPROD: OnceLock<Kernels> = OnceLock::new();
    #[cfg(target_arch = "aarch64")]
    static I8MM: OnceLock<Kernels> = OnceLock::new();
    match isa {
        Isa::Portable => PORTABLE.get_or_init(portable::kernels),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => AVX2.get_or_init(x86::avx2::kernels),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => AVX512.get_or_init(x86::avx512::kernels),
        #[cfg(not(target_arch = "x86_64"))]
        Isa::Avx2 | Isa::Avx512 => unreachable!("x86 sets are never detected off x86-64"),
        #[cfg(target_arch = "aarch64")]
        Isa::Neon => NEON.get_or_init(aarch64::tables::neon),
        #[cfg(target_arch = "aarch64")]
        Isa::Dotprod => DOTPROD.get_or_init(aarch64::tables::dotprod),
        #[cfg(target_arch = "aarch64")]
        Isa::I8mm => I8MM.get_or_init(aarch64::tables::i8mm),
        #[cfg(not(target_arch = "aarch64"))]
        Isa::Neon | Isa::Dotprod | Isa::I8mm => {
            unreachable!("aarch64 sets are never detected off aarch64")
        }
    }
}

/// Every table this CPU can run, narrowest first (for tests and comparisons).
pub fn tables() -> Vec<&'static Kernels> {
    features::available().into_iter().map(table).collect()
}
