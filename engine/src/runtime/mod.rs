//! The engine as an actor: it owns the model and every session on one dedicated OS thread
//! (forward passes block), and callers hold a cloneable [`EngineHandle`]. Requests name the
//! session they run on: the open conversation's is [`SessionId::MAIN`]; summaries, document
//! jobs and API requests open [`ScratchSession`]s of their own, so they never evict the
//! conversation's KV cache or its pending draft. Each request carries its own event channel
//! and cancel flag, as in mistral.rs's engine loop; nothing on the caller's side ever waits on
//! a forward pass unless it chooses to. Drafts (prefill while typing, always on the main
//! session) bypass the queue through a shared slot: see [`crate::draft`].
//! The actor also owns the thermal governor: every generation is paced by it (see
//! [`crate::thermal`]) and tells its caller, in its own event stream, what it did.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, RwLock};
use std::thread::JoinHandle;

use serde::{Deserialize, Serialize};

mod actor;

use crate::draft::DraftSlot;
use crate::engine::{Engine, EngineConfig, ModelInfo, ScoredPosition};
use crate::error::{Error, Result};
use crate::generate::{GenerateParams, Generation};
use crate::memory_guard::MemoryRelief;
use crate::sampling::TokenConstraint;
use crate::thermal::{ThermalGovernor, ThermalNotice, ThermalState};
use crate::tokenizer::{ChatMessage, GemmaTokenizer};

/// What to generate from.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", content = "value", rename_all = "camelCase")]
pub enum Prompt {
    /// Raw text, no chat template, special-token text recognized; `<bos>` is added.
    Text(String),
    /// A conversation rendered with Gemma's chat template, ending with an open model turn;
    /// its user messages' pictures open their turns ([`ChatMessage::images`]).
    Chat(Vec<ChatMessage>),
    /// Token ids as they are.
    Ids(Vec<u32>),
    /// A `Text` or `Chat` prompt with pictures, read by the vision projector loaded beside
    /// the model: in `Text`, where its `<__media__>` markers are (else first); in `Chat`, at
    /// the start of the last user turn (`crate::vision::raw_parts`, `chat_parts`).
    #[serde(skip)]
    WithImages {
        prompt: Box<Prompt>,
        images: Vec<std::sync::Arc<crate::vision::RgbImage>>,
    },
}

impl Prompt {
    pub fn to_ids(&self, tokenizer: &GemmaTokenizer) -> Result<Vec<u32>> {
        match self {
            Prompt::Text(t) => tokenizer.encode_special(t, true),
            Prompt::Chat(messages) => tokenizer.encode_chat(messages, true),
            Prompt::Ids(ids) => Ok(ids.clone()),
            Prompt::WithImages { .. } => Err(crate::Error::InvalidArgument(
                "a prompt with pictures is not token ids alone".into(),
            )),
        }
    }

    /// The prompt's pieces: token ids, and pictures between them.
    pub fn to_parts(&self, tokenizer: &GemmaTokenizer) -> Result<Vec<crate::vision::PromptPart>> {
        use crate::vision::{PromptPart, chat_parts, raw_parts};
        match self {
            Prompt::WithImages { prompt, images } => match prompt.as_ref() {
                Prompt::Text(t) => raw_parts(tokenizer, t, images),
                Prompt::Chat(messages) => chat_parts(tokenizer, messages, images),
                _ => Err(crate::Error::InvalidArgument(
                    "pictures go with a text or chat prompt".into(),
                )),
            },
            Prompt::Chat(messages) if self.has_images() => {
                tokenizer.encode_chat_parts(messages, true)
            }
            other => Ok(vec![PromptPart::Ids(other.to_ids(tokenizer)?)]),
        }
    }

    /// Whether the prompt holds pictures (its own, or its messages').
    pub fn has_images(&self) -> bool {
        match self {
            Prompt::WithImages { .. } => true,
            Prompt::Chat(messages) => messages.iter().any(|m| !m.images.is_empty()),
            _ => false,
        }
    }
}

/// Events of one generation request, in order: `Started`, any number of `Text` and `Thermal`,
/// then exactly one of `Done` or `Error`. `Thermal` comes when the thermal state the reply
/// obeys changes (and at its start when the device is not cool), saying what the engine did.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "event", content = "data", rename_all = "camelCase")]
pub enum Event {
    #[serde(rename_all = "camelCase")]
    Started {
        prompt_tokens: usize,
    },
    Text(String),
    Thermal(ThermalNotice),
    /// Boxed: sent once per generation, it would otherwise make every `Text` event as large.
    Done(Box<Generation>),
    #[serde(rename_all = "camelCase")]
    Error {
        code: String,
        message: String,
    },
}

