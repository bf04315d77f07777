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
    MemoryEstimate::new(&ModelShape::of_file(&file), context, 512).total_bytes
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
