//! The portable kernel table: plain Rust loops that every CPU runs, ggml's `_generic`
//! reference versions (`ggml-cpu/quants.c`). No tiles: the schedule falls back to one dot
//! product per output.

pub(crate) mod blocks;
pub(crate) mod kquants;

use crate::cpu::gemm::gemm_acc_portable;
use crate::cpu::ops::geglu_portable;
use crate::cpu::quantize::{quantize_q8_0_blocks, quantize_q8_k_row};
use crate::cpu::{BlockKernels, Isa, KKernels, Kernels};

pub(crate) fn kernels() -> Kernels {
    Kernels {
        isa: Isa::Portable,
        quantize_q8_0: quantize_q8_0_blocks,
        quantize_q8_k: quantize_q8_k_row,
        row_pairs: None,
        q5_0: BlockKernels {
            dot: blocks::dot::<true>,
            prompt: None,
            decode: None,
        },
        q8_0: BlockKernels {
            dot: blocks::dot::<false>,
            prompt: None,
            decode: None,
        },
        q5_0_offset: None,
        q4_k: KKernels {
            dot: kquants::dot_q4_k,
            prompt: None,
            decode: None,
            one_row_prompt: None,
            tiled: None,
        },
        q6_k: KKernels {
            dot: kquants::dot_q6_k,
            prompt: None,
            decode: None,
            one_row_prompt: None,
            tiled: None,
        },
        q4_k_panel: None,
        q6_k_panel: None,
        attention: None,
        ggml_attention: None,
        gemm_acc: gemm_acc_portable,
        geglu: geglu_portable,
        f16: None,
    }
}
