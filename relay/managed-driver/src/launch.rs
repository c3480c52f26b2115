//! `start` and `stop`: under the profile folder's lock, a browser launched
//! with [`launch_args`] in a process tree of its own and made ready over
//! its pipe, or ended (`Browser.close`, then the tree), within the serve's
//! cap on browsers at once.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use cdp_client::CdpError;
use cdp_client::protocol::browser;

use crate::browsers::ManagedBrowsers;
use crate::discovery;
use crate::ephemeral::{clear_folder_but_lock, refuse_links_to, remove_locked_folder};
use crate::error::ManagedError;
use crate::lock::lock;
use crate::pipe::Pipe;
use crate::process::{self, Ending};
use crate::profile_files;
use crate::running::{RUN_RECORD, RunRecord, record_in, write_record};
use crate::status::{BrowserStatus, State};
use settings::Profile;

/// How long a launched browser has to answer `Browser.getVersion`.
pub const READY_WITHIN: Duration = Duration::from_secs(15);

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
        // The isolated profile keeps its own secrets, never the system's
        // keyring: on Linux no desktop keyring prompt, on macOS no Keychain
        // prompt to use "Chromium Safe Storage" (what Playwright and
        // Puppeteer pass too). The state folder is the user's alone.
        "--password-store=basic".into(),
        "--use-mock-keychain".into(),
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

/// A launch's place under the cap, given back when it drops (its browser
/// then counts by its pipe, or did not start).
#[derive(Debug)]
pub(crate) struct LaunchSlot {
    browsers: ManagedBrowsers,
    name: String,
}

impl Drop for LaunchSlot {
    fn drop(&mut self) {
        lock(&self.browsers.held.launching).remove(&self.name);
    }
}

/// A browser spawned and not yet ready.
struct Spawned {
    pid: u32,
    /// When it started (`process::started`), read at once: the start of
    /// the very process spawned.
    started: Option<u64>,
    pipe: Arc<Pipe>,
    executable: PathBuf,
    stderr_log: PathBuf,
}

