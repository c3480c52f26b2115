//! The differential conformance suite: one battery of client scenarios, each
//! run against Chrome's own debugging port, the relay with the real
//! extension (a tab shared by a real toolbar click), and the relay with the
//! managed driver, at the same time; what the clients observed must be the
//! same on all three. Where the user's browser must differ from Chrome (it
//! is not closed by `Browser.close`, takes no new browser contexts, keeps no
//! tabs a client left open), the scenario checks the documented difference
//! instead (`own` in its observation; README "Limits").
//!
//! Clients: Playwright, Puppeteer and chrome-remote-interface
//! (`tests/js/conformance.mjs`, one scenario per run), and chromiumoxide
//! (here). The endpoints live for the whole battery, so every scenario is
//! also the next client after the previous one left.

use std::time::Duration;

use browser_relay::server::RunningServer;
use cdp_client::CdpClient;
use e2e::extension_env::ExtensionEnv;
use e2e::{Chromium, FixtureServer};
use futures_util::StreamExt;
use managed_driver::ManagedBrowsers;
use managed_driver::config::Config;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde_json::{Value, json};
use state_dir::Token;

/// The Node scenarios, in the order they run (`browser_limits` comes last,
/// after the Rust client: it closes Chrome's and the managed browser).
const SCENARIOS: [&str; 10] = [
    "churn",
    "two_clients",
    "dying_client",
    "left_behind_tabs",
    "puppeteer_tabs",
    "page_sockets",
    "cri_browser",
    "workers",
    "downloads",
    "cdp_sessions",
];

/// One endpoint under test, as a client sees it.
struct Endpoint {
    kind: &'static str,
    /// The browser-level WebSocket URL (with the token, if any).
    ws: String,
    fixture: String,
    vars: Vec<(&'static str, String)>,
}

impl Endpoint {
    fn new(
        kind: &'static str,
        http: String,
        ws: String,
        json_base: String,
        token: &str,
        fixtures: &FixtureServer,
    ) -> Self {
        let vars = vec![
            ("KIND", kind.to_string()),
            ("CDP_HTTP", http),
            ("CDP_WS", ws.clone()),
            ("JSON_BASE", json_base),
            ("TOKEN", token.to_string()),
            ("FIXTURE", fixtures.url()),
            ("FIXTURE_ALT", fixtures.alt_url()),
        ];
        Self { kind, ws, fixture: fixtures.url(), vars }
    }

    /// A `/json/*` URL of this endpoint, with the token where needed.
    fn json_url(&self, path: &str) -> String {
        let var = |name: &str| self.vars.iter().find(|(k, _)| *k == name).map(|(_, v)| v.as_str()).unwrap_or_default();
        match var("TOKEN") {
            "" => format!("{}{path}", var("JSON_BASE")),
            token => format!("{}{path}?token={token}", var("JSON_BASE")),
        }
    }

