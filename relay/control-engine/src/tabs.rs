//! Which tab a request is about, and the tab routes: `GET /tabs`,
//! `POST /tabs/open`, `POST /tabs/focus`, `DELETE /tabs/{targetId}`.
//!
//! A request names its tab with `targetId`; without one it goes to the
//! profile's current tab (the last opened, focused or navigated), else to
//! the only tab. Page operations also take the tab's page lock and refuse
//! while a dialog is open (`PageTarget`).

use std::sync::Arc;

use cdp_client::protocol::{Event as _, page, target};
use settings::{Driver, Profile};

use crate::api::{
    CloseTab, DialogInfo, FocusTab, HandOver, HandedBack, Handle, HandoffEnded, ListTabs, OpenTab, Profiled, Selected,
    TabDone, TabInfo, TabList, TabSelector, TakeSnapshot,
};
use crate::conn::Conn;
use crate::engine::Engine;
use crate::error::ControlError;
use crate::navigation::NAVIGATE_TIMEOUT;

/// A tab ready for a page operation; holds the tab's page lock.
pub(crate) struct PageTarget {
    pub(crate) profile: Profile,
    pub(crate) conn: Arc<Conn>,
    pub(crate) id: String,
    pub(crate) session: String,
    pub(crate) _guard: tokio::sync::OwnedMutexGuard<()>,
}

impl PageTarget {
    /// A CDP command on the page's session.
    pub(crate) async fn cdp<C: cdp_client::protocol::Command>(&self, command: &C) -> Result<C::Response, ControlError> {
        self.conn.client().send(command, Some(&self.session)).await.map_err(ControlError::cdp(&self.profile.name))
    }

    /// Runs `work` on the page, unless a dialog opens that nothing answers:
    /// a JavaScript dialog stops the page's scripts (our snapshot walker,
    /// input, screenshots) until it is answered, so the agent hears about
    /// the dialog at once instead of waiting for a timeout.
    pub(crate) async fn unless_dialog<T>(
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
            Ok(event) if event.method == page::JavascriptDialogOpening::METHOD => {
                if let Some(dialog) = conn.open_dialog(tab) {
                    return dialog;
                }
            }
            Err(RecvError::Closed) => std::future::pending::<()>().await,
            _ => {}
        }
    }
}

impl Engine {
    /// The connection and the tab a request is about: an explicit
    /// `targetId`, else the profile's current tab (last opened or focused),
    /// else the only tab, which becomes current: a tab another client opens
    /// later (a script on the same browser) must not take the agent's
    /// requests, nor make them ambiguous.
    pub(crate) async fn tab(&self, selector: &TabSelector) -> Result<(Profile, Arc<Conn>, String), ControlError> {
        let profile = self.profile(selector.profile()).await?;
        let conn = self.conn(&profile).await?;
        let current = self.current(&profile.name).filter(|id| conn.has_tab(id));
        let tabs = conn.tabs(current.as_deref());
        let id = match selector.target_id() {
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
                (None, [only]) => {
                    self.set_current(&profile.name, &only.target_id);
                    only.target_id.clone()
                }
                (None, []) if profile.driver == Driver::Extension => return Err(ControlError::NoSharedTab),
                (None, []) => return Err(ControlError::NoTab(profile.name.clone())),
                (None, _) => return Err(ControlError::AmbiguousTab(tab_list(&tabs))),
            },
        };
        Ok((profile, conn, id))
    }

    /// Waits until the tab is attached; returns its session.
    pub(crate) async fn session(&self, conn: &Arc<Conn>, target_id: &str) -> Result<String, ControlError> {
        conn.ready_tab(target_id).await.map_err(ControlError::cdp(&conn.profile))
    }

    /// The target of a page operation, attached, with the tab's page lock
    /// held until the returned value drops.
    pub(crate) async fn page_target(&self, selector: &TabSelector) -> Result<PageTarget, ControlError> {
        let (profile, conn, id) = self.tab(selector).await?;
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
}

impl Handle<ListTabs> for Engine {
    async fn handle(&self, request: Selected<ListTabs>) -> Result<Profiled<TabList>, ControlError> {
        let profile = self.profile(request.tab.profile()).await?;
        let current = self.current(&profile.name);
        let conn = self.conn(&profile).await?;
        let tabs = conn.refreshed_tabs(current.as_deref()).await.map_err(ControlError::cdp(&profile.name))?;
        Ok(Profiled::new(&profile, TabList { tabs }))
    }
}

