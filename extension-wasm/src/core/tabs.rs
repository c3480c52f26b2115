//! The tabs: what is shared. The user's click and "Stop sharing", the
//! user's and the relay's attaches and detaches, the re-attach after Chrome
//! detached a tab, the tab events the relay hears of, and what a shared tab
//! shows and leaves for a restart (its badge, `chrome.storage.session`). Its
//! rules, with their tests, are in the core's module doc.

use shared_protocol::{ExtensionMessage, TabId, TabInfo};

use super::host::{ChromeCall, GroupId, Host, PersistedTab, Settings, Timer, tab_info_from_chrome};
use super::machine::{Core, Link, NOT_PAIRED, Purpose};
use super::policy::{self, Badge};

impl<H: Host> Core<H> {
    pub fn on_action_clicked(&mut self, tab: TabInfo) {
        if self.is_busy(tab.tab_id) {
            return;
        }
        if self.attached.contains_key(&tab.tab_id) {
            self.unshare(tab.tab_id, true);
        } else if self.settings.token.is_none() {
            // Storage is the truth, and `storage.onChanged` can reach the
            // worker after a click that follows the pairing at once (or
            // not at all, around the worker's start): read it, then decide.
            self.start_call(Purpose::PairingCheck(tab), ChromeCall::ReadPairing);
        } else {
            self.share_clicked(tab);
        }
    }

    /// The pairing storage holds, read for a click: share the tab if there
    /// is one.
    pub(super) fn on_pairing_read(&mut self, tab: TabInfo, outcome: Result<String, String>) {
        if let Some(stored) = outcome.ok().and_then(|json| serde_json::from_str::<Settings>(&json).ok()) {
            self.on_settings(stored);
        }
        if self.attached.contains_key(&tab.tab_id) {
            // Shared meanwhile (the group): the click asked for that.
            return;
        }
        if self.settings.token.is_none() {
            // Attaching would show the "being debugged" bar for nobody
            // (a pairing link's code is redeemed on its own, at once).
            self.badge(tab.tab_id, &Badge::Error(NOT_PAIRED.into()));
        } else {
            self.share_clicked(tab);
        }
    }

    /// A click on a tab that is not shared, with a pairing: attach.
    pub(super) fn share_clicked(&mut self, tab: TabInfo) {
        if policy::is_restricted(&tab.url) {
            self.badge(tab.tab_id, &Badge::Error(policy::restricted_reason(&tab.url)));
        } else {
            self.reattaching.remove(&tab.tab_id);
            self.badge(tab.tab_id, &Badge::Connecting);
            self.start_call(Purpose::UserAttach(tab.clone()), ChromeCall::DebuggerAttach { tab: tab.tab_id });
        }
    }

    /// "Stop sharing" on the options page: one tab, or (`None`) all.
    pub fn on_stop_sharing(&mut self, tab: Option<TabId>) {
        let tabs: Vec<TabId> = match tab {
            Some(tab) => vec![tab],
            None => self.attached.keys().copied().collect(),
        };
        for tab in tabs {
            self.unshare(tab, true);
        }
        if tab.is_none() {
            // Also the tabs being attached again or joining, and those the
            // user's click or the relay is attaching right now: they must
            // not become shared when their attach finishes.
            self.drop_pending_shares();
            self.withdraw_running_attaches();
            self.withdraw_new_grant_tabs();
            self.maybe_idle();
        }
    }

    /// The user's and the relay's attaches under way end in a detach
    /// ([`Core::withdrawn`]).
    fn withdraw_running_attaches(&mut self) {
        let running: Vec<TabId> = self
            .pending
            .values()
            .filter_map(|(purpose, _)| match purpose {
                Purpose::UserAttach(tab) | Purpose::RelayAttach(_, tab) => Some(tab.tab_id),
                Purpose::RelayAttachCheck(_, tab) => Some(*tab),
                _ => None,
            })
            .collect();
        for tab in running {
            self.withdrawn.insert(tab);
            self.badge(tab, &Badge::Off);
        }
    }

