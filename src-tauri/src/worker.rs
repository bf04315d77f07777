//! The chat worker: one OS thread that owns the `ConversationManager` (and through it the
//! engine handle and a store connection), so that loading the model, opening a conversation
//! and streaming a reply never run on the UI's threads. Commands send it jobs (closures) and
//! await the answer; the worker runs them one at a time, in order. Stopping a reply does not
//! go through the queue: it is a flag in [`Shared`].
//!
//! A job that panics (a bug) is caught at the thread's boundary: its caller gets a
//! `worker_panic` error instead of the worker dying with every later command answered "the
//! engine stopped", and the conversation manager, whose state the panic may have left half
//! changed, is rebuilt on the same engine before the next job runs.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, Sender};
use std::time::Duration;

use chat::{ConversationManager, ManagerConfig};
use engine::EngineHandle;
use memory::{ConversationId, Store};

use crate::error::{AppError, Result};
use crate::settings::Settings;
use crate::shared::Shared;

type Job = Box<dyn FnOnce(&mut Worker) + Send>;

pub struct Worker {
    pub manager: Option<ConversationManager>,
    pub settings: Settings,
    pub shared: Arc<Shared>,
    pub(crate) database: PathBuf,
    /// The agent's call grammar on the loaded model's vocabulary (built at the first turn
    /// with tools, dropped with the model).
    pub grammar: Option<chat::agent_loop::CallGrammar>,
    /// The tools' own connection to the database (the manager holds the other), opened at the
    /// first turn with tools: opening runs a quick check of the whole file, not for every turn.
    pub tool_store: Option<Store>,
    /// "Yes for this conversation" answers, until the app quits.
    pub remembered: agent::RememberedApprovals,
    /// Tests only ([`crate::commands::chat::SCRIPTED_CALLS_ENV`]): which calls each turn with
    /// tools makes, in place of the model's choice.
    pub scripted_turns: std::collections::VecDeque<Vec<agent::ToolCall>>,
}

/// The commands' side of the worker.
#[derive(Clone)]
pub struct WorkerHandle {
    tx: Sender<Job>,
}

impl WorkerHandle {
    /// Start the worker; it loads the engine at once (see [`Shared`]'s phase).
    pub fn start(database: PathBuf, settings: Settings, shared: Arc<Shared>) -> Result<Self> {
        let (tx, rx) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("companion-chat".into())
            .spawn(move || {
                let mut worker = Worker {
                    manager: None,
                    settings,
                    shared,
                    database,
                    grammar: None,
                    tool_store: None,
                    remembered: agent::RememberedApprovals::new(),
                    scripted_turns: crate::commands::chat::scripted_turns_from_env(),
                };
                worker.load(None);
                for job in rx {
                    // a `call`'s job catches its own panic, to answer its caller; this is the
                    // net for the others
                    let _ = guarded(&mut worker, job);
                }
                worker.shut_down();
            })
            .map_err(|e| {
                AppError::new(
                    "worker",
                    format!("Companion could not start its engine thread ({e}); restart it."),
                )
            })?;
        Ok(WorkerHandle { tx })
    }

    /// Run `f` on the worker and wait for its answer without blocking a thread.
    pub async fn call<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Worker) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.tx
            .send(Box::new(move |w| {
                let _ = tx.send(guarded(w, f).and_then(|r| r));
            }))
            .map_err(|_| AppError::worker_gone())?;
        rx.await.map_err(|_| AppError::worker_gone())?
    }

    /// Queue `f` without waiting for it.
    pub fn spawn(&self, f: impl FnOnce(&mut Worker) + Send + 'static) -> Result<()> {
        self.tx
            .send(Box::new(f))
            .map_err(|_| AppError::worker_gone())
    }

    /// Run `f` and block until it is done, or until `deadline` has passed (app exit: the
    /// worker may be loading a model, which cannot be interrupted, and the window must close
    /// all the same). After the deadline `f` still runs when the worker gets to it, unless the
    /// process has ended by then.
    pub fn call_within<T: Send + 'static>(
        &self,
        deadline: Duration,
        f: impl FnOnce(&mut Worker) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let (tx, rx) = mpsc::channel();
        self.tx
            .send(Box::new(move |w| {
                let _ = tx.send(guarded(w, f).and_then(|r| r));
            }))
            .map_err(|_| AppError::worker_gone())?;
        match rx.recv_timeout(deadline) {
            Ok(r) => r,
            Err(mpsc::RecvTimeoutError::Timeout) => Err(AppError::new(
                "shutdown_timeout",
                format!(
                    "The engine did not stop within {} s; Companion quit without waiting for it.",
                    deadline.as_secs_f64()
                ),
            )),
            Err(mpsc::RecvTimeoutError::Disconnected) => Err(AppError::worker_gone()),
        }
    }
}

