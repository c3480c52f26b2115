//! The tab groups that hold the shared tabs: one per owner and window. The
//! owner is the person (the orange "Browser Relay" group) or a grant
//! (titled with its name, in its colour: `grants.rs`). They are the access
//! list the user sees and edits:
//!
//! - sharing a tab (the toolbar, a popup or `createTarget` tab of a shared
//!   tab) puts it into its window's group, created on first use;
//! - a tab the user drags into the group is shared (if it may be: R19, R26;
//!   otherwise it is put back out and its badge says why), with the
//!   group's owner;
//! - a shared tab moved from one of our groups into another of ours with
//!   another owner stays shared and changes hands (`tab.grant`);
//! - a tab that leaves the group (dragged out, into another group or
//!   window, "Ungroup", the group closed) stops being shared at once, by
//!   its own event (the group's removal alone unshares nothing: dragging
//!   the whole group to another window removes and re-creates it there);
//! - stopping by any other way (the toolbar, the options page, a restricted
//!   page, the relay gone for the grace period, the debugging bar
//!   cancelled) takes the tab out of the group.
//!
//! Where the browser has no tab groups (or refuses them), sharing works as
//! before, with the badge alone. A group or ungroup call Chrome refuses
//! for now (during a drag: "cannot be edited right now"; a vanished group)
//! is tried again after a short wait ([`Timer::Regroup`]); a tab Chrome
//! will not group at all (a popup window cannot hold groups) stays shared
//! outside the group, and the options page says why. Tests:
//! `tests_groups.rs`.

use shared_protocol::{TabId, TabInfo, WindowId};

use super::host::{ChromeCall, GroupId, GroupInfo, Host, NO_GROUP, Owner, Timer, group_from_chrome};
use super::machine::{Core, NOT_PAIRED, Purpose};
use super::policy::{self, Badge};
use super::tab_groups::{
    GROUP_COLOR, GROUP_MOVE_MS, GROUP_TITLE, OurGroup, REGROUP_TRIES, Regroup, refused_for_now, regroup_delay_ms,
};

impl<H: Host> Core<H> {
    /// Puts a shared tab (or a grant's new tab) into its owner's group of
    /// its window (creating it).
    pub(super) fn group_tab(&mut self, tab: TabId) {
        let groups = &self.groups;
        if groups.unavailable.is_some() || groups.members.contains_key(&tab) || groups.outside.contains_key(&tab) {
            return;
        }
        let place = match self.attached.get(&tab) {
            Some(shared) => Some((shared.window_id, self.owner(tab).cloned())),
            None => self.grants.new_tab_place(tab).map(|(window, grant)| (window, Some(grant))),
        };
        let Some((window, owner)) = place else { return };
        if let Some(group) = self.groups.in_window(window, &owner) {
            let call = ChromeCall::TabsGroup { tabs: vec![tab], group: Some(group) };
            self.start_call(Purpose::GroupJoin(tab, group), call);
            return;
        }
        if let Some(waiting) = window.and_then(|w| self.groups.creating.get_mut(&(w, owner.clone()))) {
            waiting.push(tab);
            return;
        }
        if let Some(window) = window {
            self.groups.creating.insert((window, owner.clone()), Vec::new());
        }
        let call = ChromeCall::TabsGroup { tabs: vec![tab], group: None };
        self.start_call(Purpose::GroupCreate(tab, window, owner), call);
    }

    /// Whether `tab` belongs in one of our groups: shared, or a grant's new
    /// tab.
    fn wants_group(&self, tab: TabId) -> bool {
        self.attached.contains_key(&tab) || self.grants.awaits_relay(tab)
    }

    /// Names and colours one of our groups as its owner's.
    pub(super) fn style_group(&mut self, group: GroupId) {
        let Some(ours) = self.groups.ours.get(&group) else { return };
        let (title, color) = self.group_style(group, &ours.owner);
        self.start_call(Purpose::GroupStyle(group), ChromeCall::TabGroupsUpdate { group, title, color });
    }

