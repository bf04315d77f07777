//! The engine thread's loop: it owns the model and every session, and handles one request at
//! a time. A panic while handling one (a bug in a kernel, say) is caught here, at the thread's
//! boundary: it is logged with its backtrace, the request that met it gets a clear error, and
//! the thread reloads the model and goes on with fresh sessions, so the app stays usable (the
//! conversation's next reply prefills it again; its KV snapshot is untouched).

use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender};

use super::{Event, Prompt, Request, SessionId};
use crate::draft::DraftSlot;
use crate::engine::{Engine, EngineConfig};
use crate::error::{Error, Result};
use crate::session::Session;
use crate::thermal::{Pacer, StepBaseline, ThermalGovernor};

/// The state the loop carries: the model, its sessions, the measured decode rate.
pub(super) struct Actor {
    config: EngineConfig,
    engine: Engine,
    sessions: HashMap<SessionId, Session>,
    /// The unthrottled decode rate, measured across generations.
    baseline: StepBaseline,
}

impl Actor {
    pub fn new(config: EngineConfig, engine: Engine, main: Session) -> Self {
        let mut sessions = HashMap::new();
        sessions.insert(SessionId::MAIN, main);
        Actor {
            config,
            engine,
            sessions,
            baseline: StepBaseline::default(),
        }
    }

    /// After a panic: the model loaded again, and an empty main session.
    fn reload(&mut self) -> Result<()> {
        let mut config = self.config.clone();
        // the first load measured and warmed up already
        config.warm_up = false;
        let engine = Engine::load(config)?;
        let main = engine.new_session()?;
        self.engine = engine;
        self.sessions.clear();
        self.sessions.insert(SessionId::MAIN, main);
        Ok(())
    }
}

/// The message every caller caught by a panic gets.
const PANIC_MESSAGE: &str = "the engine met an internal error and restarted; this request was stopped (the log has the details)";

pub(super) fn run(
    mut actor: Actor,
    rx: Receiver<Request>,
    drafts: &DraftSlot,
    thermal: &ThermalGovernor,
    restarts: &AtomicU64,
) {
    for request in rx.iter() {
        let reply = PanicReply::of(&request);
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            handle(&mut actor, request, drafts, thermal)
        }));
        let Err(payload) = outcome else { continue };
        let what = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".into());
        let backtrace = last_backtrace().take().unwrap_or_default();
        tracing::error!(
            code = "engine_panic",
            panic = %what,
            backtrace = %backtrace,
            "the engine thread panicked; reloading the model"
        );
        reply.send();
        // the rings and pages of a half-written step cannot be trusted: start over
        drafts.supersede();
        match actor.reload() {
            Ok(()) => {
                restarts.fetch_add(1, Ordering::Relaxed);
                tracing::warn!("the engine reloaded the model after a panic");
            }
            Err(e) => {
                tracing::error!(code = e.code(), error = %e, "the model could not be reloaded");
                // dropping the receiver ends every request that follows with EngineStopped
                return;
            }
        }
    }
}

/// A prompt with pictures, prefilled before its generation: how long it took and how many
/// positions it ran (the text before the first picture is reused where the session held it).
struct PicturePrefill {
    seconds: f64,
    processed: usize,
}

/// The token list a generation starts from. A prompt with pictures is prefilled here (each
/// picture encoded and its rows prefilled), so that the generation finds the session holding
/// exactly that list, its last hidden state kept.
/// Returns the list and, for pictures, their prefill.
fn prompt_ids(
    engine: &Engine,
    session: &mut Session,
    prompt: &Prompt,
) -> Result<(Vec<u32>, Option<PicturePrefill>)> {
    match prompt {
        prompt if prompt.has_images() => {
            let t0 = std::time::Instant::now();
            let (ids, processed) =
                engine.prefill_parts(session, &prompt.to_parts(engine.tokenizer())?)?;
            Ok((
                ids,
                Some(PicturePrefill {
                    seconds: t0.elapsed().as_secs_f64(),
                    processed,
                }),
            ))
        }
        other => Ok((other.to_ids(engine.tokenizer())?, None)),
    }
}

