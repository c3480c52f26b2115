//! The "Browser Relay" tab group (`groups.rs`), driven with the recording
//! host of `tests.rs`.

use serde_json::json;
use shared_protocol::{TabId, TabInfo};

use super::tests::{FakeHost, TOKEN, chrome_tab, environment, still_attached, tab};
use super::*;

pub(super) const G: GroupId = 77;

/// A paired extension in a browser with tab groups (none yet).
pub(super) fn paired_with_groups() -> Core<FakeHost> {
    let mut core = Core::new(FakeHost::default());
    let facts = StartFacts { groups: Ok(vec![]), ..StartFacts::default() };
    core.start(
        Settings { port: 18792, token: Some(TOKEN.into()), pairing_code: None, pairing_port: None },
        environment(),
        facts,
    );
    core
}

pub(super) fn in_window(id: TabId, url: &str, window: i64) -> TabInfo {
    TabInfo { window_id: Some(window), ..tab(id, url) }
}

impl Core<FakeHost> {
    /// The op of the last call equal to `call`.
    pub(super) fn op_of(&self, call: &ChromeCall) -> OpId {
        self.host
            .calls
            .iter()
            .rev()
            .find(|(_, c)| c == call)
            .map(|(op, _)| *op)
            .unwrap_or_else(|| panic!("no call {call:?} in {:#?}", self.host.calls))
    }

    pub(super) fn made(&self, call: &ChromeCall) -> bool {
        self.host.calls.iter().any(|(_, c)| c == call)
    }

    pub(super) fn calls_since(&self, from: usize) -> Vec<ChromeCall> {
        self.host.calls[from..].iter().map(|(_, c)| c.clone()).collect()
    }

    /// Chrome makes group `group` for the new-group call of `tab`.
    pub(super) fn group_made(&mut self, tab: TabId, group: GroupId) {
        let op = self.op_of(&ChromeCall::TabsGroup { tabs: vec![tab], group: None });
        self.on_op_done(op, Ok(group.to_string()));
    }

    /// Chrome put `tab` into our existing `group`.
    pub(super) fn group_joined(&mut self, tab: TabId, group: GroupId) {
        let op = self.op_of(&ChromeCall::TabsGroup { tabs: vec![tab], group: Some(group) });
        self.on_op_done(op, Ok(group.to_string()));
    }

    /// A shared tab 5 in group `G` (window 1), connected.
    pub(super) fn sharing_in_group(&mut self, id: TabId) {
        self.share(id);
        self.group_made(id, G);
    }

    pub(super) fn toggled(&self) -> Vec<(TabId, bool)> {
        self.sent_json()
            .iter()
            .filter_map(|f| {
                let t = f.get("user.toggledAttach")?;
                Some((t["tab"]["tabId"].as_i64()?, t["attached"].as_bool()?))
            })
            .collect()
    }
}

#[test]
fn a_click_shares_the_tab_into_an_orange_browser_relay_group_and_a_second_click_takes_it_out() {
    let mut core = paired_with_groups();
    core.share(5);
    assert!(core.made(&ChromeCall::TabsGroup { tabs: vec![5], group: None }), "a new group in its window");
    core.group_made(5, G);
    assert!(core.made(&ChromeCall::TabGroupsUpdate {
        group: G,
        title: "Browser Relay".into(),
        color: "orange".into()
    }));
    assert_eq!(core.host.saved, vec![PersistedTab { tab_id: 5, group_id: Some(G) }], "saved with its group");
    let status = core.status();
    assert!(status.tab_groups.available, "{status:?}");
    assert!(status.tabs[0].in_group);
    assert_eq!(core.host.badges[&5], Badge::On, "the group and the badge agree");

    // A second tab of the window joins the same group.
    core.share(6);
    core.group_joined(6, G);
    assert_eq!(core.host.saved.len(), 2);

    // The second click: the relay hears it at once, then the tab leaves
    // the group and Chrome detaches.
    let calls = core.host.calls.len();
    core.on_action_clicked(tab(5, "https://example.com/"));
    assert_eq!(core.toggled().last(), Some(&(5, false)));
    let made = core.calls_since(calls);
    assert!(made.contains(&ChromeCall::TabsUngroup { tabs: vec![5] }), "{made:?}");
    assert!(made.contains(&ChromeCall::DebuggerDetach { tab: 5 }), "{made:?}");
    assert_eq!(core.host.badges[&5], Badge::Off);
    assert_eq!(core.attached(), vec![6]);
    // From that moment no command reaches it.
    let calls = core.host.calls.len();
    core.relay(json!({"debugger.sendCommand": {"id": 9, "tabId": 5, "method": "Runtime.evaluate"}}));
    assert_eq!(core.host.calls.len(), calls);
    assert!(core.last_sent()["reply"]["error"]["message"].as_str().unwrap().contains("not shared"));
}

