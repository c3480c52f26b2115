//! What runs: the browsers one serve launched (reaped when they exit, and
//! their process trees, see `process`), and `run.json`, the record every
//! process on the state directory reads.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::process::{self, Ending, Launched};

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
    /// Which serve of that process (its `ManagedBrowsers`): in one
    /// process, another serve's browser is not this one's either.
    #[serde(default)]
    pub serve: u64,
    /// The browser target's id (for `/devtools/browser/<id>`).
    pub browser_id: String,
    pub executable: PathBuf,
    pub browser_version: String,
    pub started_at: u64,
}

/// The file in a profile's folder that records what runs.
pub(crate) const RUN_RECORD: &str = "run.json";

/// The record in the profile folder `dir`, when there is one that reads.
pub(crate) fn record_in(dir: &Path) -> Option<RunRecord> {
    serde_json::from_slice(&std::fs::read(dir.join(RUN_RECORD)).ok()?).ok()
}

/// Writes `record` whole or not at all: readers do not take the lock.
pub(crate) fn write_record(dir: &Path, record: &RunRecord) -> std::io::Result<()> {
    let text = serde_json::to_vec_pretty(record).expect("serialises");
    let path = dir.join(RUN_RECORD);
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, &path))
}

/// The browsers one serve launched, by pid: reaped when they exit (a
/// zombie still answers `kill(pid, 0)`), and their process tree (on
/// Windows a Job Object, which kills what is left when it drops).
#[derive(Default)]
pub(crate) struct Children(Mutex<HashMap<u32, Launched>>);

impl std::fmt::Debug for Children {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let pids: Vec<u32> = self.held().keys().copied().collect();
        f.debug_tuple("Children").field(&pids).finish()
    }
}

impl Children {
    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<u32, Launched>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn insert(&self, pid: u32, launched: Launched) {
        self.held().insert(pid, launched);
    }

    /// Whether `pid` lives: a child of ours is asked (and reaped), any
    /// other process looked up.
    pub(crate) fn is_alive(&self, pid: u32) -> bool {
        let mut children = self.held();
        if let Some(launched) = children.get_mut(&pid) {
            return match launched.child.try_wait() {
                Ok(None) => true,
                _ => {
                    children.remove(&pid);
                    false
                }
            };
        }
        process::is_alive(pid)
    }

    /// Whether this serve launched the browser `pid` and has not reaped it
    /// (so the pid is still its: a zombie, or a Windows handle, holds it).
    pub(crate) fn holds(&self, pid: u32) -> bool {
        self.held().contains_key(&pid)
    }

    /// Ends the browser `record` names and every helper it started, unless
    /// its pid is no longer that browser's: one this serve launched
    /// (`ours`, as [`Self::holds`] said before any wait) through its tree,
    /// any other only while [`Self::is_browser_on`] still holds, asked
    /// again at each ending (the pid may be handed out again while `stop`
    /// waits for the browser to quit).
    pub(crate) fn end_browser(&self, dir: &Path, record: &RunRecord, ours: bool, ending: Ending) {
        if self.holds(record.pid) {
            return self.end_tree(record.pid, ending);
        }
        if ours {
            // Ours, exited and reaped: its pid is free for anyone. On
            // Windows its Job Object went with it, and its helpers too; on
            // Unix its group lives on while a helper does (no pid is handed
            // out while a group of that id remains).
            if cfg!(unix) && self.tree_alive(record.pid) {
                self.end_tree(record.pid, ending);
            }
            return;
        }
        if self.is_browser_on(dir, record) {
            self.end_tree(record.pid, ending);
        }
    }

    /// Ends the browser `pid` and every helper it started.
    pub(crate) fn end_tree(&self, pid: u32, ending: Ending) {
        let children = self.held();
        process::end_tree(pid, children.get(&pid).map(|l| &l.tree), ending);
    }

    /// Whether any live process remains of the browser `pid`'s tree.
    fn tree_alive(&self, pid: u32) -> bool {
        let children = self.held();
        process::tree_alive(pid, children.get(&pid).map(|l| &l.tree))
    }

    /// Waits (up to `within`) until no live process remains of the browser
    /// `pid`'s tree; a process gives no event to await from here.
    pub(crate) async fn wait_tree_gone(&self, pid: u32, within: Duration) {
        let deadline = Instant::now() + within;
        while self.tree_alive(pid) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits until `pid` is gone, up to `within`; whether it is.
    pub(crate) async fn wait_exit(&self, pid: u32, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        while self.is_alive(pid) {
            if Instant::now() > deadline {
                return false;
            }
            // A process that is not our child gives no event to await.
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        true
    }

    /// Whether `pid` is still the process that started at `started` (a
    /// record without a start takes any live pid, as records did before
    /// they kept one). A live process whose start cannot be read (another
    /// user's) counts as `unreadable`.
    fn is_process(&self, pid: u32, started: Option<u64>, unreadable: bool) -> bool {
        self.is_alive(pid)
            && started.is_none_or(|started| process::started(pid).map_or(unreadable, |now| now == started))
    }

    /// Removes the singleton folder a browser gone from the profile folder
    /// `dir` left in the temporary folder
    /// ([`crate::profile_files::remove_singleton_folder`], with this
    /// process's view of which pids are alive).
    pub(crate) fn remove_singleton_folder(&self, dir: &Path) {
        let user_data = crate::profile_files::user_data_in(dir);
        crate::profile_files::remove_singleton_folder(&user_data, &crate::profile_files::this_host(), |pid| {
            self.is_alive(pid)
        });
    }

    /// Whether `record`'s pid now belongs to another process: alive, with
    /// another start than the record's.
    pub(crate) fn is_reused(&self, record: &RunRecord) -> bool {
        self.is_alive(record.pid)
            && record.pid_started.is_some_and(|started| process::started(record.pid).is_some_and(|now| now != started))
    }

    /// Whether the process that launched `record`'s browser still runs.
    /// One whose start cannot be read is taken to: what depends on this
    /// leaves the browser and its folder alone.
    pub(crate) fn owner_lives(&self, record: &RunRecord) -> bool {
        self.is_process(record.owner, record.owner_started, true)
    }

    /// Whether `record`'s browser still runs on the profile folder `dir`:
    /// its pid alive, started when the record says and, where the system
    /// shows a process's command line (Linux), started on this folder.
    /// After a reboot, or on Windows within minutes, a recorded pid may
    /// belong to anything: it must never be signalled.
    pub(crate) fn is_browser_on(&self, dir: &Path, record: &RunRecord) -> bool {
        // One whose start cannot be read is not ours to signal.
        if !self.is_process(record.pid, record.pid_started, false) {
            return false;
        }
        let marker = format!("--user-data-dir={}", crate::profile_files::user_data_in(dir).display());
        process::has_argument(record.pid, &marker).unwrap_or(true)
    }
}
