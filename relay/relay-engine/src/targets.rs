//! The registry of attached tabs and who is subscribed to them. All `Target.*`
//! synthesis reads from here: one tab becomes a `page` target (Playwright's
//! model) and a `tab` target above it (Puppeteer's model).

use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Value, json};
use shared_protocol::{TabId, WindowId};

use super::cdp;
use super::client::{ClientHandle, ClientState, SessionKind};
use super::interception::Interception;
use super::ledger::{Ledger, Undo};

/// A random id in Chrome's style (32 upper-case hex digits).
pub(crate) fn new_id() -> Arc<str> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("the OS random source is available");
    bytes.iter().map(|b| format!("{b:02X}")).collect::<String>().into()
}

/// How a client holds a session on a target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SubKind {
    /// A page session: receives the tab's CDP events.
    Page,
    /// A Puppeteer tab session: receives no page events.
    Tab,
}

/// One client's session on a target.
#[derive(Debug, Clone)]
pub(crate) struct Subscription {
    pub client: Arc<ClientHandle>,
    pub session: Arc<str>,
    /// The session `attachedToTarget` was sent on (`None`: the root), where
    /// `detachedFromTarget` must go too.
    pub parent: Option<Arc<str>>,
    pub kind: SubKind,
    /// A page-level endpoint (`/devtools/page/<id>`): events carry no sessionId.
    pub bare: bool,
}

/// What a client may see of a target, and its sessions on it: here, beside
/// the subscriptions, so that the client's handle knows no target.
impl ClientHandle {
    /// Whether `target` is this client's to see: every shared tab for the
    /// person's keys, a grant's own tabs for a grant's.
    pub(crate) fn sees(&self, target: &Target) -> bool {
        self.access.sees(target.grant.as_deref())
    }

    pub(crate) fn subscribe(
        self: &Arc<Self>,
        state: &mut ClientState,
        target: &mut Target,
        kind: SubKind,
        session: Arc<str>,
        parent: Option<Arc<str>>,
    ) {
        let held = if kind == SubKind::Tab {
            SessionKind::Tab(target.target_id.clone())
        } else {
            SessionKind::Page(target.target_id.clone())
        };
        state.sessions.insert(session.clone(), held);
        target.subs.push(Subscription { client: self.clone(), session, parent, kind, bare: false });
    }

    /// Announces `target` per this client's root auto-attach filter, once.
    pub(crate) fn auto_attach_root(self: &Arc<Self>, target: &mut Target, context_id: &str) {
        if !self.sees(target) {
            return;
        }
        let mut state = self.state();
        let Some(filter) = state.auto_attach.clone() else { return };
        let kinds =
            [(SubKind::Page, "page", target.page_session.clone()), (SubKind::Tab, "tab", target.tab_session.clone())];
        for (kind, name, session) in kinds {
            if !filter.matches(name) || target.is_subscribed(self.id, &session) {
                continue;
            }
            let info = if kind == SubKind::Tab { target.tab_info(context_id) } else { target.page_info(context_id) };
            self.subscribe(&mut state, target, kind, session.clone(), None);
            self.send(attached_event(&session, info, None));
        }
    }
}

pub(crate) fn attached_event(session: &str, target_info: Value, on: Option<&str>) -> String {
    let params = json!({"sessionId": session, "targetInfo": target_info, "waitingForDebugger": false});
    cdp::event("Target.attachedToTarget", &params.to_string(), on)
}

