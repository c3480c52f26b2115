//! The control API's HTTP surface: thin axum handlers over a [`ControlApi`]
//! (the [`Engine`](super::Engine) in the product, a recording fake in the tests).
//! Every request has passed the control guard (Host, no Origin, token).
//! Errors are `{"error": {"code", "message", "hint"}}`.

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use control_engine::act::Action;
use control_engine::api::ControlApi;
use control_engine::engine::{ImageType, ScreenshotRequest, WaitUntil};
use control_engine::error::{ControlError, ErrorKind};
use control_engine::snapshot::{Format, SnapshotOptions};

use crate::net::guard::Guard;

/// Request bodies are small JSON documents.
pub const MAX_BODY: usize = 1 << 20;

pub fn router<E: ControlApi>(engine: E, guard: Guard) -> Router {
    Router::new()
        .route("/", get(status::<E>))
        .route("/profiles", get(profiles::<E>))
        .route("/start", post(start::<E>))
        .route("/stop", post(stop::<E>))
        .route("/tabs", get(tabs::<E>))
        .route("/tabs/open", post(open_tab::<E>))
        .route("/tabs/focus", post(focus_tab::<E>))
        .route("/tabs/{target_id}", delete(close_tab::<E>))
        .route("/navigate", post(navigate::<E>))
        .route("/snapshot", get(snapshot::<E>))
        .route("/screenshot", post(screenshot::<E>))
        .route("/console", get(console::<E>))
        .route("/act", post(act::<E>))
        .route("/hooks/dialog", post(hook_dialog::<E>))
        .route("/hooks/file-chooser", post(hook_file_chooser::<E>))
        .route("/pdf", post(pdf::<E>))
        .fallback(not_found)
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY))
        .with_state(engine)
        .layer(axum::middleware::from_fn_with_state(guard, control_guard))
}

/// The guard, answering in the API's JSON error shape.
async fn control_guard(State(guard): State<Guard>, request: Request, next: Next) -> Response {
    let uri = request.uri();
    match guard.check(uri.path(), uri.query(), request.headers()) {
        Ok(()) => next.run(request).await,
        Err(rejection) => {
            tracing::warn!(path = uri.path(), status = %rejection.status(), "control API refused: {}", rejection.message());
            let code = if rejection.status() == StatusCode::UNAUTHORIZED { "unauthorized" } else { "forbidden" };
            error_body(rejection.status(), code, &rejection.message(), None)
        }
    }
}

fn error_body(status: StatusCode, code: &str, message: &str, hint: Option<String>) -> Response {
    let mut error = json!({"code": code, "message": message});
    if let Some(hint) = hint {
        error["hint"] = json!(hint);
    }
    (status, axum::Json(json!({"error": error}))).into_response()
}

/// An engine error as a response.
struct ApiError(ControlError);

impl From<ControlError> for ApiError {
    fn from(error: ControlError) -> Self {
        Self(error)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = match self.0.kind() {
            ErrorKind::BadRequest => StatusCode::BAD_REQUEST,
            ErrorKind::NotFound => StatusCode::NOT_FOUND,
            ErrorKind::Conflict => StatusCode::CONFLICT,
            ErrorKind::Timeout => StatusCode::GATEWAY_TIMEOUT,
            ErrorKind::Upstream => StatusCode::BAD_GATEWAY,
        };
        error_body(status, self.0.code(), &self.0.to_string(), self.0.hint())
    }
}

type ApiResult = Result<Response, ApiError>;

fn ok(value: impl serde::Serialize) -> ApiResult {
    Ok(axum::Json(value).into_response())
}

/// A JSON body (an empty body is `{}`), with serde's precise messages
/// ("unknown field `urll`, expected one of …") for mistakes.
fn body<T: DeserializeOwned>(bytes: &Bytes) -> Result<T, ControlError> {
    let text = if bytes.iter().all(u8::is_ascii_whitespace) { &b"{}"[..] } else { &bytes[..] };
    serde_json::from_slice(text).map_err(|e| ControlError::BadRequest(format!("invalid JSON body: {e}")))
}

