//! Options shared by every command that loads the model.

use std::path::PathBuf;
use std::sync::OnceLock;

use anyhow::Result;
use clap::Args;
use engine::{DeviceChoice, EngineConfig, EngineHandle};

#[derive(Args, Debug, Clone)]
pub struct ModelOptions {
    /// Path to a Gemma GGUF file [default: $COMPANION_MODEL, else the library's model in use, else the fetched default model]
    #[arg(long, value_name = "PATH")]
    pub model: Option<PathBuf>,
    /// Backend: cpu, cuda or metal (falls back to cpu with a notice when unavailable), or
    /// metal-emulated (Metal's decode kernels on the emulated device: builds with
    /// --features metal-emulated)
    #[arg(long, default_value = "cpu", value_name = "DEVICE")]
    pub device: DeviceChoice,
    /// Forward-pass implementation: auto (Companion's own kernels on the CPU, candle on a GPU),
    /// host (the own kernels) or candle (candle's tensors, also on the CPU: the GPU path's
    /// model, for comparing numerics)
    #[arg(long, default_value = "auto", value_name = "BACKEND")]
    pub backend: engine::BackendChoice,
    /// Compute threads [default: physical cores]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub threads: Option<u32>,
    /// Context size in tokens
    #[arg(long, default_value_t = 4096, value_name = "TOKENS", value_parser = clap::value_parser!(u32).range(2..=131072))]
    pub context: u32,
    /// Decode rate when the device is warm (thermal state fair), as a fraction of full speed
    #[arg(long, default_value_t = 0.7, value_name = "F")]
    pub fair_rate: f64,
    /// Decode rate when the device is hot (serious), as a fraction of full speed
    #[arg(long, default_value_t = 0.4, value_name = "F")]
    pub serious_rate: f64,
    /// How often to read the thermal state, in milliseconds
    #[arg(long, default_value_t = 2000, value_name = "MS", value_parser = clap::value_parser!(u64).range(1..))]
    pub thermal_interval: u64,
    /// A Gemma 4 multi-token-prediction assistant (a `gemma4-assistant` GGUF) to draft for the
    /// model (--speculate mtp, and auto's choice when one is loaded) [default: the one the
    /// library pairs with the model, if any]
    #[arg(long, value_name = "PATH")]
    pub assistant: Option<PathBuf>,
    /// A vision projector (an `mmproj` GGUF, Gemma 3's) to load beside the model, for
    /// pictures (`generate --image`) [default: the one the library pairs with the model, if
    /// any]
    #[arg(long, value_name = "PATH")]
    pub mmproj: Option<PathBuf>,
}

/// The database whose model library picks the model when neither `--model` nor
/// `COMPANION_MODEL` does: the one the command works on (`main` sets it once).
static LIBRARY_DATABASE: OnceLock<PathBuf> = OnceLock::new();
/// The model the library chose, looked up once per process.
static LIBRARY_MODEL: OnceLock<Option<PathBuf>> = OnceLock::new();

pub fn set_library_database(db: PathBuf) {
    let _ = LIBRARY_DATABASE.set(db);
}

/// The file of `pairing` the library's database pairs with `model`, if any.
fn library_paired(pairing: memory::Pairing, model: &std::path::Path) -> Option<PathBuf> {
    let db = LIBRARY_DATABASE
        .get()
        .cloned()
        .unwrap_or_else(memory::default_database_path);
    crate::commands::models::library_paired(&db, pairing, model)
}

impl ModelOptions {
    /// `--model`, else `COMPANION_MODEL`, else the model in use in the library (`companion
    /// models use`), else the fetched default model.
    pub fn model_path(&self) -> PathBuf {
        if let Some(model) = &self.model {
            return model.clone();
        }
        if std::env::var_os("COMPANION_MODEL").is_some_and(|p| !p.is_empty()) {
            return engine::default_model_path();
        }
        LIBRARY_MODEL
            .get_or_init(|| {
                let db = LIBRARY_DATABASE
                    .get()
                    .cloned()
                    .unwrap_or_else(memory::default_database_path);
                crate::commands::models::library_model(&db)
            })
            .clone()
            .unwrap_or_else(engine::default_model_path)
    }

    /// `--assistant`, else the assistant the library pairs with the model.
    pub fn assistant_path(&self, model: &std::path::Path) -> Option<PathBuf> {
        self.assistant
            .clone()
            .or_else(|| library_paired(memory::Pairing::Assistant, model))
    }

    /// `--mmproj`, else the vision projector the library pairs with the model.
    pub fn projector_path(&self, model: &std::path::Path) -> Option<PathBuf> {
        self.mmproj
            .clone()
            .or_else(|| library_paired(memory::Pairing::Projector, model))
    }

    pub fn engine_config(&self) -> EngineConfig {
        let model_path = self.model_path();
        EngineConfig {
            assistant_path: self.assistant_path(&model_path),
            projector_path: self.projector_path(&model_path),
            model_path,
            device: self.device,
            backend: self.backend,
            context: self.context as usize,
            thermal: engine::ThermalConfig {
                fair_rate: self.fair_rate,
                serious_rate: self.serious_rate,
                sample_interval_ms: self.thermal_interval,
                ..engine::ThermalConfig::default()
            },
            ..EngineConfig::default()
        }
    }

    /// Set threads, then load the model on the engine thread.
    pub fn spawn(&self) -> Result<EngineHandle> {
        self.spawn_with(self.engine_config())
    }

