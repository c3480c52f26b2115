//! `POST /navigate`, `POST /back`, `POST /forward`, and what navigation
//! needs: the URL agents type, the wait for a lifecycle event of the new
//! document, where the page is.

use std::sync::Arc;
use std::time::Duration;

use cdp_client::CdpEvent;
use cdp_client::protocol::{Command as _, Event as _, page, runtime};
use settings::Profile;
use tokio::sync::broadcast;
use tokio::time::Instant;

use crate::api::{GoBack, GoForward, Handle, Navigate, Navigated, Profiled, Selected, TabSelector, WaitUntil};
use crate::conn::Conn;
use crate::engine::Engine;
use crate::error::ControlError;

/// Default navigation timeout.
pub(crate) const NAVIGATE_TIMEOUT: Duration = Duration::from_secs(20);
const MAX_TIMEOUT_MS: u64 = 120_000;

/// The `Page.lifecycleEvent` a `waitUntil` waits for (none: the commit).
fn lifecycle_event(wait_until: WaitUntil) -> Option<&'static str> {
    match wait_until {
        WaitUntil::Commit => None,
        WaitUntil::DomContentLoaded => Some("DOMContentLoaded"),
        WaitUntil::Load => Some("load"),
        WaitUntil::NetworkIdle => Some("networkIdle"),
    }
}

/// A navigation, once it is under way: where it goes and what is left to
/// wait for.
#[derive(Debug)]
struct Started {
    profile: Profile,
    conn: Arc<Conn>,
    id: String,
    session: String,
    /// Events since before the navigation was sent.
    events: broadcast::Receiver<Arc<CdpEvent>>,
    /// The URL asked for (for messages, and the answer if the page does not
    /// say where it is).
    url: String,
    /// The new document's loader; none when no document is loaded (a
    /// same-document navigation, a page restored from the back/forward
    /// cache), so there is nothing to wait for.
    loader: Option<String>,
    /// The whole navigation's (for messages), and when it ends.
    timeout: Duration,
    deadline: Instant,
}

impl Handle<Navigate> for Engine {
    /// Loads `url` in the tab and waits for `waitUntil`.
    async fn handle(&self, request: Selected<Navigate>) -> Result<Profiled<Navigated>, ControlError> {
        let Navigate { url, wait_until, timeout_ms } = request.request;
        let url = self.allowed_url(&url)?;
        let timeout = clamp_timeout(timeout_ms, NAVIGATE_TIMEOUT);
        let deadline = Instant::now() + timeout;
        let (profile, conn, id) = self.tab(&request.tab).await?;
        let session = self.session(&conn, &id).await?;
        let events = conn.subscribe();
        let navigate = page::Navigate { url: url.clone() };
        let started = conn.client().send(&navigate, Some(&session)).await.map_err(ControlError::cdp(&profile.name))?;
        if let Some(reason) = started.error_text.filter(|e| !e.is_empty()) {
            return Err(ControlError::Navigation { url, reason });
        }
        // Page.navigate answers once the navigation committed; no loaderId:
        // a same-document navigation (a fragment), done now.
        let loader = started.loader_id;
        self.finish(Started { profile, conn, id, session, events, url, loader, timeout, deadline }, wait_until).await
    }
}

impl Handle<GoBack> for Engine {
    /// One entry back in the tab's history.
    async fn handle(&self, request: Selected<GoBack>) -> Result<Profiled<Navigated>, ControlError> {
        let GoBack { wait_until, timeout_ms } = request.request;
        self.go(&request.tab, Direction::Back, wait_until, timeout_ms).await
    }
}

impl Handle<GoForward> for Engine {
    /// One entry forward in the tab's history.
    async fn handle(&self, request: Selected<GoForward>) -> Result<Profiled<Navigated>, ControlError> {
        let GoForward { wait_until, timeout_ms } = request.request;
        self.go(&request.tab, Direction::Forward, wait_until, timeout_ms).await
    }
}

/// Which way through the tab's history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    Back,
    Forward,
}

impl Direction {
    fn name(self) -> &'static str {
        match self {
            Self::Back => "back",
            Self::Forward => "forward",
        }
    }
}

/// The entry one step `direction` from the current one, if there is one.
fn history_entry(history: &page::NavigationHistory, direction: Direction) -> Option<&page::NavigationEntry> {
    let index = match direction {
        Direction::Back => history.current_index.checked_sub(1)?,
        Direction::Forward => history.current_index + 1,
    };
    history.entries.get(index)
}