#[test]
fn two_quick_shares_in_one_window_make_one_group() {
    let mut core = paired_with_groups();
    core.share(5);
    core.share(6);
    let new_groups = core.host.calls.iter().filter(|(_, c)| matches!(c, ChromeCall::TabsGroup { group: None, .. }));
    assert_eq!(new_groups.count(), 1, "the second waits for the first's group");
    core.group_made(5, G);
    core.group_joined(6, G);
    let status = core.status();
    assert!(status.tabs.iter().all(|t| t.in_group), "{status:?}");
    // Another window gets a group of its own.
    core.on_action_clicked(in_window(8, "https://example.net/", 2));
    let (op, _) = core.last_call();
    core.on_op_done(op, Ok("null".into()));
    assert!(core.made(&ChromeCall::TabsGroup { tabs: vec![8], group: None }));
}

#[test]
fn dragging_a_tab_into_the_group_shares_it() {
    let mut core = paired_with_groups();
    core.sharing_in_group(5);
    let calls = core.host.calls.len();
    core.on_tab_group_changed(tab(9, "https://example.org/"), G);
    assert_eq!(core.host.badges[&9], Badge::Connecting, "feedback at once");
    assert_eq!(core.calls_since(calls), vec![ChromeCall::DebuggerAttach { tab: 9 }]);
    let op = core.op_of(&ChromeCall::DebuggerAttach { tab: 9 });
    core.on_op_done(op, Ok("null".into()));
    assert_eq!(core.toggled().last(), Some(&(9, true)), "the relay announces it to its clients");
    assert_eq!(core.host.badges[&9], Badge::On);
    assert_eq!(core.attached(), vec![5, 9]);
    assert!(!core.made(&ChromeCall::TabsGroup { tabs: vec![9], group: Some(G) }), "already in the group");
    assert!(core.host.saved.contains(&PersistedTab { tab_id: 9, group_id: Some(G) }));
    // Our own grouping's events change nothing.
    let sent = core.host.sent.len();
    core.on_tab_group_changed(tab(9, "https://example.org/"), G);
    assert_eq!(core.host.sent.len(), sent);
}

#[test]
fn dragging_a_tab_out_of_the_group_unshares_it_at_once() {
    for elsewhere in [NO_GROUP, 99] {
        let mut core = paired_with_groups();
        core.sharing_in_group(5);
        core.relay(json!({"debugger.sendCommand": {"id": 3, "tabId": 5, "method": "Runtime.evaluate"}}));
        let calls = core.host.calls.len();
        // Out of the group, or into a group of the user's.
        core.on_tab_group_changed(tab(5, "https://example.com/"), elsewhere);
        assert_eq!(core.toggled().last(), Some(&(5, false)), "the relay hears it before Chrome detaches");
        assert_eq!(core.calls_since(calls), vec![ChromeCall::DebuggerDetach { tab: 5 }], "not ungrouped: it left");
        assert_eq!(core.host.badges[&5], Badge::Off);
        assert!(core.host.saved.is_empty());
        let calls = core.host.calls.len();
        core.relay(json!({"debugger.sendCommand": {"id": 4, "tabId": 5, "method": "Runtime.evaluate"}}));
        assert_eq!(core.host.calls.len(), calls, "no command reaches a tab outside the group");
        assert_eq!(core.host.disconnects, 1, "nothing shared: the worker may sleep");
    }
}

#[test]
fn a_tab_dragged_in_and_out_before_chrome_attached_it_is_not_shared() {
    let mut core = paired_with_groups();
    core.sharing_in_group(5);
    core.on_tab_group_changed(tab(9, "https://example.org/"), G);
    core.on_tab_action_click_ignored_while_joining();
    core.on_tab_group_changed(tab(9, "https://example.org/"), NO_GROUP);
    let op = core.op_of(&ChromeCall::DebuggerAttach { tab: 9 });
    core.on_op_done(op, Ok("null".into()));
    assert_eq!(core.attached(), vec![5]);
    assert_eq!(core.last_call().1, ChromeCall::DebuggerDetach { tab: 9 });
    assert_eq!(core.host.badges[&9], Badge::Off);
    assert!(!core.toggled().contains(&(9, true)), "the relay never heard of it");
}

impl Core<FakeHost> {
    /// A click on tab 9 while its attach from the group runs does nothing.
    fn on_tab_action_click_ignored_while_joining(&mut self) {
        let calls = self.host.calls.len();
        self.on_action_clicked(tab(9, "https://example.org/"));
        assert_eq!(self.host.calls.len(), calls);
    }
}

