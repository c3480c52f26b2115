//! The relay's HTTP surface: thin handlers over [`Relay`]. Every request has
//! already passed [`crate::net::guard`] (Host, Origin, token).

use std::sync::Arc;

use axum::Router;
use axum::extract::RawQuery;
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, put};
use serde_json::json;
use shared_protocol::{SUBPROTOCOL, SUBPROTOCOL_V1};

use crate::net::guard::{Guard, guard_layer};
use managed_driver::ManagedBrowsers;
use managed_driver::config::Config;
use relay_engine::Relay;

/// What the handlers share: the relay, and the state directory whose managed
/// profiles the relay exposes (`None` in tests that need no profiles).
#[derive(Debug, Clone)]
pub struct AppState {
    pub relay: Relay,
    pub state_root: Option<Arc<std::path::Path>>,
}

impl axum::extract::FromRef<AppState> for Relay {
    fn from_ref(state: &AppState) -> Self {
        state.relay.clone()
    }
}

/// Builds the router; `guard` is applied to every route, upgrades included.
pub fn router(relay: Relay, guard: Guard, state_root: Option<&std::path::Path>) -> Router {
    let state = AppState { relay, state_root: state_root.map(Arc::from) };
    Router::new()
        .route("/", get(root))
        .route("/extension/status", get(extension_status))
        .route("/json/version", get(json_version))
        .route("/json/version/", get(json_version))
        .route("/json", get(json_list))
        .route("/json/", get(json_list))
        .route("/json/list", get(json_list))
        .route("/json/list/", get(json_list))
        .route("/json/protocol", get(json_protocol))
        .route("/json/protocol/", get(json_protocol))
        .route("/json/new", put(json_new).fallback(json_new_verb))
        .route("/json/activate/{id}", get(json_activate).put(json_activate))
        .route("/json/close/{id}", get(json_close).put(json_close))
        .route("/cdp", get(browser_ws))
        .route("/devtools/browser/{id}", get(browser_ws_with_id))
        .route("/devtools/page/{id}", get(page_ws))
        .route("/extension", get(extension_ws))
        // A managed profile's own CDP, behind the same guard and token.
        .route("/profiles/{name}/json/version", get(profile_version))
        .route("/profiles/{name}/json/version/", get(profile_version))
        .route("/profiles/{name}/json", get(profile_list))
        .route("/profiles/{name}/json/", get(profile_list))
        .route("/profiles/{name}/json/list", get(profile_list))
        .route("/profiles/{name}/json/list/", get(profile_list))
        .route("/profiles/{name}/json/protocol", get(profile_protocol))
        .route("/profiles/{name}/json/protocol/", get(profile_protocol))
        .route("/profiles/{name}/json/new", put(profile_new).fallback(json_new_verb))
        .route("/profiles/{name}/json/activate/{id}", get(profile_activate).put(profile_activate))
        .route("/profiles/{name}/json/close/{id}", get(profile_close).put(profile_close))
        .route("/profiles/{name}/devtools/{kind}/{id}", get(profile_ws))
        .fallback(not_found)
        .with_state(state)
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

/// Chrome's protocol description, as its own port serves it.
pub const PROTOCOL_JSON: &str = include_str!("../assets/devtools-protocol.json");

async fn json_protocol() -> Response {
    ([(header::CONTENT_TYPE, "application/json; charset=UTF-8")], PROTOCOL_JSON).into_response()
}

/// `PUT /json/new?<url>`: a new tab of the user's browser, attached.
async fn json_new(State(relay): State<Relay>, RawQuery(url): RawQuery) -> Response {
    let url = url.map(|u| percent_decode(&u));
    match relay.new_tab(url.as_deref().filter(|u| !u.is_empty())).await {
        Ok(entry) => axum::Json(entry).into_response(),
        Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

/// `/json/new` with another verb: Chrome's answer.
async fn json_new_verb(method: axum::http::Method) -> Response {
    text(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("Using unsafe HTTP verb {method} to invoke /json/new. This action supports only PUT verb."),
    )
}

/// `/json/new?<url>` takes the URL as the whole query, percent-encoded or
/// not (Chrome decodes it).
fn percent_decode(query: &str) -> String {
    let query = query.strip_prefix("url=").unwrap_or(query);
    url::form_urlencoded::parse(format!("u={query}").as_bytes())
        .next()
        .map(|(_, value)| value.into_owned())
        .unwrap_or_default()
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
async fn extension_ws(State(relay): State<Relay>, headers: HeaderMap, ws: WebSocketUpgrade) -> Response {
    let Some(claim) = relay.claim_extension() else {
        return text(StatusCode::CONFLICT, "another Browser Relay extension is already connected");
    };
    // A version 1 extension offers only its own subprotocol (and its token,
    // which is never looked at): it is let in to be told to update.
    let offered = headers.get(header::SEC_WEBSOCKET_PROTOCOL).and_then(|v| v.to_str().ok()).unwrap_or_default();
    let offers = |name: &str| offered.split(',').any(|p| p.trim() == name);
    let legacy = !offers(SUBPROTOCOL) && offers(SUBPROTOCOL_V1);
    let limit = relay.config().extension_max_message;
    ws.protocols([SUBPROTOCOL, SUBPROTOCOL_V1])
        .max_message_size(limit)
        .max_frame_size(limit)
        .on_upgrade(move |socket| async move { relay.serve_extension(socket, claim, legacy).await })
}

fn too_many_clients(relay: &Relay) -> Response {
    let max = relay.config().max_clients;
    text(StatusCode::SERVICE_UNAVAILABLE, format!("too many CDP clients connected ({max}); close one and retry"))
}

/// The loopback port of a running managed profile, or why not.
fn managed_port(state: &AppState, name: &str) -> Result<u16, (StatusCode, String)> {
    let Some(root) = &state.state_root else {
        return Err((StatusCode::NOT_FOUND, "this relay serves no profiles".into()));
    };
    let config = Config::load(root).map_err(|e| (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    let profile = config.profile(Some(name)).map_err(|e| (StatusCode::NOT_FOUND, e.to_string()))?;
    if !profile.launches() {
        return Err((StatusCode::NOT_FOUND, format!("profile '{name}' is not a managed browser this relay launches")));
    }
    ManagedBrowsers::new(root).running_port(name).ok_or_else(|| {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("profile '{name}' is not running: `browser-relay start --profile {name}`"),
        )
    })
}

/// Chrome's `ws://127.0.0.1:<port>/devtools/...` → ours, with the token.
fn rewrite_ws_url(relay: &Relay, name: &str, url: &str) -> Option<String> {
    let path = url.strip_prefix("ws://")?.split_once('/').map(|(_, p)| p)?;
    relay.public_base().map(|b| b.ws_url(&format!("/profiles/{name}/{path}")))
}

/// Fetches one of the managed browser's `/json/*` documents.
async fn managed_json(state: &AppState, name: &str, path: &str) -> Result<serde_json::Value, (StatusCode, String)> {
    let port = managed_port(state, name)?;
    let unreadable =
        || (StatusCode::BAD_GATEWAY, format!("the managed browser of profile '{name}' does not answer {path}"));
    cdp_client::endpoint::json_document(&format!("http://127.0.0.1:{port}{path}")).await.map_err(|_| unreadable())
}

/// A managed profile's protocol description: the browser's own (its exact
/// version), else (not running yet) the relay's copy. A profile this relay
/// does not serve is a 404, as for the other `/profiles/<name>/json/*` routes.
async fn profile_protocol(State(state): State<AppState>, Path(name): Path<String>) -> Response {
    match managed_json(&state, &name, "/json/protocol").await {
        Ok(doc) => axum::Json(doc).into_response(),
        Err((StatusCode::NOT_FOUND, why)) => text(StatusCode::NOT_FOUND, why),
        Err(_) => json_protocol().await,
    }
}

/// `PUT /profiles/<name>/json/new?<url>`: the browser's own, with the
/// relay's WebSocket URL.
async fn profile_new(State(state): State<AppState>, Path(name): Path<String>, RawQuery(query): RawQuery) -> Response {
    let port = match managed_port(&state, &name) {
        Ok(port) => port,
        Err((status, why)) => return text(status, why),
    };
    let url = query.map(|q| percent_decode(&q)).unwrap_or_default();
    let encoded: String = url::form_urlencoded::byte_serialize(url.as_bytes()).collect();
    let target = format!("http://127.0.0.1:{port}/json/new?{encoded}");
    match cdp_client::http::request("PUT", &target, &[], None).await {
        Ok(response) if response.status == 200 => {
            let mut entry = response.json();
            let ws = entry["webSocketDebuggerUrl"].as_str().and_then(|u| rewrite_ws_url(&state.relay, &name, u));
            entry["webSocketDebuggerUrl"] = json!(ws);
            entry["devtoolsFrontendUrl"] = json!("");
            axum::Json(entry).into_response()
        }
        Ok(response) => text(StatusCode::BAD_GATEWAY, response.text()),
        Err(_) => {
            text(StatusCode::BAD_GATEWAY, format!("the managed browser of profile '{name}' does not answer /json/new"))
        }
    }
}

async fn profile_version(State(state): State<AppState>, Path(name): Path<String>) -> Response {
    match managed_json(&state, &name, "/json/version").await {
        Ok(mut version) => {
            let url = version["webSocketDebuggerUrl"].as_str().and_then(|u| rewrite_ws_url(&state.relay, &name, u));
            version["webSocketDebuggerUrl"] = json!(url);
            axum::Json(version).into_response()
        }
        Err((status, why)) => text(status, why),
    }
}

async fn profile_list(State(state): State<AppState>, Path(name): Path<String>) -> Response {
    match managed_json(&state, &name, "/json/list").await {
        Ok(mut list) => {
            for entry in list.as_array_mut().into_iter().flatten() {
                let url = entry["webSocketDebuggerUrl"].as_str().and_then(|u| rewrite_ws_url(&state.relay, &name, u));
                entry["webSocketDebuggerUrl"] = json!(url);
                // It would point clients at the bare port.
                entry["devtoolsFrontendUrl"] = json!("");
            }
            axum::Json(list).into_response()
        }
        Err((status, why)) => text(status, why),
    }
}

async fn profile_activate(state: State<AppState>, Path((name, id)): Path<(String, String)>) -> Response {
    profile_target_action(state, &name, "activate", &id).await
}

async fn profile_close(state: State<AppState>, Path((name, id)): Path<(String, String)>) -> Response {
    profile_target_action(state, &name, "close", &id).await
}

/// `/profiles/<name>/json/{activate,close}/<id>`: the browser's own answer.
async fn profile_target_action(State(state): State<AppState>, name: &str, action: &str, id: &str) -> Response {
    let port = match managed_port(&state, name) {
        Ok(port) => port,
        Err((status, why)) => return text(status, why),
    };
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
        return text(StatusCode::NOT_FOUND, format!("No such target id: {id}"));
    }
    match cdp_client::http::get(&format!("http://127.0.0.1:{port}/json/{action}/{id}")).await {
        Ok((status, body)) => text(StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY), body),
        Err(_) => text(
            StatusCode::BAD_GATEWAY,
            format!("the managed browser of profile '{name}' does not answer /json/{action}"),
        ),
    }
}

/// A client's CDP socket, relayed frame for frame to the managed browser.
async fn profile_ws(
    State(state): State<AppState>,
    Path((name, kind, id)): Path<(String, String, String)>,
    ws: WebSocketUpgrade,
) -> Response {
    let port = match managed_port(&state, &name) {
        Ok(port) => port,
        Err((status, why)) => return text(status, why),
    };
    let plain_id = !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
    if !matches!(kind.as_str(), "browser" | "page") || !plain_id {
        return text(StatusCode::NOT_FOUND, "expected /devtools/browser/<id> or /devtools/page/<id>");
    }
    if !state.relay.has_room_for_client() {
        return too_many_clients(&state.relay);
    }
    let upstream = format!("ws://127.0.0.1:{port}/devtools/{kind}/{id}");
    let limit = state.relay.config().client_max_message;
    let relay = state.relay.clone();
    ws.max_message_size(limit).max_frame_size(limit).on_upgrade(move |socket| proxy(relay, socket, upstream))
}

/// Relays frames between a client and the managed browser; counts as one of
/// the relay's clients and ends when the server stops.
async fn proxy(relay: Relay, client: axum::extract::ws::WebSocket, upstream: String) {
    let _slot = relay.hold_client_slot();
    use axum::extract::ws::Message as Axum;
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message as Tung;
    let config = tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default()
        .max_message_size(Some(256 << 20))
        .max_frame_size(Some(256 << 20));
    let Ok((browser, _)) = tokio_tungstenite::connect_async_with_config(upstream.as_str(), Some(config), true).await
    else {
        tracing::warn!(%upstream, "cannot reach the managed browser");
        return;
    };
    let (mut client_tx, mut client_rx) = client.split();
    let (mut browser_tx, mut browser_rx) = browser.split();
    let to_browser = async {
        while let Some(Ok(message)) = client_rx.next().await {
            let message = match message {
                Axum::Text(t) => Tung::Text(t.as_str().into()),
                Axum::Binary(b) => Tung::Binary(b),
                Axum::Close(_) => break,
                _ => continue,
            };
            if browser_tx.send(message).await.is_err() {
                break;
            }
        }
        let _ = browser_tx.close().await;
    };
    let to_client = async {
        while let Some(Ok(message)) = browser_rx.next().await {
            let message = match message {
                Tung::Text(t) => Axum::Text(t.as_str().into()),
                Tung::Binary(b) => Axum::Binary(b),
                Tung::Close(_) => break,
                _ => continue,
            };
            if client_tx.send(message).await.is_err() {
                break;
            }
        }
        let _ = client_tx.close().await;
    };
    // Either side closing (or the server stopping) ends both.
    tokio::select! {
        () = to_browser => {}
        () = to_client => {}
        () = relay.shutting_down().cancelled() => {}
    }
}

async fn not_found() -> Response {
    text(StatusCode::NOT_FOUND, "not found: see /json/version, /json/list, /cdp")
}
