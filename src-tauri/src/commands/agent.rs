//! The agent's panels: the folders the user granted (picked with the native folder picker,
//! read-only or "may write", revoked), the notes and reminders the tools keep, the Activity
//! log of every call, the per-conversation Tools switch, and the answer to a write waiting for
//! approval. Reads and small writes use the commands' own store connection; the tools
//! themselves run on the chat worker, in the turn ([`super::chat`]).

use std::path::{Path, PathBuf};

use agent::ApprovalAnswer;
use memory::{
    ConversationId, FolderGrant, GrantMode, Note, NoteId, Reminder, ReminderId, ToolCallRecord,
};
use serde::Serialize;
use tauri::{AppHandle, Runtime, State};
#[cfg(not(target_os = "ios"))]
use tauri_plugin_dialog::DialogExt;

use crate::error::{AppError, Result};
use crate::state::AppState;

/// For automated tests only: the folder picker answers with this folder instead of opening
/// (WebDriver cannot reach a native dialog). Set by whoever starts the app, never by the
/// webview, so it grants nothing the user's own environment did not name.
pub const PICKED_FOLDER_ENV: &str = "COMPANION_E2E_PICKED_FOLDER";

const LIST_LIMIT: i64 = 500;

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FolderView {
    pub path: String,
    /// The folder's own name, for the list.
    pub name: String,
    /// `read` or `write`.
    pub mode: GrantMode,
    pub added_at: i64,
    /// The folder is there (a grant of an unplugged disk stays, shown as missing; on iOS, a
    /// folder whose access the user revoked in Files).
    pub available: bool,
    /// Why it is not, when it is not.
    pub unavailable_reason: Option<String>,
}

impl FolderView {
    /// The grant as the panel shows it, located as the tools would locate it.
    fn of(
        store: &memory::Store,
        g: FolderGrant,
        bookmarks: Option<&dyn chat::tools::BookmarkResolver>,
    ) -> Self {
        let located = chat::tools::locate_grant(store, &g, bookmarks);
        let path = Path::new(&g.path);
        FolderView {
            name: path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| g.path.clone()),
            available: located.is_ok(),
            unavailable_reason: located.err(),
            path: g.path,
            mode: g.mode,
            added_at: g.added_at,
        }
    }
}

fn mode(may_write: bool) -> GrantMode {
    if may_write {
        GrantMode::Write
    } else {
        GrantMode::Read
    }
}

#[tauri::command]
pub async fn list_folders(state: State<'_, AppState>) -> Result<Vec<FolderView>> {
    let platform = state.shared.platform_tools();
    state.with_store(|s| {
        Ok(s.folder_grants()?
            .into_iter()
            .map(|g| FolderView::of(s, g, platform.bookmarks.as_deref()))
            .collect())
    })
}

/// A folder the user picked: its path and, on iOS, its security-scoped bookmark.
type Picked = (PathBuf, Option<Vec<u8>>);

/// The native folder picker (GTK, AppKit).
#[cfg(not(target_os = "ios"))]
async fn pick_folder<R: Runtime>(app: &AppHandle<R>) -> Result<Option<Picked>> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    app.dialog()
        .file()
        .set_title("Choose a folder Companion may look in")
        .pick_folder(move |picked| {
            let _ = tx.send(picked);
        });
    match rx.await.ok().flatten() {
        Some(picked) => Ok(Some((
            picked.into_path().map_err(|e| {
                AppError::new(
                    "folder",
                    format!("That folder cannot be used from here ({e}); pick one on this device."),
                )
            })?,
            None,
        ))),
        None => Ok(None),
    }
}

/// iOS's document picker, through the mobile plugin: the folder comes with the bookmark that
/// is the only way to reach it again.
#[cfg(target_os = "ios")]
async fn pick_folder<R: Runtime>(app: &AppHandle<R>) -> Result<Option<Picked>> {
    use companion_mobile::MobileExt;
    let app = app.clone();
    // the plugin waits for the user's answer: not on an async worker thread
    let picked = tauri::async_runtime::spawn_blocking(move || app.mobile().pick_folder())
        .await
        .map_err(|e| AppError::new("folder", format!("The folder picker failed: {e}.")))?
        .map_err(|e| AppError::new(e.code(), crate::error::sentence(&e.to_string())))?;
    Ok(picked.map(|p| (p.path, Some(p.bookmark))))
}

/// Grant a folder the user picks in the native folder picker; `None` when they cancelled.
/// A folder inside Companion's own data cannot be granted (the sandbox's rule, checked here).
#[tauri::command]
pub async fn add_folder<R: Runtime>(
    app: AppHandle<R>,
    state: State<'_, AppState>,
    may_write: bool,
) -> Result<Option<FolderView>> {
    let picked = match std::env::var_os(PICKED_FOLDER_ENV) {
        Some(path) => Some((PathBuf::from(path), None)),
        None => pick_folder(&app).await?,
    };
    let Some((path, bookmark)) = picked else {
        return Ok(None);
    };
    let path = std::fs::canonicalize(&path).map_err(|e| {
        AppError::new(
            "folder",
            format!("{} cannot be opened: {e}.", path.display()),
        )
    })?;
    if !path.is_dir() {
        return Err(AppError::new(
            "folder",
            format!("{} is not a folder.", path.display()),
        ));
    }
    // the sandbox's own rules decide (a folder inside Companion's data is refused), so the
    // panel never keeps a grant the tools would then refuse
    let spec = agent::GrantSpec {
        path: path.clone(),
        mode: if may_write {
            agent::GrantMode::MayWrite
        } else {
            agent::GrantMode::ReadOnly
        },
    };
    agent::Sandbox::new(&[spec], &chat::tools::private_paths(&state.config.database)).map_err(
        |e| match e {
            agent::Error::BadGrant { problem, .. } => AppError::new(
                "bad_grant",
                format!("That folder cannot be granted: {problem}. Choose another one."),
            ),
            e => AppError::new(e.code(), crate::error::sentence(&e.to_string())),
        },
    )?;
    let path = path.to_string_lossy().into_owned();
    tracing::info!(may_write, bookmark = bookmark.is_some(), "folder granted");
    let platform = state.shared.platform_tools();
    state
        .with_store(|s| {
            let g = s.grant_folder_with(&path, mode(may_write), bookmark.as_deref())?;
            Ok(FolderView::of(s, g, platform.bookmarks.as_deref()))
        })
        .map(Some)
}