/// An attached tab.
#[derive(Debug)]
pub(crate) struct Target {
    pub tab_id: TabId,
    pub window_id: Option<WindowId>,
    /// Chrome's own target id of the page.
    pub target_id: Arc<str>,
    /// Synthetic id of the tab target above the page (Puppeteer's model).
    pub tab_target_id: Arc<str>,
    /// The page session announced by root auto-attach (shared by clients).
    pub page_session: Arc<str>,
    /// The tab session announced to tab-model clients (shared by clients).
    pub tab_session: Arc<str>,
    pub url: String,
    pub title: String,
    /// Its icon as Chrome shows it (`chrome.tabs.Tab.favIconUrl`).
    pub fav_icon_url: Option<String>,
    pub opener: Option<Arc<str>>,
    pub subs: Vec<Subscription>,
    /// Runtime state per session (`None`: the tab itself). All clients share
    /// the tab's one debugger session: a second client's `Runtime.enable`
    /// makes Chrome report nothing, so the relay replays the contexts, and
    /// sends context events only to clients that enabled Runtime.
    pub runtime: Vec<RuntimeSession>,
    /// What each client set on the shared session (see [`Ledger`]).
    pub ledger: Ledger,
    /// Each client's request interception (see [`Interception`]).
    pub interception: Interception,
    /// The clients that opened this tab (`Target.createTarget`, or a popup
    /// of a tab they held): when the last of them leaves, the relay closes
    /// it, so no script leaves tabs behind in the user's browser. Empty for
    /// the tabs the user shared.
    pub owners: Vec<u64>,
    /// The grant whose tab group holds it (`None`: the person's own
    /// sharing): only that grant's clients see it, besides the person's
    /// (`crate::grants`).
    pub grant: Option<Arc<str>>,
    /// The person has the tab (its grant handed it over, `asking.rs`):
    /// grants' clients may not act in it or read what is typed there.
    pub handed_over: bool,
    /// The requests the person made while they had the tab: no grant's
    /// client reads their bodies, then or later (bounded: the newest
    /// [`PERSONS_REQUESTS_KEPT`]).
    pub persons_requests: std::collections::VecDeque<String>,
}

/// How many of the person's requests a tab remembers (see
/// [`Target::persons_requests`]).
pub(crate) const PERSONS_REQUESTS_KEPT: usize = 4096;

/// Execution contexts of one session on a tab, and which clients enabled
/// Runtime there (Chrome only knows that the shared session did).
#[derive(Debug, Default)]
pub(crate) struct RuntimeSession {
    pub child: Option<Arc<str>>,
    /// Runtime is (being) enabled on Chrome's side.
    pub enabled: bool,
    /// Clients that enabled Runtime; only they get context events.
    pub clients: Vec<u64>,
    /// Clients whose `Runtime.enable` ([`EnableEffect::Replay`]) is on its
    /// way to Chrome: Runtime must stay on for them even if every client in
    /// `clients` leaves meanwhile.
    pub joining: Vec<u64>,
    /// `(context id, raw params of its executionContextCreated)`.
    pub contexts: Vec<(i64, String)>,
}

/// What a client's `Runtime.enable` needs at its reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EnableEffect {
    /// This command enables Runtime in Chrome, which reports the contexts
    /// (before the reply, to this client among others).
    EnablesChrome,
    /// Runtime was already enabled: Chrome reports nothing, so at the reply
    /// the relay replays every live context to this client. Until then the
    /// client gets no context events: Playwright ignores contexts of frames
    /// it has not yet seen in its own `Page.getFrameTree` answer.
    Replay,
}

impl Target {
    pub(crate) fn runtime_mut(&mut self, child: Option<&str>) -> &mut RuntimeSession {
        let index = match self.runtime.iter().position(|r| r.child.as_deref() == child) {
            Some(index) => index,
            None => {
                self.runtime.push(RuntimeSession { child: child.map(Arc::from), ..RuntimeSession::default() });
                self.runtime.len() - 1
            }
        };
        &mut self.runtime[index]
    }

    pub(crate) fn runtime(&self, child: Option<&str>) -> Option<&RuntimeSession> {
        self.runtime.iter().find(|r| r.child.as_deref() == child)
    }

    /// A client sends `Runtime.enable` on a session: from now on it gets
    /// context events there.
    pub(crate) fn runtime_enable(&mut self, client: u64, child: Option<&str>) -> EnableEffect {
        let session = self.runtime_mut(child);
        if session.enabled {
            if !session.clients.contains(&client) && !session.joining.contains(&client) {
                session.joining.push(client);
            }
            EnableEffect::Replay
        } else {
            session.enabled = true;
            if !session.clients.contains(&client) {
                session.clients.push(client);
            }
            EnableEffect::EnablesChrome
        }
    }

