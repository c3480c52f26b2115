//! A managed browser's CDP over `--remote-debugging-pipe`: the browser
//! reads commands on its fd 3 and writes answers and events on its fd 4,
//! each message JSON ended by a NUL byte. No TCP port exists, so nothing
//! but the process that launched the browser can speak to it.
//!
//! A remote browser (a profile's `cdpUrl`) is one WebSocket, multiplexed
//! the same way ([`Pipe::over`]): every client of the relay, and the
//! control engine, shares that one connection, so all of them see the same
//! browser even on a farm that starts a browser per connection.
//!
//! **One pipe, many clients.** Chrome gives each WebSocket its own state
//! (discovered targets, auto-attach, download behaviour, the sessions it
//! attached); a pipe is one connection. So each client gets a session of
//! its own, and the pipe is multiplexed by session:
//!
//! - a browser-level client ([`Endpoint::Browser`]) is a session on the
//!   browser target (`Target.attachToBrowserTarget`), which Chrome treats
//!   exactly as a browser WebSocket of its own;
//! - a page-level client ([`Endpoint::Page`]) is a flat session on that
//!   page (`Target.attachToTarget`), as `/devtools/page/<id>` is.
//!
//! That session is the client's *root*: its commands without a `sessionId`
//! go there, and what comes back from it loses the `sessionId` again. The
//! sessions a client attaches (answers with a `sessionId`, and
//! `Target.attachedToTarget` events on sessions it owns) are its own; a
//! command naming anyone else's session is refused as Chrome refuses an
//! unknown one. Ids are renumbered on the way in and restored on the way
//! out, so clients may all count from 1.
//!
//! A client leaves by dropping its [`PipeClient`] (or its
//! [`Channels::outgoing`]): its root session is detached, which detaches
//! everything it attached through it (as closing a WebSocket does). The
//! pipe closing (the browser exited) ends every client's receiver.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use cdp_client::protocol::{Command, browser, target};
use cdp_client::{CdpError, Channels};

use crate::process::{BrowserReader as Receiver, BrowserWriter as Sender};

/// The largest message the browser may send (a full-page screenshot is
/// large; Chrome's own WebSocket limit is 256 MiB).
const MAX_MESSAGE: usize = 256 << 20;

/// What the pipe's reader asks for at once, and what its buffer keeps
/// between messages.
const READ_CHUNK: usize = 64 << 10;
/// A read buffer above this size is shrunk back to [`READ_CHUNK`] once the
/// large message that grew it is handled.
const KEPT_READ_BUFFER: usize = 1 << 20;

/// Where a client connects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// The browser, as `/devtools/browser/<id>`.
    Browser,
    /// One target, as `/devtools/page/<id>`.
    Page(String),
}

/// One message, its top-level fields kept as they came (the payload is
/// never parsed, only copied).
type Frame = BTreeMap<String, Box<RawValue>>;

type Answer = Result<Value, (i64, String)>;

#[derive(Debug)]
enum Call {
    /// One of the pipe's own calls.
    Own(oneshot::Sender<Answer>),
    /// A client's root session being attached: registered when answered.
    Root { client: u64, reply: oneshot::Sender<Answer> },
    /// A client's command, with the id the client gave it. `claims`: the
    /// answer names a session the client now owns.
    Client { client: u64, id: Box<RawValue>, claims: bool },
    /// Answered to nobody (a leaving client's detach).
    Ignored,
}

/// Commands one client may have waiting on the browser (as the relay's
/// own clients: `RelayConfig::max_in_flight`).
pub(crate) const MAX_IN_FLIGHT: usize = 512;
/// Sessions one client may attach (`Target.attachToTarget`,
/// `attachToBrowserTarget`), as the relay's own clients.
pub(crate) const MAX_SESSIONS: usize = 1024;

#[derive(Debug)]
struct Client {
    to_client: mpsc::UnboundedSender<String>,
    root: Option<String>,
    /// Its commands the browser has not answered yet.
    in_flight: usize,
}

#[derive(Debug, Default)]
struct Routes {
    calls: HashMap<u64, Call>,
    /// Session → the client that owns it.
    owners: HashMap<String, u64>,
    clients: HashMap<u64, Client>,
}

