//! Each aarch64 table's kernels against the portable ones on seeded random blocks.
//!
//! Integers: with every scale 1 (weights' f16 scales and mins, activations' scales) and sums
//! far below 2²⁴, every float operation of every kernel is exact, so a kernel's output equals
//! the portable one bit for bit exactly when its integer sums do — whatever order the floats
//! are added in. Floats: the block formats' one-row kernels keep the portable order, so they
//! must equal it bit for bit on real scales too; tiles must equal their table's one-row
//! kernel bit for bit, and the aarch64 tables must equal each other.
//!
//! Run under `qemu-aarch64 -cpu max` (all three tables) and `-cpu cortex-a57` (neon only) by
//! `scripts/test-aarch64`.

use half::f16;

use crate::cpu::formats::{QK, QK_K, q4_k, q5_0, q6_k, q8_0};
use crate::cpu::quantize::{BSUMS, Q8KRows, Q8Rows};
use crate::cpu::row_pairs::{PairLayout, interleave_rows};
use crate::cpu::{Isa, Kernels, ops, table, tables};

struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) as u32
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }

    /// An activation quant in -127..=127, the extremes more often than uniform.
    fn quant(&mut self) -> i8 {
        match self.next() % 16 {
            0 => 127,
            1 => -127,
            _ => ((self.next() % 255) as i32 - 127) as i8,
        }
    }

    /// A positive f16 scale; 1.0 when `unit`.
    fn scale(&mut self, unit: bool) -> [u8; 2] {
        let v = if unit {
            1.0
        } else {
            (self.next() % 1000) as f32 / 1000.0 * 0.01 + 1e-4
        };
        f16::from_f32(v).to_le_bytes()
    }
}

fn aarch64_tables() -> Vec<&'static Kernels> {
    let t: Vec<_> = tables()
        .into_iter()
        .filter(|t| t.isa.family() == "aarch64")
        .collect();
    // every aarch64 CPU has NEON: an empty list would make every test below vacuous
    assert!(t.iter().any(|t| t.isa == Isa::Neon), "no NEON table");
    t
}

fn portable() -> &'static Kernels {
    table(Isa::Portable)
}

/// `m` activation rows of `k` values quantized as Q8_0, scales 1 when `unit`.
fn q8_rows(rng: &mut Lcg, m: usize, k: usize, unit: bool) -> Q8Rows {
    let blocks = m * k / QK;
    Q8Rows {
        scales: (0..blocks)
            .map(|_| f16::from_le_bytes(rng.scale(unit)).to_f32())
            .collect(),
        quants: (0..m * k).map(|_| rng.quant()).collect(),
        blocks_per_row: k / QK,
        smmla_pairs: None,
    }
}

fn q8k_rows(rng: &mut Lcg, m: usize, k: usize, unit: bool) -> Q8KRows {
    let qs: Vec<i8> = (0..m * k).map(|_| rng.quant()).collect();
    let bsums = qs
        .chunks_exact(16)
        .map(|c| c.iter().map(|&q| q as i16).sum())
        .collect();
    let blocks = m * k / QK_K;
    Q8KRows {
        d: (0..blocks)
            .map(|_| {
                if unit {
                    1.0
                } else {
                    f16::from_le_bytes(rng.scale(false)).to_f32()
                }
            })
            .collect(),
        qs,
        bsums,
        rows: m,
        blocks_per_row: k / QK_K,
        pairs: None,
    }
}

fn q5_0_row(rng: &mut Lcg, blocks: usize, unit: bool) -> Vec<u8> {
    let mut w = Vec::new();
    for _ in 0..blocks {
        w.extend(rng.scale(unit));
        w.extend(rng.bytes(q5_0::BYTES - 2));
    }
    w
}

