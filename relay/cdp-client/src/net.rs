//! Reaching an endpoint over the network, the same way for a browser's
//! `/json/version` and for its WebSocket: TCP within one deadline, then TLS
//! (`https://`, `wss://`) and the HTTP exchange or WebSocket upgrade within
//! another ([`Dial`]). TLS is rustls with the system's roots
//! (`rustls-native-certs`, which honours `SSL_CERT_FILE` and `SSL_CERT_DIR`)
//! plus an optional CA file. The headers a remote endpoint wants
//! (`Authorization`) are [`Secret`]s: nothing here prints them.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use rustls::RootCertStore;
use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::{CertificateDer, ServerName};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_util::either::Either;

use crate::endpoint_error::EndpointError;

/// How long a TCP connection to a remote endpoint may take unless the
/// caller says otherwise (the seed's `remoteCdpTimeoutMs`).
pub const CONNECT_WITHIN: Duration = Duration::from_millis(1500);
/// How long the TLS handshake and the HTTP answer or WebSocket upgrade may
/// take once connected (the seed's `remoteCdpHandshakeTimeoutMs`).
pub const HANDSHAKE_WITHIN: Duration = Duration::from_millis(3000);

/// A value that must never be shown: a farm's `Authorization` header. Its
/// `Debug` prints `***`; it has no `Display` and no `Serialize`, so it
/// cannot reach an answer or a log by accident. [`Secret::expose`] is the
/// one way to read it, for the request that sends it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The value, to put on the wire.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

/// Read from a config file as a plain string (there is no way back out:
/// no `Serialize`).
impl<'de> serde::Deserialize<'de> for Secret {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(Self)
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(***)")
    }
}

/// How to reach an endpoint: the headers sent with every request and
/// WebSocket upgrade, more roots to trust, and the two deadlines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dial {
    /// Header names and their secret values (a farm's `Authorization`).
    pub headers: Vec<(String, Secret)>,
    /// A PEM file of CA certificates trusted besides the system's.
    pub ca_file: Option<PathBuf>,
    /// The TCP connection (name resolution included).
    pub connect_within: Duration,
    /// Everything after it: TLS, then the HTTP answer's head or the
    /// WebSocket upgrade.
    pub handshake_within: Duration,
}

impl Default for Dial {
    fn default() -> Self {
        Self { headers: Vec::new(), ca_file: None, connect_within: CONNECT_WITHIN, handshake_within: HANDSHAKE_WITHIN }
    }
}

impl Dial {
    /// No deadlines: a loopback peer that may hold an upgrade on purpose
    /// (the relay's `/cdp` waits for its extension before it answers).
    #[cfg(any(test, feature = "testing"))]
    pub fn patient() -> Self {
        Self { connect_within: Duration::MAX, handshake_within: Duration::MAX, ..Self::default() }
    }
}

/// A connection, with TLS or without.
pub(crate) type Stream = Either<TcpStream, tokio_rustls::client::TlsStream<TcpStream>>;

/// `within` from now, or a year when that overflows (no deadline).
pub(crate) fn deadline(within: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(within).unwrap_or_else(|| now + Duration::from_secs(365 * 24 * 3600))
}

/// Opens a connection to `url`'s host: TCP within `dial.connect_within`,
/// then TLS for `https` and `wss`. The deadline the rest of the exchange
/// must keep (the handshake's, which TLS has already used a part of).
/// `shown` names the endpoint in errors (a redacted URL).
pub(crate) async fn open(url: &url::Url, dial: &Dial, shown: &str) -> Result<(Stream, Instant), EndpointError> {
    let tls = match url.scheme() {
        "https" | "wss" => true,
        "http" | "ws" => false,
        other => {
            return Err(EndpointError::BadUrl {
                url: shown.into(),
                reason: format!("{other}:// is not http(s):// or ws(s)://"),
            });
        }
    };
    let host = url
        .host_str()
        .ok_or_else(|| EndpointError::BadUrl { url: shown.into(), reason: "no host".into() })?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let port = url.port_or_known_default().unwrap_or(if tls { 443 } else { 80 });
    // The roots are checked before any connection: a missing CA file is the
    // user's to fix, whatever the network does.
    let config = if tls { Some(client_config(dial.ca_file.as_deref())?) } else { None };
    let tcp = tokio::time::timeout_at(deadline(dial.connect_within), TcpStream::connect((host.as_str(), port)))
        .await
        .map_err(|_| EndpointError::ConnectTimeout { url: shown.into(), within: dial.connect_within })?
        .map_err(|e| EndpointError::Unreachable { url: shown.into(), reason: e.to_string() })?;
    let _ = tcp.set_nodelay(true);
    let handshake_by = deadline(dial.handshake_within);
    let Some(config) = config else { return Ok((Either::Left(tcp), handshake_by)) };
    let name = ServerName::try_from(host.clone())
        .map_err(|e| EndpointError::BadUrl { url: shown.into(), reason: format!("host {host}: {e}") })?;
    let tls = tokio::time::timeout_at(handshake_by, tokio_rustls::TlsConnector::from(config).connect(name, tcp))
        .await
        .map_err(|_| EndpointError::HandshakeTimeout {
            url: shown.into(),
            stage: "TLS handshake",
            within: dial.handshake_within,
        })?
        .map_err(|e| tls_error(shown, &e))?;
    Ok((Either::Right(tls), handshake_by))
}

