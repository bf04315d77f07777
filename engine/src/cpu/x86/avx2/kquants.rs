//! The `__AVX2__` branches of ggml's `ggml_vec_dot_q4_K_q8_K` and `ggml_vec_dot_q6_K_q8_K`
//! (`ggml-cpu/arch/x86/quants.c`) for the integer part, intrinsic for intrinsic but for the
//! f16 → f32 scale conversions (inline F16C, as ggml's `GGML_FP16_TO_FP32` on x86), with the
//! f32 part folded in the order llama.cpp's x86 build uses for the batch (Q4_K: the repacked
//! gemv/gemm, `q4_k_fold`; Q6_K from 8 rows: the tiled matmul, `tiled_fold`; see the module
//! above), and the tiles built from the same operations. Weight quants are unsigned
//! (Q4_K nibbles 0..15, Q6_K values 0..63 before the −32), so `maddubs` takes them directly:
//! its pairwise i16 sums stay below 2·63·127 and never saturate. Q4_K's mins and Q6_K's −32
//! are applied through the activations' `bsums`.
use crate::cpu::formats::q4_k::{BYTES as Q4_K_BYTES, scales_mins as q4_k_scales_mins};
use crate::cpu::formats::{QK_K, q6_k::BYTES as Q6_K_BYTES};
use crate::cpu::quantize::{BSUMS, Q8KRow, Q8KRows};
use crate::cpu::x86::{
    hsum, hsum_i32, hsum_i32_4, lanes_i32, prefetch_tile, q4_k_fold, tiled_fold,
};
use std::arch::x86_64::*;

/// A Q4_K block's 8 scales then 8 mins (ggml's `utmp` unpacking of its 12 scale bytes), widened
/// to i16.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn q4_k_mins_and_scales(blk: &[u8]) -> __m256i {
    let utmp = q4_k_scales_mins(&blk[4..16]);
    _mm256_cvtepu8_epi16(_mm_set_epi32(
        utmp[3] as i32,
        utmp[2] as i32,
        utmp[1] as i32,
        utmp[0] as i32,
    ))
}