impl Handle<OpenTab> for Engine {
    /// A new tab, which becomes the current one, answered once loaded.
    async fn handle(&self, request: Selected<OpenTab>) -> Result<Profiled<TabInfo>, ControlError> {
        let url = self.allowed_url(&request.request.url)?;
        let profile = self.profile(request.tab.profile()).await?;
        let conn = self.conn(&profile).await?;
        // A blank tab first, the page once the engine is attached to it: the
        // network log and the console then have the page from its first
        // request (a tab created at its URL starts loading before anyone
        // listens). The history starts at about:blank, as Playwright's does.
        let create = target::CreateTarget { url: "about:blank".into() };
        let target_id = conn.client().send(&create, None).await.map_err(ControlError::cdp(&profile.name))?.target_id;
        // createTarget announces the target before answering; wait until the
        // engine has attached to it so that console and refs start now.
        let session = self.session(&conn, &target_id).await?;
        self.set_current(&profile.name, &target_id);
        if url != "about:blank" {
            // A load that fails shows Chrome's error page, as a tab opened at
            // the address would; the answer's URL says so.
            let navigate = page::Navigate { url: url.clone() };
            conn.client().send(&navigate, Some(&session)).await.map_err(ControlError::cdp(&profile.name))?;
        }
        // Agents snapshot next: answer once the page has loaded (bounded;
        // a slow page is still opened).
        self.wait_loaded(&conn, &session, &url, NAVIGATE_TIMEOUT).await;
        let (url, title) = self.location(&conn, &session).await.unwrap_or((url, String::new()));
        Ok(Profiled::new(&profile, TabInfo { target_id, title, url, kind: "page".into(), active: true, dialog: None }))
    }
}

impl Handle<FocusTab> for Engine {
    /// Brings the tab to the front and makes it current.
    async fn handle(&self, request: Selected<FocusTab>) -> Result<Profiled<TabDone>, ControlError> {
        let (profile, conn, id) = self.tab(&request.tab).await?;
        let activate = target::ActivateTarget { target_id: id.clone() };
        conn.client().send(&activate, None).await.map_err(ControlError::cdp(&profile.name))?;
        self.set_current(&profile.name, &id);
        Ok(Profiled::new(&profile, TabDone { ok: true, target_id: id }))
    }
}

impl Handle<CloseTab> for Engine {
    async fn handle(&self, request: Selected<CloseTab>) -> Result<Profiled<TabDone>, ControlError> {
        let (profile, conn, id) = self.tab(&request.tab).await?;
        let close = target::CloseTarget { target_id: id.clone() };
        conn.client().send(&close, None).await.map_err(ControlError::cdp(&profile.name))?;
        self.forget_refs(&profile.name, &id);
        Ok(Profiled::new(&profile, TabDone { ok: true, target_id: id }))
    }
}

/// How much of the page a handoff's answer shows (its interactive snapshot).
const HANDED_BACK_SNAPSHOT: usize = 4_000;

impl Handle<HandOver> for Engine {
    /// Hands the tab to the person and waits for it back.
    async fn handle(&self, request: Selected<HandOver>) -> Result<Profiled<HandedBack>, ControlError> {
        let (profile, conn, id) = self.tab(&request.tab).await?;
        let link = self.0.relay.as_ref().filter(|_| profile.driver == Driver::Extension).ok_or_else(|| {
            ControlError::BadRequest(format!(
                "profile '{}' is a browser Browser Relay runs: its window is yours to use, there is nothing to hand over \
                 (a handoff is for the tabs you share from your own Chrome)",
                profile.name
            ))
        })?;
        let reason = request.request.reason.trim().to_string();
        if reason.is_empty() {
            return Err(ControlError::BadRequest(
                "say what the person is to do: reason (\"log in to the shop\", \"solve the CAPTCHA\")".into(),
            ));
        }
        let within = request.request.within();
        let ended = link
            .extension
            .hand_over(id.clone(), self.grant().cloned(), reason, within)
            .await
            .map_err(ControlError::NotGranted)?;
        let now = conn.tabs(None).into_iter().find(|t| t.target_id == id);
        // What the page shows now, with fresh refs: the person may have
        // gone on (signed in, landed elsewhere), and the old refs are stale.
        let snapshot = match (&now, ended) {
            (Some(_), HandoffEnded::Done | HandoffEnded::TimedOut) => {
                let look =
                    TakeSnapshot { interactive: true, max_chars: Some(HANDED_BACK_SNAPSHOT), ..Default::default() };
                let selector = TabSelector { profile: Some(profile.name.clone()), target_id: Some(id.clone()) };
                let taken = Handle::<TakeSnapshot>::handle(self, Selected::new(selector, look)).await;
                taken
                    .map_err(|e| tracing::warn!(target_id = %id, "no snapshot of the tab handed back: {e}"))
                    .ok()
                    .and_then(|s| s.snapshot.clone())
            }
            _ => None,
        };
        let (url, title) = (now.as_ref().map(|t| t.url.clone()), now.map(|t| t.title));
        Ok(Profiled::new(&profile, HandedBack { ended, target_id: id, url, title, snapshot }))
    }
}

/// The tabs, for error messages.
fn tab_list(tabs: &[TabInfo]) -> String {
    if tabs.is_empty() {
        return "none".into();
    }
    tabs.iter().map(|t| format!("{} ({})", t.target_id, t.url)).collect::<Vec<_>>().join(", ")
}
