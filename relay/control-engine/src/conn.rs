//! One persistent CDP connection per profile, and what the engine learns
//! from its events: the tabs, their sessions (out-of-process iframes
//! included), the isolated worlds the snapshot script lives in, and each
//! tab's console. The same code serves both drivers: a managed Chrome's own
//! browser endpoint and the relay's `/cdp` for the user's shared tabs.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::{broadcast, watch};

use cdp_client::{CdpClient, CdpError, CdpEvent};

use crate::api::{ConsoleMessage, DialogInfo, PageError, TabInfo};

/// The isolated world the snapshot script runs in (invisible to the page).
pub const WORLD_NAME: &str = "browser-relay";
/// Console messages kept per tab.
pub const CONSOLE_KEPT: usize = 500;
/// Page errors kept per tab.
pub const PAGE_ERRORS_KEPT: usize = 200;
/// How long a new tab may take to be attached and set up.
const ATTACH_WITHIN: Duration = Duration::from_secs(10);

/// The answer armed for a tab's next dialog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DialogHook {
    pub accept: bool,
    pub prompt_text: Option<String>,
    pub until: tokio::time::Instant,
}

/// The files armed for a tab's next file chooser.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileHook {
    pub paths: Vec<String>,
    pub until: tokio::time::Instant,
}

#[derive(Debug)]
struct Tab {
    title: String,
    url: String,
    kind: String,
    session: Option<String>,
    attaching: bool,
    /// Attached and its domains enabled.
    ready: bool,
    console: VecDeque<ConsoleMessage>,
    errors: VecDeque<PageError>,
    /// An open dialog nobody has answered yet.
    dialog: Option<DialogInfo>,
    dialog_hook: Option<DialogHook>,
    file_hook: Option<FileHook>,
    /// Lifecycle events (`DOMContentLoaded`, `load`, `networkIdle`, …) the
    /// main frame's current document has reached; a new document starts
    /// over with `init`.
    lifecycle: Vec<String>,
}

#[derive(Debug, Clone)]
struct SessionInfo {
    /// The tab this session belongs to.
    tab: String,
    /// The session's own target (the tab, or an out-of-process iframe).
    target: String,
}

#[derive(Debug, Default)]
struct State {
    tabs: HashMap<String, Tab>,
    /// Tabs in the order they were first seen.
    order: Vec<String>,
    sessions: HashMap<String, SessionInfo>,
    /// (session, frame id) → execution context of our isolated world.
    worlds: HashMap<(String, String), i64>,
}

/// A live connection. Cheap to share; dropping the last handle closes it.
#[derive(Debug)]
pub struct Conn {
    pub profile: String,
    client: CdpClient,
    state: Mutex<State>,
    changed: watch::Sender<u64>,
    events: broadcast::Sender<Arc<CdpEvent>>,
    /// Events handled (state updated and broadcast) so far.
    pumped: std::sync::atomic::AtomicU64,
}

impl Conn {
    /// Connects to a browser-level CDP endpoint, discovers its tabs and
    /// attaches to each of them before returning.
    pub async fn connect(profile: &str, ws_url: &str) -> Result<Arc<Self>, CdpError> {
        let client = CdpClient::connect(ws_url).await?.with_timeout(Duration::from_secs(30));
        let mut events = client.take_events().expect("a fresh client has its events");
        let conn = Arc::new(Self {
            profile: profile.to_string(),
            client,
            state: Mutex::new(State::default()),
            changed: watch::channel(0).0,
            events: broadcast::channel(1024).0,
            pumped: std::sync::atomic::AtomicU64::new(0),
        });
        let weak = Arc::downgrade(&conn);
        tokio::spawn(async move {
            while let Some(event) = events.recv().await {
                let Some(conn) = weak.upgrade() else { break };
                conn.on_event(event);
            }
            if let Some(conn) = weak.upgrade() {
                conn.changed.send_modify(|v| *v += 1);
            }
        });
        conn.client.call("Target.setDiscoverTargets", json!({"discover": true}), None).await?;
        let targets = conn.client.call("Target.getTargets", json!({}), None).await?;
        let pages: Vec<Value> = targets["targetInfos"]
            .as_array()
            .map(|infos| infos.iter().filter(|i| is_tab(i)).cloned().collect())
            .unwrap_or_default();
        for info in &pages {
            conn.track_target(info);
        }
        let waits = pages.iter().filter_map(|info| info["targetId"].as_str()).map(|id| conn.ready_tab(id));
        for result in futures_util::future::join_all(waits).await {
            // A tab that closed meanwhile is not an error of the connection.
            if let Err(error @ (CdpError::Closed(_) | CdpError::Connect { .. })) = result {
                return Err(error);
            }
        }
        Ok(conn)
    }