/// ggml `get_scale_shuffle_k4(i)`: bytes `2i, 2i+1` repeated, broadcasting i16 lane `i`.
#[inline]
#[target_feature(enable = "avx2,fma")]
pub(crate) fn scale_shuffle_k4(i: usize) -> __m256i {
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

/// The blocks of `w`, with `y`'s lengths checked against them.
pub(crate) fn check_lengths(w: &[u8], block_bytes: usize, y: Q8KRow<'_>) -> usize {
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
pub(crate) fn vec_dot_q4_k_q8_k(w: &[u8], y: Q8KRow<'_>) -> f32 {
    let nb = check_lengths(w, Q4_K_BYTES, y);
    let m4 = _mm256_set1_epi8(0xF);
    let mut acc = [0f32; 2];
    for i in 0..nb {
        let blk = &w[i * Q4_K_BYTES..(i + 1) * Q4_K_BYTES];
        let dd = f16_pair(u32::from_le_bytes([blk[0], blk[1], blk[2], blk[3]]));
        let mins_and_scales = q4_k_mins_and_scales(blk);

        // SAFETY: `bsums` holds `nb * 16` i16 (checked above), so the 32 bytes from block
        // `i`'s sums are in bounds; the load is unaligned.
        let q8sums = unsafe { _mm256_loadu_si256(y.bsums.as_ptr().add(i * BSUMS).cast()) };
        // Sums of each 32-value sub-block, paired with its min.
        let q8s = _mm_hadd_epi16(
            _mm256_extracti128_si256::<0>(q8sums),
            _mm256_extracti128_si256::<1>(q8sums),
        );
        let prod = _mm_madd_epi16(_mm256_extracti128_si256::<1>(mins_and_scales), q8s);

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
        q4_k_fold(
            &mut acc,
            hsum_i32(sumi),
            hsum_i32_4(prod),
            _mm_cvtss_f32(dd),
            _mm_cvtss_f32(_mm_movehdup_ps(dd)),
            y.d[i],
        );
    }
    acc[0] - acc[1]
}

/// ggml's `vec_dot_q6_K_q8_K` (`TILED` false) or, with the same integer sums, one output of its
/// tiled matmul (`TILED` true, see `tiled_fold`), which a batch of 8 or more rows takes.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn vec_dot_q6_k_q8_k<const TILED: bool>(w: &[u8], y: Q8KRow<'_>) -> f32 {
    let nb = check_lengths(w, Q6_K_BYTES, y);
    let m3 = _mm256_set1_epi8(3);
    let m15 = _mm256_set1_epi8(15);
    let mut acc = _mm256_setzero_ps();
    let mut tiled_acc = 0f32;
    for i in 0..nb {
        let blk = &w[i * Q6_K_BYTES..(i + 1) * Q6_K_BYTES];
        prefetch_tile::<1>(w, i, Q6_K_BYTES);
        let dw = f16_splat(u16::from_le_bytes([blk[208], blk[209]]));
        // y.d[i] · d in every lane.
        let d = _mm256_mul_ps(_mm256_set1_ps(y.d[i]), dw);
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
            let q4h_1 = _mm256_slli_epi16::<2>(_mm256_and_si256(q4bits_h, _mm256_set1_epi8(12)));
            let q4h_2 = _mm256_and_si256(q4bits_h, _mm256_set1_epi8(48));
            let q4h_3 = _mm256_srli_epi16::<2>(_mm256_and_si256(q4bits_h, _mm256_set1_epi8(-64)));

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
            let p16_0 = _mm256_madd_epi16(q6_scales(scales, is), _mm256_maddubs_epi16(q4_0, q8_0));
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
        if TILED {
            let dw = _mm256_cvtss_f32(dw);
            tiled_fold(&mut tiled_acc, hsum_i32(sumi), dw, y.d[i]);
        } else {
            acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sumi), acc);
        }
    }
    if TILED { tiled_acc } else { hsum(acc) }
}

/// The two f16 values in `bits` (the first in the low half) as f32 lanes 0 and 1, through
/// F16C: exact, as `half`'s conversion, without its call. The 32-bit move writes the whole
/// register, so the conversion waits on nothing else.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn f16_pair(bits: u32) -> __m128 {
    _mm_cvtph_ps(_mm_cvtsi32_si128(bits as i32))
}

/// The f16 `bits` as f32 in all 8 lanes: a word broadcast (a load of its own) and one F16C
/// conversion. Converting only lane 0 lets LLVM insert the 16 bits (`vpinsrw`) into
/// whatever register is free, which was the accumulator: every block then waited on the
/// previous block's FMA.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn f16_splat(bits: u16) -> __m256 {
    _mm256_cvtph_ps(_mm_set1_epi16(bits as i16))
}

