//! Grants: a named, revocable key the person gives one agent (protocol 6).
//! The relay decides which grants exist, their colours and their sites
//! (`grants`); the extension keeps what only the browser can:
//!
//! - **whose each tab is**: a tab in a grant's tab group is shared with
//!   that grant (the groups are `groups.rs`'s, one per owner and window);
//!   a grant's tabs are also its popups and the tabs it opens. Every
//!   [`TabInfo`] of a shared tab the relay gets says its grant;
//! - **a window of each grant's own** for the tabs it opens, made
//!   unfocused, so a grant never takes the person's focus;
//! - **its cookie rules** (`rules.rs`): its tabs send the person's cookies
//!   to its own sites only, from their first request;
//! - **a menu item per grant** on the toolbar button: "Share this tab with
//!   NAME".
//!
//! A grant the relay no longer lists is gone: its groups are dissolved,
//! its tabs unshared, its rules and its menu item removed.
//!
//! **The link stays while the relay has grants**, shared tab or not: a
//! grant's agent opens its first tab through it. Whether there are any is
//! the relay's word: its `grants` notice, and, while the worker shares
//! nothing and holds no link, its public status route's count
//! ([`Core::probe_relay`], at the worker's start and on each alarm). A
//! relay that is not there is simply not there: nothing is retried before
//! the next alarm, nothing is shown.
//!
//! Tests: `tests_grants.rs`.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;
use shared_protocol::{CallId, ExtensionMessage, GrantGroup, TabId, TabInfo, WindowId};

use super::grant_record::{
    AWAIT_RELAY_ATTACH_MS, GrantStatus, NewTab, Opening, RelayGrants, menu_id, menu_title, window_from_chrome,
};
use super::host::{ChromeCall, Host, Timer, tab_info_from_chrome};
use super::machine::{Core, Link, Purpose, SHARING_STOPPED};
use super::op_id::OpId;
use super::policy::Badge;
use super::rules::{self, RulesState};
use super::versions::RelayVersions;

impl<H: Host> Core<H> {
    /// The grant `tab` is shared with (or joins, or is opened for).
    pub(super) fn owner(&self, tab: TabId) -> Option<&String> {
        self.grants.tabs.get(&tab)
    }

    /// `tab` as the relay hears of it: with its grant.
    pub(super) fn with_owner(&self, mut tab: TabInfo) -> TabInfo {
        tab.grant = self.owner(tab.tab_id).cloned();
        tab
    }

    /// `tab` is `owner`'s (`None`: the person's): its cookie rules follow
    /// at once.
    pub(super) fn set_owner(&mut self, tab: TabId, owner: Option<String>) {
        // A handoff to the person is its grant's: another owner ends it.
        self.handoff_owner_changed(tab, owner.as_deref());
        let changed = match owner {
            Some(grant) => self.grants.tabs.insert(tab, grant.clone()).as_ref() != Some(&grant),
            None => self.grants.tabs.remove(&tab).is_some(),
        };
        if changed {
            self.sync_rules();
        }
    }

    /// `tab` is nobody's grant's any more (unshared, closed).
    pub(super) fn disown(&mut self, tab: TabId) {
        self.set_owner(tab, None);
    }

    /// A shared tab changed hands (into another owner's group, or shared
    /// with a grant from the menu): the relay hears it before anything
    /// else of the tab's.
    pub(super) fn change_owner(&mut self, tab: TabId, owner: Option<String>) {
        if self.owner(tab) == owner.as_ref() {
            return;
        }
        if self.link == Link::Ready {
            self.send(&ExtensionMessage::TabGrant { tab_id: tab, grant: owner.clone() });
        }
        self.set_owner(tab, owner);
        self.persist();
    }