/// A session of the engine actor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SessionId(u64);

impl SessionId {
    /// The open conversation's session, which drafts prefill and snapshots capture.
    pub const MAIN: SessionId = SessionId(0);
}

impl std::fmt::Display for SessionId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "session {}", self.0)
    }
}

pub(crate) enum Request {
    Generate {
        session: SessionId,
        prompt: Prompt,
        params: GenerateParams,
        events: Sender<Event>,
        cancel: Arc<AtomicBool>,
        constraint: Option<Box<dyn TokenConstraint>>,
    },
    Score {
        ids: Vec<u32>,
        /// Score positions from here on through the decode step (`Engine::score_decoding`).
        decode_from: Option<usize>,
        reply: Sender<Result<Vec<ScoredPosition>>>,
    },
    ResetSession,
    /// A newer draft is in the slot.
    Draft,
    SessionTokens {
        reply: Sender<Vec<u32>>,
    },
    Snapshot {
        reply: Sender<Result<Vec<u8>>>,
    },
    Restore {
        bytes: Vec<u8>,
        reply: Sender<Result<()>>,
    },
    ModelSha256 {
        reply: Sender<Result<[u8; 32]>>,
    },
    OpenSession {
        id: SessionId,
        reply: Sender<Result<()>>,
    },
    CloseSession {
        id: SessionId,
    },
    /// Memory is short: let go of what can be rebuilt (see [`crate::memory_guard::relief`]).
    Relieve {
        history: Vec<ChatMessage>,
        available: Option<u64>,
        reply: Sender<Result<MemoryRelief>>,
    },
    /// Make the engine thread panic (tests of the recovery); the error goes to `events`.
    #[cfg(feature = "test-hooks")]
    Panic {
        events: Sender<Event>,
    },
}

/// A session of its own for work beside the conversation (a summary, a document job, an API
/// request); closed, and its memory freed, when dropped.
pub struct ScratchSession {
    id: SessionId,
    tx: Sender<Request>,
}

impl ScratchSession {
    pub fn id(&self) -> SessionId {
        self.id
    }
}

impl Drop for ScratchSession {
    fn drop(&mut self) {
        let _ = self.tx.send(Request::CloseSession { id: self.id });
    }
}

/// A cloneable handle to the engine thread. Dropping the last handle stops the thread.
#[derive(Clone)]
pub struct EngineHandle {
    tx: Sender<Request>,
    tokenizer: GemmaTokenizer,
    /// What was loaded; its context changes when memory is relieved.
    info: Arc<RwLock<ModelInfo>>,
    notice: Option<String>,
    drafts: Arc<DraftSlot>,
    thermal: Arc<ThermalGovernor>,
    next_session: Arc<AtomicU64>,
    /// Times the engine thread caught a panic and reloaded the model.
    restarts: Arc<AtomicU64>,
    _thread: Arc<ThreadGuard>,
}

struct ThreadGuard(Option<JoinHandle<()>>);

impl Drop for ThreadGuard {
    fn drop(&mut self) {
        // The request channel is closed once every handle is gone; the thread then ends after
        // its current request.
        if let Some(t) = self.0.take() {
            let _ = t.join();
        }
    }
}

/// What a generation request may carry besides its prompt and parameters.
#[derive(Default)]
pub struct GenerateOptions {
    /// Masks every decode step (a tool call's grammar); the generation ends with
    /// `ConstraintDone` when it says its text is complete.
    pub constraint: Option<Box<dyn TokenConstraint>>,
    /// The caller's own cancel flag (one flag for a whole agent run, say); a new one if `None`.
    pub cancel: Option<Arc<AtomicBool>>,
}

/// A generation in flight: its events and its cancel flag.
pub struct GenerationHandle {
    pub events: Receiver<Event>,
    pub cancel: Arc<AtomicBool>,
}

