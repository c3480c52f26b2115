//! serve's memory under a page's console flood (issue 46, item 7): a page
//! that logs strings of megabytes, on a managed profile and on a tab shared
//! through the real extension, lifts serve's resident memory by a bounded
//! amount while it floods, and serve gives it back within seconds after,
//! though the console keeps every message (each cut to 16 KiB). serve runs
//! as a process of its own, so the figures of its `/proc/<pid>/status` are
//! its alone.

use std::path::Path;
use std::time::Duration;

use e2e::control_env::{ControlClient, kill_managed_browsers};
use e2e::serve_process::{PairedServe, ServeProcess, chrome_sharing, native_exe};
use serde_json::{Value, json};
use state_dir::Token;

/// Messages the page logs, and the bytes of each: 96 MB in all. A serve
/// that kept them (whole, or in allocations of their size) stays that far
/// above idle; one that held them while an action was in flight, twice
/// that at its peak. Chromium here takes about half a second per message
/// (more on a busy machine): the `evaluate` must answer within the
/// engine's 30 s.
const MESSAGES: usize = 12;
const MESSAGE_BYTES: usize = 8_000_000;
/// How far above its idle figure serve's resident memory may rise at its
/// peak during the flood.
const PEAK_ABOVE_IDLE: u64 = 100 << 20;
/// Where it must come back to after the flood, and how soon.
const SETTLED_ABOVE_IDLE: u64 = 30 << 20;
const SETTLES_WITHIN: Duration = Duration::from_secs(10);

/// The flood: in one `evaluate`, so an agent's action is in flight the
/// whole time (what it waits for must not hold the flood either). Its last
/// message says it is over.
fn flood() -> String {
    format!(
        "() => {{ for (let i = 0; i < {MESSAGES}; i++) console.log('x'.repeat({MESSAGE_BYTES}) + i); \
         console.log('flood over'); return {MESSAGES}; }}"
    )
}

/// A field of `/proc/<pid>/status`, in bytes (`VmRSS`: resident now;
/// `VmHWM`: the most resident since the last [`reset_peak`]).
fn status_bytes(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("serve runs");
    let line = status.lines().find(|l| l.starts_with(&format!("{field}:"))).expect("the field");
    let kib: u64 = line.split_whitespace().nth(1).and_then(|n| n.parse().ok()).expect("a number");
    kib << 10
}

/// Starts `VmHWM` over from what is resident now (Linux's `clear_refs`).
fn reset_peak(pid: u32) {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").expect("the peak is reset");
}

fn mib(bytes: u64) -> u64 {
    bytes >> 20
}

/// The control API of a serve process, on the port its log names.
async fn control_api(serve: &ServeProcess, token: &Token) -> ControlClient {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let port = loop {
        let log = serve.log_text();
        let port = log
            .split_once("control API on http://127.0.0.1:")
            .and_then(|(_, rest)| rest.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|port| port.parse::<u16>().ok());
        if let Some(port) = port {
            break port;
        }
        assert!(tokio::time::Instant::now() < deadline, "serve names no control port: {log}");
        // A process's log line gives no event to await.
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    ControlClient { client: browser_relay::ControlClient::new(port, token.clone()) }
}

/// Runs the flood in the profile's current tab and checks serve's memory:
/// its peak while the page floods, and that it settles near idle after.
async fn flood_and_measure(serve: &ServeProcess, api: &ControlClient, profile: &str) {
    let pid = serve.child.id();
    let act = |function: String| json!({"profile": profile, "kind": "evaluate", "fn": function});
    // The engine's connection is up and collects the tab's console.
    api.ok("POST", "/act", Some(act("() => 1".into()))).await;
    let idle = status_bytes(pid, "VmRSS");
    reset_peak(pid);

    let started = std::time::Instant::now();
    let answer = api.ok("POST", "/act", Some(act(flood()))).await;
    assert_eq!(answer["result"], json!(MESSAGES), "{answer}");
    // The answer can come before serve has handled the last messages: the
    // console says when they are all in.
    let console = e2e::control_env::eventually("the flood's last message", Duration::from_secs(30), || async {
        let console = api.ok("GET", &format!("/console?profile={profile}"), None).await;
        let texts: Vec<String> =
            console["messages"].as_array()?.iter().filter_map(|m| m["text"].as_str().map(String::from)).collect();
        texts.iter().any(|t| t == "flood over").then_some(texts)
    })
    .await;
    let flooded = started.elapsed();
    let peak = status_bytes(pid, "VmHWM");
    let kept = console.iter().filter(|t| t.starts_with("xxxx")).count();
    assert_eq!(kept, MESSAGES, "every message reached the console");
    assert!(console.iter().all(|t| t.len() < 17 << 10), "each one cut to 16 KiB");

    // Settling: nothing to await in serve but its figures.
    let settle_start = std::time::Instant::now();
    let mut now = status_bytes(pid, "VmRSS");
    while now > idle + SETTLED_ABOVE_IDLE && settle_start.elapsed() < SETTLES_WITHIN {
        tokio::time::sleep(Duration::from_millis(100)).await;
        now = status_bytes(pid, "VmRSS");
    }
    let settled_in = settle_start.elapsed();
    let figures = format!(
        "{profile}: idle {} MiB, peak {} MiB during the flood ({flooded:.1?}), {} MiB {settled_in:.1?} after",
        mib(idle),
        mib(peak),
        mib(now)
    );
    eprintln!("{figures}");
    assert!(peak < idle + PEAK_ABOVE_IDLE, "serve rose too far: {figures}");
    assert!(now <= idle + SETTLED_ABOVE_IDLE, "serve kept the flood: {figures}");
}

/// A managed browser's processes go when the test ends (also on failure):
/// serve is killed outright, and what it launched with it.
struct ManagedBrowsers<'a>(&'a Path);

impl Drop for ManagedBrowsers<'_> {
    fn drop(&mut self) {
        kill_managed_browsers(self.0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_console_flood_on_a_managed_profile_leaves_serve_near_idle() {
    let home = tempfile::Builder::new().prefix("browser-relay-test-").tempdir().unwrap();
    std::fs::write(home.path().join("config.toml"), "defaultProfile = \"managed\"\n").unwrap();
    let mut command = std::process::Command::new(native_exe().unwrap());
    command.args(["serve", "--port", "0", "--control-port", "0"]).env("BROWSER_RELAY_HOME", home.path());
    let _browsers = ManagedBrowsers(home.path());
    let serve = ServeProcess::start(command, &home.path().join("serve.log"), Duration::from_secs(20)).await.unwrap();
    let token = Token::parse(std::fs::read_to_string(home.path().join("token")).unwrap().trim()).unwrap();
    let api = control_api(&serve, &token).await;
    let fixtures = e2e::FixtureServer::start().await.unwrap();
    api.ok("POST", "/start", None).await;
    let url = format!("{}/index.html", fixtures.url());
    let tab: Value = api.ok("POST", "/tabs/open", Some(json!({"url": url}))).await;
    assert!(tab["targetId"].is_string(), "{tab}");

    flood_and_measure(&serve, &api, "managed").await;
    api.ok("POST", "/stop", None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_console_flood_through_the_extension_leaves_serve_near_idle() {
    let PairedServe { link, token, port, serve, home: _home } = PairedServe::start().await.unwrap();
    let fixtures = e2e::FixtureServer::start().await.unwrap();
    let index = format!("{}/index.html", fixtures.url());
    let (_chrome, _hands) = chrome_sharing(&link, port, &token, &index).await.unwrap();
    let api = control_api(&serve, &token).await;

    flood_and_measure(&serve, &api, "chrome").await;
}
