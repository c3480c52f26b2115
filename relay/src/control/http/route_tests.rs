//! Every route of the control API in-process, over a recording fake engine:
//! what the request says reaches the engine unchanged, what the engine
//! answers reaches the agent in the documented shape, and bad requests stop
//! before the engine. No browser, no socket (`tower::ServiceExt::oneshot`).

use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use serde_json::{Value, json};
use tower::ServiceExt as _;

use super::router;
use control_engine::act::{ActOutcome, Action, Pdf};
use control_engine::api::ControlApi;
use control_engine::conn::TabInfo;
use control_engine::engine::{
    ConsoleReport, ImageType, Navigated, ProfileStatus, Screenshot, ScreenshotRequest, WaitUntil,
};
use control_engine::error::ControlError;
use control_engine::snapshot::{Format, SnapshotOptions, SnapshotResult};
use managed_driver::config::Driver;
use state_dir::Token;

use crate::net::guard::Guard;

type Answer<T> = Result<T, ControlError>;
/// Makes the error the fake answers with (`ControlError` is not `Clone`).
type MakeError = fn() -> ControlError;
/// (method, path, body, the engine call it must make, (a JSON pointer into the answer, its value))
type RouteCase<'a> = (&'a str, &'a str, &'a str, &'a str, (&'a str, Value));

/// Records each call as one line and answers with canned values, or with
/// the error armed by [`FakeEngine::fail_next`].
#[derive(Debug, Clone, Default)]
struct FakeEngine {
    calls: Arc<Mutex<Vec<String>>>,
    failure: Arc<Mutex<Option<MakeError>>>,
}

impl FakeEngine {
    fn record(&self, call: String) -> Answer<()> {
        self.calls.lock().unwrap().push(call);
        match self.failure.lock().unwrap().take() {
            Some(error) => Err(error()),
            None => Ok(()),
        }
    }

    fn fail_next(&self, error: MakeError) {
        *self.failure.lock().unwrap() = Some(error);
    }

    fn calls(&self) -> Vec<String> {
        std::mem::take(&mut *self.calls.lock().unwrap())
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
        running: true,
        connected: true,
        state: "running".into(),
        tabs: Some(1),
        cdp_endpoint: None,
        detail: String::new(),
    }
}