/// Run a job, catching a panic: it is logged (the log's panic hook has written the
/// backtrace), the worker recovers, and the caller gets an error that says what happened.
fn guarded<T>(w: &mut Worker, f: impl FnOnce(&mut Worker) -> T) -> Result<T> {
    match logging::catch_panic(|| f(&mut *w)) {
        Ok(r) => Ok(r),
        Err(panic) => {
            tracing::error!(
                code = "worker_panic",
                panic = %panic.message,
                "a job on the chat worker panicked; rebuilding the conversation manager"
            );
            w.recover_from_panic();
            Err(AppError::worker_panic())
        }
    }
}

impl Worker {
    pub fn manager(&mut self) -> Result<&mut ConversationManager> {
        self.manager.as_mut().ok_or_else(AppError::not_ready)
    }

    /// Load the engine with the current settings, then reopen `reopen` if given.
    pub fn load(&mut self, reopen: Option<ConversationId>) {
        self.grammar = None;
        self.tool_store = None;
        self.shared.loading("Opening your conversations");
        let store = match Store::open(&self.database) {
            Ok(opened) => opened.store,
            Err(e) => return self.shared.failed(e.into()),
        };
        self.shared.loading("Loading the model");
        engine::device::set_threads(self.settings.threads);
        let mut config = self.settings.engine_config();
        // the model's Gemma 4 assistant (auto speculation drafts with it) and its vision
        // projector (messages may then carry pictures), when the library pairs them with it;
        // a library that cannot say loads the model alone
        let paired = |pairing| {
            chat::paired::paired_for(&store, pairing, &config.model_path).unwrap_or_else(|e| {
                tracing::warn!(
                    code = e.code(),
                    ?pairing,
                    "the model's paired file could not be looked up"
                );
                None
            })
        };
        let (assistant_path, projector_path) = (
            paired(memory::Pairing::Assistant),
            paired(memory::Pairing::Projector),
        );
        config.assistant_path = assistant_path;
        config.projector_path = projector_path;
        let engine = match EngineHandle::spawn(config.clone()) {
            Ok(engine) => engine,
            // a projector that does not load costs the pictures, not the model: the model is
            // loaded again without it, and only if that works was the projector the cause
            Err(e) if config.projector_path.is_some() => {
                config.projector_path = None;
                match EngineHandle::spawn(config) {
                    Ok(engine) => {
                        tracing::warn!(code = e.code(), error = %e, "the vision projector did not load; the model runs without it");
                        self.shared.notice(crate::error::sentence(&format!(
                            "the model's vision projector could not be loaded ({e}), so the model reads no pictures; import the projector again in the model panel"
                        )));
                        engine
                    }
                    Err(e) => return self.shared.failed(load_error(e, &self.settings)),
                }
            }
            Err(e) => return self.shared.failed(load_error(e, &self.settings)),
        };
        for notice in [engine.device_notice(), engine.memory_notice().as_deref()]
            .into_iter()
            .flatten()
        {
            self.shared.notice(crate::error::sentence(notice));
        }
        self.shared.set_engine(Some(engine.clone()));
        let mut config = ManagerConfig::for_engine(&engine);
        config.system_prompt = self.settings.system_prompt();
        let mut manager = ConversationManager::new(engine, store, config);
        if let Some(id) = reopen {
            match manager.open(&id) {
                Ok(_) => self.shared.set_open(Some(id)),
                Err(e) => {
                    tracing::warn!(code = e.code(), error = %e, "could not reopen the conversation");
                    self.shared.set_open(None);
                }
            }
        }
        self.manager = Some(manager);
        self.shared.ready();
    }

