//! `Engine`: an immutable loaded model (weights, tokenizer, device) that sessions run on, as in
//! llama.cpp where the model is shared and the context is the mutable part.

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Instant;

use candle_core::Device;
use serde::{Deserialize, Serialize};

use crate::arch::ModelArch;
use crate::backend::{BackendChoice, BackendKind};
use crate::device::{DeviceChoice, select_device};
use crate::error::{Error, Result};
use crate::gguf::ModelFile;
use crate::kv_cache::KvCache;
use crate::kv_cache::{KvShape, context_for_budget};
use crate::memory_guard::{MemoryFit, ModelShape, fit_context, system_memory};
use crate::model::assistant::Assistant;
use crate::model::{Hidden, Model, log_softmax};
use crate::session::Session;
use crate::session::SessionConfig;
use crate::thermal::ThermalConfig;
use crate::tokenizer::GemmaTokenizer;
use crate::vision::VisionEncoder;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct EngineConfig {
    pub model_path: PathBuf,
    pub device: DeviceChoice,
    /// Which forward-pass implementation runs (`auto`: our kernels on the CPU, candle on a GPU;
    /// `candle` on the CPU runs the GPU path's model there, for tests).
    pub backend: BackendChoice,
    /// Tokens a session can hold (at most: see `memory_budget_bytes`).
    pub context: usize,
    /// Largest number of tokens processed in one forward step during prefill.
    pub prefill_chunk: usize,
    /// Bytes a session's KV cache may take at its full context. When the requested context
    /// does not fit, sessions get the largest context, in whole pages, that does.
    pub memory_budget_bytes: Option<u64>,
    /// Tokens prefilled between checks for a newer draft while the user types: small, so that
    /// a keystroke supersedes a stale draft promptly.
    pub draft_chunk: usize,
    /// Run a short forward pass at load so the first request is as fast as the next.
    pub warm_up: bool,
    /// Thermal pacing (see [`crate::thermal`]); the engine actor samples and obeys it.
    pub thermal: ThermalConfig,
    /// Pretend the device can spare only this many bytes (tests, simulating a phone); unset:
    /// `$COMPANION_AVAILABLE_MEMORY`, else what the OS reports. See [`crate::memory_guard`].
    pub available_memory_bytes: Option<u64>,
    /// A Gemma 4 multi-token-prediction assistant to load beside the model, for
    /// `Speculation::Mtp` (`model::assistant`); refused in one sentence when it does not fit
    /// the model.
    pub assistant_path: Option<PathBuf>,
    /// A vision projector (`mmproj` GGUF) to load beside the model, for prompts with pictures
    /// (`crate::vision`); refused in one sentence when it does not fit the model.
    pub projector_path: Option<PathBuf>,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            model_path: PathBuf::new(),
            device: DeviceChoice::Cpu,
            backend: BackendChoice::Auto,
            context: 4096,
            prefill_chunk: 512,
            memory_budget_bytes: None,
            draft_chunk: 32,
            warm_up: true,
            thermal: ThermalConfig::default(),
            available_memory_bytes: None,
            assistant_path: None,
            projector_path: None,
        }
    }
}

/// What the UI and `companion` show about the loaded model.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelInfo {
    pub path: PathBuf,
    pub name: Option<String>,
    pub architecture: String,
    /// Base (continues text) or instruction-tuned (answers).
    pub tuning: crate::arch::Tuning,
    /// For a base model, the sentence the user sees before chatting with it.
    pub tuning_notice: Option<String>,
    /// The generation as people name it ("Gemma 3").
    pub family: String,
    /// Layers, sliding window, KV sharing and width in one line.
    pub description: String,
    pub parameters: u64,
    pub quantization: String,
    pub file_bytes: u64,
    pub context: usize,
    pub training_context: usize,
    pub device: DeviceChoice,
    /// The forward pass's implementation: `host` (our kernels) or `candle`.
    pub backend: BackendKind,
    pub load_seconds: f64,
    /// K and V bytes per token of context, averaged over the session's full context.
    pub kv_bytes_per_token: usize,
    /// The memory guard's estimate and the context it allowed.
    pub memory: MemoryFit,
    /// The multi-token-prediction assistant loaded beside the model, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assistant: Option<AssistantInfo>,
    /// The vision projector loaded beside the model, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub projector: Option<ProjectorInfo>,
}