/// A query string as JSON, with `bools` and `ints` typed, for serde.
fn query<T: DeserializeOwned>(raw: Option<&str>, bools: &[&str], ints: &[&str]) -> Result<T, ControlError> {
    let mut map = Map::new();
    for (key, value) in url::form_urlencoded::parse(raw.unwrap_or_default().as_bytes()) {
        if key == "token" {
            continue;
        }
        let typed = if bools.contains(&key.as_ref()) {
            match value.as_ref() {
                "" | "1" | "true" => Value::Bool(true),
                "0" | "false" => Value::Bool(false),
                other => return Err(ControlError::BadRequest(format!("{key}={other}: use true or false"))),
            }
        } else if ints.contains(&key.as_ref()) {
            let number: u64 = value
                .parse()
                .map_err(|_| ControlError::BadRequest(format!("{key}={value}: expected a whole number")))?;
            json!(number)
        } else {
            Value::String(value.into_owned())
        };
        map.insert(key.into_owned(), typed);
    }
    serde_json::from_value(Value::Object(map)).map_err(|e| ControlError::BadRequest(format!("invalid query: {e}")))
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ProfileQuery {
    profile: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ProfileBody {
    profile: Option<String>,
}

async fn status<E: ControlApi>(State(engine): State<E>, RawQuery(raw): RawQuery) -> ApiResult {
    let q: ProfileQuery = query(raw.as_deref(), &[], &[])?;
    let profiles = engine.status(q.profile.as_deref()).await?;
    match q.profile {
        Some(_) => ok(&profiles[0]),
        None => ok(
            json!({"service": "browser-relay control API", "version": env!("CARGO_PKG_VERSION"), "profiles": profiles}),
        ),
    }
}

async fn profiles<E: ControlApi>(State(engine): State<E>) -> ApiResult {
    ok(engine.profiles()?)
}

async fn start<E: ControlApi>(State(engine): State<E>, bytes: Bytes) -> ApiResult {
    let b: ProfileBody = body(&bytes)?;
    ok(engine.start(b.profile.as_deref()).await?)
}

async fn stop<E: ControlApi>(State(engine): State<E>, bytes: Bytes) -> ApiResult {
    let b: ProfileBody = body(&bytes)?;
    ok(engine.stop(b.profile.as_deref()).await?)
}

async fn tabs<E: ControlApi>(State(engine): State<E>, RawQuery(raw): RawQuery) -> ApiResult {
    let q: ProfileQuery = query(raw.as_deref(), &[], &[])?;
    ok(json!({"tabs": engine.tabs(q.profile.as_deref()).await?}))
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct OpenBody {
    profile: Option<String>,
    url: String,
}

async fn open_tab<E: ControlApi>(State(engine): State<E>, bytes: Bytes) -> ApiResult {
    let b: OpenBody = body(&bytes)?;
    ok(engine.open_tab(b.profile.as_deref(), &b.url).await?)
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct FocusBody {
    profile: Option<String>,
    target_id: String,
}

async fn focus_tab<E: ControlApi>(State(engine): State<E>, bytes: Bytes) -> ApiResult {
    let b: FocusBody = body(&bytes)?;
    engine.focus_tab(b.profile.as_deref(), &b.target_id).await?;
    ok(json!({"ok": true, "targetId": b.target_id}))
}

async fn close_tab<E: ControlApi>(
    State(engine): State<E>,
    Path(target_id): Path<String>,
    RawQuery(raw): RawQuery,
) -> ApiResult {
    let q: ProfileQuery = query(raw.as_deref(), &[], &[])?;
    engine.close_tab(q.profile.as_deref(), &target_id).await?;
    ok(json!({"ok": true, "targetId": target_id}))
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct NavigateBody {
    profile: Option<String>,
    target_id: Option<String>,
    url: String,
    #[serde(default)]
    wait_until: WaitUntil,
    timeout_ms: Option<u64>,
}

async fn navigate<E: ControlApi>(State(engine): State<E>, bytes: Bytes) -> ApiResult {
    let b: NavigateBody = body(&bytes)?;
    ok(engine.navigate(b.profile.as_deref(), b.target_id.as_deref(), &b.url, b.wait_until, b.timeout_ms).await?)
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SnapshotQuery {
    profile: Option<String>,
    target_id: Option<String>,
    #[serde(default)]
    format: Format,
    #[serde(default)]
    interactive: bool,
    #[serde(default)]
    compact: bool,
    depth: Option<u32>,
    limit: Option<u32>,
    max_chars: Option<usize>,
    selector: Option<String>,
    frame: Option<String>,
}

async fn snapshot<E: ControlApi>(State(engine): State<E>, RawQuery(raw): RawQuery) -> ApiResult {
    let q: SnapshotQuery = query(raw.as_deref(), &["interactive", "compact"], &["depth", "limit", "maxChars"])?;
    let options = SnapshotOptions {
        format: q.format,
        interactive: q.interactive,
        compact: q.compact,
        depth: q.depth,
        limit: q.limit,
        max_chars: q.max_chars,
        selector: q.selector,
        frame: q.frame,
    };
    ok(engine.snapshot(q.profile.as_deref(), q.target_id.as_deref(), &options).await?)
}

async fn screenshot<E: ControlApi>(State(engine): State<E>, headers: HeaderMap, bytes: Bytes) -> ApiResult {
    let mut request: ScreenshotRequest = body(&bytes)?;
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or_default();
    let raw = ["image/png", "image/jpeg"].iter().find(|mime| accept.contains(**mime)).copied();
    // `Accept: image/jpeg` alone picks the format; an explicit type must agree.
    if let Some(mime) = raw {
        let wanted = if mime == "image/jpeg" { ImageType::Jpeg } else { ImageType::Png };
        if request.image_type != wanted && bytes_mention_type(&bytes) {
            return Err(
                ControlError::BadRequest(format!("Accept: {mime} but type is {}", request.image_type.mime())).into()
            );
        }
        request.image_type = wanted;
    }
    let shot = engine.screenshot(&request).await?;
    if raw.is_some() {
        let path = shot.path.display().to_string();
        return Ok((
            [
                (header::CONTENT_TYPE, shot.mime.to_string()),
                (header::HeaderName::from_static("x-screenshot-path"), path),
            ],
            shot.data,
        )
            .into_response());
    }
    ok(&shot)
}

fn bytes_mention_type(bytes: &Bytes) -> bool {
    serde_json::from_slice::<Value>(bytes).ok().is_some_and(|v| v.get("type").is_some())
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ConsoleQuery {
    profile: Option<String>,
    target_id: Option<String>,
    level: Option<String>,
    limit: Option<usize>,
}

async fn console<E: ControlApi>(State(engine): State<E>, RawQuery(raw): RawQuery) -> ApiResult {
    let q: ConsoleQuery = query(raw.as_deref(), &[], &["limit"])?;
    ok(engine.console(q.profile.as_deref(), q.target_id.as_deref(), q.level.as_deref(), q.limit).await?)
}

/// `POST /act {kind, targetId?, profile?, timeoutMs?, …}`: the common
/// fields come off first; the rest must be exactly one kind's fields.
async fn act<E: ControlApi>(State(engine): State<E>, bytes: Bytes) -> ApiResult {
    let mut value: Value = body(&bytes)?;
    let Some(fields) = value.as_object_mut() else {
        return Err(ControlError::BadRequest("the body must be a JSON object".into()).into());
    };
    let text = |v: Option<Value>, key: &str| -> Result<Option<String>, ControlError> {
        match v {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(ControlError::BadRequest(format!("{key} must be a string"))),
        }
    };
    let profile = text(fields.remove("profile"), "profile")?;
    let target_id = text(fields.remove("targetId"), "targetId")?;
    let timeout_ms = match fields.remove("timeoutMs") {
        None | Some(Value::Null) => None,
        Some(v) => Some(v.as_u64().ok_or_else(|| ControlError::BadRequest("timeoutMs must be a whole number".into()))?),
    };
    let action: Action =
        serde_json::from_value(value).map_err(|e| ControlError::BadRequest(format!("invalid action: {e}")))?;
    ok(engine.act(profile.as_deref(), target_id.as_deref(), timeout_ms, action).await?)
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct DialogBody {
    profile: Option<String>,
    target_id: Option<String>,
    accept: bool,
    prompt_text: Option<String>,
    timeout_ms: Option<u64>,
}

async fn hook_dialog<E: ControlApi>(State(engine): State<E>, bytes: Bytes) -> ApiResult {
    let b: DialogBody = body(&bytes)?;
    ok(engine.arm_dialog(b.profile.as_deref(), b.target_id.as_deref(), b.accept, b.prompt_text, b.timeout_ms).await?)
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct FileChooserBody {
    profile: Option<String>,
    target_id: Option<String>,
    paths: Vec<String>,
    #[serde(rename = "ref")]
    element: Option<String>,
    timeout_ms: Option<u64>,
}

async fn hook_file_chooser<E: ControlApi>(State(engine): State<E>, bytes: Bytes) -> ApiResult {
    let b: FileChooserBody = body(&bytes)?;
    let armed = engine
        .arm_file_chooser(b.profile.as_deref(), b.target_id.as_deref(), &b.paths, b.element.as_deref(), b.timeout_ms)
        .await?;
    ok(armed)
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TabBody {
    profile: Option<String>,
    target_id: Option<String>,
}

async fn pdf<E: ControlApi>(State(engine): State<E>, bytes: Bytes) -> ApiResult {
    let b: TabBody = body(&bytes)?;
    ok(engine.pdf(b.profile.as_deref(), b.target_id.as_deref()).await?)
}

async fn not_found(request: Request) -> Response {
    error_body(
        StatusCode::NOT_FOUND,
        "not_found",
        &format!("no route {} {}", request.method(), request.uri().path()),
        Some("routes: GET / · GET /profiles · POST /start · POST /stop · GET /tabs · POST /tabs/open · POST /tabs/focus · DELETE /tabs/:targetId · POST /navigate · GET /snapshot · POST /screenshot · GET /console · POST /act · POST /hooks/dialog · POST /hooks/file-chooser · POST /pdf".into()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_strings_are_typed_and_checked() {
        let q: SnapshotQuery = query(
            Some("interactive&compact=false&depth=3&maxChars=100&selector=%23main&token=x"),
            &["interactive", "compact"],
            &["depth", "limit", "maxChars"],
        )
        .unwrap();
        assert!(q.interactive);
        assert!(!q.compact);
        assert_eq!(q.depth, Some(3));
        assert_eq!(q.max_chars, Some(100));
        assert_eq!(q.selector.as_deref(), Some("#main"));
        let error = query::<SnapshotQuery>(Some("depth=deep"), &[], &["depth"]).unwrap_err();
        assert!(error.to_string().contains("depth=deep"), "{error}");
        let error = query::<SnapshotQuery>(Some("targetid=x"), &[], &[]).unwrap_err();
        assert!(error.to_string().contains("unknown field `targetid`"), "{error}");
    }

    #[test]
    fn bodies_say_what_is_wrong() {
        let empty: ProfileBody = body(&Bytes::from_static(b"")).unwrap();
        assert!(empty.profile.is_none());
        let error = body::<OpenBody>(&Bytes::from_static(b"{\"urll\": \"x\"}")).unwrap_err().to_string();
        assert!(error.contains("unknown field `urll`"), "{error}");
        let error = body::<OpenBody>(&Bytes::from_static(b"{not json")).unwrap_err().to_string();
        assert!(error.starts_with("invalid JSON body"), "{error}");
    }
}

#[cfg(test)]
mod route_tests;