    /// The session rules every grant's tabs call for, applied if they
    /// changed (one `updateSessionRules`, Chrome's answer by
    /// [`Core::on_rules_done`]).
    pub(super) fn sync_rules(&mut self) {
        let mut wanted = BTreeMap::new();
        for grant in self.grants.list.clone() {
            let tabs: Vec<TabId> =
                self.grants.tabs.iter().filter(|(_, g)| **g == grant.name).map(|(&tab, _)| tab).collect();
            let slot = self.grants.rules.slot(&grant.name);
            wanted.insert(grant.name.clone(), rules::compose(slot, &grant, &tabs));
        }
        let Some(update) = self.grants.rules.update(&wanted) else { return };
        let call = ChromeCall::UpdateSessionRules { remove: update.remove.clone(), add: update.add.clone() };
        let op = self.start_call(Purpose::Rules(update.grants.clone()), call);
        self.grants.rules.sent(op, &update);
    }

    pub(super) fn on_rules_done(&mut self, op: OpId, grants: &[String], outcome: Result<String, String>) {
        self.grants.rules.done(op, grants, outcome.map(drop));
        let waiting: Vec<TabId> = self.grants.opening.keys().copied().collect();
        for tab in waiting {
            self.advance_opening(tab);
        }
    }

    /// The relay's list of grants (protocol 6): every grant, each time.
    pub(super) fn on_grants(&mut self, mut list: Vec<GrantGroup>) {
        if list.is_empty() && self.grants.list.is_empty() {
            return;
        }
        let mut seen = BTreeSet::new();
        list.retain(|g| seen.insert(g.name.clone()));
        let old = std::mem::replace(&mut self.grants.list, list);
        let gone: Vec<String> =
            old.iter().filter(|g| self.grants.get(&g.name).is_none()).map(|g| g.name.clone()).collect();
        for gone in gone {
            self.revoke(&gone);
            self.start_call(Purpose::Cleanup, ChromeCall::MenusRemove { id: menu_id(&gone) });
        }
        let rebuilt = !self.grants.menus_made;
        if rebuilt {
            self.rebuild_menus();
        }
        for grant in self.grants.list.clone() {
            match old.iter().find(|g| g.name == grant.name) {
                None if !rebuilt => self.add_menu(&grant.name),
                Some(was) if was.color != grant.color => self.restyle_groups_of(&grant.name),
                _ => {}
            }
        }
        self.sync_rules();
        self.persist();
    }

    fn add_menu(&mut self, grant: &str) {
        let call = ChromeCall::MenusCreate { id: menu_id(grant), title: menu_title(grant) };
        self.start_call(Purpose::Cleanup, call);
    }

    /// The menu items an earlier run made go, and one per grant is made:
    /// at the worker's start (for the grants it saved) or, with none saved,
    /// at the relay's first list.
    pub(super) fn rebuild_menus(&mut self) {
        self.start_call(Purpose::Cleanup, ChromeCall::MenusRemoveAll);
        for grant in self.grants.list.clone() {
            self.add_menu(&grant.name);
        }
        self.handoff_menus_again();
        self.grants.menus_made = true;
    }

    /// A grant the relay no longer lists: its tabs unshared, its groups
    /// dissolved, its window forgotten (its rules go with the next
    /// [`Core::sync_rules`]).
    fn revoke(&mut self, grant: &str) {
        let tabs: Vec<TabId> = self.grants.tabs.iter().filter(|(_, g)| *g == grant).map(|(&t, _)| t).collect();
        for tab in tabs {
            if let Some(opening) = self.grants.opening.remove(&tab) {
                let current = opening.generation == self.link_generation;
                self.reply(current, opening.new.call, Err(format!("the grant {grant} was revoked")));
            }
            if self.grants.awaiting.remove(&tab).is_some() {
                self.host.cancel_timer(Timer::GrantTab(tab));
            }
            if self.attached.contains_key(&tab) {
                self.unshare(tab, true);
            } else if !self.drop_pending_share(tab) && self.groups.members.contains_key(&tab) {
                self.leave_group(tab);
            }
            self.disown(tab);
        }
        self.groups.forget_owner(grant);
        self.grants.windows.remove(grant);
    }

