//! The server: its state, its routes, and OpenAI's endpoints on them (the Anthropic ones are
//! in [`crate::anthropic`]); running a request on the engine is [`crate::run`]'s.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::sse::Event;
use axum::response::{IntoResponse, Json, Response};
use axum::routing::{get, post};
use chat::completion::{Completer, Completion};
use serde_json::{Value, json};
use tokio::sync::Semaphore;

use crate::error::ApiError;
use crate::reply::{self, ReplyContext};
use crate::run::{Job, Run};
use crate::sse::{self, StreamWriter};
use crate::{anthropic, request};

/// Request bodies larger than this are refused with 413: room for a few pictures in base64
/// (a phone's photo is 2-8 MB; a whole context of text is far smaller).
pub const MAX_BODY_BYTES: usize = 48 * 1024 * 1024;

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
    pub(crate) queue: Arc<Semaphore>,
    /// Where saved exchanges go: the host's connection to its database, opened once by the
    /// host (the app, `companion serve`), never by a request; `None`: saving is refused.
    pub(crate) store: Option<Mutex<memory::Store>>,
    next_id: AtomicU64,
    /// Whether generations speculate (`companion serve --speculate`); the same output either
    /// way, so no request asks.
    pub(crate) speculation: engine::Speculation,
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
            speculation: engine::Speculation::default(),
        }
    }

    /// Speculate as `speculation` says in every generation (the default: the engine's).
    pub fn with_speculation(mut self, speculation: engine::Speculation) -> Self {
        self.speculation = speculation;
        self
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

    /// The model, when it is the one `asked` for and a save, if asked, can be kept.
    pub(crate) fn ready(
        &self,
        asked: &str,
        save: bool,
    ) -> Result<(Arc<Completer>, String), ApiError> {
        let (completer, model) = self.loaded()?;
        if asked != model {
            return Err(ApiError::model_not_found(asked, &model));
        }
        if save && self.store.is_none() {
            return Err(ApiError::unsupported(
                SAVE_HEADER,
                "this server does not save conversations",
            ));
        }
        Ok((completer, model))
    }

    /// A reply id unique to this server's run: the time, then a counter.
    pub(crate) fn next_id(&self) -> String {
        let n = self.next_id.fetch_add(1, Ordering::Relaxed);
        let stamp = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0);
        format!("{stamp:x}{n:04x}")
    }

    fn reply_context(&self, chat: bool, model: &str) -> ReplyContext {
        ReplyContext {
            id: format!(
                "{}-{}",
                if chat { "chatcmpl" } else { "cmpl" },
                self.next_id()
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
        .route("/v1/messages", post(anthropic::messages))
        .route("/v1/messages/count_tokens", post(anthropic::count_tokens))
        .fallback(|uri: axum::http::Uri| async move {
            let e = ApiError::not_found(
                "no such endpoint: GET /v1/models, POST /v1/chat/completions, POST /v1/completions, POST /v1/messages, POST /v1/messages/count_tokens",
            );
            anthropic::in_dialect(uri.path(), e)
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

pub(crate) fn body_bytes(body: Result<Bytes, BytesRejection>) -> Result<Bytes, ApiError> {
    body.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::too_large(MAX_BODY_BYTES)
        } else {
            ApiError::bad_request(format!("the request body could not be read: {rejection}"))
        }
    })
}

pub(crate) fn wants_save(headers: &HeaderMap) -> bool {
    headers
        .get(SAVE_HEADER)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "true" | "1" | "yes"))
}

async fn chat_completions(
    State(state): State<Arc<ApiState>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let mut call = match body_bytes(body).and_then(|b| request::chat_call(&b)) {
        Ok(call) => call,
        Err(e) => return e.into_response(),
    };
    call.request.params.speculation = state.speculation;
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
    let params = engine::GenerateParams {
        speculation: state.speculation,
        ..call.common.params.clone()
    };
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
    let (completer, model) = match state.ready(&common.model, save) {
        Ok(ready) => ready,
        Err(e) => return e.into_response(),
    };
    let ctx = state.reply_context(matches!(job, Job::Chat(_)), &model);
    let run = Run {
        state,
        completer,
        model,
        job,
        save,
    };
    if common.stream {
        let (rx, guard) = run.streamed();
        return sse::sse(rx, guard, OpenAiStream(ctx));
    }
    match run.whole().await {
        Ok((completion, saved)) => {
            with_conversation(Json(reply::whole(&ctx, &completion)).into_response(), saved)
        }
        Err(e) => e.into_response(),
    }
}

/// A whole reply with the id of the conversation it was saved as, if it was.
pub(crate) fn with_conversation(mut response: Response, saved: Option<String>) -> Response {
    if let Some(id) = saved.and_then(|id| HeaderValue::from_str(&id).ok()) {
        response.headers_mut().insert(CONVERSATION_HEADER, id);
    }
    response
}

fn data(v: &Value) -> Event {
    Event::default().data(v.to_string())
}

/// OpenAI's chunks: unnamed `data:` events, ending with `data: [DONE]`.
struct OpenAiStream(ReplyContext);

impl StreamWriter for OpenAiStream {
    fn opening(&mut self) -> Vec<Event> {
        reply::opening(&self.0).iter().map(data).collect()
    }

    fn text(&mut self, piece: &str) -> Vec<Event> {
        vec![data(&reply::text_piece(&self.0, piece))]
    }

    fn done(&mut self, result: Result<Completion, ApiError>) -> Vec<Event> {
        let mut out: Vec<Event> = match result {
            Ok(completion) => reply::closing(&self.0, &completion)
                .iter()
                .map(data)
                .collect(),
            Err(e) => vec![data(&e.body())],
        };
        out.push(Event::default().data("[DONE]"));
        out
    }
}
