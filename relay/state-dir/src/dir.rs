//! Where Browser Relay keeps its config, token, profiles and media, and
//! the files at its root: the token, the login page, the locks.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::activity::ActivityDir;
use crate::env::{HOME_ENV, path_from_env};
use crate::error::{ReadTrustedError, StateDirError};
use crate::media::MediaDir;
use crate::pairing::PairingCodes;
use crate::private;
use crate::token::Token;

const TOKEN_FILE: &str = "token";

/// Where Browser Relay keeps its config, token, profiles and media.
#[derive(Debug, Clone)]
pub struct StateDir {
    root: PathBuf,
}

impl StateDir {
    /// `explicit`, else `$BROWSER_RELAY_HOME`, else `~/.browser-relay`.
    pub fn resolve(explicit: Option<&Path>) -> Result<Self, StateDirError> {
        let root = match explicit {
            Some(p) => p.to_path_buf(),
            None => match std::env::var_os(HOME_ENV).filter(|v| !v.is_empty()) {
                Some(p) => path_from_env(p),
                None => std::env::home_dir().ok_or(StateDirError::NoHome)?.join(".browser-relay"),
            },
        };
        Ok(Self { root })
    }

    pub fn at(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Creates the directory (owner-only) if missing. An existing directory
    /// keeps its permissions (it may be one the user chose and shares
    /// read-only), but is refused when it is not the user's or others may
    /// change what is in it ([`Self::check_trusted`]).
    fn ensure(&self) -> Result<(), StateDirError> {
        if !self.root.is_dir() {
            return private::create_private_dir(&self.root)
                .map_err(|source| StateDirError::Create { path: self.root.clone(), source });
        }
        self.check_trusted().map_err(|error| match error {
            ReadTrustedError::Untrusted(untrusted) => StateDirError::Untrusted(untrusted),
            ReadTrustedError::Read { path, source } => StateDirError::Create { path, source },
        })
    }

    /// Refuses a state folder someone else owns or may write to: whoever
    /// can add, replace or remove its files decides what Browser Relay
    /// runs and who it lets in. A folder that is missing is fine (there is
    /// nothing in it to trust yet).
    pub fn check_trusted(&self) -> Result<(), ReadTrustedError> {
        match private::check_trusted_dir(&self.root) {
            Ok(verdict) => Ok(verdict?),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(ReadTrustedError::Read { path: self.root.clone(), source }),
        }
    }

    /// The file `name` of the state folder (`config.toml`), read only if
    /// it and the folder are the user's alone: owned by the user, writable
    /// by no one else, the file not a link. `None` when there is none.
    pub fn read_trusted(&self, name: &str) -> Result<Option<Vec<u8>>, ReadTrustedError> {
        let path = self.root.join(name);
        self.check_trusted()?;
        match private::read_trusted(&path) {
            Ok(verdict) => Ok(Some(verdict?)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(ReadTrustedError::Read { path, source }),
        }
    }

    /// An existing token file readable by others is made owner-only again.
    fn tighten(path: &Path) -> Result<(), StateDirError> {
        let was = private::tighten_file(path)
            .map_err(|source| StateDirError::WriteToken { path: path.to_path_buf(), source })?;
        if let Some(was) = was {
            tracing::warn!("token file {} was readable by others ({was}); made it the owner's alone", path.display());
        }
        Ok(())
    }

    /// Where the activity record goes (`activity.rs`).
    pub fn activity(&self) -> ActivityDir {
        ActivityDir::new(self.root.join("activity"))
    }

    /// Writes the page that forwards a browser to a dashboard login link,
    /// owner-only (`<state>/ui-login.html`), and returns its path: a
    /// browser is opened on this file, so the one-time code is never on a
    /// command line, where other users of the machine could read it.
    pub fn write_login_page(&self, html: &str) -> Result<PathBuf, StateDirError> {
        self.ensure()?;
        let path = self.root.join("ui-login.html");
        let write = || -> io::Result<()> {
            match fs::remove_file(&path) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
            private::create_new_private(&path)?.write_all(html.as_bytes())
        };
        write().map_err(|source| StateDirError::Write { path: path.clone(), source })?;
        Ok(path)
    }

    /// `browser-relay pair`'s one-time codes (`pairing.rs`).
    pub fn pairing_codes(&self) -> PairingCodes {
        PairingCodes::new(self.root.join("pairing"))
    }

    /// The grants file (`grants.json`, kept by the `grants` crate).
    pub fn grants_path(&self) -> PathBuf {
        self.root.join("grants.json")
    }

    /// Writes `contents` to `path` in the state directory (made if
    /// missing) whole and owner-only: into a private file beside it,
    /// renamed over it, so a reader finds the old contents or the new,
    /// never a part, and no other user can read it at any moment.
    pub fn replace_private_file(&self, path: &Path, contents: &[u8]) -> Result<(), StateDirError> {
        self.ensure()?;
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
        let next = path.with_file_name(format!(".{name}.next.{}", std::process::id()));
        let _ = fs::remove_file(&next);
        let written = private::create_new_private(&next)
            .and_then(|mut file| file.write_all(contents).and_then(|()| file.sync_all()))
            .and_then(|()| fs::rename(&next, path));
        if let Err(source) = written {
            let _ = fs::remove_file(&next);
            return Err(StateDirError::Write { path: path.to_path_buf(), source });
        }
        Ok(())
    }

    /// Holds the lock file `name` in the state directory (made owner-only
    /// if missing) until the returned file is dropped: one writer of a
    /// file at a time, across processes. Waits for the lock.
    pub fn hold_lock(&self, name: &str) -> Result<fs::File, StateDirError> {
        let (file, path) = self.open_lock_file(name)?;
        file.lock().map_err(|source| StateDirError::Write { path, source })?;
        Ok(file)
    }

    /// The lock file `name` in the state directory, made owner-only if
    /// missing, opened to be locked (not locked yet), and its path.
    pub(crate) fn open_lock_file(&self, name: &str) -> Result<(fs::File, PathBuf), StateDirError> {
        self.ensure()?;
        let path = self.root.join(name);
        let io = |source| StateDirError::Write { path: path.clone(), source };
        let file = match private::create_new_private(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                fs::OpenOptions::new().read(true).write(true).open(&path).map_err(io)?
            }
            Err(e) => return Err(io(e)),
        };
        Ok((file, path))
    }

    /// Where screenshots and PDFs go.
    pub fn media(&self) -> MediaDir {
        MediaDir::new(self.root.join("media"))
    }

    pub fn token_path(&self) -> PathBuf {
        self.root.join(TOKEN_FILE)
    }

    /// Reads the install's token, creating it (random, owner-only) on first
    /// use. A token someone else owns or may write to, or a link, is
    /// refused: whoever planted it knows it.
    pub fn load_or_create_token(&self) -> Result<Token, StateDirError> {
        self.ensure()?;
        let path = self.token_path();
        match private::read_trusted(&path) {
            Ok(Err(untrusted)) => Err(untrusted.into()),
            Ok(Ok(bytes)) => {
                Self::tighten(&path)?;
                let text = String::from_utf8_lossy(&bytes);
                Token::parse(text.trim()).ok_or(StateDirError::BadToken { path })
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let token = Token::generate();
                match write_new_private_file(&path, token.as_str().as_bytes()) {
                    Ok(()) => Ok(token),
                    // Another process created it between our read and write: use theirs.
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => self.load_or_create_token(),
                    Err(source) => Err(StateDirError::WriteToken { path, source }),
                }
            }
            Err(source) => Err(StateDirError::ReadToken { path, source }),
        }
    }
}

impl StateDir {
    /// Replaces the install's token with a new random one (`browser-relay
    /// rotate`): written whole and owner-only beside the old one, then
    /// renamed over it, so a reader finds the old token or the new one.
    pub fn rotate_token(&self) -> Result<Token, StateDirError> {
        self.ensure()?;
        let path = self.token_path();
        let token = Token::generate();
        let next = path.with_file_name(format!(".token.next.{}", std::process::id()));
        let _ = fs::remove_file(&next);
        let written = write_new_private_file(&next, token.as_str().as_bytes()).and_then(|()| fs::rename(&next, &path));
        if let Err(source) = written {
            let _ = fs::remove_file(&next);
            return Err(StateDirError::WriteToken { path, source });
        }
        self.pairing_codes().forget_all();
        Ok(token)
    }
}

/// Creates `path` exclusively with owner-only permissions from the start (no
/// window in which another user could read it) and whole: the contents are
/// written to a private temporary file first, then linked into place, so a
/// process racing to read `path` finds no file or the whole one, never an
/// empty one. Linking fails if `path` exists, which keeps creation exclusive.
fn write_new_private_file(path: &Path, contents: &[u8]) -> io::Result<()> {
    // Unique per process (pid) and per call within it (the counter).
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let temporary = path.with_file_name(format!(".{name}.{}.{call}", std::process::id()));
    let written = private::create_new_private(&temporary).and_then(|mut file| {
        file.write_all(contents)?;
        file.write_all(b"\n")?;
        file.sync_all()
    });
    let linked = written.and_then(|()| fs::hard_link(&temporary, path));
    // Whether it was linked or not, the temporary name goes.
    let _ = fs::remove_file(&temporary);
    linked
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn the_login_page_is_owner_only_and_replaced_each_time() {
        use std::os::unix::fs::PermissionsExt;
        let root = tempfile::tempdir().unwrap();
        let state = StateDir::at(root.path());
        let first = state.write_login_page("one").unwrap();
        fs::set_permissions(&first, fs::Permissions::from_mode(0o644)).unwrap();
        let second = state.write_login_page("two").unwrap();
        assert_eq!(first, second);
        assert_eq!(fs::read_to_string(&second).unwrap(), "two");
        assert_eq!(fs::metadata(&second).unwrap().permissions().mode() & 0o777, 0o600, "a new file, owner-only");
    }

    #[test]
    fn a_rotated_token_replaces_the_old_one_and_stays_private() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::at(dir.path());
        let old = state.load_or_create_token().unwrap();
        let new = state.rotate_token().unwrap();
        assert!(!old.matches(new.as_str()));
        assert!(state.load_or_create_token().unwrap().matches(new.as_str()), "the file holds the new one");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(state.token_path()).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600);
        }
        let leftovers: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().starts_with('.'))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }

    #[test]
    fn token_file_is_created_once_with_mode_0600() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::at(dir.path().join("home"));
        let first = state.load_or_create_token().unwrap();
        let second = state.load_or_create_token().unwrap();
        assert_eq!(first, second, "the token is stable across loads");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(state.token_path()).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600, "token file must be owner-only");
            let dir_mode = fs::metadata(state.root()).unwrap().permissions().mode();
            assert_eq!(dir_mode & 0o777, 0o700, "state dir must be owner-only");
        }
    }

    /// Every command creates the token on first use, so a first `mcp` and
    /// a first `token` in a fresh directory race for it: each must get the
    /// one token, never a half-written file (the CI failure of stop 21:
    /// `mcp` read the file `token` had created but not yet written).
    #[test]
    fn processes_racing_to_create_the_token_all_get_the_one_token() {
        for _ in 0..200 {
            let dir = tempfile::tempdir().unwrap();
            let root = dir.path().join("home");
            let barrier = std::sync::Arc::new(std::sync::Barrier::new(4));
            let tokens: Vec<_> = (0..4)
                .map(|_| {
                    let (root, barrier) = (root.clone(), barrier.clone());
                    std::thread::spawn(move || {
                        barrier.wait();
                        StateDir::at(root).load_or_create_token()
                    })
                })
                .collect::<Vec<_>>()
                .into_iter()
                .map(|t| t.join().unwrap().expect("every racer gets a token"))
                .collect();
            assert!(tokens.windows(2).all(|w| w[0] == w[1]), "one token for all");
            let names: Vec<_> = fs::read_dir(&root).unwrap().map(|e| e.unwrap().file_name()).collect();
            assert_eq!(names, [TOKEN_FILE], "no temporary file is left behind");
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_token_file_readable_by_others_is_tightened() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::at(dir.path());
        let token = state.load_or_create_token().unwrap();
        fs::set_permissions(state.token_path(), fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(state.load_or_create_token().unwrap(), token);
        let mode = fs::metadata(state.token_path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[cfg(unix)]
    #[test]
    fn an_existing_state_dir_keeps_its_permissions() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
        StateDir::at(dir.path()).load_or_create_token().unwrap();
        let mode = fs::metadata(dir.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o755, "a directory the user chose is not re-permissioned");
    }

    /// Another user's token is one they know: refused, never used, with
    /// the command that makes the file the user's. Unix, as root (the
    /// tests and CI run as root; elsewhere `chown` is refused and the test
    /// says so).
    #[cfg(unix)]
    #[test]
    fn a_token_another_user_planted_or_can_write_is_refused_with_the_fix() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::at(dir.path());
        let planted = Token::generate();
        fs::write(state.token_path(), planted.as_str()).unwrap();
        fs::set_permissions(state.token_path(), fs::Permissions::from_mode(0o600)).unwrap();
        let quoted = format!("'{}'", state.token_path().display());
        if std::os::unix::fs::chown(state.token_path(), Some(4242), None).is_ok() {
            let error = state.load_or_create_token().unwrap_err().to_string();
            assert!(error.contains(&format!("refusing to use {}", state.token_path().display())), "{error}");
            assert!(
                error.contains("belongs to user 4242") && error.contains(&format!("chown root {quoted}")),
                "{error}"
            );
            std::os::unix::fs::chown(state.token_path(), Some(0), None).unwrap();
        } else {
            eprintln!("not checked: chown needs root");
        }
        fs::set_permissions(state.token_path(), fs::Permissions::from_mode(0o666)).unwrap();
        let error = state.load_or_create_token().unwrap_err().to_string();
        assert!(error.contains(&format!("chmod go-w {quoted}")), "{error}");
        // Fixed as it says, it is the install's token again.
        fs::set_permissions(state.token_path(), fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(state.load_or_create_token().unwrap(), planted);
    }

    #[cfg(unix)]
    #[test]
    fn a_token_that_is_a_link_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::at(dir.path().join("state"));
        let elsewhere = dir.path().join("elsewhere");
        fs::write(&elsewhere, Token::generate().as_str()).unwrap();
        state.ensure().unwrap();
        std::os::unix::fs::symlink(&elsewhere, state.token_path()).unwrap();
        let error = state.load_or_create_token().unwrap_err().to_string();
        assert!(
            error.contains("symbolic link") && error.contains(&format!("rm '{}'", state.token_path().display())),
            "{error}"
        );
    }

    /// Whoever may write the state folder can swap the token or config.toml
    /// for their own: every use of it is refused. One others may only read
    /// is kept (`an_existing_state_dir_keeps_its_permissions`).
    #[cfg(unix)]
    #[test]
    fn a_state_folder_others_can_write_is_refused_for_every_use() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::at(dir.path());
        state.load_or_create_token().unwrap();
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o777)).unwrap();
        let fix = format!("chmod go-w '{}'", dir.path().display());
        for (what, error) in [
            ("the token", state.load_or_create_token().unwrap_err()),
            ("a rotation", state.rotate_token().unwrap_err()),
            ("a lock", state.hold_lock("lock").unwrap_err()),
        ] {
            let error = error.to_string();
            assert!(
                error.contains("everyone else (mode 777) can change it") && error.contains(&fix),
                "{what}: {error}"
            );
        }
        assert!(matches!(state.read_trusted("config.toml"), Err(ReadTrustedError::Untrusted(_))));
        if std::os::unix::fs::chown(dir.path(), Some(4242), None).is_ok() {
            fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o700)).unwrap();
            let error = state.load_or_create_token().unwrap_err().to_string();
            assert!(error.contains(&format!("chown -R root '{}'", dir.path().display())), "{error}");
        }
    }

    #[test]
    fn malformed_token_file_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::at(dir.path());
        fs::write(state.token_path(), "short").unwrap();
        let err = state.load_or_create_token().unwrap_err().to_string();
        assert!(err.contains("malformed") && err.contains("token"), "{err}");
    }

    #[test]
    fn a_new_secret_spends_every_code_issued_before() {
        let state = tempfile::tempdir().unwrap();
        let dir = StateDir::at(state.path());
        let old = dir.load_or_create_token().unwrap();
        let code = dir.pairing_codes().issue(&old).unwrap();
        let new = dir.rotate_token().unwrap();
        let id = shared_protocol::auth::pairing_code_id(code.as_str());
        assert_eq!(dir.pairing_codes().find(&id, &new), None);
        assert_eq!(dir.pairing_codes().find(&id, &old), None, "gone, not only unsigned");
    }
}