    /// At the reply to a [`EnableEffect::Replay`] enable: the client joins
    /// and gets the params of every live context.
    pub(crate) fn runtime_join(&mut self, client: u64, child: Option<&str>) -> Vec<String> {
        let session = self.runtime_mut(child);
        session.joining.retain(|c| *c != client);
        if !session.clients.contains(&client) {
            session.clients.push(client);
        }
        session.contexts.iter().map(|(_, params)| params.clone()).collect()
    }

    /// A client disables Runtime; `true` when it was the last one, so the
    /// command must reach Chrome.
    pub(crate) fn runtime_disable(&mut self, client: u64, child: Option<&str>) -> bool {
        let session = self.runtime_mut(child);
        session.clients.retain(|c| *c != client);
        session.joining.retain(|c| *c != client);
        let last = session.clients.is_empty() && session.joining.is_empty();
        if last {
            session.enabled = false;
        }
        last
    }

    /// A [`EnableEffect::Replay`] enable failed: the client does not join.
    pub(crate) fn runtime_join_failed(&mut self, client: u64, child: Option<&str>) {
        self.runtime_mut(child).joining.retain(|c| *c != client);
    }

    /// Whether a context event on this session goes to `client`.
    pub(crate) fn wants_runtime_events(&self, client: u64, child: Option<&str>) -> bool {
        self.runtime(child).is_some_and(|s| s.clients.contains(&client))
    }

    /// Whether Chrome's event `method` on this session goes to `client`:
    /// context events and those of [`crate::ledger::own_enable_domain`]
    /// only when the client enabled their domain there; the rest to all.
    pub(crate) fn wants_event(&self, client: u64, child: Option<&str>, method: &str) -> bool {
        if method.starts_with("Runtime.executionContext") {
            return self.wants_runtime_events(client, child);
        }
        crate::ledger::own_enable_domain(method).is_none_or(|domain| self.ledger.has_enabled(client, child, domain))
    }

    /// A client left: its subscriptions go, and the commands that take back
    /// what it set are returned (Runtime off when nobody else uses it, then
    /// its ledger entries).
    pub(crate) fn forget_client(&mut self, client: u64) -> Vec<Undo> {
        self.subs.retain(|s| s.client.id != client);
        let mut undo = Vec::new();
        for session in &mut self.runtime {
            let had = session.clients.contains(&client) || session.joining.contains(&client);
            session.clients.retain(|c| *c != client);
            session.joining.retain(|c| *c != client);
            // A client still joining keeps it on (its reply replays the
            // contexts).
            if had && session.clients.is_empty() && session.joining.is_empty() && session.enabled {
                session.enabled = false;
                session.contexts.clear();
                undo.push(Undo { child: session.child.clone(), method: "Runtime.disable".into(), params: "{}".into() });
            }
        }
        undo.extend(self.ledger.forget_client(client));
        undo
    }

    /// `client` left. True when it was the last of the tab's owners: the
    /// tab is to be closed.
    pub(crate) fn disown(&mut self, client: u64) -> bool {
        let owned = self.owners.contains(&client);
        self.owners.retain(|c| *c != client);
        owned && self.owners.is_empty()
    }

    /// Tracks `Runtime.executionContext*` events.
    pub(crate) fn track_runtime_event(&mut self, child: Option<&str>, method: &str, params: &str) {
        #[derive(Deserialize)]
        struct Context {
            id: i64,
        }
        #[derive(Deserialize)]
        struct Created {
            context: Context,
        }
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Destroyed {
            execution_context_id: i64,
        }
        match method {
            "Runtime.executionContextCreated" => {
                if let Ok(created) = serde_json::from_str::<Created>(params) {
                    self.runtime_mut(child).contexts.push((created.context.id, params.to_string()));
                }
            }
            "Runtime.executionContextDestroyed" => {
                if let Ok(destroyed) = serde_json::from_str::<Destroyed>(params) {
                    self.runtime_mut(child).contexts.retain(|(id, _)| *id != destroyed.execution_context_id);
                }
            }
            "Runtime.executionContextsCleared" => self.runtime_mut(child).contexts.clear(),
            _ => {}
        }
    }
}

