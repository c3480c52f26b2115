//! Support for the end-to-end tests: real Chromium, the relay, a simulated
//! extension, a fixture server, and real Node clients.

pub mod chromium;
pub mod control_env;
pub mod endpoints;
pub mod extension_env;
pub mod fake_extension;
pub mod fixtures;
pub mod forwarder;
pub mod mcp_host;
pub mod pairing;
pub mod serve_process;
pub mod sim_extension;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context as _, bail};
use browser_relay::{RunningServer, ServerOptions};
use relay_engine::RelayConfig;
use state_dir::Token;

pub use chromium::{Chromium, kill_group};
pub use control_env::ControlEnv;
pub use fixtures::FixtureServer;
pub use sim_extension::{Faults, SimExtension};

/// Relay logs in test output, filtered by `BROWSER_RELAY_LOG` (default: warnings).
pub fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("BROWSER_RELAY_LOG").unwrap_or_else(|_| "warn".into());
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_test_writer().try_init();
}

/// The `tests/` directory.
pub fn tests_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Relay options for tests: ephemeral port, a fresh token, short grace.
pub fn test_options(token: Option<Token>) -> ServerOptions {
    let mut options = ServerOptions::new("127.0.0.1:0".parse().expect("valid"), token);
    options.relay = RelayConfig { extension_grace: Duration::from_millis(300), ..RelayConfig::default() };
    options
}

/// Chromium + fixtures + relay + simulated extension attached to one tab.
#[derive(Debug)]
pub struct RelayEnv {
    // Field order is drop order: clients of the browser go first.
    pub ext: SimExtension,
    pub server: RunningServer,
    pub fixtures: FixtureServer,
    pub chrome: Chromium,
    pub token: Token,
    /// The tab the user "clicked" on, at `{fixture}/index.html`.
    pub tab: shared_protocol::TabInfo,
}

impl RelayEnv {
    pub async fn start() -> anyhow::Result<Self> {
        init_logging();
        let fixtures = FixtureServer::start().await?;
        let index = format!("{}/index.html", fixtures.url());
        let chrome = Chromium::launch(&[], &index)?;
        let token = Token::generate();
        let server = RunningServer::start(test_options(Some(token.clone()))).await?;
        let ext = SimExtension::new(&chrome.ws_url).await?;
        let tab = ext.wait_for_tab("the fixture index page", |t| t.url == index).await?;
        ext.connect(server.addr, Some(token.as_str())).await?;
        ext.welcomed().await?;
        ext.user_attach(tab.tab_id).await?;
        let env = Self { ext, server, fixtures, chrome, token, tab };
        env.wait_for_targets(1).await?;
        env.wait_for_load().await?;
        Ok(env)
    }

    /// Waits until the relay lists `n` targets.
    pub async fn wait_for_targets(&self, n: usize) -> anyhow::Result<()> {
        wait_for_stats(&self.server.relay, &format!("{n} targets"), Duration::from_secs(10), |s| s.targets == n).await
    }

    /// Waits until the attached page has loaded the fixture index (not the
    /// initial `about:blank`), through the relay's page-level endpoint.
    async fn wait_for_load(&self) -> anyhow::Result<()> {
        let target = self.ext.target_id(self.tab.tab_id).context("attached tab has a target")?;
        let url = format!(
            "ws://{}/devtools/page/{target}?token={}",
            self.server.addr,
            browser_relay::cdp_key(&self.token).as_str()
        );
        let page = cdp_client::CdpClient::connect(&url).await?;
        let mut events = page.take_events().context("events")?;
        page.call("Page.enable", serde_json::json!({}), None).await?;
        let index = format!("{}/index.html", self.fixtures.url());
        let loaded = format!("location.href === {index:?} && document.readyState === 'complete'");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let done = page
                .call("Runtime.evaluate", serde_json::json!({"expression": loaded, "returnByValue": true}), None)
                .await;
            if done.is_ok_and(|r| r["result"]["value"] == true) {
                break;
            }
            // Not there yet: wait for the next load, then look again.
            loop {
                let event = tokio::time::timeout_at(deadline, events.recv())
                    .await
                    .context("the fixture page did not load within 20 s")?
                    .context("page connection closed")?;
                if event.method == "Page.loadEventFired" {
                    break;
                }
            }
        }
        page.close();
        Ok(())
    }

    /// The browser-level WebSocket URL (with token).
    pub fn browser_ws(&self) -> String {
        self.server.relay.version_json()["webSocketDebuggerUrl"].as_str().unwrap_or_default().to_string()
    }

    pub fn node_env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("RELAY_HTTP", self.server.http_url()),
            ("RELAY_WS", self.browser_ws()),
            ("FIXTURE", self.fixtures.url()),
            ("FIXTURE_ALT", self.fixtures.alt_url()),
        ]
    }

    /// Runs `tests/js/<script>` with this environment; its output on success,
    /// an error holding all of it on failure.
    pub async fn run_node(&self, script: &str) -> anyhow::Result<String> {
        run_node(script, &self.node_env()).await
    }
}

