//! Every decision the extension makes, as a state machine over [`Host`].
//!
//! The core never waits: it asks the host to do something (a `chrome.*`
//! call tagged with an [`OpId`], a WebSocket frame, a timer) and is told the
//! outcome later through one of its `on_*` methods. That keeps it plain,
//! synchronous Rust that tests drive step by step with a fake host; the WASM
//! glue is the real host.
//!
//! The extension is a thin forwarder: the relay decides which tabs to attach
//! (popups, `createTarget`) and what to do with events, and which grants
//! exist, their colours and sites. The core decides only what must be
//! decided in the browser: the user's click, the safety rules (no
//! `chrome://` pages, never the last tab), keeping the service worker
//! alive, reconnecting, re-attaching after navigation, the badge, which of
//! its tab groups holds a tab (and so whose it is), a grant's window, the
//! grants' cookie rules and their menu items. The relay's questions and
//! handoffs to the person it only shows, and reports the person's clicks.
//!
//! By concern: `link.rs`, the link to the relay; `calls.rs`, the relay's
//! calls and the outcomes of `chrome.*` calls; `tabs.rs`, what is shared;
//! `groups.rs`, `grants.rs`, `rules.rs`, `person.rs`, `versions.rs` as
//! below; `policy.rs`, the fixed rules.
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
//! - **"Stop sharing" for every tab leaves none shared**, also when an
//!   attach (the user's click, the relay's for a popup) ends after it:
//!   `stopping_every_share_withdraws_the_attaches_under_way`.
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
//! - **Keepalive** every 20 s while shared or held for grants (an MV3
//!   worker is stopped after ~30 s idle), and a 30 s `chrome.alarms`
//!   backstop: `keepalive_pings_only_while_shared_and_connected`; e2e
//!   `the_worker_idles_a_minute_while_shared_and_stays_connected`.
//! - **A silent relay is left**: a relay that says nothing for three looks
//!   in a row, 20 s apart (its socket open, or opening, and nothing coming:
//!   a suspended `serve`), counts as gone, so the grace below runs and what
//!   the worker sends stops piling up in Chrome:
//!   `a_relay_that_stops_answering_is_left_and_the_tabs_follow_the_grace`,
//!   `a_relay_that_accepts_but_never_answers_the_handshake_is_retried`; e2e
//!   `a_suspended_serve_is_noticed_and_its_resume_shares_the_tab_again`.
//!   A busy tab's relay is left sooner, once 512 MiB it was sent are not
//!   taken: `a_relay_that_takes_nothing_is_left_before_the_browser_holds_more_than_the_bound`.
//! - **Reconnect after 1 s·2ⁿ (cap 5 s, jitter)**, and a **60 s grace**
//!   before the tabs are released:
//!   `relay_going_away_backs_off_keeps_tabs_for_the_grace_then_releases_them`,
//!   `the_relay_coming_back_within_the_grace_keeps_everything`; e2e
//!   `restarting_the_relay_brings_the_tab_back_without_a_new_click`. A
//!   **handshake lost** after the socket opened (but for a protocol
//!   refusal or a failed proof) is tried again at once, once until the next welcome:
//!   `a_handshake_lost_is_retried_at_once_then_after_the_backoff`.
//! - **Nothing but `auth`, `prove` and the hello before the welcome**;
//!   what changed in the shared tabs since the hello is told right after
//!   it: `what_changes_between_the_hello_and_the_welcome_is_told_after_the_welcome`.
//! - **State in `chrome.storage.session`** (each shared tab with its
//!   group; the grants, whose each tab is, their windows), rehydrated and
//!   re-announced after a worker restart; the group is the truth for its
//!   tabs ([`Core::start`]):
//!   `restart_rehydrates_reconnects_and_reannounces`,
//!   `a_worker_restart_takes_the_group_as_the_truth`; e2e
//!   `a_stopped_worker_rehydrates_and_reannounces_its_tabs`.
//! - **Replies in Chrome's order, with Chrome's CDP error codes**:
//!   `relay_calls_are_forwarded_and_answered_in_order`,
//!   `cdp_errors_keep_their_code_and_unshared_tabs_are_refused`.
//! - **The "Browser Relay" tab group is the access list** (`groups.rs`;
//!   tests in `tests_groups.rs`): a share puts the tab into its window's
//!   orange group, a tab put into the group is shared, a tab leaving it is
//!   unshared at once (the relay hears it before Chrome detaches), every
//!   other end of sharing takes the tab out, restricted pages never join,
//!   the worker's start reconciles with the group, and without tab groups
//!   the badge alone shows what is shared: e2e
//!   `a_tab_put_into_the_group_is_shared_with_playwright_and_taken_out_it_leaves_every_client`.
//! - **"Stop sharing" on the options page**, one tab or all, is the user's
//!   click: `the_options_page_lists_shared_tabs_with_their_clients_and_stops_sharing`.
//! - **Grants** (protocol 6; `grants.rs`, `rules.rs`; tests in
//!   `tests_grants.rs`, and `rules::tests`). Each owner (the person, or a
//!   grant) has a tab group per window (`groups.rs`), a grant's titled with
//!   its name in its colour:
//!   - the relay's `grants` list (heard only once it is welcomed) is kept
//!     and saved; nothing is made for a grant until a tab is its, but its
//!     menu item: `a_grants_notice_creates_nothing_until_needed`;
//!   - a tab put into a grant's group is shared with it, and every
//!     `TabInfo` of a shared tab the relay gets names its grant (the hello,
//!     `user.toggledAttach`, `tabs.onUpdated`, `debugger.reattached`, the
//!     answers of `tabs.*`):
//!     `a_tab_dragged_into_a_grants_group_is_shared_with_the_grant`,
//!     `without_tab_groups_a_grants_tab_is_its_by_the_cores_record`;
//!   - a shared tab moved into another owner's group stays shared and the
//!     relay hears `tab.grant` before anything else of the tab's:
//!     `a_shared_tab_moved_between_the_persons_group_and_a_grants_says_so_before_anything_else`;
//!   - a tab out of all our groups is unshared at once, as ever, and is
//!     nobody's grant's: `a_tab_dragged_out_of_a_grants_group_is_unshared_and_its_rules_go`;
//!   - a grant's `tabs.create` opens in a window of its own (made unfocused
//!     for its first tab, a tab there after; a closed window is never used
//!     again), blank until its cookie rules cover it, in its group before
//!     the answer, which names the grant; the relay's attach that follows
//!     is the only one:
//!     `a_grants_new_tab_opens_in_its_own_window_in_its_group_and_is_attached_once_by_the_relay`,
//!     `a_closed_grant_window_is_not_used_again`,
//!     `a_grants_new_tab_whose_rules_chrome_refuses_stays_blank_and_the_relay_hears_why`;
//!   - a grant's tab's popup is the grant's, its cookie rules updated in the
//!     event that tells of it, before anything else:
//!     `a_grant_tabs_popup_is_covered_by_its_rules_in_the_same_event_before_anything_else`;
//!   - a grant with sites has session rules over its tabs (cookies removed
//!     both ways, its sites allowed), ids of its own, replaced as a set, gone
//!     when it has no tab; a refusal is shown on the options page:
//!     `rules::tests::a_grants_rules_are_composed_exactly_as_chrome_takes_them`,
//!     `rules::tests::a_change_replaces_a_grants_rules_as_a_set_and_an_empty_set_removes_them`,
//!     `each_grants_rules_have_ids_of_their_own_and_are_replaced_as_a_set`;
//!   - a grant no longer listed loses its groups, tabs, rules and menu item
//!     (so does every grant, for a relay older than protocol 6):
//!     `a_revoked_grant_loses_its_groups_tabs_rules_and_menu_item`;
//!   - the worker's start takes each saved group as its owner's, replaces
//!     the session rules an earlier run left and makes the menu items again:
//!     `a_worker_restart_rehydrates_the_grants_groups_and_replaces_the_rules`;
//!   - "Share this tab with NAME" on the toolbar button's menu shares a tab
//!     with that grant, or moves a shared one into its group:
//!     `share_this_tab_with_a_grant_from_the_toolbar_buttons_menu`;
//!   - **the link stays while the relay has grants**, nothing shared (a
//!     grant's agent opens its first tab through it), with the keepalive
//!     pings; a `grants` notice that lists none lets it go, and so do a
//!     welcome older than protocol 6 and, for a link made for grants the
//!     status route counted, no notice by the next watch:
//!     `grants_keep_the_link_with_nothing_shared_and_the_last_ones_going_lets_it_go`,
//!     `a_relay_that_counts_grants_and_lists_none_is_let_go`;
//!   - paired, with no link and nothing shared, the worker asks the relay's
//!     public status route (`/extension/status`, no token: it counts
//!     grants, names none) at its start, on each alarm, for a new pairing
//!     and after redeeming a pairing link, one question at a time: grants
//!     counted (and no other browser's extension connected) make it
//!     connect; none, or no relay there, do nothing and show nothing until
//!     the next alarm; an unpaired worker asks nothing:
//!     `idle_and_paired_the_worker_asks_the_relays_status_route_and_connects_for_its_grants`,
//!     `a_pairing_link_redeemed_with_nothing_shared_asks_whether_its_relay_has_grants` (in `tests.rs`);
//!   - the relay going away while only grants held the link: no grace (no
//!     tab to keep) and no backoff loop; the next alarm asks again:
//!     `the_relay_going_away_while_only_grants_held_the_link_is_asked_for_again_at_the_next_alarm`.
//! - **The person in the loop** (protocol 7; `person.rs`; tests in
//!   `tests_person.rs`). What to ask, when, and when a handoff is over is
//!   the relay's; the extension shows and reports:
//!   - the relay's `ask` (heard only once it is welcomed) is a
//!     notification (`ask-ID`) with Allow and Deny that stays until
//!     answered; a click sends `ask.answer` and clears it; closing it
//!     answers nothing:
//!     `an_ask_shows_a_notification_with_allow_and_deny_and_a_click_answers_the_relay_and_clears_it`;
//!   - `ask.closed` clears it, and a click after that answers nothing:
//!     `ask_closed_clears_its_notification`;
//!   - the link going (closed, left, new settings) clears every question's
//!     notification (the relay fails them): a question is answered only
//!     on the link that asked it:
//!     `the_link_going_clears_every_questions_notification`;
//!   - a `handoff` of a tab shared with that grant brings the tab and its
//!     window to the front, titles its group "GRANT needs you: REASON"
//!     (60 characters at most, in the grant's colour), badges the tab `?`
//!     with the same words, and offers Done in a notification and in the
//!     toolbar button's menu; the new title is the extension's own: the
//!     group stays the grant's (renamed, it says it again; dragged to
//!     another window, it is recognised by it):
//!     `a_handoff_brings_the_tab_to_the_front_retitles_its_group_badges_it_and_offers_done`;
//!   - Done, in either, sends `handoff.done`; what is shown stays until
//!     the relay ends the handoff:
//!     `done_in_the_notification_or_the_menu_answers_handoff_done`;
//!   - `handoff.end` gives the group its name and the tab its badge back,
//!     and clears the notification and the menu item:
//!     `handoff_end_restores_title_and_badge_and_clears_the_notification_and_the_menu_item`;
//!   - a handoff of a tab not shared with that grant is ignored, and
//!     logged: `a_handoff_of_a_tab_not_shared_with_that_grant_does_nothing`;
//!   - a handoff ends here too when its tab is no longer the grant's
//!     (unshared, moved to another owner's group, closed) or the link goes
//!     (the relay re-sends nothing):
//!     `a_handoff_ends_when_its_tab_is_no_longer_the_grants_or_the_link_goes`;
//!   - the worker's start names each of our groups after its owner again
//!     and clears the notifications an earlier run left; the group stays
//!     the grant's:
//!     `a_worker_restart_during_a_handoff_leaves_the_group_the_grants_under_its_name`.
//! - **Versions** on the options page: the extension's and the relay's (its
//!   welcome, or its status route when it refused our protocol), and which
//!   to update when they do not take each other's protocol (`versions.rs`):
//!   `the_options_page_shows_both_versions_from_the_welcome`,
//!   `a_relay_that_refuses_our_protocol_is_asked_its_versions_and_the_page_says_what_to_update`.
//! - Also: tab lifecycle (`closed_tabs_are_reported_and_forgotten`), a
//!   protocol mismatch stops retrying
//!   (`protocol_mismatch_stops_retrying_and_refusals_explain_themselves`),
//!   settings changes reconnect (`settings_changes_reconnect_with_the_new_port`),
//!   unknown relay messages are ignored (`unknown_relay_messages_are_ignored`).

