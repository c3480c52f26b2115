//! The managed driver: an isolated Chrome that Browser Relay launches and
//! owns, with its own profile under the state directory.
//!
//! **State lives on disk.** What runs is recorded in
//! `profiles/<name>/run.json` ([`RunRecord`]), written once the browser
//! answers CDP and removed by `stop`, so any process on the same state
//! directory (the CLI, `serve`, a test) sees the same browser. `start` and
//! `stop` hold an exclusive lock on `profiles/<name>/lock` from their check
//! to their last write: two starts at once launch one browser.
//!
//! **Start.** An extension profile is refused; a profile that does not
//! [`Profile::launches`] (attach-only, a `cdpUrl`) is never launched, only
//! checked (its `/json/version` must answer). Otherwise, under the lock: a
//! running browser makes `start` a no-op; [`discovery::discover`] picks the
//! executable; [`profile_files::decorate`] writes the profile's name and
//! colour into Chrome's own files; Chrome's stderr goes to
//! `chrome-stderr.log`; the browser is spawned with [`launch_args`] in its
//! own process group (so `stop` reaches every helper and a Ctrl-C aimed at
//! the terminal does not).
//!
//! **Readiness.** Every 200 ms: read `DevToolsActivePort`, connect, ask
//! `Browser.getVersion`, within [`READY_WITHIN`]. A browser that exits or
//! stays silent is killed and [`ManagedError::NotReady`] carries the last
//! 20 lines of its stderr.
//!
//! **Stop.** `Browser.close`; after 3 s SIGTERM to the group; after 2.5 s
//! SIGKILL; then a last SIGKILL for helpers that outlived the browser, and
//! a wait until no live process of the group is left (zombies do not count),
//! so nothing is orphaned when `stop` returns.
//!
//! **Crash detection.** `status` says `crashed` when `run.json` names a pid
//! that is gone, or that is no longer a browser on this profile's folder
//! (after a reboot the pid may be anything and must never be signalled);
//! the next `start` relaunches it.
//!
//! **Launch flags** ([`launch_args`]): the profile's `--user-data-dir`, a
//! debugging port (0: Chrome picks one and writes it to
//! `DevToolsActivePort`; never 9222), `--no-first-run`,
//! `--no-default-browser-check`, `--disable-sync`,
//! `--disable-background-networking`, `--disable-component-update`,
//! `--disable-features=Translate,MediaRouter`,
//! `--disable-session-crashed-bubble`, `--hide-crash-restore-bubble`,
//! `--password-store=basic`; `--headless=new` when headless (by default
//! when Linux has no display); `--no-sandbox --disable-dev-shm-usage` when
//! asked or when running as root (Chrome refuses otherwise); the profile's
//! `args`; `about:blank`.

pub mod config;
pub mod discovery;
pub mod profile_files;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use cdp_client::CdpClient;
use cdp_client::protocol::browser;
use config::Profile;

/// How long a launched browser has to answer `Browser.getVersion`.
pub const READY_WITHIN: Duration = Duration::from_secs(15);
const POLL: Duration = Duration::from_millis(200);

#[derive(Debug, thiserror::Error)]
pub enum ManagedError {
    #[error(transparent)]
    Discovery(#[from] discovery::DiscoveryError),
    #[error(
        "profile '{0}' uses your own Chrome through the extension: there is nothing to launch; click the Browser Relay icon on a tab to share it"
    )]
    ExtensionProfile(String),
    #[error(
        "profile '{profile}' is attach-only and nothing answers at {url}: start that browser yourself (Browser Relay never launches it)"
    )]
    AttachUnreachable { profile: String, url: String },
    #[error("cannot prepare the profile directory {path}: {source}")]
    Profile { path: PathBuf, source: std::io::Error },
    #[error("cannot launch {executable}: {source}")]
    Spawn { executable: PathBuf, source: std::io::Error },
    #[error("the browser did not become ready within {secs} s ({why}); its last output:\n{stderr}")]
    NotReady { secs: u64, why: String, stderr: String },
}

