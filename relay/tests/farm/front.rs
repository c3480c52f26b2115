//! A browser farm's front, made for the test: a TLS server (rustls, with a
//! certificate from a CA made at test time with rcgen) before a real
//! Chromium's debugging port, in the shapes real farms have:
//!
//! - [`Shape::Header`]: browserbase/Steel-like. Every request needs
//!   `Authorization` (401 without); `/json/version` names the front's own
//!   `wss://` address.
//! - [`Shape::QueryToken`]: browserless-like. Every request needs
//!   `?token=…` (401 without); `/json/version` names the browser as the
//!   farm's container sees it (`ws://0.0.0.0:9222/…`, no token), as such
//!   farms do.
//! - [`Shape::PathOnly`]: Selenium Grid's `se:cdp` (behind the Grid's basic
//!   authentication). A WebSocket at one path and nothing else: no
//!   `/json/version` (404).
//!
//! Its WebSocket relays frames both ways to the browser's own socket;
//! [`Front::drop_connections`] cuts every one as a farm or a network
//! would. It runs on a thread and runtime of its own, so tests may block.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::ws::{Message as AxumMessage, WebSocket, WebSocketUpgrade};
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures_util::{SinkExt as _, StreamExt as _};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

/// A certificate authority made for one test.
pub(crate) struct TestCa {
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
    der: CertificateDer<'static>,
    /// Its certificate, PEM: what a profile's `cdpCaFile` holds.
    pub pem: String,
}

impl TestCa {
    pub(crate) fn new(name: &str) -> Self {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.distinguished_name.push(rcgen::DnType::CommonName, name);
        params.key_usages = vec![rcgen::KeyUsagePurpose::KeyCertSign, rcgen::KeyUsagePurpose::CrlSign];
        let key = rcgen::KeyPair::generate().expect("a key");
        let certificate = params.self_signed(&key).expect("self-signed");
        Self { pem: certificate.pem(), der: certificate.der().clone(), issuer: rcgen::Issuer::new(params, key) }
    }

    /// A server configuration for 127.0.0.1 and localhost, signed by this CA.
    fn server_config(&self) -> Arc<rustls::ServerConfig> {
        let params =
            rcgen::CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()]).expect("params");
        let key = rcgen::KeyPair::generate().expect("a key");
        let leaf = params.signed_by(&key, &self.issuer).expect("signed");
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_no_client_auth()
            .with_single_cert(
                vec![leaf.der().clone(), self.der.clone()],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
            )
            .expect("a certificate");
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Arc::new(config)
    }
}

#[derive(Debug, Clone)]
pub(crate) enum Shape {
    Header { authorization: String },
    QueryToken { token: String },
    PathOnly { path: String, authorization: String },
}

#[derive(Clone)]
struct FrontState {
    shape: Shape,
    addr: SocketAddr,
    /// The real browser: its debugging port and its browser socket.
    browser_http: String,
    browser_ws: String,
    /// Cancelled to cut every connection of the current generation.
    generation: Arc<Mutex<CancellationToken>>,
    upgrades: Arc<AtomicUsize>,
    /// WebSockets open now (relaying).
    open: Arc<AtomicUsize>,
    refused: Arc<AtomicUsize>,
    /// Connections open now stop passing frames but stay open
    /// ([`Front::go_silent`]).
    silenced: Arc<Mutex<CancellationToken>>,
}

pub(crate) struct Front {
    pub addr: SocketAddr,
    state: FrontState,
    stop: CancellationToken,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Front {
    /// Listens on 127.0.0.1 with a certificate of `ca`, before the
    /// browser whose debugging port is `browser_port` and whose browser
    /// socket is `browser_ws`.
    pub(crate) fn start(shape: Shape, ca: &TestCa, browser_port: u16, browser_ws: &str) -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("binds");
        listener.set_nonblocking(true).expect("non-blocking");
        let addr = listener.local_addr().expect("an address");
        let state = FrontState {
            shape,
            addr,
            browser_http: format!("http://127.0.0.1:{browser_port}"),
            browser_ws: browser_ws.to_string(),
            generation: Arc::new(Mutex::new(CancellationToken::new())),
            upgrades: Arc::new(AtomicUsize::new(0)),
            open: Arc::new(AtomicUsize::new(0)),
            refused: Arc::new(AtomicUsize::new(0)),
            silenced: Arc::new(Mutex::new(CancellationToken::new())),
        };
        let acceptor = tokio_rustls::TlsAcceptor::from(ca.server_config());
        let stop = CancellationToken::new();
        let (served, stopped) = (state.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            let runtime =
                tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("a runtime");
            runtime.block_on(serve(listener, acceptor, served, stopped));
        });
        Self { addr, state, stop, thread: Some(thread) }
    }

    /// WebSockets it has accepted (and relayed) so far.
    pub(crate) fn upgrades(&self) -> usize {
        self.state.upgrades.load(Ordering::SeqCst)
    }

    /// WebSockets open now: accepted and not yet closed by either side.
    pub(crate) fn open_connections(&self) -> usize {
        self.state.open.load(Ordering::SeqCst)
    }

    /// Requests it refused for want of the credential.
    pub(crate) fn refused(&self) -> usize {
        self.state.refused.load(Ordering::SeqCst)
    }

    /// Cuts every open WebSocket (no close frame: the TCP connection just
    /// ends), as a farm restarting or a network failing would.
    pub(crate) fn drop_connections(&self) {
        let mut generation = self.state.generation.lock().unwrap();
        generation.cancel();
        *generation = CancellationToken::new();
    }
}

