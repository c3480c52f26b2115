//! A simulated Browser Relay extension (test support, never shipped).
//!
//! It speaks the relay⇄extension protocol on `/extension` exactly as the real
//! extension does, and carries out the `chrome.*` calls against a real
//! Chromium through its debugging port with `chrome.debugger`'s semantics:
//! one attachment per tab, flat child sessions reported with their
//! `sessionId`, and the same refusals (`Target.getTargets`,
//! `attachToBrowserTarget`, `Browser.*` are "Not allowed"). Faults can be
//! injected: slow replies, swallowed replies, garbage, an abrupt drop.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context as _, anyhow};
use browser_relay::DEFAULT_EXTENSION_ID;
use cdp_client::{CdpClient, CdpError, CdpEvent};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use shared_protocol::{
    CallError, DebuggerEvent, ExtensionMessage, Hello, PROTOCOL_VERSION, RawValue, RelayMessage, Reply, SUBPROTOCOL,
    TabId, TabInfo, encode,
};
use tokio::sync::{mpsc, watch};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_util::sync::CancellationToken;

/// Faults to inject into the extension's behaviour.
#[derive(Debug, Clone, Default)]
pub struct Faults {
    /// Wait this long before answering each call.
    pub reply_delay: Option<Duration>,
    /// Never answer `debugger.sendCommand` calls (a hung extension).
    pub swallow_commands: bool,
}

#[derive(Debug, Clone)]
struct Tab {
    target_id: String,
    url: String,
    title: String,
    opener: Option<TabId>,
    /// The flat CDP session standing in for `chrome.debugger`'s attachment.
    session: Option<String>,
    /// The grant whose group the tab is in (a stand-in for the tab group).
    grant: Option<String>,
}

#[derive(Debug, Default)]
struct Tabs {
    next_id: TabId,
    by_id: HashMap<TabId, Tab>,
    /// Child sessions (iframes, workers) → their tab.
    children: HashMap<String, TabId>,
}

impl Tabs {
    fn id_of_target(&self, target_id: &str) -> Option<TabId> {
        self.by_id.iter().find(|(_, t)| t.target_id == target_id).map(|(id, _)| *id)
    }

    fn tab_of_session(&self, session: &str) -> Option<TabId> {
        self.by_id.iter().find(|(_, t)| t.session.as_deref() == Some(session)).map(|(id, _)| *id)
    }

    fn info(&self, id: TabId) -> Option<TabInfo> {
        self.by_id.get(&id).map(|t| TabInfo {
            tab_id: id,
            window_id: Some(1),
            url: t.url.clone(),
            title: t.title.clone(),
            fav_icon_url: None,
            active: true,
            opener_tab_id: t.opener,
            grant: t.grant.clone(),
        })
    }
}

#[derive(Debug)]
struct Inner {
    chrome: CdpClient,
    tabs: Mutex<Tabs>,
    relay: Mutex<Option<mpsc::UnboundedSender<Message>>>,
    /// Stops the current relay connection's tasks (an abrupt drop).
    relay_stop: Mutex<Option<CancellationToken>>,
    faults: Mutex<Faults>,
    product: String,
    user_agent: String,
    welcomed: watch::Sender<bool>,
    /// The pairing proof of the current connection.
    proof: Mutex<Option<crate::pairing::ExtensionProof>>,
    /// Where the "user's" downloads go.
    downloads: tempfile::TempDir,
    /// Bumped whenever the tab list changes, so tests can await a change.
    tabs_changed: watch::Sender<u64>,
    /// The person-in-the-loop notices the relay sent (`ask`, `ask.closed`,
    /// `handoff`, `handoff.end`), as sent, in order.
    notices: watch::Sender<Vec<Value>>,
    stop: CancellationToken,
}

/// A simulated extension bound to one Chromium. Dropping it stops it.
#[derive(Debug, Clone)]
pub struct SimExtension(Arc<Inner>);

