//! Several managed browsers from one serve (issue 17): the release binary's
//! `browser-relay serve` in a fresh state folder, 8 ephemeral profiles
//! started at once through its control API, the time until each (and all)
//! answered ready, the serve process's memory (VmRSS and its peak, VmHWM,
//! from /proc) and the browsers' (the sum of each process's PSS, so pages
//! shared between Chrome processes count once), a snapshot in each profile
//! at once, and the stop of all at once, after which no process of any
//! browser may be left and no ephemeral folder.
//!
//! `cargo build --release -p browser-relay && cargo bench -p e2e --bench parallel_profiles`
//! (PROFILES=8, RUNS=5 rounds of snapshots by default; RELAY_BIN picks another binary).

#![allow(clippy::print_stdout)] // a benchmark reports on stdout

use std::io::BufRead as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use browser_relay::ControlClient;
use e2e::FixtureServer;
use futures_util::future::join_all;
use serde_json::{Value, json};

/// `browser-relay serve` on ports of its own choosing, stopped (SIGTERM,
/// as a user's Ctrl-C) or killed when dropped, with every browser it may
/// have left.
struct Serve {
    child: std::process::Child,
    home: tempfile::TempDir,
    control_port: u16,
}

impl Serve {
    fn spawn() -> anyhow::Result<Self> {
        let bin = std::env::var("RELAY_BIN")
            .map_or_else(|_| e2e::tests_dir().join("../target/release/browser-relay"), PathBuf::from);
        let bin = if bin.exists() {
            bin
        } else {
            // `cargo bench` builds into CARGO_TARGET_DIR when it is set.
            let target = std::env::var("CARGO_TARGET_DIR").map(PathBuf::from);
            target.map(|t| t.join("release/browser-relay")).ok().filter(|b| b.exists()).ok_or_else(|| {
                anyhow::anyhow!("{} is not built: cargo build --release -p browser-relay", bin.display())
            })?
        };
        let home = tempfile::tempdir()?;
        state_dir::StateDir::at(home.path()).load_or_create_token()?;
        let mut child = Command::new(&bin)
            .args(["serve", "--port", "0", "--control-port", "0"])
            .env("BROWSER_RELAY_HOME", home.path())
            .env("BROWSER_RELAY_LOG", "info")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()?;
        let stderr = std::io::BufReader::new(child.stderr.take().expect("piped"));
        let (tx, lines) = std::sync::mpsc::channel();
        // Drained for the whole run: a full pipe would block serve's logging.
        std::thread::spawn(move || {
            for line in stderr.lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let deadline = Instant::now() + Duration::from_secs(30);
        let control_port = loop {
            let line = lines.recv_timeout(deadline.saturating_duration_since(Instant::now()))?;
            if let Some(port) = line
                .split("control API on http://127.0.0.1:")
                .nth(1)
                .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
                .and_then(|port| port.parse().ok())
            {
                break port;
            }
        };
        Ok(Self { child, home, control_port })
    }

    fn client(&self) -> anyhow::Result<ControlClient> {
        Ok(ControlClient::new(self.control_port, state_dir::StateDir::at(self.home.path()).load_or_create_token()?))
    }

    /// The serve process's resident memory and its peak, in MiB.
    fn memory(&self) -> (f64, f64) {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap_or_default();
        (kib_field(&status, "VmRSS:") / 1024.0, kib_field(&status, "VmHWM:") / 1024.0)
    }

    /// Ends serve as Ctrl-C does: it stops its browsers first.
    fn terminate(&mut self) -> anyhow::Result<()> {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.child.id() as i32), nix::sys::signal::Signal::SIGTERM)?;
        self.child.wait()?;
        Ok(())
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        for pid in browser_pids(self.home.path()) {
            let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pid as i32), nix::sys::signal::Signal::SIGKILL);
        }
    }
}

/// `VmRSS:   1234 kB` → 1234.
fn kib_field(text: &str, field: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kib| kib.parse().ok())
        .unwrap_or(0.0)
}

/// The browsers recorded under the state folder (each one's pid is its
/// process group).
fn browser_pids(home: &Path) -> Vec<u32> {
    let mut pids = Vec::new();
    for folder in ["profiles", "ephemeral"] {
        for profile in std::fs::read_dir(home.join(folder)).into_iter().flatten().filter_map(Result::ok) {
            let run = std::fs::read(profile.path().join("run.json")).unwrap_or_default();
            if let Some(pid) = serde_json::from_slice::<Value>(&run).ok().and_then(|r| r["pid"].as_u64()) {
                pids.push(pid as u32);
            }
        }
    }
    pids
}

/// The live (not zombie) processes of the process groups `groups`.
fn processes_of(groups: &[u32]) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().filter_map(Result::ok) {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        let fields: Vec<&str> = stat.rsplit_once(')').map(|(_, r)| r.split_whitespace().collect()).unwrap_or_default();
        let (Some(state), Some(pgrp)) = (fields.first(), fields.get(2).and_then(|g| g.parse::<u32>().ok())) else {
            continue;
        };
        if *state != "Z" && groups.contains(&pgrp) {
            found.extend(entry.file_name().to_str().and_then(|p| p.parse::<u32>().ok()));
        }
    }
    found
}

/// The browsers' memory: the sum of their processes' PSS, in MiB.
fn browsers_pss(groups: &[u32]) -> (f64, usize) {
    let processes = processes_of(groups);
    let pss: f64 = processes
        .iter()
        .map(|pid| kib_field(&std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default(), "Pss:"))
        .sum();
    (pss / 1024.0, processes.len())
}

/// Every time, in order, in ms.
fn each(ms: &[f64]) -> String {
    let mut ms = ms.to_vec();
    ms.sort_by(f64::total_cmp);
    ms.iter().map(|t| format!("{t:.0}")).collect::<Vec<_>>().join(" ")
}

