//! engine/metal/decode.metal's kernels on the emulated device against host references on
//! random inputs, and the emulator's own rules (a barrier under a condition, order races).

use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use half::f16;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::{Buffer, Encoder, Pipeline};
use crate::backend::kernel_args::{Attn, EmbedArgs, JoinArgs, Mat, Mats, SamplingArgs, TopArgs};

/// ggml type ids (the kernels' `T_*`, `decode_plan::type_id`).
fn type_id(t: GgmlDType) -> Option<i32> {
    Some(match t {
        GgmlDType::Q4_0 => 2,
        GgmlDType::Q5_0 => 6,
        GgmlDType::Q8_0 => 8,
        GgmlDType::Q4K => 12,
        GgmlDType::Q5K => 13,
        GgmlDType::Q6K => 14,
        _ => return None,
    })
}

fn bytes_of<T: Copy>(v: &T) -> &[u8] {
    // SAFETY: `T` is one of the `repr(C)` argument structs: plain data
    unsafe { std::slice::from_raw_parts((v as *const T).cast::<u8>(), std::mem::size_of::<T>()) }
}

fn buffer_with(bytes: &[u8]) -> Buffer {
    let b = Buffer::new(bytes.len());
    // SAFETY: no dispatch runs
    unsafe { b.bytes()[..bytes.len()].copy_from_slice(bytes) };
    b
}

fn f32_buffer(v: &[f32]) -> Buffer {
    let b = Buffer::new(4 * v.len());
    // SAFETY: no dispatch runs
    unsafe { b.f32s()[..v.len()].copy_from_slice(v) };
    b
}

fn randn(rng: &mut StdRng, n: usize) -> Vec<f32> {
    (0..n)
        .map(|_| {
            // a sum of uniforms: roughly normal, with a few larger values
            let s: f32 = (0..4).map(|_| rng.random::<f32>() - 0.5).sum();
            s * 1.7
        })
        .collect()
}

/// q8_1 blocks of `x` as the kernels make them (quantize_lane): per 32 values, d = amax/127,
/// q = rint(x/d), then (half d, half sum x); returned as bytes and as the values they stand for.
fn q8_1(x: &[f32]) -> (Vec<u8>, Vec<f32>) {
    let mut bytes = Vec::new();
    let mut values = Vec::new();
    for block in x.chunks(32) {
        let amax = block.iter().fold(0f32, |a, v| a.max(v.abs()));
        let d = amax / 127.0;
        let sum: f32 = block.iter().sum();
        bytes.extend(f16::from_f32(d).to_le_bytes());
        bytes.extend(f16::from_f32(sum).to_le_bytes());
        for &v in block {
            let q = if amax == 0.0 {
                0
            } else {
                (v / d).round_ties_even() as i8
            };
            bytes.push(q as u8);
            values.push(q as f32 * f16::from_f32(d).to_f32());
        }
    }
    (bytes, values)
}

/// Values q8_1 holds exactly: per block of 32, integers up to ±127 (one of them ±127) times a
/// power of two, with a sum that f16 holds exactly. The kernels' quantization then loses
/// nothing, and a mat-vec differs from the f64 reference only by f32 rounding.
fn on_the_q8_grid(rng: &mut StdRng, n: usize) -> Vec<f32> {
    let mut x = Vec::with_capacity(n);
    while x.len() < n {
        let d = 2f32.powi(rng.random_range(-6..0));
        let mut q: Vec<i32> = (0..32).map(|_| rng.random_range(-127..=127)).collect();
        q[rng.random_range(0..32)] = if rng.random::<bool>() { 127 } else { -127 };
        if q.iter().sum::<i32>().abs() > 2000 {
            continue;
        }
        x.extend(q.iter().map(|&v| v as f32 * d));
    }
    x
}

