//! The one extension connection: handshake, replies, events, keepalive, and
//! what happens to clients when the extension comes and goes.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use axum::extract::ws::{Message, WebSocket};
use futures_util::StreamExt;
use futures_util::stream::SplitStream;
use serde::Deserialize;
use serde_json::json;
use shared_protocol::layout::{self, RawEvent};
use shared_protocol::{
    ExtensionMessage, Hello, OLDEST_PROTOCOL_VERSION, PROTOCOL_VERSION, RawValue, RelayMessage, TabId, TabInfo,
    close_code, encode,
};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::cdp;
use super::error::CallError;
use super::interception::{self, Route};
use super::lending;
use super::link::ExtensionLink;
use super::queue::{self, POLICY_VIOLATION, SharedFrame, write_loop};
use super::relay::{MAX_HANDSHAKES, Relay};
use super::targets::{SubKind, Target, new_id};

/// How long a newly shared tab (a popup) with nowhere to go may stay on its
/// initial empty document before it is announced anyway (a `window.open()`
/// with no URL never leaves it); see `Relay::register_when_committed`.
const COMMIT_WAIT: std::time::Duration = std::time::Duration::from_secs(2);
/// The same for a tab on its way to a page (Chrome's `pendingUrl`): its
/// commit is coming, however slow the page or the machine, and announced
/// before it, the tab races it. Only a page that never commits a document
/// (a 204) waits this long.
const COMMIT_WAIT_NAVIGATING: std::time::Duration = std::time::Duration::from_secs(15);
/// How often its document is looked at meanwhile.
const COMMIT_POLL: std::time::Duration = std::time::Duration::from_millis(15);

/// What the relay reads of `Target.getTargetInfo`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TargetInfo {
    target_id: String,
    #[serde(default)]
    url: String,
    #[serde(default)]
    title: String,
    /// The page that opened it (`window.open`, a link with a target), as
    /// Chrome knows it.
    #[serde(default)]
    opener_id: Option<String>,
}

/// The next text frame by `deadline`: a close code and reason when there
/// is none, or when `evicted` (newer connections took the place).
async fn next_text(
    socket: &mut WebSocket,
    deadline: tokio::time::Instant,
    what: &str,
    evicted: &CancellationToken,
) -> Result<String, (u16, String)> {
    tokio::select! {
        () = evicted.cancelled() => Err((
            TRY_AGAIN_LATER,
            format!("no {what} yet, and newer connections need the place: retry"),
        )),
        read = tokio::time::timeout_at(deadline, socket.recv()) => match read {
            Err(_) => Err((close_code::HELLO_TIMEOUT, format!("no {what} in time"))),
            Ok(Some(Ok(Message::Text(text)))) => Ok(text.to_string()),
            Ok(_) => Err((close_code::BAD_MESSAGE, format!("the connection ended before the {what}"))),
        },
    }
}

/// WebSocket's "try again later" (RFC 6455, 1013).
const TRY_AGAIN_LATER: u16 = 1013;

/// Run once the extension's proof checked out: the socket's owner lifts
/// the pre-proof read limit ([`shared_protocol::PRE_PROOF_BYTES`]) there.
pub type ProofHook = Box<dyn FnOnce() + Send>;

/// Holds the single extension slot; released when dropped.
#[derive(Debug)]
pub struct ExtensionClaim(pub(super) Relay);

/// One of the [`crate::MAX_HANDSHAKES`] places of connections proving the
/// pairing; released when dropped (at the proof, or when the connection
/// fails it).
#[derive(Debug)]
pub struct HandshakeSlot {
    pub(super) relay: Relay,
    pub(super) number: u64,
    /// Cancelled when newer connections need the place.
    pub(super) evicted: CancellationToken,
}

impl Drop for HandshakeSlot {
    fn drop(&mut self) {
        let mut places = self.relay.0.handshakes.lock().unwrap_or_else(|p| p.into_inner());
        places.retain(|(number, _)| *number != self.number);
    }
}

impl Drop for ExtensionClaim {
    fn drop(&mut self) {
        self.0.0.extension_claimed.store(false, Ordering::Release);
    }
}

async fn close_with(mut socket: WebSocket, code: u16, reason: &str) {
    tracing::warn!(code, "closing extension connection: {reason}");
    let _ = socket.send(Message::Close(Some(queue::close_frame(code, reason)))).await;
}

/// A pairing link's code the extension proved in its handshake: spent, and
/// the extension's key sealed for it, only once the connection holds the
/// extension's place (else the code stays good for the next try).
struct Redemption {
    id: String,
    code: state_dir::Token,
    extension_nonce: String,
    bound: String,
}

/// A handshake that went through: the hello, the pairing link's code the
/// extension proved (if it named one), and the messages it sent after its
/// proof besides the hello, in order, for after the welcome.
struct Handshake {
    hello: Hello,
    redemption: Option<Redemption>,
    early: Vec<String>,
}

/// What a proved extension may send after its proof before the hello comes
/// (the hello's own frame included).
const MAX_EARLY_BYTES: usize = 1 << 20;

/// A message of the extension's the relay did not understand.
fn not_understood(e: serde_json::Error) -> (u16, String) {
    (close_code::BAD_MESSAGE, format!("not understood: {e}"))
}

