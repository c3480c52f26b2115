//! CDP clients: browser-level (`/cdp`, `/devtools/browser/<id>`) and
//! page-level (`/devtools/page/<id>`) connections, routing of their commands,
//! and the `Target.*`/`Browser.*` commands the relay answers itself.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket};
use futures_util::stream::SplitSink;
use futures_util::{SinkExt, StreamExt};
use serde::Deserialize;
use serde_json::{Value, json};
use shared_protocol::{RelayMessage, SendCommand, TabId, TabInfo, encode};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::cdp::{self, Command, code};
use super::targets::{FilterEntry, SubKind, Subscription, Target, TargetFilter, new_id};
use super::{CallError, InFlight, Pending, Relay, RuntimeEnable};

/// What a session id a client holds stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionKind {
    /// A page session on the target with this page id.
    Page(Arc<str>),
    /// A Puppeteer tab session on the target with this page id.
    Tab(Arc<str>),
    /// An emulated browser session (`Target.attachToBrowserTarget`).
    Browser,
}

#[derive(Debug, Default)]
pub struct ClientState {
    auto_attach: Option<TargetFilter>,
    discover: Option<TargetFilter>,
    sessions: HashMap<Arc<str>, SessionKind>,
}

/// One connected CDP client, as the rest of the relay sees it.
#[derive(Debug)]
pub struct ClientHandle {
    pub id: u64,
    tx: mpsc::Sender<Message>,
    kill: CancellationToken,
    in_flight: InFlight,
    /// For page-level endpoints: the session commands without a `sessionId` use.
    default_session: Option<Arc<str>>,
    state: Mutex<ClientState>,
}

