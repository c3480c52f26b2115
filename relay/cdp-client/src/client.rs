//! A small CDP client over one WebSocket: numbered calls with replies matched
//! by id, events delivered in order on a channel. This is the one CDP client
//! of the project (the managed driver and the control engine build on it; the
//! tests' simulated extension uses it to reach Chromium).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use dashmap::DashMap;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::{HeaderName, HeaderValue, header};
use tokio_tungstenite::tungstenite::{Error as WsError, Message};
use tokio_util::sync::CancellationToken;

use crate::endpoint_error::EndpointError;
use crate::net::{Dial, Stream};
use crate::protocol::{CdpEvent, Command};

#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum CdpError {
    /// Chrome (or the relay) answered with a CDP error.
    #[error("{method}: {message} (code {code})")]
    Protocol { method: String, code: i64, message: String },
    #[error("cannot connect to {url}: {reason}")]
    Connect { url: String, reason: String },
    #[error("the CDP connection closed before {0} was answered")]
    Closed(String),
    #[error("{0} was not answered within {1:?}")]
    Timeout(String, Duration),
    /// An answer that is not the command's result type.
    #[error("{method}: unexpected answer ({reason})")]
    Unexpected { method: String, reason: String },
}

/// Completes one call; runs in the reader task, in the order replies arrive.
type Waiter = Box<dyn FnOnce(Result<Value, (i64, String)>) + Send + Sync>;

/// An in-process CDP connection: text frames to the browser and from it.
/// The connection ends when either side drops its end.
#[derive(Debug)]
pub struct Channels {
    pub outgoing: mpsc::UnboundedSender<String>,
    pub incoming: mpsc::UnboundedReceiver<String>,
}

impl Channels {
    /// A browser's WebSocket (`ws://` or `wss://`, with `dial`'s headers,
    /// roots and deadlines) as text frames: a remote browser's one
    /// connection, which the managed driver multiplexes.
    pub async fn connect(url: &str, dial: &Dial) -> Result<Self, EndpointError> {
        Ok(pump(websocket(url, dial).await?))
    }
}

/// Opens a WebSocket: TCP and TLS as [`crate::net::open`] does, then the
/// upgrade (with `dial`'s headers) within the handshake's deadline. This is
/// the one WebSocket client of the project.
async fn websocket(url: &str, dial: &Dial) -> Result<WebSocketStream<Stream>, EndpointError> {
    let shown = redact(url);
    let bad = |reason: String| EndpointError::BadUrl { url: shown.clone(), reason };
    let parsed = url::Url::parse(url).map_err(|e| bad(e.to_string()))?;
    if !matches!(parsed.scheme(), "ws" | "wss") {
        return Err(bad("ws:// or wss:// expected".into()));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(bad("credentials in the URL are not sent: use headers (Authorization)".into()));
    }
    let mut request = url.into_client_request().map_err(|e| bad(e.to_string()))?;
    // How the relay names this client to the user (the extension's options
    // page lists who holds each shared tab).
    request.headers_mut().insert(header::USER_AGENT, HeaderValue::from_static(USER_AGENT));
    for (name, value) in &dial.headers {
        let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| bad(format!("header name {name:?}")))?;
        let value = HeaderValue::from_str(value.expose())
            .map_err(|_| bad(format!("the value of header {name} is not valid")))?;
        request.headers_mut().insert(name, value);
    }
    let (stream, upgrade_by) = crate::net::open(&parsed, dial, &shown).await?;
    let upgrade = tokio_tungstenite::client_async_with_config(request, stream, Some(ws_config()));
    match tokio::time::timeout_at(upgrade_by, upgrade).await {
        Err(_) => Err(EndpointError::HandshakeTimeout {
            url: shown,
            stage: "WebSocket handshake",
            within: dial.handshake_within,
        }),
        Ok(Ok((socket, _))) => Ok(socket),
        Ok(Err(WsError::Http(response))) => {
            Err(EndpointError::Status { url: shown, status: response.status().as_u16() })
        }
        Ok(Err(error)) => Err(EndpointError::Handshake { url: shown, reason: error.to_string() }),
    }
}

