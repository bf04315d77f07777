//! Companion's local API: an OpenAI- and Anthropic-compatible HTTP server over the model
//! Companion runs, so that the user's editor, scripts and other tools can use it (as Jan,
//! LM Studio and Ollama offer). It listens on 127.0.0.1 only, answers only requests carrying its token, refuses
//! other web origins, and runs every request on an engine session of its own
//! ([`chat::completion`]), never the open conversation's.
//!
//! - [`token`]: the bearer token, made once and kept private;
//! - [`guard`]: the `Host`, `Origin` and token checks every request passes;
//! - [`request`] / [`reply`]: OpenAI's bodies read and written, unsupported parameters refused;
//! - [`anthropic`]: Anthropic's Messages API, its bodies, events and errors;
//! - [`server`]: state, routes and OpenAI's handlers;
//! - `run` / `sse`: the queue, the blocking thread and cancelling on disconnect, and streams as
//!   server-sent events — shared by both dialects.
//!
//! Endpoints: `GET /v1/models`, `GET /v1/models/{id}`, `POST /v1/chat/completions`,
//! `POST /v1/completions`, `POST /v1/messages`, `POST /v1/messages/count_tokens`. Exchanges
//! are saved as conversations only when the request sends `X-Companion-Save: true`.

pub mod anthropic;
mod error;
mod guard;
mod picture;
pub mod reply;
pub mod request;
mod run;
pub mod server;
mod sse;
pub mod token;

use std::future::Future;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

pub use error::ApiError;
pub use server::{
    ApiState, CONVERSATION_HEADER, CompleterSource, MAX_BODY_BYTES, SAVE_HEADER, router,
};
pub use token::{TokenSource, load_or_create, token_path};

/// The default port (`companion serve --port`).
pub const DEFAULT_PORT: u16 = 7878;

/// Bind 127.0.0.1:`port` (0: a free port); never another interface.
pub async fn bind(port: u16) -> std::io::Result<(tokio::net::TcpListener, SocketAddr)> {
    let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, port)).await?;
    let addr = listener.local_addr()?;
    Ok((listener, addr))
}

/// Serve on `listener` until `shutdown` completes.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: Arc<ApiState>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router(state))
        .with_graceful_shutdown(shutdown)
        .await
}
