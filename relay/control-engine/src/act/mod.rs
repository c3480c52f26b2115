//! `POST /act`: actions on refs with real input events, after the checks a
//! careful user makes (attached, visible, enabled, in view, not moving, not
//! covered); navigation-aware; never stuck behind a JavaScript dialog.
//!
//! - this module: the action kinds (the request's types) and the route;
//! - `ready`: a ref resolved in its frame, and the actionability checks;
//! - `input`: mouse and keyboard events;
//! - `fields`: typing into, choosing in and filling form fields;
//! - `wait`: `wait`'s conditions.

mod fields;
mod input;
pub(crate) mod ready;
mod wait;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use cdp_client::CdpEvent;
use cdp_client::protocol::{dom, emulation, page as cdp_page, runtime, target};
use serde_json::Value;
use tokio::sync::broadcast;
use tokio::time::Instant;

pub(crate) use fields::element_object;

use crate::api::{
    ACT_TIMEOUT_MAX_MS, Act, ActOutcome, Action, Click, CloseCurrent, Drag, Evaluate, Fill, Handle, Hover, MouseButton,
    NewTab, PageState, Press, Profiled, Resize, SelectOptions, Selected, TakeSnapshot, TypeText, clamp_act_timeout,
};
use crate::engine::Engine;
use crate::error::ControlError;
use crate::in_page::{self, LiveFrame};
use crate::keys::{self, Chord};
use crate::navigation::{MainFrameMove, main_frame_move};
use crate::refs::RefsJoin;
use crate::tabs::PageTarget;
use input::{click_at, drag, mouse, press};
use ready::{Budget, CLICKABLE, EDITABLE, HOVERABLE};

/// How long a navigation an action started may take to commit.
const COMMIT_WITHIN: Duration = Duration::from_secs(10);
/// Delay between characters of `type {slowly: true}`.
const SLOW_TYPING: Duration = Duration::from_millis(50);

impl Handle<Act> for Engine {
    async fn handle(&self, request: Selected<Act>) -> Result<Profiled<ActOutcome>, ControlError> {
        let Act { timeout_ms, snapshot, diff, action } = request.request;
        let timeout = clamp_act_timeout(timeout_ms);
        self.refuse_unallowed_evaluate(&action)?;
        // A dialog open before the action stops it here (page_target).
        let page = self.page_target(&request.tab).await?;
        let tabs_before: HashSet<String> = page.conn.tabs(None).into_iter().map(|t| t.target_id).collect();
        let mut events = page.conn.subscribe();
        // What went wrong before the action is not its doing: set aside
        // now, and told apart. Requests sent from here on are its own.
        page.conn.catch_up().await;
        let earlier = Some(page.conn.take_news(&page.id)).filter(|trouble| !trouble.is_empty());
        let mark = page.conn.network_mark(&page.id);
        let kind = action.kind();
        // (A tab closed has no page to tell of.)
        let watching = kind != "close" && watch_changes(&page).await;
        // A dialog the action opens pauses the page (and our input events)
        // until it is answered: the action happened, and the dialog is the
        // page's state now, which the answer reports at once.
        let result = match page.unless_dialog(self.run_action(&page, action, timeout)).await {
            Err(ControlError::DialogOpen { .. }) => None,
            result => result?,
        };
        let mut outcome = ActOutcome {
            ok: true,
            kind: kind.into(),
            target_id: page.id.clone(),
            navigated: false,
            result,
            page: None,
            snapshot: None,
            changes: None,
        };
        if kind == "close" {
            return Ok(Profiled::new(&page.profile, outcome));
        }
        // A link's navigation starts in a task after the click is
        // acknowledged: one round trip through the page's task queue lets it
        // begin, then every event up to that reply is handled. The round
        // trip reads where the page is, which stays the answer unless the
        // page changed after it.
        let mut location = None;
        if page.conn.open_dialog(&page.id).is_none() {
            location = self.location(&page.conn, &page.session).await;
        }
        page.conn.catch_up().await;
        let mut navigation = NavigationWatch::default();
        while let Ok(event) = events.try_recv() {
            navigation.see(&event, &page.session, &page.id);
        }
        if navigation.seen != Navigation::None {
            if navigation.seen == Navigation::Requested {
                navigation.wait_commit(&mut events, &page, timeout.min(COMMIT_WITHIN)).await;
            }
            outcome.navigated = navigation.seen == Navigation::Committed;
            location = None;
        }
        // What the action started: its requests, the page it loaded, the
        // tabs it opened, waited for briefly so that the answer tells them.
        let new_tabs: Vec<String> =
            page.conn.tabs(None).into_iter().map(|t| t.target_id).filter(|id| !tabs_before.contains(id)).collect();
        let settle = Settle { mark, new_tabs: &new_tabs, deadline: Instant::now() + SETTLE_WITHIN };
        if settle.wait(&page, &mut events, &mut navigation).await {
            // A request's callback may have navigated too.
            outcome.navigated |= navigation.seen == Navigation::Committed;
            location = None;
        }
        let dialog = page.conn.open_dialog(&page.id);
        let (url, title) = self.location_after(&page, dialog.is_some(), location).await.unwrap_or_default();
        let caused = page.conn.take_news(&page.id);
        let new_tabs = tabs_among(&page, &new_tabs);
        // A paused page answers no script; a new document has nothing to compare.
        let changed = changed_parts(&page, watching && dialog.is_none() && !outcome.navigated).await;
        if (snapshot || diff) && dialog.is_none() {
            self.snapshot_after(&page, snapshot, diff, &mut outcome).await?;
        }
        outcome.page = Some(PageState { url, title, dialog, caused, earlier, new_tabs, changed });
        Ok(Profiled::new(&page.profile, outcome))
    }
}