    /// The title and colour of `owner`'s groups.
    fn style_of(&self, owner: &Owner) -> (String, String) {
        match owner.as_deref().and_then(|name| self.grants.get(name)) {
            Some(grant) => (grant.name.clone(), grant.color.clone()),
            None => (GROUP_TITLE.into(), GROUP_COLOR.into()),
        }
    }

    /// The title and colour `owner`'s group `group` shows: its owner's,
    /// but while a tab in it is handed to the person, "GRANT needs you:
    /// REASON" (`person.rs`). Either is ours: the group stays its owner's.
    fn group_style(&self, group: GroupId, owner: &Owner) -> (String, String) {
        let (title, color) = self.style_of(owner);
        (self.handoff_title_of(group).unwrap_or(title), color)
    }

    /// At the worker's start: each of our groups that does not show its
    /// style (a handoff's title, which ended with the earlier run's link;
    /// renamed while the worker was stopped) is styled again.
    pub(super) fn restyle_found(&mut self, found: &[GroupInfo]) {
        for group in found {
            let Some(ours) = self.groups.ours.get(&group.id) else { continue };
            let (title, color) = self.group_style(group.id, &ours.owner);
            if group.title.as_deref() != Some(title.as_str()) || group.color.as_deref() != Some(color.as_str()) {
                self.style_group(group.id);
            }
        }
    }

    /// Takes a tab out of our group (the caller saves the state): it is
    /// nobody's grant's any more.
    pub(super) fn leave_group(&mut self, tab: TabId) {
        let member = self.groups.members.contains_key(&tab);
        self.groups.forget(tab);
        self.disown(tab);
        if member {
            self.ungroup(tab);
        }
    }

    /// Takes `tab` out of whatever group it is in (a tab that is not
    /// shared never stays in ours).
    pub(super) fn ungroup(&mut self, tab: TabId) {
        self.start_call(Purpose::Ungroup(tab), ChromeCall::TabsUngroup { tabs: vec![tab] });
    }

    /// Chrome refused to group or ungroup `tab` (`why`): if only for now,
    /// try again after a while (whether it will).
    fn retry_later(&mut self, tab: TabId, what: Regroup, why: &str) -> bool {
        let tries = match self.groups.retrying.get(&tab) {
            Some((tries, was)) if *was == what => *tries,
            _ => 0,
        };
        if !refused_for_now(why) || tries >= REGROUP_TRIES {
            self.groups.retrying.remove(&tab);
            return false;
        }
        self.groups.retrying.insert(tab, (tries + 1, what));
        self.host.set_timer(Timer::Regroup(tab), regroup_delay_ms(tries));
        true
    }

    pub(super) fn on_ungrouped(&mut self, tab: TabId, outcome: Result<String, String>) {
        match outcome {
            Ok(_) => {
                if matches!(self.groups.retrying.get(&tab), Some((_, Regroup::Ungroup))) {
                    self.groups.retrying.remove(&tab);
                }
            }
            Err(why) => {
                self.retry_later(tab, Regroup::Ungroup, &why);
            }
        }
    }

    /// A refused group call's wait is over: decided again from what holds
    /// now (the tab may have been unshared, shared again or closed).
    pub(super) fn on_regroup_timer(&mut self, tab: TabId) {
        let Some(&(_, what)) = self.groups.retrying.get(&tab) else { return };
        if self.wants_group(tab) && !self.groups.joining.contains_key(&tab) {
            if what == Regroup::Ungroup {
                self.groups.retrying.remove(&tab);
            }
            // (Into the group of its window now, a new one if ours vanished.)
            self.group_tab(tab);
        } else if self.groups.joining.contains_key(&tab) {
            // Put back into the group by the user: its attach settles it.
            self.groups.retrying.remove(&tab);
        } else if what == Regroup::Ungroup {
            self.ungroup(tab);
        } else {
            // Unshared before it could be grouped: nothing to undo.
            self.groups.retrying.remove(&tab);
        }
    }

