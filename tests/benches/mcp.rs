//! What an agent pays through our MCP server, as an MCP host runs it
//! (`browser-relay mcp` on stdio, alone: it runs its own relay and launches
//! the managed Chrome on the first call): the tool list's size, a snapshot
//! of `snap/big.html` (time and size), and a click's round trip
//! (its answer carries the page's state). Figures go to BENCHMARKS.md, so
//! that a regression shows.
//!
//! `cargo build --release -p browser-relay && cargo bench -p e2e --bench mcp`
//! (RUNS=15 by default; MCP_BIN picks another binary).

#![allow(clippy::print_stdout)] // a benchmark reports on stdout

use std::io::{BufRead as _, Write as _};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use e2e::FixtureServer;
use serde_json::{Value, json};

/// `browser-relay mcp` on stdio, killed (with the browser it launched) when
/// dropped.
struct Host {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    lines: std::sync::mpsc::Receiver<String>,
    next_id: u64,
    home: tempfile::TempDir,
}

impl Host {
    fn spawn() -> anyhow::Result<Self> {
        let bin = std::env::var("MCP_BIN")
            .map_or_else(|_| e2e::tests_dir().join("../target/release/browser-relay"), std::path::PathBuf::from);
        anyhow::ensure!(bin.exists(), "{} is not built: cargo build --release -p browser-relay", bin.display());
        let home = tempfile::tempdir()?;
        let mut child = Command::new(&bin)
            .args(["mcp", "--port", "0", "--control-port", "0"])
            .env("BROWSER_RELAY_HOME", home.path())
            .env("BROWSER_RELAY_LOG", "warn")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let stdin = child.stdin.take().expect("piped");
        let stdout = std::io::BufReader::new(child.stdout.take().expect("piped"));
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut host = Self { child, stdin, lines, next_id: 1, home };
        let init = json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}});
        host.request("initialize", init)?;
        writeln!(host.stdin, "{}", json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
        Ok(host)
    }

    fn request(&mut self, method: &str, params: Value) -> anyhow::Result<Value> {
        let id = self.next_id;
        self.next_id += 1;
        writeln!(self.stdin, "{}", json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        self.stdin.flush()?;
        loop {
            let line = self.lines.recv_timeout(Duration::from_secs(60))?;
            let message: Value = serde_json::from_str(&line)?;
            if message["id"] == id {
                anyhow::ensure!(message.get("error").is_none(), "{method}: {message}");
                return Ok(message["result"].clone());
            }
        }
    }

    /// A tool call: its text, or the tool's error.
    fn call(&mut self, tool: &str, arguments: Value) -> anyhow::Result<String> {
        let result = self.request("tools/call", json!({"name": tool, "arguments": arguments}))?;
        let text = result["content"].as_array().into_iter().flatten().filter_map(|c| c["text"].as_str()).collect();
        anyhow::ensure!(result["isError"] != true, "{tool}: {text:?}");
        Ok(text)
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
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
    let count_ref = snapshot
        .lines()
        .find(|l| l.contains("button \"Count\""))
        .and_then(|l| l.split("[ref=").nth(1))
        .and_then(|r| r.split(']').next())
        .ok_or_else(|| anyhow::anyhow!("no Count button in {snapshot}"))?
        .to_string();
    host.call("browser_click", json!({"ref": count_ref}))?;
    let mut ms = Vec::new();
    let mut answer = String::new();
    for _ in 0..runs {
        let (took, text) = timed(|| host.call("browser_click", json!({"ref": count_ref})))?;
        ms.push(took);
        answer = text;
    }
    println!("click round trip (answer with the page's state)  {:.1} ms, {} characters", median(ms), answer.len());
    Ok(())
}