/// The modifier keys' bits, as CDP's input events take them.
fn modifier_bits(modifiers: &[String]) -> Result<i64, ControlError> {
    let mut bits = 0;
    for name in modifiers {
        bits |= keys::key(name)
            .filter(|k| k.modifier != 0)
            .map(|k| k.modifier)
            .ok_or_else(|| ControlError::BadRequest(format!("modifier '{name}': use Alt, Control, Meta or Shift")))?;
    }
    Ok(bits)
}

/// How many parts of the page an action's answer names as changed.
const CHANGED_PARTS_MAX: usize = 3;

/// Starts noting what changes in the page's document (`snapshot.js`
/// `watchChanges`), so the answer can say where the action changed it;
/// whether it could (a page that answers no script yet: no word on it).
async fn watch_changes(page: &PageTarget) -> bool {
    let main = LiveFrame::main(&page.session, &page.id);
    in_page::call_script::<bool>(&page.conn, &main, "watchChanges", Value::Null).await.unwrap_or(false)
}

/// Where the page changed since [`watch_changes`] (`snapshot.js`
/// `changedParts`), as the answer names it; nothing unless `ask`.
async fn changed_parts(page: &PageTarget, ask: bool) -> Vec<String> {
    #[derive(serde::Deserialize, Default)]
    #[serde(default)]
    struct Changed {
        parts: Vec<String>,
        more: usize,
    }
    if !ask {
        return Vec::new();
    }
    let main = LiveFrame::main(&page.session, &page.id);
    let arg = serde_json::json!({ "max": CHANGED_PARTS_MAX });
    let Ok(changed) = in_page::call_script::<Changed>(&page.conn, &main, "changedParts", arg).await else {
        return Vec::new();
    };
    let mut parts = changed.parts;
    if changed.more > 0 {
        parts.push(format!("and {} more", changed.more));
    }
    parts
}

/// The tabs of `page`'s browser that `ids` names, as an action's answer
/// tells them.
fn tabs_among(page: &PageTarget, ids: &[String]) -> Vec<NewTab> {
    page.conn
        .tabs(None)
        .into_iter()
        .filter(|tab| ids.contains(&tab.target_id))
        .map(|tab| NewTab { target_id: tab.target_id, url: tab.url })
        .collect()
}

