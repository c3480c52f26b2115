//! The control engine's core: the profiles of one state directory, one
//! cached browser connection per profile, and what must outlive a
//! connection (the current tab of each profile, the refs of each tab).
//! The routes' work is done in the modules of their concern, each an
//! `impl Handle<Route> for Engine`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use cdp_client::CdpClient;
use managed_driver::{Arrival, Endpoint};
use managed_driver::{BrowserStatus, ManagedBrowsers, ManagedError};
use settings::{Config, Driver, Profile};

use crate::conn::Conn;
use crate::error::ControlError;
use crate::refs::{RefEntry, RefStore, RefTable, parse_ref};

/// What the engine asks of the relay in its own process, for the extension
/// driver (the binary implements it over the relay engine; the control
/// engine does not depend on it).
pub trait SharedTabs: std::fmt::Debug + Send + Sync {
    /// How many tabs the extension shares, or `None` when it is not
    /// connected.
    fn shared_tabs(&self) -> Option<usize>;

    /// A browser-level CDP connection to the relay in this process, as
    /// the person's (`grant` `None`) or as a live grant's, whose connection
    /// the relay holds to the grant's tabs and sites as it would a socket
    /// with the grant's key.
    fn connect(&self, grant: Option<&grants::Grant>) -> Result<cdp_client::Channels, ControlError>;

    /// Why the tab was not in front, when `message` is the relay's answer
    /// to a capture of a tab Chrome does not paint.
    fn not_in_front(&self, message: &str) -> Option<String>;

    /// Hands the shared tab `target_id` to the person until they say Done
    /// or `within` passes (`grant`: the grant whose agent asks, which may
    /// hand over its own tabs only).
    fn hand_over(
        &self,
        target_id: String,
        grant: Option<Arc<grants::Grant>>,
        reason: String,
        within: std::time::Duration,
    ) -> futures_util::future::BoxFuture<'static, Result<crate::api::HandoffEnded, String>>;

    /// How long a grant's held action may wait for the person: a grant's
    /// connection waits that much longer for Chrome's answers.
    fn ask_within(&self) -> std::time::Duration;
}

/// The relay this process runs, for the extension driver: what it shares
/// (to tell "no extension" from "no shared tab") and the connections to it.
#[derive(Debug, Clone)]
pub struct RelayLink {
    pub extension: Arc<dyn SharedTabs>,
    /// `http://127.0.0.1:PORT`, for the endpoints shown in status (never
    /// with the token).
    pub http_base: String,
}

impl crate::api::Lend for Engine {
    fn lent_to(&self, access: &grants::Access) -> Result<Self, ControlError> {
        match access.grant() {
            None => Ok(self.clone()),
            Some(grant) => self.lent(grant),
        }
    }
}

impl RelayLink {
    pub(crate) fn shared_tabs(&self) -> Option<usize> {
        self.extension.shared_tabs()
    }
}

/// The control engine. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Engine(pub(crate) Arc<Inner>);

/// Serialises page operations on one tab.
pub(crate) type PageLock = Arc<tokio::sync::Mutex<()>>;

#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) state_root: PathBuf,
    pub(crate) browsers: ManagedBrowsers,
    pub(crate) relay: Option<RelayLink>,
    /// The cached connection of each profile. Never held across an await:
    /// profiles connect side by side ([`Inner::connecting`]).
    pub(crate) conns: Mutex<HashMap<String, Arc<Conn>>>,
    /// One connection attempt at a time per profile, so that requests at
    /// once make one connection; a profile that is slow to connect (a
    /// browser still starting, a remote `cdpUrl` timing out) holds up no
    /// other profile.
    connecting: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    refs: Mutex<RefStore>,
    /// Per profile, the tab that requests without `targetId` go to (last
    /// opened, focused or navigated). Kept here, not on the connection, so
    /// that it survives a reconnect.
    current: Mutex<HashMap<String, String>>,
    /// One page operation at a time per tab: a snapshot and an action on
    /// the same tab must not interleave (the isolated world's set-up, the
    /// ref table, input). Keyed by (profile, target id).
    pub(crate) page_locks: Mutex<HashMap<(String, String), PageLock>>,
    /// The grant this engine is lent to (`None`: the person's own engine,
    /// which sees every shared tab and every profile).
    pub(crate) grant: Option<Arc<grants::Grant>>,
    /// The person's engine keeps one lent engine per grant: its own
    /// connection (with the grant's key), current tabs and refs.
    lent: Mutex<HashMap<String, Engine>>,
}