/// The values a q8_1 buffer holds.
fn dequantize_q8_1(bytes: &[u8], n: usize) -> Vec<f32> {
    let mut out = Vec::with_capacity(n);
    for block in bytes.chunks(36).take(n / 32) {
        let d = f16::from_le_bytes([block[0], block[1]]).to_f32();
        out.extend(block[4..36].iter().map(|&q| q as i8 as f32 * d));
    }
    out
}

/// A random `[rows, k]` matrix quantized to `ty`: its bytes and its dequantized values.
fn quantized(rng: &mut StdRng, rows: usize, k: usize, ty: GgmlDType) -> (Vec<u8>, Vec<f32>) {
    let w = randn(rng, rows * k);
    let t = Tensor::from_vec(w, (rows, k), &Device::Cpu).unwrap();
    let q = QTensor::quantize(&t, ty).unwrap();
    let bytes = q.data().unwrap().into_owned();
    let deq = q
        .dequantize(&Device::Cpu)
        .unwrap()
        .flatten_all()
        .unwrap()
        .to_vec1::<f32>()
        .unwrap();
    (bytes, deq)
}

fn close(what: &str, got: f32, want: f64, scale: f64, rel: f64) {
    let err = (got as f64 - want).abs();
    assert!(
        err <= rel * scale + 1e-6,
        "{what}: got {got}, want {want} (error {err:.3e}, allowed {:.3e})",
        rel * scale + 1e-6
    );
}

/// matvec3 over three matrices of `ty` (rows that leave a SIMD-group of the last threadgroup
/// idle), against the dequantized weights times the quantized input.
fn matvec_case(ty: GgmlDType, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let k = 512;
    let rows = [37usize, 6, 9];
    let x = on_the_q8_grid(&mut rng, k);
    let (xq, xv) = q8_1(&x);
    let y = buffer_with(&xq);
    let mats: Vec<(Vec<u8>, Vec<f32>)> = rows
        .iter()
        .map(|&r| quantized(&mut rng, r, k, ty))
        .collect();
    let weights: Vec<Buffer> = mats.iter().map(|(b, _)| buffer_with(b)).collect();
    let outs: Vec<Buffer> = rows.iter().map(|&r| Buffer::new(4 * r)).collect();
    let mut args = Mats {
        n_mats: 3,
        k: k as i32,
        ..Mats::default()
    };
    for (i, slot) in args.m.iter_mut().enumerate() {
        *slot = Mat {
            w: weights[i].address(),
            out: outs[i].address(),
            ty: type_id(ty).unwrap(),
            rows: rows[i] as i32,
        };
    }
    let total: usize = rows.iter().sum();
    let mut enc = Encoder::new(seed);
    enc.set_pipeline(&Pipeline::new("matvec3").unwrap());
    enc.set_bytes(0, bytes_of(&args));
    enc.set_buffer(1, Some((&y, 0)));
    enc.dispatch([total.div_ceil(4), 1, 1], [128, 1, 1]);
    enc.finish().unwrap();
    for (m, ((_, w), out)) in mats.iter().zip(&outs).enumerate() {
        // SAFETY: the dispatch is over
        let got = unsafe { out.f32s() };
        for r in 0..rows[m] {
            let row = &w[r * k..(r + 1) * k];
            let want: f64 = row
                .iter()
                .zip(&xv)
                .map(|(a, b)| *a as f64 * *b as f64)
                .sum();
            let scale: f64 = row
                .iter()
                .zip(&x)
                .map(|(a, b)| (*a as f64 * *b as f64).abs())
                .sum();
            close(
                &format!("{ty:?} matrix {m} row {r}"),
                got[r],
                want,
                scale,
                1e-5,
            );
        }
    }
}

#[test]
fn matvec3_matches_the_host_for_every_weight_format() {
    for (i, ty) in [
        GgmlDType::Q4_0,
        GgmlDType::Q5_0,
        GgmlDType::Q8_0,
        GgmlDType::Q4K,
        GgmlDType::Q5K,
        GgmlDType::Q6K,
    ]
    .into_iter()
    .enumerate()
    {
        matvec_case(ty, 100 + i as u64);
    }
}