impl SimExtension {
    /// Connects to Chromium's browser endpoint and starts tracking its tabs.
    pub async fn new(chrome_ws: &str) -> anyhow::Result<Self> {
        let chrome = CdpClient::connect(chrome_ws).await?;
        let mut events = chrome.take_events().expect("fresh client");
        let version = chrome.call("Browser.getVersion", json!({}), None).await?;
        let inner = Arc::new(Inner {
            chrome,
            tabs: Mutex::new(Tabs { next_id: 100, ..Tabs::default() }),
            relay: Mutex::new(None),
            relay_stop: Mutex::new(None),
            faults: Mutex::new(Faults::default()),
            product: version["product"].as_str().unwrap_or_default().to_string(),
            user_agent: version["userAgent"].as_str().unwrap_or_default().to_string(),
            welcomed: watch::Sender::new(false),
            proof: Mutex::new(None),
            downloads: tempfile::tempdir()?,
            tabs_changed: watch::Sender::new(0),
            notices: watch::Sender::new(Vec::new()),
            stop: CancellationToken::new(),
        });
        let sim = Self(inner);
        // A user's (headed) Chrome saves downloads; headless denies them
        // unless told otherwise. Model the user's browser.
        sim.0
            .chrome
            .call(
                "Browser.setDownloadBehavior",
                json!({"behavior": "allow", "downloadPath": sim.0.downloads.path()}),
                None,
            )
            .await?;
        sim.0.chrome.call("Target.setDiscoverTargets", json!({"discover": true}), None).await?;
        // The existing pages' targetCreated events are queued by now; apply
        // them before anyone asks for tabs.
        while let Ok(event) = events.try_recv() {
            sim.on_chrome_event(event);
        }
        let pump = sim.clone();
        let stop = sim.0.stop.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = stop.cancelled() => break,
                    event = events.recv() => match event {
                        Some(event) => pump.on_chrome_event(event),
                        None => break,
                    },
                }
            }
        });
        Ok(sim)
    }

    pub fn set_faults(&self, faults: Faults) {
        *self.0.faults.lock().unwrap() = faults;
    }

    /// All page tabs as the extension sees them.
    pub fn tabs(&self) -> Vec<TabInfo> {
        let tabs = self.0.tabs.lock().unwrap();
        let mut ids: Vec<_> = tabs.by_id.keys().copied().collect();
        ids.sort_unstable();
        ids.into_iter().filter_map(|id| tabs.info(id)).collect()
    }

    /// The tab whose URL starts with `prefix`.
    pub fn tab_with_url(&self, prefix: &str) -> Option<TabInfo> {
        self.tabs().into_iter().find(|t| t.url.starts_with(prefix))
    }

    pub fn target_id(&self, tab: TabId) -> Option<String> {
        self.0.tabs.lock().unwrap().by_id.get(&tab).map(|t| t.target_id.clone())
    }

    pub fn attached_tabs(&self) -> Vec<TabInfo> {
        let tabs = self.0.tabs.lock().unwrap();
        let mut ids: Vec<_> = tabs.by_id.iter().filter(|(_, t)| t.session.is_some()).map(|(id, _)| *id).collect();
        ids.sort_unstable();
        ids.into_iter().filter_map(|id| tabs.info(id)).collect()
    }

    /// Opens `/extension` on the relay at `addr` and says hello.
    pub async fn connect(&self, relay_addr: std::net::SocketAddr, token: Option<&str>) -> anyhow::Result<()> {
        let mut request = format!("ws://{relay_addr}/extension").into_client_request()?;
        let headers = request.headers_mut();
        headers.insert("Origin", format!("chrome-extension://{DEFAULT_EXTENSION_ID}").parse()?);
        headers.insert("Sec-WebSocket-Protocol", SUBPROTOCOL.parse()?);
        let (socket, response) = tokio_tungstenite::connect_async(request).await.context("connecting to /extension")?;
        anyhow::ensure!(
            response.headers().get("sec-websocket-protocol").and_then(|v| v.to_str().ok()) == Some(SUBPROTOCOL),
            "relay did not select {SUBPROTOCOL}"
        );
        let (mut sink, mut stream) = socket.split();
        let (tx, mut rx) = mpsc::unbounded_channel::<Message>();
        self.0.welcomed.send_replace(false);
        // The pairing handshake: our auth now, the hello (with the tabs as
        // they are then) when the relay has proved itself.
        let proof = crate::pairing::ExtensionProof::new(token, relay_addr.port());
        tx.send(Message::Text(proof.auth_frame(PROTOCOL_VERSION).into()))?;
        *self.0.proof.lock().unwrap() = Some(proof);
        *self.0.relay.lock().unwrap() = Some(tx);

        let writer_stop = self.0.stop.child_token();
        let reader_stop = writer_stop.clone();
        if let Some(previous) = self.0.relay_stop.lock().unwrap().replace(writer_stop.clone()) {
            previous.cancel();
        }
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    // Dropped on purpose: no close frame, like a killed worker.
                    () = writer_stop.cancelled() => return,
                    message = rx.recv() => match message {
                        None => return,
                        Some(message) => if sink.send(message).await.is_err() { break },
                    },
                }
            }
            let _ = sink.close().await;
        });
        let sim = self.clone();
        tokio::spawn(async move {
            loop {
                let frame = tokio::select! {
                    () = reader_stop.cancelled() => break,
                    frame = stream.next() => frame,
                };
                match frame {
                    Some(Ok(Message::Text(text))) => sim.on_relay_text(text.to_string()),
                    Some(Ok(Message::Close(_))) | Some(Err(_)) | None => break,
                    Some(Ok(_)) => {}
                }
            }
        });
        Ok(())
    }

    /// Waits for the relay's welcome.
    pub async fn welcomed(&self) -> anyhow::Result<()> {
        let mut rx = self.0.welcomed.subscribe();
        tokio::time::timeout(Duration::from_secs(10), rx.wait_for(|w| *w))
            .await
            .map_err(|_| anyhow!("no welcome from the relay within 10 s"))??;
        Ok(())
    }

    /// Drops the relay connection abruptly (no close frame), like a killed
    /// service worker.
    pub fn drop_connection(&self) {
        self.0.relay.lock().unwrap().take();
        if let Some(stop) = self.0.relay_stop.lock().unwrap().take() {
            stop.cancel();
        }
    }

    /// Sends a raw frame to the relay (garbage injection).
    pub fn send_raw(&self, text: &str) {
        if let Some(tx) = &*self.0.relay.lock().unwrap() {
            let _ = tx.send(Message::Text(text.to_string().into()));
        }
    }

    /// What Chrome's events make the extension say: only on a link the
    /// relay has welcomed, as the real extension's core does. Before that the
    /// relay is in the handshake and takes nothing else (its hello lists the
    /// tabs as they are).
    fn send_when_linked(&self, message: &ExtensionMessage<'_>) {
        if *self.0.welcomed.borrow() {
            self.send(message);
        }
    }

    fn send(&self, message: &ExtensionMessage<'_>) {
        if let Some(tx) = &*self.0.relay.lock().unwrap() {
            let _ = tx.send(Message::Text(encode(message).into()));
        }
    }

    /// Waits for a notice of `kind` (`ask`, `handoff`…) the relay sent,
    /// the first one not among the first `after` notices.
    pub async fn notice(&self, kind: &str, after: usize, within: std::time::Duration) -> anyhow::Result<Value> {
        let mut notices = self.0.notices.subscribe();
        let found =
            tokio::time::timeout(within, notices.wait_for(|all| all.iter().skip(after).any(|n| n["type"] == kind)))
                .await
                .with_context(|| format!("no '{kind}' notice within {within:?}: {:?}", self.0.notices.borrow()))?
                .map_err(|_| anyhow!("the simulated extension stopped"))?;
        Ok(found.iter().skip(after).find(|n| n["type"] == kind).cloned().expect("found"))
    }

    /// The files in the "user's" downloads folder.
    pub fn downloaded(&self) -> Vec<String> {
        let entries = std::fs::read_dir(self.0.downloads.path()).map(|dir| dir.flatten().collect::<Vec<_>>());
        let mut names: Vec<String> =
            entries.unwrap_or_default().iter().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        names
    }

    /// How many notices the relay has sent.
    pub fn notices_count(&self) -> usize {
        self.0.notices.borrow().len()
    }

    /// The person answers a question in its notification (`ask.answer`).
    pub fn answer_ask(&self, id: u64, allow: bool) {
        let answer = if allow { shared_protocol::AskAnswer::Allow } else { shared_protocol::AskAnswer::Deny };
        self.send(&ExtensionMessage::AskAnswer { id, answer });
    }

    /// The person says Done on a handed-over tab (`handoff.done`).
    pub fn handoff_done(&self, tab: TabId) {
        self.send(&ExtensionMessage::HandoffDone { tab_id: tab });
    }

    /// The user clicks the toolbar button on `tab`: attach, then tell the relay.
    pub async fn user_attach(&self, tab: TabId) -> anyhow::Result<()> {
        self.attach(tab).await.map_err(|e| anyhow!("attach: {}", e.message))?;
        let info = self.0.tabs.lock().unwrap().info(tab).context("tab vanished")?;
        self.send(&ExtensionMessage::UserToggledAttach { tab: info, attached: true });
        Ok(())
    }

    /// The person drags `tab` into `grant`'s tab group (`None`: their own
    /// "Browser Relay" group), as the real extension reports it: a tab not
    /// shared yet is attached and announced with its grant; a shared one
    /// moves (`tab.grant`).
    pub async fn share_with(&self, tab: TabId, grant: Option<&str>) -> anyhow::Result<()> {
        let shared = {
            let mut tabs = self.0.tabs.lock().unwrap();
            let entry = tabs.by_id.get_mut(&tab).context("no such tab")?;
            entry.grant = grant.map(str::to_string);
            entry.session.is_some()
        };
        if shared {
            self.send(&ExtensionMessage::TabGrant { tab_id: tab, grant: grant.map(str::to_string) });
            return Ok(());
        }
        self.user_attach(tab).await
    }

    /// The user clicks again: detach, then tell the relay.
    pub async fn user_detach(&self, tab: TabId) -> anyhow::Result<()> {
        self.detach(tab).await.map_err(|e| anyhow!("detach: {}", e.message))?;
        let info = self.0.tabs.lock().unwrap().info(tab).context("tab vanished")?;
        self.send(&ExtensionMessage::UserToggledAttach { tab: info, attached: false });
        Ok(())
    }

    // ---- Chrome side ----------------------------------------------------

    /// Waits (up to 20 s) until a tab satisfies `pred`.
    pub async fn wait_for_tab(&self, what: &str, pred: impl Fn(&TabInfo) -> bool) -> anyhow::Result<TabInfo> {
        let mut changed = self.0.tabs_changed.subscribe();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(tab) = self.tabs().into_iter().find(|t| pred(t)) {
                return Ok(tab);
            }
            tokio::time::timeout_at(deadline, changed.changed())
                .await
                .map_err(|_| anyhow!("timed out waiting for a tab: {what}; tabs: {:?}", self.tabs()))??;
        }
    }

    fn on_chrome_event(&self, event: CdpEvent) {
        self.on_chrome_event_inner(event);
        self.0.tabs_changed.send_modify(|n| *n += 1);
    }

    fn on_chrome_event_inner(&self, event: CdpEvent) {
        let CdpEvent { method, params, session_id } = event;
        if let Some(session) = session_id {
            let mut tabs = self.0.tabs.lock().unwrap();
            let (tab, child) = match tabs.tab_of_session(&session) {
                Some(tab) => (tab, None),
                None => match tabs.children.get(&session) {
                    Some(tab) => (*tab, Some(session.clone())),
                    None => return,
                },
            };
            match method.as_str() {
                "Target.attachedToTarget" => {
                    if let Some(child) = params["sessionId"].as_str() {
                        tabs.children.insert(child.to_string(), tab);
                    }
                }
                "Target.detachedFromTarget" => {
                    if let Some(child) = params["sessionId"].as_str() {
                        tabs.children.remove(child);
                    }
                }
                _ => {}
            }
            drop(tabs);
            let params = serde_json::value::to_raw_value(&params).expect("Value serialises");
            self.send_when_linked(&ExtensionMessage::DebuggerEvent(DebuggerEvent {
                tab_id: tab,
                session_id: child.map(Into::into),
                method: method.into(),
                params: Some(&params),
            }));
            return;
        }
        match method.as_str() {
            "Target.targetCreated" if params["targetInfo"]["type"] == "page" => {
                let info = &params["targetInfo"];
                let mut tabs = self.0.tabs.lock().unwrap();
                let target_id = info["targetId"].as_str().unwrap_or_default().to_string();
                if tabs.id_of_target(&target_id).is_some() {
                    return;
                }
                let opener = info["openerId"].as_str().and_then(|o| tabs.id_of_target(o));
                // Chrome opens a grouped tab's popup into its group.
                let grant = opener.and_then(|o| tabs.by_id.get(&o)).and_then(|t| t.grant.clone());
                let id = tabs.next_id;
                tabs.next_id += 1;
                tabs.by_id.insert(
                    id,
                    Tab {
                        target_id,
                        url: info["url"].as_str().unwrap_or_default().into(),
                        title: info["title"].as_str().unwrap_or_default().into(),
                        opener,
                        session: None,
                        grant,
                    },
                );
                let tab = tabs.info(id).expect("just inserted");
                drop(tabs);
                self.send_when_linked(&ExtensionMessage::TabCreated { tab });
            }
            "Target.targetInfoChanged" if params["targetInfo"]["type"] == "page" => {
                let info = &params["targetInfo"];
                let mut tabs = self.0.tabs.lock().unwrap();
                let Some(id) = tabs.id_of_target(info["targetId"].as_str().unwrap_or_default()) else { return };
                let tab = tabs.by_id.get_mut(&id).expect("found");
                tab.url = info["url"].as_str().unwrap_or_default().into();
                tab.title = info["title"].as_str().unwrap_or_default().into();
                let tab = tabs.info(id).expect("found");
                drop(tabs);
                self.send_when_linked(&ExtensionMessage::TabUpdated { tab });
            }
            "Target.targetDestroyed" => {
                let mut tabs = self.0.tabs.lock().unwrap();
                let Some(id) = tabs.id_of_target(params["targetId"].as_str().unwrap_or_default()) else { return };
                let tab = tabs.by_id.remove(&id).expect("found");
                tabs.children.retain(|_, t| *t != id);
                drop(tabs);
                if tab.session.is_some() {
                    self.send_when_linked(&ExtensionMessage::DebuggerDetached {
                        tab_id: id,
                        reason: "target_closed".into(),
                    });
                }
                self.send_when_linked(&ExtensionMessage::TabRemoved { tab_id: id });
            }
            "Target.detachedFromTarget" => {
                // Chrome dropped our attachment (e.g. the tab crashed).
                let mut tabs = self.0.tabs.lock().unwrap();
                let Some(session) = params["sessionId"].as_str() else { return };
                let Some(id) = tabs.tab_of_session(session) else { return };
                tabs.by_id.get_mut(&id).expect("found").session = None;
                drop(tabs);
                self.send_when_linked(&ExtensionMessage::DebuggerDetached {
                    tab_id: id,
                    reason: "target_closed".into(),
                });
            }
            _ => {}
        }
    }

    async fn attach(&self, tab: TabId) -> Result<Value, CallError> {
        let target_id = {
            let tabs = self.0.tabs.lock().unwrap();
            let t = tabs.by_id.get(&tab).ok_or_else(|| chrome_error(format!("No tab with given id {tab}.")))?;
            if t.session.is_some() {
                return Err(chrome_error(format!("Another debugger is already attached to the tab with id: {tab}.")));
            }
            if t.url.starts_with("chrome://") {
                return Err(chrome_error("Cannot access a chrome:// URL".into()));
            }
            t.target_id.clone()
        };
        let result = self
            .0
            .chrome
            .call("Target.attachToTarget", json!({"targetId": target_id, "flatten": true}), None)
            .await
            .map_err(cdp_error)?;
        let session = result["sessionId"].as_str().unwrap_or_default().to_string();
        if let Some(t) = self.0.tabs.lock().unwrap().by_id.get_mut(&tab) {
            t.session = Some(session);
        }
        Ok(Value::Null)
    }

    async fn detach(&self, tab: TabId) -> Result<Value, CallError> {
        let session = {
            let mut tabs = self.0.tabs.lock().unwrap();
            let t = tabs.by_id.get_mut(&tab).ok_or_else(|| chrome_error(format!("No tab with given id {tab}.")))?;
            t.session
                .take()
                .ok_or_else(|| chrome_error(format!("Debugger is not attached to the tab with id: {tab}.")))?
        };
        self.0.tabs.lock().unwrap().children.retain(|_, t| *t != tab);
        self.0.chrome.call("Target.detachFromTarget", json!({"sessionId": session}), None).await.map_err(cdp_error)?;
        Ok(Value::Null)
    }

    // ---- relay side -----------------------------------------------------

    fn on_relay_text(&self, text: String) {
        let message = match RelayMessage::parse(&text) {
            Ok(message) => message,
            Err(e) => panic!("the relay sent a frame the extension cannot parse: {e}: {text}"),
        };
        match message {
            RelayMessage::Challenge { nonce, proof, .. } => {
                let hello = Hello {
                    protocol_version: PROTOCOL_VERSION,
                    extension_version: "0.0.0-sim".into(),
                    user_agent: self.0.user_agent.clone(),
                    browser_version: self.0.product.clone(),
                    attached_tabs: self.attached_tabs(),
                };
                let ours = self.0.proof.lock().unwrap().clone().expect("connect sent the auth");
                match ours.answer_frames(&nonce, &proof, hello) {
                    Ok(frames) => frames.iter().for_each(|frame| self.send_raw(frame)),
                    Err(why) => panic!("the simulated extension's relay: {why}"),
                }
            }
            RelayMessage::Welcome { .. } => {
                self.0.welcomed.send_replace(true);
            }
            RelayMessage::Ping { nonce } => self.send(&ExtensionMessage::Pong { nonce }),
            RelayMessage::Pong { .. } | RelayMessage::Clients { .. } | RelayMessage::Grants { .. } => {}
            RelayMessage::Ask { .. }
            | RelayMessage::AskClosed { .. }
            | RelayMessage::Handoff { .. }
            | RelayMessage::HandoffEnd { .. } => {
                // `{"ask": {...}}` kept as `{"type": "ask", ...}`.
                let mut notice = json!({"type": message.name()});
                if let Ok(Value::Object(tagged)) = serde_json::from_str::<Value>(&text)
                    && let Some(Value::Object(fields)) = tagged.into_iter().next().map(|(_, v)| v)
                {
                    notice.as_object_mut().expect("an object").extend(fields);
                }
                self.0.notices.send_modify(|notices| notices.push(notice));
            }
            _ => {
                let id = message.call_id().expect("a call");
                let faults = self.0.faults.lock().unwrap().clone();
                if faults.swallow_commands && matches!(message, RelayMessage::DebuggerSendCommand(_)) {
                    return;
                }
                if let RelayMessage::DebuggerSendCommand(command) = &message {
                    // chrome.debugger.sendCommand issues commands in call order
                    // and its promises settle in Chrome's reply order: forward
                    // both orders as they are (input events and Playwright's
                    // getFrameTree-before-contexts depend on them).
                    let sim = self.clone();
                    let done = move |result: Result<Value, CallError>| sim.reply(id, result, faults.reply_delay);
                    match self.check_command(command) {
                        Ok((method, params, session)) => {
                            self.0
                                .chrome
                                .call_with(&method, params, Some(&session), move |r| done(r.map_err(cdp_error)));
                        }
                        Err(refused) => done(Err(refused)),
                    }
                    return;
                }
                let sim = self.clone();
                tokio::spawn(async move {
                    // Re-parse inside the task: the message borrows `text`.
                    let message = RelayMessage::parse(&text).expect("parsed above");
                    let result = sim.execute(message).await;
                    sim.reply(id, result, faults.reply_delay);
                });
            }
        }
    }

    fn reply(&self, id: u64, result: Result<Value, CallError>, delay: Option<Duration>) {
        let frame = match result {
            Ok(value) => {
                let raw: Box<RawValue> = serde_json::value::to_raw_value(&value).expect("Value serialises");
                encode(&ExtensionMessage::Reply(Reply { id, result: Some(&raw), error: None }))
            }
            Err(error) => encode(&ExtensionMessage::Reply(Reply { id, result: None, error: Some(error) })),
        };
        let Some(tx) = self.0.relay.lock().unwrap().clone() else { return };
        match delay {
            None => drop(tx.send(Message::Text(frame.into()))),
            Some(delay) => {
                tokio::spawn(async move {
                    tokio::time::sleep(delay).await;
                    let _ = tx.send(Message::Text(frame.into()));
                });
            }
        }
    }

    /// `debugger.sendCommand`: checks it as Chrome does; returns what to send.
    fn check_command(&self, command: &shared_protocol::SendCommand<'_>) -> Result<(String, Value, String), CallError> {
        let method = &*command.method;
        if refused_by_chrome_debugger(method) {
            return Err(CallError { message: "Not allowed".into(), code: Some(-32000) });
        }
        let session = {
            let tabs = self.0.tabs.lock().unwrap();
            let not_attached =
                || chrome_error(format!("Debugger is not attached to the tab with id: {}.", command.tab_id));
            let tab = tabs.by_id.get(&command.tab_id).ok_or_else(not_attached)?;
            let root = tab.session.clone().ok_or_else(not_attached)?;
            match command.session_id.as_deref() {
                None => root,
                Some(child) if tabs.children.get(child) == Some(&command.tab_id) => child.to_string(),
                Some(child) => return Err(chrome_error(format!("No session with given id: {child}"))),
            }
        };
        let params: Value = match command.params {
            Some(raw) => serde_json::from_str(raw.get()).map_err(|e| chrome_error(e.to_string()))?,
            None => json!({}),
        };
        Ok((method.to_string(), params, session))
    }

    async fn execute(&self, message: RelayMessage<'_>) -> Result<Value, CallError> {
        match message {
            RelayMessage::DebuggerAttach { tab_id, .. } => self.attach(tab_id).await,
            RelayMessage::DebuggerDetach { tab_id, .. } => self.detach(tab_id).await,
            RelayMessage::DebuggerSendCommand(_) => unreachable!("started in on_relay_text"),
            RelayMessage::TabsCreate { url, active, grant, .. } => {
                let url = url.unwrap_or_else(|| "about:blank".into());
                let created = self
                    .0
                    .chrome
                    .call("Target.createTarget", json!({"url": url, "background": !active}), None)
                    .await
                    .map_err(cdp_error)?;
                let target_id = created["targetId"].as_str().unwrap_or_default().to_string();
                // targetCreated may not have been processed yet: register here.
                let mut tabs = self.0.tabs.lock().unwrap();
                let id = match tabs.id_of_target(&target_id) {
                    Some(id) => {
                        // Made in the grant's group.
                        if let Some(tab) = tabs.by_id.get_mut(&id) {
                            tab.grant.clone_from(&grant);
                        }
                        id
                    }
                    None => {
                        let id = tabs.next_id;
                        tabs.next_id += 1;
                        tabs.by_id.insert(
                            id,
                            Tab { target_id, url, title: String::new(), opener: None, session: None, grant },
                        );
                        id
                    }
                };
                Ok(serde_json::to_value(tabs.info(id)).expect("serialises"))
            }
            RelayMessage::TabsRemove { tab_id, .. } => {
                let target_id = {
                    let tabs = self.0.tabs.lock().unwrap();
                    if tabs.by_id.len() <= 1 {
                        return Err(chrome_error("refusing to close the user's last tab".into()));
                    }
                    tabs.by_id.get(&tab_id).map(|t| t.target_id.clone())
                };
                let target_id = target_id.ok_or_else(|| chrome_error(format!("No tab with id: {tab_id}.")))?;
                self.0
                    .chrome
                    .call("Target.closeTarget", json!({"targetId": target_id}), None)
                    .await
                    .map_err(cdp_error)?;
                Ok(Value::Null)
            }
            RelayMessage::TabsUpdate { tab_id, active, url, .. } => {
                let target_id =
                    self.target_id(tab_id).ok_or_else(|| chrome_error(format!("No tab with id: {tab_id}.")))?;
                if url.is_some() {
                    return Err(chrome_error("tabs.update with url is not simulated".into()));
                }
                if active == Some(true) {
                    self.0
                        .chrome
                        .call("Target.activateTarget", json!({"targetId": target_id}), None)
                        .await
                        .map_err(cdp_error)?;
                }
                Ok(serde_json::to_value(self.0.tabs.lock().unwrap().info(tab_id)).expect("serialises"))
            }
            RelayMessage::TabsQuery { .. } => Ok(serde_json::to_value(self.tabs()).expect("serialises")),
            RelayMessage::WindowsUpdate { .. } => Ok(Value::Null),
            RelayMessage::Challenge { .. }
            | RelayMessage::Welcome { .. }
            | RelayMessage::Ping { .. }
            | RelayMessage::Pong { .. }
            | RelayMessage::Clients { .. }
            | RelayMessage::Grants { .. }
            | RelayMessage::Ask { .. }
            | RelayMessage::AskClosed { .. }
            | RelayMessage::Handoff { .. }
            | RelayMessage::HandoffEnd { .. } => Err(chrome_error("not a call".into())),
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// What `chrome.debugger.sendCommand` refuses, as Chrome does.
fn refused_by_chrome_debugger(method: &str) -> bool {
    method.starts_with("Browser.")
        || matches!(
            method,
            "Target.getTargets"
                | "Target.attachToBrowserTarget"
                | "Target.createTarget"
                | "Target.closeTarget"
                | "Target.setDiscoverTargets"
                | "Target.createBrowserContext"
                | "Page.setDownloadBehavior"
        )
}

fn chrome_error(message: String) -> CallError {
    CallError { message, code: None }
}

fn cdp_error(error: CdpError) -> CallError {
    match error {
        CdpError::Protocol { code, message, .. } => CallError { message, code: Some(code) },
        other => CallError { message: other.to_string(), code: None },
    }
}
