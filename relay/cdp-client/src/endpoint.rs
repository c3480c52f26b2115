//! A CDP endpoint as users write it, and the one way to turn it into a
//! browser WebSocket URL:
//!
//! - `ws://` and `wss://` are the browser's WebSocket itself, used as
//!   written: Chrome's `/devtools/browser/<id>`, a farm's root
//!   (`wss://farm.example?token=…`), Selenium Grid's `…/session/<id>/se/cdp`.
//!   Nothing else is asked of them (a Grid serves no `/json/version`, and a
//!   farm may start a browser for every connection).
//! - `http://` and `https://` are a debugging endpoint: its
//!   `/json/version`'s `webSocketDebuggerUrl` is the browser, normalised by
//!   [`normalize_ws_url`] (a farm's document often names the address the
//!   browser sees, not the one the user reaches). An endpoint without
//!   `/json/version` is an error that says to write the WebSocket URL
//!   instead: guessing would open a second connection, and a farm may bill
//!   it as a browser session.

use serde_json::Value;

pub use crate::endpoint_error::EndpointError;
use crate::net::Dial;

/// The `/json/version` URL of an endpoint. For `http://host:port/prefix?q`
/// it is `http://host:port/prefix/json/version?q` (a proxy may serve the
/// browser under a path and want its query); for a `ws://` browser URL, the
/// authority's root.
pub fn version_url(endpoint: &str) -> String {
    match url::Url::parse(endpoint) {
        Ok(mut url) if matches!(url.scheme(), "http" | "https") => {
            let path = format!("{}/json/version", url.path().trim_end_matches('/'));
            url.set_path(&path);
            url.to_string()
        }
        _ => {
            let authority =
                endpoint.split_once("://").map_or(endpoint, |(_, rest)| rest).split(['/', '?']).next().unwrap_or("");
            format!("http://{authority}/json/version")
        }
    }
}

/// Fetches an endpoint's `/json/version` document, dialled as `dial` says.
pub async fn json_version_with(endpoint: &str, dial: &Dial) -> Result<Value, EndpointError> {
    json_document_with(&version_url(endpoint), dial).await
}

/// Fetches one of a local browser's `/json/*` documents at `url`.
#[cfg(feature = "testing")]
pub async fn json_document(url: &str) -> Result<Value, EndpointError> {
    json_document_with(url, &Dial::default()).await
}

async fn json_document_with(url: &str, dial: &Dial) -> Result<Value, EndpointError> {
    let shown = crate::redact(url);
    let response = crate::http::get_with(url, dial).await?;
    if response.status != 200 {
        return Err(EndpointError::Status { url: shown, status: response.status });
    }
    serde_json::from_slice(&response.body).map_err(|_| EndpointError::NotAVersionDocument { url: shown })
}

/// The browser-level WebSocket URL of an endpoint: a `ws(s)://` URL as it
/// is, otherwise its `/json/version`'s `webSocketDebuggerUrl`, normalised.
pub async fn browser_ws_url_with(endpoint: &str, dial: &Dial) -> Result<String, EndpointError> {
    let shown = crate::redact(endpoint);
    let parsed =
        url::Url::parse(endpoint).map_err(|e| EndpointError::BadUrl { url: shown.clone(), reason: e.to_string() })?;
    match parsed.scheme() {
        "ws" | "wss" => return Ok(endpoint.to_string()),
        "http" | "https" => {}
        other => {
            return Err(EndpointError::BadUrl {
                url: shown,
                reason: format!("{other}:// is not http(s):// or ws(s)://"),
            });
        }
    }
    let version = match json_version_with(endpoint, dial).await {
        Err(EndpointError::Status { url, status: 404 }) => {
            return Err(EndpointError::BadUrl {
                url,
                reason: "it serves no /json/version (404): if the endpoint is a browser WebSocket (Selenium Grid's se:cdp), write it as ws:// or wss://".into(),
            });
        }
        other => other?,
    };
    let not_a_document = || EndpointError::NotAVersionDocument { url: crate::redact(&version_url(endpoint)) };
    let ws = version["webSocketDebuggerUrl"].as_str().ok_or_else(not_a_document)?;
    normalize_ws_url(ws, &parsed).ok_or_else(not_a_document)
}

