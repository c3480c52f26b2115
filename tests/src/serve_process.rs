//! `browser-relay serve` as a process of its own, as a user runs it (the
//! native binary, or the Windows exe under Wine): started in a process
//! group of its own, watched through its log, killed with its group when
//! the test ends (also on failure), and asked what it lists over HTTP.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use cdp_client::CdpClient;
use serde_json::Value;
use state_dir::Token;

use crate::{Chromium, extension_env};

/// The native binary: `BROWSER_RELAY_EXE`, else the workspace's debug
/// build (`cargo test --workspace` builds it before any test runs).
pub fn native_exe() -> anyhow::Result<PathBuf> {
    let exe = std::env::var_os("BROWSER_RELAY_EXE").map_or_else(
        || crate::tests_dir().join(format!("../target/debug/browser-relay{}", std::env::consts::EXE_SUFFIX)),
        PathBuf::from,
    );
    anyhow::ensure!(
        exe.is_file(),
        "{} is not built: run `cargo build -p browser-relay` (or set BROWSER_RELAY_EXE)",
        exe.display()
    );
    Ok(exe)
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The native binary's `serve --pair` in a state directory of its own, on
/// a port the system picks, as a user starts it: the pairing link serve
/// printed (for the port it got), the token it pairs with, and the running
/// serve (killed when this drops).
#[derive(Debug)]
pub struct PairedServe {
    pub link: String,
    pub token: Token,
    pub port: u16,
    pub serve: ServeProcess,
    pub home: tempfile::TempDir,
}

impl PairedServe {
    pub async fn start() -> anyhow::Result<Self> {
        let home = tempfile::Builder::new().prefix("browser-relay-test-").tempdir()?;
        let mut command = Command::new(native_exe()?);
        command.args(["serve", "--pair", "--port", "0", "--control-port", "0"]).env("BROWSER_RELAY_HOME", home.path());
        let serve = ServeProcess::start(command, &home.path().join("serve.log"), Duration::from_secs(20)).await?;
        let (link, token) = serve.printed_pairing_link(home.path(), Duration::from_secs(10)).await?;
        let port = link.split_once("#port=").and_then(|(_, rest)| rest.split('&').next()).context("the link's port")?;
        let listening = format!("relay listening on http://127.0.0.1:{port} ");
        anyhow::ensure!(serve.log_text().contains(&listening), "the link names the port serve got: {link}");
        Ok(Self { port: port.parse()?, link, token, serve, home })
    }
}

/// The pairing link in what `pair` (or `serve --pair`) printed, and the
/// token of the state directory `home`, which the printed text must not hold.
pub fn printed_link(printed: &str, home: &Path) -> anyhow::Result<(String, Token)> {
    let link = printed.split_whitespace().find(|w| w.starts_with("chrome-extension://")).context("a link")?;
    let token = Token::parse(std::fs::read_to_string(home.join("token"))?.trim()).context("the token file")?;
    anyhow::ensure!(link.contains("&code=") && !printed.contains(token.as_str()), "pair showed the secret: {printed}");
    Ok((link.to_string(), token))
}

/// A running `serve`; its process group is killed on drop.
#[derive(Debug)]
pub struct ServeProcess {
    pub child: Child,
    pub log: PathBuf,
    /// What serve printed on stdout (beside its log).
    pub stdout: PathBuf,
}

impl ServeProcess {
    /// Runs `serve` (the command, its arguments set) with its log in `log`,
    /// and waits up to `within` for it to listen.
    pub async fn start(mut serve: Command, log: &Path, within: Duration) -> anyhow::Result<Self> {
        let stdout = log.with_extension("out");
        serve.stdin(Stdio::null()).stdout(std::fs::File::create(&stdout)?).stderr(std::fs::File::create(log)?);
        #[cfg(unix)]
        std::os::unix::process::CommandExt::process_group(&mut serve, 0);
        let child = serve.spawn()?;
        let mut serve = Self { child, log: log.to_path_buf(), stdout };
        let deadline = Instant::now() + within;
        while !serve.log_text().contains("relay listening on") {
            if let Some(status) = serve.child.try_wait()? {
                bail!("serve exited ({status}): {}", serve.log_text());
            }
            anyhow::ensure!(Instant::now() < deadline, "serve did not listen within {within:?}");
            // A process's log line gives no event to await.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(serve)
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn stdout_text(&self) -> String {
        std::fs::read_to_string(&self.stdout).unwrap_or_default()
    }

    /// The pairing link `serve --pair` printed once listening, and the
    /// token of its state directory `home`, which it must not have printed.
    pub async fn printed_pairing_link(&self, home: &Path, within: Duration) -> anyhow::Result<(String, Token)> {
        let deadline = Instant::now() + within;
        loop {
            let printed = self.stdout_text();
            if printed.contains("\n\nIt holds a one-time code") {
                return printed_link(&printed, home);
            }
            anyhow::ensure!(Instant::now() < deadline, "serve --pair printed no link: {printed:?} {}", self.log_text());
            // A process's output gives no event to await.
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Sends `signal` to serve's whole process group.
    #[cfg(unix)]
    pub fn signal(&self, signal: nix::sys::signal::Signal) -> anyhow::Result<()> {
        let group = nix::unistd::Pid::from_raw(i32::try_from(self.child.id())?);
        Ok(nix::sys::signal::killpg(group, signal)?)
    }
}

impl Drop for ServeProcess {
    fn drop(&mut self) {
        crate::kill_group(self.child.id());
        let _ = self.child.wait();
    }
}

/// The user's Chrome beside a serve process: the real extension loaded,
/// paired by opening `link` (what `serve --pair` or `pair` printed), and the tab showing `url`
/// shared with a real click, once the relay on `port` lists it. Returns the
/// browser and a connection to its own port (the test's hands).
pub async fn chrome_sharing(link: &str, port: u16, token: &Token, url: &str) -> anyhow::Result<(Chromium, CdpClient)> {
    let chrome = extension_env::chromium_with_extensions(&[&extension_env::extension_dir()?], url)?;
    extension_env::first_tab_loaded(&chrome, url).await?;
    extension_env::open_pairing_link(&chrome, link, port, token).await?;
    let hands = CdpClient::connect(&chrome.ws_url).await?.with_timeout(Duration::from_secs(20));
    extension_env::click_toolbar(&hands, &extension_env::extension_id()?, url).await?;
    wait_for_shared(port, token.as_str(), url, Duration::from_secs(30)).await?;
    Ok((chrome, hands))
}

/// The relay's `/json/list`, with the CDP key (derived from the install's
/// `secret`) as a CDP client sends it.
pub async fn listed_targets(port: u16, secret: &str) -> anyhow::Result<Vec<Value>> {
    let key = browser_relay::cdp_key(&Token::parse(secret).context("the install's secret")?);
    let (status, body) = crate::http_get(&format!("http://127.0.0.1:{port}/json/list?token={}", key.as_str())).await?;
    if status != 200 {
        bail!("/json/list answered {status}: {body}");
    }
    Ok(serde_json::from_str::<Vec<Value>>(&body)?)
}

/// Waits until the relay lists exactly the page at `url`.
pub async fn wait_for_shared(port: u16, token: &str, url: &str, within: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + within;
    loop {
        let listed = listed_targets(port, token).await;
        if let Ok(list) = &listed
            && list.len() == 1
            && list[0]["url"] == url
        {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("the relay did not list the shared tab {url} alone within {within:?}: {listed:?}");
        }
        // The relay learns of the share from the extension: nothing to
        // await from here but its answer.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
