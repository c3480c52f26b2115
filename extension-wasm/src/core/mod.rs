//! Every decision the extension makes, as a state machine over [`Host`].
//!
//! The core never waits: it asks the host to do something (a `chrome.*`
//! call tagged with an [`OpId`], a WebSocket frame, a timer) and is told the
//! outcome later through one of its `on_*` methods. That keeps it plain,
//! synchronous Rust that tests drive step by step with a fake host; the WASM
//! glue is the real host.
//!
//! The extension is a thin forwarder: the relay decides which tabs to attach
//! (popups, `createTarget`) and what to do with events. The core decides only
//! what must be decided in the browser: the user's click, the safety rules
//! (no `chrome://` pages, never the last tab), keeping the service worker
//! alive, reconnecting, re-attaching after navigation, and the badge.
//!
//! # The rules, and the tests that check them
//!
//! Test names are in `tests.rs` unless marked e2e (`tests/tests/e2e_extension.rs`,
//! the real extension in Chromium).
//!
//! - **Nothing before the relay proves the pairing**: the token is never
//!   sent; the first frame is `auth` (a nonce), no call is obeyed or
//!   answered and no tab is named until the relay's `challenge` carries a
//!   good proof (`shared_protocol::auth`); a wrong one closes the socket and
//!   the badge says the program on the port is not the paired relay:
//!   `a_relay_that_cannot_prove_the_pairing_learns_nothing_and_is_obeyed_in_nothing`,
//!   `the_relay_refusing_our_proof_says_to_pair_again`; e2e
//!   `a_program_squatting_the_relays_port_learns_nothing_and_is_obeyed_in_nothing`.
//! - **A toolbar click toggles attach/detach** and tells the relay
//!   (`user.toggledAttach`); a click while that tab's attach or detach runs
//!   is ignored: `click_attaches_connects_and_says_hello_with_the_tab`,
//!   `second_click_detaches_tells_the_relay_and_lets_the_worker_sleep`; e2e
//!   `a_click_shares_the_tab_with_playwright_and_a_second_click_takes_it_back`.
//! - **An unpaired click explains pairing** instead of attaching (it would
//!   show the debugging bar for nobody):
//!   `unpaired_extension_says_how_to_pair_instead_of_attaching`.
//! - **Never `chrome://`, DevTools, other extensions' pages or the Web
//!   Store** ([`policy::is_restricted`], one rule with the relay's), on the
//!   user's click, on the relay's `debugger.attach` (the tab is looked at
//!   first) and before a re-attach:
//!   `never_attaches_to_browser_devtools_or_extension_pages`.
//! - **Never close the last tab**: `tabs.remove` counts the tabs first:
//!   `tabs_calls_convert_chrome_tabs_and_never_close_the_last_tab`.
//! - **Only shared tabs** take `debugger.sendCommand`, and only their events
//!   leave the browser: `cdp_errors_keep_their_code_and_unshared_tabs_are_refused`,
//!   `events_are_forwarded_only_for_shared_tabs`.
//! - **Popups of a shared tab** are reported (`tabs.onCreated`); the relay
//!   decides to attach them: `relay_attach_of_a_popup_marks_it_shared`; e2e
//!   `popups_of_a_shared_tab_are_attached`.
//! - **Re-attach after Chrome detached a tab** (`target_closed`, with
//!   backoff), but not after the user cancelled the bar or opened DevTools:
//!   `navigation_caused_detach_reattaches_and_reannounces`,
//!   `reattach_gives_up_after_its_tries_and_says_so`,
//!   `user_cancel_devtools_and_chrome_pages_stay_detached`.
//! - **Keepalive** every 20 s while shared (an MV3 worker is stopped after
//!   ~30 s idle), and a 30 s `chrome.alarms` backstop:
//!   `keepalive_pings_only_while_shared_and_connected`; e2e
//!   `the_worker_idles_a_minute_while_shared_and_stays_connected`.
//! - **Reconnect after 1 s·2ⁿ (cap 30 s, jitter)**, and a **60 s grace**
//!   before the tabs are released:
//!   `relay_going_away_backs_off_keeps_tabs_for_the_grace_then_releases_them`,
//!   `the_relay_coming_back_within_the_grace_keeps_everything`; e2e
//!   `restarting_the_relay_brings_the_tab_back_without_a_new_click`.
//! - **State in `chrome.storage.session`**, rehydrated and re-announced
//!   after a worker restart: `restart_rehydrates_reconnects_and_reannounces`;
//!   e2e `a_stopped_worker_rehydrates_and_reannounces_its_tabs`.
//! - **Replies in Chrome's order, with Chrome's CDP error codes**:
//!   `relay_calls_are_forwarded_and_answered_in_order`,
//!   `cdp_errors_keep_their_code_and_unshared_tabs_are_refused`.
//! - Also: tab lifecycle (`closed_tabs_are_reported_and_forgotten`), a
//!   protocol mismatch stops retrying
//!   (`protocol_mismatch_stops_retrying_and_refusals_explain_themselves`),
//!   settings changes reconnect (`settings_changes_reconnect_with_the_new_port`),
//!   unknown relay messages are ignored (`unknown_relay_messages_are_ignored`).

