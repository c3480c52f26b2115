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
//! **State.** One [`ManagedBrowsers`] per serve, made once and passed
//! (its clones share it): it holds the pipes of the browsers that serve
//! launched, their processes, its ephemeral profiles, its launches under
//! way and its connections to remote browsers. A new value is a new, empty
//! set. What runs is also recorded in `profiles/<name>/run.json`
//! ([`RunRecord`], with the owning process), so other processes on the same
//! state directory see it running (and can stop it by signal, not use it).
//! `start` and `stop` hold an exclusive lock on `profiles/<name>/lock` from
//! their check to their last write: two starts at once launch one browser.
//!
//! The code: `launch.rs` (start, stop, the flags), `running.rs` (the
//! processes and `run.json`), `ephemeral.rs`, `remote.rs` (browsers it
//! does not launch), `pipe.rs`, and `process/`, the seam per system.
//!
//! **Start.** An extension profile is refused; a profile that does not
//! [`Profile::launches`] (attach-only, a `cdpUrl`) is never launched, only
//! connected to ([`remote`]: one multiplexed connection per profile, which
//! every client shares). Otherwise, under the lock: a
//! running browser makes `start` a no-op; [`discovery::discover`] picks the
//! executable; [`profile_files::decorate`] writes the profile's name and
//! colour into Chrome's own files; Chrome's stderr goes to
//! `chrome-stderr.log`; the browser is spawned with [`launch::launch_args`] in a
//! tree of its own (a process group; on Windows a Job Object), so `stop`
//! reaches every helper and a Ctrl-C aimed at the terminal does not.
//!
//! **Readiness.** The pipe's probe (`Browser.getVersion`, and the
//! browser target's id) answered within [`READY_WITHIN`]. A browser that exits or stays silent is killed and
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
//! **Launch flags** ([`launch::launch_args`]): the profile's `--user-data-dir`,
//! `--remote-debugging-pipe` (never a port), `--no-first-run`,
//! `--no-default-browser-check`, `--disable-sync`,
//! `--disable-background-networking`, `--disable-component-update`,
//! `--disable-features=Translate,MediaRouter`,
//! `--disable-session-crashed-bubble`, `--hide-crash-restore-bubble`,
//! `--password-store=basic`, `--use-mock-keychain` (no system keyring or
//! Keychain prompt); `--headless=new` when headless (by default
//! when Linux has no display); `--no-sandbox --disable-dev-shm-usage` when
//! asked or when running as root (Chrome refuses otherwise); the profile's
//! `args`; `about:blank`.

mod discovery;
mod ephemeral;
mod launch;
mod pipe;
mod process;
mod profile_files;
mod remote;
mod running;
mod served;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use cdp_client::{CdpError, Channels};
pub use discovery::{CHROME_ENV, DiscoveryError, find_executable};
pub use launch::launch_args;
pub use pipe::{Endpoint, Pipe, PipeClient};
pub use remote::Arrival;
use running::record_in;
pub use served::ServedError;
use settings::{Config, ConfigError, Profile};

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
    /// When `pid` started, as the system counts (`process::started`): a pid
    /// is handed out again once its process ends, so after a reboot, or
    /// within minutes on Windows, the pid alone may name anything. `None`
    /// in a record written before it was kept.
    #[serde(default)]
    pub pid_started: Option<u64>,
    /// The process that launched it and holds its pipe.
    pub owner: u32,
    /// When `owner` started, likewise.
    #[serde(default)]
    pub owner_started: Option<u64>,
    /// Which serve of that process (its [`ManagedBrowsers`]): in one
    /// process, another serve's browser is not this one's either.
    #[serde(default)]
    pub serve: u64,
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