    pub fn is_closed(&self) -> bool {
        self.client.is_closed()
    }

    pub fn client(&self) -> &CdpClient {
        &self.client
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Events from now on (for waiting on lifecycle events and the like).
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<CdpEvent>> {
        self.events.subscribe()
    }

    /// The tabs, with titles and URLs fresh from the browser (change events
    /// can trail a load by a moment).
    pub async fn refreshed_tabs(&self, current: Option<&str>) -> Result<Vec<TabInfo>, CdpError> {
        let targets = self.client.call("Target.getTargets", json!({}), None).await?;
        for info in targets["targetInfos"].as_array().into_iter().flatten() {
            let mut state = self.state();
            if let Some(tab) = info["targetId"].as_str().and_then(|id| state.tabs.get_mut(id)) {
                tab.title = info["title"].as_str().unwrap_or_default().to_string();
                tab.url = info["url"].as_str().unwrap_or_default().to_string();
            }
        }
        Ok(self.tabs(current))
    }

    /// The tabs in the order first seen; `current` is marked active.
    pub fn tabs(&self, current: Option<&str>) -> Vec<TabInfo> {
        let state = self.state();
        state
            .order
            .iter()
            .filter_map(|id| state.tabs.get(id).map(|tab| (id, tab)))
            .map(|(id, tab)| TabInfo {
                target_id: id.clone(),
                title: tab.title.clone(),
                url: tab.url.clone(),
                kind: tab.kind.clone(),
                active: current == Some(id.as_str()),
                dialog: tab.dialog.clone(),
            })
            .collect()
    }

    pub fn has_tab(&self, target_id: &str) -> bool {
        self.state().tabs.contains_key(target_id)
    }

    pub fn tab_url(&self, target_id: &str) -> Option<(String, String)> {
        self.state().tabs.get(target_id).map(|t| (t.url.clone(), t.title.clone()))
    }

    pub fn console(&self, target_id: &str) -> Option<(Vec<ConsoleMessage>, Vec<PageError>)> {
        let state = self.state();
        let tab = state.tabs.get(target_id)?;
        Some((tab.console.iter().cloned().collect(), tab.errors.iter().cloned().collect()))
    }

    /// The session of a target: a tab, or an out-of-process iframe of one.
    pub fn session_of(&self, target_id: &str) -> Option<String> {
        let state = self.state();
        if let Some(tab) = state.tabs.get(target_id) {
            return tab.session.clone();
        }
        state.sessions.iter().find(|(_, info)| info.target == target_id).map(|(session, _)| session.clone())
    }

    /// Waits until the tab is attached and set up; attaches it if nobody has.
    pub async fn ready_tab(self: &Arc<Self>, target_id: &str) -> Result<String, CdpError> {
        let mut changed = self.changed.subscribe();
        let deadline = tokio::time::Instant::now() + ATTACH_WITHIN;
        if !self.has_tab(target_id) {
            // A target we just learned from a reply (Target.createTarget) is
            // announced by an event the pump may not have handled yet.
            self.catch_up().await;
        }
        loop {
            let start_attach = {
                let mut state = self.state();
                let Some(tab) = state.tabs.get_mut(target_id) else {
                    return Err(CdpError::Protocol {
                        method: "Target.attachToTarget".into(),
                        code: -32000,
                        message: format!("no tab {target_id}"),
                    });
                };
                if tab.ready
                    && let Some(session) = &tab.session
                {
                    return Ok(session.clone());
                }
                let start = !tab.attaching;
                tab.attaching = true;
                start
            };
            if start_attach {
                let conn = self.clone();
                let id = target_id.to_string();
                tokio::spawn(async move { conn.attach(&id).await });
            }
            if self.is_closed() {
                return Err(CdpError::Closed("Target.attachToTarget".into()));
            }
            match tokio::time::timeout_at(deadline, changed.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return Err(CdpError::Closed("Target.attachToTarget".into())),
                Err(_) => return Err(CdpError::Timeout("Target.attachToTarget".into(), ATTACH_WITHIN)),
            }
        }
    }

    async fn attach(self: Arc<Self>, target_id: &str) {
        let attached =
            self.client.call("Target.attachToTarget", json!({"targetId": target_id, "flatten": true}), None).await;
        let session = match attached.map(|v| v["sessionId"].as_str().map(str::to_string)) {
            Ok(Some(session)) => session,
            Ok(None) | Err(_) => {
                if let Some(tab) = self.state().tabs.get_mut(target_id) {
                    tab.attaching = false;
                }
                tracing::debug!(target_id, "attach failed");
                self.changed.send_modify(|v| *v += 1);
                return;
            }
        };
        {
            let mut state = self.state();
            state
                .sessions
                .insert(session.clone(), SessionInfo { tab: target_id.to_string(), target: target_id.to_string() });
            if let Some(tab) = state.tabs.get_mut(target_id) {
                tab.session = Some(session.clone());
            }
        }
        self.enable_domains(&session, true).await;
        if let Some(tab) = self.state().tabs.get_mut(target_id) {
            tab.ready = true;
        }
        self.changed.send_modify(|v| *v += 1);
    }

    /// Page, Runtime (console, contexts), lifecycle events, and auto-attach
    /// so out-of-process iframes get sessions too.
    async fn enable_domains(&self, session: &str, is_tab: bool) {
        let s = Some(session);
        let mut calls = vec![
            self.client.start_call("Runtime.enable", json!({}), s),
            self.client.start_call(
                "Target.setAutoAttach",
                json!({"autoAttach": true, "waitForDebuggerOnStart": false, "flatten": true}),
                s,
            ),
        ];
        if is_tab {
            calls.push(self.client.start_call("Page.enable", json!({}), s));
            calls.push(self.client.start_call("Page.setLifecycleEventsEnabled", json!({"enabled": true}), s));
        } else {
            calls.push(self.client.start_call("Runtime.runIfWaitingForDebugger", json!({}), s));
        }
        for result in futures_util::future::join_all(calls).await {
            if let Err(error) = result {
                tracing::debug!(session, "enabling domains: {error}");
            }
        }
    }

    fn track_target(&self, info: &Value) {
        let Some(id) = info["targetId"].as_str() else { return };
        let mut state = self.state();
        if !state.tabs.contains_key(id) {
            state.order.push(id.to_string());
        }
        let tab = state.tabs.entry(id.to_string()).or_insert_with(|| Tab {
            title: String::new(),
            url: String::new(),
            kind: "page".into(),
            session: None,
            attaching: false,
            ready: false,
            console: VecDeque::new(),
            errors: VecDeque::new(),
            dialog: None,
            dialog_hook: None,
            file_hook: None,
            lifecycle: Vec::new(),
        });
        tab.title = info["title"].as_str().unwrap_or_default().to_string();
        tab.url = info["url"].as_str().unwrap_or_default().to_string();
        tab.kind = info["type"].as_str().unwrap_or("page").to_string();
    }

    fn forget_target(&self, target_id: &str) {
        let mut state = self.state();
        if state.tabs.remove(target_id).is_some() {
            state.order.retain(|id| id != target_id);
            let gone: Vec<String> =
                state.sessions.iter().filter(|(_, i)| i.tab == target_id).map(|(s, _)| s.clone()).collect();
            for session in gone {
                state.sessions.remove(&session);
                state.worlds.retain(|(s, _), _| *s != session);
            }
        }
    }

    /// The isolated world of a frame, if one is known.
    pub fn world(&self, session: &str, frame_id: &str) -> Option<i64> {
        self.state().worlds.get(&(session.to_string(), frame_id.to_string())).copied()
    }

    pub fn remember_world(&self, session: &str, frame_id: &str, context_id: i64) {
        self.state().worlds.insert((session.to_string(), frame_id.to_string()), context_id);
    }

    pub fn forget_world(&self, session: &str, frame_id: &str) {
        self.state().worlds.remove(&(session.to_string(), frame_id.to_string()));
    }

    /// Waits (bounded) until some session has `target_id` as its own
    /// target: an out-of-process iframe being auto-attached.
    pub async fn wait_for_session(&self, target_id: &str, within: Duration) -> Option<String> {
        let mut changed = self.changed.subscribe();
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if let Some(session) = self.session_of(target_id) {
                return Some(session);
            }
            if tokio::time::timeout_at(deadline, changed.changed()).await.is_err() || self.is_closed() {
                return None;
            }
        }
    }

