//! Why an endpoint could not be reached: the error of every module that
//! reaches one (`net`, `http`, `endpoint`, `client`), below them all.

use std::time::Duration;

/// Why an endpoint gave no browser, or no connection. URLs in it are
/// redacted ([`crate::redact`]); header values are never in it.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum EndpointError {
    #[error("{url} is not a usable CDP endpoint: {reason}")]
    BadUrl { url: String, reason: String },
    #[error("nothing answers at {url}: {reason}")]
    Unreachable { url: String, reason: String },
    #[error("no TCP connection to {url} within {} ms", within.as_millis())]
    ConnectTimeout { url: String, within: Duration },
    /// `untrusted`: the certificate's issuer is not among the roots.
    #[error("TLS with {url} failed: {reason}")]
    Tls { url: String, reason: String, untrusted: bool },
    #[error("cannot use the CA file {}: {reason}", path.display())]
    CaFile { path: std::path::PathBuf, reason: String },
    #[error(
        "no trusted root certificate to check TLS with ({reason}): install the system's CA certificates (Debian: ca-certificates)"
    )]
    NoRoots { reason: String },
    #[error("{url} did not complete its {stage} within {} ms", within.as_millis())]
    HandshakeTimeout { url: String, stage: &'static str, within: Duration },
    #[error("{url} answered {status}{}", status_hint(*status))]
    Status { url: String, status: u16 },
    #[error("{url} is not a browser's /json/version document")]
    NotAVersionDocument { url: String },
    #[error("{url} refused the WebSocket: {reason}")]
    Handshake { url: String, reason: String },
}

fn status_hint(status: u16) -> &'static str {
    match status {
        401 | 403 => " (refused: are the credentials right?)",
        404 => " (no such endpoint)",
        _ => "",
    }
}

impl EndpointError {
    /// Whether a deadline passed (as opposed to a refusal).
    pub fn is_timeout(&self) -> bool {
        matches!(self, Self::ConnectTimeout { .. } | Self::HandshakeTimeout { .. })
    }
}