    /// A grant's colour changed: its groups take it.
    fn restyle_groups_of(&mut self, grant: &str) {
        let groups: Vec<_> =
            self.groups.ours.iter().filter(|(_, g)| g.owner.as_deref() == Some(grant)).map(|(&id, _)| id).collect();
        for group in groups {
            self.style_group(group);
        }
    }

    /// "Share this tab with NAME" on the toolbar button's menu: the tab is
    /// shared with that grant (a shared tab changes hands), into its group
    /// in the tab's window.
    pub fn on_menu_clicked(&mut self, grant: &str, mut tab: TabInfo) {
        if self.grants.get(grant).is_none() || self.is_busy(tab.tab_id) {
            return;
        }
        let id = tab.tab_id;
        if self.attached.contains_key(&id) {
            if self.owner(id).map(String::as_str) == Some(grant) {
                return;
            }
            self.change_owner(id, Some(grant.to_string()));
            // Out of the group it is in (no longer counted its member, so
            // its leaving unshares nothing) and into the grant's.
            if self.groups.members.remove(&id).is_some() || self.groups.outside.remove(&id).is_some() {
                self.persist();
            }
            return self.group_tab(id);
        }
        tab.grant = Some(grant.to_string());
        if self.settings.token.is_none() {
            self.start_call(Purpose::PairingCheck(tab), ChromeCall::ReadPairing);
        } else {
            self.share_clicked(tab);
        }
    }

    /// The user's attach of `tab` succeeded: a share from a grant's menu
    /// item makes it the grant's; whether it may be shared (a grant revoked
    /// meanwhile: no, it is let go).
    pub(super) fn take_owner_of_share(&mut self, tab: &TabInfo) -> bool {
        match &tab.grant {
            None => true,
            Some(grant) if self.grants.get(grant).is_some() => {
                self.set_owner(tab.tab_id, Some(grant.clone()));
                true
            }
            Some(_) => {
                self.start_call(Purpose::Cleanup, ChromeCall::DebuggerDetach { tab: tab.tab_id });
                self.badge(tab.tab_id, &Badge::Off);
                false
            }
        }
    }

    /// `chrome.windows.onRemoved`: a grant's window that closed is never
    /// used again.
    pub fn on_window_removed(&mut self, window: WindowId) {
        let before = self.grants.windows.len();
        self.grants.windows.retain(|_, w| *w != window);
        if self.grants.windows.len() != before {
            self.persist();
        }
    }

    // ---- a grant's new tab ---------------------------------------------------

    /// The relay's `tabs.create` for `grant`: in the grant's window (made,
    /// unfocused, for its first tab), never taking the person's focus.
    pub(super) fn create_grant_tab(&mut self, call: CallId, url: Option<String>, grant: String) {
        let Some(found) = self.grants.get(&grant) else {
            return self.reply(true, call, Err(format!("no grant named {grant:?}")));
        };
        let url = url.filter(|u| !u.is_empty()).unwrap_or_else(|| "about:blank".into());
        let blank_first = !found.sites.is_empty() && url != "about:blank";
        self.open_grant_tab(NewTab { call, grant, url, blank_first });
    }

    /// Opens `new` in its grant's window, or a new one.
    fn open_grant_tab(&mut self, new: NewTab) {
        let url = Some(if new.blank_first { "about:blank".to_string() } else { new.url.clone() });
        match self.grants.windows.get(&new.grant).copied() {
            Some(window) => {
                let call = ChromeCall::TabsCreate { url, active: true, opener: None, window: Some(window) };
                self.start_call(Purpose::GrantTab(new, window), call);
            }
            None => {
                self.start_call(Purpose::GrantWindow(new), ChromeCall::WindowsCreate { url, focused: false });
            }
        }
    }

