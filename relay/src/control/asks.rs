//! The control API's routes of the person in the loop, the person's alone
//! (a grant's key is refused with 403: `http::persons_only`): `GET /asks`,
//! the questions waiting for them and the tabs handed to them (with
//! `?wait=N`, answered when that changes from version N, within 25 s: the
//! dashboard and `browser-relay asks` see a question at once);
//! `POST /asks/{id} {"answer": "allow"|"allow-site"|"deny"}` answers one
//! (`browser-relay allow|deny`); `POST /handoff/done {"targetId"?}` gives a
//! handed-over tab back (`browser-relay done`). The agent's side of a
//! handoff is the engine's `POST /handoff`.

use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use relay_engine::{Answer, AnsweredBy, AskError, Relay};
use serde::Deserialize;
use serde_json::json;

use super::error::error_body;

/// How long `GET /asks?wait` waits for a change.
const WAIT_AT_MOST: Duration = Duration::from_secs(25);

#[derive(Debug, Deserialize)]
pub(crate) struct Wait {
    /// The version the caller has seen: answered when it changes.
    wait: Option<u64>,
}

/// `GET /asks[?wait=N]`.
pub(crate) async fn list(State(relay): State<Relay>, Query(Wait { wait }): Query<Wait>) -> Response {
    let mut changed = relay.watch_asks();
    if let Some(seen) = wait {
        let _ = tokio::time::timeout(WAIT_AT_MOST, changed.wait_for(|version| *version != seen)).await;
    }
    let version = *changed.borrow();
    axum::Json(json!({"version": version, "questions": relay.questions(), "handoffs": relay.handoffs()}))
        .into_response()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Answered {
    answer: String,
}

/// `POST /asks/{id} {"answer"}`.
pub(crate) async fn answer(
    State(relay): State<Relay>,
    Path(id): Path<u64>,
    body: Result<axum::Json<Answered>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let Ok(axum::Json(Answered { answer })) = body else {
        let message = "expected {\"answer\": \"allow\" | \"allow-site\" | \"deny\"}";
        return error_body(StatusCode::BAD_REQUEST, "bad_request", message, None);
    };
    let said = match Answer::parse(&answer) {
        Ok(said) => said,
        Err(e) => return error_body(StatusCode::BAD_REQUEST, "bad_request", &e.to_string(), None),
    };
    match relay.answer(id, said, AnsweredBy::Terminal) {
        Ok(()) => axum::Json(json!({"ok": true, "id": id})).into_response(),
        Err(e) => not_waiting(&e),
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct Done {
    target_id: Option<String>,
}

/// `POST /handoff/done {"targetId"?}`.
pub(crate) async fn done(
    State(relay): State<Relay>,
    body: Result<axum::Json<Done>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let Ok(axum::Json(Done { target_id })) = body else {
        return error_body(StatusCode::BAD_REQUEST, "bad_request", "expected {\"targetId\": \"…\"} or {}", None);
    };
    let target_id = match target_id {
        Some(target_id) => target_id,
        None => match relay.handoffs().as_slice() {
            [only] => only.target_id.clone(),
            [] => return error_body(StatusCode::NOT_FOUND, "not_found", "no tab is handed over to you", None),
            many => {
                let tabs: Vec<String> = many.iter().map(|h| format!("{} ({})", h.target_id, h.grant)).collect();
                let message = format!("several tabs are handed over: name one ({})", tabs.join(", "));
                return error_body(StatusCode::BAD_REQUEST, "bad_request", &message, None);
            }
        },
    };
    match relay.handoff_done(&target_id, AnsweredBy::Terminal) {
        Ok(()) => axum::Json(json!({"ok": true, "targetId": target_id})).into_response(),
        Err(e) => not_waiting(&e),
    }
}

fn not_waiting(error: &AskError) -> Response {
    let hint = Some("`browser-relay asks` lists what waits for you".to_string());
    error_body(StatusCode::NOT_FOUND, "not_found", &error.to_string(), hint)
}
