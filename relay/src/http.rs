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

use crate::net::allowance::ReadAllowance;
use crate::net::guard::{Guard, guard_layer};
use cdp_client::protocol::target::TargetInfo;
use managed_driver::{Endpoint, ManagedBrowsers, ManagedError, ServedError};
use relay_engine::Relay;
use relay_engine::{ClientLabel, ProofHook};
use relay_engine::{ListEntry, VersionDocument};

/// What the handlers share: the relay, and the managed browsers whose
/// profiles it exposes (the server's one; `None` in tests that need no
/// profiles).
#[derive(Debug, Clone)]
pub struct AppState {
    pub relay: Relay,
    pub browsers: Option<ManagedBrowsers>,
}

impl axum::extract::FromRef<AppState> for Relay {
    fn from_ref(state: &AppState) -> Self {
        state.relay.clone()
    }
}

/// Builds the router; `guard` is applied to every route, upgrades included.
pub(crate) fn router(relay: Relay, guard: Guard, browsers: Option<ManagedBrowsers>) -> Router {
    let state = AppState { relay, browsers };
    Router::new()
        .route("/", get(root))
        .route("/extension/status", get(extension_status))
        .merge(json_routes())
        .nest("/profiles/{name}", json_routes())
        .route("/cdp", get(browser_ws))
        .route("/devtools/browser/{id}", get(browser_ws_with_id))
        .route("/devtools/page/{id}", get(page_ws))
        .route("/extension", get(extension_ws))
        .route("/profiles/{name}/devtools/{kind}/{id}", get(profile_ws))
        .fallback(not_found)
        .layer(axum::middleware::from_fn(persons_profiles))
        .with_state(state)
        .layer(axum::middleware::from_fn_with_state(guard, guard_layer))
}

/// Chrome's `/json` routes, one table mounted twice: at the root for the
/// person's shared tabs, under `/profiles/{name}` for a served profile's
/// browser ([`Browser`] tells the handlers which), so a route added here
/// is there for both.
fn json_routes() -> Router<AppState> {
    Router::new()
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
}

/// Which browser a `/json` route is about: the person's shared tabs
/// (`/json/…`) or a served profile's (`/profiles/{name}/json/…`).
#[derive(Debug)]
enum Browser {
    Shared,
    Profile(String),
}

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Browser {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut axum::http::request::Parts, state: &S) -> Result<Self, Self::Rejection> {
        let params = axum::extract::RawPathParams::from_request_parts(parts, state).await;
        let name =
            params.ok().and_then(|params| params.iter().find(|(key, _)| *key == "name").map(|(_, v)| v.to_string()));
        Ok(name.map_or(Self::Shared, Self::Profile))
    }
}

/// The `{id}` of a `/json/activate/{id}` or `/json/close/{id}`, under either mount.
type TargetIdParam = Path<std::collections::HashMap<String, String>>;

