//! ggml `block_q5_0` (`ggml-common.h`): an f16 scale, 32 fifth bits, 16 bytes of nibbles;
//! value `x = (nibble | fifth bit << 4) - 16`, weight `d · x`.

use half::f16;

use super::QK;

/// Bytes per block.
pub const BYTES: usize = 22;

/// The 32 signed values of a Q5_0 block: `(nibble | high_bit << 4) - 16`.
#[inline]
pub fn values(b: &[u8]) -> [i8; 32] {
    let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
    let qs = &b[6..22];
    let mut v = [0i8; 32];
    for j in 0..16 {
        let lo = (qs[j] & 0x0F) | ((((qh >> j) & 1) as u8) << 4);
        let hi = (qs[j] >> 4) | ((((qh >> (j + 16)) & 1) as u8) << 4);
        v[j] = lo as i8 - 16;
        v[j + 16] = hi as i8 - 16;
    }
    v
}

/// `out = d · x` for one block (ggml `dequantize_row_q5_0`).
pub fn dequantize(b: &[u8], out: &mut [f32]) {
    let d = f16::from_le_bytes([b[0], b[1]]).to_f32();
    for (o, v) in out[..QK].iter_mut().zip(values(b)) {
        *o = d * v as f32;
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn values_decode_the_fifth_bit() {
        let mut b = [0u8; super::BYTES];
        b[6] = 0x21; // value 0: nibble 1; value 16: nibble 2
        b[2] = 0x01; // fifth bit of value 0
        let v = super::values(&b);
        assert_eq!((v[0], v[16], v[1]), (17 - 16, 2 - 16, -16));
    }
}
