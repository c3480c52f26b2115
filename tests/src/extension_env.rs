//! The real extension, built from `extension/`, in a real headless Chromium,
//! paired with a real relay: the product as a user runs it.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context as _, bail};
use browser_relay::{RunningServer, ServerOptions};
use cdp_client::CdpClient;
use serde_json::{Value, json};
use state_dir::Token;

use crate::{Chromium, FixtureServer, test_options};

/// `extension/`, which must hold a built `pkg/` (scripts/build-extension.sh).
pub fn extension_dir() -> anyhow::Result<PathBuf> {
    let dir = crate::tests_dir().join("../extension").canonicalize().context("extension/ exists")?;
    if !dir.join("pkg/extension_wasm_bg.wasm").exists() {
        bail!("extension/pkg is not built: run scripts/build-extension.sh (the README's test command does)");
    }
    Ok(dir)
}

/// A copy of `extension/` whose manifest does not ask for the `tabGroups`
/// permission: Chrome then gives it no `chrome.tabGroups`, as a browser
/// without tab groups would. Same key, same id.
pub fn extension_without_tab_groups() -> anyhow::Result<tempfile::TempDir> {
    fn copy(from: &std::path::Path, to: &std::path::Path) -> std::io::Result<()> {
        std::fs::create_dir_all(to)?;
        for entry in std::fs::read_dir(from)? {
            let entry = entry?;
            let target = to.join(entry.file_name());
            if entry.file_type()?.is_dir() {
                copy(&entry.path(), &target)?
            } else {
                std::fs::copy(entry.path(), &target).map(drop)?
            }
        }
        Ok(())
    }
    let source = extension_dir()?;
    let copied = tempfile::Builder::new().prefix("browser-relay-ext-").tempdir()?;
    copy(&source, copied.path())?;
    let path = copied.path().join("manifest.json");
    let mut manifest: Value = serde_json::from_str(&std::fs::read_to_string(&path)?)?;
    let permissions = manifest["permissions"].as_array_mut().context("manifest permissions")?;
    let before = permissions.len();
    permissions.retain(|p| p != "tabGroups");
    if permissions.len() == before {
        bail!("extension/manifest.json does not ask for tabGroups");
    }
    std::fs::write(&path, serde_json::to_string_pretty(&manifest)?)?;
    Ok(copied)
}

/// The pinned extension id (from the manifest's key).
pub fn extension_id() -> anyhow::Result<String> {
    let id = std::fs::read_to_string(crate::tests_dir().join("../extension/EXTENSION_ID"))?;
    Ok(id.trim().to_string())
}

#[derive(Debug)]
pub struct ExtensionEnv {
    pub server: Option<RunningServer>,
    pub fixtures: FixtureServer,
    /// A CDP connection to the browser's own debugging port: the test's
    /// hands (clicking the toolbar button), never the path under test.
    pub browser: CdpClient,
    pub chrome: Chromium,
    pub token: Token,
    pub port: u16,
    pub id: String,
    /// The control API of the relay's process (its default profile is the
    /// extension driver).
    pub control: crate::control_env::ControlClient,
    pub state: tempfile::TempDir,
}

impl ExtensionEnv {
    /// Launches Chromium with the extension and a relay, and pairs them
    /// through the options page as a user would with `browser-relay pair`.
    pub async fn start() -> anyhow::Result<Self> {
        Self::start_with(&extension_dir()?).await
    }

    /// [`Self::start`] with the extension loaded from `dir` (a variant of
    /// `extension/`, with the same key and so the same id).
    pub async fn start_with(dir: &std::path::Path) -> anyhow::Result<Self> {
        Self::start_beside(dir, &[]).await
    }

    /// [`Self::start_with`], with `others` loaded beside it (a benchmark's
    /// own minimal extension).
    pub async fn start_beside(dir: &std::path::Path, others: &[PathBuf]) -> anyhow::Result<Self> {
        crate::init_logging();
        let id = extension_id()?;
        let fixtures = FixtureServer::start().await?;
        let token = Token::generate();
        let state = tempfile::tempdir()?;
        let mut options = test_options(Some(token.clone()));
        options.state_root = Some(state.path().to_path_buf());
        options.control_addr = Some("127.0.0.1:0".parse()?);
        let server = RunningServer::start(options).await?;
        let control = crate::control_env::ControlClient::of(&server, &token);
        let port = server.addr.port();
        let dirs: Vec<&std::path::Path> = std::iter::once(dir).chain(others.iter().map(PathBuf::as_path)).collect();
        let chrome = chromium_with_extensions(&dirs, &format!("{}/index.html", fixtures.url()))?;
        let browser = CdpClient::connect(&chrome.ws_url).await?.with_timeout(Duration::from_secs(20));
        // A user's (headed) Chrome saves downloads; headless denies them
        // unless told otherwise. Model the user's browser.
        let downloads = chrome.profile_dir().join("Downloads");
        browser
            .call("Browser.setDownloadBehavior", json!({"behavior": "allow", "downloadPath": downloads}), None)
            .await?;
        let env = Self { server: Some(server), fixtures, browser, chrome, token, port, id, control, state };
        first_tab_loaded(&env.chrome, &env.index_url()).await?;
        env.pair().await?;
        Ok(env)
    }