mod calls;
mod grants;
mod groups;
mod link;
mod person;
mod policy;
mod rules;
mod tabs;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_grants;
#[cfg(test)]
mod tests_groups;
#[cfg(test)]
mod tests_person;
mod versions;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::{Deserialize, Serialize};
use shared_protocol::{CallId, ClientInfo, TabId, TabInfo, TabQuery, WindowId};

pub use grants::{GrantStatus, GrantTab, GrantWindow, MENU_PREFIX, PersistedGrants, menu_id, window_from_chrome};
pub use groups::{
    GROUP_COLOR, GROUP_TITLE, GroupId, GroupInfo, NO_GROUP, NO_TAB_GROUPS, Owner, group_from_chrome, groups_from_chrome,
};
pub use person::DONE_MENU_PREFIX;
pub use policy::Badge;
pub use rules::{HeaderChange, RESOURCE_TYPES, RULES_PER_GRANT, RuleAction, RuleCondition, SessionRule};
pub use versions::VersionsStatus;

/// The relay's answer to an attach the user withdrew ([`Core::withdrawn`]).
const SHARING_STOPPED: &str = "the user stopped sharing every tab while this tab was being attached";
const NOT_PAIRED: &str = "not paired with the relay: run `browser-relay pair` and open the link it prints (or paste the token in the options)";