pub mod policy;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap};

use serde::Deserialize;
use shared_protocol::auth::{self, Prover};
use shared_protocol::{
    CallError, CallId, ExtensionMessage, Hello, PROTOCOL_VERSION, RelayMessage, Reply, SUBPROTOCOL, TabId, TabInfo,
    TabQuery, WindowId, close_code, encode, layout,
};

pub use policy::Badge;

const NOT_PAIRED: &str = "not paired with the relay: run `browser-relay pair` and open the link it prints (or paste the token in the options)";

/// Tags one `chrome.*` call so its outcome finds its way back.
pub type OpId = u64;

/// What the user configured in the options page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    pub port: u16,
    /// The pairing token (`browser-relay token`); `None` until paired.
    pub token: Option<String>,
}

impl Default for Settings {
    fn default() -> Self {
        Self { port: shared_protocol::DEFAULT_RELAY_PORT, token: None }
    }
}

/// Facts about the browser and the extension, reported in the hello.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Environment {
    pub extension_version: String,
    pub user_agent: String,
    /// e.g. `Chrome/156.0.8078.73`.
    pub browser_version: String,
}

/// Timers the core sets; setting one again replaces it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Timer {
    Reconnect,
    Keepalive,
    DetachGrace,
    Reattach(TabId),
}

/// The allow-listed `chrome.*` calls, and nothing else.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChromeCall {
    DebuggerAttach { tab: TabId },
    DebuggerDetach { tab: TabId },
    DebuggerSendCommand { tab: TabId, session: Option<String>, method: String, params: Option<String> },
    TabsGet { tab: TabId },
    TabsCreate { url: Option<String>, active: bool, opener: Option<TabId> },
    TabsRemove { tab: TabId },
    TabsUpdate { tab: TabId, url: Option<String>, active: Option<bool> },
    TabsQuery { query: TabQuery },
    WindowsUpdate { window: WindowId, focused: Option<bool> },
}

/// What the core needs from the browser. Calls are fire-and-forget: their
/// outcome comes back through [`Core::on_op_done`] and the other `on_*`
/// methods, never from inside the call (the host must not re-enter the core).
pub trait Host {
    /// Makes an allow-listed `chrome.*` call.
    fn call(&mut self, op: OpId, call: ChromeCall);
    fn set_badge(&mut self, tab: TabId, badge: &Badge, title: &str);
    /// Saves the attached tab ids (`chrome.storage.session`) for a restart.
    fn persist(&mut self, attached: &[TabId]);
    /// Opens the relay WebSocket (replacing any previous one).
    fn connect(&mut self, url: &str, protocols: &[String]);
    fn send(&mut self, frame: String);
    /// Closes the relay WebSocket; no `on_socket_closed` follows.
    fn disconnect(&mut self);
    fn set_timer(&mut self, timer: Timer, after_ms: u64);
    fn cancel_timer(&mut self, timer: Timer);
    /// A number in [0, 1), for jitter.
    fn random(&mut self) -> f64;
    /// 32 bytes from a secure random source (`crypto.getRandomValues`),
    /// for the nonce of the pairing proof; `None` if there is none (then no
    /// connection: a predictable nonce would let a recorded proof replay).
    fn random_bytes(&mut self) -> Option<[u8; 32]>;
}

/// The relay connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Link {
    Idle,
    Connecting,
    /// Open, `auth` sent: waiting for the relay to prove the pairing.
    /// Nothing the other end sends is obeyed yet.
    Authenticating,
    /// The relay proved the pairing; hello (with ours) sent, waiting for
    /// the welcome.
    Open,
    /// Welcomed: the relay is listening.
    Ready,
}

/// For the options page.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    pub state: &'static str,
    pub detail: String,
    pub attached_tabs: usize,
    pub port: u16,
    pub paired: bool,
}