    /// An attach of `tab` ended after the user stopped sharing every tab:
    /// Chrome lets go of it again if it attached.
    pub(super) fn attach_withdrawn(&mut self, tab: TabId, attached: bool) {
        if attached {
            self.start_call(Purpose::Cleanup, ChromeCall::DebuggerDetach { tab });
        }
        self.badge(tab, &Badge::Off);
        self.maybe_idle();
    }

    /// [`Core::drop_pending_share`] for every tab being (re)attached.
    pub(super) fn drop_pending_shares(&mut self) {
        let pending: Vec<TabId> = self.reattaching.keys().chain(self.groups.joining.keys()).copied().collect();
        let mut dropped = false;
        for tab in pending {
            dropped |= self.drop_pending_share(tab);
        }
        if dropped {
            self.persist();
        }
    }

    /// Whether the user's attach or detach of `tab` is running (a second
    /// click meanwhile is ignored).
    pub(super) fn is_busy(&self, tab: TabId) -> bool {
        self.groups.joining.contains_key(&tab)
            || self.grants.opening.contains_key(&tab)
            || self.pending.values().any(|(p, _)| {
                matches!(p, Purpose::UserAttach(t) | Purpose::PairingCheck(t) | Purpose::UserDetach(t) | Purpose::GroupAttach(t) if t.tab_id == tab)
            })
    }

    /// The user stopped sharing `tab` (toolbar, group, options page, a
    /// restricted page): nothing reaches it from now on, the relay is told
    /// at once (its clients see the tab go), then Chrome detaches. `ungroup`:
    /// take it out of our group (not when the user already did).
    pub(super) fn unshare(&mut self, tab: TabId, ungroup: bool) {
        let Some(info) = self.attached.remove(&tab) else { return };
        let info = self.with_owner(info);
        if ungroup {
            self.leave_group(tab);
        } else {
            self.groups.forget(tab);
            self.disown(tab);
        }
        self.persist();
        self.badge(tab, &Badge::Off);
        if self.link == Link::Ready {
            self.send(&ExtensionMessage::UserToggledAttach { tab: info.clone(), attached: false });
        }
        self.start_call(Purpose::UserDetach(info), ChromeCall::DebuggerDetach { tab });
        self.maybe_idle();
    }

    /// The user shared `tab` (its debugger is attached): tell the relay, or
    /// connect (the hello carries it).
    pub(super) fn announce_share(&mut self, tab: TabInfo) {
        if self.link == Link::Ready {
            let tab = self.with_owner(tab);
            self.send(&ExtensionMessage::UserToggledAttach { tab, attached: true });
        } else {
            self.ensure_connected();
        }
    }

    /// A tab is shared: saved, badged, and put into our group.
    pub(super) fn add_attached(&mut self, tab: TabInfo) {
        let id = tab.tab_id;
        self.stop_awaiting(id);
        self.attached.insert(id, tab);
        self.persist();
        self.badge(id, &self.badge_for(id));
        self.group_tab(id);
    }

    pub(super) fn remove_attached(&mut self, tab: TabId) {
        self.attached.remove(&tab);
        self.leave_group(tab);
        self.persist();
        self.badge(tab, &Badge::Off);
    }

    /// The user's attach of `tab` ended: shared (the relay told), or the
    /// error on its badge.
    pub(super) fn on_user_attached(&mut self, tab: TabInfo, outcome: Result<String, String>) {
        match outcome {
            Ok(_) => {
                if !self.take_owner_of_share(&tab) {
                    return self.maybe_idle();
                }
                self.settle_joining(tab.tab_id, Ok(()));
                self.add_attached(tab.clone());
                self.announce_share(tab);
            }
            Err(e) => {
                self.settle_joining(tab.tab_id, Err(e.clone()));
                self.badge(tab.tab_id, &Badge::Error(e));
            }
        }
    }