#[test]
fn restricted_pages_and_an_unpaired_extension_never_join_the_group() {
    let mut core = paired_with_groups();
    core.sharing_in_group(5);
    for url in ["chrome://settings/", "https://chromewebstore.google.com/detail/x", "devtools://devtools/x"] {
        let calls = core.host.calls.len();
        core.on_tab_group_changed(tab(9, url), G);
        assert_eq!(core.calls_since(calls), vec![ChromeCall::TabsUngroup { tabs: vec![9] }], "{url}: put back out");
        assert!(matches!(&core.host.badges[&9], Badge::Error(why) if why.contains("cannot share")), "{url}");
    }
    // A shared tab that goes to such a page stops being shared and leaves.
    let calls = core.host.calls.len();
    core.on_tab_updated(tab(5, "chrome://settings/"));
    assert!(core.calls_since(calls).contains(&ChromeCall::TabsUngroup { tabs: vec![5] }));
    assert_eq!(core.toggled().last(), Some(&(5, false)));
    assert!(matches!(&core.host.badges[&5], Badge::Error(why) if why.contains("cannot share")));

    // Unpaired (the token was removed while a tab was shared).
    let mut core = paired_with_groups();
    core.sharing_in_group(5);
    core.on_settings(Settings { port: 18792, token: None, pairing_code: None, pairing_port: None });
    core.on_tab_group_changed(tab(9, "https://example.org/"), G);
    assert_eq!(core.last_call().1, ChromeCall::TabsUngroup { tabs: vec![9] });
    assert!(matches!(&core.host.badges[&9], Badge::Error(why) if why.contains("browser-relay pair")));
}

#[test]
fn closing_or_ungrouping_the_group_unshares_all_of_it() {
    let mut core = paired_with_groups();
    core.sharing_in_group(5);
    core.share(6);
    core.group_joined(6, G);
    // "Ungroup": each tab's group becomes none, then the group goes.
    core.on_tab_group_changed(tab(5, "https://example.com/"), NO_GROUP);
    core.on_tab_group_changed(tab(6, "https://example.com/"), NO_GROUP);
    core.on_group_removed(G);
    assert_eq!(core.toggled()[core.toggled().len() - 2..], [(5, false), (6, false)]);
    assert!(core.attached().is_empty());

    // "Close group": the tabs close, then the group goes.
    let mut core = paired_with_groups();
    core.sharing_in_group(5);
    core.share(6);
    core.group_joined(6, G);
    core.on_tab_removed(5);
    assert_eq!(core.last_sent(), json!({"tabs.onRemoved": {"tabId": 5}}));
    core.on_tab_removed(6);
    core.on_group_removed(G);
    assert!(core.attached().is_empty());
    assert!(!core.made(&ChromeCall::TabsUngroup { tabs: vec![6] }), "nothing to ungroup: the group is gone");
}

#[test]
fn popups_and_created_tabs_join_the_group_and_a_popup_window_keeps_its_tab_outside() {
    let mut core = paired_with_groups();
    core.sharing_in_group(5);
    // The relay attaches a popup of tab 5 (same window): it joins.
    core.relay(json!({"debugger.attach": {"id": 4, "tabId": 6}}));
    let (op, _) = core.last_call();
    core.on_op_done(op, Ok(chrome_tab(6, "https://example.com/popup")));
    let (op, _) = core.last_call();
    core.on_op_done(op, Ok("null".into()));
    core.group_joined(6, G);
    assert!(core.status().tabs.iter().all(|t| t.in_group));

    // A window.open popup window cannot hold groups: shared, outside, said.
    core.relay(json!({"debugger.attach": {"id": 5, "tabId": 7}}));
    let (op, _) = core.last_call();
    let popup = json!({"id": 7, "windowId": 3, "url": "https://example.com/p", "title": "P", "active": true});
    core.on_op_done(op, Ok(popup.to_string()));
    let (op, _) = core.last_call();
    core.on_op_done(op, Ok("null".into()));
    let op = core.op_of(&ChromeCall::TabsGroup { tabs: vec![7], group: None });
    core.on_op_done(op, Err("Grouping is not supported by tabs in this window.".into()));
    assert_eq!(core.host.badges[&7], Badge::On, "still shared: the badge says so");
    let popup = core.status().tabs.into_iter().find(|t| t.tab_id == 7).unwrap();
    assert!(!popup.in_group);
    assert_eq!(popup.not_in_group.as_deref(), Some("Grouping is not supported by tabs in this window."));
    core.on_tab_group_changed(tab(7, "https://example.com/p"), NO_GROUP);
    assert_eq!(core.attached(), vec![5, 6, 7], "not in the group, so not taken out of it");
}

#[test]
fn every_other_end_of_sharing_takes_the_tab_out_of_the_group() {
    // The user cancels Chrome's debugging bar (or opens DevTools).
    let mut core = paired_with_groups();
    core.sharing_in_group(5);
    core.on_debugger_detach(5, "canceled_by_user");
    assert_eq!(core.last_call().1, ChromeCall::TabsUngroup { tabs: vec![5] });
    assert_eq!(core.host.badges[&5], Badge::Off);

    // The relay stays away past the grace period.
    let mut core = paired_with_groups();
    core.sharing_in_group(5);
    core.on_socket_closed(1006, "");
    core.on_timer(Timer::DetachGrace);
    assert!(core.made(&ChromeCall::TabsUngroup { tabs: vec![5] }));
    assert_eq!(core.host.badges[&5], Badge::Off);

    // Chrome detached it and it cannot be attached again; during the tries
    // it stays in the group.
    let mut core = paired_with_groups();
    core.sharing_in_group(5);
    core.on_debugger_detach(5, "target_closed");
    let (op, _) = core.last_call();
    core.on_op_done(op, Ok(chrome_tab(5, "https://example.com/")));
    for _ in 0..policy::REATTACH_TRIES {
        assert!(!core.made(&ChromeCall::TabsUngroup { tabs: vec![5] }));
        core.on_timer(Timer::Reattach(5));
        let (op, _) = core.last_call();
        core.on_op_done(op, Err("Cannot attach".into()));
    }
    assert!(core.made(&ChromeCall::TabsUngroup { tabs: vec![5] }));
    assert!(matches!(core.host.badges[&5], Badge::Error(_)));

    // Taken out of the group while being re-attached: no more tries.
    let mut core = paired_with_groups();
    core.sharing_in_group(5);
    core.on_debugger_detach(5, "target_closed");
    let (op, _) = core.last_call();
    core.on_op_done(op, Ok(chrome_tab(5, "https://example.com/")));
    core.on_tab_group_changed(tab(5, "https://example.com/"), NO_GROUP);
    assert!(!core.host.timers.contains_key(&Timer::Reattach(5)));
    assert_eq!(core.host.badges[&5], Badge::Off);
}

