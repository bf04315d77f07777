//! The server: its state, its routes, and running one request on the engine — queued
//! first-come first-served behind the others (one generation at a time on the engine, which
//! also serves the app), on a blocking thread so the HTTP side never waits on a forward pass,
//! cancelled when the client goes away.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::{get, post};
use chat::completion::{ChatRequest, Completer, Completion};
use engine::GenerateParams;
use serde_json::{Value, json};
use tokio::sync::{Semaphore, mpsc};

use crate::error::ApiError;
use crate::reply::{self, ReplyContext};
use crate::request;

/// Request bodies larger than this are refused with 413 (a whole context of text is far
/// smaller; this leaves room for long tool results).
pub const MAX_BODY_BYTES: usize = 2 * 1024 * 1024;

/// The header with which a client asks for its exchange to be kept as a conversation.
pub const SAVE_HEADER: &str = "x-companion-save";
/// The header that answers with the saved conversation's id.
pub const CONVERSATION_HEADER: &str = "x-companion-conversation";

/// Where requests find the model: the CLI serves one model for its whole run; the app's model
/// changes when the user switches or the settings reload it, and is absent while loading.
pub trait CompleterSource: Send + Sync + 'static {
    /// The completer of the model in use now; `None` while no model is loaded.
    fn current(&self) -> Option<Arc<Completer>>;
}

impl CompleterSource for Arc<Completer> {
    fn current(&self) -> Option<Arc<Completer>> {
        Some(self.clone())
    }
}

pub struct ApiState {
    source: Box<dyn CompleterSource>,
    pub(crate) token: String,
    pub(crate) port: u16,
    created: u64,
    /// One generation at a time, in arrival order (tokio's semaphore is fair).
    queue: Arc<Semaphore>,
    /// Where saved exchanges go: the host's connection to its database, opened once by the
    /// host (the app, `companion serve`), never by a request; `None`: saving is refused.
    store: Option<Mutex<memory::Store>>,
    next_id: AtomicU64,
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl ApiState {
    /// `port` is the one the listener is bound to (the `Host` check needs it).
    pub fn new(
        source: impl CompleterSource,
        token: String,
        port: u16,
        store: Option<memory::Store>,
    ) -> Self {
        ApiState {
            source: Box::new(source),
            token,
            port,
            created: unix_now(),
            queue: Arc::new(Semaphore::new(1)),
            store: store.map(Mutex::new),
            next_id: AtomicU64::new(1),
        }
    }

    /// The model's id now, if one is loaded.
    pub fn model_id(&self) -> Option<String> {
        self.source.current().map(|c| model_id(&c))
    }

    /// The model in use, or a 503 saying it is loading.
    fn loaded(&self) -> Result<(Arc<Completer>, String), ApiError> {
        let completer = self
            .source
            .current()
            .ok_or_else(|| ApiError::unavailable("the model is loading; try again in a moment"))?;
        let id = model_id(&completer);
        Ok((completer, id))
    }

    fn reply_context(&self, chat: bool, model: &str) -> ReplyContext {
        let n = self.next_id.fetch_add(1, Ordering::Relaxed);
        let stamp = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0);
        ReplyContext {
            id: format!(
                "{}-{stamp:x}{n:04x}",
                if chat { "chatcmpl" } else { "cmpl" }
            ),
            created: unix_now(),
            model: model.to_string(),
            chat,
        }
    }
}

/// The model's id: its file's name without `.gguf`, as the model library lists it.
fn model_id(completer: &Completer) -> String {
    let info = completer.engine().info();
    info.path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .or_else(|| info.name.clone())
        .unwrap_or_else(|| "gemma".into())
}

pub fn router(state: Arc<ApiState>) -> Router {
    Router::new()
        .route("/v1/models", get(models))
        .route("/v1/models/{id}", get(one_model))
        .route("/v1/chat/completions", post(chat_completions))
        .route("/v1/completions", post(text_completions))
        .fallback(|| async {
            ApiError::not_found(
                "no such endpoint: GET /v1/models, POST /v1/chat/completions, POST /v1/completions",
            )
        })
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::guard::check,
        ))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state)
}

fn model_entry(state: &ApiState, id: &str) -> Value {
    json!({"id": id, "object": "model", "created": state.created, "owned_by": "companion"})
}

async fn models(State(state): State<Arc<ApiState>>) -> Response {
    match state.loaded() {
        Ok((_, id)) => {
            Json(json!({"object": "list", "data": [model_entry(&state, &id)]})).into_response()
        }
        Err(e) => e.into_response(),
    }
}

async fn one_model(State(state): State<Arc<ApiState>>, Path(asked): Path<String>) -> Response {
    match state.loaded() {
        Ok((_, id)) if id == asked => Json(model_entry(&state, &id)).into_response(),
        Ok((_, id)) => ApiError::model_not_found(&asked, &id).into_response(),
        Err(e) => e.into_response(),
    }
}

fn body_bytes(body: Result<Bytes, BytesRejection>) -> Result<Bytes, ApiError> {
    body.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::too_large(MAX_BODY_BYTES)
        } else {
            ApiError::bad_request(format!("the request body could not be read: {rejection}"))
        }
    })
}

/// What one request asks of the engine.
enum Job {
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
struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

fn wants_save(headers: &HeaderMap) -> bool {
    headers
        .get(SAVE_HEADER)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "true" | "1" | "yes"))
}

