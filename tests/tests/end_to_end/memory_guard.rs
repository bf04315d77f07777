//! The memory guard on the real model: a simulated small device gets a smaller context and a
//! notice saying so; one too small for any useful context is refused with
//! `insufficient_memory`, before anything is loaded. (The estimate against measured peak RSS
//! is in `cli/tests/memory.rs`, which runs the binary as a child process.)

use companion_tests::model_path;
use engine::gguf::ModelFile;
use engine::memory_guard::{MIN_USEFUL_CONTEXT, MemoryEstimate, ModelShape};
use engine::{Engine, EngineConfig};

fn load(context: usize, available: u64) -> engine::Result<Engine> {
    Engine::load(EngineConfig {
        model_path: model_path(),
        context,
        warm_up: false,
        available_memory_bytes: Some(available),
        ..EngineConfig::default()
    })
}

fn estimate(context: usize) -> u64 {
    let file = ModelFile::open(model_path()).unwrap();
    MemoryEstimate::new(&ModelShape::of_file(&file).unwrap(), context, 512).total_bytes
}

#[test]
fn a_small_budget_gets_a_smaller_context_and_a_message() {
    let engine = load(8192, estimate(2048) + 4096).unwrap();
    assert_eq!(engine.context(), 2048);
    let notice = engine.memory_notice().expect("a notice");
    assert!(notice.contains("lowered from 8192 to 2048"), "{notice}");
    // a session made afterwards holds that context, and works
    let session = engine.new_session().unwrap();
    assert_eq!(session.context(), 2048);

    let roomy = load(8192, estimate(8192)).unwrap();
    assert_eq!(roomy.context(), 8192);
    assert_eq!(roomy.memory_notice(), None);
}

#[test]
fn too_little_memory_is_refused_clearly() {
    let err = load(4096, estimate(MIN_USEFUL_CONTEXT) - 1)
        .err()
        .expect("refused");
    assert_eq!(err.code(), "insufficient_memory");
    let text = err.to_string();
    assert!(
        text.contains("not enough memory") && text.contains("512 tokens"),
        "{text}"
    );
}

/// Gemma 4's per-layer token embeddings are read a row per token, so they stay on disk and
/// are not counted as resident: on the real-shape E2B file (3.4 GB) this took the estimate
/// from 2.07× the measured peak RSS to 0.97×.
#[test]
fn gathered_tables_are_not_counted_as_resident() {
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/gemma-family");
    let ple = ModelFile::open(fixtures.join("gemma4-ple-shared.q4_k_m.gguf")).unwrap();
    let shape = ModelShape::of_file(&ple).unwrap();
    let table = ple
        .tensor_data_bytes("per_layer_token_embd.weight")
        .expect("an E-series file has the table");
    assert_eq!(shape.gathered_bytes, table);
    let estimate = MemoryEstimate::new(&shape, 1024, 512);
    assert_eq!(estimate.weights_bytes, ple.file_size() - table);

    // a model whose output is its token embeddings reads the whole table at every step
    let tied = ModelFile::open(model_path()).unwrap();
    assert_eq!(ModelShape::of_file(&tied).unwrap().gathered_bytes, 0);
}
