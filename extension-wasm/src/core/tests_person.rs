//! The person in the loop (`person.rs`): the relay's questions and a
//! grant's handoffs, driven with the recording host of `tests.rs`.

use serde_json::{Value, json};
use shared_protocol::{GrantGroup, TabId};

use super::tests::{FakeHost, TOKEN, environment, tab};
use super::tests_grants::{R, ci, research};
use super::tests_groups::{G, paired_with_groups};
use super::*;

const SIGN_IN: &str = "research needs you: sign in to the library";

/// Tab 5 shared with the person (group `G`), tab 7 with research (group
/// `R`), both in window 1, the relay connected.
fn sharing_with_research() -> Core<FakeHost> {
    let mut core = paired_with_groups();
    core.sharing_in_group(5);
    core.grants_notice(&[research(), ci()]);
    core.shared_with_research(7);
    core
}

fn ask(id: u64) -> Value {
    json!({"ask": {
        "id": id,
        "grant": "research",
        "tabId": 7,
        "title": "research wants to submit a form",
        "message": "research wants to submit the form \"Checkout\" on shop.example.com",
    }})
}

fn ask_notification(id: u64) -> ChromeCall {
    ChromeCall::NotificationsCreate {
        id: format!("ask-{id}"),
        title: "research wants to submit a form".into(),
        message: "research wants to submit the form \"Checkout\" on shop.example.com".into(),
        buttons: vec!["Allow".into(), "Deny".into()],
    }
}

fn clear(id: &str) -> ChromeCall {
    ChromeCall::NotificationsClear { id: id.into() }
}

fn handoff(tab: TabId, grant: &str, reason: &str) -> Value {
    json!({"handoff": {"tabId": tab, "grant": grant, "reason": reason}})
}

fn research_titled(title: &str) -> ChromeCall {
    ChromeCall::TabGroupsUpdate { group: R, title: title.into(), color: "blue".into() }
}

fn done_menu() -> ChromeCall {
    ChromeCall::MenusCreate { id: "handoff:7".into(), title: "Done: give the tab back to research".into() }
}

fn answers(core: &Core<FakeHost>) -> Vec<Value> {
    core.sent_json().into_iter().filter_map(|f| f.get("ask.answer").cloned()).collect()
}

fn dones(core: &Core<FakeHost>) -> Vec<Value> {
    core.sent_json().into_iter().filter_map(|f| f.get("handoff.done").cloned()).collect()
}

impl Core<FakeHost> {
    /// Tab 7 handed to the person ("sign in to the library"), Chrome
    /// bringing it to the front.
    fn handed_over(&mut self) {
        self.relay(handoff(7, "research", "sign in to the library"));
        let front = ChromeCall::TabsUpdate { tab: 7, url: None, active: Some(true) };
        let moved = json!({"id": 7, "windowId": 1, "url": "https://en.wiki.org/", "title": "T7", "active": true});
        self.on_op_done(self.op_of(&front), Ok(moved.to_string()));
    }
}

// ---- questions ---------------------------------------------------------------

#[test]
fn an_ask_shows_a_notification_with_allow_and_deny_and_a_click_answers_the_relay_and_clears_it() {
    let mut core = sharing_with_research();
    let (calls, sent) = (core.host.calls.len(), core.host.sent.len());
    core.relay(ask(3));
    assert_eq!(core.calls_since(calls), vec![ask_notification(3)], "a notification, nothing else");
    assert_eq!(core.host.sent.len(), sent, "the extension decides nothing: it shows");

    // Allow: the relay hears it, the notification goes.
    let calls = core.host.calls.len();
    core.on_notification_button("ask-3", 0);
    assert_eq!(answers(&core), vec![json!({"id": 3, "answer": "allow"})]);
    assert_eq!(core.calls_since(calls), vec![clear("ask-3")]);
    // A click that was on its way answers nothing more.
    core.on_notification_button("ask-3", 1);
    assert_eq!(answers(&core).len(), 1);

    // Deny.
    core.relay(ask(4));
    let calls = core.host.calls.len();
    core.on_notification_button("ask-4", 1);
    assert_eq!(answers(&core)[1], json!({"id": 4, "answer": "deny"}));
    assert_eq!(core.calls_since(calls), vec![clear("ask-4")]);

    // No third button, and the body or closing it answers nothing (there
    // is no listener for them: the relay's other surfaces and its
    // deadline decide).
    core.relay(ask(5));
    let calls = core.host.calls.len();
    core.on_notification_button("ask-5", 2);
    core.on_notification_button("someone-elses-5", 0);
    assert_eq!(answers(&core).len(), 2);
    assert_eq!(core.host.calls.len(), calls);

    // Asked only by a relay that proved the pairing and welcomed us.
    core.on_socket_closed(1006, "");
    let calls = core.host.calls.len();
    core.relay(ask(6));
    assert!(!core.calls_since(calls).contains(&ask_notification(6)));
}

