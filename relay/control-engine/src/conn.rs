//! One persistent CDP connection per profile, and what the engine learns
//! from its events: the tabs, their sessions (out-of-process iframes
//! included), the isolated worlds the snapshot script lives in, and each
//! tab's console (the page's and Chrome's own messages) and network log.
//! The same code serves both drivers: a managed Chrome's own
//! browser endpoint and the relay's `/cdp` for the user's shared tabs.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{broadcast, watch};

use cdp_client::protocol::{Command as _, Event as _, dom, input, log, network, page, runtime, target};
use cdp_client::{CdpClient, CdpError, CdpEvent};

use crate::api::{ConsoleMessage, DialogInfo, NetworkRequest, PageError, TabInfo, Trouble};
use crate::network::{NetworkLog, Recorded};

/// The isolated world the snapshot script runs in (invisible to the page).
pub(crate) const WORLD_NAME: &str = "browser-relay";
/// Console messages kept per tab.
pub(crate) const CONSOLE_KEPT: usize = 500;
/// Page errors kept per tab.
pub(crate) const PAGE_ERRORS_KEPT: usize = 200;
/// Console errors (and page errors) kept for the next action's answer.
pub(crate) const NEWS_KEPT: usize = 5;
/// Characters of one such error kept.
const NEWS_CHARS: usize = 300;
/// Bytes of one console message's text (or page error's message, or
/// location) kept: a page that logs huge strings must not pin the relay's
/// memory (500 messages of a tab at this size are 8 MiB at most).
pub(crate) const ENTRY_BYTES: usize = 16 * 1024;

/// `text` within [`ENTRY_BYTES`], with what was cut said at its end.
fn kept(text: String) -> String {
    if text.len() <= ENTRY_BYTES {
        return text;
    }
    let mut kept = Kept::default();
    kept.push(&text);
    kept.done()
}

/// Text built piece by piece within [`ENTRY_BYTES`]: what does not fit is
/// counted, never copied. The kept text is an allocation of its own size:
/// cutting a page's 8 MB string in place (`String::truncate`) would keep
/// the whole 8 MB allocation behind 16 KiB of text, and a console of such
/// messages pinned the whole flood in serve's memory (issue 46).
#[derive(Debug, Default)]
struct Kept {
    text: String,
    /// Bytes left out so far; once something is, everything after it is.
    cut: usize,
}

impl Kept {
    fn push(&mut self, piece: &str) {
        let room = if self.cut > 0 { 0 } else { ENTRY_BYTES - self.text.len() };
        let end = if piece.len() <= room {
            piece.len()
        } else {
            (0..=room).rev().find(|&i| piece.is_char_boundary(i)).unwrap_or(0)
        };
        self.text.push_str(&piece[..end]);
        self.cut += piece.len() - end;
    }

    fn done(mut self) -> String {
        if self.cut > 0 {
            self.text.push_str(&format!("… [{} more bytes cut]", self.cut));
            self.text.shrink_to_fit();
        }
        self.text
    }
}

/// How long a new tab may take to be attached and set up.
const ATTACH_WITHIN: Duration = Duration::from_secs(10);

/// How long a command's answer is awaited.
pub(crate) const COMMAND_PATIENCE: Duration = Duration::from_secs(30);

/// The answer armed for a tab's next dialog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DialogHook {
    pub accept: bool,
    pub prompt_text: Option<String>,
    pub until: tokio::time::Instant,
}

/// The files armed for a tab's next file chooser.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileHook {
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
    /// The page's console calls and Chrome's own messages, in time order.
    console: VecDeque<ConsoleMessage>,
    errors: VecDeque<PageError>,
    network: NetworkLog,
    /// An open dialog nobody has answered yet.
    dialog: Option<DialogInfo>,
    dialog_hook: Option<DialogHook>,
    file_hook: Option<FileHook>,
    /// Lifecycle events (`DOMContentLoaded`, `load`, `networkIdle`, …) the
    /// main frame's current document has reached; a new document starts
    /// over with `init`.
    lifecycle: Vec<String>,
    /// What went wrong since an answer last reported it.
    news: TabNews,
}