#[test]
fn embed_norm_matches_the_host() {
    let mut rng = StdRng::seed_from_u64(7);
    let (n, vocab) = (256usize, 5usize);
    let (table, deq) = quantized(&mut rng, vocab, n, GgmlDType::Q8_0);
    let w: Vec<f32> = randn(&mut rng, n).iter().map(|v| 1.0 + 0.3 * v).collect();
    let token = 3;
    let params = buffer_with(bytes_of(&[3i32, token, 0, 0]));
    let (x, xq) = (Buffer::new(4 * n), Buffer::new(n / 32 * 36));
    let (scale, eps) = (1.5f32, 1e-6f32);
    let table = buffer_with(&table);
    let wb = f32_buffer(&w);
    let mut enc = Encoder::new(1);
    enc.set_pipeline(&Pipeline::new("embed_norm").unwrap());
    enc.set_buffer(0, Some((&table, 0)));
    let args = EmbedArgs {
        ty: type_id(GgmlDType::Q8_0).unwrap(),
        n_embd: n as i32,
        scale,
        eps,
    };
    enc.set_bytes(1, bytes_of(&args));
    enc.set_buffer(2, Some((&wb, 0)));
    enc.set_buffer(3, Some((&params, 0)));
    enc.set_buffer(4, Some((&x, 0)));
    enc.set_buffer(5, Some((&xq, 0)));
    enc.set_threadgroup_memory(0, 4 * (n + 32));
    enc.dispatch([1, 1, 1], [128, 1, 1]);
    enc.finish().unwrap();
    let row: Vec<f64> = deq[token as usize * n..(token as usize + 1) * n]
        .iter()
        .map(|&v| v as f64 * scale as f64)
        .collect();
    let ms = row.iter().map(|v| v * v).sum::<f64>() / n as f64;
    let s = 1.0 / (ms + eps as f64).sqrt();
    // SAFETY: the dispatch is over
    let (gx, gq) = unsafe { (x.f32s(), xq.bytes()) };
    let normed = dequantize_q8_1(gq, n);
    for i in 0..n {
        close(&format!("x[{i}]"), gx[i], row[i], row[i].abs(), 1e-6);
        let want = row[i] * s * w[i] as f64;
        // one q8 step of its block
        close(&format!("normed[{i}]"), normed[i], want, 0.03, 1.0);
    }
}

