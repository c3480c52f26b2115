//! The relay engine's state, [`Relay`], and its plain parts: the registry,
//! the extension's link, the clients, the calls waiting; each concern's file
//! adds its own `impl Relay` (`lib.rs` lists them).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use dashmap::DashMap;
use serde_json::{Value, json};
use shared_protocol::{CallId, Hello, RelayMessage, TabId};
use state_dir::Token;
use tokio::sync::watch;

use crate::client::ClientHandle;
use crate::config::RelayConfig;
use crate::error::CallError;
use crate::link::ExtensionLink;
use crate::pending::PendingCalls;
use crate::questions::Asking;
use crate::targets::{self, Registry};
use crate::{discovery, queue, withheld};

/// Address and token used to build the URLs we hand out. Built from the bound
/// address, never from a request's `Host`.
#[derive(Debug, Clone)]
pub struct PublicBase {
    pub addr: std::net::SocketAddr,
    pub token: Option<Token>,
}

impl PublicBase {
    pub fn ws_url(&self, path: &str) -> String {
        self.ws_url_with(path, self.token.as_ref())
    }

    /// [`Self::ws_url`] with `key` in it: the key the asker presented,
    /// never another (a grant's client is handed its own key back, not the
    /// person's).
    pub fn ws_url_with(&self, path: &str, key: Option<&Token>) -> String {
        match key {
            Some(token) => format!("ws://{}{path}?token={}", self.addr, token.as_str()),
            None => format!("ws://{}{path}", self.addr),
        }
    }

    #[cfg(feature = "testing")]
    pub fn http_url(&self) -> String {
        match &self.token {
            Some(token) => format!("http://{}/?token={}", self.addr, token.as_str()),
            None => format!("http://{}/", self.addr),
        }
    }
}

/// Counters for tests and status: nothing may leak across connects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayStats {
    /// Clients of the user's tabs (the extension's targets).
    pub clients: usize,
    /// Clients of managed profiles' sockets, piped to their browser.
    pub piped_clients: usize,
    pub pending: usize,
    pub targets: usize,
    pub child_sessions: usize,
    /// Client sessions on targets, over all targets.
    pub subscriptions: usize,
    pub extension_connected: bool,
    /// Bytes queued to clients, all together.
    pub client_queue_bytes: usize,
    /// Bytes queued to the extension.
    pub extension_queue_bytes: usize,
    /// Extension connections accepted so far (a reconnect increments it).
    pub extension_connections: u64,
}

/// The relay engine. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Relay(pub(crate) Arc<Inner>);

