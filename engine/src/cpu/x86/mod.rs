//! x86-64 kernels: one module per instruction set (`avx2/`), each filling the kernel table
//! (`cpu::Kernels`) with its inner loops, and the helpers they share.

pub mod avx2;
pub mod avx512;

use std::arch::x86_64::*;

/// Sum of the 8 lanes (ggml `hsum_float_8`).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn hsum(v: __m256) -> f32 {
    let lo = _mm256_castps256_ps128(v);
    let hi = _mm256_extractf128_ps(v, 1);
    let s = _mm_add_ps(lo, hi);
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    let s = _mm_add_ss(s, _mm_movehdup_ps(s));
    _mm_cvtss_f32(s)
}

/// Sum of the 8 i32 lanes (exact while it fits, as the K-quant block sums always do).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn hsum_i32(v: __m256i) -> i32 {
    let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
    hsum_i32_4(s)
}

/// Sum of the 4 i32 lanes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn hsum_i32_4(v: __m128i) -> i32 {
    let s = _mm_add_epi32(v, _mm_shuffle_epi32::<0b01_00_11_10>(v));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b10_11_00_01>(s));
    _mm_cvtsi128_si32(s)
}

/// The 4 i32 lanes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn lanes_i32(v: __m128i) -> [i32; 4] {
    [
        _mm_cvtsi128_si32(v),
        _mm_extract_epi32::<1>(v),
        _mm_extract_epi32::<2>(v),
        _mm_extract_epi32::<3>(v),
    ]
}

/// Q4_K integer sums folded into an output as llama.cpp's x86 build does. Its weights are
/// repacked (`ggml_repack_get_optimal_repack_type`: Q4_K with AVX2 and a row count divisible
/// by 8 — every Gemma matrix) and multiplied by `ggml_gemv_q4_K_8x8_q8_K` (one activation
/// row: decode, and the last `m mod 4` rows of a prompt) or `ggml_gemm_q4_K_8x8_q8_K` (the
/// other rows, in fours; `ggml-cpu/arch/x86/repack.cpp`). Both add integer sums up exactly and
/// fold them in with one fused multiply-add each, `acc += f32(Σ scale·q4·q8) · (d_w·d_y)` and
/// `acc_min += f32(Σ min·bsum) · (dmin_w·d_y)`; the output is `acc − acc_min`. The gemv folds
/// once per super-block, the gemm once per pair of 32-value sub-blocks (four times per
/// super-block), so the same row rounds differently in the two.
#[inline]
pub(crate) fn q4_k_fold(acc: &mut [f32; 2], sum: i32, min_sum: i32, dw: f32, dminw: f32, dy: f32) {
    acc[0] = (sum as f32).mul_add(dw * dy, acc[0]);
    acc[1] = (min_sum as f32).mul_add(dminw * dy, acc[1]);
}

/// A K-quant super-block's integer sum folded into an output as ggml's tiled K-quant matmul
/// does (`ggml-cpu/tiled/`, taken by every non-repacked K-quant matrix — on x86 Q6_K — when
/// at least 8 activation rows are multiplied at once, `ggml_tiled_min_batch`): the block's
/// integer sum exact, scaled by the weight's `d`, then fused into the output with the
/// activation's `d` — `acc = fma(f32(Σ) · d_w, d_y, acc)` — where the one-row `vec_dot` fuses
/// `d_w · d_y` into 8 lanes and sums them at the end. Both its AVX2 and its VNNI microtiles
/// compute this (`tiled_run_microtile_avx2`, `tiled_run_micro_vnni_8x16`).
#[inline]
pub(crate) fn tiled_fold(acc: &mut f32, sum: i32, dw: f32, dy: f32) {
    *acc = (sum as f32 * dw).mul_add(dy, *acc);
}

/// How far ahead of the block being read the weight stream is prefetched. Decode streams each
/// weight once (178 MB for the 262k-row output projection alone) and the hardware prefetcher
/// alone kept one core at ~6 GB/s against ~15 GB/s for a plain read; a software prefetch 4 KiB
/// ahead brought the output projection from 35 to 21 ms on one core here (512 B: 24 ms,
/// 8 KiB: 25 ms).
const PREFETCH_DISTANCE: usize = 4096;

/// Prefetch the weight stream `PREFETCH_DISTANCE` ahead of a tile of `ROWS` weight rows at its
/// block `b` (blocks of `block_bytes`). A tile's rows are consecutive rows of the matrix, so
/// together they are one contiguous run that advances `ROWS` blocks per block step; hinting
/// that run in order, line by line, brought the output projection (Q8_0, tiles of 4 rows) from
/// ~17 to ~24 GB/s on two cores here (a plain read: ~26 GB/s) and decode from ~50 to ~63 tok/s,
/// where one hint per row and block — `ROWS` interleaved streams, each line hinted about
/// twice — had left the memory system idle part of the time.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn prefetch_tile<const ROWS: usize>(first_row: &[u8], b: usize, block_bytes: usize) {
    let ahead = first_row
        .as_ptr()
        .wrapping_add(PREFETCH_DISTANCE + b * block_bytes * ROWS);
    for line in (0..ROWS * block_bytes).step_by(64) {
        // a prefetch is a hint: it never faults, whatever the address
        _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(line) as *const i8);
    }
}
