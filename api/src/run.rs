//! Running one request on the engine, whatever dialect asked for it: queued first-come
//! first-served behind the others (one generation at a time on the engine, which also serves
//! the app), on a blocking thread so the HTTP side never waits on a forward pass, saved when
//! asked, and cancelled when the client goes away — the request's future dropped (a whole
//! reply) or its stream dropped (SSE).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use chat::completion::{ChatRequest, Completer, Completion};
use engine::GenerateParams;
use tokio::sync::mpsc;

use crate::error::ApiError;
use crate::server::ApiState;

/// What one request asks of the engine.
pub(crate) enum Job {
    Chat(ChatRequest),
    Text {
        prompt: String,
        params: GenerateParams,
    },
}

impl Job {
    fn run(
        &self,
        completer: &Completer,
        cancel: &Arc<AtomicBool>,
        on_text: &mut dyn FnMut(&str),
    ) -> chat::Result<Completion> {
        match self {
            Job::Chat(request) => completer.chat(request, cancel, on_text),
            Job::Text { prompt, params } => {
                completer.complete_text(prompt, params.clone(), cancel, on_text)
            }
        }
    }

    fn name(&self) -> &'static str {
        match self {
            Job::Chat(_) => "chat",
            Job::Text { .. } => "text",
        }
    }
}

/// Sets the generation's cancel flag when the request's future or stream is dropped: the
/// client went away, and the engine stops at its next decode step.
pub(crate) struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// What the generation thread sends a stream.
pub(crate) enum Streamed {
    Text(String),
    Done(Result<Completion, ApiError>),
}

/// One request ready to run: the model it found loaded, its job, whether to save it.
pub(crate) struct Run {
    pub state: Arc<ApiState>,
    pub completer: Arc<Completer>,
    pub model: String,
    pub job: Job,
    pub save: bool,
}

impl Run {
    /// Run `job` and save the exchange when asked; the saved conversation's id comes back.
    fn execute(
        &self,
        cancel: &Arc<AtomicBool>,
        on_text: &mut dyn FnMut(&str),
    ) -> Result<(Completion, Option<String>), ApiError> {
        let started = std::time::Instant::now();
        let completion = self.job.run(&self.completer, cancel, on_text)?;
        // counts and timings only: the request's text never goes to the log
        tracing::info!(
            job = self.job.name(),
            prompt_tokens = completion.prompt_tokens,
            completion_tokens = completion.completion_tokens,
            calls = completion.calls.len(),
            finish = ?completion.finish,
            seconds = started.elapsed().as_secs_f64(),
            "api request"
        );
        let mut saved = None;
        if self.save
            && let Job::Chat(request) = &self.job
        {
            let store = self.state.store.as_ref().ok_or_else(|| {
                ApiError::server("this server was started without a database to save to")
            })?;
            // a request that panicked while saving left the connection as SQLite left it: usable
            let store = store.lock().unwrap_or_else(|p| p.into_inner());
            let id = chat::completion::save_exchange(
                &store,
                &self.model,
                &request.messages,
                &completion,
            )?;
            saved = Some(id.to_string());
        }
        Ok((completion, saved))
    }

    /// The whole reply, once it is this request's turn and the engine is done. Dropping the
    /// future (the client hung up) cancels the generation.
    pub(crate) async fn whole(self) -> Result<(Completion, Option<String>), ApiError> {
        let cancel = Arc::new(AtomicBool::new(false));
        let _cancel_on_drop = CancelOnDrop(cancel.clone());
        let Ok(permit) = self.state.queue.clone().acquire_owned().await else {
            return Err(ApiError::server("the server is shutting down"));
        };
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            self.execute(&cancel, &mut |_| {})
        })
        .await
        .unwrap_or_else(|e| Err(ApiError::server(format!("the request failed: {e}"))))
    }

    /// Starts the run in the queue and returns at once: its text pieces and then its end come
    /// on the receiver. Dropping the guard (with the stream that holds it) cancels the run,
    /// waiting or generating.
    pub(crate) fn streamed(self) -> (mpsc::UnboundedReceiver<Streamed>, CancelOnDrop) {
        let (tx, rx) = mpsc::unbounded_channel::<Streamed>();
        let cancel = Arc::new(AtomicBool::new(false));
        let worker_cancel = cancel.clone();
        let queue = self.state.queue.clone();
        tokio::spawn(async move {
            let Ok(permit) = queue.acquire_owned().await else {
                return;
            };
            // the client left while waiting: nothing to run
            if tx.is_closed() || worker_cancel.load(Ordering::Relaxed) {
                return;
            }
            let _ = tokio::task::spawn_blocking(move || {
                let _permit = permit;
                let mut on_text = |t: &str| {
                    if tx.send(Streamed::Text(t.to_string())).is_err() {
                        worker_cancel.store(true, Ordering::Relaxed);
                    }
                };
                let result = self
                    .execute(&worker_cancel, &mut on_text)
                    .map(|(completion, _)| completion);
                let _ = tx.send(Streamed::Done(result));
            })
            .await;
        });
        (rx, CancelOnDrop(cancel))
    }
}
