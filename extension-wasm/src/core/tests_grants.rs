//! Grants (`grants.rs`, `rules.rs`, the owners of `groups.rs`), driven with
//! the recording host of `tests.rs`.

use serde_json::{Value, json};
use shared_protocol::{TabId, TabInfo};

use super::tests::{FakeHost, TOKEN, chrome_tab, environment, tab};
use super::tests_groups::{G, in_window, paired_with_groups};
use super::*;

/// The research grant's tab group in window 1.
pub(super) const R: GroupId = 88;
const LOCAL: &str = r"^(http|ws)://([^/?#@]*@)?127\.0\.0\.1:8765/";
const WIKI: &str = r"^(https?|wss?)://([^/?#@]*@)?[^/?#@:]+\.wiki\.org(:[0-9]+)?/";

pub(super) fn research() -> Value {
    json!({"name": "research", "color": "blue", "sites": [LOCAL, WIKI]})
}

pub(super) fn ci() -> Value {
    json!({"name": "ci", "color": "green", "sites": []})
}

fn paired_no_groups() -> Core<FakeHost> {
    let mut core = Core::new(FakeHost::default());
    let settings = Settings { port: 18792, token: Some(TOKEN.into()), pairing_code: None, pairing_port: None };
    core.start(settings, environment(), StartFacts::default());
    core
}

/// Research's rules over `tabs`, from slot `slot`, as Chrome gets them.
fn research_rules(slot: i64, tabs: &[TabId]) -> Value {
    let all = json!(RESOURCE_TYPES);
    let base = slot * RULES_PER_GRANT;
    json!([
        {"id": base, "priority": 1,
         "action": {"type": "modifyHeaders",
                    "requestHeaders": [{"header": "cookie", "operation": "remove"}],
                    "responseHeaders": [{"header": "set-cookie", "operation": "remove"}]},
         "condition": {"tabIds": tabs, "resourceTypes": all}},
        {"id": base + 1, "priority": 2, "action": {"type": "allow"},
         "condition": {"tabIds": tabs, "regexFilter": LOCAL, "resourceTypes": all}},
        {"id": base + 2, "priority": 2, "action": {"type": "allow"},
         "condition": {"tabIds": tabs, "regexFilter": WIKI, "resourceTypes": all}},
    ])
}

impl Core<FakeHost> {
    pub(super) fn grants_notice(&mut self, grants: &[Value]) {
        self.relay(json!({"grants": {"grants": grants}}));
    }

    /// The session rules' updates made since call `from`: (remove, add as JSON).
    fn rule_updates_since(&self, from: usize) -> Vec<(Vec<i64>, Value)> {
        self.calls_since(from)
            .into_iter()
            .filter_map(|call| match call {
                ChromeCall::UpdateSessionRules { remove, add } => Some((remove, serde_json::to_value(add).unwrap())),
                _ => None,
            })
            .collect()
    }

    /// Chrome takes every rules update so far.
    fn rules_taken(&mut self) {
        let ops: Vec<OpId> = self
            .host
            .calls
            .iter()
            .filter(|(_, c)| matches!(c, ChromeCall::UpdateSessionRules { .. }))
            .map(|(op, _)| *op)
            .collect();
        for op in ops {
            self.on_op_done(op, Ok("null".into()));
        }
    }

    pub(super) fn sent_since(&self, from: usize) -> Vec<Value> {
        self.sent_json()[from..].to_vec()
    }

    /// Tab `id` of window 1 shared with research from the toolbar button's
    /// menu, into research's group `R` (made for it).
    pub(super) fn shared_with_research(&mut self, id: TabId) {
        self.on_menu_clicked("research", tab(id, "https://en.wiki.org/"));
        self.on_op_done(self.op_of(&ChromeCall::DebuggerAttach { tab: id }), Ok("null".into()));
        if self.groups.ours.contains_key(&R) {
            self.group_joined(id, R);
        } else {
            self.group_made(id, R);
        }
    }

    fn announced(&self, id: TabId) -> Vec<Value> {
        self.sent_json()
            .into_iter()
            .filter_map(|f| f.get("user.toggledAttach").cloned())
            .filter(|t| t["tab"]["tabId"] == id)
            .collect()
    }
}

#[test]
fn a_grants_notice_creates_nothing_until_needed() {
    let mut core = paired_with_groups();
    core.sharing_in_group(5);
    let calls = core.host.calls.len();
    core.grants_notice(&[research(), ci()]);
    assert_eq!(
        core.calls_since(calls),
        vec![
            ChromeCall::MenusRemoveAll,
            ChromeCall::MenusCreate { id: "grant:research".into(), title: "Share this tab with research".into() },
            ChromeCall::MenusCreate { id: "grant:ci".into(), title: "Share this tab with ci".into() },
        ],
        "a menu item each: no group, no window, no rule (no tab is theirs)"
    );
    assert_eq!(core.host.saved_grants.grants.len(), 2, "kept for a worker restart");
    let status = serde_json::to_value(core.status()).unwrap();
    assert_eq!(
        status["grants"],
        json!([
            {"name": "research", "color": "blue", "sites": 2, "tabs": 0, "rules": "no tabs"},
            {"name": "ci", "color": "green", "sites": 0, "tabs": 0, "rules": "every site"},
        ])
    );
    // The same list again changes nothing; only the relay's list counts,
    // and only while it is the relay (welcomed).
    let calls = core.host.calls.len();
    core.grants_notice(&[research(), ci()]);
    assert_eq!(core.host.calls.len(), calls);
    core.on_socket_closed(1006, "");
    core.grants_notice(&[]);
    assert_eq!(core.status().grants.len(), 2);
}

