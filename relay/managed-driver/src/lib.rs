//! The managed driver: an isolated Chrome that Browser Relay launches and
//! owns, with its own profile under the state directory.
//!
//! **No port: a pipe.** The browser speaks CDP only over
//! `--remote-debugging-pipe` (its fds 3 and 4; on Windows two inherited
//! handles, see `process`), to the process that launched it ([`pipe`]): no other local user or process can reach it,
//! and when that process exits the pipe closes and the browser quits. Every
//! client (the relay's `/profiles/<name>/` sockets, the control engine)
//! gets its own session over that one pipe ([`ManagedBrowsers::connect_as_of`]).
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
//! The code, top down: `launch.rs` (start, stop, the flags);
//! `ephemeral.rs`, `remote.rs` (browsers it does not launch) and
//! `served.rs` (what `/profiles/<name>/` asks); `browsers.rs`
//! ([`ManagedBrowsers`] and what it holds: lookups, status, connections);
//! `remotes.rs` (its connections to remote browsers); `running.rs` (the
//! processes and `run.json`), `pipe.rs`, `error.rs`; `status.rs`,
//! `discovery.rs`, `profile_files.rs`, `lock.rs`, and `process/`, the seam
//! per system. This file only names the modules and what they export.
//!
//! **Start.** An extension profile is refused; a profile that does not
//! [`Profile::launches`](settings::Profile::launches) (attach-only, a `cdpUrl`) is never launched, only
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
//! **Ephemeral profiles** ([`Profile::ephemeral`](settings::Profile::ephemeral)) are not in config.toml:
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

mod browsers;
mod discovery;
mod ephemeral;
mod error;
mod launch;
mod lock;
mod pipe;
mod process;
mod profile_files;
mod remote;
mod remotes;
mod running;
mod served;
mod status;

pub use browsers::ManagedBrowsers;
pub use discovery::{CHROME_ENV, DiscoveryError, find_executable};
pub use error::ManagedError;
pub use launch::{READY_WITHIN, launch_args};
pub use pipe::{Endpoint, Pipe, PipeClient};
pub use remotes::Arrival;
pub use running::RunRecord;
pub use served::{ServedError, cdp_endpoint};
pub use status::{BrowserStatus, State};
