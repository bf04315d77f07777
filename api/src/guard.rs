//! What every request passes before a handler sees it: addressed to this loopback server
//! (the `Host` check that stops DNS rebinding: a web page whose name resolves to 127.0.0.1
//! still sends its own name), not from another web origin (no CORS: a browser page cannot
//! read our answers or send credentials), and carrying the token — as OpenAI's clients send it
//! (`Authorization: Bearer`) or Anthropic's (`x-api-key`). A refusal is written in the dialect
//! of the route it was for.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::HeaderMap;
use axum::http::header::{AUTHORIZATION, HOST, HeaderName, ORIGIN};
use axum::middleware::Next;
use axum::response::Response;

use crate::error::ApiError;
use crate::server::ApiState;
use crate::token::same_token;

/// The names this server answers to: loopback only.
fn local_authorities(port: u16) -> [String; 3] {
    [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        format!("[::1]:{port}"),
    ]
}

/// Anthropic's header for the API key.
const API_KEY: &str = "x-api-key";

pub(crate) fn host_allowed(host: Option<&str>, port: u16) -> bool {
    host.is_some_and(|h| {
        local_authorities(port)
            .iter()
            .any(|a| a.eq_ignore_ascii_case(h))
    })
}

pub(crate) fn origin_allowed(origin: Option<&str>, port: u16) -> bool {
    match origin {
        None => true,
        Some(o) => local_authorities(port)
            .iter()
            .any(|a| o.eq_ignore_ascii_case(&format!("http://{a}"))),
    }
}

pub(crate) fn bearer(value: Option<&str>) -> Option<&str> {
    let v = value?.trim();
    let (scheme, token) = v.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// What the headers say, read before the request moves on.
fn verdict(state: &ApiState, headers: &HeaderMap) -> Result<(), ApiError> {
    let header = |name: HeaderName| headers.get(name).and_then(|v| v.to_str().ok());
    if !host_allowed(header(HOST), state.port) {
        return Err(ApiError::forbidden(format!(
            "this server answers requests to 127.0.0.1:{} only",
            state.port
        )));
    }
    if !origin_allowed(header(ORIGIN), state.port) {
        return Err(ApiError::forbidden(
            "requests from web pages of other origins are refused",
        ));
    }
    // either header may carry it: a client sends the one its dialect names
    let given = [
        bearer(header(AUTHORIZATION)),
        header(HeaderName::from_static(API_KEY)).map(str::trim),
    ];
    if !given
        .into_iter()
        .flatten()
        .any(|token| same_token(token.as_bytes(), state.token.as_bytes()))
    {
        return Err(ApiError::unauthorized());
    }
    Ok(())
}

pub(crate) async fn check(
    State(state): State<Arc<ApiState>>,
    request: Request,
    next: Next,
) -> Response {
    if let Err(e) = verdict(&state, request.headers()) {
        tracing::info!(path = %request.uri().path(), status = e.status.as_u16(), "api request refused");
        return crate::anthropic::in_dialect(request.uri().path(), e);
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_names_on_our_port_pass() {
        assert!(host_allowed(Some("127.0.0.1:7878"), 7878));
        assert!(host_allowed(Some("LOCALHOST:7878"), 7878));
        assert!(!host_allowed(Some("127.0.0.1:7879"), 7878));
        assert!(!host_allowed(Some("evil.example:7878"), 7878));
        assert!(!host_allowed(None, 7878));
        assert!(origin_allowed(None, 7878));
        assert!(origin_allowed(Some("http://localhost:7878"), 7878));
        assert!(!origin_allowed(Some("https://evil.example"), 7878));
        assert!(!origin_allowed(Some("null"), 7878));
    }

    #[test]
    fn the_token_is_read_from_a_bearer_header() {
        assert_eq!(bearer(Some("Bearer abc")), Some("abc"));
        assert_eq!(bearer(Some("bearer  abc ")), Some("abc"));
        assert_eq!(bearer(Some("Basic abc")), None);
        assert_eq!(bearer(Some("abc")), None);
        assert_eq!(bearer(None), None);
    }
}