/// Tags one `chrome.*` call so its outcome finds its way back.
pub type OpId = u64;

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
    fn is_paired(&self) -> bool {
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
    /// ([`policy::RELAY_WATCH_MS`]), while a socket is open or opening.
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
/// these what is shared ([`Core::start`]).
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
            groups: Err(groups::NO_TAB_GROUPS.into()),
            grants: PersistedGrants::default(),
            session_rules: Vec::new(),
            notifications: Vec::new(),
        }
    }
}

/// What the core needs from the browser. Calls are fire-and-forget: their
/// outcome comes back through [`Core::on_op_done`] and the other `on_*`
/// methods, never from inside the call (the host must not re-enter the core).
pub trait Host {
    /// The JSON text of a payload the core forwards without reading it (a
    /// forwarded command's answer, an event's params), as the host holds
    /// it: the WASM host keeps it a JavaScript string, so a 1 MiB answer
    /// never crosses into WASM and back.
    type Json;
    /// Makes an allow-listed `chrome.*` call. Its outcome comes back by
    /// [`Core::on_op_done`], a forwarded command's by [`Core::on_answer`].
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
    /// by [`Core::on_relay_status`] with this `probe`, or why there is
    /// none (no relay there, a refusal, no answer within a few seconds).
    fn ask_relay_status(&mut self, probe: u64, port: u16);
    /// Says something for whoever reads the worker's console (what the
    /// core ignored, and why).
    fn log(&mut self, message: &str);
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    pub state: &'static str,
    pub detail: String,
    pub attached_tabs: usize,
    pub port: u16,
    pub paired: bool,
    /// What went wrong last, until a relay welcomed us again (the options
    /// page tells a pairing link's outcome by it).
    pub error: Option<String>,
    /// The shared tabs, in tab id order.
    pub tabs: Vec<SharedTab>,
    pub tab_groups: TabGroupsStatus,
    /// The grants the relay announced, with their cookie rules.
    pub grants: Vec<GrantStatus>,
    /// This extension's version and protocol, the relay's as it last said
    /// them, and whether they take each other (`versions.rs`).
    pub versions: VersionsStatus,
}

