//! Why the managed driver cannot do what was asked: [`ManagedError`], and
//! what it tells the user to change.

use std::path::PathBuf;

use cdp_client::CdpError;
use cdp_client::endpoint::EndpointError;

use crate::discovery::DiscoveryError;

#[derive(Debug, thiserror::Error)]
pub enum ManagedError {
    #[error(transparent)]
    Discovery(#[from] DiscoveryError),
    #[error(
        "profile '{0}' uses your own Chrome through the extension: there is nothing to launch; click the Browser Relay icon on a tab to share it"
    )]
    ExtensionProfile(String),
    /// A browser Browser Relay does not launch (a `cdpUrl`, or
    /// `attachOnly` with `cdpPort`) cannot be reached. `url` is redacted;
    /// `port_only`: the profile names a local port, no URL.
    #[error("cannot reach the browser of profile '{profile}' at {url}: {source}{}", hint(source, *port_only))]
    AttachUnreachable { profile: String, url: String, port_only: bool, source: EndpointError },
    #[error("cannot prepare the profile directory {path}: {source}")]
    Profile { path: PathBuf, source: std::io::Error },
    #[error("cannot launch {executable}: {source}")]
    Spawn { executable: PathBuf, source: std::io::Error },
    #[error("the browser did not become ready within {secs} s ({why}); its last output:\n{stderr}")]
    NotReady { secs: u64, why: String, stderr: String },
    #[error("profile '{0}' is not running: `browser-relay start --profile {0}`")]
    NotRunning(String),
    #[error(
        "profile '{profile}' runs under another Browser Relay process (pid {owner}): use that one, or stop it first"
    )]
    OwnedElsewhere { profile: String, owner: u32 },
    #[error("the managed browser of profile '{profile}': {source}")]
    Cdp { profile: String, source: CdpError },
    #[error(
        "{max} managed browsers already run from this serve, its limit (maxManagedBrowsers in config.toml): {}; stop one of them first",
        running.join(", ")
    )]
    TooManyBrowsers { max: usize, running: Vec<String> },
}

/// What to change when a remote browser cannot be reached, by why.
pub(crate) fn hint(source: &EndpointError, port_only: bool) -> &'static str {
    match source {
        EndpointError::ConnectTimeout { .. } => {
            "; is the address right? (on a slow network, raise remoteCdpTimeoutMs in config.toml)"
        }
        EndpointError::HandshakeTimeout { .. } => {
            "; it accepts connections but does not answer: is it a CDP endpoint? (a slow farm: raise remoteCdpHandshakeTimeoutMs in config.toml)"
        }
        EndpointError::Tls { untrusted: true, .. } => {
            "; if the endpoint's certificate comes from a private CA, set the profile's cdpCaFile to that CA's certificate (PEM)"
        }
        EndpointError::Status { status: 401 | 403, .. } => {
            "; check the profile's cdpHeaders (Authorization) or the token in its cdpUrl"
        }
        EndpointError::Unreachable { .. } if port_only => {
            "; start that browser yourself with --remote-debugging-port (Browser Relay never launches an attach-only profile)"
        }
        _ => "",
    }
}