/// One layer's attention at position `pos`: QK-norm, RoPE, the new K/V into the f16 cache, the
/// splits, then joined — against a plain softmax attention.
#[test]
fn attention_split_and_join_match_the_host() {
    let mut rng = StdRng::seed_from_u64(11);
    let (g, pl) = (2usize, 2usize);
    let hd = 32 * pl;
    let (n_kv, pos, slots, splits) = (2usize, 9usize, 16usize, 3usize);
    let n_head = n_kv * g;
    let q = randn(&mut rng, n_head * hd);
    let k = randn(&mut rng, n_kv * hd);
    let v = randn(&mut rng, n_kv * hd);
    let q_norm: Vec<f32> = randn(&mut rng, hd).iter().map(|x| 1.0 + 0.2 * x).collect();
    let k_norm: Vec<f32> = randn(&mut rng, hd).iter().map(|x| 1.0 + 0.2 * x).collect();
    let half_rot = hd / 2;
    let mut cos = vec![0f32; slots * half_rot];
    let mut sin = vec![0f32; slots * half_rot];
    for p in 0..slots {
        for j in 0..half_rot {
            let theta = p as f64 / 10000f64.powf(2.0 * j as f64 / hd as f64);
            cos[p * half_rot + j] = theta.cos() as f32;
            sin[p * half_rot + j] = theta.sin() as f32;
        }
    }
    let old_k: Vec<f16> = randn(&mut rng, n_kv * slots * hd)
        .iter()
        .map(|&x| f16::from_f32(x))
        .collect();
    let old_v: Vec<f16> = randn(&mut rng, n_kv * slots * hd)
        .iter()
        .map(|&x| f16::from_f32(x))
        .collect();
    let half_bytes = |h: &[f16]| h.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let (kc, vc) = (
        buffer_with(&half_bytes(&old_k)),
        buffer_with(&half_bytes(&old_v)),
    );
    let (qb, kb, vb) = (f32_buffer(&q), f32_buffer(&k), f32_buffer(&v));
    let (qn, kn) = (f32_buffer(&q_norm), f32_buffer(&k_norm));
    let (cb, sb) = (f32_buffer(&cos), f32_buffer(&sin));
    let partial = Buffer::new(4 * n_head * splits * (hd + 2));
    let params = buffer_with(bytes_of(&[pos as i32, 0, 0, 0]));
    let (out, outq) = (
        Buffer::new(4 * n_head * hd),
        Buffer::new(n_head * hd / 32 * 36),
    );
    let (q_scale, eps) = (0.125f32, 1e-6f32);
    let attn = Attn {
        q: qb.address(),
        k: kb.address(),
        v: vb.address(),
        q_norm: qn.address(),
        k_norm: kn.address(),
        v_norm: 0,
        cos: cb.address(),
        sin: sb.address(),
        n_rot: hd as i32,
        k_cache: kc.address(),
        v_cache: vc.address(),
        slots: slots as i32,
        sliding: 0,
        window: slots as i32,
        n_head: n_head as i32,
        n_kv: n_kv as i32,
        hd: hd as i32,
        q_scale,
        softcap: 0.0,
        eps,
        partial: partial.address(),
        splits: splits as i32,
    };
    let mut enc = Encoder::new(5);
    enc.set_pipeline(&Pipeline::new(&format!("attention_split_g{g}_d{pl}")).unwrap());
    enc.set_bytes(0, bytes_of(&attn));
    enc.set_buffer(1, Some((&params, 0)));
    enc.dispatch([n_kv, splits, 1], [96, 1, 1]);
    enc.set_pipeline(&Pipeline::new("attention_join").unwrap());
    enc.set_buffer(0, Some((&partial, 0)));
    let join = JoinArgs {
        splits: splits as i32,
        hd: hd as i32,
        has_out: 1,
    };
    enc.set_bytes(1, bytes_of(&join));
    enc.set_buffer(2, Some((&out, 0)));
    enc.set_buffer(3, Some((&outq, 0)));
    enc.dispatch([n_head, 1, 1], [hd, 1, 1]);
    enc.finish().unwrap();

    let norm = |x: &[f64], w: &[f32]| -> Vec<f64> {
        let ms = x.iter().map(|v| v * v).sum::<f64>() / x.len() as f64;
        let s = 1.0 / (ms + eps as f64).sqrt();
        x.iter().zip(w).map(|(v, w)| v * s * *w as f64).collect()
    };
    let rope = |x: &mut [f64]| {
        for j in 0..half_rot {
            let (c, s) = (
                cos[pos * half_rot + j] as f64,
                sin[pos * half_rot + j] as f64,
            );
            let (x0, x1) = (x[j], x[j + half_rot]);
            x[j] = x0 * c - x1 * s;
            x[j + half_rot] = x0 * s + x1 * c;
        }
    };
    // SAFETY: the dispatches are over
    let (got, k_cache) = unsafe { (out.f32s(), kc.bytes()) };
    for kvh in 0..n_kv {
        let mut kn_ref = norm(
            &k[kvh * hd..(kvh + 1) * hd]
                .iter()
                .map(|&x| x as f64)
                .collect::<Vec<_>>(),
            &k_norm,
        );
        rope(&mut kn_ref);
        // the new K went into the cache at slot `pos`, as f16
        for (i, want) in kn_ref.iter().enumerate() {
            let at = 2 * ((kvh * slots + pos) * hd + i);
            let h = f16::from_le_bytes([k_cache[at], k_cache[at + 1]]).to_f32();
            close(
                &format!("k_cache[{kvh}][{pos}][{i}]"),
                h,
                *want,
                want.abs(),
                2e-3,
            );
        }
        for hh in 0..g {
            let h = kvh * g + hh;
            let mut qh = norm(
                &q[h * hd..(h + 1) * hd]
                    .iter()
                    .map(|&x| x as f64)
                    .collect::<Vec<_>>(),
                &q_norm,
            );
            rope(&mut qh);
            let mut scores = Vec::new();
            for t in 0..=pos {
                let key: Vec<f64> = if t == pos {
                    kn_ref.clone()
                } else {
                    old_k[(kvh * slots + t) * hd..][..hd]
                        .iter()
                        .map(|x| x.to_f64())
                        .collect()
                };
                scores.push(qh.iter().zip(&key).map(|(a, b)| a * b).sum::<f64>() * q_scale as f64);
            }
            let m = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let e: Vec<f64> = scores.iter().map(|s| (s - m).exp()).collect();
            let z: f64 = e.iter().sum();
            for i in 0..hd {
                let mut want = 0.0;
                for t in 0..=pos {
                    let val = if t == pos {
                        v[kvh * hd + i] as f64
                    } else {
                        old_v[(kvh * slots + t) * hd + i].to_f64()
                    };
                    want += e[t] / z * val;
                }
                close(&format!("out[{h}][{i}]"), got[h * hd + i], want, 1.0, 1e-4);
            }
        }
    }
}