/// The extension's first message, its `auth` in a protocol this relay
/// speaks: its nonce, and the pairing link's code it names, if any.
fn read_auth(text: &str) -> Result<(String, Option<String>), (u16, String)> {
    let (extension_nonce, code_id) = match ExtensionMessage::parse(text).map_err(not_understood)? {
        ExtensionMessage::Auth { protocol_version, nonce, pairing_code }
            if (OLDEST_PROTOCOL_VERSION..=PROTOCOL_VERSION).contains(&protocol_version) =>
        {
            (nonce, pairing_code)
        }
        ExtensionMessage::Auth { protocol_version, .. } | ExtensionMessage::Hello(Hello { protocol_version, .. }) => {
            let reason = format!(
                "extension speaks protocol {protocol_version}, this relay speaks {OLDEST_PROTOCOL_VERSION} to {PROTOCOL_VERSION}: update the one that is older"
            );
            return Err((close_code::PROTOCOL_MISMATCH, reason));
        }
        other => {
            return Err((close_code::BAD_MESSAGE, format!("the first message must be auth, got {}", other.name())));
        }
    };
    if !shared_protocol::auth::is_nonce(&extension_nonce) {
        return Err((close_code::BAD_MESSAGE, "the auth nonce is not 32 bytes of hex".into()));
    }
    Ok((extension_nonce, code_id))
}

/// The extension's `prove`: its proof.
fn read_prove(text: &str) -> Result<String, (u16, String)> {
    match ExtensionMessage::parse(text).map_err(not_understood)? {
        ExtensionMessage::Prove { proof } => Ok(proof),
        other => Err((close_code::BAD_MESSAGE, format!("expected prove, got {}", other.name()))),
    }
}

/// Why a pairing link's code is refused.
const UNKNOWN_CODE: &str = "this pairing link's code is unknown, spent or expired (a code is good once, for 10 minutes): run `browser-relay pair` again and open its new link";

impl Relay {
    /// A place among the `/extension` connections still proving the
    /// pairing. When [`MAX_HANDSHAKES`] are, the oldest gives its place up
    /// (it has not proved anything in all that time): a local program that
    /// keeps opening connections and proves nothing cannot keep the real
    /// extension out, which proves within a round trip of getting a place.
    pub fn proving_place(&self) -> HandshakeSlot {
        let number = self.0.handshake_numbers.fetch_add(1, Ordering::Relaxed);
        let evicted = tokio_util::sync::CancellationToken::new();
        let mut places = self.0.handshakes.lock().unwrap_or_else(|p| p.into_inner());
        while places.len() >= MAX_HANDSHAKES {
            if let Some((_, oldest)) = places.pop_front() {
                oldest.cancel();
            }
        }
        places.push_back((number, evicted.clone()));
        HandshakeSlot { relay: self.clone(), number, evicted }
    }

    /// Claims the single extension slot; `None` means one is already live.
    pub(crate) fn claim_extension(&self) -> Option<ExtensionClaim> {
        self.0
            .extension_claimed
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
            .then(|| ExtensionClaim(self.clone()))
    }

    /// Runs one extension connection to its end. `legacy`: the extension
    /// offered only protocol 1's subprotocol: it is told to update.
    pub async fn serve_extension(
        &self,
        mut socket: WebSocket,
        proving: HandshakeSlot,
        proved: ProofHook,
        legacy: bool,
    ) {
        if legacy {
            let reason = format!(
                "extension protocol 1, relay protocol {PROTOCOL_VERSION}: update the extension (load it again from this relay's folder)"
            );
            return close_with(socket, close_code::PROTOCOL_MISMATCH, &reason).await;
        }
        let Handshake { hello, redemption, early } = match self.handshake(&mut socket, proved, &proving.evicted).await {
            Ok(handshake) => handshake,
            Err((code, reason)) => return close_with(socket, code, &reason).await,
        };
        drop(proving);
        // The slot is claimed only now: a connection that proved nothing
        // never keeps the real extension out.
        let Some(claim) = self.claim_extension() else {
            return close_with(socket, POLICY_VIOLATION, "another Browser Relay extension is already connected").await;
        };
        let Ok(sealed) = self.redeem(redemption) else {
            return close_with(socket, close_code::NOT_PAIRED, UNKNOWN_CODE).await;
        };
        let generation = self.0.generation.fetch_add(1, Ordering::Relaxed) + 1;
        let (sink, mut stream) = socket.split();
        let (tx, rx) = mpsc::channel(1024);
        let stop_writer = CancellationToken::new();
        let writer = tokio::spawn(write_loop(sink, rx, stop_writer.clone(), queue::Farewell::default()));
        let link = Arc::new(ExtensionLink::new(generation, tx, self.config().extension_queue_bytes, hello));
        self.greet(&link, sealed, early).await;
        self.keep_link(&link, &mut stream).await;

        // Teardown order matters: stop the writer first so that no call can
        // be queued after the pending table is drained.
        stop_writer.cancel();
        let _ = writer.await;
        self.0.link.send_if_modified(|current| {
            let ours = current.as_ref().is_some_and(|l| l.generation == generation);
            if ours {
                *current = None;
            }
            ours
        });
        drop(link);
        self.0.pending.fail(generation);
        let gone = self.registry().take_all();
        for target in gone {
            self.announce_gone(target);
        }
        self.0.children.clear();
        drop(claim);
        tracing::info!("extension disconnected");
    }

