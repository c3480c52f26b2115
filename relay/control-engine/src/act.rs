//! `POST /act`: actions on refs with real input events, after the checks a
//! careful user makes (attached, visible, enabled, in view, not moving, not
//! covered); navigation-aware; never stuck behind a JavaScript dialog.
//! Also the hooks (`/hooks/dialog`, `/hooks/file-chooser`) and `/pdf`.

use std::path::PathBuf;
use std::time::Duration;

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::broadcast;
use tokio::time::Instant;

use crate::conn::{DialogHook, FileHook};
use crate::engine::{ElementBox, Engine, PageTarget};
use crate::error::ControlError;
use crate::keys::{self, Chord};
use crate::page::{self, LiveFrame};
use crate::refs::RefEntry;

/// Default and bounds of an action's timeout.
pub const ACT_TIMEOUT: Duration = Duration::from_secs(8);
const ACT_TIMEOUT_MIN_MS: u64 = 500;
const ACT_TIMEOUT_MAX_MS: u64 = 60_000;
/// Hooks stay armed this long at most (and by default).
pub const HOOK_TIMEOUT: Duration = Duration::from_secs(120);
/// A disabled or covered element rarely changes by itself: give up sooner.
const STUCK_PATIENCE: Duration = Duration::from_secs(1);
/// How long a navigation an action started may take to commit.
const COMMIT_WITHIN: Duration = Duration::from_secs(10);
/// Delay between characters of `type {slowly: true}`.
const SLOW_TYPING: Duration = Duration::from_millis(50);
/// Inputs a user sets with a picker rather than by typing.
const PICKER_TYPES: [&str; 7] = ["date", "time", "datetime-local", "month", "week", "color", "range"];

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum MouseButton {
    #[default]
    Left,
    Right,
    Middle,
}

impl MouseButton {
    fn name(self) -> &'static str {
        match self {
            Self::Left => "left",
            Self::Right => "right",
            Self::Middle => "middle",
        }
    }
    fn bit(self) -> i64 {
        match self {
            Self::Left => 1,
            Self::Right => 2,
            Self::Middle => 4,
        }
    }
}

/// One field of `fill`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FillField {
    #[serde(rename = "ref")]
    pub element: String,
    /// `checkbox`, `radio`, `select`, `text`… (default: from the element).
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub value: Value,
}

/// The eleven kinds of `POST /act`.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase", deny_unknown_fields)]
pub enum Action {
    #[serde(rename_all = "camelCase")]
    Click {
        #[serde(rename = "ref")]
        element: String,
        #[serde(default)]
        double_click: bool,
        #[serde(default)]
        button: MouseButton,
        #[serde(default)]
        modifiers: Vec<String>,
    },
    #[serde(rename_all = "camelCase")]
    Type {
        #[serde(rename = "ref")]
        element: String,
        text: String,
        #[serde(default)]
        submit: bool,
        #[serde(default)]
        slowly: bool,
    },
    Press {
        key: String,
    },
    Hover {
        #[serde(rename = "ref")]
        element: String,
    },
    #[serde(rename_all = "camelCase")]
    Drag {
        start_ref: String,
        end_ref: String,
    },
    Select {
        #[serde(rename = "ref")]
        element: String,
        values: Vec<String>,
    },
    Fill {
        fields: Vec<FillField>,
    },
    Wait(WaitFor),
    Resize {
        width: u32,
        height: u32,
    },
    Close {},
    Evaluate {
        #[serde(rename = "fn")]
        function: String,
        #[serde(rename = "ref")]
        element: Option<String>,
    },
}

impl Action {
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Click { .. } => "click",
            Self::Type { .. } => "type",
            Self::Press { .. } => "press",
            Self::Hover { .. } => "hover",
            Self::Drag { .. } => "drag",
            Self::Select { .. } => "select",
            Self::Fill { .. } => "fill",
            Self::Wait(_) => "wait",
            Self::Resize { .. } => "resize",
            Self::Close {} => "close",
            Self::Evaluate { .. } => "evaluate",
        }
    }
}

/// What an action did.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ActOutcome {
    pub ok: bool,
    pub kind: &'static str,
    pub target_id: String,
    /// The action started a navigation that committed: refs are stale now.
    pub navigated: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// `evaluate`'s value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Pdf {
    pub target_id: String,
    pub path: PathBuf,
    pub pages: usize,
    pub bytes: usize,
}

/// An action's time: its deadline, and the timeout it came from (errors
/// name the timeout the agent asked for).
#[derive(Debug, Clone, Copy)]
struct Budget {
    deadline: Instant,
    timeout: Duration,
}

/// `input` types that take no typed text.
const NOT_TEXT_TYPES: [&str; 8] = ["checkbox", "radio", "file", "button", "submit", "reset", "image", "hidden"];

/// Which checks an element must pass before an action.
#[derive(Debug, Clone, Copy)]
struct Checks {
    enabled: bool,
    /// Same box over two frames: a pointer action must not land where the
    /// element was. Typing goes to the focused element wherever it is.
    stable: bool,
    hit_test: bool,
}

