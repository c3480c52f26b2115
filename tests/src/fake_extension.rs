//! A scripted extension peer with no browser behind it: for fast reliability
//! tests, fault injection, and the benchmark's echo extension. In `Echo`
//! mode it answers every call at once; in `Manual` mode the test sees each
//! call and answers (or does not) itself.

use std::net::SocketAddr;

use anyhow::Context as _;
use browser_relay::DEFAULT_EXTENSION_ID;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use shared_protocol::{
    CallError, ExtensionMessage, Hello, PROTOCOL_VERSION, RawValue, RelayMessage, Reply, SUBPROTOCOL, TabInfo, encode,
};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

/// A call the relay made, as the fake saw it.
#[derive(Debug, Clone)]
pub struct SeenCall {
    pub id: u64,
    pub name: String,
    /// For `debugger.sendCommand`: the CDP method.
    pub method: Option<String>,
    pub tab_id: Option<i64>,
    pub session_id: Option<String>,
    pub raw: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Answer everything immediately.
    Echo,
    /// Report calls on the channel; answer only the relay's own
    /// bookkeeping (`Target.getTargetInfo`, `Page.getFrameTree`, attach)
    /// automatically.
    Manual,
}

#[derive(Debug)]
pub struct FakeExtension {
    tx: mpsc::UnboundedSender<Message>,
    pub calls: mpsc::UnboundedReceiver<SeenCall>,
    /// Frames the relay sent that are not calls (welcome, ping, pong).
    pub other: mpsc::UnboundedReceiver<String>,
    pub close: tokio::sync::oneshot::Receiver<Option<(u16, String)>>,
    /// Dropping the fake drops its socket abruptly (no close frame).
    /// Stops reading the socket (see [`Self::stop_reading`]).
    deaf: tokio_util::sync::CancellationToken,
    /// Tabs still on their initial empty document, with how many more
    /// `Page.getFrameTree` calls say so (see [`Self::uncommitted`]).
    uncommitted: Uncommitted,
    _gone: tokio_util::sync::DropGuard,
}

type Uncommitted = std::sync::Arc<std::sync::Mutex<std::collections::HashMap<i64, usize>>>;

/// A page the fake pretends to have attached.
pub fn fake_tab(tab_id: i64) -> TabInfo {
    TabInfo {
        tab_id,
        window_id: Some(1),
        url: format!("https://example.test/{tab_id}"),
        title: format!("Tab {tab_id}"),
        fav_icon_url: None,
        active: true,
        opener_tab_id: None,
        grant: None,
    }
}

/// Chrome-style target id of a fake tab.
pub fn fake_target_id(tab_id: i64) -> String {
    format!("FAKE{tab_id:028}")
}

pub fn hello(tabs: Vec<TabInfo>) -> Hello {
    Hello {
        protocol_version: PROTOCOL_VERSION,
        extension_version: "0.0.0-fake".into(),
        user_agent: "Mozilla/5.0 FakeExtension".into(),
        browser_version: "Chrome/156.0.0.0".into(),
        attached_tabs: tabs,
    }
}

impl FakeExtension {
    /// Connects and, unless `hello` is `None` (a silent extension), starts
    /// the pairing handshake: `auth`, then on the relay's `challenge` the
    /// proof of `token` (`None`: an empty one, as an unpaired extension's)
    /// and the `hello`. Then answers calls as `mode` says.
    pub async fn connect(
        addr: SocketAddr,
        token: Option<&str>,
        hello: Option<Hello>,
        mode: Mode,
    ) -> anyhow::Result<Self> {
        Self::connect_shaped(addr, token, hello, mode, |prove, hello| vec![prove, hello]).await
    }

