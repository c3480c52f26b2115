//! CDP clients: browser-level (`/cdp`, `/devtools/browser/<id>`) and
//! page-level (`/devtools/page/<id>`) connections and the routing of their
//! commands (the `Target.*`/`Browser.*` commands the relay answers itself
//! are in `browser_domain.rs`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use axum::extract::ws::{Message, Utf8Bytes, WebSocket};
use futures_util::StreamExt;
use futures_util::stream::SplitSink;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::browser_domain::{
    NO_SESSION, Scope, cookie_budget_refusal, cookies_deleted, is_browser_domain, wipe_refusal,
};
use super::cdp::{self, Command, code};
use super::queue::{self, Charge, Farewell, Meter, Outgoing, OverBudget, SharedFrame, write_loop};
use super::targets::{SubKind, Subscription, Target, TargetFilter, new_id};
use super::{InFlight, Relay};

/// What a session id a client holds stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SessionKind {
    /// A page session on the target with this page id.
    Page(Arc<str>),
    /// A Puppeteer tab session on the target with this page id.
    Tab(Arc<str>),
    /// An emulated browser session (`Target.attachToBrowserTarget`).
    Browser,
}

#[derive(Debug, Default)]
pub(crate) struct ClientState {
    pub(crate) auto_attach: Option<TargetFilter>,
    pub(crate) discover: Option<TargetFilter>,
    pub(crate) sessions: HashMap<Arc<str>, SessionKind>,
}

/// One connected CDP client, as the rest of the relay sees it.
#[derive(Debug)]
pub(crate) struct ClientHandle {
    pub id: u64,
    /// What the client calls itself ([`client_name`]), for the extension's
    /// options page.
    pub name: Arc<str>,
    /// Its whole `User-Agent` (visible ASCII, cut), for the dashboard.
    pub user_agent: Arc<str>,
    /// When it connected (ms since the epoch).
    pub since_ms: u64,
    /// The commands it sent.
    pub commands_sent: std::sync::atomic::AtomicU64,
    /// The managed profile a piped client drives (`None`: the user's tabs).
    pub profile: Option<Arc<str>>,
    /// Whose key it presented: the person's (every shared tab) or a
    /// grant's (its own tabs, within its sites: `crate::grants`).
    pub access: grants::Access,
    tx: mpsc::Sender<Outgoing>,
    /// Bytes queued to this client, and to all clients.
    queued: Arc<Meter>,
    all_clients: Arc<Meter>,
    /// Bytes of this client's commands queued to the extension.
    pub(crate) commands: Arc<Meter>,
    /// Cancelled when the connection ends: whatever waits on its behalf stops.
    pub(crate) kill: CancellationToken,
    /// The close frame it gets when the relay ends the connection.
    farewell: Farewell,
    in_flight: InFlight,
    /// For page-level endpoints: the session commands without a `sessionId` use.
    pub(crate) default_session: Option<Arc<str>>,
    state: Mutex<ClientState>,
}

impl ClientHandle {
    /// Whether `target` is this client's to see: every shared tab for the
    /// person's keys, a grant's own tabs for a grant's.
    pub(crate) fn sees(&self, target: &Target) -> bool {
        self.access.sees(target.grant.as_deref())
    }

    /// The grant it came through, if it did.
    pub(crate) fn grant(&self) -> Option<&Arc<grants::Grant>> {
        self.access.grant()
    }

    pub(crate) fn state(&self) -> MutexGuard<'_, ClientState> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Queues a frame. A client that lets its queue fill up (in frames or
    /// bytes) is too slow to keep: it is disconnected rather than allowed to
    /// stall everyone else or hold the relay's memory.
    pub(crate) fn send(&self, frame: impl Into<Utf8Bytes>) {
        let frame = frame.into();
        let charge = Meter::charge(&self.queued, &self.all_clients, frame.len());
        self.enqueue(frame, charge);
    }

    /// Queues a frame built once for many clients (see [`SharedFrame`]).
    pub(crate) fn send_shared(&self, frame: &SharedFrame) {
        self.enqueue(frame.text.clone(), frame.charge(&self.queued));
    }

