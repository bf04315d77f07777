//! The three aarch64 kernel tables — `neon` (every aarch64 CPU), `dotprod` (`sdot`) and
//! `i8mm` (`sdot` plus `smmla` prompt tiles) — filled from the generic kernels of this
//! directory, instantiated per level.
//!
//! The entry points of a level are compiled with its target features (`level!` below).
//! Every table entry is a safe function that calls them; that is sound because `cpu::table`
//! only builds a table on a CPU where `cpu::features` detected its features at run time
//! (NEON: every aarch64 CPU).

use crate::cpu::blocks::{ROWS_1, TILE_M, TILE_N};
use crate::cpu::f16::F16Kernels;
use crate::cpu::kquants::{PROMPT_TAIL, PROMPT_TILE, Q4K_DECODE_ROWS};
use crate::cpu::quantize::quantize_q8_k_row;
use crate::cpu::row_pairs::PairLayout;
use crate::cpu::{AttentionKernels, BlockKernels, Isa, KKernels, KPrompt, Kernels};

use super::{attention, f16, gemm, ops};

/// The entry points of one level: `$dot` is its integer dot step, `$feature` its target
/// features.
macro_rules! level {
    ($level:ident, $dot:ty, $feature:literal) => {
        mod $level {
            use crate::cpu::aarch64::{blocks, kquants};
            use crate::cpu::quantize::{Q8KRow, Q8KRows, Q8Rows};

            /// # Safety
            /// The CPU must have this level's features.
            #[target_feature(enable = $feature)]
            pub(super) unsafe fn block_dot<const Q5: bool>(w: &[u8], q: &Q8Rows, i: usize) -> f32 {
                // SAFETY: the caller's guarantee.
                unsafe { blocks::dot::<$dot, Q5>(w, q, i) }
            }

            /// # Safety
            /// As above.
            #[target_feature(enable = $feature)]
            pub(super) unsafe fn block_decode<const Q5: bool>(
                w: [&[u8]; 4],
                q: &Q8Rows,
                i: usize,
                out: &mut [[f32; 1]; 4],
            ) {
                // SAFETY: the caller's guarantee.
                unsafe { blocks::decode_tile::<$dot, Q5>(w, q, i, out) }
            }

            /// # Safety
            /// As above.
            #[target_feature(enable = $feature)]
            pub(super) unsafe fn block_prompt<const Q5: bool>(
                w: [&[u8]; 2],
                q: &Q8Rows,
                i: usize,
                out: &mut [[f32; 4]; 2],
            ) {
                // SAFETY: the caller's guarantee.
                unsafe { blocks::prompt_tile::<$dot, Q5>(w, q, i, out) }
            }

            /// # Safety
            /// As above.
            #[target_feature(enable = $feature)]
            pub(super) unsafe fn q4_k_dot(w: &[u8], y: Q8KRow<'_>) -> f32 {
                let mut out = [[0f32; 1]; 1];
                // SAFETY: the caller's guarantee.
                unsafe { kquants::tile_q4_k::<$dot, 1, 1, 1>([w], [y], &mut out) };
                out[0][0]
            }

            /// # Safety
            /// As above.
            #[target_feature(enable = $feature)]
            pub(super) unsafe fn q4_k_tile<const RM: usize, const RN: usize, const N: usize>(
                w: [&[u8]; RM],
                q: &Q8KRows,
                i: usize,
                out: &mut [[f32; RN]; RM],
            ) {
                // SAFETY: the caller's guarantee.
                unsafe { kquants::tile_q4_k::<$dot, RM, RN, N>(w, kquants::rows(q, i), out) }
            }

            /// # Safety
            /// As above.
            #[target_feature(enable = $feature)]
            pub(super) unsafe fn q6_k_dot(w: &[u8], y: Q8KRow<'_>) -> f32 {
                let mut out = [[0f32; 1]; 1];
                // SAFETY: the caller's guarantee.
                unsafe { kquants::tile_q6_k::<$dot, 1, 1, 1>([w], [y], &mut out) };
                out[0][0]
            }

            /// # Safety
            /// As above.
            #[target_feature(enable = $feature)]
            pub(super) unsafe fn q6_k_tile<const RM: usize, const RN: usize, const N: usize>(
                w: [&[u8]; RM],
                q: &Q8KRows,
                i: usize,
                out: &mut [[f32; RN]; RM],
            ) {
                // SAFETY: the caller's guarantee.
                unsafe { kquants::tile_q6_k::<$dot, RM, RN, N>(w, kquants::rows(q, i), out) }
            }
        }
    };
}