fn stats(mut ms: Vec<f64>) -> String {
    ms.sort_by(f64::total_cmp);
    format!("min {:.0}  median {:.0}  max {:.0} ms", ms[0], ms[ms.len() / 2], ms[ms.len() - 1])
}

/// One request; its time from `since` (or from its own start) and answer.
async fn timed(client: &ControlClient, method: &str, path: &str, body: Option<Value>) -> anyhow::Result<(f64, Value)> {
    let started = Instant::now();
    let response = client.raw(method, path, &[], body.as_ref()).await?;
    let value: Value = serde_json::from_slice(&response.body).unwrap_or(Value::Null);
    anyhow::ensure!(response.status == 200, "{method} {path} {body:?}: {} {value}", response.status);
    Ok((started.elapsed().as_secs_f64() * 1000.0, value))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let count: usize = std::env::var("PROFILES").ok().and_then(|n| n.parse().ok()).unwrap_or(8);
    let runs: usize = std::env::var("RUNS").ok().and_then(|r| r.parse().ok()).unwrap_or(5);
    let fixtures = FixtureServer::start().await?;
    let mut serve = Serve::spawn()?;
    let client = serve.client()?;
    let names: Vec<String> = (1..=count).map(|i| format!("bench-{i}")).collect();
    timed(&client, "GET", "/", None).await?; // the session, before the clock runs
    let (idle_rss, _) = serve.memory();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("parallel managed profiles: `browser-relay serve` (release), {count} ephemeral profiles at once");
    println!("load average before: {}", load.split_whitespace().take(3).collect::<Vec<_>>().join(" "));
    println!("serve idle                     VmRSS {idle_rss:.1} MiB");

    // Start all at once: each answers when its browser answered CDP.
    let started = Instant::now();
    let starts =
        names.iter().map(|name| timed(&client, "POST", "/start", Some(json!({"profile": name, "ephemeral": true}))));
    let ready: Vec<f64> = join_all(starts).await.into_iter().map(|r| r.map(|(ms, _)| ms)).collect::<Result<_, _>>()?;
    let all_ready = started.elapsed().as_secs_f64() * 1000.0;
    println!("start, per profile until ready {}", stats(ready.clone()));
    println!("  each (ms, sorted)            {}", each(&ready));
    println!("start, all {count} ready (wall)    {all_ready:.0} ms");
    let groups = browser_pids(serve.home.path());
    anyhow::ensure!(groups.len() == count, "{} browsers recorded, expected {count}", groups.len());
    let (rss, _) = serve.memory();
    let (pss, processes) = browsers_pss(&groups);
    println!("serve with {count} browsers        VmRSS {rss:.1} MiB");
    println!("the {count} browsers               {processes} processes, PSS {pss:.0} MiB together");

    // A page in each, then snapshots in all at once.
    let page = format!("{}/snap/article.html", fixtures.url());
    let opens =
        names.iter().map(|name| timed(&client, "POST", "/tabs/open", Some(json!({"profile": name, "url": page}))));
    for opened in join_all(opens).await {
        opened?;
    }
    // Rounds after a warm-up one; each round a snapshot in one profile
    // alone (the others idle), then one in every profile at once.
    let alone_path = format!("/snapshot?profile={}", names[0]);
    let (mut alone, mut walls, mut parallel, mut chars) = (Vec::new(), Vec::new(), Vec::new(), 0);
    for round in 0..=runs {
        let (alone_ms, _) = timed(&client, "GET", &alone_path, None).await?;
        let started = Instant::now();
        let paths: Vec<String> = names.iter().map(|name| format!("/snapshot?profile={name}")).collect();
        let snapshots = paths.iter().map(|path| timed(&client, "GET", path, None));
        let mut times = Vec::new();
        for snapshot in join_all(snapshots).await {
            let (ms, value) = snapshot?;
            times.push(ms);
            chars = value["snapshot"].as_str().map_or(0, str::len);
        }
        if round > 0 {
            alone.push(alone_ms);
            parallel.extend(times);
            walls.push(started.elapsed().as_secs_f64() * 1000.0);
        }
    }
    println!("snapshot of snap/article.html ({chars} characters), {runs} rounds after a warm-up");
    println!("  one profile alone            {}", stats(alone));
    println!("  {count} at once, per profile     {}", stats(parallel));
    println!("  {count} at once, wall per round  {}", stats(walls));
    let (rss, peak) = serve.memory();
    let (pss, processes) = browsers_pss(&groups);
    println!("serve after the snapshots      VmRSS {rss:.1} MiB (peak {peak:.1} MiB)");
    println!("the {count} browsers               {processes} processes, PSS {pss:.0} MiB together");

    // Stop all at once: nothing may be left.
    let started = Instant::now();
    let stops = names.iter().map(|name| timed(&client, "POST", "/stop", Some(json!({"profile": name}))));
    let stopped: Vec<f64> = join_all(stops).await.into_iter().map(|r| r.map(|(ms, _)| ms)).collect::<Result<_, _>>()?;
    let all_stopped = started.elapsed().as_secs_f64() * 1000.0;
    let left = processes_of(&groups);
    let folders = std::fs::read_dir(serve.home.path().join("ephemeral"))?.count();
    println!("stop, per profile              {}", stats(stopped));
    println!(
        "stop, all {count} (wall)            {all_stopped:.0} ms; processes left: {}, ephemeral folders left: {folders}",
        left.len()
    );
    anyhow::ensure!(left.is_empty() && folders == 0, "left behind: processes {left:?}, {folders} folders");
    let (rss, _) = serve.memory();
    println!("serve after the stops          VmRSS {rss:.1} MiB");
    serve.terminate()?;
    Ok(())
}