/// Runs `future` once with a waker that does nothing and, unless that
/// finished it, awaits it with the task's own. tokio-tungstenite wakes the
/// task that last wrote whenever the socket turns readable; a write that
/// completes at once leaves the no-op waker there, so an answer wakes the
/// reader alone, not the writer too (two tasks woken by one event, one of
/// them handed to another worker thread). The relay engine's writer does
/// the same (`relay-engine` `queue.rs`; the crates share no code).
async fn at_once_or_waiting<F: Future + Unpin>(mut future: F) -> F::Output {
    {
        let mut quiet = std::task::Context::from_waker(std::task::Waker::noop());
        if let std::task::Poll::Ready(output) = std::pin::Pin::new(&mut future).poll(&mut quiet) {
            return output;
        }
    }
    future.await
}

/// Writes what `rx` brings to `sink`, as `frame` makes it, until `frame`
/// says stop (`None`), `rx` or a write ends, or `closed` fires; then closes
/// the sink. The one writer loop of the CDP client's connections.
fn spawn_writer<S, M, T>(
    mut sink: S,
    mut rx: mpsc::UnboundedReceiver<M>,
    closed: CancellationToken,
    frame: fn(M) -> Option<T>,
) where
    S: futures_util::Sink<T> + Unpin + Send + 'static,
    M: Send + 'static,
    T: Send + 'static,
{
    tokio::spawn(async move {
        loop {
            let message = tokio::select! {
                () = closed.cancelled() => break,
                message = rx.recv() => message,
            };
            let Some(item) = message.and_then(frame) else { break };
            if at_once_or_waiting(sink.send(item)).await.is_err() {
                break;
            }
        }
        let _ = sink.close().await;
    });
}

