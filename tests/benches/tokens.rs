//! What an agent reads per step, in characters: our MCP snapshot and an
//! action's answer on real pages, beside Playwright MCP's and
//! chrome-devtools-mcp's on the same pages and the same Chromium. Pages:
//! six of Python's own HTML documentation (Debian's `python3-doc`, which
//! `scripts/setup.sh` installs; served locally) and two app-like fixtures.
//! Then an agent's loop on each (snapshot, click a named link, snapshot).
//! Figures go to BENCHMARKS.md.
//!
//! `cargo build --release -p browser-relay && cargo bench -p e2e --bench tokens`
//! (MCP_BIN picks another binary of ours; TOKENS_SAVE=<folder> keeps each
//! counted answer there, `<page>.<tool>.txt`, to read where the characters go). The anchors come from
//! `tests/node_modules` (`npm ci` in tests/, as `scripts/setup.sh` runs it);
//! one that is not installed or does not start is said so, and ours is
//! printed alone.

#![allow(clippy::print_stdout)] // a benchmark reports on stdout

use std::os::unix::process::CommandExt as _;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use e2e::FixtureServer;
use e2e::mcp_host::McpHost;
use serde_json::{Value, json};

/// The pages: a name, a path on the fixture server, and what it is.
const PAGES: &[(&str, &str, &str)] = &[
    ("keyword", "pydoc/library/keyword.html", "a small page"),
    ("classes", "pydoc/tutorial/classes.html", "a long article"),
    ("genindex-A", "pydoc/genindex-A.html", "a big index"),
    ("search", "pydoc/search.html", "a search form"),
    ("codecs", "pydoc/library/codecs.html", "big tables"),
    ("library", "pydoc/library/index.html", "a page of links"),
    ("landmarks", "snap/landmarks.html", "app-like: menus, tabs, switches"),
    ("form", "snap/form.html", "app-like: a form of every field"),
];

/// The loop: on this page, snapshot, click the link of this name,
/// snapshot.
const LOOP_PAGE: &str = "pydoc/library/index.html";
const LOOP_LINK: &str = "Text Processing Services";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tool {
    Ours,
    Playwright,
    DevTools,
}

impl Tool {
    fn name(self) -> &'static str {
        match self {
            Tool::Ours => "ours",
            Tool::Playwright => "Playwright MCP",
            Tool::DevTools => "chrome-devtools-mcp",
        }
    }
}

/// An MCP server on stdio in a folder of its own, in a process group of
/// its own (its browser too), ended with everything it started.
struct Server {
    tool: Tool,
    mcp: McpHost,
    home: tempfile::TempDir,
    /// chrome-devtools-mcp's page (its tools name it).
    page_id: Option<u64>,
}

impl Server {
    fn ours() -> anyhow::Result<Self> {
        let bin = std::env::var("MCP_BIN")
            .map_or_else(|_| e2e::tests_dir().join("../target/release/browser-relay"), std::path::PathBuf::from);
        anyhow::ensure!(bin.exists(), "{} is not built: cargo build --release -p browser-relay", bin.display());
        let mut command = Command::new(&bin);
        command.args(["mcp", "--port", "0", "--control-port", "0"]).env("BROWSER_RELAY_LOG", "warn");
        Self::over(Tool::Ours, command)
    }

    /// An anchor from `tests/node_modules`, as its users run it on
    /// Chromium's own executable (no browser download); `None` when it is
    /// not installed.
    fn anchor(tool: Tool) -> anyhow::Result<Option<Self>> {
        let modules = e2e::tests_dir().join("node_modules");
        let root = nix::unistd::Uid::effective().is_root();
        let mut command = Command::new("node");
        match tool {
            Tool::Playwright => {
                let cli = modules.join("@playwright/mcp/cli.js");
                if !cli.exists() {
                    return Ok(None);
                }
                command.arg(cli).args(["--headless", "--isolated", "--executable-path", e2e::chromium::CHROMIUM]);
                if root {
                    command.arg("--no-sandbox");
                }
            }
            Tool::DevTools => {
                let cli = modules.join("chrome-devtools-mcp/build/src/bin/chrome-devtools-mcp.js");
                if !cli.exists() {
                    return Ok(None);
                }
                command.arg(cli).args([
                    "--headless",
                    "--isolated",
                    "--executablePath",
                    e2e::chromium::CHROMIUM,
                    "--no-usage-statistics",
                    "--no-performance-crux",
                ]);
                if root {
                    command.arg("--chromeArg=--no-sandbox");
                }
            }
            Tool::Ours => unreachable!("ours is not an anchor"),
        }
        command.env("CI", "1");
        Self::over(tool, command).map(Some)
    }

