//! The calls: the relay's commands (CDP forwarded to a shared tab, the
//! allow-listed `chrome.tabs` and `chrome.windows` calls) and their answers,
//! in Chrome's order with Chrome's CDP error codes; the outcome of every
//! `chrome.*` call the core made, routed by why it was made; and the
//! debugger's events, forwarded for shared tabs only. Its rules, with their
//! tests, are in the core's module doc.

use serde::Deserialize;
use shared_protocol::{
    CallError, CallId, ExtensionMessage, RelayMessage, Reply, TabId, TabInfo, TabQuery, encode, layout,
};

use super::host::{ChromeCall, Host, tab_info_from_chrome};
use super::machine::{Core, Link, Purpose, SHARING_STOPPED};
use super::op_id::OpId;
use super::policy;

impl<H: Host> Core<H> {
    pub(super) fn on_relay_call(&mut self, call: RelayMessage<'_>) {
        match call {
            RelayMessage::DebuggerAttach { id, tab_id } => {
                self.start_call(Purpose::RelayAttachCheck(id, tab_id), ChromeCall::TabsGet { tab: tab_id });
            }
            RelayMessage::DebuggerDetach { id, tab_id } => {
                self.start_call(Purpose::RelayDetach(id, tab_id), ChromeCall::DebuggerDetach { tab: tab_id });
            }
            RelayMessage::DebuggerSendCommand(command) => {
                if !self.attached.contains_key(&command.tab_id) {
                    let message = format!("tab {} is not shared with Browser Relay", command.tab_id);
                    return self.reply(true, command.id, Err(message));
                }
                self.start_call(
                    Purpose::Relay(command.id),
                    ChromeCall::DebuggerSendCommand {
                        tab: command.tab_id,
                        session: command.session_id.map(|s| s.into_owned()),
                        method: command.method.into_owned(),
                        params: command.params.map(|p| p.get().to_string()),
                    },
                );
            }
            RelayMessage::TabsCreate { id, url, grant: Some(grant), .. } => self.create_grant_tab(id, url, grant),
            RelayMessage::TabsCreate { id, url, active, opener_tab_id, grant: None } => {
                let call = ChromeCall::TabsCreate { url, active, opener: opener_tab_id, window: None };
                self.start_call(Purpose::RelayTab(id), call);
            }
            RelayMessage::TabsRemove { id, tab_id } => {
                let all = TabQuery::default();
                self.start_call(Purpose::RelayRemoveCheck(id, tab_id), ChromeCall::TabsQuery { query: all });
            }
            RelayMessage::TabsUpdate { id, tab_id, url, active } => {
                self.start_call(Purpose::RelayTab(id), ChromeCall::TabsUpdate { tab: tab_id, url, active });
            }
            RelayMessage::TabsQuery { id, query } => {
                self.start_call(Purpose::RelayTabs(id), ChromeCall::TabsQuery { query });
            }
            RelayMessage::WindowsUpdate { id, window_id, focused } => {
                self.start_call(Purpose::Relay(id), ChromeCall::WindowsUpdate { window: window_id, focused });
            }
            RelayMessage::Ask { id, title, message, .. } => self.on_ask(id, title, message),
            RelayMessage::AskClosed { id } => self.on_ask_closed(id),
            RelayMessage::Handoff { tab_id, grant, reason } => self.on_handoff(tab_id, grant, reason),
            RelayMessage::HandoffEnd { tab_id } => self.end_handoff(tab_id),
            RelayMessage::Challenge { .. }
            | RelayMessage::Welcome { .. }
            | RelayMessage::Ping { .. }
            | RelayMessage::Pong { .. }
            | RelayMessage::Clients { .. }
            | RelayMessage::Grants { .. } => {}
        }
    }

    /// Answers a relay call. Chrome's debugger errors arrive as the JSON of
    /// the CDP error; they are passed on with their code.
    pub(super) fn reply(&mut self, current: bool, call: CallId, outcome: Result<String, String>) {
        if !current || self.link != Link::Ready {
            return;
        }
        let frame = match outcome {
            Ok(json) => layout::encode_reply(call, if json.is_empty() { "null" } else { &json }),
            Err(message) => {
                #[derive(Deserialize)]
                struct CdpError {
                    code: i64,
                    message: String,
                }
                let error = match serde_json::from_str::<CdpError>(&message) {
                    Ok(cdp) => CallError { message: cdp.message, code: Some(cdp.code) },
                    Err(_) => CallError { message, code: None },
                };
                encode(&ExtensionMessage::Reply(Reply { id: call, result: None, error: Some(error) }))
            }
        };
        self.host.send(frame);
    }