impl GenerationHandle {
    pub fn cancel(&self) {
        self.cancel
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Drain events until the generation ends, passing each text piece to `on_text`.
    pub fn wait(self, on_text: impl FnMut(&str)) -> Result<Generation> {
        self.wait_with_notices(on_text, |_| {})
    }

    /// [`Self::wait`], passing thermal notices to `on_notice`.
    pub fn wait_with_notices(
        self,
        mut on_text: impl FnMut(&str),
        mut on_notice: impl FnMut(&ThermalNotice),
    ) -> Result<Generation> {
        for event in self.events.iter() {
            match event {
                Event::Started { .. } => {}
                Event::Text(t) => on_text(&t),
                Event::Thermal(n) => on_notice(&n),
                Event::Done(g) => return Ok(*g),
                Event::Error { code, message } => {
                    return Err(Error::Request { code, message });
                }
            }
        }
        Err(Error::EngineStopped)
    }
}

impl EngineHandle {
    /// Load the model on a new engine thread; returns once it is ready (or failed to load).
    pub fn spawn(config: EngineConfig) -> Result<Self> {
        let (tx, rx) = mpsc::channel::<Request>();
        let (ready_tx, ready_rx) = mpsc::channel();
        let drafts = Arc::new(DraftSlot::default());
        let engine_drafts = drafts.clone();
        config.thermal.validate()?;
        let thermal = Arc::new(ThermalGovernor::start(
            crate::thermal::source_for(&config.thermal),
            config.thermal.clone(),
        ));
        let engine_thermal = thermal.clone();
        let restarts = Arc::new(AtomicU64::new(0));
        let engine_restarts = restarts.clone();
        let actor_config = config.clone();
        actor::install_panic_backtraces();
        let thread = std::thread::Builder::new()
            .name("companion-engine".into())
            .spawn(move || {
                let engine = match Engine::load(config) {
                    Ok(e) => e,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                let session = match engine.new_session() {
                    Ok(s) => s,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                let _ = ready_tx.send(Ok((
                    engine.tokenizer().clone(),
                    engine.info().clone(),
                    engine.device_notice().map(str::to_string),
                )));
                actor::run(
                    actor::Actor::new(actor_config, engine, session),
                    rx,
                    &engine_drafts,
                    &engine_thermal,
                    &engine_restarts,
                );
            })
            .map_err(|e| Error::InvalidArgument(format!("cannot start the engine thread: {e}")))?;
        let (tokenizer, info, notice) = ready_rx.recv().map_err(|_| Error::EngineStopped)??;
        Ok(EngineHandle {
            tx,
            tokenizer,
            info: Arc::new(RwLock::new(info)),
            notice,
            drafts,
            thermal,
            next_session: Arc::new(AtomicU64::new(1)),
            restarts,
            _thread: Arc::new(ThreadGuard(Some(thread))),
        })
    }

    /// The tokenizer, usable on any thread without involving the engine.
    pub fn tokenizer(&self) -> &GemmaTokenizer {
        &self.tokenizer
    }

    /// What was loaded, as it stands now (the context is lowered by [`Self::relieve_memory`]).
    pub fn info(&self) -> ModelInfo {
        self.info.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// How many positions `prompt` takes in a session: its tokens, and each picture's rows
    /// (refused when it has pictures and no projector is loaded beside the model).
    pub fn prompt_tokens(&self, prompt: &Prompt) -> Result<usize> {
        let parts = prompt.to_parts(&self.tokenizer)?;
        let pictures = crate::vision::has_images(&parts);
        let per_image = self.info().projector.map(|p| p.tokens_per_image);
        match per_image {
            None if pictures => Err(Error::InvalidArgument(
                "pictures need the model's vision projector (an mmproj file) loaded beside it"
                    .into(),
            )),
            per_image => Ok(crate::vision::held_ids(&parts, per_image.unwrap_or(0), 0).len()),
        }
    }

    /// The context of the open conversation's session now.
    pub fn context(&self) -> usize {
        self.info.read().unwrap_or_else(|p| p.into_inner()).context
    }

    pub fn device_notice(&self) -> Option<&str> {
        self.notice.as_deref()
    }

    /// Set when the memory guard lowered the context to fit the device.
    pub fn memory_notice(&self) -> Option<String> {
        self.info
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .memory
            .notice
            .clone()
    }

    /// The thermal state the engine obeys now.
    pub fn thermal_state(&self) -> ThermalState {
        self.thermal.state()
    }

    /// Notices of every thermal state change, for an indicator outside any one reply.
    pub fn thermal_notices(&self) -> Receiver<ThermalNotice> {
        self.thermal.subscribe()
    }

    /// Whether background work (summaries, document jobs) should wait for the device to cool.
    pub fn background_paused(&self) -> bool {
        self.thermal.background_paused()
    }

    /// Let a reply paused at `critical` go on, at the `serious` pace.
    pub fn resume(&self) {
        self.thermal.resume();
    }

    /// The governor itself (its source and configuration), for diagnostics.
    pub fn thermal(&self) -> &ThermalGovernor {
        &self.thermal
    }

    /// Start generating on the open conversation's session; returns immediately with the
    /// event stream. A draft being prefilled is abandoned at its next chunk (what it
    /// prefilled stays cached for reuse).
    pub fn generate(&self, prompt: Prompt, params: GenerateParams) -> Result<GenerationHandle> {
        self.generate_on(SessionId::MAIN, prompt, params)
    }

    /// A new empty session, sized like the main one, for work that must not disturb it.
    pub fn open_session(&self) -> Result<ScratchSession> {
        let id = SessionId(self.next_session.fetch_add(1, Ordering::Relaxed));
        let (reply, rx) = mpsc::channel();
        self.tx
            .send(Request::OpenSession { id, reply })
            .map_err(|_| Error::EngineStopped)?;
        rx.recv().map_err(|_| Error::EngineStopped)??;
        Ok(ScratchSession {
            id,
            tx: self.tx.clone(),
        })
    }

    /// Start generating on `session` (the main one or a [`ScratchSession`]'s). Only a
    /// generation on the main session supersedes the draft.
    pub fn generate_on(
        &self,
        session: SessionId,
        prompt: Prompt,
        params: GenerateParams,
    ) -> Result<GenerationHandle> {
        self.generate_with(session, prompt, params, GenerateOptions::default())
    }

    /// [`Self::generate_on`] with a token constraint and/or the caller's cancel flag.
    pub fn generate_with(
        &self,
        session: SessionId,
        prompt: Prompt,
        params: GenerateParams,
        options: GenerateOptions,
    ) -> Result<GenerationHandle> {
        if session == SessionId::MAIN {
            self.drafts.supersede();
        }
        let (events_tx, events) = mpsc::channel();
        let cancel = options
            .cancel
            .unwrap_or_else(|| Arc::new(AtomicBool::new(false)));
        self.tx
            .send(Request::Generate {
                session,
                prompt,
                params,
                events: events_tx,
                cancel: cancel.clone(),
                constraint: options.constraint,
            })
            .map_err(|_| Error::EngineStopped)?;
        Ok(GenerationHandle { events, cancel })
    }

    /// Score positions `from..` of `ids` through the decode step, the path generation takes
    /// (see `Engine::score_decoding`); blocks until done.
    pub fn score_decoding(&self, ids: Vec<u32>, from: usize) -> Result<Vec<ScoredPosition>> {
        let (reply, rx) = mpsc::channel();
        self.tx
            .send(Request::Score {
                ids,
                decode_from: Some(from),
                reply,
            })
            .map_err(|_| Error::EngineStopped)?;
        rx.recv().map_err(|_| Error::EngineStopped)?
    }

    /// Score `ids` (teacher-forced); blocks until done.
    pub fn score(&self, ids: Vec<u32>) -> Result<Vec<ScoredPosition>> {
        let (reply, rx) = mpsc::channel();
        self.tx
            .send(Request::Score {
                ids,
                decode_from: None,
                reply,
            })
            .map_err(|_| Error::EngineStopped)?;
        rx.recv().map_err(|_| Error::EngineStopped)?
    }

    /// Forget the open conversation's cache.
    pub fn reset_session(&self) -> Result<()> {
        self.drafts.supersede();
        self.tx
            .send(Request::ResetSession)
            .map_err(|_| Error::EngineStopped)
    }

    /// The user's unsent message changed: prefill `history` plus an open user turn holding
    /// `draft` into the session. Returns at once and never queues work: only the latest draft
    /// is prefilled, and one arriving mid-prefill supersedes the older at its next chunk.
    pub fn set_draft(&self, history: Vec<ChatMessage>, draft: String) -> Result<()> {
        if self.drafts.put(history, draft, false) {
            self.tx
                .send(Request::Draft)
                .map_err(|_| Error::EngineStopped)?;
        }
        Ok(())
    }

    /// Prefill a conversation being opened (`history` and an empty user turn) in the
    /// background, in full prefill chunks. Like a draft it never queues work and is dropped
    /// at its next chunk by a draft, a send or a restore; what it prefilled stays cached.
    pub fn prefill_history(&self, history: Vec<ChatMessage>) -> Result<()> {
        if self.drafts.put(history, String::new(), true) {
            self.tx
                .send(Request::Draft)
                .map_err(|_| Error::EngineStopped)?;
        }
        Ok(())
    }

    /// Send the user's `message` after `history`: generate the reply, reusing what the drafts
    /// prefilled. Events as for [`Self::generate`].
    pub fn send(
        &self,
        history: Vec<ChatMessage>,
        message: String,
        params: GenerateParams,
    ) -> Result<GenerationHandle> {
        let mut messages = history;
        messages.push(ChatMessage::user(message));
        self.generate(Prompt::Chat(messages), params)
    }

    /// The token ids the open session holds, once the requests before this one are done.
    pub fn session_tokens(&self) -> Result<Vec<u32>> {
        let (reply, rx) = mpsc::channel();
        self.tx
            .send(Request::SessionTokens { reply })
            .map_err(|_| Error::EngineStopped)?;
        rx.recv().map_err(|_| Error::EngineStopped)
    }

    /// A snapshot of the open session (see [`crate::snapshot`]), for the caller to store as
    /// opaque bytes.
    pub fn snapshot(&self) -> Result<Vec<u8>> {
        let (reply, rx) = mpsc::channel();
        self.tx
            .send(Request::Snapshot { reply })
            .map_err(|_| Error::EngineStopped)?;
        rx.recv().map_err(|_| Error::EngineStopped)?
    }

    /// Memory is short (iOS's memory warning, or the memory the app may still allocate fell
    /// under [`crate::memory_guard::LOW_MEMORY_MARGIN`]): drop the draft's prefill (back to
    /// `history`, the open conversation's committed messages), close every scratch session and
    /// lower the context to what fits in `available` bytes (`None`: ask the OS). Runs after the
    /// request in progress; see [`crate::memory_guard::relief`].
    pub fn relieve_memory(
        &self,
        history: Vec<ChatMessage>,
        available: Option<u64>,
    ) -> Result<MemoryRelief> {
        self.drafts.supersede();
        let (reply, rx) = mpsc::channel();
        self.tx
            .send(Request::Relieve {
                history,
                available,
                reply,
            })
            .map_err(|_| Error::EngineStopped)?;
        let relief = rx.recv().map_err(|_| Error::EngineStopped)??;
        let mut info = self.info.write().unwrap_or_else(|p| p.into_inner());
        info.context = relief.context_after;
        Ok(relief)
    }

    /// Replace the open session with a snapshot; on any mismatch the session is left empty.
    pub fn restore(&self, bytes: Vec<u8>) -> Result<()> {
        self.drafts.supersede();
        let (reply, rx) = mpsc::channel();
        self.tx
            .send(Request::Restore { bytes, reply })
            .map_err(|_| Error::EngineStopped)?;
        rx.recv().map_err(|_| Error::EngineStopped)?
    }
}

impl EngineHandle {
    /// How many times the engine thread has caught a panic and reloaded the model.
    pub fn restarts(&self) -> u64 {
        self.restarts.load(Ordering::Relaxed)
    }

    /// Make the engine thread panic while handling a request, as a bug in a kernel would; the
    /// returned events carry the error that request gets. For tests of the recovery only.
    #[cfg(feature = "test-hooks")]
    pub fn panic_for_tests(&self) -> Result<GenerationHandle> {
        let (events_tx, events) = mpsc::channel();
        self.tx
            .send(Request::Panic { events: events_tx })
            .map_err(|_| Error::EngineStopped)?;
        Ok(GenerationHandle {
            events,
            cancel: Arc::new(AtomicBool::new(false)),
        })
    }

    /// The model file's sha256 as lowercase hex: what KV snapshots are tied to. Read once on
    /// the engine thread (about half a second for the default model), then remembered.
    pub fn model_sha256(&self) -> Result<String> {
        let (reply, rx) = mpsc::channel();
        self.tx
            .send(Request::ModelSha256 { reply })
            .map_err(|_| Error::EngineStopped)?;
        let sha = rx.recv().map_err(|_| Error::EngineStopped)??;
        Ok(sha.iter().map(|b| format!("{b:02x}")).collect())
    }
}
