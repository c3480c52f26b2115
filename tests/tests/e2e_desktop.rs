//! The extension driver as a person on a desktop uses it, with nothing of
//! Linux's in the test: the native `browser-relay serve --pair` in a state
//! folder of its own; the real extension in a real Chrome (Debian's
//! Chromium here, Chrome for Testing on Windows and macOS in CI:
//! `BROWSER_RELAY_TEST_CHROME`), paired by opening the link serve printed;
//! a tab shared with a toolbar click; a real Playwright client that
//! connects, evaluates, takes a screenshot and leaves, twice, the tab
//! staying shared; an agent's CLI snapshot of it; the secret in no log.
//! `e2e_wine.rs` makes the same checks of the Windows exe under Wine;
//! `.github/workflows/ci.yml` runs this file on Windows and both Macs.

use std::time::Duration;

use anyhow::Context as _;
use e2e::FixtureServer;
use e2e::serve_process::{ServeProcess, chrome_sharing, free_port, native_exe, wait_for_shared};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_native_serve_serves_the_real_extension_and_playwright() -> anyhow::Result<()> {
    e2e::init_logging();
    let home = tempfile::Builder::new().prefix("browser-relay-test-").tempdir()?;
    let control = free_port().to_string();
    let mut command = std::process::Command::new(native_exe()?);
    command.args(["serve", "--pair", "--port", "0", "--control-port", &control]).env("BROWSER_RELAY_HOME", home.path());
    let serve = ServeProcess::start(command, &home.path().join("serve.log"), Duration::from_secs(30)).await?;
    let (link, token) = serve.printed_pairing_link(home.path(), Duration::from_secs(10)).await?;
    let port: u16 =
        link.split_once("#port=").and_then(|(_, rest)| rest.split('&').next()).context("the link's port")?.parse()?;
    // The state folder serve made is the person's alone, as the system
    // enforces it (the token file: Unix modes here; CI reads a Windows
    // folder's access list back with icacls).
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(home.path().join("token"))?.permissions().mode();
        anyhow::ensure!(mode & 0o077 == 0, "the token file is open to others: {mode:o}");
    }

    // The person's Chrome with the extension, paired by opening the link,
    // shares a tab with a click.
    let fixtures = FixtureServer::start().await?;
    let index = format!("{}/index.html", fixtures.url());
    let (chrome, _hands) = chrome_sharing(&link, port, &token, &index).await?;

    // Playwright, twice: each run connects, works and leaves, and the tab
    // stays shared with nothing of the client left behind.
    let relay_http = format!("http://127.0.0.1:{port}/?token={}", browser_relay::cdp_key(&token).as_str());
    for run in 1..=2 {
        let out = e2e::run_node("wine_client.mjs", &[("RELAY_HTTP", relay_http.clone()), ("FIXTURE", fixtures.url())])
            .await
            .with_context(|| format!("run {run}; serve's log:\n{}", serve.log_text()))?;
        for check in ["page.evaluate runs in the shared tab", "page.screenshot() returns a PNG", "ok - left"] {
            anyhow::ensure!(out.contains(check), "run {run} did not report '{check}':\n{out}");
        }
        wait_for_shared(port, token.as_str(), &index, Duration::from_secs(10)).await?;
    }

    // An agent: the CLI proves itself to serve's control API and snapshots
    // the shared tab.
    let mut snapshot = std::process::Command::new(native_exe()?);
    snapshot.args(["snapshot", "--control-port", &control]).env("BROWSER_RELAY_HOME", home.path());
    e2e::cli_snapshot_shows_the_index(snapshot).await?;

    // The secret never went to a log.
    anyhow::ensure!(!serve.log_text().contains(token.as_str()), "serve's log holds the token");
    drop(chrome);
    Ok(())
}