#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) config: RelayConfig,
    /// Synthetic id of the browser target.
    pub(crate) browser_id: Arc<str>,
    /// Synthetic id of the one browser context (the user's profile).
    pub(crate) context_id: Arc<str>,
    pub(crate) base: OnceLock<PublicBase>,
    /// The install's secret: the keys derive from it, and it signs the
    /// pairing links' codes; `None`: no extension can pair.
    pub(crate) pairing: Option<state_dir::Token>,
    /// The extension's key (derived from `pairing`), which the extension
    /// and the relay prove to each other ([`shared_protocol::auth`]): the
    /// extension holds it, never the secret (protocol 8).
    pub(crate) extension_key: Option<state_dir::Token>,
    /// `browser-relay pair`'s one-time codes, which an extension redeems
    /// for the pairing token (sealed for its code) in its handshake.
    pub(crate) pairing_codes: Option<state_dir::PairingCodes>,
    /// Set once the extension's hello is accepted.
    pub(crate) link: watch::Sender<Option<Arc<ExtensionLink>>>,
    /// Taken once an extension proved the pairing, until its socket is
    /// gone: a second extension is refused, and a connection that proved
    /// nothing never holds it (a local program could, and keep the real
    /// extension out).
    pub(crate) extension_claimed: AtomicBool,
    /// `/extension` connections still proving the pairing
    /// ([`MAX_HANDSHAKES`] at once), oldest first: each one's number and
    /// what tells it to give its place up.
    pub(crate) handshakes: Mutex<std::collections::VecDeque<(u64, tokio_util::sync::CancellationToken)>>,
    pub(crate) handshake_numbers: AtomicU64,
    pub(crate) generation: AtomicU64,
    pub(crate) registry: Mutex<Registry>,
    /// Chrome's flat child sessions (iframes, workers) → their tab.
    pub(crate) children: DashMap<Arc<str>, TabId>,
    /// The calls to the extension waiting for their answers (`forward.rs`).
    pub(crate) pending: PendingCalls,
    pub(crate) next_client: AtomicU64,
    pub(crate) clients: DashMap<u64, Arc<ClientHandle>>,
    /// The managed profiles' clients, relayed to a browser's pipe (listed
    /// apart: the extension's events never go to them).
    pub(crate) piped: DashMap<u64, Arc<ClientHandle>>,
    /// Where clients' actions are recorded (`oversight.rs`), once set.
    pub(crate) activity: OnceLock<activity::ActivityRecord>,
    /// The dashboard's address, when the control API runs.
    pub(crate) dashboard: OnceLock<String>,
    /// Fired when the server stops: every socket loop ends.
    pub(crate) shutdown: tokio_util::sync::CancellationToken,
    /// Client connections holding a [`ClientSlot`] (every CDP socket, the
    /// managed profiles' included), for the client cap.
    pub(crate) slots: AtomicUsize,
    /// Bytes queued to all clients ([`RelayConfig::total_client_queue_bytes`]).
    pub(crate) client_bytes: Arc<queue::Meter>,
    /// Clients' commands answered by the extension, and their round trips
    /// summed in nanoseconds: the stage between the relay and Chrome.
    pub(crate) answered: AtomicU64,
    pub(crate) answered_ns: AtomicU64,
    /// Who holds a shared tab may have changed (a session on it attached or
    /// detached, a client gone, a tab come or gone): the extension's link
    /// tells it (`clients`) at once, not on a timer.
    pub(crate) holders: tokio::sync::Notify,
    /// The grants the relay honours (`lending.rs`), as the binary sets them.
    pub(crate) grants: std::sync::RwLock<Vec<Arc<grants::Grant>>>,
    /// The questions waiting for the person and the tabs handed over
    /// (`asking.rs`).
    pub(crate) asking: Mutex<Asking>,
    /// When the user's browser's clients deleted cookies in the last minute
    /// (`browser_domain::COOKIE_DELETIONS_PER_MINUTE`), all clients together.
    pub(crate) cookie_deletions: Mutex<std::collections::VecDeque<std::time::Instant>>,
    /// Bumped whenever a question or a handoff comes or goes.
    pub(crate) asks_changed: watch::Sender<u64>,
    /// The protocol's methods, for telling Chrome's "wasn't found" of a
    /// withheld domain as what it is (`withheld.rs`).
    pub(crate) protocol_methods: withheld::ProtocolMethods,
}

/// `/extension` connections proving the pairing at once: the extension
/// needs one; a few more let a reconnect overlap a dying socket.
pub const MAX_HANDSHAKES: usize = 4;

/// One client connection's place under the client cap, claimed before the
/// upgrade and held for the connection's life.
#[derive(Debug)]
pub struct ClientSlot(Relay);

impl Drop for ClientSlot {
    fn drop(&mut self) {
        self.0.0.slots.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The key the extension holds and proves the pairing with: derived from
/// the install's `secret` for that door alone.
pub fn extension_key(secret: &state_dir::Token) -> state_dir::Token {
    let key = shared_protocol::auth::derive_key(secret.as_str(), shared_protocol::auth::KeyPurpose::Extension);
    state_dir::Token::parse(&key).expect("a derived key is 64 hex characters")
}

impl Relay {
    /// `pairing`: the token the extension was paired with (kept even when
    /// CDP clients need none, `--no-auth`); `pairing_codes`: where the
    /// pairing links' one-time codes are (`None`: no link pairs).
    pub fn new(
        config: RelayConfig,
        pairing: Option<state_dir::Token>,
        pairing_codes: Option<state_dir::PairingCodes>,
    ) -> Self {
        Self(Arc::new(Inner {
            browser_id: targets::new_id(),
            context_id: targets::new_id(),
            base: OnceLock::new(),
            extension_key: pairing.as_ref().map(extension_key),
            pairing,
            pairing_codes,
            link: watch::Sender::new(None),
            extension_claimed: AtomicBool::new(false),
            handshakes: Mutex::default(),
            handshake_numbers: AtomicU64::new(0),
            generation: AtomicU64::new(0),
            registry: Mutex::new(Registry::default()),
            children: DashMap::new(),
            pending: PendingCalls::default(),
            next_client: AtomicU64::new(1),
            clients: DashMap::new(),
            piped: DashMap::new(),
            activity: OnceLock::new(),
            dashboard: OnceLock::new(),
            shutdown: tokio_util::sync::CancellationToken::new(),
            slots: AtomicUsize::new(0),
            client_bytes: queue::Meter::new(config.total_client_queue_bytes),
            answered: AtomicU64::new(0),
            answered_ns: AtomicU64::new(0),
            holders: tokio::sync::Notify::new(),
            grants: std::sync::RwLock::new(Vec::new()),
            asking: Mutex::new(Asking::default()),
            cookie_deletions: Mutex::default(),
            asks_changed: watch::channel(0).0,
            protocol_methods: withheld::ProtocolMethods::default(),
            config,
        }))
    }

    /// Ends every client and extension connection (server stop).
    pub fn shutdown(&self) {
        self.0.shutdown.cancel();
    }

    pub fn shutting_down(&self) -> &tokio_util::sync::CancellationToken {
        &self.0.shutdown
    }

    /// A place under `max_clients` for one more client connection, or
    /// `None` when they are all taken. Claimed in one atomic step before the
    /// upgrade, so a burst of handshakes cannot overshoot the cap.
    pub fn try_client_slot(&self) -> Option<ClientSlot> {
        let max = self.0.config.max_clients;
        self.0.slots.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < max).then_some(n + 1)).ok()?;
        Some(ClientSlot(self.clone()))
    }

