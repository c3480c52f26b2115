//! The control API's HTTP surface: thin axum handlers over a [`ControlApi`]
//! (the [`Engine`](control_engine::Engine) in the product, a recording fake
//! in the tests). Each route is one request type of
//! [`control_engine::api`]; this module only reads it from the query or the
//! body, hands it over, and writes the answer. Every request has passed the
//! control guard (Host, no Origin, token). Errors are
//! `{"error": {"code", "message", "hint"}}`.

use axum::Router;
use axum::body::Bytes;
use axum::extract::{RawPathParams, RawQuery, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, delete, get, post};
use control_engine::api::{
    Act, ArmDialog, ArmFileChooser, CloseTab, ControlApi, FindInPage, FocusTab, GetStatus, GoBack, GoForward, HandOver,
    Handle, ImageType, Lend, ListProfiles, ListRequests, ListTabs, Method, Navigate, OpenTab, PrintPdf, ReadConsole,
    ReadResponseBody, Route, Selected, StartBrowser, StopBrowser, TakeScreenshot, TakeSnapshot, query_object,
};
use control_engine::{ControlError, ErrorKind, Surface};
use serde_json::{Value, json};

use std::sync::Arc;

use activity::{ActivityRecord, Source};

use crate::control::error::error_body;
use crate::control::grants::GrantsState;
use crate::control::ui::Dashboard;
use crate::net::guard::Guard;
use crate::net::sessions::{ANSWER_HEADER, REQUEST_HEADER, SessionNonces, Sessions};

/// Request bodies are small JSON documents.
pub(crate) const MAX_BODY: usize = 1 << 20;
/// The largest body of `POST /session`, which needs no key.
const SESSION_BODY_MAX: usize = 512;

/// One route: how it is called, and how it joins the router.
struct RouteEntry<E> {
    method: Method,
    path: &'static str,
    handler: MethodRouter<E>,
}

fn entry<E, R>() -> RouteEntry<E>
where
    E: Handle<R> + Lend + Clone + Send + Sync + 'static,
    R: Route,
{
    let handler = match R::METHOD {
        Method::Get => get(answer::<E, R>),
        Method::Post => post(answer::<E, R>),
        Method::Delete => delete(answer::<E, R>),
    };
    RouteEntry { method: R::METHOD, path: R::PATH, handler }
}

macro_rules! entries {
    ($($route:ident),*) => {
        /// Every route, in the order the docs list them.
        fn entries<E: ControlApi>() -> Vec<RouteEntry<E>> {
            vec![$(entry_of::<E, $route>()),*]
        }
    };
}
control_engine::for_each_route!(entries);

/// A route's entry; screenshots may answer with the image itself
/// (`Accept: image/*`), so they have a handler of their own.
fn entry_of<E, R>() -> RouteEntry<E>
where
    E: ControlApi + Handle<R>,
    R: Route,
{
    if R::PATH == TakeScreenshot::PATH {
        return RouteEntry {
            method: TakeScreenshot::METHOD,
            path: TakeScreenshot::PATH,
            handler: post(screenshot::<E>),
        };
    }
    entry::<E, R>()
}

/// What the control port serves beside the API: the activity record
/// (`GET /activity`, and every agent call written into it) and the
/// dashboard (`/ui`, and `POST /ui/login-link` for its login links).
#[derive(Debug, Clone, Default)]
pub(crate) struct Extras {
    pub activity: Option<ActivityRecord>,
    pub dashboard: Option<Dashboard>,
    /// The grants (`GET /grants`, `POST /grants/reload`, grants' sessions).
    pub lent: Option<Arc<crate::lent::Lent>>,
}

#[cfg(test)]
pub(crate) fn router<E: ControlApi>(engine: E, guard: Guard) -> Router {
    router_with(engine, guard, Extras::default())
}