impl Routes {
    /// Forgets a client, every session it owned and its calls still
    /// waiting (their answers then go nowhere); its root, to detach.
    fn remove_client(&mut self, client: u64) -> Option<String> {
        self.owners.retain(|_, owner| *owner != client);
        self.calls.retain(|_, call| !matches!(call, Call::Client { client: c, .. } if *c == client));
        self.clients.remove(&client).and_then(|c| c.root)
    }

    fn sessions_of(&self, client: u64) -> usize {
        self.owners.values().filter(|owner| **owner == client).count()
    }
}

/// One client's session on a [`Pipe`] ([`Pipe::attach`]); dropping it
/// leaves, detaching the client's sessions as a closed WebSocket would.
#[derive(Debug)]
pub struct PipeClient {
    pipe: Arc<Pipe>,
    client: u64,
}

impl PipeClient {
    /// Routes one CDP command of the client's to the browser at once (a
    /// malformed or refused one is answered on the client's receiver);
    /// `false` when the session is over (the page closed, the browser
    /// exited).
    pub fn send(&self, text: &str) -> bool {
        !self.pipe.is_closed() && self.pipe.route_command(self.client, text)
    }
}

impl Drop for PipeClient {
    fn drop(&mut self) {
        self.pipe.leave(self.client);
    }
}

/// The browser end of a managed browser's pipe. Cheap to share.
#[derive(Debug)]
pub struct Pipe {
    to_browser: mpsc::UnboundedSender<Vec<u8>>,
    routes: Mutex<Routes>,
    closed: CancellationToken,
    next_id: AtomicU64,
    next_client: AtomicU64,
}

#[derive(Deserialize)]
struct SessionParams {
    #[serde(rename = "sessionId")]
    session_id: Option<String>,
}

/// The `sessionId` inside a message's `params` or `result`.
fn session_in(frame: &Frame, field: &str) -> Option<String> {
    frame.get(field).and_then(|raw| serde_json::from_str::<SessionParams>(raw.get()).ok()).and_then(|p| p.session_id)
}

fn string_field(frame: &Frame, field: &str) -> Option<String> {
    frame.get(field).and_then(|raw| serde_json::from_str::<String>(raw.get()).ok())
}

fn raw(value: impl serde::Serialize) -> Box<RawValue> {
    serde_json::value::to_raw_value(&value).expect("serialises")
}

/// A CDP error answer for a client's command.
fn error_frame(id: Option<Box<RawValue>>, code: i64, message: &str) -> String {
    let mut frame = Frame::new();
    if let Some(id) = id {
        frame.insert("id".into(), id);
    }
    frame.insert("error".into(), raw(json!({"code": code, "message": message})));
    serde_json::to_string(&frame).expect("serialises")
}

impl Pipe {
    /// Starts reading and writing the browser's pipe.
    pub(crate) fn start(to_browser: Sender, from_browser: Receiver) -> Arc<Self> {
        let (pipe, rx) = Self::new();
        tokio::spawn(write_loop(to_browser, rx, pipe.closed.clone()));
        tokio::spawn(read_loop(from_browser, Arc::downgrade(&pipe), pipe.closed.clone()));
        pipe
    }

    /// A remote browser's WebSocket (its text frames on `socket`),
    /// multiplexed as a pipe is. Dropping the last `Arc` or [`Self::close`]
    /// closes the socket.
    pub fn over(socket: Channels) -> Arc<Self> {
        let (pipe, rx) = Self::new();
        tokio::spawn(socket_write_loop(socket.outgoing, rx, pipe.closed.clone()));
        tokio::spawn(socket_read_loop(socket.incoming, Arc::downgrade(&pipe), pipe.closed.clone()));
        pipe
    }

    /// A multiplexer with no clients yet, and the frames it will write to
    /// the browser, for the caller's write loop.
    fn new() -> (Arc<Self>, mpsc::UnboundedReceiver<Vec<u8>>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let pipe = Arc::new(Self {
            to_browser: tx,
            routes: Mutex::new(Routes::default()),
            closed: CancellationToken::new(),
            next_id: AtomicU64::new(1),
            next_client: AtomicU64::new(1),
        });
        (pipe, rx)
    }

