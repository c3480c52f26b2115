//! Browsers Browser Relay does not launch: a profile's `cdpUrl` (a farm
//! such as browserless, Browserbase or Steel, a Selenium Grid's `se:cdp`, a
//! browser on another machine) or `attachOnly` with `cdpPort`.
//!
//! **One connection per profile.** A serve holds at most one
//! WebSocket to each such browser, multiplexed as a pipe is
//! ([`Pipe::over`]): the control engine and every client of the relay's
//! `/profiles/<name>/` get a session of their own on it. One connection,
//! because a farm may start a browser for every connection it accepts (and
//! bill it): an agent's tools and a Playwright script must see the same
//! browser.
//!
//! **When.** It is opened on first use ([`ManagedBrowsers::remote`]: `start`,
//! a control route, a `/profiles/<name>/` request), one attempt at a time
//! per profile: the requests that came while it ran share its outcome, a
//! failure too (a farm that is down costs them one deadline, not one
//! each); after it dropped (the farm, the network), the next use opens
//! a new one; when config.toml changes how to reach the browser (its URL,
//! headers, CA file or deadlines), the next use replaces it. `stop` closes
//! it (a farm may end its browser then; Browser Relay never closes a
//! browser it did not launch).
//!
//! **Secrets.** The URL's credentials and query and the headers' values
//! are shown nowhere: errors and logs carry [`settings::redacted_url`], and
//! the headers are [`cdp_client::Secret`]s.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use cdp_client::endpoint::EndpointError;
use cdp_client::protocol::browser;
use cdp_client::{CdpError, Channels, Dial};

use crate::browsers::ManagedBrowsers;
use crate::error::ManagedError;
use crate::lock::lock;
use crate::pipe::Pipe;
use crate::remotes::{Arrival, Gate, Remote};
use settings::Profile;

impl ManagedBrowsers {
    /// The open connection to a remote profile's browser, when it is open
    /// and still reaches it as config.toml says.
    fn open_remote(&self, profile: &Profile, reach: &(String, Dial)) -> Option<Arc<Pipe>> {
        let remotes = lock(&self.held.remotes.open);
        let remote = remotes.get(&profile.name)?;
        (!remote.pipe.is_closed() && &remote.reach == reach).then(|| remote.pipe.clone())
    }

    /// When a request for the profile `name` comes: see [`Arrival`]. Adds
    /// no gate (a profile never connected to has had no attempt: 0), so
    /// the many profiles that are not remote leave nothing behind.
    pub fn arrival(&self, name: &str) -> Arrival {
        Arrival(lock(&self.held.remotes.gates).get(name).map_or(0, |gate| gate.finished.load(Ordering::Acquire)))
    }

    /// The connection to the browser of `profile` (one that Browser Relay
    /// does not launch): the open one, or a new one.
    pub async fn remote(&self, profile: &Profile) -> Result<Arc<Pipe>, ManagedError> {
        self.remote_as_of(profile, self.arrival(&profile.name)).await
    }

    /// [`Self::remote`] for a request that came at `arrived`. One that
    /// waited for another's attempt takes its outcome: the connection it
    /// opened, or its failure (then the next request tries again).
    pub(crate) async fn remote_as_of(&self, profile: &Profile, arrived: Arrival) -> Result<Arc<Pipe>, ManagedError> {
        let Some(url) = profile.remote_url() else {
            return Err(ManagedError::ExtensionProfile(profile.name.clone()));
        };
        let reach = (url, profile.dial());
        if let Some(pipe) = self.open_remote(profile, &reach) {
            return Ok(pipe);
        }
        let unreachable = |source| ManagedError::AttachUnreachable {
            profile: profile.name.clone(),
            url: settings::redacted_url(&reach.0),
            port_only: profile.cdp_url.is_none(),
            source,
        };
        let gate = self.gate(&profile.name);
        let mut last = gate.last.lock().await;
        // Another request may have connected while this one waited.
        if let Some(pipe) = self.open_remote(profile, &reach) {
            return Ok(pipe);
        }
        if gate.finished.load(Ordering::Acquire) != arrived.0
            && let Some((tried, error)) = &last.failed
            && *tried == reach
        {
            return Err(unreachable(error.clone()));
        }
        let outcome = self.connect_remote(profile, &reach).await;
        last.failed = outcome.as_ref().err().map(|error| (reach.clone(), error.clone()));
        // Counted before the lock is let go: whoever takes it next and came
        // while this attempt ran sees that it ended.
        gate.finished.fetch_add(1, Ordering::AcqRel);
        outcome.map_err(unreachable)
    }