/// A `webSocketDebuggerUrl` as a client that reached the endpoint at
/// `endpoint` must use it:
/// - an unspecified host (`0.0.0.0`, `[::]`: where the browser listens,
///   inside a farm's container), or a loopback one (`127.0.0.1`,
///   `localhost`) when the endpoint is not on loopback, is replaced by the
///   endpoint's host and port;
/// - on the endpoint's host and port, the scheme follows the endpoint's
///   (`https` → `wss`: one port is not both TLS and plain);
/// - without a query, on the endpoint's host, it takes the endpoint's (a
///   farm's `?token=` is wanted on the WebSocket too; another host never
///   gets it).
///
/// `None` when it is not a `ws(s)://` URL.
pub fn normalize_ws_url(ws: &str, endpoint: &url::Url) -> Option<String> {
    let mut url = url::Url::parse(ws).ok()?;
    if !matches!(url.scheme(), "ws" | "wss") {
        return None;
    }
    // Every spelling of this machine: `localhost.` (the root's dot),
    // `*.localhost` (RFC 6761), and IPv4 loopback written as IPv6
    // (`[::ffff:127.0.0.1]`).
    let local = |host: Option<url::Host<&str>>| match host {
        Some(url::Host::Domain(name)) => {
            let name = name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase();
            name == "localhost" || name.ends_with(".localhost")
        }
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback() || ip.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback()),
        None => false,
    };
    let unspecified = match url.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_unspecified(),
        Some(url::Host::Ipv6(ip)) => ip.is_unspecified() || ip.to_ipv4_mapped().is_some_and(|v4| v4.is_unspecified()),
        _ => false,
    };
    let mut same_place =
        url.host_str() == endpoint.host_str() && url.port_or_known_default() == endpoint.port_or_known_default();
    // Chrome names its socket `ws://` + the request's Host: behind a TLS
    // front on the default port that is `ws://host/` (port 80), which means
    // the front itself.
    let named_by_host_behind_tls = is_tls(endpoint.scheme())
        && url.scheme() == "ws"
        && url.port().is_none()
        && url.host_str() == endpoint.host_str();
    if unspecified || (local(url.host()) && !local(endpoint.host())) {
        url.set_host(endpoint.host_str()).ok()?;
        same_place = true;
    }
    if same_place || named_by_host_behind_tls {
        let scheme = if is_tls(endpoint.scheme()) { "wss" } else { "ws" };
        url.set_scheme(scheme).ok()?;
        url.set_port(endpoint.port()).ok()?;
    }
    // The endpoint's secrets go only where the endpoint is.
    if url.query().is_none() && endpoint.query().is_some() && same_origin(&url, endpoint) {
        url.set_query(endpoint.query());
    }
    Some(url.to_string())
}

fn is_tls(scheme: &str) -> bool {
    matches!(scheme, "https" | "wss")
}

/// The same host and port, and TLS on both or neither: where an endpoint's
/// token and headers may go. Never a plain socket for a TLS endpoint's
/// secrets, never another port of its host.
fn same_origin(url: &url::Url, endpoint: &url::Url) -> bool {
    let host = |u: &url::Url| u.host_str().map(str::to_ascii_lowercase);
    host(url).is_some()
        && host(url) == host(endpoint)
        && url.port_or_known_default() == endpoint.port_or_known_default()
        && is_tls(url.scheme()) == is_tls(endpoint.scheme())
}