pub(crate) fn router_with<E: ControlApi>(engine: E, guard: Guard, extras: Extras) -> Router {
    let mut router = Router::new();
    let mut listed = Vec::new();
    for RouteEntry { method, path, handler } in entries::<E>() {
        listed.push(format!("{} {path}", method_name(method)));
        router = router.route(path, handler);
    }
    // Without a record (the route tests), `GET /activity` says none is kept.
    let activity = extras.activity.clone().unwrap_or_else(ActivityRecord::off);
    listed.push("GET /activity".into());
    let extra = Router::new().route("/activity", get(read_activity)).with_state(activity);
    let extra = match &extras.lent {
        Some(lent) => {
            listed.push("GET /grants".into());
            listed.push("POST /grants/reload".into());
            let grants = Router::new()
                .route("/grants", get(crate::control::grants::list))
                .route("/grants/reload", post(crate::control::grants::reload))
                .with_state(GrantsState {
                    lent: lent.clone(),
                    relay: extras.dashboard.as_ref().map(|d| d.relay.clone()),
                });
            extra.merge(grants)
        }
        None => extra,
    };
    // The person in the loop: their questions and the tabs handed to them.
    let extra = match extras.dashboard.as_ref().map(|d| d.relay.clone()) {
        Some(relay) => {
            listed.extend(["GET /asks", "POST /asks/{id}", "POST /handoff/done"].map(String::from));
            let asks = Router::new()
                .route("/asks", get(crate::control::asks::list))
                .route("/asks/{id}", post(crate::control::asks::answer))
                .route("/handoff/done", post(crate::control::asks::done))
                .with_state(relay);
            extra.merge(asks)
        }
        None => extra,
    };
    let extra = match &extras.dashboard {
        Some(dashboard) => {
            listed.push("POST /ui/login-link".into());
            extra.merge(Router::new().route("/ui/login-link", post(login_link)).with_state(dashboard.clone()))
        }
        None => extra,
    };
    // The record, the grants and the dashboard's logins are the person's.
    let extra = extra.layer(axum::middleware::from_fn(persons_only));
    let hint = format!("routes: {}", listed.join(" · "));
    let sessions = guard.sessions().cloned().unwrap_or_else(|| Arc::new(Sessions::new(None)));
    // Anyone may open a session: its body is read up to a few hundred
    // bytes (`{"nonce": <64 hex>}`), not the routes' megabyte.
    let session = Router::new()
        .route("/session", post(open_session))
        .layer(axum::extract::DefaultBodyLimit::max(SESSION_BODY_MAX))
        .with_state(sessions);
    let api = router
        .fallback(move |request: Request| not_found(request, hint.clone()))
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY))
        .layer(axum::Extension(Recorder(extras.activity)))
        .with_state(engine)
        .merge(session)
        .merge(extra)
        .layer(axum::middleware::from_fn_with_state(guard, control_guard));
    // The dashboard has its own guard (a login and a cookie, not the key):
    // net::ui_logins.
    match extras.dashboard {
        Some(dashboard) => api.merge(crate::control::ui::router(dashboard)),
        None => api,
    }
}

/// Refuses a grant's key (403, saying why): for the routes that are the
/// person's alone (the activity record of every client, the grants, a
/// dashboard login).
async fn persons_only(request: Request, next: Next) -> Response {
    let grant = request.extensions().get::<grants::Access>().and_then(|a| a.grant_name().map(str::to_string));
    match grant {
        Some(name) => {
            let rejection = crate::net::guard::Rejection::PersonOnly(name);
            error_body(rejection.status(), "forbidden", &rejection.message(), None)
        }
        None => next.run(request).await,
    }
}

/// `GET /activity?limit&since&clientId&tab&profile&grant`: the activity record, newest first.
async fn read_activity(
    State(record): State<ActivityRecord>,
    query: Result<axum::extract::Query<activity::Query>, axum::extract::rejection::QueryRejection>,
) -> Response {
    match query {
        Ok(axum::extract::Query(query)) => axum::Json(record.answer(&query)).into_response(),
        Err(e) => error_body(StatusCode::BAD_REQUEST, "bad_request", &e.body_text(), None),
    }
}

/// `POST /ui/login-link`: a one-time link into the dashboard (what
/// `browser-relay ui` prints).
async fn login_link(State(dashboard): State<Dashboard>) -> Response {
    match dashboard.login_link() {
        Ok(url) => axum::Json(json!({
            "url": url,
            "expiresInSeconds": crate::net::ui_logins::CODE_TTL.as_secs(),
        }))
        .into_response(),
        Err(e) => error_body(StatusCode::INTERNAL_SERVER_ERROR, "internal", &format!("no random code: {e}"), None),
    }
}

/// Where agent calls are recorded (none in the route tests).
#[derive(Debug, Clone)]
struct Recorder(Option<ActivityRecord>);

impl Recorder {
    /// Records a call the record keeps ([`activity::summary::agent_call`]),
    /// with the tab and profile its answer names.
    fn note(
        &self,
        method: Method,
        path: &str,
        request: &Value,
        answer: Result<&Value, &ControlError>,
        surface: Surface,
        access: &grants::Access,
    ) {
        let Some(record) = &self.0 else { return };
        let Some((kind, summary)) = activity::summary::agent_call(method_name(method), path, request) else { return };
        let mut entry = activity::Entry::now(Source::Agent, surface.name(), kind, summary);
        let answered = answer.ok();
        let text = |key: &str| {
            answered.and_then(|a| a.get(key)).or_else(|| request.get(key)).and_then(Value::as_str).map(str::to_string)
        };
        entry.profile = text("profile");
        entry.tab = text("targetId");
        entry.url = answered.and_then(|a| a["page"]["url"].as_str().or_else(|| a["url"].as_str())).map(str::to_string);
        entry.failed = answer.is_err();
        entry.grant = access.grant_name().map(str::to_string);
        record.record(entry);
    }
}