/// Why a `chrome.*` call was made, to know what its outcome means.
#[derive(Debug, Clone)]
enum Purpose {
    /// A relay call answered with the raw result.
    Relay(CallId),
    /// A relay call whose result is one `chrome.tabs.Tab`.
    RelayTab(CallId),
    /// A relay call whose result is an array of `chrome.tabs.Tab`.
    RelayTabs(CallId),
    /// The relay asked to attach: the tab is looked at first.
    RelayAttachCheck(CallId),
    RelayAttach(CallId, TabInfo),
    RelayDetach(CallId, TabId),
    /// The relay asked to close a tab: first count the tabs.
    RelayRemoveCheck(CallId, TabId),
    UserAttach(TabInfo),
    UserDetach(TabInfo),
    /// After Chrome detached a tab: does it still exist, and where is it?
    ReattachCheck(TabId),
    Reattach(TabId),
    /// Detaching after the grace period; nothing to do with the outcome.
    Cleanup,
}

/// `chrome.tabs.Tab`, the fields we read.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ChromeTab {
    id: Option<TabId>,
    window_id: Option<WindowId>,
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    pending_url: Option<String>,
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    active: bool,
    #[serde(default)]
    opener_tab_id: Option<TabId>,
}

impl ChromeTab {
    fn info(self) -> Option<TabInfo> {
        Some(TabInfo {
            tab_id: self.id?,
            window_id: self.window_id,
            url: self.url.filter(|u| !u.is_empty()).or(self.pending_url).unwrap_or_default(),
            title: self.title.unwrap_or_default(),
            active: self.active,
            opener_tab_id: self.opener_tab_id,
        })
    }
}

/// Converts a `chrome.tabs.Tab` (JSON) into the protocol's [`TabInfo`].
pub fn tab_info_from_chrome(json: &str) -> Option<TabInfo> {
    serde_json::from_str::<ChromeTab>(json).ok()?.info()
}

/// The extension's state. Generic over the host so tests use a fake one.
#[derive(Debug)]
pub struct Core<H: Host> {
    pub host: H,
    settings: Settings,
    env: Environment,
    link: Link,
    /// Whether the current connection attempt ever opened (to tell "relay
    /// not running" from "the relay refused us").
    opened: bool,
    attempt: u32,
    last_error: Option<String>,
    attached: BTreeMap<TabId, TabInfo>,
    /// Tabs being re-attached after Chrome detached them: try count, info.
    reattaching: BTreeMap<TabId, (u32, TabInfo)>,
    /// Each call's purpose and the relay connection it was made for.
    pending: HashMap<OpId, (Purpose, u64)>,
    next_op: OpId,
    /// Counts relay connections: an answer for a call of an earlier
    /// connection must not reach a new one (a restarted relay numbers its
    /// calls from 1 again).
    link_generation: u64,
    /// The relay refused us for good (protocol mismatch): no reconnecting
    /// until the settings change.
    refused: bool,
    /// Our nonce of the current connection's pairing proof.
    auth_nonce: String,
    next_nonce: u64,
    grace_running: bool,
}

impl<H: Host> Core<H> {
    pub fn new(host: H) -> Self {
        Self {
            host,
            settings: Settings::default(),
            env: Environment::default(),
            link: Link::Idle,
            opened: false,
            attempt: 0,
            last_error: None,
            attached: BTreeMap::new(),
            reattaching: BTreeMap::new(),
            pending: HashMap::new(),
            next_op: 1,
            link_generation: 0,
            refused: false,
            auth_nonce: String::new(),
            next_nonce: 1,
            grace_running: false,
        }
    }

    pub fn link(&self) -> Link {
        self.link
    }

    pub fn attached(&self) -> Vec<TabId> {
        self.attached.keys().copied().collect()
    }

    pub fn status(&self) -> Status {
        let (state, default) = match self.link {
            Link::Ready => ("connected", format!("connected to the relay on 127.0.0.1:{}", self.settings.port)),
            Link::Connecting | Link::Authenticating | Link::Open => {
                ("connecting", format!("connecting to 127.0.0.1:{}…", self.settings.port))
            }
            Link::Idle if self.attached.is_empty() => {
                ("idle", "no tab is shared: click the toolbar icon on a tab".into())
            }
            Link::Idle => ("disconnected", "waiting to reconnect to the relay".into()),
        };
        Status {
            state,
            detail: self.last_error.clone().filter(|_| self.link != Link::Ready).unwrap_or(default),
            attached_tabs: self.attached.len(),
            port: self.settings.port,
            paired: self.settings.token.is_some(),
        }
    }

    // ---- start-up and settings ------------------------------------------

    /// The service worker (re)started. `still_attached` are the tabs
    /// persisted by an earlier run that `chrome.debugger.getTargets` still
    /// reports attached to us: they are kept, re-announced, and reconnected.
    pub fn start(&mut self, settings: Settings, env: Environment, still_attached: Vec<TabInfo>) {
        self.settings = settings;
        self.env = env;
        for tab in still_attached {
            self.attached.insert(tab.tab_id, tab);
        }
        self.persist();
        if !self.attached.is_empty() {
            self.ensure_connected();
        }
        self.refresh_badges();
    }