    fn on_event(self: &Arc<Self>, event: CdpEvent) {
        let params = &event.params;
        let session = event.session_id.as_deref();
        match event.method.as_str() {
            "Target.targetCreated" if is_tab(&params["targetInfo"]) => {
                self.track_target(&params["targetInfo"]);
                // Attach at once: the console is collected from the moment
                // the engine sees a tab.
                if let Some(id) = params["targetInfo"]["targetId"].as_str() {
                    let conn = self.clone();
                    let id = id.to_string();
                    tokio::spawn(async move {
                        let _ = conn.ready_tab(&id).await;
                    });
                }
            }
            "Target.targetInfoChanged" => {
                let info = &params["targetInfo"];
                let mut state = self.state();
                if let Some(tab) = info["targetId"].as_str().and_then(|id| state.tabs.get_mut(id)) {
                    tab.title = info["title"].as_str().unwrap_or_default().to_string();
                    tab.url = info["url"].as_str().unwrap_or_default().to_string();
                }
            }
            "Target.targetDestroyed" => {
                if let Some(id) = params["targetId"].as_str() {
                    self.forget_target(id);
                }
            }
            "Target.attachedToTarget" => {
                let (Some(child), Some(target)) =
                    (params["sessionId"].as_str(), params["targetInfo"]["targetId"].as_str())
                else {
                    return;
                };
                let mut state = self.state();
                let tab = match session.and_then(|s| state.sessions.get(s)) {
                    Some(parent) => parent.tab.clone(),
                    None => target.to_string(),
                };
                state.sessions.insert(child.to_string(), SessionInfo { tab, target: target.to_string() });
                drop(state);
                if session.is_some() {
                    // An iframe (or worker) of a tab: collect its console and
                    // let it run.
                    let conn = self.clone();
                    let child = child.to_string();
                    tokio::spawn(async move { conn.enable_domains(&child, false).await });
                }
            }
            "Target.detachedFromTarget" => {
                if let Some(gone) = params["sessionId"].as_str() {
                    let mut state = self.state();
                    if let Some(info) = state.sessions.remove(gone)
                        && info.tab == info.target
                        && let Some(tab) = state.tabs.get_mut(&info.tab)
                        && tab.session.as_deref() == Some(gone)
                    {
                        tab.session = None;
                        tab.ready = false;
                        tab.attaching = false;
                    }
                    state.worlds.retain(|(s, _), _| s != gone);
                }
            }
            "Runtime.executionContextCreated" => {
                let context = &params["context"];
                if context["name"] == WORLD_NAME
                    && let (Some(session), Some(frame), Some(id)) =
                        (session, context["auxData"]["frameId"].as_str(), context["id"].as_i64())
                {
                    self.remember_world(session, frame, id);
                }
            }
            "Runtime.executionContextDestroyed" => {
                if let (Some(session), Some(id)) = (session, params["executionContextId"].as_i64()) {
                    self.state().worlds.retain(|(s, _), context| !(s == session && *context == id));
                }
            }
            "Runtime.executionContextsCleared" => {
                if let Some(session) = session {
                    self.state().worlds.retain(|(s, _), _| s != session);
                }
            }
            "Page.javascriptDialogOpening" => {
                if let Some(session) = session {
                    let info = DialogInfo {
                        kind: params["type"].as_str().unwrap_or("alert").to_string(),
                        message: params["message"].as_str().unwrap_or_default().to_string(),
                        default_prompt: params["defaultPrompt"].as_str().map(str::to_string),
                    };
                    let mut hook = None;
                    self.with_tab_of(session, |tab| {
                        hook = tab.dialog_hook.take().filter(|h| h.until > tokio::time::Instant::now());
                        if hook.is_none() {
                            tab.dialog = Some(info);
                        }
                    });
                    if let Some(hook) = hook {
                        self.answer_dialog(session, hook.accept, hook.prompt_text);
                    }
                }
            }
            "Page.lifecycleEvent" => {
                // Only the main frame's (its id is the tab's target id);
                // iframes have lifecycles of their own.
                if let (Some(session), Some(frame), Some(name)) =
                    (session, params["frameId"].as_str(), params["name"].as_str())
                    && let Some(tab) = self.state().tabs.get_mut(frame)
                    && tab.session.as_deref() == Some(session)
                {
                    record_lifecycle(&mut tab.lifecycle, name);
                }
            }
            "Page.javascriptDialogClosed" => {
                if let Some(session) = session {
                    self.with_tab_of(session, |tab| tab.dialog = None);
                }
            }
            "Page.fileChooserOpened" => {
                if let Some(session) = session {
                    let mut hook = None;
                    self.with_tab_of(session, |tab| {
                        hook = tab.file_hook.take().filter(|h| h.until > tokio::time::Instant::now());
                    });
                    let conn = self.clone();
                    let session = session.to_string();
                    let node = params["backendNodeId"].clone();
                    tokio::spawn(async move {
                        if let Some(hook) = hook {
                            let set = json!({"files": hook.paths, "backendNodeId": node});
                            if let Err(error) = conn.client.call("DOM.setFileInputFiles", set, Some(&session)).await {
                                tracing::warn!("setting the armed files failed: {error}");
                            }
                        }
                        // One chooser per arm: later ones open normally again.
                        let off = json!({"enabled": false});
                        let _ = conn.client.call("Page.setInterceptFileChooserDialog", off, Some(&session)).await;
                    });
                }
            }
            "Runtime.consoleAPICalled" => {
                if let Some(session) = session {
                    let message = console_message(params);
                    self.with_tab_of(session, |tab| push_bounded(&mut tab.console, message, CONSOLE_KEPT));
                }
            }
            "Runtime.exceptionThrown" => {
                if let Some(session) = session {
                    let error = page_error(params);
                    self.with_tab_of(session, |tab| push_bounded(&mut tab.errors, error, PAGE_ERRORS_KEPT));
                }
            }
            _ => {}
        }
        let _ = self.events.send(Arc::new(event));
        self.pumped.fetch_add(1, std::sync::atomic::Ordering::Release);
        self.changed.send_modify(|v| *v += 1);
    }