    /// `windows.create` for a grant's first tab answered.
    pub(super) fn on_grant_window(&mut self, new: NewTab, generation: u64, outcome: Result<String, String>) {
        match outcome.and_then(|json| window_from_chrome(&json).ok_or_else(|| "Chrome made no window".into())) {
            Ok(tab) => {
                if let Some(window) = tab.window_id
                    && self.grants.get(&new.grant).is_some()
                {
                    self.grants.windows.insert(new.grant.clone(), window);
                }
                self.begin_opening(new, generation, tab);
            }
            Err(why) => self.reply(generation == self.link_generation, new.call, Err(why)),
        }
    }

    /// `tabs.create` in a grant's window answered; a window that is gone
    /// is forgotten and a new one made.
    pub(super) fn on_grant_tab(
        &mut self,
        new: NewTab,
        window: WindowId,
        generation: u64,
        outcome: Result<String, String>,
    ) {
        match outcome.map(|json| tab_info_from_chrome(&json)) {
            Ok(Some(tab)) => self.begin_opening(new, generation, tab),
            _ => {
                if self.grants.windows.get(&new.grant) == Some(&window) {
                    self.grants.windows.remove(&new.grant);
                    self.persist();
                }
                if generation == self.link_generation {
                    self.open_grant_tab(new);
                }
            }
        }
    }

    /// Chrome made a grant's new tab: it is the grant's (its rules at
    /// once), goes into the grant's group, and is answered once both hold.
    fn begin_opening(&mut self, new: NewTab, generation: u64, mut info: TabInfo) {
        let id = info.tab_id;
        if self.grants.get(&new.grant).is_none() {
            let why = format!("the grant {} was revoked", new.grant);
            return self.reply(generation == self.link_generation, new.call, Err(why));
        }
        info.grant = Some(new.grant.clone());
        self.set_owner(id, Some(new.grant.clone()));
        let grouped = self.groups.unavailable.is_some();
        self.grants.opening.insert(id, Opening { new, generation, info, grouped, navigating: false });
        self.persist();
        self.group_tab(id);
        self.advance_opening(id);
    }

    /// A grant's new tab was put into its group, or cannot be.
    pub(super) fn opening_grouped(&mut self, tab: TabId) {
        if let Some(opening) = self.grants.opening.get_mut(&tab) {
            opening.grouped = true;
            self.advance_opening(tab);
        }
    }

    /// Once a grant's new tab is grouped and (a grant with sites) its rules
    /// are in force: sent to its URL, then the relay is answered.
    fn advance_opening(&mut self, tab: TabId) {
        let Some(opening) = self.grants.opening.get(&tab) else { return };
        if !opening.grouped || opening.navigating {
            return;
        }
        if opening.new.blank_first {
            match self.grants.rules.state(&opening.new.grant) {
                Some(RulesState::InForce) => {}
                Some(RulesState::Pending(_)) => return,
                Some(RulesState::Failed(why)) => {
                    let why = format!("the grant's cookie rules could not be applied ({why}): the tab was left blank");
                    return self.answer_opening(tab, Err(why));
                }
                None => return self.answer_opening(tab, Err("the grant's cookie rules are missing".into())),
            }
            let url = opening.new.url.clone();
            if let Some(opening) = self.grants.opening.get_mut(&tab) {
                opening.navigating = true;
            }
            let call = ChromeCall::TabsUpdate { tab, url: Some(url), active: None };
            self.start_call(Purpose::OpeningNavigate(tab), call);
        } else {
            let info = opening.info.clone();
            self.answer_opening(tab, Ok(info));
        }
    }

    /// A grant's new tab was sent to its URL.
    pub(super) fn on_opening_navigated(&mut self, tab: TabId, outcome: Result<String, String>) {
        let Some(opening) = self.grants.opening.get(&tab) else { return };
        let info = outcome.and_then(|json| tab_info_from_chrome(&json).ok_or_else(|| "Chrome returned no tab".into()));
        // (Its title is still the blank page's.)
        let info = info.map(|fresh| TabInfo {
            window_id: fresh.window_id.or(opening.info.window_id),
            title: String::new(),
            ..fresh
        });
        self.answer_opening(tab, info);
    }

