//! Settings: read, and save-and-apply. Sampling and the system prompt apply to the next reply;
//! context, device, threads, thermal rates and the model reload the engine in the background
//! (the app shows its loading view), reopening the conversation that was open.

use std::sync::atomic::Ordering;

use serde::Serialize;
use tauri::{AppHandle, Runtime, State};

use crate::api_server::ApiStatus;
use crate::error::Result;
use crate::settings::Settings;
use crate::state::{AppState, save_settings};

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SettingsApplied {
    pub settings: Settings,
    pub reloading: bool,
}

#[tauri::command]
pub fn get_settings(state: State<'_, AppState>) -> Settings {
    state.settings()
}

/// The local API: whether it runs, where, its token (for the copy button) and any problem.
#[tauri::command]
pub fn api_status(state: State<'_, AppState>) -> ApiStatus {
    state.api.status()
}

#[tauri::command]
pub async fn set_settings<R: Runtime>(
    app: AppHandle<R>,
    state: State<'_, AppState>,
    settings: Settings,
) -> Result<SettingsApplied> {
    let mut settings = settings;
    let before = state.settings();
    // the model is chosen in the model panel, never through the settings form
    settings.model_path = before.model_path.clone();
    apply(&app, &state, settings)
}

/// Validate, save and apply `settings`.
pub fn apply<R: Runtime>(
    app: &AppHandle<R>,
    state: &AppState,
    settings: Settings,
) -> Result<SettingsApplied> {
    settings.validate()?;
    let before = state.settings();
    save_settings(app, &state.config.settings_file, &settings)?;
    state.set_settings(settings.clone());
    let reloading =
        settings.needs_reload(&before) || state.shared.phase() == crate::shared::Phase::Failed;
    // the server follows the switch at once; a taken port is the answer's error (the other
    // settings are saved and applied all the same)
    let api = state
        .api
        .apply(settings.api_enabled, settings.api_port, &state.shared);
    let applied = settings.clone();
    if reloading {
        state.shared.loading("Applying your settings");
        state.shared.reply_cancel.store(true, Ordering::Relaxed);
        state.worker.spawn(move |w| {
            w.settings = applied;
            w.reload();
        })?;
    } else {
        state.worker.spawn(move |w| w.apply(applied))?;
    }
    api?;
    Ok(SettingsApplied {
        settings,
        reloading,
    })
}
