//! What the core knows of the tab groups: ours, whose each is, the tabs
//! joining or leaving them (`groups.rs` keeps them).

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use shared_protocol::{TabId, TabInfo, WindowId};

use super::host::{GroupId, NO_TAB_GROUPS, Owner, StartFacts};

/// One of our groups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct OurGroup {
    pub(super) window: Option<WindowId>,
    pub(super) owner: Owner,
}

/// The group's name.
pub const GROUP_TITLE: &str = "Browser Relay";
/// The group's colour: Chrome's palette has no `#FF4500`; `orange` is
/// closest to the product's colour.
pub const GROUP_COLOR: &str = "orange";
/// A refused `tabs.group`/`tabs.ungroup` is tried again after 200 ms,
/// doubling up to 3.2 s, this many times.
pub(super) const REGROUP_TRIES: u32 = 5;
/// How long a moved group's tabs may be out of it (Chrome puts them back
/// within a few milliseconds; the margin is for a busy machine).
pub(super) const GROUP_MOVE_MS: u64 = 1000;

/// The wait before try `tries + 1` of a refused group call.
pub(super) fn regroup_delay_ms(tries: u32) -> u64 {
    200 << tries.min(4)
}

/// Whether Chrome's refusal of a group call is for now only: during a drag
/// or an animation ("Tabs cannot be edited right now (user may be dragging
/// a tab)"), or the group vanished under us ("No group with id: 7"). Any
/// other refusal ("does not support tab groups": a popup window) is final.
pub(super) fn refused_for_now(why: &str) -> bool {
    why.contains("cannot be edited right now") || why.contains("No group with id")
}

/// What a [`Timer::Regroup`](super::Timer::Regroup) tries again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Regroup {
    /// Put the (shared) tab into our group.
    Group,
    /// Take the (no longer shared) tab out of our group.
    Ungroup,
}

/// What the core knows of our groups.
#[derive(Debug)]
pub(super) struct TabGroups {
    /// `Some(why)`: no tab groups; sharing works with the badge alone.
    pub(super) unavailable: Option<String>,
    /// Our groups, their windows and owners.
    pub(super) ours: BTreeMap<GroupId, OurGroup>,
    /// Shared tabs that are in one of our groups.
    pub(super) members: BTreeMap<TabId, GroupId>,
    /// Windows whose group of an owner is being created, and the tabs
    /// waiting for it (so that two quick shares in one window make one
    /// group).
    pub(super) creating: BTreeMap<(WindowId, Owner), Vec<TabId>>,
    /// Tabs the user put into our group, being attached (by us, or by an
    /// attach already running for them).
    pub(super) joining: BTreeMap<TabId, (GroupId, TabInfo)>,
    /// Shared tabs Chrome would not group, and why.
    pub(super) outside: BTreeMap<TabId, String>,
    /// Tabs whose group call Chrome refused for now: the tries so far, and
    /// what is tried again when their [`Timer::Regroup`](super::Timer::Regroup) fires.
    pub(super) retrying: BTreeMap<TabId, (u32, Regroup)>,
    /// Our groups Chrome removed whose tabs may still be in them: a group
    /// dragged to another window is removed from the old one and created
    /// in the new one (`tabGroups.onCreated`), which is ours again (with
    /// the same owner).
    pub(super) vanished: Vec<(GroupId, Owner)>,
    /// Shared tabs taken out of a vanished group of ours: Chrome moves a
    /// group to another window by removing it, taking each tab out
    /// (`groupId` none), and putting it back into the group of the same id
    /// there. They stay shared until [`Timer::GroupMove`](super::Timer::GroupMove) fires; then those
    /// not back in a group of ours are unshared.
    pub(super) moving: BTreeSet<TabId>,
}

impl Default for TabGroups {
    fn default() -> Self {
        Self {
            unavailable: Some(NO_TAB_GROUPS.into()),
            ours: BTreeMap::new(),
            members: BTreeMap::new(),
            creating: BTreeMap::new(),
            joining: BTreeMap::new(),
            outside: BTreeMap::new(),
            retrying: BTreeMap::new(),
            vanished: Vec::new(),
            moving: BTreeSet::new(),
        }
    }
}

/// What [`Core::start`](super::Core::start) does, as decided by [`TabGroups::reconcile`].
#[derive(Debug, Default)]
pub(super) struct StartPlan {
    /// Shared, the debugger still attached.
    pub(super) shared: Vec<TabInfo>,
    /// In our group but no longer attached: attach again.
    pub(super) rejoin: Vec<(TabInfo, GroupId)>,
    /// Still attached, but taken out of the group while the worker was
    /// stopped: detach.
    pub(super) released: Vec<TabId>,
    /// Tabs of "Browser Relay" groups that are not ours: ungroup.
    pub(super) dissolve: Vec<TabId>,
}

