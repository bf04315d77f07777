//! Errors as Anthropic's API writes them — `{"type": "error", "error": {"type", "message"}}`
//! with the matching HTTP status — so that the `anthropic` client raises its usual exception
//! (`BadRequestError`, `AuthenticationError`, …) with our message in it. The error itself is
//! the crate's [`ApiError`]; only its spelling differs by dialect.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::error::ApiError;

/// Anthropic's error `type` for a status, as its API documents them.
fn kind(status: StatusCode) -> &'static str {
    match status.as_u16() {
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        // the model is loading, or the engine stopped: try again, as for Anthropic's 529
        503 | 529 => "overloaded_error",
        400..=499 => "invalid_request_error",
        _ => "api_error",
    }
}

/// The error's body, also the data of a stream's `error` event.
pub(crate) fn body(e: &ApiError) -> Value {
    json!({"type": "error", "error": {"type": kind(e.status), "message": e.message}})
}

/// An [`ApiError`] answered in Anthropic's shape.
pub(crate) struct AnthropicError(pub ApiError);

impl From<ApiError> for AnthropicError {
    fn from(e: ApiError) -> Self {
        AnthropicError(e)
    }
}

impl From<chat::Error> for AnthropicError {
    fn from(e: chat::Error) -> Self {
        AnthropicError(e.into())
    }
}

impl IntoResponse for AnthropicError {
    fn into_response(self) -> Response {
        (self.0.status, Json(body(&self.0))).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_has_anthropics_type() {
        for (e, kind) in [
            (ApiError::bad_request("x"), "invalid_request_error"),
            (ApiError::unauthorized(), "authentication_error"),
            (ApiError::forbidden("x"), "permission_error"),
            (ApiError::not_found("x"), "not_found_error"),
            (ApiError::too_large(10), "request_too_large"),
            (ApiError::unavailable("x"), "overloaded_error"),
            (ApiError::server("x"), "api_error"),
        ] {
            let b = body(&e);
            assert_eq!(b["type"], "error");
            assert_eq!(b["error"]["type"], kind, "{e}");
            assert_eq!(b["error"]["message"], e.message);
            assert_eq!(AnthropicError(e.clone()).into_response().status(), e.status);
        }
    }
}
