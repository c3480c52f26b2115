//! Who serves from this state folder: every running relay (serve, or an
//! MCP server running its own) holds a shared lock on `<state>/serve.lock`
//! for as long as it runs, and says where it listens in `<state>/serving`.
//! `rotate` takes the lock exclusively: it cannot while any relay runs, on
//! whatever port, and none starts while it rotates. A relay keeps the
//! secret in memory; a new secret under it would leave the two out of step.
//!
//! The lock is the operating system's (`flock` on Unix, `LockFileEx` on
//! Windows): it goes with the process, so a relay that crashed holds
//! nothing. The note of where it listens is a separate file, because
//! Windows forbids writing a region another process has locked.

use std::fs;
use std::path::PathBuf;

use crate::dir::StateDir;
use crate::error::StateDirError;

const LOCK_FILE: &str = "serve.lock";
const NOTE_FILE: &str = "serving";

/// Held by a running relay; released when dropped (or its process ends).
#[derive(Debug)]
pub struct ServingLock {
    _file: fs::File,
}

/// Held by `rotate` while it replaces the secret: no relay runs meanwhile.
#[derive(Debug)]
pub struct RotationLock {
    _file: fs::File,
}

/// Why the state folder cannot be had.
#[derive(Debug, thiserror::Error)]
pub enum ServingError {
    /// A relay runs from this folder (`rotate` was asked).
    #[error(
        "a Browser Relay server runs from this state folder ({where_}): stop it first (it holds the secret), then rotate and start it again"
    )]
    Serving { where_: String },
    /// `rotate` is replacing the secret (a relay was asked to start).
    #[error("`browser-relay rotate` is replacing the secret in {path}; start again once it is done")]
    Rotating { path: PathBuf },
    #[error(transparent)]
    State(#[from] StateDirError),
}

impl StateDir {
    /// Marks this folder as served by this process until the lock is
    /// dropped; `where_` says where it listens (for `rotate`'s refusal).
    pub fn hold_serving(&self, where_: &str) -> Result<ServingLock, ServingError> {
        let (file, path) = self.open_lock_file(LOCK_FILE)?;
        match file.try_lock_shared() {
            Ok(()) => {}
            Err(fs::TryLockError::WouldBlock) => return Err(ServingError::Rotating { path }),
            Err(fs::TryLockError::Error(source)) => return Err(StateDirError::Write { path, source }.into()),
        }
        let note = format!("pid {}, {where_}", std::process::id());
        // Only a courtesy for the message: a folder we cannot write it in
        // is still locked.
        if let Err(error) = fs::write(self.root().join(NOTE_FILE), note) {
            tracing::debug!("could not note where this server listens: {error}");
        }
        Ok(ServingLock { _file: file })
    }

    /// The folder for `rotate` alone, or who serves from it.
    pub fn hold_for_rotation(&self) -> Result<RotationLock, ServingError> {
        let (file, path) = self.open_lock_file(LOCK_FILE)?;
        match file.try_lock() {
            Ok(()) => Ok(RotationLock { _file: file }),
            Err(fs::TryLockError::WouldBlock) => {
                let where_ = fs::read_to_string(self.root().join(NOTE_FILE))
                    .ok()
                    .map(|note| note.trim().to_string())
                    .filter(|note| !note.is_empty() && note.len() < 512)
                    .unwrap_or_else(|| "where it listens is not noted".into());
                Err(ServingError::Serving { where_ })
            }
            Err(fs::TryLockError::Error(source)) => Err(StateDirError::Write { path, source }.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_running_server_keeps_rotation_out_and_says_where_it_listens() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::at(dir.path());
        let first = state.hold_serving("relay on 127.0.0.1:41001").unwrap();
        // A second relay on the same folder (an MCP server's own) is fine.
        let second = state.hold_serving("relay on 127.0.0.1:41002").unwrap();
        let refused = state.hold_for_rotation().unwrap_err().to_string();
        assert!(refused.contains("127.0.0.1:4100") && refused.contains("stop it first"), "{refused}");
        drop(first);
        assert!(state.hold_for_rotation().is_err(), "one relay still runs");
        drop(second);
        let rotating = state.hold_for_rotation().expect("no relay runs");
        let refused = state.hold_serving("relay on 127.0.0.1:41003").unwrap_err();
        assert!(matches!(refused, ServingError::Rotating { .. }), "{refused}");
        drop(rotating);
        state.hold_serving("relay on 127.0.0.1:41003").expect("rotation is over");
    }
}