impl ControlApi for FakeEngine {
    async fn status(&self, only: Option<&str>) -> Answer<Vec<ProfileStatus>> {
        self.record(format!("status {only:?}"))?;
        Ok(vec![profile_status(only.unwrap_or("managed"))])
    }
    fn profiles(&self) -> Answer<Value> {
        self.record("profiles".into())?;
        Ok(json!({"defaultProfile": "managed", "profiles": []}))
    }
    async fn start(&self, profile: Option<&str>) -> Answer<ProfileStatus> {
        self.record(format!("start {profile:?}"))?;
        Ok(profile_status(profile.unwrap_or("managed")))
    }
    async fn stop(&self, profile: Option<&str>) -> Answer<ProfileStatus> {
        self.record(format!("stop {profile:?}"))?;
        Ok(profile_status(profile.unwrap_or("managed")))
    }
    async fn tabs(&self, profile: Option<&str>) -> Answer<Vec<TabInfo>> {
        self.record(format!("tabs {profile:?}"))?;
        Ok(vec![tab("T1", "about:blank")])
    }
    async fn open_tab(&self, profile: Option<&str>, url: &str) -> Answer<TabInfo> {
        self.record(format!("open_tab {profile:?} {url}"))?;
        Ok(tab("T2", url))
    }
    async fn focus_tab(&self, profile: Option<&str>, target_id: &str) -> Answer<()> {
        self.record(format!("focus_tab {profile:?} {target_id}"))
    }
    async fn close_tab(&self, profile: Option<&str>, target_id: &str) -> Answer<()> {
        self.record(format!("close_tab {profile:?} {target_id}"))
    }
    async fn navigate(
        &self,
        profile: Option<&str>,
        target_id: Option<&str>,
        url: &str,
        wait_until: WaitUntil,
        timeout_ms: Option<u64>,
    ) -> Answer<Navigated> {
        self.record(format!("navigate {profile:?} {target_id:?} {url} {wait_until:?} {timeout_ms:?}"))?;
        Ok(Navigated { target_id: target_id.unwrap_or("T1").into(), url: url.into(), title: "Fake".into() })
    }
    async fn snapshot(
        &self,
        profile: Option<&str>,
        target_id: Option<&str>,
        o: &SnapshotOptions,
    ) -> Answer<SnapshotResult> {
        self.record(format!(
            "snapshot {profile:?} {target_id:?} {:?} interactive={} compact={} depth={:?} limit={:?} maxChars={:?} selector={:?} frame={:?}",
            o.format, o.interactive, o.compact, o.depth, o.limit, o.max_chars, o.selector, o.frame
        ))?;
        Ok(SnapshotResult {
            target_id: "T1".into(),
            url: "about:blank".into(),
            title: "Fake".into(),
            format: Format::Ai,
            snapshot: Some("- button \"Go\" [ref=e1]".into()),
            nodes: None,
            refs: 1,
            node_count: 1,
            truncated: false,
            notes: vec![],
        })
    }
    async fn screenshot(&self, r: &ScreenshotRequest) -> Answer<Screenshot> {
        self.record(format!(
            "screenshot {:?} {:?} fullPage={} ref={:?} selector={:?} {:?} quality={:?} labels={}",
            r.profile, r.target_id, r.full_page, r.element_ref, r.selector, r.image_type, r.quality, r.labels
        ))?;
        Ok(Screenshot {
            target_id: "T1".into(),
            path: "/media/shot".into(),
            width: 2,
            height: 1,
            bytes: 4,
            mime: r.image_type.mime(),
            labels: None,
            skipped: None,
            data: b"IMG!".to_vec(),
        })
    }
    async fn console(
        &self,
        profile: Option<&str>,
        target_id: Option<&str>,
        level: Option<&str>,
        limit: Option<usize>,
    ) -> Answer<ConsoleReport> {
        self.record(format!("console {profile:?} {target_id:?} {level:?} {limit:?}"))?;
        Ok(ConsoleReport { target_id: "T1".into(), messages: vec![], page_errors: vec![] })
    }
    async fn act(
        &self,
        profile: Option<&str>,
        target_id: Option<&str>,
        timeout_ms: Option<u64>,
        action: Action,
    ) -> Answer<ActOutcome> {
        self.record(format!("act {profile:?} {target_id:?} {timeout_ms:?} {action:?}"))?;
        Ok(ActOutcome {
            ok: true,
            kind: action.kind(),
            target_id: "T1".into(),
            navigated: false,
            url: None,
            result: None,
        })
    }
    async fn arm_dialog(
        &self,
        profile: Option<&str>,
        target_id: Option<&str>,
        accept: bool,
        prompt_text: Option<String>,
        timeout_ms: Option<u64>,
    ) -> Answer<Value> {
        self.record(format!("arm_dialog {profile:?} {target_id:?} {accept} {prompt_text:?} {timeout_ms:?}"))?;
        Ok(json!({"ok": true, "armed": true}))
    }
    async fn arm_file_chooser(
        &self,
        profile: Option<&str>,
        target_id: Option<&str>,
        paths: &[String],
        element_ref: Option<&str>,
        timeout_ms: Option<u64>,
    ) -> Answer<Value> {
        self.record(format!("arm_file_chooser {profile:?} {target_id:?} {paths:?} {element_ref:?} {timeout_ms:?}"))?;
        Ok(json!({"ok": true, "armed": paths}))
    }
    async fn pdf(&self, profile: Option<&str>, target_id: Option<&str>) -> Answer<Pdf> {
        self.record(format!("pdf {profile:?} {target_id:?}"))?;
        Ok(Pdf { target_id: "T1".into(), path: "/media/page.pdf".into(), pages: 2, bytes: 900 })
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
    let app = router(engine.clone(), Guard::control(Token::parse(TOKEN)));
    let mut request = Request::builder()
        .method(method)
        .uri(uri)
        .header(header::HOST, "127.0.0.1:18791")
        .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"));
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

#[tokio::test]
async fn every_route_hands_the_request_to_the_engine_and_its_answer_back() {
    let engine = FakeEngine::default();
    let cases: &[RouteCase] = &[
        ("GET", "/", "", "status None", ("/profiles/0/profile", json!("managed"))),
        ("GET", "/?profile=work", "", "status Some(\"work\")", ("/profile", json!("work"))),
        ("GET", "/profiles", "", "profiles", ("/defaultProfile", json!("managed"))),
        ("POST", "/start", "", "start None", ("/state", json!("running"))),
        ("POST", "/start", r#"{"profile":"work"}"#, "start Some(\"work\")", ("/profile", json!("work"))),
        ("POST", "/stop", r#"{"profile":"work"}"#, "stop Some(\"work\")", ("/profile", json!("work"))),
        ("GET", "/tabs?profile=chrome", "", "tabs Some(\"chrome\")", ("/tabs/0/targetId", json!("T1"))),
        (
            "POST",
            "/tabs/open",
            r#"{"url":"http://127.0.0.1:1/a"}"#,
            "open_tab None http://127.0.0.1:1/a",
            ("/targetId", json!("T2")),
        ),
        ("POST", "/tabs/focus", r#"{"targetId":"T9"}"#, "focus_tab None T9", ("/targetId", json!("T9"))),
        ("DELETE", "/tabs/T9?profile=work", "", "close_tab Some(\"work\") T9", ("/ok", json!(true))),
        (
            "POST",
            "/navigate",
            r#"{"url":"http://x/","targetId":"T1","waitUntil":"networkidle","timeoutMs":900}"#,
            "navigate None Some(\"T1\") http://x/ NetworkIdle Some(900)",
            ("/url", json!("http://x/")),
        ),
        (
            "POST",
            "/navigate",
            r#"{"url":"http://x/"}"#,
            "navigate None None http://x/ Load None",
            ("/title", json!("Fake")),
        ),
        (
            "GET",
            "/snapshot",
            "",
            "snapshot None None Ai interactive=false compact=false depth=None limit=None maxChars=None selector=None frame=None",
            ("/snapshot", json!("- button \"Go\" [ref=e1]")),
        ),
        (
            "GET",
            "/snapshot?format=aria&interactive&compact=true&depth=2&limit=10&maxChars=500&selector=%23main&frame=f1&targetId=T1&token=x",
            "",
            "snapshot None Some(\"T1\") Aria interactive=true compact=true depth=Some(2) limit=Some(10) maxChars=Some(500) selector=Some(\"#main\") frame=Some(\"f1\")",
            ("/refs", json!(1)),
        ),
        (
            "POST",
            "/screenshot",
            r#"{"fullPage":true,"type":"jpeg","quality":70}"#,
            "screenshot None None fullPage=true ref=None selector=None Jpeg quality=Some(70) labels=false",
            ("/type", json!("image/jpeg")),
        ),
        (
            "POST",
            "/screenshot",
            r#"{"ref":"e3","labels":true,"targetId":"T1"}"#,
            "screenshot None Some(\"T1\") fullPage=false ref=Some(\"e3\") selector=None Png quality=None labels=true",
            ("/path", json!("/media/shot")),
        ),
        (
            "POST",
            "/screenshot",
            r##"{"element":"#logo"}"##,
            "screenshot None None fullPage=false ref=None selector=Some(\"#logo\") Png quality=None labels=false",
            ("/bytes", json!(4)),
        ),
        (
            "GET",
            "/console?level=warning&limit=5",
            "",
            "console None None Some(\"warning\") Some(5)",
            ("/pageErrors", json!([])),
        ),
        (
            "POST",
            "/act",
            r#"{"kind":"click","ref":"e1","profile":"work","targetId":"T1","timeoutMs":900,"doubleClick":true}"#,
            "act Some(\"work\") Some(\"T1\") Some(900) Click { element: \"e1\", double_click: true, button: Left, modifiers: [] }",
            ("/kind", json!("click")),
        ),
        (
            "POST",
            "/act",
            r#"{"kind":"press","key":"Control+A"}"#,
            "act None None None Press { key: \"Control+A\" }",
            ("/kind", json!("press")),
        ),
        (
            "POST",
            "/hooks/dialog",
            r#"{"accept":true,"promptText":"Ada","timeoutMs":5000}"#,
            "arm_dialog None None true Some(\"Ada\") Some(5000)",
            ("/armed", json!(true)),
        ),
        (
            "POST",
            "/hooks/file-chooser",
            r#"{"paths":["/tmp/a.txt"],"ref":"e4"}"#,
            "arm_file_chooser None None [\"/tmp/a.txt\"] Some(\"e4\") None",
            ("/armed", json!(["/tmp/a.txt"])),
        ),
        ("POST", "/pdf", r#"{"targetId":"T1"}"#, "pdf None Some(\"T1\")", ("/pages", json!(2))),
    ];
    for (method, path, body, call, (pointer, expected)) in cases {
        let reply = send(&engine, method, path, body, &[]).await;
        assert_eq!(reply.status, StatusCode::OK, "{method} {path}: {}", String::from_utf8_lossy(&reply.body));
        assert_eq!(reply.content_type, "application/json", "{method} {path}");
        assert_eq!(engine.calls(), [call.to_string()], "{method} {path}");
        assert_eq!(reply.json().pointer(pointer), Some(expected), "{method} {path}: {}", reply.json());
    }
}

#[tokio::test]
async fn engine_errors_reach_the_agent_as_status_code_message_and_hint() {
    let engine = FakeEngine::default();
    let cases: [(MakeError, StatusCode, &str); 7] = [
        (|| ControlError::BadRequest("depth is 0–100".into()), StatusCode::BAD_REQUEST, "bad_request"),
        (|| ControlError::UnknownRef("e99".into()), StatusCode::NOT_FOUND, "unknown_ref"),
        (|| ControlError::StaleRef("e7".into()), StatusCode::CONFLICT, "stale_ref"),
        (|| ControlError::NoSharedTab, StatusCode::CONFLICT, "no_shared_tab"),
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
        assert_eq!(body["error"].get("hint").and_then(Value::as_str), error().hint().as_deref(), "{code}");
    }
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
    assert!(engine.calls().iter().all(|c| c.starts_with("screenshot")));
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
        ("POST", "/act", r#"["click"]"#, "the body must be a JSON object"),
        ("POST", "/act", r#"{"kind":"click","ref":"e1","timeoutMs":"soon"}"#, "timeoutMs must be a whole number"),
        ("POST", "/act", r#"{"kind":"teleport"}"#, "teleport"),
        ("POST", "/act", r#"{"kind":"click","reff":"e1"}"#, "reff"),
        ("POST", "/hooks/dialog", r#"{"promptText":"x"}"#, "accept"),
        ("POST", "/tabs/focus", "{}", "targetId"),
        ("GET", "/console?limit=-1", "", "limit=-1"),
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