#[test]
fn a_worker_restart_takes_the_group_as_the_truth() {
    let gone = 41; // a group that no longer exists
    let stale = 40; // a "Browser Relay" group not ours (restored after a browser restart)
    let facts = StartFacts {
        persisted: vec![
            PersistedTab { tab_id: 5, group_id: Some(G) },
            PersistedTab { tab_id: 6, group_id: Some(G) },
            PersistedTab { tab_id: 7, group_id: None },
            PersistedTab { tab_id: 8, group_id: Some(G) },
            PersistedTab { tab_id: 11, group_id: Some(gone) },
        ],
        debugger_attached: [5, 6, 7, 8, 11].map(|id| tab(id, "https://example.com/")).to_vec(),
        tabs: vec![
            TabFacts { info: tab(5, "https://example.com/"), group: G },
            TabFacts { info: tab(6, "https://example.com/"), group: G },
            // In a popup window: never in a group.
            TabFacts { info: in_window(7, "https://example.com/", 3), group: NO_GROUP },
            // Taken out of the group while the worker was stopped.
            TabFacts { info: tab(8, "https://example.com/"), group: NO_GROUP },
            // Put into the group while the debugger was away.
            TabFacts { info: tab(9, "https://example.org/"), group: G },
            TabFacts { info: tab(10, "https://example.net/"), group: stale },
            TabFacts { info: tab(11, "https://example.com/"), group: NO_GROUP },
            TabFacts { info: tab(12, "https://example.net/"), group: 50 },
        ],
        groups: Ok(vec![
            GroupInfo { id: G, window_id: Some(1), title: Some("Browser Relay".into()), color: Some("orange".into()) },
            GroupInfo { id: stale, window_id: Some(1), title: Some("Browser Relay".into()), color: None },
            GroupInfo { id: 50, window_id: Some(1), title: Some("Work".into()), color: None },
        ]),
        ..StartFacts::default()
    };
    let mut core = Core::new(FakeHost::default());
    core.start(
        Settings { port: 18792, token: Some(TOKEN.into()), pairing_code: None, pairing_port: None },
        environment(),
        facts,
    );
    assert_eq!(core.attached(), vec![5, 6, 7]);
    for released in [8, 11] {
        assert!(core.made(&ChromeCall::DebuggerDetach { tab: released }), "{released}");
        assert_eq!(core.host.badges[&released], Badge::Off);
    }
    assert!(core.made(&ChromeCall::TabsUngroup { tabs: vec![10] }), "the stale group is dissolved");
    assert!(!core.host.calls.iter().any(|(_, c)| matches!(c, ChromeCall::TabsUngroup { tabs } if tabs.contains(&12))));
    assert!(core.made(&ChromeCall::DebuggerAttach { tab: 9 }), "in the group: attached again");
    assert!(core.made(&ChromeCall::TabsGroup { tabs: vec![7], group: None }), "grouping tried again");
    assert!(!core.made(&ChromeCall::TabsGroup { tabs: vec![5], group: Some(G) }), "already there");
    core.on_socket_open();
    let hello = core.relay_proves();
    let announced: Vec<i64> =
        hello["hello"]["attachedTabs"].as_array().unwrap().iter().map(|t| t["tabId"].as_i64().unwrap()).collect();
    assert_eq!(announced, vec![5, 6, 7]);
    core.welcome();
    let op = core.op_of(&ChromeCall::DebuggerAttach { tab: 9 });
    core.on_op_done(op, Ok("null".into()));
    assert_eq!(core.toggled().last(), Some(&(9, true)));
    // Its members are known: one dragged out now is unshared.
    core.on_tab_group_changed(tab(6, "https://example.com/"), NO_GROUP);
    assert_eq!(core.toggled().last(), Some(&(6, false)));
}