impl ClientHandle {
    fn state(&self) -> MutexGuard<'_, ClientState> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Queues a frame. A client that lets its queue fill up is too slow to
    /// keep: it is disconnected rather than allowed to stall everyone else.
    pub fn send(&self, frame: impl Into<Utf8Bytes>) {
        match self.tx.try_send(Message::Text(frame.into())) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(_)) => {
                tracing::warn!(client = self.id, "client is not reading its messages; disconnecting it");
                self.kill.cancel();
            }
            Err(mpsc::error::TrySendError::Closed(_)) => {}
        }
    }

    /// Sends a close frame after everything already queued, then ends.
    pub fn close(&self, code: u16, reason: &str) {
        let frame = CloseFrame { code, reason: Utf8Bytes::from(reason.to_string()) };
        if self.tx.try_send(Message::Close(Some(frame))).is_err() {
            self.kill.cancel();
        }
    }

    pub(crate) fn finish_command(&self) {
        self.in_flight.finish();
    }

    pub(crate) fn forget_session(&self, session: &str) {
        self.state().sessions.remove(session);
    }

    pub(crate) fn discover_filter(&self) -> Option<TargetFilter> {
        self.state().discover.clone()
    }

    fn subscribe(
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

fn attached_event(session: &str, target_info: Value, on: Option<&str>) -> String {
    let params = json!({"sessionId": session, "targetInfo": target_info, "waitingForDebugger": false});
    cdp::event("Target.attachedToTarget", &params.to_string(), on)
}

/// Writes queued frames to a socket, batching what is ready before flushing.
/// Ends on a close frame, when the queue closes, or when `stop` fires.
pub(crate) async fn write_loop(
    mut sink: SplitSink<WebSocket, Message>,
    mut rx: mpsc::Receiver<Message>,
    stop: CancellationToken,
) {
    'outer: loop {
        let first = tokio::select! {
            biased;
            () = stop.cancelled() => break,
            message = rx.recv() => match message {
                Some(message) => message,
                None => break,
            },
        };
        let mut closing = matches!(first, Message::Close(_));
        if sink.feed(first).await.is_err() {
            break;
        }
        while !closing {
            match rx.try_recv() {
                Ok(message) => {
                    closing = matches!(message, Message::Close(_));
                    if sink.feed(message).await.is_err() {
                        break 'outer;
                    }
                }
                Err(_) => break,
            }
        }
        if sink.flush().await.is_err() || closing {
            break;
        }
    }
    rx.close();
    let _ = sink.close().await;
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct AutoAttachParams {
    auto_attach: bool,
    #[serde(default)]
    flatten: bool,
    #[serde(default)]
    filter: Option<Vec<FilterEntry>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct DiscoverParams {
    discover: bool,
    #[serde(default)]
    filter: Option<Vec<FilterEntry>>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct TargetIdParams {
    #[serde(default)]
    target_id: Option<String>,
    #[serde(default)]
    flatten: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SessionParams {
    #[serde(default)]
    session_id: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CreateTargetParams {
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    background: bool,
}

#[derive(Deserialize)]
struct FilterParams {
    #[serde(default)]
    filter: Option<Vec<FilterEntry>>,
}

const NO_TARGET: &str = "No target with given id found";
const NO_SESSION: &str = "Session with given id not found.";

/// A reply addressed to the session a command came on.
struct Replier<'a> {
    client: &'a Arc<ClientHandle>,
    id: i64,
    session: Option<&'a str>,
}

impl Replier<'_> {
    fn ok(&self, result: &Value) {
        self.client.send(cdp::response(self.id, &result.to_string(), self.session));
    }

    fn err(&self, code: i64, message: &str) {
        self.client.send(cdp::error(Some(self.id), code, message, self.session));
    }
}

impl Relay {
    /// Runs one CDP client connection to its end. `page_target` makes it a
    /// page-level endpoint bound to that target.
    pub async fn serve_client(&self, socket: WebSocket, page_target: Option<Arc<str>>) {
        let (sink, mut stream) = socket.split();
        let (tx, rx) = mpsc::channel(self.config().client_queue);
        let kill = CancellationToken::new();
        let client = Arc::new(ClientHandle {
            id: self.next_client_id(),
            tx,
            kill: kill.clone(),
            in_flight: InFlight::default(),
            default_session: page_target.as_ref().map(|_| new_id()),
            state: Mutex::new(ClientState::default()),
        });
        let writer = tokio::spawn(write_loop(sink, rx, kill.clone()));
        if let (Some(target_id), Some(session)) = (&page_target, &client.default_session) {
            let subscribed = {
                let mut registry = self.registry();
                registry.by_target_id_mut(target_id).map(|target| {
                    client.state().sessions.insert(session.clone(), SessionKind::Page(target.target_id.clone()));
                    target.subs.push(Subscription {
                        client: client.clone(),
                        session: session.clone(),
                        parent: None,
                        kind: SubKind::Page,
                        bare: true,
                    });
                })
            };
            if subscribed.is_none() {
                client.close(1011, "no such target: it was detached or closed");
                let _ = writer.await;
                return;
            }
        }
        self.register_client(client.clone());
        tracing::debug!(client = client.id, page = page_target.as_deref(), "CDP client connected");

        loop {
            tokio::select! {
                () = kill.cancelled() => break,
                () = self.shutting_down().cancelled() => {
                    client.close(1001, "Browser Relay is shutting down");
                    break;
                }
                frame = stream.next() => match frame {
                    Some(Ok(Message::Text(text))) => self.on_client_text(&client, &text).await,
                    Some(Ok(Message::Binary(_))) => client.send(cdp::error(
                        None,
                        code::INVALID_REQUEST,
                        "binary frames are not CDP: send JSON text frames",
                        None,
                    )),
                    Some(Ok(Message::Close(_))) | None => break,
                    Some(Ok(_)) => {}
                    Some(Err(e)) => {
                        tracing::info!(client = client.id, "CDP client connection failed: {e}");
                        let limit = self.config().client_max_message >> 20;
                        client.close(1009, &format!("message too big or malformed (limit {limit} MiB)"));
                        break;
                    }
                },
            }
        }
        self.forget_client(&client);
        // Let a queued close frame go out, but never wait on a dead peer.
        if tokio::time::timeout(std::time::Duration::from_secs(1), writer).await.is_err() {
            kill.cancel();
        }
        tracing::debug!(client = client.id, "CDP client gone");
    }

    /// A client left: drop its subscriptions and the answers it waits for;
    /// leave everything else as is.
    fn forget_client(&self, client: &Arc<ClientHandle>) {
        let mut registry = self.registry();
        for target in registry.iter_mut() {
            target.forget_client(client.id);
        }
        drop(registry);
        self.0.clients.remove(&client.id);
        self.0.pending.retain(|_, pending| !matches!(pending, Pending::Client { client: c, .. } if c.id == client.id));
        client.state().sessions.clear();
    }

    async fn on_client_text(&self, client: &Arc<ClientHandle>, text: &str) {
        let command = match Command::parse(text) {
            Ok(command) => command,
            Err(bad) => return client.send(cdp::error(bad.id, bad.code, &bad.message, None)),
        };
        let explicit = command.session_id.as_deref();
        let Some(session) = explicit.or(client.default_session.as_deref()) else {
            return self.root_command(client, &command, None);
        };
        let held = client.state().sessions.get(session).cloned();
        let reply = Replier { client, id: command.id, session: explicit };
        match held {
            Some(SessionKind::Browser) => self.root_command(client, &command, explicit),
            Some(SessionKind::Tab(target_id)) => self.tab_command(client, &command, session, &target_id),
            Some(SessionKind::Page(target_id)) => {
                let tab = self.registry().by_target_id(&target_id).map(|t| t.tab_id);
                match tab {
                    Some(tab) => self.forward(client, &command, tab, None).await,
                    None => reply.err(code::SESSION_NOT_FOUND, NO_SESSION),
                }
            }
            None => {
                // A flat child session (iframe, worker) of a tab this client holds.
                let tab = self.0.children.get(session).map(|e| *e.value());
                let holds_tab = tab.is_some_and(|tab| {
                    self.registry().by_tab(tab).is_some_and(|t| t.subs.iter().any(|s| s.client.id == client.id))
                });
                match tab {
                    Some(tab) if holds_tab => self.forward(client, &command, tab, Some(session)).await,
                    _ => reply.err(code::SESSION_NOT_FOUND, NO_SESSION),
                }
            }
        }
    }

    /// Takes one of the client's in-flight slots, or answers that it has none.
    fn start_in_flight(&self, reply: &Replier<'_>) -> bool {
        let max = self.config().max_in_flight;
        let started = reply.client.in_flight.try_start(max);
        if !started {
            reply.err(code::SERVER_ERROR, &format!("too many commands in flight ({max}): wait for replies first"));
        }
        started
    }

    /// Forwards a command to the extension without re-serialising its params.
    async fn forward(&self, client: &Arc<ClientHandle>, command: &Command<'_>, tab_id: TabId, child: Option<&str>) {
        let reply = Replier { client, id: command.id, session: command.session_id.as_deref() };
        if !self.start_in_flight(&reply) {
            return;
        }
        if command.method == "Runtime.disable" {
            // Other clients on this shared session keep their Runtime.
            let last = self.registry().by_tab_mut(tab_id).is_none_or(|t| t.runtime_disable(client.id, child));
            if !last {
                client.finish_command();
                return reply.ok(&json!({}));
            }
        }
        let Some(link) = self.link() else {
            client.finish_command();
            return reply.err(code::SERVER_ERROR, &CallError::NoExtension.to_string());
        };
        let id = self.next_call_id();
        let frame = encode(&RelayMessage::DebuggerSendCommand(SendCommand {
            id,
            tab_id,
            session_id: child.map(Cow::Borrowed),
            method: Cow::Borrowed(&command.method),
            params: command.params,
        }));
        let runtime_enable = match &*command.method {
            "Runtime.enable" => self.registry().by_tab_mut(tab_id).map(|target| RuntimeEnable {
                tab: tab_id,
                child: child.map(Arc::from),
                effect: {
                    let effect = target.runtime_enable(client.id, child);
                    tracing::debug!(client = client.id, tab = tab_id, child, ?effect, "Runtime.enable");
                    effect
                },
            }),
            _ => None,
        };
        self.0.pending.insert(
            id,
            Pending::Client {
                client: client.clone(),
                cdp_id: command.id,
                session: command.session_id.as_deref().map(Arc::from),
                generation: link.generation,
                runtime_enable,
            },
        );
        if !link.send(frame).await && self.0.pending.remove(&id).is_some() {
            client.finish_command();
            reply.err(code::SERVER_ERROR, super::EXTENSION_GONE);
        }
    }

    /// Commands on a Puppeteer tab session: the page lives under it.
    fn tab_command(&self, client: &Arc<ClientHandle>, command: &Command<'_>, session: &str, target_id: &str) {
        let reply = Replier { client, id: command.id, session: Some(session) };
        match &*command.method {
            "Target.setAutoAttach" => {
                let mut registry = self.registry();
                let Some(target) = registry.by_target_id_mut(target_id) else {
                    return reply.err(code::SESSION_NOT_FOUND, NO_SESSION);
                };
                let page_session = target.page_session.clone();
                if !target.is_subscribed(client.id, &page_session) {
                    let info = target.page_info(self.context_id());
                    client.subscribe(
                        &mut client.state(),
                        target,
                        SubKind::Page,
                        page_session.clone(),
                        Some(session.into()),
                    );
                    client.send(attached_event(&page_session, info, Some(session)));
                }
                reply.ok(&json!({}));
            }
            "Runtime.runIfWaitingForDebugger" => reply.ok(&json!({})),
            "Target.getTargetInfo" => match self.registry().by_target_id(target_id) {
                Some(target) => reply.ok(&json!({"targetInfo": target.tab_info(self.context_id())})),
                None => reply.err(code::SESSION_NOT_FOUND, NO_SESSION),
            },
            method => reply.err(code::METHOD_NOT_FOUND, &format!("'{method}' wasn't found")),
        }
    }

    /// Root (browser-level) commands, also on an emulated browser session.
    fn root_command(&self, client: &Arc<ClientHandle>, command: &Command<'_>, session: Option<&str>) {
        let reply = Replier { client, id: command.id, session };
        let context_id = self.context_id().clone();
        match &*command.method {
            "Browser.getVersion" => {
                let hello = self.hello();
                reply.ok(&json!({
                    "protocolVersion": "1.3",
                    "product": hello.as_ref().map_or("Chrome/0.0.0.0", |h| h.browser_version.as_str()),
                    "revision": "",
                    "userAgent": hello.as_ref().map_or("", |h| h.user_agent.as_str()),
                    "jsVersion": "",
                }));
            }
            // Downloads go where the user's browser puts them; their events are
            // re-emitted at the browser level (see `download_event`).
            "Browser.setDownloadBehavior" => reply.ok(&json!({})),
            "Browser.close" => {
                // Never the user's browser: this client's connection only.
                reply.ok(&json!({}));
                client.close(1000, "Browser.close: this client is disconnected; the user's browser stays open");
            }
            "Target.setAutoAttach" => self.set_auto_attach(client, command, session),
            "Target.setDiscoverTargets" => self.set_discover_targets(client, command, session),
            "Target.getTargets" => {
                let filter = match command.params::<FilterParams>() {
                    Ok(p) => TargetFilter::from_param(p.filter),
                    Err(e) => return reply.err(code::INVALID_PARAMS, &e),
                };
                let mut infos = Vec::new();
                if filter.matches("browser") {
                    infos.push(self.browser_info());
                }
                for target in self.registry().iter() {
                    if filter.matches("tab") {
                        infos.push(target.tab_info(&context_id));
                    }
                    if filter.matches("page") {
                        infos.push(target.page_info(&context_id));
                    }
                }
                reply.ok(&json!({"targetInfos": infos}));
            }
            "Target.getTargetInfo" => {
                let params: TargetIdParams = command.params().unwrap_or_default();
                match params.target_id.as_deref() {
                    None => reply.ok(&json!({"targetInfo": self.browser_info()})),
                    Some(id) if id == self.browser_id() => reply.ok(&json!({"targetInfo": self.browser_info()})),
                    Some(id) => match self.registry().by_target_id(id) {
                        Some(t) if &*t.tab_target_id == id => reply.ok(&json!({"targetInfo": t.tab_info(&context_id)})),
                        Some(t) => reply.ok(&json!({"targetInfo": t.page_info(&context_id)})),
                        None => reply.err(code::INVALID_PARAMS, NO_TARGET),
                    },
                }
            }
            "Target.attachToTarget" => self.attach_to_target(client, command, session),
            "Target.attachToBrowserTarget" => {
                let browser_session = new_id();
                client.state().sessions.insert(browser_session.clone(), SessionKind::Browser);
                client.send(attached_event(&browser_session, self.browser_info(), session));
                reply.ok(&json!({"sessionId": &*browser_session}));
            }
            "Target.detachFromTarget" => self.detach_from_target(client, command, session),
            "Target.getBrowserContexts" => reply.ok(&json!({"browserContextIds": []})),
            "Target.createBrowserContext" | "Target.disposeBrowserContext" => reply.err(
                code::SERVER_ERROR,
                "Browser Relay drives the user's own browser profile: separate browser contexts are not available; use the default context",
            ),
            "Target.createTarget"
            | "Target.closeTarget"
            | "Target.activateTarget"
            | "Storage.getCookies"
            | "Storage.setCookies"
            | "Storage.clearCookies" => {
                // These wait on the extension: answer from a task so this
                // client's other commands keep flowing; they count as in flight.
                if !self.start_in_flight(&reply) {
                    return;
                }
                let relay = self.clone();
                let client = client.clone();
                let method = command.method.to_string();
                let params = command.params.map(|p| p.get().to_string());
                let (id, session) = (command.id, session.map(str::to_string));
                tokio::spawn(async move {
                    let reply = Replier { client: &client, id, session: session.as_deref() };
                    let result = relay.extension_backed(&method, params.as_deref()).await;
                    client.finish_command();
                    match result {
                        Ok(result) => client.send(cdp::response(id, &result, session.as_deref())),
                        Err(e) => reply.err(code::SERVER_ERROR, &e.to_string()),
                    }
                });
            }
            method if method.starts_with("Target.") || method.starts_with("Browser.") => reply.err(
                code::METHOD_NOT_FOUND,
                &format!("'{method}' wasn't found: Browser Relay does not offer it for the user's browser"),
            ),
            method => reply.err(
                code::METHOD_NOT_FOUND,
                &format!("'{method}' wasn't found at the browser level: send page commands with a page's sessionId"),
            ),
        }
    }

    fn browser_info(&self) -> Value {
        json!({
            "targetId": self.browser_id(),
            "type": "browser",
            "title": "",
            "url": "",
            "attached": true,
            "canAccessOpener": false,
        })
    }

    fn set_auto_attach(&self, client: &Arc<ClientHandle>, command: &Command<'_>, session: Option<&str>) {
        let reply = Replier { client, id: command.id, session };
        let params = match command.params::<AutoAttachParams>() {
            Ok(p) => p,
            Err(e) => return reply.err(code::INVALID_PARAMS, &e),
        };
        if params.auto_attach && !params.flatten {
            // As Chrome: browser-level auto-attach needs flat sessions.
            return reply.err(code::SERVER_ERROR, "Only flatten protocol is supported with browser level auto-attach");
        }
        // Hold the registry while announcing so that no tab event can slip in
        // between a client's attachedToTarget and our answer.
        let mut registry = self.registry();
        client.state().auto_attach = params.auto_attach.then(|| TargetFilter::from_param(params.filter));
        for target in registry.iter_mut() {
            client.auto_attach_root(target, self.context_id());
        }
        reply.ok(&json!({}));
    }

    fn set_discover_targets(&self, client: &Arc<ClientHandle>, command: &Command<'_>, session: Option<&str>) {
        let reply = Replier { client, id: command.id, session };
        let params = match command.params::<DiscoverParams>() {
            Ok(p) => p,
            Err(e) => return reply.err(code::INVALID_PARAMS, &e),
        };
        let registry = self.registry();
        let filter = params.discover.then(|| TargetFilter::from_param(params.filter));
        if let Some(filter) = &filter {
            let created =
                |info: Value| cdp::event("Target.targetCreated", &json!({"targetInfo": info}).to_string(), None);
            if filter.matches("browser") {
                client.send(created(self.browser_info()));
            }
            for target in registry.iter() {
                if filter.matches("tab") {
                    client.send(created(target.tab_info(self.context_id())));
                }
                if filter.matches("page") {
                    client.send(created(target.page_info(self.context_id())));
                }
            }
        }
        client.state().discover = filter;
        reply.ok(&json!({}));
    }

    fn attach_to_target(&self, client: &Arc<ClientHandle>, command: &Command<'_>, session: Option<&str>) {
        let reply = Replier { client, id: command.id, session };
        let params: TargetIdParams = match command.params() {
            Ok(p) => p,
            Err(e) => return reply.err(code::INVALID_PARAMS, &e),
        };
        if !params.flatten {
            return reply.err(code::SERVER_ERROR, "Browser Relay supports flat sessions only: pass flatten: true");
        }
        let Some(target_id) = params.target_id else {
            return reply.err(code::INVALID_PARAMS, "Invalid parameters: targetId is required");
        };
        let mut registry = self.registry();
        let Some(target) = registry.by_target_id_mut(&target_id) else {
            return reply.err(code::INVALID_PARAMS, NO_TARGET);
        };
        let (kind, info) = if *target.tab_target_id == *target_id {
            (SubKind::Tab, target.tab_info(self.context_id()))
        } else {
            (SubKind::Page, target.page_info(self.context_id()))
        };
        // Each explicit attach is a new session, as in Chrome, so detaching
        // it never disturbs the client's other sessions on the same page.
        let new_session = new_id();
        client.subscribe(&mut client.state(), target, kind, new_session.clone(), session.map(Arc::from));
        client.send(attached_event(&new_session, info, session));
        reply.ok(&json!({"sessionId": &*new_session}));
    }

    fn detach_from_target(&self, client: &Arc<ClientHandle>, command: &Command<'_>, session: Option<&str>) {
        let reply = Replier { client, id: command.id, session };
        let Ok(SessionParams { session_id: Some(detach) }) = command.params::<SessionParams>() else {
            return reply.err(code::INVALID_PARAMS, "Invalid parameters: sessionId is required");
        };
        let held = client.state().sessions.get(detach.as_str()).cloned();
        match held {
            Some(SessionKind::Browser) => {
                client.forget_session(&detach);
                let params = json!({"sessionId": detach, "targetId": self.browser_id()}).to_string();
                client.send(cdp::event("Target.detachedFromTarget", &params, None));
                reply.ok(&json!({}));
            }
            Some(SessionKind::Page(target_id) | SessionKind::Tab(target_id)) => {
                let mut registry = self.registry();
                if let Some(target) = registry.by_target_id_mut(&target_id) {
                    // Detaching a tab session takes the page sessions under it along.
                    let mut gone: Vec<Subscription> = Vec::new();
                    target.subs.retain(|s| {
                        let hit = s.client.id == client.id
                            && (*s.session == *detach || s.parent.as_deref() == Some(detach.as_str()));
                        if hit {
                            gone.push(s.clone());
                        }
                        !hit
                    });
                    gone.sort_by_key(|s| s.kind == SubKind::Tab);
                    for sub in gone {
                        client.forget_session(&sub.session);
                        let id = if sub.kind == SubKind::Tab { &target.tab_target_id } else { &target.target_id };
                        let params = json!({"sessionId": &*sub.session, "targetId": &**id}).to_string();
                        client.send(cdp::event("Target.detachedFromTarget", &params, sub.parent.as_deref()));
                    }
                }
                reply.ok(&json!({}));
            }
            None => match self.0.children.get(detach.as_str()).map(|e| *e.value()) {
                // Chrome's own child session: Chrome detaches it.
                Some(tab) => {
                    if !self.start_in_flight(&reply) {
                        return;
                    }
                    let relay = self.clone();
                    let client = client.clone();
                    let (id, session) = (command.id, session.map(str::to_string));
                    tokio::spawn(async move {
                        let reply = Replier { client: &client, id, session: session.as_deref() };
                        let params = json!({"sessionId": detach});
                        let result = relay.send_command(tab, "Target.detachFromTarget", Some(params)).await;
                        client.finish_command();
                        match result {
                            Ok(_) => reply.ok(&json!({})),
                            Err(e) => reply.err(code::SERVER_ERROR, &e.to_string()),
                        }
                    });
                }
                None => reply.err(code::SESSION_NOT_FOUND, "No session with given id"),
            },
        }
    }

    /// Browser-level commands that need the extension. Returns the raw result.
    async fn extension_backed(&self, method: &str, params: Option<&str>) -> Result<String, CallError> {
        let params = params.unwrap_or("{}");
        let bad = |e: serde_json::Error| CallError::Chrome(format!("Invalid parameters for {method}: {e}"));
        let target_tab = |params: &str| -> Result<TabId, CallError> {
            let p: TargetIdParams = serde_json::from_str(params).map_err(bad)?;
            let id = p.target_id.ok_or_else(|| CallError::Chrome("targetId is required".into()))?;
            self.tab_of_target(&id).ok_or_else(|| CallError::Chrome(NO_TARGET.into()))
        };
        match method {
            "Target.createTarget" => {
                let p: CreateTargetParams = serde_json::from_str(params).map_err(bad)?;
                let url = p.url.filter(|u| !u.is_empty()).unwrap_or_else(|| "about:blank".into());
                let created = self
                    .call(|id| RelayMessage::TabsCreate {
                        id,
                        url: Some(url),
                        active: !p.background,
                        opener_tab_id: None,
                    })
                    .await?;
                let tab: TabInfo = serde_json::from_str(&created)
                    .map_err(|e| CallError::Chrome(format!("unexpected tabs.create result: {e}")))?;
                // Announced to auto-attaching clients before we answer.
                let target_id = self.attach_and_register(&tab).await?;
                Ok(json!({"targetId": &*target_id}).to_string())
            }
            "Target.closeTarget" => {
                self.close_tab(target_tab(params)?).await?;
                Ok(json!({"success": true}).to_string())
            }
            "Target.activateTarget" => {
                self.activate_tab(target_tab(params)?).await?;
                Ok("{}".into())
            }
            // Cookies are per profile; any attached tab reaches them.
            "Storage.getCookies" => self.send_command(self.any_tab()?, "Network.getAllCookies", None).await,
            "Storage.setCookies" => {
                #[derive(Deserialize)]
                struct Cookies {
                    cookies: Value,
                }
                let p: Cookies = serde_json::from_str(params).map_err(bad)?;
                let params = json!({"cookies": p.cookies});
                self.send_command(self.any_tab()?, "Network.setCookies", Some(params)).await.map(|_| "{}".into())
            }
            "Storage.clearCookies" => {
                self.send_command(self.any_tab()?, "Network.clearBrowserCookies", None).await.map(|_| "{}".into())
            }
            other => Err(CallError::Chrome(format!("'{other}' wasn't found"))),
        }
    }

    fn any_tab(&self) -> Result<TabId, CallError> {
        self.registry()
            .iter()
            .next()
            .map(|t| t.tab_id)
            .ok_or_else(|| CallError::Chrome("no tab is attached: click the Browser Relay icon on a tab first".into()))
    }
}