const CLICKABLE: Checks = Checks { enabled: true, stable: true, hit_test: true };
const HOVERABLE: Checks = Checks { enabled: false, stable: true, hit_test: true };
const EDITABLE: Checks = Checks { enabled: true, stable: false, hit_test: false };

/// A ref resolved to its frame, for one action.
struct Target {
    name: String,
    entry: RefEntry,
    frame: LiveFrame,
}

impl Target {
    fn arg(&self) -> Value {
        json!({"ref": self.name, "role": self.entry.role, "name": self.entry.name, "nth": self.entry.nth})
    }
}

pub fn clamp_act_timeout(ms: Option<u64>) -> Duration {
    ms.map_or(ACT_TIMEOUT, |ms| Duration::from_millis(ms.clamp(ACT_TIMEOUT_MIN_MS, ACT_TIMEOUT_MAX_MS)))
}

fn hook_deadline(ms: Option<u64>) -> Instant {
    Instant::now() + hook_lifetime(ms)
}

/// How long an armed hook waits for its event: as asked, at most (and by
/// default) two minutes.
fn hook_lifetime(ms: Option<u64>) -> Duration {
    ms.map_or(HOOK_TIMEOUT, |ms| Duration::from_millis(ms).min(HOOK_TIMEOUT))
}

impl Engine {
    /// `POST /act`.
    pub async fn act(
        &self,
        profile: Option<&str>,
        target_id: Option<&str>,
        timeout_ms: Option<u64>,
        action: Action,
    ) -> Result<ActOutcome, ControlError> {
        let timeout = clamp_act_timeout(timeout_ms);
        let evaluates = match &action {
            Action::Evaluate { .. } => true,
            Action::Wait(what) => what.function.is_some(),
            _ => false,
        };
        if evaluates && !self.allow_evaluate()? {
            return Err(ControlError::EvaluateDisabled);
        }
        let page = self.page_target(profile, target_id).await?;
        let mut navigations = page.conn.subscribe();
        let kind = action.kind();
        // A dialog the action opens blocks the page (and our input events)
        // until it is answered: answer the agent at once instead.
        let result = page.unless_dialog(self.run_action(&page, action, timeout)).await?;
        let mut outcome =
            ActOutcome { ok: true, kind, target_id: page.id.clone(), navigated: false, url: None, result };
        if kind != "close" {
            // A link's navigation starts in a task after the click is
            // acknowledged: one round trip through the page's task queue
            // lets it begin, then every event up to that reply is handled.
            let _ = cdp(&page, "Runtime.evaluate", json!({"expression": "0"})).await;
            page.conn.catch_up().await;
        }
        let navigation = if kind == "close" { Navigation::None } else { navigation_seen(&mut navigations, &page) };
        if navigation != Navigation::None {
            outcome.navigated = navigation == Navigation::Committed
                || wait_commit(&mut navigations, &page, timeout.min(COMMIT_WITHIN)).await;
            outcome.url = self.location(&page.conn, &page.session).await.map(|(url, _)| url);
        }
        Ok(outcome)
    }

    async fn run_action(
        &self,
        page: &PageTarget,
        action: Action,
        timeout: Duration,
    ) -> Result<Option<Value>, ControlError> {
        let deadline = Budget { deadline: Instant::now() + timeout, timeout };
        match action {
            Action::Click { element, double_click, button, modifiers } => {
                let mut bits = 0;
                for name in &modifiers {
                    bits |= keys::key(name).filter(|k| k.modifier != 0).map(|k| k.modifier).ok_or_else(|| {
                        ControlError::BadRequest(format!("modifier '{name}': use Alt, Control, Meta or Shift"))
                    })?;
                }
                let target = self.ref_target(page, &element).await?;
                let point = self.ready_box(page, &target, CLICKABLE, deadline).await?.center();
                click_at(page, point, button, if double_click { 2 } else { 1 }, bits).await?;
            }
            Action::Hover { element } => {
                let target = self.ref_target(page, &element).await?;
                let (x, y) = self.ready_box(page, &target, HOVERABLE, deadline).await?.center();
                mouse(page, "mouseMoved", x, y, MouseButton::Left, 0, 0).await?;
            }
            Action::Type { element, text, submit, slowly } => {
                let target = self.ref_target(page, &element).await?;
                if slowly {
                    let point = self.ready_box(page, &target, EDITABLE, deadline).await?.center();
                    click_at(page, point, MouseButton::Left, 1, 0).await?;
                    for c in text.chars() {
                        press(page, &Chord { modifiers: Vec::new(), key: keys::char_key(c) }).await?;
                        tokio::time::sleep(SLOW_TYPING).await;
                    }
                } else {
                    let (_, focus) = self.ready(page, &target, EDITABLE, deadline, true).await?;
                    self.replace_text(page, &target, &text, Some(focus)).await?;
                }
                if submit {
                    press(page, &keys::parse_chord("Enter")?).await?;
                }
            }
            Action::Press { key } => press(page, &keys::parse_chord(&key)?).await?,
            Action::Drag { start_ref, end_ref } => {
                let start = self.ref_target(page, &start_ref).await?;
                let from = self.ready_box(page, &start, HOVERABLE, deadline).await?.center();
                let end = self.ref_target(page, &end_ref).await?;
                let to = self.ready_box(page, &end, HOVERABLE, deadline).await?.center();
                drag(page, from, to).await?;
            }
            Action::Select { element, values } => {
                let target = self.ref_target(page, &element).await?;
                self.ready_box(page, &target, EDITABLE, deadline).await?;
                self.select(page, &target, &values).await?;
            }
            Action::Fill { fields } => {
                if fields.is_empty() {
                    return Err(ControlError::BadRequest("fill needs at least one field".into()));
                }
                for field in fields {
                    self.fill_field(page, &field, deadline).await?;
                }
            }
            Action::Wait(what) => self.wait(page, timeout, what).await?,
            Action::Resize { width, height } => {
                if !(100..=10_000).contains(&width) || !(100..=10_000).contains(&height) {
                    return Err(ControlError::BadRequest("width and height are 100–10000 pixels".into()));
                }
                let metrics = json!({"width": width, "height": height, "deviceScaleFactor": 0, "mobile": false});
                cdp(page, "Emulation.setDeviceMetricsOverride", metrics).await?;
            }
            Action::Close {} => {
                let closed = page.conn.client().call("Target.closeTarget", json!({"targetId": page.id}), None).await;
                closed.map_err(ControlError::cdp(&page.profile.name))?;
                self.forget_refs(&page.profile.name, &page.id);
            }
            Action::Evaluate { function, element } => {
                return self.evaluate(page, &function, element.as_deref()).await.map(Some);
            }
        }
        Ok(None)
    }

