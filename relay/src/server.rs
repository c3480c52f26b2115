//! Wiring: a relay, its guard and its listener, started together. Used by
//! the binary and by tests (which bind `127.0.0.1:0`).

use std::net::SocketAddr;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use control_engine::{ControlError, Engine, RelayLink, SharedTabs};
use managed_driver::ManagedBrowsers;
use relay_engine::{PublicBase, Relay, RelayConfig};
use state_dir::Token;

use activity::ActivityRecord;

use crate::control::http::Extras;
use crate::control::ui::Dashboard;
use crate::lent::GrantEnded;
use crate::net::guard::{DEFAULT_EXTENSION_ID, Guard};
use crate::net::ui_logins::UiLogins;
use crate::net::{self, BindError, ServeLimits};

/// The relay's extension, as the control engine sees it.
#[derive(Debug)]
struct RelayTabs {
    relay: Relay,
    lent: std::sync::Arc<crate::lent::Lent>,
}

impl SharedTabs for RelayTabs {
    fn shared_tabs(&self) -> Option<usize> {
        let stats = self.relay.stats();
        stats.extension_connected.then_some(stats.targets)
    }

    fn connect(&self, grant: Option<&grants::Grant>) -> Result<cdp_client::Channels, ControlError> {
        let access = match grant {
            None => grants::Access::Person,
            // As the guard admits a grant's session: the grant as it is now,
            // not one that ended (revoked, or given again under its name).
            Some(grant) => match self.lent.now(grant) {
                Ok(live) => grants::Access::Grant(live),
                Err(GrantEnded::Expired) => {
                    return Err(ControlError::NotGranted(format!("the grant '{}' has expired", grant.name)));
                }
                Err(GrantEnded::Revoked) => {
                    return Err(ControlError::NotGranted(format!("the grant '{}' was revoked", grant.name)));
                }
            },
        };
        let label = relay_engine::ClientLabel::of(Some(cdp_client::USER_AGENT));
        let client = self
            .relay
            .connect_in_process(label, access)
            .map_err(|refusal| ControlError::TooManyClients(refusal.to_string()))?;
        Ok(cdp_client::Channels { outgoing: client.to_relay, incoming: client.from_relay })
    }

    fn not_in_front(&self, message: &str) -> Option<String> {
        relay_engine::not_in_front_reason(message).map(str::to_string)
    }

    fn hand_over(
        &self,
        target_id: String,
        grant: Option<std::sync::Arc<grants::Grant>>,
        reason: String,
        within: std::time::Duration,
    ) -> futures_util::future::BoxFuture<'static, Result<control_engine::api::HandoffEnded, String>> {
        let relay = self.relay.clone();
        Box::pin(async move {
            let ended =
                relay.hand_over(&target_id, grant.as_ref(), &reason, within).await.map_err(|e| e.to_string())?;
            Ok(match ended {
                relay_engine::HandoffEnd::Done => control_engine::api::HandoffEnded::Done,
                relay_engine::HandoffEnd::TimedOut => control_engine::api::HandoffEnded::TimedOut,
                relay_engine::HandoffEnd::TabClosed => control_engine::api::HandoffEnded::TabClosed,
            })
        })
    }

    fn ask_within(&self) -> std::time::Duration {
        self.relay.config().ask_within
    }
}

/// How the control engine reaches the relay: its shared tabs in process,
/// and its HTTP door at `addr` (for the endpoints shown in status).
fn relay_link(relay: &Relay, lent: &std::sync::Arc<crate::lent::Lent>, addr: SocketAddr) -> RelayLink {
    RelayLink {
        extension: std::sync::Arc::new(RelayTabs { relay: relay.clone(), lent: lent.clone() }),
        http_base: format!("http://{addr}"),
    }
}

/// Prunes the pages shown in old screenshots when their time is up, also
/// while nothing new is saved, until `stop`.
async fn sweep_media(engine: Engine, stop: CancellationToken) {
    loop {
        engine.prune_media();
        tokio::select! {
            () = stop.cancelled() => break,
            () = tokio::time::sleep(control_engine::MEDIA_SWEEP) => {}
        }
    }
}

