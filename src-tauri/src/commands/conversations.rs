//! The sidebar: list, create, open (switch), rename, pin, delete, search and export. Reads and
//! small writes use the commands' own store connection; opening and creating go through the
//! worker, which owns the engine session.

use memory::{ConversationId, ConversationListItem, Store};
use serde::Serialize;
use tauri::{AppHandle, Runtime, State};
use tauri_plugin_dialog::DialogExt;

use crate::error::{AppError, Result};
use crate::state::AppState;
use crate::views::{ConversationItem, MessageView, SearchHitView};
use crate::worker::Worker;

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OpenedConversation {
    pub conversation: ConversationItem,
    pub messages: Vec<MessageView>,
    pub resume: chat::Resume,
}

const LIST_LIMIT: i64 = 1000;
const SEARCH_LIMIT: i64 = 50;

/// The list row of one conversation.
pub fn item(store: &Store, id: &ConversationId) -> Result<ConversationItem> {
    Ok(row(store.conversation(id)?, &store.messages(id)?))
}

fn row(conversation: memory::Conversation, messages: &[memory::Message]) -> ConversationItem {
    ConversationListItem {
        conversation,
        message_count: messages.len() as i64,
        preview: messages.last().map(|m| m.text.chars().take(120).collect()),
    }
    .into()
}

fn opened(
    worker: &mut Worker,
    resume: chat::Resume,
    id: &ConversationId,
) -> Result<OpenedConversation> {
    worker.shared.set_open(Some(id.clone()));
    let store = worker.manager()?.store();
    let messages = store.messages(id)?;
    Ok(OpenedConversation {
        conversation: row(store.conversation(id)?, &messages),
        messages: messages.iter().map(MessageView::from).collect(),
        resume,
    })
}

#[tauri::command]
pub async fn list_conversations(state: State<'_, AppState>) -> Result<Vec<ConversationItem>> {
    state.with_store(|store| {
        let items = store.list_conversations(0, LIST_LIMIT)?;
        Ok(items.into_iter().map(ConversationItem::from).collect())
    })
}

#[tauri::command]
pub async fn create_conversation(state: State<'_, AppState>) -> Result<OpenedConversation> {
    state
        .shared
        .reply_cancel
        .store(true, std::sync::atomic::Ordering::Relaxed);
    state
        .worker
        .call(|w| {
            let id = w.manager()?.create(chat::manager::NEW_CONVERSATION_TITLE)?;
            opened(w, chat::Resume::Empty, &id)
        })
        .await
}

/// Switch to conversation `id`: a reply still streaming is stopped, the conversation left is
/// snapshotted, and this one resumes from its snapshot (or is prefilled again).
#[tauri::command]
pub async fn open_conversation(
    state: State<'_, AppState>,
    id: String,
) -> Result<OpenedConversation> {
    state
        .shared
        .reply_cancel
        .store(true, std::sync::atomic::Ordering::Relaxed);
    let id = ConversationId(id);
    state
        .worker
        .call(move |w| {
            let resume = w.manager()?.open(&id)?;
            opened(w, resume, &id)
        })
        .await
}

#[tauri::command]
pub async fn rename_conversation(
    state: State<'_, AppState>,
    id: String,
    title: String,
) -> Result<ConversationItem> {
    let title = title.trim();
    if title.is_empty() {
        return Err(AppError::new(
            "invalid_title",
            "A title cannot be empty; type one and press Enter.",
        ));
    }
    let id = ConversationId(id);
    state.with_store(|store| {
        store.rename_conversation(&id, title)?;
        item(store, &id)
    })
}

#[tauri::command]
pub async fn set_pinned(
    state: State<'_, AppState>,
    id: String,
    pinned: bool,
) -> Result<ConversationItem> {
    let id = ConversationId(id);
    state.with_store(|store| {
        store.set_pinned(&id, pinned)?;
        item(store, &id)
    })
}

/// Delete a conversation with its messages, summaries and snapshot. If it is open, its reply
/// is stopped and no conversation is open afterwards.
#[tauri::command]
pub async fn delete_conversation(state: State<'_, AppState>, id: String) -> Result<()> {
    let id = ConversationId(id);
    if state.shared.open().as_ref() == Some(&id) {
        state
            .shared
            .reply_cancel
            .store(true, std::sync::atomic::Ordering::Relaxed);
        let closing = id.clone();
        state
            .worker
            .call(move |w| {
                w.shared.set_open(None);
                if let Some(m) = w.manager.as_mut()
                    && m.open_conversation() == Some(&closing)
                {
                    // nothing to keep: forget the session rather than snapshot it
                    m.engine().reset_session()?;
                    m.close()?;
                }
                Ok(())
            })
            .await?;
    }
    state.with_store(|store| Ok(store.delete_conversation(&id)?))
}

#[tauri::command]
pub async fn search_conversations(
    state: State<'_, AppState>,
    query: String,
) -> Result<Vec<SearchHitView>> {
    state.with_store(|store| {
        let hits = store.search(&query, SEARCH_LIMIT)?;
        Ok(hits.into_iter().map(SearchHitView::from).collect())
    })
}

#[derive(Debug, Clone, Copy, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExportFormat {
    Markdown,
    Json,
}

/// Ask where to save (a native dialog), then write the conversation there. `None`: the user
/// cancelled.
#[tauri::command]
pub async fn export_conversation<R: Runtime>(
    app: AppHandle<R>,
    state: State<'_, AppState>,
    id: String,
    format: ExportFormat,
) -> Result<Option<String>> {
    let id = ConversationId(id);
    let (text, ext, title) = state.with_store(|store| {
        let title = store.conversation(&id)?.title;
        Ok(match format {
            ExportFormat::Markdown => (store.export_markdown(&id)?, "md", title),
            ExportFormat::Json => (store.export_json(&id)?, "json", title),
        })
    })?;
    let (tx, rx) = tokio::sync::oneshot::channel();
    app.dialog()
        .file()
        .set_file_name(format!("{}.{ext}", file_stem(&title)))
        .add_filter(if ext == "md" { "Markdown" } else { "JSON" }, &[ext])
        .save_file(move |picked| {
            let _ = tx.send(picked);
        });
    let Some(picked) = rx.await.ok().flatten() else {
        return Ok(None);
    };
    let path = picked.into_path().map_err(|e| {
        AppError::new(
            "export",
            format!("That place cannot be written to ({e}); choose a folder on this device."),
        )
    })?;
    std::fs::write(&path, text).map_err(|e| {
        AppError::new(
            "export",
            format!("The export could not be written to {} ({e}); check the free space and that the folder is writable.", path.display()),
        )
    })?;
    Ok(Some(path.display().to_string()))
}

/// A file name from a title: letters, digits, spaces and dashes, at most 60 characters.
pub fn file_stem(title: &str) -> String {
    let cleaned: String = title
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || c == ' ' || c == '-' {
                c
            } else {
                ' '
            }
        })
        .collect();
    let words: Vec<&str> = cleaned.split_whitespace().collect();
    let stem: String = words.join(" ").chars().take(60).collect();
    if stem.is_empty() {
        "conversation".into()
    } else {
        stem
    }
}

#[cfg(test)]
mod tests {
    use super::file_stem;

    #[test]
    fn titles_become_safe_file_names() {
        assert_eq!(file_stem("What is 2/3?  Tell me…"), "What is 2 3 Tell me");
        assert_eq!(file_stem("../../etc/passwd"), "etc passwd");
        assert_eq!(file_stem("///"), "conversation");
        assert_eq!(file_stem("滑动窗口"), "滑动窗口");
    }
}