    fn over(tool: Tool, mut command: Command) -> anyhow::Result<Self> {
        let home = tempfile::tempdir()?;
        command
            .env("BROWSER_RELAY_HOME", home.path())
            .env("TMPDIR", home.path())
            .current_dir(home.path())
            .stderr(Stdio::null())
            .process_group(0);
        let mut mcp = McpHost::spawn(&mut command)?;
        mcp.initialize("tokens-bench")?;
        let mut server = Self { tool, mcp, home, page_id: None };
        if tool == Tool::DevTools {
            // `1: about:blank [selected]`
            let pages = server.call("list_pages", json!({}))?;
            let id = pages.lines().find_map(|l| l.split(':').next()?.trim().parse::<u64>().ok());
            let id = id.ok_or_else(|| anyhow::anyhow!("no page in {pages}"))?;
            server.call("select_page", json!({"pageId": id}))?;
            server.page_id = Some(id);
        }
        Ok(server)
    }

    /// A tool call's text (what the model reads), or its error.
    fn call(&mut self, name: &str, arguments: Value) -> anyhow::Result<String> {
        let answer = self.mcp.call(name, arguments)?;
        anyhow::ensure!(!answer.is_error, "{} {name}: {}", self.tool.name(), answer.text);
        Ok(answer.text)
    }

    fn go(&mut self, url: &str) -> anyhow::Result<()> {
        match self.tool {
            Tool::Ours => self.call("browser_navigate", json!({"url": url})),
            Tool::Playwright => self.call("browser_navigate", json!({"url": url})),
            Tool::DevTools => self.call("navigate_page", json!({"pageId": self.page_id, "type": "url", "url": url})),
        }
        .map(drop)
    }

    fn snapshot(&mut self) -> anyhow::Result<String> {
        match self.tool {
            Tool::Ours | Tool::Playwright => self.call("browser_snapshot", json!({})),
            Tool::DevTools => self.call("take_snapshot", json!({"pageId": self.page_id})),
        }
    }

    /// Ours in the full, older form (`full: true`: what the default was
    /// before issue 43), timed.
    fn full_snapshot(&mut self) -> anyhow::Result<Taken> {
        self.call("browser_snapshot", json!({"full": true}))?;
        let started = Instant::now();
        let text = self.call("browser_snapshot", json!({"full": true}))?;
        let ms = started.elapsed().as_secs_f64() * 1000.0;
        Ok(Taken { chars: chars(&text), ms, cut: cut_in(Tool::Ours, &text) })
    }

