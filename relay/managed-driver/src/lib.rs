//! The managed driver: an isolated Chrome that Browser Relay launches and
//! owns, with its own profile under the state directory.
//!
//! **No port: a pipe.** The browser speaks CDP only over
//! `--remote-debugging-pipe` (its fds 3 and 4; on Windows two inherited
//! handles, see `process`), to the process that launched it ([`pipe`]): no other local user or process can reach it,
//! and when that process exits the pipe closes and the browser quits. Every
//! client (the relay's `/profiles/<name>/` sockets, the control engine)
//! gets its own session over that one pipe ([`ManagedBrowsers::connect`]).
//!
//! **State.** The pipes of this process are kept in memory, per profile
//! folder, so every [`ManagedBrowsers`] of the process sees the same
//! browsers. What runs is also recorded in `profiles/<name>/run.json`
//! ([`RunRecord`], with the owning process), so other processes on the same
//! state directory see it running (and can stop it by signal, not use it).
//! `start` and `stop` hold an exclusive lock on `profiles/<name>/lock` from
//! their check to their last write: two starts at once launch one browser.
//!
//! **Start.** An extension profile is refused; a profile that does not
//! [`Profile::launches`] (attach-only, a `cdpUrl`) is never launched, only
//! connected to ([`remote`]: one multiplexed connection per profile, which
//! every client shares). Otherwise, under the lock: a
//! running browser makes `start` a no-op; [`discovery::discover`] picks the
//! executable; [`profile_files::decorate`] writes the profile's name and
//! colour into Chrome's own files; Chrome's stderr goes to
//! `chrome-stderr.log`; the browser is spawned with [`launch_args`] in a
//! tree of its own (a process group; on Windows a Job Object), so `stop`
//! reaches every helper and a Ctrl-C aimed at the terminal does not.
//!
//! **Readiness.** `Browser.getVersion` answered over the pipe within
//! [`READY_WITHIN`]. A browser that exits or stays silent is killed and
//! [`ManagedError::NotReady`] carries the last 20 lines of its stderr.
//!
//! **Stop.** `Browser.close`; after 3 s SIGTERM to the group; after 2.5 s
//! SIGKILL; then a last SIGKILL for helpers that outlived the browser, and
//! a wait until no live process of the group is left (zombies do not count),
//! so nothing is orphaned when `stop` returns. On Windows, which has no
//! SIGTERM for a browser, both are `TerminateJobObject`.
//!
//! **Crash detection.** `status` says `crashed` when the pipe closed
//! without `stop`, when `run.json` names a pid that is gone or that is no
//! longer a browser on this profile's folder (after a reboot the pid may be
//! anything and must never be signalled), or when the process that owned it
//! is gone; the next `start` relaunches it.
//!
//! **Several at once.** Each profile has its own folder, lock, pipe and
//! process group, so any number of profiles run side by side; one serve
//! launches at most [`ManagedBrowsers::with_max_running`] of them at once
//! (config.toml's `maxManagedBrowsers`), counting launches under way, and
//! the next start is refused with [`ManagedError::TooManyBrowsers`], which
//! names the running ones.
//!
//! **Ephemeral profiles** ([`Profile::ephemeral`]) are not in config.toml:
//! a process registers one when it starts it, every lookup of that process
//! sees it ([`ManagedBrowsers::config`]), and `stop` (also `stop_owned`,
//! when serve ends) deletes its folder and forgets it. Its folder is
//! `ephemeral/<name>` under the state directory, apart from `profiles/`:
//! an ephemeral start then never reuses the folder of a config profile
//! (not even of one removed from config.toml, whose cookies the user may
//! still want), the folder is wiped before each launch so every run starts
//! clean, and leftovers of a killed serve are found in one place
//! ([`ManagedBrowsers::remove_abandoned_ephemeral`], at serve start). Not
//! the system's temporary folder: it may be a small tmpfs shared with other
//! users, while the state directory is the user's own (0700).
//!
//! **Launch flags** ([`launch_args`]): the profile's `--user-data-dir`,
//! `--remote-debugging-pipe` (never a port), `--no-first-run`,
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
pub mod pipe;
mod process;
pub mod profile_files;
pub mod remote;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::json;

use cdp_client::{CdpError, Channels};
use config::{Config, ConfigError, Profile};
use pipe::{Endpoint, Pipe};
use process::Ending;

/// How long a launched browser has to answer `Browser.getVersion`.
pub const READY_WITHIN: Duration = Duration::from_secs(15);