/// What is shown about a loaded vision projector.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProjectorInfo {
    pub path: PathBuf,
    /// The tower and what a picture becomes, in one line.
    pub description: String,
    pub tokens_per_image: usize,
    pub file_bytes: u64,
    /// What the encoder works in while it reads a picture, beyond its weights
    /// ([`crate::vision::VisionDescription::activation_bytes`]).
    pub working_bytes: u64,
}

/// What is shown about a loaded assistant.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AssistantInfo {
    pub path: PathBuf,
    /// Layers, width and what they read in one line.
    pub description: String,
    pub parameters: u64,
    pub file_bytes: u64,
}

/// One scored position: the distribution after reading `ids[..pos]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScoredPosition {
    pub pos: usize,
    /// The five most likely next tokens with their natural-log probabilities.
    pub top: Vec<(u32, f32)>,
    /// Log-probability of `ids[pos]`.
    pub logprob: f32,
}

pub struct Engine {
    pub(crate) model: Model,
    /// Gemma 4's multi-token-prediction assistant, when one was loaded (`model::assistant`).
    assistant: Option<Assistant>,
    /// The vision projector, when one was loaded (`crate::vision`).
    vision: Option<VisionEncoder>,
    tokenizer: GemmaTokenizer,
    config: EngineConfig,
    info: ModelInfo,
    /// Notice when the requested device was unavailable.
    device_notice: Option<String>,
    /// The GGUF file's sha256, computed on first use (snapshots need it; loading does not).
    model_sha256: OnceLock<[u8; 32]>,
}

/// The backend under the emulated Metal device: candle's model on the CPU device (its KV cache
/// and tables are tensors the Metal kernels read), or an error in a build without the device.
fn emulated_metal_backend(choice: BackendChoice) -> Result<BackendKind> {
    if !cfg!(feature = "metal-emulated") {
        return Err(Error::InvalidArgument(
            "this build has no emulated Metal device (build with --features metal-emulated)".into(),
        ));
    }
    match choice {
        BackendChoice::Host => Err(Error::InvalidArgument(
            "the emulated Metal device runs with the candle backend, not host".into(),
        )),
        BackendChoice::Auto | BackendChoice::Candle => Ok(BackendKind::Candle),
    }
}