    /// [`Self::connect`], answering the relay's `challenge` with the frames
    /// `shape` makes of the `prove` and the hello (to send something
    /// between them, or several messages in one frame).
    pub async fn connect_shaped(
        addr: SocketAddr,
        token: Option<&str>,
        hello: Option<Hello>,
        mode: Mode,
        shape: fn(String, String) -> Vec<String>,
    ) -> anyhow::Result<Self> {
        let mut request = format!("ws://{addr}/extension").into_client_request()?;
        request.headers_mut().insert("Origin", format!("chrome-extension://{DEFAULT_EXTENSION_ID}").parse()?);
        request.headers_mut().insert("Sec-WebSocket-Protocol", SUBPROTOCOL.parse()?);
        let (socket, _) = tokio_tungstenite::connect_async(request).await.context("connecting to /extension")?;
        let (mut sink, mut stream) = socket.split();
        let (tx, mut rx) = mpsc::unbounded_channel::<Message>();
        let (calls_tx, calls) = mpsc::unbounded_channel();
        let (other_tx, other) = mpsc::unbounded_channel();
        let (close_tx, close) = tokio::sync::oneshot::channel();
        let proof = crate::pairing::ExtensionProof::new(token, addr.port());
        if let Some(hello) = &hello {
            tx.send(Message::Text(proof.auth_frame(hello.protocol_version).into()))?;
        }
        let stop = tokio_util::sync::CancellationToken::new();
        let (writer_stop, reader_stop) = (stop.clone(), stop.clone());
        let deaf = tokio_util::sync::CancellationToken::new();
        let deafened = deaf.clone();
        tokio::spawn(async move {
            loop {
                let message = tokio::select! {
                    () = writer_stop.cancelled() => break,
                    message = rx.recv() => match message { Some(m) => m, None => break },
                };
                let closing = matches!(message, Message::Close(_));
                if sink.send(message).await.is_err() || closing {
                    break;
                }
            }
        });
        let replies = tx.clone();
        let uncommitted = Uncommitted::default();
        let still_empty = uncommitted.clone();
        tokio::spawn(async move {
            let mut close_tx = Some(close_tx);
            while let Some(frame) = tokio::select! {
                biased;
                () = reader_stop.cancelled() => None,
                // Deaf: the socket stays open and unread until the fake goes.
                () = deafened.cancelled() => {
                    reader_stop.cancelled().await;
                    None
                }
                frame = stream.next() => frame,
            } {
                match frame {
                    Ok(Message::Text(text)) => {
                        let text = text.to_string();
                        let Ok(message) = RelayMessage::parse(&text) else { continue };
                        if let (RelayMessage::Challenge { nonce, proof: relay_proof, .. }, Some(hello)) =
                            (&message, &hello)
                        {
                            match proof.answer_frames(nonce, relay_proof, hello.clone()) {
                                Ok([prove, hello]) => {
                                    for frame in shape(prove, hello) {
                                        let _ = replies.send(Message::Text(frame.into()));
                                    }
                                }
                                Err(why) => panic!("the fake extension's relay: {why}"),
                            }
                            continue;
                        }
                        let Some(id) = message.call_id() else {
                            let _ = other_tx.send(text.clone());
                            if let RelayMessage::Ping { nonce } = message {
                                let _ = replies.send(Message::Text(encode(&ExtensionMessage::Pong { nonce }).into()));
                            }
                            continue;
                        };
                        let seen = describe(id, &message, &text);
                        let automatic = mode == Mode::Echo
                            || matches!(message, RelayMessage::DebuggerAttach { .. })
                            || matches!(seen.method.as_deref(), Some("Target.getTargetInfo" | "Page.getFrameTree"));
                        if automatic {
                            let result = echo_result(&message, &still_empty);
                            let _ = replies.send(Message::Text(reply_frame(id, Ok(result)).into()));
                        } else {
                            let _ = calls_tx.send(seen);
                        }
                    }
                    Ok(Message::Close(frame)) => {
                        if let Some(tx) = close_tx.take() {
                            let _ = tx.send(frame.map(|f| (u16::from(f.code), f.reason.to_string())));
                        }
                        break;
                    }
                    Ok(_) => {}
                    Err(_) => break,
                }
            }
            if let Some(tx) = close_tx.take() {
                let _ = tx.send(None);
            }
        });
        Ok(Self { tx, calls, other, close, deaf, uncommitted, _gone: stop.drop_guard() })
    }

    /// Tab `tab_id` stays on its initial empty document (its
    /// `Page.getFrameTree` says `url: ""`) for the next `calls` looks.
    pub fn uncommitted(&self, tab_id: i64, calls: usize) {
        self.uncommitted.lock().unwrap().insert(tab_id, calls);
    }

