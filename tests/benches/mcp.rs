//! What an agent pays through our MCP server, as an MCP host runs it
//! (`browser-relay mcp` on stdio, alone: it runs its own relay and launches
//! the managed Chrome on the first call): the tool list's size, a snapshot
//! of `snap/big.html` (time and size), and a click's round trip
//! (its answer carries the page's state). Then clicks side by side with
//! Playwright MCP on the same pages (`act/news.html`): one that starts no
//! request, one whose fetch fails at once, one whose fetch fails after
//! 300 ms; each answer is checked for the failure. Figures go to
//! BENCHMARKS.md, so that a regression shows.
//!
//! `cargo build --release -p browser-relay && cargo bench -p e2e --bench mcp`
//! (RUNS=15 by default; MCP_BIN picks another binary). Playwright MCP runs
//! when `scripts/verify-agent-tools.sh` has installed it (or
//! `npm ci` in `tests/agent-tools`), with Chromium's own executable.

#![allow(clippy::print_stdout)] // a benchmark reports on stdout

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use e2e::FixtureServer;
use e2e::mcp_host::McpHost;
use serde_json::{Value, json};

/// An MCP server on stdio in a state directory of its own, ended (with
/// the browser it launched) when dropped.
struct Host {
    mcp: McpHost,
    home: tempfile::TempDir,
}

impl Host {
    fn spawn() -> anyhow::Result<Self> {
        let bin = std::env::var("MCP_BIN")
            .map_or_else(|_| e2e::tests_dir().join("../target/release/browser-relay"), std::path::PathBuf::from);
        anyhow::ensure!(bin.exists(), "{} is not built: cargo build --release -p browser-relay", bin.display());
        let mut command = Command::new(&bin);
        command.args(["mcp", "--port", "0", "--control-port", "0"]).env("BROWSER_RELAY_LOG", "warn");
        Self::over(command)
    }

    /// Playwright MCP as its users run it, on Chromium's own executable;
    /// none when it is not installed.
    fn playwright() -> anyhow::Result<Option<Self>> {
        let cli = e2e::tests_dir().join("agent-tools/node_modules/@playwright/mcp/cli.js");
        if !cli.exists() {
            return Ok(None);
        }
        let mut command = Command::new("node");
        command.arg(cli).args(["--headless", "--isolated", "--executable-path", e2e::chromium::CHROMIUM]);
        if nix::unistd::Uid::effective().is_root() {
            command.arg("--no-sandbox");
        }
        Self::over(command).map(Some)
    }

    fn over(mut command: Command) -> anyhow::Result<Self> {
        let home = tempfile::tempdir()?;
        command.env("BROWSER_RELAY_HOME", home.path()).current_dir(home.path()).stderr(Stdio::null());
        let mut mcp = McpHost::spawn(&mut command)?;
        mcp.initialize("bench")?;
        Ok(Self { mcp, home })
    }

    fn request(&mut self, method: &str, params: Value) -> anyhow::Result<Value> {
        self.mcp.request(method, params)
    }