/// What runs, as recorded in `run.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct RunRecord {
    pub pid: u32,
    pub port: u16,
    /// e.g. `/devtools/browser/<id>`.
    pub ws_path: String,
    pub executable: PathBuf,
    pub browser_version: String,
    pub started_at: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    Running,
    Stopped,
    /// It ran and exited without `stop`: the next `start` relaunches it.
    Crashed,
    /// A browser Browser Relay does not launch (attach-only, remote URL).
    External,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BrowserStatus {
    pub profile: String,
    pub state: State,
    pub pid: Option<u32>,
    pub browser_version: Option<String>,
    pub executable: Option<PathBuf>,
    pub user_data_dir: Option<PathBuf>,
    /// The browser's own debugging port (loopback); clients should use the
    /// relay's endpoint instead, which checks the token.
    pub cdp_port: Option<u16>,
    pub detail: String,
}

/// Children this process launched, so their exit is reaped (a zombie still
/// answers `kill(pid, 0)`).
static CHILDREN: Mutex<Option<HashMap<u32, std::process::Child>>> = Mutex::new(None);

fn is_alive(pid: u32) -> bool {
    let mut children = CHILDREN.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(child) = children.get_or_insert_with(HashMap::new).get_mut(&pid) {
        return match child.try_wait() {
            Ok(None) => true,
            _ => {
                children.as_mut().map(|c| c.remove(&pid));
                false
            }
        };
    }
    let Ok(pid) = i32::try_from(pid) else { return false };
    !matches!(nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None), Err(nix::errno::Errno::ESRCH))
}

fn signal_group(pid: u32, signal: nix::sys::signal::Signal) {
    if let Ok(pid) = i32::try_from(pid) {
        let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pid), signal);
    }
}

/// Whether any live process remains in the process group `pgid` (zombies,
/// which run nothing and wait for a reaper, do not count).
fn group_alive(pgid: u32) -> bool {
    let Ok(group) = i32::try_from(pgid) else { return false };
    if matches!(nix::sys::signal::killpg(nix::unistd::Pid::from_raw(group), None), Err(nix::errno::Errno::ESRCH)) {
        return false;
    }
    #[cfg(target_os = "linux")]
    {
        let Ok(entries) = std::fs::read_dir("/proc") else { return true };
        entries.filter_map(Result::ok).any(|entry| {
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { return false };
            // "pid (comm) state ppid pgrp …": comm may hold spaces.
            let fields: Vec<&str> = stat.rsplit_once(')').map(|(_, rest)| rest.split_whitespace().collect()).unwrap_or_default();
            matches!((fields.first(), fields.get(2)), (Some(state), Some(pgrp)) if *state != "Z" && pgrp.parse::<u32>() == Ok(pgid))
        })
    }
    #[cfg(not(target_os = "linux"))]
    {
        true
    }
}

