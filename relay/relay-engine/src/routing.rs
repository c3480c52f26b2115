//! A CDP client's socket, browser-level (`/cdp`, `/devtools/browser/<id>`)
//! or page-level (`/devtools/page/<id>`), served to its end: its commands
//! routed by session (the `Target.*`/`Browser.*` commands the relay answers
//! itself are in `browser_domain.rs`, the rest go on in `forward.rs`), and
//! what a leaving client takes with it.

use std::sync::Arc;

use axum::extract::ws::{Message, WebSocket};
use futures_util::{Sink, Stream, StreamExt};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::browser_domain::{
    NO_SESSION, Scope, cookie_budget_refusal, cookies_deleted, is_browser_domain, wipe_refusal,
};
use crate::cdp::{self, Command, code};
use crate::client::{ClientHandle, ClientLabel, Replier, SessionKind};
use crate::queue::write_loop;
use crate::relay::{ClientSlot, Relay};
use crate::targets::{SubKind, Subscription, new_id};

impl Relay {
    /// Runs one CDP client connection to its end: a WebSocket, or an
    /// in-process client's channels ([`Relay::connect_in_process`]).
    /// `page_target` makes it a page-level endpoint bound to that target;
    /// `name` is what it calls itself ([`crate::client_name`]).
    pub async fn serve_client<S>(
        &self,
        socket: S,
        page_target: Option<Arc<str>>,
        label: ClientLabel,
        access: grants::Access,
        _slot: ClientSlot,
    ) where
        S: Stream<Item = Result<Message, axum::Error>> + Sink<Message, Error = axum::Error> + Send + 'static,
    {
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

    /// A client connection's handle and its writer.
    fn open_client<W>(
        &self,
        sink: W,
        default_session: Option<Arc<str>>,
        label: ClientLabel,
        profile: Option<Arc<str>>,
        access: grants::Access,
    ) -> (Arc<ClientHandle>, JoinHandle<()>)
    where
        W: Sink<Message> + Unpin + Send + 'static,
        W::Error: Send,
    {
        let all_clients = self.client_bytes().clone();
        let id = self.next_client_id();
        let (client, rx) = ClientHandle::new(id, label, profile, access, default_session, self.config(), all_clients);
        let writer = tokio::spawn(write_loop(sink, rx, client.kill.clone(), client.farewell.clone()));
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
        _slot: ClientSlot,
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
        let started = reply.client.start_command(max);
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