/// The next event named `method` on a CDP client's event stream, skipping
/// others; panics with the method's name after `within`.
pub async fn next_event(
    events: &mut tokio::sync::mpsc::UnboundedReceiver<cdp_client::CdpEvent>,
    method: &str,
    within: Duration,
) -> cdp_client::CdpEvent {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let event = tokio::time::timeout_at(deadline, events.recv())
            .await
            .unwrap_or_else(|_| panic!("no {method} within {within:?}"))
            .unwrap_or_else(|| panic!("connection closed waiting for {method}"));
        if event.method == method {
            return event;
        }
    }
}

/// A plain WebSocket client's socket, as the tests dial one.
pub type RawSocket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Reads a socket until the other end closes it: the close frame's code and
/// reason, if it sent one. Panics if it is still open after `within`.
pub async fn close_frame_of(socket: &mut RawSocket, within: Duration) -> Option<(u16, String)> {
    use futures_util::StreamExt;
    use tokio_tungstenite::tungstenite::Message;
    let read = async {
        while let Some(frame) = socket.next().await {
            match frame {
                Ok(Message::Close(frame)) => return frame.map(|f| (u16::from(f.code), f.reason.to_string())),
                Ok(_) => {}
                Err(_) => return None,
            }
        }
        None
    };
    tokio::time::timeout(within, read).await.unwrap_or_else(|_| panic!("the socket is still open after {within:?}"))
}

/// The browser's first page, attached flat: its target id and session.
pub async fn attach_first_page(client: &cdp_client::CdpClient) -> anyhow::Result<(String, String)> {
    let targets = client.call("Target.getTargets", serde_json::json!({}), None).await?;
    let page = targets["targetInfos"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|t| t["type"] == "page")
        .and_then(|t| t["targetId"].as_str())
        .ok_or_else(|| anyhow::anyhow!("the browser has no page: {targets}"))?
        .to_string();
    let attached =
        client.call("Target.attachToTarget", serde_json::json!({"targetId": page, "flatten": true}), None).await?;
    let session = attached["sessionId"].as_str().unwrap_or_default().to_string();
    Ok((page, session))
}

/// Root auto-attach as Playwright sends it: every attached page is
/// announced (before the answer) and new ones as they come.
pub async fn auto_attach(client: &cdp_client::CdpClient) {
    let params = serde_json::json!({"autoAttach": true, "waitForDebuggerOnStart": true, "flatten": true});
    client.call("Target.setAutoAttach", params, None).await.expect("Target.setAutoAttach answered");
}

/// Opens `url` in a popup from the page on `session`. `window.open` needs a
/// user gesture (as a click gives), or the popup blocker stops it.
pub async fn open_popup(client: &cdp_client::CdpClient, session: &str, url: &str) -> anyhow::Result<()> {
    let expression = format!("window.open({url:?}) && true");
    client
        .call("Runtime.evaluate", serde_json::json!({"expression": expression, "userGesture": true}), Some(session))
        .await?;
    Ok(())
}

/// A loopback HTTP GET returning status and body: the relay's own client.
pub use cdp_client::http::get as http_get;