#[test]
fn after_a_browser_restart_a_restored_group_is_dissolved_not_shared() {
    let facts = StartFacts {
        tabs: vec![TabFacts { info: tab(5, "https://example.com/"), group: 40 }],
        groups: Ok(vec![GroupInfo { id: 40, window_id: Some(1), title: Some("Browser Relay".into()), color: None }]),
        ..StartFacts::default()
    };
    let mut core = Core::new(FakeHost::default());
    core.start(
        Settings { port: 18792, token: Some(TOKEN.into()), pairing_code: None, pairing_port: None },
        environment(),
        facts,
    );
    assert_eq!(
        core.host.calls.iter().map(|(_, c)| c.clone()).collect::<Vec<_>>(),
        vec![ChromeCall::TabsUngroup { tabs: vec![5] }]
    );
    assert!(core.attached().is_empty());
    assert!(core.host.connects.is_empty(), "nothing shared without a click in this browser session");
}

#[test]
fn without_tab_groups_sharing_works_with_the_badge_alone_and_says_so() {
    let mut core = Core::new(FakeHost::default());
    let why = "chrome.tabGroups.query failed: Tab groups are disabled";
    let facts = StartFacts { groups: Err(why.into()), ..still_attached(vec![tab(5, "https://example.com/")]) };
    core.start(
        Settings { port: 18792, token: Some(TOKEN.into()), pairing_code: None, pairing_port: None },
        environment(),
        facts,
    );
    assert_eq!(core.attached(), vec![5], "the saved list is the truth");
    core.share(6);
    assert!(!core.host.calls.iter().any(|(_, c)| matches!(c, ChromeCall::TabsGroup { .. })));
    assert_eq!(core.host.badges[&6], Badge::On);
    let status = core.status().tab_groups;
    assert!(!status.available);
    assert!(status.detail.contains(why) && status.detail.contains("badge alone"), "{}", status.detail);
}

#[test]
fn the_group_keeps_its_name_and_colour_and_its_window_is_followed() {
    let mut core = paired_with_groups();
    core.sharing_in_group(5);
    let calls = core.host.calls.len();
    let group = |title: &str, color: &str, window: i64| GroupInfo {
        id: G,
        window_id: Some(window),
        title: Some(title.into()),
        color: Some(color.into()),
    };
    core.on_group_updated(group("Browser Relay", "orange", 1));
    assert_eq!(core.host.calls.len(), calls, "collapsing it changes nothing");
    core.on_group_updated(group("mine", "blue", 2));
    assert_eq!(
        core.last_call().1,
        ChromeCall::TabGroupsUpdate { group: G, title: "Browser Relay".into(), color: "orange".into() }
    );
    // Dragged to window 2: a tab shared there joins it.
    core.on_action_clicked(in_window(8, "https://example.net/", 2));
    let (op, _) = core.last_call();
    core.on_op_done(op, Ok("null".into()));
    assert_eq!(core.last_call().1, ChromeCall::TabsGroup { tabs: vec![8], group: Some(G) });
    // A group that is not ours is left alone.
    let calls = core.host.calls.len();
    core.on_group_updated(GroupInfo { id: 50, ..group("Work", "blue", 1) });
    assert_eq!(core.host.calls.len(), calls);
}

#[test]
fn the_group_dragged_to_another_window_keeps_its_tabs_shared() {
    // What Chrome sends: the group removed from window 1 and created in
    // window 2 (its id kept, or a new one), then each tab's new group.
    for moved in [G, 78] {
        let mut core = paired_with_groups();
        core.sharing_in_group(5);
        core.share(6);
        core.group_joined(6, G);
        core.on_group_removed(G);
        core.on_group_appeared(GroupInfo {
            id: moved,
            window_id: Some(2),
            title: Some("Browser Relay".into()),
            color: Some("orange".into()),
        });
        for id in [5, 6] {
            core.on_tab_group_changed(in_window(id, "https://example.com/", 2), moved);
        }
        assert_eq!(core.attached(), vec![5, 6], "{moved}");
        assert!(!core.toggled().contains(&(5, false)), "{moved}: the relay saw no unshare");
        assert!(core.host.saved.iter().all(|t| t.group_id == Some(moved)), "{moved}: {:?}", core.host.saved);
        // A tab shared in window 2 joins the moved group.
        core.on_action_clicked(in_window(8, "https://example.net/", 2));
        core.on_op_done(core.last_call().0, Ok("null".into()));
        assert_eq!(core.last_call().1, ChromeCall::TabsGroup { tabs: vec![8], group: Some(moved) }, "{moved}");
        // Dragged out of it afterwards: unshared as ever.
        core.on_tab_group_changed(in_window(5, "https://example.com/", 2), NO_GROUP);
        assert_eq!(core.toggled().last(), Some(&(5, false)), "{moved}");
    }
    // A group named like ours that the user makes later is not ours.
    let mut core = paired_with_groups();
    core.sharing_in_group(5);
    core.on_group_appeared(GroupInfo { id: 90, window_id: Some(1), title: Some("Browser Relay".into()), color: None });
    assert!(!core.groups.ours.contains_key(&90));
}