fn q8_0_row(rng: &mut Lcg, blocks: usize, unit: bool) -> Vec<u8> {
    let mut w = Vec::new();
    for b in 0..blocks {
        w.extend(rng.scale(unit));
        // every byte value, -128 included, and a block of extremes
        let mut q = rng.bytes(q8_0::BYTES - 2);
        if b == 1 {
            q.iter_mut()
                .enumerate()
                .for_each(|(j, v)| *v = if j % 2 == 0 { 0x80 } else { 0x7F });
        }
        w.extend(q);
    }
    w
}

fn q4_k_row(rng: &mut Lcg, blocks: usize, unit: bool) -> Vec<u8> {
    let mut w = Vec::new();
    for _ in 0..blocks {
        w.extend(rng.scale(unit));
        w.extend(rng.scale(unit));
        w.extend(rng.bytes(q4_k::BYTES - 4));
    }
    w
}

fn q6_k_row(rng: &mut Lcg, blocks: usize, unit: bool) -> Vec<u8> {
    let mut w = Vec::new();
    for _ in 0..blocks {
        w.extend(rng.bytes(q6_k::BYTES - 2));
        w.extend(rng.scale(unit));
    }
    w
}

/// Premise of the integer tests: the exact result is an integer well inside f32's range of
/// exact integers, so no float operation on the way rounded.
fn assert_exact(v: f32, what: &str) {
    assert!(
        v.fract() == 0.0 && v.abs() < (1 << 23) as f32,
        "{what}: {v} is not a small integer"
    );
}

#[test]
fn block_dots_give_the_portable_integers_and_floats() {
    let mut rng = Lcg(1);
    // 10 blocks: not a multiple of the 4 rows of a decode tile's lanes
    let (k, m) = (10 * QK, 3);
    for unit in [true, false] {
        let q = q8_rows(&mut rng, m, k, unit);
        for q5 in [true, false] {
            let w = if q5 {
                q5_0_row(&mut rng, k / QK, unit)
            } else {
                q8_0_row(&mut rng, k / QK, unit)
            };
            let pick = |t: &'static Kernels| if q5 { &t.q5_0 } else { &t.q8_0 };
            for i in 0..m {
                let want = (pick(portable()).dot)(&w, &q, i);
                if unit {
                    assert_exact(want, "portable");
                }
                for t in aarch64_tables() {
                    let got = (pick(t).dot)(&w, &q, i);
                    assert_eq!(
                        got.to_bits(),
                        want.to_bits(),
                        "{} q5 {q5} unit {unit} row {i}: {got} vs {want}",
                        t.isa
                    );
                }
            }
        }
    }
}

#[test]
fn block_tiles_equal_the_one_row_kernel_bit_for_bit() {
    let mut rng = Lcg(2);
    let (k, m) = (7 * QK, 6);
    let q = q8_rows(&mut rng, m, k, false);
    for q5 in [true, false] {
        let rows: Vec<Vec<u8>> = (0..4)
            .map(|_| {
                if q5 {
                    q5_0_row(&mut rng, k / QK, false)
                } else {
                    q8_0_row(&mut rng, k / QK, false)
                }
            })
            .collect();
        for t in aarch64_tables() {
            let kernels = if q5 { &t.q5_0 } else { &t.q8_0 };
            let one = |r: usize, i: usize| (kernels.dot)(&rows[r], &q, i);
            let prompt = kernels.prompt.expect("aarch64 tables have prompt tiles");
            // without `smmla` pairs, and with them (what the i8mm table quantizes)
            let paired = Q8Rows {
                smmla_pairs: Some(interleave_rows(&q.quants, m, k, PairLayout::Smmla.run())),
                scales: q.scales.clone(),
                quants: q.quants.clone(),
                blocks_per_row: q.blocks_per_row,
            };
            for (q, layout) in [(&q, "no pairs"), (&paired, "smmla pairs")] {
                for i0 in [0, 2] {
                    let mut out = [[0f32; 4]; 2];
                    prompt([&rows[0], &rows[1]], q, i0, &mut out);
                    let what = format!("{} q5 {q5} {layout} prompt at {i0}", t.isa);
                    assert_tile(&out, &|r, i| one(r, i), (0, i0), &what);
                }
            }
            let decode = kernels.decode.expect("aarch64 tables have decode tiles");
            let mut out = [[0f32; 1]; 4];
            decode([&rows[0], &rows[1], &rows[2], &rows[3]], &q, 2, &mut out);
            for (r, o) in out.iter().enumerate() {
                assert_eq!(
                    o[0].to_bits(),
                    one(r, 2).to_bits(),
                    "{} q5 {q5} decode {r}",
                    t.isa
                );
            }
        }
    }
}

