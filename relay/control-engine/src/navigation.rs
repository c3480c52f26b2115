//! `POST /navigate`, and what navigation needs: the URL agents type, the
//! wait for a lifecycle event of the new document, where the page is.

use std::time::Duration;

use cdp_client::protocol::{Command as _, Event as _, page, runtime};

use crate::api::{Handle, Navigate, Navigated, Profiled, Selected, WaitUntil};
use crate::conn::Conn;
use crate::engine::Engine;
use crate::error::ControlError;

/// Default navigation timeout.
pub const NAVIGATE_TIMEOUT: Duration = Duration::from_secs(20);
const MAX_TIMEOUT_MS: u64 = 120_000;

/// The `Page.lifecycleEvent` a `waitUntil` waits for (none: the commit,
/// which `Page.navigate`'s answer already is).
fn lifecycle_event(wait_until: WaitUntil) -> Option<&'static str> {
    match wait_until {
        WaitUntil::Commit => None,
        WaitUntil::DomContentLoaded => Some("DOMContentLoaded"),
        WaitUntil::Load => Some("load"),
        WaitUntil::NetworkIdle => Some("networkIdle"),
    }
}

impl Handle<Navigate> for Engine {
    /// Loads `url` in the tab and waits for `waitUntil`.
    async fn handle(&self, request: Selected<Navigate>) -> Result<Profiled<Navigated>, ControlError> {
        let Navigate { url, wait_until, timeout_ms } = request.request;
        let url = self.allowed_url(&url)?;
        let timeout = clamp_timeout(timeout_ms, NAVIGATE_TIMEOUT);
        let (profile, conn, id) = self.tab(&request.tab).await?;
        let session = self.session(&conn, &id).await?;
        let mut events = conn.subscribe();
        let navigate = page::Navigate { url: url.clone() };
        let started = conn.client().send(&navigate, Some(&session)).await.map_err(ControlError::cdp(&profile.name))?;
        if let Some(reason) = started.error_text.filter(|e| !e.is_empty()) {
            return Err(ControlError::Navigation { url, reason });
        }
        // No loaderId: a same-document navigation (a fragment), done now.
        if let (Some(loader), Some(event)) = (started.loader_id, lifecycle_event(wait_until)) {
            let reached = |e: &cdp_client::CdpEvent| {
                e.session_id.as_deref() == Some(session.as_str())
                    && e.parse::<page::LifecycleEvent>().is_some_and(|l| l.loader_id == loader && l.name == event)
            };
            let waited = tokio::time::timeout(timeout, async {
                loop {
                    match events.recv().await {
                        Ok(e) if reached(&e) => return Ok(()),
                        Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                        Err(_) => return Err(()),
                    }
                }
            })
            .await;
            match waited {
                Ok(Ok(())) => {}
                Ok(Err(())) => {
                    return Err(ControlError::Cdp {
                        profile: profile.name.clone(),
                        source: cdp_client::CdpError::Closed(page::Navigate::METHOD.into()),
                    });
                }
                Err(_) => {
                    return Err(ControlError::Timeout {
                        what: format!("{url} to reach '{event}'"),
                        ms: timeout.as_millis() as u64,
                    });
                }
            }
        }
        self.set_current(&profile.name, &id);
        let (url, title) = self.location(&conn, &session).await.unwrap_or((url, String::new()));
        Ok(Profiled::new(&profile, Navigated { target_id: id, url, title }))
    }
}

impl Engine {
    /// Waits until the tab's document (not the initial `about:blank`, unless
    /// that was asked for) has loaded, or `within` passes.
    pub(crate) async fn wait_loaded(&self, conn: &Conn, session: &str, url: &str, within: Duration) {
        let mut events = conn.subscribe();
        let deadline = tokio::time::Instant::now() + within;
        let evaluate = runtime::Evaluate::value("[document.readyState, location.href]");
        loop {
            let state = conn.client().send(&evaluate, Some(session)).await;
            let loaded = state.as_ref().is_ok_and(|evaluated| {
                let pair: Option<(String, String)> =
                    evaluated.result.value.clone().and_then(|v| serde_json::from_value(v).ok());
                pair.is_some_and(|(ready, href)| ready == "complete" && (href != "about:blank" || url == "about:blank"))
            });
            if loaded || state.is_err() {
                return;
            }
            // Re-check on the next lifecycle step of this tab.
            loop {
                match tokio::time::timeout_at(deadline, events.recv()).await {
                    Err(_) | Ok(Err(tokio::sync::broadcast::error::RecvError::Closed)) => return,
                    Ok(Ok(e))
                        if e.session_id.as_deref() == Some(session) && e.method == page::LifecycleEvent::METHOD =>
                    {
                        break;
                    }
                    Ok(_) => {}
                }
            }
        }
    }