    /// Waits (briefly) until every event that arrived before the last reply
    /// has been handled and broadcast: replies overtake the event pump, and
    /// what a command caused (a navigation, a dialog) comes as events.
    pub async fn catch_up(&self) {
        let target = self.client.events_sent();
        let mut changed = self.changed.subscribe();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(1);
        while self.pumped.load(std::sync::atomic::Ordering::Acquire) < target {
            if tokio::time::timeout_at(deadline, changed.changed()).await.is_err() || self.is_closed() {
                return;
            }
        }
    }

    fn answer_dialog(&self, session: &str, accept: bool, prompt_text: Option<String>) {
        let mut params = json!({"accept": accept});
        if let Some(text) = prompt_text {
            params["promptText"] = json!(text);
        }
        self.client.call_with("Page.handleJavaScriptDialog", params, Some(session), |result| {
            if let Err(error) = result {
                tracing::debug!("answering a dialog: {error}");
            }
        });
    }

    /// Whether the tab's current document has reached a lifecycle event
    /// (`load`, `networkIdle`, …).
    pub fn reached(&self, target_id: &str, lifecycle_event: &str) -> bool {
        self.state().tabs.get(target_id).is_some_and(|t| t.lifecycle.iter().any(|e| e == lifecycle_event))
    }

    /// The tab's unanswered dialog, if one is open.
    pub fn open_dialog(&self, target_id: &str) -> Option<DialogInfo> {
        self.state().tabs.get(target_id).and_then(|t| t.dialog.clone())
    }

