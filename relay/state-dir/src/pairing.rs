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
//! no running serve, and spending a code is renaming its file away: of two
//! redemptions at once, exactly one renames it. A file holds the code and
//! a MAC of it keyed by the install's secret: a state directory the user
//! shares with others (its permissions are kept) may hold files planted by
//! them, and a code the secret did not sign is no code.

use std::fs;
use std::io::{self, Write as _};
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use shared_protocol::auth;

use crate::error::StateDirError;
use crate::private;
use crate::token::Token;

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

    /// A new code for the install whose secret is `secret`, written
    /// owner-only (the folder made so if it was not); codes that expired go.
    pub fn issue(&self, secret: &Token) -> Result<Token, StateDirError> {
        let code = Token::generate();
        let path = self.dir.join(auth::pairing_code_id(code.as_str()));
        let write = || -> io::Result<()> {
            if self.dir.is_dir() {
                private::tighten_dir(&self.dir)?;
            } else {
                private::create_private_dir(&self.dir)?;
            }
            self.forget(Self::expired);
            let signed = format!("{} {}", code.as_str(), auth::pairing_code_signature(secret.as_str(), code.as_str()));
            private::create_new_private(&path)?.write_all(signed.as_bytes())
        };
        write().map_err(|source| StateDirError::Write { path, source })?;
        Ok(code)
    }

    /// The code named `id`, if the install's `secret` signed it, it was
    /// issued less than [`CODE_LIFETIME`] ago and it was not spent. `id`
    /// comes from a peer not yet proved: anything but 16 hex digits names
    /// no file.
    pub fn find(&self, id: &str, secret: &Token) -> Option<Token> {
        let valid = id.len() == 16 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        if !valid {
            return None;
        }
        let path = self.dir.join(id);
        if !fs::symlink_metadata(&path).is_ok_and(|m| m.is_file()) {
            return None;
        }
        if Self::expired(&path) {
            let _ = fs::remove_file(&path);
            return None;
        }
        let text = fs::read_to_string(&path).ok()?;
        let (code, signed) = text.trim().split_once(' ')?;
        let code = Token::parse(code)?;
        let genuine = auth::pairing_code_id(code.as_str()) == id;
        let signed_by_us = auth::verify_pairing_code_signature(secret.as_str(), code.as_str(), signed);
        (genuine && signed_by_us).then_some(code)
    }

    /// Spends the code named `id`: whether this call did (a code is spent
    /// once, by whoever renames its file away first; the renamed file is
    /// removed, or found by no id if it cannot be, say while Windows holds
    /// it open).
    pub fn spend(&self, id: &str, secret: &Token) -> bool {
        if self.find(id, secret).is_none() {
            return false;
        }
        let (path, spent) = (self.dir.join(id), self.dir.join(format!("{id}.spent")));
        if fs::rename(&path, &spent).is_err() {
            return false;
        }
        let _ = fs::remove_file(&spent);
        true
    }

    /// Spends every code (a new secret: a code from before, which may
    /// have leaked with it, must not bring the new one).
    pub(crate) fn forget_all(&self) {
        self.forget(|_| true);
    }

    /// Removes the files `which` picks.
    fn forget(&self, which: impl Fn(&std::path::Path) -> bool) {
        let Ok(entries) = fs::read_dir(&self.dir) else { return };
        for entry in entries.filter_map(Result::ok) {
            if which(&entry.path()) {
                let _ = fs::remove_file(entry.path());
            }
        }
    }

    /// Issued more than [`CODE_LIFETIME`] ago, or at a time to come (a
    /// clock set back, or a planted file): never good for longer.
    fn expired(path: &std::path::Path) -> bool {
        let issued = fs::metadata(path).and_then(|m| m.modified());
        issued.map_or(true, |at| SystemTime::now().duration_since(at).map_or(true, |age| age > CODE_LIFETIME))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shared_protocol::auth::pairing_code_id;

    #[test]
    fn a_code_is_found_by_its_id_once_and_only_while_fresh() {
        let state = tempfile::tempdir().unwrap();
        let secret = Token::generate();
        let codes = PairingCodes::new(state.path().join("pairing"));
        let code = codes.issue(&secret).unwrap();
        let id = pairing_code_id(code.as_str());
        assert_eq!(codes.find(&id, &secret), Some(code.clone()));
        assert_eq!(codes.find(&id, &Token::generate()), None, "another install's secret signed nothing here");
        assert!(codes.spend(&id, &secret), "spent by the first redemption");
        assert!(!codes.spend(&id, &secret) && codes.find(&id, &secret).is_none(), "and by no other");
        assert_eq!(fs::read_dir(state.path().join("pairing")).unwrap().count(), 0, "nothing left");

        for (when, what) in [
            (SystemTime::now() - CODE_LIFETIME - Duration::from_secs(1), "long ago"),
            (SystemTime::now() + Duration::from_secs(3600), "to come"),
        ] {
            let other = codes.issue(&secret).unwrap();
            let other_id = pairing_code_id(other.as_str());
            let file = state.path().join("pairing").join(&other_id);
            fs::File::options().write(true).open(&file).unwrap().set_modified(when).unwrap();
            assert_eq!(codes.find(&other_id, &secret), None, "issued {what}: expired");
            assert!(!file.exists(), "and gone");
        }
    }

    #[test]
    fn a_code_file_the_secret_did_not_sign_is_no_code() {
        // Another user of a shared state directory plants a code of theirs.
        let state = tempfile::tempdir().unwrap();
        let secret = Token::generate();
        let codes = PairingCodes::new(state.path().join("pairing"));
        codes.issue(&secret).unwrap();
        let planted = Token::generate();
        let id = pairing_code_id(planted.as_str());
        let forged = format!(
            "{} {}",
            planted.as_str(),
            auth::pairing_code_signature(Token::generate().as_str(), planted.as_str())
        );
        fs::write(state.path().join("pairing").join(&id), forged).unwrap();
        assert_eq!(codes.find(&id, &secret), None);
        fs::write(state.path().join("pairing").join(&id), planted.as_str()).unwrap();
        assert_eq!(codes.find(&id, &secret), None, "unsigned");
        assert!(!codes.spend(&id, &secret));
    }

    #[test]
    fn an_id_that_is_not_a_code_id_names_no_file() {
        let state = tempfile::tempdir().unwrap();
        fs::write(state.path().join("token"), "x").unwrap();
        let secret = Token::generate();
        let codes = PairingCodes::new(state.path().join("pairing"));
        codes.issue(&secret).unwrap();
        for id in ["../token", "..", "", "0123456789ABCDEF", "0123456789abcde/", "0123456789abcdef0"] {
            assert_eq!(codes.find(id, &secret), None, "{id}");
            assert!(!codes.spend(id, &secret), "{id}");
        }
        assert!(state.path().join("token").exists());
    }

    #[cfg(unix)]
    #[test]
    fn codes_are_the_owners_alone() {
        use std::os::unix::fs::PermissionsExt;
        let state = tempfile::tempdir().unwrap();
        let code = PairingCodes::new(state.path().join("pairing")).issue(&Token::generate()).unwrap();
        let file = state.path().join("pairing").join(pairing_code_id(code.as_str()));
        assert_eq!(fs::metadata(&file).unwrap().permissions().mode() & 0o077, 0);
        assert_eq!(fs::metadata(file.parent().unwrap()).unwrap().permissions().mode() & 0o077, 0);
    }
}