#[derive(Debug, thiserror::Error)]
pub enum ManagedError {
    #[error(transparent)]
    Discovery(#[from] discovery::DiscoveryError),
    #[error(
        "profile '{0}' uses your own Chrome through the extension: there is nothing to launch; click the Browser Relay icon on a tab to share it"
    )]
    ExtensionProfile(String),
    /// A browser Browser Relay does not launch (a `cdpUrl`, or
    /// `attachOnly` with `cdpPort`) cannot be reached. `url` is redacted;
    /// `port_only`: the profile names a local port, no URL.
    #[error("cannot reach the browser of profile '{profile}' at {url}: {source}{}", remote::hint(source, *port_only))]
    AttachUnreachable { profile: String, url: String, port_only: bool, source: cdp_client::EndpointError },
    #[error("cannot prepare the profile directory {path}: {source}")]
    Profile { path: PathBuf, source: std::io::Error },
    #[error("cannot launch {executable}: {source}")]
    Spawn { executable: PathBuf, source: std::io::Error },
    #[error("the browser did not become ready within {secs} s ({why}); its last output:\n{stderr}")]
    NotReady { secs: u64, why: String, stderr: String },
    #[error("profile '{0}' is not running: `browser-relay start --profile {0}`")]
    NotRunning(String),
    #[error(
        "profile '{profile}' runs under another Browser Relay process (pid {owner}): use that one, or stop it first"
    )]
    OwnedElsewhere { profile: String, owner: u32 },
    #[error("the managed browser of profile '{profile}': {source}")]
    Cdp { profile: String, source: CdpError },
    #[error(
        "{max} managed browsers already run from this serve, its limit (maxManagedBrowsers in config.toml): {}; stop one of them first",
        running.join(", ")
    )]
    TooManyBrowsers { max: usize, running: Vec<String> },
}

/// What runs, as recorded in `run.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct RunRecord {
    pub pid: u32,
    /// The process that launched it and holds its pipe.
    pub owner: u32,
    /// The browser target's id (for `/devtools/browser/<id>`).
    pub browser_id: String,
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
    pub detail: String,
}

/// Browsers this process launched, by pid: reaped when they exit (a
/// zombie still answers `kill(pid, 0)`), and their process tree (on
/// Windows a Job Object, which kills what is left when it drops).
static CHILDREN: Mutex<Option<HashMap<u32, process::Launched>>> = Mutex::new(None);

/// The pipes of the browsers this process launched, by profile folder.
static PIPES: Mutex<Option<HashMap<PathBuf, Arc<Pipe>>>> = Mutex::new(None);

fn pipes() -> std::sync::MutexGuard<'static, Option<HashMap<PathBuf, Arc<Pipe>>>> {
    PIPES.lock().unwrap_or_else(|p| p.into_inner())
}

/// The ephemeral profiles this process started, by state directory.
static EPHEMERAL: Mutex<Option<HashMap<PathBuf, BTreeMap<String, Profile>>>> = Mutex::new(None);

fn ephemeral() -> std::sync::MutexGuard<'static, Option<HashMap<PathBuf, BTreeMap<String, Profile>>>> {
    EPHEMERAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// Launches under way in this process (from the cap's check until their
/// pipe is registered), by state directory: starts at once count each
/// other against the cap. Taken before [`PIPES`] when both are.
static LAUNCHING: Mutex<Option<HashMap<PathBuf, BTreeSet<String>>>> = Mutex::new(None);

/// A launch's place under the cap, given back when it drops (its browser
/// then counts by its pipe, or did not start).
#[derive(Debug)]
struct LaunchSlot {
    root: PathBuf,
    name: String,
}

impl Drop for LaunchSlot {
    fn drop(&mut self) {
        let mut launching = LAUNCHING.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(names) = launching.as_mut().and_then(|l| l.get_mut(&self.root)) {
            names.remove(&self.name);
        }
    }
}

fn is_alive(pid: u32) -> bool {
    let mut children = CHILDREN.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(launched) = children.get_or_insert_with(HashMap::new).get_mut(&pid) {
        return match launched.child.try_wait() {
            Ok(None) => true,
            _ => {
                children.as_mut().map(|c| c.remove(&pid));
                false
            }
        };
    }
    process::is_alive(pid)
}

/// Ends the browser `pid` and every helper it started.
fn end_tree(pid: u32, ending: Ending) {
    let children = CHILDREN.lock().unwrap_or_else(|p| p.into_inner());
    process::end_tree(pid, children.as_ref().and_then(|c| c.get(&pid)).map(|l| &l.tree), ending);
}