    /// The document's URL and title, read from the page.
    pub(crate) async fn location(&self, conn: &Conn, session: &str) -> Option<(String, String)> {
        let evaluate = runtime::Evaluate::value("[location.href, document.title]");
        let evaluated = conn.client().send(&evaluate, Some(session)).await.ok()?;
        serde_json::from_value(evaluated.result.into_value()).ok()
    }
}

fn clamp_timeout(ms: Option<u64>, default: Duration) -> Duration {
    ms.map_or(default, |ms| Duration::from_millis(ms.clamp(100, MAX_TIMEOUT_MS)))
}

impl Engine {
    /// A URL an agent may load: [`normalize_url`], and `file://` only when
    /// the user allows it (`allowFileUrls`): a page of the user's disk is
    /// readable through snapshots even with evaluate off.
    pub(crate) fn allowed_url(&self, url: &str) -> Result<String, ControlError> {
        let url = normalize_url(url)?;
        if url.get(..7).is_some_and(|s| s.eq_ignore_ascii_case("file://")) && !self.config()?.allow_file_urls {
            return Err(ControlError::NotAllowed {
                what: format!("opening {url} (a file of this computer)"),
                key: "allowFileUrls = true",
            });
        }
        Ok(url)
    }
}

/// Absolute URLs pass; a bare host gets `https://`; script URLs are refused.
pub fn normalize_url(url: &str) -> Result<String, ControlError> {
    let url = url.trim();
    if url.is_empty() {
        return Err(ControlError::BadRequest("url is empty".into()));
    }
    let lower = url.to_ascii_lowercase();
    if lower.starts_with("javascript:") {
        return Err(ControlError::BadRequest(
            "javascript: URLs are not navigations; use /act {kind: \"evaluate\"}".into(),
        ));
    }
    if ["http://", "https://", "file://", "data:", "about:", "chrome://", "blob:"].iter().any(|s| lower.starts_with(s))
    {
        return Ok(url.to_string());
    }
    if url.contains("://") {
        return Err(ControlError::BadRequest(format!("unsupported URL scheme in '{url}'")));
    }
    let candidate = format!("https://{url}");
    match url::Url::parse(&candidate) {
        Ok(parsed) if parsed.host_str().is_some_and(|h| h.contains('.') || h == "localhost") => Ok(candidate),
        _ => Err(ControlError::BadRequest(format!(
            "'{url}' is not a URL: pass an absolute URL such as https://example.com"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_agents_type() {
        assert_eq!(normalize_url("https://example.com/a").unwrap(), "https://example.com/a");
        assert_eq!(normalize_url("example.com").unwrap(), "https://example.com");
        assert_eq!(normalize_url(" about:blank ").unwrap(), "about:blank");
        assert!(normalize_url("javascript:alert(1)").unwrap_err().to_string().contains("evaluate"));
        assert!(normalize_url("").is_err());
        assert!(normalize_url("not a url").is_err());
        assert!(normalize_url("ftp://x/y").is_err());
    }

    #[test]
    fn timeouts_are_clamped() {
        assert_eq!(clamp_timeout(None, NAVIGATE_TIMEOUT), NAVIGATE_TIMEOUT);
        assert_eq!(clamp_timeout(Some(1), NAVIGATE_TIMEOUT), Duration::from_millis(100));
        assert_eq!(clamp_timeout(Some(10_000_000), NAVIGATE_TIMEOUT), Duration::from_millis(MAX_TIMEOUT_MS));
    }
}