impl Target {
    pub(crate) fn page_info(&self, context_id: &str) -> Value {
        let mut info = json!({
            "targetId": &*self.target_id,
            "type": "page",
            "title": self.title,
            "url": self.url,
            "attached": true,
            "canAccessOpener": false,
            "browserContextId": context_id,
        });
        if let Some(opener) = &self.opener {
            info["openerId"] = json!(&**opener);
        }
        info
    }

    pub(crate) fn tab_info(&self, context_id: &str) -> Value {
        json!({
            "targetId": &*self.tab_target_id,
            "type": "tab",
            "title": self.title,
            "url": self.url,
            "attached": true,
            "canAccessOpener": false,
            "browserContextId": context_id,
        })
    }

    pub(crate) fn is_subscribed(&self, client_id: u64, session: &str) -> bool {
        self.subs.iter().any(|s| s.client.id == client_id && &*s.session == session)
    }

    /// Where an event of this tab's session `child` (`None`: the page
    /// itself) reaches `client`: the client, and the session id its frame
    /// carries (`None` on a page-level endpoint). `None` when the client
    /// holds no page session here.
    /// The person sent a request while they had the tab (`params`: its
    /// `Network.requestWillBeSent`): its id is kept, so no grant's client
    /// reads its body.
    pub(crate) fn note_persons_request(&mut self, params: &str) {
        #[derive(serde::Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Sent {
            request_id: String,
        }
        if let Ok(sent) = serde_json::from_str::<Sent>(params) {
            if self.persons_requests.len() >= PERSONS_REQUESTS_KEPT {
                self.persons_requests.pop_front();
            }
            self.persons_requests.push_back(sent.request_id);
        }
    }

    /// Whether `params` (of a command that reads a request) name a request
    /// the person made while they had the tab.
    pub(crate) fn names_a_persons_request(&self, params: Option<&str>) -> bool {
        let id = params
            .and_then(|p| serde_json::from_str::<serde_json::Value>(p).ok())
            .and_then(|p| p.get("requestId").and_then(serde_json::Value::as_str).map(str::to_string));
        id.is_some_and(|id| self.persons_requests.iter().any(|r| *r == id))
    }

    pub(crate) fn client_session(
        &self,
        client: u64,
        child: Option<&str>,
    ) -> Option<(Arc<ClientHandle>, Option<Arc<str>>)> {
        let sub = self.subs.iter().find(|s| s.client.id == client && s.kind == SubKind::Page)?;
        let session = match child {
            Some(child) => Some(Arc::from(child)),
            None => (!sub.bare).then(|| sub.session.clone()),
        };
        Some((sub.client.clone(), session))
    }
}

/// Attached tabs, in attach order.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    targets: Vec<Target>,
}

impl Registry {
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Target> {
        self.targets.iter()
    }

    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = &mut Target> {
        self.targets.iter_mut()
    }

    pub(crate) fn len(&self) -> usize {
        self.targets.len()
    }

    pub(crate) fn by_tab(&self, tab_id: TabId) -> Option<&Target> {
        self.targets.iter().find(|t| t.tab_id == tab_id)
    }

    pub(crate) fn by_tab_mut(&mut self, tab_id: TabId) -> Option<&mut Target> {
        self.targets.iter_mut().find(|t| t.tab_id == tab_id)
    }

    /// Looks a target up by its page id or its tab-target id.
    pub(crate) fn by_target_id(&self, target_id: &str) -> Option<&Target> {
        self.targets.iter().find(|t| &*t.target_id == target_id || &*t.tab_target_id == target_id)
    }

    pub(crate) fn by_target_id_mut(&mut self, target_id: &str) -> Option<&mut Target> {
        self.targets.iter_mut().find(|t| &*t.target_id == target_id || &*t.tab_target_id == target_id)
    }

    pub(crate) fn insert(&mut self, target: Target) {
        self.targets.push(target);
    }

    pub(crate) fn remove_tab(&mut self, tab_id: TabId) -> Option<Target> {
        let index = self.targets.iter().position(|t| t.tab_id == tab_id)?;
        Some(self.targets.remove(index))
    }

