//! Q5_0 and Q8_0 weights against Q8_0 activations in plain loops: ggml's
//! `ggml_vec_dot_q5_0_q8_0` / `ggml_vec_dot_q8_0_q8_0` generic versions (`ggml-cpu/quants.c`):
//! per block, the i32 dot of the values, scaled by both f16 scales, summed in f32.

use half::f16;

use crate::cpu::formats::{QK, q5_0, q5_0::BYTES as Q5_0_BYTES, q8_0::BYTES as Q8_0_BYTES};
use crate::cpu::quantize::Q8Rows;

pub fn dot<const Q5: bool>(w: &[u8], q: &Q8Rows, i: usize) -> f32 {
    let bb = if Q5 { Q5_0_BYTES } else { Q8_0_BYTES };
    let mut acc = 0f32;
    for (b, blk) in w.chunks_exact(bb).enumerate() {
        let qi = i * q.blocks_per_row + b;
        let y = &q.quants[qi * QK..(qi + 1) * QK];
        let xs: [i8; 32] = if Q5 {
            q5_0::values(blk)
        } else {
            std::array::from_fn(|j| blk[2 + j] as i8)
        };
        let s: i32 = xs.iter().zip(y).map(|(&a, &b)| a as i32 * b as i32).sum();
        let d = f16::from_le_bytes([blk[0], blk[1]]).to_f32();
        acc += d * q.scales[qi] * s as f32;
    }
    acc
}
