//! The chat worker: one OS thread that owns the `ConversationManager` (and through it the
//! engine handle and a store connection), so that loading the model, opening a conversation
//! and streaming a reply never run on the UI's threads. Commands send it jobs (closures) and
//! await the answer; the worker runs them one at a time, in order. Stopping a reply does not
//! go through the queue: it is a flag in [`Shared`].

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, Sender};

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
    database: PathBuf,
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
                };
                worker.load(None);
                for job in rx {
                    job(&mut worker);
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
                let _ = tx.send(f(w));
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

    /// Run `f` and block until it is done (for app exit, where nothing else is waiting).
    pub fn call_blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Worker) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let (tx, rx) = mpsc::channel();
        self.tx
            .send(Box::new(move |w| {
                let _ = tx.send(f(w));
            }))
            .map_err(|_| AppError::worker_gone())?;
        rx.recv().map_err(|_| AppError::worker_gone())?
    }
}

impl Worker {
    pub fn manager(&mut self) -> Result<&mut ConversationManager> {
        self.manager.as_mut().ok_or_else(AppError::not_ready)
    }

    /// Load the engine with the current settings, then reopen `reopen` if given.
    pub fn load(&mut self, reopen: Option<ConversationId>) {
        self.shared.loading("Opening your conversations");
        let store = match Store::open(&self.database) {
            Ok(opened) => opened.store,
            Err(e) => return self.shared.failed(e.into()),
        };
        self.shared.loading("Loading the model");
        engine::device::set_threads(self.settings.threads);
        let engine = match EngineHandle::spawn(self.settings.engine_config()) {
            Ok(engine) => engine,
            Err(e) => return self.shared.failed(load_error(e, &self.settings)),
        };
        for notice in [engine.device_notice(), engine.memory_notice()]
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
                    tracing::warn!(error = %e, "could not reopen the conversation");
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

    fn shut_down(&mut self) {
        // a document job holds its own engine handle: stop it so the old model goes away
        self.shared.document_cancel.store(true, Ordering::Relaxed);
        if let Some(mut manager) = self.manager.take()
            && let Err(e) = manager.close()
        {
            tracing::warn!(error = %e, "snapshot at close failed");
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