#[test]
fn a_tab_dragged_into_a_grants_group_is_shared_with_the_grant() {
    let mut core = paired_with_groups();
    core.sharing_in_group(5);
    core.grants_notice(&[research(), ci()]);
    core.shared_with_research(7);
    assert!(core.made(&ChromeCall::TabGroupsUpdate { group: R, title: "research".into(), color: "blue".into() }));
    assert_eq!(core.announced(7)[0]["tab"]["grant"], "research");

    let calls = core.host.calls.len();
    core.on_tab_group_changed(tab(9, "https://en.wiki.org/wiki/Rust"), R);
    let made = core.calls_since(calls);
    assert!(matches!(&made[0], ChromeCall::UpdateSessionRules { .. }), "its cookie rules first: {made:?}");
    assert_eq!(made[1], ChromeCall::DebuggerAttach { tab: 9 });
    assert_eq!(core.rule_updates_since(calls)[0].1, research_rules(1, &[7, 9]));
    core.on_op_done(core.op_of(&ChromeCall::DebuggerAttach { tab: 9 }), Ok("null".into()));
    let announced = &core.announced(9)[0];
    assert_eq!(announced["attached"], true);
    assert_eq!(announced["tab"]["grant"], "research", "the relay hears whose it is");
    assert!(!core.made(&ChromeCall::TabsGroup { tabs: vec![9], group: Some(R) }), "already in it");
    let status = core.status();
    let nine = status.tabs.iter().find(|t| t.tab_id == 9).unwrap();
    assert_eq!(nine.grant.as_deref(), Some("research"));
    assert!(nine.in_group);
    assert_eq!(status.tabs.iter().find(|t| t.tab_id == 5).unwrap().grant, None, "the person's");
    // Every TabInfo of it says so: its updates, its re-attach.
    core.on_tab_updated(tab(9, "https://en.wiki.org/wiki/Go"));
    assert_eq!(core.last_sent()["tabs.onUpdated"]["tab"]["grant"], "research");
    core.on_debugger_detach(9, "target_closed");
    core.on_op_done(core.op_of(&ChromeCall::TabsGet { tab: 9 }), Ok(chrome_tab(9, "https://en.wiki.org/wiki/Go")));
    core.on_timer(Timer::Reattach(9));
    core.on_op_done(core.last_call().0, Ok("null".into()));
    assert_eq!(core.last_sent()["debugger.reattached"]["tab"]["grant"], "research");
    // And the relay's answers for shared tabs.
    core.relay(json!({"tabs.query": {"id": 30, "query": {}}}));
    let tabs = format!("[{},{},{}]", chrome_tab(5, "a"), chrome_tab(9, "b"), chrome_tab(11, "c"));
    core.on_op_done(core.last_call().0, Ok(tabs));
    let answer = &core.last_sent()["reply"]["result"];
    assert_eq!((answer[0].get("grant"), &answer[1]["grant"], answer[2].get("grant")), (None, &json!("research"), None));
    // The relay recolours the grant: its groups follow; nothing else changes.
    let (calls, sent) = (core.host.calls.len(), core.host.sent.len());
    core.grants_notice(&[json!({"name": "research", "color": "red", "sites": [LOCAL, WIKI]}), ci()]);
    let recolour = ChromeCall::TabGroupsUpdate { group: R, title: "research".into(), color: "red".into() };
    assert_eq!(core.calls_since(calls), vec![recolour]);
    assert_eq!(core.host.sent.len(), sent);
}

#[test]
fn a_shared_tab_moved_between_the_persons_group_and_a_grants_says_so_before_anything_else() {
    let mut core = paired_with_groups();
    core.sharing_in_group(5);
    core.grants_notice(&[research()]);
    core.shared_with_research(7);
    core.rules_taken();

    // The person drags tab 5 from "Browser Relay" into research's group.
    let (sent, calls) = (core.host.sent.len(), core.host.calls.len());
    core.on_tab_group_changed(tab(5, "https://example.com/"), R);
    core.on_debugger_event(5, None, "Page.loadEventFired", Some("{}".into()));
    let frames = core.sent_since(sent);
    assert_eq!(frames[0], json!({"tab.grant": {"tabId": 5, "grant": "research"}}), "first: {frames:?}");
    assert!(frames[1]["debugger.onEvent"].is_object(), "then the tab's events");
    assert!(core.announced(5).iter().all(|t| t["attached"] == true), "still shared: no unshare");
    assert_eq!(core.attached(), vec![5, 7]);
    assert_eq!(core.rule_updates_since(calls)[0].1, research_rules(1, &[5, 7]), "its cookies follow at once");
    assert_eq!(core.status().tabs[0].grant.as_deref(), Some("research"));
    assert!(core.host.saved_grants.tabs.contains(&GrantTab { tab_id: 5, grant: "research".into() }));

    // And back into the person's group.
    let (sent, calls) = (core.host.sent.len(), core.host.calls.len());
    core.on_tab_group_changed(tab(5, "https://example.com/"), G);
    assert_eq!(core.sent_since(sent)[0], json!({"tab.grant": {"tabId": 5}}));
    assert_eq!(core.rule_updates_since(calls)[0].1, research_rules(1, &[7]));
    assert_eq!(core.status().tabs[0].grant, None);
    // Our own group events for it say nothing more.
    let sent = core.host.sent.len();
    core.on_tab_group_changed(tab(5, "https://example.com/"), G);
    assert_eq!(core.host.sent.len(), sent);
}

#[test]
fn a_tab_dragged_out_of_a_grants_group_is_unshared_and_its_rules_go() {
    let mut core = paired_with_groups();
    core.sharing_in_group(5);
    core.grants_notice(&[research()]);
    core.shared_with_research(7);
    core.rules_taken();
    let calls = core.host.calls.len();
    core.on_tab_group_changed(tab(7, "https://en.wiki.org/"), NO_GROUP);
    let unshared = core.announced(7).pop().unwrap();
    assert_eq!((&unshared["attached"], &unshared["tab"]["grant"]), (&json!(false), &json!("research")));
    assert!(core.made(&ChromeCall::DebuggerDetach { tab: 7 }));
    // No tab of research's left: its rules are removed (DNR refuses an empty tabIds).
    assert_eq!(core.rule_updates_since(calls), vec![(vec![1000, 1001, 1002], json!([]))]);
    core.rules_taken();
    assert_eq!(core.status().grants[0].rules, "no tabs");
    assert!(core.host.saved_grants.tabs.is_empty());
    assert_eq!(core.attached(), vec![5]);
}