    /// A ref of the tab's last snapshot, in its live frame.
    async fn ref_target(&self, page: &PageTarget, element_ref: &str) -> Result<Target, ControlError> {
        let (name, entry) = self.ref_entry(&page.profile.name, &page.id, element_ref)?;
        let frame = page::live_frame(&page.conn, &page.id, &entry.frame)
            .await
            .map_err(|_| ControlError::StaleRef(name.clone()))?;
        Ok(Target { name, entry, frame })
    }

    /// Waits until the element passes `checks`; its box in the tab's
    /// viewport. Errors say what failed, in terms of the ref.
    async fn ready_box(
        &self,
        page: &PageTarget,
        target: &Target,
        checks: Checks,
        budget: Budget,
    ) -> Result<ElementBox, ControlError> {
        Ok(self.ready(page, target, checks, budget, false).await?.0)
    }

    /// Like [`Self::ready_box`]; with `focus`, the element is also focused
    /// for typing and the second value says what it is (`kind`, `type`).
    async fn ready(
        &self,
        page: &PageTarget,
        target: &Target,
        checks: Checks,
        budget: Budget,
        focus: bool,
    ) -> Result<(ElementBox, Value), ControlError> {
        let deadline = budget.deadline;
        let mut arg = target.arg();
        arg["focus"] = json!(focus);
        arg["enabled"] = json!(checks.enabled);
        arg["hitTest"] = json!(checks.hit_test);
        arg["stable"] = json!(checks.stable);
        let started = Instant::now();
        let name = &target.name;
        loop {
            let state = page::call_script(&page.conn, &target.frame, "actionable", arg.clone(), true).await?;
            match state["error"].as_str() {
                Some("unknown") => return Err(ControlError::UnknownRef(name.clone())),
                Some(_) => return Err(ControlError::StaleRef(name.clone())),
                None => {}
            }
            let now = Instant::now();
            let stuck = now.duration_since(started) >= STUCK_PATIENCE || now >= deadline;
            let waited = |what: &str| ControlError::Timeout {
                what: format!("{name} to {what}"),
                ms: budget.timeout.as_millis() as u64,
            };
            match state["state"].as_str() {
                Some("ok") => {
                    let (dx, dy) = page::frame_offset(&page.conn, &page.id, &target.entry.frame).await?;
                    let element = ElementBox {
                        x: state["x"].as_f64().unwrap_or_default() + dx,
                        y: state["y"].as_f64().unwrap_or_default() + dy,
                        width: state["width"].as_f64().unwrap_or_default(),
                        height: state["height"].as_f64().unwrap_or_default(),
                    };
                    return Ok((element, state["focus"].clone()));
                }
                Some("disabled") if stuck => return Err(ControlError::Disabled(name.clone())),
                Some("covered") if stuck => {
                    let by = state["by"].as_str().unwrap_or("another element").to_string();
                    return Err(ControlError::Covered { element: name.clone(), by });
                }
                Some("hidden") if now >= deadline => return Err(waited("become visible")),
                Some("unstable") if now >= deadline => return Err(waited("stop moving")),
                _ => {}
            }
            tokio::time::sleep(Duration::from_millis(30)).await;
        }
    }

