//! The settings panel's Sync section: the folder this device syncs through (picked with the
//! native folder picker; on an iPhone, the app's own iCloud Drive folder), what the last round
//! did, "Sync now" and "Stop syncing". The rounds themselves run on the sync thread
//! ([`crate::sync_watch`]).

use std::path::PathBuf;

use tauri::{AppHandle, Runtime, State};

use crate::error::{AppError, Result};
use crate::state::AppState;
use crate::sync_watch::SyncView;

fn watch(state: &AppState) -> Result<&crate::sync_watch::SyncWatch> {
    state.sync.as_ref().ok_or_else(|| {
        AppError::new(
            "sync_unavailable",
            "Sync could not start on this device; the log says why.",
        )
    })
}

#[tauri::command]
pub fn sync_status(state: State<'_, AppState>) -> Result<SyncView> {
    Ok(watch(&state)?.view())
}

/// Where to sync: on an iPhone, the app's folder in iCloud Drive (it is what the user
/// expects, and a folder picked elsewhere is reached only through a bookmark); elsewhere, a
/// folder the user picks (on a Mac, one in iCloud Drive keeps their devices together).
#[cfg(target_os = "ios")]
async fn sync_folder<R: Runtime>(app: &AppHandle<R>) -> Result<Option<PathBuf>> {
    use companion_mobile::MobileExt;
    match app.mobile().ubiquity_container() {
        Ok(Some(path)) => Ok(Some(path)),
        Ok(None) => Err(AppError::new(
            "icloud_off",
            "iCloud Drive is off for Companion; turn it on in Settings › your name › iCloud, then try again.",
        )),
        Err(e) => Err(AppError::new(
            e.code(),
            crate::error::sentence(&e.to_string()),
        )),
    }
}

#[cfg(not(target_os = "ios"))]
async fn sync_folder<R: Runtime>(app: &AppHandle<R>) -> Result<Option<PathBuf>> {
    use tauri_plugin_dialog::DialogExt;
    if let Some(path) = std::env::var_os(super::agent::PICKED_FOLDER_ENV) {
        return Ok(Some(PathBuf::from(path)));
    }
    let (tx, rx) = tokio::sync::oneshot::channel();
    app.dialog()
        .file()
        .set_title("Choose the folder your devices share (for example one in iCloud Drive)")
        .pick_folder(move |picked| {
            let _ = tx.send(picked);
        });
    match rx.await.ok().flatten() {
        Some(picked) => Ok(Some(picked.into_path().map_err(|e| {
            AppError::new(
                "folder",
                format!("That folder cannot be used from here ({e}); pick one on this device."),
            )
        })?)),
        None => Ok(None),
    }
}

/// Choose the sync folder and start syncing with it; `None` when the user cancelled.
#[tauri::command]
pub async fn choose_sync_folder<R: Runtime>(
    app: AppHandle<R>,
    state: State<'_, AppState>,
) -> Result<Option<SyncView>> {
    let Some(folder) = sync_folder(&app).await? else {
        return Ok(None);
    };
    let folder = std::fs::canonicalize(&folder).map_err(|e| {
        AppError::new(
            "folder",
            format!("{} cannot be opened: {e}.", folder.display()),
        )
    })?;
    if !folder.is_dir() {
        return Err(AppError::new(
            "folder",
            format!("{} is not a folder.", folder.display()),
        ));
    }
    // the data folder holds the database itself: syncing into it would mix the two
    if let Some(data) = state.config.database.parent()
        && std::fs::canonicalize(data).is_ok_and(|d| folder.starts_with(&d))
    {
        return Err(AppError::new(
            "folder",
            "That is Companion's own data folder; choose a folder your devices share.",
        ));
    }
    state.with_store(|s| Ok(s.set_sync_folder(Some(&folder))?))?;
    let watch = watch(&state)?;
    watch.sync_now();
    Ok(Some(watch.view()))
}

/// Stop syncing (the folder's files stay; choosing it again continues where it left off).
#[tauri::command]
pub fn stop_sync(state: State<'_, AppState>) -> Result<SyncView> {
    state.with_store(|s| Ok(s.set_sync_folder(None)?))?;
    let watch = watch(&state)?;
    watch.sync_now();
    Ok(watch.view())
}

#[tauri::command]
pub fn sync_now(state: State<'_, AppState>) -> Result<()> {
    watch(&state)?.sync_now();
    Ok(())
}