    pub fn on_settings(&mut self, settings: Settings) {
        if settings == self.settings {
            return;
        }
        self.settings = settings;
        self.last_error = None;
        self.refused = false;
        if self.link != Link::Idle {
            self.host.disconnect();
            self.link = Link::Idle;
        }
        self.attempt = 0;
        if !self.attached.is_empty() {
            self.ensure_connected();
        }
        self.refresh_badges();
    }

    // ---- the user's click --------------------------------------------------

    pub fn on_action_clicked(&mut self, tab: TabInfo) {
        let busy = self
            .pending
            .values()
            .any(|(p, _)| matches!(p, Purpose::UserAttach(t) | Purpose::UserDetach(t) if t.tab_id == tab.tab_id));
        if busy {
            return;
        }
        if self.attached.contains_key(&tab.tab_id) {
            self.start_call(Purpose::UserDetach(tab.clone()), ChromeCall::DebuggerDetach { tab: tab.tab_id });
        } else if self.settings.token.is_none() {
            // Attaching would show the "being debugged" bar for nobody.
            self.badge(tab.tab_id, &Badge::Error(NOT_PAIRED.into()));
        } else if policy::is_restricted(&tab.url) {
            self.badge(tab.tab_id, &Badge::Error(policy::restricted_reason(&tab.url)));
        } else {
            self.reattaching.remove(&tab.tab_id);
            self.badge(tab.tab_id, &Badge::Connecting);
            self.start_call(Purpose::UserAttach(tab.clone()), ChromeCall::DebuggerAttach { tab: tab.tab_id });
        }
    }

    // ---- outcomes of chrome.* calls -----------------------------------------

    /// A `chrome.*` call finished: its result as JSON (`null` when none), or
    /// Chrome's error message.
    pub fn on_op_done(&mut self, op: OpId, outcome: Result<String, String>) {
        let Some((purpose, generation)) = self.pending.remove(&op) else { return };
        // Relay calls are answered only on the connection that made them.
        let current = generation == self.link_generation;
        match purpose {
            Purpose::Relay(call) => self.reply(current, call, outcome),
            Purpose::RelayTab(call) => {
                let outcome = outcome.and_then(|json| {
                    let tab = tab_info_from_chrome(&json).ok_or("Chrome returned no tab")?;
                    Ok(serde_json::to_string(&tab).expect("TabInfo serialises"))
                });
                self.reply(current, call, outcome);
            }
            Purpose::RelayTabs(call) => {
                let outcome = outcome.and_then(|json| {
                    let tabs: Vec<serde_json::Value> = serde_json::from_str(&json).map_err(|e| e.to_string())?;
                    let infos: Vec<TabInfo> =
                        tabs.iter().filter_map(|t| tab_info_from_chrome(&t.to_string())).collect();
                    Ok(serde_json::to_string(&infos).expect("TabInfo serialises"))
                });
                self.reply(current, call, outcome);
            }
            // The relay that asked is gone: act for it no further.
            Purpose::RelayAttachCheck(_) | Purpose::RelayRemoveCheck(..) if !current => {}
            Purpose::RelayAttachCheck(call) => match outcome.as_deref().map(tab_info_from_chrome) {
                Ok(Some(tab)) if policy::is_restricted(&tab.url) => {
                    self.reply(current, call, Err(format!("Browser Relay does not attach to {}", tab.url)));
                }
                Ok(Some(tab)) if self.attached.contains_key(&tab.tab_id) => {
                    self.reply(current, call, Ok("null".into()))
                }
                Ok(Some(tab)) => {
                    let id = tab.tab_id;
                    self.start_call(Purpose::RelayAttach(call, tab), ChromeCall::DebuggerAttach { tab: id });
                }
                Ok(None) => self.reply(current, call, Err("no such tab".into())),
                Err(e) => self.reply(current, call, Err(e.clone())),
            },
            Purpose::RelayAttach(call, tab) => {
                if outcome.is_ok() {
                    self.add_attached(tab);
                }
                self.reply(current, call, outcome.map(|_| "null".into()));
            }
            Purpose::RelayDetach(call, tab) => {
                self.remove_attached(tab);
                self.reply(current, call, outcome.map(|_| "null".into()));
                self.maybe_idle();
            }
            Purpose::RelayRemoveCheck(call, tab) => {
                let count =
                    outcome.as_deref().ok().and_then(|json| serde_json::from_str::<Vec<serde_json::Value>>(json).ok());
                match count.map(|tabs| tabs.len()) {
                    Some(n) if n <= 1 => {
                        self.reply(current, call, Err("Browser Relay will not close the user's last tab".into()))
                    }
                    Some(_) => self.start_call(Purpose::Relay(call), ChromeCall::TabsRemove { tab }),
                    None => self.reply(current, call, Err(outcome.err().unwrap_or_else(|| "cannot count tabs".into()))),
                }
            }
            Purpose::UserAttach(tab) => match outcome {
                Ok(_) => {
                    self.add_attached(tab.clone());
                    if self.link == Link::Ready {
                        self.send(&ExtensionMessage::UserToggledAttach { tab, attached: true });
                    } else {
                        // The hello will carry it.
                        self.ensure_connected();
                    }
                }
                Err(e) => self.badge(tab.tab_id, &Badge::Error(e)),
            },
            Purpose::UserDetach(tab) => {
                // Detached either way: an error means it already was.
                self.remove_attached(tab.tab_id);
                self.badge(tab.tab_id, &Badge::Off);
                if self.link == Link::Ready {
                    self.send(&ExtensionMessage::UserToggledAttach { tab, attached: false });
                }
                self.maybe_idle();
            }
            Purpose::ReattachCheck(tab_id) => match outcome.as_deref().map(tab_info_from_chrome) {
                Ok(Some(tab)) if policy::is_restricted(&tab.url) => {
                    self.badge(tab_id, &Badge::Error(policy::restricted_reason(&tab.url)));
                    self.maybe_idle();
                }
                Ok(Some(tab)) => {
                    self.reattaching.insert(tab_id, (0, tab));
                    self.host.set_timer(Timer::Reattach(tab_id), policy::reattach_delay_ms(0));
                }
                // The tab is gone: tabs.onRemoved tells the relay.
                _ => self.maybe_idle(),
            },
            Purpose::Reattach(tab_id) => {
                let Some((tries, tab)) = self.reattaching.remove(&tab_id) else { return };
                match outcome {
                    Ok(_) => {
                        self.add_attached(tab.clone());
                        if self.link == Link::Ready {
                            self.send(&ExtensionMessage::DebuggerReattached { tab });
                        }
                    }
                    Err(_) if tries + 1 < policy::REATTACH_TRIES => {
                        self.reattaching.insert(tab_id, (tries + 1, tab));
                        self.host.set_timer(Timer::Reattach(tab_id), policy::reattach_delay_ms(tries + 1));
                    }
                    Err(e) => {
                        let why = format!("lost this tab after it navigated ({e}): click to share it again");
                        self.badge(tab_id, &Badge::Error(why));
                        self.maybe_idle();
                    }
                }
            }
            Purpose::Cleanup => {}
        }
    }