/// What went wrong on a tab since the last action's answer said so: the
/// newest few console errors and uncaught exceptions, and failed requests
/// (HTTP errors and loads that failed), each with how many more.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct TabNews {
    pub console_errors: VecDeque<String>,
    /// Errors beyond the ones kept.
    pub more_console_errors: usize,
    pub failed_requests: VecDeque<String>,
    pub more_failed_requests: usize,
}

impl TabNews {
    fn failed_request(&mut self, line: String) {
        self.more_failed_requests += usize::from(push_bounded(&mut self.failed_requests, line, NEWS_KEPT));
    }

    fn console_error(&mut self, text: &str) {
        // One line, bounded: a stack trace or a logged document would crowd
        // out the answer it rides on (GET /console has the whole text).
        let mut text = text.lines().next().unwrap_or_default().to_string();
        if text.len() > NEWS_CHARS {
            let end = (0..=NEWS_CHARS).rev().find(|&i| text.is_char_boundary(i)).unwrap_or(0);
            text.truncate(end);
            text.push('…');
        }
        self.more_console_errors += usize::from(push_bounded(&mut self.console_errors, text, NEWS_KEPT));
    }
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
pub(crate) struct Conn {
    pub profile: String,
    client: CdpClient,
    state: Mutex<State>,
    changed: watch::Sender<u64>,
    events: broadcast::Sender<Arc<CdpEvent>>,
    /// Events handled (state updated and broadcast) so far.
    pumped: std::sync::atomic::AtomicU64,
}

impl Conn {
    /// Over a connected client (the relay's `/cdp`, a session on a
    /// managed browser's pipe): discovers the browser's tabs and attaches to
    /// each of them before returning. Each command's answer is awaited for
    /// `patience` ([`COMMAND_PATIENCE`], more for a grant's held actions).
    pub(crate) async fn over(profile: &str, client: CdpClient, patience: Duration) -> Result<Arc<Self>, CdpError> {
        let client = client.with_timeout(patience);
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
        conn.client.send(&target::SetDiscoverTargets { discover: true }, None).await?;
        let targets = conn.client.send(&target::GetTargets {}, None).await?;
        let pages: Vec<target::TargetInfo> = targets.target_infos.into_iter().filter(is_tab).collect();
        for info in &pages {
            conn.track_target(info);
        }
        let waits = pages.iter().map(|info| conn.ready_tab(&info.target_id));
        for result in futures_util::future::join_all(waits).await {
            // A tab that closed meanwhile is not an error of the connection.
            if let Err(error @ (CdpError::Closed(_) | CdpError::Connect { .. })) = result {
                return Err(error);
            }
        }
        Ok(conn)
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.client.is_closed()
    }