    /// Ends the connection: every client's `incoming` ends, every call
    /// hears `Closed`.
    pub fn close(&self) {
        self.closed.cancel();
    }

    /// The browser's end of the pipe closed: it exited (or crashed), or a
    /// remote browser's socket closed.
    pub fn is_closed(&self) -> bool {
        self.closed.is_cancelled()
    }

    /// Resolves when the pipe closes.
    #[cfg(feature = "testing")]
    pub async fn closed(&self) {
        self.closed.cancelled().await;
    }

    fn routes(&self) -> MutexGuard<'_, Routes> {
        self.routes.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self, frame: &Frame) {
        let _ = self.to_browser.send(serde_json::to_vec(frame).expect("serialises"));
    }

    /// Sends a typed command of the pipe's own (browser level) and waits
    /// for its result.
    pub async fn send<C: Command>(&self, command: &C, within: Duration) -> Result<C::Response, CdpError> {
        let params = serde_json::to_value(command).unwrap_or(Value::Null);
        let (reply, answer) = oneshot::channel();
        self.send_own(C::METHOD, params, Call::Own(reply));
        let value = self.await_answer(C::METHOD, answer, within).await?;
        serde_json::from_value(value)
            .map_err(|e| CdpError::Unexpected { method: C::METHOD.to_string(), reason: e.to_string() })
    }

    /// Whether what answers is a browser: its version within `within`, and
    /// its browser target's id (for `/devtools/browser/<id>`; `None` when
    /// it does not say). How a launch and a remote connection both know
    /// they are ready.
    pub async fn probe(&self, within: Duration) -> Result<(browser::Version, Option<String>), CdpError> {
        let version = self.send(&browser::GetVersion {}, within).await?;
        // A browser answers this at once; its id is not worth waiting for.
        let info = self.send(&target::GetTargetInfo { target_id: None }, within.min(Duration::from_secs(5))).await.ok();
        Ok((version, info.map(|i| i.target_info.target_id)))
    }

    fn send_own(&self, method: &str, params: Value, call: Call) {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.routes().calls.insert(id, call);
        let mut frame = Frame::new();
        frame.insert("id".into(), raw(id));
        frame.insert("method".into(), raw(method));
        frame.insert("params".into(), raw(params));
        self.write(&frame);
    }

    async fn await_answer(
        &self,
        method: &str,
        answer: oneshot::Receiver<Answer>,
        within: Duration,
    ) -> Result<Value, CdpError> {
        tokio::select! {
            answer = tokio::time::timeout(within, answer) => match answer {
                Ok(Ok(Ok(value))) => Ok(value),
                Ok(Ok(Err((code, message)))) => Err(CdpError::Protocol { method: method.into(), code, message }),
                Ok(Err(_)) => Err(CdpError::Closed(method.into())),
                Err(_) => Err(CdpError::Timeout(method.into(), within)),
            },
            () = self.closed.cancelled() => Err(CdpError::Closed(method.into())),
        }
    }

    /// A new client: its own session on the browser or on one target. The
    /// client speaks CDP over the returned channels as over a WebSocket.
    pub async fn connect(self: &Arc<Self>, endpoint: Endpoint) -> Result<Channels, CdpError> {
        let (client, incoming) = self.attach(endpoint).await?;
        let (outgoing, mut from_client) = mpsc::unbounded_channel::<String>();
        let closed = self.closed.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = closed.cancelled() => break,
                    text = from_client.recv() => match text {
                        Some(text) => drop(client.send(&text)),
                        None => break,
                    },
                }
            }
        });
        Ok(Channels { outgoing, incoming })
    }

    /// [`Self::connect`] without a task between the client and the pipe:
    /// what the client sends is routed by [`PipeClient::send`] on the
    /// caller's own task (the relay's socket loop of a `/profiles/<name>/`
    /// client), one hand-over less per command. Its answers and events
    /// come on the receiver, which ends when the session does.
    pub async fn attach(
        self: &Arc<Self>,
        endpoint: Endpoint,
    ) -> Result<(PipeClient, mpsc::UnboundedReceiver<String>), CdpError> {
        let client = self.next_client.fetch_add(1, Ordering::Relaxed);
        let (to_client, incoming) = mpsc::unbounded_channel();
        self.routes().clients.insert(client, Client { to_client, root: None, in_flight: 0 });
        let (method, params) = match &endpoint {
            Endpoint::Browser => ("Target.attachToBrowserTarget", json!({})),
            Endpoint::Page(target) => ("Target.attachToTarget", json!({"targetId": target, "flatten": true})),
        };
        let (reply, answer) = oneshot::channel();
        self.send_own(method, params, Call::Root { client, reply });
        if let Err(error) = self.await_answer(method, answer, Duration::from_secs(10)).await {
            self.leave(client);
            return Err(error);
        }
        Ok((PipeClient { pipe: Arc::clone(self), client }, incoming))
    }

    /// The client left: its sessions are detached, as when a WebSocket
    /// closes.
    fn leave(&self, client: u64) {
        let root = self.routes().remove_client(client);
        if let Some(root) = root.filter(|_| !self.is_closed()) {
            self.send_own("Target.detachFromTarget", json!({"sessionId": root}), Call::Ignored);
        }
    }

    /// A client's command, onto the pipe with our id and its session;
    /// `false` when the client's session is over.
    fn route_command(&self, client: u64, text: &str) -> bool {
        let mut routes = self.routes();
        let Some(to_client) = routes.clients.get(&client).map(|c| c.to_client.clone()) else { return false };
        let refuse = |id, code, message: &str| {
            drop(to_client.send(error_frame(id, code, message)));
            true
        };
        let Ok(mut frame) = serde_json::from_str::<Frame>(text) else {
            return refuse(None, -32700, "Message must be a valid JSON");
        };
        let id = frame.remove("id").filter(|id| serde_json::from_str::<i64>(id.get()).is_ok());
        let Some(id) = id else {
            return refuse(None, -32600, "Message must have integer 'id' property");
        };
        let Some(method) = string_field(&frame, "method") else {
            return refuse(Some(id), -32600, "Message must have string 'method' property");
        };
        let session = match frame.get("sessionId") {
            None => routes.clients.get(&client).and_then(|c| c.root.clone()),
            Some(_) => string_field(&frame, "sessionId").filter(|s| routes.owners.get(s) == Some(&client)),
        };
        let Some(session) = session else {
            return refuse(Some(id), -32001, "Session with given id not found.");
        };
        let claims = matches!(method.as_str(), "Target.attachToTarget" | "Target.attachToBrowserTarget");
        let in_flight = routes.clients.get(&client).map_or(0, |c| c.in_flight);
        if in_flight >= MAX_IN_FLIGHT {
            let message = format!("too many commands in flight ({MAX_IN_FLIGHT}): wait for replies first");
            return refuse(Some(id), -32000, &message);
        }
        if claims && routes.sessions_of(client) >= MAX_SESSIONS {
            let message = format!("too many sessions ({MAX_SESSIONS}) on this connection: detach some first");
            return refuse(Some(id), -32000, &message);
        }
        if let Some(entry) = routes.clients.get_mut(&client) {
            entry.in_flight += 1;
        }
        let ours = self.next_id.fetch_add(1, Ordering::Relaxed);
        routes.calls.insert(ours, Call::Client { client, id, claims });
        drop(routes);
        frame.insert("id".into(), raw(ours));
        frame.insert("sessionId".into(), raw(session));
        self.write(&frame);
        true
    }

    /// A message from the browser, to whom it belongs.
    fn route_message(&self, bytes: &[u8]) {
        let Ok(mut frame) = serde_json::from_slice::<Frame>(bytes) else {
            tracing::warn!(len = bytes.len(), "the browser sent a message that is not JSON");
            return;
        };
        let session = string_field(&frame, "sessionId");
        let mut routes = self.routes();
        if let Some(id) = frame.get("id").and_then(|id| serde_json::from_str::<u64>(id.get()).ok()) {
            match routes.calls.remove(&id) {
                Some(Call::Own(reply)) => drop(reply.send(answer_of(&frame))),
                Some(Call::Root { client, reply }) => {
                    let answer = answer_of(&frame);
                    let root = session_in(&frame, "result");
                    match (routes.clients.get_mut(&client), root) {
                        (Some(entry), Some(root)) => {
                            entry.root = Some(root.clone());
                            routes.owners.insert(root, client);
                            drop(reply.send(answer));
                        }
                        // It left meanwhile: detach what it got.
                        (None, Some(root)) => {
                            drop(routes);
                            self.send_own("Target.detachFromTarget", json!({"sessionId": root}), Call::Ignored);
                        }
                        (_, None) => drop(reply.send(answer)),
                    }
                }
                Some(Call::Client { client, id, claims }) => {
                    if let Some(entry) = routes.clients.get_mut(&client) {
                        entry.in_flight = entry.in_flight.saturating_sub(1);
                    }
                    if claims && let Some(session) = session_in(&frame, "result") {
                        routes.owners.insert(session, client);
                    }
                    frame.insert("id".into(), id);
                    deliver(&routes, client, frame, session.as_deref());
                }
                Some(Call::Ignored) | None => {}
            }
            return;
        }
        let method = string_field(&frame, "method").unwrap_or_default();
        let Some(session) = session else {
            // A browser-level event of the pipe's own: a client's root
            // session ended (its page closed), which ends that client.
            if method == "Target.detachedFromTarget"
                && let Some(ended) = session_in(&frame, "params")
                && let Some(&client) = routes.owners.get(&ended)
                && routes.clients.get(&client).and_then(|c| c.root.as_deref()) == Some(ended.as_str())
            {
                routes.remove_client(client);
            }
            return;
        };
        let Some(&client) = routes.owners.get(&session) else { return };
        match method.as_str() {
            "Target.attachedToTarget" => {
                if let Some(child) = session_in(&frame, "params") {
                    routes.owners.insert(child, client);
                }
            }
            "Target.detachedFromTarget" => {
                if let Some(child) = session_in(&frame, "params") {
                    routes.owners.remove(&child);
                }
            }
            _ => {}
        }
        deliver(&routes, client, frame, Some(&session));
    }
}