/// A WebSocket's text frames on channels: a writer and a reader task, which
/// end with the socket or when [`Channels::outgoing`] drops (the socket is
/// then closed).
fn pump(socket: WebSocketStream<Stream>) -> Channels {
    let (sink, mut stream) = socket.split();
    let (outgoing, to_socket) = mpsc::unbounded_channel::<String>();
    let (from_socket, incoming) = mpsc::unbounded_channel::<String>();
    let closed = CancellationToken::new();
    spawn_writer(sink, to_socket, closed.clone(), |text: String| Some(Message::Text(text.into())));
    tokio::spawn(async move {
        loop {
            let frame = tokio::select! {
                () = from_socket.closed() => break,
                frame = stream.next() => frame,
            };
            match frame {
                Some(Ok(Message::Text(text))) => {
                    if from_socket.send(text.as_str().to_string()).is_err() {
                        break;
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(_)) | None => break,
            }
        }
        // The socket ended (or its reader left): the writer stops too.
        closed.cancel();
    });
    Channels { outgoing, incoming }
}

/// What the writer task sends.
#[derive(Debug)]
enum Outgoing {
    Text(String),
    Close,
}

/// The `User-Agent` of every WebSocket this crate opens: the agent API (the control
/// engine) is the product's client, and this is its name.
pub const USER_AGENT: &str = concat!("browser-relay/", env!("CARGO_PKG_VERSION"));

/// A connected CDP client. Dropping it closes the connection.
pub struct CdpClient {
    out: mpsc::UnboundedSender<Outgoing>,
    pending: Arc<DashMap<u64, Waiter>>,
    next_id: AtomicU64,
    events: std::sync::Mutex<Option<mpsc::UnboundedReceiver<CdpEvent>>>,
    closed: CancellationToken,
    timeout: Duration,
    /// Events handed to the event stream so far (see [`Self::events_sent`]).
    events_sent: Arc<AtomicU64>,
}

impl CdpClient {
    /// Connects to a `ws://` CDP endpoint (browser- or page-level), with
    /// no deadline (a local peer, which may hold the upgrade on purpose),
    /// as [`USER_AGENT`].
    #[cfg(any(test, feature = "testing"))]
    pub async fn connect(url: &str) -> Result<Self, CdpError> {
        let socket = websocket(url, &Dial::patient())
            .await
            .map_err(|e| CdpError::Connect { url: redact(url), reason: e.to_string() })?;
        let (sink, stream) = socket.split();
        let sink = sink.with(|text: String| std::future::ready(Ok::<_, WsError>(Message::Text(text.into()))));
        let stream = stream.take_while(|m| std::future::ready(m.is_ok())).filter_map(|m| {
            std::future::ready(match m {
                Ok(Message::Text(text)) => Some(text.as_str().to_string()),
                _ => None,
            })
        });
        Ok(Self::run(Box::pin(sink), Box::pin(stream)))
    }

    /// A client over an in-process connection (a managed browser's pipe):
    /// the same calls and events as over a WebSocket. Dropping the client
    /// (or [`Self::close`]) drops `channels.outgoing`, which ends it.
    pub fn over(channels: Channels) -> Self {
        let Channels { outgoing, incoming } = channels;
        let sink = futures_util::sink::unfold(outgoing, |outgoing, text: String| async move {
            outgoing.send(text).map(|()| outgoing).map_err(|_| ())
        });
        let stream = futures_util::stream::unfold(incoming, |mut incoming| async move {
            incoming.recv().await.map(|text| (text, incoming))
        });
        Self::run(Box::pin(sink), Box::pin(stream))
    }

    /// Starts the writer and reader tasks over one connection's text frames.
    fn run<E>(
        sink: std::pin::Pin<Box<dyn futures_util::Sink<String, Error = E> + Send>>,
        mut stream: std::pin::Pin<Box<dyn futures_util::Stream<Item = String> + Send>>,
    ) -> Self
    where
        E: Send + 'static,
    {
        let (out, out_rx) = mpsc::unbounded_channel::<Outgoing>();
        let (events_tx, events_rx) = mpsc::unbounded_channel();
        let pending: Arc<DashMap<u64, Waiter>> = Arc::new(DashMap::new());
        let closed = CancellationToken::new();

        spawn_writer(sink, out_rx, closed.clone(), |message| match message {
            Outgoing::Text(text) => Some(text),
            Outgoing::Close => None,
        });

        let reader_pending = pending.clone();
        let reader_closed = closed.clone();
        let events_sent = Arc::new(AtomicU64::new(0));
        let reader_sent = events_sent.clone();
        tokio::spawn(async move {
            while let Some(text) = tokio::select! {
                () = reader_closed.cancelled() => None,
                text = stream.next() => text,
            } {
                let Ok(mut value) = serde_json::from_str::<Value>(&text) else { continue };
                if let Some(id) = value.get("id").and_then(Value::as_u64) {
                    if let Some((_, waiter)) = reader_pending.remove(&id) {
                        let result = match value.get_mut("error") {
                            Some(error) => Err((
                                error.get("code").and_then(Value::as_i64).unwrap_or(0),
                                error.get("message").and_then(Value::as_str).unwrap_or("").to_string(),
                            )),
                            None => Ok(value.get_mut("result").map(Value::take).unwrap_or(Value::Null)),
                        };
                        waiter(result);
                    }
                } else if let Some(method) = value.get("method").and_then(Value::as_str) {
                    reader_sent.fetch_add(1, Ordering::Release);
                    let _ = events_tx.send(CdpEvent {
                        method: method.to_string(),
                        params: value.get_mut("params").map(Value::take).unwrap_or(Value::Null),
                        session_id: value.get("sessionId").and_then(Value::as_str).map(str::to_string),
                    });
                }
            }
            reader_closed.cancel();
            // Wake every waiter: the connection is gone.
            reader_pending.clear();
        });

        Self {
            out,
            pending,
            next_id: AtomicU64::new(1),
            events: std::sync::Mutex::new(Some(events_rx)),
            closed,
            timeout: Duration::from_secs(30),
            events_sent,
        }
    }

    /// Sets the deadline for each call (default 30 s).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Takes the event stream (once).
    pub fn take_events(&self) -> Option<mpsc::UnboundedReceiver<CdpEvent>> {
        self.events.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    /// How many events have been put on the event stream. Every event that
    /// arrived before a reply is counted by the time that reply's call
    /// returns, so a consumer that has handled this many events has seen
    /// everything that happened before the reply.
    pub fn events_sent(&self) -> u64 {
        self.events_sent.load(Ordering::Acquire)
    }

    pub fn is_closed(&self) -> bool {
        self.closed.is_cancelled()
    }

    /// Sends a typed command and waits for its typed result.
    pub async fn send<C: Command>(&self, command: &C, session_id: Option<&str>) -> Result<C::Response, CdpError> {
        self.start(command, session_id).await
    }

    /// Sends a typed command now; the future is its result. Commands go out
    /// in the order `start` is called (input events must reach Chrome in
    /// order).
    pub fn start<C: Command>(
        &self,
        command: &C,
        session_id: Option<&str>,
    ) -> impl std::future::Future<Output = Result<C::Response, CdpError>> + Send + use<C> {
        let params = serde_json::to_value(command).unwrap_or(Value::Null);
        let reply = self.start_call(C::METHOD, params, session_id);
        async move {
            let value = reply.await?;
            serde_json::from_value(value)
                .map_err(|e| CdpError::Unexpected { method: C::METHOD.to_string(), reason: e.to_string() })
        }
    }

    /// Sends a command and waits for its result.
    #[cfg(feature = "testing")]
    pub async fn call(&self, method: &str, params: Value, session_id: Option<&str>) -> Result<Value, CdpError> {
        self.start_call(method, params, session_id).await
    }

    /// Sends a command now and returns a future for its result. Commands are
    /// sent in the order `start_call` is called, whenever the futures are
    /// awaited (input events must reach Chrome in order).
    pub fn start_call(
        &self,
        method: &str,
        params: Value,
        session_id: Option<&str>,
    ) -> impl std::future::Future<Output = Result<Value, CdpError>> + Send + use<> {
        let (tx, rx) = oneshot::channel();
        let sent = self.send_with(method, params, session_id, Box::new(move |result| drop(tx.send(result))));
        let (method, timeout) = (method.to_string(), self.timeout);
        let pending = self.pending.clone();
        async move {
            let id = sent.map_err(|()| CdpError::Closed(method.clone()))?;
            match tokio::time::timeout(timeout, rx).await {
                Ok(Ok(Ok(result))) => Ok(result),
                Ok(Ok(Err((code, message)))) => Err(CdpError::Protocol { method, code, message }),
                Ok(Err(_)) => Err(CdpError::Closed(method)),
                Err(_) => {
                    pending.remove(&id);
                    Err(CdpError::Timeout(method, timeout))
                }
            }
        }
    }

    /// Sends a command now; `done` runs with its result in the order replies
    /// arrive (never if the connection closes first). For forwarders that
    /// must keep Chrome's reply order, as a browser extension's promises do.
    #[cfg(feature = "testing")]
    pub fn call_with(
        &self,
        method: &str,
        params: Value,
        session_id: Option<&str>,
        done: impl FnOnce(Result<Value, CdpError>) + Send + Sync + 'static,
    ) {
        let name = method.to_string();
        let _ = self.send_with(
            method,
            params,
            session_id,
            Box::new(move |result| {
                done(result.map_err(|(code, message)| CdpError::Protocol { method: name, code, message }));
            }),
        );
    }

    fn send_with(&self, method: &str, params: Value, session_id: Option<&str>, waiter: Waiter) -> Result<u64, ()> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut message = json!({"id": id, "method": method, "params": params});
        if let Some(session) = session_id {
            message["sessionId"] = json!(session);
        }
        self.pending.insert(id, waiter);
        if self.closed.is_cancelled() || self.out.send(Outgoing::Text(message.to_string())).is_err() {
            self.pending.remove(&id);
            return Err(());
        }
        Ok(id)
    }

    /// Sends a raw text frame (tests use this to send malformed input).
    #[cfg(feature = "testing")]
    pub fn send_raw(&self, text: &str) -> bool {
        self.out.send(Outgoing::Text(text.to_string())).is_ok()
    }

    /// Closes the connection.
    pub fn close(&self) {
        let _ = self.out.send(Outgoing::Close);
    }
}

impl std::fmt::Debug for CdpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CdpClient").field("pending", &self.pending.len()).field("closed", &self.is_closed()).finish()
    }
}