    pub fn config(&self) -> &RelayConfig {
        &self.0.config
    }

    /// Records the bound address (and token) used in every URL we hand out.
    pub fn set_public_base(&self, base: PublicBase) {
        let _ = self.0.base.set(base);
    }

    pub fn public_base(&self) -> Option<&PublicBase> {
        self.0.base.get()
    }

    pub fn browser_id(&self) -> &str {
        &self.0.browser_id
    }

    pub(crate) fn registry(&self) -> MutexGuard<'_, Registry> {
        // A panic while holding the lock cannot leave the registry in a state
        // worse than losing one update; keep serving.
        self.0.registry.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Who holds a shared tab may have changed: the extension's link looks
    /// ([`Self::tab_clients`]) and tells it if so.
    pub(crate) fn holders_changed(&self) {
        self.0.holders.notify_one();
    }

    /// The clients holding a session on each attached tab (tabs without
    /// any left out), in tab and client order: what the extension is told.
    pub fn tab_clients(&self) -> Vec<shared_protocol::TabClients> {
        let registry = self.registry();
        let mut tabs: Vec<shared_protocol::TabClients> = registry
            .iter()
            .filter_map(|target| {
                let mut clients: Vec<shared_protocol::ClientInfo> = Vec::new();
                for sub in &target.subs {
                    if !clients.iter().any(|c| c.id == sub.client.id) {
                        clients
                            .push(shared_protocol::ClientInfo { id: sub.client.id, name: sub.client.name.to_string() });
                    }
                }
                clients.sort_by_key(|c| c.id);
                (!clients.is_empty()).then_some(shared_protocol::TabClients { tab_id: target.tab_id, clients })
            })
            .collect();
        tabs.sort_by_key(|t| t.tab_id);
        tabs
    }

    pub fn stats(&self) -> RelayStats {
        let (targets, subscriptions) = {
            let registry = self.registry();
            (registry.len(), registry.iter().map(|t| t.subs.len()).sum())
        };
        RelayStats {
            clients: self.0.clients.len(),
            piped_clients: self.0.piped.len(),
            pending: self.0.pending.len(),
            targets,
            subscriptions,
            child_sessions: self.0.children.len(),
            extension_connected: self.link().is_some(),
            client_queue_bytes: self.0.client_bytes.used(),
            extension_queue_bytes: self.link().map_or(0, |link| link.queued_bytes()),
            extension_connections: self.0.generation.load(Ordering::Relaxed),
        }
    }

    /// Clients' commands the extension answered so far, and the sum of
    /// their round trips from the relay's queue through the extension's
    /// worker and `chrome.debugger` back to the relay: what the extension
    /// stage costs, apart from the relay's own and the client's hop (the
    /// extension-path benchmark reads it; `RUST_LOG=relay_engine=trace`
    /// logs each).
    #[cfg(feature = "testing")]
    pub fn extension_round_trips(&self) -> (u64, std::time::Duration) {
        let nanos = self.0.answered_ns.load(Ordering::Relaxed);
        (self.0.answered.load(Ordering::Relaxed), std::time::Duration::from_nanos(nanos))
    }

    pub(crate) fn link(&self) -> Option<Arc<ExtensionLink>> {
        self.0.link.borrow().clone()
    }