#[test]
fn ask_closed_clears_its_notification() {
    let mut core = sharing_with_research();
    core.relay(ask(3));
    core.relay(ask(4));
    let calls = core.host.calls.len();
    core.relay(json!({"ask.closed": {"id": 3}}));
    assert_eq!(core.calls_since(calls), vec![clear("ask-3")]);
    // Answered elsewhere: a click that comes after answers nothing.
    core.on_notification_button("ask-3", 0);
    assert!(answers(&core).is_empty());
    // One the extension never showed: nothing to clear.
    let calls = core.host.calls.len();
    core.relay(json!({"ask.closed": {"id": 99}}));
    assert_eq!(core.host.calls.len(), calls);
    core.on_notification_button("ask-4", 0);
    assert_eq!(answers(&core), vec![json!({"id": 4, "answer": "allow"})]);
}

#[test]
fn the_link_going_clears_every_questions_notification() {
    let mut core = sharing_with_research();
    core.relay(ask(3));
    core.relay(ask(4));
    core.relay(ask(5));
    core.on_notification_button("ask-5", 0);
    let calls = core.host.calls.len();
    core.on_socket_closed(1006, "");
    let made = core.calls_since(calls);
    assert!(made.contains(&clear("ask-3")) && made.contains(&clear("ask-4")), "{made:?}");
    assert!(!made.contains(&clear("ask-5")), "answered, already gone: {made:?}");
    // A click on its way when the link went answers nobody; the relay
    // that comes back did not ask it.
    core.on_timer(Timer::Reconnect);
    core.on_socket_open();
    core.relay_proves();
    core.welcome();
    core.on_notification_button("ask-3", 0);
    assert_eq!(answers(&core).len(), 1);
    assert_eq!(core.last_call().1, clear("ask-3"));

    // The settings changing (another relay) and the link let go (nothing
    // shared, no grants) take them too.
    core.relay(ask(6));
    let calls = core.host.calls.len();
    core.on_settings(Settings { port: 18793, token: Some(TOKEN.into()), pairing_code: None, pairing_port: None });
    assert!(core.calls_since(calls).contains(&clear("ask-6")));
}

// ---- handoffs ----------------------------------------------------------------