#[test]
fn k_quant_dots_give_the_portable_integers() {
    let mut rng = Lcg(3);
    let (k, m) = (2 * QK_K, 2);
    let q = q8k_rows(&mut rng, m, k, true);
    for q6 in [false, true] {
        for _ in 0..4 {
            let w = if q6 {
                q6_k_row(&mut rng, k / QK_K, true)
            } else {
                q4_k_row(&mut rng, k / QK_K, true)
            };
            let pick = |t: &'static Kernels| if q6 { &t.q6_k } else { &t.q4_k };
            for i in 0..m {
                let want = (pick(portable()).dot)(&w, q.row(i));
                assert_exact(want, "portable");
                for t in aarch64_tables() {
                    let got = (pick(t).dot)(&w, q.row(i));
                    assert_eq!(
                        got.to_bits(),
                        want.to_bits(),
                        "{} q6 {q6} row {i}: {got} vs {want}",
                        t.isa
                    );
                }
            }
        }
    }
}

#[test]
fn k_quant_dots_agree_with_the_portable_ones_on_real_scales() {
    let mut rng = Lcg(4);
    let (k, m) = (4 * QK_K, 2);
    let q = q8k_rows(&mut rng, m, k, false);
    for q6 in [false, true] {
        let w = if q6 {
            q6_k_row(&mut rng, k / QK_K, false)
        } else {
            q4_k_row(&mut rng, k / QK_K, false)
        };
        let pick = |t: &'static Kernels| if q6 { &t.q6_k } else { &t.q4_k };
        for i in 0..m {
            let want = (pick(portable()).dot)(&w, q.row(i));
            for t in aarch64_tables() {
                let got = (pick(t).dot)(&w, q.row(i));
                assert!(
                    (got - want).abs() <= 1e-5 * (1.0 + want.abs()),
                    "{} q6 {q6}: {got} vs {want}",
                    t.isa
                );
            }
        }
    }
}

/// Compares `got[rm][rn]` with `one(r0 + rm, i0 + rn)` bit for bit.
fn assert_tile<const RM: usize, const RN: usize>(
    got: &[[f32; RN]; RM],
    one: &impl Fn(usize, usize) -> f32,
    (r0, i0): (usize, usize),
    what: &str,
) {
    for (rm, o) in got.iter().enumerate() {
        for (rn, v) in o.iter().enumerate() {
            let want = one(r0 + rm, i0 + rn);
            assert_eq!(
                v.to_bits(),
                want.to_bits(),
                "{what} {rm},{rn}: {v} vs {want}"
            );
        }
    }
}