    /// Arms the answer to the tab's next dialog (the last arm wins); a dialog
    /// already waiting is answered at once. Returns that dialog, if any.
    pub fn arm_dialog(&self, target_id: &str, hook: DialogHook) -> Option<DialogInfo> {
        let (open, session) = {
            let mut state = self.state();
            let tab = state.tabs.get_mut(target_id)?;
            match tab.dialog.take() {
                Some(open) => (Some(open), tab.session.clone()),
                None => {
                    tab.dialog_hook = Some(hook.clone());
                    (None, None)
                }
            }
        };
        if let (Some(_), Some(session)) = (&open, session) {
            self.answer_dialog(&session, hook.accept, hook.prompt_text);
        }
        open
    }

    /// Arms the files for the tab's next file chooser (the last arm wins)
    /// and intercepts choosers until one opens.
    pub async fn arm_file_chooser(
        self: &Arc<Self>,
        target_id: &str,
        session: &str,
        hook: FileHook,
    ) -> Result<(), CdpError> {
        let until = hook.until;
        if let Some(tab) = self.state().tabs.get_mut(target_id) {
            tab.file_hook = Some(hook.clone());
        }
        self.client.call("Page.setInterceptFileChooserDialog", json!({"enabled": true}), Some(session)).await?;
        // Unused when it expires: stop intercepting, so the user's own
        // clicks open choosers again.
        let (conn, target, session) = (Arc::downgrade(self), target_id.to_string(), session.to_string());
        tokio::spawn(async move {
            tokio::time::sleep_until(until).await;
            let Some(conn) = conn.upgrade() else { return };
            let still_armed = conn.state().tabs.get_mut(&target).is_some_and(|tab| {
                let same = tab.file_hook.as_ref() == Some(&hook);
                if same {
                    tab.file_hook = None;
                }
                same
            });
            if still_armed {
                let off = json!({"enabled": false});
                let _ = conn.client.call("Page.setInterceptFileChooserDialog", off, Some(&session)).await;
            }
        });
        Ok(())
    }