/// Make a granted folder read-only, or let the agent write there (each write still asks).
#[tauri::command]
pub async fn set_folder_mode(
    state: State<'_, AppState>,
    path: String,
    may_write: bool,
) -> Result<FolderView> {
    let known = state.with_store(|s| Ok(s.folder_grants()?))?;
    if !known.iter().any(|g| g.path == path) {
        return Err(AppError::new("not_granted", "That folder is not granted."));
    }
    let platform = state.shared.platform_tools();
    state.with_store(|s| {
        let g = s.grant_folder(&path, mode(may_write))?;
        Ok(FolderView::of(s, g, platform.bookmarks.as_deref()))
    })
}

#[tauri::command]
pub async fn revoke_folder(state: State<'_, AppState>, path: String) -> Result<bool> {
    tracing::info!("folder revoked");
    state.with_store(|s| Ok(s.revoke_folder(&path)?))
}

#[tauri::command]
pub async fn list_notes(state: State<'_, AppState>) -> Result<Vec<Note>> {
    state.with_store(|s| Ok(s.notes(0, LIST_LIMIT)?))
}

#[tauri::command]
pub async fn delete_note(state: State<'_, AppState>, id: i64) -> Result<bool> {
    state.with_store(|s| Ok(s.delete_note(NoteId(id))?))
}

#[tauri::command]
pub async fn list_reminders(state: State<'_, AppState>) -> Result<Vec<Reminder>> {
    state.with_store(|s| Ok(s.reminders(true, LIST_LIMIT)?))
}

#[tauri::command]
pub async fn complete_reminder(state: State<'_, AppState>, id: i64) -> Result<()> {
    state.with_store(|s| Ok(s.complete_reminder(ReminderId(id))?))
}

#[tauri::command]
pub async fn delete_reminder(state: State<'_, AppState>, id: i64) -> Result<bool> {
    state.with_store(|s| Ok(s.delete_reminder(ReminderId(id))?))
}

/// The reminders that fell due since the window last asked: the app's reminder watch
/// ([`crate::reminders`]) marked them shown and showed them on the desktop; the window shows
/// each one as a notice.
#[tauri::command]
pub fn due_reminders(state: State<'_, AppState>) -> Vec<Reminder> {
    state.shared.take_due_reminders()
}

/// The audit log, newest first: every call the agent made or tried; of one conversation
/// when `conversation_id` is given.
#[tauri::command]
pub async fn list_activity(
    state: State<'_, AppState>,
    conversation_id: Option<String>,
) -> Result<Vec<ToolCallRecord>> {
    let conversation = conversation_id.map(ConversationId);
    state.with_store(|s| Ok(s.tool_calls(conversation.as_ref(), 0, LIST_LIMIT)?))
}

#[tauri::command]
pub async fn clear_activity(state: State<'_, AppState>) -> Result<usize> {
    state.with_store(|s| Ok(s.clear_tool_calls()?))
}

/// The user's answer to the write waiting for approval: `yes`, `no`, or `conversation`
/// (yes, and for the rest of this conversation). `false` when nothing was waiting.
#[tauri::command]
pub fn answer_approval(state: State<'_, AppState>, answer: String) -> Result<bool> {
    let answer = match answer.as_str() {
        "yes" => ApprovalAnswer::Yes,
        "no" => ApprovalAnswer::No,
        "conversation" => ApprovalAnswer::YesForConversation,
        other => {
            return Err(AppError::new(
                "invalid_argument",
                format!("`{other}` is not an answer (yes, no or conversation)."),
            ));
        }
    };
    Ok(state.shared.approval.answer(answer))
}

/// Turn the agent's tools on or off for conversation `id` (kept in its settings).
#[tauri::command]
pub async fn set_conversation_tools(
    state: State<'_, AppState>,
    id: String,
    enabled: bool,
) -> Result<()> {
    let id = ConversationId(id);
    state.with_store(|s| {
        let mut settings = s.conversation(&id)?.settings;
        set_tools(&mut settings, enabled);
        Ok(s.set_settings(&id, &settings)?)
    })
}

/// Whether a conversation's settings have the tools on.
pub fn tools_enabled(settings: &serde_json::Value) -> bool {
    settings
        .get("tools")
        .and_then(|v| v.as_bool())
        .unwrap_or(false)
}

pub fn set_tools(settings: &mut serde_json::Value, enabled: bool) {
    if !settings.is_object() {
        *settings = serde_json::json!({});
    }
    settings["tools"] = serde_json::Value::Bool(enabled);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tools_switch_lives_in_the_conversations_settings() {
        let mut s = serde_json::json!({"systemPrompt": "x"});
        assert!(!tools_enabled(&s));
        set_tools(&mut s, true);
        assert!(tools_enabled(&s));
        assert_eq!(s["systemPrompt"], "x");
        let mut odd = serde_json::json!("not an object");
        set_tools(&mut odd, true);
        assert!(tools_enabled(&odd));
    }
}