    /// Answers the relay's `tabs.create` for a grant's new tab: the tab
    /// (its grant, the URL asked for), then the relay's own attach is
    /// awaited; or why not (the tab stays blank, and the grant's).
    fn answer_opening(&mut self, tab: TabId, outcome: Result<TabInfo, String>) {
        let Some(opening) = self.grants.opening.remove(&tab) else { return };
        let current = opening.generation == self.link_generation;
        match outcome {
            Ok(mut info) => {
                info.grant = Some(opening.new.grant.clone());
                info.url = opening.new.url.clone();
                info.opener_tab_id = None;
                self.grants.awaiting.insert(tab, info.clone());
                self.host.set_timer(Timer::GrantTab(tab), AWAIT_RELAY_ATTACH_MS);
                let json = serde_json::to_string(&info).expect("TabInfo serialises");
                self.reply(current, opening.new.call, Ok(json));
            }
            Err(why) => {
                if self.groups.joining.remove(&tab).is_some() || self.groups.members.contains_key(&tab) {
                    self.groups.forget(tab);
                    self.ungroup(tab);
                }
                self.reply(current, opening.new.call, Err(why));
            }
        }
    }

    /// The relay did not attach a grant's new tab in time (it went away):
    /// in the grant's group, it is shared by the extension, as any tab put
    /// there.
    pub(super) fn on_grant_tab_timer(&mut self, tab: TabId) {
        if self.grants.awaiting.remove(&tab).is_some() && !self.attach_running(tab) {
            self.resume_joining(tab);
        }
        self.maybe_idle();
    }

    /// "Stop sharing" for every tab: a grant's new tabs being made are not
    /// answered with a tab, and those awaiting the relay's attach leave the
    /// grant's group (the relay's attach, if it comes, is the relay's).
    pub(super) fn withdraw_new_grant_tabs(&mut self) {
        let opening: Vec<TabId> = self.grants.opening.keys().copied().collect();
        for tab in opening {
            self.answer_opening(tab, Err(SHARING_STOPPED.into()));
        }
        let awaiting: Vec<TabId> = self.grants.awaiting.keys().copied().collect();
        for tab in awaiting {
            self.stop_awaiting(tab);
            if !self.drop_pending_share(tab) && self.groups.members.contains_key(&tab) {
                self.leave_group(tab);
            }
        }
    }

    /// A new tab of a grant's was shared (the relay attached it): no longer
    /// awaited.
    pub(super) fn stop_awaiting(&mut self, tab: TabId) {
        if self.grants.awaiting.remove(&tab).is_some() {
            self.host.cancel_timer(Timer::GrantTab(tab));
        }
    }

    /// A tab closed: it is nobody's, and a new tab of a grant's being made
    /// is answered.
    pub(super) fn forget_grant_tab(&mut self, tab: TabId) {
        if self.grants.opening.contains_key(&tab) {
            self.answer_opening(tab, Err("the tab was closed".into()));
        }
        self.stop_awaiting(tab);
        self.disown(tab);
    }

    // ---- the link, for the grants -----------------------------------------------

    /// The relay's `grants` notice: whether it has any is its word on
    /// keeping the link; none left, and nothing shared, it goes.
    pub(super) fn on_grants_notice(&mut self, list: Vec<GrantGroup>) {
        self.relay_grants = if list.is_empty() { RelayGrants::None } else { RelayGrants::Listed };
        self.on_grants(list);
        self.maybe_idle();
    }

    /// A link made for the grants the status route counted, welcomed, and
    /// no `grants` notice by the next watch (a relay of protocol 6 sends it
    /// right after its welcome): as if it listed none. Whether the link
    /// went.
    pub(super) fn grants_unlisted(&mut self) -> bool {
        if self.link != Link::Ready || self.relay_grants != RelayGrants::Counted {
            return false;
        }
        self.relay_grants = RelayGrants::None;
        self.maybe_idle();
        self.link == Link::Idle
    }

