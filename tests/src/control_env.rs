//! The control API under test: a relay with its control API on ephemeral
//! ports, a temporary state directory whose default profile is the managed
//! one, and the fixture server. Every managed browser it may launch (any
//! profile, ephemeral ones too) is killed (its whole process group) when the
//! environment drops, also on failure.

use std::time::Duration;

use browser_relay::RunningServer;
use cdp_client::http::HttpResponse;
use control_engine::Engine;
use serde_json::Value;
use state_dir::Token;

use crate::FixtureServer;

/// An agent's view of the control API: the product's own client, with
/// assertions for tests.
#[derive(Debug, Clone)]
pub struct ControlClient {
    pub client: browser_relay::ControlClient,
}

impl ControlClient {
    pub fn of(server: &RunningServer, token: &Token) -> Self {
        let port = server.control.as_ref().expect("the control API runs").0.port();
        Self { client: browser_relay::ControlClient::new(port, token.clone()) }
    }

    /// A request with the token, as an agent sends it; the response as it came.
    pub async fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&Value>,
    ) -> HttpResponse {
        self.client.raw(method, path, headers, body).await.unwrap_or_else(|e| panic!("{method} {path}: {e}"))
    }

    /// (status, JSON body).
    pub async fn call(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let response = self.request(method, path, &[], body.as_ref()).await;
        (response.status, response.json())
    }

    /// Like [`Self::call`], but the request must succeed.
    pub async fn ok(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let (status, value) = self.call(method, path, body).await;
        assert_eq!(status, 200, "{method} {path} → {status} {value}");
        value
    }
}

#[derive(Debug)]
pub struct ControlEnv {
    pub server: RunningServer,
    pub fixtures: FixtureServer,
    pub token: Token,
    /// `http://127.0.0.1:PORT` of the control API.
    pub base: String,
    pub api: ControlClient,
    pub state: tempfile::TempDir,
}

impl ControlEnv {
    /// `config_toml`: the state directory's config.toml (`None`: the managed
    /// profile is the default).
    pub async fn start_with(config_toml: Option<&str>) -> anyhow::Result<Self> {
        Self::start_with_relay(config_toml, |_| {}).await
    }

    /// The same, with the relay's limits changed by `relay` (budgets made
    /// small enough for a test to reach).
    pub async fn start_with_relay(
        config_toml: Option<&str>,
        relay: impl FnOnce(&mut relay_engine::RelayConfig),
    ) -> anyhow::Result<Self> {
        crate::init_logging();
        let state = tempfile::tempdir()?;
        let config = config_toml.unwrap_or("defaultProfile = \"managed\"\n");
        std::fs::write(state.path().join("config.toml"), config)?;
        let token = Token::generate();
        let mut options = crate::test_options(Some(token.clone()));
        relay(&mut options.relay);
        options.state_root = Some(state.path().to_path_buf());
        options.control_addr = Some("127.0.0.1:0".parse()?);
        let server = RunningServer::start(options).await?;
        let api = ControlClient::of(&server, &token);
        let fixtures = FixtureServer::start().await?;
        let base = server.control_url().expect("the control API runs");
        Ok(Self { server, fixtures, token, base, api, state })
    }

    pub async fn start() -> anyhow::Result<Self> {
        Self::start_with(None).await
    }

    pub fn engine(&self) -> &Engine {
        &self.server.control.as_ref().expect("the control API runs").1
    }

    /// Launches the managed browser through `POST /start`.
    pub async fn start_browser(&self) -> Value {
        self.api.ok("POST", "/start", None).await
    }

    /// A profile's CDP endpoint with the token, as `browser-relay cdp-url`
    /// prints it (the control API shows it without).
    pub async fn cdp_url(&self, profile: &str) -> String {
        let status = self.api.ok("GET", &format!("/?profile={profile}"), None).await;
        let endpoint = status["cdpEndpoint"].as_str().expect("a CDP endpoint").to_string();
        format!("{endpoint}?token={}", browser_relay::cdp_key(&self.token).as_str())
    }

    pub fn fixture(&self, path: &str) -> String {
        format!("{}/{path}", self.fixtures.url())
    }

    /// Opens a fixture in a new tab (which becomes current and has loaded
    /// when the call returns); its targetId.
    pub async fn open(&self, path: &str) -> String {
        let url = self.fixture(path);
        let tab = self.api.ok("POST", "/tabs/open", Some(serde_json::json!({"url": url}))).await;
        tab["targetId"].as_str().expect("targetId").to_string()
    }

    /// The `ai` snapshot text of the current tab, with `query` appended.
    pub async fn snapshot_text(&self, query: &str) -> String {
        let value = self.api.ok("GET", &format!("/snapshot?{query}"), None).await;
        value["snapshot"].as_str().expect("an ai snapshot").to_string()
    }