level!(neon, crate::cpu::aarch64::dot::Vmull, "neon");
level!(dotprod, crate::cpu::aarch64::dot::Sdot, "neon,dotprod");

/// The i8mm prompt tile's entry point.
///
/// # Safety
/// The CPU must have dotprod and i8mm.
#[target_feature(enable = "neon,dotprod,i8mm")]
unsafe fn block_prompt_i8mm<const Q5: bool>(
    w: [&[u8]; 2],
    q: &crate::cpu::quantize::Q8Rows,
    i: usize,
    out: &mut [[f32; 4]; 2],
) {
    // SAFETY: the caller's guarantee.
    unsafe { super::blocks_i8mm::prompt_tile::<Q5>(w, q, i, out) }
}

/// The i8mm K-quant prompt tiles' entry points (two weight rows × `RN`, `RP` = `RN / 2`).
///
/// # Safety
/// The CPU must have dotprod and i8mm.
#[target_feature(enable = "neon,dotprod,i8mm")]
unsafe fn q4_k_tile_i8mm<const RN: usize, const RP: usize>(
    w: [&[u8]; 2],
    q: &crate::cpu::quantize::Q8KRows,
    i: usize,
    out: &mut [[f32; RN]; 2],
) {
    // SAFETY: the caller's guarantee.
    unsafe { super::kquants_i8mm::tile_q4_k::<RN, RP>(w, q, i, out) }
}

/// # Safety
/// As above.
#[target_feature(enable = "neon,dotprod,i8mm")]
unsafe fn q6_k_tile_i8mm<const RN: usize, const RP: usize>(
    w: [&[u8]; 2],
    q: &crate::cpu::quantize::Q8KRows,
    i: usize,
    out: &mut [[f32; RN]; 2],
) {
    // SAFETY: the caller's guarantee.
    unsafe { super::kquants_i8mm::tile_q6_k::<RN, RP>(w, q, i, out) }
}