impl Engine {
    /// Refuses an action that runs the agent's JavaScript in the page
    /// (`evaluate`, `wait` with `fn`) unless its grant and config.toml allow it.
    fn refuse_unallowed_evaluate(&self, action: &Action) -> Result<(), ControlError> {
        let evaluates = match action {
            Action::Evaluate(_) => true,
            Action::Wait(what) => what.function.is_some(),
            _ => false,
        };
        if evaluates {
            self.refuse_evaluate()?;
        }
        if evaluates && !self.allow_evaluate()? {
            // One shape for every "config.toml does not allow it": 403
            // not_allowed, naming the line to write.
            return Err(ControlError::NotAllowed {
                what: "running the agent's JavaScript in the page (evaluate, wait with fn)".into(),
                key: "allowEvaluate = true",
            });
        }
        Ok(())
    }

    /// Where the page is after an action (url, title): `read`, when nothing
    /// moved it since, else read now; from the browser while `dialog_open`
    /// pauses the page.
    async fn location_after(
        &self,
        page: &PageTarget,
        dialog_open: bool,
        read: Option<(String, String)>,
    ) -> Option<(String, String)> {
        match (dialog_open, read) {
            // A paused page answers no script: ask the browser.
            (true, _) => self.target_location(page).await,
            (false, Some(read)) => Some(read),
            (false, None) => {
                // Also the round trip after which the page has run what its
                // finished requests called back (and logged).
                let read = self.location(&page.conn, &page.session).await;
                page.conn.catch_up().await;
                read.or_else(|| page.conn.tab_url(&page.id))
            }
        }
    }

    /// The page's snapshot after an action into `outcome`, as `snapshot`
    /// and `diff` ask: with `diff`, the changes since what the agent last
    /// read of this page, if it is still the page.
    async fn snapshot_after(
        &self,
        page: &PageTarget,
        snapshot: bool,
        diff: bool,
        outcome: &mut ActOutcome,
    ) -> Result<(), ControlError> {
        let listed = crate::snapshot::OptionsListed::FirstFew;
        let seen = match (diff, outcome.navigated) {
            (true, false) => self.refs().get(&page.profile.name, &page.id).and_then(|table| table.seen.clone()),
            _ => None,
        };
        let join = if seen.is_some() { RefsJoin::MergeIfCut } else { RefsJoin::Replace };
        let taken = self.snapshot_of(page, &TakeSnapshot::default(), join, listed).await?;
        match seen {
            Some(seen) => {
                let now = taken.snapshot.unwrap_or_default();
                outcome.changes = Some(crate::diff::changes(&seen, &now));
                outcome.snapshot = snapshot.then_some(now);
            }
            None => outcome.snapshot = taken.snapshot,
        }
        Ok(())
    }