/// How a tab's main frame moved, read from one of its events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum MainFrameMove {
    /// A new document committed; its lifecycle events carry this loader.
    Document(String),
    /// A page came back whole from the back/forward cache: no lifecycle
    /// events follow.
    Restored,
    /// A fragment or `history.pushState`: the same document.
    WithinDocument,
}

impl MainFrameMove {
    /// The loader whose lifecycle events are still to come, if any.
    fn loader(self) -> Option<String> {
        match self {
            Self::Document(loader) => Some(loader),
            Self::Restored | Self::WithinDocument => None,
        }
    }
}

/// How the main frame of the tab on `session` moved, if `event` says so.
pub(crate) fn main_frame_move(event: &CdpEvent, session: &str, main_frame: &str) -> Option<MainFrameMove> {
    if event.session_id.as_deref() != Some(session) {
        return None;
    }
    if let Some(navigated) = event.parse::<page::FrameNavigated>() {
        // The main frame has no parent.
        return navigated.frame.parent_id.is_none().then(|| {
            if navigated.kind == "BackForwardCacheRestore" || navigated.frame.loader_id.is_empty() {
                MainFrameMove::Restored
            } else {
                MainFrameMove::Document(navigated.frame.loader_id)
            }
        });
    }
    event
        .parse::<page::NavigatedWithinDocument>()
        .filter(|n| n.frame_id == main_frame)
        .map(|_| MainFrameMove::WithinDocument)
}

/// Why a wait for an event ended without it.
enum Unmet {
    Closed,
    TimedOut,
}

/// The first event `pick` takes, before `deadline`.
async fn next_event<T>(
    events: &mut broadcast::Receiver<Arc<CdpEvent>>,
    deadline: Instant,
    mut pick: impl FnMut(&CdpEvent) -> Option<T>,
) -> Result<T, Unmet> {
    loop {
        match tokio::time::timeout_at(deadline, events.recv()).await {
            Err(_) => return Err(Unmet::TimedOut),
            Ok(Err(broadcast::error::RecvError::Closed)) => return Err(Unmet::Closed),
            Ok(Err(broadcast::error::RecvError::Lagged(_))) => {}
            Ok(Ok(event)) => {
                if let Some(picked) = pick(&event) {
                    return Ok(picked);
                }
            }
        }
    }
}

impl Engine {
    /// `POST /back` and `POST /forward`: the history entry next to the
    /// current one, loaded as `waitUntil` says.
    async fn go(
        &self,
        tab: &TabSelector,
        direction: Direction,
        wait_until: WaitUntil,
        timeout_ms: Option<u64>,
    ) -> Result<Profiled<Navigated>, ControlError> {
        let timeout = clamp_timeout(timeout_ms, NAVIGATE_TIMEOUT);
        let deadline = Instant::now() + timeout;
        let (profile, conn, id) = self.tab(tab).await?;
        let session = self.session(&conn, &id).await?;
        let cdp = ControlError::cdp(&profile.name);
        let history = conn.client().send(&page::GetNavigationHistory {}, Some(&session)).await.map_err(cdp)?;
        let entry = history_entry(&history, direction).ok_or(ControlError::NoHistory(direction.name()))?;
        let (entry_id, url) = (entry.id, entry.url.clone());
        // History may lead where navigate may not (a file the user opened,
        // or one allowed before the user took the leave back).
        self.check_file_url(&url)?;
        let mut events = conn.subscribe();
        let go = page::NavigateToHistoryEntry { entry_id };
        conn.client().send(&go, Some(&session)).await.map_err(ControlError::cdp(&profile.name))?;
        // Unlike Page.navigate, this answers before the commit: wait for it.
        let loader = next_event(&mut events, deadline, |event| main_frame_move(event, &session, &id))
            .await
            .map_err(|unmet| unmet.error(&profile, &format!("{url} to commit"), timeout))?
            .loader();
        self.finish(Started { profile, conn, id, session, events, url, loader, timeout, deadline }, wait_until).await
    }

