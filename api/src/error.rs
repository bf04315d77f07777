//! Errors as OpenAI's API writes them — `{"error": {"message", "type", "param", "code"}}` with
//! the matching HTTP status — so that every client library raises its usual exception
//! (`openai.BadRequestError`, `AuthenticationError`, …) with our message in it.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    /// OpenAI's error `type`: `invalid_request_error`, `authentication_error`, …
    pub kind: &'static str,
    pub param: Option<String>,
    pub code: Option<String>,
}

impl ApiError {
    fn new(status: StatusCode, kind: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            message: message.into(),
            kind,
            param: None,
            code: None,
        }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_request_error", message)
    }

    /// A parameter we do not support, or do not support with this value.
    pub fn unsupported(param: &str, message: impl Into<String>) -> Self {
        let mut e = Self::bad_request(message);
        e.param = Some(param.to_string());
        e.code = Some("unsupported_parameter".into());
        e
    }

    pub fn unauthorized() -> Self {
        let mut e = Self::new(
            StatusCode::UNAUTHORIZED,
            "authentication_error",
            "a valid API token is required: send `Authorization: Bearer TOKEN` (or `x-api-key: TOKEN`) with the token `companion serve` names on its first line (or the app's settings show)",
        );
        e.code = Some("invalid_api_key".into());
        e
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "permission_error", message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found_error", message)
    }

    pub fn model_not_found(asked: &str, served: &str) -> Self {
        let mut e = Self::not_found(format!(
            "the model `{asked}` is not served here; this server runs `{served}` (GET /v1/models)"
        ));
        e.param = Some("model".into());
        e.code = Some("model_not_found".into());
        e
    }

    pub fn too_large(limit: usize) -> Self {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "invalid_request_error",
            format!("the request body is larger than the {limit} bytes this server accepts"),
        )
    }

    /// The model is loading (the app switches models and reloads for some settings).
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "server_error", message)
    }

    pub fn server(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "server_error", message)
    }

    pub fn body(&self) -> serde_json::Value {
        json!({"error": {
            "message": self.message,
            "type": self.kind,
            "param": self.param,
            "code": self.code,
        }})
    }
}

impl From<chat::Error> for ApiError {
    fn from(e: chat::Error) -> Self {
        let code = e.code().to_string();
        let mut out = match code.as_str() {
            "invalid_request" | "invalid_argument" | "bad_picture" | "no_projector" => {
                ApiError::bad_request(e.to_string())
            }
            "prompt_too_long" => {
                let mut b = ApiError::bad_request(e.to_string());
                b.code = Some("context_length_exceeded".into());
                b.param = Some("messages".into());
                return b;
            }
            "engine_stopped" => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "server_error",
                e.to_string(),
            ),
            _ => ApiError::server(e.to_string()),
        };
        out.code = Some(code);
        out
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(self.body())).into_response()
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message, self.status)
    }
}
