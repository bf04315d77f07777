//! The AVX-512 kernel table (F, BW, VL and VNNI, with AVX2, FMA and F16C): the AVX2 table with
//! the prompt tiles, the K-quant decode tiles (`decode`) and the F16 products (`f16`, in
//! ggml's 16-lane order) that profit from 512-bit registers and VNNI replaced. Each replacement
//! computes every output bit for bit as the AVX2 kernel does (two activation rows per register,
//! one per 256-bit half, with the same integer lanes, float operations and horizontal sums), so
//! results do not depend on which x86 table runs. ggml's AVX-512 paths
//! (`ggml-cpu/arch/x86/quants.c`, `repack.cpp`) are the model for the instruction choice.
//!
//! Sound for the same reason as the AVX2 table: `cpu::table` builds it only where every one of
//! these features was detected at run time.

pub(crate) mod blocks;
pub(crate) mod decode;
pub(crate) mod f16;
pub(crate) mod kquants;
pub(crate) mod panel;

use crate::cpu::kquants::{PROMPT_TAIL, PROMPT_TILE, Q4K_DECODE_ROWS};
use crate::cpu::row_pairs::PairLayout;
use crate::cpu::{Isa, KPrompt, Kernels};

/// The table; call only where the features above were detected (`cpu::table` does).
pub(crate) fn kernels() -> Kernels {
    let mut table = super::avx2::kernels();
    table.isa = Isa::Avx512;
    table.row_pairs = Some(PairLayout::Halves);
    if let Some(offset) = table.q5_0_offset.as_mut() {
        // SAFETY: see the module docs.
        offset.group = |g, width, q, s, i0, rows, dst, g0| unsafe {
            blocks::offset_group(g, width, q, s, i0, rows, dst, g0)
        };
    }
    // SAFETY (the six closures): see the module docs.
    table.q4_k.prompt = Some(KPrompt::OneRow(
        |w, q, i, out| unsafe {
            kquants::tile_q4_k::<{ PROMPT_TILE / 2 }, PROMPT_TILE, false>(w, q, i, out)
        },
        |w, q, i, out| unsafe {
            kquants::tile_q4_k::<{ PROMPT_TAIL / 2 }, PROMPT_TAIL, false>(w, q, i, out)
        },
    ));
    table.q4_k.one_row_prompt = Some(KPrompt::OneRow(
        |w, q, i, out| unsafe {
            kquants::tile_q4_k::<{ PROMPT_TILE / 2 }, PROMPT_TILE, true>(w, q, i, out)
        },
        |w, q, i, out| unsafe {
            kquants::tile_q4_k::<{ PROMPT_TAIL / 2 }, PROMPT_TAIL, true>(w, q, i, out)
        },
    ));
    table.q6_k.prompt = Some(KPrompt::OneRow(
        |w, q, i, out| unsafe {
            kquants::tile_q6_k::<{ PROMPT_TILE / 2 }, PROMPT_TILE, false>(w, q, i, out)
        },
        |w, q, i, out| unsafe {
            kquants::tile_q6_k::<{ PROMPT_TAIL / 2 }, PROMPT_TAIL, false>(w, q, i, out)
        },
    ));
    // SAFETY (the three closures): see the module docs. Q6_K decodes row by row, as in the AVX2
    // table: its 4-row tile streamed from memory at 41 GB/s against 69 for one row here.
    table.q4_k.decode =
        Some(|w, q, i, out| unsafe { decode::q4_k::<Q4K_DECODE_ROWS>(w, q, i, out) });
    table.q4_k.dot = |w, y| unsafe { decode::vec_dot_q4_k(w, y) };
    table.q6_k.dot = |w, y| unsafe { decode::vec_dot_q6_k(w, y) };
    // SAFETY (the two closures): see the module docs.
    table.q4_k_panel =
        Some(|w, q, m, scratch, dst| unsafe { panel::panel_q4_k(w, q, m, scratch, dst) });
    table.q6_k_panel =
        Some(|w, q, m, scratch, dst| unsafe { panel::panel_q6_k(w, q, m, scratch, dst) });
    // SAFETY (the three closures): see the module docs.
    table.f16 = Some(crate::cpu::f16::F16Kernels {
        lanes: 16,
        vec_dot: |w, x| unsafe { f16::vec_dot(w, x) },
        tiny_blas: |w, x| unsafe { f16::tiny_blas(w, x) },
        tile: |w, x, out| unsafe { f16::tile(w, x, out) },
    });
    if let Some(tiled) = table.q6_k.tiled.as_mut() {
        tiled.prompt = KPrompt::OneRow(
            |w, q, i, out| unsafe {
                kquants::tile_q6_k::<{ PROMPT_TILE / 2 }, PROMPT_TILE, true>(w, q, i, out)
            },
            |w, q, i, out| unsafe {
                kquants::tile_q6_k::<{ PROMPT_TAIL / 2 }, PROMPT_TAIL, true>(w, q, i, out)
            },
        );
    }
    table
}
