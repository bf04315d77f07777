//! aarch64 kernels (Apple silicon, ARM Linux): three kernel tables, chosen at run time by
//! `cpu::features` (`is_aarch64_feature_detected!`), following ggml's `ggml-cpu/arch/arm/`
//! (llama.cpp b11434):
//!
//! - `neon`: Advanced SIMD only — every aarch64 CPU (Cortex-A57/A72, Raspberry Pi 4). The
//!   integer dot step is ggml's `ggml_vdotq_s32` fallback (`smull`, `smull2`, 2 × `saddlp`,
//!   2 × `add`).
//! - `dotprod`: the same kernels with `sdot` as the dot step (Apple A11+/M1+, Cortex-A76+).
//! - `i8mm`: `dotprod` with `smmla` prompt tiles for Q5_0/Q8_0 and Q4_K/Q6_K (Apple M2+/A15+,
//!   Neoverse V1+).
//!
//! Files: `dot` (the dot steps, `smmla`, f16 conversions, through `asm!` where Rust's
//! intrinsics are unstable), `blocks` and `blocks_i8mm` (Q5_0, Q8_0), `kquants` and
//! `kquants_i8mm` (Q4_K, Q6_K), `f16` (F16 weights: Gemma 4's per-layer projection),
//! `attention`, `gemm`, `ops` (Q8_0 quantization, the GELU gate), `tables` (the three
//! tables), `tests`.
//!
//! **Results.** Every table computes the portable table's integers (the unit tests check
//! each kernel bit for bit with unit scales, where floats are exact). The three aarch64
//! tables give each other's results bit for bit, and every tile gives its one-row kernel's,
//! so a prompt's rows do not depend on how they were batched. Floats follow ggml's order:
//! the block formats sum one f32 chain per output, block by block — ggml's i8mm (`nrc == 2`)
//! order, and the portable order, so those one-row kernels equal the portable ones exactly;
//! the K-quants keep ggml's NEON per-super-block scalar chains. Q8_0 activation quantization
//! multiplies by `127 / amax` (ggml's reference and x86) rather than ggml NEON's
//! `1 / (amax / 127)`, which could flip a rounding: the quants stay the portable ones. Under
//! `qemu-aarch64` the teacher-forced agreement with llama.cpp holds with the x86 thresholds
//! (`scripts/test-aarch64`).
//!
//! **Not followed yet: llama.cpp's ARM repacking.** b11434 on ARM repacks Q4_K and Q6_K
//! weights whose row count is a multiple of 8 (`ggml-cpu/repack.cpp`,
//! `ggml_repack_get_optimal_repack_type`): `q4_K_8x8`/`q6_K_8x8` where i8mm is compiled in,
//! `q4_K_8x4`/`q6_K_8x4` where only dotprod is; the choice is made at compile time. Their float
//! order differs from the non-repacked chains above: `q4_K_8x4` folds
//! `acc = fma(d·d_y, f32(Σ two sub-blocks' scale·sum), acc)` per pair of sub-blocks and
//! `acc −= f32(Σ min·bsum)·(dmin·d_y)` (fused) per super-block, the same in its gemv and gemm;
//! the 8x8 kernels and Q6_K's gemv and gemm fold differently from each other, so llama.cpp's
//! ARM results there depend on batch size. clang fuses `vmlaq_f32`/`vmlsq_f32` (one C
//! expression under `-ffp-contract=on`), GCC 12 does not; Rust's never are (`vfmaq_f32` is).
//! Matching them is a port of `arch/arm/repack.cpp` checked against that file built for
//! aarch64 and run under qemu.
//!
//! **Speed claim, to check on a Mac** (`companion bench`; `COMPANION_CPU_KERNELS=neon` or
//! `dotprod` forces a narrower table to compare). Instructions per block in the inner loop,
//! counted from the source of both (loads included — ours are 16-byte `ld1`, which LLVM may pair into `ldp`; scalar scale bookkeeping and loop
//! overhead left out), not from disassembly — `cargo asm` or `objdump -d` on the release
//! build shows what LLVM made of ours:
//!
//! | kernel (ours) | ggml routine mirrored | ours / block | ggml / block |
//! |---|---|---|---|
//! | Q8_0 dot, one row (dotprod) | `ggml_vec_dot_q8_0_q8_0` NEON | 4 ld, 2 `sdot`, 1 `addv`, 1 `scvtf`, 2 `fmul`, 1 `fadd` + f16 scale (`fcvtl`): ~12 | 4 ld, 2 `sdot`, 1 `add`, 1 `scvtf`, 1 `fmul`+`fadd` (vmla) + 2 f16 cvt: ~12 |
//! | Q8_0 decode tile, 4 rows × 1 (dotprod) | same, 4 rows at once | per row: 2 ld, 2 `sdot`, ¾ `addp`, ½ y ld, ~1½ float/scale: ~7 | as one row: ~12 |
//! | Q8_0 prompt tile, 2 × 4 (dotprod) | same | per output: 2 `sdot`, 1 y ld, ~1 w ld, ¾ `addp`, ~1 float: ~6 | one row: ~12 |
//! | Q8_0 prompt tile, 2 × 4 (i8mm) | `ggml_vec_dot_q8_0_q8_0` `nrc == 2` | per block: 4 w ld + 4 `zip`, per row pair 4 y ld (quantized as operands, `Q8Rows::smmla_pairs`) + 4 `smmla`, 2 `zip`, float 2 × 4: per output ~4½ (1 `smmla`) | per 2 × 2: 8 ld, 8 `zip`, 4 `smmla`, ~4 float: per output ~6 |
//! | Q5_0 (all of the above) | `ggml_vec_dot_q5_0_q8_0` NEON | Q8_0's + 2 `table_b2b_1` lookups (4 scalar ld), 2 `ins`, `and`, `ushr`, 2 `sub`: +~9 per weight block | the same decode (`table_b2b_1`, `vsubq_s8`): +~9 |
//! | `neon` table (no dotprod), any of the above | `ggml_vdotq_s32` fallback | each `sdot` becomes 6 (`smull`, `smull2`, 2 `saddlp`, 2 `add`) | the same |
//! | Q4_K dot, one row (dotprod) | `ggml_vec_dot_q4_K_q8_K` NEON | per 256: 8 w ld, 16 y ld, 8 `and`/`ushr`, 16 `sdot`, 8 `mla`, 2 `addv`; mins 2 ld, `addp`, 2 `smull`, `add`, `addv`: ~70 + scale unpack (scalar, ~15) | 4 w ld (`ld1` ×2), 4 y ld (`ld1` ×4), 8 `and`/`ushr`, 16 `sdot`, 8 `addv` + 8 scalar `madd`; mins as ours: ~60 + ~15 |
//! | Q4_K decode tile, 4 rows × 1 | same, 4 rows | per row ~55 (y loads and bsums shared) | as one row |
//! | Q4_K prompt tiles, 1 × 8 and 1 × 4 | same, 8 or 4 activation rows | per output ~45 (nibbles split once for the tile) | as one row |
//! | Q6_K dot, one row (dotprod) | `ggml_vec_dot_q6_K_q8_K` NEON | per 256: per 16 values 2 ld (ql, qh: LLVM may merge repeats), `and`/`ushr`, `ushr`, `and`, `shl`, `orr`, y ld, `sdot`, `mla`: ~10 × 16 = ~160; mins 2 × 2 `smull`, 3 `add`, `addv` | 12 w ld, 16 y ld, ~44 bit ops, 16 `sdot`, 16 `addv` + 16 scalar `madd`: ~120 |
//! | Q6_K prompt tiles, 1 × 8 and 1 × 4 | same | per output ~8 × 16 / tile + 3 × 16 = ~65 (1 × 8) | as one row |
//! | Q4_K prompt tiles, 2 × 8 and 2 × 4 (i8mm) | `ggml_vec_dot_q4_K_q8_K` `nrc == 2` | per pair of activation rows: 32 y ld (pre-interleaved), 32 `smmla`, 8 `mla`, ~33 mins and float (~26 per output); decode + 32 `zip` shared by 16 outputs (~6): per output ~32 | per 2 × 2: 16 ld, 32 `and`/`ushr`, 64 `zip`, 32 `smmla`, scale vectors through memory (~40), 8 `mla`, ~38 mins and float: per output ~58 |
//! | Q6_K prompt tiles, 2 × 8 and 2 × 4 (i8mm) | `ggml_vec_dot_q6_K_q8_K` `nrc == 2` | per pair: 32 y ld, 32 `smmla`, 16 `mla`, ~39 for the −32 term and float; decode + zips ~19 per output: per output ~50 | per 2 × 2: decode ~136, per 16 values 2 ld, 4 `zip`, 2 `smmla`, ~5 scale, 1 `mla` (~224), ~55 bias and float: per output ~104 |
//! | Q8_0 quantization | `quantize_row_q8_0` NEON | 8 ld, 8 `fabs`, 7 `fmax`, `fmaxv`, 8 `fmul`, 8 `fcvtns`, 12 `sqxtn`, 4 st, f16 scale (`half`) | the same up to `fcvtns`, then 32 lane moves and byte stores |
//! | attention scores (4 keys) / `mad` | ggml flash attention's f16 dot / `ggml_vec_mad_f16` | per 8 values and key: 1 ld, 2 `fcvtl`, 2 `fmla` (+ q ld shared) / 1 ld, 2 `fcvtl`, 2 ld, 2 `fmla`, 2 st | per 8 values: 2 ld (F16 vectors), 2 `fcvtl`, 2 `fmla` |
//! | `gemm_acc`, 4 × 8 tile | `simd_gemm` (`simd-gemm.h`) | per k: 2 ld, 4 `dup`, 8 `fmla` | the same shape |
//! | F16 × f32, one output (`vec_dot`) | `ggml_vec_dot_f16` (x86's 8-lane order; ggml NEON sums in f16) | per 8 values: 1 w ld, 2 `fcvtl`, 2 x ld, 2 `fmla` | per 8 values (fp16 arithmetic): 1 w ld, 1 x ld, 1 `fmla` (f16) |
//! | GELU gate | `ggml_vec_geglu_f32` with `GGML_GELU_FP16` | per 4 values: 1 ld, 1 `fcvtn`, 1 st, then 4 table lookups | 1 scalar f16 conversion per value |
//!
//! Not vectorized, and why: Q8_K quantization (ggml has no NEON `quantize_row_q8_K` either —
//! its `placeholder implementation for Apple targets` calls the reference); RMSNorm (ggml
//! sums the squares one by one in double, `ggml_compute_forward_rms_norm_f32`; x86 keeps the
//! portable loop too); Q5_0's offset form (it saves x86's sign trick; NEON multiplies signed
//! bytes directly). There is no software prefetch:
//! `prfm` needs `asm!` and Apple cores prefetch streams well; to be measured on a Mac.

mod attention;
mod blocks;
mod blocks_i8mm;
mod dot;
mod f16;
mod gemm;
mod kquants;
mod kquants_i8mm;
mod ops;
pub(crate) mod tables;
#[cfg(test)]
mod tests;