    /// A tool call: its text, or the tool's error.
    fn call(&mut self, tool: &str, arguments: Value) -> anyhow::Result<String> {
        let answer = self.mcp.call(tool, arguments)?;
        anyhow::ensure!(!answer.is_error, "{tool}: {:?}", answer.text);
        Ok(answer.text)
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        // An MCP server ends (with its browser) when its host closes stdin;
        // one that does not is killed with the host.
        let _ = self.mcp.close(Duration::from_secs(10));
        let run = std::fs::read_to_string(self.home.path().join("profiles/managed/run.json")).unwrap_or_default();
        if let Some(pid) = serde_json::from_str::<Value>(&run).ok().and_then(|v| v["pid"].as_i64()) {
            let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pid as i32), nix::sys::signal::Signal::SIGKILL);
        }
    }
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn timed(mut f: impl FnMut() -> anyhow::Result<String>) -> anyhow::Result<(f64, String)> {
    let started = Instant::now();
    let out = f()?;
    Ok((started.elapsed().as_secs_f64() * 1000.0, out))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let runs: usize = std::env::var("RUNS").ok().and_then(|r| r.parse().ok()).unwrap_or(15);
    let fixtures = FixtureServer::start().await?;
    let mut host = Host::spawn()?;
    let tools = host.request("tools/list", json!({}))?;
    let count = tools["tools"].as_array().map_or(0, Vec::len);
    println!("MCP benchmark: `browser-relay mcp` alone on stdio; {runs} runs after a warm-up; medians");
    println!("tool list                 {count} tools, {} characters", tools.to_string().len());

    let big = format!("{}/snap/big.html", fixtures.url());
    let (first, _) = timed(|| host.call("browser_open", json!({"url": big})))?;
    println!("first call (launches Chrome, opens the page)  {first:.0} ms");
    host.call("browser_snapshot", json!({}))?;
    let mut ms = Vec::new();
    let mut chars = 0;
    for _ in 0..runs {
        let (took, text) = timed(|| host.call("browser_snapshot", json!({})))?;
        ms.push(took);
        chars = text.len();
    }
    println!("snapshot, snap/big.html (default maxChars)  {:.1} ms, {chars} characters", median(ms));

    let page = format!("{}/act/page.html", fixtures.url());
    host.call("browser_open", json!({"url": page}))?;
    let snapshot = host.call("browser_snapshot", json!({"interactive": true}))?;
    let count_ref = ref_of(&snapshot, "button \"Count\"")?;
    host.call("browser_click", json!({"ref": count_ref}))?;
    let mut ms = Vec::new();
    let mut answer = String::new();
    for _ in 0..runs {
        let (took, text) = timed(|| host.call("browser_click", json!({"ref": count_ref})))?;
        ms.push(took);
        answer = text;
    }
    println!("click round trip (answer with the page's state)  {:.1} ms, {} characters", median(ms), answer.len());

    let Some(mut playwright) = Host::playwright()? else {
        println!("\nPlaywright MCP is not installed (scripts/verify-agent-tools.sh installs it): no side by side");
        return Ok(());
    };
    let news = format!("{}/act/news.html", fixtures.url());
    let ours = Side::open(&mut host, &news, Server::Ours)?;
    let theirs = Side::open(&mut playwright, &news, Server::PlaywrightMcp)?;
    println!(
        "\nclicks on act/news.html, side by side: medians of {runs} after a warm-up; told = the answer names the failure"
    );
    println!(
        "{:<36} {:>10} {:>6} {:>18} {:>6} {:>7}",
        "click", "ours (ms)", "told", "Playwright MCP (ms)", "told", "ratio"
    );
    for (button, failure) in [("Quiet", None), ("Fetch", Some("missing.json")), ("Slow failure", Some("503"))] {
        let (our_ms, our_told) = ours.clicks(&mut host, button, failure, runs)?;
        let (their_ms, their_told) = theirs.clicks(&mut playwright, button, failure, runs)?;
        let what = match failure {
            None => "no request (Quiet)".to_string(),
            Some(_) if button == "Fetch" => "fetch fails at once (404)".to_string(),
            Some(_) => "fetch fails after 300 ms (503)".to_string(),
        };
        println!("{what:<36} {our_ms:>10.1} {our_told:>6} {their_ms:>18.1} {their_told:>6} {:>7.2}", our_ms / their_ms);
    }
    Ok(())
}

/// A ref in a snapshot, by the start of its line's text.
fn ref_of(snapshot: &str, element: &str) -> anyhow::Result<String> {
    snapshot
        .lines()
        .find(|l| l.contains(element))
        .and_then(e2e::control_env::line_ref)
        .map(str::to_string)
        .ok_or_else(|| anyhow::anyhow!("no {element} in {snapshot}"))
}

/// Which MCP server a side is: their tools are spelt differently.
#[derive(Clone, Copy)]
enum Server {
    Ours,
    PlaywrightMcp,
}

/// One MCP server's tab on the page: its refs.
struct Side {
    snapshot: String,
    server: Server,
}

impl Side {
    fn open(host: &mut Host, url: &str, server: Server) -> anyhow::Result<Self> {
        let open = match server {
            Server::Ours => "browser_open",
            Server::PlaywrightMcp => "browser_navigate",
        };
        host.call(open, json!({"url": url}))?;
        Ok(Self { snapshot: host.call("browser_snapshot", json!({}))?, server })
    }

    /// `runs` clicks on `button` after one: the median, and whether every
    /// answer named `failure`.
    fn clicks(
        &self,
        host: &mut Host,
        button: &str,
        failure: Option<&str>,
        runs: usize,
    ) -> anyhow::Result<(f64, &'static str)> {
        let element = ref_of(&self.snapshot, &format!("button \"{button}\""))?;
        // Playwright MCP's click takes the ref as `target`, and what the
        // element is, for the user to read; ours takes only the `ref`.
        let click = match self.server {
            Server::Ours => json!({"ref": element}),
            Server::PlaywrightMcp => json!({"target": element, "element": format!("{button} button")}),
        };
        host.call("browser_click", click.clone())?;
        let mut ms = Vec::new();
        let mut told = 0;
        for _ in 0..runs {
            let (took, text) = timed(|| host.call("browser_click", click.clone()))?;
            ms.push(took);
            told += usize::from(failure.is_some_and(|f| text.contains(f)));
            if std::env::var_os("SHOW_ANSWERS").is_some() {
                println!("--- {button}:\n{text}");
            }
        }
        let told = match (failure, told) {
            (None, _) => "-",
            (Some(_), n) if n == runs => "yes",
            (Some(_), 0) => "no",
            _ => "some",
        };
        Ok((median(ms), told))
    }
}