    /// The user put `tab` into our group `group`: share it with the group's
    /// owner, if it may be. A grant's new tab put there by us waits for the
    /// relay's own attach instead.
    pub(super) fn join_from_group(&mut self, tab: TabInfo, group: GroupId) {
        let id = tab.tab_id;
        let refusal = if self.settings.token.is_none() {
            Some(NOT_PAIRED.to_string())
        } else if policy::is_restricted(&tab.url) {
            Some(policy::restricted_reason(&tab.url))
        } else {
            None
        };
        if let Some(why) = refusal {
            // The group holds shared tabs only: out it goes, and the badge
            // says why.
            self.ungroup(id);
            return self.badge(id, &Badge::Error(why));
        }
        if self.attached.contains_key(&id) || self.groups.joining.contains_key(&id) {
            return;
        }
        // Its cookie rules before anything else: it may be loading.
        let owner = self.groups.owner_of(group).flatten();
        self.set_owner(id, owner);
        self.groups.joining.insert(id, (group, tab.clone()));
        if self.reattaching.remove(&id).is_some() {
            self.host.cancel_timer(Timer::Reattach(id));
        }
        self.badge(id, &Badge::Connecting);
        if !self.attach_running(id) && !self.grants.awaits_relay(id) {
            // (Otherwise the attach already running settles it: see
            // `settle_joining`; two attaches of one tab would collide.)
            self.start_call(Purpose::GroupAttach(tab), ChromeCall::DebuggerAttach { tab: id });
        }
    }

    /// Another attach of a tab waiting in `joining` finished: on success it
    /// is a member of the group it was put into; on failure it goes out
    /// again.
    pub(super) fn settle_joining(&mut self, tab: TabId, outcome: Result<(), String>) {
        let Some((group, _)) = self.groups.joining.remove(&tab) else { return };
        match outcome {
            Ok(()) => {
                self.groups.members.insert(tab, group);
            }
            Err(why) => {
                self.disown(tab);
                self.ungroup(tab);
                self.badge(tab, &Badge::Error(why));
            }
        }
    }

    /// Sharing `tab` ended before its (re)attach finished (stop all, the
    /// grace period, the debugging bar cancelled): it leaves `joining` and
    /// `reattaching` and our group, and the running attach, when it
    /// finishes, detaches instead of sharing. Whether it was pending.
    pub(super) fn drop_pending_share(&mut self, tab: TabId) -> bool {
        let reattaching = self.reattaching.remove(&tab).is_some();
        if reattaching {
            self.host.cancel_timer(Timer::Reattach(tab));
        }
        let joining = self.groups.joining.remove(&tab).is_some();
        if !reattaching && !joining {
            return false;
        }
        let member = self.groups.members.contains_key(&tab);
        self.groups.forget(tab);
        self.disown(tab);
        if member || joining {
            self.ungroup(tab);
        }
        self.badge(tab, &Badge::Off);
        true
    }

    /// The relay that was attaching a tab waiting in `joining` went away:
    /// we attach it ourselves.
    pub(super) fn resume_joining(&mut self, tab: TabId) {
        if let Some((_, info)) = self.groups.joining.get(&tab) {
            let info = info.clone();
            self.start_call(Purpose::GroupAttach(info), ChromeCall::DebuggerAttach { tab });
        }
    }

    pub(super) fn on_group_attach_done(&mut self, tab: TabInfo, outcome: Result<String, String>) {
        let id = tab.tab_id;
        let group = self.groups.joining.remove(&id).map(|(group, _)| group);
        match (outcome, group) {
            (Ok(_), Some(group)) => {
                self.groups.members.insert(id, group);
                self.add_attached(tab.clone());
                self.announce_share(tab);
            }
            // Shared meanwhile by another attach (the relay's, for a popup):
            // Chrome refused the second; the tab is shared and in the group.
            (Err(_), group) if self.attached.contains_key(&id) => {
                if let Some(group) = group {
                    self.groups.members.insert(id, group);
                    self.persist();
                }
            }
            // It left the group while Chrome attached it.
            (Ok(_), None) => {
                self.start_call(Purpose::Cleanup, ChromeCall::DebuggerDetach { tab: id });
                self.badge(id, &Badge::Off);
                self.maybe_idle();
            }
            (Err(why), group) => {
                if group.is_some() {
                    self.disown(id);
                    self.ungroup(id);
                }
                self.badge(id, &Badge::Error(why));
                self.maybe_idle();
            }
        }
    }