/// What one serve holds of its browsers: every clone of its
/// [`ManagedBrowsers`] shares it, and nothing else does.
#[derive(Debug)]
struct Held {
    /// This serve among others of the process (see [`RunRecord::serve`]).
    id: u64,
    /// The browsers it launched, by pid.
    children: running::Children,
    /// Their pipes, by profile folder.
    pipes: Mutex<HashMap<PathBuf, Arc<Pipe>>>,
    /// The ephemeral profiles it started and has not stopped.
    ephemeral: Mutex<BTreeMap<String, Profile>>,
    /// Launches under way (from the cap's check until their pipe is
    /// registered): starts at once count each other against the cap.
    /// Taken before `pipes` when both are.
    launching: Mutex<BTreeSet<String>>,
    /// Its connections to browsers it does not launch.
    remotes: remote::Remotes,
}

impl Default for Held {
    fn default() -> Self {
        // Random: unique among the serves of one process (and nothing
        // else reads it). Without a random source, when it was made.
        let made =
            || std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64);
        Self {
            id: getrandom::u64().unwrap_or_else(|_| made()),
            children: Default::default(),
            pipes: Default::default(),
            ephemeral: Default::default(),
            launching: Default::default(),
            remotes: Default::default(),
        }
    }
}

/// A lock that a panic elsewhere does not poison for good.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// The managed browsers of one serve on one state directory. Made once by
/// the serve and passed: clones share its browsers, a new value starts
/// with none.
#[derive(Debug, Clone)]
pub struct ManagedBrowsers {
    root: PathBuf,
    /// How many browsers `start` lets run at once from this serve.
    max_running: usize,
    held: Arc<Held>,
}

impl ManagedBrowsers {
    pub fn new(state_root: &Path) -> Self {
        Self {
            root: state_root.to_path_buf(),
            max_running: settings::DEFAULT_MAX_MANAGED_BROWSERS,
            held: Arc::default(),
        }
    }

    /// The state directory.
    pub fn root(&self) -> &Path {
        &self.root
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
        profile_files::user_data_in(&self.profile_dir(name))
    }

    pub fn record(&self, name: &str) -> Option<RunRecord> {
        record_in(&self.profile_dir(name))
    }

    /// The pipe of the profile's browser, while it runs under this serve.
    pub fn pipe(&self, name: &str) -> Option<Arc<Pipe>> {
        self.pipe_in(&self.profile_dir(name))
    }

    fn pipe_in(&self, dir: &Path) -> Option<Arc<Pipe>> {
        lock(&self.held.pipes).get(dir).filter(|p| !p.is_closed()).cloned()
    }

    /// Whether this serve launched the browser `record` names (else another
    /// process did, or another serve of this one).
    fn launched(&self, record: &RunRecord) -> bool {
        record.owner == std::process::id() && record.serve == self.held.id
    }

    /// The browser recorded in the profile folder `dir` still runs: its pid
    /// is alive and, where the process table can be read, it is still a
    /// browser on this folder; its pipe is open (ours) or its owner lives
    /// (another process's).
    fn is_running_in(&self, dir: &Path, record: &RunRecord) -> bool {
        let children = &self.held.children;
        let piped = if self.launched(record) { self.pipe_in(dir).is_some() } else { children.owner_lives(record) };
        piped && children.is_browser_on(dir, record)
    }

    /// A new client of the profile's browser (its own session, as a
    /// WebSocket of its own would be): browser-level or one target.
    pub async fn connect(&self, profile: &Profile, endpoint: Endpoint) -> Result<Channels, ManagedError> {
        self.connect_as_of(profile, endpoint, self.arrival(&profile.name)).await
    }

    /// [`Self::connect`] for a request that came at `arrived` and has
    /// waited since (see [`Arrival`]).
    pub async fn connect_as_of(
        &self,
        profile: &Profile,
        endpoint: Endpoint,
        arrived: Arrival,
    ) -> Result<Channels, ManagedError> {
        let pipe = self.pipe_as_of(profile, arrived).await?;
        pipe.connect(endpoint).await.map_err(|source| ManagedError::Cdp { profile: profile.name.clone(), source })
    }

    /// The connection every client of the profile's browser shares: the
    /// pipe of a browser this process launched, or the connection to a
    /// remote one ([`Self::remote`], opened if need be).
    pub async fn pipe_for(&self, profile: &Profile) -> Result<Arc<Pipe>, ManagedError> {
        self.pipe_as_of(profile, self.arrival(&profile.name)).await
    }