    /// After Chrome detached a shared tab, the tab looked at: attach it
    /// again soon, unless it went to a restricted page or is gone.
    pub(super) fn on_reattach_looked_at(&mut self, tab_id: TabId, outcome: Result<String, String>) {
        match outcome.as_deref().map(tab_info_from_chrome) {
            Ok(Some(tab)) if policy::is_restricted(&tab.url) => {
                self.leave_group(tab_id);
                self.persist();
                self.badge(tab_id, &Badge::Error(policy::restricted_reason(&tab.url)));
                self.maybe_idle();
            }
            Ok(Some(tab)) => {
                self.reattaching.insert(tab_id, (0, tab));
                self.host.set_timer(Timer::Reattach(tab_id), policy::reattach_delay_ms(0));
            }
            // The tab is gone: tabs.onRemoved tells the relay.
            _ => {
                self.groups.forget(tab_id);
                self.disown(tab_id);
                self.maybe_idle();
            }
        }
    }

    /// A re-attach is due: try it, if the tab is still being re-attached.
    pub(super) fn on_reattach_timer(&mut self, tab: TabId) {
        if self.reattaching.contains_key(&tab) {
            self.start_call(Purpose::Reattach(tab), ChromeCall::DebuggerAttach { tab });
        }
    }

    /// A re-attach ended: shared again (the relay told), tried again after
    /// the backoff, or given up.
    pub(super) fn on_reattached(&mut self, tab_id: TabId, outcome: Result<String, String>) {
        let Some((tries, tab)) = self.reattaching.remove(&tab_id) else {
            // Sharing ended while Chrome attached it again.
            if outcome.is_ok() && !self.attached.contains_key(&tab_id) {
                self.start_call(Purpose::Cleanup, ChromeCall::DebuggerDetach { tab: tab_id });
            }
            return;
        };
        match outcome {
            Ok(_) => {
                self.add_attached(tab.clone());
                if self.link == Link::Ready {
                    let tab = self.with_owner(tab);
                    self.send(&ExtensionMessage::DebuggerReattached { tab });
                }
            }
            Err(_) if tries + 1 < policy::REATTACH_TRIES => {
                self.reattaching.insert(tab_id, (tries + 1, tab));
                self.host.set_timer(Timer::Reattach(tab_id), policy::reattach_delay_ms(tries + 1));
            }
            Err(e) => {
                let why = format!("lost this tab after it navigated ({e}): click to share it again");
                self.leave_group(tab_id);
                self.persist();
                self.badge(tab_id, &Badge::Error(why));
                self.maybe_idle();
            }
        }
    }