/// One shared tab on the options page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SharedTab {
    pub tab_id: TabId,
    pub title: String,
    pub url: String,
    /// In the "Browser Relay" group.
    pub in_group: bool,
    /// Why a shared tab is not in the group (a popup window cannot hold
    /// groups), if Chrome refused it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_in_group: Option<String>,
    /// The CDP clients holding it, as the relay last said.
    pub clients: Vec<ClientInfo>,
    /// The grant it is shared with (none: the person's own).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grant: Option<String>,
    /// Handed to the person by its grant: "GRANT needs you: REASON".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub needs_you: Option<String>,
}

/// Whether shared tabs are shown as a tab group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TabGroupsStatus {
    pub available: bool,
    pub detail: String,
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
    RelayAttachCheck(CallId, TabId),
    RelayAttach(CallId, TabInfo),
    RelayDetach(CallId, TabId),
    /// The relay asked to close a tab: first count the tabs.
    RelayRemoveCheck(CallId, TabId),
    UserAttach(TabInfo),
    /// The user clicked while we knew no pairing: storage is read before
    /// the click is refused.
    PairingCheck(TabInfo),
    /// The user stopped sharing the tab (already done on our side): Chrome
    /// detaches; the outcome changes nothing.
    UserDetach(TabInfo),
    /// The user put the tab into the "Browser Relay" group: attaching it.
    GroupAttach(TabInfo),
    /// Putting a shared tab into a new group of its owner in its window.
    GroupCreate(TabId, Option<WindowId>, Owner),
    /// Putting a shared tab into our group of its window.
    GroupJoin(TabId, GroupId),
    /// Naming and colouring our group; the result tells its window.
    GroupStyle(GroupId),
    /// Taking a tab out of its group (tried again if Chrome refuses for now).
    Ungroup(TabId),
    /// After Chrome detached a tab: does it still exist, and where is it?
    ReattachCheck(TabId),
    Reattach(TabId),
    /// Detaching after the grace period; nothing to do with the outcome.
    Cleanup,
    /// The grants' cookie rules, for these grants.
    Rules(Vec<String>),
    /// A grant's new tab, in a new window of its own.
    GrantWindow(grants::NewTab),
    /// A grant's new tab, in its window.
    GrantTab(grants::NewTab, WindowId),
    /// A grant's new tab, opened blank, sent to its URL.
    OpeningNavigate(TabId),
    /// A tab handed to the person, made active in its window: its window
    /// comes to the front next.
    HandoffFront(TabId),
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
    /// Whether the relay said anything (or the socket opened) since the
    /// last [`Timer::RelayWatch`]; a flag, so the hot path pays no timer.
    heard: bool,
    /// Watches in a row that found the relay silent.
    silent_watches: u32,
    attempt: u32,
    /// A handshake was lost and retried at once since the last welcome:
    /// the next loss waits the backoff (no loop against a relay that drops
    /// every handshake).
    handshake_retried: bool,
    /// The shared tabs as the hello of the link being made told them: what
    /// changes before the welcome is told after it.
    said_hello: BTreeMap<TabId, TabInfo>,
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
    /// Our nonce of the current connection's pairing proof.
    auth_nonce: String,
    /// This connection proves a pairing link's code: the relay's bound
    /// nonce, to open the token it seals into its welcome.
    redeeming: Option<String>,
    next_nonce: u64,
    grace_running: bool,
    /// The "Browser Relay" tab groups (see `groups.rs`).
    groups: groups::TabGroups,
    /// Who holds each shared tab, as the relay last said (`clients`).
    clients: BTreeMap<TabId, Vec<ClientInfo>>,
    /// Tabs whose attach was running (the user's click, the relay's for a
    /// popup) when the user stopped sharing every tab: when it ends, it
    /// detaches instead of sharing.
    withdrawn: BTreeSet<TabId>,
    /// The grants, whose each tab is, their windows and rules (see
    /// `grants.rs`).
    grants: grants::Grants,
    /// What the relay said of its grants, for the link being made or held:
    /// while it has some, the link is kept with nothing shared.
    relay_grants: grants::RelayGrants,
    /// The status probe awaiting its answer, and the next one's number.
    probing: Option<u64>,
    next_probe: u64,
    /// The probe in `probing` only asks the relay's versions (it refused
    /// our protocol): its answer connects nothing.
    probing_versions: bool,
    /// What the relay last said of its version and protocols, for the
    /// options page (`versions.rs`).
    relay_versions: Option<versions::RelayVersions>,
    /// The relay's questions and handoffs on the current link (see
    /// `person.rs`).
    in_the_loop: person::InTheLoop,
}

