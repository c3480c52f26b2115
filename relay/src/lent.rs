//! The grants `serve` honours now: their keys, checked at every door;
//! their revocation and expiry, which close their connections at once.
//!
//! `grants.json` is the truth ([`grants::GrantBook`]); `serve` reads it at
//! start and again when `browser-relay grant` changed it
//! (`POST /grants/reload`, or the dashboard's Revoke, which writes it
//! here). A grant gone from the file, or expired, has its connections
//! closed with the reason (`Relay::end_grant`) and is no longer sent to
//! the extension, which dissolves its groups.

use std::sync::{Arc, RwLock};

use grants::{Door, Grant, GrantBook, GrantError, GrantKeys};
use relay_engine::Relay;
use state_dir::Token;
use tokio::sync::Notify;

/// The grants of one `serve`.
/// Why a grant a connection was made under holds no more ([`Lent::now`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrantEnded {
    Expired,
    /// Revoked, or replaced by a new grant of its name.
    Revoked,
}

#[derive(Debug)]
pub struct Lent {
    /// The install's secret (`None` with `--no-auth`: no grant opens
    /// anything, as no key is checked).
    secret: Option<Token>,
    book: Option<GrantBook>,
    keys: RwLock<GrantKeys>,
    relay: Relay,
    /// What is told when a grant ends (the control engine forgets its
    /// lent engine).
    on_end: RwLock<Vec<OnEnd>>,
    /// Wakes [`Self::watch_expiry`] when the grants change.
    changed: Notify,
    /// Why the file was not honoured at the last load, if it was not.
    problem: RwLock<Option<String>>,
}

/// Told a grant's name when it ends.
struct OnEnd(Box<dyn Fn(&str) + Send + Sync>);

impl std::fmt::Debug for OnEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OnEnd")
    }
}

impl Lent {
    pub fn new(secret: Option<Token>, book: Option<GrantBook>, relay: Relay) -> Arc<Self> {
        let lent = Arc::new(Self {
            secret,
            book,
            keys: RwLock::default(),
            relay,
            on_end: RwLock::default(),
            changed: Notify::new(),
            problem: RwLock::default(),
        });
        lent.reload();
        lent
    }

    /// Calls `forget` with a grant's name when it ends.
    pub fn on_end(&self, forget: impl Fn(&str) + Send + Sync + 'static) {
        self.on_end.write().unwrap_or_else(|p| p.into_inner()).push(OnEnd(Box::new(forget)));
    }

    fn keys(&self) -> std::sync::RwLockReadGuard<'_, GrantKeys> {
        self.keys.read().unwrap_or_else(|p| p.into_inner())
    }

    /// The grant whose key for `door` is `presented` (not expired).
    pub fn find(&self, presented: &str, door: Door) -> Option<Arc<Grant>> {
        self.keys().find(presented, door)
    }

    /// The grant named `name`, expired or not.
    pub fn named(&self, name: &str) -> Option<Arc<Grant>> {
        self.keys().named(name).cloned()
    }

    /// `grant` as it stands now, for a connection made under it (a session,
    /// the control engine's link): the live grant, or why it ended. One
    /// given again under the same name is another grant: this one is gone.
    pub fn now(&self, grant: &Grant) -> Result<Arc<Grant>, GrantEnded> {
        if grant.expired() {
            return Err(GrantEnded::Expired);
        }
        self.named(grant.name.as_str()).filter(|live| **live == *grant).ok_or(GrantEnded::Revoked)
    }

    /// Every grant, as last read.
    pub fn all(&self) -> Vec<Arc<Grant>> {
        self.keys().grants().cloned().collect()
    }

    /// Why `grants.json` is not honoured, if it is not.
    pub fn problem(&self) -> Option<String> {
        self.problem.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The grant's key for `door`, for a client of this `serve`.
    pub fn key_of(&self, grant: &Grant, door: Door) -> Option<Token> {
        self.secret.as_ref().map(|secret| grant.key(secret, door))
    }

    /// Reads `grants.json` again: grants gone from it end (their
    /// connections closed: "revoked"), expired ones too ("expired"), and
    /// the relay and the extension learn the rest. A file that is not
    /// ours honours no grant, and says so in the log.
    pub fn reload(&self) {
        let (Some(secret), Some(book)) = (&self.secret, &self.book) else { return };
        let loaded = match book.load(secret) {
            Ok(grants) => {
                *self.problem.write().unwrap_or_else(|p| p.into_inner()) = None;
                grants
            }
            Err(error) => {
                tracing::warn!("{error}");
                let honoured = !matches!(error, GrantError::Read { .. });
                *self.problem.write().unwrap_or_else(|p| p.into_inner()) = Some(error.to_string());
                if !honoured {
                    return;
                }
                Vec::new()
            }
        };
        let before = self.all();
        *self.keys.write().unwrap_or_else(|p| p.into_inner()) = GrantKeys::new(secret, &loaded);
        for old in &before {
            // A grant of the same name made again is another grant: the
            // old one's clients go too.
            let kept = loaded.iter().any(|g| g.name == old.name && g.created_at_ms == old.created_at_ms);
            if !kept {
                self.end(old.name.as_str(), "was revoked by the person");
            }
        }
        self.publish();
        self.changed.notify_one();
    }

    /// Revokes a grant (the dashboard's Revoke): gone from the file, its
    /// connections closed at once.
    pub fn revoke(&self, name: &str) -> Result<Grant, GrantError> {
        let (Some(secret), Some(book)) = (&self.secret, &self.book) else {
            return Err(GrantError::Unknown(name.to_string()));
        };
        let revoked = book.revoke(secret, name)?;
        self.reload();
        Ok(revoked)
    }

    /// The live grants to the relay (and through it the extension).
    fn publish(&self) {
        let live: Vec<Arc<Grant>> = self.all().into_iter().filter(|g| !g.expired()).collect();
        self.relay.set_grants(live);
    }

    fn end(&self, name: &str, why: &str) {
        let reason = format!("Browser Relay: the grant '{name}' {why}");
        self.relay.end_grant(name, &reason);
        for forget in self.on_end.read().unwrap_or_else(|p| p.into_inner()).iter() {
            (forget.0)(name);
        }
    }

    /// Ends each grant when it expires (its connections closed with that
    /// reason), until `stop`.
    pub async fn watch_expiry(self: Arc<Self>, stop: tokio_util::sync::CancellationToken) {
        // Expiries up to here are dealt with (one that passed while serve
        // was not running had no connection to close).
        let mut checked = grants::now_ms();
        loop {
            let next = self.all().iter().filter_map(|g| g.expires_at_ms).filter(|at| *at > checked).min();
            let wait = next.map(|at| std::time::Duration::from_millis(at.saturating_sub(grants::now_ms())));
            tokio::select! {
                () = stop.cancelled() => return,
                () = self.changed.notified() => continue,
                () = async {
                    match wait {
                        Some(wait) => tokio::time::sleep(wait).await,
                        None => std::future::pending().await,
                    }
                } => {
                    let now = grants::now_ms();
                    let ended = self.all().into_iter().filter(|g| g.expires_at_ms.is_some_and(|at| at > checked && at <= now));
                    for grant in ended {
                        tracing::info!(grant = %grant.name, "a grant expired");
                        self.end(grant.name.as_str(), "expired");
                    }
                    checked = now;
                    self.publish();
                }
            }
        }
    }
}
