//! The AVX2 kernel table (AVX2, FMA and F16C: ggml's `__AVX2__` paths in
//! `ggml-cpu/arch/x86/quants.c`): one file per kind of kernel, this file filling the table.
//!
//! Every entry is a safe function that calls a `#[target_feature]` one; that is sound because
//! `cpu::table` only ever builds this table on a CPU where `cpu::features` detected all three
//! features at run time.

pub(crate) mod attention;
pub(crate) mod blocks;
pub(crate) mod f16;
pub(crate) mod gemm;
pub(crate) mod kquants;
pub(crate) mod ops;

use crate::cpu::blocks::{ROWS_1, TILE_M, TILE_N};
use crate::cpu::kquants::{PROMPT_TAIL, PROMPT_TILE, Q4K_DECODE_ROWS};
use crate::cpu::quantize::{quantize_q8_0_blocks, quantize_q8_k_row};
use crate::cpu::{
    BlockKernels, GgmlAttentionKernels, Isa, KKernels, KPrompt, KTiled, Kernels, OffsetKernels,
};

/// The table; call only where AVX2, FMA and F16C were detected (`cpu::table` does).
pub(crate) fn kernels() -> Kernels {
    // SAFETY (every closure below): the target features these functions need were detected at
    // run time before this table was built (see the module docs).
    Kernels {
        isa: Isa::Avx2,
        quantize_q8_0: |x, q, s| unsafe { quantize_q8_0(x, q, s) },
        quantize_q8_k: quantize_q8_k_row,
        row_pairs: None,
        q5_0: BlockKernels {
            dot: |w, q, i| unsafe { blocks::dot_q5_0(w, q, i) },
            prompt: Some(|w, q, i, out| unsafe {
                blocks::tile::<true, TILE_M, TILE_N>(w, q, i, out)
            }),
            decode: Some(|w, q, i, out| unsafe { blocks::tile::<true, ROWS_1, 1>(w, q, i, out) }),
        },
        q8_0: BlockKernels {
            dot: |w, q, i| unsafe { blocks::dot_q8_0(w, q, i) },
            prompt: Some(|w, q, i, out| unsafe {
                blocks::tile::<false, TILE_M, TILE_N>(w, q, i, out)
            }),
            decode: Some(|w, q, i, out| unsafe { blocks::tile::<false, ROWS_1, 1>(w, q, i, out) }),
        },
        q5_0_offset: Some(OffsetKernels {
            unpack: |b, v| unsafe { blocks::q5_0_offset_values(b, v) },
            lane_sums: |y, out| unsafe { blocks::lane_sums(y, out) },
            group: |g, width, q, s, i0, rows, dst, g0| unsafe {
                blocks::offset_group(g, width, q, s, i0, rows, dst, g0)
            },
        }),
        q4_k: KKernels {
            dot: |w, y| unsafe { kquants::vec_dot_q4_k_q8_k(w, y) },
            prompt: Some(KPrompt::OneRow(
                |w, q, i, out| unsafe { kquants::prompt_q4_k::<PROMPT_TILE>(w, q, i, out) },
                |w, q, i, out| unsafe { kquants::prompt_q4_k::<PROMPT_TAIL>(w, q, i, out) },
            )),
            decode: Some(|w, q, i, out| unsafe {
                kquants::tile_q4_k::<Q4K_DECODE_ROWS, 1, false>(w, q, i, out)
            }),
            // the gemv's order for several rows at once: each output `dot`'s, bit for bit
            one_row_prompt: Some(KPrompt::OneRow(
                |w, q, i, out| unsafe { kquants::tile_q4_k::<1, PROMPT_TILE, false>(w, q, i, out) },
                |w, q, i, out| unsafe { kquants::tile_q4_k::<1, PROMPT_TAIL, false>(w, q, i, out) },
            )),
            // Q4_K is repacked in llama.cpp's x86 build, which has no tiled path for it
            tiled: None,
        },
        q6_k: KKernels {
            dot: |w, y| unsafe { kquants::vec_dot_q6_k_q8_k::<false>(w, y) },
            prompt: Some(KPrompt::OneRow(
                |w, q, i, out| unsafe { kquants::tile_q6_k::<1, PROMPT_TILE, false>(w, q, i, out) },
                |w, q, i, out| unsafe { kquants::tile_q6_k::<1, PROMPT_TAIL, false>(w, q, i, out) },
            )),
            decode: None,
            // the tiles (`false`: not the tiled order) already sum each row as `dot` does
            one_row_prompt: None,
            tiled: Some(KTiled {
                dot: |w, y| unsafe { kquants::vec_dot_q6_k_q8_k::<true>(w, y) },
                prompt: KPrompt::OneRow(
                    |w, q, i, out| unsafe {
                        kquants::tile_q6_k::<1, PROMPT_TILE, true>(w, q, i, out)
                    },
                    |w, q, i, out| unsafe {
                        kquants::tile_q6_k::<1, PROMPT_TAIL, true>(w, q, i, out)
                    },
                ),
            }),
        },
        q4_k_panel: None,
        q6_k_panel: None,
        attention: None,
        ggml_attention: Some(GgmlAttentionKernels {
            dot_f16: |x, y| unsafe { attention::dot_f16(x, y) },
            mad_f16: |y, x, v| unsafe { attention::mad_f16(y, x, v) },
            scale_f16: |y, v| unsafe { attention::scale_f16(y, v) },
            soft_max: |row, max| unsafe { attention::soft_max(row, max) },
        }),
        gemm_acc: |c, a, b, m, k, n| unsafe { gemm::gemm_acc(c, a, b, m, k, n) },
        geglu: |g, u, t| unsafe { ops::geglu(g, u, t) },
        f16: Some(crate::cpu::f16::F16Kernels {
            lanes: 8,
            vec_dot: |w, x| unsafe { f16::vec_dot(w, x) },
            tiny_blas: |w, x| unsafe { f16::tiny_blas(w, x) },
            tile: |w, x, out| unsafe { f16::tile(w, x, out) },
        }),
    }
}

/// The reference Q8_0 quantization compiled with AVX2: `round_ties_even` becomes an inline
/// `vroundps` instead of a call to libm's `rintf` per value (3% of prefill time).
#[target_feature(enable = "avx2,fma,f16c")]
fn quantize_q8_0(x: &[f32], quants: &mut [i8], scales: &mut [f32]) {
    quantize_q8_0_blocks(x, quants, scales)
}