    /// A command forwarded for the relay (`chrome.debugger.sendCommand`)
    /// finished: Chrome's result as JSON text (`{}` when none), passed on
    /// unread, or Chrome's error.
    pub fn on_answer(&mut self, op: OpId, outcome: Result<H::Json, String>) {
        let Some((purpose, generation)) = self.pending.remove(&op) else { return };
        let Purpose::Relay(call) = purpose else { return };
        // Relay calls are answered only on the connection that made them.
        let current = generation == self.link_generation;
        match outcome {
            Ok(answer) if current && self.link == Link::Ready => {
                self.host.send_framed(layout::reply_head(call), answer);
                self.leave_if_backed_up();
            }
            Ok(_) => {}
            Err(message) => self.reply(current, call, Err(message)),
        }
    }

    /// A `chrome.*` call finished: its result as JSON (`null` when none), or
    /// Chrome's error message.
    pub fn on_op_done(&mut self, op: OpId, outcome: Result<String, String>) {
        let Some((purpose, generation)) = self.pending.remove(&op) else { return };
        // Relay calls are answered only on the connection that made them.
        let current = generation == self.link_generation;
        // An attach the user withdrew when they stopped sharing every tab.
        let withdrawn = match &purpose {
            Purpose::UserAttach(tab) | Purpose::RelayAttach(_, tab) => self.withdrawn.remove(&tab.tab_id),
            Purpose::RelayAttachCheck(_, tab) => self.withdrawn.remove(tab),
            _ => false,
        };
        match purpose {
            Purpose::Relay(call) => self.reply(current, call, outcome),
            Purpose::RelayTab(call) => {
                let outcome = outcome.and_then(|json| self.tab_answer(&json));
                self.reply(current, call, outcome);
            }
            Purpose::RelayTabs(call) => {
                let outcome = outcome.and_then(|json| self.tabs_answer(&json));
                self.reply(current, call, outcome);
            }
            // The relay that asked is gone: act for it no further.
            // A tab put into our group meanwhile waited for this attach:
            // it attaches itself.
            Purpose::RelayAttachCheck(call, _) if withdrawn => self.reply(current, call, Err(SHARING_STOPPED.into())),
            Purpose::RelayAttachCheck(_, tab) if !current => self.resume_joining(tab),
            Purpose::RelayRemoveCheck(..) if !current => {}
            Purpose::RelayAttachCheck(call, id) => self.on_relay_attach_looked_at(current, call, id, outcome),
            Purpose::RelayAttach(call, tab) if withdrawn => {
                self.attach_withdrawn(tab.tab_id, outcome.is_ok());
                self.reply(current, call, Err(SHARING_STOPPED.into()));
            }
            Purpose::RelayAttach(call, tab) => self.on_relay_attached(current, call, tab, outcome),
            Purpose::RelayDetach(call, tab) => {
                self.remove_attached(tab);
                self.reply(current, call, outcome.map(|_| "null".into()));
                self.maybe_idle();
            }
            Purpose::RelayRemoveCheck(call, tab) => self.on_tabs_counted(current, call, tab, outcome),
            Purpose::PairingCheck(tab) => self.on_pairing_read(tab, outcome),
            Purpose::UserAttach(tab) if withdrawn => {
                self.attach_withdrawn(tab.tab_id, outcome.is_ok());
            }
            Purpose::UserAttach(tab) => self.on_user_attached(tab, outcome),
            // Already unshared on our side; an error means Chrome had
            // already detached it.
            Purpose::UserDetach(_) => self.maybe_idle(),
            Purpose::GroupAttach(tab) => self.on_group_attach_done(tab, outcome),
            Purpose::GroupCreate(tab, window, owner) => self.on_group_created(tab, window, owner, outcome),
            Purpose::GroupJoin(tab, group) => self.on_group_joined(tab, group, outcome),
            Purpose::GroupStyle(group) => self.on_group_styled(group, outcome),
            Purpose::ReattachCheck(tab) => self.on_reattach_looked_at(tab, outcome),
            Purpose::Reattach(tab) => self.on_reattached(tab, outcome),
            Purpose::Ungroup(tab) => self.on_ungrouped(tab, outcome),
            Purpose::Cleanup => {}
            Purpose::Rules(grants) => self.on_rules_done(op, &grants, outcome),
            Purpose::GrantWindow(new) => self.on_grant_window(new, generation, outcome),
            Purpose::GrantTab(new, window) => self.on_grant_tab(new, window, generation, outcome),
            Purpose::OpeningNavigate(tab) => self.on_opening_navigated(tab, outcome),
            Purpose::HandoffFront(tab) => self.on_handoff_front(tab, outcome),
        }
    }

    /// The answer to the relay's `tabs.create`/`tabs.update`: Chrome's tab
    /// as the protocol's [`TabInfo`], naming its grant if it is shared.
    fn tab_answer(&self, json: &str) -> Result<String, String> {
        let tab = tab_info_from_chrome(json).ok_or("Chrome returned no tab")?;
        let tab = self.with_grant_if_shared(tab);
        Ok(serde_json::to_string(&tab).expect("TabInfo serialises"))
    }