    pub fn hello(&self) -> Option<Hello> {
        self.link().map(|l| l.hello.clone())
    }

    /// Waits up to `grace` for an extension that has said hello.
    pub async fn wait_for_extension(&self, grace: Duration) -> bool {
        let mut rx = self.0.link.subscribe();
        tokio::time::timeout(grace, rx.wait_for(Option::is_some)).await.is_ok_and(|r| r.is_ok())
    }

    /// Whether an extension that proved the pairing is connected.
    pub fn extension_connected(&self) -> bool {
        self.0.extension_claimed.load(Ordering::Acquire)
    }

    /// Makes one `chrome.*` call through the extension and waits for its
    /// reply (raw JSON of the result, `null` when Chrome returned nothing).
    pub async fn call(&self, build: impl FnOnce(CallId) -> RelayMessage<'static>) -> Result<String, CallError> {
        self.roundtrip(|id| {
            let message = build(id);
            (message.name(), shared_protocol::encode(&message))
        })
        .await
    }

    /// Sends a CDP command to a tab through `debugger.sendCommand` and waits
    /// for the raw result.
    pub async fn send_command(
        &self,
        tab_id: TabId,
        method: &'static str,
        params: Option<Value>,
    ) -> Result<String, CallError> {
        self.send_session_command(tab_id, None, method, params).await
    }

    /// Like [`Self::send_command`], on one of the tab's flat child sessions.
    pub async fn send_session_command(
        &self,
        tab_id: TabId,
        session: Option<&str>,
        method: &'static str,
        params: Option<Value>,
    ) -> Result<String, CallError> {
        let params = params.map(|p| serde_json::value::to_raw_value(&p).expect("a Value serialises"));
        self.roundtrip(|id| {
            let message = RelayMessage::DebuggerSendCommand(shared_protocol::SendCommand {
                id,
                tab_id,
                session_id: session.map(Into::into),
                method: method.into(),
                params: params.as_deref(),
            });
            (method, shared_protocol::encode(&message))
        })
        .await
    }

    // ---- JSON views for the HTTP routes -------------------------------

    /// The key URLs handed to `access` carry: the person's CDP key, or the
    /// grant's own (derived from the secret, as the binary derives it).
    fn url_key(&self, access: &grants::Access) -> Option<Token> {
        let base = self.public_base()?.token.clone()?;
        match access.grant() {
            None => Some(base),
            Some(grant) => Some(grant.key(self.0.pairing.as_ref()?, grants::Door::Cdp)),
        }
    }

    /// `/json/version`, for the person.
    #[cfg(feature = "testing")]
    pub fn version_json(&self) -> Value {
        self.version_json_for(&grants::Access::Person)
    }

    /// `/json/version` as `access` is shown it: its URL holds its own key.
    pub fn version_json_for(&self, access: &grants::Access) -> Value {
        let hello = self.hello();
        let base = self.public_base();
        let document = discovery::VersionDocument {
            browser: hello
                .as_ref()
                .map_or("Browser-Relay (no extension connected)", |h| h.browser_version.as_str())
                .to_string(),
            protocol_version: "1.3".into(),
            user_agent: hello.as_ref().map_or("", |h| h.user_agent.as_str()).to_string(),
            v8_version: String::new(),
            webkit_version: String::new(),
            web_socket_debugger_url: base.map(|b| {
                b.ws_url_with(&format!("/devtools/browser/{}", self.0.browser_id), self.url_key(access).as_ref())
            }),
        };
        serde_json::to_value(document).expect("serialises")
    }

    /// `/json/list`: like Chrome's, one entry per attached page with a
    /// page-level WebSocket URL; a grant's key sees its own tabs only.
    pub fn list_json(&self, access: &grants::Access) -> Value {
        let registry = self.registry();
        let visible = registry.iter().filter(|t| access.sees(t.grant.as_deref()));
        Value::Array(visible.map(|t| self.list_entry(t, access)).collect())
    }

    /// One page as `/json/list` shows it to `access`.
    fn list_entry(&self, target: &targets::Target, access: &grants::Access) -> Value {
        let path = format!("/devtools/page/{}", target.target_id);
        let ws = self.public_base().map(|b| b.ws_url_with(&path, self.url_key(access).as_ref()));
        let mut entry = discovery::ListEntry::new(&target.target_id, "page", &target.title, &target.url, ws);
        entry.favicon_url.clone_from(&target.fav_icon_url);
        serde_json::to_value(entry).expect("serialises")
    }

