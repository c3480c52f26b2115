//! The state machine: [`Core`], what it holds and its entry points; each
//! concern's file adds its own `impl Core` (see the module doc).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::Serialize;
use shared_protocol::{CallId, ClientInfo, TabId, TabInfo, WindowId};

use super::grant_record::{GrantStatus, Grants, NewTab, RelayGrants, how_many};
use super::host::{ChromeCall, Environment, GroupId, Host, Owner, Settings, StartFacts, Timer};
use super::in_the_loop::InTheLoop;
use super::op_id::OpId;
use super::policy::Badge;
use super::tab_groups::{TabGroups, TabGroupsStatus};
use super::versions::{self, VersionsStatus};

/// The relay's answer to an attach the user withdrew ([`Core::withdrawn`]).
pub(super) const SHARING_STOPPED: &str = "the user stopped sharing every tab while this tab was being attached";
pub(super) const NOT_PAIRED: &str = "not paired with the relay: run `browser-relay pair` and open the link it prints (or paste the token in the options)";

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

/// Why a `chrome.*` call was made, to know what its outcome means.
#[derive(Debug, Clone)]
pub(super) enum Purpose {
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
    GrantWindow(NewTab),
    /// A grant's new tab, in its window.
    GrantTab(NewTab, WindowId),
    /// A grant's new tab, opened blank, sent to its URL.
    OpeningNavigate(TabId),
    /// A tab handed to the person, made active in its window: its window
    /// comes to the front next.
    HandoffFront(TabId),
}

/// The extension's state. Generic over the host so tests use a fake one.
#[derive(Debug)]
pub struct Core<H: Host> {
    pub host: H,
    pub(super) settings: Settings,
    pub(super) env: Environment,
    pub(super) link: Link,
    /// Whether the current connection attempt ever opened (to tell "relay
    /// not running" from "the relay refused us").
    pub(super) opened: bool,
    /// Whether the relay said anything (or the socket opened) since the
    /// last [`Timer::RelayWatch`]; a flag, so the hot path pays no timer.
    pub(super) heard: bool,
    /// Watches in a row that found the relay silent.
    pub(super) silent_watches: u32,
    pub(super) attempt: u32,
    /// A handshake was lost and retried at once since the last welcome:
    /// the next loss waits the backoff (no loop against a relay that drops
    /// every handshake).
    pub(super) handshake_retried: bool,
    /// The shared tabs as the hello of the link being made told them: what
    /// changes before the welcome is told after it.
    pub(super) said_hello: BTreeMap<TabId, TabInfo>,
    pub(super) last_error: Option<String>,
    pub(super) attached: BTreeMap<TabId, TabInfo>,
    /// Tabs being re-attached after Chrome detached them: try count, info.
    pub(super) reattaching: BTreeMap<TabId, (u32, TabInfo)>,
    /// Each call's purpose and the relay connection it was made for.
    pub(super) pending: HashMap<OpId, (Purpose, u64)>,
    pub(super) next_op: OpId,
    /// Counts relay connections: an answer for a call of an earlier
    /// connection must not reach a new one (a restarted relay numbers its
    /// calls from 1 again).
    pub(super) link_generation: u64,
    /// Our nonce of the current connection's pairing proof.
    pub(super) auth_nonce: String,
    /// This connection proves a pairing link's code: the relay's bound
    /// nonce, to open the token it seals into its welcome.
    pub(super) redeeming: Option<String>,
    pub(super) next_nonce: u64,
    pub(super) grace_running: bool,
    /// The "Browser Relay" tab groups (see `groups.rs`).
    pub(super) groups: TabGroups,
    /// Who holds each shared tab, as the relay last said (`clients`).
    pub(super) clients: BTreeMap<TabId, Vec<ClientInfo>>,
    /// Tabs whose attach was running (the user's click, the relay's for a
    /// popup) when the user stopped sharing every tab: when it ends, it
    /// detaches instead of sharing.
    pub(super) withdrawn: BTreeSet<TabId>,
    /// The grants, whose each tab is, their windows and rules (see
    /// `grants.rs`).
    pub(super) grants: Grants,
    /// What the relay said of its grants, for the link being made or held:
    /// while it has some, the link is kept with nothing shared.
    pub(super) relay_grants: RelayGrants,
    /// The status probe awaiting its answer, and the next one's number.
    pub(super) probing: Option<u64>,
    pub(super) next_probe: u64,
    /// The probe in `probing` only asks the relay's versions (it refused
    /// our protocol): its answer connects nothing.
    pub(super) probing_versions: bool,
    /// What the relay last said of its version and protocols, for the
    /// options page (`versions.rs`).
    pub(super) relay_versions: Option<versions::RelayVersions>,
    /// The relay's questions and handoffs on the current link (see
    /// `person.rs`).
    pub(super) in_the_loop: InTheLoop,
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
            groups: TabGroups::default(),
            clients: BTreeMap::new(),
            withdrawn: BTreeSet::new(),
            grants: Grants::default(),
            relay_grants: RelayGrants::None,
            probing: None,
            next_probe: 1,
            probing_versions: false,
            relay_versions: None,
            in_the_loop: InTheLoop::default(),
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
                    how_many(self.grants.list.len())
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
        self.relay_grants = RelayGrants::None;
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