fn handle(actor: &mut Actor, request: Request, drafts: &DraftSlot, thermal: &ThermalGovernor) {
    let engine = &actor.engine;
    match request {
        Request::Generate {
            session,
            prompt,
            params,
            events,
            cancel,
            mut constraint,
        } => {
            let _span = tracing::debug_span!("generate", %session).entered();
            let Some(session) = actor.sessions.get_mut(&session) else {
                let _ = events.send(Event::Error {
                    code: "invalid_argument".into(),
                    message: format!("{session} is not open"),
                });
                return;
            };
            let baseline = &mut actor.baseline;
            let result = prompt_ids(engine, session, &prompt).and_then(|(ids, pictures)| {
                let _ = events.send(Event::Started {
                    prompt_tokens: ids.len(),
                });
                let notices = events.clone();
                let mut pacer = Pacer::new(thermal, baseline, move |n| {
                    tracing::info!(state = %n.state, "{}", n.message);
                    let _ = notices.send(Event::Thermal(n));
                });
                let mut generation = engine.generate_paced(
                    session,
                    &ids,
                    &params,
                    &cancel,
                    Some(&mut pacer),
                    constraint
                        .as_deref_mut()
                        .map(|c| c as &mut dyn crate::sampling::TokenConstraint),
                    &mut |t| {
                        let _ = events.send(Event::Text(t.to_string()));
                    },
                )?;
                if let Some(PicturePrefill { seconds, processed }) = pictures {
                    // the pictures' prefill ran before the generation: it is the prompt's
                    let stats = &mut generation.stats;
                    stats.prefill_seconds += seconds;
                    stats.time_to_first_token_seconds += seconds;
                    stats.reused_tokens = ids.len() - processed;
                    stats.prefill_tokens_per_second = processed as f64 / stats.prefill_seconds;
                }
                Ok(generation)
            });
            let _ = events.send(match result {
                Ok(g) => Event::Done(Box::new(g)),
                Err(e) => Event::Error {
                    code: e.code().to_string(),
                    message: e.to_string(),
                },
            });
        }
        Request::Score {
            ids,
            decode_from,
            reply,
        } => {
            let _ = reply.send(match decode_from {
                Some(from) => engine.score_decoding(&ids, from),
                None => engine.score(&ids),
            });
        }
        Request::OpenSession { id, reply } => {
            let _ = reply.send(engine.new_session().map(|s| {
                actor.sessions.insert(id, s);
            }));
        }
        Request::CloseSession { id } => {
            if id != SessionId::MAIN {
                actor.sessions.remove(&id);
            }
        }
        Request::ModelSha256 { reply } => {
            let _ = reply.send(engine.model_sha256());
        }
        Request::Relieve {
            history,
            available,
            reply,
        } => {
            drafts.supersede();
            let scratch = actor.sessions.len().saturating_sub(1);
            actor.sessions.retain(|id, _| *id == SessionId::MAIN);
            let result = match actor.sessions.get_mut(&SessionId::MAIN) {
                Some(main) => actor.engine.relieve(main, &history, available, scratch),
                None => Err(Error::EngineStopped),
            };
            if let Ok(relief) = &result {
                // a reload after a panic keeps the lowered context
                actor.config.context = relief.context_after;
            }
            let _ = reply.send(result);
        }
        #[cfg(feature = "test-hooks")]
        Request::Panic { .. } => panic!("a panic asked for by a test"),
        other => {
            if let Some(main) = actor.sessions.get_mut(&SessionId::MAIN) {
                on_main(engine, main, other, drafts);
            }
        }
    }
}

/// Requests that always concern the open conversation's session.
fn on_main(engine: &Engine, session: &mut Session, request: Request, drafts: &DraftSlot) {
    match request {
        Request::ResetSession => session.clear(),
        Request::Draft => prefill_drafts(engine, session, drafts),
        Request::SessionTokens { reply } => {
            let _ = reply.send(session.tokens().to_vec());
        }
        Request::Snapshot { reply } => {
            let _ = reply.send(engine.snapshot(session));
        }
        Request::Restore { bytes, reply } => {
            let _ = reply.send(engine.restore(session, &bytes));
        }
        _ => {}
    }
}

/// Prefill the latest draft; when a newer one supersedes it, go straight on with that one.
fn prefill_drafts(engine: &Engine, session: &mut Session, drafts: &DraftSlot) {
    while let Some(draft) = drafts.take() {
        let _span = tracing::debug_span!("draft", generation = draft.generation).entered();
        let stale = || drafts.is_stale(draft.generation);
        let chunk = if draft.full_chunks {
            engine.session_config().prefill_chunk
        } else {
            engine.draft_chunk()
        };
        match engine.prefill_draft_in_chunks(session, &draft.history, &draft.text, chunk, &stale) {
            Ok(outcome) => tracing::debug!(?outcome, "draft prefilled"),
            // Nobody waits on a draft: the send that follows reports any real problem.
            Err(e) => tracing::warn!(error = %e, "draft prefill failed"),
        }
    }
}

/// Where the answer to a request goes if handling it panics: a clone of its reply channel.
enum PanicReply {
    Events(Sender<Event>),
    Result(Box<dyn FnOnce(Error) + Send>),
    Nothing,
}

impl PanicReply {
    fn of(request: &Request) -> Self {
        fn err<T: Send + 'static>(tx: &Sender<Result<T>>) -> PanicReply {
            let tx = tx.clone();
            PanicReply::Result(Box::new(move |e| {
                let _ = tx.send(Err(e));
            }))
        }
        match request {
            Request::Generate { events, .. } => PanicReply::Events(events.clone()),
            #[cfg(feature = "test-hooks")]
            Request::Panic { events } => PanicReply::Events(events.clone()),
            Request::Score { reply, .. } => err(reply),
            Request::Snapshot { reply } => err(reply),
            Request::Restore { reply, .. } => err(reply),
            Request::ModelSha256 { reply } => err(reply),
            Request::OpenSession { reply, .. } => err(reply),
            Request::Relieve { reply, .. } => err(reply),
            _ => PanicReply::Nothing,
        }
    }

    fn send(self) {
        let error = Error::Request {
            code: "engine_panic".into(),
            message: PANIC_MESSAGE.into(),
        };
        match self {
            PanicReply::Events(tx) => {
                let _ = tx.send(Event::Error {
                    code: error.code().to_string(),
                    message: error.to_string(),
                });
            }
            PanicReply::Result(send) => send(error),
            PanicReply::Nothing => {}
        }
    }
}

/// The backtrace of the last panic on an engine or compute thread (a kernel panics on a compute
/// thread and the engine thread catches it), for the log at the catch site.
static LAST_BACKTRACE: Mutex<Option<String>> = Mutex::new(None);

fn last_backtrace() -> std::sync::MutexGuard<'static, Option<String>> {
    LAST_BACKTRACE.lock().unwrap_or_else(|p| p.into_inner())
}

/// Chain a panic hook (once per process) that keeps a backtrace of panics on the engine's
/// threads, which `run` logs when it catches them; every other hook still runs.
pub(super) fn install_panic_backtraces() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let ours = std::thread::current()
                .name()
                .is_some_and(|n| n.starts_with("companion-"));
            if ours {
                *last_backtrace() = Some(std::backtrace::Backtrace::force_capture().to_string());
            }
            previous(info);
        }));
    });
}