    async fn run_action(
        &self,
        page: &PageTarget,
        action: Action,
        timeout: Duration,
    ) -> Result<Option<Value>, ControlError> {
        let budget = Budget { deadline: Instant::now() + timeout, timeout };
        match action {
            Action::Click(Click { element, double_click, button, modifiers }) => {
                let bits = modifier_bits(&modifiers)?;
                let target = self.ref_target(page, &element).await?;
                let point = self.ready_box(page, &target, CLICKABLE, budget).await?.center();
                click_at(page, point, button, if double_click { 2 } else { 1 }, bits).await?;
            }
            Action::Hover(Hover { element }) => {
                let target = self.ref_target(page, &element).await?;
                let (x, y) = self.ready_box(page, &target, HOVERABLE, budget).await?.center();
                mouse(page, "mouseMoved", (x, y), MouseButton::Left, 0).await?;
            }
            Action::Type(typed) => self.type_text(page, typed, budget).await?,
            Action::Press(Press { key }) => press(page, &keys::parse_chord(&key)?).await?,
            Action::Drag(Drag { start_ref, end_ref }) => {
                let start = self.ref_target(page, &start_ref).await?;
                let from = self.ready_box(page, &start, HOVERABLE, budget).await?.center();
                let end = self.ref_target(page, &end_ref).await?;
                let to = self.ready_box(page, &end, HOVERABLE, budget).await?.center();
                drag(page, from, to).await?;
            }
            Action::Select(SelectOptions { element, values }) => {
                let target = self.ref_target(page, &element).await?;
                self.ready_box(page, &target, EDITABLE, budget).await?;
                self.select(page, &target, &values).await?;
            }
            Action::Fill(Fill { fields }) => {
                if fields.is_empty() {
                    return Err(ControlError::BadRequest("fill needs at least one field".into()));
                }
                for field in fields {
                    self.fill_field(page, &field, budget).await?;
                }
            }
            Action::Wait(what) => self.wait(page, timeout, what).await?,
            Action::Resize(Resize { width, height }) => {
                if !(100..=10_000).contains(&width) || !(100..=10_000).contains(&height) {
                    return Err(ControlError::BadRequest("width and height are 100–10000 pixels".into()));
                }
                let metrics =
                    emulation::SetDeviceMetricsOverride { width, height, device_scale_factor: 0.0, mobile: false };
                page.cdp(&metrics).await?;
            }
            Action::Close(CloseCurrent {}) => {
                let close = target::CloseTarget { target_id: page.id.clone() };
                page.conn.client().send(&close, None).await.map_err(ControlError::cdp(&page.profile.name))?;
                self.forget_refs(&page.profile.name, &page.id);
            }
            Action::Evaluate(Evaluate { function, element }) => {
                return self.evaluate(page, &function, element.as_deref()).await.map(Some);
            }
        }
        Ok(None)
    }

    /// `type`: `text` into the field `element`, at once or (`slowly`) a key
    /// at a time, then Enter if `submit`.
    async fn type_text(&self, page: &PageTarget, typed: TypeText, budget: Budget) -> Result<(), ControlError> {
        let TypeText { element, text, submit, slowly } = typed;
        if slowly {
            // One key every SLOW_TYPING: refuse at once what cannot
            // finish within the action's deadline (it holds the tab).
            let needed = SLOW_TYPING * u32::try_from(text.chars().count()).unwrap_or(u32::MAX);
            if needed > budget.timeout {
                return Err(ControlError::BadRequest(format!(
                    "typing {} characters slowly takes {} s, more than timeoutMs ({} ms): raise timeoutMs (at most {ACT_TIMEOUT_MAX_MS}) or type without slowly",
                    text.chars().count(),
                    needed.as_secs_f64().ceil(),
                    budget.timeout.as_millis()
                )));
            }
        }
        let target = self.ref_target(page, &element).await?;
        if slowly {
            let point = self.ready_box(page, &target, EDITABLE, budget).await?.center();
            click_at(page, point, MouseButton::Left, 1, 0).await?;
            for c in text.chars() {
                if Instant::now() > budget.deadline {
                    return Err(ControlError::Timeout {
                        what: "typing slowly".into(),
                        ms: u64::try_from(budget.timeout.as_millis()).unwrap_or(u64::MAX),
                    });
                }
                press(page, &Chord { modifiers: Vec::new(), key: keys::char_key(c) }).await?;
                tokio::time::sleep(SLOW_TYPING).await;
            }
        } else {
            let (_, focus) = self.ready(page, &target, EDITABLE, budget, true).await?;
            self.replace_text(page, &target, &text, focus).await?;
        }
        if submit {
            press(page, &keys::parse_chord("Enter")?).await?;
        }
        Ok(())
    }