    /// The end of every navigation: waits until the new document reaches
    /// `wait_until`, makes the tab current, and says where it is.
    async fn finish(&self, started: Started, wait_until: WaitUntil) -> Result<Profiled<Navigated>, ControlError> {
        let Started { profile, conn, id, session, mut events, url, loader, timeout, deadline } = started;
        if let (Some(loader), Some(event)) = (loader, lifecycle_event(wait_until)) {
            let reached = |e: &CdpEvent| {
                (e.session_id.as_deref() == Some(session.as_str())
                    && e.parse::<page::LifecycleEvent>().is_some_and(|l| l.loader_id == loader && l.name == event))
                .then_some(())
            };
            next_event(&mut events, deadline, reached)
                .await
                .map_err(|unmet| unmet.error(&profile, &format!("{url} to reach '{event}'"), timeout))?;
        }
        self.set_current(&profile.name, &id);
        let (url, title) = self.location(&conn, &session).await.unwrap_or((url, String::new()));
        Ok(Profiled::new(&profile, Navigated { target_id: id, url, title }))
    }
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

impl Unmet {
    fn error(self, profile: &Profile, what: &str, waited: Duration) -> ControlError {
        match self {
            Self::Closed => ControlError::Cdp {
                profile: profile.name.clone(),
                source: cdp_client::CdpError::Closed(page::Navigate::METHOD.into()),
            },
            Self::TimedOut => ControlError::Timeout { what: what.to_string(), ms: waited.as_millis() as u64 },
        }
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
        // A grant's agent: its sites first (the relay holds the tab to them
        // anyway; this names the grant before anything is opened).
        self.refuse_url(&url)?;
        self.check_file_url(&url)?;
        Ok(url)
    }

    /// The `file://` rule (`allowFileUrls`), also for a URL the tab
    /// already knows (its history).
    fn check_file_url(&self, url: &str) -> Result<(), ControlError> {
        if url.get(..7).is_some_and(|s| s.eq_ignore_ascii_case("file://")) && !self.config()?.allow_file_urls {
            return Err(ControlError::NotAllowed {
                what: format!("opening {url} (a file of this computer)"),
                key: "allowFileUrls = true",
            });
        }
        Ok(())
    }
}

/// Absolute URLs pass; a bare host gets `https://`; script URLs are refused.
pub(crate) fn normalize_url(url: &str) -> Result<String, ControlError> {
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
    fn history_has_an_entry_each_way_except_at_its_ends() {
        let entry = |id: i64| page::NavigationEntry { id, url: format!("http://x/{id}"), title: String::new() };
        let at = |current_index: usize| page::NavigationHistory { current_index, entries: vec![entry(1), entry(2)] };
        assert_eq!(history_entry(&at(1), Direction::Back).map(|e| e.id), Some(1));
        assert_eq!(history_entry(&at(0), Direction::Forward).map(|e| e.id), Some(2));
        assert!(history_entry(&at(0), Direction::Back).is_none());
        assert!(history_entry(&at(1), Direction::Forward).is_none());
    }

    #[test]
    fn a_history_navigation_commits_a_document_or_nothing_to_wait_for() {
        let event = |method: &str, params: serde_json::Value, session: &str| CdpEvent {
            method: method.into(),
            params,
            session_id: Some(session.into()),
        };
        let navigated = |kind: &str, parent: Option<&str>| {
            let frame = serde_json::json!({"id": "T", "parentId": parent, "loaderId": "L2", "url": "http://x/"});
            event("Page.frameNavigated", serde_json::json!({"frame": frame, "type": kind}), "S")
        };
        let document = Some(MainFrameMove::Document("L2".into()));
        assert_eq!(main_frame_move(&navigated("Navigation", None), "S", "T"), document);
        let restored = main_frame_move(&navigated("BackForwardCacheRestore", None), "S", "T");
        assert_eq!(restored, Some(MainFrameMove::Restored), "restored whole");
        assert_eq!(restored.and_then(MainFrameMove::loader), None, "nothing to wait for");
        assert_eq!(main_frame_move(&navigated("Navigation", Some("T")), "S", "T"), None, "an iframe's");
        assert_eq!(main_frame_move(&navigated("Navigation", None), "S", "OTHER"), document, "no parent: main");
        let fragment = serde_json::json!({"frameId": "T", "url": "http://x/#a"});
        let within = main_frame_move(&event("Page.navigatedWithinDocument", fragment.clone(), "S"), "S", "T");
        assert_eq!(within, Some(MainFrameMove::WithinDocument));
        assert_eq!(within.and_then(MainFrameMove::loader), None, "nothing to wait for");
        let other_tab = event("Page.navigatedWithinDocument", fragment, "S2");
        assert_eq!(main_frame_move(&other_tab, "S", "T"), None, "another tab's");
    }

    #[test]
    fn timeouts_are_clamped() {
        assert_eq!(clamp_timeout(None, NAVIGATE_TIMEOUT), NAVIGATE_TIMEOUT);
        assert_eq!(clamp_timeout(Some(1), NAVIGATE_TIMEOUT), Duration::from_millis(100));
        assert_eq!(clamp_timeout(Some(10_000_000), NAVIGATE_TIMEOUT), Duration::from_millis(MAX_TIMEOUT_MS));
    }
}