    pub(super) fn on_group_created(
        &mut self,
        tab: TabId,
        window: Option<WindowId>,
        owner: Owner,
        outcome: Result<String, String>,
    ) {
        let waiting = window.and_then(|w| self.groups.creating.remove(&(w, owner.clone()))).unwrap_or_default();
        let created =
            outcome.and_then(|json| json.trim().parse::<GroupId>().map_err(|_| "Chrome made no group".into()));
        match created {
            // Its grant was revoked meanwhile: not a group of ours.
            Ok(_) if owner.as_deref().is_some_and(|grant| self.grants.get(grant).is_none()) => self.ungroup(tab),
            Ok(group) => {
                self.groups.ours.insert(group, OurGroup { window, owner });
                self.style_group(group);
                self.settle_member(tab, group);
            }
            Err(why) => self.group_refused(tab, why),
        }
        for tab in waiting {
            self.group_tab(tab);
        }
    }

    pub(super) fn on_group_joined(&mut self, tab: TabId, group: GroupId, outcome: Result<String, String>) {
        match outcome {
            Ok(_) => self.settle_member(tab, group),
            Err(why) => {
                if why.contains("No group with id") {
                    // Gone under us (closed, or moved to another window):
                    // the next try makes a new group in the tab's window.
                    self.groups.ours.remove(&group);
                }
                self.group_refused(tab, why);
            }
        }
    }

    /// Chrome would not group shared `tab`: later, if only for now; else it
    /// stays shared outside the group, and the options page says why.
    fn group_refused(&mut self, tab: TabId, why: String) {
        if !self.wants_group(tab) {
            self.groups.retrying.remove(&tab);
            return;
        }
        if !self.retry_later(tab, Regroup::Group, &why) {
            self.groups.outside.insert(tab, why);
            self.opening_grouped(tab);
        }
    }

    /// Chrome put `tab` into our `group`: a member if still shared, else
    /// (unshared meanwhile) out again.
    fn settle_member(&mut self, tab: TabId, group: GroupId) {
        self.groups.retrying.remove(&tab);
        if self.attached.contains_key(&tab) {
            self.groups.outside.remove(&tab);
            self.groups.members.insert(tab, group);
            self.persist();
            // Handed to the person before it was in the group.
            if self.in_the_loop.handoffs.contains_key(&tab) {
                self.title_handoff_group(tab);
            }
        } else if let Some(info) = self.grants.awaits_relay(tab).then(|| self.grants.new_tab_info(tab)).flatten() {
            // A grant's new tab: in its group, the relay's attach to come.
            self.groups.joining.entry(tab).or_insert((group, info));
            self.opening_grouped(tab);
        } else {
            self.ungroup(tab);
        }
    }

    pub(super) fn on_group_styled(&mut self, group: GroupId, outcome: Result<String, String>) {
        if let Some(info) = outcome.ok().as_deref().and_then(group_from_chrome)
            && let Some(ours) = self.groups.ours.get_mut(&group)
        {
            ours.window = info.window_id;
        }
    }