impl Engine {
    pub fn load(config: EngineConfig) -> Result<Self> {
        let t0 = Instant::now();
        if config.context < 2 {
            return Err(Error::InvalidArgument(
                "the context must hold at least 2 tokens".into(),
            ));
        }
        if config.prefill_chunk == 0 || config.draft_chunk == 0 {
            return Err(Error::InvalidArgument(
                "the prefill and draft chunks must be at least 1 token".into(),
            ));
        }
        config.thermal.validate()?;
        #[allow(unused_mut)] // the emulated Metal device, when built, may add its notice
        let (device, used, mut device_notice) = select_device(config.device);
        let backend = if used == DeviceChoice::MetalEmulated {
            emulated_metal_backend(config.backend)?
        } else {
            config.backend.resolve(&device)
        };
        let mut file = ModelFile::open(&config.model_path)?;
        // an assistant's weights take their share of memory beside the model's
        let assistant_file = match &config.assistant_path {
            Some(path) => Some(ModelFile::open(path)?),
            None => None,
        };
        if let Some(a) = &assistant_file {
            // one that does not fit is refused before any weight is read
            ModelArch::assistant_of(a, &ModelArch::of(&file)?)?;
        }
        let projector_file = match &config.projector_path {
            Some(path) => Some(ModelFile::open(path)?),
            None => None,
        };
        // both take their share of memory beside the model's, the projector with what its
        // encoder works in while it reads a picture
        let projector_working = match &projector_file {
            Some(file) => crate::vision::VisionDescription::of(file)?.activation_bytes(),
            None => 0,
        };
        let assistant_bytes = assistant_file.as_ref().map_or(0, ModelFile::file_size)
            + projector_file.as_ref().map_or(0, ModelFile::file_size)
            + projector_working;
        // Decided from the header, before any weight or cache is touched.
        let memory = fit_context(
            &ModelShape::of_file(&file)?,
            config.context,
            config.prefill_chunk,
            system_memory(config.available_memory_bytes)
                .available_bytes
                .map(|a| a.saturating_sub(assistant_bytes)),
        )?;
        if let Some(notice) = &memory.notice {
            tracing::warn!("{notice}");
        }
        let tokenizer = GemmaTokenizer::from_gguf(&file)?;
        #[allow(unused_mut)] // the emulated Metal device, when built, sets its decoder
        let mut model = Model::load(&mut file, memory.context, &device, backend)?;
        #[cfg(feature = "metal-emulated")]
        if used == DeviceChoice::MetalEmulated && !model.use_emulated_metal(&file)? {
            device_notice = Some(
                "Metal's decode kernels do not cover this model (per-layer embeddings, or a shape or \
                 weight format they lack): its decode steps \
                 run on candle's CPU path, not on the emulated Metal device"
                    .into(),
            );
        }
        let (assistant, assistant_info) = match (assistant_file, &config.assistant_path) {
            (Some(mut file), Some(path)) => {
                let assistant = Assistant::load(&mut file, &model)?;
                let a = assistant.arch();
                let info = AssistantInfo {
                    path: path.clone(),
                    description: format!(
                        "Gemma 4 assistant, {} layers reading the model's KV cache, {} wide",
                        a.n_layer(),
                        a.n_embd
                    ),
                    parameters: a.parameter_count(),
                    file_bytes: file.file_size(),
                };
                (Some(assistant), Some(info))
            }
            _ => (None, None),
        };
        let (vision, projector_info) = match projector_file {
            Some(mut file) => {
                let vision = VisionEncoder::load_file(&mut file, &model)?;
                let d = vision.description();
                let info = ProjectorInfo {
                    path: file.path().to_path_buf(),
                    description: format!(
                        "Gemma 3 vision tower, {} layers, {} wide; a picture is {} px, {} tokens",
                        d.n_layer,
                        d.n_embd,
                        d.image_size,
                        d.tokens_per_image()
                    ),
                    tokens_per_image: d.tokens_per_image(),
                    file_bytes: file.file_size(),
                    working_bytes: d.activation_bytes(),
                };
                (Some(vision), Some(info))
            }
            None => (None, None),
        };
        let weights_seconds = t0.elapsed().as_secs_f64();
        let reduced = config.thermal.reduced_threads(model.threads());
        let model = model.with_reduced_threads(reduced)?;
        let arch: &ModelArch = model.arch();
        // Decided here so that a budget too small for even one page fails the load clearly.
        let kv_shape = KvShape::of(arch);
        let context = context_for_budget(
            &kv_shape,
            memory.context,
            model.max_context(),
            config.prefill_chunk,
            config.memory_budget_bytes,
        )?;
        let info = ModelInfo {
            path: config.model_path.clone(),
            name: arch.name.clone(),
            architecture: arch.family.as_str().to_string(),
            tuning: arch.tuning,
            tuning_notice: arch.tuning.notice().map(str::to_string),
            family: arch.family.display_name().to_string(),
            description: arch.summary(),
            parameters: arch.parameter_count(),
            quantization: file.quantization_label(),
            file_bytes: file.file_size(),
            context,
            training_context: arch.context_length,
            device: used,
            backend,
            load_seconds: 0.0,
            // the formula `KvCache::bytes_per_token` reports, without allocating a session
            kv_bytes_per_token: (kv_shape.full_bytes(context, config.prefill_chunk)
                / context as u64) as usize,
            memory,
            assistant: assistant_info,
            projector: projector_info,
        };
        let mut engine = Engine {
            model,
            assistant,
            vision,
            tokenizer,
            config,
            info,
            device_notice,
            model_sha256: OnceLock::new(),
        };
        let warm_up_started = t0.elapsed().as_secs_f64();
        if engine.config.warm_up {
            engine.warm_up()?;
        }
        engine.info.load_seconds = t0.elapsed().as_secs_f64();
        if backend == BackendKind::Host {
            // after the warm-up, which pages every multiplied weight in: moving pages takes
            // the address space's write lock, which would stall the warm-up's page faults
            file.move_multiplied_to_huge_pages();
        }
        // the phases, for a slow start: device and weights (on CUDA the context, cuBLAS and
        // the fused kernels' module), then the warm-up (candle's kernels' modules)
        tracing::info!(
            seconds = engine.info.load_seconds,
            weights_seconds,
            warm_up_seconds = engine.info.load_seconds - warm_up_started,
            "model loaded"
        );
        Ok(engine)
    }