#[test]
fn k_quant_tiles_equal_the_one_row_kernel_bit_for_bit() {
    use crate::cpu::KPrompt;
    use crate::cpu::kquants::{PROMPT_TAIL, PROMPT_TILE, Q4K_DECODE_ROWS};
    use crate::cpu::row_pairs::Q8KPairs;
    let mut rng = Lcg(5);
    let (k, m) = (2 * QK_K, PROMPT_TILE + PROMPT_TAIL);
    let mut q = q8k_rows(&mut rng, m, k, false);
    for b in [1, 2 * PROMPT_TILE + 1] {
        // all-zero activation blocks (as quantization leaves them), in the tile and the tail
        q.d[b] = 0.0;
        q.qs[b * QK_K..(b + 1) * QK_K].fill(0);
        q.bsums[b * BSUMS..(b + 1) * BSUMS].fill(0);
    }
    for q6 in [false, true] {
        let rows: Vec<Vec<u8>> = (0..Q4K_DECODE_ROWS)
            .map(|_| {
                if q6 {
                    q6_k_row(&mut rng, k / QK_K, false)
                } else {
                    q4_k_row(&mut rng, k / QK_K, false)
                }
            })
            .collect();
        let w = |r: usize| rows[r].as_slice();
        for t in aarch64_tables() {
            let kernels = if q6 { &t.q6_k } else { &t.q4_k };
            let one = |r: usize, i: usize| (kernels.dot)(&rows[r], q.row(i));
            // activations as this table quantizes them (row pairs where it asks for them),
            // and without pairs, as another table would leave them
            let paired = Q8KRows {
                pairs: t
                    .row_pairs
                    .map(|l| Q8KPairs::new(l, &q.d, &q.qs, &q.bsums, m, k / QK_K)),
                ..q.clone()
            };
            for (q, layout) in [(&paired, "own layout"), (&q, "no pairs")] {
                let what = format!("{} q6 {q6} {layout}", t.isa);
                match kernels.prompt.expect("aarch64 tables have prompt tiles") {
                    KPrompt::OneRow(tile, tail) => {
                        let mut out = [[0f32; PROMPT_TILE]; 1];
                        tile([w(0)], q, 0, &mut out);
                        assert_tile(&out, &one, (0, 0), &format!("{what} prompt"));
                        let mut out = [[0f32; PROMPT_TAIL]; 1];
                        tail([w(1)], q, PROMPT_TILE, &mut out);
                        assert_tile(&out, &one, (1, PROMPT_TILE), &format!("{what} tail"));
                    }
                    KPrompt::TwoRows(tile, tail) => {
                        let mut out = [[0f32; PROMPT_TILE]; 2];
                        tile([w(0), w(1)], q, 0, &mut out);
                        assert_tile(&out, &one, (0, 0), &format!("{what} prompt"));
                        let mut out = [[0f32; PROMPT_TAIL]; 2];
                        tail([w(2), w(3)], q, PROMPT_TILE, &mut out);
                        assert_tile(&out, &one, (2, PROMPT_TILE), &format!("{what} tail"));
                    }
                }
            }
            if let Some(decode) = kernels.decode {
                let mut out = [[0f32; 1]; Q4K_DECODE_ROWS];
                decode(std::array::from_fn(w), &q, 5, &mut out);
                assert_tile(&out, &one, (0, 5), &format!("{} q6 {q6} decode", t.isa));
            }
        }
    }
}

#[test]
fn q8_0_quantization_equals_the_portable_one() {
    let mut rng = Lcg(6);
    let k = 8 * QK;
    let mut x: Vec<f32> = (0..k)
        .map(|_| (rng.next() % 20001) as f32 / 1000.0 - 10.0)
        .collect();
    // ties: with amax 127 the inverse scale is 1, so these land exactly on .5
    x[..QK]
        .iter_mut()
        .enumerate()
        .for_each(|(j, v)| *v = j as f32 + 0.5);
    x[QK - 1] = 127.0;
    x[QK..2 * QK].fill(0.0);
    x[2 * QK..3 * QK].iter_mut().for_each(|v| *v *= 1e-30); // tiny values, a tiny maximum
    let (mut want_q, mut want_s) = (vec![0i8; k], vec![0f32; k / QK]);
    (portable().quantize_q8_0)(&x, &mut want_q, &mut want_s);
    for t in aarch64_tables() {
        let (mut q, mut s) = (vec![0i8; k], vec![0f32; k / QK]);
        (t.quantize_q8_0)(&x, &mut q, &mut s);
        assert_eq!(q, want_q, "{}", t.isa);
        assert_eq!(
            s.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            want_s.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            "{}",
            t.isa
        );
    }
}