    /// One attempt to reach the browser as `reach` says; registered as the
    /// profile's open connection when it answers as a browser.
    async fn connect_remote(&self, profile: &Profile, reach: &(String, Dial)) -> Result<Arc<Pipe>, EndpointError> {
        let (url, dial) = reach;
        let ws = cdp_client::endpoint::browser_ws_url_with(url, dial).await?;
        let socket = Channels::connect(&ws, &cdp_client::endpoint::dial_for(&ws, url, dial)).await?;
        let pipe = Pipe::over(socket);
        // What answers is a browser, and its target's id (for
        // `/devtools/browser/<id>`).
        let shown = settings::redacted_url(&ws);
        let first_answer = |error: CdpError| match error {
            CdpError::Timeout(..) => EndpointError::HandshakeTimeout {
                url: shown.clone(),
                stage: "first CDP answer (Browser.getVersion)",
                within: dial.handshake_within,
            },
            other => EndpointError::Handshake { url: shown.clone(), reason: other.to_string() },
        };
        let browser_id = match pipe.probe(dial.handshake_within).await {
            Ok((_, browser_id)) => browser_id.unwrap_or_else(|| "remote".into()),
            Err(error) => {
                pipe.close();
                return Err(first_answer(error));
            }
        };
        tracing::info!(profile = %profile.name, endpoint = %shown, "connected to the remote browser");
        let previous = lock(&self.held.remotes.open)
            .insert(profile.name.clone(), Remote { reach: reach.clone(), pipe: pipe.clone(), browser_id });
        if let Some(previous) = previous {
            previous.pipe.close();
        }
        tokio::spawn(watch_liveness(Arc::downgrade(&pipe), profile.name.clone(), dial.handshake_within));
        Ok(pipe)
    }

    /// What lets one connection attempt at a time run for `name`.
    fn gate(&self, name: &str) -> Arc<Gate> {
        lock(&self.held.remotes.gates).entry(name.to_string()).or_default().clone()
    }

    /// Whether this process has an open connection to the profile's
    /// (remote) browser.
    pub fn remote_connected(&self, name: &str) -> bool {
        lock(&self.held.remotes.open).get(name).is_some_and(|r| !r.pipe.is_closed())
    }

    /// The remote browser's target id, while connected.
    pub fn remote_browser_id(&self, name: &str) -> Option<String> {
        lock(&self.held.remotes.open).get(name).filter(|r| !r.pipe.is_closed()).map(|r| r.browser_id.clone())
    }

    /// Closes the open connection of `profile` to a remote browser when
    /// config.toml no longer reaches it that way (the `cdpUrl`, its
    /// headers or deadlines were edited, or the profile is not remote any
    /// more); whether it did. The next request connects as config.toml says.
    pub async fn drop_outdated_remote(&self, profile: &Profile) -> bool {
        let outdated = self.remote_connected(&profile.name)
            && profile.remote_url().is_none_or(|url| self.open_remote(profile, &(url, profile.dial())).is_none());
        if outdated {
            tracing::info!(profile = %profile.name, "config.toml reaches the remote browser another way now");
            self.disconnect_remote(&profile.name).await;
        }
        outdated
    }

    /// Closes the connection to the profile's remote browser, if open,
    /// after an attempt under way has finished (else it would open one
    /// after `stop` returned, and a farm may bill it).
    pub(crate) async fn disconnect_remote(&self, name: &str) {
        let gate = self.gate(name);
        let _connecting = gate.last.lock().await;
        let remote = lock(&self.held.remotes.open).remove(name);
        if let Some(remote) = remote {
            remote.pipe.close();
            tracing::info!(profile = %name, "closed the connection to the remote browser");
        }
    }

    /// Closes every remote connection of this serve.
    pub(crate) async fn disconnect_remotes(&self) {
        let names: Vec<String> = lock(&self.held.remotes.open).keys().cloned().collect();
        for name in names {
            self.disconnect_remote(&name).await;
        }
    }
}

/// Asks the remote browser for its version every five handshake deadlines
/// (15 s by default, at least a second) and closes the connection when no
/// answer comes within one. A network that drops silently (a NAT timeout, a farm host
/// gone) sends no FIN: without this the next requests would wait on a dead
/// socket for minutes; with it, the next request connects again.
async fn watch_liveness(pipe: std::sync::Weak<Pipe>, profile: String, within: Duration) {
    let every = (within * 5).max(Duration::from_secs(1));
    loop {
        tokio::time::sleep(every).await;
        let Some(pipe) = pipe.upgrade() else { return };
        if pipe.is_closed() {
            return;
        }
        if let Err(error) = pipe.send(&browser::GetVersion {}, within).await {
            tracing::warn!(profile = %profile, %error, "the remote browser stopped answering: closing its connection");
            pipe.close();
            return;
        }
    }
}