    /// [`Self::start`], then the user shares the fixture's index tab with a
    /// real click: the environment and that tab's URL.
    pub async fn sharing_index() -> anyhow::Result<(Self, String)> {
        Self::sharing_index_beside(&[]).await
    }

    /// [`Self::sharing_index`], with `others` loaded beside the extension.
    pub async fn sharing_index_beside(others: &[PathBuf]) -> anyhow::Result<(Self, String)> {
        let env = Self::start_beside(&extension_dir()?, others).await?;
        let index = env.index_url();
        env.click_toolbar(&index).await?;
        if let Err(e) = env.wait_for_tabs(1, Duration::from_secs(20)).await {
            // Chrome may not hand the worker the click at all (seen once
            // under load: no badge, no title, no share). That is the test's
            // hands failing, not the extension: click once more. A click the
            // worker did receive and did not act on fails here.
            let clicks = env.worker_eval("self.browserRelay.events['action.onClicked'] ?? 0").await;
            if clicks.as_ref().is_ok_and(|n| *n == json!(0)) {
                eprintln!("the worker never received the toolbar click: clicking again");
                env.click_toolbar(&index).await?;
                if env.wait_for_tabs(1, Duration::from_secs(20)).await.is_ok() {
                    return Ok((env, index));
                }
            }
            // What the extension says about it, for the failure message.
            let title = env.badge_title(&index).await.unwrap_or_else(|e| format!("(no title: {e:#})"));
            let events = env.worker_eval("JSON.stringify(self.browserRelay.events)").await;
            bail!("{e:#}; the toolbar button says: {title}; the worker's events: {events:?}");
        }
        Ok((env, index))
    }

    /// The fixture's index page, the tab the browser opens with.
    pub fn index_url(&self) -> String {
        format!("{}/index.html", self.fixtures.url())
    }

    pub fn server(&self) -> &RunningServer {
        self.server.as_ref().expect("relay running")
    }

    /// Opens a pairing link with a one-time code, as `browser-relay pair`
    /// prints it, and waits until the worker has redeemed it.
    async fn pair(&self) -> anyhow::Result<()> {
        let (link, _) = pairing_link(&self.id, self.port, self.state.path(), &self.token)?;
        open_pairing_link(&self.chrome, &link, self.port, &self.token).await
    }

    /// A real click on the toolbar button, on the tab showing `url` (brought
    /// to the front first, as a user's click always is).
    pub async fn click_toolbar(&self, url: &str) -> anyhow::Result<()> {
        click_toolbar(&self.browser, &self.id, url).await
    }

    /// Waits until the relay lists `n` attached tabs from a connected
    /// extension (for `n == 0`: whether or not it stays connected; it closes
    /// its socket when nothing is shared). The extension's messages are
    /// processed asynchronously; the relay's count is the observable outcome.
    pub async fn wait_for_tabs(&self, n: usize, within: Duration) -> anyhow::Result<()> {
        let what = format!("{n} tab(s) from a connected extension");
        crate::wait_for_stats(&self.server().relay, &what, within, |s| {
            s.targets == n && (s.extension_connected || n == 0)
        })
        .await
    }

    #[cfg(unix)]
    /// `browser-relay <args>` on this state folder and ports, as the person
    /// types it: its stdout, or the failure with its stderr.
    pub fn cli(&self, args: &[&str]) -> Result<String, String> {
        self.cli_command()(args)
    }