    async fn pipe_as_of(&self, profile: &Profile, arrived: Arrival) -> Result<Arc<Pipe>, ManagedError> {
        match profile.launches() {
            true => self.usable_pipe(&profile.name),
            false => self.remote_as_of(profile, arrived).await,
        }
    }

    /// The pipe, or why the browser cannot be used from this process.
    pub fn usable_pipe(&self, name: &str) -> Result<Arc<Pipe>, ManagedError> {
        let dir = self.profile_dir(name);
        if let Some(pipe) = self.pipe_in(&dir) {
            return Ok(pipe);
        }
        match record_in(&dir) {
            Some(record) if !self.launched(&record) && self.is_running_in(&dir, &record) => {
                Err(ManagedError::OwnedElsewhere { profile: name.into(), owner: record.owner })
            }
            _ => Err(ManagedError::NotRunning(name.into())),
        }
    }

    pub fn status(&self, profile: &Profile) -> BrowserStatus {
        let dir = self.folder(profile);
        let user_data_dir = Some(profile_files::user_data_in(&dir));
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
                Some(url) => {
                    format!("{connected} to {}; Browser Relay never launches it", settings::redacted_url(&url))
                }
                None => "your own Chrome, through the extension".into(),
            };
            return status;
        }
        if let Some(record) = record_in(&dir) {
            status.pid = Some(record.pid);
            status.executable = Some(record.executable.clone());
            status.browser_version = Some(record.browser_version.clone());
            if self.is_running_in(&dir, &record) {
                status.state = State::Running;
                status.detail = if self.launched(&record) {
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
}

/// Where a client connects for `profile`, through the relay at
/// `relay_base` (`http://127.0.0.1:PORT`; without the token:
/// `browser-relay cdp-url` prints it with): the relay itself for the
/// extension driver, `/profiles/<name>/` for every managed profile, a
/// remote one included (the relay holds its secrets and its one
/// connection).
pub fn cdp_endpoint(relay_base: &str, profile: &Profile) -> String {
    match profile.driver {
        settings::Driver::Extension => format!("{relay_base}/"),
        settings::Driver::Managed => format!("{relay_base}/profiles/{}/", profile.name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ephemeral_profiles_are_seen_by_name_and_live_in_a_folder_of_their_own() {
        let state = tempfile::tempdir().unwrap();
        let browsers = ManagedBrowsers::new(state.path());
        let tmp = Profile::ephemeral("tmp").unwrap();
        browsers.register_ephemeral(&tmp);
        let seen = browsers.clone().config().unwrap();
        assert_eq!(seen.profile(Some("tmp")).unwrap(), &tmp, "every clone of the serve's browsers sees it");
        assert!(
            ManagedBrowsers::new(state.path()).config().unwrap().profile(Some("tmp")).is_err(),
            "another serve does not"
        );
        assert_eq!(browsers.profile_dir("tmp"), state.path().join("ephemeral/tmp"));
        assert_eq!(browsers.profile_dir("managed"), state.path().join("profiles/managed"));
        assert!(Config::load(state.path()).unwrap().profile(Some("tmp")).is_err(), "config.toml is not written");
        browsers.forget_ephemeral("tmp");
        assert!(browsers.config().unwrap().profile(Some("tmp")).is_err());
        assert_eq!(browsers.profile_dir("tmp"), state.path().join("profiles/tmp"));
    }

    /// A record of `pid` launched by `owner`, another serve's, with the
    /// starts given (`None`: a record from before starts were kept).
    fn record_of(pid: u32, pid_started: Option<u64>, owner: u32, owner_started: Option<u64>) -> RunRecord {
        RunRecord {
            pid,
            pid_started,
            owner,
            owner_started,
            serve: 0,
            browser_id: "x".into(),
            executable: "/usr/bin/chromium".into(),
            browser_version: "Chrome/1".into(),
            started_at: 0,
        }
    }

    fn put_record(dir: &Path, record: &RunRecord) {
        std::fs::write(dir.join(running::RUN_RECORD), serde_json::to_vec(record).unwrap()).unwrap();
    }

    #[tokio::test]
    async fn only_ephemeral_folders_whose_process_is_gone_are_deleted_at_serve_start() {
        let state = tempfile::tempdir().unwrap();
        let browsers = ManagedBrowsers::new(state.path());
        let mut exited = process::tests::exit_at_once();
        exited.wait().unwrap();
        let mut alive = process::tests::run_for_a_while();
        let alive_started = process::started(alive.0.id());
        let folder = |name: &str, record: Option<RunRecord>| {
            let dir = state.path().join("ephemeral").join(name);
            std::fs::create_dir_all(dir.join("user-data")).unwrap();
            if let Some(record) = record {
                put_record(&dir, &record);
            }
            dir
        };
        let killed = folder("killed", Some(record_of(exited.id(), None, exited.id(), None)));
        let never_ran = folder("never-ran", None);
        let alive_pid = alive.0.id();
        let elsewhere = folder("elsewhere", Some(record_of(alive_pid, alive_started, alive_pid, alive_started)));
        let from_before_starts = folder("from-before-starts", Some(record_of(alive_pid, None, alive_pid, None)));
        // The pid of a serve killed long ago, handed out again to another
        // process (here `alive`).
        let wrong = alive_started.map(|s| s + 1);
        let reused = folder("reused", Some(record_of(alive_pid, wrong, alive_pid, wrong)));
        let configured = state.path().join("profiles/managed/user-data");
        std::fs::create_dir_all(&configured).unwrap();
        assert_eq!(browsers.remove_abandoned_ephemeral().await, 3);
        assert!(!killed.exists() && !never_ran.exists());
        assert!(elsewhere.exists(), "a live process's ephemeral profile is its own");
        assert!(from_before_starts.exists(), "a record without starts takes a live pid as its own");
        assert!(!reused.exists(), "a pid that started at another time is another process: its folder is abandoned");
        assert!(matches!(alive.0.try_wait(), Ok(None)), "and the process now on that pid was not signalled");
        assert!(configured.exists(), "config profiles are never touched");
    }

    /// The attack: a link planted at `<state>/ephemeral/<name>` (or at
    /// `<state>/ephemeral`) to a folder of the user's. Serve's start, an
    /// ephemeral start and its stop empty or delete that folder: through a
    /// link, that would be the user's Documents.
    #[cfg(unix)]
    #[tokio::test]
    async fn nothing_is_emptied_or_deleted_through_a_link_in_the_ephemeral_folder() {
        let state = tempfile::tempdir().unwrap();
        let documents = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(documents.path().join("photos")).unwrap();
        std::fs::write(documents.path().join("thesis.txt"), "years of work").unwrap();
        std::fs::write(documents.path().join("photos/cat.jpg"), "meow").unwrap();
        let kept = |why: &str| {
            assert_eq!(std::fs::read_to_string(documents.path().join("thesis.txt")).unwrap(), "years of work", "{why}");
            assert!(documents.path().join("photos/cat.jpg").exists(), "{why}");
        };
        let browsers = ManagedBrowsers::new(state.path());
        let ephemeral = state.path().join("ephemeral");
        std::fs::create_dir_all(&ephemeral).unwrap();
        let link = ephemeral.join("x");
        std::os::unix::fs::symlink(documents.path(), &link).unwrap();

        assert_eq!(browsers.remove_abandoned_ephemeral().await, 0);
        kept("serve's start");
        assert!(std::fs::symlink_metadata(&link).is_ok(), "the link itself is left for the user to see");

        let profile = Profile::ephemeral("x").unwrap();
        let refused = browsers.start(&profile).await.unwrap_err();
        assert!(refused.to_string().contains("is a link"), "{refused}");
        kept("an ephemeral start on the link");
        let refused = browsers.stop(&profile).await.unwrap_err();
        assert!(refused.to_string().contains("is a link"), "{refused}");
        kept("an ephemeral stop on the link");
        assert!(!documents.path().join("lock").exists(), "no lock file written through the link either");

        // The folder that holds them, a link itself.
        std::fs::remove_file(&link).unwrap();
        std::fs::remove_dir(&ephemeral).unwrap();
        std::fs::create_dir_all(documents.path().join("y/user-data")).unwrap();
        std::os::unix::fs::symlink(documents.path(), &ephemeral).unwrap();
        assert_eq!(browsers.remove_abandoned_ephemeral().await, 0);
        assert!(documents.path().join("y/user-data").exists(), "a subfolder of the linked folder is no profile");
        kept("serve's start, the ephemeral folder a link");
        let refused = browsers.start(&Profile::ephemeral("y").unwrap()).await.unwrap_err();
        assert!(refused.to_string().contains("is a link"), "{refused}");
        assert!(documents.path().join("y/user-data").exists());
    }

    #[test]
    fn a_record_from_before_starts_were_kept_still_reads() {
        let written_before = r#"{"pid": 4242, "owner": 4241, "serve": 7, "browserId": "b", "executable": "/usr/bin/chromium",
            "browserVersion": "Chrome/1", "startedAt": 1}"#;
        let record: RunRecord = serde_json::from_str(written_before).unwrap();
        assert_eq!((record.pid, record.pid_started, record.owner, record.owner_started), (4242, None, 4241, None));
    }

    #[test]
    fn a_recorded_pid_now_held_by_another_process_is_never_signalled() {
        let state = tempfile::tempdir().unwrap();
        let browsers = ManagedBrowsers::new(state.path());
        let profile = settings::Config::defaults().profile(Some("managed")).unwrap().clone();
        let dir = browsers.profile_dir("managed");
        std::fs::create_dir_all(&dir).unwrap();
        // A process on the browser's pid, with (where the system shows it)
        // the browser's command line: only its start can tell it apart.
        let stand_in =
            process::tests::run_for_a_while_with(Some(&format!("--user-data-dir={}", dir.join("user-data").display())));
        let (pid, me) = (stand_in.0.id(), std::process::id());
        let (pid_started, my_start) = (process::started(pid), process::started(me));
        let later = |start: Option<u64>| start.map(|s| s + 1);

        put_record(&dir, &record_of(pid, pid_started, me, my_start));
        assert_eq!(browsers.status(&profile).state, State::Running, "the process the record saw start");
        assert!(matches!(browsers.usable_pipe("managed"), Err(ManagedError::OwnedElsewhere { .. })));

        put_record(&dir, &record_of(pid, pid_started, me, later(my_start)));
        assert_eq!(browsers.status(&profile).state, State::Crashed, "its owner's pid started at another time: gone");
        assert!(matches!(browsers.usable_pipe("managed"), Err(ManagedError::NotRunning(_))));

        put_record(&dir, &record_of(pid, later(pid_started), me, my_start));
        assert_eq!(browsers.status(&profile).state, State::Crashed, "its pid started at another time: not our browser");
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(browsers.stop(&profile)).unwrap();
        let mut stand_in = stand_in;
        assert!(matches!(stand_in.0.try_wait(), Ok(None)), "stop signalled nothing");
        assert!(running::record_in(&dir).is_none(), "and forgot the record");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_recorded_pid_that_is_not_our_browser_is_never_running() {
        let state = tempfile::tempdir().unwrap();
        let browsers = ManagedBrowsers::new(state.path());
        let profile = settings::Config::defaults().profile(Some("managed")).unwrap().clone();
        std::fs::create_dir_all(browsers.profile_dir("managed")).unwrap();
        // This test process is alive, started when the record says, and
        // launched by a serve that lives (another of this process): only
        // its command line, no browser's on this profile, tells.
        let me = std::process::id();
        let record = record_of(me, process::started(me), me, process::started(me));
        put_record(&browsers.profile_dir("managed"), &record);
        assert_eq!(browsers.status(&profile).state, State::Crashed, "a reused pid is not our browser");
        assert!(matches!(browsers.usable_pipe("managed"), Err(ManagedError::NotRunning(_))));
    }
}