    // ---- chrome.debugger and chrome.tabs events ------------------------------

    pub fn on_debugger_event(&mut self, tab: TabId, session: Option<&str>, method: &str, params_json: Option<&str>) {
        if self.link == Link::Ready && self.attached.contains_key(&tab) {
            self.host.send(layout::encode_event(tab, session, method, params_json));
        }
    }

    pub fn on_debugger_detach(&mut self, tab: TabId, reason: &str) {
        if self.attached.remove(&tab).is_none() {
            return;
        }
        self.persist();
        if self.link == Link::Ready {
            self.send(&ExtensionMessage::DebuggerDetached { tab_id: tab, reason: reason.to_string() });
        }
        match reason {
            // The user cancelled the infobar or opened DevTools: their choice.
            "canceled_by_user" | "replaced_with_devtools" => {
                self.badge(tab, &Badge::Off);
                self.maybe_idle();
            }
            // Anything else (a renderer swap, a crash, a navigation Chrome
            // would not let us follow): look at the tab and try again.
            _ => {
                self.badge(tab, &Badge::Connecting);
                self.start_call(Purpose::ReattachCheck(tab), ChromeCall::TabsGet { tab });
            }
        }
    }

    pub fn on_tab_created(&mut self, tab: TabInfo) {
        // Only tabs opened by a shared tab concern the relay (it decides
        // whether to attach them); the user's other tabs stay private.
        let from_shared = tab.opener_tab_id.is_some_and(|o| self.attached.contains_key(&o));
        if from_shared && self.link == Link::Ready {
            self.send(&ExtensionMessage::TabCreated { tab });
        }
    }

    pub fn on_tab_removed(&mut self, tab: TabId) {
        let was_shared = self.attached.remove(&tab).is_some();
        let was_reattaching = self.reattaching.remove(&tab).is_some();
        if was_reattaching {
            self.host.cancel_timer(Timer::Reattach(tab));
        }
        if was_shared || was_reattaching {
            self.persist();
            if self.link == Link::Ready {
                self.send(&ExtensionMessage::TabRemoved { tab_id: tab });
            }
            self.maybe_idle();
        }
    }