/// How often `serve` prunes the media folder ([`Engine::prune_media`]).
pub const MEDIA_SWEEP: std::time::Duration = std::time::Duration::from_secs(10 * 60);

impl Engine {
    /// `browsers`: the serve's managed browsers (their state directory is
    /// the engine's); `relay`: the relay of this process, for the extension
    /// driver (none: only managed profiles work).
    pub fn new(browsers: ManagedBrowsers, relay: Option<RelayLink>) -> Self {
        Self(Arc::new(Inner {
            state_root: browsers.root().to_path_buf(),
            browsers,
            relay,
            conns: Mutex::new(HashMap::new()),
            connecting: Mutex::new(HashMap::new()),
            refs: Mutex::new(RefStore::default()),
            current: Mutex::new(HashMap::new()),
            page_locks: Mutex::new(HashMap::new()),
            grant: None,
            lent: Mutex::new(HashMap::new()),
        }))
    }

    /// This engine as `grant`'s agents see it: made on first use, kept
    /// until the grant ends ([`Self::forget_lent`]).
    fn lent(&self, grant: &Arc<grants::Grant>) -> Result<Engine, ControlError> {
        let name = grant.name.to_string();
        let mut lent = self.0.lent.lock().unwrap_or_else(|p| p.into_inner());
        // A grant made again under the same name is another grant.
        if let Some(engine) = lent.get(&name).filter(|e| e.0.grant.as_ref().is_some_and(|g| g == grant)) {
            return Ok(engine.clone());
        }
        let link = self.0.relay.as_ref().ok_or(ControlError::NoExtension)?;
        let engine = Engine(Arc::new(Inner {
            state_root: self.0.state_root.clone(),
            browsers: self.0.browsers.clone(),
            relay: Some(link.clone()),
            conns: Mutex::new(HashMap::new()),
            connecting: Mutex::new(HashMap::new()),
            refs: Mutex::new(RefStore::default()),
            current: Mutex::new(HashMap::new()),
            page_locks: Mutex::new(HashMap::new()),
            grant: Some(grant.clone()),
            lent: Mutex::new(HashMap::new()),
        }));
        lent.insert(name, engine.clone());
        Ok(engine)
    }

    /// A grant ended (revoked, expired): its lent engine goes, and its
    /// connections with it.
    pub fn forget_lent(&self, name: &str) {
        let engine = self.0.lent.lock().unwrap_or_else(|p| p.into_inner()).remove(name);
        if let Some(engine) = engine {
            let conns: Vec<Arc<Conn>> =
                engine.0.conns.lock().unwrap_or_else(|p| p.into_inner()).drain().map(|(_, c)| c).collect();
            for conn in conns {
                conn.client().close();
            }
        }
    }

    /// How long a command's answer is awaited: a grant's input, upload or
    /// navigation may be held until the person answers (`--ask`).
    fn patience(&self) -> std::time::Duration {
        let asks = self.0.relay.as_ref().filter(|_| self.grant().is_some_and(|g| !g.ask.is_empty()));
        crate::conn::COMMAND_PATIENCE + asks.map_or(std::time::Duration::ZERO, |link| link.extension.ask_within())
    }

    /// The grant this engine is lent to, if any.
    pub(crate) fn grant(&self) -> Option<&Arc<grants::Grant>> {
        self.0.grant.as_ref()
    }

    /// A lent engine's refusal of `url` (outside its grant's sites).
    pub(crate) fn refuse_url(&self, url: &str) -> Result<(), ControlError> {
        match self.grant().and_then(|g| g.refuses_url(url)) {
            Some(refusal) => Err(ControlError::NotGranted(refusal)),
            None => Ok(()),
        }
    }

    /// config.toml, read on every request (edits apply at once), with the
    /// ephemeral profiles this process started: every lookup by name
    /// ([`Self::profile`], the routes) goes through here, so a request to
    /// an ephemeral profile works as to any other.
    pub(crate) fn config(&self) -> Result<Config, ControlError> {
        Ok(self.0.browsers.config()?)
    }