    /// One short prefill and one decode step: sizes thread pools and scratch buffers so the
    /// first real request runs at full speed.
    fn warm_up(&self) -> Result<()> {
        let mut session = Session::new(KvCache::new(
            self.model.arch(),
            8,
            8,
            self.model.kv_storage(),
        )?);
        let bos = self.tokenizer.bos_id();
        session.prefill(&self.model, &[bos, bos])?;
        let h = session.prefill(&self.model, &[bos])?;
        self.logits_vec(&h)?;
        Ok(())
    }

    /// The multi-token-prediction assistant loaded beside the model, if any.
    pub(crate) fn assistant(&self) -> Option<&Assistant> {
        self.assistant.as_ref()
    }

    /// The vision projector loaded beside the model, if any.
    pub fn vision(&self) -> Option<&VisionEncoder> {
        self.vision.as_ref()
    }

    pub fn tokenizer(&self) -> &GemmaTokenizer {
        &self.tokenizer
    }

    pub fn info(&self) -> &ModelInfo {
        &self.info
    }

    /// The architecture description of the loaded model.
    pub fn arch(&self) -> &ModelArch {
        self.model.arch()
    }

    pub fn device(&self) -> &Device {
        self.model.device()
    }

    pub fn device_notice(&self) -> Option<&str> {
        self.device_notice.as_deref()
    }

    /// Set when the memory guard lowered the context to fit the device.
    pub fn memory_notice(&self) -> Option<&str> {
        self.info.memory.notice.as_deref()
    }

    /// The context of a session made by [`Self::new_session`] (the configured one, lowered to
    /// fit the memory budget).
    pub fn context(&self) -> usize {
        self.info.context
    }

    pub fn model(&self) -> &Model {
        &self.model
    }

    pub(crate) fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// Sessions made from now on hold at most `context` tokens (memory was relieved).
    pub(crate) fn set_context(&mut self, context: usize) {
        self.config.context = context;
        self.info.context = context;
        self.info.kv_bytes_per_token = (KvShape::of(self.model.arch())
            .full_bytes(context, self.config.prefill_chunk)
            / context.max(1) as u64) as usize;
    }

    /// Tokens prefilled between checks for a newer draft.
    pub fn draft_chunk(&self) -> usize {
        self.config.draft_chunk
    }

    /// The session size this engine's configuration asks for.
    pub fn session_config(&self) -> SessionConfig {
        SessionConfig {
            context: self.config.context,
            prefill_chunk: self.config.prefill_chunk,
            memory_budget_bytes: self.config.memory_budget_bytes,
        }
    }

    /// A new empty session sized by the engine's configuration.
    pub fn new_session(&self) -> Result<Session> {
        self.new_session_with(self.session_config())
    }