    async fn evaluate(&self, page: &PageTarget, function: &str, element: Option<&str>) -> Result<Value, ControlError> {
        let reply = match element {
            None => {
                let expression = format!(
                    "(async () => {{ const f = ({function}\n); return typeof f === 'function' ? await f() : f; }})()"
                );
                page.cdp(&runtime::Evaluate::awaited(expression)).await?
            }
            Some(element) => {
                let target = self.ref_target(page, element).await?;
                let object_id = fields::element_object(page, &target).await?;
                let session = Some(target.frame.session.as_str());
                let client = page.conn.client();
                let cdp_error = || ControlError::cdp(&page.profile.name);
                let describe = dom::DescribeNode { object_id: Some(object_id), ..Default::default() };
                let node = client.send(&describe, session).await.map_err(cdp_error())?.node;
                // The page's own world, where the agent's function expects
                // the page's globals.
                let resolve = dom::ResolveNode { backend_node_id: node.backend_node_id };
                let object = client.send(&resolve, session).await.map_err(cdp_error())?.object;
                let object_id = object.object_id.unwrap_or_default();
                let call = runtime::CallFunctionOn {
                    function_declaration: function.to_string().into(),
                    object_id: Some(object_id.clone()),
                    arguments: vec![runtime::CallArgument::ObjectId(object_id)],
                    return_by_value: true,
                    await_promise: true,
                    ..Default::default()
                };
                client.send(&call, session).await.map_err(cdp_error())?
            }
        };
        if let Some(details) = reply.exception_details {
            let text = details.description();
            let text = if text.is_empty() { "error".to_string() } else { text };
            return Err(ControlError::Page(format!("evaluate threw: {}", text.lines().next().unwrap_or(&text))));
        }
        Ok(reply.result.into_value())
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum Navigation {
    #[default]
    None,
    Requested,
    Committed,
}

/// What the tab's events show of a navigation of its main frame since the
/// action began.
#[derive(Debug, Default)]
struct NavigationWatch {
    seen: Navigation,
    /// The committed document, while its `load` is awaited.
    loading: Option<String>,
}

impl NavigationWatch {
    /// Takes in one event of the tab on `session`, whose main frame is
    /// `main_frame`.
    fn see(&mut self, event: &CdpEvent, session: &str, main_frame: &str) {
        if event.session_id.as_deref() != Some(session) {
            return;
        }
        let started = [
            event.parse::<cdp_page::FrameRequestedNavigation>().map(|e| e.frame_id),
            event.parse::<cdp_page::FrameStartedNavigating>().map(|e| e.frame_id),
            event.parse::<cdp_page::FrameStartedLoading>().map(|e| e.frame_id),
        ];
        if started.iter().flatten().any(|frame| *frame == main_frame) && self.seen == Navigation::None {
            self.seen = Navigation::Requested;
        }
        match main_frame_move(event, session, main_frame) {
            Some(MainFrameMove::Document(loader)) => {
                self.seen = Navigation::Committed;
                self.loading = Some(loader);
            }
            Some(MainFrameMove::Restored) => {
                self.seen = Navigation::Committed;
                self.loading = None;
            }
            // No document to wait for.
            Some(MainFrameMove::WithinDocument) if self.seen == Navigation::Requested => self.seen = Navigation::None,
            Some(MainFrameMove::WithinDocument) => {}
            None => {
                let Some(lifecycle) = event.parse::<cdp_page::LifecycleEvent>().filter(|e| e.frame_id == main_frame)
                else {
                    return;
                };
                // A commit counts only after a navigation began: a client
                // beside the agent that turns lifecycle events on gets
                // Chrome's replay of the current document's, `commit`
                // included, and the tab's one debugger session hands it to
                // every client (an agent's click beside a script loop said
                // `navigated: true` for a button that changed nothing).
                if lifecycle.name == "commit" && self.seen == Navigation::Requested {
                    self.seen = Navigation::Committed;
                    self.loading = Some(lifecycle.loader_id);
                } else if lifecycle.name == "load" && self.loading.as_deref() == Some(lifecycle.loader_id.as_str()) {
                    self.loading = None;
                }
            }
        }
    }

    /// Waits (bounded) for the requested navigation to commit or end.
    async fn wait_commit(
        &mut self,
        events: &mut broadcast::Receiver<Arc<CdpEvent>>,
        page: &PageTarget,
        within: Duration,
    ) {
        let deadline = Instant::now() + within;
        while self.seen == Navigation::Requested {
            match tokio::time::timeout_at(deadline, events.recv()).await {
                Ok(Ok(event)) => self.see(&event, &page.session, &page.id),
                Ok(Err(broadcast::error::RecvError::Lagged(_))) => {}
                Ok(Err(_)) | Err(_) => return,
            }
        }
    }
}

/// How long an action's answer waits at most for what the action started.
/// The best agent tools wait too (Playwright MCP: for the requests, then
/// a second more, always); this waits only while something is pending.
pub(crate) const SETTLE_WITHIN: Duration = Duration::from_secs(1);

/// What an action started, awaited until `deadline`: the requests sent
/// since `mark`, the load of a page it committed, the first URL of the
/// tabs it opened.
struct Settle<'a> {
    mark: u64,
    new_tabs: &'a [String],
    deadline: Instant,
}

impl Settle<'_> {
    /// Whether it had to wait (the page may have changed since it was read).
    async fn wait(
        &self,
        page: &PageTarget,
        events: &mut broadcast::Receiver<Arc<CdpEvent>>,
        navigation: &mut NavigationWatch,
    ) -> bool {
        let mut waited = false;
        loop {
            // A tab opens on about:blank, then commits what it was opened for.
            let unopened =
                |id: &String| page.conn.tab_url(id).is_some_and(|(url, _)| url.is_empty() || url == "about:blank");
            let settled = navigation.loading.is_none()
                && page.conn.in_flight_since(&page.id, self.mark) == 0
                && !self.new_tabs.iter().any(unopened);
            // A dialog holds the page's scripts: nothing more comes until
            // it is answered.
            if settled || page.conn.open_dialog(&page.id).is_some() {
                return waited;
            }
            waited = true;
            // Every event the pump handles is broadcast after it updated the
            // state the checks read.
            match tokio::time::timeout_at(self.deadline, events.recv()).await {
                Ok(Ok(event)) => navigation.see(&event, &page.session, &page.id),
                Ok(Err(broadcast::error::RecvError::Lagged(_))) => {}
                Ok(Err(_)) | Err(_) => return waited,
            }
        }
    }
}