/// Real Chrome's order for `chrome.tabGroups.move` to another window (seen
/// in e2e `the_group_dragged_to_another_window_stays_the_access_list`):
/// the group removed, each tab out of it (`groupId` none), each tab into
/// the same group id in the new window, then the group created there.
#[test]
fn a_group_moved_as_chrome_tells_it_keeps_its_tabs_shared() {
    let mut core = paired_with_groups();
    core.sharing_in_group(5);
    core.share(6);
    core.group_joined(6, G);
    core.on_group_removed(G);
    for id in [5, 6] {
        core.on_tab_group_changed(in_window(id, "https://example.com/", 1), NO_GROUP);
    }
    assert_eq!(core.attached(), vec![5, 6], "out of a removed group for a moment: still shared");
    assert!(core.host.timers.contains_key(&Timer::GroupMove));
    for id in [5, 6] {
        core.on_tab_group_changed(in_window(id, "https://example.com/", 2), G);
    }
    core.on_group_appeared(GroupInfo {
        id: G,
        window_id: Some(2),
        title: Some("Browser Relay".into()),
        color: Some("orange".into()),
    });
    core.on_timer(Timer::GroupMove);
    assert_eq!(core.attached(), vec![5, 6]);
    assert!(!core.toggled().iter().any(|(_, shared)| !shared), "the relay saw no unshare: {:?}", core.toggled());
    // A tab that is not back in the group when the moment ends was taken
    // out for good (Chrome closing the group the same way): unshared.
    core.on_group_removed(G);
    core.on_tab_group_changed(in_window(5, "https://example.com/", 2), NO_GROUP);
    core.on_timer(Timer::GroupMove);
    assert_eq!(core.attached(), vec![6]);
    assert_eq!(core.toggled().last(), Some(&(5, false)));
}

#[test]
fn the_options_page_lists_shared_tabs_with_their_clients_and_stops_sharing() {
    let mut core = paired_with_groups();
    core.sharing_in_group(5);
    core.share(6);
    core.group_joined(6, G);
    core.relay(json!({"clients": {"tabs": [{"tabId": 5, "clients": [{"id": 3, "name": "Playwright/1.57.0"}]}]}}));
    let status = serde_json::to_value(core.status()).unwrap();
    assert_eq!(
        status["tabs"],
        json!([
            {"tabId": 5, "title": "T5", "url": "https://example.com/", "inGroup": true, "clients": [{"id": 3, "name": "Playwright/1.57.0"}]},
            {"tabId": 6, "title": "T6", "url": "https://example.com/", "inGroup": true, "clients": []},
        ])
    );
    assert_eq!(status["tabGroups"]["available"], true);

    core.on_stop_sharing(Some(5));
    assert_eq!(core.toggled().last(), Some(&(5, false)));
    assert!(core.made(&ChromeCall::TabsUngroup { tabs: vec![5] }));
    core.share(7);
    core.group_joined(7, G);
    core.on_stop_sharing(None);
    assert!(core.attached().is_empty());
    assert_eq!(core.toggled()[core.toggled().len() - 2..], [(6, false), (7, false)]);
    // The relay's list goes with its connection.
    assert!(core.status().tabs.is_empty());
    core.share(8);
    core.on_socket_closed(1006, "");
    assert!(core.status().tabs[0].clients.is_empty());
}

#[test]
fn a_tab_chrome_opens_into_the_group_is_shared_by_the_extension_and_announced_once() {
    let mut core = paired_with_groups();
    core.sharing_in_group(5);
    // A link of tab 5 opened in a new tab: Chrome puts it into 5's group.
    let opened = TabInfo { opener_tab_id: Some(5), ..tab(6, "https://example.com/next") };
    let sent = core.host.sent.len();
    core.on_tab_created(opened, G);
    assert_eq!(core.host.sent.len(), sent, "no tabs.onCreated: the relay must not attach it a second time");
    let op = core.op_of(&ChromeCall::DebuggerAttach { tab: 6 });
    // Chrome also reports the group as a change: nothing more happens.
    core.on_tab_group_changed(tab(6, "https://example.com/next"), G);
    core.on_op_done(op, Ok("null".into()));
    let announced = core.last_sent();
    assert_eq!(announced["user.toggledAttach"]["tab"]["openerTabId"], 5, "its opener tells the relay whose it is");
    assert_eq!(core.attached(), vec![5, 6]);
    assert!(core.status().tabs.iter().all(|t| t.in_group));
    let attaches = core.host.calls.iter().filter(|(_, c)| *c == ChromeCall::DebuggerAttach { tab: 6 }).count();
    assert_eq!(attaches, 1);
}

