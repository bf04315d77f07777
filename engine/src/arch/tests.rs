//! The description read from hand-made metadata: each generation's rules, and refusals.

use std::collections::HashMap;
use std::path::Path;

use candle_core::quantized::gguf_file::Value;

use super::*;

struct Fixture {
    meta: HashMap<String, Value>,
    tensors: Vec<String>,
}

impl Fixture {
    /// A `family` model of `n_layer` blocks, 256 wide, 4 heads of 64, vocabulary 10, with every
    /// block tensor the reader asks about.
    fn new(arch: &str, n_layer: u32) -> Self {
        let mut meta = HashMap::new();
        let k = |s: &str| format!("{arch}.{s}");
        meta.insert("general.architecture".into(), Value::String(arch.into()));
        meta.insert(k("block_count"), Value::U32(n_layer));
        meta.insert(k("embedding_length"), Value::U32(256));
        meta.insert(k("context_length"), Value::U32(4096));
        meta.insert(k("feed_forward_length"), Value::U32(512));
        meta.insert(k("attention.head_count"), Value::U32(4));
        meta.insert(k("attention.head_count_kv"), Value::U32(2));
        meta.insert(k("attention.key_length"), Value::U32(64));
        meta.insert(k("attention.layer_norm_rms_epsilon"), Value::F32(1e-6));
        meta.insert(
            "tokenizer.ggml.tokens".into(),
            Value::Array((0..10).map(|i| Value::String(format!("t{i}"))).collect()),
        );
        let mut tensors = Vec::new();
        for il in 0..n_layer as usize {
            for part in [
                "attn_norm",
                "attn_q",
                "attn_k",
                "attn_v",
                "layer_output_scale",
            ] {
                tensors.push(keys::block(il, part));
            }
        }
        Fixture { meta, tensors }
    }

    fn set(mut self, key: &str, v: Value) -> Self {
        self.meta.insert(key.into(), v);
        self
    }

    fn without_tensor(mut self, name: &str) -> Self {
        self.tensors.retain(|t| t != name);
        self
    }

    fn with_tensor(mut self, name: &str) -> Self {
        self.tensors.push(name.into());
        self
    }

    fn read(&self) -> Result<ModelArch> {
        let meta = Meta {
            path: Path::new("test.gguf"),
            metadata: &self.meta,
        };
        ModelArch::from_gguf(&meta, &|name| self.tensors.iter().any(|t| t == name))
    }
}

fn bools(v: &[bool]) -> Value {
    Value::Array(v.iter().map(|&b| Value::Bool(b)).collect())
}

fn u32s(v: &[u32]) -> Value {
    Value::Array(v.iter().map(|&x| Value::U32(x)).collect())
}

#[test]
fn gemma_has_no_window_no_norms_and_ties_its_output() {
    let a = Fixture::new("gemma", 3)
        .with_tensor("output.weight")
        .read()
        .unwrap();
    assert_eq!(a.family, Family::Gemma);
    assert_eq!(a.window, None);
    assert!(a.tied_output, "gemma always ties, as llama.cpp does");
    assert!(
        a.layers
            .iter()
            .all(|l| !l.sliding && !l.qk_norm && !l.post_norms)
    );
    assert_eq!(a.layers[0].q_scale, 1.0 / 8.0);
    assert_eq!((a.attn_softcap, a.final_softcap), (None, None));
    assert_eq!(a.ropes.len(), 1);
    assert_eq!(a.ropes[0].base, 10_000.0);
}

#[test]
fn gemma2_alternates_its_window_and_caps_with_llamacpp_defaults() {
    let a = Fixture::new("gemma2", 4).read().unwrap();
    assert_eq!(a.window, Some(4096));
    let sliding: Vec<bool> = a.layers.iter().map(|l| l.sliding).collect();
    assert_eq!(sliding, [true, false, true, false]);
    assert_eq!((a.attn_softcap, a.final_softcap), (Some(50.0), Some(30.0)));
    assert!(a.layers.iter().all(|l| l.post_norms && !l.qk_norm));
    // the sliding layers take the global base and scale
    let a = Fixture::new("gemma2", 2)
        .set("gemma2.rope.freq_base", Value::F32(5e5))
        .set("gemma2.rope.scaling.factor", Value::F32(4.0))
        .set("gemma2.attn_logit_softcapping", Value::F32(15.0))
        .read()
        .unwrap();
    assert_eq!(a.ropes.len(), 1);
    assert_eq!((a.ropes[0].base, a.ropes[0].freq_scale), (5e5, 0.25));
    assert_eq!(a.attn_softcap, Some(15.0));
}

