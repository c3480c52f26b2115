//! What ends `serve` (and an `mcp` that runs its own server) cleanly, per
//! system: the one seam over signals.
//!
//! | Unix (Linux, macOS) | Windows |
//! |---|---|
//! | Ctrl-C (`SIGINT`), `SIGTERM` (`kill`, systemd, launchd), the terminal window closed (`SIGHUP`) | Ctrl-C, Ctrl-Break, the console window closed, log-off, shutdown |
//!
//! `SIGHUP` is listened for only when it is not ignored: `nohup` (or a
//! shell's `trap '' HUP`) ignores it before serve starts, and a handler
//! would undo that.
//!
//! Either way `serve` then stops its managed browsers and ends. Where the
//! process is killed outright (`SIGKILL`, Task Manager), nothing runs: on
//! Unix the browsers' pipe closes and they quit; on Windows their Job
//! Object closes and kills them.

/// The signals `serve` listens for, registered before it starts work, so a
/// Ctrl-C during a browser's launch is not lost.
#[derive(Debug)]
pub struct ShutdownSignals {
    #[cfg(unix)]
    signals: Vec<(tokio::signal::unix::Signal, &'static str)>,
    #[cfg(windows)]
    signals: Windows,
}

#[cfg(windows)]
#[derive(Debug)]
struct Windows {
    ctrl_c: tokio::signal::windows::CtrlC,
    ctrl_break: tokio::signal::windows::CtrlBreak,
    close: tokio::signal::windows::CtrlClose,
    logoff: tokio::signal::windows::CtrlLogoff,
    shutdown: tokio::signal::windows::CtrlShutdown,
}

impl ShutdownSignals {
    pub fn listen() -> std::io::Result<Self> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            let mut kinds = vec![(SignalKind::interrupt(), "Ctrl-C"), (SignalKind::terminate(), "SIGTERM")];
            if !hangup_ignored() {
                kinds.push((SignalKind::hangup(), "the terminal closing"));
            }
            let signals =
                kinds.into_iter().map(|(kind, name)| Ok((signal(kind)?, name))).collect::<std::io::Result<_>>()?;
            Ok(Self { signals })
        }
        #[cfg(windows)]
        {
            use tokio::signal::windows::{ctrl_break, ctrl_c, ctrl_close, ctrl_logoff, ctrl_shutdown};
            Ok(Self {
                signals: Windows {
                    ctrl_c: ctrl_c()?,
                    ctrl_break: ctrl_break()?,
                    close: ctrl_close()?,
                    logoff: ctrl_logoff()?,
                    shutdown: ctrl_shutdown()?,
                },
            })
        }
    }

    /// Waits for the first of them; its name, for the log.
    pub async fn recv(&mut self) -> &'static str {
        #[cfg(unix)]
        {
            let waits = self.signals.iter_mut().map(|(signal, name)| {
                let name = *name;
                Box::pin(async move {
                    signal.recv().await;
                    name
                })
            });
            futures_util::future::select_all(waits).await.0
        }
        #[cfg(windows)]
        {
            let s = &mut self.signals;
            tokio::select! {
                _ = s.ctrl_c.recv() => "Ctrl-C",
                _ = s.ctrl_break.recv() => "Ctrl-Break",
                // Windows ends the process about 5 s after these: stopping
                // the browsers fits, and their Job Objects cover the rest.
                _ = s.close.recv() => "the console closing",
                _ = s.logoff.recv() => "log-off",
                _ = s.shutdown.recv() => "shutdown",
            }
        }
    }
}

/// Whether this process was started with `SIGHUP` ignored (`nohup`).
#[cfg(unix)]
#[allow(unsafe_code)]
fn hangup_ignored() -> bool {
    let mut current = std::mem::MaybeUninit::<libc::sigaction>::zeroed();
    // SAFETY: with no new action, sigaction only writes the current one
    // into `current`, which is valid for it.
    let read = unsafe { libc::sigaction(libc::SIGHUP, std::ptr::null(), current.as_mut_ptr()) } == 0;
    // SAFETY: zeroed, then filled in by a sigaction that succeeded.
    read && unsafe { current.assume_init() }.sa_sigaction == libc::SIG_IGN
}