/// `POST /session {"nonce", "grant"?}`: this server's nonce and proof of
/// the pairing token, or of the grant's control key (see `net::sessions`);
/// the client derives its session secret.
async fn open_session(State(sessions): State<Arc<Sessions>>, body: Bytes) -> Response {
    #[derive(serde::Deserialize)]
    struct Open {
        nonce: String,
        #[serde(default)]
        grant: Option<String>,
    }
    let Ok(Open { nonce, grant }) = serde_json::from_slice(&body) else {
        return error_body(StatusCode::BAD_REQUEST, "bad_request", "expected {\"nonce\": \"<64 hex>\"}", None);
    };
    if let Some(name) = grant {
        return match sessions.open_grant(&nonce, &name) {
            Some(opened) => axum::Json(opened).into_response(),
            None => error_body(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                &format!("no grant '{name}' is given (revoked, expired, or never made): `browser-relay grant list`"),
                None,
            ),
        };
    }
    match sessions.open(&nonce) {
        Some(opened) => axum::Json(opened).into_response(),
        None => error_body(
            StatusCode::BAD_REQUEST,
            "bad_request",
            "no session: the nonce must be 64 hex characters (and this serve must have its token)",
            None,
        ),
    }
}

fn method_name(method: Method) -> &'static str {
    match method {
        Method::Get => "GET",
        Method::Post => "POST",
        Method::Delete => "DELETE",
    }
}

/// The guard, answering in the API's JSON error shape.
async fn control_guard(State(guard): State<Guard>, mut request: Request, next: Next) -> Response {
    let uri = request.uri().clone();
    match guard.admit(uri.path(), uri.query(), request.headers()) {
        Ok(admitted) => {
            let session = admitted.session;
            request.extensions_mut().insert(admitted.access);
            // A session's client names its request; the answer is signed
            // for it, so the client can tell this server's answers from a
            // program that took the port after the server went away.
            let request_id = request.headers().get(REQUEST_HEADER).and_then(|v| v.to_str().ok()).map(str::to_string);
            let signing = request_id.zip(session);
            let response = next.run(request).await;
            match (signing, guard.sessions()) {
                (Some((id, nonces)), Some(sessions)) => signed(response, sessions, &nonces, &id).await,
                _ => response,
            }
        }
        Err(rejection) => {
            tracing::warn!(path = uri.path(), status = %rejection.status(), "control API refused: {}", rejection.message());
            let code = if rejection.status() == StatusCode::UNAUTHORIZED { "unauthorized" } else { "forbidden" };
            error_body(rejection.status(), code, &rejection.message(), None)
        }
    }
}

/// `response` with its signature ([`Sessions::sign_answer`]) in
/// [`ANSWER_HEADER`].
async fn signed(response: Response, sessions: &Sessions, nonces: &SessionNonces, request_id: &str) -> Response {
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return error_body(StatusCode::INTERNAL_SERVER_ERROR, "internal", "the answer could not be read", None);
    };
    if let Some(signature) = sessions.sign_answer(nonces, request_id, parts.status.as_u16(), &bytes)
        && let Ok(value) = signature.parse()
    {
        parts.headers.insert(ANSWER_HEADER, value);
    }
    Response::from_parts(parts, axum::body::Body::from(bytes))
}

/// An engine error as a response, its hint in the words of the surface
/// that asked.
struct ApiError(ControlError, Surface);

impl From<ControlError> for ApiError {
    fn from(error: ControlError) -> Self {
        Self(error, Surface::Http)
    }
}

/// The surface a client reads answers on (`Browser-Relay-Surface`).
fn surface(headers: &HeaderMap) -> Surface {
    headers.get(Surface::HEADER).and_then(|v| v.to_str().ok()).map_or(Surface::Http, Surface::from_name)
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = match self.0.kind() {
            ErrorKind::BadRequest => StatusCode::BAD_REQUEST,
            ErrorKind::NotFound => StatusCode::NOT_FOUND,
            ErrorKind::Conflict => StatusCode::CONFLICT,
            ErrorKind::Timeout => StatusCode::GATEWAY_TIMEOUT,
            ErrorKind::Upstream => StatusCode::BAD_GATEWAY,
            ErrorKind::Forbidden => StatusCode::FORBIDDEN,
        };
        error_body(status, self.0.code(), &self.0.to_string(), self.0.hint(self.1))
    }
}