/// The candidates of each block of logits (soft-capped) and the greedy pick.
#[test]
fn top_candidates_and_pick_match_the_host() {
    let mut rng = StdRng::seed_from_u64(3);
    let (n, blocks, k) = (3000usize, 4usize, 8usize);
    let logits = randn(&mut rng, n)
        .iter()
        .map(|x| x * 10.0)
        .collect::<Vec<f32>>();
    let softcap = 30.0f32;
    let lb = f32_buffer(&logits);
    let (cand_v, cand_i) = (Buffer::new(4 * blocks * k), Buffer::new(4 * blocks * k));
    let mut enc = Encoder::new(9);
    enc.set_pipeline(&Pipeline::new("top_candidates").unwrap());
    enc.set_buffer(0, Some((&lb, 0)));
    let top = TopArgs {
        n: n as i32,
        k: k as i32,
        softcap,
    };
    enc.set_bytes(1, bytes_of(&top));
    enc.set_buffer(2, Some((&cand_v, 0)));
    enc.set_buffer(3, Some((&cand_i, 0)));
    enc.dispatch([blocks, 1, 1], [256, 1, 1]);
    let params = buffer_with(bytes_of(&[4i32, 0, 0, 0]));
    let (recent, n_recent, token) = (Buffer::new(64), Buffer::new(4), Buffer::new(4));
    let draws = f32_buffer(&[0.5; 4]);
    enc.set_pipeline(&Pipeline::new("pick").unwrap());
    enc.set_buffer(0, Some((&cand_v, 0)));
    enc.set_buffer(1, Some((&cand_i, 0)));
    let sampling = SamplingArgs {
        temperature: 0.0,
        top_k: k as i32,
        top_p: 1.0,
        min_p: 0.0,
        n_draws: 4,
        n_cand: (blocks * k) as i32,
        window: 16,
        pad: 0,
    };
    enc.set_bytes(2, bytes_of(&sampling));
    enc.set_buffer(3, Some((&draws, 0)));
    enc.set_buffer(4, Some((&params, 0)));
    enc.set_buffer(5, Some((&recent, 0)));
    enc.set_buffer(6, Some((&n_recent, 0)));
    enc.set_buffer(7, Some((&token, 0)));
    enc.dispatch([1, 1, 1], [64, 1, 1]);
    enc.finish().unwrap();
    let capped: Vec<f32> = logits
        .iter()
        .map(|&l| softcap * (l / softcap).tanh())
        .collect();
    let per = n.div_ceil(blocks);
    // SAFETY: the dispatches are over
    let (cv, ci, got_logits) = unsafe { (cand_v.f32s(), cand_i.i32s(), lb.f32s()) };
    for (i, (&g, &w)) in got_logits.iter().zip(&capped).enumerate() {
        close(
            &format!("capped logit {i}"),
            g,
            w as f64,
            w.abs() as f64,
            1e-5,
        );
    }
    for b in 0..blocks {
        let lo = b * per;
        let hi = (lo + per).min(n);
        let mut idx: Vec<usize> = (lo..hi).collect();
        idx.sort_by(|&a, &c| got_logits[c].total_cmp(&got_logits[a]).then(a.cmp(&c)));
        for r in 0..k {
            assert_eq!(ci[b * k + r], idx[r] as i32, "block {b} candidate {r}");
            assert_eq!(cv[b * k + r], got_logits[idx[r]]);
        }
    }
    let best = (0..n)
        .max_by(|&a, &c| got_logits[a].total_cmp(&got_logits[c]).then(c.cmp(&a)))
        .unwrap();
    // SAFETY: the dispatches are over
    let (t, p, nr) = unsafe { (token.i32s()[0], params.i32s(), n_recent.i32s()[0]) };
    assert_eq!(t, best as i32, "the greedy pick");
    assert_eq!(
        &p[..3],
        &[5, best as i32, 1],
        "pos, token and step advanced"
    );
    assert_eq!(nr, 1, "the token joined the recent window");
}