    /// [`Self::spawn`] with a configuration the caller adjusted.
    pub fn spawn_with(&self, config: EngineConfig) -> Result<EngineHandle> {
        engine::device::set_threads(
            self.threads
                .map(|t| t as usize)
                .unwrap_or_else(engine::device::physical_cores),
        );
        let handle = EngineHandle::spawn(config)?;
        if let Some(notice) = handle.device_notice() {
            eprintln!("notice: {notice}");
        }
        if let Some(notice) = handle.memory_notice() {
            eprintln!("notice: {notice}");
        }
        Ok(handle)
    }
}

/// For commands that expect the model to follow what it is told (chat, the agent): on a base
/// model, the one-sentence notice that it continues text instead (`summarize` prints the same
/// once its job starts, so that a refused input stays one error line). `generate` and `score`
/// do not: continuing text is what they ask of a model.
pub fn say_if_base_model(handle: &EngineHandle) {
    if let Some(notice) = base_model_notice(handle) {
        eprintln!("notice: {notice}");
    }
}

/// The engine's base-model notice, with where a user of the command line gets another model.
pub fn base_model_notice(handle: &EngineHandle) -> Option<String> {
    let notice = handle.info().tuning_notice.clone()?;
    Some(format!(
        "{notice} Pass one with --model PATH, or import it with `companion models import PATH`."
    ))
}

/// Sampling flags shared by `generate` and `chat`.
#[derive(Args, Debug, Clone)]
pub struct SamplingOptions {
    /// Sampling temperature; 0 is greedy
    #[arg(long, default_value_t = 0.8)]
    pub temperature: f32,
    /// Keep the K most likely tokens (0: all)
    #[arg(long, default_value_t = 64)]
    pub top_k: usize,
    /// Keep the smallest set of tokens whose probability reaches P
    #[arg(long, default_value_t = 0.95)]
    pub top_p: f32,
    /// Drop tokens less likely than P times the most likely one
    #[arg(long, default_value_t = 0.05)]
    pub min_p: f32,
    /// Penalize tokens repeated in the last 64 tokens (1.0: off)
    #[arg(long, default_value_t = 1.0)]
    pub repeat_penalty: f32,
    /// Random seed (same seed and settings, same output)
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Stop after N tokens
    #[arg(long, default_value_t = 512, value_name = "N")]
    pub max_tokens: usize,
    /// Stop before this text (repeatable)
    #[arg(long = "stop", value_name = "TEXT")]
    pub stop: Vec<String>,
    #[command(flatten)]
    pub speculation: SpeculationOption,
}

/// `--speculate`, shared by every command that generates.
#[derive(Args, Debug, Clone)]
pub struct SpeculationOption {
    /// Speculative decoding, the same output either way: lookup (draft from the text so far
    /// and check the draft in one pass: faster where the reply repeats it), mtp (drafts from
    /// the model's Gemma 4 assistant, --assistant), auto (mtp when an assistant is loaded, else
    /// lookup) or off
    #[arg(long = "speculate", value_name = "MODE", default_value = "auto")]
    pub speculate: engine::Speculation,
}

impl SamplingOptions {
    pub fn params(&self) -> engine::GenerateParams {
        engine::GenerateParams {
            max_tokens: self.max_tokens,
            sampling: engine::SamplingParams {
                temperature: self.temperature,
                top_k: self.top_k,
                top_p: self.top_p,
                min_p: self.min_p,
                repetition_penalty: self.repeat_penalty,
                seed: self.seed,
                ..Default::default()
            },
            stop_strings: self.stop.clone(),
            ignore_eos: false,
            speculation: self.speculation.speculate,
        }
    }
}

/// Where the conversations live.
#[derive(Args, Debug, Clone)]
pub struct StoreOptions {
    /// The conversation database [default: $COMPANION_DB, else Companion's data directory]
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,
}

impl StoreOptions {
    /// Open the database; a corrupt file is moved aside, with a notice on stderr.
    pub fn open(&self) -> Result<memory::Store> {
        let path = self
            .db
            .clone()
            .unwrap_or_else(memory::default_database_path);
        let opened = memory::Store::open(&path)?;
        if let Some(recovery) = &opened.recovery {
            eprintln!("notice: {}", recovery.message());
        }
        Ok(opened.store)
    }
}

/// `--mcp-config FILE`: the tools of MCP servers beside the built-in ones.
#[derive(Args, Debug, Clone, Default)]
pub struct McpOptions {
    /// Also use the tools of the MCP servers in FILE: {"mcpServers": {NAME: {"command", "args",
    /// "env"} or {"url", "headers"}}}, as Claude Desktop, Jan and LM Studio write it
    #[arg(long = "mcp-config", value_name = "FILE")]
    pub mcp_config: Option<PathBuf>,
}

impl McpOptions {
    /// Starts the servers of `--mcp-config` (none without it). A server that fails is said on
    /// stderr in one line, and the others are used.
    pub fn start(&self) -> Result<Option<mcp::McpHub>> {
        let Some(path) = &self.mcp_config else {
            return Ok(None);
        };
        let config = mcp::McpConfig::load(path)?;
        let hub = mcp::McpHub::start(&config)?;
        for server in hub.status() {
            match &server.message {
                // a failure's sentence names its server
                Some(message) if server.state == "failed" => eprintln!("{message}"),
                Some(message) => eprintln!("MCP server \"{}\": {message}", server.name),
                None => {}
            }
            for notice in &server.notices {
                eprintln!("MCP server \"{}\": {notice}", server.name);
            }
        }
        Ok(Some(hub))
    }
}
