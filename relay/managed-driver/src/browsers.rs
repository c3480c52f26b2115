//! [`ManagedBrowsers`], one per serve, and what it holds ([`Held`]): the
//! profiles it sees, their folders, the pipes of the browsers it launched,
//! their status, and connections for clients. Starting and stopping are in
//! `launch.rs`, ephemeral profiles in `ephemeral.rs`, browsers it does not
//! launch in `remote.rs`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use cdp_client::Channels;
use settings::{Config, ConfigError, Profile};

use crate::error::ManagedError;
use crate::lock::lock;
use crate::pipe::{Endpoint, Pipe};
use crate::profile_files;
use crate::remotes::{Arrival, Remotes};
use crate::running::{self, RunRecord, record_in};
use crate::status::{BrowserStatus, State};

/// What one serve holds of its browsers: every clone of its
/// [`ManagedBrowsers`] shares it, and nothing else does.
#[derive(Debug)]
pub(crate) struct Held {
    /// This serve among others of the process (see [`RunRecord::serve`]).
    pub(crate) id: u64,
    /// The browsers it launched, by pid.
    pub(crate) children: running::Children,
    /// Their pipes, by profile folder.
    pub(crate) pipes: Mutex<HashMap<PathBuf, Arc<Pipe>>>,
    /// The ephemeral profiles it started and has not stopped.
    pub(crate) ephemeral: Mutex<BTreeMap<String, Profile>>,
    /// Launches under way (from the cap's check until their pipe is
    /// registered): starts at once count each other against the cap.
    /// Taken before `pipes` when both are.
    pub(crate) launching: Mutex<BTreeSet<String>>,
    /// Its connections to browsers it does not launch.
    pub(crate) remotes: Remotes,
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

/// The managed browsers of one serve on one state directory. Made once by
/// the serve and passed: clones share its browsers, a new value starts
/// with none.
#[derive(Debug, Clone)]
pub struct ManagedBrowsers {
    pub(crate) root: PathBuf,
    /// How many browsers `start` lets run at once from this serve.
    pub(crate) max_running: usize,
    pub(crate) held: Arc<Held>,
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
    pub(crate) fn folder(&self, profile: &Profile) -> PathBuf {
        self.root.join(if profile.ephemeral { "ephemeral" } else { "profiles" }).join(&profile.name)
    }

    #[cfg(feature = "testing")]
    pub fn user_data_dir(&self, name: &str) -> PathBuf {
        profile_files::user_data_in(&self.profile_dir(name))
    }

    pub fn record(&self, name: &str) -> Option<RunRecord> {
        record_in(&self.profile_dir(name))
    }

    /// The pipe of the profile's browser, while it runs under this serve.
    #[cfg(feature = "testing")]
    pub fn pipe(&self, name: &str) -> Option<Arc<Pipe>> {
        self.pipe_in(&self.profile_dir(name))
    }

    pub(crate) fn pipe_in(&self, dir: &Path) -> Option<Arc<Pipe>> {
        lock(&self.held.pipes).get(dir).filter(|p| !p.is_closed()).cloned()
    }

    /// Whether this serve launched the browser `record` names (else another
    /// process did, or another serve of this one).
    pub(crate) fn launched(&self, record: &RunRecord) -> bool {
        record.owner == std::process::id() && record.serve == self.held.id
    }

    /// The browser recorded in the profile folder `dir` still runs: its pid
    /// is alive and, where the process table can be read, it is still a
    /// browser on this folder; its pipe is open (ours) or its owner lives
    /// (another process's).
    pub(crate) fn is_running_in(&self, dir: &Path, record: &RunRecord) -> bool {
        let children = &self.held.children;
        let piped = if self.launched(record) { self.pipe_in(dir).is_some() } else { children.owner_lives(record) };
        piped && children.is_browser_on(dir, record)
    }

    /// [`Self::connect_as_of`] for a request that arrives now.
    #[cfg(feature = "testing")]
    pub async fn connect(&self, profile: &Profile, endpoint: Endpoint) -> Result<Channels, ManagedError> {
        self.connect_as_of(profile, endpoint, self.arrival(&profile.name)).await
    }

    /// A new client of the profile's browser (its own session, as a
    /// WebSocket of its own would be): browser-level or one target, for a
    /// request that came at `arrived` and has waited since (see [`Arrival`]).
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{process, running};
    use settings::Config;

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