#[test]
fn a_grants_new_tab_opens_in_its_own_window_in_its_group_and_is_attached_once_by_the_relay() {
    let mut core = paired_with_groups();
    core.sharing_in_group(5);
    core.grants_notice(&[research(), ci()]);
    let calls = core.host.calls.len();
    core.relay(json!({"tabs.create": {"id": 10, "url": "https://en.wiki.org/", "active": true, "grant": "research"}}));
    // Its own window, unfocused: the person's focus is never taken. Blank
    // first: its first request must not carry the person's cookies.
    assert_eq!(
        core.calls_since(calls),
        vec![ChromeCall::WindowsCreate { url: Some("about:blank".into()), focused: false }]
    );
    let window = json!({"id": 3, "focused": false,
                        "tabs": [{"id": 20, "windowId": 3, "url": "about:blank", "title": "", "active": true}]});
    let (calls, sent) = (core.host.calls.len(), core.host.sent.len());
    core.on_op_done(core.last_call().0, Ok(window.to_string()));
    assert_eq!(core.rule_updates_since(calls)[0].1, research_rules(1, &[20]), "its rules at once");
    assert!(core.made(&ChromeCall::TabsGroup { tabs: vec![20], group: None }), "into a group of research's");
    assert_eq!(core.host.sent.len(), sent, "not answered yet");
    // Chrome tells the tab's new group before it answers the call: a group
    // not known yet, nothing happens; then the group is research's.
    core.on_tab_group_changed(in_window(20, "about:blank", 3), 90);
    core.group_made(20, 90);
    assert!(core.made(&ChromeCall::TabGroupsUpdate { group: 90, title: "research".into(), color: "blue".into() }));
    assert!(!core.made(&ChromeCall::TabsUpdate { tab: 20, url: Some("https://en.wiki.org/".into()), active: None }));
    core.rules_taken();
    let navigate = ChromeCall::TabsUpdate { tab: 20, url: Some("https://en.wiki.org/".into()), active: None };
    assert!(core.made(&navigate), "to its URL once its rules are in force");
    let blank = json!({"id": 20, "windowId": 3, "url": "about:blank", "pendingUrl": "https://en.wiki.org/",
                       "title": "", "active": true});
    core.on_op_done(core.op_of(&navigate), Ok(blank.to_string()));
    assert_eq!(
        core.last_sent(),
        json!({"reply": {"id": 10, "result": {"tabId": 20, "windowId": 3, "url": "https://en.wiki.org/", "title": "",
                                              "active": true, "grant": "research"}}})
    );
    // The relay attaches it itself, right after: once.
    core.relay(json!({"debugger.attach": {"id": 11, "tabId": 20}}));
    core.on_op_done(core.op_of(&ChromeCall::TabsGet { tab: 20 }), Ok(blank.to_string()));
    core.on_op_done(core.op_of(&ChromeCall::DebuggerAttach { tab: 20 }), Ok("null".into()));
    assert_eq!(core.last_sent(), json!({"reply": {"id": 11, "result": null}}));
    let attaches = core.host.calls.iter().filter(|(_, c)| *c == ChromeCall::DebuggerAttach { tab: 20 }).count();
    assert_eq!(attaches, 1, "our own grouping attached nothing");
    assert!(core.announced(20).is_empty(), "the relay's own attach: no user.toggledAttach");
    assert!(!core.host.timers.contains_key(&Timer::GrantTab(20)));
    let twenty = core.status().tabs.into_iter().find(|t| t.tab_id == 20).unwrap();
    assert_eq!((twenty.in_group, twenty.grant.as_deref()), (true, Some("research")));
    assert!(core.host.saved.contains(&PersistedTab { tab_id: 20, group_id: Some(90) }));
    assert_eq!(core.host.saved_grants.windows, vec![GrantWindow { grant: "research".into(), window_id: 3 }]);

    a_grants_next_tab_opens_in_its_window_in_the_same_group(&mut core);

    // "Stop sharing" for every tab: a new tab awaiting the relay's attach
    // leaves the grant's group too.
    core.relay(json!({"tabs.create": {"id": 15, "grant": "research"}}));
    core.on_op_done(core.last_call().0, Ok(json!({"id": 22, "windowId": 3, "url": "about:blank"}).to_string()));
    core.group_joined(22, 90);
    assert_eq!(core.last_sent()["reply"]["result"]["tabId"], 22);
    core.on_stop_sharing(None);
    assert!(core.made(&ChromeCall::TabsUngroup { tabs: vec![22] }));
    assert!(!core.host.timers.contains_key(&Timer::GrantTab(22)));
    assert!(core.attached().is_empty());
    core.share(6);

    // A grant without sites (every site) opens at its URL at once.
    core.relay(json!({"tabs.create": {"id": 13, "url": "https://example.org/", "grant": "ci"}}));
    assert_eq!(
        core.last_call().1,
        ChromeCall::WindowsCreate { url: Some("https://example.org/".into()), focused: false },
        "a window of its own: not research's"
    );
    // A grant the relay never listed gets no tab.
    core.relay(json!({"tabs.create": {"id": 14, "url": "https://example.org/", "grant": "nobody"}}));
    assert!(core.last_sent()["reply"]["error"]["message"].as_str().unwrap().contains("no grant"));
}

/// The test above, its second act: research's next tab opens in the window
/// its first made, active there (the person's window untouched), into the
/// same group.
fn a_grants_next_tab_opens_in_its_window_in_the_same_group(core: &mut Core<FakeHost>) {
    let calls = core.host.calls.len();
    core.relay(json!({"tabs.create": {"id": 12, "url": "https://de.wiki.org/", "grant": "research"}}));
    let create =
        ChromeCall::TabsCreate { url: Some("about:blank".into()), active: true, opener: None, window: Some(3) };
    assert_eq!(core.calls_since(calls), vec![create]);
    core.on_op_done(core.last_call().0, Ok(json!({"id": 21, "windowId": 3, "url": "about:blank"}).to_string()));
    // Chrome's group event first again: it joins, awaiting the relay's attach.
    core.on_tab_group_changed(in_window(21, "about:blank", 3), 90);
    assert!(!core.made(&ChromeCall::DebuggerAttach { tab: 21 }));
    core.group_joined(21, 90);
    core.rules_taken();
    let navigate = ChromeCall::TabsUpdate { tab: 21, url: Some("https://de.wiki.org/".into()), active: None };
    core.on_op_done(core.op_of(&navigate), Ok(json!({"id": 21, "windowId": 3, "url": "about:blank"}).to_string()));
    assert_eq!(core.last_sent()["reply"]["result"]["grant"], "research");
    // The relay never attaches it (it went away): in the group, it is shared
    // by the extension, as any tab put there.
    core.on_timer(Timer::GrantTab(21));
    core.on_op_done(core.op_of(&ChromeCall::DebuggerAttach { tab: 21 }), Ok("null".into()));
    assert_eq!(core.announced(21)[0]["tab"]["grant"], "research");
}

