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