/// Waits (up to `within`) until no live process remains of the browser
/// `pid`'s tree; a process gives no event to await from here.
async fn wait_tree_gone(pid: u32, within: Duration) {
    let deadline = Instant::now() + within;
    while tree_alive(pid) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Whether any live process remains of the browser `pid`'s tree.
fn tree_alive(pid: u32) -> bool {
    let children = CHILDREN.lock().unwrap_or_else(|p| p.into_inner());
    process::tree_alive(pid, children.as_ref().and_then(|c| c.get(&pid)).map(|l| &l.tree))
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
        "--remote-debugging-pipe".into(),
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
    let has_display = ["DISPLAY", "WAYLAND_DISPLAY"].iter().any(|v| std::env::var_os(v).is_some_and(|d| !d.is_empty()));
    profile.headless.unwrap_or_else(|| headless_by_default(discovery::Platform::current(), has_display))
}

/// Whether a profile that does not say runs headless: on Linux when no X
/// or Wayland display is there (a server, CI); never on macOS and Windows,
/// whose desktop is always there for a person to watch.
fn headless_by_default(platform: discovery::Platform, has_display: bool) -> bool {
    platform == discovery::Platform::Linux && !has_display
}

/// Chrome refuses to run as root without `--no-sandbox`.
fn resolve_no_sandbox(profile: &Profile) -> bool {
    profile.no_sandbox || process::is_superuser()
}

/// The managed browsers of one state directory. Every value on the same
/// directory in one process shares the same browsers (and ephemeral
/// profiles).
#[derive(Debug, Clone)]
pub struct ManagedBrowsers {
    root: PathBuf,
    /// How many browsers `start` lets run at once from this process.
    max_running: usize,
}

impl ManagedBrowsers {
    pub fn new(state_root: &Path) -> Self {
        Self { root: state_root.to_path_buf(), max_running: config::DEFAULT_MAX_MANAGED_BROWSERS }
    }

    /// The same browsers, with `start` refusing a launch once `max` run
    /// from this process (config.toml's `maxManagedBrowsers`).
    pub fn with_max_running(mut self, max: usize) -> Self {
        self.max_running = max;
        self
    }

    /// config.toml with this process's ephemeral profiles: what every
    /// lookup by name must see. While an ephemeral profile lives its name
    /// means it, even should config.toml gain a profile of that name (the
    /// running browser stays reachable and stoppable).
    pub fn config(&self) -> Result<Config, ConfigError> {
        let mut config = Config::load(&self.root)?;
        config.profiles.extend(self.ephemeral_profiles().into_iter().map(|p| (p.name.clone(), p)));
        Ok(config)
    }

    /// The ephemeral profiles this process started and has not stopped.
    pub fn ephemeral_profiles(&self) -> Vec<Profile> {
        ephemeral().as_ref().and_then(|e| e.get(&self.root)).map(|p| p.values().cloned().collect()).unwrap_or_default()
    }

    fn is_ephemeral(&self, name: &str) -> bool {
        ephemeral().as_ref().and_then(|e| e.get(&self.root)).is_some_and(|p| p.contains_key(name))
    }

    fn register_ephemeral(&self, profile: &Profile) {
        let mut registry = ephemeral();
        let profiles = registry.get_or_insert_with(HashMap::new).entry(self.root.clone()).or_default();
        profiles.insert(profile.name.clone(), profile.clone());
    }

    fn forget_ephemeral(&self, name: &str) {
        if let Some(profiles) = ephemeral().as_mut().and_then(|e| e.get_mut(&self.root)) {
            profiles.remove(name);
        }
    }

    /// The folder of the profile of that name: an ephemeral one's while it
    /// lives, else config.toml's.
    pub fn profile_dir(&self, name: &str) -> PathBuf {
        match self.is_ephemeral(name) {
            true => self.root.join("ephemeral").join(name),
            false => self.root.join("profiles").join(name),
        }
    }

    /// The folder of `profile`, whether or not it is registered yet.
    fn folder(&self, profile: &Profile) -> PathBuf {
        self.root.join(if profile.ephemeral { "ephemeral" } else { "profiles" }).join(&profile.name)
    }

    pub fn user_data_dir(&self, name: &str) -> PathBuf {
        self.profile_dir(name).join("user-data")
    }

    pub fn record(&self, name: &str) -> Option<RunRecord> {
        record_in(&self.profile_dir(name))
    }

    /// The pipe of the profile's browser, while it runs under this process.
    pub fn pipe(&self, name: &str) -> Option<Arc<Pipe>> {
        pipe_in(&self.profile_dir(name))
    }

    /// A new client of the profile's browser (its own session, as a
    /// WebSocket of its own would be): browser-level or one target.
    pub async fn connect(&self, profile: &Profile, endpoint: Endpoint) -> Result<Channels, ManagedError> {
        let pipe = self.pipe_for(profile).await?;
        pipe.connect(endpoint).await.map_err(|source| ManagedError::Cdp { profile: profile.name.clone(), source })
    }

    /// The connection every client of the profile's browser shares: the
    /// pipe of a browser this process launched, or the connection to a
    /// remote one ([`Self::remote`], opened if need be).
    pub async fn pipe_for(&self, profile: &Profile) -> Result<Arc<Pipe>, ManagedError> {
        match profile.launches() {
            true => self.usable_pipe(&profile.name),
            false => self.remote(profile).await,
        }
    }

    /// The pipe, or why the browser cannot be used from this process.
    pub fn usable_pipe(&self, name: &str) -> Result<Arc<Pipe>, ManagedError> {
        let dir = self.profile_dir(name);
        if let Some(pipe) = pipe_in(&dir) {
            return Ok(pipe);
        }
        match record_in(&dir) {
            Some(record) if record.owner != std::process::id() && is_running_in(&dir, &record) => {
                Err(ManagedError::OwnedElsewhere { profile: name.into(), owner: record.owner })
            }
            _ => Err(ManagedError::NotRunning(name.into())),
        }
    }

    /// Holds the lock of the profile folder `dir` (start/stop) until the
    /// returned file drops.
    async fn lock(dir: &Path) -> Result<std::fs::File, ManagedError> {
        let path = dir.join("lock");
        let io = |source| ManagedError::Profile { path: dir.to_path_buf(), source };
        loop {
            std::fs::create_dir_all(dir).map_err(io)?;
            let file = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(&path).map_err(io)?;
            let locked = tokio::task::spawn_blocking(move || file.lock().map(|()| file))
                .await
                .map_err(|e| ManagedError::Profile { path: path.clone(), source: std::io::Error::other(e) })?
                .map_err(|source| ManagedError::Profile { path: path.clone(), source })?;
            // The stop of an ephemeral profile deletes its folder, lock
            // included, while a start may wait on that lock: the lock won
            // then is on a file no one else can open. Take the new one.
            if is_same_file(&locked, &path) {
                return Ok(locked);
            }
        }
    }

    pub fn status(&self, profile: &Profile) -> BrowserStatus {
        let dir = self.folder(profile);
        let user_data_dir = Some(dir.join("user-data"));
        let mut status = BrowserStatus {
            profile: profile.name.clone(),
            state: State::Stopped,
            pid: None,
            browser_version: None,
            executable: None,
            user_data_dir,
            detail: "not running: `browser-relay start --profile NAME` launches it".replace("NAME", &profile.name),
        };
        if !profile.launches() {
            status.state = State::External;
            status.user_data_dir = None;
            let connected = match self.remote_connected(&profile.name) {
                true => "connected",
                false => "not connected (it connects on first use)",
            };
            status.detail = match profile.remote_url() {
                Some(url) => format!("{connected} to {}; Browser Relay never launches it", config::redacted_url(&url)),
                None => "your own Chrome, through the extension".into(),
            };
            return status;
        }
        if let Some(record) = record_in(&dir) {
            status.pid = Some(record.pid);
            status.executable = Some(record.executable.clone());
            status.browser_version = Some(record.browser_version.clone());
            if is_running_in(&dir, &record) {
                status.state = State::Running;
                status.detail = if record.owner == std::process::id() {
                    format!("running (pid {})", record.pid)
                } else {
                    format!("running (pid {}) under another Browser Relay process (pid {})", record.pid, record.owner)
                };
            } else {
                status.state = State::Crashed;
                status.detail = format!(
                    "crashed: the browser (pid {}) exited without `browser-relay stop`; `browser-relay start --profile {}` relaunches it",
                    record.pid, profile.name
                );
            }
        }
        if profile.ephemeral {
            status.detail = match status.state {
                State::Stopped => format!(
                    "not running; ephemeral: deleted when stopped (`browser-relay start --profile {} --ephemeral` starts a fresh one)",
                    profile.name
                ),
                _ => format!("{} (ephemeral: its folder is deleted when it stops)", status.detail),
            };
        }
        status
    }

    /// The names of the browsers running under this process now, and of
    /// those being launched.
    fn running_here(&self, launching: &BTreeSet<String>) -> BTreeSet<String> {
        let pipes = pipes();
        let running = pipes.iter().flatten().filter(|(dir, pipe)| {
            !pipe.is_closed() && dir.parent().and_then(Path::parent) == Some(self.root.as_path())
        });
        running
            .filter_map(|(dir, _)| dir.file_name()?.to_str().map(str::to_string))
            .chain(launching.iter().cloned())
            .collect()
    }

    /// A place under the cap for launching `name`, or the refusal that
    /// names what runs.
    fn reserve(&self, name: &str) -> Result<LaunchSlot, ManagedError> {
        let mut launching = LAUNCHING.lock().unwrap_or_else(|p| p.into_inner());
        let under_way = launching.get_or_insert_with(HashMap::new).entry(self.root.clone()).or_default();
        let running = self.running_here(under_way);
        if running.len() >= self.max_running {
            return Err(ManagedError::TooManyBrowsers {
                max: self.max_running,
                running: running.into_iter().collect(),
            });
        }
        under_way.insert(name.to_string());
        Ok(LaunchSlot { root: self.root.clone(), name: name.to_string() })
    }

    /// Starts the profile's browser; a no-op when it already runs. An
    /// ephemeral profile is registered for this process first, launched on a
    /// clean folder, and forgotten (its folder deleted) if it cannot start.
    pub async fn start(&self, profile: &Profile) -> Result<BrowserStatus, ManagedError> {
        if profile.driver == config::Driver::Extension {
            return Err(ManagedError::ExtensionProfile(profile.name.clone()));
        }
        if !profile.launches() {
            self.remote(profile).await?;
            return Ok(self.status(profile));
        }
        let dir = self.folder(profile);
        let lock = Self::lock(&dir).await?;
        // Registered under the lock: the stop of a previous run of this
        // name, which forgets it, has finished.
        if profile.ephemeral {
            self.register_ephemeral(profile);
        }
        let launched = self.launch_locked(profile, &dir).await;
        // Another process's browser on that folder is left alone.
        if profile.ephemeral && launched.as_ref().is_err_and(|e| !matches!(e, ManagedError::OwnedElsewhere { .. })) {
            self.forget_ephemeral(&profile.name);
            let _ = remove_locked_folder(&dir, lock);
        }
        launched
    }

    /// `start` under the profile's lock.
    async fn launch_locked(&self, profile: &Profile, dir: &Path) -> Result<BrowserStatus, ManagedError> {
        if self.status(profile).state == State::Running {
            return match record_in(dir) {
                Some(record) if record.owner != std::process::id() => {
                    Err(ManagedError::OwnedElsewhere { profile: profile.name.clone(), owner: record.owner })
                }
                _ => Ok(self.status(profile)),
            };
        }
        let _slot = self.reserve(&profile.name)?;
        // A browser left on this profile's folder (its owner died and it has
        // not quit yet) would take the new launch over: end it first.
        if let Some(record) = record_in(dir).filter(|r| is_ours_on_disk(dir, r.pid)) {
            end_tree(record.pid, Ending::Kill);
            wait_exit(record.pid, Duration::from_secs(2)).await;
        }
        // An ephemeral run starts clean: whatever a crashed run, or a serve
        // killed before it could delete the folder, left is removed.
        if profile.ephemeral {
            clear_folder_but_lock(dir).map_err(|source| ManagedError::Profile { path: dir.to_path_buf(), source })?;
        }
        let executable = discovery::discover(
            profile.executable_path.as_deref(),
            std::env::var_os(discovery::CHROME_ENV).as_deref().map(Path::new),
            discovery::Platform::current(),
            &discovery::Places::current(),
            &discovery::RealFiles,
        )?;
        let user_data_dir = dir.join("user-data");
        let profile_io = |source| ManagedError::Profile { path: user_data_dir.clone(), source };
        profile_files::decorate(&user_data_dir, &profile.name, &profile.color).map_err(profile_io)?;
        let stderr_path = dir.join("chrome-stderr.log");
        let stderr = std::fs::File::create(&stderr_path).map_err(profile_io)?;

        let args = launch_args(profile, &user_data_dir, resolve_headless(profile), resolve_no_sandbox(profile));
        let spawn_error = |source| ManagedError::Spawn { executable: executable.clone(), source };
        let (launched, to_browser, from_browser) =
            process::spawn_with_pipe(&executable, &args, stderr).map_err(spawn_error)?;
        let pid = launched.child.id();
        CHILDREN.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert_with(HashMap::new).insert(pid, launched);
        tracing::info!(profile = %profile.name, pid, executable = %executable.display(), "launched the managed browser");
        let pipe = Pipe::start(to_browser, from_browser);
        match Self::wait_ready(&pipe, pid).await {
            Ok((browser_id, browser_version)) => {
                let record = RunRecord {
                    pid,
                    owner: std::process::id(),
                    browser_id,
                    executable,
                    browser_version,
                    started_at: std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| d.as_secs()),
                };
                pipes().get_or_insert_with(HashMap::new).insert(dir.to_path_buf(), pipe);
                // Readers do not take the lock: write whole or not at all.
                let text = serde_json::to_vec_pretty(&record).expect("serialises");
                let path = dir.join(RUN_RECORD);
                let tmp = path.with_extension("json.tmp");
                std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, &path)).map_err(profile_io)?;
                Ok(self.status(profile))
            }
            Err(why) => {
                end_tree(pid, Ending::Kill);
                wait_exit(pid, Duration::from_secs(2)).await;
                let log = std::fs::read_to_string(&stderr_path).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(20).collect();
                let stderr = tail.into_iter().rev().collect::<Vec<_>>().join("\n");
                Err(ManagedError::NotReady { secs: READY_WITHIN.as_secs(), why, stderr })
            }
        }
    }

    /// Readiness: `Browser.getVersion` answers over the pipe. The browser
    /// target's id and the browser's version.
    async fn wait_ready(pipe: &Pipe, pid: u32) -> Result<(String, String), String> {
        let version = pipe.call("Browser.getVersion", json!({}), READY_WITHIN).await.map_err(|e| match e {
            CdpError::Closed(_) => "it exited".to_string(),
            CdpError::Timeout(..) => "no answer to Browser.getVersion".to_string(),
            other => other.to_string(),
        })?;
        let info = pipe.call("Target.getTargetInfo", json!({}), Duration::from_secs(5)).await.ok();
        let browser_id = info
            .as_ref()
            .and_then(|i| i["targetInfo"]["targetId"].as_str())
            .map_or_else(|| format!("browser-{pid}"), str::to_string);
        Ok((browser_id, version["product"].as_str().unwrap_or_default().to_string()))
    }

    /// Stops the browser: `Browser.close` (over its pipe, when this process
    /// owns it), then SIGTERM, then SIGKILL to its whole process group. A
    /// no-op when it is not running. An ephemeral profile's folder is then
    /// deleted and the profile forgotten (also when it had crashed).
    pub async fn stop(&self, profile: &Profile) -> Result<BrowserStatus, ManagedError> {
        if !profile.launches() {
            // Not ours to stop: only our connection to it ends.
            self.disconnect_remote(&profile.name).await;
            return Ok(self.status(profile));
        }
        let dir = self.folder(profile);
        let lock = Self::lock(&dir).await?;
        self.stop_locked(profile, &dir).await;
        if profile.ephemeral {
            let removed = remove_locked_folder(&dir, lock);
            self.forget_ephemeral(&profile.name);
            removed.map_err(|source| ManagedError::Profile { path: dir.clone(), source })?;
        }
        Ok(self.status(profile))
    }

    /// `stop` under the profile's lock.
    async fn stop_locked(&self, profile: &Profile, dir: &Path) {
        let pipe = pipes().as_mut().and_then(|p| p.remove(dir));
        let Some(record) = record_in(dir) else { return };
        if !is_ours_on_disk(dir, record.pid) {
            // Crashed, or the pid now belongs to another process: signal
            // nothing, forget the record. A crashed browser's helpers can
            // still be writing into the folder for a moment: let them go
            // first, so that deleting an ephemeral folder does not race
            // them (it did: the folder was left behind).
            wait_tree_gone(record.pid, Duration::from_secs(3)).await;
            let _ = std::fs::remove_file(dir.join(RUN_RECORD));
            return;
        }
        if let Some(pipe) = pipe.filter(|p| !p.is_closed()) {
            let _ = pipe.call("Browser.close", json!({}), Duration::from_secs(2)).await;
        }
        if !wait_exit(record.pid, Duration::from_secs(3)).await {
            end_tree(record.pid, Ending::Ask);
            if !wait_exit(record.pid, Duration::from_millis(2500)).await {
                end_tree(record.pid, Ending::Kill);
                wait_exit(record.pid, Duration::from_secs(2)).await;
            }
        }
        // Helpers that outlived the browser: none may be left when stop
        // returns (no orphans).
        end_tree(record.pid, Ending::Kill);
        wait_tree_gone(record.pid, Duration::from_secs(3)).await;
        let _ = std::fs::remove_file(dir.join(RUN_RECORD));
        tracing::info!(profile = %profile.name, pid = record.pid, "stopped the managed browser");
    }

    /// Stops every browser of `profiles` this process owns, and every
    /// ephemeral profile it started (deleting their folders), all at once
    /// (when `serve` ends: its pipes would close anyway, and the browsers
    /// quit; this waits until they have).
    pub async fn stop_owned<'a>(&self, profiles: impl IntoIterator<Item = &'a Profile>) {
        self.disconnect_remotes().await;
        let mut stops = tokio::task::JoinSet::new();
        let configured = profiles.into_iter().filter(|p| !p.ephemeral && pipe_in(&self.folder(p)).is_some());
        for profile in configured.cloned().chain(self.ephemeral_profiles()) {
            let browsers = self.clone();
            stops.spawn(async move {
                if let Err(error) = browsers.stop(&profile).await {
                    tracing::warn!(profile = %profile.name, "stopping the managed browser: {error}");
                }
            });
        }
        while stops.join_next().await.is_some() {}
    }

    /// Deletes the folders of ephemeral profiles whose process is gone (a
    /// serve killed before it could delete them), killing a browser still
    /// on one. Called when serve starts; folders another live process owns,
    /// or locks for a start or stop under way, are left alone. How many
    /// were deleted.
    pub fn remove_abandoned_ephemeral(&self) -> usize {
        let Ok(entries) = std::fs::read_dir(self.root.join("ephemeral")) else { return 0 };
        let mut removed = 0;
        for dir in entries.filter_map(Result::ok).map(|e| e.path()).filter(|p| p.is_dir()) {
            let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            if self.is_ephemeral(name) {
                continue;
            }
            let Ok(lock) = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(dir.join("lock"))
            else {
                continue;
            };
            if lock.try_lock().is_err() {
                continue;
            }
            let record = record_in(&dir);
            if record.as_ref().is_some_and(|r| r.owner != std::process::id() && is_alive(r.owner)) {
                continue;
            }
            if let Some(record) = record.filter(|r| is_ours_on_disk(&dir, r.pid)) {
                end_tree(record.pid, Ending::Kill);
            }
            if remove_locked_folder(&dir, lock).is_ok() {
                tracing::info!(folder = %dir.display(), "deleted an ephemeral profile's folder left by a serve that was killed");
                removed += 1;
            }
        }
        removed
    }
}