/// Hands `frame` to `client`; from its root session it comes without a
/// `sessionId`, as on the client's own connection.
fn deliver(routes: &Routes, client: u64, mut frame: Frame, session: Option<&str>) {
    let Some(entry) = routes.clients.get(&client) else { return };
    if session.is_some() && entry.root.as_deref() == session {
        frame.remove("sessionId");
    }
    let _ = entry.to_client.send(serde_json::to_string(&frame).expect("serialises"));
}

fn answer_of(frame: &Frame) -> Answer {
    if let Some(error) = frame.get("error") {
        let error: Value = serde_json::from_str(error.get()).unwrap_or(Value::Null);
        return Err((error["code"].as_i64().unwrap_or(0), error["message"].as_str().unwrap_or_default().to_string()));
    }
    Ok(frame.get("result").and_then(|r| serde_json::from_str(r.get()).ok()).unwrap_or(Value::Null))
}

async fn write_loop(mut pipe: Sender, mut messages: mpsc::UnboundedReceiver<Vec<u8>>, closed: CancellationToken) {
    loop {
        let mut message = tokio::select! {
            () = closed.cancelled() => break,
            message = messages.recv() => match message { Some(m) => m, None => break },
        };
        message.push(0);
        if pipe.write_all(&message).await.is_err() {
            break;
        }
    }
    closed.cancel();
}

