//! The dashboard (`/ui` on the control port): one page of plain HTML, CSS
//! and JavaScript shipped in the binary, and the few JSON routes it polls
//! while it is open (nothing runs while no one watches). Who may use it is
//! decided by `net::ui_logins`; these handlers only read and answer.
//!
//! What it shows: every profile and its tabs (the user's shared tabs
//! marked, with the grant they are lent to), every connected client, the
//! grants, a live view of one tab (a small JPEG taken when the page asks,
//! never saved), and the activity record. What it stops: one client's
//! connection, the sharing of one tab, a managed profile's browser, a
//! grant. What it answers: the questions a grant's `--ask` holds for the
//! person, and the tabs a grant handed to them (`/ui/api/asks`, a long
//! poll, so a question shows within moments of being asked).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine as _;
use control_engine::Engine;
use control_engine::api::{GetStatus, Handle, ListTabs, Selected, Status, StopBrowser, TabSelector};
use relay_engine::{Answer, AnsweredBy, AskError, Relay};
use serde::Deserialize;
use serde_json::{Value, json};

use activity::{ActivityRecord, Entry, Kind, Source};

use crate::net::ui_logins::{Admitted, UiLogins, UiRejection, UiRoute};

const PAGE: &str = include_str!("ui/index.html");
const SCRIPT: &str = include_str!("ui/app.js");
const STYLE: &str = include_str!("ui/app.css");

/// Where the page's scripts, styles, images and requests may come from:
/// this origin only, but for the shared tabs' icons (an image from the
/// site, as the person's tab strip shows it, or inline); no inline script,
/// no framing, no forms elsewhere.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob: data: http: https:; \
                   connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

/// How long the live view waits for a shared tab's frame.
const VIEW_WITHIN: Duration = Duration::from_secs(3);

/// How long `GET /ui/api/asks?wait=…` waits for a change before it
/// answers with what it has (the page asks again at once): a page that
/// went away without closing its connection holds it no longer than this.
const ASKS_WAIT: Duration = Duration::from_secs(25);

/// What the dashboard's handlers reach.
#[derive(Debug, Clone)]
pub(crate) struct Dashboard {
    pub engine: Engine,
    pub relay: Relay,
    pub activity: ActivityRecord,
    pub logins: Arc<UiLogins>,
    /// The control API's address, for the login link.
    pub addr: SocketAddr,
    /// The grants: listed with their tabs and clients, revoked from here.
    pub lent: Arc<crate::lent::Lent>,
}

impl Dashboard {
    /// A new one-time login link.
    pub(crate) fn login_link(&self) -> Result<String, getrandom::Error> {
        let code = self.logins.issue_code()?;
        Ok(format!("http://{}/ui/login?code={code}", self.addr))
    }
}

pub(crate) fn router(dashboard: Dashboard) -> Router {
    let logins = dashboard.logins.clone();
    Router::new()
        .route("/ui", get(page))
        .route("/ui/", get(page))
        .route("/ui/app.js", get(|| async { asset("text/javascript; charset=utf-8", SCRIPT) }))
        .route("/ui/app.css", get(|| async { asset("text/css; charset=utf-8", STYLE) }))
        // Browsers ask for it beside the page: none, rather than a refusal in serve's log.
        .route("/favicon.ico", get(|| async { StatusCode::NO_CONTENT }))
        .route("/ui/login", get(login))
        .route("/ui/api/logout", post(logout))
        .route("/ui/api/overview", get(overview))
        .route("/ui/api/activity", get(activity_list))
        .route("/ui/api/view", get(view))
        .route("/ui/api/disconnect", post(disconnect))
        .route("/ui/api/unshare", post(unshare))
        .route("/ui/api/stop", post(stop_profile))
        .route("/ui/api/revoke", post(revoke_grant))
        .route("/ui/api/asks", get(asks))
        .route("/ui/api/answer", post(answer_question))
        .route("/ui/api/handoff-done", post(handoff_done))
        .with_state(dashboard)
        .layer(axum::middleware::from_fn_with_state(logins, ui_guard))
}