    fn enqueue(&self, frame: Utf8Bytes, charge: Result<Charge, OverBudget>) {
        let charge = match charge {
            Ok(charge) => charge,
            Err(over) => return self.drop_unread(&over.describe()),
        };
        match self.tx.try_send(Outgoing { message: Message::Text(frame), _charge: charge }) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(_)) => {
                self.drop_unread(&format!("{} messages queued", self.tx.max_capacity()));
            }
            Err(mpsc::error::TrySendError::Closed(_)) => {}
        }
    }

    fn drop_unread(&self, why: &str) {
        tracing::warn!(client = self.id, "client is not reading its messages ({why}); disconnecting it");
        self.disconnect(
            queue::POLICY_VIOLATION,
            &format!("Browser Relay: this client did not read its messages: {why}"),
        );
    }

    /// Ends the connection now, dropping what is queued; the peer gets
    /// `reason` in the close frame if it still takes one.
    pub(crate) fn disconnect(&self, code: u16, reason: &str) {
        let _ = self.farewell.set(queue::close_frame(code, reason));
        self.kill.cancel();
    }

    /// Sends a close frame after everything already queued, then ends.
    pub(crate) fn close(&self, code: u16, reason: &str) {
        let close =
            Outgoing { message: Message::Close(Some(queue::close_frame(code, reason))), _charge: Charge::none() };
        if self.tx.try_send(close).is_err() {
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

/// Lets a queued close frame go out, but never waits on a dead peer: the
/// writer gives up on its own after its grace; this is the backstop.
async fn finish_writer(client: &ClientHandle, mut writer: JoinHandle<()>) {
    if tokio::time::timeout(std::time::Duration::from_secs(1), &mut writer).await.is_err() {
        client.kill.cancel();
        if tokio::time::timeout(std::time::Duration::from_secs(2), &mut writer).await.is_err() {
            writer.abort();
        }
    }
}

/// A reply addressed to the session a command came on.
pub(crate) struct Replier<'a> {
    pub(crate) client: &'a Arc<ClientHandle>,
    pub(crate) id: i64,
    pub(crate) session: Option<&'a str>,
}

impl Replier<'_> {
    pub(crate) fn ok(&self, result: &Value) {
        self.client.send(cdp::response(self.id, &result.to_string(), self.session));
    }

    pub(crate) fn err(&self, code: i64, message: &str) {
        self.client.send(cdp::error(Some(self.id), code, message, self.session));
    }
}

/// The name a client goes by on the extension's options page: the first
/// word of its `User-Agent` (`Playwright/1.57.0`, `Puppeteer`), at most 64
/// visible ASCII characters, or `CDP client` when it sent none.
pub fn client_name(user_agent: Option<&str>) -> String {
    let word = user_agent.and_then(|ua| ua.split_whitespace().next()).unwrap_or_default();
    let name: String = word.chars().filter(char::is_ascii_graphic).take(64).collect();
    if name.is_empty() { "CDP client".into() } else { name }
}

/// How a client is shown: its [`client_name`], and its whole user agent
/// (visible ASCII and spaces, at most 200 characters) for the dashboard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientLabel {
    pub name: String,
    pub user_agent: String,
}

impl ClientLabel {
    pub fn of(user_agent: Option<&str>) -> Self {
        let whole: String =
            user_agent.unwrap_or_default().chars().filter(|c| *c == ' ' || c.is_ascii_graphic()).take(200).collect();
        Self { name: client_name(user_agent), user_agent: whole.trim().to_string() }
    }
}

