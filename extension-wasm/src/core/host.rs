//! The [`Host`] and what passes between it and the core: the settings,
//! the timers, the allow-listed `chrome.*` calls, what Chrome says of its
//! tabs and groups at the worker's start, and what the host saves.

use serde::{Deserialize, Serialize};
use shared_protocol::{GrantGroup, TabId, TabInfo, TabQuery, WindowId};

use super::op_id::OpId;
use super::policy::Badge;
use super::rules::SessionRule;

/// What the user configured in the options page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Settings {
    pub port: u16,
    /// The pairing token (`browser-relay token`); `None` until paired.
    pub token: Option<String>,
    /// A pairing link's one-time code, not yet redeemed, and the port of
    /// the relay that printed it: the next connection goes there, proves
    /// the code and gets the token, sealed for it; `port` and `token`
    /// change only then (a code refused leaves the old pairing as it was).
    #[serde(default)]
    pub pairing_code: Option<String>,
    #[serde(default)]
    pub pairing_port: Option<u16>,
}

impl Settings {
    /// A token, or a code that brings one: reason to connect.
    pub(super) fn is_paired(&self) -> bool {
        self.token.is_some() || self.pairing_code.is_some()
    }

    /// The port to connect to: the pairing link's while its code waits.
    pub fn dial_port(&self) -> u16 {
        match &self.pairing_code {
            Some(_) => self.pairing_port.unwrap_or(self.port),
            None => self.port,
        }
    }
}

impl Default for Settings {
    fn default() -> Self {
        Self { port: shared_protocol::DEFAULT_RELAY_PORT, token: None, pairing_code: None, pairing_port: None }
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
    /// Trying a refused `tabs.group`/`tabs.ungroup` of a tab again (Chrome
    /// refuses them while the user drags a tab).
    Regroup(TabId),
    /// The end of a moment for a moved group's tabs to be back in it
    /// (`groups::TabGroups::moving`).
    GroupMove,
    /// A look at whether the relay said anything since the last one
    /// ([`policy::RELAY_WATCH_MS`](super::policy::RELAY_WATCH_MS)), while a socket is open or opening.
    RelayWatch,
    /// The end of the wait for the relay's attach of a grant's new tab
    /// (`grants::AWAIT_RELAY_ATTACH_MS`).
    GrantTab(TabId),
}

/// The allow-listed `chrome.*` calls, and nothing else. From `TabsGroup`
/// on, they keep the tab groups, the grants' cookie rules and their menu
/// items; no relay message can ask for them (`WindowsCreate` only makes a
/// grant's window for a tab the relay asked for).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChromeCall {
    DebuggerAttach {
        tab: TabId,
    },
    DebuggerDetach {
        tab: TabId,
    },
    DebuggerSendCommand {
        tab: TabId,
        session: Option<String>,
        method: String,
        params: Option<String>,
    },
    TabsGet {
        tab: TabId,
    },
    TabsCreate {
        url: Option<String>,
        active: bool,
        opener: Option<TabId>,
        /// In this window (a grant's own), else the current one.
        window: Option<WindowId>,
    },
    TabsRemove {
        tab: TabId,
    },
    TabsUpdate {
        tab: TabId,
        url: Option<String>,
        active: Option<bool>,
    },
    TabsQuery {
        query: TabQuery,
    },
    WindowsUpdate {
        window: WindowId,
        focused: Option<bool>,
    },
    /// `chrome.windows.create`: a grant's window for its first tab (never
    /// focused). Result: the window, with its `tabs`.
    WindowsCreate {
        url: Option<String>,
        focused: bool,
    },
    /// `chrome.tabs.group`: into `group`, or (`None`) a new group in the
    /// tabs' window. Result: the group id.
    TabsGroup {
        tabs: Vec<TabId>,
        group: Option<GroupId>,
    },
    /// `chrome.tabs.ungroup`.
    TabsUngroup {
        tabs: Vec<TabId>,
    },
    /// `chrome.tabGroups.update`: name and colour. Result: the group.
    TabGroupsUpdate {
        group: GroupId,
        title: String,
        color: String,
    },
    /// `chrome.declarativeNetRequest.updateSessionRules`: the grants'
    /// cookie rules (`rules.rs`), replaced as a set.
    UpdateSessionRules {
        remove: Vec<i64>,
        add: Vec<SessionRule>,
    },
    /// `chrome.contextMenus.create` on the toolbar button (`contexts:
    /// ["action"]`): "Share this tab with NAME", and a handoff's "Done:
    /// give the tab back to NAME".
    MenusCreate {
        id: String,
        title: String,
    },
    /// `chrome.contextMenus.remove`.
    MenusRemove {
        id: String,
    },
    /// `chrome.contextMenus.removeAll`: what an earlier run made.
    MenusRemoveAll,
    /// `chrome.notifications.create(id, …)`: a question of the relay's
    /// (Allow, Deny) or a handoff (Done). Always `type: "basic"`, the
    /// extension's icon, `requireInteraction: true` and `priority: 2`: it
    /// stays until answered, cleared or closed by the person.
    NotificationsCreate {
        id: String,
        title: String,
        message: String,
        buttons: Vec<String>,
    },
    /// `chrome.notifications.clear`.
    NotificationsClear {
        id: String,
    },
    /// The pairing as `chrome.storage.local` holds it now. Result: the
    /// [`Settings`] as JSON.
    ReadPairing,
}