async fn read_loop(mut pipe: Receiver, owner: std::sync::Weak<Pipe>, closed: CancellationToken) {
    let mut buffer: Vec<u8> = Vec::with_capacity(READ_CHUNK);
    let mut chunk = vec![0u8; READ_CHUNK];
    // Where the search for the next NUL resumes.
    let mut scanned = 0;
    loop {
        let read = tokio::select! {
            () = closed.cancelled() => break,
            read = pipe.read(&mut chunk) => read,
        };
        let n = match read {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        buffer.extend_from_slice(&chunk[..n]);
        let mut start = 0;
        while let Some(end) = buffer[scanned..].iter().position(|b| *b == 0).map(|i| scanned + i) {
            let Some(pipe) = owner.upgrade() else { return };
            pipe.route_message(&buffer[start..end]);
            start = end + 1;
            scanned = start;
        }
        buffer.drain(..start);
        scanned = buffer.len();
        // A large message grew the buffer to its size, and `drain` keeps
        // that capacity: one 8 MB console message would hold 8 MB (more,
        // rounded up as it grew) for the pipe's life. Give it back once
        // the buffer holds little again.
        if buffer.capacity() > KEPT_READ_BUFFER && buffer.len() <= READ_CHUNK {
            buffer.shrink_to(READ_CHUNK);
        }
        if buffer.len() > MAX_MESSAGE {
            tracing::warn!("the managed browser sent a message over {MAX_MESSAGE} bytes; closing its pipe");
            break;
        }
    }
    ended(&owner, &closed);
}

/// The connection ended: every client's incoming ends; every waiter hears
/// `Closed`.
fn ended(owner: &std::sync::Weak<Pipe>, closed: &CancellationToken) {
    closed.cancel();
    if let Some(pipe) = owner.upgrade() {
        let mut routes = pipe.routes();
        routes.clients.clear();
        routes.calls.clear();
        routes.owners.clear();
    }
}

/// [`write_loop`] for a WebSocket: each message one text frame. Dropping
/// `socket` when done closes it.
async fn socket_write_loop(
    socket: mpsc::UnboundedSender<String>,
    mut messages: mpsc::UnboundedReceiver<Vec<u8>>,
    closed: CancellationToken,
) {
    loop {
        let message = tokio::select! {
            () = closed.cancelled() => break,
            message = messages.recv() => match message { Some(m) => m, None => break },
        };
        // Serialised JSON: always UTF-8.
        let text = String::from_utf8(message).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
        if socket.send(text).is_err() {
            break;
        }
    }
    closed.cancel();
}

/// [`read_loop`] for a WebSocket: each text frame one message.
async fn socket_read_loop(
    mut socket: mpsc::UnboundedReceiver<String>,
    owner: std::sync::Weak<Pipe>,
    closed: CancellationToken,
) {
    loop {
        let text = tokio::select! {
            () = closed.cancelled() => break,
            text = socket.recv() => match text { Some(text) => text, None => break },
        };
        let Some(pipe) = owner.upgrade() else { return };
        pipe.route_message(text.as_bytes());
    }
    ended(&owner, &closed);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A browser on the other end of real OS pipes: the test reads what the
    /// pipe writes and answers for the browser.
    struct FakeBrowser {
        commands: tokio::io::BufReader<Receiver>,
        events: Sender,
    }

    impl FakeBrowser {
        async fn next(&mut self) -> Value {
            use tokio::io::AsyncBufReadExt;
            let mut frame = Vec::new();
            self.commands.read_until(0, &mut frame).await.unwrap();
            frame.pop();
            serde_json::from_slice(&frame).unwrap()
        }

        async fn send(&mut self, message: Value) {
            let mut bytes = serde_json::to_vec(&message).unwrap();
            bytes.push(0);
            self.events.write_all(&bytes).await.unwrap();
        }

        /// Answers the next command, which must be `method`, with `result`.
        async fn answer(&mut self, method: &str, result: Value) -> Value {
            let command = self.next().await;
            assert_eq!(command["method"], method, "{command}");
            let mut answer = json!({"id": command["id"], "result": result});
            if let Some(session) = command.get("sessionId") {
                answer["sessionId"] = session.clone();
            }
            self.send(answer).await;
            command
        }
    }

    fn pipe_and_browser() -> (Arc<Pipe>, FakeBrowser) {
        let (browser_reads, to_browser) = crate::process::async_pipe().unwrap();
        let (from_browser, browser_writes) = crate::process::async_pipe().unwrap();
        let pipe = Pipe::start(to_browser, from_browser);
        let browser = FakeBrowser { commands: tokio::io::BufReader::new(browser_reads), events: browser_writes };
        (pipe, browser)
    }

    async fn connect(pipe: &Arc<Pipe>, browser: &mut FakeBrowser, endpoint: Endpoint, root: &str) -> Channels {
        let connecting = pipe.connect(endpoint);
        let answering = browser.answer(
            if root.starts_with("page") { "Target.attachToTarget" } else { "Target.attachToBrowserTarget" },
            json!({"sessionId": root}),
        );
        let (channels, _) = tokio::join!(connecting, answering);
        channels.unwrap()
    }

    async fn receive(channels: &mut Channels) -> Value {
        let text = tokio::time::timeout(Duration::from_secs(5), channels.incoming.recv()).await.unwrap().unwrap();
        serde_json::from_str(&text).unwrap()
    }

    #[tokio::test]
    async fn each_client_speaks_as_on_a_socket_of_its_own() {
        let (pipe, mut browser) = pipe_and_browser();
        let mut a = connect(&pipe, &mut browser, Endpoint::Browser, "root-a").await;
        let mut b = connect(&pipe, &mut browser, Endpoint::Browser, "root-b").await;

        // Both count from 1; each command goes to the client's own session.
        a.outgoing.send(r#"{"id":1,"method":"Target.setDiscoverTargets","params":{"discover":true}}"#.into()).unwrap();
        let to_a = browser.answer("Target.setDiscoverTargets", json!({})).await;
        b.outgoing.send(r#"{"id":1,"method":"Browser.getVersion"}"#.into()).unwrap();
        let to_b = browser.answer("Browser.getVersion", json!({"product": "Chrome/1"})).await;
        assert_eq!((to_a["sessionId"].as_str(), to_b["sessionId"].as_str()), (Some("root-a"), Some("root-b")));
        assert_ne!(to_a["id"], to_b["id"], "renumbered on the pipe");
        // Answers come back with the client's id and without the root session.
        assert_eq!(receive(&mut a).await, json!({"id": 1, "result": {}}));
        assert_eq!(receive(&mut b).await, json!({"id": 1, "result": {"product": "Chrome/1"}}));

        // An event of a's session reaches only a; a child it attaches is a's.
        let attached = json!({"method": "Target.attachedToTarget", "sessionId": "root-a",
            "params": {"sessionId": "child-a", "targetInfo": {"targetId": "T"}, "waitingForDebugger": false}});
        browser.send(attached).await;
        let event = receive(&mut a).await;
        assert_eq!((event["method"].as_str(), event.get("sessionId")), (Some("Target.attachedToTarget"), None));
        a.outgoing.send(r#"{"id":2,"method":"Runtime.enable","sessionId":"child-a"}"#.into()).unwrap();
        assert_eq!(browser.answer("Runtime.enable", json!({})).await["sessionId"], "child-a");
        assert_eq!(receive(&mut a).await, json!({"id": 2, "result": {}, "sessionId": "child-a"}));
        // b may not use a's session: refused as Chrome refuses an unknown one.
        b.outgoing.send(r#"{"id":2,"method":"Runtime.evaluate","sessionId":"child-a"}"#.into()).unwrap();
        let refused = receive(&mut b).await;
        assert_eq!((refused["id"].as_i64(), refused["error"]["code"].as_i64()), (Some(2), Some(-32001)), "{refused}");
        b.outgoing.send("not json".into()).unwrap();
        assert_eq!(receive(&mut b).await["error"]["code"], -32700);

        // a leaves: its root session is detached; b goes on.
        drop(a);
        let detach = browser.next().await;
        assert_eq!(
            (detach["method"].as_str(), detach["params"]["sessionId"].as_str()),
            (Some("Target.detachFromTarget"), Some("root-a"))
        );
        b.outgoing.send(r#"{"id":3,"method":"Browser.getVersion"}"#.into()).unwrap();
        browser.answer("Browser.getVersion", json!({})).await;
        assert_eq!(receive(&mut b).await["id"], 3);
    }

    /// What the activity record reads of a client's frame
    /// (`activity::summary::cdp_frame`) rests on this: the browser is sent
    /// the frame's members unescaped, the last of a repeated one.
    #[tokio::test]
    async fn a_frame_goes_on_with_its_members_unescaped_the_last_of_a_repeated_one() {
        let (pipe, mut browser) = pipe_and_browser();
        let mut client = connect(&pipe, &mut browser, Endpoint::Browser, "root").await;
        for frame in [
            r#"{"id":1,"method":"DOM.getDocument","method":"Runtime.evaluate","params":{"expression":"steal()"}}"#,
            r#"{"id":1,"\u006dethod":"Runtime.evaluate","params":{"expression":"1"},"params":{"expression":"steal()"}}"#,
        ] {
            client.outgoing.send(frame.into()).unwrap();
            let sent = browser.answer("Runtime.evaluate", json!({})).await;
            assert_eq!(sent["params"], json!({"expression": "steal()"}), "{frame}");
            assert_eq!(receive(&mut client).await["id"], 1);
        }
    }

    #[tokio::test]
    async fn a_client_is_bounded_in_flight_and_its_calls_go_when_it_leaves() {
        let (pipe, mut browser) = pipe_and_browser();
        let mut greedy = connect(&pipe, &mut browser, Endpoint::Browser, "root-a").await;
        // Commands the browser never answers (a promise that never settles).
        for id in 1..=MAX_IN_FLIGHT {
            let command = format!(
                r#"{{"id":{id},"method":"Runtime.evaluate","params":{{"expression":"new Promise(() => {{}})","awaitPromise":true}}}}"#
            );
            greedy.outgoing.send(command).unwrap();
        }
        greedy.outgoing.send(r#"{"id":9999,"method":"Browser.getVersion"}"#.into()).unwrap();
        let refused = receive(&mut greedy).await;
        assert_eq!(refused["id"], 9999, "{refused}");
        assert!(refused["error"]["message"].as_str().unwrap().contains("too many commands in flight"), "{refused}");
        for _ in 0..MAX_IN_FLIGHT {
            assert_eq!(browser.next().await["method"], "Runtime.evaluate");
        }
        assert_eq!(pipe.routes().calls.len(), MAX_IN_FLIGHT);
        // It leaves: its waiting calls are forgotten with it.
        drop(greedy);
        assert_eq!(browser.next().await["method"], "Target.detachFromTarget");
        assert_eq!(pipe.routes().calls.len(), 1, "only the detach is left: {:?}", pipe.routes().calls.keys());
    }

    #[tokio::test]
    async fn a_client_attaches_a_bounded_number_of_sessions() {
        let (pipe, mut browser) = pipe_and_browser();
        let mut client = connect(&pipe, &mut browser, Endpoint::Browser, "root").await;
        // The root is one of its sessions.
        for id in 1..MAX_SESSIONS {
            let attach =
                format!(r#"{{"id":{id},"method":"Target.attachToTarget","params":{{"targetId":"T","flatten":true}}}}"#);
            client.outgoing.send(attach).unwrap();
            browser.answer("Target.attachToTarget", json!({"sessionId": format!("s{id}")})).await;
            assert_eq!(receive(&mut client).await["id"], id);
        }
        client
            .outgoing
            .send(r#"{"id":5000,"method":"Target.attachToTarget","params":{"targetId":"T"}}"#.into())
            .unwrap();
        let refused = receive(&mut client).await;
        assert!(refused["error"]["message"].as_str().unwrap().contains("too many sessions"), "{refused}");
    }

    #[tokio::test]
    async fn a_page_client_ends_with_its_page_and_every_client_with_the_browser() {
        let (pipe, mut browser) = pipe_and_browser();
        let mut page = connect(&pipe, &mut browser, Endpoint::Page("P".into()), "page-root").await;
        let mut other = connect(&pipe, &mut browser, Endpoint::Browser, "root-b").await;
        // The page closed: Chrome detaches its session at the pipe's level.
        browser
            .send(json!({"method": "Target.detachedFromTarget", "params": {"sessionId": "page-root", "targetId": "P"}}))
            .await;
        assert!(page.incoming.recv().await.is_none(), "the page client's connection ends");
        // The browser exits: every client's connection ends, calls fail.
        let caller = Arc::clone(&pipe);
        let pending = tokio::spawn(async move { caller.send(&browser::GetVersion {}, Duration::from_secs(5)).await });
        assert_eq!(browser.next().await["method"], "Browser.getVersion", "the call is on the pipe");
        drop(browser);
        assert!(matches!(pending.await.unwrap(), Err(CdpError::Closed(_))), "a pending call hears the browser left");
        assert!(other.incoming.recv().await.is_none());
        assert!(pipe.is_closed());
    }
}