    pub fn on_tab_replaced(&mut self, added: TabId, removed: TabId) {
        if let Some(mut tab) = self.attached.remove(&removed) {
            tab.tab_id = added;
            self.attached.insert(added, tab);
            self.persist();
            if self.link == Link::Ready {
                self.send(&ExtensionMessage::TabReplaced { added_tab_id: added, removed_tab_id: removed });
            }
            self.badge(added, &self.tab_badge());
        }
    }

    pub fn on_tab_updated(&mut self, tab: TabInfo) {
        let Some(known) = self.attached.get_mut(&tab.tab_id) else { return };
        let changed = (known.url != tab.url && !tab.url.is_empty()) || known.title != tab.title;
        if !tab.url.is_empty() {
            known.url.clone_from(&tab.url);
        }
        known.title.clone_from(&tab.title);
        known.window_id = tab.window_id.or(known.window_id);
        if changed && self.link == Link::Ready {
            let tab = known.clone();
            self.send(&ExtensionMessage::TabUpdated { tab });
        }
    }

    // ---- the relay socket -------------------------------------------------

    /// The socket opened: our nonce, nothing else, until the relay proves
    /// the pairing.
    pub fn on_socket_open(&mut self) {
        if self.link != Link::Connecting {
            return;
        }
        self.link = Link::Authenticating;
        self.opened = true;
        let Some(random) = self.host.random_bytes() else {
            self.host.disconnect();
            return self.on_socket_closed(close_code::BAD_MESSAGE, "no secure random source for the pairing proof");
        };
        self.auth_nonce = auth::nonce_hex(&random);
        let auth = ExtensionMessage::Auth { protocol_version: PROTOCOL_VERSION, nonce: self.auth_nonce.clone() };
        self.send(&auth);
    }

    pub fn on_socket_message(&mut self, text: &str) {
        let message = match RelayMessage::parse(text) {
            Ok(message) => message,
            // A newer relay may send what we do not know; ignoring it keeps
            // the link up (the relay answers unknown calls' timeouts itself).
            Err(_) => return,
        };
        match (self.link, message) {
            (Link::Authenticating, RelayMessage::Challenge { nonce, proof }) => self.on_challenge(&nonce, &proof),
            (Link::Open, RelayMessage::Welcome { .. }) => {
                self.link = Link::Ready;
                self.attempt = 0;
                self.last_error = None;
                self.grace_running = false;
                self.host.cancel_timer(Timer::DetachGrace);
                self.host.cancel_timer(Timer::Reconnect);
                self.host.set_timer(Timer::Keepalive, policy::KEEPALIVE_MS);
                self.refresh_badges();
            }
            (Link::Ready, RelayMessage::Ping { nonce }) => self.send(&ExtensionMessage::Pong { nonce }),
            (Link::Ready, RelayMessage::Pong { .. }) => {}
            (Link::Ready, call) => self.on_relay_call(call),
            // Before the relay has proved the pairing (or before its
            // welcome), nothing is obeyed or answered: the other end may be
            // any program that took the port.
            _ => {}
        }
    }

    /// The relay's proof: right, and we prove ours in the hello; wrong, and
    /// the other end is not our relay: close and say so.
    fn on_challenge(&mut self, relay_nonce: &str, proof: &str) {
        let Some(token) = self.settings.token.clone() else { return };
        let proved =
            auth::is_nonce(relay_nonce) && auth::verify(&token, Prover::Relay, &self.auth_nonce, relay_nonce, proof);
        if !proved {
            let port = self.settings.port;
            self.host.disconnect();
            self.on_socket_closed(
                close_code::NOT_PAIRED,
                &format!(
                    "the program on 127.0.0.1:{port} is not your paired relay: it could not prove the pairing (another program on the port, or the relay's token changed: run `browser-relay pair` again)"
                ),
            );
            return;
        }
        self.link = Link::Open;
        let hello = ExtensionMessage::Hello(Hello {
            protocol_version: PROTOCOL_VERSION,
            proof: auth::proof(&token, Prover::Extension, &self.auth_nonce, relay_nonce),
            extension_version: self.env.extension_version.clone(),
            user_agent: self.env.user_agent.clone(),
            browser_version: self.env.browser_version.clone(),
            attached_tabs: self.attached.values().cloned().collect(),
        });
        self.send(&hello);
    }

