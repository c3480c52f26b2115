//! The control engine: profiles, their browser connections, tab targeting,
//! and the operations of the control API. Plain Rust over [`Conn`]; it knows
//! nothing of HTTP.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::conn::{Conn, ConsoleMessage, DialogInfo, PageError, TabInfo};
use crate::error::ControlError;
use crate::page::{self, LiveFrame};
use crate::refs::{RefEntry, RefStore, RefTable, parse_ref};
use crate::snapshot::{self, SnapshotOptions, SnapshotResult};
use managed_driver::config::{Config, Driver, Profile};
use managed_driver::{BrowserStatus, ManagedBrowsers, State, cdp_endpoint};

/// Labels drawn at most on a labelled screenshot.
pub const MAX_LABELS: u32 = 150;

/// Default navigation timeout.
pub const NAVIGATE_TIMEOUT: Duration = Duration::from_secs(20);
const MAX_TIMEOUT_MS: u64 = 120_000;

/// What the engine asks of the relay in its own process, for the extension
/// driver (the relay engine implements it; the control engine does not
/// depend on it).
pub trait SharedTabs: std::fmt::Debug + Send + Sync {
    /// How many tabs the extension shares, or `None` when it is not
    /// connected.
    fn shared_tabs(&self) -> Option<usize>;
}

/// The relay this process runs, for the extension driver: what it shares
/// (to tell "no extension" from "no shared tab") and its `/cdp` endpoint.
#[derive(Debug, Clone)]
pub struct RelayLink {
    pub extension: Arc<dyn SharedTabs>,
    /// `ws://127.0.0.1:PORT/cdp?token=…`
    pub cdp_ws_url: String,
    /// `http://127.0.0.1:PORT`, for the endpoints shown in status.
    pub http_base: String,
    pub token: Option<String>,
}

impl RelayLink {
    fn shared_tabs(&self) -> Option<usize> {
        self.extension.shared_tabs()
    }
}

#[derive(Debug, Clone)]
pub struct Engine(Arc<Inner>);

/// Serialises page operations on one tab.
type PageLock = Arc<tokio::sync::Mutex<()>>;

#[derive(Debug)]
struct Inner {
    state_root: PathBuf,
    browsers: ManagedBrowsers,
    relay: Option<RelayLink>,
    conns: tokio::sync::Mutex<HashMap<String, Arc<Conn>>>,
    refs: Mutex<RefStore>,
    /// Per profile, the tab that requests without `targetId` go to (last
    /// opened, focused or navigated). Kept here, not on the connection, so
    /// that it survives a reconnect.
    current: Mutex<HashMap<String, String>>,
    /// One page operation at a time per tab: a snapshot and an action on
    /// the same tab must not interleave (the isolated world's set-up, the
    /// ref table, input). Keyed by (profile, target id).
    page_locks: Mutex<HashMap<(String, String), PageLock>>,
}

/// `GET /` for one profile.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProfileStatus {
    pub profile: String,
    pub driver: Driver,
    pub color: String,
    pub default: bool,
    /// Managed: the browser runs. Extension: the extension is connected.
    pub running: bool,
    pub connected: bool,
    pub state: String,
    /// Tabs the engine sees (shared tabs for the extension driver).
    pub tabs: Option<usize>,
    pub cdp_endpoint: Option<String>,
    pub detail: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum WaitUntil {
    /// The new document is committed.
    Commit,
    #[serde(rename = "domcontentloaded")]
    DomContentLoaded,
    /// The load event fired (default).
    #[default]
    Load,
    #[serde(rename = "networkidle")]
    NetworkIdle,
}