    /// A new empty session whose context is the largest that `config` allows (see
    /// [`context_for_budget`]); fails when its budget cannot hold even one page.
    pub fn new_session_with(&self, config: SessionConfig) -> Result<Session> {
        if config.prefill_chunk == 0 {
            return Err(Error::InvalidArgument(
                "the prefill chunk must be at least 1 token".into(),
            ));
        }
        let context = context_for_budget(
            &KvShape::of(self.model.arch()),
            config.context,
            self.model.max_context(),
            config.prefill_chunk,
            config.memory_budget_bytes,
        )?;
        Ok(Session::new(KvCache::new(
            self.model.arch(),
            context,
            config.prefill_chunk,
            self.model.kv_storage(),
        )?))
    }

    /// The sha256 of the model file, read once on first use (about half a second for the
    /// default model) and then remembered. It names the weights in KV snapshots.
    pub fn model_sha256(&self) -> Result<[u8; 32]> {
        if let Some(sha) = self.model_sha256.get() {
            return Ok(*sha);
        }
        let sha = crate::snapshot::file_sha256(&self.config.model_path)?;
        Ok(*self.model_sha256.get_or_init(|| sha))
    }

    /// Next-token logits of the last hidden state as a host vector.
    pub fn logits_vec(&self, hidden: &Hidden) -> Result<Vec<f32>> {
        let last = if hidden.rows() == 1 {
            hidden.clone()
        } else {
            hidden.row(hidden.rows().saturating_sub(1))?
        };
        self.model
            .logits(&last)?
            .pop()
            .ok_or_else(|| Error::InvalidArgument("no hidden state to score".into()))
    }

    /// Logits of every hidden state, `[rows][n_vocab]`.
    pub fn logits_rows(&self, hidden: &Hidden) -> Result<Vec<Vec<f32>>> {
        self.model.logits(hidden)
    }

    /// Teacher-forced scoring: for each position p in 1..n, the top-5 next tokens after
    /// `ids[..p]` and the log-probability of `ids[p]` (natural log, full softmax, no temperature).
    pub fn score(&self, ids: &[u32]) -> Result<Vec<ScoredPosition>> {
        if ids.len() < 2 {
            return Err(Error::InvalidArgument(
                "scoring needs at least two token ids".into(),
            ));
        }
        if ids.len() > self.context() {
            return Err(Error::PromptTooLong {
                tokens: ids.len(),
                context: self.context(),
            });
        }
        let mut session = self.new_session()?;
        let mut out = Vec::with_capacity(ids.len() - 1);
        // The prompt is prefilled in the session's own steps (as a prompt of this length is,
        // every row kept); 64 positions of 262k-vocabulary logits are 64 MiB, so the logits
        // are made in slices of that to bound memory.
        const SLICE: usize = 64;
        let hidden = session.prefill_all(&self.model, &ids[..ids.len() - 1])?;
        let mut offset = 0;
        while offset < hidden.rows() {
            let count = SLICE.min(hidden.rows() - offset);
            let rows: Vec<Vec<f32>> = self
                .model
                .logits(&hidden.rows_from(offset, count)?)?
                .iter()
                .map(|row| log_softmax(row))
                .collect();
            for (i, row) in rows.iter().enumerate() {
                let pos = offset + i + 1;
                let target = ids[pos] as usize;
                let logprob = *row.get(target).ok_or_else(|| {
                    Error::InvalidArgument(format!("token id {target} is outside the vocabulary"))
                })?;
                out.push(ScoredPosition {
                    pos,
                    top: top_k(row, 5),
                    logprob,
                });
            }
            offset += count;
        }
        Ok(out)
    }
}

