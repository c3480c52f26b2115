//! Every route of the control API in-process, over a recording fake engine:
//! what the request says reaches the engine unchanged, what the engine
//! answers reaches the agent in the documented shape, and bad requests stop
//! before the engine. No browser, no socket (`tower::ServiceExt::oneshot`).

use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use control_engine::api::*;
use control_engine::api::{Action, Click, Press, WaitFor};
use control_engine::{ControlError, Surface};
use serde_json::{Value, json};
use settings::Driver;
use state_dir::Token;
use tower::ServiceExt as _;

use super::router;
use crate::net::guard::Guard;

/// Makes the error the fake answers with (`ControlError` is not `Clone`).
type MakeError = fn() -> ControlError;
/// (method, path, body, the request the engine must be handed, (a JSON
/// pointer into the answer, its value))
type RouteCase<'a> = (&'a str, &'a str, &'a str, String, (&'a str, Value));

/// Records each request it is handed (as `Debug`) and answers with a canned
/// value of the route's answer type, or with the error armed by
/// [`FakeEngine::fail_next`]. One implementation serves every route.
#[derive(Debug, Clone, Default)]
struct FakeEngine {
    calls: Arc<Mutex<Vec<String>>>,
    failure: Arc<Mutex<Option<MakeError>>>,
}

impl FakeEngine {
    fn fail_next(&self, error: MakeError) {
        *self.failure.lock().unwrap() = Some(error);
    }

    fn calls(&self) -> Vec<String> {
        std::mem::take(&mut *self.calls.lock().unwrap())
    }
}

/// A grant's request reaches the engine as lent to its grant: recorded.
impl Lend for FakeEngine {
    fn lent_to(&self, access: &grants::Access) -> Result<Self, ControlError> {
        if let Some(name) = access.grant_name() {
            self.calls.lock().unwrap().push(format!("lent to {name}"));
        }
        Ok(self.clone())
    }
}

/// A canned answer, shaped by the request where the agent would see it.
trait Canned: Route {
    fn canned(request: &Selected<Self>) -> Self::Answer;
}

impl<R: Canned> Handle<R> for FakeEngine {
    async fn handle(&self, request: Selected<R>) -> Result<R::Answer, ControlError> {
        self.calls.lock().unwrap().push(format!("{request:?}"));
        match self.failure.lock().unwrap().take() {
            Some(error) => Err(error()),
            None => Ok(R::canned(&request)),
        }
    }
}

fn tab(target_id: &str, url: &str) -> TabInfo {
    TabInfo {
        target_id: target_id.into(),
        title: "Fake".into(),
        url: url.into(),
        kind: "page".into(),
        active: true,
        dialog: None,
    }
}

fn profile_status(name: &str) -> ProfileStatus {
    ProfileStatus {
        profile: name.into(),
        driver: Driver::Managed,
        color: "#FF4500".into(),
        default: true,
        ephemeral: false,
        running: true,
        connected: true,
        state: "running".into(),
        tabs: Some(1),
        cdp_endpoint: None,
        cdp_url_command: None,
        detail: String::new(),
    }
}

/// An answer about the profile the request named (the fake's default:
/// managed).
fn profiled<A>(request: &Selected<impl Route>, answer: A) -> Profiled<A> {
    Profiled { profile: request.tab.profile.clone().unwrap_or_else(|| "managed".into()), answer }
}

fn target(request: &Selected<impl Route>) -> String {
    request.tab.target_id.clone().unwrap_or_else(|| "T1".into())
}

impl Canned for GetStatus {
    fn canned(request: &Selected<Self>) -> Status {
        match &request.tab.profile {
            Some(name) => Status::One(profile_status(name)),
            None => Status::All(ServiceStatus {
                service: "fake".into(),
                version: "0".into(),
                profiles: vec![profile_status("managed")],
            }),
        }
    }
}
impl Canned for ListProfiles {
    fn canned(_: &Selected<Self>) -> ProfileList {
        ProfileList { default_profile: "managed".into(), profiles: vec![] }
    }
}
impl Canned for StartBrowser {
    fn canned(request: &Selected<Self>) -> ProfileStatus {
        profile_status(request.tab.profile().unwrap_or("managed"))
    }
}
impl Canned for StopBrowser {
    fn canned(request: &Selected<Self>) -> ProfileStatus {
        profile_status(request.tab.profile().unwrap_or("managed"))
    }
}
impl Canned for ListTabs {
    fn canned(request: &Selected<Self>) -> Profiled<TabList> {
        profiled(request, TabList { tabs: vec![tab("T1", "about:blank")] })
    }
}
impl Canned for OpenTab {
    fn canned(request: &Selected<Self>) -> Profiled<TabInfo> {
        profiled(request, tab("T2", &request.request.url))
    }
}
impl Canned for FocusTab {
    fn canned(request: &Selected<Self>) -> Profiled<TabDone> {
        profiled(request, TabDone { ok: true, target_id: target(request) })
    }
}
impl Canned for CloseTab {
    fn canned(request: &Selected<Self>) -> Profiled<TabDone> {
        profiled(request, TabDone { ok: true, target_id: target(request) })
    }
}
impl Canned for Navigate {
    fn canned(request: &Selected<Self>) -> Profiled<Navigated> {
        profiled(
            request,
            Navigated { target_id: target(request), url: request.request.url.clone(), title: "Fake".into() },
        )
    }
}
impl Canned for GoBack {
    fn canned(request: &Selected<Self>) -> Profiled<Navigated> {
        profiled(request, Navigated { target_id: target(request), url: "http://x/back".into(), title: "Back".into() })
    }
}
impl Canned for GoForward {
    fn canned(request: &Selected<Self>) -> Profiled<Navigated> {
        profiled(
            request,
            Navigated { target_id: target(request), url: "http://x/forward".into(), title: "Forward".into() },
        )
    }
}
impl Canned for TakeSnapshot {
    fn canned(request: &Selected<Self>) -> Profiled<Snapshot> {
        profiled(
            request,
            Snapshot {
                target_id: target(request),
                url: "about:blank".into(),
                title: "Fake".into(),
                format: request.request.format,
                snapshot: Some("button \"Go\" [e1]".into()),
                nodes: None,
                refs: 1,
                node_count: 1,
                truncated: false,
                notes: vec![],
                dialog: None,
            },
        )
    }
}
impl Canned for FindInPage {
    fn canned(request: &Selected<Self>) -> Profiled<Found> {
        profiled(
            request,
            Found {
                target_id: target(request),
                url: "about:blank".into(),
                title: "Fake".into(),
                total: 1,
                matches: vec![FoundLine {
                    path: "main".into(),
                    line: "button \"Go\" [e1]".into(),
                    element_ref: Some("e1".into()),
                }],
                notes: vec![],
            },
        )
    }
}
impl Canned for TakeScreenshot {
    fn canned(request: &Selected<Self>) -> Profiled<Screenshot> {
        profiled(
            request,
            Screenshot {
                target_id: target(request),
                path: "/media/shot".into(),
                width: 2,
                height: 1,
                bytes: 4,
                mime: request.request.image_type.mime().into(),
                labels: None,
                skipped: None,
                data: b"IMG!".to_vec(),
            },
        )
    }
}
impl Canned for ReadConsole {
    fn canned(request: &Selected<Self>) -> Profiled<ConsoleReport> {
        profiled(request, ConsoleReport { target_id: target(request), messages: vec![], page_errors: vec![] })
    }
}
impl Canned for ListRequests {
    fn canned(request: &Selected<Self>) -> Profiled<RequestList> {
        let missing = NetworkRequest {
            request_id: "9.1".into(),
            method: "GET".into(),
            url: "http://x/api/missing.json".into(),
            resource_type: "Fetch".into(),
            status: Some(404),
            ..NetworkRequest::default()
        };
        let list = RequestList {
            target_id: target(request),
            requests: vec![missing],
            total: 3,
            shown: 1,
            page: 1,
            earlier_pages: 0,
        };
        profiled(request, list)
    }
}
impl Canned for ReadResponseBody {
    fn canned(request: &Selected<Self>) -> Profiled<ResponseBody> {
        profiled(
            request,
            ResponseBody {
                target_id: target(request),
                request_id: request.request.request_id.clone(),
                mime_type: "application/json".into(),
                body: "{}".into(),
                base64_encoded: false,
                truncated: false,
                bytes: 2,
            },
        )
    }
}
impl Canned for Act {
    fn canned(request: &Selected<Self>) -> Profiled<ActOutcome> {
        profiled(
            request,
            ActOutcome {
                ok: true,
                kind: request.request.action.kind().into(),
                target_id: target(request),
                navigated: false,
                result: None,
                page: None,
                snapshot: None,
                changes: None,
            },
        )
    }
}
impl Canned for ArmDialog {
    fn canned(request: &Selected<Self>) -> Profiled<DialogArmed> {
        profiled(request, DialogArmed { ok: true, target_id: target(request), armed: true, answered: None })
    }
}
impl Canned for ArmFileChooser {
    fn canned(request: &Selected<Self>) -> Profiled<FilesArmed> {
        profiled(
            request,
            FilesArmed { ok: true, target_id: target(request), armed: Some(request.request.paths.clone()), set: None },
        )
    }
}
impl Canned for HandOver {
    fn canned(request: &Selected<Self>) -> Profiled<HandedBack> {
        profiled(
            request,
            HandedBack {
                ended: HandoffEnded::Done,
                target_id: target(request),
                url: None,
                title: None,
                snapshot: None,
            },
        )
    }
}
impl Canned for PrintPdf {
    fn canned(request: &Selected<Self>) -> Profiled<Pdf> {
        profiled(request, Pdf { target_id: target(request), path: "/media/page.pdf".into(), pages: 2, bytes: 900 })
    }
}

const TOKEN: &str = "5e1f00d5e1f00d5e1f00d5e1f00d5e1f00d5e1f00d5e1f00d5e1f00d5e1f00d0";

struct Reply {
    status: StatusCode,
    content_type: String,
    headers: axum::http::HeaderMap,
    body: Vec<u8>,
}

impl Reply {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", self.body))
    }
}

