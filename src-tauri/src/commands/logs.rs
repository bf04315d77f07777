//! The log folder, for Settings → "Open log folder": what a user sends us when something went
//! wrong. Opened with the platform's own file manager (`open`, `xdg-open`, `explorer`) rather
//! than through an opener plugin: one fixed folder, no path from the webview, no new
//! dependency. Mobile has no file manager to hand a folder to; there the path is shown.

use std::path::PathBuf;

use tauri::State;

use crate::error::{AppError, Result};
use crate::state::AppState;

/// The folder of the log files (beside the database).
pub fn log_dir(state: &AppState) -> PathBuf {
    logging::log_dir(&state.config.database)
}

#[tauri::command]
pub fn log_folder(state: State<'_, AppState>) -> String {
    log_dir(&state).display().to_string()
}

/// Open the log folder in the file manager; returns its path (to show beside the button).
#[tauri::command]
pub fn open_log_folder(state: State<'_, AppState>) -> Result<String> {
    let dir = log_dir(&state);
    std::fs::create_dir_all(&dir).map_err(|e| {
        AppError::new(
            "log_folder",
            format!("The log folder {} cannot be made ({e}).", dir.display()),
        )
    })?;
    open_in_file_manager(&dir)?;
    Ok(dir.display().to_string())
}

#[cfg(not(mobile))]
fn open_in_file_manager(dir: &std::path::Path) -> Result<()> {
    let program = if cfg!(target_os = "macos") {
        "open"
    } else if cfg!(windows) {
        "explorer"
    } else {
        "xdg-open"
    };
    // spawned, not waited on: the file manager lives on after this call; a thread reaps it
    let child = std::process::Command::new(program).arg(dir).spawn();
    match child {
        Ok(mut child) => {
            std::thread::spawn(move || child.wait());
            Ok(())
        }
        Err(e) => {
            tracing::warn!(code = "log_folder", program, error = %e, "cannot open the log folder");
            Err(AppError::new(
                "log_folder",
                format!(
                    "The log folder could not be opened ({program}: {e}); it is {}.",
                    dir.display()
                ),
            ))
        }
    }
}

#[cfg(mobile)]
fn open_in_file_manager(dir: &std::path::Path) -> Result<()> {
    Err(AppError::new(
        "log_folder",
        format!(
            "This device cannot open folders from the app; the log is in {}.",
            dir.display()
        ),
    ))
}