    /// A pairing link's code, proved: spent now (of two redemptions at
    /// once, the second is refused), and only now does the extension's key
    /// go, sealed for the code, in the welcome. Whoever knows the code and
    /// does not prove it gets nothing, and spends nothing. `Err`: the code
    /// is spent or unknown.
    fn redeem(&self, redemption: Option<Redemption>) -> Result<Option<String>, ()> {
        let Some(Redemption { id, code, extension_nonce, bound }) = redemption else { return Ok(None) };
        let token = self.0.pairing.as_ref().expect("a redemption is proved with the pairing token");
        if !self.0.pairing_codes.as_ref().is_some_and(|codes| codes.spend(&id, token)) {
            return Err(());
        }
        // The extension's key, not the secret (protocol 8).
        let key = self.0.extension_key.as_ref().expect("derived with the pairing token");
        Ok(shared_protocol::auth::seal(code.as_str(), &extension_nonce, &bound, key.as_str()))
    }

    /// Welcomes a greeted extension and makes its link the relay's: the
    /// grants' groups told, its tabs announced again, and what it sent
    /// after its proof beside the hello (`early`) taken, in the order sent,
    /// as if it came after the welcome.
    async fn greet(&self, link: &Arc<ExtensionLink>, sealed: Option<String>, early: Vec<String>) {
        let hello = &link.hello;
        // The version both speak: a version 5 extension batches only
        // when told 5.
        link.send(encode(&RelayMessage::Welcome {
            protocol_version: hello.protocol_version.clamp(OLDEST_PROTOCOL_VERSION, PROTOCOL_VERSION),
            relay_version: env!("CARGO_PKG_VERSION").into(),
            protocols: Some(shared_protocol::ProtocolRange::THIS),
            sealed,
        }))
        .await;
        self.0.link.send_replace(Some(link.clone()));
        // Which tab groups are grants', before any tab is announced.
        self.send_grants(link);
        tracing::info!(
            extension = %hello.extension_version,
            browser = %hello.browser_version,
            tabs = hello.attached_tabs.len(),
            "extension connected"
        );
        if !hello.attached_tabs.is_empty() {
            let relay = self.clone();
            let tabs = hello.attached_tabs.clone();
            tokio::spawn(async move {
                for tab in tabs {
                    if let Err(e) = relay.register_tab(&tab).await {
                        tracing::warn!(tab = tab.tab_id, "could not re-announce tab: {e}");
                    }
                }
            });
        }
        for text in &early {
            self.on_extension_message(link, text);
        }
    }

    /// Reads the extension's messages, pings it and tells it who holds
    /// which tab, until it goes, falls silent or the server stops.
    async fn keep_link(&self, link: &ExtensionLink, stream: &mut SplitStream<WebSocket>) {
        let config = self.config();
        let mut ping = tokio::time::interval(config.ping_interval);
        ping.tick().await;
        // Who holds which tab, for the extension's options page: sent when
        // it changes (`holders_changed`; the interval is a backstop).
        let mut report = tokio::time::interval(config.clients_report);
        let mut reported = Vec::new();
        let mut last_seen = Instant::now();
        let mut nonce = 0u64;
        loop {
            tokio::select! {
                () = self.shutting_down().cancelled() => break,
                frame = stream.next() => match frame {
                    Some(Ok(Message::Text(text))) => {
                        last_seen = Instant::now();
                        self.on_extension_text(link, &text);
                    }
                    Some(Ok(Message::Ping(_) | Message::Pong(_))) => last_seen = Instant::now(),
                    Some(Ok(Message::Binary(_))) => tracing::warn!("extension sent a binary frame; ignored"),
                    Some(Ok(Message::Close(_))) | None => break,
                    Some(Err(e)) => {
                        tracing::warn!("extension connection failed: {e}");
                        break;
                    }
                },
                () = self.0.holders.notified() => self.report_holders(link, &mut reported).await,
                _ = report.tick() => self.report_holders(link, &mut reported).await,
                _ = ping.tick() => {
                    if last_seen.elapsed() > config.extension_silence {
                        tracing::warn!("extension silent for {:?}; dropping it", config.extension_silence);
                        break;
                    }
                    nonce += 1;
                    link.send(encode(&RelayMessage::Ping { nonce })).await;
                }
            }
        }
    }

    /// Tells the extension who holds each tab, if that changed since
    /// `reported` (what it was told last).
    async fn report_holders(&self, link: &ExtensionLink, reported: &mut Vec<shared_protocol::TabClients>) {
        let now = self.tab_clients();
        if now != *reported {
            link.send(encode(&RelayMessage::Clients { tabs: now.clone() })).await;
            *reported = now;
        }
    }