    /// Snapshot the open conversation, let the engine go, and load it again with the current
    /// settings (context, device, threads, thermal rates or model changed).
    pub fn reload(&mut self) {
        let reopen = self.shared.open();
        self.shut_down();
        self.load(reopen);
    }

    /// After a panic: flags that the job had set are cleared, and the manager (whose state
    /// may be half changed) is replaced by a new one on the same engine, the open conversation
    /// reopened from the store, the engine's session started over. Its snapshot is not saved:
    /// it may not match the conversation. Without an engine, or if that fails, load again.
    fn recover_from_panic(&mut self) {
        self.shared.replying.store(false, Ordering::Relaxed);
        let Some(old) = self.manager.take() else {
            return;
        };
        let engine = old.engine().clone();
        let config = old.config().clone();
        drop(old);
        let reopen = self.shared.open();
        let rebuilt = (|| -> Result<ConversationManager> {
            engine.reset_session()?;
            let store = Store::open(&self.database)?.store;
            let mut manager = ConversationManager::new(engine, store, config);
            if let Some(id) = &reopen {
                manager.open(id)?;
            }
            Ok(manager)
        })();
        match rebuilt {
            Ok(manager) => self.manager = Some(manager),
            Err(e) => {
                tracing::warn!(code = %e.code, error = %e, "rebuilding after a panic failed; loading again");
                self.shared.set_engine(None);
                self.load(reopen);
            }
        }
    }

    fn shut_down(&mut self) {
        // a document job holds its own engine handle: stop it so the old model goes away
        self.shared.document_cancel.store(true, Ordering::Relaxed);
        if let Some(mut manager) = self.manager.take()
            && let Err(e) = manager.close()
        {
            tracing::warn!(code = e.code(), error = %e, "snapshot at close failed");
        }
        self.shared.set_engine(None);
    }

    /// Apply settings that need no reload (sampling, system prompt, theme).
    pub fn apply(&mut self, settings: Settings) {
        if let Some(m) = self.manager.as_mut() {
            m.set_system_prompt(settings.system_prompt());
        }
        self.settings = settings;
    }

    /// Close the open conversation (its snapshot is saved) before the app exits.
    pub fn close(&mut self) -> Result<()> {
        if let Some(m) = self.manager.as_mut() {
            m.close()?;
        }
        Ok(())
    }
}

/// Loading failed: say why and what to do, naming the model panel where a model can be chosen.
fn load_error(e: engine::Error, settings: &Settings) -> AppError {
    let code = e.code().to_string();
    let what_to_do = match code.as_str() {
        "model_not_found" => format!(
            " Run scripts/fetch-model to get the default model, or import a GGUF file in the model panel. (Looked for {}.)",
            settings.model_path().display()
        ),
        "insufficient_memory" => " Choose a smaller context in the settings.".to_string(),
        _ => " Import or choose another model in the model panel.".to_string(),
    };
    AppError::new(
        &code,
        format!("{}{what_to_do}", crate::error::sentence(&e.to_string())),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Today's bug: a job that panicked killed the worker thread, so that command and every
    /// one after it answered "The engine stopped; restart Companion".
    #[test]
    fn a_panicking_job_is_reported_and_the_worker_goes_on() {
        let dir = tempfile::tempdir().unwrap();
        let shared = Arc::new(Shared::default());
        let settings = Settings {
            model_path: Some(dir.path().join("missing.gguf")),
            ..Settings::default()
        };
        let handle =
            WorkerHandle::start(dir.path().join("companion.db"), settings, shared.clone()).unwrap();
        let deadline = Duration::from_secs(60);
        shared.replying.store(true, Ordering::Relaxed);
        let err = handle
            .call_within(deadline, |_| -> Result<()> { panic!("a bug in a command") })
            .unwrap_err();
        assert_eq!(err.code, "worker_panic", "{err}");
        assert!(
            !shared.replying.load(Ordering::Relaxed),
            "a reply that panicked is not left 'streaming'"
        );
        handle.spawn(|_| panic!("a bug in a queued job")).unwrap();
        let answer = handle.call_within(deadline, |_| Ok(42)).unwrap();
        assert_eq!(answer, 42);
    }
}