    /// The socket closed (or failed to open), with the close code and reason.
    pub fn on_socket_closed(&mut self, code: u16, reason: &str) {
        if self.link == Link::Idle {
            return;
        }
        let was_open = self.opened;
        self.link = Link::Idle;
        self.opened = false;
        self.host.cancel_timer(Timer::Keepalive);
        let port = self.settings.port;
        let error = match code {
            close_code::PROTOCOL_MISMATCH => Some(format!("the relay refused this extension's protocol: {reason}")),
            close_code::HELLO_TIMEOUT | close_code::BAD_MESSAGE => {
                Some(format!("the relay dropped the connection: {reason}"))
            }
            // Our own verdict on the relay's proof, or the relay's on ours.
            close_code::NOT_PAIRED if reason.starts_with("the program on") => Some(reason.to_string()),
            close_code::NOT_PAIRED => Some(format!("the relay refused the pairing: {reason}")),
            _ if !was_open => Some(format!(
                "cannot connect to the relay on 127.0.0.1:{port}: is `browser-relay serve` (0.2 or newer) running?"
            )),
            _ => Some(format!("the relay on 127.0.0.1:{port} went away")),
        };
        self.last_error = error;
        if self.attached.is_empty() {
            self.refresh_badges();
            return;
        }
        if code == close_code::PROTOCOL_MISMATCH {
            // Retrying cannot help until one side is updated (or the
            // settings point elsewhere); the tabs go after the grace period.
            self.refused = true;
        } else {
            let delay = policy::reconnect_delay_ms(self.attempt, self.host.random());
            self.attempt = self.attempt.saturating_add(1);
            self.host.set_timer(Timer::Reconnect, delay);
        }
        if !self.grace_running {
            self.grace_running = true;
            self.host.set_timer(Timer::DetachGrace, policy::DETACH_GRACE_MS);
        }
        self.refresh_badges();
    }

    pub fn on_timer(&mut self, timer: Timer) {
        match timer {
            Timer::Reconnect => self.ensure_connected(),
            Timer::Keepalive => {
                if self.link == Link::Ready && !self.attached.is_empty() {
                    let nonce = self.next_nonce;
                    self.next_nonce += 1;
                    self.send(&ExtensionMessage::Ping { nonce });
                    self.host.set_timer(Timer::Keepalive, policy::KEEPALIVE_MS);
                }
            }
            Timer::DetachGrace => {
                self.grace_running = false;
                if self.link == Link::Ready {
                    return;
                }
                // The relay stayed away: give the user their tabs back.
                for tab in std::mem::take(&mut self.attached).into_keys() {
                    self.start_call(Purpose::Cleanup, ChromeCall::DebuggerDetach { tab });
                    self.badge(tab, &Badge::Off);
                }
                self.persist();
                self.host.cancel_timer(Timer::Reconnect);
                if self.link != Link::Idle {
                    self.host.disconnect();
                    self.link = Link::Idle;
                }
                self.last_error = Some(format!(
                    "the relay was gone for {} s, so the shared tabs were released",
                    policy::DETACH_GRACE_MS / 1000
                ));
            }
            Timer::Reattach(tab) => {
                if self.reattaching.contains_key(&tab) {
                    self.start_call(Purpose::Reattach(tab), ChromeCall::DebuggerAttach { tab });
                }
            }
        }
    }

    /// A `chrome.alarms` tick (a backstop that wakes a stopped worker).
    pub fn on_alarm(&mut self) {
        if !self.attached.is_empty() && self.link == Link::Idle {
            self.ensure_connected();
        }
    }

    // ---- relay calls ---------------------------------------------------------

    fn on_relay_call(&mut self, call: RelayMessage<'_>) {
        match call {
            RelayMessage::DebuggerAttach { id, tab_id } => {
                self.start_call(Purpose::RelayAttachCheck(id), ChromeCall::TabsGet { tab: tab_id });
            }
            RelayMessage::DebuggerDetach { id, tab_id } => {
                self.start_call(Purpose::RelayDetach(id, tab_id), ChromeCall::DebuggerDetach { tab: tab_id });
            }
            RelayMessage::DebuggerSendCommand(command) => {
                if !self.attached.contains_key(&command.tab_id) {
                    let message = format!("tab {} is not shared with Browser Relay", command.tab_id);
                    return self.reply(true, command.id, Err(message));
                }
                self.start_call(
                    Purpose::Relay(command.id),
                    ChromeCall::DebuggerSendCommand {
                        tab: command.tab_id,
                        session: command.session_id.map(|s| s.into_owned()),
                        method: command.method.into_owned(),
                        params: command.params.map(|p| p.get().to_string()),
                    },
                );
            }
            RelayMessage::TabsCreate { id, url, active, opener_tab_id } => {
                self.start_call(Purpose::RelayTab(id), ChromeCall::TabsCreate { url, active, opener: opener_tab_id });
            }
            RelayMessage::TabsRemove { id, tab_id } => {
                let all = TabQuery::default();
                self.start_call(Purpose::RelayRemoveCheck(id, tab_id), ChromeCall::TabsQuery { query: all });
            }
            RelayMessage::TabsUpdate { id, tab_id, url, active } => {
                self.start_call(Purpose::RelayTab(id), ChromeCall::TabsUpdate { tab: tab_id, url, active });
            }
            RelayMessage::TabsQuery { id, query } => {
                self.start_call(Purpose::RelayTabs(id), ChromeCall::TabsQuery { query });
            }
            RelayMessage::WindowsUpdate { id, window_id, focused } => {
                self.start_call(Purpose::Relay(id), ChromeCall::WindowsUpdate { window: window_id, focused });
            }
            RelayMessage::Challenge { .. }
            | RelayMessage::Welcome { .. }
            | RelayMessage::Ping { .. }
            | RelayMessage::Pong { .. } => {}
        }
    }