#[derive(Debug, Clone)]
pub struct ServerOptions {
    pub addr: SocketAddr,
    /// `None` disables authentication (`--no-auth`).
    pub token: Option<Token>,
    /// The token the extension proves it was paired with: the same, kept
    /// with `--no-auth` too (CDP clients then need none; the extension
    /// still must prove the pairing, and the relay too).
    pub pairing: Option<Token>,
    pub extension_ids: Vec<String>,
    pub relay: RelayConfig,
    pub limits: ServeLimits,
    /// The state directory whose managed profiles are exposed under
    /// `/profiles/<name>/` (none: no profiles).
    pub state_root: Option<std::path::PathBuf>,
    /// Where the control API listens (none: no control API). It needs
    /// `state_root`.
    pub control_addr: Option<SocketAddr>,
    /// Keep the activity record (config.toml's `recordActivity`): under
    /// `state_root`, in memory without one.
    pub record_activity: bool,
}

impl ServerOptions {
    /// Holds the state folder as served until the server is dropped:
    /// `rotate` refuses meanwhile, whatever the ports (serving.rs).
    fn hold_serving(
        &self,
        addr: SocketAddr,
        control: Option<SocketAddr>,
    ) -> Result<Option<state_dir::ServingLock>, BindError> {
        let Some(root) = &self.state_root else { return Ok(None) };
        let where_ = match control {
            Some(control) => format!("relay on {addr}, control API on {control}"),
            None => format!("relay on {addr}"),
        };
        Ok(Some(state_dir::StateDir::at(root).hold_serving(&where_)?))
    }

    /// Where what clients and agents do is recorded: under the state
    /// directory (in memory without one), or nowhere when it is off.
    fn activity_record(&self) -> ActivityRecord {
        if self.record_activity {
            let dir = self.state_root.as_deref().map(|root| state_dir::StateDir::at(root).activity());
            ActivityRecord::new(dir, activity::DEFAULT_RETENTION)
        } else {
            ActivityRecord::off()
        }
    }

    pub fn new(addr: SocketAddr, token: Option<Token>) -> Self {
        Self {
            addr,
            pairing: token.clone(),
            token,
            extension_ids: vec![DEFAULT_EXTENSION_ID.to_string()],
            relay: RelayConfig::default(),
            limits: ServeLimits::default(),
            state_root: None,
            control_addr: None,
            record_activity: true,
        }
    }
}

/// A running relay server. Dropping it stops it.
#[derive(Debug)]
pub struct RunningServer {
    pub addr: SocketAddr,
    pub relay: Relay,
    /// The control API's address and engine, when it runs.
    pub control: Option<(SocketAddr, Engine)>,
    /// The managed browsers of this server's state directory (none: it
    /// serves no profiles): the routes, the engine and `stop_server` all
    /// hold this one.
    pub browsers: Option<ManagedBrowsers>,
    /// What clients and agents did (`GET /activity`, the dashboard).
    pub activity: ActivityRecord,
    /// The grants it honours.
    pub lent: std::sync::Arc<crate::lent::Lent>,
    /// The state folder's mark that this server runs from it.
    _serving: Option<state_dir::ServingLock>,
    shutdown: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
}