impl Relay {
    /// Runs one CDP client connection to its end. `page_target` makes it a
    /// page-level endpoint bound to that target; `name` is what it calls
    /// itself ([`client_name`]).
    pub async fn serve_client(
        &self,
        socket: WebSocket,
        page_target: Option<Arc<str>>,
        label: ClientLabel,
        access: grants::Access,
        _slot: crate::ClientSlot,
    ) {
        let (sink, mut stream) = socket.split();
        let default_session = page_target.as_ref().map(|_| new_id());
        let (client, writer) = self.open_client(sink, default_session, label, None, access);
        let kill = client.kill.clone();
        if let (Some(target_id), Some(session)) = (&page_target, &client.default_session) {
            let subscribed = {
                let mut registry = self.registry();
                let visible = registry.by_target_id_mut(target_id).filter(|target| client.sees(target));
                visible.map(|target| {
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
            self.holders_changed();
            if subscribed.is_none() {
                client.close(1011, "no such target: it was detached or closed");
                let _ = writer.await;
                return;
            }
        }
        self.register_client(client.clone());
        self.note_connection(&client, page_target.as_deref(), true);
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
                    Some(Ok(Message::Close(_))) | None => {
                        // The peer is gone: nothing more goes out, and its
                        // slot under the client cap is free at once (a
                        // script reconnecting in a loop must not find the
                        // cap full of clients that already left).
                        kill.cancel();
                        break;
                    }
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
        self.note_connection(&client, None, false);
        finish_writer(&client, writer).await;
        tracing::debug!(client = client.id, "CDP client gone");
    }

    /// A client connection's handle and its writer: the same frame and byte
    /// budgets for every client socket, the relay's own and the piped ones.
    fn open_client(
        &self,
        sink: SplitSink<WebSocket, Message>,
        default_session: Option<Arc<str>>,
        label: ClientLabel,
        profile: Option<Arc<str>>,
        access: grants::Access,
    ) -> (Arc<ClientHandle>, JoinHandle<()>) {
        let config = self.config();
        let (tx, rx) = mpsc::channel(config.client_queue);
        let kill = CancellationToken::new();
        let farewell = Farewell::default();
        let client = Arc::new(ClientHandle {
            id: self.next_client_id(),
            name: label.name.into(),
            user_agent: label.user_agent.into(),
            since_ms: activity::now_millis(),
            commands_sent: std::sync::atomic::AtomicU64::new(0),
            profile,
            access,
            tx,
            queued: Meter::new(config.client_queue_bytes),
            all_clients: self.client_bytes().clone(),
            commands: Meter::new(config.client_command_bytes),
            kill: kill.clone(),
            farewell: farewell.clone(),
            in_flight: InFlight::default(),
            default_session,
            state: Mutex::new(ClientState::default()),
        });
        let writer = tokio::spawn(write_loop(sink, rx, kill, farewell));
        (client, writer)
    }

    /// A client socket whose CDP is answered elsewhere (a managed browser's
    /// pipe session): its frames go to `to_browser` as they are, called on
    /// this task (`false`: the session is over), and the
    /// frames of `from_browser` reach it through the same queue, byte
    /// budgets and writer as the relay's own clients', so a client that
    /// stops reading is dropped at its budget instead of holding memory.
    /// Ends when either side ends or the server stops.
    pub async fn serve_piped_client(
        &self,
        socket: WebSocket,
        mut to_browser: impl FnMut(&str) -> bool + Send,
        mut from_browser: mpsc::UnboundedReceiver<String>,
        label: ClientLabel,
        profile: String,
        _slot: crate::ClientSlot,
    ) {
        let (sink, mut stream) = socket.split();
        // The managed profiles are the person's: a grant's key never opens them.
        let (client, writer) = self.open_client(sink, None, label, Some(profile.into()), grants::Access::Person);
        self.0.piped.insert(client.id, client.clone());
        self.note_connection(&client, None, true);
        loop {
            tokio::select! {
                () = client.kill.cancelled() => break,
                () = self.shutting_down().cancelled() => {
                    client.close(1001, "Browser Relay is shutting down");
                    break;
                }
                frame = from_browser.recv() => match frame {
                    Some(text) => client.send(text),
                    None => {
                        // The session ended: the page closed, the browser exited.
                        client.close(1000, "the browser session ended");
                        break;
                    }
                },
                frame = stream.next() => {
                    let binary;
                    let text = match &frame {
                        Some(Ok(Message::Text(text))) => text.as_str(),
                        Some(Ok(Message::Binary(bytes))) => {
                            binary = String::from_utf8_lossy(bytes);
                            &binary
                        }
                        Some(Ok(Message::Close(_)) | Err(_)) | None => {
                            client.kill.cancel();
                            break;
                        }
                        Some(Ok(_)) => continue,
                    };
                    self.note_piped_frame(&client, text);
                    if !to_browser(text) {
                        client.close(1000, "the browser session ended");
                        break;
                    }
                }
            }
        }
        // Dropping `to_browser` (its pipe session) detaches the session.
        drop(to_browser);
        self.0.piped.remove(&client.id);
        self.note_connection(&client, None, false);
        finish_writer(&client, writer).await;
    }

    /// A client left: drop its subscriptions and the answers it waits for,
    /// and take back what it set on the tabs (as Chrome would with its
    /// session); leave everything else as is.
    fn forget_client(&self, client: &Arc<ClientHandle>) {
        let link = self.link();
        let mut registry = self.registry();
        let mut orphans = Vec::new();
        for target in registry.iter_mut() {
            if target.disown(client.id) {
                orphans.push(target.tab_id);
            }
            let undo = target.forget_client(client.id);
            // Queued under the registry lock: any later client's command on
            // this tab is recorded after, and goes out after.
            if let Some(link) = &link {
                for step in undo {
                    self.send_undo(link, target.tab_id, step);
                }
            }
            // What it held paused goes on to the next client, or to Chrome.
            for route in target.interception.forget_client(client.id) {
                self.route_paused(link.as_deref(), target, route);
            }
        }
        // Gone from the client list before the registry is released, so a
        // tab it is creating right now sees it gone (`own_created_tab`).
        self.0.clients.remove(&client.id);
        drop(registry);
        // The sites its grant's tabs have been on count from when its
        // clients connected (`--ask new-site`).
        if let Some(grant) = client.grant()
            && !self.0.clients.iter().any(|c| c.grant().is_some_and(|g| g.name == grant.name))
        {
            self.forget_visits(grant.name.as_str());
        }
        self.holders_changed();
        self.close_orphans(orphans);
        self.0.pending.forget_client(client.id);
        client.state().sessions.clear();
    }

    async fn on_client_text(&self, client: &Arc<ClientHandle>, text: &str) {
        let command = match Command::parse(text) {
            Ok(command) => command,
            Err(bad) => return client.send(cdp::error(bad.id, bad.code, &bad.message, None)),
        };
        let explicit = command.session_id.as_deref();
        // The user's cookie jar and cache are theirs, on every session:
        // no wipe at once, nor cookie by cookie.
        let refusal = wipe_refusal(&command.method, self.config().wipes_allowed).or_else(|| {
            let deleting = cookies_deleted(&command.method, command.params, now_secs());
            (!self.take_cookie_deletions(deleting)).then(|| cookie_budget_refusal(&command.method))
        });
        self.note_command(client, &command, refusal.is_some());
        if let Some(refusal) = refusal {
            return Replier { client, id: command.id, session: explicit }.err(code::SERVER_ERROR, &refusal);
        }
        let Some(session) = explicit.or(client.default_session.as_deref()) else {
            return self.browser_command(client, &command, None, Scope::Root);
        };
        let held = client.state().sessions.get(session).cloned();
        let reply = Replier { client, id: command.id, session: explicit };
        match held {
            Some(SessionKind::Browser) => self.browser_command(client, &command, explicit, Scope::Root),
            Some(SessionKind::Tab(target_id)) => self.tab_command(client, &command, session, &target_id),
            Some(SessionKind::Page(target_id)) => {
                // Chrome offers the browser domains on page sessions too;
                // only session-scoped auto-attach reaches the tab.
                if is_browser_domain(&command.method) && command.method != "Target.setAutoAttach" {
                    return self.browser_command(client, &command, explicit, Scope::Page(&target_id));
                }
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
    pub(crate) fn start_in_flight(&self, reply: &Replier<'_>) -> bool {
        let max = self.config().max_in_flight;
        let started = reply.client.in_flight.try_start(max);
        if !started {
            reply.err(code::SERVER_ERROR, &format!("too many commands in flight ({max}): wait for replies first"));
        }
        started
    }
}

/// Now, in seconds since the epoch (CDP's `TimeSinceEpoch`).
fn now_secs() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::client_name;

    #[test]
    fn clients_are_named_by_the_first_word_of_their_user_agent() {
        let playwright = "Playwright/1.57.0 (x64; debian 12) node/20.20";
        assert_eq!(client_name(Some(playwright)), "Playwright/1.57.0");
        assert_eq!(client_name(Some("Puppeteer 24.1.0")), "Puppeteer");
        assert_eq!(client_name(None), "CDP client");
        assert_eq!(client_name(Some("   ")), "CDP client");
        assert_eq!(client_name(Some("<b>\u{7}é</b>")), "<b></b>", "visible ASCII only (shown as text)");
        assert_eq!(client_name(Some(&"x".repeat(500))).len(), 64);
    }
}