/// Run `job` and save the exchange when asked; the saved conversation's id comes back.
fn run_and_save(
    state: &ApiState,
    completer: &Completer,
    model: &str,
    job: &Job,
    save: bool,
    cancel: &Arc<AtomicBool>,
    on_text: &mut dyn FnMut(&str),
) -> Result<(Completion, Option<String>), ApiError> {
    let started = std::time::Instant::now();
    let completion = job.run(completer, cancel, on_text)?;
    tracing::info!(
        job = job.name(),
        prompt_tokens = completion.prompt_tokens,
        completion_tokens = completion.completion_tokens,
        calls = completion.calls.len(),
        finish = ?completion.finish,
        seconds = started.elapsed().as_secs_f64(),
        "api request"
    );
    let mut saved = None;
    if save && let Job::Chat(request) = job {
        let store = state.store.as_ref().ok_or_else(|| {
            ApiError::server("this server was started without a database to save to")
        })?;
        // a request that panicked while saving left the connection as SQLite left it: usable
        let store = store.lock().unwrap_or_else(|p| p.into_inner());
        let id = chat::completion::save_exchange(&store, model, &request.messages, &completion)?;
        saved = Some(id.to_string());
    }
    Ok((completion, saved))
}

async fn chat_completions(
    State(state): State<Arc<ApiState>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let call = match body_bytes(body).and_then(|b| request::chat_call(&b)) {
        Ok(call) => call,
        Err(e) => return e.into_response(),
    };
    if let Err(e) = call.request.check() {
        return ApiError::from(e).into_response();
    }
    respond(
        state,
        call.common,
        Job::Chat(call.request),
        wants_save(&headers),
    )
    .await
}

async fn text_completions(
    State(state): State<Arc<ApiState>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let call = match body_bytes(body).and_then(|b| request::text_call(&b)) {
        Ok(call) => call,
        Err(e) => return e.into_response(),
    };
    if wants_save(&headers) {
        return ApiError::unsupported(
            SAVE_HEADER,
            "only chat completions can be saved as conversations",
        )
        .into_response();
    }
    let params = call.common.params.clone();
    respond(
        state,
        call.common,
        Job::Text {
            prompt: call.prompt,
            params,
        },
        false,
    )
    .await
}

async fn respond(state: Arc<ApiState>, common: request::Common, job: Job, save: bool) -> Response {
    let (completer, model) = match state.loaded() {
        Ok(loaded) => loaded,
        Err(e) => return e.into_response(),
    };
    if common.model != model {
        return ApiError::model_not_found(&common.model, &model).into_response();
    }
    if save && state.store.is_none() {
        return ApiError::unsupported(SAVE_HEADER, "this server does not save conversations")
            .into_response();
    }
    let ctx = state.reply_context(matches!(job, Job::Chat(_)), &model);
    if common.stream {
        return stream(state, completer, ctx, job, save);
    }
    let cancel = Arc::new(AtomicBool::new(false));
    let _cancel_on_drop = CancelOnDrop(cancel.clone());
    let Ok(permit) = state.queue.clone().acquire_owned().await else {
        return ApiError::server("the server is shutting down").into_response();
    };
    let worker = state.clone();
    let result = tokio::task::spawn_blocking(move || {
        let _permit = permit;
        run_and_save(
            &worker,
            &completer,
            &model,
            &job,
            save,
            &cancel,
            &mut |_| {},
        )
    })
    .await;
    match result {
        Ok(Ok((completion, saved))) => {
            let mut response = Json(reply::whole(&ctx, &completion)).into_response();
            if let Some(id) = saved.and_then(|id| HeaderValue::from_str(&id).ok()) {
                response.headers_mut().insert(CONVERSATION_HEADER, id);
            }
            response
        }
        Ok(Err(e)) => e.into_response(),
        Err(e) => ApiError::server(format!("the request failed: {e}")).into_response(),
    }
}

/// What the generation thread sends the stream.
enum Streamed {
    Text(String),
    Done(Result<Completion, ApiError>),
}

fn data(v: &Value) -> Event {
    Event::default().data(v.to_string())
}

fn stream(
    state: Arc<ApiState>,
    completer: Arc<Completer>,
    ctx: ReplyContext,
    job: Job,
    save: bool,
) -> Response {
    let (tx, rx) = mpsc::unbounded_channel::<Streamed>();
    let cancel = Arc::new(AtomicBool::new(false));
    let worker_cancel = cancel.clone();
    let queue = state.queue.clone();
    let model = ctx.model.clone();
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
            let result = run_and_save(
                &state,
                &completer,
                &model,
                &job,
                save,
                &worker_cancel,
                &mut on_text,
            )
            .map(|(completion, _)| completion);
            let _ = tx.send(Streamed::Done(result));
        })
        .await;
    });

    let opening: VecDeque<Event> = reply::opening(&ctx).iter().map(data).collect();
    let state0 = (rx, opening, false, ctx, CancelOnDrop(cancel));
    let events = futures_util::stream::unfold(
        state0,
        |(mut rx, mut pending, mut ended, ctx, guard)| async move {
            loop {
                if let Some(event) = pending.pop_front() {
                    return Some((Ok::<_, Infallible>(event), (rx, pending, ended, ctx, guard)));
                }
                if ended {
                    return None;
                }
                match rx.recv().await {
                    Some(Streamed::Text(t)) => {
                        pending.push_back(data(&reply::text_piece(&ctx, &t)))
                    }
                    Some(Streamed::Done(Ok(completion))) => {
                        pending.extend(reply::closing(&ctx, &completion).iter().map(data));
                        pending.push_back(Event::default().data("[DONE]"));
                        ended = true;
                    }
                    Some(Streamed::Done(Err(e))) => {
                        pending.push_back(data(&e.body()));
                        pending.push_back(Event::default().data("[DONE]"));
                        ended = true;
                    }
                    None => {
                        let e = ApiError::server("the generation ended without a result");
                        pending.push_back(data(&e.body()));
                        ended = true;
                    }
                }
            }
        },
    );
    Sse::new(events)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(10)))
        .into_response()
}