impl Engine {
    /// Where a tab is, asked of the browser (its scripts may be paused).
    async fn target_location(&self, page: &PageTarget) -> Option<(String, String)> {
        let info = target::GetTargetInfo { target_id: Some(page.id.clone()) };
        match page.conn.client().send(&info, None).await {
            Ok(answer) => Some((answer.target_info.url, answer.target_info.title)),
            Err(_) => page.conn.tab_url(&page.id),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(method: &str, params: Value) -> CdpEvent {
        CdpEvent { method: method.into(), params, session_id: Some("S".into()) }
    }

    fn lifecycle(name: &str, loader: &str) -> CdpEvent {
        let params = serde_json::json!({"frameId": "T", "loaderId": loader, "name": name, "timestamp": 1.0});
        event("Page.lifecycleEvent", params)
    }

    #[test]
    fn a_replayed_commit_of_the_current_document_is_no_navigation() {
        // Another client's `Page.setLifecycleEventsEnabled`: Chrome replays
        // the current document's lifecycle, and nothing started loading.
        let mut watch = NavigationWatch::default();
        for name in ["init", "commit", "DOMContentLoaded", "load"] {
            watch.see(&lifecycle(name, "L1"), "S", "T");
        }
        assert_eq!(watch.seen, Navigation::None);

        // A navigation the action started: its commit counts.
        let mut watch = NavigationWatch::default();
        watch.see(&event("Page.frameStartedLoading", serde_json::json!({"frameId": "T"})), "S", "T");
        assert_eq!(watch.seen, Navigation::Requested);
        watch.see(&lifecycle("commit", "L2"), "S", "T");
        assert_eq!((watch.seen, watch.loading.as_deref()), (Navigation::Committed, Some("L2")));
        watch.see(&lifecycle("load", "L2"), "S", "T");
        assert_eq!(watch.loading, None, "loaded");
    }
}
