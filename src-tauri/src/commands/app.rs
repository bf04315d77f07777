//! The app's state while it loads and the status line's figures.

use serde::Serialize;
use tauri::State;

use crate::shared::{AppStateView, Phase};
use crate::state::AppState;
use crate::views::ReplyStats;

/// Loading, ready or failed (with what to do), and the notices not yet shown.
#[tauri::command]
pub fn app_state(state: State<'_, AppState>) -> AppStateView {
    state.shared.take_state()
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusView {
    pub phase: Phase,
    pub backend: Option<String>,
    pub last_reply: Option<ReplyStats>,
    pub memory_bytes: Option<u64>,
    pub thermal: engine::ThermalState,
    pub thermal_message: Option<String>,
    pub busy: bool,
    /// The loaded model's sentence for the user: a base model's (it continues text).
    pub model_notice: Option<String>,
    /// The loaded model reads pictures (a vision projector is loaded beside it).
    pub reads_pictures: bool,
    /// Grows each time sync brought changes from another device: the window reloads its lists.
    pub sync_changes: u64,
}

#[tauri::command]
pub fn status(state: State<'_, AppState>) -> StatusView {
    let engine = state.shared.engine();
    let thermal = engine
        .as_ref()
        .map(|e| e.thermal_state())
        .unwrap_or(engine::ThermalState::Unknown);
    // the engine's own sentence for the state it obeys; nothing to say while the device is cool
    let thermal_message = engine
        .as_ref()
        .filter(|_| thermal != engine::ThermalState::Nominal)
        .map(|e| engine::ThermalNotice::new(thermal, thermal, e.thermal().config(), false).message);
    StatusView {
        phase: state.shared.phase(),
        backend: engine.as_ref().map(|e| e.info().device.to_string()),
        last_reply: state.shared.last_reply(),
        memory_bytes: resident_bytes(),
        thermal,
        thermal_message,
        busy: state.shared.busy(),
        model_notice: engine
            .as_ref()
            .and_then(|e| crate::commands::model::base_model_notice(&e.info())),
        reads_pictures: engine
            .as_ref()
            .is_some_and(|e| e.info().projector.is_some()),
        sync_changes: state.sync.as_ref().map_or(0, |s| s.changes()),
    }
}

/// The process's resident memory now (Linux: VmRSS of /proc/self/status; elsewhere unknown).
fn resident_bytes() -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        let status = std::fs::read_to_string("/proc/self/status").ok()?;
        let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
        let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kb * 1024)
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}