impl<H: Host> Core<H> {
    pub fn new(host: H) -> Self {
        Self {
            host,
            settings: Settings::default(),
            env: Environment::default(),
            link: Link::Idle,
            opened: false,
            heard: false,
            silent_watches: 0,
            attempt: 0,
            handshake_retried: false,
            said_hello: BTreeMap::new(),
            last_error: None,
            attached: BTreeMap::new(),
            reattaching: BTreeMap::new(),
            pending: HashMap::new(),
            next_op: 1,
            link_generation: 0,
            auth_nonce: String::new(),
            redeeming: None,
            next_nonce: 1,
            grace_running: false,
            groups: groups::TabGroups::default(),
            clients: BTreeMap::new(),
            withdrawn: BTreeSet::new(),
            grants: grants::Grants::default(),
            relay_grants: grants::RelayGrants::None,
            probing: None,
            next_probe: 1,
            probing_versions: false,
            relay_versions: None,
            in_the_loop: person::InTheLoop::default(),
        }
    }

    pub fn link(&self) -> Link {
        self.link
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    pub fn attached(&self) -> Vec<TabId> {
        self.attached.keys().copied().collect()
    }

    pub fn status(&self) -> Status {
        let (state, default) = match self.link {
            // Held for the grants alone: their agents may open tabs.
            Link::Ready if self.attached.is_empty() && self.relay_grants.holds() => (
                "connected",
                format!(
                    "connected to the relay on 127.0.0.1:{}: {}, nothing shared",
                    self.settings.dial_port(),
                    grants::how_many(self.grants.list.len())
                ),
            ),
            Link::Ready => ("connected", format!("connected to the relay on 127.0.0.1:{}", self.settings.dial_port())),
            Link::Connecting | Link::Authenticating | Link::Open => {
                ("connecting", format!("connecting to 127.0.0.1:{}…", self.settings.dial_port()))
            }
            Link::Idle if self.attached.is_empty() => {
                ("idle", "no tab is shared: click the toolbar icon on a tab".into())
            }
            Link::Idle => ("disconnected", "waiting to reconnect to the relay".into()),
        };
        let tabs = self
            .attached
            .values()
            .map(|tab| SharedTab {
                tab_id: tab.tab_id,
                title: tab.title.clone(),
                url: tab.url.clone(),
                in_group: self.groups.members.contains_key(&tab.tab_id),
                not_in_group: self.groups.outside.get(&tab.tab_id).cloned(),
                clients: self.clients.get(&tab.tab_id).cloned().unwrap_or_default(),
                grant: self.owner(tab.tab_id).cloned(),
                needs_you: self.handoff_status(tab.tab_id),
            })
            .collect();
        Status {
            state,
            detail: self.last_error.clone().filter(|_| self.link != Link::Ready).unwrap_or(default),
            attached_tabs: self.attached.len(),
            port: self.settings.port,
            paired: self.settings.token.is_some(),
            error: self.last_error.clone(),
            tabs,
            tab_groups: self.groups.status(),
            grants: self.grants_status(),
            versions: versions::versions_status(&self.env.extension_version, self.relay_versions.as_ref()),
        }
    }

    /// The service worker (re)started: decides from `facts` which tabs are
    /// shared, then re-announces and reconnects them.
    ///
    /// One source of truth per tab. Where tab groups work, a tab is shared
    /// when it is in one of our "Browser Relay" groups (ours: a group that
    /// an earlier run of this worker, in this browser session, saved with
    /// its tabs): Chrome keeps groups across a worker restart, and the user
    /// edits them. A tab in our group that the debugger lost is attached
    /// again; a saved tab that was in the group and is not any more was
    /// taken out while the worker was stopped, and is released. Where a tab
    /// cannot be in a group (tab groups refused, a popup window), the
    /// saved list is the truth, as it always was: saved and still attached
    /// (`chrome.debugger.getTargets`) means shared. A group titled "Browser
    /// Relay" that is not ours (Chrome restored it after a browser restart,
    /// or the extension was reloaded) is dissolved: sharing never survives
    /// a browser restart, and the group must not claim otherwise.
    ///
    /// Grants: the groups an earlier run saved are whose they were, and the
    /// grants it saved are kept until the relay lists them again; their
    /// cookie rules replace whatever session rules that run left, and their
    /// menu items are made again.
    ///
    /// The person in the loop: a question or a handoff of the earlier run
    /// ended with its link (the relay re-sends nothing): each of our groups
    /// is named after its owner again (a handoff had retitled it) and the
    /// notifications that run left are cleared.
    pub fn start(&mut self, settings: Settings, env: Environment, mut facts: StartFacts) {
        self.settings = settings;
        self.env = env;
        let existing: BTreeSet<TabId> = facts.tabs.iter().map(|t| t.info.tab_id).collect();
        let found_groups = facts.groups.clone().unwrap_or_default();
        let notifications = std::mem::take(&mut facts.notifications);
        self.grants.restore(facts.grants.clone(), &existing);
        self.grants.rules.left_by_earlier_run(std::mem::take(&mut facts.session_rules));
        self.sync_rules();
        if !self.grants.list.is_empty() {
            self.rebuild_menus();
        }
        let plan = self.groups.reconcile(facts);
        for tab in plan.shared {
            self.attached.insert(tab.tab_id, tab);
        }
        self.persist();
        // A pairing link's code stored before this start (the options page
        // wrote it while the worker was starting: its change, queued until
        // now, matches the settings just read and changes nothing) is
        // redeemed now, as `on_settings` would.
        if !self.attached.is_empty() || self.settings.pairing_code.is_some() {
            self.ensure_connected();
        } else {
            // Nothing shared: the relay may still have grants, whose
            // agents need the link.
            self.probe_relay();
        }
        self.refresh_badges();
        for tab in plan.released {
            self.start_call(Purpose::Cleanup, ChromeCall::DebuggerDetach { tab });
            self.badge(tab, &Badge::Off);
        }
        if !plan.dissolve.is_empty() {
            self.start_call(Purpose::Cleanup, ChromeCall::TabsUngroup { tabs: plan.dissolve });
        }
        for (tab, group) in plan.rejoin {
            self.join_from_group(tab, group);
        }
        let ungrouped: Vec<TabId> = self.attached.keys().copied().collect();
        for tab in ungrouped {
            self.group_tab(tab);
        }
        // A handoff ended with the earlier run's link: its group is named
        // after its owner again, its notification goes.
        self.restyle_found(&found_groups);
        self.clear_leftover_notifications(notifications);
    }

    pub fn on_settings(&mut self, settings: Settings) {
        if settings == self.settings {
            return;
        }
        self.settings = settings;
        self.last_error = None;
        if self.link != Link::Idle {
            self.host.disconnect();
            self.link = Link::Idle;
            self.link_left_the_loop();
        }
        self.relay_grants = grants::RelayGrants::None;
        // A probe of the relay before is not this pairing's, nor are the
        // versions it said.
        self.probing = None;
        self.probing_versions = false;
        self.relay_versions = None;
        self.attempt = 0;
        self.handshake_retried = false;
        // A pairing link's code is redeemed at once (it is good for
        // minutes), also with nothing shared: the link is closed again
        // after the welcome.
        if !self.attached.is_empty() || self.settings.pairing_code.is_some() {
            self.ensure_connected();
        } else {
            self.probe_relay();
        }
        self.refresh_badges();
    }

    /// The host, for its own tasks (the glue's batched events).
    #[cfg(target_arch = "wasm32")]
    pub(crate) fn host_mut(&mut self) -> &mut H {
        &mut self.host
    }

    pub fn on_timer(&mut self, timer: Timer) {
        match timer {
            Timer::Reconnect => self.ensure_connected(),
            Timer::GroupMove => self.on_group_move_done(),
            Timer::RelayWatch => self.on_relay_watch(),
            Timer::Keepalive => self.on_keepalive(),
            Timer::DetachGrace => self.on_grace_over(),
            Timer::Regroup(tab) => self.on_regroup_timer(tab),
            Timer::GrantTab(tab) => self.on_grant_tab_timer(tab),
            Timer::Reattach(tab) => self.on_reattach_timer(tab),
        }
    }

    /// A `chrome.alarms` tick (a backstop that wakes a stopped worker):
    /// shared tabs reconnect; with nothing shared, the relay's status
    /// route is asked whether it has grants.
    pub fn on_alarm(&mut self) {
        if !self.attached.is_empty() && self.link == Link::Idle {
            self.ensure_connected();
        } else if self.attached.is_empty() {
            self.probe_relay();
        }
    }
}
