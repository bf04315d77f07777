//! What the app keeps between commands (Tauri's managed state), where its files are, and how
//! settings are kept with tauri-plugin-store.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use memory::Store;
use tauri::{AppHandle, Runtime};
use tauri_plugin_store::StoreExt;

use crate::error::{AppError, Result};
use crate::settings::Settings;
use crate::shared::Shared;
use crate::worker::WorkerHandle;

const SETTINGS_KEY: &str = "settings";

/// Where the app's files are. Tests point all of them into a temporary directory.
#[derive(Debug, Clone)]
pub struct AppConfig {
    /// The conversation database (`$COMPANION_DB`, else the platform's data directory).
    pub database: PathBuf,
    /// The settings file; a relative path is under the app's data directory.
    pub settings_file: PathBuf,
    /// Where imported models are copied (beside the default model).
    pub models_dir: PathBuf,
}

impl AppConfig {
    pub fn from_env() -> Self {
        AppConfig {
            database: memory::default_database_path(),
            settings_file: PathBuf::from("settings.json"),
            models_dir: engine::models_dir(),
        }
    }
}

pub struct AppState {
    pub config: AppConfig,
    pub worker: WorkerHandle,
    pub shared: Arc<Shared>,
    /// The commands' own connection: lists, search, renames and exports never wait for a
    /// reply to finish (SQLite in WAL mode lets it read while the worker writes).
    /// `None` when the database could not be opened (the app then shows why).
    store: Mutex<Option<Store>>,
    settings: Mutex<Settings>,
    /// Files the user dropped on the window: the only paths a command accepts from the
    /// webview (everything else comes from a native dialog the user answered).
    granted: Mutex<HashSet<PathBuf>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl AppState {
    pub fn new(
        config: AppConfig,
        store: Option<Store>,
        settings: Settings,
        shared: Arc<Shared>,
    ) -> Result<Self> {
        let worker =
            WorkerHandle::start(config.database.clone(), settings.clone(), shared.clone())?;
        Ok(AppState {
            config,
            worker,
            shared,
            store: Mutex::new(store),
            settings: Mutex::new(settings),
            granted: Mutex::default(),
        })
    }

    /// Run `f` on the commands' store connection.
    pub fn with_store<T>(&self, f: impl FnOnce(&Store) -> Result<T>) -> Result<T> {
        match lock(&self.store).as_ref() {
            Some(store) => f(store),
            None => Err(AppError::new(
                "database_unavailable",
                "Your conversations cannot be opened right now; see the message on the start screen.",
            )),
        }
    }

    pub fn settings(&self) -> Settings {
        lock(&self.settings).clone()
    }

    pub fn set_settings(&self, settings: Settings) {
        *lock(&self.settings) = settings;
    }

    pub fn grant(&self, paths: impl IntoIterator<Item = PathBuf>) {
        lock(&self.granted).extend(paths);
    }

    pub fn is_granted(&self, path: &Path) -> bool {
        lock(&self.granted).contains(path)
    }
}

/// The saved settings, or the defaults when there are none; a file that cannot be read as
/// settings is reported and replaced by the defaults rather than stopping the app.
pub fn load_settings<R: Runtime>(app: &AppHandle<R>, file: &Path) -> (Settings, Option<String>) {
    let store = match app.store(file) {
        Ok(s) => s,
        Err(e) => {
            return (
                Settings::default(),
                Some(format!(
                    "Your settings could not be read ({e}); the defaults are used until you save new ones."
                )),
            );
        }
    };
    match store.get(SETTINGS_KEY) {
        None => (Settings::default(), None),
        Some(value) => match serde_json::from_value::<Settings>(value) {
            Ok(s) if s.validate().is_ok() => (s, None),
            _ => (
                Settings::default(),
                Some("Your saved settings were not valid; the defaults are used until you save new ones.".into()),
            ),
        },
    }
}

pub fn save_settings<R: Runtime>(
    app: &AppHandle<R>,
    file: &Path,
    settings: &Settings,
) -> Result<()> {
    let store = app.store(file).map_err(|e| {
        AppError::new(
            "settings",
            format!("Your settings could not be saved: {e}."),
        )
    })?;
    store.set(
        SETTINGS_KEY,
        serde_json::to_value(settings).unwrap_or_default(),
    );
    store.save().map_err(|e| {
        AppError::new(
            "settings",
            format!(
                "Your settings could not be saved ({e}); check the free disk space and try again."
            ),
        )
    })
}