/// What `chrome.storage.session` keeps of one shared tab, for a restart of
/// the service worker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PersistedTab {
    pub tab_id: TabId,
    /// The "Browser Relay" group it was in, if it was in one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_id: Option<GroupId>,
}

/// A tab as `chrome.tabs.query` reports it, with its group ([`NO_GROUP`]
/// when in none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TabFacts {
    pub info: TabInfo,
    pub group: GroupId,
}

/// What the service worker finds when it starts: the core decides from
/// these what is shared ([`Core::start`](super::Core::start)).
#[derive(Debug, Clone)]
pub struct StartFacts {
    /// The shared tabs an earlier run of the worker saved.
    pub persisted: Vec<PersistedTab>,
    /// Tabs `chrome.debugger.getTargets` reports attached (by anyone).
    pub debugger_attached: Vec<TabInfo>,
    /// Every tab, with its group.
    pub tabs: Vec<TabFacts>,
    /// `chrome.tabGroups.query({})`, or why tab groups cannot be used.
    pub groups: Result<Vec<GroupInfo>, String>,
    /// The grants an earlier run of the worker saved (whose each group and
    /// tab is).
    pub grants: PersistedGrants,
    /// The ids of the session rules an earlier run left
    /// (`declarativeNetRequest.getSessionRules`): replaced at once.
    pub session_rules: Vec<i64>,
    /// The ids of the notifications Chrome shows for the extension
    /// (`chrome.notifications.getAll`): an earlier run's questions and
    /// handoffs, whose link went with it, are cleared.
    pub notifications: Vec<String>,
}

impl Default for StartFacts {
    fn default() -> Self {
        Self {
            persisted: Vec::new(),
            debugger_attached: Vec::new(),
            tabs: Vec::new(),
            groups: Err(NO_TAB_GROUPS.into()),
            grants: PersistedGrants::default(),
            session_rules: Vec::new(),
            notifications: Vec::new(),
        }
    }
}

/// What the core needs from the browser. Calls are fire-and-forget: their
/// outcome comes back through [`Core::on_op_done`](super::Core::on_op_done) and the other `on_*`
/// methods, never from inside the call (the host must not re-enter the core).
pub trait Host {
    /// The JSON text of a payload the core forwards without reading it (a
    /// forwarded command's answer, an event's params), as the host holds
    /// it: the WASM host keeps it a JavaScript string, so a 1 MiB answer
    /// never crosses into WASM and back.
    type Json;
    /// Makes an allow-listed `chrome.*` call. Its outcome comes back by
    /// [`Core::on_op_done`](super::Core::on_op_done), a forwarded command's by [`Core::on_answer`](super::Core::on_answer).
    fn call(&mut self, op: OpId, call: ChromeCall);
    fn set_badge(&mut self, tab: TabId, badge: &Badge, title: &str);
    /// Saves the shared tabs and the grants (`chrome.storage.session`, in
    /// one write) for a restart.
    fn persist(&mut self, shared: &[PersistedTab], grants: &PersistedGrants);
    /// Opens the relay WebSocket (replacing any previous one).
    fn connect(&mut self, url: &str, protocols: &[String]);
    fn send(&mut self, frame: String);
    /// Sends the frame `head + payload + layout::TAIL`.
    fn send_framed(&mut self, head: String, payload: Self::Json);
    /// Sends a `debugger.onEvent` framed as [`Self::send_framed`]. Once
    /// batching is on, events may wait a moment to share a frame with the
    /// ones after them (protocol 5); anything sent later goes after them.
    fn send_event(&mut self, head: String, payload: Self::Json);
    /// Whether the relay takes several messages in a frame (its `welcome`
    /// says protocol 5 or later); off for every new socket.
    fn set_batching(&mut self, on: bool);
    /// Closes the relay WebSocket; no `on_socket_closed` follows.
    fn disconnect(&mut self);
    /// Saves a pairing link's outcome (`chrome.storage.local`, in one
    /// write): the token it brought and its relay's port, if any, and the
    /// code gone.
    fn save_pairing(&mut self, paired: Option<(&str, u16)>);
    /// Bytes sent to the relay WebSocket that the relay has not taken yet
    /// (`WebSocket.bufferedAmount`); 0 without a socket.
    fn unsent_bytes(&self) -> u64;
    fn set_timer(&mut self, timer: Timer, after_ms: u64);
    fn cancel_timer(&mut self, timer: Timer);
    /// A number in [0, 1), for jitter.
    fn random(&mut self) -> f64;
    /// 32 bytes from a secure random source (`crypto.getRandomValues`),
    /// for the nonce of the pairing proof; `None` if there is none (then no
    /// connection: a predictable nonce would let a recorded proof replay).
    fn random_bytes(&mut self) -> Option<[u8; 32]>;
    /// Asks the relay's public status route (`GET
    /// http://127.0.0.1:PORT/extension/status`, no token: it names no
    /// grant, it counts them) whether it has grants. The body comes back
    /// by [`Core::on_relay_status`](super::Core::on_relay_status) with this `probe`, or why there is
    /// none (no relay there, a refusal, no answer within a few seconds).
    fn ask_relay_status(&mut self, probe: u64, port: u16);
    /// Says something for whoever reads the worker's console (what the
    /// core ignored, and why).
    fn log(&mut self, message: &str);
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
    fav_icon_url: Option<String>,
    #[serde(default)]
    active: bool,
    #[serde(default)]
    opener_tab_id: Option<TabId>,
    #[serde(default)]
    group_id: Option<GroupId>,
}

