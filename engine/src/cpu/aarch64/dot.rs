//! The integer and conversion primitives the aarch64 kernels are built from, one per
//! instruction-set level: ggml's `ggml_vdotq_s32` (`ggml-cpu/ggml-cpu-impl.h`), which is
//! `sdot` where the CPU has dotprod and `vmull_s8` + `vpadalq`-style pairwise adds otherwise;
//! `smmla` (i8mm); and the f16 ↔ f32 conversions `fcvtl` / `fcvtn`.
//!
//! Rust 1.95 keeps `vdotq_s32` (`stdarch_neon_dotprod`) and `vmmlaq_s32` (`stdarch_neon_i8mm`)
//! unstable, and the f16 vector types too, so those four instructions are written as inline
//! `asm!` — as ggml itself does for `sdot` on compilers without the intrinsic. Each block
//! enables its extension for the assembler (`.arch_extension`), so it assembles in whatever
//! function it is inlined into; that the CPU runs it is the callers' `unsafe` contract, kept by
//! `cpu::table`, which builds a table only for features detected at run time. The kernels
//! themselves are compiled for base NEON only, so LLVM never emits dotprod or i8mm
//! instructions of its own into code the Cortex-A57 path runs.

use std::arch::aarch64::*;
use std::arch::asm;

/// One step of a 16-byte signed dot product: `acc + Σ a·b` spread over four i32 lanes. Only
/// the sum of the four lanes is ever used, so the two implementations may (and do) spread
/// the products differently: every kernel reduces lanes to exact i32 sums before any float.
pub(crate) trait Dot {
    /// # Safety
    /// The CPU must have the instructions the implementation uses (see each).
    unsafe fn dot(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t;
}

/// ggml's `ggml_vdotq_s32` without `__ARM_FEATURE_DOTPROD`: two widening multiplies
/// (`smull`, `smull2`) and two pairwise widening adds (`saddlp`), then two adds. Base NEON:
/// every aarch64 CPU (the Cortex-A57 of the emulated test among them).
pub(crate) struct Vmull;

impl Dot for Vmull {
    #[inline]
    #[target_feature(enable = "neon")]
    unsafe fn dot(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
        let p0 = vmull_s8(vget_low_s8(a), vget_low_s8(b));
        let p1 = vmull_high_s8(a, b);
        vaddq_s32(acc, vaddq_s32(vpaddlq_s16(p0), vpaddlq_s16(p1)))
    }
}

/// `sdot` (ARMv8.2 dotprod, every Apple M-series and A11+ core): lane `l` gains
/// `Σ_{j<4} a[4l+j]·b[4l+j]` in one instruction.
pub(crate) struct Sdot;

impl Dot for Sdot {
    /// # Safety
    /// The CPU must have dotprod.
    #[inline]
    #[target_feature(enable = "neon")]
    unsafe fn dot(mut acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
        // SAFETY: a register-only instruction; the caller guarantees the CPU has it.
        unsafe {
            asm!(
                ".arch_extension dotprod",
                "sdot {acc:v}.4s, {a:v}.16b, {b:v}.16b",
                acc = inout(vreg) acc,
                a = in(vreg) a,
                b = in(vreg) b,
                options(pure, nomem, nostack, preserves_flags)
            );
        }
        acc
    }
}

/// Rows `a`, `b` of 16 bytes as the two 8-byte rows of each `smmla` operand: bytes 0..8 of
/// both, then bytes 8..16 of both (ggml's `vzip1q_s64` / `vzip2q_s64`).
#[inline]
#[target_feature(enable = "neon")]
pub(crate) fn interleave(a: int8x16_t, b: int8x16_t) -> (int8x16_t, int8x16_t) {
    let (a, b) = (vreinterpretq_s64_s8(a), vreinterpretq_s64_s8(b));
    (
        vreinterpretq_s8_s64(vzip1q_s64(a, b)),
        vreinterpretq_s8_s64(vzip2q_s64(a, b)),
    )
}

/// `smmla` (ARMv8.6 i8mm, Apple M2 and later): `a` and `b` each hold two rows of 8 signed
/// bytes; `acc` gains the 2×2 products `[a0·b0, a0·b1, a1·b0, a1·b1]`.
///
/// # Safety
/// The CPU must have i8mm.
#[inline]
#[target_feature(enable = "neon")]
pub(crate) unsafe fn smmla(mut acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
    // SAFETY: a register-only instruction; the caller guarantees the CPU has it.
    unsafe {
        asm!(
            ".arch_extension i8mm",
            "smmla {acc:v}.4s, {a:v}.16b, {b:v}.16b",
            acc = inout(vreg) acc,
            a = in(vreg) a,
            b = in(vreg) b,
            options(pure, nomem, nostack, preserves_flags)
        );
    }
    acc
}

/// Four f16 bit patterns as f32 (`fcvtl`, base ARMv8 floating point): exact, as `half`'s
/// conversion.
#[inline]
#[target_feature(enable = "neon")]
pub(crate) fn f16x4_to_f32(h: uint16x4_t) -> float32x4_t {
    let out: float32x4_t;
    // SAFETY: a register-only base-ARMv8 instruction.
    unsafe {
        asm!(
            "fcvtl {out:v}.4s, {h:v}.4h",
            out = lateout(vreg) out,
            h = in(vreg) h,
            options(pure, nomem, nostack, preserves_flags)
        );
    }
    out
}

/// Four f32 rounded to f16 bit patterns (`fcvtn`, round to nearest even under the default
/// FPCR, as `half::f16::from_f32`).
#[inline]
#[target_feature(enable = "neon")]
pub(crate) fn f32x4_to_f16(x: float32x4_t) -> uint16x4_t {
    let out: uint16x4_t;
    // SAFETY: a register-only base-ARMv8 instruction.
    unsafe {
        asm!(
            "fcvtn {out:v}.4h, {x:v}.4s",
            out = lateout(vreg) out,
            x = in(vreg) x,
            options(pure, nomem, nostack, preserves_flags)
        );
    }
    out
}

/// The f16 at byte `at` of `b` in all four lanes, as f32.
#[inline]
#[target_feature(enable = "neon")]
pub(crate) fn f16_splat(b: &[u8], at: usize) -> float32x4_t {
    f16x4_to_f32(vdup_n_u16(u16::from_le_bytes([b[at], b[at + 1]])))
}

/// The f16 at byte `at` of `b` as f32 (lane 0 of [`f16_splat`]).
#[inline]
#[target_feature(enable = "neon")]
pub(crate) fn f16_at(b: &[u8], at: usize) -> f32 {
    vgetq_lane_f32::<0>(f16_splat(b, at))
}

/// 16 bytes at `p[at..]`.
#[inline]
#[target_feature(enable = "neon")]
pub(crate) fn load16(p: &[u8], at: usize) -> uint8x16_t {
    assert!(at + 16 <= p.len());
    // SAFETY: 16 readable bytes, checked above; NEON loads need no alignment.
    unsafe { vld1q_u8(p.as_ptr().add(at)) }
}

/// 16 signed bytes at `p[at..]`.
#[inline]
#[target_feature(enable = "neon")]
pub(crate) fn load16_i8(p: &[i8], at: usize) -> int8x16_t {
    assert!(at + 16 <= p.len());
    // SAFETY: 16 readable bytes, checked above; NEON loads need no alignment.
    unsafe { vld1q_s8(p.as_ptr().add(at)) }
}

/// The four lane sums of `a..d` as one vector: `[Σa, Σb, Σc, Σd]` (three `addp`).
#[inline]
#[target_feature(enable = "neon")]
pub(crate) fn sums4(a: int32x4_t, b: int32x4_t, c: int32x4_t, d: int32x4_t) -> int32x4_t {
    vpaddq_s32(vpaddq_s32(a, b), vpaddq_s32(c, d))
}