/// The managed profiles are the person's: a grant's key is lent the
/// person's shared tabs only, and is refused here (403, saying so).
async fn persons_profiles(request: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let grant = request.extensions().get::<grants::Access>().and_then(|a| a.grant_name().map(str::to_string));
    match grant {
        Some(name) if request.uri().path().starts_with("/profiles/") => {
            let rejection = crate::net::guard::Rejection::PersonOnly(name);
            text(rejection.status(), rejection.message())
        }
        _ => next.run(request).await,
    }
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

async fn json_version(browser: Browser, State(state): State<AppState>, axum::Extension(access): Who) -> Response {
    match browser {
        Browser::Shared => axum::Json(state.relay.version_json_for(&access)).into_response(),
        Browser::Profile(name) => profile_version(&state, name).await,
    }
}

/// Whose key a request presented (the guard put it there).
type Who = axum::Extension<grants::Access>;

async fn json_list(browser: Browser, State(state): State<AppState>, axum::Extension(access): Who) -> Response {
    match browser {
        Browser::Shared => axum::Json(state.relay.list_json(&access)).into_response(),
        Browser::Profile(name) => profile_list(&state, name).await,
    }
}

/// Chrome's protocol description, as its own port serves it (the engine's
/// copy: one in the binary, also for a managed profile, whose browser has
/// no HTTP endpoint to ask). The route is public, so for a profile it only
/// reads config.toml: it launches no browser and opens no pipe or farm
/// connection (a farm's carries its credentials), and a name this relay
/// does not serve is a 404 that names no other profile.
async fn json_protocol(browser: Browser, State(state): State<AppState>) -> Response {
    if let Browser::Profile(name) = browser
        && !state.browsers.as_ref().is_some_and(|browsers| browsers.serves(&name))
    {
        return text(StatusCode::NOT_FOUND, "no such profile here");
    }
    ([(header::CONTENT_TYPE, "application/json; charset=UTF-8")], relay_engine::DEVTOOLS_PROTOCOL).into_response()
}

/// `PUT /json/new?<url>`: a new tab, attached (of the user's browser), or
/// as Chrome's own `/json/new` makes it (a profile's).
async fn json_new(
    browser: Browser,
    State(state): State<AppState>,
    axum::Extension(access): Who,
    RawQuery(url): RawQuery,
) -> Response {
    let url = url.map(|u| percent_decode(&u)).filter(|u| !u.is_empty());
    match browser {
        Browser::Shared => match state.relay.new_tab(url.as_deref(), &access).await {
            Ok(entry) => axum::Json(entry).into_response(),
            Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        },
        Browser::Profile(name) => profile_new(&state, name, url.unwrap_or_else(|| "about:blank".into())).await,
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

async fn json_activate(browser: Browser, state: State<AppState>, access: Who, params: TargetIdParam) -> Response {
    on_target(TargetVerb::Activate, browser, state, access, params).await
}

async fn json_close(browser: Browser, state: State<AppState>, access: Who, params: TargetIdParam) -> Response {
    on_target(TargetVerb::Close, browser, state, access, params).await
}

/// What `/json/activate/{id}` and `/json/close/{id}` do to a target.
#[derive(Debug, Clone, Copy)]
enum TargetVerb {
    Activate,
    Close,
}

/// A target activated or closed, with Chrome's answers, on either browser.
async fn on_target(
    verb: TargetVerb,
    browser: Browser,
    State(state): State<AppState>,
    axum::Extension(access): Who,
    Path(params): TargetIdParam,
) -> Response {
    let id = params.get("id").cloned().unwrap_or_default();
    let done = match verb {
        TargetVerb::Activate => "Target activated",
        TargetVerb::Close => "Target is closing",
    };
    match browser {
        Browser::Shared => {
            let Some(tab) = state.relay.visible_tab_of_target(&id, &access) else { return no_such_target_id(&id) };
            let result = match verb {
                TargetVerb::Activate => state.relay.activate_tab(tab).await,
                TargetVerb::Close => state.relay.close_tab(tab).await,
            };
            result.map_or_else(|e| text(StatusCode::BAD_GATEWAY, e.to_string()), |()| text(StatusCode::OK, done))
        }
        Browser::Profile(name) => {
            let Some(browsers) = &state.browsers else { return no_profiles() };
            let result = match verb {
                TargetVerb::Activate => browsers.served_activate(&name, &id).await,
                TargetVerb::Close => browsers.served_close(&name, &id).await,
            };
            result.map_or_else(|e| no_such_target(e, &id), |()| text(StatusCode::OK, done))
        }
    }
}

/// Chrome's answer for a target id it does not know.
fn no_such_target_id(id: &str) -> Response {
    text(StatusCode::NOT_FOUND, format!("No such target id: {id}"))
}

/// `/cdp`: waits briefly for the extension, then 503 with what to do.
async fn browser_ws(
    State(relay): State<Relay>,
    axum::Extension(access): Who,
    headers: HeaderMap,
    ws: WebSocketUpgrade,
) -> Response {
    if !relay.wait_for_extension(relay.config().extension_grace).await {
        return text(StatusCode::SERVICE_UNAVAILABLE, "no extension connected: click the Browser Relay icon on a tab");
    }
    let Some(slot) = relay.try_client_slot() else { return too_many_clients(&relay) };
    let limit = relay.config().client_max_message;
    let name = client_label(&headers);
    ws.max_message_size(limit)
        .max_frame_size(limit)
        .on_upgrade(move |socket| async move { relay.serve_client(socket, None, name, access, slot).await })
}

async fn browser_ws_with_id(
    state: State<Relay>,
    access: Who,
    Path(_id): Path<String>,
    headers: HeaderMap,
    ws: WebSocketUpgrade,
) -> Response {
    // Any id is accepted, as clients may hold a URL from before a restart.
    browser_ws(state, access, headers, ws).await
}

/// What a client calls itself, for the extension's options page and the
/// dashboard.
fn client_label(headers: &HeaderMap) -> ClientLabel {
    ClientLabel::of(headers.get(header::USER_AGENT).and_then(|v| v.to_str().ok()))
}

async fn page_ws(
    State(relay): State<Relay>,
    axum::Extension(access): Who,
    Path(id): Path<String>,
    headers: HeaderMap,
    ws: WebSocketUpgrade,
) -> Response {
    if !relay.wait_for_extension(relay.config().extension_grace).await {
        return text(StatusCode::SERVICE_UNAVAILABLE, "no extension connected: click the Browser Relay icon on a tab");
    }
    if relay.visible_tab_of_target(&id, &access).is_none() {
        return no_such_target_id(&id);
    }
    let Some(slot) = relay.try_client_slot() else { return too_many_clients(&relay) };
    let limit = relay.config().client_max_message;
    let name = client_label(&headers);
    let target: Arc<str> = id.into();
    ws.max_message_size(limit)
        .max_frame_size(limit)
        .on_upgrade(move |socket| async move { relay.serve_client(socket, Some(target), name, access, slot).await })
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
    // The oldest of the connections still proving gives its place up.
    let proving = relay.proving_place();
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
    let refusal = relay_engine::TooManyClients { max: relay.config().max_clients };
    text(StatusCode::SERVICE_UNAVAILABLE, refusal.to_string())
}

/// The 404 of a relay that serves no profiles.
fn no_profiles() -> Response {
    text(StatusCode::NOT_FOUND, "this relay serves no profiles")
}

/// A profile's browser could not answer: the status Chrome's port (or a
/// gateway) would give, and why.
fn served_error(error: ServedError) -> Response {
    let status = match &error {
        ServedError::Config(_) => StatusCode::INTERNAL_SERVER_ERROR,
        ServedError::UnknownProfile(_) | ServedError::OwnChrome(_) | ServedError::Refused(_) => StatusCode::NOT_FOUND,
        ServedError::Managed(ManagedError::AttachUnreachable { source, .. }) if source.is_timeout() => {
            StatusCode::GATEWAY_TIMEOUT
        }
        ServedError::Managed(ManagedError::AttachUnreachable { .. }) | ServedError::Browser { .. } => {
            StatusCode::BAD_GATEWAY
        }
        ServedError::Managed(_) => StatusCode::SERVICE_UNAVAILABLE,
    };
    text(status, error.to_string())
}

/// A profile's browser's answer about a target id: Chrome's own when it
/// does not know it.
fn no_such_target(error: ServedError, id: &str) -> Response {
    match error {
        ServedError::Refused(_) => no_such_target_id(id),
        other => served_error(other),
    }
}

/// `ws://<relay>/profiles/<name>/devtools/<path>`, with the token.
fn profile_ws_url(relay: &Relay, name: &str, path: &str) -> Option<String> {
    relay.public_base().map(|b| b.ws_url(&format!("/profiles/{name}/devtools/{path}")))
}

/// One target as Chrome's `/json/list` shows it, with the relay's socket.
fn list_entry(relay: &Relay, name: &str, info: &TargetInfo) -> ListEntry {
    let ws = profile_ws_url(relay, name, &format!("page/{}", info.target_id));
    ListEntry::new(&info.target_id, &info.kind, &info.title, &info.url, ws)
}

/// `PUT /profiles/<name>/json/new?<url>`: a new tab, as Chrome's own
/// `/json/new` makes it.
async fn profile_new(state: &AppState, name: String, url: String) -> Response {
    let Some(browsers) = &state.browsers else { return no_profiles() };
    match browsers.served_new_tab(&name, &url).await {
        Ok(info) => axum::Json(list_entry(&state.relay, &name, &info)).into_response(),
        Err(error) => served_error(error),
    }
}

/// `/profiles/<name>/json/version`, as Chrome's, from `Browser.getVersion`.
async fn profile_version(state: &AppState, name: String) -> Response {
    let Some(browsers) = &state.browsers else { return no_profiles() };
    match browsers.served_version(&name).await {
        Ok((version, browser_id)) => axum::Json(VersionDocument {
            webkit_version: VersionDocument::webkit_version_of(&version.revision),
            browser: version.product,
            protocol_version: version.protocol_version,
            user_agent: version.user_agent,
            v8_version: version.js_version,
            web_socket_debugger_url: profile_ws_url(&state.relay, &name, &format!("browser/{browser_id}")),
        })
        .into_response(),
        Err(error) => served_error(error),
    }
}

/// `/profiles/<name>/json/list`, as Chrome's, from `Target.getTargets`.
async fn profile_list(state: &AppState, name: String) -> Response {
    let Some(browsers) = &state.browsers else { return no_profiles() };
    match browsers.served_targets(&name).await {
        Ok(targets) => {
            let entries: Vec<ListEntry> = targets.iter().map(|info| list_entry(&state.relay, &name, info)).collect();
            axum::Json(entries).into_response()
        }
        Err(error) => served_error(error),
    }
}

/// A client's CDP socket on a managed browser: a session of its own over
/// the browser's pipe, frames relayed as they are.
async fn profile_ws(
    State(state): State<AppState>,
    Path((name, kind, id)): Path<(String, String, String)>,
    headers: HeaderMap,
    ws: WebSocketUpgrade,
) -> Response {
    let Some(slot) = state.relay.try_client_slot() else { return too_many_clients(&state.relay) };
    let endpoint = match kind.as_str() {
        "browser" => Endpoint::Browser,
        "page" => Endpoint::Page(id.clone()),
        _ => return text(StatusCode::NOT_FOUND, "expected /devtools/browser/<id> or /devtools/page/<id>"),
    };
    let Some(browsers) = &state.browsers else { return no_profiles() };
    let (session, incoming) = match browsers.served_client(&name, endpoint).await {
        Ok(served) => served,
        Err(error) => return no_such_target(error, &id),
    };
    let limit = state.relay.config().client_max_message;
    let relay = state.relay.clone();
    let label = client_label(&headers);
    ws.max_message_size(limit).max_frame_size(limit).on_upgrade(move |socket| async move {
        let to_browser = move |text: &str| session.send(text);
        relay.serve_piped_client(socket, to_browser, incoming, label, name, slot).await
    })
}

/// Relays frames between a client's socket and its session on the pipe;
/// counts as one of the relay's clients and ends when the server stops.
async fn not_found() -> Response {
    text(StatusCode::NOT_FOUND, "not found: see /json/version, /json/list, /cdp")
}