    #[cfg(unix)]
    /// [`Self::cli`] as a function of its own, to run beside the test (a
    /// command that waits for the person).
    pub fn cli_command(&self) -> impl Fn(&[&str]) -> Result<String, String> + Send + 'static {
        let control = self.server().control_url().expect("the control API runs");
        let control_port = control.rsplit(':').next().expect("a port").to_string();
        let (state, port) = (self.state.path().display().to_string(), self.port);
        move |args: &[&str]| {
            let output = std::process::Command::new(crate::serve_process::native_exe().expect("the binary"))
                .args(args)
                .args(["--state-dir", &state])
                .env("BROWSER_RELAY_PORT", port.to_string())
                .env("BROWSER_RELAY_CONTROL_PORT", &control_port)
                .env_remove("BROWSER_RELAY_GRANT")
                .output()
                .expect("the binary runs");
            let out = String::from_utf8_lossy(&output.stdout).to_string();
            let err = String::from_utf8_lossy(&output.stderr).to_string();
            if output.status.success() { Ok(out) } else { Err(format!("{err}{out}")) }
        }
    }

    /// The secret in the state folder, as `serve` keeps it, so that the
    /// CLI run against this environment holds the same one.
    pub fn keep_token(&self) {
        let path = self.state.path().join("token");
        std::fs::write(&path, self.token.as_str()).expect("the token written");
        #[cfg(unix)]
        std::fs::set_permissions(&path, <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o600))
            .expect("its mode set");
    }

    #[cfg(unix)]
    /// `grant add NAME ARGS…` with the real CLI: the CDP URL it printed
    /// (its last line), checked as the person would read it.
    pub fn add_grant(&self, name: &str, args: &[&str]) -> String {
        let mut all = vec!["grant", "add", name];
        all.extend_from_slice(args);
        let printed = self.cli(&all).unwrap_or_else(|e| panic!("grant add {name}: {e}"));
        assert!(printed.contains("The running serve honours it now"), "{printed}");
        assert!(!printed.contains(self.token.as_str()), "never the secret: {printed}");
        let url = printed.lines().last().expect("a line").to_string();
        assert!(url.starts_with(&format!("http://127.0.0.1:{}/?token=", self.port)), "{printed}");
        assert_eq!(self.cli(&["cdp-url", "--grant", name]).unwrap().trim(), url, "cdp-url --grant prints it again");
        url
    }

    /// The person opens the dashboard in their own Chrome, through a fresh
    /// login link, in a window of its own (a tab opened beside a shared one
    /// would join its group, shared): the tab's session on Chrome's own
    /// port (the test's hands).
    pub async fn open_dashboard_window(&self) -> anyhow::Result<String> {
        let link =
            self.control.ok("POST", "/ui/login-link", None).await["url"].as_str().unwrap_or_default().to_string();
        let created = self.browser.call("Target.createTarget", json!({"url": link, "newWindow": true}), None).await?;
        let params = json!({"targetId": created["targetId"], "flatten": true});
        let attached = self.browser.call("Target.attachToTarget", params, None).await?;
        Ok(attached["sessionId"].as_str().unwrap_or_default().to_string())
    }

    /// The badge text on the tab showing `url`, read from the service worker.
    pub async fn badge(&self, url: &str) -> anyhow::Result<String> {
        badge(&self.browser, &self.id, url).await
    }

    /// The toolbar button's title on the tab showing `url` (the badge's
    /// explanation, e.g. why it shows `!`).
    pub async fn badge_title(&self, url: &str) -> anyhow::Result<String> {
        badge_title(&self.browser, &self.id, url).await
    }

    /// Evaluates `expression` (a promise is awaited) in the extension's
    /// service worker: the test's hands for `chrome.*` (`chrome.tabs.group`
    /// moves a tab as the user's drag does), never the path under test.
    pub async fn worker_eval(&self, expression: &str) -> anyhow::Result<Value> {
        worker_eval(&self.browser, &self.id, expression).await
    }

    /// The tab group of the tab showing `url` (`chrome.tabGroups.TabGroup`:
    /// id, title, color), or `null` when it is in none.
    pub async fn group_of(&self, url: &str) -> anyhow::Result<Value> {
        let expression = format!(
            "chrome.tabs.query({{}}).then(tabs => tabs.find(t => t.url === {url:?})).then(t =>              !t ? Promise.reject(new Error('no tab showing ' + {url:?})) :              t.groupId === chrome.tabGroups.TAB_GROUP_ID_NONE ? null : chrome.tabGroups.get(t.groupId))"
        );
        self.worker_eval(&expression).await
    }

    /// Waits until the tab showing `url` is in a group (`true`: returns it)
    /// or in none (`false`: returns `null`).
    pub async fn wait_for_group(&self, url: &str, grouped: bool, within: Duration) -> anyhow::Result<Value> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            // A tab just opened shows its URL once it commits: until then,
            // "no tab showing" it.
            let group = match self.group_of(url).await {
                Ok(group) => Some(group),
                Err(e) if tokio::time::Instant::now() > deadline => return Err(e),
                Err(_) => None,
            };
            if let Some(group) = group.clone().filter(|g| g.is_null() != grouped) {
                return Ok(group);
            }
            if tokio::time::Instant::now() > deadline {
                bail!(
                    "the tab showing {url} is {} a group after {within:?}: {group:?}",
                    if grouped { "not in" } else { "still in" }
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Chrome's tab id of the tab showing `url` (waiting up to 10 s for
    /// one: a tab just opened shows its URL once it commits).
    pub async fn tab_id(&self, url: &str) -> anyhow::Result<i64> {
        let expression =
            format!("chrome.tabs.query({{}}).then(tabs => (tabs.find(t => t.url === {url:?}) || {{}}).id)");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(id) = self.worker_eval(&expression).await?.as_i64() {
                return Ok(id);
            }
            if tokio::time::Instant::now() > deadline {
                let all = self.worker_eval("chrome.tabs.query({}).then(tabs => tabs.map(t => t.url))").await?;
                bail!("no tab showing {url} within 10 s: {all}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub async fn service_worker(&self) -> anyhow::Result<String> {
        service_worker(&self.browser, &self.id).await
    }

    /// Stops the relay (as if the user quit it).
    pub async fn stop_relay(&mut self) {
        if let Some(server) = self.server.take() {
            server.stop().await;
        }
    }

    /// Starts a relay again on the same port with the same token.
    pub async fn restart_relay(&mut self) -> anyhow::Result<()> {
        let mut options: ServerOptions = test_options(Some(self.token.clone()));
        options.addr = format!("127.0.0.1:{}", self.port).parse()?;
        self.server = Some(RunningServer::start(options).await?);
        Ok(())
    }

    pub fn node_env(&self) -> Vec<(&'static str, String)> {
        let server = self.server();
        vec![
            ("RELAY_HTTP", server.http_url()),
            ("RELAY_WS", server.relay.version_json()["webSocketDebuggerUrl"].as_str().unwrap_or_default().to_string()),
            ("FIXTURE", self.fixtures.url()),
            ("FIXTURE_ALT", self.fixtures.alt_url()),
            // The test's hands, for scripts that play the user: Chrome's
            // own port and the extension (never the path under test).
            ("CHROME_WS", self.chrome.ws_url.clone()),
            ("EXTENSION_ID", self.id.clone()),
        ]
    }
}

impl Drop for ExtensionEnv {
    /// Managed browsers its serve launched go with it.
    fn drop(&mut self) {
        match &self.server {
            Some(server) => crate::control_env::stop_managed_browsers(server, self.state.path()),
            None => crate::control_env::kill_managed_browsers(self.state.path()),
        }
    }
}

/// Waits until the first tab of `chrome` has loaded `index`, loading it
/// again if Chrome lost it. A Chromium started with an extension that
/// asks for declarativeNetRequest (Browser Relay's does, for grants)
/// sometimes drops the navigation of its first tab, given on the
/// command line, while it installs the extension: the tab stays on an
/// empty page (seen here in 1 launch of 4 at once, headed or not, with a
/// minimal extension too). A person's tabs are open long before they
/// click; a test's first tab is not.
pub async fn first_tab_loaded(chrome: &Chromium, index: &str) -> anyhow::Result<()> {
    let browser = CdpClient::connect(&chrome.ws_url).await?.with_timeout(Duration::from_secs(20));
    let targets = browser.call("Target.getTargets", json!({}), None).await?;
    let page = targets["targetInfos"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|t| t["type"] == "page")
        .and_then(|t| t["targetId"].as_str())
        .map(str::to_string)
        .context("the browser has no page")?;
    browser.close();
    let url = format!("ws://127.0.0.1:{}/devtools/page/{page}", chrome.port);
    let page = CdpClient::connect(&url).await?.with_timeout(Duration::from_secs(20));
    let mut events = page.take_events().context("events")?;
    page.call("Page.enable", json!({}), None).await?;
    let loaded = format!("location.href === {index:?} && document.readyState === 'complete'");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let mut navigated = false;
    loop {
        let done = page.call("Runtime.evaluate", json!({"expression": loaded, "returnByValue": true}), None).await?;
        if done["result"]["value"] == true {
            break;
        }
        let frame = page.call("Page.getFrameTree", json!({}), None).await?;
        let lost = frame["frameTree"]["frame"]["url"].as_str().is_none_or(|u| u.is_empty() || u == "about:blank");
        if lost && !navigated {
            navigated = true;
            page.call("Page.navigate", json!({"url": index}), None).await?;
            continue;
        }
        // Not there yet: the next load, then look again.
        loop {
            let event = tokio::time::timeout_at(deadline, events.recv())
                .await
                .with_context(|| format!("{index} did not load within 20 s"))?
                .context("page connection closed")?;
            if event.method == "Page.loadEventFired" {
                break;
            }
        }
    }
    page.close();
    Ok(())
}

/// A page opened in a new tab of Chrome through its own port, loaded: the
/// connection it was opened on (whose events are `events`), its target and
/// its session.
#[derive(Debug)]
pub struct LoadedPage {
    pub client: CdpClient,
    pub events: tokio::sync::mpsc::UnboundedReceiver<cdp_client::CdpEvent>,
    pub target: String,
    pub session: String,
}

/// Opens `url` in a new tab through `chrome_ws` (Chrome's own port: the
/// test's hands) and waits for its load event.
pub async fn open_loaded_page(chrome_ws: &str, url: &str) -> anyhow::Result<LoadedPage> {
    // A connection of its own, to await this page's load event.
    let client = CdpClient::connect(chrome_ws).await?.with_timeout(Duration::from_secs(20));
    let mut events = client.take_events().context("events")?;
    let created = client.call("Target.createTarget", json!({"url": "about:blank"}), None).await?;
    let target = created["targetId"].as_str().context("targetId")?.to_string();
    let attached = client.call("Target.attachToTarget", json!({"targetId": target, "flatten": true}), None).await?;
    let session = attached["sessionId"].as_str().context("sessionId")?.to_string();
    client.call("Page.enable", json!({}), Some(&session)).await?;
    client.call("Page.navigate", json!({"url": url}), Some(&session)).await?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let event = tokio::time::timeout_at(deadline, events.recv())
            .await
            .with_context(|| format!("{url} did not load"))?
            .context("connection closed")?;
        if event.method == "Page.loadEventFired" && event.session_id.as_deref() == Some(session.as_str()) {
            break;
        }
    }
    Ok(LoadedPage { client, events, target, session })
}

/// A pairing link for the extension `id` with the relay on `port` whose
/// state directory is `state` and secret `token`, its one-time code issued
/// there as `browser-relay pair` issues one; and the code.
pub fn pairing_link(id: &str, port: u16, state: &std::path::Path, token: &Token) -> anyhow::Result<(String, Token)> {
    let code = state_dir::StateDir::at(state).pairing_codes().issue(token)?;
    Ok((format!("chrome-extension://{id}/options.html#port={port}&code={}", code.as_str()), code))
}

/// Opens a pairing link (`chrome-extension://<id>/options.html#port=…&code=…`,
/// as `browser-relay pair` prints it) in a new tab of `chrome`, as a user
/// pastes it, waits until the worker has redeemed it (storage holds `port`
/// and the extension's key derived from `token`, never the secret), and
/// closes the tab again.
pub async fn open_pairing_link(chrome: &Chromium, link: &str, port: u16, token: &Token) -> anyhow::Result<()> {
    let LoadedPage { client: pairing, mut events, target, session } = open_loaded_page(&chrome.ws_url, link).await?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    // The worker stores the pairing once it has redeemed the link's code
    // (bounded as the page bounds it: 15 s).
    let paired = "new Promise((done, fail) => { const t = Date.now(); (function check() { \
        chrome.storage.local.get(['relayPort', 'relayToken']).then(s => s.relayToken ? done(s) : \
        Date.now() - t > 15000 ? fail(new Error('the worker did not redeem the code')) : setTimeout(check, 50)); })(); })";
    let result = pairing
        .call(
            "Runtime.evaluate",
            json!({"expression": paired, "awaitPromise": true, "returnByValue": true}),
            Some(&session),
        )
        .await?;
    let stored = &result["result"]["value"];
    let key = browser_relay::extension_key(token);
    if stored["relayPort"] != json!(port) || stored["relayToken"] != json!(key.as_str()) {
        bail!("pairing stored {result}");
    }
    // Wait until the options tab is really gone: Chrome gives a toolbar
    // click to the active tab, and that must be the page under test.
    pairing.call("Target.setDiscoverTargets", json!({"discover": true}), None).await?;
    pairing.call("Target.closeTarget", json!({"targetId": target}), None).await?;
    loop {
        let event = tokio::time::timeout_at(deadline, events.recv())
            .await
            .context("the options tab did not close")?
            .context("connection closed")?;
        if event.method == "Target.targetDestroyed" && event.params["targetId"] == json!(target) {
            break;
        }
    }
    Ok(())
}

/// A real Chromium with the unpacked extensions in `dirs` loaded (and no
/// other), its first tab at `url`.
pub fn chromium_with_extensions(dirs: &[&std::path::Path], url: &str) -> anyhow::Result<Chromium> {
    let dirs: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    let load = format!("--load-extension={}", dirs.join(","));
    let only = format!("--disable-extensions-except={}", dirs.join(","));
    Chromium::launch(&[load, only, "--enable-unsafe-extension-debugging".into()], url)
}

/// The target id of extension `id`'s service worker, through `browser`
/// (a connection to Chrome's own port).
pub async fn service_worker(browser: &CdpClient, id: &str) -> anyhow::Result<String> {
    let prefix = format!("chrome-extension://{id}/");
    let targets = browser.call("Target.getTargets", json!({}), None).await?;
    targets["targetInfos"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|t| t["type"] == "service_worker" && t["url"].as_str().is_some_and(|u| u.starts_with(&prefix)))
        .and_then(|t| t["targetId"].as_str())
        .map(str::to_string)
        .context("the extension's service worker is not running")
}

/// Evaluates `expression` (a promise is awaited) in extension `id`'s
/// service worker, through `browser`: the test's hands for `chrome.*`.
pub async fn worker_eval(browser: &CdpClient, id: &str, expression: &str) -> anyhow::Result<Value> {
    let worker = service_worker(browser, id).await?;
    let attached = browser.call("Target.attachToTarget", json!({"targetId": worker, "flatten": true}), None).await?;
    let session = attached["sessionId"].as_str().context("sessionId")?.to_string();
    let result = browser
        .call(
            "Runtime.evaluate",
            json!({"expression": expression, "awaitPromise": true, "returnByValue": true}),
            Some(&session),
        )
        .await;
    let _ = browser.call("Target.detachFromTarget", json!({"sessionId": session}), None).await;
    let result = result?;
    if let Some(exception) = result.get("exceptionDetails") {
        bail!("evaluation failed: {exception}");
    }
    Ok(result["result"]["value"].clone())
}

/// The badge text on the tab showing `url`, read from extension `id`'s worker.
pub async fn badge(browser: &CdpClient, id: &str, url: &str) -> anyhow::Result<String> {
    toolbar_button(browser, id, url, "getBadgeText").await
}

/// The toolbar button's title on the tab showing `url` (the badge's
/// explanation, e.g. why it shows `!`).
pub async fn badge_title(browser: &CdpClient, id: &str, url: &str) -> anyhow::Result<String> {
    toolbar_button(browser, id, url, "getTitle").await
}

/// `chrome.action.<getter>` for the tab showing `url`.
async fn toolbar_button(browser: &CdpClient, id: &str, url: &str, getter: &str) -> anyhow::Result<String> {
    let expression = format!(
        "chrome.tabs.query({{}}).then(tabs => chrome.action.{getter}({{tabId: tabs.find(t => t.url === {url:?}).id}}))"
    );
    Ok(worker_eval(browser, id, &expression).await?.as_str().unwrap_or_default().to_string())
}

/// A real click on the extension `id`'s toolbar button, on the tab showing
/// `url` (brought to the front first, as a user's click always is), given
/// through `browser`, a connection to Chrome's own port: the test's hands.
pub async fn click_toolbar(browser: &CdpClient, id: &str, url: &str) -> anyhow::Result<()> {
    let pages = browser.call("Target.getTargets", json!({}), None).await?;
    if let Some(page) =
        pages["targetInfos"].as_array().into_iter().flatten().find(|t| t["type"] == "page" && t["url"] == url)
    {
        browser.call("Target.activateTarget", json!({"targetId": page["targetId"]}), None).await?;
    }
    // The tab target (not the page) showing `url`.
    let targets = browser.call("Target.getTargets", json!({"filter": [{"type": "tab"}]}), None).await?;
    let tab = targets["targetInfos"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|t| t["url"] == url)
        .and_then(|t| t["targetId"].as_str())
        .map(str::to_string)
        .with_context(|| format!("no tab showing {url}: {targets}"))?;
    browser.call("Extensions.triggerAction", json!({"id": id, "targetId": tab}), None).await?;
    Ok(())
}