    /// Launches a managed profile's browser (a no-op when it runs), within
    /// config.toml's `maxManagedBrowsers`.
    pub(crate) async fn launch(&self, config: &Config, profile: &Profile) -> Result<BrowserStatus, ControlError> {
        Ok(self.0.browsers.clone().with_max_running(config.max_managed_browsers).start(profile).await?)
    }

    /// The profile a request is about: the one it names, else config.toml's
    /// `defaultProfile`. The default, `auto`, is the user's shared tabs when
    /// the extension shares one, else the managed Chrome, launched here on
    /// first use (so that an agent's first command just works).
    pub async fn profile(&self, name: Option<&str>) -> Result<Profile, ControlError> {
        let config = self.config()?;
        if let Some(grant) = self.grant() {
            // A grant is lent the person's shared tabs, nothing else.
            let profile = match name {
                Some(name) => config.profile(Some(name))?.clone(),
                None => config.auto_profile(true)?.clone(),
            };
            if profile.driver != Driver::Extension {
                return Err(ControlError::NotGranted(format!(
                    "the grant '{}' is lent the person's shared tabs only (profile '{}' is theirs): leave out --profile",
                    grant.name, profile.name
                )));
            }
            return Ok(profile);
        }
        if name.is_some() || !config.default_is_auto() {
            return Ok(config.profile(name)?.clone());
        }
        let profile = self.auto_profile(&config)?;
        if profile.launches() && self.0.browsers.status(&profile).state != managed_driver::State::Running {
            tracing::info!(profile = %profile.name, "no tab is shared: launching the managed Chrome for this request");
            self.launch(&config, &profile).await?;
        }
        Ok(profile)
    }

    /// What `auto` means now, without launching anything.
    pub(crate) fn auto_profile(&self, config: &Config) -> Result<Profile, ControlError> {
        let shares_tabs = self.0.relay.as_ref().and_then(RelayLink::shared_tabs).is_some_and(|tabs| tabs > 0);
        Ok(config.auto_profile(shares_tabs)?.clone())
    }

    /// The name of the profile a request without one goes to now.
    pub(crate) fn default_name(&self, config: &Config) -> String {
        match config.default_is_auto() {
            true => self.auto_profile(config).map(|p| p.name).unwrap_or_default(),
            false => config.default_profile.clone(),
        }
    }

    pub(crate) fn allow_evaluate(&self) -> Result<bool, ControlError> {
        Ok(self.config()?.allow_evaluate)
    }

    /// A lent engine's refusal of the agent's own script (`--no-evaluate`).
    pub(crate) fn refuse_evaluate(&self) -> Result<(), ControlError> {
        match self.grant().filter(|g| !g.evaluate) {
            Some(grant) => Err(ControlError::NotGranted(format!(
                "the grant '{}' may not run its own JavaScript in the page (evaluate, wait with fn): it was given with --no-evaluate",
                grant.name
            ))),
            None => Ok(()),
        }
    }

    /// The profile's connection: the cached one while it lives, else a new
    /// one (a lost connection is replaced on the next request).
    pub(crate) async fn conn(&self, profile: &Profile) -> Result<Arc<Conn>, ControlError> {
        if let Some(conn) = self.live_conn(&profile.name) {
            if !self.0.browsers.drop_outdated_remote(profile).await {
                return Ok(conn);
            }
            // config.toml was edited to reach the profile's browser another
            // way: this connection went to the old one.
            self.disconnect(&profile.name).await;
        }
        let gate = self
            .0
            .connecting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(profile.name.clone())
            .or_default()
            .clone();
        // Noted before waiting: a remote profile's attempt that fails while
        // this request waits is its answer too.
        let arrived = self.0.browsers.arrival(&profile.name);
        let _connecting = gate.lock().await;
        // Another request may have connected while this one waited.
        if let Some(conn) = self.live_conn(&profile.name) {
            return Ok(conn);
        }
        let client = CdpClient::over(self.browser_channels(profile, arrived).await?);
        let conn =
            Conn::over(&profile.name, client, self.patience()).await.map_err(ControlError::cdp(&profile.name))?;
        self.0.conns.lock().unwrap_or_else(|p| p.into_inner()).insert(profile.name.clone(), conn.clone());
        Ok(conn)
    }