impl Drop for CdpClient {
    fn drop(&mut self) {
        self.closed.cancel();
    }
}

fn ws_config() -> tokio_tungstenite::tungstenite::protocol::WebSocketConfig {
    // Replies can be large (full-page screenshots); Chrome itself allows 256 MiB.
    tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default()
        .max_message_size(Some(256 << 20))
        .max_frame_size(Some(256 << 20))
}

/// A URL as it may be shown (errors, status, logs): the credentials of its
/// authority (`user:pass@`), its query and fragment (farms put their keys
/// there: `?token=`, `?apiKey=`), and path segments that look like keys
/// ([`looks_like_a_key`]: a farm's session id or key in its path) replaced
/// by `***`. The one redaction of the project.
pub fn redact(url: &str) -> String {
    // Only a scheme ends at `://`: in `user:pass@host/a://b` it is the path's.
    let (scheme, rest) = match url.split_once("://") {
        Some((scheme, rest)) if is_scheme(scheme) => (scheme, rest),
        _ => ("", url),
    };
    let (authority_and_path, query) = match rest.split_once(['?', '#']) {
        Some((before, _)) => (before, true),
        None => (rest, false),
    };
    let (authority, path) = authority_and_path.split_once('/').map_or((authority_and_path, ""), |(a, p)| (a, p));
    let host = match authority.rsplit_once('@') {
        Some((_, host)) => format!("***@{host}"),
        None => authority.to_string(),
    };
    let prefix = if scheme.is_empty() { String::new() } else { format!("{scheme}://") };
    let slash = if path.is_empty() && !authority_and_path.ends_with('/') { "" } else { "/" };
    let path: Vec<&str> =
        path.split('/').map(|segment| if looks_like_a_key(segment) { "***" } else { segment }).collect();
    format!("{prefix}{host}{slash}{}{}", path.join("/"), if query { "?***" } else { "" })
}

