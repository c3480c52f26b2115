//! A real headless Chromium for one test: its own temporary profile, an
//! ephemeral debugging port, and its whole process group killed on drop
//! (also when the test fails).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};

/// Debian's Chromium binary (the `/usr/bin/chromium` wrapper adds flags we do not want).
pub const CHROMIUM: &str = "/usr/lib/chromium/chromium";

/// The browser the tests launch: `BROWSER_RELAY_TEST_CHROME` (CI's Chrome for
/// Testing on Windows and macOS, `.github/workflows/ci.yml`), else [`CHROMIUM`].
pub fn executable() -> PathBuf {
    std::env::var_os("BROWSER_RELAY_TEST_CHROME").map_or_else(|| PathBuf::from(CHROMIUM), PathBuf::from)
}

#[derive(Debug)]
pub struct Chromium {
    child: std::process::Child,
    pub profile: tempfile::TempDir,
    /// Its `TMPDIR`.
    _temp: tempfile::TempDir,
    /// Browser-level CDP WebSocket URL.
    pub ws_url: String,
    pub port: u16,
}

/// Flags every test browser gets. The background-networking flags matter on
/// this machine: without them Chromium floods the closed network. Headless,
/// unless `BROWSER_RELAY_TEST_HEADED` is set (with a `DISPLAY`, e.g. Xvfb's:
/// `scripts/screenshot-headed.sh`, `scripts/store-screenshots.sh`).
pub fn base_args(profile: &Path) -> Vec<String> {
    let mut args = match std::env::var_os("BROWSER_RELAY_TEST_HEADED") {
        // The window's size: `BROWSER_RELAY_TEST_WINDOW` ("1280,800" for the
        // store's pictures), else the README's.
        Some(_) => vec![
            "--window-position=0,0".to_string(),
            format!(
                "--window-size={}",
                std::env::var("BROWSER_RELAY_TEST_WINDOW").unwrap_or_else(|_| "1024,480".to_string())
            ),
        ],
        None => vec!["--headless=new".to_string()],
    };
    args.extend([
        "--no-sandbox".to_string(),
        "--disable-gpu".into(),
        "--disable-dev-shm-usage".into(),
        "--no-first-run".into(),
        "--no-default-browser-check".into(),
        "--disable-background-networking".into(),
        "--disable-component-update".into(),
        "--disable-sync".into(),
        "--disable-features=Translate,MediaRouter,OptimizationHints".into(),
        "--password-store=basic".into(),
        "--remote-debugging-port=0".into(),
    ]);
    args.push(format!("--user-data-dir={}", profile.display()));
    args
}

impl Chromium {
    /// Launches Chromium with `extra` flags, opening `url`.
    pub fn launch(extra: &[String], url: &str) -> anyhow::Result<Self> {
        let executable = executable();
        if !executable.exists() {
            bail!(
                "{} not found: install Debian's chromium package (the README's test command does), or set BROWSER_RELAY_TEST_CHROME",
                executable.display()
            );
        }
        let profile = tempfile::Builder::new().prefix("browser-relay-test-").tempdir()?;
        let mut command = std::process::Command::new(&executable);
        command.args(base_args(profile.path())).args(extra).arg(url);
        // Chromium keeps its singleton socket in a folder of the temporary
        // folder and removes it only when it quits cleanly: a killed test
        // browser gets a temporary folder of its own, removed with it. (Not
        // one inside the profile: a socket's path must stay short.)
        let temp = tempfile::tempdir()?;
        command.env("TMPDIR", temp.path());
        command.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
        #[cfg(unix)]
        {
            use std::os::unix::process::CommandExt;
            // Own process group, so the renderers and helpers die with it.
            command.process_group(0);
        }
        let mut child = command.spawn().context("spawning Chromium")?;
        let port_file = profile.path().join("DevToolsActivePort");
        let deadline = Instant::now() + Duration::from_secs(20);
        // Chromium writes the file once its debugging server listens; there is
        // no event to wait on from outside, so poll with a deadline.
        let (port, path) = loop {
            if let Ok(text) = std::fs::read_to_string(&port_file) {
                let mut lines = text.lines();
                if let (Some(port), Some(path)) = (lines.next(), lines.next()) {
                    break (port.parse::<u16>().context("DevToolsActivePort port")?, path.to_string());
                }
            }
            if let Some(status) = child.try_wait()? {
                let mut stderr = String::new();
                if let Some(mut e) = child.stderr.take() {
                    use std::io::Read;
                    let _ = e.read_to_string(&mut stderr);
                }
                bail!("Chromium exited early ({status}): {}", tail(&stderr, 2000));
            }
            if Instant::now() > deadline {
                bail!("Chromium did not open its debugging port within 20 s");
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        // Drain stderr so a chatty browser never blocks on a full pipe.
        if let Some(stderr) = child.stderr.take() {
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut std::io::BufReader::new(stderr), &mut std::io::sink());
            });
        }
        Ok(Self { child, profile, _temp: temp, ws_url: format!("ws://127.0.0.1:{port}{path}"), port })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn profile_dir(&self) -> PathBuf {
        self.profile.path().to_path_buf()
    }