    pub fn on_debugger_detach(&mut self, tab: TabId, reason: &str) {
        if self.attached.remove(&tab).is_none() {
            // Cancelled while being attached again (the bar cancelled while
            // the worker was stopped, seen after it re-attached the tab):
            // the user's choice holds; the running attach detaches.
            if matches!(reason, "canceled_by_user" | "replaced_with_devtools") && self.drop_pending_share(tab) {
                self.persist();
                self.maybe_idle();
            }
            return;
        }
        self.persist();
        if self.link == Link::Ready {
            self.send(&ExtensionMessage::DebuggerDetached { tab_id: tab, reason: reason.to_string() });
        }
        match reason {
            // The user cancelled the infobar or opened DevTools: their choice.
            "canceled_by_user" | "replaced_with_devtools" => {
                self.leave_group(tab);
                self.persist();
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

    /// `chrome.tabs.onCreated`, with the group the tab was born in.
    pub fn on_tab_created(&mut self, tab: TabInfo, group: GroupId) {
        // A grant's tab opened it (a popup): it is the grant's, and its
        // cookie rules cover it before anything else, as its first request
        // may be on its way.
        if let Some(grant) = tab.opener_tab_id.and_then(|opener| self.owner(opener)).cloned() {
            self.set_owner(tab.tab_id, Some(grant));
            self.persist();
        }
        // Chrome opens a tab into the group of the tab it came from (a link
        // opened in a new tab, a popup): in our group, it is shared by us,
        // and the relay hears of it as of any share (its opener says whose).
        if self.groups.ours.contains_key(&group) {
            return self.join_from_group(tab, group);
        }
        // Otherwise only tabs opened by a shared tab concern the relay (it
        // decides whether to attach them); the user's other tabs stay
        // private.
        let from_shared = tab.opener_tab_id.is_some_and(|o| self.attached.contains_key(&o));
        if from_shared && self.link == Link::Ready {
            let tab = self.with_owner(tab);
            self.send(&ExtensionMessage::TabCreated { tab });
        }
    }

    pub fn on_tab_removed(&mut self, tab: TabId) {
        self.groups.forget(tab);
        let was_grants = self.owner(tab).is_some();
        self.forget_grant_tab(tab);
        self.host.cancel_timer(Timer::Regroup(tab));
        self.groups.joining.remove(&tab);
        let was_shared = self.attached.remove(&tab).is_some();
        let was_reattaching = self.reattaching.remove(&tab).is_some();
        if was_reattaching {
            self.host.cancel_timer(Timer::Reattach(tab));
        }
        if was_shared || was_reattaching || was_grants {
            self.persist();
            if self.link == Link::Ready {
                self.send(&ExtensionMessage::TabRemoved { tab_id: tab });
            }
            self.maybe_idle();
        }
    }

    pub fn on_tab_replaced(&mut self, added: TabId, removed: TabId) {
        self.groups.replace(added, removed);
        self.handoff_replaced(added, removed);
        if let Some(grant) = self.grants.tabs.remove(&removed) {
            self.set_owner(added, Some(grant));
        }
        if let Some(mut tab) = self.attached.remove(&removed) {
            tab.tab_id = added;
            self.attached.insert(added, tab);
            self.persist();
            if self.link == Link::Ready {
                self.send(&ExtensionMessage::TabReplaced { added_tab_id: added, removed_tab_id: removed });
            }
            self.badge(added, &self.badge_for(added));
        }
    }

    /// `chrome.tabs.onUpdated`. A shared tab that goes to a page Browser
    /// Relay never shares (R19) stops being shared.
    pub fn on_tab_updated(&mut self, tab: TabInfo) {
        if self.attached.contains_key(&tab.tab_id) && policy::is_restricted(&tab.url) {
            let id = tab.tab_id;
            self.unshare(id, true);
            self.badge(id, &Badge::Error(policy::restricted_reason(&tab.url)));
            return;
        }
        let Some(known) = self.attached.get_mut(&tab.tab_id) else { return };
        let changed = (known.url != tab.url && !tab.url.is_empty())
            || known.title != tab.title
            || known.fav_icon_url != tab.fav_icon_url;
        if !tab.url.is_empty() {
            known.url.clone_from(&tab.url);
        }
        known.title.clone_from(&tab.title);
        known.fav_icon_url.clone_from(&tab.fav_icon_url);
        known.window_id = tab.window_id.or(known.window_id);
        if changed && self.link == Link::Ready {
            let tab = known.clone();
            let tab = self.with_owner(tab);
            self.send(&ExtensionMessage::TabUpdated { tab });
        }
    }

    pub(super) fn persist(&mut self) {
        let shared: Vec<PersistedTab> = self
            .attached
            .keys()
            .map(|&tab_id| PersistedTab { tab_id, group_id: self.groups.members.get(&tab_id).copied() })
            .collect();
        let grants = self.grants.persisted();
        self.host.persist(&shared, &grants);
    }

    /// The badge every attached tab shows for the current link state.
    pub(super) fn tab_badge(&self) -> Badge {
        match (self.link, &self.last_error) {
            (Link::Ready, _) => Badge::On,
            (Link::Idle, Some(error)) => Badge::Error(error.clone()),
            _ => Badge::Connecting,
        }
    }

    pub(super) fn refresh_badges(&mut self) {
        let tabs: Vec<TabId> = self.attached.keys().copied().collect();
        for tab in tabs {
            self.badge(tab, &self.badge_for(tab));
        }
    }

    pub(super) fn badge(&mut self, tab: TabId, badge: &Badge) {
        let title = badge.title(self.settings.port);
        self.host.set_badge(tab, badge, &title);
    }
}