    /// Paired, sharing nothing and holding no link: asks the relay's status
    /// route whether it has grants (their agents would need the link). One
    /// probe at a time; the host always answers (a fetch has a deadline).
    pub(super) fn probe_relay(&mut self) {
        let idle = self.link == Link::Idle && self.attached.is_empty() && self.reattaching.is_empty();
        // A pairing link's code connects on its own.
        let paired = self.settings.token.is_some() && self.settings.pairing_code.is_none();
        if !idle || !paired || self.probing.is_some() {
            return;
        }
        let probe = self.next_probe;
        self.next_probe += 1;
        self.probing = Some(probe);
        self.host.ask_relay_status(probe, self.settings.port);
    }

    /// The relay refused our protocol: its status route says its version
    /// and protocols, for the options page. One probe at a time.
    pub(super) fn ask_relay_versions(&mut self) {
        if self.probing.is_some() {
            return;
        }
        let probe = self.next_probe;
        self.next_probe += 1;
        self.probing = Some(probe);
        self.probing_versions = true;
        self.host.ask_relay_status(probe, self.settings.dial_port());
    }

    /// The relay's status route answered `probe` (its JSON body), or did
    /// not: grants counted, and no other browser's extension holding the
    /// relay (it takes one at a time), make the worker connect, and the
    /// link is kept for them. No relay there, or one older than grants (it
    /// counts none): nothing happens and nothing is shown; the next alarm
    /// asks again.
    pub fn on_relay_status(&mut self, probe: u64, outcome: Result<String, String>) {
        if self.probing != Some(probe) {
            return;
        }
        self.probing = None;
        // What the relay says of itself, for the options page (a relay
        // older than that says nothing: what we knew stays).
        if let Some(versions) = outcome.as_deref().ok().and_then(RelayVersions::from_status) {
            self.relay_versions = Some(versions);
        }
        // A probe for the versions alone (the relay refused our protocol)
        // connects nothing: it would only be refused again.
        if std::mem::take(&mut self.probing_versions) {
            return;
        }
        let paired = self.settings.token.is_some() && self.settings.pairing_code.is_none();
        // Shared or connecting meanwhile: the link's own rules hold.
        if self.link != Link::Idle || !self.attached.is_empty() || !paired {
            return;
        }
        #[derive(Deserialize)]
        struct RelayStatus {
            #[serde(default)]
            connected: bool,
            #[serde(default)]
            grants: u64,
        }
        let Some(status) = outcome.ok().and_then(|body| serde_json::from_str::<RelayStatus>(&body).ok()) else {
            return;
        };
        if status.grants == 0 || status.connected {
            return;
        }
        self.relay_grants = RelayGrants::Counted;
        self.ensure_connected();
    }

    // ---- the options page --------------------------------------------------------

    pub(super) fn grants_status(&self) -> Vec<GrantStatus> {
        self.grants
            .list
            .iter()
            .map(|grant| {
                let tabs = self.grants.tabs.values().filter(|g| **g == grant.name).count();
                let (rules, rules_error) = match self.grants.rules.state(&grant.name) {
                    _ if grant.sites.is_empty() => ("every site", None),
                    Some(RulesState::Failed(why)) => ("failed", Some(why.clone())),
                    _ if tabs == 0 => ("no tabs", None),
                    Some(RulesState::InForce) => ("in force", None),
                    Some(RulesState::Pending(_)) | None => ("applying", None),
                };
                GrantStatus {
                    name: grant.name.clone(),
                    color: grant.color.clone(),
                    sites: grant.sites.len(),
                    tabs,
                    rules,
                    rules_error,
                }
            })
            .collect()
    }

    /// Whether an attach of `tab` is running (the user's, the relay's, or
    /// one from the group): another would collide.
    pub(super) fn attach_running(&self, tab: TabId) -> bool {
        self.pending.values().any(|(p, _)| match p {
            Purpose::UserAttach(t) | Purpose::RelayAttach(_, t) | Purpose::GroupAttach(t) => t.tab_id == tab,
            Purpose::RelayAttachCheck(_, t) => *t == tab,
            _ => false,
        })
    }
}
