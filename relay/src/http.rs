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
use serde_json::{Value, json};
use shared_protocol::{SUBPROTOCOL, SUBPROTOCOL_V1};

use crate::net::allowance::ReadAllowance;
use crate::net::guard::{Guard, guard_layer};
use cdp_client::CdpError;
use managed_driver::config::Driver;
use managed_driver::pipe::{Endpoint, Pipe};
use managed_driver::{ManagedBrowsers, ManagedError};
use relay_engine::Relay;
use relay_engine::extension::ProofHook;

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
async fn browser_ws(State(relay): State<Relay>, headers: HeaderMap, ws: WebSocketUpgrade) -> Response {
    if !relay.wait_for_extension(relay.config().extension_grace).await {
        return text(StatusCode::SERVICE_UNAVAILABLE, "no extension connected: click the Browser Relay icon on a tab");
    }
    let Some(slot) = relay.try_client_slot() else { return too_many_clients(&relay) };
    let limit = relay.config().client_max_message;
    let name = client_name(&headers);
    ws.max_message_size(limit)
        .max_frame_size(limit)
        .on_upgrade(move |socket| async move { relay.serve_client(socket, None, name, slot).await })
}

async fn browser_ws_with_id(
    state: State<Relay>,
    Path(_id): Path<String>,
    headers: HeaderMap,
    ws: WebSocketUpgrade,
) -> Response {
    // Any id is accepted, as clients may hold a URL from before a restart.
    browser_ws(state, headers, ws).await
}

/// What a client calls itself, for the extension's options page.
fn client_name(headers: &HeaderMap) -> String {
    relay_engine::client::client_name(headers.get(header::USER_AGENT).and_then(|v| v.to_str().ok()))
}

async fn page_ws(
    State(relay): State<Relay>,
    Path(id): Path<String>,
    headers: HeaderMap,
    ws: WebSocketUpgrade,
) -> Response {
    if !relay.wait_for_extension(relay.config().extension_grace).await {
        return text(StatusCode::SERVICE_UNAVAILABLE, "no extension connected: click the Browser Relay icon on a tab");
    }
    if relay.tab_of_target(&id).is_none() {
        return text(StatusCode::NOT_FOUND, format!("No such target id: {id}"));
    }
    let Some(slot) = relay.try_client_slot() else { return too_many_clients(&relay) };
    let limit = relay.config().client_max_message;
    let name = client_name(&headers);
    let target: Arc<str> = id.into();
    ws.max_message_size(limit)
        .max_frame_size(limit)
        .on_upgrade(move |socket| async move { relay.serve_client(socket, Some(target), name, slot).await })
}

/// `/extension`: exactly one; a second gets 409 and the live one is kept.
/// The slot is taken at the proof of the pairing, not here; until then a
/// connection holds one of a few handshake places.
async fn extension_ws(
    State(relay): State<Relay>,
    headers: HeaderMap,
    axum::Extension(allowance): axum::Extension<ReadAllowance>,
    ws: WebSocketUpgrade,
) -> Response {
    if relay.extension_connected() {
        return text(StatusCode::CONFLICT, "another Browser Relay extension is already connected");
    }
    let Some(proving) = relay.try_handshake() else {
        return text(StatusCode::SERVICE_UNAVAILABLE, "too many extension connections are proving the pairing; retry");
    };
    // A version 1 extension offers only its own subprotocol (and its token,
    // which is never looked at): it is let in to be told to update.
    let offered = headers.get(header::SEC_WEBSOCKET_PROTOCOL).and_then(|v| v.to_str().ok()).unwrap_or_default();
    let offers = |name: &str| offered.split(',').any(|p| p.trim() == name);
    let legacy = !offers(SUBPROTOCOL) && offers(SUBPROTOCOL_V1);
    let limit = relay.config().extension_max_message;
    // Until the proof checks out the connection may send a few KiB, no
    // more (`net::serve` gives every request its connection's allowance);
    // the engine lifts the limit at the proof.
    allowance.limit(shared_protocol::PRE_PROOF_BYTES);
    let proved: ProofHook = Box::new(move || allowance.lift());
    ws.protocols([SUBPROTOCOL, SUBPROTOCOL_V1])
        .max_message_size(limit)
        .max_frame_size(limit)
        .on_upgrade(move |socket| async move { relay.serve_extension(socket, proving, proved, legacy).await })
}

fn too_many_clients(relay: &Relay) -> Response {
    let max = relay.config().max_clients;
    text(StatusCode::SERVICE_UNAVAILABLE, format!("too many CDP clients connected ({max}); close one and retry"))
}