/// Waits until `pid` is gone, up to `within`.
async fn wait_exit(pid: u32, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while is_alive(pid) {
        if Instant::now() > deadline {
            return false;
        }
        // A process that is not our child gives no event to await.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    true
}

/// The flags every managed launch gets, from PRIOR-ART's anchors.
pub fn launch_args(profile: &Profile, user_data_dir: &Path, headless: bool, no_sandbox: bool) -> Vec<String> {
    let mut args = vec![
        format!("--user-data-dir={}", user_data_dir.display()),
        format!("--remote-debugging-port={}", profile.cdp_port.unwrap_or(0)),
        "--no-first-run".into(),
        "--no-default-browser-check".into(),
        "--disable-sync".into(),
        "--disable-background-networking".into(),
        "--disable-component-update".into(),
        "--disable-features=Translate,MediaRouter".into(),
        "--disable-session-crashed-bubble".into(),
        "--hide-crash-restore-bubble".into(),
        "--password-store=basic".into(),
    ];
    if headless {
        args.push("--headless=new".into());
    }
    if no_sandbox {
        args.push("--no-sandbox".into());
        args.push("--disable-dev-shm-usage".into());
    }
    args.extend(profile.args.iter().cloned());
    args.push("about:blank".into());
    args
}

/// Headless unless asked otherwise and a display is available.
fn resolve_headless(profile: &Profile) -> bool {
    profile.headless.unwrap_or_else(|| {
        cfg!(target_os = "linux")
            && std::env::var_os("DISPLAY").is_none_or(|d| d.is_empty())
            && std::env::var_os("WAYLAND_DISPLAY").is_none_or(|d| d.is_empty())
    })
}

/// Chrome refuses to run as root without `--no-sandbox`.
fn resolve_no_sandbox(profile: &Profile) -> bool {
    profile.no_sandbox || nix::unistd::geteuid().is_root()
}

/// The managed browsers of one state directory.
#[derive(Debug, Clone)]
pub struct ManagedBrowsers {
    root: PathBuf,
}

impl ManagedBrowsers {
    pub fn new(state_root: &Path) -> Self {
        Self { root: state_root.to_path_buf() }
    }

    pub fn profile_dir(&self, name: &str) -> PathBuf {
        self.root.join("profiles").join(name)
    }

    pub fn user_data_dir(&self, name: &str) -> PathBuf {
        self.profile_dir(name).join("user-data")
    }

    fn record_path(&self, name: &str) -> PathBuf {
        self.profile_dir(name).join("run.json")
    }

    pub fn record(&self, name: &str) -> Option<RunRecord> {
        serde_json::from_slice(&std::fs::read(self.record_path(name)).ok()?).ok()
    }

    /// The running browser's loopback port, for the relay's proxy.
    pub fn running_port(&self, name: &str) -> Option<u16> {
        self.record(name).filter(|r| self.is_running(name, r)).map(|r| r.port)
    }

    /// The recorded browser still runs: its pid is alive and, where the
    /// process table can be read, it is still a browser on this profile's
    /// folder (after a reboot the pid may belong to anything; it must never
    /// be signalled).
    fn is_running(&self, name: &str, record: &RunRecord) -> bool {
        if !is_alive(record.pid) {
            return false;
        }
        #[cfg(target_os = "linux")]
        {
            let marker = format!("--user-data-dir={}", self.user_data_dir(name).display());
            if let Ok(cmdline) = std::fs::read(format!("/proc/{}/cmdline", record.pid)) {
                return cmdline.split(|b| *b == 0).any(|arg| arg == marker.as_bytes());
            }
        }
        true
    }

    /// Holds the profile's lock (start/stop) until the returned file drops.
    async fn lock(&self, name: &str) -> Result<std::fs::File, ManagedError> {
        let dir = self.profile_dir(name);
        let path = dir.join("lock");
        let io = |source| ManagedError::Profile { path: dir.clone(), source };
        std::fs::create_dir_all(&dir).map_err(io)?;
        let file = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(&path).map_err(io)?;
        tokio::task::spawn_blocking(move || file.lock().map(|()| file))
            .await
            .map_err(|e| ManagedError::Profile { path: path.clone(), source: std::io::Error::other(e) })?
            .map_err(|source| ManagedError::Profile { path, source })
    }

    pub fn status(&self, profile: &Profile) -> BrowserStatus {
        let user_data_dir = Some(self.user_data_dir(&profile.name));
        let mut status = BrowserStatus {
            profile: profile.name.clone(),
            state: State::Stopped,
            pid: None,
            browser_version: None,
            executable: None,
            user_data_dir,
            cdp_port: None,
            detail: "not running: `browser-relay start --profile NAME` launches it".replace("NAME", &profile.name),
        };
        if !profile.launches() {
            status.state = State::External;
            status.user_data_dir = None;
            status.detail = match &profile.cdp_url {
                Some(url) => format!("attaches to {}; Browser Relay never launches it", config::redacted_url(url)),
                None if profile.attach_only => "attach-only: Browser Relay never launches it".into(),
                None => "your own Chrome, through the extension".into(),
            };
            return status;
        }
        if let Some(record) = self.record(&profile.name) {
            status.pid = Some(record.pid);
            status.executable = Some(record.executable.clone());
            status.browser_version = Some(record.browser_version.clone());
            if self.is_running(&profile.name, &record) {
                status.state = State::Running;
                status.cdp_port = Some(record.port);
                status.detail = format!("running (pid {})", record.pid);
            } else {
                status.state = State::Crashed;
                status.detail = format!(
                    "crashed: the browser (pid {}) exited without `browser-relay stop`; `browser-relay start --profile {}` relaunches it",
                    record.pid, profile.name
                );
            }
        }
        status
    }

    /// Starts the profile's browser; a no-op when it already runs.
    pub async fn start(&self, profile: &Profile) -> Result<BrowserStatus, ManagedError> {
        if profile.driver == config::Driver::Extension {
            return Err(ManagedError::ExtensionProfile(profile.name.clone()));
        }
        if !profile.launches() {
            let url = profile
                .cdp_url
                .clone()
                .unwrap_or_else(|| format!("http://127.0.0.1:{}", profile.cdp_port.unwrap_or(0)));
            return match cdp_client::endpoint::json_version(&url).await {
                Ok(_) => Ok(self.status(profile)),
                Err(_) => Err(ManagedError::AttachUnreachable {
                    profile: profile.name.clone(),
                    url: config::redacted_url(&url),
                }),
            };
        }
        let _lock = self.lock(&profile.name).await?;
        if self.status(profile).state == State::Running {
            return Ok(self.status(profile));
        }
        let executable = discovery::discover(
            profile.executable_path.as_deref(),
            std::env::var_os(discovery::CHROME_ENV).as_deref().map(Path::new),
            discovery::Platform::current(),
            std::env::home_dir().as_deref(),
            &discovery::RealFiles,
        )?;
        let user_data_dir = self.user_data_dir(&profile.name);
        let profile_io = |source| ManagedError::Profile { path: user_data_dir.clone(), source };
        profile_files::decorate(&user_data_dir, &profile.name, &profile.color).map_err(profile_io)?;
        let port_file = user_data_dir.join("DevToolsActivePort");
        let _ = std::fs::remove_file(&port_file);
        let stderr_path = self.profile_dir(&profile.name).join("chrome-stderr.log");
        let stderr = std::fs::File::create(&stderr_path).map_err(profile_io)?;

        let args = launch_args(profile, &user_data_dir, resolve_headless(profile), resolve_no_sandbox(profile));
        let mut command = std::process::Command::new(&executable);
        command.args(&args).stdin(Stdio::null()).stdout(Stdio::null()).stderr(stderr);
        #[cfg(unix)]
        {
            use std::os::unix::process::CommandExt;
            // Its own process group: stop can end every helper process, and
            // a Ctrl-C aimed at our terminal does not reach it.
            command.process_group(0);
        }
        let child = command.spawn().map_err(|source| ManagedError::Spawn { executable: executable.clone(), source })?;
        let pid = child.id();
        CHILDREN.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert_with(HashMap::new).insert(pid, child);
        tracing::info!(profile = %profile.name, pid, executable = %executable.display(), "launched the managed browser");

        match self.wait_ready(pid, &port_file).await {
            Ok((port, ws_path, browser_version)) => {
                let record = RunRecord {
                    pid,
                    port,
                    ws_path,
                    executable,
                    browser_version,
                    started_at: std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| d.as_secs()),
                };
                // Readers do not take the lock: write whole or not at all.
                let text = serde_json::to_vec_pretty(&record).expect("serialises");
                let path = self.record_path(&profile.name);
                let tmp = path.with_extension("json.tmp");
                std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, &path)).map_err(profile_io)?;
                Ok(self.status(profile))
            }
            Err(why) => {
                signal_group(pid, nix::sys::signal::Signal::SIGKILL);
                wait_exit(pid, Duration::from_secs(2)).await;
                let log = std::fs::read_to_string(&stderr_path).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(20).collect();
                let stderr = tail.into_iter().rev().collect::<Vec<_>>().join("\n");
                Err(ManagedError::NotReady { secs: READY_WITHIN.as_secs(), why, stderr })
            }
        }
    }

    /// Readiness: the port file exists and CDP answers `Browser.getVersion`.
    async fn wait_ready(&self, pid: u32, port_file: &Path) -> Result<(u16, String, String), String> {
        let deadline = Instant::now() + READY_WITHIN;
        loop {
            if !is_alive(pid) {
                return Err("it exited".into());
            }
            if let Some((port, path)) = std::fs::read_to_string(port_file).ok().and_then(|text| {
                let mut lines = text.lines();
                Some((lines.next()?.parse::<u16>().ok()?, lines.next()?.to_string()))
            }) {
                let url = format!("ws://127.0.0.1:{port}{path}");
                if let Ok(client) = CdpClient::connect(&url).await {
                    let client = client.with_timeout(Duration::from_secs(2));
                    if let Ok(version) = client.send(&browser::GetVersion {}, None).await {
                        return Ok((port, path, version.product));
                    }
                }
            }
            if Instant::now() > deadline {
                return Err("no answer to Browser.getVersion".into());
            }
            // Chrome writes the port file when it listens; there is no event
            // to await from outside.
            tokio::time::sleep(POLL).await;
        }
    }

    /// Stops the browser: `Browser.close`, then SIGTERM, then SIGKILL to its
    /// whole process group. A no-op when it is not running.
    pub async fn stop(&self, profile: &Profile) -> Result<BrowserStatus, ManagedError> {
        if !profile.launches() {
            return Ok(self.status(profile));
        }
        let _lock = self.lock(&profile.name).await?;
        let Some(record) = self.record(&profile.name) else { return Ok(self.status(profile)) };
        if !self.is_running(&profile.name, &record) {
            // Crashed, or the pid now belongs to another process: signal
            // nothing, forget the record.
            let _ = std::fs::remove_file(self.record_path(&profile.name));
            return Ok(self.status(profile));
        }
        {
            let url = format!("ws://127.0.0.1:{}{}", record.port, record.ws_path);
            if let Ok(client) = CdpClient::connect(&url).await {
                let _ = client.with_timeout(Duration::from_secs(2)).send(&browser::Close {}, None).await;
            }
            if !wait_exit(record.pid, Duration::from_secs(3)).await {
                signal_group(record.pid, nix::sys::signal::Signal::SIGTERM);
                if !wait_exit(record.pid, Duration::from_millis(2500)).await {
                    signal_group(record.pid, nix::sys::signal::Signal::SIGKILL);
                    wait_exit(record.pid, Duration::from_secs(2)).await;
                }
            }
        }
        // Helpers that outlived the browser: none may be left when stop
        // returns (no orphans).
        signal_group(record.pid, nix::sys::signal::Signal::SIGKILL);
        let deadline = Instant::now() + Duration::from_secs(3);
        while group_alive(record.pid) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let _ = std::fs::remove_file(self.record_path(&profile.name));
        tracing::info!(profile = %profile.name, pid = record.pid, "stopped the managed browser");
        Ok(self.status(profile))
    }
}