#[test]
fn the_27b_scales_queries_by_the_embedding_width_per_head() {
    let a = Fixture::new("gemma2", 46).read().unwrap();
    assert_eq!(a.layers[0].q_scale, 1.0 / 8.0, "256 / 4 heads = 64");
    let a = Fixture::new("gemma3", 62)
        .set("gemma3.embedding_length", Value::U32(1024))
        .read()
        .unwrap();
    assert_eq!(
        a.layers[0].q_scale,
        1.0 / 16.0,
        "1024 / 4 = 256, not the head size 64"
    );
}

#[test]
fn gemma3_scales_rope_linearly_on_its_global_layers_only() {
    let a = Fixture::new("gemma3", 12)
        .set("gemma3.attention.sliding_window", Value::U32(512))
        .set("gemma3.rope.freq_base", Value::F32(1e6))
        .set("gemma3.rope.scaling.type", Value::String("linear".into()))
        .set("gemma3.rope.scaling.factor", Value::F32(8.0))
        .read()
        .unwrap();
    let sliding: Vec<usize> = (0..12).filter(|&il| a.layers[il].sliding).collect();
    assert_eq!(sliding, [0, 1, 2, 3, 4, 6, 7, 8, 9, 10]);
    let local = &a.ropes[a.layers[0].rope];
    let global = &a.ropes[a.layers[5].rope];
    assert_eq!((local.base, local.freq_scale), (10_000.0, 1.0));
    assert_eq!((global.base, global.freq_scale), (1e6, 0.125));
    assert_eq!(a.final_softcap, None);
    // no window: every layer global
    let a = Fixture::new("gemma3", 6).read().unwrap();
    assert!(a.layers.iter().all(|l| !l.sliding));
}

#[test]
fn gemma4_reads_per_layer_shapes_and_shares_kv_by_llamacpps_rule() {
    let pattern = [true, true, false, true, true, false];
    let f = Fixture::new("gemma4", 6)
        .set("gemma4.attention.sliding_window", Value::U32(512))
        .set("gemma4.attention.sliding_window_pattern", bools(&pattern))
        .set("gemma4.attention.head_count_kv", u32s(&[2, 2, 1, 2, 2, 1]))
        .set("gemma4.attention.key_length", Value::U32(128))
        .set("gemma4.attention.key_length_swa", Value::U32(64))
        .set("gemma4.rope.dimension_count", Value::U32(128))
        .set("gemma4.rope.dimension_count_swa", Value::U32(64))
        .set(
            "gemma4.feed_forward_length",
            u32s(&[512, 512, 512, 1024, 1024, 1024]),
        )
        .set("gemma4.attention.shared_kv_layers", Value::U32(3))
        .with_tensor("rope_freqs.weight")
        .without_tensor(&keys::block(2, "attn_v"));
    let a = f.read().unwrap();
    assert_eq!(
        a.final_softcap,
        Some(30.0),
        "gemma4 keeps llama.cpp's default cap"
    );
    assert!(
        a.layers
            .iter()
            .all(|l| l.q_scale == 1.0 && l.v_norm && l.qk_norm)
    );
    assert_eq!(
        a.layers.iter().map(|l| l.head_dim).collect::<Vec<_>>(),
        [64, 64, 128, 64, 64, 128]
    );
    assert!(a.layers[2].v_from_k && !a.layers[1].v_from_k);
    // shared layers: SWA ones read layer kv_from - 2 = 1, the global one kv_from - 1 = 2
    let kv: Vec<KvSource> = a.layers.iter().map(|l| l.kv).collect();
    assert_eq!(
        kv,
        [
            KvSource::Own,
            KvSource::Own,
            KvSource::Own,
            KvSource::Shared(1),
            KvSource::Shared(1),
            KvSource::Shared(2)
        ]
    );
    assert_eq!(a.storing_layers().count(), 3);
    assert_eq!(a.layers[4].n_ff, 1024);
    let global = &a.ropes[a.layers[2].rope];
    assert!(global.freq_factors && global.n_rot == 128);
    assert!(!a.ropes[a.layers[0].rope].freq_factors);
}