    /// Runs one scenario: its observation, or why it failed.
    async fn run(&self, scenario: &str) -> Result<Value, String> {
        let mut vars = self.vars.clone();
        vars.push(("SCENARIO", scenario.to_string()));
        let out = e2e::run_node("conformance.mjs", &vars).await.map_err(|e| format!("{e:#}"))?;
        out.lines()
            .rev()
            .find_map(|line| line.strip_prefix("observation "))
            .and_then(|json| serde_json::from_str(json).ok())
            .ok_or_else(|| format!("no observation in the output:\n{out}"))
    }
}

/// Chrome's own debugging port: the reference.
struct ChromePort {
    _chrome: Chromium,
    fixtures: FixtureServer,
    endpoint: Endpoint,
}

impl ChromePort {
    async fn start() -> anyhow::Result<Self> {
        let fixtures = FixtureServer::start().await?;
        let chrome = Chromium::launch(&[], &format!("{}/index.html", fixtures.url()))?;
        let base = format!("http://127.0.0.1:{}", chrome.port);
        let endpoint = Endpoint::new("chrome", base.clone(), chrome.ws_url.clone(), base, "", &fixtures);
        Ok(Self { _chrome: chrome, fixtures, endpoint })
    }
}

/// The relay with the real extension, the fixture's index shared by a click.
async fn extension_endpoint() -> anyhow::Result<(ExtensionEnv, Endpoint)> {
    let env = ExtensionEnv::start().await?;
    let index = format!("{}/index.html", env.fixtures.url());
    env.click_toolbar(&index).await?;
    env.wait_for_tabs(1, Duration::from_secs(20)).await?;
    let server = env.server();
    let ws = server.relay.version_json()["webSocketDebuggerUrl"].as_str().unwrap_or_default().to_string();
    let base = format!("http://127.0.0.1:{}", env.port);
    let endpoint = Endpoint::new("extension", server.http_url(), ws, base, env.token.as_str(), &env.fixtures);
    Ok((env, endpoint))
}

/// The relay in front of a managed browser whose first tab shows the
/// fixture's index. The browser's process group is killed on drop.
struct Managed {
    _server: RunningServer,
    browsers: ManagedBrowsers,
    _fixtures: FixtureServer,
    _state: tempfile::TempDir,
    endpoint: Endpoint,
}

impl Drop for Managed {
    fn drop(&mut self) {
        if let Some(record) = self.browsers.record("managed") {
            let _ = killpg(Pid::from_raw(record.pid as i32), Signal::SIGKILL);
        }
    }
}

impl Managed {
    async fn start() -> anyhow::Result<Self> {
        let state = tempfile::tempdir()?;
        let browsers = ManagedBrowsers::new(state.path());
        let profile = Config::defaults().profile(Some("managed"))?.clone();
        browsers.start(&profile).await?;
        let token = Token::generate();
        let mut options = e2e::test_options(Some(token.clone()));
        options.state_root = Some(state.path().to_path_buf());
        let server = RunningServer::start(options).await?;
        let fixtures = FixtureServer::start().await?;
        let base = format!("http://{}/profiles/managed", server.addr);
        let (_, version) = e2e::http_get(&format!("{base}/json/version?token={}", token.as_str())).await?;
        let version: Value = serde_json::from_str(&version)?;
        let ws = version["webSocketDebuggerUrl"].as_str().unwrap_or_default().to_string();
        show_index(&ws, &format!("{}/index.html", fixtures.url())).await?;
        let http = format!("{base}/?token={}", token.as_str());
        let endpoint = Endpoint::new("managed", http, ws, base, token.as_str(), &fixtures);
        Ok(Self { _server: server, browsers, _fixtures: fixtures, _state: state, endpoint })
    }
}

/// Navigates the browser's one page to `url` and waits for its load.
async fn show_index(ws: &str, url: &str) -> anyhow::Result<()> {
    let client = CdpClient::connect(ws).await?.with_timeout(Duration::from_secs(20));
    let mut events = client.take_events().ok_or_else(|| anyhow::anyhow!("events"))?;
    let targets = client.call("Target.getTargets", json!({}), None).await?;
    let page = targets["targetInfos"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|t| t["type"] == "page")
        .and_then(|t| t["targetId"].as_str())
        .ok_or_else(|| anyhow::anyhow!("the managed browser has no page: {targets}"))?
        .to_string();
    let attached = client.call("Target.attachToTarget", json!({"targetId": page, "flatten": true}), None).await?;
    let session = attached["sessionId"].as_str().unwrap_or_default().to_string();
    client.call("Page.enable", json!({}), Some(&session)).await?;
    client.call("Page.navigate", json!({"url": url}), Some(&session)).await?;
    loop {
        let event = e2e::next_event(&mut events, "Page.loadEventFired", Duration::from_secs(20)).await;
        if event.session_id.as_deref() == Some(session.as_str()) {
            break;
        }
    }
    client.call("Target.detachFromTarget", json!({"sessionId": session}), None).await?;
    Ok(())
}

/// chromiumoxide, as its README uses it: connect, a new page, evaluate, a
/// screenshot (it activates the page on the page's own session first), close.
async fn chromiumoxide_scenario(endpoint: &Endpoint) -> Result<Value, String> {
    let scenario = async {
        let (browser, mut handler) = chromiumoxide::Browser::connect(endpoint.ws.clone()).await?;
        let driver = tokio::spawn(async move { while handler.next().await.is_some() {} });
        let url = format!("{}/index.html?oxide", endpoint.fixture);
        let page = browser.new_page(url.as_str()).await?;
        let title = page.get_title().await?;
        let product: i64 = page.evaluate("6 * 7").await?.into_value()?;
        let png = page.screenshot(chromiumoxide::page::ScreenshotParams::builder().build()).await?;
        let is_png = png.starts_with(&[0x89, b'P', b'N', b'G']);
        let search: String = page.evaluate("location.search").await?.into_value()?;
        page.close().await?;
        // Page.close closes the tab, as the endpoint's list shows.
        let closed = wait_until(|| async {
            let (_, list) = e2e::http_get(&endpoint.json_url("/json/list")).await.unwrap_or_default();
            !list.contains("?oxide")
        })
        .await;
        drop(browser);
        driver.abort();
        anyhow::Ok(json!({"same": {
            "title": title, "product": product, "screenshotIsPng": is_png, "search": search, "pageClosed": closed,
        }}))
    };
    tokio::time::timeout(Duration::from_secs(60), scenario)
        .await
        .map_err(|_| "chromiumoxide: no result within 60 s".to_string())?
        .map_err(|e| format!("chromiumoxide: {e:#}"))
}

/// Polls `done` (bounded: 10 s) for what no event announces: true once it
/// holds.
async fn wait_until<F: Future<Output = bool>>(mut done: impl FnMut() -> F) -> bool {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while tokio::time::Instant::now() < deadline {
        if done().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

/// The pages of the user's real browser (the test's own hands on Chrome's
/// port, never the path under test), sorted.
async fn real_tabs(env: &ExtensionEnv) -> Vec<String> {
    let targets = env.browser.call("Target.getTargets", json!({}), None).await.expect("Target.getTargets");
    let mut urls: Vec<String> = targets["targetInfos"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| t["type"] == "page")
        .filter_map(|t| t["url"].as_str().map(str::to_string))
        .collect();
    urls.sort();
    urls
}

/// One scenario's outcome on the three endpoints: `None` when they agree.
fn compare(scenario: &str, results: [(&str, Result<Value, String>); 3]) -> Option<String> {
    let mut problems = Vec::new();
    for (kind, result) in &results {
        if let Err(why) = result {
            problems.push(format!("{scenario} failed on {kind}:\n{why}"));
        }
    }
    if let (Ok(reference), rest) = (&results[0].1, &results[1..]) {
        for (kind, result) in rest {
            if let Ok(observed) = result
                && observed["same"] != reference["same"]
            {
                problems.push(format!(
                    "{scenario}: {kind} observed\n  {}\nChrome's own port observed\n  {}",
                    observed["same"], reference["same"]
                ));
            }
        }
    }
    for (kind, result) in &results {
        if let Ok(observed) = result
            && observed["own"].as_object().is_some_and(|o| !o.is_empty())
        {
            eprintln!("{scenario} on {kind}, by design: {}", observed["own"]);
        }
    }
    (!problems.is_empty()).then(|| problems.join("\n\n"))
}

/// Compares, and says how it went.
fn judge(endpoints: &[&Endpoint; 3], scenario: &str, results: [Result<Value, String>; 3]) -> Option<String> {
    let [a, b, c] = results;
    let verdict = compare(scenario, [(endpoints[0].kind, a), (endpoints[1].kind, b), (endpoints[2].kind, c)]);
    eprintln!("conformance: {scenario:<18} {}", if verdict.is_none() { "same on all three" } else { "DIFFERS" });
    verdict
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_observe_the_same_on_chromes_port_the_extension_and_the_managed_driver() {
    e2e::init_logging();
    let (chrome, extension, managed) = tokio::join!(ChromePort::start(), extension_endpoint(), Managed::start());
    let chrome = chrome.expect("Chrome's own port");
    let (extension_env, extension) = extension.expect("the relay with the real extension");
    let managed = managed.expect("the relay with the managed driver");
    let endpoints = [&chrome.endpoint, &extension, &managed.endpoint];
    let real_tabs_at_start = real_tabs(&extension_env).await;

    let mut failures = Vec::new();
    // CONFORMANCE_ONLY=a,b runs only those Node scenarios (when chasing one).
    let only = std::env::var("CONFORMANCE_ONLY").ok();
    let picked = |scenario: &str| only.as_deref().is_none_or(|o| o.split(',').any(|s| s == scenario));
    for scenario in SCENARIOS.into_iter().filter(|s| picked(s)) {
        let (a, b, c) =
            tokio::join!(endpoints[0].run(scenario), endpoints[1].run(scenario), endpoints[2].run(scenario));
        failures.extend(judge(&endpoints, scenario, [a, b, c]));
    }
    let (a, b, c) = tokio::join!(
        chromiumoxide_scenario(endpoints[0]),
        chromiumoxide_scenario(endpoints[1]),
        chromiumoxide_scenario(endpoints[2])
    );
    failures.extend(judge(&endpoints, "chromiumoxide", [a, b, c]));

    // After every client above: the user's real browser has the tabs it
    // started with (the relay's view could hide a tab left behind). The
    // relay closes a leaving client's tabs when it sees the socket close.
    wait_until(|| async { real_tabs(&extension_env).await == real_tabs_at_start }).await;
    let real_tabs_at_end = real_tabs(&extension_env).await;
    if real_tabs_at_end != real_tabs_at_start {
        failures.push(format!("the user's browser had {real_tabs_at_start:?}, and ends with {real_tabs_at_end:?}"));
    }

    let (a, b, c) = tokio::join!(
        endpoints[0].run("browser_limits"),
        endpoints[1].run("browser_limits"),
        endpoints[2].run("browser_limits")
    );
    failures.extend(judge(&endpoints, "browser_limits", [a, b, c]));
    drop(chrome.fixtures);
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
