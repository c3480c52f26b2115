//! Processes on Unix: the pipe on fds 3 and 4, a process group per browser,
//! signals.

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;

use super::{Ending, Launched};

pub(crate) type BrowserReader = tokio::net::unix::pipe::Receiver;
pub(crate) type BrowserWriter = tokio::net::unix::pipe::Sender;

/// A browser's process group: its id is the browser's pid.
#[derive(Debug)]
pub(crate) struct Tree;

pub(super) fn reader(end: std::io::PipeReader) -> std::io::Result<BrowserReader> {
    BrowserReader::from_owned_fd(end.into())
}

pub(super) fn writer(end: std::io::PipeWriter) -> std::io::Result<BrowserWriter> {
    BrowserWriter::from_owned_fd(end.into())
}

/// A browser this process launched, reaped through `try_wait`.
pub(crate) type Child = std::process::Child;

/// Spawns `executable` with `args`, the browser reading CDP on its fd 3 and
/// writing on its fd 4, in a process group of its own. Nothing else serve
/// opened reaches it (std and tokio open every descriptor close-on-exec);
/// a descriptor serve itself inherited open would.
pub(super) fn spawn(
    executable: &std::path::Path,
    args: &[String],
    stderr: std::fs::File,
    browser_reads: std::io::PipeReader,
    browser_writes: std::io::PipeWriter,
) -> std::io::Result<Launched> {
    use command_fds::{CommandFdExt, FdMapping};
    use std::os::unix::process::CommandExt;
    let mut command = std::process::Command::new(executable);
    command.stdin(std::process::Stdio::null()).stdout(std::process::Stdio::null()).stderr(stderr);
    command.args(args);
    command
        .fd_mappings(vec![
            FdMapping { parent_fd: browser_reads.into(), child_fd: 3 },
            FdMapping { parent_fd: browser_writes.into(), child_fd: 4 },
        ])
        .expect("two distinct descriptors");
    command.process_group(0);
    // The command, and with it the browser's ends of the pipes, drops on
    // return.
    Ok(Launched { child: command.spawn()?, tree: Tree })
}

pub(super) fn is_alive(pid: u32) -> bool {
    let Ok(pid) = i32::try_from(pid) else { return false };
    !matches!(kill(Pid::from_raw(pid), None), Err(Errno::ESRCH))
}

pub(super) fn end_tree(pid: u32, _ours: Option<&Tree>, ending: Ending) {
    let signal = match ending {
        Ending::Ask => Signal::SIGTERM,
        Ending::Kill => Signal::SIGKILL,
    };
    if let Ok(pid) = i32::try_from(pid) {
        let _ = killpg(Pid::from_raw(pid), signal);
    }
}

pub(super) fn tree_alive(pgid: u32, _ours: Option<&Tree>) -> bool {
    let Ok(group) = i32::try_from(pgid) else { return false };
    if matches!(killpg(Pid::from_raw(group), None), Err(Errno::ESRCH)) {
        return false;
    }
    #[cfg(target_os = "linux")]
    {
        let Ok(entries) = std::fs::read_dir("/proc") else { return true };
        entries.filter_map(Result::ok).any(|entry| {
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { return false };
            let fields = stat_fields(&stat);
            matches!((fields.first(), fields.get(2)), (Some(state), Some(pgrp)) if *state != "Z" && pgrp.parse::<u32>() == Ok(pgid))
        })
    }
    // macOS has no /proc: a group that answers a signal is taken as
    // alive (a zombie member keeps it so until it is reaped, at most the
    // caller's deadline).
    #[cfg(not(target_os = "linux"))]
    {
        true
    }
}

/// A `/proc/<pid>/stat` line's fields after the command name, the
/// process's state first ("pid (comm) state ppid pgrp …": comm may hold
/// spaces and parentheses).
#[cfg(target_os = "linux")]
fn stat_fields(stat: &str) -> Vec<&str> {
    stat.rsplit_once(')').map(|(_, rest)| rest.split_whitespace().collect()).unwrap_or_default()
}

/// Linux: `starttime`, the stat line's 22nd field (clock ticks after
/// boot). macOS: `proc_pidinfo`'s start time, in the seam of its own that
/// may call the system.
pub(super) fn started(pid: u32) -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        stat_fields(&stat).get(19)?.parse().ok()
    }
    #[cfg(target_os = "macos")]
    {
        super::macos::started(pid)
    }
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    {
        let _ = pid;
        None
    }
}

pub(super) fn has_argument(pid: u32, arg: &str) -> Option<bool> {
    #[cfg(target_os = "linux")]
    {
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        Some(cmdline.split(|b| *b == 0).any(|a| a == arg.as_bytes()))
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (pid, arg);
        None
    }
}

pub(super) fn is_superuser() -> bool {
    nix::unistd::geteuid().is_root()
}