impl ManagedBrowsers {
    /// Holds the lock of the profile folder `dir` (start/stop) until the
    /// returned file drops.
    pub(crate) async fn lock_folder(dir: &Path) -> Result<std::fs::File, ManagedError> {
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

    /// The names of the browsers running under this serve now, and of
    /// those being launched.
    fn running_here(&self, launching: &BTreeSet<String>) -> BTreeSet<String> {
        let pipes = lock(&self.held.pipes);
        let running = pipes.iter().filter(|(_, pipe)| !pipe.is_closed());
        running
            .filter_map(|(dir, _)| dir.file_name()?.to_str().map(str::to_string))
            .chain(launching.iter().cloned())
            .collect()
    }

    /// A place under the cap for launching `name`, or the refusal that
    /// names what runs.
    pub(crate) fn reserve(&self, name: &str) -> Result<LaunchSlot, ManagedError> {
        let mut launching = lock(&self.held.launching);
        let running = self.running_here(&launching);
        if running.len() >= self.max_running {
            return Err(ManagedError::TooManyBrowsers {
                max: self.max_running,
                running: running.into_iter().collect(),
            });
        }
        launching.insert(name.to_string());
        Ok(LaunchSlot { browsers: self.clone(), name: name.to_string() })
    }

    /// Starts the profile's browser; a no-op when it already runs. An
    /// ephemeral profile is registered for this serve first, launched on a
    /// clean folder, and forgotten (its folder deleted) if it cannot start.
    pub async fn start(&self, profile: &Profile) -> Result<BrowserStatus, ManagedError> {
        if profile.driver == settings::Driver::Extension {
            return Err(ManagedError::ExtensionProfile(profile.name.clone()));
        }
        if !profile.launches() {
            self.remote(profile).await?;
            return Ok(self.status(profile));
        }
        let dir = self.folder(profile);
        if profile.ephemeral {
            // Its folder is emptied before the launch: never through a link.
            refuse_links_to(&dir).map_err(|source| ManagedError::Profile { path: dir.clone(), source })?;
        }
        let lock = Self::lock_folder(&dir).await?;
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

    /// `start` under the profile's lock: a running browser is the answer;
    /// else, under the cap, the folder made ready, the browser spawned and,
    /// once it answers, kept and recorded.
    async fn launch_locked(&self, profile: &Profile, dir: &Path) -> Result<BrowserStatus, ManagedError> {
        if self.status(profile).state == State::Running {
            return match record_in(dir) {
                Some(record) if !self.launched(&record) => {
                    Err(ManagedError::OwnedElsewhere { profile: profile.name.clone(), owner: record.owner })
                }
                _ => Ok(self.status(profile)),
            };
        }
        let _slot = self.reserve(&profile.name)?;
        self.prepare_folder(profile, dir).await?;
        let spawned = self.spawn(profile, dir)?;
        match Self::wait_ready(&spawned).await {
            Ok((browser_id, browser_version)) => {
                let record = RunRecord {
                    pid: spawned.pid,
                    pid_started: spawned.started,
                    owner: std::process::id(),
                    owner_started: process::started(std::process::id()),
                    serve: self.held.id,
                    browser_id,
                    executable: spawned.executable,
                    browser_version,
                    started_at: std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| d.as_secs()),
                };
                lock(&self.held.pipes).insert(dir.to_path_buf(), spawned.pipe);
                write_record(dir, &record)
                    .map_err(|source| ManagedError::Profile { path: dir.to_path_buf(), source })?;
                Ok(self.status(profile))
            }
            Err(why) => {
                let children = &self.held.children;
                children.end_tree(spawned.pid, Ending::Kill);
                children.wait_exit(spawned.pid, Duration::from_secs(2)).await;
                let log = std::fs::read_to_string(&spawned.stderr_log).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(20).collect();
                let stderr = tail.into_iter().rev().collect::<Vec<_>>().join("\n");
                Err(ManagedError::NotReady { secs: READY_WITHIN.as_secs(), why, stderr })
            }
        }
    }

    /// A browser left on this profile's folder (its owner died and it has
    /// not quit yet) would take the new launch over: it is ended first. An
    /// ephemeral run starts clean: whatever a crashed run, or a serve
    /// killed before it could delete the folder, left is removed.
    async fn prepare_folder(&self, profile: &Profile, dir: &Path) -> Result<(), ManagedError> {
        let children = &self.held.children;
        if let Some(record) = record_in(dir) {
            if children.is_browser_on(dir, &record) {
                children.end_browser(dir, &record, children.holds(record.pid), Ending::Kill);
                children.wait_exit(record.pid, Duration::from_secs(2)).await;
            } else if !children.is_reused(&record) {
                // A crashed browser's helpers outlive it for a moment, the
                // profile's files still open: the new browser waits for them.
                children.wait_tree_gone(record.pid, Duration::from_secs(3)).await;
            }
        }
        // A crashed or killed browser left its singleton folder behind.
        children.remove_singleton_folder(dir);
        if profile.ephemeral {
            clear_folder_but_lock(dir).map_err(|source| ManagedError::Profile { path: dir.to_path_buf(), source })?;
        }
        Ok(())
    }

    /// The executable found, the profile's name and colour written into
    /// Chrome's files, and the browser spawned with its pipe, its stderr
    /// to `chrome-stderr.log`.
    fn spawn(&self, profile: &Profile, dir: &Path) -> Result<Spawned, ManagedError> {
        let executable = discovery::find_executable(profile.executable_path.as_deref())?;
        let user_data_dir = profile_files::user_data_in(dir);
        let profile_io = |source| ManagedError::Profile { path: user_data_dir.clone(), source };
        profile_files::decorate(&user_data_dir, &profile.name, &profile.color).map_err(profile_io)?;
        let stderr_log = dir.join("chrome-stderr.log");
        let stderr = std::fs::File::create(&stderr_log).map_err(profile_io)?;
        let args = launch_args(profile, &user_data_dir, resolve_headless(profile), resolve_no_sandbox(profile));
        let spawn_error = |source| ManagedError::Spawn { executable: executable.clone(), source };
        let (launched, to_browser, from_browser) =
            process::spawn_with_pipe(&executable, &args, stderr).map_err(spawn_error)?;
        let pid = launched.child.id();
        let started = process::started(pid);
        self.held.children.insert(pid, launched);
        tracing::info!(profile = %profile.name, pid, executable = %executable.display(), "launched the managed browser");
        Ok(Spawned { pid, started, pipe: Pipe::start(to_browser, from_browser), executable, stderr_log })
    }

    /// Readiness: the pipe's probe answers within [`READY_WITHIN`]. The
    /// browser target's id and the browser's version, or why not.
    async fn wait_ready(spawned: &Spawned) -> Result<(String, String), String> {
        let (version, browser_id) = spawned.pipe.probe(READY_WITHIN).await.map_err(|e| match e {
            CdpError::Closed(_) => "it exited".to_string(),
            CdpError::Timeout(..) => "no answer to Browser.getVersion".to_string(),
            other => other.to_string(),
        })?;
        Ok((browser_id.unwrap_or_else(|| format!("browser-{}", spawned.pid)), version.product))
    }

    /// Stops the browser: `Browser.close` (over its pipe, when this serve
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
        if profile.ephemeral {
            // Its folder is deleted after the stop: never through a link.
            refuse_links_to(&dir).map_err(|source| ManagedError::Profile { path: dir.clone(), source })?;
        }
        let lock = Self::lock_folder(&dir).await?;
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
        let pipe = lock(&self.held.pipes).remove(dir);
        let Some(record) = record_in(dir) else { return };
        let children = &self.held.children;
        let ours = children.holds(record.pid);
        if !children.is_browser_on(dir, &record) {
            // Crashed, or the pid now belongs to another process: signal
            // nothing, forget the record. A crashed browser's helpers can
            // still be writing into the folder for a moment: let them go
            // first, so that deleting an ephemeral folder does not race
            // them (it did: the folder was left behind). Also a browser
            // still dying, whose command line is gone already. Only a pid
            // in use by another process (another start) names another
            // group, not theirs (no pid is handed out while a group of
            // that id remains): nothing to wait for then.
            if !children.is_reused(&record) {
                children.wait_tree_gone(record.pid, Duration::from_secs(3)).await;
            }
            children.remove_singleton_folder(dir);
            let _ = std::fs::remove_file(dir.join(RUN_RECORD));
            return;
        }
        if let Some(pipe) = pipe.filter(|p| !p.is_closed()) {
            let _ = pipe.send(&browser::Close {}, Duration::from_secs(2)).await;
        }
        if !children.wait_exit(record.pid, Duration::from_secs(3)).await {
            children.end_browser(dir, &record, ours, Ending::Ask);
            if !children.wait_exit(record.pid, Duration::from_millis(2500)).await {
                children.end_browser(dir, &record, ours, Ending::Kill);
                children.wait_exit(record.pid, Duration::from_secs(2)).await;
            }
        }
        // Helpers that outlived the browser: none may be left when stop
        // returns (no orphans). Another serve's browser that quit took its
        // helpers along (its pid may now be another process's).
        children.end_browser(dir, &record, ours, Ending::Kill);
        children.wait_tree_gone(record.pid, Duration::from_secs(3)).await;
        // Killed, it left its singleton folder (quit in order, it did not).
        children.remove_singleton_folder(dir);
        let _ = std::fs::remove_file(dir.join(RUN_RECORD));
        tracing::info!(profile = %profile.name, pid = record.pid, "stopped the managed browser");
    }