/// The activation rows `i0..i0 + RN` with their lengths checked against `nb` blocks, and
/// `nb` weight blocks of `block_bytes` in each of `w`.
pub(crate) fn tile_rows<'a, const RM: usize, const RN: usize>(
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
pub(crate) unsafe fn q6_values<const K: usize, const RM: usize>(
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
/// the results are identical — with `PAIRS` false (ggml's gemv, which folds a super-block's
/// sums in once); with `PAIRS`, each pair of sub-blocks is folded in as ggml's gemm does for
/// activation rows in fours. `w` are consecutive rows of one matrix, which the prefetch
/// relies on (`prefetch_tile`); so for `tile_q6_k`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn tile_q4_k<const RM: usize, const RN: usize, const PAIRS: bool>(
    w: [&[u8]; RM],
    q: &Q8KRows,
    i0: usize,
    out: &mut [[f32; RN]; RM],
) {
    let y = tile_rows::<RM, RN>(&w, Q4_K_BYTES, q, i0);
    let nb = q.blocks_per_row;
    let m4 = _mm256_set1_epi8(0xF);
    let mut acc = [[[0f32; 2]; RN]; RM];
    for i in 0..nb {
        let mut dw = [0f32; RM];
        let mut dminw = [0f32; RM];
        // lane `j` of each: sub-blocks 2j and 2j + 1's mins times their activation sums
        let mut min_terms = [[_mm_setzero_si128(); RN]; RM];
        let mut mins = [_mm_setzero_si128(); RM];
        let mut scales = [_mm256_setzero_si256(); RM];
        prefetch_tile::<RM>(w[0], i, Q4_K_BYTES);
        for rm in 0..RM {
            let blk = &w[rm][i * Q4_K_BYTES..(i + 1) * Q4_K_BYTES];
            let dd = f16_pair(u32::from_le_bytes([blk[0], blk[1], blk[2], blk[3]]));
            dw[rm] = _mm_cvtss_f32(dd);
            dminw[rm] = _mm_cvtss_f32(_mm_movehdup_ps(dd));
            let mins_and_scales = q4_k_mins_and_scales(blk);
            mins[rm] = _mm256_extracti128_si256::<1>(mins_and_scales);
            let sc128 = _mm256_extracti128_si256::<0>(mins_and_scales);
            scales[rm] = _mm256_set_m128i(sc128, sc128);
        }
        let mut dy = [0f32; RN];
        for rn in 0..RN {
            // SAFETY: block `i < nb` of each row's `d` and 16 `bsums` (checked in
            // `tile_rows`); unaligned loads.
            let (d, q8sums) = unsafe {
                (
                    *y[rn].d.get_unchecked(i),
                    _mm256_loadu_si256(y[rn].bsums.as_ptr().add(i * BSUMS).cast()),
                )
            };
            dy[rn] = d;
            let q8s = _mm_hadd_epi16(
                _mm256_extracti128_si256::<0>(q8sums),
                _mm256_extracti128_si256::<1>(q8sums),
            );
            for rm in 0..RM {
                min_terms[rm][rn] = _mm_madd_epi16(mins[rm], q8s);
            }
        }
        // ggml's gemv (one activation row) folds a super-block's sums in once; its gemm
        // (activation rows in fours) once per pair of sub-blocks (see `q4_k_fold`)
        let per_pair = PAIRS;
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
            if per_pair {
                for rm in 0..RM {
                    for rn in 0..RN {
                        let lanes = lanes_i32(min_terms[rm][rn]);
                        q4_k_fold(
                            &mut acc[rm][rn],
                            hsum_i32(sumi[rm][rn]),
                            lanes[j],
                            dw[rm],
                            dminw[rm],
                            dy[rn],
                        );
                        sumi[rm][rn] = _mm256_setzero_si256();
                    }
                }
            }
        }
        if !per_pair {
            for rm in 0..RM {
                for rn in 0..RN {
                    q4_k_fold(
                        &mut acc[rm][rn],
                        hsum_i32(sumi[rm][rn]),
                        hsum_i32_4(min_terms[rm][rn]),
                        dw[rm],
                        dminw[rm],
                        dy[rn],
                    );
                }
            }
        }
    }
    for rm in 0..RM {
        for rn in 0..RN {
            out[rm][rn] = acc[rm][rn][0] - acc[rm][rn][1];
        }
    }
}

/// Lanes `rn < RN` of the result: the sum of the 8 i32 lanes of `s[rn]` (rows past `RN` count
/// as zero). Exact integer sums in another order than one `hsum_i32` per row: the same values.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn row_sums<const RN: usize>(s: &[__m256i; RN]) -> __m256i {
    const { assert!(RN <= 8) };
    let row = |i: usize| s.get(i).copied().unwrap_or(_mm256_setzero_si256());
    let t0 = _mm256_hadd_epi32(row(0), row(1));
    let t1 = _mm256_hadd_epi32(row(2), row(3));
    let t2 = _mm256_hadd_epi32(row(4), row(5));
    let t3 = _mm256_hadd_epi32(row(6), row(7));
    // 128-bit lane 0: rows 0..4 (u0) and 4..8 (u1) over their lanes 0..4; lane 1: over 4..8
    let u0 = _mm256_hadd_epi32(t0, t1);
    let u1 = _mm256_hadd_epi32(t2, t3);
    _mm256_add_epi32(
        _mm256_permute2x128_si256::<0x20>(u0, u1),
        _mm256_permute2x128_si256::<0x31>(u0, u1),
    )
}

