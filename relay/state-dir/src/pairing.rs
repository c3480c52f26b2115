//! `browser-relay pair`'s one-time codes. The pairing link carries a code
//! instead of the install's secret: Chrome keeps every address it opened in
//! its history (a chrome-extension:// page's, fragment included, checked
//! here), where the secret would stay, show in the address bar's
//! suggestions and travel with history sync. A code is good once, for
//! [`CODE_LIFETIME`], and the relay sends the secret sealed for it
//! (`shared_protocol::auth::seal`) to the extension that proves it holds
//! the code.
//!
//! Each code is a file of its own, `<state>/pairing/<id>` (owner-only, the
//! id being `shared_protocol::auth::pairing_code_id`), so that `pair` needs
//! no running serve, and spending a code is removing its file: of two
//! redemptions at once, exactly one removes it.

use std::fs;
use std::io::{self, Write as _};
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use crate::{StateDirError, Token, private};

/// How long a pairing link's code is good for.
pub const CODE_LIFETIME: Duration = Duration::from_secs(600);

/// The one-time pairing codes of a state directory.
#[derive(Debug, Clone)]
pub struct PairingCodes {
    dir: PathBuf,
}

impl PairingCodes {
    pub(crate) fn new(dir: PathBuf) -> Self {
        Self { dir }
    }

    /// A new code, written owner-only; codes that expired go.
    pub fn issue(&self) -> Result<Token, StateDirError> {
        let write = |path: &PathBuf, code: &Token| -> io::Result<()> {
            if !self.dir.is_dir() {
                private::create_private_dir(&self.dir)?;
            }
            private::create_new_private(path)?.write_all(code.as_str().as_bytes())
        };
        self.forget_expired();
        let code = Token::generate();
        let path = self.dir.join(shared_protocol::auth::pairing_code_id(code.as_str()));
        write(&path, &code).map_err(|source| StateDirError::Write { path, source })?;
        Ok(code)
    }

    /// The code named `id`, if it was issued less than [`CODE_LIFETIME`]
    /// ago and not spent. `id` comes from a peer not yet proved: anything
    /// but 16 hex digits names no file.
    pub fn find(&self, id: &str) -> Option<Token> {
        let valid = id.len() == 16 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        if !valid {
            return None;
        }
        let path = self.dir.join(id);
        if Self::expired(&path) {
            let _ = fs::remove_file(&path);
            return None;
        }
        Token::parse(fs::read_to_string(&path).ok()?.trim())
    }

    /// Spends the code named `id`: whether this call did (a code is spent
    /// once, by whoever removes its file first).
    pub fn spend(&self, id: &str) -> bool {
        self.find(id).is_some() && fs::remove_file(self.dir.join(id)).is_ok()
    }

    /// Spends every code (a new secret: a code from before, which may
    /// have leaked with it, must not bring the new one).
    pub(crate) fn forget_all(&self) {
        let Ok(entries) = fs::read_dir(&self.dir) else { return };
        for entry in entries.filter_map(Result::ok) {
            let _ = fs::remove_file(entry.path());
        }
    }

    fn expired(path: &std::path::Path) -> bool {
        let issued = fs::metadata(path).and_then(|m| m.modified());
        issued.map_or(true, |at| SystemTime::now().duration_since(at).unwrap_or_default() > CODE_LIFETIME)
    }

    fn forget_expired(&self) {
        let Ok(entries) = fs::read_dir(&self.dir) else { return };
        for entry in entries.filter_map(Result::ok) {
            if Self::expired(&entry.path()) {
                let _ = fs::remove_file(entry.path());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shared_protocol::auth::pairing_code_id;

    #[test]
    fn a_code_is_found_by_its_id_once_and_only_while_fresh() {
        let state = tempfile::tempdir().unwrap();
        let codes = crate::StateDir::at(state.path()).pairing_codes();
        let code = codes.issue().unwrap();
        let id = pairing_code_id(code.as_str());
        assert_eq!(codes.find(&id), Some(code.clone()));
        assert!(codes.spend(&id), "spent by the first redemption");
        assert!(!codes.spend(&id) && codes.find(&id).is_none(), "and by no other");

        let other = codes.issue().unwrap();
        let other_id = pairing_code_id(other.as_str());
        let file = state.path().join("pairing").join(&other_id);
        let issued_long_ago = SystemTime::now() - CODE_LIFETIME - Duration::from_secs(1);
        fs::File::options().write(true).open(&file).unwrap().set_modified(issued_long_ago).unwrap();
        assert_eq!(codes.find(&other_id), None, "expired");
        assert!(!file.exists(), "and gone");
    }

    #[test]
    fn a_new_secret_spends_every_code_issued_before() {
        let state = tempfile::tempdir().unwrap();
        let dir = crate::StateDir::at(state.path());
        dir.load_or_create_token().unwrap();
        let code = dir.pairing_codes().issue().unwrap();
        dir.rotate_token().unwrap();
        assert_eq!(dir.pairing_codes().find(&pairing_code_id(code.as_str())), None);
    }

    #[test]
    fn an_id_that_is_not_a_code_id_names_no_file() {
        let state = tempfile::tempdir().unwrap();
        fs::write(state.path().join("token"), "x").unwrap();
        let codes = crate::StateDir::at(state.path()).pairing_codes();
        codes.issue().unwrap();
        for id in ["../token", "..", "", "0123456789ABCDEF", "0123456789abcde/", "0123456789abcdef0"] {
            assert_eq!(codes.find(id), None, "{id}");
            assert!(!codes.spend(id), "{id}");
        }
        assert!(state.path().join("token").exists());
    }

    #[cfg(unix)]
    #[test]
    fn codes_are_the_owners_alone() {
        use std::os::unix::fs::PermissionsExt;
        let state = tempfile::tempdir().unwrap();
        let code = crate::StateDir::at(state.path()).pairing_codes().issue().unwrap();
        let file = state.path().join("pairing").join(pairing_code_id(code.as_str()));
        assert_eq!(fs::metadata(&file).unwrap().permissions().mode() & 0o077, 0);
        assert_eq!(fs::metadata(file.parent().unwrap()).unwrap().permissions().mode() & 0o077, 0);
    }
}
