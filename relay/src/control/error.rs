//! The control API's error answer, one shape for every route of the
//! control port (the engine's, the grants', the person's questions):
//! `{"error": {"code", "message", "hint"}}`.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

pub(crate) fn error_body(status: StatusCode, code: &str, message: &str, hint: Option<String>) -> Response {
    let mut error = json!({"code": code, "message": message});
    if let Some(hint) = hint {
        error["hint"] = json!(hint);
    }
    (status, axum::Json(json!({"error": error}))).into_response()
}