    pub(crate) fn take_all(&mut self) -> Vec<Target> {
        std::mem::take(&mut self.targets)
    }

    /// Tab ids by target id, for `/json/*` and the control API.
    pub(crate) fn tab_of(&self, target_id: &str) -> Option<TabId> {
        self.by_target_id(target_id).map(|t| t.tab_id)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn shared_tab() -> Target {
        Target {
            tab_id: 1,
            window_id: None,
            target_id: new_id(),
            tab_target_id: new_id(),
            page_session: new_id(),
            tab_session: new_id(),
            url: String::new(),
            title: String::new(),
            fav_icon_url: None,
            opener: None,
            subs: Vec::new(),
            runtime: Vec::new(),
            ledger: Ledger::default(),
            interception: Interception::default(),
            owners: Vec::new(),
            grant: None,
            handed_over: false,
            persons_requests: Default::default(),
        }
    }

    #[test]
    fn runtime_enable_is_per_client_on_a_shared_session() {
        let mut target = shared_tab();
        let created = |id: i64| format!(r#"{{"context":{{"id":{id},"origin":"","name":""}}}}"#);
        // Two clients enable at once: only the first reaches Chrome and gets
        // Chrome's events; the second waits for its reply.
        assert_eq!(target.runtime_enable(1, None), EnableEffect::EnablesChrome);
        assert_eq!(target.runtime_enable(2, None), EnableEffect::Replay);
        target.track_runtime_event(None, "Runtime.executionContextCreated", &created(1));
        target.track_runtime_event(None, "Runtime.executionContextCreated", &created(2));
        assert!(target.wants_runtime_events(1, None));
        assert!(!target.wants_runtime_events(2, None), "nothing live before its own reply");
        target.track_runtime_event(None, "Runtime.executionContextDestroyed", r#"{"executionContextId":1}"#);
        assert_eq!(target.runtime_join(2, None), vec![created(2)], "live contexts at the reply");
        assert!(target.wants_runtime_events(2, None));
        assert!(!target.wants_runtime_events(3, None), "a client that never enabled Runtime");
        target.track_runtime_event(None, "Runtime.executionContextsCleared", "{}");
        assert_eq!(target.runtime_join(3, None), Vec::<String>::new());
        // Child sessions are separate.
        assert_eq!(target.runtime_enable(3, Some("CHILD")), EnableEffect::EnablesChrome);
        // Disable reaches Chrome only with the last client.
        assert!(!target.runtime_disable(1, None));
        target.forget_client(2);
        assert!(target.runtime_disable(3, None));
        assert_eq!(target.runtime_enable(1, None), EnableEffect::EnablesChrome);
    }

    #[test]
    fn a_client_whose_enable_is_on_its_way_keeps_runtime_on_when_the_last_one_leaves() {
        // Client 2 enables while 1 has Runtime on; 1 dies before 2's reply:
        // Runtime must stay on, or 2 waits for contexts that never come.
        let mut target = shared_tab();
        assert_eq!(target.runtime_enable(1, None), EnableEffect::EnablesChrome);
        let created = r#"{"context":{"id":7,"origin":"","name":""}}"#;
        target.track_runtime_event(None, "Runtime.executionContextCreated", created);
        assert_eq!(target.runtime_enable(2, None), EnableEffect::Replay);
        assert!(target.forget_client(1).is_empty(), "no Runtime.disable while 2 joins");
        assert_eq!(target.runtime_join(2, None), vec![created.to_string()]);
        // A join that fails leaves nobody: the next leave turns it off.
        assert_eq!(target.runtime_enable(3, None), EnableEffect::Replay);
        target.runtime_join_failed(3, None);
        let undo = target.forget_client(2);
        assert_eq!(undo.iter().map(|u| u.method.as_str()).collect::<Vec<_>>(), ["Runtime.disable"]);
    }

    #[test]
    fn ids_look_like_chromes() {
        let id = new_id();
        assert_eq!(id.len(), 32);
        assert!(id.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_lowercase()));
        assert_ne!(id, new_id());
    }
}