/// One request as an agent sends it (loopback Host, the token), answered
/// by the router over `engine`.
async fn send(engine: &FakeEngine, method: &str, uri: &str, body: &str, headers: &[(&str, &str)]) -> Reply {
    send_to(router(engine.clone(), guard()), method, uri, body, headers).await
}

fn guard() -> Guard {
    let sessions = std::sync::Arc::new(crate::net::sessions::Sessions::new(
        Token::parse(TOKEN).as_ref().map(crate::keys::control_key),
    ));
    Guard::control(Token::parse(TOKEN), sessions)
}

async fn send_to(app: axum::Router, method: &str, uri: &str, body: &str, headers: &[(&str, &str)]) -> Reply {
    let mut request = Request::builder().method(method).uri(uri).header(header::HOST, "127.0.0.1:18791").header(
        header::AUTHORIZATION,
        format!("Bearer {}", crate::keys::control_key(&Token::parse(TOKEN).unwrap()).as_str()),
    );
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = app.oneshot(request.body(Body::from(body.to_string())).unwrap()).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let content_type = headers.get(header::CONTENT_TYPE).map(|v| v.to_str().unwrap().to_string()).unwrap_or_default();
    let body = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap().to_vec();
    Reply { status, content_type, headers, body }
}

fn on(profile: Option<&str>, target: Option<&str>) -> TabSelector {
    TabSelector { profile: profile.map(Into::into), target_id: target.map(Into::into) }
}