impl Front {
    /// Every open WebSocket stops passing frames, its TCP connection left
    /// open (no FIN, no close frame): a network that drops silently, as a
    /// NAT timing out does. New connections pass frames again.
    pub(crate) fn go_silent(&self) {
        let mut silenced = self.state.silenced.lock().unwrap();
        silenced.cancel();
        *silenced = CancellationToken::new();
    }
}

impl Drop for Front {
    fn drop(&mut self) {
        self.stop.cancel();
        self.drop_connections();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn serve(
    listener: std::net::TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
    state: FrontState,
    stop: CancellationToken,
) {
    let listener = tokio::net::TcpListener::from_std(listener).expect("a tokio listener");
    let app = Router::new().route("/json/version", get(version)).fallback(socket).with_state(state);
    loop {
        let (tcp, _) = tokio::select! {
            () = stop.cancelled() => return,
            accepted = listener.accept() => match accepted { Ok(a) => a, Err(_) => continue },
        };
        let (acceptor, app) = (acceptor.clone(), app.clone());
        tokio::spawn(async move {
            // A client that does not trust our CA ends here.
            let Ok(tls) = acceptor.accept(tcp).await else { return };
            let service = hyper_util::service::TowerToHyperService::new(app);
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                .with_upgrades()
                .await;
        });
    }
}

/// Whether the request carries what the shape demands.
fn authorized(state: &FrontState, request: &Request) -> bool {
    let ok = match &state.shape {
        Shape::Header { authorization } => has_header(request, authorization),
        Shape::QueryToken { token } => {
            request.uri().query().is_some_and(|q| q.split('&').any(|pair| pair == format!("token={token}")))
        }
        Shape::PathOnly { path, authorization } => request.uri().path() == path && has_header(request, authorization),
    };
    if !ok {
        state.refused.fetch_add(1, Ordering::SeqCst);
    }
    ok
}

fn has_header(request: &Request, authorization: &str) -> bool {
    request.headers().get("authorization").and_then(|v| v.to_str().ok()) == Some(authorization)
}

async fn version(State(state): State<FrontState>, request: Request) -> Response {
    if matches!(state.shape, Shape::PathOnly { .. }) {
        return StatusCode::NOT_FOUND.into_response();
    }
    if !authorized(&state, &request) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    let url = format!("{}/json/version", state.browser_http);
    let mut version = cdp_client::http::request("GET", &url, &[], None).await.expect("the browser answers").json();
    let path = url::Url::parse(version["webSocketDebuggerUrl"].as_str().unwrap()).unwrap().path().to_string();
    version["webSocketDebuggerUrl"] = match state.shape {
        Shape::Header { .. } => format!("wss://{}{path}", state.addr),
        // The farm's container's view, and no token: the client must
        // reach it where it reached the front, with its token.
        _ => format!("ws://0.0.0.0:9222{path}"),
    }
    .into();
    axum::Json(version).into_response()
}

async fn socket(State(state): State<FrontState>, upgrade: WebSocketUpgrade, request: Request) -> Response {
    if !authorized(&state, &request) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    state.upgrades.fetch_add(1, Ordering::SeqCst);
    let cut = state.generation.lock().unwrap().clone();
    let silenced = state.silenced.lock().unwrap().clone();
    let browser_ws = state.browser_ws.clone();
    let open = state.open.clone();
    upgrade.max_message_size(256 << 20).on_upgrade(move |client| async move {
        open.fetch_add(1, Ordering::SeqCst);
        relay(client, browser_ws, cut, silenced).await;
        open.fetch_sub(1, Ordering::SeqCst);
    })
}

/// Frames both ways between the client and the browser, until either
/// closes or the front cuts the connection.
async fn relay(client: WebSocket, browser_ws: String, cut: CancellationToken, silenced: CancellationToken) {
    let Ok((browser, _)) = tokio_tungstenite::connect_async(browser_ws.as_str()).await else { return };
    let (mut to_browser, mut from_browser) = browser.split();
    let (mut to_client, mut from_client) = client.split();
    let up = async {
        while let Some(Ok(message)) = from_client.next().await {
            let message = match message {
                AxumMessage::Text(text) => Message::Text(text.as_str().into()),
                AxumMessage::Binary(bytes) => Message::Binary(bytes),
                AxumMessage::Close(_) => break,
                _ => continue,
            };
            if silenced.is_cancelled() {
                continue;
            }
            if to_browser.send(message).await.is_err() {
                break;
            }
        }
    };
    let down = async {
        while let Some(Ok(message)) = from_browser.next().await {
            let message = match message {
                Message::Text(text) => AxumMessage::Text(text.as_str().into()),
                Message::Binary(bytes) => AxumMessage::Binary(bytes),
                Message::Close(_) => break,
                _ => continue,
            };
            if silenced.is_cancelled() {
                continue;
            }
            if to_client.send(message).await.is_err() {
                break;
            }
        }
    };
    tokio::select! {
        () = up => {}
        () = down => {}
        () = cut.cancelled() => {}
    }
}
