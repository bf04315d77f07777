//! ggml `block_q4_K` (`ggml-common.h`): f16 d, f16 dmin, 12 bytes of 6-bit scales and mins
//! for eight 32-value sub-blocks, 128 bytes of nibbles; weight `d·sc·q − dmin·m`
//! (`ggml-quants.c`).

use super::f16_at;

/// Bytes per super-block of 256 values.
pub const BYTES: usize = 144;

/// ggml `get_scale_min_k4`: scale and min of Q4_K sub-block `j` (0..8) from the 12 packed bytes.
/// Sub-blocks 0–3 use the low 6 bits of bytes 0–3 (scales) and 4–7 (mins); sub-blocks 4–7 take
/// their low 4 bits from bytes 8–11 and their top 2 bits from the spare top bits of bytes 0–7.
#[inline]
pub fn get_scale_min_k4(j: usize, q: &[u8]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    }
}

pub const KMASK1: u32 = 0x3f3f_3f3f;
pub const KMASK2: u32 = 0x0f0f_0f0f;
pub const KMASK3: u32 = 0x0303_0303;

/// The dot kernels' form of `get_scale_min_k4` for all 8 sub-blocks at once (the `utmp` dance
/// in `ggml_vec_dot_q4_K_q8_K`): the little-endian bytes of words 0–1 are the 8 scales, of
/// words 2–3 the 8 mins.
#[inline]
pub fn scales_mins(s: &[u8]) -> [u32; 4] {
    let word = |i: usize| u32::from_le_bytes([s[4 * i], s[4 * i + 1], s[4 * i + 2], s[4 * i + 3]]);
    let mut utmp = [word(0), word(1), word(2), 0];
    utmp[3] = ((utmp[2] >> 4) & KMASK2) | (((utmp[1] >> 6) & KMASK3) << 4);
    let uaux = utmp[1] & KMASK1;
    utmp[1] = (utmp[2] & KMASK2) | (((utmp[0] >> 6) & KMASK3) << 4);
    utmp[2] = uaux;
    utmp[0] &= KMASK1;
    utmp
}

/// ggml `dequantize_row_q4_K` for one block: `d·sc·q − dmin·m` per 32-value sub-block.
pub fn dequantize(b: &[u8], y: &mut [f32]) {
    let d = f16_at(b, 0);
    let min = f16_at(b, 2);
    let scales = &b[4..16];
    let qs = &b[16..144];
    for (g, (q, y)) in qs.chunks_exact(32).zip(y.chunks_exact_mut(64)).enumerate() {
        let (sc, m) = get_scale_min_k4(2 * g, scales);
        let (d1, m1) = (d * sc as f32, min * m as f32);
        let (sc, m) = get_scale_min_k4(2 * g + 1, scales);
        let (d2, m2) = (d * sc as f32, min * m as f32);
        let (lo, hi) = y.split_at_mut(32);
        for ((l, h), &q) in lo.iter_mut().zip(hi.iter_mut()).zip(q) {
            *l = d1 * (q & 0xF) as f32 - m1;
            *h = d2 * (q >> 4) as f32 - m2;
        }
    }
}