/// `m[rn]` holds row `rn`'s four mins terms (lane `j`: sub-blocks 2j and 2j + 1); returns, per
/// `j`, the rows' terms in lanes `rn` (zero past `RN`).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn mins_by_pair<const RN: usize>(m: &[__m128i; RN]) -> [__m256i; 4] {
    let row = |i: usize| m.get(i).copied().unwrap_or(_mm_setzero_si128());
    // a 4×4 transpose of rows 4h..4h + 4
    let quad = |h: usize| {
        let a = _mm_unpacklo_epi32(row(4 * h), row(4 * h + 1));
        let b = _mm_unpackhi_epi32(row(4 * h), row(4 * h + 1));
        let c = _mm_unpacklo_epi32(row(4 * h + 2), row(4 * h + 3));
        let d = _mm_unpackhi_epi32(row(4 * h + 2), row(4 * h + 3));
        [
            _mm_unpacklo_epi64(a, c),
            _mm_unpackhi_epi64(a, c),
            _mm_unpacklo_epi64(b, d),
            _mm_unpackhi_epi64(b, d),
        ]
    };
    let (lo, hi) = (quad(0), quad(1));
    std::array::from_fn(|j| _mm256_set_m128i(hi[j], lo[j]))
}

/// One weight row of Q4_K × activation rows `i0..i0 + RN` (at most 8): `tile_q4_k::<1, RN, true>`'s
/// results (ggml's gemm, each pair of sub-blocks folded in), with the rows' integer sums and
/// mins terms of a pair of sub-blocks brought into one register (lane `rn`: activation row
/// `rn`) and folded in by two 8-lane FMAs — per lane `q4_k_fold`'s operations — instead of a
/// horizontal sum and two scalar FMAs per row.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn prompt_q4_k<const RN: usize>(
    w: [&[u8]; 1],
    q: &Q8KRows,
    i0: usize,
    out: &mut [[f32; RN]; 1],
) {
    const { assert!(RN > 1 && RN <= 8) };
    let y = tile_rows::<1, RN>(&w, Q4_K_BYTES, q, i0);
    let nb = q.blocks_per_row;
    let m4 = _mm256_set1_epi8(0xF);
    let (mut acc, mut acc_min) = (_mm256_setzero_ps(), _mm256_setzero_ps());
    for i in 0..nb {
        prefetch_tile::<1>(w[0], i, Q4_K_BYTES);
        let blk = &w[0][i * Q4_K_BYTES..(i + 1) * Q4_K_BYTES];
        let dd = f16_pair(u32::from_le_bytes([blk[0], blk[1], blk[2], blk[3]]));
        let mins_and_scales = q4_k_mins_and_scales(blk);
        let mins = _mm256_extracti128_si256::<1>(mins_and_scales);
        let sc128 = _mm256_extracti128_si256::<0>(mins_and_scales);
        let scales = _mm256_set_m128i(sc128, sc128);
        let mut dy = [0f32; 8];
        let min_terms: [__m128i; RN] = std::array::from_fn(|rn| {
            // SAFETY: block `i < nb` of each row's `d` and 16 `bsums` (checked in
            // `tile_rows`); unaligned loads.
            let q8sums = unsafe {
                dy[rn] = *y[rn].d.get_unchecked(i);
                _mm256_loadu_si256(y[rn].bsums.as_ptr().add(i * BSUMS).cast())
            };
            let q8s = _mm_hadd_epi16(
                _mm256_extracti128_si256::<0>(q8sums),
                _mm256_extracti128_si256::<1>(q8sums),
            );
            _mm_madd_epi16(mins, q8s)
        });
        let min_terms = mins_by_pair(&min_terms);
        // SAFETY: 8 floats from an 8-float array.
        let dy = unsafe { _mm256_loadu_ps(dy.as_ptr()) };
        let d_sum = _mm256_mul_ps(_mm256_set1_ps(_mm_cvtss_f32(dd)), dy);
        let d_min = _mm256_mul_ps(_mm256_set1_ps(_mm_cvtss_f32(_mm_movehdup_ps(dd))), dy);
        for (j, min_j) in min_terms.iter().enumerate() {
            // SAFETY: bytes 16 + 32j .. +32 of the block's 144; unaligned load.
            let bits = unsafe { _mm256_loadu_si256(blk.as_ptr().add(16 + 32 * j).cast()) };
            let lo = [_mm256_and_si256(bits, m4)];
            let hi = [_mm256_and_si256(_mm256_srli_epi16::<4>(bits), m4)];
            let sc_lo = [_mm256_shuffle_epi8(scales, scale_shuffle_k4(2 * j))];
            let sc_hi = [_mm256_shuffle_epi8(scales, scale_shuffle_k4(2 * j + 1))];
            let mut sumi = [[_mm256_setzero_si256(); RN]; 1];
            // SAFETY: quants 64j .. 64j + 64 of block `i` (checked in `tile_rows`).
            unsafe {
                sub_block_dots(&lo, &sc_lo, &y, i * QK_K + 64 * j, &mut sumi);
                sub_block_dots(&hi, &sc_hi, &y, i * QK_K + 64 * j + 32, &mut sumi);
            }
            acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(row_sums(&sumi[0])), d_sum, acc);
            acc_min = _mm256_fmadd_ps(_mm256_cvtepi32_ps(*min_j), d_min, acc_min);
        }
    }
    let mut rows = [0f32; 8];
    // SAFETY: 8 floats into an 8-float array.
    unsafe { _mm256_storeu_ps(rows.as_mut_ptr(), _mm256_sub_ps(acc, acc_min)) };
    out[0].copy_from_slice(&rows[..RN]);
}

