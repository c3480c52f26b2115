//! A CDP endpoint as users write it (`http://host:port`, `ws://host:port/
//! devtools/browser/<id>`) and the browser's `/json/version` document: the
//! one place that fetches it.

use serde_json::Value;

/// Why an endpoint gave no browser WebSocket URL.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum EndpointError {
    #[error("nothing answers at {url}: {reason}")]
    Unreachable { url: String, reason: String },
    #[error("{url} answered {status}")]
    Status { url: String, status: u16 },
    #[error("{url} is not a browser's /json/version document")]
    NotAVersionDocument { url: String },
}

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

/// Fetches an endpoint's `/json/version` document.
pub async fn json_version(endpoint: &str) -> Result<Value, EndpointError> {
    json_document(&version_url(endpoint)).await
}

/// Fetches one of a browser's `/json/*` documents at `url`.
pub async fn json_document(url: &str) -> Result<Value, EndpointError> {
    let shown = crate::redact(url);
    let (status, body) = crate::http::get(url)
        .await
        .map_err(|e| EndpointError::Unreachable { url: shown.clone(), reason: e.to_string() })?;
    if status != 200 {
        return Err(EndpointError::Status { url: shown, status });
    }
    serde_json::from_str(&body).map_err(|_| EndpointError::NotAVersionDocument { url: shown })
}

/// The browser-level WebSocket URL of an endpoint: a `ws://` URL as it is,
/// otherwise the `webSocketDebuggerUrl` of its `/json/version`.
pub async fn browser_ws_url(endpoint: &str) -> Result<String, EndpointError> {
    if endpoint.starts_with("ws://") || endpoint.starts_with("wss://") {
        return Ok(endpoint.to_string());
    }
    let version = json_version(endpoint).await?;
    version["webSocketDebuggerUrl"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| EndpointError::NotAVersionDocument { url: crate::redact(&version_url(endpoint)) })
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
    }
}