    fn with_tab_of(&self, session: &str, f: impl FnOnce(&mut Tab)) {
        let mut state = self.state();
        let Some(tab_id) = state.sessions.get(session).map(|i| i.tab.clone()) else { return };
        if let Some(tab) = state.tabs.get_mut(&tab_id) {
            f(tab);
        }
    }
}

/// Targets the engine treats as tabs: pages, but not DevTools windows.
fn is_tab(info: &Value) -> bool {
    info["type"] == "page" && !info["url"].as_str().unwrap_or_default().starts_with("devtools://")
}

fn push_bounded<T>(queue: &mut VecDeque<T>, item: T, max: usize) {
    if queue.len() == max {
        queue.pop_front();
    }
    queue.push_back(item);
}

fn console_message(params: &Value) -> ConsoleMessage {
    let kind = params["type"].as_str().unwrap_or("log").to_string();
    let level = match kind.as_str() {
        "error" | "assert" => "error",
        "warning" => "warning",
        "info" => "info",
        "debug" => "debug",
        _ => "log",
    };
    let text = params["args"]
        .as_array()
        .map(|args| args.iter().map(remote_object_text).collect::<Vec<_>>().join(" "))
        .unwrap_or_default();
    ConsoleMessage {
        level: level.into(),
        kind,
        text,
        timestamp: params["timestamp"].as_f64().unwrap_or_default(),
        location: params["stackTrace"]["callFrames"].get(0).map(location),
    }
}