#[test]
fn a_handoff_brings_the_tab_to_the_front_retitles_its_group_badges_it_and_offers_done() {
    let mut core = sharing_with_research();
    let (calls, sent) = (core.host.calls.len(), core.host.sent.len());
    core.relay(handoff(7, "research", "sign in to the library"));
    assert_eq!(
        core.calls_since(calls),
        vec![
            ChromeCall::TabsUpdate { tab: 7, url: None, active: Some(true) },
            research_titled(SIGN_IN),
            ChromeCall::NotificationsCreate {
                id: "handoff-7".into(),
                title: "research needs you".into(),
                message: "sign in to the library".into(),
                buttons: vec!["Done".into()],
            },
            done_menu(),
        ],
        "the group keeps its colour"
    );
    assert_eq!(core.host.badges[&7], Badge::Handoff(SIGN_IN.into()));
    assert_eq!(core.host.badges[&7].text(), "?");
    assert!(core.host.titles[&7].contains(SIGN_IN), "{}", core.host.titles[&7]);
    assert_eq!(core.host.badges[&5], Badge::On, "the person's own tab is untouched");
    assert_eq!(core.host.sent.len(), sent, "nothing is said to the relay");
    // Then its window comes to the front (the grant's own window, where
    // Chrome says the tab is).
    let front = core.op_of(&ChromeCall::TabsUpdate { tab: 7, url: None, active: Some(true) });
    let moved = json!({"id": 7, "windowId": 3, "url": "https://en.wiki.org/", "title": "T7", "active": true});
    core.on_op_done(front, Ok(moved.to_string()));
    assert_eq!(core.last_call().1, ChromeCall::WindowsUpdate { window: 3, focused: Some(true) });
    let status = serde_json::to_value(core.status()).unwrap();
    assert_eq!(status["tabs"][1]["needsYou"], SIGN_IN, "and the options page");
    assert!(status["tabs"][0].get("needsYou").is_none());

    // The new title is ours: Chrome's event for it changes nothing, and
    // the group stays research's (no unshare, no dissolving).
    let calls = core.host.calls.len();
    let titled = GroupInfo { id: R, window_id: Some(3), title: Some(SIGN_IN.into()), color: Some("blue".into()) };
    core.on_group_updated(titled.clone());
    assert_eq!(core.host.calls.len(), calls);
    assert_eq!(core.attached(), vec![5, 7]);
    assert_eq!(core.status().tabs[1].grant.as_deref(), Some("research"));
    // The person renaming it meanwhile: it says what it says again.
    core.on_group_updated(GroupInfo { title: Some("mine".into()), ..titled.clone() });
    assert_eq!(core.calls_since(calls), vec![research_titled(SIGN_IN)]);
    // Dragged to another window as Chrome tells it (removed, its tab out
    // and into the same id there, created there): it stays research's and
    // keeps its title.
    let calls = core.host.calls.len();
    core.on_group_removed(R);
    core.on_tab_group_changed(tab(7, "https://en.wiki.org/"), NO_GROUP);
    core.on_tab_group_changed(tab(7, "https://en.wiki.org/"), R);
    core.on_group_appeared(GroupInfo { window_id: Some(2), ..titled.clone() });
    core.on_timer(Timer::GroupMove);
    assert_eq!(core.attached(), vec![5, 7]);
    assert_eq!(core.host.calls.len(), calls, "{:?}", core.calls_since(calls));
    // Re-created under a new id, it is recognised by that title, and keeps it.
    core.on_group_removed(R);
    core.on_group_appeared(GroupInfo { id: 90, window_id: Some(1), ..titled });
    core.on_tab_group_changed(tab(7, "https://en.wiki.org/"), 90);
    assert_eq!(core.attached(), vec![5, 7]);
    let made = core.calls_since(calls);
    assert!(
        made.iter().all(|c| matches!(c, ChromeCall::TabGroupsUpdate { title, .. } if title == SIGN_IN)),
        "{made:?}"
    );

    // A new reason updates what is shown; the menu item is there already.
    let long = "solve the puzzle on this page, then wait for the next page to load fully";
    let calls = core.host.calls.len();
    core.relay(handoff(7, "research", long));
    let made = core.calls_since(calls);
    let cut = "research needs you: solve the puzzle on this page, then wai…";
    assert_eq!(cut.chars().count(), in_the_loop::HANDOFF_TITLE_CHARS);
    assert!(made.contains(&ChromeCall::TabGroupsUpdate { group: 90, title: cut.into(), color: "blue".into() }));
    assert!(!made.contains(&done_menu()), "{made:?}");
    assert_eq!(core.host.badges[&7], Badge::Handoff(format!("research needs you: {long}")), "uncut on the badge");
}

#[test]
fn done_in_the_notification_or_the_menu_answers_handoff_done() {
    let mut core = sharing_with_research();
    core.handed_over();
    let calls = core.host.calls.len();
    core.on_notification_button("handoff-7", 0);
    assert_eq!(dones(&core), vec![json!({"tabId": 7})]);
    core.on_done_clicked(7);
    assert_eq!(dones(&core), vec![json!({"tabId": 7}), json!({"tabId": 7})], "the menu item says the same");
    // The relay ends the handoff (`handoff.end`): until then it is shown.
    assert_eq!(core.host.calls.len(), calls);
    assert_eq!(core.host.badges[&7], Badge::Handoff(SIGN_IN.into()));
    // Chrome replaced the tab (prerendering): Done, in either, names the
    // tab as it is now.
    core.on_tab_replaced(17, 7);
    core.on_notification_button("handoff-7", 0);
    core.on_done_clicked(7);
    assert_eq!(dones(&core)[2..], [json!({"tabId": 17}), json!({"tabId": 17})]);
    assert_eq!(core.host.badges[&17], Badge::Handoff(SIGN_IN.into()));
    let calls = core.host.calls.len();
    // Done of a handoff the core does not know (an earlier link's) says
    // nothing and takes what is left away.
    core.on_done_clicked(9);
    core.on_notification_button("handoff-9", 0);
    assert_eq!(dones(&core).len(), 4);
    assert_eq!(core.calls_since(calls), vec![ChromeCall::MenusRemove { id: "handoff:9".into() }, clear("handoff-9")]);
}

