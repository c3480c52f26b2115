//! Wiring: a relay, its guard and its listener, started together. Used by
//! the binary and by tests (which bind `127.0.0.1:0`).

use std::net::SocketAddr;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::net::guard::{DEFAULT_EXTENSION_ID, Guard};
use crate::net::{self, BindError, ServeLimits};
use crate::relay::{PublicBase, Relay, RelayConfig};
use crate::state_dir::Token;

/// Everything needed to start a relay server.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    pub addr: SocketAddr,
    /// `None` disables authentication (`--no-auth`).
    pub token: Option<Token>,
    pub extension_ids: Vec<String>,
    pub relay: RelayConfig,
    pub limits: ServeLimits,
    /// The state directory whose managed profiles are exposed under
    /// `/profiles/<name>/` (none: no profiles).
    pub state_root: Option<std::path::PathBuf>,
}

impl ServerOptions {
    pub fn new(addr: SocketAddr, token: Option<Token>) -> Self {
        Self {
            addr,
            token,
            extension_ids: vec![DEFAULT_EXTENSION_ID.to_string()],
            relay: RelayConfig::default(),
            limits: ServeLimits::default(),
            state_root: None,
        }
    }
}

/// A running relay server. Dropping it stops it.
#[derive(Debug)]
pub struct RunningServer {
    pub addr: SocketAddr,
    pub relay: Relay,
    shutdown: CancellationToken,
    task: Option<JoinHandle<()>>,
}

impl RunningServer {
    pub async fn start(options: ServerOptions) -> Result<Self, BindError> {
        let listener = net::bind_loopback(options.addr).await?;
        let addr = listener.local_addr().map_err(|source| BindError::Io { addr: options.addr, source })?;
        let relay = Relay::new(options.relay);
        relay.set_public_base(PublicBase { addr, token: options.token.clone() });
        let guard = Guard::new(options.token, options.extension_ids);
        let router = crate::http::router(relay.clone(), guard, options.state_root.as_deref());
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(net::serve(listener, router, options.limits, shutdown.clone()));
        Ok(Self { addr, relay, shutdown, task: Some(task) })
    }

    /// `http://127.0.0.1:PORT/?token=…`, the URL for `connectOverCDP`.
    pub fn http_url(&self) -> String {
        self.relay.public_base().map(|b| b.http_url()).unwrap_or_default()
    }

    pub async fn stop(mut self) {
        self.shutdown.cancel();
        self.relay.shutdown();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        self.shutdown.cancel();
        self.relay.shutdown();
    }
}
