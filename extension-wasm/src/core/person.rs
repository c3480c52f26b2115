//! The person in the loop (protocol 7): the relay's questions and a grant's
//! handoffs, shown in the browser. The relay decides what to ask, when, and
//! when a handoff is over; the extension shows them and reports the
//! person's clicks, nothing more:
//!
//! - **a question** (`ask`) is a notification with Allow and Deny
//!   (`ask-ID`); a click answers the relay (`ask.answer`) and clears it.
//!   Closing it answers nothing (the relay's other surfaces and its
//!   deadline decide). `ask.closed` clears it, and so does the link going
//!   (the relay fails a question whose link went);
//! - **a handoff** (`handoff`) of a tab shared with that grant brings the
//!   tab to the front, titles its group "GRANT needs you: REASON" (the
//!   group stays the grant's, in its colour), badges the tab `?`, and
//!   offers Done in a notification (`handoff-TAB`) and in the toolbar
//!   button's menu (`handoff:TAB`); Done sends `handoff.done`. The relay's
//!   `handoff.end` puts the group's name and the badge back and takes the
//!   notification and the menu item away; so does the tab no longer being
//!   the grant's (unshared, closed, moved to another owner's group) and
//!   the link going: the relay re-sends nothing, so what the extension
//!   shows lasts only as long as the link that brought it. A worker
//!   restart is such an end: its start names each group after its owner
//!   again ([`Core::start`]) and clears what notifications are left.
//!
//! Tests: `tests_person.rs`.

use shared_protocol::{ExtensionMessage, TabId};

use super::host::{ChromeCall, GroupId, Host, tab_info_from_chrome};
use super::in_the_loop::{
    ASK_BUTTONS, ASK_PREFIX, HANDOFF_PREFIX, Handoff, ask_notification, cut, done_menu, handoff_notification,
};
use super::machine::{Core, Link, Purpose};
use super::policy::Badge;

impl<H: Host> Core<H> {
    // ---- questions -----------------------------------------------------------

    /// The relay's `ask`: a notification with Allow and Deny.
    pub(super) fn on_ask(&mut self, id: u64, title: String, message: String) {
        self.in_the_loop.asks.insert(id);
        let buttons = ASK_BUTTONS.iter().map(|(label, _)| label.to_string()).collect();
        let call = ChromeCall::NotificationsCreate { id: ask_notification(id), title, message, buttons };
        self.start_call(Purpose::Cleanup, call);
    }

    /// The relay's `ask.closed`: answered elsewhere, or timed out.
    pub(super) fn on_ask_closed(&mut self, id: u64) {
        if self.in_the_loop.asks.remove(&id) {
            self.clear_notification(ask_notification(id));
        }
    }

    fn clear_notification(&mut self, id: String) {
        self.start_call(Purpose::Cleanup, ChromeCall::NotificationsClear { id });
    }

    /// `chrome.notifications.onButtonClicked`: Allow or Deny of a
    /// question, Done of a handoff. A notification the core does not know
    /// (a question whose link went, one an earlier run of the worker left)
    /// is cleared and answers nothing.
    pub fn on_notification_button(&mut self, notification: &str, button: u32) {
        if let Some(id) = notification.strip_prefix(ASK_PREFIX).and_then(|id| id.parse::<u64>().ok()) {
            let Some(&(_, answer)) = ASK_BUTTONS.get(button as usize) else { return };
            if self.link == Link::Ready && self.in_the_loop.asks.remove(&id) {
                self.send(&ExtensionMessage::AskAnswer { id, answer });
            }
            return self.clear_notification(notification.to_string());
        }
        if notification.starts_with(HANDOFF_PREFIX) {
            let tab = self.in_the_loop.handoffs.iter().find(|(_, h)| h.notification == notification).map(|(&t, _)| t);
            match tab {
                Some(tab) => self.give_back(tab),
                None => self.clear_notification(notification.to_string()),
            }
        }
    }

    // ---- handoffs ------------------------------------------------------------