#[test]
fn handoff_end_restores_title_and_badge_and_clears_the_notification_and_the_menu_item() {
    let mut core = sharing_with_research();
    core.handed_over();
    let calls = core.host.calls.len();
    core.relay(json!({"handoff.end": {"tabId": 7}}));
    assert_eq!(
        core.calls_since(calls),
        vec![clear("handoff-7"), ChromeCall::MenusRemove { id: "handoff:7".into() }, research_titled("research")]
    );
    assert_eq!(core.host.badges[&7], Badge::On);
    assert!(core.status().tabs[1].needs_you.is_none());
    // Over: its name is research's again, and Done answers nothing.
    let calls = core.host.calls.len();
    core.on_group_updated(research_group());
    assert_eq!(core.host.calls.len(), calls);
    core.relay(json!({"handoff.end": {"tabId": 7}}));
    assert_eq!(core.host.calls.len(), calls, "ended once");
    core.on_notification_button("handoff-7", 0);
    assert!(dones(&core).is_empty());

    // Two tabs of the group handed over: it shows the latest, then the
    // other's until that ends too.
    core.on_tab_group_changed(tab(9, "https://en.wiki.org/y"), R);
    core.on_op_done(core.op_of(&ChromeCall::DebuggerAttach { tab: 9 }), Ok("null".into()));
    core.handed_over();
    core.relay(handoff(9, "research", "solve the CAPTCHA"));
    assert_eq!(core.last_call().1, done_menu_of(9));
    core.relay(json!({"handoff.end": {"tabId": 9}}));
    assert_eq!(core.last_call().1, research_titled(SIGN_IN));
    assert_eq!(core.host.badges[&7], Badge::Handoff(SIGN_IN.into()));
    assert_eq!(core.host.badges[&9], Badge::On);
}

fn done_menu_of(tab: TabId) -> ChromeCall {
    ChromeCall::MenusCreate { id: format!("handoff:{tab}"), title: "Done: give the tab back to research".into() }
}

fn research_group() -> GroupInfo {
    GroupInfo { id: R, window_id: Some(1), title: Some("research".into()), color: Some("blue".into()) }
}

#[test]
fn a_handoff_of_a_tab_not_shared_with_that_grant_does_nothing() {
    let mut core = sharing_with_research();
    core.grants_notice(&[research(), ci(), json!({"name": "other", "color": "red", "sites": []})]);
    let (calls, sent) = (core.host.calls.len(), core.host.sent.len());
    // The person's own tab, another grant's, a tab not shared, a grant
    // the relay never listed.
    core.relay(handoff(5, "research", "x"));
    core.relay(handoff(7, "other", "x"));
    core.relay(handoff(11, "research", "x"));
    core.relay(handoff(7, "nobody", "x"));
    assert_eq!(core.host.calls.len(), calls, "{:?}", core.calls_since(calls));
    assert_eq!(core.host.sent.len(), sent);
    assert_eq!(core.host.badges[&5], Badge::On);
    assert_eq!(core.host.badges[&7], Badge::On);
    assert_eq!(core.host.logs.len(), 4, "each is logged: {:?}", core.host.logs);
    assert!(core.host.logs[0].contains("tab 5") && core.host.logs[0].contains("shared with the person"));
    assert!(core.host.logs[1].contains("shared with research"));
    assert!(core.host.logs[2].contains("not shared"));
}

#[test]
fn a_handoff_ends_when_its_tab_is_no_longer_the_grants_or_the_link_goes() {
    // Dragged out of research's group: unshared, and the handoff's
    // notification and menu item go; the group is named research's again.
    let mut core = sharing_with_research();
    core.shared_with_research(9);
    core.handed_over();
    let calls = core.host.calls.len();
    core.on_tab_group_changed(tab(7, "https://en.wiki.org/"), NO_GROUP);
    let made = core.calls_since(calls);
    for call in [clear("handoff-7"), ChromeCall::MenusRemove { id: "handoff:7".into() }, research_titled("research")] {
        assert!(made.contains(&call), "{call:?} in {made:?}");
    }
    assert_eq!(core.host.badges[&7], Badge::Off);

    // Moved into the person's group: the same.
    core.relay(handoff(9, "research", "sign in"));
    let calls = core.host.calls.len();
    core.on_tab_group_changed(tab(9, "https://en.wiki.org/"), G);
    assert!(core.calls_since(calls).contains(&clear("handoff-9")));
    assert_eq!(core.host.badges[&9], Badge::On);

    // The relay going: it re-sends nothing, so nothing is left showing.
    let mut core = sharing_with_research();
    core.handed_over();
    let calls = core.host.calls.len();
    core.on_socket_closed(1006, "");
    let made = core.calls_since(calls);
    for call in [clear("handoff-7"), ChromeCall::MenusRemove { id: "handoff:7".into() }, research_titled("research")] {
        assert!(made.contains(&call), "{call:?} in {made:?}");
    }
    assert!(matches!(core.host.badges[&7], Badge::Error(_)), "as every shared tab's while the relay is away");

    // Closed: the same.
    let mut core = sharing_with_research();
    core.handed_over();
    let calls = core.host.calls.len();
    core.on_tab_removed(7);
    assert!(core.calls_since(calls).contains(&clear("handoff-7")));
}