    /// `PUT /json/new?<url>`: a new tab (attached, as `Target.createTarget`
    /// makes it), as `/json/list` shows it.
    pub async fn new_tab(&self, url: Option<&str>, access: &grants::Access) -> Result<Value, CallError> {
        let params = json!({"url": url.unwrap_or("about:blank")}).to_string();
        let created = self.extension_backed("Target.createTarget", Some(&params), access).await?;
        let target_id = serde_json::from_str::<Value>(&created)
            .ok()
            .and_then(|v| v["targetId"].as_str().map(str::to_string))
            .ok_or_else(|| CallError::Chrome("the new tab has no target".into()))?;
        let registry = self.registry();
        let target = registry.by_target_id(&target_id).ok_or_else(|| CallError::Chrome("the new tab closed".into()))?;
        Ok(self.list_entry(target, access))
    }

    /// `/extension/status`.
    pub fn status_json(&self) -> Value {
        let hello = self.hello();
        json!({
            "connected": hello.is_some(),
            // Which relay this is and which extension protocols it takes:
            // the options page shows them beside the extension's own, also
            // when the relay refused its protocol (and sent no welcome).
            "relayVersion": env!("CARGO_PKG_VERSION"),
            "protocols": shared_protocol::ProtocolRange::THIS,
            "extensionVersion": hello.as_ref().map(|h| h.extension_version.clone()),
            "browser": hello.as_ref().map(|h| h.browser_version.clone()),
            "attachedTabs": self.registry().len(),
            "dashboard": self.0.dashboard.get(),
            // How many grants the relay honours (no names): the extension,
            // sharing nothing, asks it to know whether to stay connected
            // for a grant's agents.
            "grants": self.0.grants.read().unwrap_or_else(|p| p.into_inner()).len(),
        })
    }

    pub fn tab_of_target(&self, target_id: &str) -> Option<TabId> {
        self.registry().tab_of(target_id)
    }

    /// [`Self::tab_of_target`], for a target `access` may see: another
    /// grant's tab is as unknown to it as a closed one.
    pub fn visible_tab_of_target(&self, target_id: &str, access: &grants::Access) -> Option<TabId> {
        let registry = self.registry();
        registry.by_target_id(target_id).filter(|t| access.sees(t.grant.as_deref())).map(|t| t.tab_id)
    }

    /// Brings a tab to the front (`/json/activate`, `Target.activateTarget`).
    pub async fn activate_tab(&self, tab_id: TabId) -> Result<(), CallError> {
        let tab = self.call(|id| RelayMessage::TabsUpdate { id, tab_id, url: None, active: Some(true) }).await?;
        let window_id = serde_json::from_str::<shared_protocol::TabInfo>(&tab).ok().and_then(|t| t.window_id);
        if let Some(window_id) = window_id {
            self.call(|id| RelayMessage::WindowsUpdate { id, window_id, focused: Some(true) }).await?;
        }
        Ok(())
    }

    /// Closes a tab (`/json/close`, `Target.closeTarget`). The extension
    /// refuses to close the user's last tab.
    pub async fn close_tab(&self, tab_id: TabId) -> Result<(), CallError> {
        self.call(|id| RelayMessage::TabsRemove { id, tab_id }).await.map(drop)
    }

    /// Closes the tabs whose owners all left (see `Target::owners`), in the
    /// background: the leaving client waits for nothing.
    pub(crate) fn close_orphans(&self, tabs: Vec<TabId>) {
        for tab in tabs {
            let relay = self.clone();
            tokio::spawn(async move {
                tracing::info!(tab, "closing a tab its clients opened and left");
                if let Err(e) = relay.close_tab(tab).await {
                    tracing::warn!(tab, "could not close a tab its clients left: {e}");
                }
            });
        }
    }

    pub(crate) fn register_client(&self, client: Arc<ClientHandle>) {
        self.0.clients.insert(client.id, client);
    }

    pub(crate) fn next_client_id(&self) -> u64 {
        self.0.next_client.fetch_add(1, Ordering::Relaxed)
    }

    pub(crate) fn client_bytes(&self) -> &Arc<queue::Meter> {
        &self.0.client_bytes
    }

    pub(crate) fn context_id(&self) -> &Arc<str> {
        &self.0.context_id
    }

    /// A question or a handoff came or went (`asking.rs`).
    pub(crate) fn asks_changed(&self) {
        self.0.asks_changed.send_modify(|n| *n += 1);
    }
}
