//! Companion's inference engine: Gemma models from quantized GGUF files on candle, offline.
//!
//! - [`gguf`]: open and validate a GGUF file;
//! - [`arch`]: the architecture description read from it (Gemma 1 to 4, per-layer facts);
//! - [`tokenizer`]: a `tokenizers::Tokenizer` built from the GGUF vocabulary, UTF-8-safe
//!   streaming, Gemma's chat template;
//! - [`cpu`]: our CPU kernels — block formats, activation quantization, work schedules, and
//!   per-ISA inner loops in one table detected at load;
//! - [`model`]: the one Gemma forward pass over [`backend`]'s interface (numerics follow
//!   llama.cpp `src/models/gemma*.cpp`), on our kernels or candle's;
//! - [`kv_cache`] (its contract, layout and budget), [`session`], [`snapshot`]: the
//!   per-conversation state, its size under a memory budget, and its versioned snapshots;
//! - [`draft`]: prefill while the user types;
//! - [`sampling`], [`generate`]: the sampler chain and the generation loop;
//! - [`memory_guard`]: the memory estimate before loading, and the context that fits;
//! - [`thermal`]: thermal state sources, the governor and the decode pacer;
//! - [`runtime`]: the engine as an actor on its own thread behind an [`EngineHandle`].

pub mod arch;
pub mod backend;
pub mod cpu;
pub mod device;
pub mod draft;
pub mod engine;
pub mod error;
pub mod generate;
pub mod gguf;
pub mod inspect;
pub mod kv_cache;
pub mod memory_guard;
pub mod model;
pub mod runtime;
pub mod sampling;
pub mod session;
pub mod snapshot;
pub mod speculate;
pub mod thermal;
pub mod tokenizer;
pub mod vision;

pub use arch::{Family, ModelArch, Tuning};
pub use backend::{BackendChoice, BackendKind};
pub use device::DeviceChoice;
pub use draft::DraftOutcome;
pub use engine::{AssistantInfo, Engine, EngineConfig, ModelInfo, ProjectorInfo, ScoredPosition};
pub use error::{Error, Result};
pub use generate::{GenerateParams, Generation, GenerationStats, StopReason};
pub use inspect::{
    ModelFacts, inspect_assistant, inspect_model, inspect_projector, is_assistant_file,
    is_projector_file,
};
pub use kv_cache::PAGE_SIZE;
pub use memory_guard::MemoryRelief;
pub use model::{Hidden, Model};
pub use runtime::{
    EngineHandle, Event, GenerateOptions, GenerationHandle, Prompt, ScratchSession, SessionId,
};
pub use sampling::{ConstraintError, SamplingParams, TokenConstraint};
pub use session::{Session, SessionConfig};
pub use speculate::Speculation;
pub use speculate::mtp::{DraftScore, ScoredChain};
pub use thermal::{ThermalConfig, ThermalNotice, ThermalState};
pub use tokenizer::{ChatMessage, GemmaTokenizer, Role};

/// Where the default model lives when `COMPANION_MODEL` is not set:
/// `$XDG_CACHE_HOME/companion/models/gemma-3-270m-q4_k_m.gguf` (`~/.cache/...` on Linux,
/// `~/Library/Caches/...` on macOS). `scripts/fetch-model` puts it there.
pub fn default_model_path() -> std::path::PathBuf {
    if let Some(p) = std::env::var_os("COMPANION_MODEL").filter(|p| !p.is_empty()) {
        return p.into();
    }
    models_dir().join(DEFAULT_MODEL_FILE)
}

/// The models directory: `$XDG_CACHE_HOME/companion/models` (`~/.cache/...` on Linux,
/// `~/Library/Caches/...` on macOS, Application Support in the iOS app's container), where the
/// default model is fetched and the app copies the models it imports.
pub fn models_dir() -> std::path::PathBuf {
    // iOS may purge Caches when space runs low: a model the user imported must stay, so it
    // lives in Application Support (kept out of iCloud backup by the app)
    if cfg!(target_os = "ios")
        && let Some(home) = std::env::var_os("HOME")
    {
        return std::path::PathBuf::from(home).join("Library/Application Support/Companion/models");
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|p| !p.is_empty())
        .map(std::path::PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| {
                let home = std::path::PathBuf::from(h);
                if cfg!(target_os = "macos") {
                    home.join("Library/Caches")
                } else {
                    home.join(".cache")
                }
            })
        })
        .unwrap_or_else(|| std::path::PathBuf::from("."));
    cache.join("companion").join("models")
}

pub const DEFAULT_MODEL_FILE: &str = "gemma-3-270m-q4_k_m.gguf";
pub const DEFAULT_MODEL_SHA256: &str =
    "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818";