/// The connection every client of a managed profile's browser shares: the
/// pipe of a browser this relay launched, or its connection to a remote
/// one (a `cdpUrl`, opened on first use and after a drop), or why not.
async fn managed_pipe(state: &AppState, name: &str) -> Result<Arc<Pipe>, (StatusCode, String)> {
    let Some(root) = &state.state_root else {
        return Err((StatusCode::NOT_FOUND, "this relay serves no profiles".into()));
    };
    // config.toml and this process's ephemeral profiles.
    let browsers = ManagedBrowsers::new(root);
    let config = browsers.config().map_err(|e| (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    let profile = config.profile(Some(name)).map_err(|e| (StatusCode::NOT_FOUND, e.to_string()))?;
    if profile.driver != Driver::Managed {
        return Err((
            StatusCode::NOT_FOUND,
            format!("profile '{name}' is your own Chrome: its endpoint is the relay's root"),
        ));
    }
    browsers.pipe_for(profile).await.map_err(|e| match e {
        ManagedError::AttachUnreachable { ref source, .. } if source.is_timeout() => {
            (StatusCode::GATEWAY_TIMEOUT, e.to_string())
        }
        ManagedError::AttachUnreachable { .. } => (StatusCode::BAD_GATEWAY, e.to_string()),
        other => (StatusCode::SERVICE_UNAVAILABLE, other.to_string()),
    })
}

/// A browser-level call of the relay's own over the profile's pipe.
async fn managed_call(pipe: &Pipe, name: &str, method: &str, params: Value) -> Result<Value, (StatusCode, String)> {
    pipe.call(method, params, std::time::Duration::from_secs(10)).await.map_err(|e| match e {
        CdpError::Protocol { message, .. } => (StatusCode::NOT_FOUND, message),
        other => (StatusCode::BAD_GATEWAY, format!("the browser of profile '{name}': {other}")),
    })
}

/// `ws://<relay>/profiles/<name>/devtools/<path>`, with the token.
fn profile_ws_url(relay: &Relay, name: &str, path: &str) -> Option<String> {
    relay.public_base().map(|b| b.ws_url(&format!("/profiles/{name}/devtools/{path}")))
}

/// One target as Chrome's `/json/list` shows it, with the relay's socket.
fn list_entry(relay: &Relay, name: &str, info: &Value) -> Value {
    let id = info["targetId"].as_str().unwrap_or_default();
    json!({
        "description": "",
        "devtoolsFrontendUrl": "",
        "id": id,
        "title": info["title"],
        "type": info["type"],
        "url": info["url"],
        "webSocketDebuggerUrl": profile_ws_url(relay, name, &format!("page/{id}")),
    })
}

fn respond(result: Result<Value, (StatusCode, String)>) -> Response {
    match result {
        Ok(value) => axum::Json(value).into_response(),
        Err((status, why)) => text(status, why),
    }
}

/// A managed profile's protocol description: the relay's copy (its
/// browser has no HTTP endpoint to ask). The route is public, so it only
/// reads config.toml: it launches no browser and opens no pipe or farm
/// connection (a farm's carries its credentials), and a name this relay
/// does not serve is a 404 that names no other profile.
async fn profile_protocol(State(state): State<AppState>, Path(name): Path<String>) -> Response {
    let served = state.state_root.as_ref().is_some_and(|root| {
        ManagedBrowsers::new(root)
            .config()
            .ok()
            .and_then(|config| config.profile(Some(&name)).ok().map(|p| p.driver == Driver::Managed))
            .unwrap_or(false)
    });
    if !served {
        return text(StatusCode::NOT_FOUND, "no such profile here");
    }
    json_protocol().await
}

/// `PUT /profiles/<name>/json/new?<url>`: a new tab, as Chrome's own
/// `/json/new` makes it.
async fn profile_new(State(state): State<AppState>, Path(name): Path<String>, RawQuery(query): RawQuery) -> Response {
    let url = query.map(|q| percent_decode(&q)).filter(|u| !u.is_empty()).unwrap_or_else(|| "about:blank".into());
    respond(
        async {
            let pipe = managed_pipe(&state, &name).await?;
            let created = managed_call(&pipe, &name, "Target.createTarget", json!({"url": url})).await?;
            let params = json!({"targetId": created["targetId"]});
            let info = managed_call(&pipe, &name, "Target.getTargetInfo", params).await?;
            Ok(list_entry(&state.relay, &name, &info["targetInfo"]))
        }
        .await,
    )
}

/// `/profiles/<name>/json/version`, as Chrome's, from `Browser.getVersion`.
async fn profile_version(State(state): State<AppState>, Path(name): Path<String>) -> Response {
    respond(
        async {
            let pipe = managed_pipe(&state, &name).await?;
            let version = managed_call(&pipe, &name, "Browser.getVersion", json!({})).await?;
            let browsers = ManagedBrowsers::new(state.state_root.as_deref().expect("checked"));
            let browser_id = browsers
                .record(&name)
                .map(|r| r.browser_id)
                .or_else(|| browsers.remote_browser_id(&name))
                .unwrap_or_default();
            Ok(json!({
                "Browser": version["product"],
                "Protocol-Version": version["protocolVersion"],
                "User-Agent": version["userAgent"],
                "V8-Version": version["jsVersion"],
                "WebKit-Version": format!("537.36 ({})", version["revision"].as_str().unwrap_or_default()),
                "webSocketDebuggerUrl": profile_ws_url(&state.relay, &name, &format!("browser/{browser_id}")),
            }))
        }
        .await,
    )
}

/// `/profiles/<name>/json/list`, as Chrome's, from `Target.getTargets`.
async fn profile_list(State(state): State<AppState>, Path(name): Path<String>) -> Response {
    respond(
        async {
            let pipe = managed_pipe(&state, &name).await?;
            let targets = managed_call(&pipe, &name, "Target.getTargets", json!({})).await?;
            let entries = targets["targetInfos"].as_array().into_iter().flatten();
            Ok(Value::Array(entries.map(|info| list_entry(&state.relay, &name, info)).collect()))
        }
        .await,
    )
}

async fn profile_activate(state: State<AppState>, Path((name, id)): Path<(String, String)>) -> Response {
    profile_target_action(state, &name, "Target.activateTarget", &id, "Target activated").await
}

async fn profile_close(state: State<AppState>, Path((name, id)): Path<(String, String)>) -> Response {
    profile_target_action(state, &name, "Target.closeTarget", &id, "Target is closing").await
}

/// `/profiles/<name>/json/{activate,close}/<id>`: Chrome's answers.
async fn profile_target_action(
    State(state): State<AppState>,
    name: &str,
    method: &str,
    id: &str,
    done: &str,
) -> Response {
    let pipe = match managed_pipe(&state, name).await {
        Ok(pipe) => pipe,
        Err((status, why)) => return text(status, why),
    };
    match managed_call(&pipe, name, method, json!({"targetId": id})).await {
        Ok(_) => text(StatusCode::OK, done),
        Err((StatusCode::NOT_FOUND, _)) => text(StatusCode::NOT_FOUND, format!("No such target id: {id}")),
        Err((status, why)) => text(status, why),
    }
}

/// A client's CDP socket on a managed browser: a session of its own over
/// the browser's pipe, frames relayed as they are.
async fn profile_ws(
    State(state): State<AppState>,
    Path((name, kind, id)): Path<(String, String, String)>,
    ws: WebSocketUpgrade,
) -> Response {
    let Some(slot) = state.relay.try_client_slot() else { return too_many_clients(&state.relay) };
    let endpoint = match kind.as_str() {
        "browser" => Endpoint::Browser,
        "page" => Endpoint::Page(id.clone()),
        _ => return text(StatusCode::NOT_FOUND, "expected /devtools/browser/<id> or /devtools/page/<id>"),
    };
    let channels = match managed_pipe(&state, &name).await {
        Ok(pipe) => pipe.connect(endpoint).await,
        Err((status, why)) => return text(status, why),
    };
    let channels = match channels {
        Ok(channels) => channels,
        Err(CdpError::Protocol { .. }) => return text(StatusCode::NOT_FOUND, format!("No such target id: {id}")),
        Err(e) => return text(StatusCode::BAD_GATEWAY, format!("the browser of profile '{name}': {e}")),
    };
    let limit = state.relay.config().client_max_message;
    let relay = state.relay.clone();
    ws.max_message_size(limit).max_frame_size(limit).on_upgrade(move |socket| async move {
        relay.serve_piped_client(socket, channels.outgoing, channels.incoming, slot).await
    })
}

/// Relays frames between a client's socket and its session on the pipe;
/// counts as one of the relay's clients and ends when the server stops.
async fn not_found() -> Response {
    text(StatusCode::NOT_FOUND, "not found: see /json/version, /json/list, /cdp")
}