#[test]
fn a_closed_grant_window_is_not_used_again() {
    let mut core = paired_with_groups();
    core.sharing_in_group(5);
    core.grants_notice(&[ci()]);
    let window = |w: i64, t: i64| json!({"id": w, "tabs": [{"id": t, "windowId": w, "url": "about:blank"}]});
    core.relay(json!({"tabs.create": {"id": 10, "grant": "ci"}}));
    core.on_op_done(core.last_call().0, Ok(window(3, 20).to_string()));
    assert_eq!(core.host.saved_grants.windows, vec![GrantWindow { grant: "ci".into(), window_id: 3 }]);
    // The window closes: forgotten, and the next tab gets a new one.
    core.on_window_removed(3);
    assert!(core.host.saved_grants.windows.is_empty());
    core.relay(json!({"tabs.create": {"id": 11, "grant": "ci"}}));
    assert_eq!(core.last_call().1, ChromeCall::WindowsCreate { url: Some("about:blank".into()), focused: false });
    core.on_op_done(core.last_call().0, Ok(window(4, 21).to_string()));
    // Gone without our hearing it (the worker stopped): Chrome refuses the
    // tab there, and a new window is made.
    core.relay(json!({"tabs.create": {"id": 12, "grant": "ci"}}));
    let there = ChromeCall::TabsCreate { url: Some("about:blank".into()), active: true, opener: None, window: Some(4) };
    assert_eq!(core.last_call().1, there);
    core.on_op_done(core.last_call().0, Err("No window with id: 4.".into()));
    assert_eq!(core.last_call().1, ChromeCall::WindowsCreate { url: Some("about:blank".into()), focused: false });
    assert!(core.host.saved_grants.windows.is_empty());
    core.on_op_done(core.last_call().0, Ok(window(5, 22).to_string()));
    assert_eq!(core.host.saved_grants.windows, vec![GrantWindow { grant: "ci".into(), window_id: 5 }]);
    core.group_made(22, 91);
    assert_eq!(core.last_sent()["reply"]["id"], 12, "answered once it is in the grant's group");
    assert_eq!(core.last_sent()["reply"]["result"]["windowId"], 5);
}

#[test]
fn a_grant_tabs_popup_is_covered_by_its_rules_in_the_same_event_before_anything_else() {
    let mut core = paired_with_groups();
    core.sharing_in_group(5);
    core.grants_notice(&[research()]);
    core.shared_with_research(7);
    core.rules_taken();
    // A popup window (no group): its rules, then the relay hears of it.
    let (calls, sent) = (core.host.calls.len(), core.host.sent.len());
    core.on_tab_created(TabInfo { opener_tab_id: Some(7), ..in_window(8, "", 4) }, NO_GROUP);
    let made = core.calls_since(calls);
    assert_eq!(made.len(), 1, "{made:?}");
    assert_eq!(core.rule_updates_since(calls)[0].1, research_rules(1, &[7, 8]));
    assert_eq!(core.sent_since(sent)[0]["tabs.onCreated"]["tab"]["grant"], "research");
    // Chrome opens a link of tab 7 into research's group: rules first, then
    // the attach, and it is research's.
    let calls = core.host.calls.len();
    core.on_tab_created(TabInfo { opener_tab_id: Some(7), ..tab(9, "") }, R);
    let made = core.calls_since(calls);
    assert!(matches!(&made[0], ChromeCall::UpdateSessionRules { .. }), "{made:?}");
    assert_eq!(made[1], ChromeCall::DebuggerAttach { tab: 9 });
    core.on_op_done(core.op_of(&ChromeCall::DebuggerAttach { tab: 9 }), Ok("null".into()));
    assert_eq!(core.announced(9)[0]["tab"]["grant"], "research");
    // The relay attaches the popup of the window: research's too.
    core.relay(json!({"debugger.attach": {"id": 4, "tabId": 8}}));
    let popup = json!({"id": 8, "windowId": 4, "url": "https://en.wiki.org/p", "title": "P", "active": true});
    core.on_op_done(core.op_of(&ChromeCall::TabsGet { tab: 8 }), Ok(popup.to_string()));
    core.on_op_done(core.op_of(&ChromeCall::DebuggerAttach { tab: 8 }), Ok("null".into()));
    assert_eq!(core.status().tabs.iter().find(|t| t.tab_id == 8).unwrap().grant.as_deref(), Some("research"));
    // The person's tabs' popups are not research's.
    let calls = core.host.calls.len();
    core.on_tab_created(TabInfo { opener_tab_id: Some(5), ..tab(12, "") }, NO_GROUP);
    assert!(core.rule_updates_since(calls).is_empty());
}

#[test]
fn each_grants_rules_have_ids_of_their_own_and_are_replaced_as_a_set() {
    let mut core = paired_no_groups();
    let other = json!({"name": "other", "color": "red", "sites": ["^https://example\\.org/"]});
    core.share(5);
    core.grants_notice(&[research(), other]);
    core.on_menu_clicked("research", tab(7, "https://en.wiki.org/"));
    core.on_op_done(core.op_of(&ChromeCall::DebuggerAttach { tab: 7 }), Ok("null".into()));
    core.on_menu_clicked("other", tab(8, "https://example.org/"));
    let calls = core.host.calls.len();
    core.on_op_done(core.op_of(&ChromeCall::DebuggerAttach { tab: 8 }), Ok("null".into()));
    let (remove, add) = core.rule_updates_since(calls).remove(0);
    assert_eq!(remove, Vec::<i64>::new(), "nothing of other's was in force");
    assert_eq!(add.as_array().unwrap().iter().map(|r| r["id"].as_i64().unwrap()).collect::<Vec<_>>(), vec![2000, 2001]);
    assert_eq!(
        add[1]["condition"],
        json!({"tabIds": [8], "regexFilter": "^https://example\\.org/", "resourceTypes": RESOURCE_TYPES})
    );
    core.rules_taken();
    // Research's sites change: its rules alone are replaced, under the same ids.
    let calls = core.host.calls.len();
    let narrower = json!({"name": "research", "color": "blue", "sites": [WIKI]});
    core.grants_notice(&[narrower, json!({"name": "other", "color": "red", "sites": ["^https://example\\.org/"]})]);
    let updates = core.rule_updates_since(calls);
    assert_eq!(updates.len(), 1);
    assert_eq!(updates[0].0, vec![1000, 1001, 1002]);
    assert_eq!(
        updates[0].1.as_array().unwrap().iter().map(|r| r["id"].as_i64().unwrap()).collect::<Vec<_>>(),
        vec![1000, 1001]
    );
    assert_eq!(updates[0].1[1]["condition"]["regexFilter"], WIKI);
    // Chrome refuses an update: the options page says so, and the next
    // change sends it again.
    let op = core.host.calls.iter().rev().find(|(_, c)| matches!(c, ChromeCall::UpdateSessionRules { .. })).unwrap().0;
    core.on_op_done(op, Err("Rule with id 1001 specifies an invalid regular expression.".into()));
    let research = core.status().grants.into_iter().find(|g| g.name == "research").unwrap();
    assert_eq!(research.rules, "failed");
    assert!(research.rules_error.unwrap().contains("invalid regular expression"));
    let calls = core.host.calls.len();
    core.on_tab_removed(7);
    assert_eq!(core.rule_updates_since(calls), vec![(vec![1000, 1001, 1002], json!([]))], "every id it may have put");
}

