//! ggml `block_q8_0` (`ggml-common.h`): an f16 scale and 32 signed bytes; weight `d · q`.

use half::f16;

use super::QK;

/// Bytes per block.
pub const BYTES: usize = 34;

/// `out = d · q` for one block (ggml `dequantize_row_q8_0`).
pub fn dequantize(b: &[u8], out: &mut [f32]) {
    let d = f16::from_le_bytes([b[0], b[1]]).to_f32();
    for (o, &q) in out[..QK].iter_mut().zip(&b[2..2 + QK]) {
        *o = d * (q as i8) as f32;
    }
}