/// What the engine must have been handed: the request, as `Debug` prints it.
fn handed<R: Route>(tab: TabSelector, request: R) -> String {
    format!("{:?}", Selected::new(tab, request))
}

#[tokio::test]
async fn every_route_hands_the_request_to_the_engine_and_its_answer_back() {
    let engine = FakeEngine::default();
    let none = || on(None, None);
    let cases: Vec<RouteCase> = vec![
        ("GET", "/", "", handed(none(), GetStatus {}), ("/profiles/0/profile", json!("managed"))),
        ("GET", "/?profile=work", "", handed(on(Some("work"), None), GetStatus {}), ("/profile", json!("work"))),
        ("GET", "/profiles", "", handed(none(), ListProfiles {}), ("/defaultProfile", json!("managed"))),
        ("POST", "/start", "", handed(none(), StartBrowser::default()), ("/state", json!("running"))),
        (
            "POST",
            "/start",
            r#"{"profile":"work"}"#,
            handed(on(Some("work"), None), StartBrowser::default()),
            ("/profile", json!("work")),
        ),
        (
            "POST",
            "/start",
            r#"{"profile":"tmp","ephemeral":true}"#,
            handed(on(Some("tmp"), None), StartBrowser { ephemeral: true }),
            ("/profile", json!("tmp")),
        ),
        (
            "POST",
            "/stop",
            r#"{"profile":"work"}"#,
            handed(on(Some("work"), None), StopBrowser {}),
            ("/profile", json!("work")),
        ),
        (
            "GET",
            "/tabs?profile=chrome",
            "",
            handed(on(Some("chrome"), None), ListTabs {}),
            ("/tabs/0/targetId", json!("T1")),
        ),
        (
            "POST",
            "/tabs/open",
            r#"{"url":"http://127.0.0.1:1/a"}"#,
            handed(none(), OpenTab { url: "http://127.0.0.1:1/a".into() }),
            ("/targetId", json!("T2")),
        ),
        (
            "POST",
            "/tabs/focus",
            r#"{"targetId":"T9"}"#,
            handed(on(None, Some("T9")), FocusTab {}),
            ("/targetId", json!("T9")),
        ),
        (
            "DELETE",
            "/tabs/T9?profile=work",
            "",
            handed(on(Some("work"), Some("T9")), CloseTab {}),
            ("/ok", json!(true)),
        ),
        (
            "POST",
            "/navigate",
            r#"{"url":"http://x/","targetId":"T1","waitUntil":"networkidle","timeoutMs":900}"#,
            handed(
                on(None, Some("T1")),
                Navigate { url: "http://x/".into(), wait_until: WaitUntil::NetworkIdle, timeout_ms: Some(900) },
            ),
            ("/url", json!("http://x/")),
        ),
        (
            "POST",
            "/navigate",
            r#"{"url":"http://x/"}"#,
            handed(none(), Navigate { url: "http://x/".into(), wait_until: WaitUntil::Load, timeout_ms: None }),
            ("/title", json!("Fake")),
        ),
        (
            "POST",
            "/back",
            r#"{"targetId":"T1","waitUntil":"commit","timeoutMs":900}"#,
            handed(on(None, Some("T1")), GoBack { wait_until: WaitUntil::Commit, timeout_ms: Some(900) }),
            ("/url", json!("http://x/back")),
        ),
        ("POST", "/forward", "", handed(none(), GoForward::default()), ("/title", json!("Forward"))),
        ("GET", "/snapshot", "", handed(none(), TakeSnapshot::default()), ("/snapshot", json!("button \"Go\" [e1]"))),
        (
            "GET",
            "/snapshot?format=aria&interactive&full=true&compact=true&depth=2&limit=10&maxChars=500&part=2&selector=%23main&frame=f1&targetId=T1&token=x",
            "",
            handed(
                on(None, Some("T1")),
                TakeSnapshot {
                    format: Format::Aria,
                    interactive: true,
                    full: true,
                    compact: true,
                    depth: Some(2),
                    limit: Some(10),
                    max_chars: Some(500),
                    part: Some(2),
                    selector: Some("#main".into()),
                    frame: Some("f1".into()),
                },
            ),
            ("/refs", json!(1)),
        ),
        (
            "GET",
            "/find?text=Sign%20up&role=button&name=sign&limit=5&targetId=T1",
            "",
            handed(
                on(None, Some("T1")),
                FindInPage {
                    text: Some("Sign up".into()),
                    role: Some("button".into()),
                    name: Some("sign".into()),
                    limit: Some(5),
                },
            ),
            ("/matches/0/ref", json!("e1")),
        ),
        (
            "POST",
            "/screenshot",
            r#"{"fullPage":true,"type":"jpeg","quality":70}"#,
            handed(
                none(),
                TakeScreenshot {
                    full_page: true,
                    image_type: ImageType::Jpeg,
                    quality: Some(70),
                    ..TakeScreenshot::default()
                },
            ),
            ("/type", json!("image/jpeg")),
        ),
        (
            "POST",
            "/screenshot",
            r#"{"ref":"e3","labels":true,"targetId":"T1"}"#,
            handed(
                on(None, Some("T1")),
                TakeScreenshot { element_ref: Some("e3".into()), labels: true, ..TakeScreenshot::default() },
            ),
            ("/path", json!("/media/shot")),
        ),
        (
            "POST",
            "/screenshot",
            r##"{"element":"#logo"}"##,
            handed(none(), TakeScreenshot { selector: Some("#logo".into()), ..TakeScreenshot::default() }),
            ("/bytes", json!(4)),
        ),
        (
            "GET",
            "/console?level=warning&limit=5",
            "",
            handed(none(), ReadConsole { level: Some("warning".into()), limit: Some(5) }),
            ("/pageErrors", json!([])),
        ),
        ("GET", "/requests", "", handed(none(), ListRequests::default()), ("/requests/0/status", json!(404))),
        (
            "GET",
            "/requests?url=%2Fapi%2F&failed=true&resourceType=Fetch&limit=5&all=true&targetId=T1",
            "",
            handed(
                on(None, Some("T1")),
                ListRequests {
                    url: Some("/api/".into()),
                    failed: true,
                    resource_type: Some("Fetch".into()),
                    limit: Some(5),
                    all: true,
                },
            ),
            ("/total", json!(3)),
        ),
        (
            "GET",
            "/requests/body?requestId=9.1",
            "",
            handed(none(), ReadResponseBody { request_id: "9.1".into() }),
            ("/mimeType", json!("application/json")),
        ),
        (
            "POST",
            "/act",
            r#"{"kind":"click","ref":"e1","profile":"work","targetId":"T1","timeoutMs":900,"doubleClick":true,"snapshot":true,"diff":true}"#,
            handed(
                on(Some("work"), Some("T1")),
                Act {
                    timeout_ms: Some(900),
                    snapshot: true,
                    diff: true,
                    action: Click { element: "e1".into(), double_click: true, ..Click::default() }.into(),
                },
            ),
            ("/kind", json!("click")),
        ),
        (
            "POST",
            "/act",
            r#"{"kind":"press","key":"Control+A"}"#,
            handed(none(), Act::new(Press { key: "Control+A".into() })),
            ("/kind", json!("press")),
        ),
        (
            "POST",
            "/act",
            r#"{"kind":"wait","text":"Done"}"#,
            handed(
                none(),
                Act {
                    timeout_ms: None,
                    snapshot: false,
                    diff: false,
                    action: Action::Wait(WaitFor { text: Some("Done".into()), ..WaitFor::default() }),
                },
            ),
            ("/kind", json!("wait")),
        ),
        (
            "POST",
            "/hooks/dialog",
            r#"{"accept":true,"promptText":"Ada","timeoutMs":5000}"#,
            handed(none(), ArmDialog { accept: true, prompt_text: Some("Ada".into()), timeout_ms: Some(5000) }),
            ("/armed", json!(true)),
        ),
        (
            "POST",
            "/hooks/file-chooser",
            r#"{"paths":["/tmp/a.txt"],"ref":"e4"}"#,
            handed(
                none(),
                ArmFileChooser { paths: vec!["/tmp/a.txt".into()], element_ref: Some("e4".into()), timeout_ms: None },
            ),
            ("/armed", json!(["/tmp/a.txt"])),
        ),
        ("POST", "/pdf", r#"{"targetId":"T1"}"#, handed(on(None, Some("T1")), PrintPdf {}), ("/pages", json!(2))),
        (
            "POST",
            "/handoff",
            r#"{"targetId":"T1","reason":"log in","timeoutMs":90000}"#,
            handed(on(None, Some("T1")), HandOver { reason: "log in".into(), timeout_ms: Some(90_000) }),
            ("/ended", json!("done")),
        ),
    ];
    for (method, path, body, call, (pointer, expected)) in cases {
        let reply = send(&engine, method, path, body, &[]).await;
        assert_eq!(reply.status, StatusCode::OK, "{method} {path}: {}", String::from_utf8_lossy(&reply.body));
        assert_eq!(reply.content_type, "application/json", "{method} {path}");
        assert_eq!(engine.calls(), [call], "{method} {path}");
        assert_eq!(reply.json().pointer(pointer), Some(&expected), "{method} {path}: {}", reply.json());
    }
}

#[tokio::test]
async fn engine_errors_reach_the_agent_as_status_code_message_and_hint() {
    let engine = FakeEngine::default();
    let cases: [(MakeError, StatusCode, &str); 9] = [
        (|| ControlError::BadRequest("depth is 0–100".into()), StatusCode::BAD_REQUEST, "bad_request"),
        (|| ControlError::UnknownRef("e99".into()), StatusCode::NOT_FOUND, "unknown_ref"),
        (|| ControlError::StaleRef("e7".into()), StatusCode::CONFLICT, "stale_ref"),
        (|| ControlError::NoSharedTab, StatusCode::CONFLICT, "no_shared_tab"),
        (|| ControlError::UnknownRequest("9.9".into()), StatusCode::NOT_FOUND, "unknown_request"),
        (|| ControlError::NoHistory("back"), StatusCode::CONFLICT, "no_history"),
        (
            || ControlError::DialogOpen { kind: "alert".into(), message: "Hi".into() },
            StatusCode::CONFLICT,
            "dialog_open",
        ),
        (
            || ControlError::Timeout { what: "e5 to become visible".into(), ms: 8000 },
            StatusCode::GATEWAY_TIMEOUT,
            "timeout",
        ),
        (|| ControlError::Page("the script threw".into()), StatusCode::BAD_GATEWAY, "page_error"),
    ];
    for (error, status, code) in cases {
        engine.fail_next(error);
        let reply = send(&engine, "POST", "/act", r#"{"kind":"click","ref":"e5"}"#, &[]).await;
        assert_eq!(reply.status, status, "{code}");
        let body = reply.json();
        assert_eq!(body["error"]["code"], code);
        assert_eq!(body["error"]["message"], error().to_string());
        assert_eq!(body["error"].get("hint").and_then(Value::as_str), error().hint(Surface::Http).as_deref(), "{code}");
    }
    // A client that reads answers in MCP gets the hint in tool names.
    engine.fail_next(|| ControlError::StaleRef("e5".into()));
    let reply = send(&engine, "POST", "/act", r#"{"kind":"click","ref":"e5"}"#, &[(Surface::HEADER, "mcp")]).await;
    assert_eq!(reply.json()["error"]["hint"], "browser_snapshot gives fresh refs");
    engine.calls();
    engine.fail_next(|| ControlError::NoSharedTab);
    let reply = send(&engine, "GET", "/snapshot", "", &[]).await;
    assert_eq!(reply.json()["error"]["hint"], "click the Browser Relay icon on a tab to share it");
}

#[tokio::test]
async fn screenshots_come_as_image_bytes_when_the_agent_accepts_an_image() {
    let engine = FakeEngine::default();
    let reply = send(&engine, "POST", "/screenshot", "", &[("accept", "image/png")]).await;
    assert_eq!((reply.status, reply.content_type.as_str()), (StatusCode::OK, "image/png"));
    assert_eq!(reply.body, b"IMG!");
    assert_eq!(reply.headers["x-screenshot-path"], "/media/shot");
    // Accept alone picks the format.
    let reply = send(&engine, "POST", "/screenshot", "", &[("accept", "image/jpeg, */*")]).await;
    assert_eq!(reply.content_type, "image/jpeg");
    assert!(engine.calls().iter().all(|c| c.contains("TakeScreenshot")));
    let jpeg_call = send(&engine, "POST", "/screenshot", "{}", &[("accept", "image/jpeg")]).await;
    assert_eq!(jpeg_call.status, StatusCode::OK);
    assert!(engine.calls()[0].contains(&format!("{:?}", ImageType::Jpeg)));
    // A body that says otherwise is a mistake, not a guess.
    let reply = send(&engine, "POST", "/screenshot", r#"{"type":"png"}"#, &[("accept", "image/jpeg")]).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert!(reply.json()["error"]["message"].as_str().unwrap().contains("Accept: image/jpeg"));
    assert!(engine.calls().is_empty(), "refused before the engine");
}

#[tokio::test]
async fn bad_requests_stop_before_the_engine_with_a_precise_message() {
    let engine = FakeEngine::default();
    let cases = [
        ("POST", "/navigate", "{not json", "invalid JSON body"),
        ("POST", "/navigate", r#"{"urll":"http://x/"}"#, "unknown field `urll`"),
        ("POST", "/navigate", r#"{"url":"http://x/","waitUntil":"soon"}"#, "soon"),
        ("GET", "/snapshot?depth=deep", "", "depth=deep"),
        ("GET", "/snapshot?format=html", "", "html"),
        ("GET", "/snapshot?interactive=maybe", "", "interactive=maybe: use true or false"),
        ("GET", "/tabs?targetId=T1", "", "unknown field `targetId`"),
        ("POST", "/act", r#"["click"]"#, "the body must be a JSON object"),
        ("POST", "/act", r#"{"kind":"click","ref":"e1","timeoutMs":"soon"}"#, "timeoutMs: must be a whole number"),
        ("POST", "/act", r#"{"kind":"teleport"}"#, "teleport"),
        ("POST", "/act", r#"{"kind":"click","reff":"e1"}"#, "reff"),
        ("POST", "/hooks/dialog", r#"{"promptText":"x"}"#, "accept"),
        ("POST", "/tabs/focus", "{}", "targetId"),
        ("GET", "/console?limit=-1", "", "limit=-1"),
        ("GET", "/requests?failed=maybe", "", "failed=maybe: use true or false"),
        ("GET", "/requests/body", "", "missing field `requestId`"),
        ("POST", "/back", r#"{"url":"http://x/"}"#, "unknown field `url`"),
        ("GET", "/find?txt=Go", "", "unknown field `txt`"),
    ];
    for (method, path, body, needle) in cases {
        let reply = send(&engine, method, path, body, &[]).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{method} {path} {body}");
        let error = reply.json();
        assert_eq!(error["error"]["code"], "bad_request", "{error}");
        let message = error["error"]["message"].as_str().unwrap();
        assert!(message.contains(needle), "{method} {path} {body}: {message}");
    }
    assert!(engine.calls().is_empty(), "no bad request reached the engine");
    let reply = send(&engine, "POST", "/teleport", "", &[]).await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND);
    assert!(reply.json()["error"]["hint"].as_str().unwrap().contains("POST /act"));
}

#[tokio::test]
async fn agent_calls_that_change_something_are_recorded_without_typed_text() {
    let engine = FakeEngine::default();
    let record = activity::ActivityRecord::new(None, activity::DEFAULT_RETENTION);
    let extras = super::Extras { activity: Some(record.clone()), dashboard: None, lent: None };
    let app = super::router_with(engine.clone(), guard(), extras);
    let cli = [(Surface::HEADER, "cli")];
    let typed = r#"{"profile":"managed","targetId":"T7","kind":"type","ref":"e4","text":"hunter2-secret"}"#;
    assert_eq!(send_to(app.clone(), "POST", "/act", typed, &cli).await.status, StatusCode::OK);
    assert_eq!(send_to(app.clone(), "GET", "/snapshot?targetId=T7", "", &cli).await.status, StatusCode::OK);
    let navigate = r#"{"url":"https://example.test/next"}"#;
    assert_eq!(send_to(app.clone(), "POST", "/navigate", navigate, &[]).await.status, StatusCode::OK);
    engine.fail_next(|| ControlError::BadRequest("no".into()));
    send_to(app.clone(), "POST", "/act", r#"{"kind":"click","ref":"e9"}"#, &cli).await;

    let listed = send_to(app.clone(), "GET", "/activity?limit=10", "", &[]).await;
    assert_eq!(listed.status, StatusCode::OK);
    let text = String::from_utf8(listed.body.clone()).unwrap();
    assert!(!text.contains("hunter2"), "typed text is never recorded: {text}");
    let entries = listed.json()["entries"].as_array().cloned().unwrap();
    let seen: Vec<(String, String, bool)> = entries
        .iter()
        .map(|e| {
            (e["client"].as_str().unwrap().into(), e["summary"].as_str().unwrap().into(), e["failed"] == json!(true))
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("cli".into(), "click e9".into(), true),
            ("http".into(), "navigate to https://example.test/next".into(), false),
            ("cli".into(), "type into e4: 14 characters".into(), false),
        ],
        "newest first; the snapshot (a read) is not there"
    );
    assert_eq!(entries[2]["tab"], "T7");
    assert_eq!(entries[2]["profile"], "managed");
    assert_eq!(entries[2]["source"], "agent");

    let only_t7 = send_to(app.clone(), "GET", "/activity?tab=T7", "", &[]).await.json();
    assert_eq!(only_t7["entries"].as_array().unwrap().len(), 1);
    let bad = send_to(app.clone(), "GET", "/activity?limit=many", "", &[]).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert_eq!(bad.json()["error"]["code"], "bad_request");
    let unknown = send_to(app, "GET", "/activity?who=me", "", &[]).await;
    assert_eq!(unknown.status, StatusCode::BAD_REQUEST, "unknown filters are refused, not ignored");
}

#[tokio::test]
async fn the_activity_record_needs_the_key_like_every_route() {
    let app = router(FakeEngine::default(), guard());
    let request =
        Request::builder().uri("/activity").header(header::HOST, "127.0.0.1:18791").body(Body::empty()).unwrap();
    let response = app.oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
}