    pub(crate) fn client(&self) -> &CdpClient {
        &self.client
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Events from now on (for waiting on lifecycle events and the like):
    /// the parameters only of [`READ_BY_SUBSCRIBERS`].
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Arc<CdpEvent>> {
        self.events.subscribe()
    }

    /// The tabs, with titles and URLs fresh from the browser (change events
    /// can trail a load by a moment).
    pub(crate) async fn refreshed_tabs(&self, current: Option<&str>) -> Result<Vec<TabInfo>, CdpError> {
        let targets = self.client.send(&target::GetTargets {}, None).await?;
        for info in targets.target_infos {
            let mut state = self.state();
            if let Some(tab) = state.tabs.get_mut(&info.target_id) {
                tab.title = info.title;
                tab.url = info.url;
            }
        }
        Ok(self.tabs(current))
    }

    /// The tabs in the order first seen; `current` is marked active.
    pub(crate) fn tabs(&self, current: Option<&str>) -> Vec<TabInfo> {
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

    pub(crate) fn has_tab(&self, target_id: &str) -> bool {
        self.state().tabs.contains_key(target_id)
    }

    pub(crate) fn tab_url(&self, target_id: &str) -> Option<(String, String)> {
        self.state().tabs.get(target_id).map(|t| (t.url.clone(), t.title.clone()))
    }

    pub(crate) fn console(&self, target_id: &str) -> Option<(Vec<ConsoleMessage>, Vec<PageError>)> {
        let state = self.state();
        let tab = state.tabs.get(target_id)?;
        Some((tab.console.iter().cloned().collect(), tab.errors.iter().cloned().collect()))
    }

    /// What went wrong on the tab since the last call, which starts the
    /// count over.
    pub(crate) fn take_news(&self, target_id: &str) -> Trouble {
        let news = self.state().tabs.get_mut(target_id).map(|tab| std::mem::take(&mut tab.news)).unwrap_or_default();
        Trouble {
            console_errors: news.console_errors.into(),
            more_console_errors: news.more_console_errors,
            failed_requests: news.failed_requests.into(),
            more_failed_requests: news.more_failed_requests,
        }
    }

    /// The tab's requests, oldest first, and its current page.
    pub(crate) fn requests(&self, target_id: &str) -> Option<(Vec<NetworkRequest>, u32)> {
        self.state().tabs.get(target_id).map(|tab| (tab.network.requests(), tab.network.page()))
    }

    /// A mark in the tab's network log: [`Self::in_flight_since`] counts
    /// the requests sent after it.
    pub(crate) fn network_mark(&self, target_id: &str) -> u64 {
        self.state().tabs.get(target_id).map_or(0, |tab| tab.network.mark())
    }

    /// Requests of the tab sent since `mark` that are still in flight.
    pub(crate) fn in_flight_since(&self, target_id: &str, mark: u64) -> usize {
        self.state().tabs.get(target_id).map_or(0, |tab| tab.network.in_flight_since(mark))
    }

    /// A request of the tab (its last hop), and the session that saw it.
    pub(crate) fn request(&self, target_id: &str, request_id: &str) -> Option<Recorded> {
        self.state().tabs.get(target_id)?.network.find(request_id).cloned()
    }

    /// The session of a target: a tab, or an out-of-process iframe of one.
    pub(crate) fn session_of(&self, target_id: &str) -> Option<String> {
        let state = self.state();
        if let Some(tab) = state.tabs.get(target_id) {
            return tab.session.clone();
        }
        state.sessions.iter().find(|(_, info)| info.target == target_id).map(|(session, _)| session.clone())
    }

    /// Waits until the tab is attached and set up; attaches it if nobody has.
    pub(crate) async fn ready_tab(self: &Arc<Self>, target_id: &str) -> Result<String, CdpError> {
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
                        method: target::AttachToTarget::METHOD.into(),
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
                return Err(CdpError::Closed(target::AttachToTarget::METHOD.into()));
            }
            match tokio::time::timeout_at(deadline, changed.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return Err(CdpError::Closed(target::AttachToTarget::METHOD.into())),
                Err(_) => return Err(CdpError::Timeout(target::AttachToTarget::METHOD.into(), ATTACH_WITHIN)),
            }
        }
    }

