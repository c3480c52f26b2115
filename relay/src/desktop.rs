//! Opening a file in the user's browser (`browser-relay ui`): the one place
//! that knows each desktop's opener, its rules a pure function tested on
//! every host.

use std::io;
use std::path::Path;
use std::process::{Command, Stdio};

/// The desktops we know how to open a page on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Desktop {
    Windows,
    MacOs,
    /// Linux and the BSDs (freedesktop.org): a desktop only with a display server.
    Unix {
        display: bool,
    },
}

impl Desktop {
    pub(crate) fn current() -> Self {
        if cfg!(windows) {
            Self::Windows
        } else if cfg!(target_os = "macos") {
            Self::MacOs
        } else {
            let set = |name: &str| std::env::var_os(name).is_some_and(|v| !v.is_empty());
            Self::Unix { display: set("DISPLAY") || set("WAYLAND_DISPLAY") }
        }
    }

    /// The program and its arguments before the file; `None`: no desktop
    /// (a server, an SSH session), so nothing is opened.
    pub(crate) fn opener(self) -> Option<(&'static str, &'static [&'static str])> {
        match self {
            // `start` is a cmd built-in with its own quoting; the URL
            // handler opens the file with the default browser as is.
            Self::Windows => Some(("rundll32", &["url.dll,FileProtocolHandler"])),
            Self::MacOs => Some(("open", &[])),
            Self::Unix { display: true } => Some(("xdg-open", &[])),
            Self::Unix { display: false } => None,
        }
    }
}

/// Opens `file` in the default browser: `Ok(false)` without a desktop.
/// The opener runs on its own; its exit is not waited for.
pub(crate) fn open(file: &Path) -> io::Result<bool> {
    let Some((program, args)) = Desktop::current().opener() else { return Ok(false) };
    Command::new(program)
        .args(args)
        .arg(file)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_desktop_has_its_opener_and_a_server_has_none() {
        assert_eq!(Desktop::Windows.opener(), Some(("rundll32", &["url.dll,FileProtocolHandler"][..])));
        assert_eq!(Desktop::MacOs.opener(), Some(("open", &[][..])));
        assert_eq!(Desktop::Unix { display: true }.opener(), Some(("xdg-open", &[][..])));
        assert_eq!(Desktop::Unix { display: false }.opener(), None);
    }
}