impl WaitUntil {
    fn lifecycle_event(self) -> Option<&'static str> {
        match self {
            Self::Commit => None,
            Self::DomContentLoaded => Some("DOMContentLoaded"),
            Self::Load => Some("load"),
            Self::NetworkIdle => Some("networkIdle"),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Navigated {
    pub target_id: String,
    pub url: String,
    pub title: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum ImageType {
    #[default]
    Png,
    Jpeg,
}

impl ImageType {
    pub fn mime(self) -> &'static str {
        match self {
            Self::Png => "image/png",
            Self::Jpeg => "image/jpeg",
        }
    }
    fn extension(self) -> &'static str {
        match self {
            Self::Png => "png",
            Self::Jpeg => "jpg",
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScreenshotRequest {
    pub profile: Option<String>,
    pub target_id: Option<String>,
    #[serde(default)]
    pub full_page: bool,
    #[serde(rename = "ref")]
    pub element_ref: Option<String>,
    /// A CSS selector (`element` is accepted as an alias).
    #[serde(alias = "element")]
    pub selector: Option<String>,
    #[serde(rename = "type", default)]
    pub image_type: ImageType,
    pub quality: Option<u8>,
    /// Orange boxes with their refs over the last snapshot's elements.
    #[serde(default)]
    pub labels: bool,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Screenshot {
    pub target_id: String,
    pub path: PathBuf,
    pub width: u32,
    pub height: u32,
    pub bytes: usize,
    #[serde(rename = "type")]
    pub mime: &'static str,
    /// With `labels`: refs labelled, and refs not labelled (outside the
    /// viewport, beyond 150, or in another frame).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub labels: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<u64>,
    #[serde(skip)]
    pub data: Vec<u8>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConsoleReport {
    pub target_id: String,
    pub messages: Vec<ConsoleMessage>,
    pub page_errors: Vec<PageError>,
}

/// A tab ready for a page operation; holds the tab's page lock.
pub(super) struct PageTarget {
    pub(super) profile: Profile,
    pub(super) conn: Arc<Conn>,
    pub(super) id: String,
    pub(super) session: String,
    pub(super) _guard: tokio::sync::OwnedMutexGuard<()>,
}

impl PageTarget {
    /// Runs `work` on the page, unless a dialog opens that nothing answers:
    /// a JavaScript dialog stops the page's scripts (our snapshot walker,
    /// input, screenshots) until it is answered, so the agent hears about
    /// the dialog at once instead of waiting for a timeout.
    pub(super) async fn unless_dialog<T>(
        &self,
        work: impl Future<Output = Result<T, ControlError>>,
    ) -> Result<T, ControlError> {
        let dialogs = self.conn.subscribe();
        tokio::select! {
            result = work => result,
            dialog = unanswered_dialog(&self.conn, &self.id, dialogs) => Err(dialog.into()),
        }
    }
}

/// Resolves when an unanswered dialog opens on the tab.
async fn unanswered_dialog(
    conn: &Conn,
    tab: &str,
    mut events: tokio::sync::broadcast::Receiver<Arc<cdp_client::CdpEvent>>,
) -> DialogInfo {
    use tokio::sync::broadcast::error::RecvError;
    loop {
        match events.recv().await {
            Ok(event) if event.method == "Page.javascriptDialogOpening" => {
                if let Some(dialog) = conn.open_dialog(tab) {
                    return dialog;
                }
            }
            Err(RecvError::Closed) => std::future::pending::<()>().await,
            _ => {}
        }
    }
}

/// A ref's element box in the tab's viewport (CSS pixels), after scrolling
/// it into view.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ElementBox {
    pub x: f64,
    pub y: f64,
    pub width: f64,
    pub height: f64,
}

impl ElementBox {
    pub fn center(&self) -> (f64, f64) {
        (self.x + self.width / 2.0, self.y + self.height / 2.0)
    }
}

impl Engine {
    /// `relay`: the relay of this process, for the extension driver (none:
    /// only managed profiles work).
    pub fn new(state_root: &Path, relay: Option<RelayLink>) -> Self {
        Self(Arc::new(Inner {
            state_root: state_root.to_path_buf(),
            browsers: ManagedBrowsers::new(state_root),
            relay,
            conns: tokio::sync::Mutex::new(HashMap::new()),
            refs: Mutex::new(RefStore::default()),
            current: Mutex::new(HashMap::new()),
            page_locks: Mutex::new(HashMap::new()),
        }))
    }

    pub fn media_dir(&self) -> PathBuf {
        self.0.state_root.join("media")
    }

    fn config(&self) -> Result<Config, ControlError> {
        Ok(Config::load(&self.0.state_root)?)
    }

    pub fn profile(&self, name: Option<&str>) -> Result<Profile, ControlError> {
        Ok(self.config()?.profile(name)?.clone())
    }

    /// `GET /profiles`.
    pub fn profiles(&self) -> Result<Value, ControlError> {
        let config = self.config()?;
        let profiles: Vec<_> = config.profiles.values().collect();
        Ok(json!({"defaultProfile": config.default_profile, "profiles": profiles}))
    }

    /// `GET /`: every profile, or one.
    pub async fn status(&self, only: Option<&str>) -> Result<Vec<ProfileStatus>, ControlError> {
        let config = self.config()?;
        let profiles: Vec<&Profile> = match only {
            Some(name) => vec![config.profile(Some(name))?],
            None => config.profiles.values().collect(),
        };
        let mut out = Vec::new();
        for profile in profiles {
            out.push(self.profile_status(profile, profile.name == config.default_profile).await);
        }
        Ok(out)
    }

    async fn profile_status(&self, profile: &Profile, default: bool) -> ProfileStatus {
        let live = self.0.conns.lock().await.get(&profile.name).filter(|c| !c.is_closed()).cloned();
        let tabs = live.as_ref().map(|c| c.tabs(None).len());
        let mut status = ProfileStatus {
            profile: profile.name.clone(),
            driver: profile.driver,
            color: profile.color.clone(),
            default,
            running: false,
            connected: live.is_some(),
            state: String::new(),
            tabs,
            cdp_endpoint: None,
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
                status.cdp_endpoint = cdp_endpoint(&link.http_base, profile, link.token.as_deref());
            }
            Driver::Managed => {
                let browser: BrowserStatus = self.0.browsers.status(profile);
                status.running = matches!(browser.state, State::Running | State::External);
                status.state = serde_json::to_value(browser.state)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default();
                status.detail = browser.detail;
                status.cdp_endpoint = match &self.0.relay {
                    Some(link) => cdp_endpoint(&link.http_base, profile, link.token.as_deref()),
                    // No relay in this process to proxy through: the browser's own port.
                    None if profile.launches() => browser.cdp_port.map(|p| format!("http://127.0.0.1:{p}")),
                    None => profile.cdp_url.clone(),
                };
            }
        }
        status
    }

    /// `POST /start`: launches a managed browser (a no-op when it runs), or
    /// checks that the extension shares a tab.
    pub async fn start(&self, name: Option<&str>) -> Result<ProfileStatus, ControlError> {
        let config = self.config()?;
        let profile = config.profile(name)?.clone();
        match profile.driver {
            Driver::Extension => {
                self.extension_ready()?;
                self.conn(&profile).await?;
            }
            Driver::Managed => {
                self.0.browsers.start(&profile).await?;
                self.conn(&profile).await?;
            }
        }
        Ok(self.profile_status(&profile, profile.name == config.default_profile).await)
    }

    /// `POST /stop`: stops a managed browser (the user's own Chrome is never
    /// stopped).
    pub async fn stop(&self, name: Option<&str>) -> Result<ProfileStatus, ControlError> {
        let config = self.config()?;
        let profile = config.profile(name)?.clone();
        if profile.driver == Driver::Extension {
            return Err(ControlError::BadRequest(format!(
                "profile '{}' is your own Chrome: Browser Relay never stops it (click the Browser Relay icon on a tab to stop sharing it)",
                profile.name
            )));
        }
        if let Some(conn) = self.0.conns.lock().await.remove(&profile.name) {
            conn.client().close();
        }
        self.0.browsers.stop(&profile).await?;
        Ok(self.profile_status(&profile, profile.name == config.default_profile).await)
    }

    fn extension_ready(&self) -> Result<&RelayLink, ControlError> {
        let link = self.0.relay.as_ref().ok_or(ControlError::NoExtension)?;
        match link.shared_tabs() {
            None => Err(ControlError::NoExtension),
            Some(0) => Err(ControlError::NoSharedTab),
            Some(_) => Ok(link),
        }
    }

    /// The profile's connection: the cached one while it lives, else a new
    /// one (a lost connection is replaced on the next request).
    async fn conn(&self, profile: &Profile) -> Result<Arc<Conn>, ControlError> {
        let mut conns = self.0.conns.lock().await;
        if let Some(conn) = conns.get(&profile.name).filter(|c| !c.is_closed()) {
            return Ok(conn.clone());
        }
        let url = self.browser_ws_url(profile).await?;
        let conn = Conn::connect(&profile.name, &url).await.map_err(ControlError::cdp(&profile.name))?;
        conns.insert(profile.name.clone(), conn.clone());
        Ok(conn)
    }

    async fn browser_ws_url(&self, profile: &Profile) -> Result<String, ControlError> {
        match profile.driver {
            Driver::Extension => {
                let link = self.0.relay.as_ref().ok_or(ControlError::NoExtension)?;
                if link.shared_tabs().is_none() {
                    return Err(ControlError::NoExtension);
                }
                Ok(link.cdp_ws_url.clone())
            }
            Driver::Managed if profile.launches() => {
                let record = self
                    .0
                    .browsers
                    .record(&profile.name)
                    .filter(|_| self.0.browsers.running_port(&profile.name).is_some())
                    .ok_or_else(|| ControlError::NotRunning(profile.name.clone()))?;
                Ok(format!("ws://127.0.0.1:{}{}", record.port, record.ws_path))
            }
            Driver::Managed => {
                let url = profile
                    .cdp_url
                    .clone()
                    .unwrap_or_else(|| format!("http://127.0.0.1:{}", profile.cdp_port.unwrap_or_default()));
                cdp_client::endpoint::browser_ws_url(&url)
                    .await
                    .map_err(|_| ControlError::NotRunning(profile.name.clone()))
            }
        }
    }

    /// The connection and the tab a request is about: an explicit
    /// `targetId`, else the profile's current tab (last opened or focused),
    /// else the only tab.
    pub(super) async fn tab(
        &self,
        profile: Option<&str>,
        target_id: Option<&str>,
    ) -> Result<(Profile, Arc<Conn>, String), ControlError> {
        let profile = self.profile(profile)?;
        let conn = self.conn(&profile).await?;
        let current = self.current(&profile.name).filter(|id| conn.has_tab(id));
        let tabs = conn.tabs(current.as_deref());
        let id = match target_id {
            Some(id) => {
                if !conn.has_tab(id) {
                    return Err(ControlError::UnknownTab {
                        profile: profile.name.clone(),
                        target_id: id.to_string(),
                        tabs: tab_list(&tabs),
                    });
                }
                id.to_string()
            }
            None => match (current, tabs.as_slice()) {
                (Some(current), _) => current,
                (None, [only]) => only.target_id.clone(),
                (None, []) if profile.driver == Driver::Extension => return Err(ControlError::NoSharedTab),
                (None, []) => return Err(ControlError::NoTab(profile.name.clone())),
                (None, _) => return Err(ControlError::AmbiguousTab(tab_list(&tabs))),
            },
        };
        Ok((profile, conn, id))
    }

    /// Waits until the tab is attached; returns its session.
    async fn session(&self, conn: &Arc<Conn>, target_id: &str) -> Result<String, ControlError> {
        conn.ready_tab(target_id).await.map_err(ControlError::cdp(&conn.profile))
    }

    fn current(&self, profile: &str) -> Option<String> {
        self.0.current.lock().unwrap_or_else(|p| p.into_inner()).get(profile).cloned()
    }

    fn set_current(&self, profile: &str, target_id: &str) {
        self.0.current.lock().unwrap_or_else(|p| p.into_inner()).insert(profile.to_string(), target_id.to_string());
    }

    /// The target of a page operation, attached, with the tab's page lock
    /// held until the returned value drops.
    pub(super) async fn page_target(
        &self,
        profile: Option<&str>,
        target_id: Option<&str>,
    ) -> Result<PageTarget, ControlError> {
        let (profile, conn, id) = self.tab(profile, target_id).await?;
        let session = self.session(&conn, &id).await?;
        let lock = {
            let mut locks = self.0.page_locks.lock().unwrap_or_else(|p| p.into_inner());
            // Locks nobody holds or waits for go (tabs come and go).
            locks.retain(|_, lock| Arc::strong_count(lock) > 1);
            locks.entry((profile.name.clone(), id.clone())).or_default().clone()
        };
        let guard = lock.lock_owned().await;
        // A page behind an open dialog answers no script: say so now.
        if let Some(dialog) = conn.open_dialog(&id) {
            return Err(dialog.into());
        }
        Ok(PageTarget { profile, conn, id, session, _guard: guard })
    }

    /// `GET /tabs`.
    pub async fn tabs(&self, profile: Option<&str>) -> Result<Vec<TabInfo>, ControlError> {
        let profile = self.profile(profile)?;
        let current = self.current(&profile.name);
        self.conn(&profile).await?.refreshed_tabs(current.as_deref()).await.map_err(ControlError::cdp(&profile.name))
    }

    /// `POST /tabs/open`: a new tab, which becomes the current one.
    pub async fn open_tab(&self, profile: Option<&str>, url: &str) -> Result<TabInfo, ControlError> {
        let url = normalize_url(url)?;
        let profile = self.profile(profile)?;
        let conn = self.conn(&profile).await?;
        let created = conn
            .client()
            .call("Target.createTarget", json!({"url": url}), None)
            .await
            .map_err(ControlError::cdp(&profile.name))?;
        let target_id = created["targetId"]
            .as_str()
            .ok_or_else(|| ControlError::Page("Target.createTarget gave no targetId".into()))?
            .to_string();
        // createTarget announces the target before answering; wait until the
        // engine has attached to it so that console and refs start now.
        let session = self.session(&conn, &target_id).await?;
        self.set_current(&profile.name, &target_id);
        // Agents snapshot next: answer once the page has loaded (bounded;
        // a slow page is still opened).
        self.wait_loaded(&conn, &session, &url, NAVIGATE_TIMEOUT).await;
        let (url, title) = self.location(&conn, &session).await.unwrap_or((url, String::new()));
        Ok(TabInfo { target_id, title, url, kind: "page".into(), active: true, dialog: None })
    }

    /// `POST /tabs/focus`: brings the tab to the front and makes it current.
    pub async fn focus_tab(&self, profile: Option<&str>, target_id: &str) -> Result<(), ControlError> {
        let (profile, conn, id) = self.tab(profile, Some(target_id)).await?;
        conn.client()
            .call("Target.activateTarget", json!({"targetId": id}), None)
            .await
            .map_err(ControlError::cdp(&profile.name))?;
        self.set_current(&profile.name, &id);
        Ok(())
    }

    /// `DELETE /tabs/:targetId`.
    pub async fn close_tab(&self, profile: Option<&str>, target_id: &str) -> Result<(), ControlError> {
        let (profile, conn, id) = self.tab(profile, Some(target_id)).await?;
        conn.client()
            .call("Target.closeTarget", json!({"targetId": id}), None)
            .await
            .map_err(ControlError::cdp(&profile.name))?;
        self.refs().forget(&profile.name, &id);
        Ok(())
    }

    fn refs(&self) -> std::sync::MutexGuard<'_, RefStore> {
        self.0.refs.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn forget_refs(&self, profile: &str, target_id: &str) {
        self.refs().forget(profile, target_id);
    }

    /// A ref of the tab's last snapshot: its normal name and entry.
    pub(super) fn ref_entry(
        &self,
        profile: &str,
        target_id: &str,
        element_ref: &str,
    ) -> Result<(String, RefEntry), ControlError> {
        let name = parse_ref(element_ref)?;
        let table: Arc<RefTable> =
            self.refs().get(profile, target_id).ok_or_else(|| ControlError::UnknownRef(name.clone()))?;
        let entry = table.get(&name)?.clone();
        Ok((name, entry))
    }

    pub(super) fn allow_evaluate(&self) -> Result<bool, ControlError> {
        Ok(self.config()?.allow_evaluate)
    }

    /// `POST /navigate`: loads `url` in the tab and waits for `wait_until`.
    pub async fn navigate(
        &self,
        profile: Option<&str>,
        target_id: Option<&str>,
        url: &str,
        wait_until: WaitUntil,
        timeout: Option<u64>,
    ) -> Result<Navigated, ControlError> {
        let url = normalize_url(url)?;
        let timeout = clamp_timeout(timeout, NAVIGATE_TIMEOUT);
        let (profile, conn, id) = self.tab(profile, target_id).await?;
        let session = self.session(&conn, &id).await?;
        let mut events = conn.subscribe();
        let started = conn
            .client()
            .call("Page.navigate", json!({"url": url}), Some(&session))
            .await
            .map_err(ControlError::cdp(&profile.name))?;
        if let Some(reason) = started["errorText"].as_str().filter(|e| !e.is_empty()) {
            return Err(ControlError::Navigation { url, reason: reason.to_string() });
        }
        // No loaderId: a same-document navigation (a fragment), done now.
        if let (Some(loader), Some(event)) = (started["loaderId"].as_str(), wait_until.lifecycle_event()) {
            let waited = tokio::time::timeout(timeout, async {
                loop {
                    match events.recv().await {
                        Ok(e)
                            if e.method == "Page.lifecycleEvent"
                                && e.session_id.as_deref() == Some(session.as_str())
                                && e.params["loaderId"] == loader
                                && e.params["name"] == event =>
                        {
                            return Ok(());
                        }
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
                        source: cdp_client::CdpError::Closed("Page.navigate".into()),
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
        Ok(Navigated { target_id: id, url, title })
    }

    /// Waits until the tab's document (not the initial `about:blank`, unless
    /// that was asked for) has loaded, or `within` passes.
    async fn wait_loaded(&self, conn: &Conn, session: &str, url: &str, within: Duration) {
        let mut events = conn.subscribe();
        let deadline = tokio::time::Instant::now() + within;
        let expression = "[document.readyState, location.href]";
        loop {
            let state = conn
                .client()
                .call("Runtime.evaluate", json!({"expression": expression, "returnByValue": true}), Some(session))
                .await;
            let loaded = state.as_ref().is_ok_and(|v| {
                let pair = &v["result"]["value"];
                pair[0] == "complete" && (pair[1] != "about:blank" || url == "about:blank")
            });
            if loaded || state.is_err() {
                return;
            }
            // Re-check on the next lifecycle step of this tab.
            loop {
                match tokio::time::timeout_at(deadline, events.recv()).await {
                    Err(_) | Ok(Err(tokio::sync::broadcast::error::RecvError::Closed)) => return,
                    Ok(Ok(e)) if e.session_id.as_deref() == Some(session) && e.method == "Page.lifecycleEvent" => {
                        break;
                    }
                    Ok(_) => {}
                }
            }
        }
    }

    /// The document's URL and title, read from the page.
    pub(super) async fn location(&self, conn: &Conn, session: &str) -> Option<(String, String)> {
        let value = conn
            .client()
            .call(
                "Runtime.evaluate",
                json!({"expression": "[location.href, document.title]", "returnByValue": true}),
                Some(session),
            )
            .await
            .ok()?;
        let pair = &value["result"]["value"];
        Some((pair[0].as_str()?.to_string(), pair[1].as_str().unwrap_or_default().to_string()))
    }

    /// `GET /snapshot`.
    pub async fn snapshot(
        &self,
        profile: Option<&str>,
        target_id: Option<&str>,
        options: &SnapshotOptions,
    ) -> Result<SnapshotResult, ControlError> {
        let page = self.page_target(profile, target_id).await?;
        let (mut result, table) = page.unless_dialog(snapshot::take(&page.conn, &page.id, options)).await?;
        let PageTarget { profile, conn, id, session, _guard } = page;
        if let Some(table) = table {
            self.refs().put(&profile.name, &id, table);
        }
        if let Some((url, title)) = self.location(&conn, &session).await.or_else(|| conn.tab_url(&id)) {
            result.url = url;
            result.title = title;
        }
        result.target_id = id;
        Ok(result)
    }

    /// Resolves a ref of the tab's last snapshot to its element's box in the
    /// tab's viewport, scrolling it into view first. Actions click its centre.
    pub async fn ref_box(
        &self,
        profile: Option<&str>,
        target_id: Option<&str>,
        element_ref: &str,
    ) -> Result<ElementBox, ControlError> {
        let page = self.page_target(profile, target_id).await?;
        page.unless_dialog(self.ref_box_locked(&page.profile, &page.conn, &page.id, element_ref)).await
    }

    async fn ref_box_locked(
        &self,
        profile: &Profile,
        conn: &Conn,
        tab: &str,
        element_ref: &str,
    ) -> Result<ElementBox, ControlError> {
        let (name, entry) = self.ref_entry(&profile.name, tab, element_ref)?;
        let frame =
            page::live_frame(conn, tab, &entry.frame).await.map_err(|_| ControlError::StaleRef(name.clone()))?;
        let arg = json!({"ref": name, "role": entry.role, "name": entry.name, "nth": entry.nth});
        let found = page::call_script(conn, &frame, "resolve", arg, true).await?;
        match found["error"].as_str() {
            Some("unknown") => return Err(ControlError::UnknownRef(name)),
            Some(_) => return Err(ControlError::StaleRef(name)),
            None => {}
        }
        if found["hidden"] == true {
            return Err(ControlError::Page(format!("{name} is not visible (it has no box)")));
        }
        let (dx, dy) = page::frame_offset(conn, tab, &entry.frame).await?;
        Ok(ElementBox {
            x: found["x"].as_f64().unwrap_or_default() + dx,
            y: found["y"].as_f64().unwrap_or_default() + dy,
            width: found["width"].as_f64().unwrap_or_default(),
            height: found["height"].as_f64().unwrap_or_default(),
        })
    }

    /// `POST /screenshot`: the viewport, the full page, or one element
    /// (`ref` or `selector`); saved under the media folder.
    pub async fn screenshot(&self, request: &ScreenshotRequest) -> Result<Screenshot, ControlError> {
        let page = self.page_target(request.profile.as_deref(), request.target_id.as_deref()).await?;
        page.unless_dialog(self.capture(&page, request)).await
    }

    async fn capture(&self, page: &PageTarget, request: &ScreenshotRequest) -> Result<Screenshot, ControlError> {
        let PageTarget { profile, conn, id, session, .. } = page;
        let quality = match (request.image_type, request.quality) {
            (ImageType::Png, Some(_)) => {
                return Err(ControlError::BadRequest("quality applies to jpeg screenshots only".into()));
            }
            (_, Some(q)) if q > 100 => return Err(ControlError::BadRequest("quality is 0–100".into())),
            (_, q) => q,
        };
        let element = match (&request.element_ref, &request.selector) {
            (Some(_), Some(_)) => {
                return Err(ControlError::BadRequest("pass ref or selector, not both".into()));
            }
            (Some(r), None) => Some(self.ref_box_locked(profile, conn, id, r).await?),
            (None, Some(selector)) => Some(self.selector_box(conn, id, session, selector).await?),
            (None, None) => None,
        };
        let mut params =
            json!({"format": match request.image_type { ImageType::Png => "png", ImageType::Jpeg => "jpeg" }});
        if let Some(q) = quality {
            params["quality"] = json!(q);
        }
        if element.is_some() || request.full_page {
            let metrics = conn
                .client()
                .call("Page.getLayoutMetrics", json!({}), Some(session))
                .await
                .map_err(ControlError::cdp(&profile.name))?;
            let clip = match element {
                Some(b) => {
                    if b.width < 1.0 || b.height < 1.0 {
                        return Err(ControlError::Page("the element has no visible box to capture".into()));
                    }
                    let viewport = &metrics["cssVisualViewport"];
                    json!({
                        "x": b.x + viewport["pageX"].as_f64().unwrap_or_default(),
                        "y": b.y + viewport["pageY"].as_f64().unwrap_or_default(),
                        "width": b.width, "height": b.height, "scale": 1
                    })
                }
                None => {
                    let size = &metrics["cssContentSize"];
                    json!({"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1})
                }
            };
            params["clip"] = clip;
            params["captureBeyondViewport"] = json!(true);
        }
        let main = LiveFrame::main(session, id);
        let mut labelled = None;
        if request.labels {
            let refs = self.refs().get(&profile.name, id).map(|t| t.refs.len()).ok_or_else(|| {
                ControlError::BadRequest("labels need refs: take a snapshot of this tab first".into())
            })?;
            let shown = page::call_script(conn, &main, "showLabels", json!({"max": MAX_LABELS}), true).await?;
            let labels = shown["labels"].as_u64().unwrap_or_default();
            labelled = Some((labels, (refs as u64).saturating_sub(labels)));
        }
        let shot = conn.client().call("Page.captureScreenshot", params, Some(session)).await;
        if labelled.is_some() {
            // Always taken down, also when the capture failed.
            page::call_script(conn, &main, "hideLabels", json!(null), true).await?;
        }
        let shot = shot.map_err(ControlError::cdp(&profile.name))?;
        let data = base64::engine::general_purpose::STANDARD
            .decode(shot["data"].as_str().unwrap_or_default())
            .map_err(|e| ControlError::Page(format!("the screenshot is not base64: {e}")))?;
        let (width, height) = image_size(&data).unwrap_or((0, 0));
        let path = self.save_media("screenshot", request.image_type.extension(), &data)?;
        Ok(Screenshot {
            target_id: id.clone(),
            path,
            width,
            height,
            bytes: data.len(),
            mime: request.image_type.mime(),
            labels: labelled.map(|(labels, _)| labels),
            skipped: labelled.map(|(_, skipped)| skipped),
            data,
        })
    }

    async fn selector_box(
        &self,
        conn: &Conn,
        tab: &str,
        session: &str,
        selector: &str,
    ) -> Result<ElementBox, ControlError> {
        let frame = LiveFrame::main(session, tab);
        let found = page::call_script(conn, &frame, "selectorBox", json!(selector), true).await?;
        if found.is_null() {
            return Err(ControlError::NoSuchElement(selector.to_string()));
        }
        if let Some(error) = found["error"].as_str() {
            return Err(ControlError::BadRequest(format!("selector '{selector}': {error}")));
        }
        Ok(ElementBox {
            x: found["x"].as_f64().unwrap_or_default(),
            y: found["y"].as_f64().unwrap_or_default(),
            width: found["width"].as_f64().unwrap_or_default(),
            height: found["height"].as_f64().unwrap_or_default(),
        })
    }

    pub(super) fn save_media(&self, kind: &str, extension: &str, data: &[u8]) -> Result<PathBuf, ControlError> {
        let dir = self.media_dir();
        std::fs::create_dir_all(&dir).map_err(|source| ControlError::Io { path: dir.clone(), source })?;
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        let mut random = [0u8; 3];
        let _ = getrandom::fill(&mut random);
        let suffix: String = random.iter().map(|b| format!("{b:02x}")).collect();
        let path = dir.join(format!("{kind}-{}-{suffix}.{extension}", now.as_millis()));
        std::fs::write(&path, data).map_err(|source| ControlError::Io { path: path.clone(), source })?;
        Ok(path)
    }

    /// `GET /console`: the tab's newest messages at or above `level`, and
    /// its page errors.
    pub async fn console(
        &self,
        profile: Option<&str>,
        target_id: Option<&str>,
        level: Option<&str>,
        limit: Option<usize>,
    ) -> Result<ConsoleReport, ControlError> {
        let min = match level {
            None => 0,
            Some(level) => level_rank(level).ok_or_else(|| {
                ControlError::BadRequest(format!("unknown level '{level}': use debug, log, info, warning or error"))
            })?,
        };
        let (_, conn, id) = self.tab(profile, target_id).await?;
        self.session(&conn, &id).await?;
        let (messages, errors) = conn.console(&id).unwrap_or_default();
        let keep = limit.unwrap_or(usize::MAX);
        let messages: Vec<_> = messages.into_iter().filter(|m| level_rank(m.level).unwrap_or(0) >= min).collect();
        let skip = messages.len().saturating_sub(keep);
        let error_skip = errors.len().saturating_sub(keep);
        Ok(ConsoleReport {
            target_id: id,
            messages: messages.into_iter().skip(skip).collect(),
            page_errors: errors.into_iter().skip(error_skip).collect(),
        })
    }

    /// Drops the profile's connection, as a lost connection would (tests
    /// check that refs survive it).
    pub async fn disconnect(&self, profile: &str) {
        if let Some(conn) = self.0.conns.lock().await.remove(profile) {
            conn.client().close();
        }
    }
}

fn tab_list(tabs: &[TabInfo]) -> String {
    if tabs.is_empty() {
        return "none".into();
    }
    tabs.iter().map(|t| format!("{} ({})", t.target_id, t.url)).collect::<Vec<_>>().join(", ")
}

fn level_rank(level: &str) -> Option<u8> {
    Some(match level {
        "debug" => 0,
        "log" | "info" => 1,
        "warning" | "warn" => 2,
        "error" => 3,
        _ => return None,
    })
}

fn clamp_timeout(ms: Option<u64>, default: Duration) -> Duration {
    ms.map_or(default, |ms| Duration::from_millis(ms.clamp(100, MAX_TIMEOUT_MS)))
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

/// Width and height of a PNG or JPEG.
pub fn image_size(data: &[u8]) -> Option<(u32, u32)> {
    if data.starts_with(b"\x89PNG\r\n\x1a\n") && data.len() >= 24 {
        let w = u32::from_be_bytes(data[16..20].try_into().ok()?);
        let h = u32::from_be_bytes(data[20..24].try_into().ok()?);
        return Some((w, h));
    }
    if data.starts_with(&[0xFF, 0xD8]) {
        let mut i = 2;
        while i + 9 < data.len() {
            if data[i] != 0xFF {
                i += 1;
                continue;
            }
            let marker = data[i + 1];
            let length = usize::from(u16::from_be_bytes([data[i + 2], data[i + 3]]));
            // SOF0..SOF15 except DHT (C4), JPG (C8) and DAC (CC).
            if (0xC0..=0xCF).contains(&marker) && ![0xC4, 0xC8, 0xCC].contains(&marker) {
                let h = u32::from(u16::from_be_bytes([data[i + 5], data[i + 6]]));
                let w = u32::from(u16::from_be_bytes([data[i + 7], data[i + 8]]));
                return Some((w, h));
            }
            i += 2 + length;
        }
    }
    None
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
    fn image_sizes_from_headers() {
        let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
        png.extend_from_slice(&800u32.to_be_bytes());
        png.extend_from_slice(&600u32.to_be_bytes());
        assert_eq!(image_size(&png), Some((800, 600)));
        // SOI, an APP0 segment of length 4, then SOF0 with 17×9.
        let jpeg = [
            0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x04, 0x00, 0x00, 0xFF, 0xC0, 0x00, 0x11, 0x08, 0x00, 0x09, 0x00, 0x11, 0x03,
        ];
        assert_eq!(image_size(&jpeg), Some((17, 9)));
        assert_eq!(image_size(b"GIF89a"), None);
    }

    #[test]
    fn timeouts_are_clamped() {
        assert_eq!(clamp_timeout(None, NAVIGATE_TIMEOUT), NAVIGATE_TIMEOUT);
        assert_eq!(clamp_timeout(Some(1), NAVIGATE_TIMEOUT), Duration::from_millis(100));
        assert_eq!(clamp_timeout(Some(10_000_000), NAVIGATE_TIMEOUT), Duration::from_millis(MAX_TIMEOUT_MS));
    }

    #[test]
    fn console_levels_are_ordered() {
        assert!(level_rank("error") > level_rank("warning"));
        assert!(level_rank("warning") > level_rank("log"));
        assert_eq!(level_rank("info"), level_rank("log"));
        assert_eq!(level_rank("loud"), None);
    }
}