    /// The relay's `handoff`: a tab shared with `grant` is the person's to
    /// use until the relay's `handoff.end`. Another again (a new reason)
    /// updates what is shown.
    pub(super) fn on_handoff(&mut self, tab: TabId, grant: String, reason: String) {
        let whose = match (self.attached.contains_key(&tab), self.owner(tab)) {
            (true, Some(owner)) if *owner == grant => None,
            (true, Some(owner)) => Some(format!("shared with {owner}")),
            (true, None) => Some("shared with the person".to_string()),
            (false, _) => Some("not shared".to_string()),
        };
        if let Some(whose) = whose {
            let why = format!("a handoff of tab {tab} for {grant} was ignored: the tab is {whose}");
            return self.host.log(&why);
        }
        let order = self.in_the_loop.next_order;
        self.in_the_loop.next_order += 1;
        let fresh = !self.in_the_loop.handoffs.contains_key(&tab);
        let titled = self.in_the_loop.handoffs.get(&tab).and_then(|h| h.titled);
        let handoff =
            Handoff { grant, reason, notification: handoff_notification(tab), menu: done_menu(tab), titled, order };
        let what = handoff.what();
        let notification = ChromeCall::NotificationsCreate {
            id: handoff.notification.clone(),
            title: format!("{} needs you", handoff.grant),
            message: if handoff.reason.trim().is_empty() {
                "It handed you this tab: give it back with Done.".into()
            } else {
                handoff.reason.clone()
            },
            buttons: vec!["Done".into()],
        };
        let menu = handoff.done_item();
        self.in_the_loop.handoffs.insert(tab, handoff);
        // To the front: the tab in its window, then the window.
        let front = ChromeCall::TabsUpdate { tab, url: None, active: Some(true) };
        self.start_call(Purpose::HandoffFront(tab), front);
        self.title_handoff_group(tab);
        self.badge(tab, &Badge::Handoff(what));
        self.start_call(Purpose::Cleanup, notification);
        if fresh {
            self.start_call(Purpose::Cleanup, menu);
        }
    }

    /// Names the group `tab` is in after its handoff (and the group it was
    /// in before after its owner).
    pub(super) fn title_handoff_group(&mut self, tab: TabId) {
        let member = self.groups.members.get(&tab).copied();
        let Some(handoff) = self.in_the_loop.handoffs.get_mut(&tab) else { return };
        let before = std::mem::replace(&mut handoff.titled, member);
        if let Some(group) = before.filter(|g| Some(*g) != member) {
            self.style_group(group);
        }
        if let Some(group) = member {
            self.style_group(group);
        }
    }

    /// The tab handed over is in front: its window too.
    pub(super) fn on_handoff_front(&mut self, tab: TabId, outcome: Result<String, String>) {
        let window = outcome.ok().as_deref().and_then(tab_info_from_chrome).and_then(|t| t.window_id);
        let window = window.or_else(|| self.attached.get(&tab).and_then(|t| t.window_id));
        if let Some(window) = window {
            self.start_call(Purpose::Cleanup, ChromeCall::WindowsUpdate { window, focused: Some(true) });
        }
    }

    /// "Done: give the tab back" on the toolbar button's menu: the item
    /// of tab `item` (as the relay named it when the handoff began). An
    /// item the core does not know (left by an earlier link or run) is
    /// removed and says nothing.
    pub fn on_done_clicked(&mut self, item: TabId) {
        let id = done_menu(item);
        match self.in_the_loop.handoffs.iter().find(|(_, h)| h.menu == id).map(|(&t, _)| t) {
            Some(tab) => self.give_back(tab),
            None => {
                self.start_call(Purpose::Cleanup, ChromeCall::MenusRemove { id });
            }
        }
    }

    /// Done (the notification's button, the menu item): the relay hears
    /// it and ends the handoff (`handoff.end`); until then it is shown.
    fn give_back(&mut self, tab: TabId) {
        if self.link == Link::Ready {
            self.send(&ExtensionMessage::HandoffDone { tab_id: tab });
        }
    }