#[test]
fn attention_kernels_follow_the_eight_lane_chains() {
    let mut rng = Lcg(7);
    let d = 64;
    let q: Vec<f32> = (0..d)
        .map(|_| (rng.next() % 2000) as f32 / 1000.0 - 1.0)
        .collect();
    let k: Vec<f16> = (0..4 * d)
        .map(|_| f16::from_f32((rng.next() % 2000) as f32 / 700.0 - 1.4))
        .collect();
    // the reference: 8 fused chains, then ggml's hsum_float_8
    let reference = |key: &[f16]| {
        let mut lanes = [0f32; 8];
        for c in 0..d / 8 {
            for (l, lane) in lanes.iter_mut().enumerate() {
                *lane = key[8 * c + l].to_f32().mul_add(q[8 * c + l], *lane);
            }
        }
        let s: [f32; 4] = std::array::from_fn(|l| lanes[l] + lanes[l + 4]);
        (s[0] + s[2]) + (s[1] + s[3])
    };
    for t in aarch64_tables() {
        let simd = t.attention.as_ref().expect("aarch64 attention kernels");
        for keys in 1..=4 {
            let got = (simd.scores4)(&q, &k[..keys * d], keys);
            for j in 0..keys {
                assert_eq!(
                    got[j].to_bits(),
                    reference(&k[j * d..(j + 1) * d]).to_bits(),
                    "{} key {j}",
                    t.isa
                );
            }
        }
        let mut want = q.clone();
        crate::cpu::attention::mad(&mut want, &k[..d], 0.37);
        let mut got = q.clone();
        (simd.mad)(&mut got, &k[..d], 0.37);
        assert_eq!(got, want, "{}", t.isa);
    }
}

#[test]
fn geglu_equals_the_portable_one() {
    let n = 1003;
    let gate: Vec<f32> = (0..n).map(|i| (i as f32 * 0.0131).sin() * 12.0).collect();
    let up: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).cos()).collect();
    let table = ops::gelu_table();
    let mut want = gate.clone();
    ops::geglu_portable(&mut want, &up, table);
    for t in aarch64_tables() {
        let mut got = gate.clone();
        (t.geglu)(&mut got, &up, table);
        assert_eq!(got, want, "{}", t.isa);
    }
}

/// The bit-for-bit tests above would also pass if the i8mm tiles always took their fallbacks,
/// so this checks that the i8mm table quantizes the pairs its tiles take (and that another
/// table's activations do take the fallback). Building a table runs none of its kernels and
/// the checks are plain Rust, so this runs on every aarch64 CPU.
#[test]
fn the_i8mm_table_quantizes_the_pairs_its_tiles_take() {
    use super::blocks_i8mm::operand_pairs;
    use super::kquants_i8mm::smmla_rows;
    let (i8mm, dotprod) = (super::tables::i8mm(), super::tables::dotprod());
    let (m, k) = (8, 2 * QK_K);
    let x: Vec<f32> = (0..m * k)
        .map(|v| (v * 7919 % 255) as f32 / 127.0 - 1.0)
        .collect();
    let w = vec![0u8; k / QK_K * q4_k::BYTES];
    let paired = Q8KRows::quantize_on(&i8mm, &x, m, k);
    for (i0, rn) in [(0, 8), (0, 4), (4, 4)] {
        assert!(smmla_rows([&w, &w], q4_k::BYTES, &paired, i0, rn).is_some());
    }
    let blocks = Q8Rows::quantize_on(&i8mm, &x, m, k);
    assert!(operand_pairs(&blocks, 0).is_some() && operand_pairs(&blocks, 4).is_some());
    // rows that do not start a pair: the fallbacks, not a panic
    assert!(smmla_rows([&w, &w], q4_k::BYTES, &paired, 1, 4).is_none());
    assert!(operand_pairs(&blocks, 1).is_none());
    // another table's quantization: the fallbacks
    let unpaired = Q8KRows::quantize_on(&dotprod, &x, m, k);
    assert!(smmla_rows([&w, &w], q4_k::BYTES, &unpaired, 0, 8).is_none());
    assert!(operand_pairs(&Q8Rows::quantize_on(&dotprod, &x, m, k), 0).is_none());
}