    /// Answers a relay call. Chrome's debugger errors arrive as the JSON of
    /// the CDP error; they are passed on with their code.
    fn reply(&mut self, current: bool, call: CallId, outcome: Result<String, String>) {
        if !current || self.link != Link::Ready {
            return;
        }
        let frame = match outcome {
            Ok(json) => layout::encode_reply(call, if json.is_empty() { "null" } else { &json }),
            Err(message) => {
                #[derive(Deserialize)]
                struct CdpError {
                    code: i64,
                    message: String,
                }
                let error = match serde_json::from_str::<CdpError>(&message) {
                    Ok(cdp) => CallError { message: cdp.message, code: Some(cdp.code) },
                    Err(_) => CallError { message, code: None },
                };
                encode(&ExtensionMessage::Reply(Reply { id: call, result: None, error: Some(error) }))
            }
        };
        self.host.send(frame);
    }

    // ---- helpers ---------------------------------------------------------------

    fn start_call(&mut self, purpose: Purpose, call: ChromeCall) {
        let op = self.next_op;
        self.next_op += 1;
        self.pending.insert(op, (purpose, self.link_generation));
        self.host.call(op, call);
    }

    fn send(&mut self, message: &ExtensionMessage<'_>) {
        self.host.send(encode(message));
    }

    fn ensure_connected(&mut self) {
        if self.link != Link::Idle || self.refused {
            return;
        }
        if self.settings.token.is_none() {
            self.last_error = Some(NOT_PAIRED.into());
            self.refresh_badges();
            return;
        }
        let url = format!("ws://127.0.0.1:{}/extension", self.settings.port);
        // The token is proved inside the socket, never sent.
        let protocols = [SUBPROTOCOL.to_string()];
        self.link = Link::Connecting;
        self.opened = false;
        self.link_generation += 1;
        self.host.connect(&url, &protocols);
        self.refresh_badges();
    }

    /// Nothing shared and nothing pending: close the link and let the
    /// service worker sleep.
    fn maybe_idle(&mut self) {
        let attaching = self.pending.values().any(|(p, _)| matches!(p, Purpose::UserAttach(_)));
        if !self.attached.is_empty() || !self.reattaching.is_empty() || attaching {
            return;
        }
        for timer in [Timer::Reconnect, Timer::Keepalive, Timer::DetachGrace] {
            self.host.cancel_timer(timer);
        }
        self.grace_running = false;
        if self.link != Link::Idle {
            self.host.disconnect();
            self.link = Link::Idle;
        }
    }

    fn add_attached(&mut self, tab: TabInfo) {
        let id = tab.tab_id;
        self.attached.insert(id, tab);
        self.persist();
        self.badge(id, &self.tab_badge());
    }

    fn remove_attached(&mut self, tab: TabId) {
        if self.attached.remove(&tab).is_some() {
            self.persist();
        }
        self.badge(tab, &Badge::Off);
    }

    fn persist(&mut self) {
        let ids: Vec<TabId> = self.attached.keys().copied().collect();
        self.host.persist(&ids);
    }

    /// The badge every attached tab shows for the current link state.
    fn tab_badge(&self) -> Badge {
        match (self.link, &self.last_error) {
            (Link::Ready, _) => Badge::On,
            (Link::Idle, Some(error)) => Badge::Error(error.clone()),
            _ => Badge::Connecting,
        }
    }

    fn refresh_badges(&mut self) {
        let badge = self.tab_badge();
        let tabs: Vec<TabId> = self.attached.keys().copied().collect();
        for tab in tabs {
            self.badge(tab, &badge);
        }
    }

    fn badge(&mut self, tab: TabId, badge: &Badge) {
        let title = badge.title(self.settings.port);
        self.host.set_badge(tab, badge, &title);
    }
}