    /// Both sides prove the pairing (shared-protocol's PROTOCOL.md): the
    /// extension's `auth`, our `challenge` with our proof, its `prove`, then
    /// its `hello`. Nothing it says is trusted, and no more than a few KiB
    /// of it read, before its proof checks out: `proved` lifts that limit.
    /// With the hello, the pairing link's code the extension proved, if
    /// it named one.
    async fn handshake(
        &self,
        socket: &mut WebSocket,
        proved: ProofHook,
        evicted: &CancellationToken,
    ) -> Result<Handshake, (u16, String)> {
        use shared_protocol::auth::{self, Prover};
        // One deadline for the auth and the proof together; the hello,
        // after the proof, has its own.
        let proof_by = tokio::time::Instant::now() + self.config().proof_timeout;
        let text = next_text(socket, proof_by, "auth", evicted).await?;
        let (extension_nonce, code_id) = read_auth(&text)?;
        let (Some(token), Some(extension_key)) = (&self.0.pairing, &self.0.extension_key) else {
            return Err((close_code::NOT_PAIRED, "this relay has no pairing token".into()));
        };
        // A pairing link's code: the proofs are made with it, and the token
        // goes sealed for it. An unknown or spent code is refused before
        // anything is sent.
        let code = match &code_id {
            None => None,
            Some(id) => match self.0.pairing_codes.as_ref().and_then(|codes| codes.find(id, token)) {
                Some(code) => Some(code),
                None => return Err((close_code::NOT_PAIRED, UNKNOWN_CODE.into())),
            },
        };
        // The extension's own key, never the secret: what leaks from a
        // browser's storage opens the extension's door alone.
        let key = code.as_ref().unwrap_or(extension_key);
        let bound = self.send_challenge(socket, key.as_str(), &extension_nonce).await?;
        let text = next_text(socket, proof_by, "prove", evicted).await?;
        // The proof is the frame's first message; what shares its frame is
        // read only once the proof checks out.
        let mut lines = shared_protocol::messages(&text);
        let proof = read_prove(lines.next().unwrap_or_default())?;
        if !auth::verify(key.as_str(), Prover::Extension, &extension_nonce, &bound, &proof) {
            return Err((
                close_code::NOT_PAIRED,
                "the extension could not prove the pairing token: pair it again (`browser-relay pair`)".into(),
            ));
        }
        let redemption = match (code_id, code) {
            (Some(id), Some(code)) => Some(Redemption { id, code, extension_nonce, bound }),
            _ => None,
        };
        let early: Vec<String> = lines.map(str::to_owned).collect();
        // Proved: the connection may now send what it shares.
        proved();
        let (hello, early) = self.hello_after_proof(socket, early).await?;
        Ok(Handshake { hello, redemption, early })
    }

    /// Sends our challenge to the extension whose auth carried
    /// `extension_nonce`: a fresh nonce, bound to the port the extension
    /// connected to (`auth::on_port`), and our proof made with `key`. The
    /// bound nonce, which the extension's proof is made over.
    async fn send_challenge(
        &self,
        socket: &mut WebSocket,
        key: &str,
        extension_nonce: &str,
    ) -> Result<String, (u16, String)> {
        use shared_protocol::auth::{self, Prover};
        let mut random = [0u8; 32];
        getrandom::fill(&mut random).map_err(|e| (1011, format!("no random source: {e}")))?;
        let relay_nonce = auth::nonce_hex(&random);
        let port = self.public_base().map_or(0, |base| base.addr.port());
        let bound = auth::on_port(&relay_nonce, port);
        let proof = auth::proof(key, Prover::Relay, extension_nonce, &bound);
        let challenge = encode(&RelayMessage::Challenge { nonce: relay_nonce.clone(), proof });
        socket
            .send(Message::Text(challenge.into()))
            .await
            .map_err(|e| (close_code::BAD_MESSAGE, format!("could not send the challenge: {e}")))?;
        Ok(bound)
    }

    /// Proved: its place is not given up to newer connections. The hello
    /// is looked for in what follows, also among other messages (a tab
    /// event the extension sent before it, a frame of several): what a
    /// proved extension sends before its welcome never costs it the
    /// connection, and is taken after the welcome, in order. The hello,
    /// and the rest of `early` (what came after the proof) and of what
    /// came since.
    async fn hello_after_proof(
        &self,
        socket: &mut WebSocket,
        mut early: Vec<String>,
    ) -> Result<(Hello, Vec<String>), (u16, String)> {
        let hello_by = tokio::time::Instant::now() + self.config().hello_timeout;
        let is_hello = |text: &String| matches!(ExtensionMessage::parse(text), Ok(ExtensionMessage::Hello(_)));
        let mut early_bytes: usize = early.iter().map(String::len).sum();
        let mut looked = 0;
        loop {
            if let Some(at) = early[looked..].iter().position(is_hello).map(|at| looked + at) {
                let text = early.remove(at);
                let Ok(ExtensionMessage::Hello(hello)) = ExtensionMessage::parse(&text) else {
                    unreachable!("parsed as a hello just before")
                };
                return Ok((hello, early));
            }
            looked = early.len();
            if early_bytes > MAX_EARLY_BYTES {
                return Err((
                    close_code::BAD_MESSAGE,
                    format!("no hello in the first {MAX_EARLY_BYTES} bytes after the proof"),
                ));
            }
            let text = next_text(socket, hello_by, "hello", &CancellationToken::new()).await?;
            early_bytes += text.len();
            early.extend(shared_protocol::messages(&text).map(str::to_owned));
        }
    }

    fn on_extension_text(&self, link: &ExtensionLink, text: &str) {
        // Protocol 5: several messages in one frame, a line each. Looked
        // for first: the layout fast path below reads a frame's head and
        // tail, which a batch of events would pass as one.
        if text.contains('\n') {
            for message in shared_protocol::messages(text) {
                self.on_extension_message(link, message);
            }
            return;
        }
        self.on_extension_message(link, text);
    }

