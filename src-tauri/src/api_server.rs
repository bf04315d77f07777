//! The local API inside the app (the settings' switch, off by default): the same server as
//! `companion serve` (`api/`), on 127.0.0.1, on the model the app has loaded — whichever that
//! is after a switch or a reload — with the same token file. Requests run on sessions of their
//! own and queue with the app's own work on the one engine thread.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};

use chat::completion::Completer;
use serde::Serialize;
use tokio::sync::oneshot;

use crate::error::{AppError, Result};
use crate::shared::Shared;

/// The app's model for the API: the engine in use, one [`Completer`] per engine load (its
/// grammar cache belongs to that model).
struct AppModel {
    shared: Arc<Shared>,
    cache: Mutex<Option<(u64, Arc<Completer>)>>,
}

impl api::CompleterSource for AppModel {
    fn current(&self) -> Option<Arc<Completer>> {
        let generation = self.shared.engine_generation.load(Ordering::Acquire);
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((g, c)) = cache.as_ref()
            && *g == generation
        {
            return Some(c.clone());
        }
        let completer = Arc::new(Completer::new(self.shared.engine()?));
        *cache = Some((generation, completer.clone()));
        Some(completer)
    }
}

struct Running {
    addr: SocketAddr,
    stop: oneshot::Sender<()>,
}

/// What the settings panel shows of the server.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ApiStatus {
    pub running: bool,
    /// `http://127.0.0.1:PORT/v1` while running.
    pub url: Option<String>,
    /// The bearer token, for the copy button (only while running).
    pub token: Option<String>,
    pub token_file: String,
    /// Why it is not running although switched on (the port is taken, …).
    pub problem: Option<String>,
}

pub struct ApiServer {
    database: PathBuf,
    running: Mutex<Option<Running>>,
    token: Mutex<Option<String>>,
    problem: Mutex<Option<String>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl ApiServer {
    /// `database`: the token file lives beside it, and saved exchanges go into it.
    pub fn new(database: PathBuf) -> Self {
        ApiServer {
            database,
            running: Mutex::new(None),
            token: Mutex::new(None),
            problem: Mutex::new(None),
        }
    }

    /// Start, stop or move the server to match the settings. Must be called where a Tokio
    /// runtime can be entered (Tauri's async runtime is used).
    pub fn apply(&self, enabled: bool, port: u16, shared: &Arc<Shared>) -> Result<()> {
        let mut running = lock(&self.running);
        // switched off, or moved to another port: the running server stops first
        if running
            .as_ref()
            .is_some_and(|r| !enabled || r.addr.port() != port)
            && let Some(r) = running.take()
        {
            let _ = r.stop.send(());
            tracing::info!("local API stopped");
        }
        *lock(&self.problem) = None;
        if !enabled || running.is_some() {
            return Ok(());
        }
        let started = self.start(port, shared);
        match started {
            Ok(r) => {
                tracing::info!(port = r.addr.port(), "local API listening");
                *running = Some(r);
                Ok(())
            }
            Err(e) => {
                *lock(&self.problem) = Some(e.message.clone());
                Err(e)
            }
        }
    }

    fn start(&self, port: u16, shared: &Arc<Shared>) -> Result<Running> {
        let from_env = std::env::var("COMPANION_API_TOKEN").ok();
        let (token, _) = api::load_or_create(&api::token_path(&self.database), from_env.as_deref())
            .map_err(|e| AppError::new("api_token", e.to_string()))?;
        // bound here, synchronously, so that a taken port is said at once
        let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, port))
            .and_then(|l| l.set_nonblocking(true).map(|_| l))
            .map_err(|e| {
                AppError::new(
                    "api_port",
                    format!(
                        "The local API cannot listen on 127.0.0.1:{port}: {e}. Choose another port."
                    ),
                )
            })?;
        let addr = listener
            .local_addr()
            .map_err(|e| AppError::new("api_port", e.to_string()))?;
        let model = AppModel {
            shared: shared.clone(),
            cache: Mutex::new(None),
        };
        // the server's own connection for the exchanges a program asks to save, opened once
        let store = memory::Store::open(&self.database)
            .map_err(|e| AppError::new("database_unavailable", e.to_string()))?
            .store;
        let state = Arc::new(api::ApiState::new(
            model,
            token.clone(),
            addr.port(),
            Some(store),
        ));
        let (stop, stopped) = oneshot::channel::<()>();
        tauri::async_runtime::spawn(async move {
            let listener = match tokio::net::TcpListener::from_std(listener) {
                Ok(l) => l,
                Err(e) => {
                    tracing::warn!(error = %e, "the local API could not start");
                    return;
                }
            };
            if let Err(e) = api::serve(listener, state, async {
                let _ = stopped.await;
            })
            .await
            {
                tracing::warn!(error = %e, "the local API stopped");
            }
        });
        *lock(&self.token) = Some(token);
        Ok(Running { addr, stop })
    }

    pub fn status(&self) -> ApiStatus {
        let running = lock(&self.running);
        let addr = running.as_ref().map(|r| r.addr);
        ApiStatus {
            running: addr.is_some(),
            url: addr.map(|a| format!("http://{a}/v1")),
            token: addr.and_then(|_| lock(&self.token).clone()),
            token_file: api::token_path(&self.database).display().to_string(),
            problem: lock(&self.problem).clone(),
        }
    }

    /// Stop serving (the app is closing).
    pub fn stop(&self) {
        if let Some(r) = lock(&self.running).take() {
            let _ = r.stop.send(());
        }
    }
}
