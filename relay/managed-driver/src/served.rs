//! What the relay's `/profiles/<name>/` routes ask of a managed profile's
//! browser, typed: which profile a name is, the connection its clients
//! share, and Chrome's `/json/*` answers from the browser itself (it has no
//! HTTP endpoint). The routes only turn these into responses.

use std::sync::Arc;
use std::time::Duration;

use cdp_client::CdpError;
use cdp_client::protocol::{browser, target};
use tokio::sync::mpsc;

use crate::browsers::ManagedBrowsers;
use crate::error::ManagedError;
use crate::pipe::{Endpoint, Pipe, PipeClient};
use settings::{ConfigError, Driver, Profile};

/// How long a browser-level call of a route may take.
const ROUTE_CALL_WITHIN: Duration = Duration::from_secs(10);

/// Why a profile's browser cannot answer a route.
#[derive(Debug, thiserror::Error)]
pub enum ServedError {
    /// config.toml cannot be read.
    #[error(transparent)]
    Config(ConfigError),
    /// No profile of that name (config.toml's error, which lists them: the
    /// routes that need the token may say so).
    #[error(transparent)]
    UnknownProfile(ConfigError),
    #[error("profile '{0}' is your own Chrome: its endpoint is the relay's root")]
    OwnChrome(String),
    /// Not running, owned by another process, or unreachable.
    #[error(transparent)]
    Managed(ManagedError),
    /// The browser refused the call (Chrome's error: an unknown target).
    #[error("{0}")]
    Refused(String),
    #[error("the browser of profile '{profile}': {source}")]
    Browser { profile: String, source: CdpError },
}

impl ManagedBrowsers {
    /// The managed profile `name` (config.toml's or an ephemeral one of
    /// this serve), or why it is not one.
    pub fn served_profile(&self, name: &str) -> Result<Profile, ServedError> {
        let config = self.config().map_err(ServedError::Config)?;
        let profile = config.profile(Some(name)).map_err(ServedError::UnknownProfile)?;
        match profile.driver {
            Driver::Managed => Ok(profile.clone()),
            Driver::Extension => Err(ServedError::OwnChrome(name.to_string())),
        }
    }

    /// Whether `name` is a managed profile here, from config.toml alone:
    /// what a public route may ask (it opens nothing, names nothing).
    pub fn serves(&self, name: &str) -> bool {
        self.served_profile(name).is_ok()
    }

    /// The connection every client of the profile's browser shares (see
    /// [`Self::pipe_for`]).
    pub async fn served_pipe(&self, name: &str) -> Result<Arc<Pipe>, ServedError> {
        let profile = self.served_profile(name)?;
        self.pipe_for(&profile).await.map_err(ServedError::Managed)
    }

    /// A client's own session on the profile's browser: browser-level or
    /// one target. Its commands go by [`PipeClient::send`] on the
    /// caller's task; answers and events come on the receiver.
    pub async fn served_client(
        &self,
        name: &str,
        endpoint: Endpoint,
    ) -> Result<(PipeClient, mpsc::UnboundedReceiver<String>), ServedError> {
        let pipe = self.served_pipe(name).await?;
        pipe.attach(endpoint).await.map_err(|source| refused_or(name, source))
    }

    /// `Browser.getVersion`, and the browser target's id.
    pub async fn served_version(&self, name: &str) -> Result<(browser::Version, String), ServedError> {
        let pipe = self.served_pipe(name).await?;
        let version = pipe.send(&browser::GetVersion {}, ROUTE_CALL_WITHIN).await.map_err(|e| refused_or(name, e))?;
        let browser_id =
            self.record(name).map(|r| r.browser_id).or_else(|| self.remote_browser_id(name)).unwrap_or_default();
        Ok((version, browser_id))
    }

    /// Every target of the profile's browser.
    pub async fn served_targets(&self, name: &str) -> Result<Vec<target::TargetInfo>, ServedError> {
        let pipe = self.served_pipe(name).await?;
        let targets = pipe.send(&target::GetTargets {}, ROUTE_CALL_WITHIN).await.map_err(|e| refused_or(name, e))?;
        Ok(targets.target_infos)
    }

    /// A new tab at `url`, as the browser describes it.
    pub async fn served_new_tab(&self, name: &str, url: &str) -> Result<target::TargetInfo, ServedError> {
        let pipe = self.served_pipe(name).await?;
        let call = |e| refused_or(name, e);
        let created =
            pipe.send(&target::CreateTarget { url: url.to_string() }, ROUTE_CALL_WITHIN).await.map_err(call)?;
        let info = target::GetTargetInfo { target_id: Some(created.target_id) };
        Ok(pipe.send(&info, ROUTE_CALL_WITHIN).await.map_err(call)?.target_info)
    }

    /// Brings the target to the front.
    pub async fn served_activate(&self, name: &str, target_id: &str) -> Result<(), ServedError> {
        let pipe = self.served_pipe(name).await?;
        let activate = target::ActivateTarget { target_id: target_id.to_string() };
        pipe.send(&activate, ROUTE_CALL_WITHIN).await.map(drop).map_err(|e| refused_or(name, e))
    }

    /// Closes the target.
    pub async fn served_close(&self, name: &str, target_id: &str) -> Result<(), ServedError> {
        let pipe = self.served_pipe(name).await?;
        let close = target::CloseTarget { target_id: target_id.to_string() };
        pipe.send(&close, ROUTE_CALL_WITHIN).await.map(drop).map_err(|e| refused_or(name, e))
    }
}

/// Chrome's refusal as itself; anything else as the browser's failure.
fn refused_or(profile: &str, source: CdpError) -> ServedError {
    match source {
        CdpError::Protocol { message, .. } => ServedError::Refused(message),
        source => ServedError::Browser { profile: profile.to_string(), source },
    }
}

/// Where a client connects for `profile`, through the relay at
/// `relay_base` (`http://127.0.0.1:PORT`; without the token:
/// `browser-relay cdp-url` prints it with): the relay itself for the
/// extension driver, `/profiles/<name>/` for every managed profile, a
/// remote one included (the relay holds its secrets and its one
/// connection).
pub fn cdp_endpoint(relay_base: &str, profile: &Profile) -> String {
    match profile.driver {
        settings::Driver::Extension => format!("{relay_base}/"),
        settings::Driver::Managed => format!("{relay_base}/profiles/{}/", profile.name),
    }
}