    fn on_extension_message(&self, link: &ExtensionLink, text: &str) {
        // Hot path: replies and events in the canonical layout, payload untouched.
        if let Some(reply) = layout::reply(text) {
            return self.on_reply(reply.id, Ok(reply.result));
        }
        if let Some(event) = layout::debugger_event(text) {
            return self.on_debugger_event(&event);
        }
        let message = match ExtensionMessage::parse(text) {
            Ok(message) => message,
            Err(e) => {
                tracing::warn!("dropping malformed message from the extension: {e}");
                return;
            }
        };
        match message {
            ExtensionMessage::Reply(reply) => {
                let result = match reply.error {
                    Some(error) => Err(error),
                    None => Ok(reply.result.map(RawValue::get)),
                };
                self.on_reply(reply.id, result);
            }
            ExtensionMessage::DebuggerEvent(event) => self.on_debugger_event(&RawEvent {
                tab_id: event.tab_id,
                session_id: event.session_id.as_deref(),
                method: &event.method,
                params: event.params.map(RawValue::get),
            }),
            ExtensionMessage::DebuggerDetached { tab_id, reason } => {
                tracing::info!(tab = tab_id, %reason, "debugger detached");
                self.drop_tab(tab_id);
            }
            ExtensionMessage::TabRemoved { tab_id } => self.drop_tab(tab_id),
            ExtensionMessage::TabCreated { tab } => {
                // Popups of attached tabs are attached too: the relay decides.
                let opener_attached = tab.opener_tab_id.is_some_and(|o| self.registry().by_tab(o).is_some());
                if opener_attached {
                    let relay = self.clone();
                    tokio::spawn(async move {
                        if let Err(e) = relay.attach_popup(&tab).await {
                            tracing::warn!(tab = tab.tab_id, "could not attach popup: {e}");
                        }
                    });
                }
            }
            ExtensionMessage::TabReplaced { added_tab_id, removed_tab_id } => {
                if let Some(target) = self.registry().by_tab_mut(removed_tab_id) {
                    target.tab_id = added_tab_id;
                }
            }
            ExtensionMessage::TabUpdated { tab } => self.on_tab_updated(&tab),
            // A tab the user shared, or one Chrome opened into the group
            // (a popup, a link opened in a new tab: it may not have loaded
            // its first document yet).
            ExtensionMessage::UserToggledAttach { tab, attached: true } => self.announce_attached(tab, true),
            // Attached again after it navigated or the worker restarted: loaded.
            ExtensionMessage::DebuggerReattached { tab } => self.announce_attached(tab, false),
            ExtensionMessage::UserToggledAttach { tab, attached: false } => self.drop_tab(tab.tab_id),
            ExtensionMessage::TabGrant { tab_id, grant } => self.on_tab_grant(tab_id, grant.as_deref()),
            ExtensionMessage::AskAnswer { id, answer } => {
                let answer = match answer {
                    shared_protocol::AskAnswer::Allow => crate::questions::Answer::Allow,
                    shared_protocol::AskAnswer::Deny => crate::questions::Answer::Deny,
                };
                if let Err(e) = self.answer(id, answer, crate::questions::AnsweredBy::Notification) {
                    tracing::debug!("an answer from the extension not taken: {e}");
                }
            }
            ExtensionMessage::HandoffDone { tab_id } => self.handoff_done_in_extension(tab_id),
            ExtensionMessage::Ping { nonce } => {
                // Best effort: a full queue means the extension is not reading.
                let _ = link.send_now(encode(&RelayMessage::Pong { nonce }));
            }
            ExtensionMessage::Pong { .. } => {}
            ExtensionMessage::Hello(_) | ExtensionMessage::Auth { .. } | ExtensionMessage::Prove { .. } => {
                tracing::warn!("handshake message after the handshake ignored");
            }
        }
    }

    fn on_debugger_event(&self, event: &RawEvent<'_>) {
        let method = event.method;
        let params = event.params.unwrap_or("{}");
        let child_session = matches!(method, "Target.attachedToTarget" | "Target.detachedFromTarget");
        if child_session && !self.track_child_session(event, params) {
            return;
        }
        if method == "Page.frameNavigated" && event.session_id.is_none() {
            self.on_main_frame_navigated(event.tab_id, params);
        }

        let mut registry = self.registry();
        let Some(target) = registry.by_tab_mut(event.tab_id) else { return };
        if let Some(method) = interception::paused_event(method) {
            // A paused request goes to one client at a time.
            let route = target.interception.paused(event.session_id, method, params);
            return self.route_paused(self.link().as_deref(), target, route);
        }
        if method.starts_with("Runtime.executionContext") {
            target.track_runtime_event(event.session_id, method, params);
        }
        if target.handed_over && method == "Network.requestWillBeSent" {
            target.note_persons_request(params);
        }
        self.send_event(target, event, params);
    }

    /// A child session of the tab (a frame, a worker) attached or
    /// detached: the relay keeps track of it, and forgets its state when it
    /// goes. False when the child is one clients may not use: it is
    /// released, and its attach goes to no client.
    fn track_child_session(&self, event: &RawEvent<'_>, params: &str) -> bool {
        #[derive(Deserialize, Default)]
        struct Info {
            #[serde(default)]
            url: String,
        }
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Child {
            session_id: String,
            #[serde(default)]
            target_info: Info,
        }
        let Ok(child) = serde_json::from_str::<Child>(params) else { return true };
        if event.method == "Target.detachedFromTarget" {
            self.0.children.remove(child.session_id.as_str());
            // The session's state went with it.
            if let Some(target) = self.registry().by_tab_mut(event.tab_id) {
                target.ledger.forget_child(&child.session_id);
                target.interception.forget_child(&child.session_id);
                target.runtime.retain(|r| r.child.as_deref() != Some(child.session_id.as_str()));
            }
        } else if shared_protocol::is_restricted_url(&child.target_info.url) {
            // Another extension's frame or a browser page inside
            // the tab: clients cannot use it, and left paused
            // (waitForDebuggerOnStart) it would block the page.
            // Resume it, drop it, and never announce it.
            self.release_child(event.tab_id, event.session_id, child.session_id);
            return false;
        } else {
            self.0.children.insert(child.session_id.into(), event.tab_id);
        }
        true
    }

