//! A generation's per-operation profile (`companion bench --profile`) accounts for the prefill
//! and the decode steps separately, with every layer's operations in it.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

use engine::{Engine, EngineConfig, GenerateParams, SamplingParams};

#[test]
fn a_generation_reports_where_its_prefill_and_decode_spent_their_time() {
    let engine = Engine::load(EngineConfig {
        model_path: PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/gemma-family/gemma3-gqa.q8_0.gguf"),
        context: 256,
        prefill_chunk: 64,
        warm_up: false,
        ..EngineConfig::default()
    })
    .unwrap();
    let layers = engine.model().arch().n_layer() as u64;
    let mut session = engine.new_session().unwrap();
    let prompt: Vec<u32> = (0..20u32).map(|i| 2 + (i * 37) % 590).collect();
    let params = GenerateParams {
        max_tokens: 5,
        sampling: SamplingParams::greedy(),
        ignore_eos: true,
        ..GenerateParams::default()
    };
    let g = engine
        .generate(
            &mut session,
            &prompt,
            &params,
            &AtomicBool::new(false),
            &mut |_| {},
        )
        .unwrap();
    let steps = g.stats.generated_tokens as u64 - 1; // the first token comes from the prefill
    let calls = |lines: &[engine::backend::OpTime], op: &str| -> u64 {
        lines
            .iter()
            .filter(|l| l.op.starts_with(op))
            .map(|l| l.calls)
            .sum()
    };
    let (prefill, decode) = (&g.stats.prefill_profile, &g.stats.decode_profile);
    // attention once per layer and pass; the prefill is one pass of 20 tokens
    assert_eq!(calls(prefill, "attention"), layers, "{prefill:?}");
    assert_eq!(calls(decode, "attention"), layers * steps, "{decode:?}");
    // Q/K/V, output, gate/up and down: four matrix products per layer and pass
    assert_eq!(calls(decode, "matmul"), 4 * layers * steps, "{decode:?}");
    assert_eq!(calls(decode, "logits"), steps, "{decode:?}");
    // each line counts what the op counter counts, and the lines come most time first
    let total_calls: u64 = decode.iter().map(|l| l.calls).sum();
    assert_eq!(total_calls, g.stats.decode_ops);
    assert!(decode.windows(2).all(|w| w[0].seconds >= w[1].seconds));
    assert!(
        decode.iter().any(|l| l.op.starts_with("matmul q8_0 ")),
        "{decode:?}"
    );
}
