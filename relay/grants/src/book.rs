//! `<state>/grants.json`: every grant, signed by the install's secret.
//!
//! The file is written whole and owner-only (`StateDir::replace_private_file`)
//! under a lock (`grants.lock`), so that `browser-relay grant add` and a
//! running serve never lose each other's change. Its signature
//! (`shared_protocol::auth::grants_signature`) covers every grant: a file
//! someone else wrote, or a grant's sites widened by hand, is refused
//! whole, with the command that starts over. `rotate` signs it again with
//! the new secret ([`GrantBook::resign`]).

use std::fs;
use std::io;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use shared_protocol::auth::{grants_signature, verify_grants_signature};
use state_dir::{StateDir, StateDirError, Token};

use crate::grant::{AskKind, Grant, GrantName, GroupColor, now_ms};
use crate::sites::Sites;

/// What `grant add` asks for.
#[derive(Debug, Clone)]
pub struct NewGrant {
    pub name: GrantName,
    pub sites: Sites,
    /// `None`: the next colour no other grant has.
    pub color: Option<GroupColor>,
    pub expires_in: Option<std::time::Duration>,
    pub evaluate: bool,
    /// What it asks the person about first.
    pub ask: Vec<AskKind>,
}

#[derive(Debug, thiserror::Error)]
pub enum GrantError {
    #[error("there is already a grant named '{0}': `browser-relay grant revoke {0}` first, or pick another name")]
    Exists(String),
    #[error("there is no grant named '{0}': `browser-relay grant list` shows them")]
    Unknown(String),
    #[error(
        "{path} is not signed by this install's secret (written by someone else, edited by hand, or from before \
         `rotate` without its re-signing): none of its grants is honoured. Delete it and add the grants again \
         (`browser-relay grant add`)"
    )]
    NotOurs { path: PathBuf },
    #[error("{path} cannot be read as grants: {why}; delete it and add the grants again")]
    Malformed { path: PathBuf, why: String },
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: io::Error },
    #[error(transparent)]
    Write(#[from] StateDirError),
}

/// The file's shape.
#[derive(Serialize, Deserialize)]
struct File {
    /// The grants, as JSON text: what the signature covers, byte for byte.
    grants: String,
    signature: String,
}

/// The grants of a state directory.
#[derive(Debug, Clone)]
pub struct GrantBook {
    state: StateDir,
}

impl GrantBook {
    pub fn new(state: StateDir) -> Self {
        Self { state }
    }

    pub fn path(&self) -> PathBuf {
        self.state.grants_path()
    }