impl RunningServer {
    pub async fn start(options: ServerOptions) -> Result<Self, BindError> {
        let listener = net::bind_loopback(options.addr).await?;
        let addr = listener.local_addr().map_err(|error| BindError::Io { addr: options.addr, error })?;
        // Both listeners before anything serves: a port that is taken
        // leaves nothing running behind the error.
        let control_listener = match options.control_addr {
            Some(control_addr) if options.state_root.is_some() => Some(net::bind_loopback(control_addr).await?),
            _ => None,
        };
        let serving = options.hold_serving(addr, control_listener.as_ref().and_then(|l| l.local_addr().ok()))?;
        // What clients and agents do, recorded off the command path.
        let activity = options.activity_record();
        let pairing_codes = options.state_root.as_ref().map(|root| state_dir::StateDir::at(root).pairing_codes());
        let relay = Relay::new(options.relay, options.pairing.clone(), pairing_codes);
        let shutdown = CancellationToken::new();
        let mut tasks = Vec::new();
        if activity.is_on() {
            relay.record_activity_to(activity.clone());
            tasks.push(tokio::spawn(activity.clone().keep_writing(shutdown.clone())));
        }
        // Clients are handed the CDP key, never the secret (crate::keys).
        let cdp_key = options.token.as_ref().map(crate::keys::cdp_key);
        relay.set_public_base(PublicBase { addr, token: cdp_key });
        // The grants of the state directory: their keys open the doors
        // too, each to its own share (crate::lent).
        let book = options.state_root.as_ref().map(|root| grants::GrantBook::new(state_dir::StateDir::at(root)));
        let lent = crate::lent::Lent::new(options.token.clone(), book, relay.clone());
        tasks.push(tokio::spawn(lent.clone().watch_expiry(shutdown.clone())));
        let guard = Guard::new(options.token.clone(), options.extension_ids).with_grants(lent.clone());
        let browsers = options.state_root.as_deref().map(ManagedBrowsers::new);
        let router = crate::http::router(relay.clone(), guard, browsers.clone());
        tasks.push(tokio::spawn(net::serve(listener, router, options.limits.clone(), shutdown.clone())));

        let mut control = None;
        if let (Some(listener), Some(browsers)) = (control_listener, &browsers) {
            let bound = listener.local_addr().map_err(|error| BindError::Io { addr: options.addr, error })?;
            let link = relay_link(&relay, &lent, addr);
            // The control engine makes ephemeral profiles; a serve killed
            // before it could delete theirs left them behind.
            browsers.remove_abandoned_ephemeral().await;
            let engine = Engine::new(browsers.clone(), Some(link));
            // A grant that ends takes its agents' engine along.
            let forgetting = engine.clone();
            lent.on_end(move |name| forgetting.forget_lent(name));
            tasks.push(tokio::spawn(sweep_media(engine.clone(), shutdown.clone())));
            // The control API proves itself with the control key (derived
            // from the secret, which serve has even when clients need none:
            // --no-auth-control), never with the secret itself (keys.rs).
            let sessions = std::sync::Arc::new(
                crate::net::sessions::Sessions::new(options.pairing.as_ref().map(crate::keys::control_key))
                    .on_port(bound.port())
                    .with_grants(lent.clone()),
            );
            let dashboard = Dashboard {
                engine: engine.clone(),
                relay: relay.clone(),
                activity: activity.clone(),
                logins: std::sync::Arc::new(UiLogins::default()),
                addr: bound,
                lent: lent.clone(),
            };
            relay.set_dashboard_url(format!("http://{bound}/ui"));
            let extras =
                Extras { activity: Some(activity.clone()), dashboard: Some(dashboard), lent: Some(lent.clone()) };
            let guard = Guard::control(options.token, sessions).with_grants(lent.clone());
            let router = crate::control::http::router_with(engine.clone(), guard, extras);
            tasks.push(tokio::spawn(net::serve(listener, router, options.limits, shutdown.clone())));
            control = Some((bound, engine));
        }
        Ok(Self { addr, relay, control, browsers, activity, lent, _serving: serving, shutdown, tasks })
    }

    /// `http://127.0.0.1:PORT` of the control API, when it runs.
    pub fn control_url(&self) -> Option<String> {
        self.control.as_ref().map(|(addr, _)| format!("http://{addr}"))
    }

    /// `http://127.0.0.1:PORT/?token=…`, the URL for `connectOverCDP`.
    #[cfg(feature = "testing")]
    pub fn http_url(&self) -> String {
        self.relay.public_base().map(|b| b.http_url()).unwrap_or_default()
    }

    pub async fn stop(mut self) {
        self.shutdown.cancel();
        self.relay.shutdown();
        for task in self.tasks.drain(..) {
            let _ = task.await;
        }
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        self.shutdown.cancel();
        self.relay.shutdown();
        // Dropped without `stop`: its tasks end on their own time, maybe
        // after the state directory is gone (a test's folder is removed
        // next). The record writes what it has now, and nothing later.
        self.activity.close();
    }
}