    /// Evaluates `expression` in a tab of the managed browser, over a CDP
    /// connection of the test's own (its hands, not the path under test).
    pub async fn eval(&self, target_id: &str, expression: &str) -> Value {
        use cdp_client::CdpClient;
        // A session of its own on the browser's pipe (this process launched it).
        let browsers = self.server.browsers.clone().expect("a state directory");
        let config = browsers.config().expect("config.toml parses");
        let profile = config.profile(Some("managed")).expect("the managed profile");
        let channels =
            browsers.connect(profile, managed_driver::Endpoint::Browser).await.expect("the managed browser runs");
        let client = CdpClient::over(channels).with_timeout(Duration::from_secs(10));
        let attached = client
            .call("Target.attachToTarget", serde_json::json!({"targetId": target_id, "flatten": true}), None)
            .await
            .expect("attaches");
        let session = attached["sessionId"].as_str().expect("a session").to_string();
        let result = client
            .call(
                "Runtime.evaluate",
                serde_json::json!({"expression": expression, "returnByValue": true, "awaitPromise": true}),
                Some(&session),
            )
            .await
            .expect("evaluates");
        assert!(result.get("exceptionDetails").is_none(), "{expression}: {result}");
        result["result"]["value"].clone()
    }

    /// A GET on the relay (not the control API), with the token: (status,
    /// body).
    pub async fn relay_get(&self, path: &str) -> (u16, String) {
        let url = format!("http://{}{path}?token={}", self.server.addr, browser_relay::cdp_key(&self.token).as_str());
        crate::http_get(&url).await.unwrap_or_else(|e| panic!("GET {path}: {e}"))
    }

    /// The same text with the fixture server's port replaced by `PORT`.
    pub fn normalize(&self, text: &str) -> String {
        text.replace(&self.fixtures.addr.port().to_string(), "PORT")
    }
}

impl Drop for ControlEnv {
    fn drop(&mut self) {
        stop_managed_browsers(&self.server, self.state.path());
    }
}

/// Stops the managed browsers `server` launched as serve does when it ends
/// (`Browser.close` over their pipes), when the test runs on a
/// multi-threaded runtime (its server must go on serving while this waits)
/// and is not panicking; then kills whatever still runs
/// ([`kill_managed_browsers`]). A browser killed instead leaves its
/// singleton folder, which the relay removes at that profile's next start
/// or stop, and a test's relay has none.
pub fn stop_managed_browsers(server: &RunningServer, state: &std::path::Path) {
    use tokio::runtime::{Handle, RuntimeFlavor};
    // Not while a test panics: its runtime may be going down, and killing
    // is what must happen then.
    if let (Some(browsers), Ok(runtime)) = (server.browsers.clone(), Handle::try_current())
        && runtime.runtime_flavor() == RuntimeFlavor::MultiThread
        && !std::thread::panicking()
    {
        let profiles = settings::Config::load(state).map(|config| config.profiles).unwrap_or_default();
        let stop = tokio::time::timeout(Duration::from_secs(10), browsers.stop_owned(profiles.values()));
        let _ = tokio::task::block_in_place(|| runtime.block_on(stop));
    }
    kill_managed_browsers(state);
}

/// Kills the process group of every managed browser a serve of `state`
/// launched (from their run.json): a test's browsers go also when it fails.
pub fn kill_managed_browsers(state: &std::path::Path) {
    for folder in ["profiles", "ephemeral"] {
        let Ok(profiles) = std::fs::read_dir(state.join(folder)) else { continue };
        for profile in profiles.filter_map(Result::ok) {
            let run = std::fs::read(profile.path().join("run.json")).unwrap_or_default();
            if let Some(pid) = serde_json::from_slice::<Value>(&run).ok().and_then(|r| r["pid"].as_u64()) {
                crate::kill_group(pid as u32);
            }
        }
    }
}

/// Polls `check` (an observable outcome the page produces asynchronously)
/// until it returns `Some`, up to `within`.
pub async fn eventually<T, F, Fut>(what: &str, within: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(tokio::time::Instant::now() < deadline, "{what} did not happen within {within:?}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// The ref on the snapshot line that contains `needle`.
pub fn ref_of(snapshot: &str, needle: &str) -> String {
    let line = snapshot
        .lines()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no line with {needle} in:\n{snapshot}"));
    line_ref(line).unwrap_or_else(|| panic!("no ref on {line}")).to_string()
}

/// The ref of a snapshot line in either form: `[e7]` (lean) or `[ref=e7]`
/// (full), the first attribute that is one.
pub fn line_ref(line: &str) -> Option<&str> {
    line.match_indices(" [").find_map(|(at, _)| {
        let attribute = &line[at + 2..];
        let attribute = attribute.strip_prefix("ref=").unwrap_or(attribute);
        let end = attribute.find(']')?;
        let candidate = &attribute[..end];
        let digits = candidate.strip_prefix('e')?;
        (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())).then_some(candidate)
    })
}
