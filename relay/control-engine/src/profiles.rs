//! Profiles and their browsers: `GET /`, `GET /profiles`, `POST /start`,
//! `POST /stop`; ephemeral profiles (`POST /start {"profile": "tmp",
//! "ephemeral": true}`), which the managed driver keeps for this process
//! and [`Engine::config`] adds to config.toml's.

use managed_driver::{BrowserStatus, State, cdp_endpoint};
use settings::{Config, Driver, Profile};

use crate::api::{
    GetStatus, Handle, ListProfiles, ProfileList, ProfileStatus, Selected, ServiceStatus, StartBrowser, Status,
    StopBrowser,
};
use crate::engine::{Engine, RelayLink};
use crate::error::ControlError;

/// The CLI command that prints a profile's endpoint with the token.
fn cdp_url_command(profile: &Profile) -> String {
    format!("browser-relay cdp-url --profile {}", profile.name)
}

impl Handle<GetStatus> for Engine {
    /// Every profile, or the one named.
    async fn handle(&self, request: Selected<GetStatus>) -> Result<Status, ControlError> {
        let config = self.config()?;
        let default = self.default_name(&config);
        if let Some(name) = request.tab.profile() {
            let profile = config.profile(Some(name))?;
            return Ok(Status::One(self.profile_status(profile, profile.name == default).await));
        }
        let mut profiles = Vec::new();
        for profile in config.profiles.values() {
            profiles.push(self.profile_status(profile, profile.name == default).await);
        }
        Ok(Status::All(ServiceStatus {
            service: "browser-relay control API".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            profiles,
        }))
    }
}

impl Handle<ListProfiles> for Engine {
    async fn handle(&self, _: Selected<ListProfiles>) -> Result<ProfileList, ControlError> {
        let config = self.config()?;
        Ok(ProfileList { default_profile: config.default_profile, profiles: config.profiles.into_values().collect() })
    }
}

impl Handle<StartBrowser> for Engine {
    /// Launches a managed browser (a no-op when it runs), or checks that the
    /// extension shares a tab; with `ephemeral`, first makes the profile.
    async fn handle(&self, request: Selected<StartBrowser>) -> Result<ProfileStatus, ControlError> {
        let config = self.config()?;
        let profile = match request.request.ephemeral {
            true => ephemeral_profile(&config, request.tab.profile())?,
            false => self.profile(request.tab.profile()).await?,
        };
        match profile.driver {
            Driver::Extension => {
                self.extension_ready()?;
                self.conn(&profile).await?;
            }
            Driver::Managed => {
                self.launch(&config, &profile).await?;
                self.conn(&profile).await?;
            }
        }
        Ok(self.profile_status(&profile, profile.name == self.default_name(&config)).await)
    }
}

impl Handle<StopBrowser> for Engine {
    /// Stops a managed browser (the user's own Chrome is never stopped).
    async fn handle(&self, request: Selected<StopBrowser>) -> Result<ProfileStatus, ControlError> {
        let config = self.config()?;
        // Under `auto`, the one browser `stop` can mean is the managed one.
        let profile = match request.tab.profile() {
            None if config.default_is_auto() => config.auto_profile(false)?.clone(),
            name => config.profile(name)?.clone(),
        };
        if profile.driver == Driver::Extension {
            return Err(ControlError::BadRequest(format!(
                "profile '{}' is your own Chrome: Browser Relay never stops it (click the Browser Relay icon on a tab to stop sharing it)",
                profile.name
            )));
        }
        self.disconnect(&profile.name).await;
        self.0.browsers.stop(&profile).await?;
        if profile.ephemeral {
            // A later profile of that name is another browser.
            self.forget_current(&profile.name);
        }
        Ok(self.profile_status(&profile, profile.name == self.default_name(&config)).await)
    }
}

/// The ephemeral profile a start names: the running one of that name, else a
/// new one with the default settings. Not a name of config.toml's
/// ([`ControlError::ProfileExists`] says why).
fn ephemeral_profile(config: &Config, name: Option<&str>) -> Result<Profile, ControlError> {
    let name = name.ok_or_else(|| {
        ControlError::BadRequest(
            "ephemeral: name the profile (\"profile\": \"tmp\"); it lives until it is stopped".into(),
        )
    })?;
    match config.profiles.get(name) {
        Some(existing) if existing.ephemeral => Ok(existing.clone()),
        Some(_) => Err(ControlError::ProfileExists(name.to_string())),
        None => Profile::ephemeral(name).map_err(ControlError::BadRequest),
    }
}

impl Engine {
    async fn profile_status(&self, profile: &Profile, default: bool) -> ProfileStatus {
        let live = self.live_conn(&profile.name);
        let tabs = live.as_ref().map(|c| c.tabs(None).len());
        let mut status = ProfileStatus {
            profile: profile.name.clone(),
            driver: profile.driver,
            color: profile.color.clone(),
            default,
            ephemeral: profile.ephemeral,
            running: false,
            connected: live.is_some(),
            state: String::new(),
            tabs,
            cdp_endpoint: None,
            cdp_url_command: None,
            detail: String::new(),
        };
        match profile.driver {
            Driver::Extension => {
                let Some(link) = &self.0.relay else {
                    status.state = "unavailable".into();
                    status.detail = "this process runs no relay".into();
                    return status;
                };
                let shared = link.shared_tabs();
                status.running = shared.is_some();
                status.state = if status.running { "connected" } else { "disconnected" }.into();
                status.tabs = Some(shared.unwrap_or(0));
                status.detail = match shared {
                    None => "the extension is not connected".into(),
                    Some(0) => "no tab is shared: click the Browser Relay icon on a tab".into(),
                    Some(n) => format!("{n} shared tab(s)"),
                };
                status.cdp_endpoint = Some(cdp_endpoint(&link.http_base, profile));
                status.cdp_url_command = Some(cdp_url_command(profile));
            }
            Driver::Managed => {
                let browser: BrowserStatus = self.0.browsers.status(profile);
                status.running = matches!(browser.state, State::Running | State::External);
                status.state = serde_json::to_value(browser.state)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default();
                status.detail = browser.detail;
                // No relay in this process: no endpoint (a launched browser
                // speaks over a pipe; a remote one's address holds secrets).
                if let Some(link) = &self.0.relay {
                    status.cdp_endpoint = Some(cdp_endpoint(&link.http_base, profile));
                    status.cdp_url_command = Some(cdp_url_command(profile));
                }
            }
        }
        status
    }

    /// The relay link, when the extension is connected and shares a tab.
    fn extension_ready(&self) -> Result<&RelayLink, ControlError> {
        let link = self.0.relay.as_ref().ok_or(ControlError::NoExtension)?;
        match link.shared_tabs() {
            None => Err(ControlError::NoExtension),
            Some(0) => Err(ControlError::NoSharedTab),
            Some(_) => Ok(link),
        }
    }
}