    /// The profile's cached connection, while it lives.
    pub(crate) fn live_conn(&self, profile: &str) -> Option<Arc<Conn>> {
        self.0.conns.lock().unwrap_or_else(|p| p.into_inner()).get(profile).filter(|c| !c.is_closed()).cloned()
    }

    /// A profile's browser-level CDP, in process either way: a client of
    /// the relay engine (extension: the person's shared tabs, or the
    /// grant's), or a session on the launched browser's pipe or on the
    /// connection to the profile's `cdpUrl`/`cdpPort` (attach-only, remote),
    /// which the relay's `/profiles/<name>/` clients share.
    async fn browser_channels(
        &self,
        profile: &Profile,
        arrived: Arrival,
    ) -> Result<cdp_client::Channels, ControlError> {
        match profile.driver {
            Driver::Extension => {
                let link = self.0.relay.as_ref().ok_or(ControlError::NoExtension)?;
                if link.shared_tabs().is_none() {
                    return Err(ControlError::NoExtension);
                }
                link.extension.connect(self.grant().map(|grant| &**grant))
            }
            // A session on the launched browser's pipe, or on the one
            // connection to a remote browser (opened, or opened again after
            // a drop, here).
            Driver::Managed => match self.0.browsers.connect_as_of(profile, Endpoint::Browser, arrived).await {
                Ok(channels) => Ok(channels),
                Err(ManagedError::NotRunning(_)) => Err(ControlError::NotRunning(profile.name.clone())),
                Err(other) => Err(other.into()),
            },
        }
    }

    /// Drops the profile's connection, as a lost connection would (tests
    /// check that refs survive it).
    pub async fn disconnect(&self, profile: &str) {
        let conn = self.0.conns.lock().unwrap_or_else(|p| p.into_inner()).remove(profile);
        if let Some(conn) = conn {
            conn.client().close();
        }
    }

    // ---- what outlives a connection ----------------------------------------

    pub(crate) fn current(&self, profile: &str) -> Option<String> {
        self.0.current.lock().unwrap_or_else(|p| p.into_inner()).get(profile).cloned()
    }

    pub(crate) fn set_current(&self, profile: &str, target_id: &str) {
        self.0.current.lock().unwrap_or_else(|p| p.into_inner()).insert(profile.to_string(), target_id.to_string());
    }

    pub(crate) fn forget_current(&self, profile: &str) {
        self.0.current.lock().unwrap_or_else(|p| p.into_inner()).remove(profile);
    }

    pub(crate) fn refs(&self) -> MutexGuard<'_, RefStore> {
        self.0.refs.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn forget_refs(&self, profile: &str, target_id: &str) {
        self.refs().forget(profile, target_id);
    }

    /// A ref of the tab's last snapshot: its normal name and entry.
    pub(crate) fn ref_entry(
        &self,
        profile: &str,
        target_id: &str,
        element_ref: &str,
    ) -> Result<(String, RefEntry), ControlError> {
        let name = parse_ref(element_ref)?;
        let table: Arc<RefTable> =
            self.refs().get(profile, target_id).ok_or_else(|| ControlError::UnknownRef(name.clone()))?;
        let entry = table.get(&name)?.clone();
        Ok((name, entry))
    }

    /// Saves a screenshot or PDF in the media folder (owner-only, pruned to
    /// the configured retention).
    pub(crate) fn save_media(&self, kind: &str, extension: &str, data: &[u8]) -> Result<PathBuf, ControlError> {
        let retention = self.media_retention()?;
        let media = state_dir::StateDir::at(&self.0.state_root).media();
        media
            .save(kind, extension, data, retention)
            .map_err(|source| ControlError::Io { path: media.path().to_path_buf(), source })
    }

    /// Prunes the media folder to the configured retention, without a new
    /// file: `serve` calls it at start and every [`MEDIA_SWEEP`].
    pub fn prune_media(&self) {
        match self.media_retention() {
            Ok(retention) => state_dir::StateDir::at(&self.0.state_root).media().prune(retention),
            Err(e) => tracing::debug!("media not pruned: {e}"),
        }
    }

    fn media_retention(&self) -> Result<state_dir::Retention, ControlError> {
        let config = self.config()?;
        Ok(state_dir::Retention { keep: config.media_keep, max_age: config.media_max_age })
    }
}