    async fn attach(self: Arc<Self>, target_id: &str) {
        let attach = target::AttachToTarget { target_id: target_id.to_string(), flatten: true };
        let session = match self.client.send(&attach, None).await {
            Ok(attached) => attached.session_id,
            Err(_) => {
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

    /// Page, Runtime (console, contexts), Network and Log (the network log,
    /// Chrome's own messages), lifecycle events, and auto-attach so
    /// out-of-process iframes get sessions too.
    async fn enable_domains(&self, session: &str, is_tab: bool) {
        use futures_util::FutureExt as _;
        let s = Some(session);
        let auto_attach = target::SetAutoAttach { auto_attach: true, wait_for_debugger_on_start: false, flatten: true };
        let mut calls = vec![
            self.client.start(&runtime::Enable {}, s).boxed(),
            self.client.start(&network::Enable {}, s).boxed(),
            self.client.start(&log::Enable {}, s).boxed(),
            self.client.start(&auto_attach, s).boxed(),
        ];
        if is_tab {
            calls.push(self.client.start(&page::Enable {}, s).boxed());
            calls.push(self.client.start(&page::SetLifecycleEventsEnabled { enabled: true }, s).boxed());
        } else {
            calls.push(self.client.start(&runtime::RunIfWaitingForDebugger {}, s).boxed());
        }
        for result in futures_util::future::join_all(calls).await {
            if let Err(error) = result {
                tracing::debug!(session, "enabling domains: {error}");
            }
        }
    }

    fn track_target(&self, info: &target::TargetInfo) {
        let id = info.target_id.as_str();
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
            network: NetworkLog::default(),
            dialog: None,
            dialog_hook: None,
            file_hook: None,
            lifecycle: Vec::new(),
            news: TabNews::default(),
        });
        tab.title.clone_from(&info.title);
        tab.url.clone_from(&info.url);
        tab.kind.clone_from(&info.kind);
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
    pub(crate) fn world(&self, session: &str, frame_id: &str) -> Option<i64> {
        self.state().worlds.get(&(session.to_string(), frame_id.to_string())).copied()
    }

    pub(crate) fn remember_world(&self, session: &str, frame_id: &str, context_id: i64) {
        self.state().worlds.insert((session.to_string(), frame_id.to_string()), context_id);
    }

    pub(crate) fn forget_world(&self, session: &str, frame_id: &str) {
        self.state().worlds.remove(&(session.to_string(), frame_id.to_string()));
    }

    /// Waits (bounded) until some session has `target_id` as its own
    /// target: an out-of-process iframe being auto-attached.
    pub(crate) async fn wait_for_session(&self, target_id: &str, within: Duration) -> Option<String> {
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
        let session = event.session_id.as_deref();
        if let Some(created) = event.parse::<target::TargetCreated>() {
            if is_tab(&created.target_info) {
                self.track_target(&created.target_info);
                // Attach at once: the console is collected from the moment
                // the engine sees a tab.
                let conn = self.clone();
                let id = created.target_info.target_id;
                tokio::spawn(async move {
                    let _ = conn.ready_tab(&id).await;
                });
            }
        } else if let Some(changed) = event.parse::<target::TargetInfoChanged>() {
            let info = changed.target_info;
            if let Some(tab) = self.state().tabs.get_mut(&info.target_id) {
                tab.title = info.title;
                tab.url = info.url;
            }
        } else if let Some(destroyed) = event.parse::<target::TargetDestroyed>() {
            self.forget_target(&destroyed.target_id);
        } else if let Some(attached) = event.parse::<target::AttachedToTarget>() {
            let mut state = self.state();
            let target = attached.target_info.target_id;
            let tab = match session.and_then(|s| state.sessions.get(s)) {
                Some(parent) => parent.tab.clone(),
                None => target.clone(),
            };
            state.sessions.insert(attached.session_id.clone(), SessionInfo { tab, target });
            drop(state);
            if session.is_some() {
                // An iframe (or worker) of a tab: collect its console and
                // let it run.
                let conn = self.clone();
                tokio::spawn(async move { conn.enable_domains(&attached.session_id, false).await });
            }
        } else if let Some(detached) = event.parse::<target::DetachedFromTarget>() {
            let gone = detached.session_id.as_str();
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
        } else if let Some(session) = session {
            self.on_session_event(session, &event);
        }
        let mut event = event;
        if !READ_BY_SUBSCRIBERS.contains(&event.method.as_str()) {
            // Handled above; subscribers hear that it came, not what it said.
            event.params = Value::Null;
        }
        let _ = self.events.send(Arc::new(event));
        self.pumped.fetch_add(1, std::sync::atomic::Ordering::Release);
        self.changed.send_modify(|v| *v += 1);
    }

    /// Events of a page (or iframe) session.
    fn on_session_event(self: &Arc<Self>, session: &str, event: &CdpEvent) {
        if let Some(created) = event.parse::<runtime::ExecutionContextCreated>() {
            if created.context.name == WORLD_NAME
                && let Some(frame) = created.context.frame_id()
            {
                self.remember_world(session, frame, created.context.id);
            }
        } else if let Some(destroyed) = event.parse::<runtime::ExecutionContextDestroyed>() {
            let id = destroyed.execution_context_id;
            self.state().worlds.retain(|(s, _), context| !(s == session && *context == id));
        } else if event.parse::<runtime::ExecutionContextsCleared>().is_some() {
            self.state().worlds.retain(|(s, _), _| s != session);
        } else if let Some(opening) = event.parse::<page::JavascriptDialogOpening>() {
            self.on_dialog_opening(session, opening);
        } else if let Some(navigated) = event.parse::<page::FrameNavigated>() {
            // The main frame's new document is a new page of the network log.
            let frame = navigated.frame;
            if frame.parent_id.is_none()
                && let Some(tab) = self.state().tabs.get_mut(&frame.id)
                && tab.session.as_deref() == Some(session)
            {
                tab.network.new_page(&frame.loader_id);
            }
        } else if let Some(lifecycle) = event.parse::<page::LifecycleEvent>() {
            // Only the main frame's (its id is the tab's target id);
            // iframes have lifecycles of their own.
            if let Some(tab) = self.state().tabs.get_mut(&lifecycle.frame_id)
                && tab.session.as_deref() == Some(session)
            {
                record_lifecycle(&mut tab.lifecycle, &lifecycle.name);
            }
        } else if event.parse::<page::JavascriptDialogClosed>().is_some() {
            self.with_tab_of(session, |tab| tab.dialog = None);
        } else if let Some(opened) = event.parse::<page::FileChooserOpened>() {
            self.on_file_chooser(session, opened);
        } else if let Some(called) = event.parse::<runtime::ConsoleApiCalled>() {
            let message = console_message(called);
            self.with_tab_of(session, |tab| {
                if message.level == "error" {
                    tab.news.console_error(&message.text);
                }
                push_in_time(&mut tab.console, message, CONSOLE_KEPT);
            });
        } else if let Some(added) = event.parse::<log::EntryAdded>() {
            if let Some(message) = browser_message(added.entry) {
                self.with_tab_of(session, |tab| {
                    // A failed load is told as a failed request; other
                    // errors of Chrome's own (CSP, mixed content) as news.
                    if message.level == "error" && message.kind != "network" {
                        tab.news.console_error(&message.text);
                    }
                    push_in_time(&mut tab.console, message, CONSOLE_KEPT);
                });
            }
        } else if let Some(thrown) = event.parse::<runtime::ExceptionThrown>() {
            let error = page_error(thrown);
            self.with_tab_of(session, |tab| {
                tab.news.console_error(&error.message);
                push_bounded(&mut tab.errors, error, PAGE_ERRORS_KEPT);
            });
        } else {
            self.on_network_event(session, event);
        }
    }

    /// A JavaScript dialog opened: answered at once by the hook armed for
    /// it (`POST /hooks/dialog`), else kept as the tab's open dialog.
    fn on_dialog_opening(&self, session: &str, opening: page::JavascriptDialogOpening) {
        let kind = if opening.kind.is_empty() { "alert".to_string() } else { opening.kind };
        // Chrome sends an empty default with every kind; only a prompt has one.
        let default_prompt = opening.default_prompt.filter(|_| kind == "prompt");
        let info = DialogInfo { kind, message: opening.message, default_prompt };
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

    /// A file chooser opened (intercepted): given the files the hook armed
    /// for it, if any, then interception is off again.
    fn on_file_chooser(self: &Arc<Self>, session: &str, opened: page::FileChooserOpened) {
        let mut hook = None;
        self.with_tab_of(session, |tab| {
            hook = tab.file_hook.take().filter(|h| h.until > tokio::time::Instant::now());
        });
        let conn = self.clone();
        let session = session.to_string();
        tokio::spawn(async move {
            if let Some(hook) = hook {
                let set = dom::SetFileInputFiles {
                    files: hook.paths,
                    backend_node_id: opened.backend_node_id,
                    ..Default::default()
                };
                if let Err(error) = conn.client.send(&set, Some(&session)).await {
                    tracing::warn!("setting the armed files failed: {error}");
                }
            }
            // One chooser per arm: later ones open normally again.
            let off = page::SetInterceptFileChooserDialog { enabled: false };
            let _ = conn.client.send(&off, Some(&session)).await;
        });
    }

    /// A request's progress, into its tab's network log.
    fn on_network_event(&self, session: &str, event: &CdpEvent) {
        if let Some(sent) = event.parse::<network::RequestWillBeSent>() {
            self.with_tab_of(session, |tab| tab.network.will_be_sent(session, sent));
        } else if let Some(received) = event.parse::<network::ResponseReceived>() {
            let (status, id) = (received.response.status, received.request_id.clone());
            self.with_tab_of(session, |tab| {
                tab.network.response(session, received);
                // The browser's own fetches (a missing favicon) are not the page's news.
                if let Some(recorded) = tab.network.find(&id).filter(|r| status >= 400 && !r.browsers_own) {
                    let request = &recorded.request;
                    tab.news.failed_request(format!("{status} {} {}", request.method, request.url));
                }
            });
        } else if let Some(finished) = event.parse::<network::LoadingFinished>() {
            self.with_tab_of(session, |tab| tab.network.finished(finished));
        } else if let Some(failed) = event.parse::<network::LoadingFailed>() {
            // A load the page (or a navigation) gave up on is not news.
            let (canceled, id) = (failed.canceled, failed.request_id.clone());
            self.with_tab_of(session, |tab| {
                tab.network.failed(failed);
                if let Some(recorded) = tab.network.find(&id).filter(|r| !canceled && !r.browsers_own) {
                    let request = &recorded.request;
                    let why = request.failure.as_deref().unwrap_or("failed");
                    tab.news.failed_request(format!("{why} {} {}", request.method, request.url));
                }
            });
        } else if let Some(cached) = event.parse::<network::RequestServedFromCache>() {
            self.with_tab_of(session, |tab| tab.network.served_from_cache(&cached.request_id));
        }
    }

    /// Waits (briefly) until every event that arrived before the last reply
    /// has been handled and broadcast: replies overtake the event pump, and
    /// what a command caused (a navigation, a dialog) comes as events.
    pub(crate) async fn catch_up(&self) {
        let target = self.client.events_sent();
        let mut changed = self.changed.subscribe();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(1);
        while self.pumped.load(std::sync::atomic::Ordering::Acquire) < target {
            if tokio::time::timeout_at(deadline, changed.changed()).await.is_err() || self.is_closed() {
                return;
            }
        }
    }

    /// Answers a dialog now (sent at once; the outcome is only logged).
    fn answer_dialog(&self, session: &str, accept: bool, prompt_text: Option<String>) {
        let answer = self.client.start(&page::HandleJavaScriptDialog { accept, prompt_text }, Some(session));
        tokio::spawn(async move {
            if let Err(error) = answer.await {
                tracing::debug!("answering a dialog: {error}");
            }
        });
    }

    /// Whether the tab's current document has reached a lifecycle event
    /// (`load`, `networkIdle`, …).
    pub(crate) fn reached(&self, target_id: &str, lifecycle_event: &str) -> bool {
        self.state().tabs.get(target_id).is_some_and(|t| t.lifecycle.iter().any(|e| e == lifecycle_event))
    }

    /// The tab's unanswered dialog, if one is open.
    pub(crate) fn open_dialog(&self, target_id: &str) -> Option<DialogInfo> {
        self.state().tabs.get(target_id).and_then(|t| t.dialog.clone())
    }

    /// Arms the answer to the tab's next dialog (the last arm wins); a dialog
    /// already waiting is answered at once. Returns that dialog, if any.
    pub(crate) fn arm_dialog(&self, target_id: &str, hook: DialogHook) -> Option<DialogInfo> {
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
    pub(crate) async fn arm_file_chooser(
        self: &Arc<Self>,
        target_id: &str,
        session: &str,
        hook: FileHook,
    ) -> Result<(), CdpError> {
        let until = hook.until;
        if let Some(tab) = self.state().tabs.get_mut(target_id) {
            tab.file_hook = Some(hook.clone());
        }
        self.client.send(&page::SetInterceptFileChooserDialog { enabled: true }, Some(session)).await?;
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
                let off = page::SetInterceptFileChooserDialog { enabled: false };
                let _ = conn.client.send(&off, Some(&session)).await;
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
fn is_tab(info: &target::TargetInfo) -> bool {
    info.kind == "page" && !info.url.starts_with("devtools://")
}

/// The events whose parameters subscribers ([`Conn::subscribe`]) read:
/// navigations, lifecycle steps, dialogs, drags. Every other event reaches
/// them without its parameters (they wake on it and read the state it
/// updated). A subscriber holds every event sent while it waits for
/// something else (an action's receiver, until the action's command is
/// answered): with their parameters, a console flood of 8 MB messages
/// during an `evaluate` held hundreds of megabytes in serve (issue 46).
const READ_BY_SUBSCRIBERS: [&str; 8] = [
    page::FrameNavigated::METHOD,
    page::NavigatedWithinDocument::METHOD,
    page::LifecycleEvent::METHOD,
    page::FrameRequestedNavigation::METHOD,
    page::FrameStartedNavigating::METHOD,
    page::FrameStartedLoading::METHOD,
    page::JavascriptDialogOpening::METHOD,
    input::DragIntercepted::METHOD,
];

/// Pushes `item`, dropping the oldest when `queue` holds `max`; whether one
/// was dropped.
fn push_bounded<T>(queue: &mut VecDeque<T>, item: T, max: usize) -> bool {
    let full = queue.len() == max;
    if full {
        queue.pop_front();
    }
    queue.push_back(item);
    full
}

/// Adds a console message in time order (Chrome's own messages come on
/// another domain than the page's and can arrive out of order); the oldest
/// goes when the queue is full.
fn push_in_time(queue: &mut VecDeque<ConsoleMessage>, message: ConsoleMessage, max: usize) {
    let at = queue.iter().rposition(|m| m.timestamp <= message.timestamp).map_or(0, |i| i + 1);
    queue.insert(at, message);
    if queue.len() > max {
        queue.pop_front();
    }
}

/// One of Chrome's own messages (`Log.entryAdded`) as a console message:
/// its source as the type, its level mapped, its URL as the location.
/// Workers' entries repeat the console calls their own sessions report.
fn browser_message(entry: log::LogEntry) -> Option<ConsoleMessage> {
    if entry.source == "worker" {
        return None;
    }
    let location = entry.url.filter(|url| !url.is_empty()).map(|url| match entry.line_number {
        Some(line) => format!("{url}:{}", line + 1),
        None => url,
    });
    Some(ConsoleMessage {
        level: log_level(&entry.level).into(),
        kind: if entry.source.is_empty() { "other".into() } else { entry.source },
        text: kept(entry.text),
        timestamp: entry.timestamp,
        location: location.map(kept),
    })
}

/// A `Log` level as a console level.
fn log_level(level: &str) -> &'static str {
    match level {
        "error" => "error",
        "warning" => "warning",
        "info" => "info",
        "verbose" => "debug",
        _ => "log",
    }
}

fn console_message(called: runtime::ConsoleApiCalled) -> ConsoleMessage {
    let kind = if called.kind.is_empty() { "log".to_string() } else { called.kind };
    let level = match kind.as_str() {
        "error" | "assert" => "error",
        "warning" => "warning",
        "info" => "info",
        "debug" => "debug",
        _ => "log",
    };
    // Within the bound as it is built: a page's megabytes are read where
    // they lie in the event, never copied whole.
    let mut text = Kept::default();
    for (i, arg) in called.args.iter().enumerate() {
        if i > 0 {
            text.push(" ");
        }
        text.push(&remote_object_text(arg));
    }
    let frame = called.stack_trace.and_then(|trace| trace.call_frames.into_iter().next());
    ConsoleMessage {
        level: level.into(),
        kind: kept(kind),
        text: text.done(),
        timestamp: called.timestamp,
        location: frame.map(|f| kept(location(&f.url, f.line_number, f.column_number))),
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

fn page_error(thrown: runtime::ExceptionThrown) -> PageError {
    let details = thrown.exception_details;
    let message = Some(details.description()).filter(|m| !m.is_empty()).unwrap_or_else(|| "unknown error".into());
    let location = details
        .url
        .as_deref()
        .filter(|u| !u.is_empty())
        .map(|url| location(url, details.line_number, details.column_number));
    PageError { message: kept(message), timestamp: thrown.timestamp, location: location.map(kept) }
}

/// `url:line:column`, counted from 1 as people do (CDP counts from 0).
fn location(url: &str, line: i64, column: i64) -> String {
    format!("{url}:{}:{}", line + 1, column + 1)
}

/// A console argument as Chrome's console prints it, roughly (a string
/// borrowed, not copied: it may be megabytes).
fn remote_object_text(object: &runtime::RemoteObject) -> std::borrow::Cow<'_, str> {
    use std::borrow::Cow;
    match &object.value {
        Some(Value::String(s)) => Cow::Borrowed(s),
        Some(value) => Cow::Owned(value.to_string()),
        None if object.subtype.as_deref() == Some("null") => Cow::Borrowed("null"),
        None => Cow::Borrowed(
            object.description.as_deref().or(object.unserializable_value.as_deref()).unwrap_or(object.kind.as_str()),
        ),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

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
                {"type": "object", "subtype": "null", "value": null},
                {"type": "number", "unserializableValue": "NaN"}
            ],
            "timestamp": 1.5,
            "stackTrace": {"callFrames": [{"url": "http://x/a.js", "lineNumber": 9, "columnNumber": 0}]}
        });
        let message = console_message(serde_json::from_value(params).unwrap());
        assert_eq!(message.level, "warning");
        assert_eq!(message.text, "count 3 Object undefined null NaN");
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
    fn news_keeps_the_newest_errors_and_counts_the_rest() {
        let mut news = TabNews::default();
        for i in 0..NEWS_KEPT + 3 {
            news.console_error(&format!("error {i}\n    at x.js:1"));
        }
        assert_eq!(news.console_errors.len(), NEWS_KEPT);
        assert_eq!(news.console_errors.back().map(String::as_str), Some("error 7"));
        assert_eq!(news.more_console_errors, 3);
        news.console_error(&"é".repeat(400));
        let long = news.console_errors.back().unwrap();
        assert!(long.ends_with('…') && long.len() <= NEWS_CHARS + '…'.len_utf8(), "{long}");
    }

    #[test]
    fn a_page_that_logs_huge_strings_keeps_a_bounded_text_with_a_marker() {
        let huge = "x".repeat(50 << 20);
        let called: runtime::ConsoleApiCalled = serde_json::from_value(serde_json::json!({
            "type": "log", "timestamp": 1.0, "executionContextId": 1,
            "args": [{"type": "string", "value": huge}],
        }))
        .unwrap();
        let message = console_message(called);
        assert!(message.text.len() < ENTRY_BYTES + 64, "{} bytes kept", message.text.len());
        assert!(message.text.ends_with(&format!("… [{} more bytes cut]", (50 << 20) - ENTRY_BYTES)), "the marker");
        // In an allocation of its own size, not the page's 50 MB cut short.
        assert!(message.text.capacity() < ENTRY_BYTES + 64, "{} bytes held", message.text.capacity());
        assert!(kept("y".repeat(1 << 20)).capacity() < ENTRY_BYTES + 64, "kept() copies what it keeps");
        let thrown: runtime::ExceptionThrown = serde_json::from_value(serde_json::json!({
            "timestamp": 1.0,
            "exceptionDetails": {"exceptionId": 1, "text": "Uncaught", "lineNumber": 0, "columnNumber": 0,
                "exception": {"type": "object", "description": "é".repeat(20_000)}},
        }))
        .unwrap();
        let error = page_error(thrown);
        assert!(
            error.message.len() < ENTRY_BYTES + 64 && error.message.contains("more bytes cut]"),
            "{}",
            error.message.len()
        );
        assert_eq!(kept("short".into()), "short", "what fits is kept whole");
    }

    #[test]
    fn chromes_own_messages_join_the_console_in_time_order() {
        let entry = |source: &str, level: &str, timestamp: f64| log::LogEntry {
            source: source.into(),
            level: level.into(),
            text: "Failed to load resource: the server responded with a status of 404 (Not Found)".into(),
            timestamp,
            url: Some("http://x/api/missing.json".into()),
            line_number: None,
        };
        let message = browser_message(entry("network", "error", 2.0)).unwrap();
        assert_eq!((message.level.as_str(), message.kind.as_str()), ("error", "network"));
        assert_eq!(message.location.as_deref(), Some("http://x/api/missing.json"));
        assert!(browser_message(entry("worker", "info", 2.0)).is_none(), "the worker's session reports its own");
        let levels: Vec<&str> = ["verbose", "info", "warning", "error", "?"].into_iter().map(log_level).collect();
        assert_eq!(levels, ["debug", "info", "warning", "error", "log"]);

        let at = |timestamp: f64| ConsoleMessage {
            level: "log".into(),
            kind: "log".into(),
            text: timestamp.to_string(),
            timestamp,
            location: None,
        };
        let mut console = VecDeque::new();
        for timestamp in [1.0, 3.0, 2.0, 4.0, 0.5] {
            push_in_time(&mut console, at(timestamp), 4);
        }
        let order: Vec<f64> = console.iter().map(|m| m.timestamp).collect();
        assert_eq!(order, [1.0, 2.0, 3.0, 4.0], "in time order; the oldest went when full");
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
        let error = page_error(serde_json::from_value(params).unwrap());
        assert!(error.message.starts_with("Error: boom"));
        assert_eq!(error.location.as_deref(), Some("http://x/p.html:1:5"));
    }
}
