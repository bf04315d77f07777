//! ggml `block_q6_K` (`ggml-common.h`): 128 bytes of low nibbles, 64 bytes of high bit pairs,
//! 16 signed scales of 16-value sub-blocks, f16 d; weight `d·sc·(q − 32)` (`ggml-quants.c`).

use super::f16_at;

/// Bytes per super-block of 256 values.
pub const BYTES: usize = 210;

/// ggml `dequantize_row_q6_K` for one block: `d·sc·(q − 32)` per 16-value sub-block.
pub fn dequantize(b: &[u8], y: &mut [f32]) {
    let d = f16_at(b, 208);
    // Two halves of 128 values: 64 low-nibble bytes, 32 high-bit bytes and 8 scales each.
    for part in 0..2 {
        let ql = &b[64 * part..64 * part + 64];
        let qh = &b[128 + 32 * part..128 + 32 * part + 32];
        let sc = &b[192 + 8 * part..192 + 8 * part + 8];
        let y = &mut y[128 * part..128 * part + 128];
        for l in 0..32 {
            let is = l / 16;
            let q1 = ((ql[l] & 0xF) | ((qh[l] & 3) << 4)) as i8 - 32;
            let q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) as i8 - 32;
            let q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i8 - 32;
            let q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i8 - 32;
            // C evaluates `d * sc[is] * q` left to right.
            y[l] = d * (sc[is] as i8) as f32 * q1 as f32;
            y[l + 32] = d * (sc[is + 2] as i8) as f32 * q2 as f32;
            y[l + 64] = d * (sc[is + 4] as i8) as f32 * q3 as f32;
            y[l + 96] = d * (sc[is + 6] as i8) as f32 * q4 as f32;
        }
    }
}