/// The file in a profile's folder that records what runs.
const RUN_RECORD: &str = "run.json";

fn record_in(dir: &Path) -> Option<RunRecord> {
    serde_json::from_slice(&std::fs::read(dir.join(RUN_RECORD)).ok()?).ok()
}

fn pipe_in(dir: &Path) -> Option<Arc<Pipe>> {
    pipes().as_ref()?.get(dir).filter(|p| !p.is_closed()).cloned()
}

/// The browser recorded in the profile folder `dir` still runs: its pid is
/// alive and, where the process table can be read, it is still a browser on
/// this folder (after a reboot the pid may belong to anything; it must
/// never be signalled); its pipe is open (ours) or its owner lives (another
/// process's).
fn is_running_in(dir: &Path, record: &RunRecord) -> bool {
    let piped = if record.owner == std::process::id() { pipe_in(dir).is_some() } else { is_alive(record.owner) };
    piped && is_ours_on_disk(dir, record.pid)
}

/// A process is a browser on the profile folder `dir` (where the system
/// shows a process's command line, Linux; elsewhere a live pid is taken as
/// one).
fn is_ours_on_disk(dir: &Path, pid: u32) -> bool {
    if !is_alive(pid) {
        return false;
    }
    let marker = format!("--user-data-dir={}", dir.join("user-data").display());
    process::has_argument(pid, &marker).unwrap_or(true)
}