    /// Stops every browser of `profiles` this serve owns, and every
    /// ephemeral profile it started (deleting their folders), all at once
    /// (when `serve` ends: its pipes would close anyway, and the browsers
    /// quit; this waits until they have).
    pub async fn stop_owned<'a>(&self, profiles: impl IntoIterator<Item = &'a Profile>) {
        self.disconnect_remotes().await;
        let mut stops = tokio::task::JoinSet::new();
        let configured = profiles.into_iter().filter(|p| !p.ephemeral && self.pipe_in(&self.folder(p)).is_some());
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
}

/// Whether the open `file` is the one at `path` now.
fn is_same_file(file: &std::fs::File, path: &Path) -> bool {
    let open = file.try_clone().and_then(same_file::Handle::from_file);
    matches!((open, same_file::Handle::from_path(path)), (Ok(open), Ok(now)) if open == now)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launch_flags_isolate_and_never_use_9222() {
        let profile = settings::Config::defaults().profile(Some("managed")).unwrap().clone();
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
            "--use-mock-keychain",
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
    fn launches_under_way_count_against_the_cap_of_their_serve() {
        let (state, other) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let browsers = ManagedBrowsers::new(state.path()).with_max_running(2);
        let a = browsers.reserve("a").unwrap();
        let _b = browsers.clone().reserve("b").expect("a clone is the same serve");
        match browsers.reserve("c") {
            Err(ManagedError::TooManyBrowsers { max: 2, running }) => assert_eq!(running, ["a", "b"]),
            other => panic!("expected the cap's refusal, got {other:?}"),
        }
        drop(a);
        let _c = browsers.reserve("c").expect("a finished launch gives its place back");
        ManagedBrowsers::new(other.path()).with_max_running(1).reserve("a").expect("another serve counts its own");
        ManagedBrowsers::new(state.path()).with_max_running(1).reserve("d").expect("even on the same directory");
    }
}
