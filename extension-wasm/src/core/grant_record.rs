//! What the core knows of the grants: the relay's list, whose each tab is,
//! each grant's window and the new tabs being made (`grants.rs` keeps it).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use shared_protocol::{CallId, GrantGroup, TabId, TabInfo, WindowId};

use super::host::{GrantTab, GrantWindow, PersistedGrants, tab_info_from_chrome};
use super::rules;

/// How long a grant's new tab, answered, waits for the relay's own
/// `debugger.attach` (sent right after the answer) before the extension
/// shares it itself: it sits in the grant's group, which holds shared tabs
/// only.
pub(super) const AWAIT_RELAY_ATTACH_MS: u64 = 10_000;

/// The prefix of a grant's menu item id; its name follows.
pub const MENU_PREFIX: &str = "grant:";

/// A grant's menu item on the toolbar button.
pub fn menu_id(grant: &str) -> String {
    format!("{MENU_PREFIX}{grant}")
}

/// What the relay said of its grants, for the link being made or held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RelayGrants {
    /// None, or nothing said (a relay older than grants says nothing).
    None,
    /// Its status route counted some: the link is made for them and held
    /// until its `grants` notice, sent right after its welcome (or, should
    /// none come, until the first watch after the welcome).
    Counted,
    /// Its last `grants` notice listed some.
    Listed,
}

impl RelayGrants {
    /// Whether they keep the link.
    pub(super) fn holds(self) -> bool {
        self != Self::None
    }
}

/// `n` grants, in words (0: the count is not listed yet).
pub(super) fn how_many(n: usize) -> String {
    match n {
        0 => "grants".into(),
        1 => "1 grant".into(),
        n => format!("{n} grants"),
    }
}

/// The title of a grant's menu item.
pub(super) fn menu_title(grant: &str) -> String {
    format!("Share this tab with {grant}")
}

/// One grant on the options page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GrantStatus {
    pub name: String,
    pub color: String,
    /// How many site expressions it has (0: every site).
    pub sites: usize,
    /// How many tabs are its.
    pub tabs: usize,
    /// Its cookie rules: `"every site"` (it has none), `"no tabs"`,
    /// `"in force"`, `"applying"` or `"failed"`.
    pub rules: &'static str,
    /// Why Chrome refused its rules.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rules_error: Option<String>,
}

/// A grant's new tab being made, before Chrome said which tab it is.
#[derive(Debug, Clone)]
pub(super) struct NewTab {
    pub(super) call: CallId,
    pub(super) grant: String,
    /// What the relay asked to open.
    pub(super) url: String,
    /// Opened blank, and sent to `url` once the grant's cookie rules cover
    /// it (a grant with sites): its first request must not carry the
    /// person's cookies.
    pub(super) blank_first: bool,
}

/// A grant's new tab being made ready (grouped, its rules in force) before
/// the relay is answered.
#[derive(Debug, Clone)]
pub(super) struct Opening {
    pub(super) new: NewTab,
    /// The relay connection that asked.
    pub(super) generation: u64,
    pub(super) info: TabInfo,
    /// In the grant's group (or it cannot be: no tab groups, refused).
    pub(super) grouped: bool,
    /// Sent to its URL; the answer follows.
    pub(super) navigating: bool,
}

/// What the core knows of the grants.
#[derive(Debug, Default)]
pub(super) struct Grants {
    /// As the relay listed them, in its order.
    pub(super) list: Vec<GrantGroup>,
    /// Whose each grant's tab is.
    pub(super) tabs: BTreeMap<TabId, String>,
    /// Each grant's window for its new tabs.
    pub(super) windows: BTreeMap<String, WindowId>,
    /// New tabs being made ready.
    pub(super) opening: BTreeMap<TabId, Opening>,
    /// New tabs answered, waiting for the relay's attach.
    pub(super) awaiting: BTreeMap<TabId, TabInfo>,
    pub(super) rules: rules::SessionRules,
    /// Whether this run of the worker made the menu items (an earlier
    /// run's, or a browser's from before a restart, may be there).
    pub(super) menus_made: bool,
}

impl Grants {
    pub(super) fn get(&self, name: &str) -> Option<&GrantGroup> {
        self.list.iter().find(|g| g.name == name)
    }

    /// Whether a tab is a new tab of a grant's that the relay will attach
    /// itself (being made, or answered).
    pub(super) fn awaits_relay(&self, tab: TabId) -> bool {
        self.opening.contains_key(&tab) || self.awaiting.contains_key(&tab)
    }

    /// A grant's new tab as Chrome made it.
    pub(super) fn new_tab_info(&self, tab: TabId) -> Option<TabInfo> {
        self.opening.get(&tab).map(|o| &o.info).or_else(|| self.awaiting.get(&tab)).cloned()
    }

    /// A grant's new tab's window and grant (for its group).
    pub(super) fn new_tab_place(&self, tab: TabId) -> Option<(Option<WindowId>, String)> {
        let info = self.opening.get(&tab).map(|o| &o.info).or_else(|| self.awaiting.get(&tab))?;
        Some((info.window_id, info.grant.clone()?))
    }

    pub(super) fn persisted(&self) -> PersistedGrants {
        PersistedGrants {
            grants: self.list.clone(),
            windows: self
                .windows
                .iter()
                .map(|(grant, &window_id)| GrantWindow { grant: grant.clone(), window_id })
                .collect(),
            tabs: self.tabs.iter().map(|(&tab_id, grant)| GrantTab { tab_id, grant: grant.clone() }).collect(),
        }
    }

    /// At the worker's start: what an earlier run saved, for the tabs that
    /// still exist.
    pub(super) fn restore(&mut self, saved: PersistedGrants, existing: &BTreeSet<TabId>) {
        self.list = saved.grants;
        self.windows = saved.windows.into_iter().map(|w| (w.grant, w.window_id)).collect();
        self.tabs = saved
            .tabs
            .into_iter()
            .filter(|t| existing.contains(&t.tab_id) && self.list.iter().any(|g| g.name == t.grant))
            .map(|t| (t.tab_id, t.grant))
            .collect();
    }
}

/// `chrome.windows.Window` (JSON) as `windows.create` answers it: the
/// window and its first tab.
pub fn window_from_chrome(json: &str) -> Option<TabInfo> {
    #[derive(Deserialize)]
    struct Window {
        id: Option<WindowId>,
        #[serde(default)]
        tabs: Vec<serde_json::Value>,
    }
    let window: Window = serde_json::from_str(json).ok()?;
    let mut tab = tab_info_from_chrome(&window.tabs.first()?.to_string())?;
    tab.window_id = tab.window_id.or(window.id);
    Some(tab)
}