/// `vec_dot_q6_k_q8_k` for `RM` weight rows × `RN` activation rows at once, in the manner
/// of `tile_q4_k`: each weight row's 6-bit values of a 32-value sub-block recombined once
/// and used for every activation row. The −32 offset term starts each i32 sum instead of
/// being subtracted at the end (the same wrapping integer result). With `TILED`, each output
/// is `vec_dot_q6_k_q8_k::<true>`'s instead (ggml's tiled matmul, see `tiled_fold`).
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn tile_q6_k<const RM: usize, const RN: usize, const TILED: bool>(
    w: [&[u8]; RM],
    q: &Q8KRows,
    i0: usize,
    out: &mut [[f32; RN]; RM],
) {
    let y = tile_rows::<RM, RN>(&w, Q6_K_BYTES, q, i0);
    let nb = q.blocks_per_row;
    let mut acc = [[_mm256_setzero_ps(); RN]; RM];
    if TILED {
        *out = [[0.0; RN]; RM];
    }
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
        if TILED {
            for rm in 0..RM {
                let dw = _mm256_cvtss_f32(dw[rm]);
                for rn in 0..RN {
                    let dy = _mm256_cvtss_f32(dy[rn]);
                    tiled_fold(&mut out[rm][rn], hsum_i32(sumi[rm][rn]), dw, dy);
                }
            }
        } else {
            accumulate_block(&mut acc, &sumi, &dw, &dy);
        }
    }
    if !TILED {
        for rm in 0..RM {
            for rn in 0..RN {
                out[rm][rn] = hsum(acc[rm][rn]);
            }
        }
    }
}