/// A failed TLS handshake, said so that the user knows what to change.
fn tls_error(shown: &str, error: &std::io::Error) -> EndpointError {
    use rustls::{CertificateError, Error};
    let rustls = error.get_ref().and_then(|e| e.downcast_ref::<Error>());
    let (reason, untrusted) = match rustls {
        Some(Error::InvalidCertificate(CertificateError::UnknownIssuer)) => {
            ("its certificate is not signed by a CA this system trusts (UnknownIssuer)".to_string(), true)
        }
        Some(Error::InvalidCertificate(
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
        )) => ("its certificate is for another host name (NotValidForName)".to_string(), false),
        Some(Error::InvalidCertificate(CertificateError::Expired | CertificateError::ExpiredContext { .. })) => {
            ("its certificate has expired".to_string(), false)
        }
        Some(other) => (other.to_string(), false),
        None => (error.to_string(), false),
    };
    EndpointError::Tls { url: shown.into(), reason, untrusted }
}

/// The system's roots, read once per process (they rarely change, and
/// reading them takes a few milliseconds); what went wrong reading them.
fn native_roots() -> &'static (RootCertStore, String) {
    static ROOTS: OnceLock<(RootCertStore, String)> = OnceLock::new();
    ROOTS.get_or_init(|| {
        let found = rustls_native_certs::load_native_certs();
        let mut roots = RootCertStore::empty();
        roots.add_parsable_certificates(found.certs);
        let errors = found.errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ");
        (roots, errors)
    })
}

/// The TLS client configuration: the system's roots and those of
/// `ca_file`, HTTP/1.1 only (both the WebSocket upgrade and `/json/*` need
/// it).
fn client_config(ca_file: Option<&Path>) -> Result<Arc<rustls::ClientConfig>, EndpointError> {
    let (native, native_errors) = native_roots();
    let mut roots = native.clone();
    if let Some(path) = ca_file {
        let ca_error = |reason: String| EndpointError::CaFile { path: path.to_path_buf(), reason };
        let certs = CertificateDer::pem_file_iter(path)
            .map_err(|e| ca_error(e.to_string()))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| ca_error(e.to_string()))?;
        if certs.is_empty() {
            return Err(ca_error("it holds no PEM certificate (-----BEGIN CERTIFICATE-----)".into()));
        }
        for cert in certs {
            roots.add(cert).map_err(|e| ca_error(e.to_string()))?;
        }
    }
    if roots.is_empty() {
        let why = if native_errors.is_empty() { "none found".to_string() } else { native_errors.clone() };
        return Err(EndpointError::NoRoots { reason: why });
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| EndpointError::NoRoots { reason: e.to_string() })?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_never_show() {
        let dial = Dial { headers: vec![("Authorization".into(), Secret::new("Bearer sekrit"))], ..Dial::default() };
        let shown = format!("{dial:?}");
        assert!(!shown.contains("sekrit") && shown.contains("Authorization") && shown.contains("***"), "{shown}");
    }

    #[tokio::test]
    async fn a_missing_or_empty_ca_file_is_named() {
        let url = url::Url::parse("wss://127.0.0.1:1/").unwrap();
        let dial = Dial { ca_file: Some("/nonexistent/ca.pem".into()), ..Dial::default() };
        let error = open(&url, &dial, "wss://127.0.0.1:1/").await.unwrap_err().to_string();
        assert!(error.contains("/nonexistent/ca.pem"), "{error}");
        let empty = std::env::temp_dir().join(format!("farm-empty-ca-{}.pem", std::process::id()));
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let dial = Dial { ca_file: Some(empty.clone()), ..Dial::default() };
        let error = open(&url, &dial, "wss://127.0.0.1:1/").await.unwrap_err().to_string();
        let _ = std::fs::remove_file(&empty);
        assert!(error.contains("no PEM certificate"), "{error}");
    }

    #[tokio::test]
    async fn a_silent_listener_is_a_handshake_timeout_in_time() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = url::Url::parse(&format!("https://{}/", listener.local_addr().unwrap())).unwrap();
        let dial = Dial { handshake_within: Duration::from_millis(200), ..Dial::default() };
        let started = std::time::Instant::now();
        let error = open(&url, &dial, url.as_str()).await.unwrap_err();
        assert!(matches!(error, EndpointError::HandshakeTimeout { stage: "TLS handshake", .. }), "{error}");
        assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
        assert!(error.to_string().contains("within 200 ms"), "{error}");
    }
}