#[test]
fn a_grants_new_tab_whose_rules_chrome_refuses_stays_blank_and_the_relay_hears_why() {
    let mut core = paired_no_groups();
    core.share(5);
    core.grants_notice(&[research()]);
    core.relay(json!({"tabs.create": {"id": 10, "url": "https://bank.example/", "grant": "research"}}));
    let window = json!({"id": 3, "tabs": [{"id": 20, "windowId": 3, "url": "about:blank"}]});
    core.on_op_done(core.last_call().0, Ok(window.to_string()));
    let op = core.op_of(&ChromeCall::UpdateSessionRules { remove: vec![], add: rules::compose(1, &grant(), &[20]) });
    core.on_op_done(op, Err("Rule with id 1001 specifies an invalid regular expression.".into()));
    assert!(!core.host.calls.iter().any(|(_, c)| matches!(c, ChromeCall::TabsUpdate { .. })), "never sent to its URL");
    let error = core.last_sent()["reply"]["error"]["message"].as_str().unwrap().to_string();
    assert!(error.contains("cookie rules") && error.contains("invalid regular expression"), "{error}");
}

fn grant() -> shared_protocol::GrantGroup {
    serde_json::from_value(research()).unwrap()
}

#[test]
fn without_tab_groups_a_grants_tab_is_its_by_the_cores_record() {
    let mut core = paired_no_groups();
    core.share(5);
    core.grants_notice(&[ci()]);
    core.relay(json!({"tabs.create": {"id": 10, "url": "https://example.org/", "grant": "ci"}}));
    let window = json!({"id": 3, "tabs": [{"id": 20, "windowId": 3, "url": "", "pendingUrl": "https://example.org/"}]});
    core.on_op_done(core.last_call().0, Ok(window.to_string()));
    assert_eq!(core.last_sent()["reply"]["result"]["grant"], "ci", "no group to wait for");
    assert!(!core.host.calls.iter().any(|(_, c)| matches!(c, ChromeCall::TabsGroup { .. })));
    core.relay(json!({"debugger.attach": {"id": 11, "tabId": 20}}));
    core.on_op_done(core.op_of(&ChromeCall::TabsGet { tab: 20 }), Ok(chrome_tab(20, "https://example.org/")));
    core.on_op_done(core.op_of(&ChromeCall::DebuggerAttach { tab: 20 }), Ok("null".into()));
    // The relay comes back after a restart: the hello says whose it is.
    core.on_socket_closed(1006, "");
    core.on_timer(Timer::Reconnect);
    core.on_socket_open();
    let hello = core.relay_proves();
    assert_eq!(
        hello["hello"]["attachedTabs"],
        json!([
            {"tabId": 5, "windowId": 1, "url": "https://example.com/", "title": "T5", "active": true},
            {"tabId": 20, "windowId": 1, "url": "https://example.org/", "title": "T20", "active": true, "grant": "ci"},
        ])
    );
}

#[test]
fn a_revoked_grant_loses_its_groups_tabs_rules_and_menu_item() {
    let mut core = paired_with_groups();
    core.sharing_in_group(5);
    core.grants_notice(&[research(), ci()]);
    core.shared_with_research(7);
    core.shared_with_research(8);
    // A tab joining research's group, and a popup of research's.
    core.on_tab_group_changed(tab(9, "https://en.wiki.org/x"), R);
    core.on_tab_created(TabInfo { opener_tab_id: Some(7), ..in_window(10, "", 4) }, NO_GROUP);
    core.rules_taken();
    let (calls, sent) = (core.host.calls.len(), core.host.sent.len());
    core.grants_notice(&[ci()]);
    let made = core.calls_since(calls);
    for id in [7, 8, 9] {
        assert!(made.contains(&ChromeCall::TabsUngroup { tabs: vec![id] }), "{id}: its group dissolved: {made:?}");
    }
    for id in [7, 8] {
        assert!(made.contains(&ChromeCall::DebuggerDetach { tab: id }), "{id}");
        assert_eq!(core.host.badges[&id], Badge::Off);
    }
    let unshared: Vec<Value> =
        core.sent_since(sent).into_iter().filter_map(|f| f.get("user.toggledAttach").cloned()).collect();
    assert_eq!(
        unshared
            .iter()
            .map(|t| (t["tab"]["tabId"].as_i64().unwrap(), t["attached"].as_bool().unwrap()))
            .collect::<Vec<_>>(),
        vec![(7, false), (8, false)]
    );
    assert_eq!(core.rule_updates_since(calls), vec![(vec![1000, 1001, 1002], json!([]))], "its rules removed, once");
    assert!(made.contains(&ChromeCall::MenusRemove { id: "grant:research".into() }));
    assert!(!core.groups.ours.contains_key(&R));
    assert_eq!(core.attached(), vec![5]);
    assert!(core.host.saved_grants.tabs.is_empty() && core.host.saved_grants.grants.len() == 1);
    assert_eq!(core.status().grants.iter().map(|g| g.name.as_str()).collect::<Vec<_>>(), vec!["ci"]);
    // The running attach of tab 9 lets it go; the relay never hears of it.
    core.on_op_done(core.op_of(&ChromeCall::DebuggerAttach { tab: 9 }), Ok("null".into()));
    assert_eq!(core.last_call().1, ChromeCall::DebuggerDetach { tab: 9 });
    assert!(core.announced(9).is_empty());
    // Its name shares nothing any more.
    let calls = core.host.calls.len();
    core.on_menu_clicked("research", tab(11, "https://en.wiki.org/"));
    assert_eq!(core.host.calls.len(), calls);
    core.relay(json!({"tabs.create": {"id": 20, "grant": "research"}}));
    assert!(core.last_sent()["reply"]["error"]["message"].as_str().unwrap().contains("no grant"));
    // A relay from before grants has none.
    let mut core = paired_with_groups();
    core.sharing_in_group(5);
    core.grants_notice(&[research()]);
    core.shared_with_research(7);
    core.on_socket_closed(1006, "");
    core.on_timer(Timer::Reconnect);
    core.on_socket_open();
    core.relay_proves();
    core.relay(json!({"welcome": {"protocolVersion": 5, "relayVersion": "0.1.0"}}));
    assert_eq!(core.attached(), vec![5]);
    assert!(core.status().grants.is_empty());
}