#[test]
fn a_worker_restart_during_a_handoff_leaves_the_group_the_grants_under_its_name() {
    let grant: GrantGroup = serde_json::from_value(research()).unwrap();
    let titled = GroupInfo { id: R, window_id: Some(1), title: Some(SIGN_IN.into()), color: Some("blue".into()) };
    let facts = StartFacts {
        persisted: vec![PersistedTab { tab_id: 5, group_id: Some(G) }, PersistedTab { tab_id: 7, group_id: Some(R) }],
        debugger_attached: vec![tab(5, "https://example.com/"), tab(7, "https://en.wiki.org/")],
        tabs: vec![
            TabFacts { info: tab(5, "https://example.com/"), group: G },
            TabFacts { info: tab(7, "https://en.wiki.org/"), group: R },
        ],
        groups: Ok(vec![
            GroupInfo { id: G, window_id: Some(1), title: Some("Browser Relay".into()), color: Some("orange".into()) },
            titled.clone(),
        ]),
        grants: PersistedGrants {
            grants: vec![grant],
            windows: vec![],
            tabs: vec![GrantTab { tab_id: 7, grant: "research".into() }],
        },
        notifications: vec!["handoff-7".into(), "ask-3".into(), "another-extensions".into()],
        ..StartFacts::default()
    };
    let mut core = Core::new(FakeHost::default());
    let settings = Settings { port: 18792, token: Some(TOKEN.into()), pairing_code: None, pairing_port: None };
    core.start(settings, environment(), facts);
    // Still research's, shared, under its name again; nothing dissolved.
    assert_eq!(core.attached(), vec![5, 7]);
    assert!(core.made(&research_titled("research")));
    assert!(!core.host.calls.iter().any(|(_, c)| matches!(c, ChromeCall::TabsUngroup { .. })));
    assert!(!core.host.calls.iter().any(|(_, c)| matches!(c, ChromeCall::DebuggerDetach { .. })));
    assert!(!core.made(&ChromeCall::TabGroupsUpdate {
        group: G,
        title: "Browser Relay".into(),
        color: "orange".into()
    }));
    // What the earlier run showed goes; what is not ours stays.
    assert!(core.made(&clear("handoff-7")) && core.made(&clear("ask-3")));
    assert!(!core.made(&clear("another-extensions")));
    // Its menu items are made again: research's, no Done.
    assert!(core.made(&ChromeCall::MenusRemoveAll));
    assert!(!core.made(&done_menu()));
    assert_eq!(core.host.badges[&7], Badge::Connecting);
    // The hello says tab 7 is research's; Chrome's event for the name
    // changes nothing; its group's tabs are its members.
    core.on_socket_open();
    let hello = core.relay_proves();
    assert_eq!(hello["hello"]["attachedTabs"][1]["grant"], "research");
    core.welcome();
    assert_eq!(core.host.badges[&7], Badge::On);
    let calls = core.host.calls.len();
    core.on_group_updated(research_group());
    assert_eq!(core.host.calls.len(), calls);
    // Before that event, Chrome's for the title the handoff left would have
    // been named again: the group is research's whatever its title says.
    core.on_group_updated(titled);
    assert_eq!(core.last_call().1, research_titled("research"));
    // A click on Done the earlier run left answers nothing.
    core.on_done_clicked(7);
    assert!(dones(&core).is_empty());
    core.on_tab_group_changed(tab(7, "https://en.wiki.org/"), NO_GROUP);
    assert_eq!(core.toggled().last(), Some(&(7, false)), "a member of research's group");
}