/// Waits until the relay's stats satisfy `done` (the relay handles extension
/// messages asynchronously; its counters are the observable outcome).
pub async fn wait_for_stats(
    relay: &relay_engine::Relay,
    what: &str,
    within: Duration,
    done: impl Fn(&relay_engine::RelayStats) -> bool,
) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let stats = relay.stats();
        if done(&stats) {
            return Ok(());
        }
        if tokio::time::Instant::now() > deadline {
            bail!("relay never reached {what} within {within:?}: {stats:?}");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Runs `snapshot` (a `browser-relay snapshot` command, native or under
/// Wine, set to reach serve's control API) and checks that the agent's
/// CLI read the shared fixture index with refs.
pub async fn cli_snapshot_shows_the_index(mut snapshot: std::process::Command) -> anyhow::Result<()> {
    let printed = tokio::task::spawn_blocking(move || snapshot.output()).await??;
    let text = String::from_utf8_lossy(&printed.stdout);
    anyhow::ensure!(
        printed.status.success()
            && text.contains("Fixture Index")
            && text.lines().any(|l| control_env::line_ref(l).is_some()),
        "the CLI's snapshot ({}): {text}{}",
        printed.status,
        String::from_utf8_lossy(&printed.stderr)
    );
    Ok(())
}

/// `node tests/js/<script>`, run from tests/ and killed with the test, with
/// a temporary folder of its own (the returned guard removes it).
/// Playwright keeps a folder per connection in the temporary folder and
/// removes it only when the browser closes: a script that ends otherwise
/// would leave it behind.
pub fn node_command(script: &str) -> anyhow::Result<(tokio::process::Command, tempfile::TempDir)> {
    let dir = tests_dir();
    let mut command = tokio::process::Command::new("node");
    command.arg(dir.join("js").join(script)).current_dir(&dir).kill_on_drop(true);
    let temp = tempfile::Builder::new().prefix("browser-relay-node-").tempdir()?;
    command.env("TMPDIR", temp.path());
    Ok((command, temp))
}

/// Runs a Node client script (killed if it outlives 4 minutes or the test).
pub async fn run_node(script: &str, env: &[(&str, String)]) -> anyhow::Result<String> {
    run_node_within(script, env, Duration::from_secs(240)).await
}

/// Runs a Node client script that may take up to `within` (a soak's), killed
/// after that or with the test.
pub async fn run_node_within(script: &str, env: &[(&str, String)], within: Duration) -> anyhow::Result<String> {
    let dir = tests_dir();
    if !dir.join("node_modules/playwright-core").exists() {
        bail!("tests/node_modules is missing: run `npm ci` in tests/ (the README's test command does)");
    }
    let (mut command, _temp) = node_command(script)?;
    for (key, value) in env {
        command.env(key, value);
    }
    let output = tokio::time::timeout(within, command.output())
        .await
        .with_context(|| format!("{script} ran for more than {within:?}"))?
        .with_context(|| format!("running node {script}"))?;
    let text = format!(
        "--- stdout ---\n{}\n--- stderr ---\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    if !output.status.success() {
        bail!("{script} failed ({}):\n{text}", output.status);
    }
    Ok(text)
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use std::os::unix::process::CommandExt as _;
    use std::time::{Duration, Instant};

    use crate::chromium::{kill_group, running_in_group};

    #[test]
    fn killing_a_group_returns_once_none_of_it_runs() {
        // A shell and the sleep it started, in a group of their own.
        let mut leader =
            std::process::Command::new("sh").args(["-c", "sleep 30 & wait"]).process_group(0).spawn().unwrap();
        let pgid = leader.id();
        let deadline = Instant::now() + Duration::from_secs(10);
        while running_in_group(pgid) < 2 {
            assert!(Instant::now() < deadline, "the shell never started its sleep");
            std::thread::sleep(Duration::from_millis(5));
        }
        kill_group(pgid);
        // The shell is a zombie until reaped here; nothing of the group runs.
        assert_eq!(running_in_group(pgid), 0, "a process of the group still runs after kill_group");
        let _ = leader.wait();
    }
}