type ApiResult = Result<Response, ApiError>;

/// The request a route reads: GET and DELETE from the query (typed by the
/// request's schema) and the path, POST from the JSON body (empty: `{}`).
fn read<R: Route>(raw_query: Option<&str>, path: &RawPathParams, body: &Bytes) -> Result<Selected<R>, ControlError> {
    let (value, what) = match R::METHOD {
        Method::Get | Method::Delete => {
            let mut value = query_object::<R>(raw_query)?;
            if let Value::Object(map) = &mut value {
                for (key, param) in path {
                    map.insert(key.to_string(), Value::String(param.to_string()));
                }
            }
            (value, "invalid query")
        }
        Method::Post => {
            let text = if body.iter().all(u8::is_ascii_whitespace) { &b"{}"[..] } else { &body[..] };
            let value = serde_json::from_slice(text)
                .map_err(|e| ControlError::BadRequest(format!("invalid JSON body: {e}")))?;
            (value, "invalid JSON body")
        }
    };
    Selected::from_json(value).map_err(|e| ControlError::BadRequest(format!("{what}: {e}")))
}

// An axum handler's arguments are its extractors, one per part it reads.
#[allow(clippy::too_many_arguments)]
async fn answer<E: Handle<R> + Lend, R: Route>(
    State(engine): State<E>,
    axum::Extension(access): axum::Extension<grants::Access>,
    axum::Extension(recorder): axum::Extension<Recorder>,
    uri: axum::http::Uri,
    RawQuery(raw): RawQuery,
    path: RawPathParams,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult {
    let surface = surface(&headers);
    let request = read::<R>(raw.as_deref(), &path, &body).map_err(|e| ApiError(e, surface))?;
    // A grant's agent works on the engine as lent to its grant.
    let engine = engine.lent_to(&access).map_err(|e| ApiError(e, surface))?;
    // Reads are not recorded: their request is not even looked at again.
    let recorded = (R::METHOD != Method::Get && recorder.0.is_some()).then(|| Value::Object(request.to_json()));
    let answer = engine.handle(request).await;
    if let Some(request) = &recorded {
        let value = answer.as_ref().map(|a| serde_json::to_value(a).unwrap_or_default());
        recorder.note(R::METHOD, uri.path(), request, value.as_ref().map_err(|e| *e), surface, &access);
    }
    let answer = answer.map_err(|e| ApiError(e, surface))?;
    Ok(axum::Json(answer).into_response())
}

async fn screenshot<E: Handle<TakeScreenshot> + Lend>(
    State(engine): State<E>,
    axum::Extension(access): axum::Extension<grants::Access>,
    axum::Extension(recorder): axum::Extension<Recorder>,
    RawQuery(raw): RawQuery,
    path: RawPathParams,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult {
    let surface = surface(&headers);
    let mut request = read::<TakeScreenshot>(raw.as_deref(), &path, &body).map_err(|e| ApiError(e, surface))?;
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or_default();
    let raw_image = ["image/png", "image/jpeg"].iter().find_map(|mime| accept.contains(mime).then_some(*mime));
    // `Accept: image/jpeg` alone picks the format; an explicit type must agree.
    if let Some(mime) = raw_image {
        let wanted = ImageType::from_mime(mime).unwrap_or_default();
        let explicit = serde_json::from_slice::<Value>(&body).ok().is_some_and(|v| v.get("type").is_some());
        if request.request.image_type != wanted && explicit {
            let typed = request.request.image_type.mime();
            return Err(ControlError::BadRequest(format!("Accept: {mime} but type is {typed}")).into());
        }
        request.request.image_type = wanted;
    }
    let selector = Value::Object(request.to_json());
    let engine = engine.lent_to(&access).map_err(|e| ApiError(e, surface))?;
    let shot = engine.handle(request).await;
    let value = shot.as_ref().map(|s| json!({"profile": s.profile, "targetId": s.answer.target_id}));
    recorder.note(Method::Post, TakeScreenshot::PATH, &selector, value.as_ref().map_err(|e| *e), surface, &access);
    let shot = shot.map_err(|e| ApiError(e, surface))?;
    if raw_image.is_some() {
        let path = shot.path.display().to_string();
        let headers =
            [(header::CONTENT_TYPE, shot.mime.clone()), (header::HeaderName::from_static("x-screenshot-path"), path)];
        return Ok((headers, shot.answer.data).into_response());
    }
    Ok(axum::Json(&shot).into_response())
}

async fn not_found(request: Request, routes: String) -> Response {
    error_body(
        StatusCode::NOT_FOUND,
        "not_found",
        &format!("no route {} {}", request.method(), request.uri().path()),
        Some(routes),
    )
}

#[cfg(test)]
mod route_tests;
