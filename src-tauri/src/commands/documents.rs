//! Summarize a document the user picked (native dialog) or dropped on the window: the job runs
//! on its own thread with its own store connection and a handle to the engine (whose actor
//! interleaves its requests with chat replies), reports progress over a Channel, and ends by
//! opening a conversation that holds the summary, so the user can ask follow-up questions.
//! Chunk summaries are stored as they are made: a cancelled or crashed job resumes.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use chat::{DocumentJob, DocumentParams, JobProgress};
use memory::{NewMessage, Role, Store};
use serde::Serialize;
use tauri::ipc::Channel;
use tauri::{AppHandle, Runtime, State};
use tauri_plugin_dialog::DialogExt;

use crate::error::{AppError, Result};
use crate::state::AppState;

/// Summary length of each chunk and each combined group (the CLI's default).
const SUMMARY_TOKENS: usize = 128;

#[derive(Debug, Clone, Serialize)]
#[serde(tag = "event", content = "data", rename_all = "camelCase")]
pub enum DocumentEvent {
    #[serde(rename_all = "camelCase")]
    Started {
        file_name: String,
    },
    Progress(JobProgress),
    #[serde(rename_all = "camelCase")]
    Done {
        conversation_id: String,
        title: String,
    },
    Error(AppError),
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DocumentDone {
    pub conversation_id: String,
}

#[tauri::command]
pub async fn summarize_document<R: Runtime>(
    app: AppHandle<R>,
    state: State<'_, AppState>,
    on_event: Channel<DocumentEvent>,
) -> Result<Option<DocumentDone>> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    app.dialog()
        .file()
        .add_filter(
            "Documents",
            &["txt", "md", "markdown", "html", "htm", "pdf"],
        )
        .pick_file(move |picked| {
            let _ = tx.send(picked);
        });
    let Some(picked) = rx.await.ok().flatten() else {
        return Ok(None);
    };
    let path = picked.into_path().map_err(|e| {
        AppError::new(
            "document",
            format!("That file cannot be read from here ({e}); pick a file on this device."),
        )
    })?;
    summarize(&state, path, on_event).await.map(Some)
}

/// `path` must be a file the user dropped on the window.
#[tauri::command]
pub async fn summarize_dropped(
    state: State<'_, AppState>,
    path: String,
    on_event: Channel<DocumentEvent>,
) -> Result<DocumentDone> {
    let path = PathBuf::from(path);
    if !state.is_granted(&path) {
        return Err(AppError::new(
            "not_granted",
            "Companion only reads files you drop on its window or pick yourself; drop the file again or use “Summarize a document…”.",
        ));
    }
    summarize(&state, path, on_event).await
}

#[tauri::command]
pub fn cancel_document(state: State<'_, AppState>) {
    state.shared.document_cancel.store(true, Ordering::Relaxed);
}

async fn summarize(
    state: &AppState,
    path: PathBuf,
    on_event: Channel<DocumentEvent>,
) -> Result<DocumentDone> {
    let engine = state.shared.engine().ok_or_else(AppError::not_ready)?;
    if state.shared.summarizing.swap(true, Ordering::AcqRel) {
        return Err(AppError::new(
            "busy",
            "A document is already being summarized; wait for it or cancel it first.",
        ));
    }
    state.shared.document_cancel.store(false, Ordering::Relaxed);
    let shared = state.shared.clone();
    let database = state.config.database.clone();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let spawned = std::thread::Builder::new()
        .name("companion-document".into())
        .spawn(move || {
            let result = run_job(
                &engine,
                &database,
                &path,
                &shared.document_cancel,
                &on_event,
            );
            shared.summarizing.store(false, Ordering::Release);
            let _ = match &result {
                Ok((done, title)) => on_event.send(DocumentEvent::Done {
                    conversation_id: done.conversation_id.clone(),
                    title: title.clone(),
                }),
                Err(e) => on_event.send(DocumentEvent::Error(e.clone())),
            };
            let _ = tx.send(result.map(|(done, _)| done));
        });
    if let Err(e) = spawned {
        state.shared.summarizing.store(false, Ordering::Release);
        return Err(AppError::new(
            "document",
            format!("The summary could not be started ({e}); try again."),
        ));
    }
    rx.await.map_err(|_| AppError::worker_gone())?
}

fn run_job(
    engine: &engine::EngineHandle,
    database: &Path,
    path: &Path,
    cancel: &std::sync::atomic::AtomicBool,
    on_event: &Channel<DocumentEvent>,
) -> Result<(DocumentDone, String)> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string());
    let _ = on_event.send(DocumentEvent::Started {
        file_name: name.clone(),
    });
    let store = Store::open(database)?.store;
    let job = DocumentJob {
        engine,
        store: &store,
        params: DocumentParams {
            context: engine.info().context,
            summary_tokens: SUMMARY_TOKENS,
            force: false,
        },
        cancel,
    };
    let done = job.run(path, |p| {
        let _ = on_event.send(DocumentEvent::Progress(p.clone()));
    })?;
    let title = format!("Summary of {name}");
    let conversation = store.create_conversation(&title, Some(&name), &serde_json::json!({}))?;
    let ask = format!("Summarize the document “{name}”.");
    for (role, text) in [
        (Role::User, ask.as_str()),
        (Role::Assistant, done.summary.trim()),
    ] {
        let tokens = engine.tokenizer().encode(text, false)?.len() as i64;
        store.append_message(
            &conversation.id,
            &NewMessage::complete(role, text, Some(tokens)),
        )?;
    }
    Ok((
        DocumentDone {
            conversation_id: conversation.id.0,
        },
        title,
    ))
}
