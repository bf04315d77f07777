//! Anthropic's Messages API beside OpenAI's, on the same server, token, guards, queue and
//! engine sessions: programs written for Anthropic's API (as llama.cpp, Ollama, LM Studio and
//! Jan serve it) work against the local model. Only the spelling differs; what a request asks
//! is the same [`ChatRequest`], run by [`crate::run`] as the OpenAI routes run theirs.
//!
//! - [`request`] / [`reply`]: the bodies read and written;
//! - `stream`: the named SSE events of a streamed Message;
//! - `error`: `{"type": "error", "error": {"type", "message"}}` for everything on these routes,
//!   the guard's refusals included.
//!
//! Endpoints: `POST /v1/messages` (whole or `"stream": true`) and
//! `POST /v1/messages/count_tokens`. The `anthropic-version` header is accepted and not
//! required: there is one version of this dialect here.

mod error;
mod partial;
pub mod reply;
pub mod request;
mod stream;

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Json, Response};
use chat::completion::{ChatRequest, Completer};
use serde_json::json;

use self::error::AnthropicError;
use self::reply::MessageContext;
use self::stream::AnthropicStream;
use crate::error::ApiError;
use crate::run::{Job, Run};
use crate::server::{ApiState, body_bytes, wants_save, with_conversation};
use crate::sse;

/// Whether `path` is one of Anthropic's routes, whose errors are written in its shape.
fn is_anthropic(path: &str) -> bool {
    path == "/v1/messages" || path.starts_with("/v1/messages/")
}

/// `e` answered in the dialect of the route at `path` (for refusals made before a handler
/// runs: the guard's, an unknown path's).
pub(crate) fn in_dialect(path: &str, e: ApiError) -> Response {
    if is_anthropic(path) {
        AnthropicError(e).into_response()
    } else {
        e.into_response()
    }
}

/// The prompt's size, counted off the async runtime (tokenizing a long prompt is real work).
async fn prompt_tokens(
    completer: &Arc<Completer>,
    request: &ChatRequest,
) -> Result<usize, ApiError> {
    let completer = completer.clone();
    let request = request.clone();
    tokio::task::spawn_blocking(move || completer.prompt_tokens(&request))
        .await
        .map_err(|e| ApiError::server(format!("counting the prompt failed: {e}")))?
        .map_err(ApiError::from)
}

/// `POST /v1/messages`.
pub(crate) async fn messages(
    State(state): State<Arc<ApiState>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    match message(state, &headers, body).await {
        Ok(response) => response,
        Err(e) => e.into_response(),
    }
}

async fn message(
    state: Arc<ApiState>,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, AnthropicError> {
    let mut call = request::messages_call(&body_bytes(body)?)?;
    call.request.params.speculation = state.speculation;
    call.request.check()?;
    let save = wants_save(headers);
    let (completer, model) = state.ready(&call.model, save)?;
    let ctx = MessageContext {
        id: format!("msg_{}", state.next_id()),
        model: model.clone(),
        max_tokens: call.request.params.max_tokens,
    };
    // a stream's `message_start` names the input tokens before anything runs; counting first
    // also refuses a prompt longer than the context with a 400, not with an error event
    let input_tokens = match call.stream {
        true => Some(fitting_prompt(&completer, &call.request).await?),
        false => None,
    };
    let run = Run {
        state,
        completer,
        model,
        job: Job::Chat(call.request),
        save,
    };
    if let Some(input_tokens) = input_tokens {
        let (rx, guard) = run.streamed();
        return Ok(sse::sse(rx, guard, AnthropicStream::new(ctx, input_tokens)));
    }
    let (completion, saved) = run.whole().await?;
    Ok(with_conversation(
        Json(reply::whole(&ctx, &completion)).into_response(),
        saved,
    ))
}

/// The prompt's size, refused as the engine refuses it when the context cannot hold it.
async fn fitting_prompt(
    completer: &Arc<Completer>,
    request: &ChatRequest,
) -> Result<usize, ApiError> {
    let tokens = prompt_tokens(completer, request).await?;
    let context = completer.engine().info().context;
    if tokens >= context {
        let too_long = engine::Error::PromptTooLong { tokens, context };
        return Err(chat::Error::from(too_long).into());
    }
    Ok(tokens)
}

/// `POST /v1/messages/count_tokens`: `{"input_tokens": N}`, the prompt `/v1/messages` would
/// build from the same fields.
pub(crate) async fn count_tokens(
    State(state): State<Arc<ApiState>>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    match count(&state, body).await {
        Ok(n) => Json(json!({"input_tokens": n})).into_response(),
        Err(e) => AnthropicError(e).into_response(),
    }
}

async fn count(state: &ApiState, body: Result<Bytes, BytesRejection>) -> Result<usize, ApiError> {
    let (model, request) = request::count_call(&body_bytes(body)?)?;
    let (completer, _) = state.ready(&model, false)?;
    prompt_tokens(&completer, &request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_messages_routes_speak_anthropic() {
        assert!(is_anthropic("/v1/messages"));
        assert!(is_anthropic("/v1/messages/count_tokens"));
        assert!(is_anthropic("/v1/messages/nope"));
        assert!(!is_anthropic("/v1/chat/completions"));
        assert!(!is_anthropic("/v1/messagesx"));
    }
}