    /// The answer to the relay's `tabs.query`: each tab as the relay may see
    /// it.
    fn tabs_answer(&self, json: &str) -> Result<String, String> {
        let tabs: Vec<serde_json::Value> = serde_json::from_str(json).map_err(|e| e.to_string())?;
        let infos: Vec<TabInfo> = tabs
            .iter()
            .filter_map(|t| tab_info_from_chrome(&t.to_string()))
            .map(|tab| self.as_the_relay_may_see(tab))
            .collect();
        Ok(serde_json::to_string(&infos).expect("TabInfo serialises"))
    }

    /// The tab the relay asked to attach, looked at: attach it unless it is
    /// restricted, gone, or shared already.
    fn on_relay_attach_looked_at(&mut self, current: bool, call: CallId, id: TabId, outcome: Result<String, String>) {
        match outcome.as_deref().map(tab_info_from_chrome) {
            Ok(Some(tab)) if policy::is_restricted(&tab.url) => {
                self.settle_joining(id, Err("restricted".into()));
                self.reply(current, call, Err(format!("Browser Relay does not attach to {}", tab.url)));
            }
            Ok(Some(tab)) if self.attached.contains_key(&tab.tab_id) => self.reply(current, call, Ok("null".into())),
            Ok(Some(tab)) => {
                let id = tab.tab_id;
                self.start_call(Purpose::RelayAttach(call, tab), ChromeCall::DebuggerAttach { tab: id });
            }
            Ok(None) => {
                self.settle_joining(id, Err("no such tab".into()));
                self.reply(current, call, Err("no such tab".into()));
            }
            Err(e) => {
                self.settle_joining(id, Err(e.clone()));
                self.reply(current, call, Err(e.clone()));
            }
        }
    }

    /// The relay's attach of `tab` ended: shared, or why not.
    fn on_relay_attached(&mut self, current: bool, call: CallId, tab: TabInfo, outcome: Result<String, String>) {
        let id = tab.tab_id;
        match outcome {
            Ok(_) => {
                self.settle_joining(id, Ok(()));
                self.add_attached(tab);
                self.reply(current, call, Ok("null".into()));
            }
            // Attached meanwhile by the user's own share of it (the
            // group): what the relay asked for holds.
            Err(_) if self.attached.contains_key(&id) => self.reply(current, call, Ok("null".into())),
            Err(e) => {
                self.settle_joining(id, Err(e.clone()));
                self.reply(current, call, Err(e));
            }
        }
    }

    /// The tabs counted for the relay's `tabs.remove` of `tab`: never the
    /// last one.
    fn on_tabs_counted(&mut self, current: bool, call: CallId, tab: TabId, outcome: Result<String, String>) {
        let count = outcome.as_deref().ok().and_then(|json| serde_json::from_str::<Vec<serde_json::Value>>(json).ok());
        match count.map(|tabs| tabs.len()) {
            Some(n) if n <= 1 => {
                self.reply(current, call, Err("Browser Relay will not close the user's last tab".into()))
            }
            Some(_) => {
                self.start_call(Purpose::Relay(call), ChromeCall::TabsRemove { tab });
            }
            None => self.reply(current, call, Err(outcome.err().unwrap_or_else(|| "cannot count tabs".into()))),
        }
    }

    pub fn on_debugger_event(&mut self, tab: TabId, session: Option<&str>, method: &str, params: Option<H::Json>) {
        if self.link == Link::Ready && self.attached.contains_key(&tab) {
            match params {
                Some(params) => self.host.send_event(layout::event_head(tab, session, method), params),
                None => self.host.send(layout::encode_event(tab, session, method, None)),
            }
            self.leave_if_backed_up();
        }
    }

    pub(super) fn start_call(&mut self, purpose: Purpose, call: ChromeCall) -> OpId {
        let op = self.next_op;
        self.next_op += 1;
        self.pending.insert(op, (purpose, self.link_generation));
        self.host.call(op, call);
        op
    }

    /// `tab` as an answer to the relay may show it: a tab the user did not
    /// share keeps its ids and state (the relay asks which tab is in front
    /// of a window), never its URL, title or icon (R22).
    fn as_the_relay_may_see(&self, mut tab: TabInfo) -> TabInfo {
        if !self.attached.contains_key(&tab.tab_id) {
            tab.url.clear();
            tab.title.clear();
            tab.fav_icon_url = None;
        }
        self.with_grant_if_shared(tab)
    }

    /// `tab` with its grant if it is shared (an answer names the grant of
    /// shared tabs only).
    fn with_grant_if_shared(&self, mut tab: TabInfo) -> TabInfo {
        tab.grant = self.attached.contains_key(&tab.tab_id).then(|| self.owner(tab.tab_id).cloned()).flatten();
        tab
    }
}