#[test]
fn a_worker_restart_rehydrates_the_grants_groups_and_replaces_the_rules() {
    let research_group =
        GroupInfo { id: R, window_id: Some(1), title: Some("research".into()), color: Some("blue".into()) };
    let facts = StartFacts {
        persisted: vec![PersistedTab { tab_id: 5, group_id: Some(G) }, PersistedTab { tab_id: 7, group_id: Some(R) }],
        debugger_attached: vec![tab(5, "https://example.com/"), tab(7, "https://en.wiki.org/")],
        tabs: vec![
            TabFacts { info: tab(5, "https://example.com/"), group: G },
            TabFacts { info: tab(7, "https://en.wiki.org/"), group: R },
            // A popup of tab 7's, not shared.
            TabFacts { info: in_window(8, "https://en.wiki.org/p", 4), group: NO_GROUP },
            // Put into research's group while the worker was stopped.
            TabFacts { info: tab(9, "https://en.wiki.org/y"), group: R },
        ],
        groups: Ok(vec![
            GroupInfo { id: G, window_id: Some(1), title: Some("Browser Relay".into()), color: Some("orange".into()) },
            research_group,
        ]),
        grants: PersistedGrants {
            grants: vec![grant()],
            windows: vec![GrantWindow { grant: "research".into(), window_id: 3 }],
            tabs: vec![
                GrantTab { tab_id: 7, grant: "research".into() },
                GrantTab { tab_id: 8, grant: "research".into() },
                // Closed while the worker was stopped.
                GrantTab { tab_id: 40, grant: "research".into() },
            ],
        },
        session_rules: vec![1000, 1001, 1002, 4000],
        ..StartFacts::default()
    };
    let mut core = Core::new(FakeHost::default());
    let settings = Settings { port: 18792, token: Some(TOKEN.into()), pairing_code: None, pairing_port: None };
    core.start(settings, environment(), facts);
    let updates = core.rule_updates_since(0);
    assert_eq!(updates[0].0, vec![1000, 1001, 1002, 4000], "whatever an earlier run left goes first");
    assert_eq!(updates[0].1, research_rules(1, &[7, 8]));
    assert_eq!(updates.last().unwrap().1, research_rules(1, &[7, 8, 9]), "the tab joining its group too");
    assert!(core.made(&ChromeCall::MenusRemoveAll));
    assert!(
        core.made(&ChromeCall::MenusCreate {
            id: "grant:research".into(),
            title: "Share this tab with research".into()
        })
    );
    assert!(core.made(&ChromeCall::DebuggerAttach { tab: 9 }), "in research's group: attached again");
    assert_eq!(core.attached(), vec![5, 7]);
    // The hello says whose each shared tab is.
    core.on_socket_open();
    let hello = core.relay_proves();
    let grants: Vec<(i64, Value)> = hello["hello"]["attachedTabs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["tabId"].as_i64().unwrap(), t.get("grant").cloned().unwrap_or(Value::Null)))
        .collect();
    assert_eq!(grants, vec![(5, Value::Null), (7, json!("research"))]);
    core.welcome();
    core.on_op_done(core.op_of(&ChromeCall::DebuggerAttach { tab: 9 }), Ok("null".into()));
    assert_eq!(core.announced(9)[0]["tab"]["grant"], "research");
    // Research's group is research's: renamed, it is named again; a tab
    // dragged out is unshared; its window is used for its next tab.
    core.on_group_updated(GroupInfo { title: Some("mine".into()), ..research_group_info() });
    assert_eq!(
        core.last_call().1,
        ChromeCall::TabGroupsUpdate { group: R, title: "research".into(), color: "blue".into() }
    );
    core.on_tab_group_changed(tab(7, "https://en.wiki.org/"), NO_GROUP);
    assert_eq!(core.announced(7).last().unwrap()["attached"], false);
    core.relay(json!({"tabs.create": {"id": 30, "grant": "research"}}));
    let there = ChromeCall::TabsCreate { url: Some("about:blank".into()), active: true, opener: None, window: Some(3) };
    assert_eq!(core.last_call().1, there);
}

fn research_group_info() -> GroupInfo {
    GroupInfo { id: R, window_id: Some(1), title: Some("research".into()), color: Some("blue".into()) }
}

#[test]
fn share_this_tab_with_a_grant_from_the_toolbar_buttons_menu() {
    let mut core = paired_with_groups();
    core.sharing_in_group(5);
    core.grants_notice(&[research(), ci()]);
    // A tab not shared: attached, then into research's group of its window.
    core.on_menu_clicked("research", tab(7, "https://en.wiki.org/"));
    assert_eq!(core.host.badges[&7], Badge::Connecting);
    let calls = core.host.calls.len();
    core.on_op_done(core.op_of(&ChromeCall::DebuggerAttach { tab: 7 }), Ok("null".into()));
    assert_eq!(core.announced(7)[0]["tab"]["grant"], "research");
    assert_eq!(core.rule_updates_since(calls)[0].1, research_rules(1, &[7]));
    assert!(core.made(&ChromeCall::TabsGroup { tabs: vec![7], group: None }), "not into the person's group");
    core.group_made(7, R);
    assert!(core.made(&ChromeCall::TabGroupsUpdate { group: R, title: "research".into(), color: "blue".into() }));

    // A tab shared with the person: it changes hands (said first) and moves
    // into research's group.
    let sent = core.host.sent.len();
    core.on_menu_clicked("research", tab(5, "https://example.com/"));
    assert_eq!(core.sent_since(sent), vec![json!({"tab.grant": {"tabId": 5, "grant": "research"}})]);
    assert_eq!(core.last_call().1, ChromeCall::TabsGroup { tabs: vec![5], group: Some(R) });
    // Chrome's events for the move: no unshare, no second tab.grant.
    core.on_tab_group_changed(tab(5, "https://example.com/"), R);
    core.on_group_removed(G);
    core.group_joined(5, R);
    assert_eq!(core.sent_since(sent).len(), 1);
    assert_eq!(core.attached(), vec![5, 7]);
    assert!(core.host.saved.contains(&PersistedTab { tab_id: 5, group_id: Some(R) }));
    // From research to ci: a new group of ci's in window 1.
    core.on_menu_clicked("ci", tab(5, "https://example.com/"));
    assert_eq!(core.last_sent(), json!({"tab.grant": {"tabId": 5, "grant": "ci"}}));
    assert_eq!(core.last_call().1, ChromeCall::TabsGroup { tabs: vec![5], group: None });
    core.on_tab_group_changed(tab(5, "https://example.com/"), 92);
    assert_eq!(core.attached(), vec![5, 7], "a group not known yet does not unshare it");
    core.group_made(5, 92);
    assert!(core.made(&ChromeCall::TabGroupsUpdate { group: 92, title: "ci".into(), color: "green".into() }));
    // Restricted pages are refused as ever; the badge says why.
    let calls = core.host.calls.len();
    core.on_menu_clicked("research", tab(9, "chrome://settings/"));
    assert_eq!(core.host.calls.len(), calls);
    assert!(matches!(&core.host.badges[&9], Badge::Error(why) if why.contains("cannot share")));
    // A name the relay never listed does nothing.
    core.on_menu_clicked("nobody", tab(10, "https://example.org/"));
    assert_eq!(core.host.calls.len(), calls);
    // The grant revoked while Chrome attaches: the tab is let go, not
    // shared with the person instead.
    core.on_menu_clicked("ci", tab(11, "https://example.org/"));
    let attach = core.op_of(&ChromeCall::DebuggerAttach { tab: 11 });
    core.grants_notice(&[research()]);
    core.on_op_done(attach, Ok("null".into()));
    assert_eq!(core.last_call().1, ChromeCall::DebuggerDetach { tab: 11 });
    assert!(!core.attached().contains(&11) && core.announced(11).is_empty());
}

// ---- the link, for the grants ---------------------------------------------------

impl Core<FakeHost> {
    /// The relay's status route answers the last question asked of it.
    fn status_route_says(&mut self, body: &str) {
        let (probe, _) = *self.host.probes.last().expect("the status route was asked");
        self.on_relay_status(probe, Ok(body.into()));
    }

    /// Idle, paired, sharing nothing: the status route counts `grants`, the
    /// worker connects, proves the pairing and is welcomed.
    fn connected_for_grants(&mut self) {
        self.on_alarm();
        self.status_route_says(r#"{"connected":false,"grants":2}"#);
        assert_eq!(self.link(), Link::Connecting, "connects for the grants");
        self.on_socket_open();
        let hello = self.relay_proves();
        assert_eq!(hello["hello"]["attachedTabs"], json!([]), "nothing shared");
        self.welcome();
    }
}

#[test]
fn grants_keep_the_link_with_nothing_shared_and_the_last_ones_going_lets_it_go() {
    let mut core = paired_no_groups();
    core.status_route_says(r#"{"connected":false,"grants":0}"#);
    core.share(5);
    core.grants_notice(&[ci()]);
    // The person stops sharing their last tab: ci's agent may still open
    // one, so the link stays, kept alive.
    core.on_action_clicked(tab(5, "https://example.com/"));
    core.on_op_done(core.op_of(&ChromeCall::DebuggerDetach { tab: 5 }), Ok("null".into()));
    assert_eq!((core.link(), core.host.disconnects), (Link::Ready, 0));
    assert_eq!(core.host.timers.get(&Timer::Keepalive), Some(&policy::KEEPALIVE_MS));
    let status = core.status();
    assert_eq!(status.state, "connected");
    assert_eq!(status.detail, "connected to the relay on 127.0.0.1:18792: 1 grant, nothing shared");
    core.on_timer(Timer::Keepalive);
    assert_eq!(core.last_sent(), json!({"ping": {"nonce": 1}}), "the worker is kept alive");
    assert_eq!(core.host.timers.get(&Timer::Keepalive), Some(&policy::KEEPALIVE_MS), "re-armed");
    core.on_alarm();
    assert_eq!(core.host.probes.len(), 1, "connected: the status route is not asked");
    // A grant's agent opens its first tab through the link (Chrome
    // refuses its window here: the relay hears why).
    core.relay(json!({"tabs.create": {"id": 30, "url": "about:blank", "active": false, "grant": "ci"}}));
    assert!(matches!(core.last_call().1, ChromeCall::WindowsCreate { focused: false, .. }));
    core.on_op_done(core.last_call().0, Err("No window".into()));
    assert_eq!(core.last_sent()["reply"]["error"]["message"], "No window");
    // The relay revokes ci, its last grant: the link goes.
    core.grants_notice(&[]);
    assert_eq!((core.link(), core.host.disconnects), (Link::Idle, 1), "no grants, nothing shared");
    for timer in [Timer::Keepalive, Timer::RelayWatch, Timer::Reconnect, Timer::DetachGrace] {
        assert!(!core.host.timers.contains_key(&timer), "{timer:?}");
    }
    assert_eq!(core.status().state, "idle");
    core.on_alarm();
    assert_eq!(core.host.probes.len(), 2, "asked again at the next alarm");
}

#[test]
fn idle_and_paired_the_worker_asks_the_relays_status_route_and_connects_for_its_grants() {
    let mut core = paired_no_groups();
    assert_eq!(core.host.probes, vec![(1, 18792)], "asked at the worker's start");
    // No grants: nothing to connect for.
    core.status_route_says(r#"{"connected":false,"extensionVersion":null,"attachedTabs":0,"grants":0}"#);
    // A relay older than grants counts none.
    core.on_alarm();
    core.status_route_says(r#"{"connected":false,"attachedTabs":0}"#);
    // No relay there: not there. No retry, nothing shown.
    core.on_alarm();
    core.on_relay_status(3, Err("Failed to fetch".into()));
    // Another browser's extension holds the relay (it takes one at a time).
    core.on_alarm();
    core.status_route_says(r#"{"connected":true,"grants":2}"#);
    assert!(core.host.connects.is_empty());
    assert!(core.host.timers.is_empty(), "no retry: {:?}", core.host.timers);
    assert!(core.host.badges.is_empty());
    let status = core.status();
    assert_eq!((status.state, status.error), ("idle", None));
    assert_eq!(status.detail, "no tab is shared: click the toolbar icon on a tab");
    // One question at a time; a late answer to an old one changes nothing.
    core.on_alarm();
    core.on_alarm();
    assert_eq!(core.host.probes.len(), 5);
    core.on_relay_status(4, Ok(r#"{"connected":false,"grants":2}"#.into()));
    assert!(core.host.connects.is_empty());
    // Grants counted: the worker connects, and keeps the link until the
    // relay's notice, which lists them.
    core.status_route_says(r#"{"connected":false,"grants":2}"#);
    assert_eq!(core.host.connects[0].0, "ws://127.0.0.1:18792/extension");
    core.on_socket_open();
    core.relay_proves();
    core.welcome();
    assert_eq!((core.link(), core.host.disconnects), (Link::Ready, 0), "held for the notice that follows");
    let calls = core.host.calls.len();
    core.grants_notice(&[research(), ci()]);
    assert!(core.calls_since(calls).contains(&ChromeCall::MenusCreate {
        id: "grant:research".into(),
        title: "Share this tab with research".into()
    }));
    assert_eq!(core.link(), Link::Ready);
    assert_eq!(core.status().detail, "connected to the relay on 127.0.0.1:18792: 2 grants, nothing shared");
    core.on_timer(Timer::Keepalive);
    assert_eq!(core.last_sent(), json!({"ping": {"nonce": 1}}));

    // An unpaired worker asks nothing.
    let mut core = Core::new(FakeHost::default());
    core.start(Settings::default(), environment(), StartFacts::default());
    core.on_alarm();
    assert!(core.host.probes.is_empty());
    // A pairing with a worker sharing tabs: they connect; nothing is asked.
    let mut core = paired_no_groups();
    core.share(5);
    core.status_route_says(r#"{"connected":false,"grants":2}"#);
    core.on_socket_closed(1006, "");
    core.on_alarm();
    assert_eq!(core.host.probes.len(), 1, "only the start's");
    assert_eq!(core.host.connects.len(), 2, "the alarm reconnects the shared tab");
    // A new pairing asks at once; an answer for the old one is not its.
    let mut core = paired_no_groups();
    core.on_settings(Settings { port: 4000, token: Some(TOKEN.into()), pairing_code: None, pairing_port: None });
    assert_eq!(core.host.probes, vec![(1, 18792), (2, 4000)]);
    core.on_relay_status(1, Ok(r#"{"connected":false,"grants":2}"#.into()));
    assert!(core.host.connects.is_empty());
    core.status_route_says(r#"{"connected":false,"grants":1}"#);
    assert_eq!(core.host.connects[0].0, "ws://127.0.0.1:4000/extension");
}

#[test]
fn a_relay_that_counts_grants_and_lists_none_is_let_go() {
    // Its notice lists none (revoked meanwhile).
    let mut core = paired_no_groups();
    core.connected_for_grants();
    core.grants_notice(&[]);
    assert_eq!((core.link(), core.host.disconnects), (Link::Idle, 1));
    // No notice at all by the next watch: as if it listed none.
    let mut core = paired_no_groups();
    core.connected_for_grants();
    core.on_timer(Timer::RelayWatch);
    assert_eq!((core.link(), core.host.disconnects), (Link::Idle, 1));
    assert!(!core.host.timers.contains_key(&Timer::RelayWatch));
    assert_eq!(core.status().error, None);
    // A relay that welcomes as one older than grants has none.
    let mut core = paired_no_groups();
    core.on_alarm();
    core.status_route_says(r#"{"connected":false,"grants":2}"#);
    core.on_socket_open();
    core.relay_proves();
    core.relay(json!({"welcome": {"protocolVersion": 5, "relayVersion": "0.1.0"}}));
    assert_eq!((core.link(), core.host.disconnects), (Link::Idle, 1));
}

#[test]
fn the_relay_going_away_while_only_grants_held_the_link_is_asked_for_again_at_the_next_alarm() {
    let mut core = paired_no_groups();
    core.connected_for_grants();
    core.grants_notice(&[ci()]);
    let probes = core.host.probes.len();
    core.on_socket_closed(1006, "");
    assert_eq!(core.link(), Link::Idle);
    // No tabs to keep: no grace, and no backoff loop.
    for timer in [Timer::DetachGrace, Timer::Reconnect, Timer::Keepalive, Timer::RelayWatch] {
        assert!(!core.host.timers.contains_key(&timer), "{timer:?}");
    }
    assert!(core.host.badges.is_empty());
    assert_eq!(core.host.connects.len(), 1);
    // The next alarm asks the status route again; the relay is not there.
    core.on_alarm();
    assert_eq!(core.host.probes.len(), probes + 1);
    core.status_route_says_nothing();
    assert_eq!(core.host.connects.len(), 1);
    assert!(core.host.timers.is_empty(), "{:?}", core.host.timers);
    // It is back, with its grant: connected again.
    core.on_alarm();
    core.status_route_says(r#"{"connected":false,"grants":1}"#);
    assert_eq!(core.host.connects.len(), 2);

    // A grant's link that a tab then shares follows the tab's rules: the
    // grace and the backoff, as ever.
    let mut core = paired_no_groups();
    core.connected_for_grants();
    core.grants_notice(&[ci()]);
    core.share(5);
    assert_eq!(core.host.connects.len(), 1, "the link held for the grants carries the share");
    assert_eq!(core.last_sent()["user.toggledAttach"]["attached"], true);
    core.on_socket_closed(1006, "");
    assert_eq!(core.host.timers.get(&Timer::Reconnect), Some(&1000));
    assert_eq!(core.host.timers.get(&Timer::DetachGrace), Some(&policy::DETACH_GRACE_MS));
}

impl Core<FakeHost> {
    /// The status route's question fails (no relay listening).
    fn status_route_says_nothing(&mut self) {
        let (probe, _) = *self.host.probes.last().expect("the status route was asked");
        self.on_relay_status(probe, Err("Failed to fetch".into()));
    }
}