impl TabGroups {
    /// Decides, at start-up, what is shared (see [`Core::start`](super::Core::start)).
    pub(super) fn reconcile(&mut self, facts: StartFacts) -> StartPlan {
        let StartFacts { persisted, debugger_attached, tabs, groups, grants, .. } = facts;
        // Whose each saved tab was: its group's owner.
        let owners: BTreeMap<TabId, String> = grants.tabs.iter().map(|t| (t.tab_id, t.grant.clone())).collect();
        let still: BTreeMap<TabId, TabInfo> = debugger_attached.into_iter().map(|t| (t.tab_id, t)).collect();
        let now: BTreeMap<TabId, TabInfo> = tabs.iter().map(|t| (t.info.tab_id, t.info.clone())).collect();
        // What Chrome says of the tab now, else what the debugger said.
        let info = |tab: TabId| now.get(&tab).or_else(|| still.get(&tab)).cloned();
        let mut plan = StartPlan::default();
        let groups = match groups {
            Ok(groups) => groups,
            Err(why) => {
                self.unavailable = Some(why);
                plan.shared =
                    persisted.iter().filter(|p| still.contains_key(&p.tab_id)).filter_map(|p| info(p.tab_id)).collect();
                return plan;
            }
        };
        self.unavailable = None;
        for saved in &persisted {
            let Some(group) = saved.group_id else { continue };
            if let Some(found) = groups.iter().find(|g| g.id == group) {
                let owner = owners.get(&saved.tab_id).cloned();
                self.ours.insert(group, OurGroup { window: found.window_id, owner });
            }
        }
        for tab in &tabs {
            let id = tab.info.tab_id;
            if self.ours.contains_key(&tab.group) {
                if still.contains_key(&id) {
                    self.members.insert(id, tab.group);
                    plan.shared.push(tab.info.clone());
                } else {
                    plan.rejoin.push((tab.info.clone(), tab.group));
                }
            } else if groups.iter().any(|g| g.id == tab.group && g.title.as_deref() == Some(GROUP_TITLE)) {
                plan.dissolve.push(id);
            }
        }
        for saved in &persisted {
            let id = saved.tab_id;
            if self.members.contains_key(&id) || !still.contains_key(&id) {
                continue;
            }
            match saved.group_id {
                // Never in a group (none in its window, or being grouped):
                // the saved list says it is shared; it is grouped again.
                None => plan.shared.extend(info(id)),
                Some(_) => plan.released.push(id),
            }
        }
        plan
    }

    /// A tab is gone or no longer shared: forget its membership (no call).
    pub(super) fn forget(&mut self, tab: TabId) {
        self.members.remove(&tab);
        self.outside.remove(&tab);
        self.retrying.remove(&tab);
        for waiting in self.creating.values_mut() {
            waiting.retain(|t| *t != tab);
        }
    }

    /// Chrome replaced a tab (prerendering): it keeps its place.
    pub(super) fn replace(&mut self, added: TabId, removed: TabId) {
        if let Some(group) = self.members.remove(&removed) {
            self.members.insert(added, group);
        }
        if let Some(why) = self.outside.remove(&removed) {
            self.outside.insert(added, why);
        }
    }

    /// `owner`'s group in `window`, if there is one.
    pub(super) fn in_window(&self, window: Option<WindowId>, owner: &Owner) -> Option<GroupId> {
        let window = window?;
        self.ours.iter().find(|(_, g)| g.window == Some(window) && g.owner == *owner).map(|(group, _)| *group)
    }

    /// Whose `group` is, if it is ours (or one of ours being moved to
    /// another window).
    pub(super) fn owner_of(&self, group: GroupId) -> Option<Owner> {
        if let Some(ours) = self.ours.get(&group) {
            return Some(ours.owner.clone());
        }
        self.vanished.iter().find(|(g, _)| *g == group).map(|(_, owner)| owner.clone())
    }

    /// A grant is gone: its groups are not ours any more (their tabs were
    /// unshared and taken out).
    pub(super) fn forget_owner(&mut self, grant: &str) {
        let theirs = |owner: &Owner| owner.as_deref() == Some(grant);
        self.ours.retain(|_, g| !theirs(&g.owner));
        self.creating.retain(|(_, owner), _| !theirs(owner));
        self.vanished.retain(|(_, owner)| !theirs(owner));
    }

    pub(super) fn status(&self) -> TabGroupsStatus {
        match &self.unavailable {
            None => TabGroupsStatus {
                available: true,
                detail: format!(
                    "shared tabs are in the orange \"{GROUP_TITLE}\" tab group of their window (a grant's in a group of its own)"
                ),
            },
            Some(why) => TabGroupsStatus {
                available: false,
                detail: format!("tab groups are not available ({why}): shared tabs are shown by the badge alone"),
            },
        }
    }
}

/// Whether shared tabs are shown as a tab group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TabGroupsStatus {
    pub available: bool,
    pub detail: String,
}
