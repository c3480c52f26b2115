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
//! [`Core`] and what it holds are in `machine.rs`; the [`Host`] and what
//! passes between the two (the calls, tagged by an [`OpId`]) in `host.rs`.
//! Each concern adds its own `impl Core`: `link.rs`, the link to the relay;
//! `calls.rs`, the relay's calls and the outcomes of `chrome.*` calls;
//! `tabs.rs`, what is shared; `groups.rs`, `grants.rs`, `rules.rs`,
//! `person.rs`, `versions.rs` as below (what `groups.rs`, `grants.rs` and
//! `person.rs` keep is in `tab_groups.rs`, `grant_record.rs` and
//! `in_the_loop.rs`); `policy.rs`, the fixed rules.
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
mod grant_record;
mod grants;
mod groups;
mod host;
mod in_the_loop;
mod link;
mod machine;
mod op_id;
mod person;
mod policy;
mod rules;
mod tab_groups;
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

pub use grant_record::{GrantStatus, MENU_PREFIX, menu_id, window_from_chrome};
pub use host::{
    ChromeCall, Environment, GrantTab, GrantWindow, GroupId, GroupInfo, Host, NO_GROUP, NO_TAB_GROUPS, Owner,
    PersistedGrants, PersistedTab, Settings, StartFacts, TabFacts, Timer, group_from_chrome, groups_from_chrome,
    tab_info_from_chrome, tabs_from_chrome,
};
pub use in_the_loop::DONE_MENU_PREFIX;
pub use machine::{Core, Link, SharedTab, Status};
pub use op_id::OpId;
pub use policy::Badge;
pub use rules::{HeaderChange, RESOURCE_TYPES, RULES_PER_GRANT, RuleAction, RuleCondition, SessionRule};
pub use tab_groups::{GROUP_COLOR, GROUP_TITLE, TabGroupsStatus};
pub use versions::VersionsStatus;
