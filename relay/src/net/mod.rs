//! Listening sockets. Only this module accepts connections; it applies the
//! connection-level limits (loopback bind, header-read timeout, body-read
//! deadline, connection cap, a read limit a route can set) that axum's own
//! `serve` does not offer.

pub(crate) mod allowance;
pub(crate) mod guard;
pub(crate) mod sessions;
pub(crate) mod ui_logins;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// Connection-level limits.
#[derive(Debug, Clone)]
pub struct ServeLimits {
    /// A client must finish sending request headers within this (slowloris).
    pub header_read_timeout: Duration,
    /// And a request's body within this, from when its handler starts
    /// reading it (a body trickled forever would hold a connection, and on
    /// `POST /session`, which needs no token, anyone could).
    pub body_read_timeout: Duration,
    /// HTTP connections being served at once; further ones wait in the
    /// accept backlog. Upgraded WebSockets leave this count: the relay caps
    /// those itself (`RelayConfig::max_clients`, one extension).
    pub max_connections: usize,
}

impl Default for ServeLimits {
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(10),
            max_connections: 512,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum BindError {
    #[error("refusing to listen on {0}: Browser Relay only listens on loopback addresses (127.0.0.1 or ::1)")]
    NotLoopback(SocketAddr),
    #[error("cannot listen on {addr}: {error}{}", hint_for(.addr, .error))]
    Io { addr: SocketAddr, error: std::io::Error },
    /// The state folder is being rotated, or cannot be marked as served.
    #[error(transparent)]
    StateFolder(#[from] state_dir::ServingError),
}

/// What to do about a port that cannot be had, as the CLI shows hints.
fn hint_for(addr: &SocketAddr, error: &std::io::Error) -> String {
    why_cannot_listen(error.kind(), error.raw_os_error(), cfg!(windows), addr.port())
        .map(|hint| format!(" (hint: {hint})"))
        .unwrap_or_default()
}

/// Windows' `WSAEACCES`: the port is held exclusively by another program,
/// or reserved (Hyper-V, WSL and Docker reserve ranges of ports).
const WSAEACCES: i32 = 10013;

/// The next step for a failed bind, per system (`windows` given, so every
/// system's rule is tested on every host).
fn why_cannot_listen(kind: std::io::ErrorKind, os_code: Option<i32>, windows: bool, port: u16) -> Option<&'static str> {
    use std::io::ErrorKind;
    match kind {
        ErrorKind::AddrInUse => Some(
            "another program listens there, perhaps a `browser-relay serve` still running (`browser-relay status` asks it); \
             or pick another port (--port for the relay, --control-port for the control API; after a new relay port, \
             `browser-relay pair --port N` pairs the extension again)",
        ),
        _ if windows && os_code == Some(WSAEACCES) => Some(
            "Windows refused the port: another program holds it, or Windows reserves it for Hyper-V, WSL or Docker \
             (`netsh interface ipv4 show excludedportrange protocol=tcp` lists the reserved ranges); pick a port \
             outside them (--port, --control-port)",
        ),
        ErrorKind::PermissionDenied if !windows && port < 1024 => {
            Some("ports below 1024 need administrator rights: pick one above (--port, --control-port)")
        }
        _ => None,
    }
}

/// Binds a loopback listener; any other address is refused.
pub(crate) async fn bind_loopback(addr: SocketAddr) -> Result<TcpListener, BindError> {
    if !addr.ip().is_loopback() {
        return Err(BindError::NotLoopback(addr));
    }
    TcpListener::bind(addr).await.map_err(|error| BindError::Io { addr, error })
}

/// Whether something listens on `addr`, found by trying to bind it (and
/// letting go at once), never by connecting: a program squatting the port
/// must not even learn that we looked.
pub fn is_taken(addr: SocketAddr) -> bool {
    std::net::TcpListener::bind(addr).is_err()
}

/// A request whose body must arrive in full within `within`: past it, the
/// body ends with an error, which the handler answers (400) instead of
/// waiting on.
fn body_deadline(request: axum::extract::Request, within: Duration) -> axum::extract::Request {
    use axum::body::HttpBody as _;
    use futures_util::StreamExt as _;
    // A request without a body (every GET, every WebSocket upgrade) has
    // nothing to wait for: left as it is.
    if request.body().is_end_stream() {
        return request;
    }
    let deadline = tokio::time::Instant::now() + within;
    let (parts, body) = request.into_parts();
    let chunks = body.into_data_stream();
    let timed = futures_util::stream::unfold(Some(chunks), move |chunks| async move {
        let mut chunks = chunks?;
        match tokio::time::timeout_at(deadline, chunks.next()).await {
            Ok(Some(chunk)) => Some((chunk, Some(chunks))),
            Ok(None) => None,
            Err(_) => {
                let late = std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("the request body did not arrive within {within:?}"),
                );
                Some((Err(axum::Error::new(late)), None))
            }
        }
    });
    axum::extract::Request::from_parts(parts, axum::body::Body::from_stream(timed))
}