#[test]
fn a_popup_the_relay_attaches_while_chrome_groups_it_is_attached_once() {
    // The relay's attach is running when the tab enters the group: it
    // settles the tab; no second attach.
    let mut core = paired_with_groups();
    core.sharing_in_group(5);
    core.on_tab_created(TabInfo { opener_tab_id: Some(5), ..tab(6, "") }, NO_GROUP);
    core.relay(json!({"debugger.attach": {"id": 4, "tabId": 6}}));
    let check = core.op_of(&ChromeCall::TabsGet { tab: 6 });
    core.on_tab_group_changed(tab(6, "https://example.com/popup"), G);
    assert!(!core.made(&ChromeCall::DebuggerAttach { tab: 6 }));
    core.on_op_done(check, Ok(chrome_tab(6, "https://example.com/popup")));
    let op = core.op_of(&ChromeCall::DebuggerAttach { tab: 6 });
    core.on_op_done(op, Ok("null".into()));
    assert_eq!(core.last_sent(), json!({"reply": {"id": 4, "result": null}}));
    assert!(core.status().tabs.iter().all(|t| t.in_group));
    assert!(!core.made(&ChromeCall::TabsGroup { tabs: vec![6], group: Some(G) }), "already in it");

    // The other order: our attach runs when the relay asks; Chrome refuses
    // the relay's second attach, and the relay is told it holds.
    let mut core = paired_with_groups();
    core.sharing_in_group(5);
    core.on_tab_group_changed(tab(7, "https://example.com/other"), G);
    let ours = core.op_of(&ChromeCall::DebuggerAttach { tab: 7 });
    core.relay(json!({"debugger.attach": {"id": 5, "tabId": 7}}));
    let check = core.op_of(&ChromeCall::TabsGet { tab: 7 });
    core.on_op_done(check, Ok(chrome_tab(7, "https://example.com/other")));
    let theirs = core.host.calls.last().unwrap().0;
    core.on_op_done(ours, Ok("null".into()));
    core.on_op_done(theirs, Err("Another debugger is already attached to the tab with id: 7.".into()));
    assert_eq!(core.last_sent(), json!({"reply": {"id": 5, "result": null}}));
    assert_eq!(core.host.badges[&7], Badge::On);
    assert!(core.status().tabs.iter().all(|t| t.in_group));
}

impl Core<FakeHost> {
    /// Shared tab `id` in group `G`, whose debugger Chrome dropped (a
    /// renderer swap): being attached again, its timer set.
    fn reattaching_in_group(&mut self, id: TabId) {
        self.share(id);
        self.group_joined(id, G);
        self.on_debugger_detach(id, "target_closed");
        let check = self.op_of(&ChromeCall::TabsGet { tab: id });
        self.on_op_done(check, Ok(chrome_tab(id, "https://example.com/")));
        assert!(self.host.timers.contains_key(&Timer::Reattach(id)));
    }
}

#[test]
fn dragging_out_and_back_in_during_the_attach_attaches_once() {
    let mut core = paired_with_groups();
    core.sharing_in_group(5);
    core.on_tab_group_changed(tab(9, "https://example.org/"), G);
    core.on_tab_group_changed(tab(9, "https://example.org/"), NO_GROUP);
    core.on_tab_group_changed(tab(9, "https://example.org/"), G);
    let attaches = core.host.calls.iter().filter(|(_, c)| *c == ChromeCall::DebuggerAttach { tab: 9 }).count();
    assert_eq!(attaches, 1, "the running attach settles it");
    let op = core.op_of(&ChromeCall::DebuggerAttach { tab: 9 });
    core.on_op_done(op, Ok("null".into()));
    assert_eq!(core.attached(), vec![5, 9]);
}

#[test]
fn stop_sharing_all_and_the_grace_expiry_also_end_tabs_being_attached_again_or_joining() {
    for grace in [false, true] {
        let mut core = paired_with_groups();
        core.sharing_in_group(5);
        core.reattaching_in_group(6);
        core.on_tab_group_changed(tab(9, "https://example.org/"), G);
        let calls = core.host.calls.len();
        if grace {
            core.on_socket_closed(1006, "");
            core.on_timer(Timer::DetachGrace);
        } else {
            core.on_stop_sharing(None);
        }
        let made = core.calls_since(calls);
        for tab in [5, 6, 9] {
            assert!(made.contains(&ChromeCall::TabsUngroup { tabs: vec![tab] }), "{grace} {tab}: {made:?}");
            assert_eq!(core.host.badges[&tab], Badge::Off, "{grace} {tab}");
        }
        assert!(!core.host.timers.contains_key(&Timer::Reattach(6)), "{grace}");
        // The attaches already running detach instead of sharing.
        let op = core.op_of(&ChromeCall::DebuggerAttach { tab: 9 });
        core.on_op_done(op, Ok("null".into()));
        assert_eq!(core.last_call().1, ChromeCall::DebuggerDetach { tab: 9 }, "{grace}");
        core.on_timer(Timer::Reattach(6));
        assert!(core.attached().is_empty(), "{grace}");
        assert!(core.host.saved.is_empty(), "{grace}");
        assert!(!core.toggled().contains(&(9, true)), "{grace}");
    }
}