    /// Quits the browser as a user would (`Browser.close`: Chrome writes
    /// what it keeps, its history among it, as it quits) and waits until it
    /// has exited.
    pub async fn quit(&mut self) -> anyhow::Result<()> {
        let client = cdp_client::CdpClient::connect(&self.ws_url).await?.with_timeout(Duration::from_secs(5));
        // The browser may close the socket before it answers.
        let _ = client.call("Browser.close", serde_json::json!({}), None).await;
        let deadline = Instant::now() + Duration::from_secs(20);
        // Our child's exit has no event to await from async code here.
        while self.child.try_wait()?.is_none() {
            anyhow::ensure!(Instant::now() < deadline, "Chromium did not quit within 20 s of Browser.close");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(())
    }
}

fn tail(text: &str, max: usize) -> &str {
    let start = text.len().saturating_sub(max);
    let start = (start..text.len()).find(|i| text.is_char_boundary(*i)).unwrap_or(text.len());
    &text[start..]
}

/// Kills the process group `pgid` (a browser and every helper it started,
/// addressed as a group: never a bare pid list) and waits, up to 5 s, until
/// none of it runs: the caller removes the folders it wrote to next, and a
/// dying browser that still writes makes that removal stop half way. The
/// tests' processes run on Linux; on Windows (where this crate is built
/// only for its in-process tests, under Wine) the browser's whole tree is
/// ended by pid.
pub fn kill_group(pgid: u32) {
    #[cfg(unix)]
    if let Ok(pid) = i32::try_from(pgid) {
        let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
    }
    #[cfg(unix)]
    wait_for_group(pgid, Duration::from_secs(5));
    #[cfg(windows)]
    {
        let _ = std::process::Command::new("taskkill").args(["/F", "/T", "/PID", &pgid.to_string()]).output();
    }
}

/// A process group, killed (what is left of it) when dropped: a test's
/// processes go with it, also when it fails.
#[derive(Debug)]
pub struct KilledGroup(pub u32);

impl Drop for KilledGroup {
    fn drop(&mut self) {
        kill_group(self.0);
    }
}

/// Returns once no process of group `pgid` runs, or after `within`. A
/// signal has no completion to await: this polls the process table.
#[cfg(unix)]
fn wait_for_group(pgid: u32, within: Duration) {
    let deadline = Instant::now() + within;
    while group_runs(pgid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Whether a process of group `pgid` still runs.
#[cfg(unix)]
pub fn group_runs(pgid: u32) -> bool {
    running_in_group(pgid) > 0
}

/// How many processes of group `pgid` run. A zombie does not count: it
/// writes nothing, and it is reaped only by its parent (maybe this
/// process's runtime, maybe the very thread that waits for the group).
/// Linux's process table (/proc): these tests run on Linux only.
#[cfg(unix)]
pub fn running_in_group(pgid: u32) -> usize {
    let Ok(processes) = std::fs::read_dir("/proc") else { return 0 };
    let pgid = pgid.to_string();
    let runs = |process: &Path| {
        let Ok(stat) = std::fs::read_to_string(process.join("stat")) else { return false };
        // "pid (comm) state ppid pgrp …", where comm may hold spaces and ")".
        let Some((_, fields)) = stat.rsplit_once(')') else { return false };
        let mut fields = fields.split_whitespace();
        let (state, _ppid, group) = (fields.next(), fields.next(), fields.next());
        state != Some("Z") && group == Some(pgid.as_str())
    };
    processes.filter_map(Result::ok).filter(|process| runs(&process.path())).count()
}

impl Drop for Chromium {
    fn drop(&mut self) {
        // The whole process group: the browser and every helper it started.
        kill_group(self.child.id());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