/// hyper's read buffer per connection: the largest request head, and what
/// it reads ahead of a handler (hyper's own minimum is 8 KiB).
const READ_BUFFER: usize = 16 * 1024;

/// Serves `router` on `listener` until `shutdown` fires.
pub(crate) async fn serve(listener: TcpListener, router: Router, limits: ServeLimits, shutdown: CancellationToken) {
    let within = limits.body_read_timeout;
    let router =
        router.layer(axum::middleware::map_request(move |request| async move { body_deadline(request, within) }));
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    loop {
        let permit = tokio::select! {
            () = shutdown.cancelled() => return,
            permit = permits.clone().acquire_owned() => permit.expect("semaphore never closed"),
        };
        let (stream, _peer) = tokio::select! {
            () = shutdown.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // EMFILE and friends: back off instead of spinning.
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        // The connection's read limit, which a route may set (see
        // `allowance`), rides on each of its requests.
        let allowance = allowance::ReadAllowance::default();
        let stream = allowance::Allowed::new(stream, allowance.clone());
        let routes = TowerToHyperService::new(router.clone());
        let service = hyper::service::service_fn(move |mut request: hyper::Request<hyper::body::Incoming>| {
            request.extensions_mut().insert(allowance.clone());
            hyper::service::Service::call(&routes, request)
        });
        let shutdown = shutdown.clone();
        let header_read_timeout = limits.header_read_timeout;
        tokio::spawn(async move {
            let mut builder = hyper::server::conn::http1::Builder::new();
            // A small read buffer: a request head (ours are well under it)
            // and what came right behind it, which an upgrade hands on
            // unread to the socket; before the extension's proof that is
            // all the read allowance does not count (`allowance`).
            builder.timer(TokioTimer::new()).header_read_timeout(header_read_timeout).max_buf_size(READ_BUFFER);
            let connection = builder.serve_connection(TokioIo::new(stream), service).with_upgrades();
            tokio::select! {
                result = connection => if let Err(e) = result {
                    tracing::debug!("connection ended: {e}");
                },
                () = shutdown.cancelled() => {}
            }
            drop(permit);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::ErrorKind;

    #[test]
    fn a_port_that_cannot_be_had_says_what_to_do_on_each_system() {
        let in_use = why_cannot_listen(ErrorKind::AddrInUse, Some(98), false, 18792).unwrap();
        assert!(in_use.contains("browser-relay status") && in_use.contains("--port"), "{in_use}");
        assert_eq!(why_cannot_listen(ErrorKind::AddrInUse, Some(10048), true, 18792), Some(in_use));
        let reserved = why_cannot_listen(ErrorKind::PermissionDenied, Some(WSAEACCES), true, 18792).unwrap();
        assert!(reserved.contains("excludedportrange") && reserved.contains("another program holds it"), "{reserved}");
        let low = why_cannot_listen(ErrorKind::PermissionDenied, Some(13), false, 80).unwrap();
        assert!(low.contains("below 1024"), "{low}");
        assert_eq!(why_cannot_listen(ErrorKind::PermissionDenied, Some(13), false, 18792), None, "no guess");
        assert_eq!(why_cannot_listen(ErrorKind::PermissionDenied, Some(13), true, 80), None, "not a Windows code");
        assert_eq!(why_cannot_listen(ErrorKind::Other, None, false, 18792), None);
    }

    #[tokio::test]
    async fn a_taken_port_is_told_once_with_its_hint() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let error = bind_loopback(taken.local_addr().unwrap()).await.unwrap_err();
        let text = format!("{:#}", anyhow::Error::from(error));
        assert!(text.starts_with(&format!("cannot listen on {}: ", taken.local_addr().unwrap())), "{text}");
        assert!(text.contains("(hint: another program listens there"), "{text}");
        assert_eq!(text.matches("(os error").count(), 1, "the system's reason once, not twice: {text}");
    }
}
