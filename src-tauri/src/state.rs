//! What the app keeps between commands (Tauri's managed state), where its files are, and
//! where the settings file is (its reading and atomic writing: `settings_file.rs`).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use memory::Store;
use tauri::{AppHandle, Manager, Runtime};

use crate::api_server::ApiServer;
use crate::error::{AppError, Result};
use crate::settings::Settings;
use crate::shared::Shared;
use crate::worker::WorkerHandle;

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
    /// The local API, when the settings switch it on.
    pub api: ApiServer,
    /// Sync through the folder the user chose, in the background (`None`: its thread could
    /// not start).
    pub sync: Option<crate::sync_watch::SyncWatch>,
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
        let sync = crate::sync_watch::SyncWatch::start(config.database.clone())
            .map_err(|e| tracing::warn!(error = %e, "sync cannot start"))
            .ok();
        Ok(AppState {
            api: ApiServer::new(config.database.clone()),
            sync,
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

/// The settings file's path: `file` itself when absolute, else under the app's data directory.
fn settings_path<R: Runtime>(
    app: &AppHandle<R>,
    file: &Path,
) -> std::result::Result<PathBuf, String> {
    if file.is_absolute() {
        return Ok(file.to_path_buf());
    }
    app.path()
        .app_data_dir()
        .map(|d| d.join(file))
        .map_err(|e| e.to_string())
}

/// The saved settings, or the defaults when there are none; a file that cannot be read as
/// settings is reported and replaced by the defaults rather than stopping the app.
pub fn load_settings<R: Runtime>(app: &AppHandle<R>, file: &Path) -> (Settings, Option<String>) {
    match settings_path(app, file) {
        Ok(path) => crate::settings_file::read(&path),
        Err(e) => (
            Settings::default(),
            Some(format!(
                "Your settings could not be read ({e}); the defaults are used until you save new ones."
            )),
        ),
    }
}

/// Save the settings atomically: a crash during the save keeps the old ones.
pub fn save_settings<R: Runtime>(
    app: &AppHandle<R>,
    file: &Path,
    settings: &Settings,
) -> Result<()> {
    let path = settings_path(app, file).map_err(|e| {
        AppError::new(
            "settings",
            format!("Your settings could not be saved: {e}."),
        )
    })?;
    crate::settings_file::write(&path, settings).map_err(|e| {
        tracing::warn!(error = %e, "settings not saved");
        AppError::new(
            "settings",
            format!(
                "Your settings could not be saved ({e}); check the free disk space and try again."
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A save replaces the settings file whole — a new file renamed over it — rather than
    /// truncating it and writing it again in place, where a crash midway leaves it cut short
    /// and the user's settings gone (what tauri-plugin-store's save did).
    #[cfg(unix)]
    #[test]
    fn a_save_replaces_the_settings_file_whole_never_in_place() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("settings.json");
        let config = AppConfig {
            database: dir.path().join("companion.db"),
            settings_file: path.clone(),
            models_dir: dir.path().join("models"),
        };
        let app = crate::builder(tauri::test::mock_builder(), config)
            .build(tauri::test::mock_context(tauri::test::noop_assets()))
            .expect("the app builds on the mock runtime");
        save_settings(app.handle(), &path, &Settings::default()).unwrap();
        let before = std::fs::metadata(&path).unwrap().ino();
        let new = Settings {
            temperature: 0.3,
            ..Settings::default()
        };
        save_settings(app.handle(), &path, &new).unwrap();
        assert_ne!(
            std::fs::metadata(&path).unwrap().ino(),
            before,
            "the settings file was rewritten in place"
        );
        assert_eq!(load_settings(app.handle(), &path), (new, None));
    }
}
