//! Shared helpers for the end-to-end tests, which run on the real default model.
//!
//! The model must be present (`scripts/fetch-model`, which `.ci/run` calls): a missing model
//! fails the tests with that instruction rather than skipping them.

use std::path::PathBuf;

use engine::{Engine, EngineConfig};
use serde::Deserialize;

pub fn model_path() -> PathBuf {
    let path = engine::default_model_path();
    assert!(
        path.is_file(),
        "the default model is missing at {}: run scripts/fetch-model first",
        path.display()
    );
    path
}

pub fn load_engine(context: usize, prefill_chunk: usize) -> Engine {
    Engine::load(EngineConfig {
        model_path: model_path(),
        context,
        prefill_chunk,
        warm_up: false,
        ..EngineConfig::default()
    })
    .expect("the default model loads")
}

#[derive(Debug, Deserialize)]
pub struct Reference {
    pub model_sha256: String,
    pub tokenize: Vec<TokenizeCase>,
    pub generate: Vec<GenerateCase>,
}

#[derive(Debug, Deserialize)]
pub struct TokenizeCase {
    pub text: String,
    pub ids: Vec<u32>,
    pub ids_with_bos: Vec<u32>,
}

#[derive(Debug, Deserialize)]
pub struct GenerateCase {
    pub prompt: String,
    pub prompt_ids: Vec<u32>,
    pub ids: Vec<u32>,
    pub text: String,
    pub steps: Vec<Step>,
}

#[derive(Debug, Deserialize)]
pub struct Step {
    pub id: u32,
    pub logprob: f32,
    pub top: Vec<(u32, f32)>,
}

impl Step {
    /// llama.cpp's own margin between its two most likely tokens at this step.
    pub fn margin(&self) -> f32 {
        self.top[0].1 - self.top[1].1
    }
}

/// llama.cpp's tokenizations, greedy continuations and top-5 log-probs for the default model
/// (a copy of shared/reference/llamacpp-gemma3-270m.json).
pub fn reference() -> Reference {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fixtures/llamacpp-gemma3-270m.json"
    );
    let text = std::fs::read_to_string(path).expect("reference file");
    serde_json::from_str(&text).expect("reference JSON")
}

/// An engine on its own thread (the app's and the CLI's shape), without warm-up.
pub fn spawn_engine(context: usize) -> engine::EngineHandle {
    engine::EngineHandle::spawn(EngineConfig {
        model_path: model_path(),
        context,
        warm_up: false,
        ..EngineConfig::default()
    })
    .expect("the default model loads")
}