/// A path segment that may be a secret: 20 characters or more, mixing
/// letters and digits (an API key, a session or browser id that lets its
/// holder connect). Words (`devtools`, `browser`, `chromium`) and short
/// versions (`v1`, `playwright-1.55`) stay readable.
fn looks_like_a_key(segment: &str) -> bool {
    segment.len() >= 20
        && segment.bytes().any(|b| b.is_ascii_digit())
        && segment.bytes().any(|b| b.is_ascii_alphabetic())
}

/// RFC 3986: a letter, then letters, digits, `+`, `-` and `.`.
fn is_scheme(text: &str) -> bool {
    text.starts_with(|c: char| c.is_ascii_alphabetic())
        && text.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn redact_drops_the_query_that_may_hold_a_token() {
        let url = "ws://127.0.0.1:1/devtools/browser/X?token=0123456789abcdef";
        assert_eq!(redact(url), "ws://127.0.0.1:1/devtools/browser/X?***");
        assert_eq!(redact("ws://127.0.0.1:1/cdp"), "ws://127.0.0.1:1/cdp");
    }

    /// Found by `tests/tests/fuzz.rs`: a remote profile's `cdpUrl` with
    /// credentials was shown with them in connection errors.
    #[test]
    fn redact_drops_credentials_and_fragments() {
        assert_eq!(redact("wss://user:pass@farm.example/chrome?token=abc"), "wss://***@farm.example/chrome?***");
        assert_eq!(redact("ws://u:p@h"), "ws://***@h");
        assert_eq!(redact("u:p@h/a://b"), "***@h/a://b");
        assert_eq!(redact("ws://h/p@x#access_token=abc"), "ws://h/p@x?***");
        assert_eq!(redact("http://farm.example/?apiKey=k#frag"), "http://farm.example/?***");
        assert_eq!(redact("http://10.0.0.5:9333"), "http://10.0.0.5:9333");
    }

    #[test]
    fn redact_drops_path_segments_that_look_like_keys() {
        assert_eq!(
            redact("wss://farm.example/v1/session/sk_live_4eC39HqLyjWDarjtT1zdp7dc/devtools"),
            "wss://farm.example/v1/session/***/devtools"
        );
        assert_eq!(
            redact("ws://10.0.0.5:9222/devtools/browser/6f1e5d2a-8b3c-4d7e-9f10-112233445566"),
            "ws://10.0.0.5:9222/devtools/browser/***"
        );
        // Words and versions stay, however long.
        let readable = "wss://farm.example/chromium/playwright-1.55/remote-debugging-endpoint";
        assert_eq!(redact(readable), readable);
    }

    #[tokio::test]
    async fn connect_errors_never_show_the_token() {
        // Nothing listens on port 1.
        let error = super::CdpClient::connect("ws://127.0.0.1:1/cdp?token=sekrit").await.unwrap_err().to_string();
        assert!(!error.contains("sekrit"), "{error}");
    }
}