/// How to dial the browser WebSocket `ws` found at `endpoint`: as `dial`
/// says, but without its headers when `ws` is not where the endpoint is
/// ([`same_origin`]). A `/json/version` document (over plain HTTP, anyone
/// on the path could write it) must not send the endpoint's credentials
/// elsewhere, nor in the clear.
pub fn dial_for(ws: &str, endpoint: &str, dial: &Dial) -> Dial {
    let same = match (url::Url::parse(ws), url::Url::parse(endpoint)) {
        (Ok(ws), Ok(endpoint)) => same_origin(&ws, &endpoint),
        _ => false,
    };
    if same { dial.clone() } else { Dial { headers: Vec::new(), ..dial.clone() } }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_document_lives_at_the_authority() {
        assert_eq!(version_url("http://127.0.0.1:9333"), "http://127.0.0.1:9333/json/version");
        assert_eq!(version_url("http://127.0.0.1:9333/"), "http://127.0.0.1:9333/json/version");
        assert_eq!(version_url("ws://10.0.0.5:9222/devtools/browser/ABC"), "http://10.0.0.5:9222/json/version");
        assert_eq!(version_url("http://proxy:80/chrome/?k=1"), "http://proxy/chrome/json/version?k=1");
        assert_eq!(version_url("https://farm.example/?token=t"), "https://farm.example/json/version?token=t");
    }

    #[test]
    fn a_farms_document_is_reached_where_the_endpoint_is() {
        let normalize = |ws: &str, endpoint: &str| normalize_ws_url(ws, &url::Url::parse(endpoint).unwrap());
        // Chrome's own port on loopback: as it is.
        assert_eq!(
            normalize("ws://127.0.0.1:9222/devtools/browser/X", "http://127.0.0.1:9222").as_deref(),
            Some("ws://127.0.0.1:9222/devtools/browser/X")
        );
        // The browser's view from inside a farm: the endpoint's address,
        // TLS as the endpoint, and its token.
        assert_eq!(
            normalize("ws://0.0.0.0:3000/devtools/browser/X", "https://farm.example/?token=t").as_deref(),
            Some("wss://farm.example/devtools/browser/X?token=t")
        );
        assert_eq!(
            normalize("ws://localhost:9222/devtools/browser/X", "https://farm.example:8443").as_deref(),
            Some("wss://farm.example:8443/devtools/browser/X")
        );
        // The other spellings of loopback and of "everywhere" are the farm's
        // own machine too: a client must never be sent to its own loopback.
        for inside in [
            "ws://[::ffff:127.0.0.1]:9222/devtools/browser/X",
            "ws://localhost.:9222/devtools/browser/X",
            "ws://chrome.localhost:9222/devtools/browser/X",
            "ws://LOCALHOST:9222/devtools/browser/X",
            "ws://[::ffff:0.0.0.0]:9222/devtools/browser/X",
            "ws://[::1]:9222/devtools/browser/X",
        ] {
            assert_eq!(
                normalize(inside, "https://farm.example:8443").as_deref(),
                Some("wss://farm.example:8443/devtools/browser/X"),
                "{inside}"
            );
        }
        // A document naming another host keeps it, and a query of its own;
        // the endpoint's token never goes there, nor its headers.
        assert_eq!(
            normalize("wss://cdp.farm.example/devtools/browser/X?session=1", "https://farm.example/?token=t")
                .as_deref(),
            Some("wss://cdp.farm.example/devtools/browser/X?session=1")
        );
        assert_eq!(
            normalize("wss://elsewhere.example/devtools/browser/X", "https://farm.example/?token=t").as_deref(),
            Some("wss://elsewhere.example/devtools/browser/X")
        );
        let dial = Dial { headers: vec![("Authorization".into(), crate::Secret::new("k"))], ..Dial::default() };
        assert!(dial_for("wss://elsewhere.example/x", "https://farm.example/", &dial).headers.is_empty());
        assert_eq!(dial_for("wss://FARM.example/x", "https://farm.example/", &dial), dial);
        // Another port of the host, or plain where the endpoint is TLS: no
        // headers (the review of the farm change found them sent in clear).
        assert!(dial_for("wss://farm.example:8443/x", "https://farm.example/", &dial).headers.is_empty());
        assert!(dial_for("ws://farm.example:443/x", "https://farm.example/", &dial).headers.is_empty());
        // Chrome behind a TLS front on 443 names `ws://host/` (its Host
        // header): that is the front, reached over TLS with the token.
        assert_eq!(
            normalize("ws://203.0.113.5/devtools/browser/X", "https://203.0.113.5/?token=t").as_deref(),
            Some("wss://203.0.113.5/devtools/browser/X?token=t")
        );
        // A plain socket on another port of the host never gets the token.
        assert_eq!(
            normalize("ws://farm.example:9222/devtools/browser/X", "https://farm.example/?token=t").as_deref(),
            Some("ws://farm.example:9222/devtools/browser/X")
        );
        // Same host and port as an https endpoint: wss.
        assert_eq!(
            normalize("ws://127.0.0.1:4443/devtools/browser/X", "https://127.0.0.1:4443").as_deref(),
            Some("wss://127.0.0.1:4443/devtools/browser/X")
        );
        // An unspecified address is never where to connect, even when the
        // endpoint is on loopback (a tunnel to a farm).
        assert_eq!(
            normalize("ws://0.0.0.0:9222/devtools/browser/X", "https://127.0.0.1:8443/?token=t").as_deref(),
            Some("wss://127.0.0.1:8443/devtools/browser/X?token=t")
        );
        assert_eq!(normalize("http://x/", "https://farm.example"), None);
    }

    #[tokio::test]
    async fn websocket_urls_are_used_as_written_and_other_schemes_refused() {
        let grid = "wss://grid.example:4444/session/abc/se/cdp";
        assert_eq!(browser_ws_url_with(grid, &Dial::default()).await.unwrap(), grid);
        let error = browser_ws_url_with("ftp://farm.example/?token=sekrit", &Dial::default()).await.unwrap_err();
        assert!(matches!(error, EndpointError::BadUrl { .. }) && !error.to_string().contains("sekrit"), "{error}");
    }
}