    /// Replaces an editable element's content with `text`, as typing would
    /// (`Input.insertText` fires the page's input events); pickers (date,
    /// colour, range) get their value set with input and change events.
    ///
    /// `focus`: what [`Self::ready`] reported (else it focuses the element
    /// now). Each insertion is awaited before anything else happens: Input
    /// (browser side) and Runtime (renderer side) commands are not ordered
    /// with each other, and the next field's focus must not overtake it.
    async fn replace_text(
        &self,
        page: &PageTarget,
        target: &Target,
        text: &str,
        focus: Option<Value>,
    ) -> Result<(), ControlError> {
        let focus = match focus.filter(|f| f.is_object()) {
            Some(focus) => focus,
            None => page::call_script(&page.conn, &target.frame, "focusForTyping", target.arg(), true).await?,
        };
        check_script_error(&focus, &target.name)?;
        let kind = focus["kind"].as_str().unwrap_or("other");
        let input_type = focus["type"].as_str().unwrap_or_default();
        if kind == "input" && PICKER_TYPES.contains(&input_type) {
            let mut arg = target.arg();
            arg["value"] = json!(text);
            let set = page::call_script(&page.conn, &target.frame, "setValue", arg, true).await?;
            return check_script_error(&set, &target.name);
        }
        if kind == "other" || (kind == "input" && NOT_TEXT_TYPES.contains(&input_type)) {
            return Err(ControlError::Action(format!(
                "{} ({}) is not a text field: use click, select or press",
                target.name, target.entry.role
            )));
        }
        if text.is_empty() {
            press(page, &keys::parse_chord("Delete")?).await
        } else {
            cdp(page, "Input.insertText", json!({"text": text})).await.map(drop)
        }
    }

    async fn select(&self, page: &PageTarget, target: &Target, values: &[String]) -> Result<(), ControlError> {
        let mut arg = target.arg();
        arg["values"] = json!(values);
        let selected = page::call_script(&page.conn, &target.frame, "selectOptions", arg, true).await?;
        if let Some(error) = selected["error"].as_str()
            && let Some(options) = selected["options"].as_array()
        {
            let names: Vec<&str> = options.iter().filter_map(Value::as_str).collect();
            return Err(ControlError::Action(format!("{}: {error}; options: {}", target.name, names.join(", "))));
        }
        check_script_error(&selected, &target.name)
    }

    async fn fill_field(&self, page: &PageTarget, field: &FillField, deadline: Budget) -> Result<(), ControlError> {
        let target = self.ref_target(page, &field.element).await?;
        let kind = field.kind.as_deref().unwrap_or(match target.entry.role.as_str() {
            "checkbox" | "radio" | "switch" | "menuitemcheckbox" | "menuitemradio" => "checkbox",
            "combobox" | "listbox" => "select",
            _ => "text",
        });
        match kind {
            "checkbox" | "radio" | "switch" => {
                let wanted = truthy(&field.value);
                let state = page::call_script(&page.conn, &target.frame, "checkedState", target.arg(), true).await?;
                check_script_error(&state, &target.name)?;
                if state["checked"].as_bool() != Some(wanted) {
                    if !wanted && kind == "radio" {
                        return Err(ControlError::Action(format!(
                            "{} is a radio button: check another one of its group instead",
                            target.name
                        )));
                    }
                    let point = self.ready_box(page, &target, CLICKABLE, deadline).await?.center();
                    click_at(page, point, MouseButton::Left, 1, 0).await?;
                }
                Ok(())
            }
            "select" => {
                let values: Vec<String> = match &field.value {
                    Value::Array(items) => items.iter().map(text_of).collect(),
                    value => vec![text_of(value)],
                };
                self.ready_box(page, &target, EDITABLE, deadline).await?;
                match self.select(page, &target, &values).await {
                    // A combobox that is a text input with suggestions.
                    Err(ControlError::Action(message)) if message.ends_with("not a <select>") => {
                        self.replace_text(page, &target, &values.join(","), None).await
                    }
                    other => other,
                }
            }
            _ => {
                let (_, focus) = self.ready(page, &target, EDITABLE, deadline, true).await?;
                self.replace_text(page, &target, &text_of(&field.value), Some(focus)).await
            }
        }
    }

