//! The Windows build, for real: `browser-relay.exe` (cross-built for
//! x86_64-pc-windows-gnu) runs under Wine and serves the real extension in
//! Linux Chromium and a real Playwright client over loopback, as it would
//! on a Windows desktop, its state in a user folder named with a space and
//! a letter beyond ASCII. The pairing link comes from the exe's own `serve --pair`;
//! the user shares a tab with a toolbar click; Playwright connects,
//! evaluates, takes a screenshot and leaves, twice in a row; the tab stays
//! shared; an agent's CLI and an MCP host's `browser-relay.exe mcp`, each
//! a Windows process of its own, snapshot the tab through serve's control
//! API; Ctrl-C ends serve cleanly.
//!
//! Needs `BROWSER_RELAY_WINDOWS_EXE` (scripts/test.sh builds the exe and
//! sets it, with `BROWSER_RELAY_REQUIRE_WINE=1`, which makes its absence a
//! failure); without it, and not required, the test says so and passes.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use e2e::FixtureServer;
use e2e::chromium::KilledGroup;
use e2e::mcp_host::{McpHost, ToolAnswer};
use e2e::serve_process::{ServeProcess, chrome_sharing, free_port, wait_for_shared};
use serde_json::json;

/// The exe's view of a Linux path: Wine's drive Z: is `/`.
fn windows_path(path: &Path) -> String {
    format!("Z:{}", path.display().to_string().replace('/', "\\"))
}

/// The exe under Wine as an MCP host runs it (`McpHost`), in a process
/// group of its own, which is killed (Wine's processes with it) when
/// dropped.
fn mcp_under_wine(mut mcp: Command, token: &str) -> anyhow::Result<(McpHost, KilledGroup)> {
    use std::os::unix::process::CommandExt as _;
    let host = McpHost::spawn(mcp.stderr(std::process::Stdio::null()).process_group(0))?.never_showing(token);
    let group = KilledGroup(host.id());
    Ok((host, group))
}