    /// How many more looks tab `tab_id` stays on its initial empty
    /// document (`None`: it was never set so).
    pub fn uncommitted_left(&self, tab_id: i64) -> Option<usize> {
        self.uncommitted.lock().unwrap().get(&tab_id).copied()
    }

    /// Sends an extension message.
    pub fn send(&self, message: &ExtensionMessage<'_>) {
        let _ = self.tx.send(Message::Text(encode(message).into()));
    }

    pub fn send_raw(&self, text: &str) {
        let _ = self.tx.send(Message::Text(text.to_string().into()));
    }

    /// Answers a call.
    pub fn reply(&self, id: u64, result: Result<Value, &str>) {
        let _ = self.tx.send(Message::Text(reply_frame(id, result.map_err(str::to_string)).into()));
    }

    /// Sends a CDP event from a tab.
    pub fn event(&self, tab_id: i64, session_id: Option<&str>, method: &str, params: Value) {
        let raw = serde_json::value::to_raw_value(&params).expect("serialises");
        self.send(&ExtensionMessage::DebuggerEvent(shared_protocol::DebuggerEvent {
            tab_id,
            session_id: session_id.map(Into::into),
            method: method.into(),
            params: Some(&raw),
        }));
    }

    /// Stops reading the socket, which stays open: an extension whose worker
    /// is stalled. The relay's frames pile up in the socket, then its queue.
    pub fn stop_reading(&self) {
        self.deaf.cancel();
    }

    /// Closes the socket with a close frame.
    pub fn close(&self) {
        let _ = self.tx.send(Message::Close(None));
    }
}

fn describe(id: u64, message: &RelayMessage<'_>, raw: &str) -> SeenCall {
    let (method, tab_id, session_id) = match message {
        RelayMessage::DebuggerSendCommand(c) => {
            (Some(c.method.to_string()), Some(c.tab_id), c.session_id.as_deref().map(str::to_string))
        }
        RelayMessage::DebuggerAttach { tab_id, .. }
        | RelayMessage::DebuggerDetach { tab_id, .. }
        | RelayMessage::TabsRemove { tab_id, .. }
        | RelayMessage::TabsUpdate { tab_id, .. } => (None, Some(*tab_id), None),
        _ => (None, None, None),
    };
    SeenCall { id, name: message.name().to_string(), method, tab_id, session_id, raw: raw.to_string() }
}

fn echo_result(message: &RelayMessage<'_>, uncommitted: &Uncommitted) -> Value {
    match message {
        RelayMessage::DebuggerSendCommand(c) if c.method == "Target.getTargetInfo" => {
            let tab = fake_tab(c.tab_id);
            json!({"targetInfo": {"targetId": fake_target_id(c.tab_id), "type": "page", "url": tab.url, "title": tab.title}})
        }
        RelayMessage::DebuggerSendCommand(c) if c.method == "Page.getFrameTree" => {
            let empty = match uncommitted.lock().unwrap().get_mut(&c.tab_id) {
                Some(left) if *left > 0 => {
                    *left -= 1;
                    true
                }
                _ => false,
            };
            let url = if empty { String::new() } else { fake_tab(c.tab_id).url };
            json!({"frameTree": {"frame": {"id": fake_target_id(c.tab_id), "url": url}}})
        }
        RelayMessage::DebuggerSendCommand(_) => json!({}),
        RelayMessage::TabsCreate { .. } => serde_json::to_value(fake_tab(900)).expect("serialises"),
        RelayMessage::TabsUpdate { tab_id, .. } => serde_json::to_value(fake_tab(*tab_id)).expect("serialises"),
        RelayMessage::TabsQuery { .. } => json!([]),
        _ => Value::Null,
    }
}

fn reply_frame(id: u64, result: Result<Value, String>) -> String {
    match result {
        Ok(value) => {
            let raw: Box<RawValue> = serde_json::value::to_raw_value(&value).expect("serialises");
            encode(&ExtensionMessage::Reply(Reply { id, result: Some(&raw), error: None }))
        }
        Err(message) => {
            encode(&ExtensionMessage::Reply(Reply { id, result: None, error: Some(CallError { message, code: None }) }))
        }
    }
}