    /// `chrome.tabs.onUpdated` with a new `groupId` ([`NO_GROUP`]: none).
    pub fn on_tab_group_changed(&mut self, tab: TabInfo, group: GroupId) {
        let id = tab.tab_id;
        // A group of ours being moved to another window is still ours: the
        // tab names it before Chrome says it was created there.
        let owner = self.groups.owner_of(group);
        let ours = owner.is_some();
        if ours {
            self.groups.moving.remove(&id);
        }
        // A refused call tried again is moot once the tab is where it was
        // meant to be.
        if let Some((_, what)) = self.groups.retrying.get(&id)
            && (*what == Regroup::Group) == ours
        {
            self.groups.retrying.remove(&id);
            self.host.cancel_timer(Timer::Regroup(id));
        }
        if self.attached.contains_key(&id) {
            if let Some(owner) = owner {
                // Into another owner's group: it changes hands, and the
                // relay hears it first.
                self.change_owner(id, owner);
                if self.groups.members.insert(id, group) != Some(group) {
                    self.groups.outside.remove(&id);
                    self.persist();
                    // A handoff's title goes with its tab (its group moved
                    // to another window, or the tab to another of its
                    // grant's groups).
                    self.title_handoff_group(id);
                }
            } else if group == NO_GROUP
                && self.groups.members.get(&id).is_some_and(|g| self.groups.vanished.iter().any(|(v, _)| v == g))
            {
                // Its group was removed first: a move to another window,
                // which puts it back into the same group in a moment.
                self.groups.moving.insert(id);
                self.host.set_timer(Timer::GroupMove, GROUP_MOVE_MS);
            } else if self.groups.members.contains_key(&id) {
                // Dragged out (or into another group or window): unshared.
                self.unshare(id, false);
            }
            // Else not grouped yet (our call is running) or not groupable.
            return;
        }
        if let Some((joins, _)) = self.groups.joining.get_mut(&id) {
            match owner {
                // Into another of ours: it joins that one, with its owner.
                Some(owner) => {
                    *joins = group;
                    self.set_owner(id, owner);
                }
                // Out again before Chrome attached it (see on_group_attach_done).
                None => {
                    self.groups.joining.remove(&id);
                    if !self.grants.awaits_relay(id) {
                        self.disown(id);
                    }
                }
            }
            return;
        }
        if self.reattaching.contains_key(&id) && !ours && self.groups.members.contains_key(&id) {
            // Out of the group while we were re-attaching it: stop.
            self.reattaching.remove(&id);
            self.host.cancel_timer(Timer::Reattach(id));
            self.groups.forget(id);
            self.disown(id);
            self.persist();
            self.badge(id, &Badge::Off);
            return self.maybe_idle();
        }
        if ours {
            self.join_from_group(tab, group);
        }
    }

    /// `chrome.tabGroups.onRemoved`: by itself it unshares nothing. Closing
    /// or ungrouping our group sends each tab's own event (closed, or its
    /// group none), which does; dragging it to another window removes it
    /// here and creates it there ([`Core::on_group_appeared`]), its tabs
    /// still shared.
    pub fn on_group_removed(&mut self, group: GroupId) {
        if let Some(ours) = self.groups.ours.remove(&group) {
            self.groups.vanished.push((group, ours.owner));
        }
    }

    /// [`Timer::GroupMove`]: tabs of a moved group that are not back in a
    /// group of ours by now were taken out for good: unshared.
    pub(super) fn on_group_move_done(&mut self) {
        for tab in std::mem::take(&mut self.groups.moving) {
            if self.attached.contains_key(&tab) {
                self.unshare(tab, false);
            }
        }
    }

    /// `chrome.tabGroups.onCreated`: our group dragged to another window
    /// (the same id, or a new one with its owner's name) is ours again; its
    /// tabs' `onUpdated` then name it as their group.
    pub fn on_group_appeared(&mut self, group: GroupInfo) {
        let vanished = &self.groups.vanished;
        let moved = vanished.iter().position(|(g, _)| *g == group.id).or_else(|| {
            let title = group.title.as_deref()?;
            vanished.iter().position(|(g, owner)| self.group_style(*g, owner).0 == title)
        });
        if let Some(at) = moved {
            let (was, owner) = self.groups.vanished.remove(at);
            self.groups.ours.insert(group.id, OurGroup { window: group.window_id, owner });
            self.handoff_group_moved(was, group.id);
            self.on_group_updated(group);
        }
    }

    /// `chrome.tabGroups.onUpdated`/`onMoved`: our group keeps its name and
    /// colour (they are how the user recognises the access list), and we
    /// follow it to another window.
    pub fn on_group_updated(&mut self, group: GroupInfo) {
        let Some(ours) = self.groups.ours.get_mut(&group.id) else { return };
        if group.window_id.is_some() {
            ours.window = group.window_id;
        }
        let owner = ours.owner.clone();
        let (title, color) = self.group_style(group.id, &owner);
        if group.title.as_deref() != Some(title.as_str()) || group.color.as_deref() != Some(color.as_str()) {
            self.style_group(group.id);
        }
    }
}