#[test]
fn the_debugging_bar_cancelled_while_the_worker_was_stopped_is_not_undone_by_the_restart() {
    for reason in ["canceled_by_user", "replaced_with_devtools"] {
        // In our group, the debugger gone: the restart attaches it again...
        let facts = StartFacts {
            persisted: vec![PersistedTab { tab_id: 5, group_id: Some(G) }],
            tabs: vec![TabFacts { info: tab(5, "https://example.com/"), group: G }],
            groups: Ok(vec![GroupInfo {
                id: G,
                window_id: Some(1),
                title: Some("Browser Relay".into()),
                color: Some("orange".into()),
            }]),
            ..StartFacts::default()
        };
        let mut core = Core::new(FakeHost::default());
        core.start(
            Settings { port: 18792, token: Some(TOKEN.into()), pairing_code: None, pairing_port: None },
            environment(),
            facts,
        );
        let attach = core.op_of(&ChromeCall::DebuggerAttach { tab: 5 });
        // ...then the queued onDetach says the user cancelled the bar.
        core.on_debugger_detach(5, reason);
        assert_eq!(core.last_call().1, ChromeCall::TabsUngroup { tabs: vec![5] }, "{reason}");
        assert_eq!(core.host.badges[&5], Badge::Off, "{reason}");
        core.on_op_done(attach, Ok("null".into()));
        assert_eq!(core.last_call().1, ChromeCall::DebuggerDetach { tab: 5 }, "{reason}: the user's choice holds");
        assert!(core.attached().is_empty(), "{reason}");
        assert!(core.host.saved.is_empty(), "{reason}");
    }
}

const DRAGGING: &str = "Tabs cannot be edited right now (user may be dragging a tab).";

#[test]
fn a_group_call_chrome_refuses_during_a_drag_is_tried_again_from_what_holds_then() {
    let mut core = paired_with_groups();
    core.share(5);
    let create = ChromeCall::TabsGroup { tabs: vec![5], group: None };
    core.on_op_done(core.op_of(&create), Err(DRAGGING.into()));
    assert_eq!(core.host.timers.get(&Timer::Regroup(5)), Some(&200), "not outside for good");
    assert!(core.groups.outside.is_empty());
    core.on_timer(Timer::Regroup(5));
    assert_eq!(core.last_call().1, create);
    core.on_op_done(core.op_of(&create), Err(DRAGGING.into()));
    assert_eq!(core.host.timers.get(&Timer::Regroup(5)), Some(&400), "backing off");
    core.on_timer(Timer::Regroup(5));
    core.group_made(5, G);
    assert_eq!(core.host.saved, vec![PersistedTab { tab_id: 5, group_id: Some(G) }]);

    // Our group vanished as a tab was being put into it: a new one.
    core.share(6);
    let join = ChromeCall::TabsGroup { tabs: vec![6], group: Some(G) };
    core.on_op_done(core.op_of(&join), Err(format!("No group with id: {G}.")));
    core.on_timer(Timer::Regroup(6));
    assert_eq!(core.last_call().1, ChromeCall::TabsGroup { tabs: vec![6], group: None });

    // Unshared while waiting: nothing is grouped.
    core.on_action_clicked(in_window(8, "https://example.net/", 2));
    core.on_op_done(core.last_call().0, Ok("null".into()));
    let create8 = ChromeCall::TabsGroup { tabs: vec![8], group: None };
    core.on_op_done(core.op_of(&create8), Err(DRAGGING.into()));
    core.on_action_clicked(in_window(8, "https://example.net/", 2));
    let calls = core.host.calls.len();
    core.on_timer(Timer::Regroup(8));
    assert_eq!(core.host.calls.len(), calls);

    // Refused every time: it stays shared outside the group, and says why.
    let mut core = paired_with_groups();
    core.share(5);
    for _ in 0..=tab_groups::REGROUP_TRIES {
        core.on_op_done(core.op_of(&create), Err(DRAGGING.into()));
        core.on_timer(Timer::Regroup(5));
    }
    assert_eq!(core.groups.outside.get(&5).map(String::as_str), Some(DRAGGING));
    assert_eq!(core.attached(), vec![5]);
}

#[test]
fn an_ungroup_chrome_refuses_during_a_drag_is_tried_again_so_the_group_never_shows_an_unshared_tab() {
    let mut core = paired_with_groups();
    core.sharing_in_group(5);
    core.share(6);
    core.group_joined(6, G);
    for unshared in [5, 6] {
        if unshared == 5 {
            core.on_action_clicked(tab(5, "https://example.com/"));
        } else {
            // Cancelling the debugging bar (leave_group too).
            core.on_debugger_detach(6, "canceled_by_user");
        }
        let ungroup = ChromeCall::TabsUngroup { tabs: vec![unshared] };
        core.on_op_done(core.op_of(&ungroup), Err(DRAGGING.into()));
        assert_eq!(core.host.timers.get(&Timer::Regroup(unshared)), Some(&200));
        let calls = core.host.calls.len();
        core.on_timer(Timer::Regroup(unshared));
        assert_eq!(core.calls_since(calls), vec![ungroup.clone()], "tried again");
        core.on_op_done(core.op_of(&ungroup), Ok("null".into()));
        assert!(core.groups.retrying.is_empty());
    }
    // A tab put out by the user meanwhile is not ungrouped again.
    let mut core = paired_with_groups();
    core.sharing_in_group(5);
    core.on_action_clicked(tab(5, "https://example.com/"));
    core.on_op_done(core.op_of(&ChromeCall::TabsUngroup { tabs: vec![5] }), Err(DRAGGING.into()));
    core.on_tab_group_changed(tab(5, "https://example.com/"), 50);
    assert!(!core.host.timers.contains_key(&Timer::Regroup(5)));
}