    /// Every grant, expired ones included (they say so when listed). No
    /// file: none.
    pub fn load(&self, secret: &Token) -> Result<Vec<Grant>, GrantError> {
        let path = self.path();
        let text = match fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => return Err(GrantError::Read { path, source }),
        };
        let malformed = |why: String| GrantError::Malformed { path: path.clone(), why };
        let file: File = serde_json::from_str(&text).map_err(|e| malformed(e.to_string()))?;
        if !verify_grants_signature(secret.as_str(), &file.grants, &file.signature) {
            return Err(GrantError::NotOurs { path });
        }
        serde_json::from_str(&file.grants).map_err(|e| malformed(e.to_string()))
    }

    fn save(&self, secret: &Token, grants: &[Grant]) -> Result<(), GrantError> {
        let body = serde_json::to_string(grants).expect("grants serialise");
        let file = File { signature: grants_signature(secret.as_str(), &body), grants: body };
        let text = serde_json::to_string_pretty(&file).expect("the file serialises");
        self.state.replace_private_file(&self.path(), text.as_bytes())?;
        Ok(())
    }

    /// Runs `change` on the grants under the file's lock and saves what it
    /// leaves.
    fn change<T>(
        &self,
        secret: &Token,
        change: impl FnOnce(&mut Vec<Grant>) -> Result<T, GrantError>,
    ) -> Result<T, GrantError> {
        let _lock = self.lock()?;
        let mut grants = self.load(secret)?;
        let out = change(&mut grants)?;
        self.save(secret, &grants)?;
        Ok(out)
    }

    fn lock(&self) -> Result<fs::File, GrantError> {
        Ok(self.state.hold_lock("grants.lock")?)
    }

    /// Makes a grant; a name in use is refused.
    pub fn add(&self, secret: &Token, new: NewGrant) -> Result<Grant, GrantError> {
        self.change(secret, |grants| {
            if grants.iter().any(|g| g.name == new.name) {
                return Err(GrantError::Exists(new.name.to_string()));
            }
            let color = new.color.unwrap_or_else(|| {
                let taken: Vec<GroupColor> = grants.iter().map(|g| g.color).collect();
                // The person's own group is orange: never a grant's unasked.
                let free = GroupColor::ALL[..8].iter().find(|c| !taken.contains(c));
                *free.unwrap_or(&GroupColor::ALL[grants.len() % 8])
            });
            let now = now_ms();
            let mut salt = [0u8; 16];
            getrandom::fill(&mut salt).expect("the OS random source is available");
            let grant = Grant {
                name: new.name,
                sites: new.sites,
                color,
                expires_at_ms: new.expires_in.map(|d| now.saturating_add(d.as_millis() as u64)),
                evaluate: new.evaluate,
                ask: new.ask,
                created_at_ms: now,
                salt: salt.iter().map(|b| format!("{b:02x}")).collect(),
            };
            grants.push(grant.clone());
            Ok(grant)
        })
    }

    /// Removes a grant: its keys open nothing from now on.
    pub fn revoke(&self, secret: &Token, name: &str) -> Result<Grant, GrantError> {
        self.change(secret, |grants| {
            let at =
                grants.iter().position(|g| g.name.as_str() == name).ok_or_else(|| GrantError::Unknown(name.into()))?;
            Ok(grants.remove(at))
        })
    }

    /// Changes what a grant asks the person about (`grant set --ask`); its
    /// keys stay.
    pub fn set_ask(&self, secret: &Token, name: &str, ask: Vec<AskKind>) -> Result<Grant, GrantError> {
        self.change(secret, |grants| {
            let grant =
                grants.iter_mut().find(|g| g.name.as_str() == name).ok_or_else(|| GrantError::Unknown(name.into()))?;
            grant.ask = ask;
            Ok(grant.clone())
        })
    }

    /// Signs the file again for a new secret (`rotate`): the grants stay,
    /// their keys are new. A file the old secret did not sign is left as
    /// it is (and stays refused).
    pub fn resign(&self, old: &Token, new: &Token) -> Result<usize, GrantError> {
        let _lock = self.lock()?;
        let grants = self.load(old)?;
        if !self.path().exists() {
            return Ok(0);
        }
        self.save(new, &grants)?;
        Ok(grants.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grant::Door;

    fn new(name: &str) -> NewGrant {
        NewGrant {
            name: GrantName::parse(name).unwrap(),
            sites: Sites::parse_list("example.com").unwrap(),
            color: None,
            expires_in: None,
            evaluate: true,
            ask: Vec::new(),
        }
    }

    #[test]
    fn what_a_grant_asks_changes_and_its_key_stays() {
        let dir = tempfile::tempdir().unwrap();
        let book = GrantBook::new(StateDir::at(dir.path()));
        let secret = Token::generate();
        let grant = book.add(&secret, new("shop")).unwrap();
        let changed = book.set_ask(&secret, "shop", vec![AskKind::Submit]).unwrap();
        assert_eq!(changed.ask, [AskKind::Submit]);
        assert_eq!(changed.key(&secret, Door::Cdp), grant.key(&secret, Door::Cdp));
        assert_eq!(book.load(&secret).unwrap()[0].ask, [AskKind::Submit]);
        assert!(matches!(book.set_ask(&secret, "nope", vec![]), Err(GrantError::Unknown(_))));
    }

    #[test]
    fn grants_are_added_kept_listed_and_revoked() {
        let dir = tempfile::tempdir().unwrap();
        let book = GrantBook::new(StateDir::at(dir.path()));
        let secret = Token::generate();
        assert!(book.load(&secret).unwrap().is_empty(), "no file: no grants");
        let research = book.add(&secret, new("research")).unwrap();
        let mut timed = new("ci");
        timed.expires_in = Some(std::time::Duration::from_secs(3600));
        timed.evaluate = false;
        let ci = book.add(&secret, timed).unwrap();
        assert_eq!(research.color, GroupColor::Blue);
        assert_eq!(ci.color, GroupColor::Green, "the next free colour");
        assert!(ci.expires_at_ms.is_some_and(|at| at > now_ms()));
        assert!(matches!(book.add(&secret, new("research")), Err(GrantError::Exists(_))));
        let loaded = book.load(&secret).unwrap();
        assert_eq!(loaded, vec![research.clone(), ci.clone()], "kept as made");
        book.revoke(&secret, "research").unwrap();
        assert_eq!(book.load(&secret).unwrap(), vec![ci]);
        assert!(matches!(book.revoke(&secret, "research"), Err(GrantError::Unknown(_))));
        // Made again under the same name: a new key.
        let again = book.add(&secret, new("research")).unwrap();
        assert_ne!(again.key(&secret, Door::Cdp), research.key(&secret, Door::Cdp));
    }

    #[cfg(unix)]
    #[test]
    fn the_file_is_the_owners_alone() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let book = GrantBook::new(StateDir::at(dir.path()));
        book.add(&Token::generate(), new("research")).unwrap();
        let mode = fs::metadata(book.path()).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }

    /// The attack: someone who can write the state folder widens a grant's
    /// sites by hand, or plants a file of their own.
    #[test]
    fn a_file_the_secret_did_not_sign_grants_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let book = GrantBook::new(StateDir::at(dir.path()));
        let secret = Token::generate();
        book.add(&secret, new("research")).unwrap();
        let text = fs::read_to_string(book.path()).unwrap();
        fs::write(book.path(), text.replace("example.com", "*.com")).unwrap();
        let refused = book.load(&secret).unwrap_err();
        assert!(matches!(refused, GrantError::NotOurs { .. }), "{refused}");
        assert!(refused.to_string().contains("Delete it and add the grants again"), "{refused}");
        let other = Token::generate();
        let planted = GrantBook::new(StateDir::at(dir.path()));
        fs::remove_file(book.path()).unwrap();
        planted.add(&other, new("planted")).unwrap();
        assert!(matches!(book.load(&secret), Err(GrantError::NotOurs { .. })), "signed by another install");
        fs::write(book.path(), "{not json").unwrap();
        assert!(matches!(book.load(&secret), Err(GrantError::Malformed { .. })));
    }

    #[test]
    fn rotate_keeps_the_grants_with_new_keys() {
        let dir = tempfile::tempdir().unwrap();
        let book = GrantBook::new(StateDir::at(dir.path()));
        let (old, new_secret) = (Token::generate(), Token::generate());
        let grant = book.add(&old, new("research")).unwrap();
        assert_eq!(book.resign(&old, &new_secret).unwrap(), 1);
        assert!(matches!(book.load(&old), Err(GrantError::NotOurs { .. })));
        let kept = book.load(&new_secret).unwrap();
        assert_eq!(kept, vec![grant.clone()]);
        assert_ne!(kept[0].key(&new_secret, Door::Cdp), grant.key(&old, Door::Cdp), "the old key opens nothing");
        let empty = tempfile::tempdir().unwrap();
        assert_eq!(GrantBook::new(StateDir::at(empty.path())).resign(&old, &new_secret).unwrap(), 0);
        assert!(!empty.path().join("grants.json").exists(), "no file made where there was none");
    }
}
