//! The three endpoints a CDP client can be pointed at, as the conformance
//! suite and the agent-tool checks use them: Chrome's own debugging port,
//! the relay with the real extension (a tab shared by a real click), and
//! the relay with the managed driver. Each shows the fixture's index page.

use std::time::Duration;

use browser_relay::RunningServer;
use cdp_client::CdpClient;
use managed_driver::ManagedBrowsers;
use serde_json::{Value, json};
use settings::Config;
use state_dir::Token;

use crate::extension_env::ExtensionEnv;
use crate::{Chromium, FixtureServer};

/// One endpoint under test, as a client sees it.
#[derive(Debug)]
pub struct Endpoint {
    pub kind: &'static str,
    /// The browser-level WebSocket URL (with the token, if any).
    pub ws: String,
    pub fixture: String,
    pub vars: Vec<(&'static str, String)>,
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

    /// Runs a Node script with this endpoint's variables (and `extra`).
    pub async fn run_node(&self, script: &str, extra: &[(&'static str, String)]) -> Result<String, String> {
        let mut vars = self.vars.clone();
        vars.extend_from_slice(extra);
        crate::run_node(script, &vars).await.map_err(|e| format!("{e:#}"))
    }

    /// A `/json/*` URL of this endpoint, with the token where needed.
    pub fn json_url(&self, path: &str) -> String {
        let var = |name: &str| self.vars.iter().find(|(k, _)| *k == name).map(|(_, v)| v.as_str()).unwrap_or_default();
        match var("TOKEN") {
            "" => format!("{}{path}", var("JSON_BASE")),
            token => format!("{}{path}?token={token}", var("JSON_BASE")),
        }
    }

    /// Runs one conformance scenario: its observation, or why it failed.
    pub async fn run(&self, scenario: &str) -> Result<Value, String> {
        let out = self.run_node("conformance.mjs", &[("SCENARIO", scenario.to_string())]).await?;
        out.lines()
            .rev()
            .find_map(|line| line.strip_prefix("observation "))
            .and_then(|json| serde_json::from_str(json).ok())
            .ok_or_else(|| format!("no observation in the output:\n{out}"))
    }
}

/// Chrome's own debugging port: the reference.
#[derive(Debug)]
pub struct ChromePort {
    _chrome: Chromium,
    pub fixtures: FixtureServer,
    pub endpoint: Endpoint,
}

impl ChromePort {
    pub async fn start() -> anyhow::Result<Self> {
        let fixtures = FixtureServer::start().await?;
        let chrome = Chromium::launch(&[], &format!("{}/index.html", fixtures.url()))?;
        let base = format!("http://127.0.0.1:{}", chrome.port);
        let endpoint = Endpoint::new("chrome", base.clone(), chrome.ws_url.clone(), base, "", &fixtures);
        Ok(Self { _chrome: chrome, fixtures, endpoint })
    }
}

/// The relay with the real extension, the fixture's index shared by a click.
pub async fn extension_endpoint() -> anyhow::Result<(ExtensionEnv, Endpoint)> {
    let (env, _) = ExtensionEnv::sharing_index().await?;
    let server = env.server();
    let ws = server.relay.version_json()["webSocketDebuggerUrl"].as_str().unwrap_or_default().to_string();
    let base = format!("http://127.0.0.1:{}", env.port);
    let key = browser_relay::cdp_key(&env.token);
    let endpoint = Endpoint::new("extension", server.http_url(), ws, base, key.as_str(), &env.fixtures);
    Ok((env, endpoint))
}

/// The relay in front of a managed browser whose first tab shows the
/// fixture's index. The browser's process group is killed on drop.
#[derive(Debug)]
pub struct Managed {
    _server: RunningServer,
    pub browsers: ManagedBrowsers,
    _fixtures: FixtureServer,
    _state: tempfile::TempDir,
    pub endpoint: Endpoint,
}

impl Drop for Managed {
    fn drop(&mut self) {
        crate::control_env::stop_managed_browsers(&self._server, self._state.path());
    }
}

impl Managed {
    pub async fn start() -> anyhow::Result<Self> {
        let state = tempfile::tempdir()?;
        let token = Token::generate();
        let mut options = crate::test_options(Some(token.clone()));
        options.state_root = Some(state.path().to_path_buf());
        let server = RunningServer::start(options).await?;
        // The server's own browsers: it serves what it launched.
        let browsers = server.browsers.clone().expect("a state directory");
        let profile = Config::defaults().profile(Some("managed"))?.clone();
        browsers.start(&profile).await?;
        let fixtures = FixtureServer::start().await?;
        let base = format!("http://{}/profiles/managed", server.addr);
        // Clients hold the CDP key, never the secret (browser_relay::keys).
        let token = browser_relay::cdp_key(&token);
        let (_, version) = crate::http_get(&format!("{base}/json/version?token={}", token.as_str())).await?;
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
    let (_, session) = crate::attach_first_page(&client).await?;
    client.call("Page.enable", json!({}), Some(&session)).await?;
    client.call("Page.navigate", json!({"url": url}), Some(&session)).await?;
    loop {
        let event = crate::next_event(&mut events, "Page.loadEventFired", Duration::from_secs(20)).await;
        if event.session_id.as_deref() == Some(session.as_str()) {
            break;
        }
    }
    client.call("Target.detachFromTarget", json!({"sessionId": session}), None).await?;
    Ok(())
}
