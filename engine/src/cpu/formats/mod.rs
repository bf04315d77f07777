//! The ggml block formats the CPU kernels read, one file each: their byte layout and their
//! dequantization (`ggml-common.h`, `ggml-quants.c`). Kernels of every instruction set decode
//! the same layouts; what a block means is said once, here.

pub mod q4_k;
pub mod q5_0;
pub mod q6_k;
pub mod q8_0;

use half::f16;

/// Values per block of Q5_0 and Q8_0 (ggml `QK5_0`, `QK8_0`).
pub const QK: usize = 32;
/// Values per super-block of the K-quants (ggml `QK_K`).
pub const QK_K: usize = 256;

/// Formats of 32-value blocks, multiplied against Q8_0 activations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockFormat {
    Q5_0,
    Q8_0,
}

impl BlockFormat {
    /// ggml's name for it.
    pub fn name(self) -> &'static str {
        match self {
            BlockFormat::Q5_0 => "q5_0",
            BlockFormat::Q8_0 => "q8_0",
        }
    }

    pub fn block_bytes(self) -> usize {
        match self {
            BlockFormat::Q5_0 => q5_0::BYTES,
            BlockFormat::Q8_0 => q8_0::BYTES,
        }
    }

    /// Dequantize one block into 32 values.
    pub fn dequantize(self, block: &[u8], out: &mut [f32]) {
        match self {
            BlockFormat::Q5_0 => q5_0::dequantize(block, out),
            BlockFormat::Q8_0 => q8_0::dequantize(block, out),
        }
    }
}

/// K-quant formats of 256-value super-blocks, multiplied against Q8_K activations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KFormat {
    /// `block_q4_K`
    Q4K,
    /// `block_q6_K`
    Q6K,
}

impl KFormat {
    /// ggml's name for it.
    pub fn name(self) -> &'static str {
        match self {
            KFormat::Q4K => "q4_k",
            KFormat::Q6K => "q6_k",
        }
    }

    pub fn block_bytes(self) -> usize {
        match self {
            KFormat::Q4K => q4_k::BYTES,
            KFormat::Q6K => q6_k::BYTES,
        }
    }

    /// Dequantize one super-block into 256 values.
    pub fn dequantize(self, block: &[u8], out: &mut [f32]) {
        match self {
            KFormat::Q4K => q4_k::dequantize(block, out),
            KFormat::Q6K => q6_k::dequantize(block, out),
        }
    }
}

/// The little-endian f16 at byte `at` of `b`, as f32.
#[inline]
pub fn f16_at(b: &[u8], at: usize) -> f32 {
    f16::from_le_bytes([b[at], b[at + 1]]).to_f32()
}