/// `init` starts a new document; other events add to what it reached.
fn record_lifecycle(reached: &mut Vec<String>, name: &str) {
    if name == "init" {
        reached.clear();
    }
    if !reached.iter().any(|e| e == name) {
        reached.push(name.to_string());
    }
}

fn page_error(params: &Value) -> PageError {
    let details = &params["exceptionDetails"];
    let message = details["exception"]["description"]
        .as_str()
        .or_else(|| details["exception"]["value"].as_str())
        .or_else(|| details["text"].as_str())
        .unwrap_or("unknown error")
        .to_string();
    let location = details["url"].as_str().filter(|u| !u.is_empty()).map(|_| location(details));
    PageError { message, timestamp: params["timestamp"].as_f64().unwrap_or_default(), location }
}

fn location(frame: &Value) -> String {
    format!(
        "{}:{}:{}",
        frame["url"].as_str().unwrap_or_default(),
        frame["lineNumber"].as_i64().unwrap_or_default() + 1,
        frame["columnNumber"].as_i64().unwrap_or_default() + 1
    )
}

/// A console argument as Chrome's console prints it, roughly.
fn remote_object_text(object: &Value) -> String {
    match &object["value"] {
        Value::String(s) => s.clone(),
        Value::Null if object.get("value").is_none() => object["description"]
            .as_str()
            .or_else(|| object["unserializableValue"].as_str())
            .unwrap_or(object["type"].as_str().unwrap_or_default())
            .to_string(),
        value => value.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn console_arguments_read_like_the_console() {
        let params = json!({
            "type": "warning",
            "args": [
                {"type": "string", "value": "count"},
                {"type": "number", "value": 3},
                {"type": "object", "description": "Object"},
                {"type": "undefined"},
                {"type": "number", "unserializableValue": "NaN"}
            ],
            "timestamp": 1.5,
            "stackTrace": {"callFrames": [{"url": "http://x/a.js", "lineNumber": 9, "columnNumber": 0}]}
        });
        let message = console_message(&params);
        assert_eq!(message.level, "warning");
        assert_eq!(message.text, "count 3 Object undefined NaN");
        assert_eq!(message.location.as_deref(), Some("http://x/a.js:10:1"));
    }

    #[test]
    fn console_buffers_keep_the_newest() {
        assert_eq!((CONSOLE_KEPT, PAGE_ERRORS_KEPT), (500, 200), "the documented sizes");
        for kept in [CONSOLE_KEPT, PAGE_ERRORS_KEPT] {
            let mut queue = VecDeque::new();
            for i in 0..kept + 10 {
                push_bounded(&mut queue, i, kept);
            }
            assert_eq!(queue.len(), kept);
            assert_eq!(queue.front(), Some(&10));
        }
    }

    #[test]
    fn a_new_document_starts_its_lifecycle_over() {
        let mut reached = Vec::new();
        for name in ["init", "DOMContentLoaded", "load", "networkAlmostIdle", "networkIdle", "load"] {
            record_lifecycle(&mut reached, name);
        }
        assert_eq!(reached, ["init", "DOMContentLoaded", "load", "networkAlmostIdle", "networkIdle"]);
        record_lifecycle(&mut reached, "init");
        assert_eq!(reached, ["init"], "the next document has reached nothing yet");
    }

    #[test]
    fn uncaught_errors_keep_their_description() {
        let params = json!({"timestamp": 2.0, "exceptionDetails": {
            "text": "Uncaught", "url": "http://x/p.html", "lineNumber": 0, "columnNumber": 4,
            "exception": {"description": "Error: boom\n    at http://x/p.html:1:5"}}});
        let error = page_error(&params);
        assert!(error.message.starts_with("Error: boom"));
        assert_eq!(error.location.as_deref(), Some("http://x/p.html:1:5"));
    }
}