/// The CDP endpoint a client uses for a profile, through the relay at
/// `relay_base` (`http://127.0.0.1:PORT`): the relay itself for the extension
/// driver, `/profiles/<name>/` for a managed browser it launches, and a
/// remote profile's own `cdpUrl` (never proxied).
/// Where a client connects for `profile`, as it may be shown: through the
/// relay at `relay_base` (without the token: `browser-relay cdp-url` prints
/// it with), or a remote browser's own address without its secrets.
pub fn cdp_endpoint(relay_base: &str, profile: &Profile) -> Option<String> {
    match profile.driver {
        config::Driver::Extension => Some(format!("{relay_base}/")),
        config::Driver::Managed if profile.launches() => Some(format!("{relay_base}/profiles/{}/", profile.name)),
        config::Driver::Managed => profile.cdp_url.as_deref().map(config::redacted_url),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launch_flags_isolate_and_never_use_9222() {
        let profile = config::Config::defaults().profile(Some("managed")).unwrap().clone();
        let args = launch_args(&profile, Path::new("/state/profiles/managed/user-data"), true, true);
        for flag in [
            "--user-data-dir=/state/profiles/managed/user-data",
            "--remote-debugging-port=0",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-sync",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-features=Translate,MediaRouter",
            "--disable-session-crashed-bubble",
            "--hide-crash-restore-bubble",
            "--password-store=basic",
            "--headless=new",
            "--no-sandbox",
            "--disable-dev-shm-usage",
        ] {
            assert!(args.iter().any(|a| a == flag), "{flag} missing from {args:?}");
        }
        assert_eq!(args.last().map(String::as_str), Some("about:blank"));
        let headed = launch_args(&profile, Path::new("/p"), false, false);
        assert!(!headed.iter().any(|a| a.starts_with("--headless") || a == "--no-sandbox"));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_recorded_pid_that_is_not_our_browser_is_never_running() {
        let state = tempfile::tempdir().unwrap();
        let browsers = ManagedBrowsers::new(state.path());
        let profile = config::Config::defaults().profile(Some("managed")).unwrap().clone();
        std::fs::create_dir_all(browsers.profile_dir("managed")).unwrap();
        // This test process is alive, but it is no browser on this profile.
        let record = RunRecord {
            pid: std::process::id(),
            port: 1,
            ws_path: "/devtools/browser/x".into(),
            executable: "/usr/bin/true".into(),
            browser_version: "Chrome/1".into(),
            started_at: 0,
        };
        std::fs::write(browsers.record_path("managed"), serde_json::to_vec(&record).unwrap()).unwrap();
        assert_eq!(browsers.status(&profile).state, State::Crashed, "a reused pid is not our browser");
        assert_eq!(browsers.running_port("managed"), None);
    }
}