impl Engine {
    /// Teacher-forced scoring through the decode step, the path generation takes: the
    /// prompt `ids[..from]` is prefilled, then every later token goes through one decode step
    /// (on CUDA, the fused kernels of `backend::cuda_decode`, read back here). Positions
    /// `from..n` as [`Self::score`] reports them.
    pub fn score_decoding(&self, ids: &[u32], from: usize) -> Result<Vec<ScoredPosition>> {
        if ids.len() < 2 || from == 0 || from >= ids.len() {
            return Err(Error::InvalidArgument(
                "decode scoring needs a prompt and at least one token after it".into(),
            ));
        }
        if ids.len() > self.context() {
            return Err(Error::PromptTooLong {
                tokens: ids.len(),
                context: self.context(),
            });
        }
        let scored = |pos: usize, logits: &[f32]| -> Result<ScoredPosition> {
            let row = log_softmax(logits);
            let target = ids[pos] as usize;
            let logprob = *row.get(target).ok_or_else(|| {
                Error::InvalidArgument(format!("token id {target} is outside the vocabulary"))
            })?;
            Ok(ScoredPosition {
                pos,
                top: top_k(&row, 5),
                logprob,
            })
        };
        let mut session = self.new_session()?;
        let (mut hidden, mut done) = (None, 0);
        for end in server_prompt_batches(from, self.model.arch().window.is_some()) {
            hidden = Some(session.prefill(&self.model, &ids[done..end])?);
            done = end;
        }
        let hidden = hidden.ok_or_else(|| Error::InvalidArgument("no prompt to score".into()))?;
        let mut out = vec![scored(from, &self.logits_vec(&hidden)?)?];
        let fused = self
            .model
            .fused_sampling(&crate::sampling::SamplingParams::greedy());
        if let Some(s) = &fused {
            self.model.fused_begin(&[], s, &mut || 0.5)?;
        }
        for (step, &id) in ids[from..ids.len() - 1].iter().enumerate() {
            let logits = match &fused {
                Some(s) => {
                    session.step_fused(&self.model, id, step, s, &mut || 0.5)?;
                    self.model.fused_logits()?
                }
                None => {
                    let hidden = session.step(&self.model, id)?;
                    self.logits_vec(&hidden)?
                }
            };
            out.push(scored(from + step + 1, &logits)?);
        }
        Ok(out)
    }
}

/// Where llama-server (b11434, `tools/server/server-context.cpp`) cuts a prompt of `n`
/// tokens into batches: for a model with a sliding window it processes the last 4 tokens, and
/// the 4 + n_ubatch (512) before the end, as batches of their own, to checkpoint the state
/// there (llama.cpp PR 20288). The llama.cpp references were recorded through llama-server,
/// and the batch a row is computed in decides its attention kernel (ggml's tiled kernel from 64
/// rows, `cpu::ggml_attention`), so scoring against them prefills a prompt the same way. The
/// ends of the batches, in order.
fn server_prompt_batches(n: usize, sliding: bool) -> Vec<usize> {
    const N_UBATCH: usize = 512;
    let mut ends: Vec<usize> = [4 + N_UBATCH, 4]
        .into_iter()
        .filter(|&offset| sliding && n > offset)
        .map(|offset| n - offset)
        .collect();
    ends.push(n);
    ends
}

/// The `k` largest entries (id, value), largest first.
pub fn top_k(row: &[f32], k: usize) -> Vec<(u32, f32)> {
    let mut best: Vec<(u32, f32)> = Vec::with_capacity(k + 1);
    for (i, &v) in row.iter().enumerate() {
        if best.len() < k || v > best[best.len() - 1].1 {
            let at = best.partition_point(|&(_, b)| b >= v);
            best.insert(at, (i as u32, v));
            best.truncate(k);
        }
    }
    best
}

#[cfg(test)]
mod tests {
    #[test]
    fn top_k_picks_largest_in_order() {
        let row = [0.1, 5.0, -1.0, 3.0, 4.0, 2.0];
        assert_eq!(super::top_k(&row, 3), vec![(1, 5.0), (4, 4.0), (3, 3.0)]);
        assert_eq!(super::top_k(&row, 10).len(), 6);
    }

    #[test]
    fn prompts_are_cut_where_llama_server_checkpoints_a_sliding_window_model() {
        use super::server_prompt_batches as cut;
        assert_eq!(cut(1118, true), vec![602, 1114, 1118]);
        assert_eq!(cut(300, true), vec![296, 300]);
        assert_eq!(cut(4, true), vec![4]);
        assert_eq!(cut(1118, false), vec![1118]);
    }
}