    /// A handoff is over (the relay's `handoff.end`, or see
    /// [`Core::link_left_the_loop`], [`Core::handoff_owner_changed`]): the
    /// group's name, the badge, no notification, no menu item.
    pub(super) fn end_handoff(&mut self, tab: TabId) {
        let Some(handoff) = self.in_the_loop.handoffs.remove(&tab) else { return };
        self.clear_notification(handoff.notification);
        self.start_call(Purpose::Cleanup, ChromeCall::MenusRemove { id: handoff.menu });
        let member = self.groups.members.get(&tab).copied();
        for group in [handoff.titled, member.filter(|m| Some(*m) != handoff.titled)].into_iter().flatten() {
            self.style_group(group);
        }
        if self.attached.contains_key(&tab) {
            self.badge(tab, &self.badge_for(tab));
        }
    }

    /// `tab`'s owner is now `owner`: a handoff to another owner's is over.
    pub(super) fn handoff_owner_changed(&mut self, tab: TabId, owner: Option<&str>) {
        if self.in_the_loop.handoffs.get(&tab).is_some_and(|h| Some(h.grant.as_str()) != owner) {
            self.end_handoff(tab);
        }
    }

    /// Chrome replaced a tab (prerendering): its handoff goes with it.
    pub(super) fn handoff_replaced(&mut self, added: TabId, removed: TabId) {
        if let Some(handoff) = self.in_the_loop.handoffs.remove(&removed) {
            self.in_the_loop.handoffs.insert(added, handoff);
        }
    }

    /// The menu item of each handoff, made again after the menu was
    /// emptied.
    pub(super) fn handoff_menus_again(&mut self) {
        let menus: Vec<ChromeCall> = self.in_the_loop.handoffs.values().map(Handoff::done_item).collect();
        for menu in menus {
            self.start_call(Purpose::Cleanup, menu);
        }
    }

    /// The link leaves `Ready`: every question's notification goes, and
    /// every handoff ends here; the relay shows what still waits again
    /// when the tab is announced on a new link (`ask`, `handoff`).
    pub(super) fn link_left_the_loop(&mut self) {
        for id in std::mem::take(&mut self.in_the_loop.asks) {
            self.clear_notification(ask_notification(id));
        }
        let tabs: Vec<TabId> = self.in_the_loop.handoffs.keys().copied().collect();
        for tab in tabs {
            self.end_handoff(tab);
        }
    }

    /// The worker's start: notifications an earlier run left (its link
    /// went with it) are cleared.
    pub(super) fn clear_leftover_notifications(&mut self, shown: Vec<String>) {
        for id in shown {
            if id.starts_with(ASK_PREFIX) || id.starts_with(HANDOFF_PREFIX) {
                self.clear_notification(id);
            }
        }
    }

    /// Our group `was`, titled for a handoff, was dragged to another
    /// window, where it is `now` (its tabs say so one by one after).
    pub(super) fn handoff_group_moved(&mut self, was: GroupId, now: GroupId) {
        for handoff in self.in_the_loop.handoffs.values_mut() {
            if handoff.titled == Some(was) {
                handoff.titled = Some(now);
            }
        }
    }

    /// The title a group of ours shows while a tab in it (or on its way
    /// with it to another window) is handed over: the latest handoff's.
    pub(super) fn handoff_title_of(&self, group: GroupId) -> Option<String> {
        self.in_the_loop
            .handoffs
            .iter()
            .filter(|(tab, h)| self.groups.members.get(tab) == Some(&group) || h.titled == Some(group))
            .max_by_key(|(_, h)| h.order)
            .map(|(_, h)| cut(&h.what()))
    }

    /// The badge `tab` shows while shared: `?` during its handoff.
    pub(super) fn badge_for(&self, tab: TabId) -> Badge {
        match self.in_the_loop.handoffs.get(&tab) {
            Some(handoff) if self.link == Link::Ready => Badge::Handoff(handoff.what()),
            _ => self.tab_badge(),
        }
    }

    /// What the options page says of a shared tab handed over.
    pub(super) fn handoff_status(&self, tab: TabId) -> Option<String> {
        self.in_the_loop.handoffs.get(&tab).map(Handoff::what)
    }
}
