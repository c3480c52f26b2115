//! The relay's HTTP surface: thin handlers over [`Relay`]. Every request has
//! already passed [`crate::net::guard`] (Host, Origin, token).

use std::sync::Arc;

use axum::Router;
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::json;
use shared_protocol::SUBPROTOCOL;

use crate::net::guard::{Guard, guard_layer};
use crate::relay::Relay;

/// Builds the router; `guard` is applied to every route, upgrades included.
pub fn router(relay: Relay, guard: Guard) -> Router {
    Router::new()
        .route("/", get(root))
        .route("/extension/status", get(extension_status))
        .route("/json/version", get(json_version))
        .route("/json/version/", get(json_version))
        .route("/json", get(json_list))
        .route("/json/", get(json_list))
        .route("/json/list", get(json_list))
        .route("/json/list/", get(json_list))
        .route("/json/activate/{id}", get(json_activate).put(json_activate))
        .route("/json/close/{id}", get(json_close).put(json_close))
        .route("/cdp", get(browser_ws))
        .route("/devtools/browser/{id}", get(browser_ws_with_id))
        .route("/devtools/page/{id}", get(page_ws))
        .route("/extension", get(extension_ws))
        .fallback(not_found)
        .with_state(relay)
        .layer(axum::middleware::from_fn_with_state(guard, guard_layer))
}

fn text(status: StatusCode, message: impl Into<String>) -> Response {
    (status, [(header::CONTENT_TYPE, "text/plain; charset=utf-8")], message.into()).into_response()
}

async fn root(State(relay): State<Relay>) -> Response {
    let stats = relay.stats();
    axum::Json(json!({
        "name": "browser-relay",
        "version": env!("CARGO_PKG_VERSION"),
        "extensionConnected": stats.extension_connected,
        "attachedTabs": stats.targets,
    }))
    .into_response()
}

async fn extension_status(State(relay): State<Relay>) -> Response {
    axum::Json(relay.status_json()).into_response()
}

async fn json_version(State(relay): State<Relay>) -> Response {
    axum::Json(relay.version_json()).into_response()
}

async fn json_list(State(relay): State<Relay>) -> Response {
    axum::Json(relay.list_json()).into_response()
}

async fn json_activate(State(relay): State<Relay>, Path(id): Path<String>) -> Response {
    let Some(tab) = relay.tab_of_target(&id) else {
        return text(StatusCode::NOT_FOUND, format!("No such target id: {id}"));
    };
    match relay.activate_tab(tab).await {
        Ok(()) => text(StatusCode::OK, "Target activated"),
        Err(e) => text(StatusCode::BAD_GATEWAY, e.to_string()),
    }
}

async fn json_close(State(relay): State<Relay>, Path(id): Path<String>) -> Response {
    let Some(tab) = relay.tab_of_target(&id) else {
        return text(StatusCode::NOT_FOUND, format!("No such target id: {id}"));
    };
    match relay.close_tab(tab).await {
        Ok(()) => text(StatusCode::OK, "Target is closing"),
        Err(e) => text(StatusCode::BAD_GATEWAY, e.to_string()),
    }
}

/// `/cdp`: waits briefly for the extension, then 503 with what to do.
async fn browser_ws(State(relay): State<Relay>, ws: WebSocketUpgrade) -> Response {
    if !relay.wait_for_extension(relay.config().extension_grace).await {
        return text(StatusCode::SERVICE_UNAVAILABLE, "no extension connected: click the Browser Relay icon on a tab");
    }
    if !relay.has_room_for_client() {
        return too_many_clients(&relay);
    }
    let limit = relay.config().client_max_message;
    ws.max_message_size(limit)
        .max_frame_size(limit)
        .on_upgrade(move |socket| async move { relay.serve_client(socket, None).await })
}

async fn browser_ws_with_id(state: State<Relay>, Path(_id): Path<String>, ws: WebSocketUpgrade) -> Response {
    // Any id is accepted, as clients may hold a URL from before a restart.
    browser_ws(state, ws).await
}

async fn page_ws(State(relay): State<Relay>, Path(id): Path<String>, ws: WebSocketUpgrade) -> Response {
    if !relay.wait_for_extension(relay.config().extension_grace).await {
        return text(StatusCode::SERVICE_UNAVAILABLE, "no extension connected: click the Browser Relay icon on a tab");
    }
    if relay.tab_of_target(&id).is_none() {
        return text(StatusCode::NOT_FOUND, format!("No such target id: {id}"));
    }
    if !relay.has_room_for_client() {
        return too_many_clients(&relay);
    }
    let limit = relay.config().client_max_message;
    let target: Arc<str> = id.into();
    ws.max_message_size(limit)
        .max_frame_size(limit)
        .on_upgrade(move |socket| async move { relay.serve_client(socket, Some(target)).await })
}

/// `/extension`: exactly one; a second gets 409 and the live one is kept.
async fn extension_ws(State(relay): State<Relay>, ws: WebSocketUpgrade) -> Response {
    let Some(claim) = relay.claim_extension() else {
        return text(StatusCode::CONFLICT, "another Browser Relay extension is already connected");
    };
    let limit = relay.config().extension_max_message;
    ws.protocols([SUBPROTOCOL])
        .max_message_size(limit)
        .max_frame_size(limit)
        .on_upgrade(move |socket| async move { relay.serve_extension(socket, claim).await })
}

fn too_many_clients(relay: &Relay) -> Response {
    let max = relay.config().max_clients;
    text(StatusCode::SERVICE_UNAVAILABLE, format!("too many CDP clients connected ({max}); close one and retry"))
}

async fn not_found() -> Response {
    text(StatusCode::NOT_FOUND, "not found: see /json/version, /json/list, /cdp")
}