fn wine(exe: &Path, home: &Path) -> Command {
    let mut command = Command::new(e2e::tests_dir().join("../scripts/wine-run.sh"));
    command.arg(exe).env("BROWSER_RELAY_HOME", windows_path(home));
    command
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_windows_exe_under_wine_serves_the_real_extension_and_playwright() -> anyhow::Result<()> {
    let Some(exe) = std::env::var_os("BROWSER_RELAY_WINDOWS_EXE").map(PathBuf::from) else {
        if std::env::var("BROWSER_RELAY_REQUIRE_WINE").is_ok_and(|v| v == "1") {
            bail!("BROWSER_RELAY_WINDOWS_EXE is not set, and this run requires the Wine test");
        }
        eprintln!("skipped: set BROWSER_RELAY_WINDOWS_EXE to a built browser-relay.exe (scripts/test.sh does)");
        return Ok(());
    };
    anyhow::ensure!(exe.is_file(), "{} is not a file", exe.display());
    e2e::init_logging();
    let temp = tempfile::Builder::new().prefix("browser-relay-wine-").tempdir()?;
    // A Windows user's folder: a space and a letter beyond ASCII in it
    // (`C:\Users\José Smith`), for the state, the token and the log.
    let user = temp.path().join("Jos\u{e9} Smith");
    std::fs::create_dir(&user)?;
    let home = user.join(".browser-relay");
    let (port, control) = (free_port(), free_port());

    // Without arguments, and with no console window of its own (as in a
    // terminal), the exe prints its help: only a double-click, which gives
    // it a window of its own, runs serve.
    let printed = home.with_extension("help.txt");
    let mut bare = wine(&exe, &home)
        .stdin(std::process::Stdio::null())
        .stdout(std::fs::File::create(&printed)?)
        .stderr(std::fs::File::create(&printed)?)
        .spawn()?;
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = bare.try_wait()? {
            break status;
        }
        if Instant::now() > deadline {
            e2e::kill_group(bare.id());
            bail!("with no arguments the exe did not end within 60 s (did it run serve?)");
        }
        // A process of Wine's gives no event to await.
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let help = std::fs::read_to_string(&printed)?;
    anyhow::ensure!(status.code() == Some(2) && help.contains("Usage:"), "no arguments: {status:?} {help}");

    // serve, under Wine, in a process group of its own, with the pairing
    // link as a double-click shows it (`serve --pair`).
    let mut command = wine(&exe, &home);
    command
        .args(["serve", "--pair", "--port", &port.to_string(), "--control-port", &control.to_string()])
        .env("BROWSER_RELAY_LOG", "info");
    let mut serve = ServeProcess::start(command, &user.join("serve.log"), Duration::from_secs(60)).await?;
    let (link, token) = serve.printed_pairing_link(&home, Duration::from_secs(30)).await?;
    let link = link.as_str();
    anyhow::ensure!(link.contains(&format!("#port={port}&")), "the link names serve's port: {link}");
    // The state directory the exe made is the user's alone (Wine shows a
    // Windows DACL as Unix mode bits).
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(home.join("token"))?.permissions().mode();
        anyhow::ensure!(mode & 0o007 == 0, "the token file is open to others: {mode:o}");
    }

    // The user's Chrome with the extension, paired by opening the link,
    // shares a tab with a click.
    let fixtures = FixtureServer::start().await?;
    let index = format!("{}/index.html", fixtures.url());
    let (chrome, _hands) = chrome_sharing(link, port, &token, &index).await?;

    // Playwright, twice: each run connects, works and leaves, and the tab
    // stays shared with nothing of the client left behind.
    let relay_http = format!("http://127.0.0.1:{port}/?token={}", browser_relay::cdp_key(&token).as_str());
    for run in 1..=2 {
        let out = e2e::run_node("wine_client.mjs", &[("RELAY_HTTP", relay_http.clone()), ("FIXTURE", fixtures.url())])
            .await
            .with_context(|| {
                format!("run {run}; serve's log:\n{}", std::fs::read_to_string(&serve.log).unwrap_or_default())
            })?;
        for check in ["page.evaluate runs in the shared tab", "page.screenshot() returns a PNG", "ok - left"] {
            anyhow::ensure!(out.contains(check), "run {run} did not report '{check}':\n{out}");
        }
        wait_for_shared(port, token.as_str(), &index, Duration::from_secs(10)).await?;
    }

    // An agent on Windows: the exe's CLI, then the exe as an MCP host runs
    // it (JSON-RPC over its stdin and stdout, Windows pipes), each proving
    // itself to serve's control API, snapshot the shared tab.
    let control_port = control.to_string();
    let mut snapshot = wine(&exe, &home);
    snapshot.args(["snapshot", "--control-port", &control_port]);
    e2e::cli_snapshot_shows_the_index(snapshot).await?;
    let mut mcp = wine(&exe, &home);
    mcp.args(["mcp", "--control-port", &control_port]);
    let secret = token.as_str().to_string();
    let snapshot = tokio::task::spawn_blocking(move || -> anyhow::Result<ToolAnswer> {
        let (mut host, _group) = mcp_under_wine(mcp, &secret)?;
        host.initialize("wine")?;
        let snapshot = host.call("browser_snapshot", json!({}))?;
        // It ends when its host closes stdin, as a host expects.
        host.close(Duration::from_secs(30))?;
        Ok(snapshot)
    })
    .await??;
    anyhow::ensure!(
        !snapshot.is_error
            && snapshot.text.contains("Fixture Index")
            && snapshot.text.lines().any(|l| e2e::control_env::line_ref(l).is_some()),
        "the MCP snapshot: {}",
        snapshot.text
    );

    // The token never went to a log.
    let logged = std::fs::read_to_string(&serve.log)?;
    anyhow::ensure!(!logged.contains(token.as_str()), "serve's log holds the token");

    // Ctrl-C (Wine turns SIGINT into the console's Ctrl-C event) ends it
    // cleanly, through the Windows signal seam.
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(serve.child.id() as i32), nix::sys::signal::Signal::SIGINT)?;
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = serve.child.try_wait()? {
            break status;
        }
        anyhow::ensure!(Instant::now() < deadline, "serve did not end within 30 s of Ctrl-C");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let logged = std::fs::read_to_string(&serve.log)?;
    anyhow::ensure!(
        logged.contains("shutting down (Ctrl-C)"),
        "serve did not shut down on Ctrl-C ({status}):\n{logged}"
    );
    drop(chrome);
    Ok(())
}