fn run_check_kernel(name: &str, seed: u64) -> Result<Vec<f32>, String> {
    let out = Buffer::new(4 * 64);
    let mut enc = Encoder::new(seed);
    enc.set_pipeline(&Pipeline::new(name).unwrap());
    enc.set_buffer(0, Some((&out, 0)));
    enc.dispatch([1, 1, 1], [64, 1, 1]);
    enc.finish().map_err(|e| e.to_string())?;
    // SAFETY: the dispatch is over
    Ok(unsafe { out.f32s() }[..64].to_vec())
}

#[test]
fn a_barrier_under_a_condition_is_a_divergence_error() {
    let e = run_check_kernel("emu_barrier_under_condition", 1).unwrap_err();
    assert!(e.contains("divergence"), "{e}");
    assert!(e.contains("threadgroup_barrier"), "{e}");
}

#[test]
fn the_seed_shuffles_thread_order_so_races_show() {
    let results: Vec<Vec<f32>> = (0..4)
        .map(|s| run_check_kernel("emu_race_without_barrier", s).unwrap())
        .collect();
    assert!(
        results.iter().any(|r| r != &results[0]),
        "a read without a barrier gave the same in every order"
    );
    // with the barrier: one answer, whatever the order
    let want: Vec<f32> = (0..64)
        .map(|t| (63 - t) as f32 + 1000.0 * (t % 32) as f32)
        .collect();
    for s in 0..4 {
        assert_eq!(run_check_kernel("emu_with_barrier", s).unwrap(), want);
    }
}

#[test]
fn a_constant_argument_shorter_than_its_struct_is_refused() {
    let mut enc = Encoder::new(0);
    enc.set_pipeline(&Pipeline::new("matvec3").unwrap());
    enc.set_bytes(0, &[0u8; 8]);
    enc.set_buffer(1, Some((&Buffer::new(64), 0)));
    enc.dispatch([1, 1, 1], [32, 1, 1]);
    let e = enc.finish().unwrap_err().to_string();
    assert!(e.contains("[[buffer(0)]] holds 8 bytes"), "{e}");
}
