//! The fuzzer's KV snapshot seed (`fuzz/corpus/snapshot_restore/`) is a snapshot this engine
//! restores, of the model the fuzz target loads: when the format or the fixture changes, this
//! test fails until the seed is made again (`COMPANION_WRITE_FUZZ_SEEDS=1 cargo test --release
//! -p companion-engine --test engine -- snapshot_seed::`). It also keeps one frozen snapshot
//! restoring. The fuzz corpora are replayed on every test run too
//! (`tests/tests/end_to_end/fuzz_corpus.rs`).

use std::path::PathBuf;

use engine::{Engine, EngineConfig};

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/gemma-family/gemma3-gqa.q8_0.gguf")
}

fn seed() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus/snapshot_restore/gemma3-gqa-40-tokens.cmpkv")
}

#[test]
fn the_fuzz_seed_is_a_snapshot_this_engine_restores() {
    // the fuzz target's engine: same model, context and chunk
    let engine = Engine::load(EngineConfig {
        model_path: fixture(),
        context: 256,
        prefill_chunk: 64,
        warm_up: false,
        ..EngineConfig::default()
    })
    .unwrap();
    // 40 tokens: more than the 24-token window, so the sliding layers' rings have wrapped
    let ids: Vec<u32> = (0..40u32).map(|i| 2 + (i * 37) % 590).collect();
    if std::env::var_os("COMPANION_WRITE_FUZZ_SEEDS").is_some() {
        let mut s = engine.new_session().unwrap();
        s.prefill(engine.model(), &ids).unwrap();
        std::fs::write(seed(), engine.snapshot(&s).unwrap()).unwrap();
    }
    let bytes = std::fs::read(seed()).expect("the seed exists (see the module docs to make it)");
    let mut restored = engine.new_session().unwrap();
    engine.restore(&mut restored, &bytes).unwrap();
    assert_eq!(restored.tokens(), &ids[..]);
}