/// Applies [`UiLogins::admit`] to every dashboard request, and the
/// headers every dashboard answer carries.
async fn ui_guard(State(logins): State<Arc<UiLogins>>, mut request: Request, next: Next) -> Response {
    let path = request.uri().path().to_string();
    let mut response = match logins.admit(&path, request.headers()) {
        Ok(session) => {
            if let Some(session) = session {
                request.extensions_mut().insert(session);
            }
            next.run(request).await
        }
        Err(rejection) => {
            tracing::warn!(path, status = %rejection.status(), "dashboard refused: {}", rejection.message());
            refusal(&rejection, UiRoute::of(&path))
        }
    };
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// A refusal: a page that says what to do for a person opening `/ui`,
/// JSON for the page's own requests.
fn refusal(rejection: &UiRejection, route: UiRoute) -> Response {
    if matches!(route, UiRoute::Page | UiRoute::Login) {
        return (rejection.status(), html_message("Browser Relay", &rejection.message())).into_response();
    }
    (rejection.status(), axum::Json(json!({"error": {"message": rejection.message()}}))).into_response()
}

fn html_message(title: &str, message: &str) -> axum::response::Html<String> {
    let escape = |s: &str| s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;");
    axum::response::Html(format!(
        "<!doctype html><meta charset=utf-8><title>{0}</title><link rel=stylesheet href=/ui/app.css>\
         <main class=message><h1>{0}</h1><p>{1}</p></main>",
        escape(title),
        escape(message)
    ))
}

fn asset(mime: &'static str, body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, mime)], body).into_response()
}

/// The page's shell: the same for everyone, with no session in it (any
/// local program may fetch it). A tab that logged in finds its session in
/// its own `sessionStorage`; any other says how to log in.
async fn page() -> Response {
    axum::response::Html(PAGE.replace("{{session}}", "")).into_response()
}

#[derive(Deserialize)]
struct LoginQuery {
    #[serde(default)]
    code: String,
}

/// Redeems a login link: the page itself, with the new session's token in
/// it, once. The page keeps the token in its tab's `sessionStorage`, sends
/// it in `x-browser-relay-session` on every API request, and moves its
/// address to `/ui` (the spent code leaves the address bar). No cookie, no
/// redirect: the token is in no URL (no history entry keeps it) and in
/// nothing the browser would send by itself.
async fn login(State(dashboard): State<Dashboard>, query: Result<Query<LoginQuery>, QueryRejection>) -> Response {
    let session = query.ok().and_then(|Query(q)| dashboard.logins.redeem(&q.code));
    let Some(session) = session else {
        let message = "this login link was used already or is too old: run `browser-relay ui` for a new one";
        return (StatusCode::FORBIDDEN, html_message("Browser Relay", message)).into_response();
    };
    axum::response::Html(PAGE.replace("{{session}}", &session.token)).into_response()
}

async fn logout(State(dashboard): State<Dashboard>, axum::Extension(session): axum::Extension<Admitted>) -> Response {
    dashboard.logins.end(&session.token);
    axum::Json(json!({"ok": true})).into_response()
}

/// Every profile with its tabs, the user's shared tabs, and every client.
async fn overview(State(dashboard): State<Dashboard>) -> Response {
    let status = dashboard.engine.handle(Selected::default_tab(GetStatus {})).await;
    let profiles = match status {
        Ok(Status::All(all)) => all.profiles,
        Ok(Status::One(one)) => vec![one],
        Err(e) => return api_error(StatusCode::BAD_GATEWAY, &e.to_string()),
    };
    let shared = dashboard.relay.shared_tabs();
    let mut listed = Vec::new();
    for profile in profiles {
        let tabs: Value = match profile.driver {
            settings::Driver::Extension => json!(shared),
            _ if profile.running => {
                let selector = TabSelector { profile: Some(profile.profile.clone()), target_id: None };
                match dashboard.engine.handle(Selected::new(selector, ListTabs {})).await {
                    Ok(list) => json!(list.answer.tabs),
                    Err(e) => json!({"error": e.to_string()}),
                }
            }
            _ => json!([]),
        };
        let mut entry = json!(profile);
        entry["tabList"] = tabs;
        listed.push(entry);
    }
    let grants =
        crate::control::grants::GrantsState { lent: dashboard.lent.clone(), relay: Some(dashboard.relay.clone()) };
    axum::Json(json!({
        "profiles": listed,
        "extension": dashboard.relay.status_json(),
        "clients": dashboard.relay.clients(),
        "grants": grants.list(),
    }))
    .into_response()
}

async fn activity_list(
    State(dashboard): State<Dashboard>,
    query: Result<Query<activity::Query>, QueryRejection>,
) -> Response {
    match query {
        Ok(Query(query)) => axum::Json(dashboard.activity.answer(&query)).into_response(),
        Err(e) => api_error(StatusCode::BAD_REQUEST, &e.body_text()),
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ViewQuery {
    /// A managed profile; none: a tab the user shares.
    profile: Option<String>,
    target_id: String,
}

/// One frame of the live view: a small JPEG of the tab as it is now.
async fn view(State(dashboard): State<Dashboard>, query: Result<Query<ViewQuery>, QueryRejection>) -> Response {
    let Ok(Query(query)) = query else {
        return api_error(StatusCode::BAD_REQUEST, "expected ?targetId=…[&profile=…]");
    };
    let frame = match &query.profile {
        Some(profile) => dashboard.engine.peek(profile, &query.target_id).await.map_err(|e| e.to_string()),
        None => shared_tab_frame(&dashboard.relay, &query.target_id).await,
    };
    match frame {
        Ok(jpeg) => ([(header::CONTENT_TYPE, "image/jpeg")], jpeg).into_response(),
        Err(message) => api_error(StatusCode::BAD_GATEWAY, &message),
    }
}

/// A frame of a shared tab, through the extension.
async fn shared_tab_frame(relay: &Relay, target_id: &str) -> Result<Vec<u8>, String> {
    let data = relay.frame_of(target_id, VIEW_WITHIN).await.map_err(|e| e.to_string())?;
    base64::engine::general_purpose::STANDARD.decode(data).map_err(|e| e.to_string())
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct DisconnectRequest {
    client_id: u64,
}

async fn disconnect(State(dashboard): State<Dashboard>, body: axum::body::Bytes) -> Response {
    let Ok(request) = serde_json::from_slice::<DisconnectRequest>(&body) else {
        return api_error(StatusCode::BAD_REQUEST, "expected {\"clientId\": <number>}");
    };
    match dashboard.relay.disconnect_client(request.client_id) {
        Ok(()) => axum::Json(json!({"ok": true})).into_response(),
        Err(e) => api_error(StatusCode::NOT_FOUND, &e.to_string()),
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct UnshareRequest {
    target_id: String,
}

async fn unshare(State(dashboard): State<Dashboard>, body: axum::body::Bytes) -> Response {
    let Ok(request) = serde_json::from_slice::<UnshareRequest>(&body) else {
        return api_error(StatusCode::BAD_REQUEST, "expected {\"targetId\": \"…\"}");
    };
    match dashboard.relay.stop_sharing(&request.target_id).await {
        Ok(()) => axum::Json(json!({"ok": true})).into_response(),
        Err(relay_engine::StopError::NoSuchTab(_)) => {
            api_error(StatusCode::NOT_FOUND, &format!("no shared tab has target id {}", request.target_id))
        }
        Err(e) => api_error(StatusCode::BAD_GATEWAY, &e.to_string()),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StopRequest {
    profile: String,
}

async fn stop_profile(State(dashboard): State<Dashboard>, body: axum::body::Bytes) -> Response {
    let Ok(request) = serde_json::from_slice::<StopRequest>(&body) else {
        return api_error(StatusCode::BAD_REQUEST, "expected {\"profile\": \"…\"}");
    };
    let selector = TabSelector { profile: Some(request.profile.clone()), target_id: None };
    match dashboard.engine.handle(Selected::new(selector, StopBrowser {})).await {
        Ok(status) => {
            let mut entry = Entry::now(Source::Dashboard, "dashboard", Kind::Connection, "stop the browser");
            entry.profile = Some(request.profile);
            dashboard.activity.record(entry);
            axum::Json(json!(status)).into_response()
        }
        Err(e) => api_error(StatusCode::BAD_REQUEST, &e.to_string()),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RevokeRequest {
    name: String,
}

/// Revokes a grant: gone from grants.json, its connections closed at once.
async fn revoke_grant(State(dashboard): State<Dashboard>, body: axum::body::Bytes) -> Response {
    let Ok(request) = serde_json::from_slice::<RevokeRequest>(&body) else {
        return api_error(StatusCode::BAD_REQUEST, "expected {\"name\": \"…\"}");
    };
    match dashboard.lent.revoke(&request.name) {
        Ok(_) => {
            let mut entry = Entry::now(Source::Dashboard, "dashboard", Kind::Connection, "revoke the grant");
            entry.grant = Some(request.name);
            dashboard.activity.record(entry);
            axum::Json(json!({"ok": true})).into_response()
        }
        Err(grants::GrantError::Unknown(name)) => api_error(StatusCode::NOT_FOUND, &format!("no grant named '{name}'")),
        Err(e) => api_error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AsksQuery {
    /// The `version` of the page's last answer: answer when it changed.
    wait: Option<u64>,
}

/// The questions waiting for the person and the tabs handed to them, with
/// the version they are of. With `?wait=<version>` it answers once they
/// changed since that version, or after [`ASKS_WAIT`] with what there is:
/// the page asks again at once, so a question shows the moment it is
/// asked, and nothing runs between questions but a waiting request.
async fn asks(State(dashboard): State<Dashboard>, query: Result<Query<AsksQuery>, QueryRejection>) -> Response {
    let Ok(Query(query)) = query else {
        return api_error(StatusCode::BAD_REQUEST, "expected ?wait=<version>, the version of the last answer");
    };
    // Subscribed before the version is read: a change after it wakes us.
    let mut changes = dashboard.relay.watch_asks();
    let seen = *changes.borrow_and_update();
    if query.wait == Some(seen) {
        // Err: the relay is stopping; answer with what there is.
        let _ = tokio::time::timeout(ASKS_WAIT, changes.changed()).await;
    }
    // The version is read before the lists: a change between the two is
    // answered again at the next wait, never missed.
    let version = *changes.borrow_and_update();
    axum::Json(asks_now(&dashboard, version)).into_response()
}

/// The questions and handoffs as the page shows them: each with its
/// grant's colour and its tab's title and address now (when shared).
fn asks_now(dashboard: &Dashboard, version: u64) -> Value {
    let tabs = dashboard.relay.shared_tabs();
    let tab_of = |target_id: Option<&str>| tabs.iter().find(|t| Some(t.target_id.as_str()) == target_id);
    let color_of = |grant: &str| dashboard.lent.named(grant).map(|g| g.color.hex().to_string());
    let questions: Vec<Value> = dashboard
        .relay
        .questions()
        .into_iter()
        .map(|question| {
            let tab = tab_of(question.target_id.as_deref());
            let mut shown = json!(question);
            shown["colorHex"] = json!(color_of(&question.grant));
            shown["title"] = json!(tab.map(|t| &t.title));
            shown
        })
        .collect();
    let mut handoffs = dashboard.relay.handoffs();
    handoffs.sort_by_key(|h| h.since);
    let handoffs: Vec<Value> = handoffs
        .into_iter()
        .map(|handoff| {
            let tab = tab_of(Some(&handoff.target_id));
            let mut shown = json!(handoff);
            shown["colorHex"] = json!(color_of(&handoff.grant));
            shown["title"] = json!(tab.map(|t| &t.title));
            shown["url"] = json!(tab.map(|t| &t.url));
            shown
        })
        .collect();
    json!({"version": version, "now": activity::now_millis(), "questions": questions, "handoffs": handoffs})
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AnswerRequest {
    id: u64,
    answer: String,
}

/// The person answers a question. The relay records the answer (as given
/// on the dashboard), so this route records nothing of its own.
async fn answer_question(State(dashboard): State<Dashboard>, body: axum::body::Bytes) -> Response {
    let Ok(request) = serde_json::from_slice::<AnswerRequest>(&body) else {
        return api_error(
            StatusCode::BAD_REQUEST,
            "expected {\"id\": <number>, \"answer\": \"allow\" | \"allow-site\" | \"deny\"}",
        );
    };
    let answer = match Answer::parse(&request.answer) {
        Ok(answer) => answer,
        Err(e) => return api_error(StatusCode::BAD_REQUEST, &e.to_string()),
    };
    answer_outcome(dashboard.relay.answer(request.id, answer, AnsweredBy::Dashboard))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct HandoffDoneRequest {
    target_id: String,
}

/// The person gives a handed-over tab back (Done). Recorded by the relay.
async fn handoff_done(State(dashboard): State<Dashboard>, body: axum::body::Bytes) -> Response {
    let Ok(request) = serde_json::from_slice::<HandoffDoneRequest>(&body) else {
        return api_error(StatusCode::BAD_REQUEST, "expected {\"targetId\": \"…\"}");
    };
    answer_outcome(dashboard.relay.handoff_done(&request.target_id, AnsweredBy::Dashboard))
}

fn answer_outcome(result: Result<(), AskError>) -> Response {
    match result {
        Ok(()) => axum::Json(json!({"ok": true})).into_response(),
        // Answered already (here, in the notification, in a terminal),
        // timed out, or the tab went: nothing waits under that name.
        Err(e @ (AskError::Unknown(_) | AskError::NotHandedOver(_) | AskError::NoSuchTab(_))) => {
            api_error(StatusCode::NOT_FOUND, &e.to_string())
        }
        Err(e) => api_error(StatusCode::CONFLICT, &e.to_string()),
    }
}

fn api_error(status: StatusCode, message: &str) -> Response {
    (status, axum::Json(json!({"error": {"message": message}}))).into_response()
}