#[test]
fn a_shared_layer_whose_source_differs_in_shape_is_refused() {
    let err = Fixture::new("gemma4", 4)
        .set("gemma4.attention.sliding_window", Value::U32(512))
        .set(
            "gemma4.attention.sliding_window_pattern",
            bools(&[true, true, false, true]),
        )
        .set("gemma4.attention.head_count_kv", u32s(&[2, 1, 1, 2]))
        .set("gemma4.attention.shared_kv_layers", Value::U32(1))
        .read()
        .unwrap_err();
    assert!(err.to_string().contains("shared layer 3"), "{err}");
}

#[test]
fn what_cannot_run_is_refused_with_what_is_missing() {
    let cases: Vec<(Fixture, &str)> = vec![
        (
            Fixture::new("gemma4", 2)
                .set("gemma4.expert_count", Value::U32(8))
                .set("gemma4.attention.sliding_window", Value::U32(512))
                .set(
                    "gemma4.attention.sliding_window_pattern",
                    bools(&[true, false]),
                ),
            "mixture-of-experts",
        ),
        (
            Fixture::new("gemma4", 2).with_tensor(&keys::block(1, "ffn_gate_inp")),
            "mixture-of-experts",
        ),
        (Fixture::new("clip", 2), "projector"),
        (Fixture::new("gemma-embedding", 2), "embedding model"),
        (Fixture::new("gemma3n", 2), "Gemma 3n"),
        (
            Fixture::new("llama", 2),
            "supported architectures are gemma",
        ),
        (
            Fixture::new("gemma3", 2).set("gemma3.rope.scaling.type", Value::String("yarn".into())),
            "rope scaling `yarn`",
        ),
        (
            Fixture::new("gemma3", 2).set("gemma3.attention.head_count_kv", Value::U32(3)),
            "not a multiple",
        ),
        (
            Fixture::new("gemma3", 2).with_tensor(&keys::block(1, "attn_qkv")),
            "fused attn_qkv",
        ),
    ];
    for (f, want) in cases {
        let err = f.read().unwrap_err();
        assert!(err.to_string().contains(want), "{want}: {err}");
    }
}

#[test]
fn absurd_dimensions_are_refused_before_they_size_anything() {
    let huge = 1u64 << 60;
    let cases: Vec<(Fixture, &str)> = vec![
        (
            Fixture::new("gemma3", 2).set("gemma3.block_count", Value::U64(huge)),
            "block_count",
        ),
        (
            Fixture::new("gemma3", 2).set("gemma3.block_count", Value::U32(3)),
            "is missing",
        ),
        (
            Fixture::new("gemma3", 2).set("gemma3.block_count", Value::U32(1)),
            "more blocks",
        ),
        (
            Fixture::new("gemma3", 2).set("gemma3.embedding_length", Value::U64(huge)),
            "embedding_length",
        ),
        (
            Fixture::new("gemma3", 2).set("gemma3.attention.head_count", Value::U32(0)),
            "zero",
        ),
        (
            Fixture::new("gemma3", 2).set("gemma3.feed_forward_length", Value::U64(huge)),
            "feed_forward_length",
        ),
        (
            Fixture::new("gemma3", 2).set("gemma3.context_length", Value::U64(huge)),
            "context_length",
        ),
        (
            Fixture::new("gemma3", 2).set("gemma3.attention.key_length", Value::U32(1 << 20)),
            "head size",
        ),
    ];
    for (f, want) in cases {
        let err = f.read().unwrap_err();
        assert!(err.to_string().contains(want), "{want}: {err}");
    }
}