    async fn wait(&self, page: &PageTarget, timeout: Duration, what: WaitFor) -> Result<(), ControlError> {
        let deadline = Instant::now() + timeout;
        let ms = timeout.as_millis() as u64;
        let timed_out = |what: String| ControlError::Timeout { what, ms };
        if let Some(time_ms) = what.time_ms {
            tokio::time::sleep(Duration::from_millis(time_ms.min(ACT_TIMEOUT_MAX_MS))).await;
            return Ok(());
        }
        let in_page = match (&what.text, &what.text_gone, &what.selector) {
            (Some(text), _, _) => Some((json!({"text": text}), format!("text \"{text}\" to appear"))),
            (_, Some(text), _) => Some((json!({"textGone": text}), format!("text \"{text}\" to go"))),
            (_, _, Some(selector)) => Some((json!({"selector": selector}), format!("'{selector}' to be visible"))),
            _ => None,
        };
        if let Some((mut arg, description)) = in_page {
            let main = LiveFrame::main(&page.session, &page.id);
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                arg["timeoutMs"] = json!(left.as_millis() as u64);
                // A navigation destroys the world mid-wait: wait on in the new document.
                match page::call_script(&page.conn, &main, "waitFor", arg.clone(), true).await {
                    Ok(result) if result["met"] == true => return Ok(()),
                    Ok(_) if Instant::now() >= deadline => return Err(timed_out(description)),
                    Ok(_) => {}
                    Err(ControlError::Page(_)) if Instant::now() < deadline => {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    Err(error) => return Err(error),
                }
            }
        }
        let (expression, description) = match (&what.url, &what.load_state, &what.function) {
            (Some(url), _, _) => (
                format!(
                    "(() => {{ const want = {}; const href = location.href; if (!want.includes('*')) return href.includes(want); const re = new RegExp('^' + want.split('*').map(p => p.replace(/[.*+?^${{}}()|[\\]\\\\]/g, '\\\\$&')).join('.*') + '$'); return re.test(href); }})()",
                    json!(url)
                ),
                format!("the URL to match '{url}'"),
            ),
            (_, Some(state), _) if state == "networkidle" => {
                // Chrome's own signal: no requests for 500 ms in this document.
                return self
                    .wait_lifecycle(page, "networkIdle", deadline)
                    .await
                    .map_err(|_| timed_out(format!("the page to reach '{state}'")));
            }
            (_, Some(state), _) => {
                let ready = match state.as_str() {
                    "domcontentloaded" => "document.readyState !== 'loading'",
                    "load" => "document.readyState === 'complete'",
                    other => {
                        return Err(ControlError::BadRequest(format!(
                            "loadState '{other}': use domcontentloaded, load or networkidle"
                        )));
                    }
                };
                (ready.to_string(), format!("the page to reach '{state}'"))
            }
            (_, _, Some(function)) => (
                format!(
                    "(async () => {{ const f = ({function}); return !!(typeof f === 'function' ? await f() : f); }})()"
                ),
                "the function to return true".to_string(),
            ),
            _ => {
                return Err(ControlError::BadRequest(
                    "wait needs one of timeMs, text, textGone, selector, url, loadState or fn".into(),
                ));
            }
        };
        loop {
            let params = json!({"expression": expression, "returnByValue": true, "awaitPromise": true});
            let value = page.conn.client().call("Runtime.evaluate", params, Some(&page.session)).await;
            if let Ok(value) = &value {
                if let Some(details) = value.get("exceptionDetails") {
                    let text = details["exception"]["description"].as_str().unwrap_or("an exception");
                    return Err(ControlError::Page(format!("the wait threw: {text}")));
                }
                if value["result"]["value"] == true {
                    return Ok(());
                }
            }
            if Instant::now() >= deadline {
                return Err(timed_out(description));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until the tab's current document reaches `event` (a
    /// `Page.lifecycleEvent` name); `Err` when the deadline passes first.
    async fn wait_lifecycle(&self, page: &PageTarget, event: &str, deadline: Instant) -> Result<(), ()> {
        let mut events = page.conn.subscribe();
        while !page.conn.reached(&page.id, event) {
            match tokio::time::timeout_at(deadline, events.recv()).await {
                Ok(Ok(_)) | Ok(Err(broadcast::error::RecvError::Lagged(_))) => {}
                Ok(Err(broadcast::error::RecvError::Closed)) | Err(_) => return Err(()),
            }
        }
        Ok(())
    }

    async fn evaluate(&self, page: &PageTarget, function: &str, element: Option<&str>) -> Result<Value, ControlError> {
        let reply = match element {
            None => {
                let expression = format!(
                    "(async () => {{ const f = ({function}\n); return typeof f === 'function' ? await f() : f; }})()"
                );
                let params = json!({"expression": expression, "returnByValue": true, "awaitPromise": true});
                cdp(page, "Runtime.evaluate", params).await?
            }
            Some(element) => {
                let target = self.ref_target(page, element).await?;
                let handle = element_object(page, &target).await?;
                let object_id = handle.as_str().unwrap_or_default();
                let session = Some(target.frame.session.as_str());
                let client = page.conn.client();
                let cdp_error = ControlError::cdp(&page.profile.name);
                let node = client.call("DOM.describeNode", json!({"objectId": object_id}), session).await;
                let backend = node.map_err(cdp_error)?["node"]["backendNodeId"].clone();
                // The page's own world, where the agent's function expects
                // the page's globals.
                let resolved = client.call("DOM.resolveNode", json!({"backendNodeId": backend}), session).await;
                let object = resolved.map_err(ControlError::cdp(&page.profile.name))?["object"]["objectId"].clone();
                let params = json!({
                    "functionDeclaration": function,
                    "objectId": object,
                    "arguments": [{"objectId": object}],
                    "returnByValue": true,
                    "awaitPromise": true,
                });
                let reply = client.call("Runtime.callFunctionOn", params, session).await;
                reply.map_err(ControlError::cdp(&page.profile.name))?
            }
        };
        if let Some(details) = reply.get("exceptionDetails") {
            let text = details["exception"]["description"].as_str().or(details["text"].as_str()).unwrap_or("error");
            return Err(ControlError::Page(format!("evaluate threw: {}", text.lines().next().unwrap_or(text))));
        }
        Ok(reply["result"]["value"].clone())
    }

    /// `POST /hooks/dialog`: arms the answer to the tab's next dialog.
    pub async fn arm_dialog(
        &self,
        profile: Option<&str>,
        target_id: Option<&str>,
        accept: bool,
        prompt_text: Option<String>,
        timeout_ms: Option<u64>,
    ) -> Result<Value, ControlError> {
        let (_, conn, id) = self.tab(profile, target_id).await?;
        let hook = DialogHook { accept, prompt_text, until: hook_deadline(timeout_ms) };
        let answered = conn.arm_dialog(&id, hook);
        Ok(json!({"ok": true, "targetId": id, "armed": answered.is_none(), "answered": answered}))
    }

    /// `POST /hooks/file-chooser`: with `ref`, sets the files on that file
    /// input now; otherwise arms them for the tab's next file chooser.
    pub async fn arm_file_chooser(
        &self,
        profile: Option<&str>,
        target_id: Option<&str>,
        paths: &[String],
        element: Option<&str>,
        timeout_ms: Option<u64>,
    ) -> Result<Value, ControlError> {
        if paths.is_empty() {
            return Err(ControlError::BadRequest("paths is empty".into()));
        }
        let mut files = Vec::new();
        for path in paths {
            let canonical = std::fs::canonicalize(path)
                .map_err(|e| ControlError::BadRequest(format!("cannot use '{path}': {e}")))?;
            std::fs::File::open(&canonical)
                .map_err(|e| ControlError::BadRequest(format!("cannot read '{path}': {e}")))?;
            if !canonical.is_file() {
                return Err(ControlError::BadRequest(format!("'{path}' is not a file")));
            }
            files.push(canonical.display().to_string());
        }
        let page = self.page_target(profile, target_id).await?;
        match element {
            Some(element) => {
                let set = async {
                    let target = self.ref_target(&page, element).await?;
                    let params = json!({"files": files, "objectId": element_object(&page, &target).await?});
                    let set = page.conn.client().call("DOM.setFileInputFiles", params, Some(&target.frame.session));
                    set.await.map_err(|e| ControlError::Action(format!("{}: {e}", target.name)))
                };
                page.unless_dialog(set).await?;
                Ok(json!({"ok": true, "targetId": page.id, "set": files}))
            }
            None => {
                let hook = FileHook { paths: files.clone(), until: hook_deadline(timeout_ms) };
                let armed = page.conn.arm_file_chooser(&page.id, &page.session, hook).await;
                armed.map_err(ControlError::cdp(&page.profile.name))?;
                Ok(json!({"ok": true, "targetId": page.id, "armed": files}))
            }
        }
    }

    /// `POST /pdf`: the tab printed to PDF, saved under the media folder.
    pub async fn pdf(&self, profile: Option<&str>, target_id: Option<&str>) -> Result<Pdf, ControlError> {
        let page = self.page_target(profile, target_id).await?;
        let print = page.conn.client().call("Page.printToPDF", json!({"printBackground": true}), Some(&page.session));
        let printed = page.unless_dialog(async { print.await.map_err(ControlError::pdf(&page.profile.name)) }).await?;
        let data = base64::engine::general_purpose::STANDARD
            .decode(printed["data"].as_str().unwrap_or_default())
            .map_err(|e| ControlError::Page(format!("the PDF is not base64: {e}")))?;
        let path = self.save_media("page", "pdf", &data)?;
        Ok(Pdf { target_id: page.id, path, pages: pdf_pages(&data), bytes: data.len() })
    }
}

/// What `wait` waits for: one of these.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WaitFor {
    time_ms: Option<u64>,
    text: Option<String>,
    text_gone: Option<String>,
    selector: Option<String>,
    url: Option<String>,
    load_state: Option<String>,
    #[serde(rename = "fn")]
    function: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Navigation {
    None,
    Requested,
    Committed,
}

/// What the events so far show of a navigation of the tab's main frame.
fn navigation_seen(
    events: &mut broadcast::Receiver<std::sync::Arc<cdp_client::CdpEvent>>,
    page: &PageTarget,
) -> Navigation {
    let mut seen = Navigation::None;
    while let Ok(event) = events.try_recv() {
        if event.session_id.as_deref() != Some(page.session.as_str()) {
            continue;
        }
        let main_frame = event.params["frameId"] == page.id.as_str();
        let starts = matches!(
            event.method.as_str(),
            "Page.frameRequestedNavigation" | "Page.frameStartedNavigating" | "Page.frameStartedLoading"
        );
        if main_frame && starts && seen == Navigation::None {
            seen = Navigation::Requested;
        }
        if event.method == "Page.frameNavigated" && event.params["frame"]["id"] == page.id.as_str() {
            seen = Navigation::Committed;
        }
    }
    seen
}

/// Waits (bounded) for the tab's main frame to commit a new document.
async fn wait_commit(
    events: &mut broadcast::Receiver<std::sync::Arc<cdp_client::CdpEvent>>,
    page: &PageTarget,
    within: Duration,
) -> bool {
    // A commit may already be among the drained events; ask the page too.
    let deadline = Instant::now() + within;
    loop {
        match tokio::time::timeout_at(deadline, events.recv()).await {
            Ok(Ok(event))
                if event.session_id.as_deref() == Some(page.session.as_str())
                    && ((event.method == "Page.frameNavigated" && event.params["frame"]["id"] == page.id.as_str())
                        || (event.method == "Page.lifecycleEvent"
                            && event.params["name"] == "commit"
                            && event.params["frameId"] == page.id.as_str())) =>
            {
                return true;
            }
            Ok(Ok(_)) | Ok(Err(broadcast::error::RecvError::Lagged(_))) => {}
            Ok(Err(_)) | Err(_) => return false,
        }
    }
}

async fn cdp(page: &PageTarget, method: &str, params: Value) -> Result<Value, ControlError> {
    page.conn.client().call(method, params, Some(&page.session)).await.map_err(ControlError::cdp(&page.profile.name))
}

async fn mouse(
    page: &PageTarget,
    kind: &str,
    x: f64,
    y: f64,
    button: MouseButton,
    click_count: i64,
    modifiers: i64,
) -> Result<(), ControlError> {
    let mut params = json!({"type": kind, "x": x, "y": y, "modifiers": modifiers});
    if kind != "mouseMoved" {
        params["button"] = json!(button.name());
        params["buttons"] = json!(if kind == "mousePressed" { button.bit() } else { 0 });
        params["clickCount"] = json!(click_count);
    }
    cdp(page, "Input.dispatchMouseEvent", params).await.map(drop)
}

/// Move, then press and release (twice for a double click), sent in order
/// without waiting between them.
async fn click_at(
    page: &PageTarget,
    (x, y): (f64, f64),
    button: MouseButton,
    clicks: i64,
    modifiers: i64,
) -> Result<(), ControlError> {
    let client = page.conn.client();
    let session = Some(page.session.as_str());
    let mut calls = vec![client.start_call(
        "Input.dispatchMouseEvent",
        json!({"type": "mouseMoved", "x": x, "y": y, "modifiers": modifiers}),
        session,
    )];
    for count in 1..=clicks {
        for kind in ["mousePressed", "mouseReleased"] {
            let buttons = if kind == "mousePressed" { button.bit() } else { 0 };
            let params = json!({"type": kind, "x": x, "y": y, "button": button.name(), "buttons": buttons,
                "clickCount": count, "modifiers": modifiers});
            calls.push(client.start_call("Input.dispatchMouseEvent", params, session));
        }
    }
    for call in calls {
        call.await.map_err(ControlError::cdp(&page.profile.name))?;
    }
    Ok(())
}

/// Presses a chord: modifiers down, the key down and up, modifiers up.
async fn press(page: &PageTarget, chord: &Chord) -> Result<(), ControlError> {
    let client = page.conn.client();
    let session = Some(page.session.as_str());
    let mut calls = Vec::new();
    let mut held = 0;
    let event = |kind: &str, key: &keys::Key, modifiers: i64, text: Option<&str>| {
        let mut params = json!({
            "type": kind, "key": key.key, "code": key.code, "windowsVirtualKeyCode": key.key_code,
            "nativeVirtualKeyCode": key.key_code, "modifiers": modifiers,
        });
        if let Some(text) = text {
            params["text"] = json!(text);
            params["unmodifiedText"] = json!(text);
        }
        params
    };
    for modifier in &chord.modifiers {
        held |= modifier.modifier;
        calls.push(client.start_call("Input.dispatchKeyEvent", event("rawKeyDown", modifier, held, None), session));
    }
    let text = chord.key.text.as_deref();
    let down = if text.is_some() { "keyDown" } else { "rawKeyDown" };
    calls.push(client.start_call("Input.dispatchKeyEvent", event(down, &chord.key, held, text), session));
    calls.push(client.start_call("Input.dispatchKeyEvent", event("keyUp", &chord.key, held, None), session));
    for modifier in chord.modifiers.iter().rev() {
        held &= !modifier.modifier;
        calls.push(client.start_call("Input.dispatchKeyEvent", event("keyUp", modifier, held, None), session));
    }
    for call in calls {
        call.await.map_err(ControlError::cdp(&page.profile.name))?;
    }
    Ok(())
}

/// A drag from one point to another: pointer-driven drags see the mouse
/// events; HTML5 drag and drop is intercepted by Chrome and replayed with
/// `Input.dispatchDragEvent`, as a user's drop would be.
async fn drag(page: &PageTarget, from: (f64, f64), to: (f64, f64)) -> Result<(), ControlError> {
    let mut events = page.conn.subscribe();
    cdp(page, "Input.setInterceptDrags", json!({"enabled": true})).await?;
    let result = async {
        mouse(page, "mouseMoved", from.0, from.1, MouseButton::Left, 0, 0).await?;
        mouse(page, "mousePressed", from.0, from.1, MouseButton::Left, 1, 0).await?;
        let steps = 5;
        for step in 1..=steps {
            let t = f64::from(step) / f64::from(steps);
            let (x, y) = (from.0 + (to.0 - from.0) * t, from.1 + (to.1 - from.1) * t);
            let params = json!({"type": "mouseMoved", "x": x, "y": y, "button": "left", "buttons": 1});
            cdp(page, "Input.dispatchMouseEvent", params).await?;
        }
        let mut data = None;
        while let Ok(event) = events.try_recv() {
            if event.method == "Input.dragIntercepted" && event.session_id.as_deref() == Some(page.session.as_str()) {
                data = Some(event.params["data"].clone());
            }
        }
        if let Some(data) = data {
            for kind in ["dragEnter", "dragOver", "drop"] {
                let params = json!({"type": kind, "x": to.0, "y": to.1, "data": data, "modifiers": 0});
                cdp(page, "Input.dispatchDragEvent", params).await?;
            }
        }
        mouse(page, "mouseReleased", to.0, to.1, MouseButton::Left, 1, 0).await
    }
    .await;
    let _ = cdp(page, "Input.setInterceptDrags", json!({"enabled": false})).await;
    result
}

/// The `objectId` of a ref's element, in its frame's isolated world.
async fn element_object(page: &PageTarget, target: &Target) -> Result<Value, ControlError> {
    let handle = page::call_script(&page.conn, &target.frame, "element", target.arg(), false)
        .await
        .map_err(|_| ControlError::StaleRef(target.name.clone()))?;
    Ok(handle["objectId"].clone())
}

fn check_script_error(result: &Value, element: &str) -> Result<(), ControlError> {
    match result["error"].as_str() {
        None => Ok(()),
        Some("unknown") => Err(ControlError::UnknownRef(element.to_string())),
        Some("stale") => Err(ControlError::StaleRef(element.to_string())),
        Some(error) => Err(ControlError::Action(format!("{element}: {error}"))),
    }
}

fn truthy(value: &Value) -> bool {
    match value {
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|n| n != 0.0),
        Value::String(s) => matches!(s.to_ascii_lowercase().as_str(), "true" | "on" | "yes" | "checked" | "1"),
        _ => false,
    }
}

fn text_of(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// Pages of a PDF Chrome printed: its `/Type /Page` objects.
fn pdf_pages(data: &[u8]) -> usize {
    let needle = b"/Type /Page";
    data.windows(needle.len() + 1).filter(|w| &w[..needle.len()] == needle && w[needle.len()] != b's').count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn act_bodies_parse_and_unknown_fields_are_named() {
        let click: Action = serde_json::from_value(json!({"kind": "click", "ref": "e3", "doubleClick": true})).unwrap();
        assert!(matches!(click, Action::Click { double_click: true, .. }));
        let fill: Action = serde_json::from_value(
            json!({"kind": "fill", "fields": [{"ref": "e1", "value": "x"}, {"ref": "e2", "type": "checkbox", "value": true}]}),
        )
        .unwrap();
        assert!(matches!(fill, Action::Fill { ref fields } if fields.len() == 2));
        let error = serde_json::from_value::<Action>(json!({"kind": "click", "reff": "e3"})).unwrap_err().to_string();
        assert!(error.contains("reff"), "{error}");
        let wait: Action = serde_json::from_value(json!({"kind": "wait", "text": "Done"})).unwrap();
        assert!(matches!(wait, Action::Wait(WaitFor { text: Some(_), .. })));
        let error = serde_json::from_value::<Action>(json!({"kind": "wait", "txt": "Done"})).unwrap_err().to_string();
        assert!(error.contains("txt"), "{error}");
        let error = serde_json::from_value::<Action>(json!({"kind": "teleport"})).unwrap_err().to_string();
        assert!(error.contains("teleport") && error.contains("click"), "{error}");
    }

    #[test]
    fn timeouts_are_clamped_to_half_a_second_and_a_minute() {
        assert_eq!(clamp_act_timeout(None), Duration::from_secs(8));
        assert_eq!(clamp_act_timeout(Some(1)), Duration::from_millis(500));
        assert_eq!(clamp_act_timeout(Some(600_000)), Duration::from_secs(60));
    }

    #[test]
    fn hooks_wait_two_minutes_by_default_and_at_most() {
        assert_eq!(hook_lifetime(None), Duration::from_secs(120));
        assert_eq!(hook_lifetime(Some(5_000)), Duration::from_secs(5));
        assert_eq!(hook_lifetime(Some(3_600_000)), Duration::from_secs(120));
    }

    #[test]
    fn values_for_checkboxes_and_fields() {
        assert!(truthy(&json!(true)) && truthy(&json!("on")) && truthy(&json!(1)));
        assert!(!truthy(&json!(false)) && !truthy(&json!("off")) && !truthy(&json!(null)));
        assert_eq!(text_of(&json!(42)), "42");
        assert_eq!(text_of(&json!("a")), "a");
    }

    #[test]
    fn pdf_pages_are_counted_without_the_pages_tree() {
        let pdf = b"<< /Type /Pages /Count 2 >> << /Type /Page >> << /Type /Page /Parent 1 0 R >>";
        assert_eq!(pdf_pages(pdf), 2);
    }
}