/// One level's table; `$m` names its entry points.
macro_rules! table {
    ($isa:expr, $m:ident) => {
        // SAFETY (every closure): the level's features were detected before this table was
        // built (see the module docs).
        Kernels {
            isa: $isa,
            quantize_q8_0: |x, q, s| unsafe { ops::quantize_q8_0(x, q, s) },
            quantize_q8_k: quantize_q8_k_row,
            row_pairs: None,
            q5_0: BlockKernels {
                dot: |w, q, i| unsafe { $m::block_dot::<true>(w, q, i) },
                prompt: Some(|w, q, i, out| unsafe { $m::block_prompt::<true>(w, q, i, out) }),
                decode: Some(|w, q, i, out| unsafe { $m::block_decode::<true>(w, q, i, out) }),
            },
            q8_0: BlockKernels {
                dot: |w, q, i| unsafe { $m::block_dot::<false>(w, q, i) },
                prompt: Some(|w, q, i, out| unsafe { $m::block_prompt::<false>(w, q, i, out) }),
                decode: Some(|w, q, i, out| unsafe { $m::block_decode::<false>(w, q, i, out) }),
            },
            // the offset form only saves x86's sign trick; NEON multiplies signed bytes
            q5_0_offset: None,
            q4_k: KKernels {
                dot: |w, y| unsafe { $m::q4_k_dot(w, y) },
                prompt: Some(KPrompt::OneRow(
                    |w, q, i, out| unsafe {
                        $m::q4_k_tile::<1, PROMPT_TILE, PROMPT_TILE>(w, q, i, out)
                    },
                    |w, q, i, out| unsafe {
                        $m::q4_k_tile::<1, PROMPT_TAIL, PROMPT_TAIL>(w, q, i, out)
                    },
                )),
                decode: Some(|w, q, i, out| unsafe {
                    $m::q4_k_tile::<Q4K_DECODE_ROWS, 1, Q4K_DECODE_ROWS>(w, q, i, out)
                }),
                // the tiles already sum each row as `dot` does
                one_row_prompt: None,
                // llama.cpp's tiled K-quant matmul is x86's
                tiled: None,
            },
            q6_k: KKernels {
                dot: |w, y| unsafe { $m::q6_k_dot(w, y) },
                prompt: Some(KPrompt::OneRow(
                    |w, q, i, out| unsafe {
                        $m::q6_k_tile::<1, PROMPT_TILE, PROMPT_TILE>(w, q, i, out)
                    },
                    |w, q, i, out| unsafe {
                        $m::q6_k_tile::<1, PROMPT_TAIL, PROMPT_TAIL>(w, q, i, out)
                    },
                )),
                // as on x86: Q6_K's decode is per weight row either way
                decode: None,
                one_row_prompt: None,
                tiled: None,
            },
            q4_k_panel: None,
            q6_k_panel: None,
            attention: Some(AttentionKernels {
                scores4: |q, k, keys| unsafe { attention::scores4(q, k, keys) },
                mad: |o, v, p| unsafe { attention::mad(o, v, p) },
            }),
            // llama.cpp's ARM build accumulates attention in NEON f16 arithmetic: not followed
            ggml_attention: None,
            gemm_acc: |c, a, b, m, k, n| unsafe { gemm::gemm_acc(c, a, b, m, k, n) },
            geglu: |g, u, t| unsafe { ops::geglu(g, u, t) },
            // `ggml_vec_dot_f16`'s 8-lane order for every row count (`cpu::f16`)
            f16: Some(F16Kernels {
                lanes: 8,
                vec_dot: |w, x| unsafe { f16::vec_dot(w, x) },
                tiny_blas: |w, x| unsafe { f16::tiny_blas(w, x) },
                tile: |w, x, out| unsafe { f16::tile(w, x, out) },
            }),
        }
    };
}

const _: () = assert!(TILE_M == 2 && TILE_N == 4 && ROWS_1 == 4);

/// Base NEON (`smull` + `saddlp` dots); every aarch64 CPU.
pub(crate) fn neon() -> Kernels {
    table!(Isa::Neon, neon)
}

/// `sdot` dots; call only where dotprod was detected (`cpu::table` does).
pub(crate) fn dotprod() -> Kernels {
    table!(Isa::Dotprod, dotprod)
}

/// The dotprod table with `smmla` prompt tiles (Q5_0, Q8_0, and Q4_K and Q6_K on activations
/// quantized in `smmla` row pairs); call only where dotprod and i8mm were detected. Its
/// results equal the dotprod table's bit for bit.
pub(crate) fn i8mm() -> Kernels {
    let mut t = dotprod();
    t.isa = Isa::I8mm;
    t.row_pairs = Some(PairLayout::Smmla);
    // SAFETY (every closure): see `dotprod` and the module docs.
    t.q5_0.prompt = Some(|w, q, i, out| unsafe { block_prompt_i8mm::<true>(w, q, i, out) });
    t.q8_0.prompt = Some(|w, q, i, out| unsafe { block_prompt_i8mm::<false>(w, q, i, out) });
    t.q4_k.prompt = Some(KPrompt::TwoRows(
        |w, q, i, out| unsafe { q4_k_tile_i8mm::<PROMPT_TILE, { PROMPT_TILE / 2 }>(w, q, i, out) },
        |w, q, i, out| unsafe { q4_k_tile_i8mm::<PROMPT_TAIL, { PROMPT_TAIL / 2 }>(w, q, i, out) },
    ));
    t.q6_k.prompt = Some(KPrompt::TwoRows(
        |w, q, i, out| unsafe { q6_k_tile_i8mm::<PROMPT_TILE, { PROMPT_TILE / 2 }>(w, q, i, out) },
        |w, q, i, out| unsafe { q6_k_tile_i8mm::<PROMPT_TAIL, { PROMPT_TAIL / 2 }>(w, q, i, out) },
    ));
    t
}