/// Whether the open `file` is the one at `path` now.
fn is_same_file(file: &std::fs::File, path: &Path) -> bool {
    let open = file.try_clone().and_then(same_file::Handle::from_file);
    matches!((open, same_file::Handle::from_path(path)), (Ok(open), Ok(now)) if open == now)
}

/// Deletes a profile folder whose `lock` the caller holds: all but the
/// lock under it, then the lock and the folder (Windows deletes no file
/// that is open, nor a folder with one in it). A start that takes the lock
/// meanwhile finds its file deleted and takes a new one ([`ManagedBrowsers::lock`]).
fn remove_locked_folder(dir: &Path, lock: std::fs::File) -> std::io::Result<()> {
    clear_folder_but_lock(dir)?;
    drop(lock);
    std::fs::remove_file(dir.join("lock"))?;
    std::fs::remove_dir(dir)
}

/// Empties a profile folder, keeping the lock its caller holds.
fn clear_folder_but_lock(dir: &Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_name() == "lock" {
            continue;
        }
        match entry.file_type()?.is_dir() {
            true => std::fs::remove_dir_all(entry.path())?,
            false => std::fs::remove_file(entry.path())?,
        }
    }
    Ok(())
}

/// Where a client connects for `profile`, through the relay at
/// `relay_base` (`http://127.0.0.1:PORT`; without the token:
/// `browser-relay cdp-url` prints it with): the relay itself for the
/// extension driver, `/profiles/<name>/` for every managed profile, a
/// remote one included (the relay holds its secrets and its one
/// connection).
pub fn cdp_endpoint(relay_base: &str, profile: &Profile) -> String {
    match profile.driver {
        config::Driver::Extension => format!("{relay_base}/"),
        config::Driver::Managed => format!("{relay_base}/profiles/{}/", profile.name),
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
            "--remote-debugging-pipe",
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
        assert!(!args.iter().any(|a| a.starts_with("--remote-debugging-port")), "no port: {args:?}");
        let headed = launch_args(&profile, Path::new("/p"), false, false);
        assert!(!headed.iter().any(|a| a.starts_with("--headless") || a == "--no-sandbox"));
    }

    #[test]
    fn only_a_linux_without_a_display_is_headless_by_default() {
        use discovery::Platform::{Linux, MacOs, Windows};
        assert!(headless_by_default(Linux, false));
        assert!(!headless_by_default(Linux, true));
        for desktop in [MacOs, Windows] {
            assert!(!headless_by_default(desktop, false) && !headless_by_default(desktop, true), "{desktop:?}");
        }
    }

    #[test]
    fn launches_under_way_count_against_the_cap_of_their_state_directory() {
        let (state, other) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let browsers = ManagedBrowsers::new(state.path()).with_max_running(2);
        let a = browsers.reserve("a").unwrap();
        let _b = browsers.reserve("b").unwrap();
        match browsers.reserve("c") {
            Err(ManagedError::TooManyBrowsers { max: 2, running }) => assert_eq!(running, ["a", "b"]),
            other => panic!("expected the cap's refusal, got {other:?}"),
        }
        drop(a);
        let _c = browsers.reserve("c").expect("a finished launch gives its place back");
        ManagedBrowsers::new(other.path()).with_max_running(1).reserve("a").expect("another serve counts its own");
    }

    #[test]
    fn ephemeral_profiles_are_seen_by_name_and_live_in_a_folder_of_their_own() {
        let state = tempfile::tempdir().unwrap();
        let browsers = ManagedBrowsers::new(state.path());
        let tmp = Profile::ephemeral("tmp").unwrap();
        browsers.register_ephemeral(&tmp);
        let seen = ManagedBrowsers::new(state.path()).config().unwrap();
        assert_eq!(seen.profile(Some("tmp")).unwrap(), &tmp, "every value on the directory sees it");
        assert_eq!(browsers.profile_dir("tmp"), state.path().join("ephemeral/tmp"));
        assert_eq!(browsers.profile_dir("managed"), state.path().join("profiles/managed"));
        assert!(Config::load(state.path()).unwrap().profile(Some("tmp")).is_err(), "config.toml is not written");
        browsers.forget_ephemeral("tmp");
        assert!(browsers.config().unwrap().profile(Some("tmp")).is_err());
        assert_eq!(browsers.profile_dir("tmp"), state.path().join("profiles/tmp"));
    }

    #[test]
    fn only_ephemeral_folders_whose_process_is_gone_are_deleted_at_serve_start() {
        let state = tempfile::tempdir().unwrap();
        let browsers = ManagedBrowsers::new(state.path());
        let mut exited = process::tests::exit_at_once();
        exited.wait().unwrap();
        let mut alive = process::tests::run_for_a_while();
        let folder = |name: &str, owner: Option<u32>| {
            let dir = state.path().join("ephemeral").join(name);
            std::fs::create_dir_all(dir.join("user-data")).unwrap();
            if let Some(owner) = owner {
                let record = RunRecord {
                    pid: owner,
                    owner,
                    browser_id: "x".into(),
                    executable: "/usr/bin/chromium".into(),
                    browser_version: "Chrome/1".into(),
                    started_at: 0,
                };
                std::fs::write(dir.join(RUN_RECORD), serde_json::to_vec(&record).unwrap()).unwrap();
            }
            dir
        };
        let killed = folder("killed", Some(exited.id()));
        let never_ran = folder("never-ran", None);
        let elsewhere = folder("elsewhere", Some(alive.id()));
        let configured = state.path().join("profiles/managed/user-data");
        std::fs::create_dir_all(&configured).unwrap();
        assert_eq!(browsers.remove_abandoned_ephemeral(), 2);
        assert!(!killed.exists() && !never_ran.exists());
        assert!(elsewhere.exists(), "a live process's ephemeral profile is its own");
        assert!(configured.exists(), "config profiles are never touched");
        alive.kill().unwrap();
        alive.wait().unwrap();
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
            owner: std::process::id(),
            browser_id: "x".into(),
            executable: "/usr/bin/true".into(),
            browser_version: "Chrome/1".into(),
            started_at: 0,
        };
        std::fs::write(browsers.profile_dir("managed").join(RUN_RECORD), serde_json::to_vec(&record).unwrap()).unwrap();
        assert_eq!(browsers.status(&profile).state, State::Crashed, "a reused pid is not our browser");
        assert!(matches!(browsers.usable_pipe("managed"), Err(ManagedError::NotRunning(_))));
    }
}
