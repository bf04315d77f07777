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
    let cancel = state.shared.document_cancel.clone();
    let started = on_job_thread(shared, on_event, move |on_event| {
        run_job(&engine, &database, &path, &cancel, on_event)
    });
    match started {
        Ok(rx) => rx.await.map_err(|_| AppError::worker_gone())?,
        Err(e) => {
            state.shared.summarizing.store(false, Ordering::Release);
            Err(AppError::new(
                "document",
                format!("The summary could not be started ({e}); try again."),
            ))
        }
    }
}

type JobResult = Result<(DocumentDone, String)>;

/// Run `job` on a thread of its own; whatever way it ends — done, failed, or panicked (a bug
/// in an extractor, say) — the "summarizing" flag is cleared and the webview gets an event
/// that says so, so a bug in one document never leaves the app refusing the next one.
fn on_job_thread(
    shared: std::sync::Arc<crate::shared::Shared>,
    on_event: Channel<DocumentEvent>,
    job: impl FnOnce(&Channel<DocumentEvent>) -> JobResult + Send + 'static,
) -> std::io::Result<tokio::sync::oneshot::Receiver<Result<DocumentDone>>> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("companion-document".into())
        .spawn(move || {
            let result = logging::catch_panic(|| job(&on_event)).unwrap_or_else(|panic| {
                tracing::error!(
                    code = "document_panic",
                    panic = %panic.message,
                    "a document job panicked"
                );
                Err(AppError::new(
                    "document_panic",
                    "Companion met an internal error while summarizing this document and stopped the summary; the summaries made so far are kept. The details are in the log (Settings → Open log folder).",
                ))
            });
            shared.summarizing.store(false, Ordering::Release);
            let _ = match &result {
                Ok((done, title)) => on_event.send(DocumentEvent::Done {
                    conversation_id: done.conversation_id.clone(),
                    title: title.clone(),
                }),
                Err(e) => {
                    if e.code != "cancelled" {
                        tracing::warn!(code = %e.code, "the document was not summarized");
                    }
                    on_event.send(DocumentEvent::Error(e.clone()))
                }
            };
            let _ = tx.send(result.map(|(done, _)| done));
        })?;
    Ok(rx)
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
            ..DocumentParams::default()
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

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tauri::ipc::InvokeResponseBody;

    use super::*;
    use crate::shared::Shared;

    fn recorder() -> (Channel<DocumentEvent>, Arc<Mutex<Vec<String>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let into = seen.clone();
        let channel = Channel::new(move |body| {
            if let InvokeResponseBody::Json(json) = body {
                into.lock().unwrap().push(json);
            }
            Ok(())
        });
        (channel, seen)
    }

    /// Today's bug: a panicking job left "summarizing" set forever (every later document was
    /// refused as "busy") and the command answered "The engine stopped".
    #[test]
    fn a_panicking_job_clears_the_flag_and_reports_a_clear_error() {
        let shared = Arc::new(Shared::default());
        shared.summarizing.store(true, Ordering::Release);
        let (channel, events) = recorder();
        let rx = on_job_thread(shared.clone(), channel, |_| -> JobResult {
            panic!("a bug in an extractor")
        })
        .unwrap();
        let err = rx.blocking_recv().expect("the job answered").unwrap_err();
        assert_eq!(err.code, "document_panic", "{err}");
        assert!(!shared.summarizing.load(Ordering::Acquire));
        let events = events.lock().unwrap();
        assert_eq!(events.len(), 1, "{events:?}");
        assert!(events[0].contains(r#""event":"error""#), "{events:?}");
        assert!(events[0].contains("document_panic"), "{events:?}");
    }

    #[test]
    fn a_finished_job_clears_the_flag_and_reports_done() {
        let shared = Arc::new(Shared::default());
        shared.summarizing.store(true, Ordering::Release);
        let (channel, events) = recorder();
        let rx = on_job_thread(shared.clone(), channel, |_| -> JobResult {
            Ok((
                DocumentDone {
                    conversation_id: "c".into(),
                },
                "Summary of x".into(),
            ))
        })
        .unwrap();
        assert_eq!(rx.blocking_recv().unwrap().unwrap().conversation_id, "c");
        assert!(!shared.summarizing.load(Ordering::Acquire));
        assert!(events.lock().unwrap()[0].contains(r#""event":"done""#));
    }
}