    /// Sends a tab's event to the clients that want it, a frame shared by
    /// those on the same session.
    fn send_event(&self, target: &Target, event: &RawEvent<'_>, params: &str) {
        let method = event.method;
        // While the person has the tab, a grant's client hears where it is
        // and what loads, not what is in it or sent from it.
        let hidden = target.handed_over && !lending::shown_while_handed_over(method);
        let wanted = |client: &super::client::ClientHandle| {
            target.wants_event(client.id, event.session_id, method) && !(hidden && client.grant().is_some())
        };
        match event.session_id {
            None => {
                // One frame per distinct session id; clients sharing a session
                // share the bytes. A map, so that the work stays linear in
                // the number of sessions.
                let mut built: HashMap<Option<&str>, SharedFrame> = HashMap::new();
                for sub in target.subs.iter().filter(|s| s.kind == SubKind::Page && wanted(&s.client)) {
                    let key = (!sub.bare).then_some(&*sub.session);
                    let frame = built
                        .entry(key)
                        .or_insert_with(|| SharedFrame::new(cdp::event(method, params, key), self.client_bytes()));
                    sub.client.send_shared(frame);
                }
                if let Some(browser_method) = download_event(method) {
                    // Playwright listens for downloads at the browser level.
                    let frame = SharedFrame::new(cdp::event(browser_method, params, None), self.client_bytes());
                    let hears = |s: &super::targets::Subscription| {
                        s.kind == SubKind::Page
                            && !s.bare
                            && s.parent.is_none()
                            && !(hidden && s.client.grant().is_some())
                    };
                    for client in distinct_clients(target, hears) {
                        client.send_shared(&frame);
                    }
                }
            }
            Some(child) => {
                let frame = SharedFrame::new(cdp::event(method, params, Some(child)), self.client_bytes());
                for client in distinct_clients(target, |s| s.kind == SubKind::Page && wanted(&s.client)) {
                    client.send_shared(&frame);
                }
            }
        }
    }

    /// Hands a paused request to its client (the next one, when that
    /// client holds no session here any more), or lets it go on in Chrome.
    pub(crate) fn route_paused(&self, link: Option<&ExtensionLink>, target: &mut Target, mut route: Route) {
        loop {
            match route {
                Route::Deliver(delivery) if delivery.client == interception::SITE_HOLD => {
                    match self.site_hold_decides(link, target, &delivery) {
                        Some(next) => route = next,
                        None => return,
                    }
                }
                Route::Deliver(delivery) => {
                    // A grant's interceptor does not see what the person
                    // sends from a tab they have.
                    if let Some((client, session)) = target
                        .client_session(delivery.client, delivery.child.as_deref())
                        .filter(|(client, _)| !(target.handed_over && client.grant().is_some()))
                    {
                        return client.send(cdp::event(delivery.method, &delivery.params, session.as_deref()));
                    }
                    match target.interception.skip(&delivery) {
                        Some(next) => route = next,
                        None => return,
                    }
                }
                Route::Chrome(go_on) => {
                    if let Some(link) = link {
                        self.send_undo(link, target.tab_id, go_on);
                    }
                    return;
                }
            }
        }
    }

    /// Resumes a restricted child target and detaches from it.
    fn release_child(&self, tab_id: TabId, parent: Option<&str>, child: String) {
        let relay = self.clone();
        let parent = parent.map(str::to_string);
        tracing::debug!(tab = tab_id, %child, "releasing a restricted child target");
        tokio::spawn(async move {
            let resumed =
                relay.send_session_command(tab_id, Some(&child), "Runtime.runIfWaitingForDebugger", None).await;
            let detached = relay
                .send_session_command(
                    tab_id,
                    parent.as_deref(),
                    "Target.detachFromTarget",
                    Some(json!({"sessionId": child})),
                )
                .await;
            if let Err(e) = resumed.and(detached) {
                tracing::debug!(tab = tab_id, "releasing a restricted child: {e}");
            }
        });
    }

    fn on_main_frame_navigated(&self, tab_id: TabId, params: &str) {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Frame {
            parent_id: Option<String>,
            url: String,
            #[serde(default)]
            url_fragment: Option<String>,
        }
        #[derive(Deserialize)]
        struct Navigated {
            frame: Frame,
        }
        let Ok(Navigated { frame }) = serde_json::from_str::<Navigated>(params) else { return };
        if frame.parent_id.is_some() {
            return;
        }
        let url = frame.url + frame.url_fragment.as_deref().unwrap_or("");
        let mut registry = self.registry();
        if let Some(target) = registry.by_tab_mut(tab_id).filter(|t| t.url != url) {
            target.url = url;
            self.announce_info_changed(target);
        }
    }

    fn on_tab_updated(&self, tab: &TabInfo) {
        let mut registry = self.registry();
        let Some(target) = registry.by_tab_mut(tab.tab_id) else { return };
        let changed = (!tab.url.is_empty() && tab.url != target.url) || tab.title != target.title;
        if tab.window_id.is_some() {
            target.window_id = tab.window_id;
        }
        // No CDP event carries an icon: only the dashboard and /json/list show it.
        target.fav_icon_url.clone_from(&tab.fav_icon_url);
        if changed {
            if !tab.url.is_empty() {
                target.url.clone_from(&tab.url);
            }
            target.title.clone_from(&tab.title);
            self.announce_info_changed(target);
        }
    }

    /// Attaches the debugger to a tab, then announces it.
    pub(crate) async fn attach_and_register(&self, tab: &TabInfo) -> Result<Arc<str>, CallError> {
        let tab_id = tab.tab_id;
        self.call(|id| RelayMessage::DebuggerAttach { id, tab_id }).await?;
        self.register_tab(tab).await
    }