    /// Clicks the link named `name` in `snapshot`; the answer.
    fn click_link(&mut self, snapshot: &str, name: &str) -> anyhow::Result<String> {
        let quoted = format!("link \"{name}\"");
        let line = snapshot
            .lines()
            .find(|l| l.contains(&quoted))
            .ok_or_else(|| anyhow::anyhow!("{}: no {quoted} in the snapshot", self.tool.name()))?;
        let id = |marker: &str, ends: &[char]| -> anyhow::Result<String> {
            let start = line.find(marker).ok_or_else(|| anyhow::anyhow!("no {marker} on {line}"))? + marker.len();
            Ok(line[start..].split(ends).next().unwrap_or_default().to_string())
        };
        match self.tool {
            Tool::Ours => {
                let element_ref =
                    e2e::control_env::line_ref(line).ok_or_else(|| anyhow::anyhow!("no ref on {line}"))?;
                self.call("browser_click", json!({"ref": element_ref}))
            }
            Tool::Playwright => self.call(
                "browser_click",
                json!({"element": quoted, "target": id("[ref=", &[']'])?, "ref": id("[ref=", &[']'])?}),
            ),
            Tool::DevTools => self.call("click", json!({"pageId": self.page_id, "uid": id("uid=", &[' ', ']'])?})),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // A server ends (with its browser) when its host closes stdin; what
        // is left of its group, or of our managed browser's, is killed.
        let _ = self.mcp.close(Duration::from_secs(10));
        e2e::kill_group(self.mcp.id());
        let run = std::fs::read_to_string(self.home.path().join("profiles/managed/run.json")).unwrap_or_default();
        if let Some(pid) = serde_json::from_str::<Value>(&run).ok().and_then(|v| v["pid"].as_i64()) {
            e2e::kill_group(u32::try_from(pid).unwrap_or(u32::MAX));
        }
    }
}

/// Characters, as the model reads them.
fn chars(text: &str) -> usize {
    text.chars().count()
}

fn geomean(ratios: &[f64]) -> f64 {
    if ratios.is_empty() {
        return f64::NAN;
    }
    (ratios.iter().map(|r| r.ln()).sum::<f64>() / ratios.len() as f64).exp()
}

/// One page's figures for one tool: characters and milliseconds of its
/// snapshot, and whether it was cut.
#[derive(Debug, Clone, Copy, Default)]
struct Taken {
    chars: usize,
    ms: f64,
    cut: bool,
}

fn cut_in(tool: Tool, text: &str) -> bool {
    match tool {
        Tool::Ours => text.contains("# cut at"),
        _ => false,
    }
}

fn take(server: &mut Server, url: &str) -> anyhow::Result<(Taken, String)> {
    server.go(url)?;
    // One warm-up, then the one measured.
    server.snapshot()?;
    let started = Instant::now();
    let text = server.snapshot()?;
    let ms = started.elapsed().as_secs_f64() * 1000.0;
    Ok((Taken { chars: chars(&text), ms, cut: cut_in(server.tool, &text) }, text))
}

/// The loop's characters: snapshot, click, snapshot (and the click's).
fn agent_loop(server: &mut Server, url: &str) -> anyhow::Result<(usize, usize)> {
    server.go(url)?;
    let first = server.snapshot()?;
    let click = server.click_link(&first, LOOP_LINK)?;
    let second = server.snapshot()?;
    Ok((chars(&first) + chars(&click) + chars(&second), chars(&click)))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    anyhow::ensure!(
        std::path::Path::new(e2e::fixtures::PYTHON_DOCS).join("library/index.html").exists(),
        "{} is missing: scripts/setup.sh installs python3-doc",
        e2e::fixtures::PYTHON_DOCS
    );
    let fixtures = FixtureServer::start().await?;
    let url = |path: &str| format!("{}/{path}", fixtures.url());

    let mut servers = vec![Server::ours()?];
    let mut missing = Vec::new();
    for tool in [Tool::Playwright, Tool::DevTools] {
        match Server::anchor(tool) {
            Ok(Some(server)) => servers.push(server),
            Ok(None) => missing.push(format!("{} is not installed (npm ci in tests/)", tool.name())),
            Err(error) => missing.push(format!("{} did not start: {error:#}", tool.name())),
        }
    }
    // Each server's browser launched, and its first page loaded, before
    // anything is measured.
    for server in &mut servers {
        server.go(&url("index.html"))?;
    }

    println!("token benchmark: characters an agent reads per step (one warm-up snapshot, then the one counted)");
    for line in &missing {
        println!("  {line}");
    }
    let tools: Vec<Tool> = servers.iter().map(|s| s.tool).collect();
    let mut header = format!("{:<11} {:>9} {:>8} {:>9} {:>8}", "page", "ours", "ms", "old form", "ms");
    for tool in &tools[1..] {
        header.push_str(&format!(" {:>20} {:>8} {:>6}", tool.name(), "ms", "ratio"));
    }
    println!("{header}");
    let mut ratios: Vec<Vec<f64>> = vec![Vec::new(); tools.len()];
    let mut cut_pages = Vec::new();
    let mut cut_before = Vec::new();
    let mut old_ratios = Vec::new();
    for (name, path, _what) in PAGES {
        let mut row = Vec::new();
        for server in &mut servers {
            let (taken, text) = take(server, &url(path))?;
            if let Ok(folder) = std::env::var("TOKENS_SAVE") {
                let file = format!("{name}.{}.txt", server.tool.name().replace(' ', "-"));
                std::fs::create_dir_all(&folder)?;
                std::fs::write(std::path::Path::new(&folder).join(file), &text)?;
            }
            row.push(taken);
        }
        let old = servers[0].full_snapshot()?;
        old_ratios.push(row[0].chars as f64 / old.chars as f64);
        if row[0].cut {
            cut_pages.push(*name);
        }
        if old.cut {
            cut_before.push(*name);
        }
        let mut line = format!("{:<11} {:>9} {:>8.1} {:>9} {:>8.1}", name, row[0].chars, row[0].ms, old.chars, old.ms);
        for (i, theirs) in row.iter().enumerate().skip(1) {
            let ratio = row[0].chars as f64 / theirs.chars as f64;
            ratios[i].push(ratio);
            line.push_str(&format!(" {:>20} {:>8.1} {:>6.2}", theirs.chars, theirs.ms, ratio));
        }
        println!("{line}");
    }
    let mut line =
        format!("{:<11} {:>9} {:>8} {:>9} {:>8}", "geomean", "", "", format!("x{:.2}", geomean(&old_ratios)), "");
    for ratios in &ratios[1..] {
        let worst = ratios.iter().copied().fold(0.0, f64::max);
        // Three decimals: the bar (0.4) is close enough that two would hide which side of it.
        line.push_str(&format!(" {:>20} {:>8} {:>6.3}", format!("(worst {worst:.2})"), "", geomean(ratios)));
    }
    println!("{line}");
    let listed = |pages: &[&str]| if pages.is_empty() { "none".to_string() } else { pages.join(", ") };
    println!("our snapshots cut: {} (in the old form: {})", listed(&cut_pages), listed(&cut_before));

    println!("\nagent loop on {LOOP_PAGE}: snapshot, click link \"{LOOP_LINK}\", snapshot");
    println!("{:<20} {:>12} {:>14} {:>6}", "tool", "loop chars", "click answer", "ratio");
    let mut ours_loop = 0;
    for server in &mut servers {
        let (total, click) = agent_loop(server, &url(LOOP_PAGE))?;
        if server.tool == Tool::Ours {
            ours_loop = total;
        }
        println!("{:<20} {:>12} {:>14} {:>6.2}", server.tool.name(), total, click, ours_loop as f64 / total as f64);
    }
    Ok(())
}