impl ChromeTab {
    fn info(self) -> Option<TabInfo> {
        Some(TabInfo {
            tab_id: self.id?,
            window_id: self.window_id,
            url: self.url.filter(|u| !u.is_empty()).or(self.pending_url).unwrap_or_default(),
            title: self.title.unwrap_or_default(),
            fav_icon_url: self.fav_icon_url.filter(|icon| !icon.is_empty()),
            active: self.active,
            opener_tab_id: self.opener_tab_id,
            grant: None,
        })
    }
}

/// Converts a `chrome.tabs.Tab` (JSON) into the protocol's [`TabInfo`].
pub fn tab_info_from_chrome(json: &str) -> Option<TabInfo> {
    serde_json::from_str::<ChromeTab>(json).ok()?.info()
}

/// Converts an array of `chrome.tabs.Tab` (JSON) into [`TabFacts`]; tabs
/// without an id are left out.
pub fn tabs_from_chrome(json: &str) -> Vec<TabFacts> {
    let tabs: Vec<ChromeTab> = serde_json::from_str(json).unwrap_or_default();
    tabs.into_iter()
        .filter_map(|tab| {
            let group = tab.group_id.unwrap_or(NO_GROUP);
            Some(TabFacts { info: tab.info()?, group })
        })
        .collect()
}

/// Whose a group is: the person's (`None`) or a grant's (its name).
pub type Owner = Option<String>;

/// A Chrome tab group id.
pub type GroupId = i64;

/// `chrome.tabGroups.TAB_GROUP_ID_NONE`: the tab is in no group.
pub const NO_GROUP: GroupId = -1;

/// Why tab groups are off when nothing better is known.
pub const NO_TAB_GROUPS: &str = "this browser has no tab groups (chrome.tabGroups is missing)";

/// A `chrome.tabGroups.TabGroup`, the fields we read.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupInfo {
    pub id: GroupId,
    #[serde(default)]
    pub window_id: Option<WindowId>,
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub color: Option<String>,
}

/// A `chrome.tabGroups.TabGroup` (JSON).
pub fn group_from_chrome(json: &str) -> Option<GroupInfo> {
    serde_json::from_str(json).ok()
}

/// An array of `chrome.tabGroups.TabGroup` (JSON).
pub fn groups_from_chrome(json: &str) -> Vec<GroupInfo> {
    serde_json::from_str(json).unwrap_or_default()
}

/// What `chrome.storage.session` keeps of the grants, beside the shared
/// tabs, for a restart of the service worker: which groups are whose (by
/// their tabs), each grant's window and its rules.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PersistedGrants {
    /// The grants, as the relay last listed them.
    #[serde(default)]
    pub grants: Vec<GrantGroup>,
    /// Each grant's window for the tabs it opens.
    #[serde(default)]
    pub windows: Vec<GrantWindow>,
    /// Every tab that is a grant's (shared with it, joining its group, its
    /// popups and new tabs).
    #[serde(default)]
    pub tabs: Vec<GrantTab>,
}

/// A grant's window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GrantWindow {
    pub grant: String,
    pub window_id: WindowId,
}

/// A grant's tab.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GrantTab {
    pub tab_id: TabId,
    pub grant: String,
}