    /// Announces a tab the extension attached, from a task of its own:
    /// once its first document committed when it was just attached
    /// (`fresh`), at once when it was attached again.
    fn announce_attached(&self, tab: TabInfo, fresh: bool) {
        let relay = self.clone();
        tokio::spawn(async move {
            let announced =
                if fresh { relay.register_when_committed(&tab).await } else { relay.register_tab(&tab).await };
            if let Err(e) = announced {
                tracing::warn!(tab = tab.tab_id, "could not announce the tab the extension attached: {e}");
            }
        });
    }

    /// A shared tab's popup that is not in the group (the extension left
    /// it to the relay): attached, then announced once it committed.
    async fn attach_popup(&self, tab: &TabInfo) -> Result<Arc<str>, CallError> {
        let tab_id = tab.tab_id;
        self.call(|id| RelayMessage::DebuggerAttach { id, tab_id }).await?;
        self.register_when_committed(tab).await
    }

    /// Announces a newly attached tab once its first document committed
    /// (bounded, see below): a shared tab's popup, or a tab Chrome opened
    /// into the group.
    ///
    /// Why wait: Chrome's own port holds a popup before it loads
    /// (`waitForDebuggerOnStart`), so a client's setup always comes before
    /// the popup's navigation. `chrome.debugger` cannot hold a tab, and a
    /// popup announced on its initial empty document races its navigation.
    /// Playwright, seeing that empty document in `Page.getFrameTree`, listens
    /// for lifecycle events only once `Page.setLifecycleEventsEnabled` has
    /// answered, and Chrome replays the `load` that happened meanwhile just
    /// before that answer: Playwright never sees it, and `waitForLoadState`
    /// (or the popup event itself) times out. Announced after the commit,
    /// the popup looks to a client as any loaded tab does.
    ///
    /// How long: a tab on its way to a page (its `url` is Chrome's
    /// `pendingUrl`) waits for the commit however slow the page or the
    /// machine ([`COMMIT_WAIT_NAVIGATING`]): with one 2 s bound for all, a
    /// popup whose commit took longer was announced on its empty document
    /// and raced it again (issue 42). Only a tab with nowhere to go is
    /// announced after [`COMMIT_WAIT`].
    async fn register_when_committed(&self, tab: &TabInfo) -> Result<Arc<str>, CallError> {
        let navigating = !tab.url.is_empty() && tab.url != "about:blank";
        let deadline = tokio::time::Instant::now() + if navigating { COMMIT_WAIT_NAVIGATING } else { COMMIT_WAIT };
        // Polled: without enabling a domain on the user's tab (which every
        // client would then see), nothing announces the commit.
        while !self.committed(tab.tab_id).await && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(COMMIT_POLL).await;
        }
        self.register_tab(tab).await
    }

    /// Whether a tab's main frame left its initial empty document, as a
    /// client's `Page.getFrameTree` will show it (its URL is empty until
    /// then): what Playwright decides by, so what is looked at. A tab that
    /// cannot say counts as committed: it is announced at once, as before.
    async fn committed(&self, tab_id: TabId) -> bool {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Tree {
            frame_tree: FrameTree,
        }
        #[derive(Deserialize)]
        struct FrameTree {
            frame: Frame,
        }
        #[derive(Deserialize)]
        struct Frame {
            #[serde(default)]
            url: String,
        }
        let Ok(raw) = self.send_command(tab_id, "Page.getFrameTree", None).await else { return true };
        serde_json::from_str::<Tree>(&raw).map_or(true, |tree| !tree.frame_tree.frame.url.is_empty())
    }

    /// `Target.getTargetInfo` of an attached tab.
    async fn target_info(&self, tab_id: TabId) -> Result<TargetInfo, CallError> {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct InfoResult {
            target_info: TargetInfo,
        }
        let raw = self.send_command(tab_id, "Target.getTargetInfo", None).await?;
        serde_json::from_str::<InfoResult>(&raw)
            .map(|r| r.target_info)
            .map_err(|e| CallError::Chrome(format!("unexpected Target.getTargetInfo result: {e}")))
    }

    /// Adds an attached tab to the registry (once) and announces it to every
    /// client that auto-attaches or discovers targets.
    pub(crate) async fn register_tab(&self, tab: &TabInfo) -> Result<Arc<str>, CallError> {
        if let Some(target) = self.registry().by_tab(tab.tab_id) {
            return Ok(target.target_id.clone());
        }
        let info = self.target_info(tab.tab_id).await?;

        let mut registry = self.registry();
        if let Some(target) = registry.by_tab(tab.tab_id) {
            return Ok(target.target_id.clone());
        }
        // Chrome's own opener first: the tab strip's `openerTabId` names the
        // tab that was active when the tab opened, which is not the opener
        // when a page in a background tab calls `window.open`.
        let opener_target = match &info.opener_id {
            Some(opener) => registry.by_target_id(opener),
            None => tab.opener_tab_id.and_then(|o| registry.by_tab(o)),
        };
        let opener = opener_target.map(|t| t.target_id.clone());
        // Whose group holds it: the extension says; else a popup is its
        // opener's grant's (Chrome opens it into the opener's group).
        let grant = tab.grant.as_deref().map(Arc::from).or_else(|| opener_target.and_then(|t| t.grant.clone()));
        // A grant's popup that went outside its sites (its first request
        // leaves before the relay can hold the new tab; the extension's
        // rules sent it without the person's cookies) is closed before any
        // client sees it: a grant's tabs stay on its sites.
        if let Some(held) = grant.as_deref().and_then(|name| self.grant_named(name)).filter(|_| opener_target.is_some())
            && let Some(refusal) = held.refuses_url(&info.url)
        {
            drop(registry);
            tracing::info!(tab = tab.tab_id, grant = %held.name, "closing a grant's popup outside its sites");
            self.note_closed_popup(&held, &info.url);
            self.close_orphans(vec![tab.tab_id]);
            return Err(CallError::Chrome(refusal));
        }
        // A popup belongs to the clients driving its opener (see `owners`).
        let mut owners: Vec<u64> =
            opener_target.map(|t| t.subs.iter().map(|s| s.client.id).collect()).unwrap_or_default();
        owners.sort_unstable();
        owners.dedup();
        let target_id: Arc<str> = info.target_id.into();
        registry.insert(Target {
            tab_id: tab.tab_id,
            window_id: tab.window_id,
            target_id: target_id.clone(),
            tab_target_id: new_id(),
            page_session: new_id(),
            tab_session: new_id(),
            url: info.url,
            title: if info.title.is_empty() { tab.title.clone() } else { info.title },
            fav_icon_url: tab.fav_icon_url.clone(),
            opener,
            subs: Vec::new(),
            runtime: Vec::new(),
            ledger: Default::default(),
            interception: Default::default(),
            owners,
            grant,
            handed_over: false,
            persons_requests: Default::default(),
        });
        let target = registry.by_tab_mut(tab.tab_id).expect("just inserted");
        // Under the grant's site hold before any client can drive it.
        self.fit_site_hold(target);
        // Back after the extension's link dropped: what waits for the
        // person about it is shown again.
        self.reshow_asks(target);
        self.announce_new(target);
        tracing::info!(tab = tab.tab_id, target = %target_id, "tab attached");
        Ok(target_id)
    }

    /// Removes a tab and tells its clients it is gone.
    pub(crate) fn drop_tab(&self, tab_id: TabId) {
        let removed = self.registry().remove_tab(tab_id);
        if let Some(target) = removed {
            self.0.children.retain(|_, tab| *tab != tab_id);
            tracing::info!(tab = tab_id, target = %target.target_id, "tab detached");
            self.forget_asks_of(tab_id, &target.target_id);
            self.announce_gone(target);
        }
    }

    /// `Target.detachedFromTarget` to every subscriber (pages before the tab
    /// sessions above them, as Chrome does) and `targetDestroyed` to
    /// discovering clients.
    fn announce_gone(&self, mut target: Target) {
        self.holders_changed();
        target.subs.sort_by_key(|s| s.kind == SubKind::Tab);
        for sub in &target.subs {
            sub.client.forget_session(&sub.session);
            if sub.bare {
                // A page-level endpoint has nothing left to talk to.
                sub.client.send(cdp::event("Inspector.detached", r#"{"reason":"target_closed"}"#, None));
                sub.client.close(1000, "target closed");
                continue;
            }
            let target_id = if sub.kind == SubKind::Tab { &target.tab_target_id } else { &target.target_id };
            let params = json!({"sessionId": &*sub.session, "targetId": &**target_id}).to_string();
            sub.client.send(cdp::event("Target.detachedFromTarget", &params, sub.parent.as_deref()));
        }
        for client in self.0.clients.iter().filter(|c| c.sees(&target)) {
            let Some(filter) = client.discover_filter() else { continue };
            for (kind, id) in [("page", &target.target_id), ("tab", &target.tab_target_id)] {
                if filter.matches(kind) {
                    let params = json!({"targetId": &**id}).to_string();
                    client.send(cdp::event("Target.targetDestroyed", &params, None));
                }
            }
        }
    }

    fn announce_new(&self, target: &mut Target) {
        let context_id = self.context_id().clone();
        let clients: Vec<_> = self.0.clients.iter().map(|c| c.value().clone()).filter(|c| c.sees(target)).collect();
        for client in clients {
            if let Some(filter) = client.discover_filter() {
                for (kind, info) in [("tab", target.tab_info(&context_id)), ("page", target.page_info(&context_id))] {
                    if filter.matches(kind) {
                        client.send(cdp::event("Target.targetCreated", &json!({"targetInfo": info}).to_string(), None));
                    }
                }
            }
            client.auto_attach_root(target, &context_id);
        }
        self.holders_changed();
    }

    fn announce_info_changed(&self, target: &Target) {
        let context_id = self.context_id();
        for client in self.0.clients.iter().filter(|c| c.sees(target)) {
            let Some(filter) = client.discover_filter() else { continue };
            for (kind, info) in [("page", target.page_info(context_id)), ("tab", target.tab_info(context_id))] {
                if filter.matches(kind) {
                    client.send(cdp::event("Target.targetInfoChanged", &json!({"targetInfo": info}).to_string(), None));
                }
            }
        }
    }
}

/// Page download events re-emitted at the browser level, where Playwright
/// listens for them (`Browser.setDownloadBehavior` is refused to extensions).
fn download_event(method: &str) -> Option<&'static str> {
    match method {
        "Page.downloadWillBegin" => Some("Browser.downloadWillBegin"),
        "Page.downloadProgress" => Some("Browser.downloadProgress"),
        _ => None,
    }
}

fn distinct_clients(
    target: &Target,
    keep: impl Fn(&super::targets::Subscription) -> bool,
) -> Vec<Arc<super::client::ClientHandle>> {
    let mut seen = std::collections::HashSet::new();
    target.subs.iter().filter(|s| keep(s) && seen.insert(s.client.id)).map(|s| s.client.clone()).collect()
}
