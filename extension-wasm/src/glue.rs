//! The WASM side: entry points for `background.js`, and [`WasmHost`], the
//! real [`Host`] that runs `chrome.*` calls, the relay WebSocket and timers
//! and feeds their outcomes back into the core. No decisions here.

use std::cell::RefCell;
use std::collections::HashMap;

use js_sys::{Array, JSON, JsString, Object, Reflect};
use shared_protocol::{TabId, TabInfo, WindowId, layout};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::{JsFuture, spawn_local};
use web_sys::{CloseEvent, MessageEvent, WebSocket};

use crate::chrome::{
    action, alarms, context_menus, debugger, declarative_net_request, global, notifications, runtime, storage,
    tab_groups, tabs, windows,
};
use crate::core::{
    Badge, ChromeCall, Core, DONE_MENU_PREFIX, Environment, GroupId, Host, MENU_PREFIX, NO_GROUP, OpId,
    PersistedGrants, PersistedTab, SessionRule, Settings, StartFacts, Timer, group_from_chrome, groups_from_chrome,
    tab_info_from_chrome, tabs_from_chrome,
};
use crate::text::rust_string;

thread_local! {
    static CORE: RefCell<Option<Core<WasmHost>>> = const { RefCell::new(None) };
    /// Events that arrived before the core was started (storage reads are async).
    static EARLY: RefCell<Vec<(String, JsValue)>> = const { RefCell::new(Vec::new()) };
    /// Identifies the live socket, so a replaced socket's late events are ignored.
    static SOCKET_GENERATION: RefCell<u64> = const { RefCell::new(0) };
}

/// Runs `f` on the core. Host calls never re-enter it synchronously; should a
/// browser ever call back synchronously, the work is retried from a task.
fn with_core(f: impl FnOnce(&mut Core<WasmHost>) + 'static) {
    let busy = CORE.with(|cell| match cell.try_borrow_mut() {
        Ok(mut core) => {
            if let Some(core) = core.as_mut() {
                f(core);
            }
            None
        }
        Err(_) => Some(f),
    });
    if let Some(f) = busy {
        spawn_local(async move { with_core(f) });
    }
}

fn error_message(error: &JsValue) -> String {
    Reflect::get(error, &"message".into())
        .ok()
        .and_then(|m| m.as_string())
        .or_else(|| error.as_string())
        .unwrap_or_else(|| "unknown error".into())
}

fn object(pairs: &[(&str, JsValue)]) -> JsValue {
    let object = Object::new();
    for (key, value) in pairs {
        let _ = Reflect::set(&object, &(*key).into(), value);
    }
    object.into()
}

fn stringify(value: &JsValue) -> String {
    rust_string(&json_text(value)).unwrap_or_else(|| "null".into())
}

/// `value`'s JSON as a JavaScript string (`null` for what has none), for
/// payloads the core forwards unread: they never enter WASM.
fn json_text(value: &JsValue) -> JsString {
    if value.is_undefined() {
        return "null".into();
    }
    JSON::stringify(value).ok().filter(|text| text.is_string()).unwrap_or_else(|| "null".into())
}

fn get(value: &JsValue, key: &str) -> JsValue {
    Reflect::get(value, &key.into()).unwrap_or(JsValue::UNDEFINED)
}

/// `value` as an array; anything else (`undefined` when nothing was stored)
/// as an empty one. `Array.from(undefined)` would throw.
fn array(value: &JsValue) -> Array {
    if Array::is_array(value) { Array::from(value) } else { Array::new() }
}

async fn settle(promise: Result<js_sys::Promise, JsValue>) -> Result<JsValue, String> {
    let promise = promise.map_err(|e| error_message(&e))?;
    JsFuture::from(promise).await.map_err(|e| error_message(&e))
}

fn debuggee(tab: TabId, session: Option<&str>) -> JsValue {
    let mut pairs = vec![("tabId", JsValue::from_f64(tab as f64))];
    if let Some(session) = session {
        pairs.push(("sessionId", session.into()));
    }
    object(&pairs)
}

fn tab_ids(ids: &[TabId]) -> JsValue {
    ids.iter().map(|t| JsValue::from_f64(*t as f64)).collect::<Array>().into()
}

/// `chrome.debugger.sendCommand` with `params` (JSON text) parsed for it:
/// Chrome's promise, or why it could not be made.
fn start_command(
    tab: TabId,
    session: Option<&str>,
    method: &str,
    params: Option<&str>,
) -> Result<js_sys::Promise, String> {
    let params = match params {
        Some(json) => JSON::parse(json).map_err(|e| error_message(&e))?,
        None => JsValue::UNDEFINED,
    };
    debugger::send_command(&debuggee(tab, session), method, &params).map_err(|e| error_message(&e))
}

/// Chrome's result as the JSON text the relay gets (`{}` when it has none).
fn result_text(result: &JsValue) -> JsString {
    if result.is_undefined() { "{}".into() } else { json_text(result) }
}

/// The two callbacks every forwarded command's promise settles into, with
/// the command's op bound as their first argument; made once.
struct AnswerCallbacks {
    resolved: Closure<dyn FnMut(f64, JsValue)>,
    rejected: Closure<dyn FnMut(f64, JsValue)>,
}

thread_local! {
    static ANSWER_CALLBACKS: AnswerCallbacks = AnswerCallbacks {
        resolved: Closure::new(|op: f64, result: JsValue| {
            let answer = result_text(&result);
            with_core(move |core| core.on_answer(op as OpId, Ok(answer)));
        }),
        rejected: Closure::new(|op: f64, error: JsValue| {
            let message = error_message(&error);
            with_core(move |core| core.on_answer(op as OpId, Err(message)));
        }),
    };
}

#[wasm_bindgen]
extern "C" {
    /// A promise seen as taking plain functions to settle into (js-sys's
    /// `then2` takes closures: one made per command is what this avoids).
    type Settling;
    #[wasm_bindgen(method)]
    fn then(this: &Settling, resolved: &Callback, rejected: &Callback);
    /// One of [`ANSWER_CALLBACKS`], or one bound to a command's op.
    type Callback;
    /// `Function.prototype.bind`: the callback with `op` as its first argument.
    #[wasm_bindgen(method, js_name = bind)]
    fn bind_op(this: &Callback, this_arg: &JsValue, op: f64) -> Callback;
}

/// Forwards a client's command, the hot path: Chrome's promise settles
/// straight into [`ANSWER_CALLBACKS`]. No Rust future, so no task to
/// schedule and no pair of one-off closures per command for the garbage
/// collector to finalize: a round trip's share of the worker's time and
/// of its pauses (the extension-path benchmark profiles both workers).
fn forward_command(op: OpId, tab: TabId, session: Option<&str>, method: &str, params: Option<&str>) {
    let promise = match start_command(tab, session, method, params) {
        Ok(promise) => promise,
        // The core is busy (it made this call): `with_core` answers from a task.
        Err(message) => return with_core(move |core| core.on_answer(op, Err(message))),
    };
    ANSWER_CALLBACKS.with(|callbacks| {
        let bind = |callback: &Closure<dyn FnMut(f64, JsValue)>| {
            callback.as_ref().unchecked_ref::<Callback>().bind_op(&JsValue::NULL, op as f64)
        };
        promise.unchecked_ref::<Settling>().then(&bind(&callbacks.resolved), &bind(&callbacks.rejected));
    });
}

/// Runs one allow-listed call; its result as JSON, or Chrome's message.
async fn run(call: ChromeCall) -> Result<String, String> {
    let tab_id = |tab: TabId| tab as f64;
    let value = match call {
        ChromeCall::DebuggerAttach { tab } => settle(debugger::attach(&debuggee(tab, None), "1.3")).await?,
        ChromeCall::DebuggerDetach { tab } => settle(debugger::detach(&debuggee(tab, None))).await?,
        ChromeCall::DebuggerSendCommand { tab, session, method, params } => {
            let promise = start_command(tab, session.as_deref(), &method, params.as_deref())?;
            let result = settle(Ok(promise)).await?;
            return Ok(rust_string(&result_text(&result)).unwrap_or_else(|| "{}".into()));
        }
        ChromeCall::TabsGet { tab } => settle(tabs::get(tab_id(tab))).await?,
        ChromeCall::TabsCreate { url, active, opener, window } => {
            settle(tabs::create(&tab_create_properties(url, active, opener, window))).await?
        }
        ChromeCall::TabsRemove { tab } => settle(tabs::remove(tab_id(tab))).await?,
        ChromeCall::TabsUpdate { tab, url, active } => {
            settle(tabs::update(tab_id(tab), &tab_update_properties(url, active))).await?
        }
        ChromeCall::TabsQuery { query } => {
            let query = JSON::parse(&serde_json::to_string(&query).unwrap_or_else(|_| "{}".into()))
                .map_err(|e| error_message(&e))?;
            settle(tabs::query(&query)).await?
        }
        ChromeCall::WindowsUpdate { window, focused } => {
            let mut pairs = Vec::new();
            if let Some(focused) = focused {
                pairs.push(("focused", JsValue::from_bool(focused)));
            }
            settle(windows::update(window as f64, &object(&pairs))).await?
        }
        ChromeCall::WindowsCreate { url, focused } => {
            let mut pairs = vec![("focused", JsValue::from_bool(focused))];
            if let Some(url) = url {
                pairs.push(("url", url.into()));
            }
            settle(windows::create(&object(&pairs))).await?
        }
        ChromeCall::UpdateSessionRules { remove, add } => update_session_rules(&remove, &add).await?,
        ChromeCall::MenusCreate { id, title } => create_menu_item(id, title).await?,
        ChromeCall::MenusRemove { id } => settle(Ok(context_menus::remove(&id))).await?,
        ChromeCall::NotificationsCreate { id, title, message, buttons } => {
            create_notification(&id, title, message, buttons).await?
        }
        ChromeCall::NotificationsClear { id } => settle(notifications::clear(&id)).await?,
        ChromeCall::MenusRemoveAll => settle(Ok(context_menus::remove_all())).await?,
        ChromeCall::TabsGroup { tabs: ids, group } => group_tabs(&ids, group).await?,
        ChromeCall::TabsUngroup { tabs: ids } => settle(tabs::ungroup(&tab_ids(&ids))).await?,
        ChromeCall::TabGroupsUpdate { group, title, color } => {
            let properties = object(&[("title", title.into()), ("color", color.into())]);
            settle(tab_groups::update(group as f64, &properties)).await?
        }
        ChromeCall::ReadPairing => {
            return serde_json::to_string(&read_settings().await).map_err(|e| e.to_string());
        }
    };
    Ok(stringify(&value))
}

/// `chrome.tabs.create`'s properties: what the call names, nothing more.
fn tab_create_properties(
    url: Option<String>,
    active: bool,
    opener: Option<TabId>,
    window: Option<WindowId>,
) -> JsValue {
    let mut pairs = vec![("active", JsValue::from_bool(active))];
    if let Some(url) = url {
        pairs.push(("url", url.into()));
    }
    if let Some(opener) = opener {
        pairs.push(("openerTabId", JsValue::from_f64(opener as f64)));
    }
    if let Some(window) = window {
        pairs.push(("windowId", JsValue::from_f64(window as f64)));
    }
    object(&pairs)
}

/// `chrome.tabs.update`'s properties: what the call names, nothing more.
fn tab_update_properties(url: Option<String>, active: Option<bool>) -> JsValue {
    let mut pairs = Vec::new();
    if let Some(url) = url {
        pairs.push(("url", url.into()));
    }
    if let Some(active) = active {
        pairs.push(("active", JsValue::from_bool(active)));
    }
    object(&pairs)
}

/// `outcome`, its refusal also said on the worker's console: the core
/// goes on without what was refused, and whoever debugs the extension
/// should see why.
fn warn_if_refused(outcome: Result<JsValue, String>, what: &str) -> Result<JsValue, String> {
    if let Err(e) = &outcome {
        web_sys::console::warn_1(&format!("Browser Relay: {what}: {e}").into());
    }
    outcome
}

/// `chrome.declarativeNetRequest.updateSessionRules`: the grants' cookie
/// rules, replaced as a set.
async fn update_session_rules(remove: &[i64], add: &[SessionRule]) -> Result<JsValue, String> {
    let removed: Array = remove.iter().map(|id| JsValue::from_f64(*id as f64)).collect();
    let added = JSON::parse(&serde_json::to_string(add).map_err(|e| e.to_string())?).map_err(|e| error_message(&e))?;
    let options = object(&[("removeRuleIds", removed.into()), ("addRules", added)]);
    let outcome = settle(declarative_net_request::update_session_rules(&options)).await;
    warn_if_refused(outcome, "the grants' cookie rules were refused")
}

/// `chrome.contextMenus.create`: an item of the toolbar button's menu.
async fn create_menu_item(id: String, title: String) -> Result<JsValue, String> {
    let contexts: Array = [JsValue::from_str("action")].into_iter().collect();
    let properties = object(&[("id", id.into()), ("title", title.into()), ("contexts", contexts.into())]);
    let outcome = settle(Ok(context_menus::create(&properties))).await;
    warn_if_refused(outcome, "cannot add a grant's menu item")
}

/// `chrome.notifications.create`: one that stays until it is answered,
/// cleared or closed by the person.
async fn create_notification(
    id: &str,
    title: String,
    message: String,
    buttons: Vec<String>,
) -> Result<JsValue, String> {
    let buttons: Array = buttons.into_iter().map(|title| object(&[("title", title.into())])).collect();
    let options = object(&[
        ("type", "basic".into()),
        ("iconUrl", "icons/icon128.png".into()),
        ("title", title.into()),
        ("message", message.into()),
        ("buttons", buttons.into()),
        ("requireInteraction", JsValue::TRUE),
        ("priority", JsValue::from_f64(2.0)),
    ]);
    let outcome = settle(notifications::create(id, &options)).await;
    warn_if_refused(outcome, "cannot show a notification")
}

/// `chrome.tabs.group`: into `group`, or a new group in the tabs' window.
async fn group_tabs(ids: &[TabId], group: Option<GroupId>) -> Result<JsValue, String> {
    let mut pairs = vec![("tabIds", tab_ids(ids))];
    match (group, ids.first()) {
        (Some(group), _) => pairs.push(("groupId", JsValue::from_f64(group as f64))),
        // Without a window, Chrome makes the group in the current
        // window and moves the tabs there (a grant's window, a
        // popup's): in the tabs' own window, as the call says.
        (None, Some(&first)) => {
            let window = get(&settle(tabs::get(first as f64)).await?, "windowId");
            if window.as_f64().is_some() {
                pairs.push(("createProperties", object(&[("windowId", window)])));
            }
        }
        (None, None) => {}
    }
    settle(tabs::group(&object(&pairs))).await
}

#[wasm_bindgen]
extern "C" {
    /// The relay socket seen as taking a JavaScript string to send
    /// (web-sys's `send_with_str` takes a `&str`, which would copy a
    /// payload out of WASM).
    type TextSocket;
    #[wasm_bindgen(method, catch, js_name = send)]
    fn send(this: &TextSocket, data: &JsString) -> Result<(), JsValue>;
}

/// The live relay socket and the handlers keeping its callbacks alive.
struct Socket {
    ws: WebSocket,
    _handlers: Vec<Closure<dyn FnMut(JsValue)>>,
}

/// How long the relay's status route has to answer (a suspended `serve`
/// accepts and never answers): the core always hears back.
const STATUS_DEADLINE_MS: f64 = 5_000.0;

/// `GET http://127.0.0.1:PORT/extension/status` (no token, a public
/// route): its body, or why there is none.
async fn relay_status(port: u16) -> Result<String, String> {
    let mut init = vec![("cache", JsValue::from_str("no-store"))];
    if let Ok(signal) = global::abort_after(STATUS_DEADLINE_MS) {
        init.push(("signal", signal));
    }
    let url = format!("http://127.0.0.1:{port}/extension/status");
    let response = settle(global::fetch(&url, &object(&init))).await?;
    if get(&response, "ok").as_bool() != Some(true) {
        return Err(format!("HTTP {}", get(&response, "status").as_f64().unwrap_or(0.0)));
    }
    let text = get(&response, "text").dyn_into::<js_sys::Function>().map_err(|_| "no body".to_string())?;
    let body = text.call0(&response).and_then(|p| p.dyn_into::<js_sys::Promise>());
    settle(body).await?.as_string().ok_or_else(|| "no body".into())
}

/// Events closer together than this are a flood, and share frames.
const FLOOD_MS: f64 = 2.0;
/// The most characters one batched frame holds.
const BATCH_CHARS: u32 = 1 << 20;
/// How long an event of a flood waits for the ones after it: a timer of
/// 0 runs between two of chrome.debugger's event tasks, so a frame would
/// hold one or two.
const FLUSH_AFTER_MS: f64 = 1.0;

/// The real host: the browser.
#[derive(Default)]
pub(crate) struct WasmHost {
    socket: Option<Socket>,
    timers: HashMap<Timer, JsValue>,
    /// The relay takes several messages a frame (protocol 5).
    batching: bool,
    /// Events waiting to go in one frame, a line each (a rope).
    waiting: Option<JsString>,
    /// A task will send `waiting`.
    flush_soon: bool,
    /// When the last event was sent or queued (ms since the epoch).
    last_event_ms: f64,
}

impl std::fmt::Debug for WasmHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WasmHost").field("socket", &self.socket.is_some()).field("timers", &self.timers.len()).finish()
    }
}

impl WasmHost {
    /// Drops a socket's handlers only after the current callback returned
    /// (a handler may be what asked for the socket to go).
    fn retire_socket(&mut self) {
        if let Some(socket) = self.socket.take() {
            socket.ws.set_onopen(None);
            socket.ws.set_onmessage(None);
            socket.ws.set_onclose(None);
            socket.ws.set_onerror(None);
            let _ = socket.ws.close();
            spawn_local(async move { drop(socket) });
        }
        SOCKET_GENERATION.with(|g| *g.borrow_mut() += 1);
        self.batching = false;
        self.waiting = None;
    }

    /// Sends a frame now, after the events waiting (in the same frame).
    fn send_now(&mut self, frame: JsString) {
        if self.socket.is_none() {
            return;
        }
        let frame = self.after_waiting(frame);
        let Some(socket) = &self.socket else { return };
        // Concatenation makes a rope; the socket flattens it once, as it
        // encodes the frame.
        let _ = socket.ws.unchecked_ref::<TextSocket>().send(&frame);
    }

    /// An event: sent at once when it comes alone; in a flood (another
    /// one came within [`FLOOD_MS`]) it waits with the ones after it for
    /// one frame, sent from a task of its own once the events queued
    /// before it are in. One `send` per frame instead of per event: the
    /// worker's cost that a flood pays per event (protocol 5).
    fn send_event_frame(&mut self, frame: JsString) {
        let now = js_sys::Date::now();
        let flood = now - self.last_event_ms < FLOOD_MS;
        self.last_event_ms = now;
        if !self.batching || (self.waiting.is_none() && !flood) {
            return self.send_now(frame);
        }
        // A frame stays far below the relay's message limit, whatever the
        // events weigh: a full batch goes now, and a heavy event alone.
        if self.waiting.as_ref().is_some_and(|w| w.length() + frame.length() > BATCH_CHARS) {
            self.flush();
        }
        if frame.length() > BATCH_CHARS {
            return self.send_now(frame);
        }
        self.waiting = Some(self.after_waiting(frame));
        if !self.flush_soon {
            self.flush_soon = true;
            let handler = Closure::once_into_js(move || with_core(move |core| core.host_mut().flush()));
            global::set_timeout(&handler, FLUSH_AFTER_MS);
        }
    }

    /// `frame` after the events waiting, a line each (a rope); none wait
    /// any more.
    fn after_waiting(&mut self, frame: JsString) -> JsString {
        match self.waiting.take() {
            Some(waiting) => waiting.concat(&JsString::from("\n")).concat(&frame),
            None => frame,
        }
    }

    /// Sends the events waiting, if any.
    fn flush(&mut self) {
        self.flush_soon = false;
        if let Some(waiting) = self.waiting.take()
            && let Some(socket) = &self.socket
        {
            let _ = socket.ws.unchecked_ref::<TextSocket>().send(&waiting);
        }
    }
}

impl Host for WasmHost {
    type Json = JsString;

    fn call(&mut self, op: OpId, call: ChromeCall) {
        // A forwarded command's answer stays a JavaScript string.
        if let ChromeCall::DebuggerSendCommand { tab, session, method, params } = call {
            return forward_command(op, tab, session.as_deref(), &method, params.as_deref());
        }
        spawn_local(async move {
            let outcome = run(call).await;
            with_core(move |core| core.on_op_done(op, outcome));
        });
    }

    fn set_badge(&mut self, tab: TabId, badge: &Badge, title: &str) {
        let tab = JsValue::from_f64(tab as f64);
        let calls = [
            action::set_badge_text(&object(&[("tabId", tab.clone()), ("text", badge.text().into())])),
            action::set_badge_background_color(&object(&[("tabId", tab.clone()), ("color", badge.color().into())])),
            action::set_title(&object(&[("tabId", tab), ("title", title.into())])),
        ];
        // A tab that just closed rejects these; nothing to do about it.
        spawn_local(async move {
            for call in calls {
                let _ = settle(call).await;
            }
        });
    }

    fn persist(&mut self, shared: &[PersistedTab], grants: &PersistedGrants) {
        let json = serde_json::to_string(shared).unwrap_or_else(|_| "[]".into());
        let grants = serde_json::to_string(grants).unwrap_or_else(|_| "{}".into());
        let items = object(&[
            ("sharedTabs", JSON::parse(&json).unwrap_or_else(|_| Array::new().into())),
            ("grants", JSON::parse(&grants).unwrap_or_else(|_| Object::new().into())),
        ]);
        spawn_local(async move {
            if let Err(e) = settle(storage::session_set(&items)).await {
                web_sys::console::warn_1(&format!("Browser Relay: cannot save state: {e}").into());
            }
        });
    }

    fn connect(&mut self, url: &str, protocols: &[String]) {
        self.retire_socket();
        let generation = SOCKET_GENERATION.with(|g| *g.borrow());
        let list: Array = protocols.iter().map(|p| JsValue::from_str(p)).collect();
        let ws = match WebSocket::new_with_str_sequence(url, &list) {
            Ok(ws) => ws,
            Err(e) => {
                let reason = error_message(&e);
                spawn_local(async move { with_core(move |core| core.on_socket_closed(1006, &reason)) });
                return;
            }
        };
        let current = move || SOCKET_GENERATION.with(|g| *g.borrow()) == generation;
        let on_open = Closure::<dyn FnMut(JsValue)>::new(move |_| {
            if current() {
                with_core(|core| core.on_socket_open());
            }
        });
        let on_message = Closure::<dyn FnMut(JsValue)>::new(move |event: JsValue| {
            let Some(text) = event.dyn_into::<MessageEvent>().ok().and_then(|m| rust_string(&m.data())) else { return };
            if current() {
                with_core(move |core| core.on_socket_message(&text));
            }
        });
        let on_close = Closure::<dyn FnMut(JsValue)>::new(move |event: JsValue| {
            let (code, reason) = match event.dyn_into::<CloseEvent>() {
                Ok(close) => (close.code(), close.reason()),
                Err(_) => (1006, String::new()),
            };
            if current() {
                with_core(move |core| core.on_socket_closed(code, &reason));
            }
        });
        ws.set_onopen(Some(on_open.as_ref().unchecked_ref()));
        ws.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
        ws.set_onclose(Some(on_close.as_ref().unchecked_ref()));
        self.socket = Some(Socket { ws, _handlers: vec![on_open, on_message, on_close] });
    }

    fn send(&mut self, frame: String) {
        if self.waiting.is_none() {
            if let Some(socket) = &self.socket {
                let _ = socket.ws.send_with_str(&frame);
            }
            return;
        }
        self.send_now(JsString::from(frame));
    }

    fn send_framed(&mut self, head: String, payload: JsString) {
        self.send_now(JsString::from(head).concat(&payload).concat(&JsString::from(layout::TAIL)));
    }

    fn send_event(&mut self, head: String, payload: JsString) {
        self.send_event_frame(JsString::from(head).concat(&payload).concat(&JsString::from(layout::TAIL)));
    }

    fn set_batching(&mut self, on: bool) {
        self.batching = on;
    }

    fn disconnect(&mut self) {
        self.retire_socket();
    }

    fn save_pairing(&mut self, paired: Option<(&str, u16)>) {
        // One write, so that storage's change reports all at once.
        let mut pairs = vec![("pairingCode", JsValue::NULL), ("pairingPort", JsValue::NULL)];
        if let Some((token, port)) = paired {
            pairs.push(("relayToken", JsValue::from_str(token)));
            pairs.push(("relayPort", JsValue::from_f64(f64::from(port))));
        }
        let items = object(&pairs);
        spawn_local(async move {
            if let Err(e) = settle(storage::local_set(&items)).await {
                web_sys::console::warn_1(&format!("Browser Relay: cannot save the pairing: {e}").into());
            }
        });
    }

    fn unsent_bytes(&self) -> u64 {
        // web-sys reads `bufferedAmount` as a u32: it would wrap at 4 GiB,
        // far past the bound the core checks after every send.
        self.socket.as_ref().map_or(0, |socket| u64::from(socket.ws.buffered_amount()))
    }

    fn set_timer(&mut self, timer: Timer, after_ms: u64) {
        self.cancel_timer(timer);
        // A one-shot closure frees itself after it runs, so re-arming the
        // same timer from inside its own callback is safe.
        let handler = Closure::once_into_js(move || with_core(move |core| core.on_timer(timer)));
        let id = global::set_timeout(&handler, after_ms as f64);
        self.timers.insert(timer, id);
    }

    fn cancel_timer(&mut self, timer: Timer) {
        if let Some(id) = self.timers.remove(&timer) {
            global::clear_timeout(&id);
        }
    }

    fn random(&mut self) -> f64 {
        js_sys::Math::random()
    }

    fn random_bytes(&mut self) -> Option<[u8; 32]> {
        let mut bytes = [0u8; 32];
        let scope: web_sys::WorkerGlobalScope = js_sys::global().unchecked_into();
        let filled = scope.crypto().and_then(|crypto| crypto.get_random_values_with_u8_array(&mut bytes));
        filled.ok().map(|_| bytes)
    }

    fn ask_relay_status(&mut self, probe: u64, port: u16) {
        spawn_local(async move {
            let outcome = relay_status(port).await;
            with_core(move |core| core.on_relay_status(probe, outcome));
        });
    }

    fn log(&mut self, message: &str) {
        web_sys::console::warn_1(&format!("Browser Relay: {message}").into());
    }
}

async fn read_settings() -> Settings {
    const KEYS: [&str; 4] = ["relayPort", "relayToken", "pairingCode", "pairingPort"];
    let keys: Array = KEYS.iter().map(|k| JsValue::from_str(k)).collect();
    let stored = settle(storage::local_get(&keys.into())).await.unwrap_or(JsValue::UNDEFINED);
    let [port, token, code, code_port] = KEYS.map(|k| get(&stored, k));
    settings_from(&port, &token, &code, &code_port)
}

/// Stored `relayPort` (1–65535, else the default), `relayToken`,
/// `pairingCode` (non-empty; `null` is none) and `pairingPort` as
/// [`Settings`].
fn settings_from(port: &JsValue, token: &JsValue, code: &JsValue, code_port: &JsValue) -> Settings {
    let valid_port = |value: &JsValue| value.as_f64().filter(|p| (1.0..=65535.0).contains(p)).map(|p| p as u16);
    let text = |value: &JsValue| value.as_string().filter(|t| !t.is_empty());
    Settings {
        port: valid_port(port).unwrap_or(shared_protocol::DEFAULT_RELAY_PORT),
        token: text(token),
        pairing_code: text(code),
        pairing_port: valid_port(code_port),
    }
}

/// `navigator.userAgent`, and the full browser version (`Chrome/156.0.8078.73`)
/// from `userAgentData` when available.
async fn environment() -> Environment {
    let extension_version = get(&runtime::get_manifest(), "version").as_string().unwrap_or_default();
    let navigator = get(&js_sys::global(), "navigator");
    let user_agent = get(&navigator, "userAgent").as_string().unwrap_or_default();
    let mut browser_version = user_agent
        .split_whitespace()
        .find_map(|part| part.strip_prefix("Chrome/").or_else(|| part.strip_prefix("HeadlessChrome/")))
        .map(|v| format!("Chrome/{v}"))
        .unwrap_or_else(|| "Chrome/0.0.0.0".into());
    let data = get(&navigator, "userAgentData");
    if let Ok(method) = get(&data, "getHighEntropyValues").dyn_into::<js_sys::Function>() {
        let hints: Array = [JsValue::from_str("fullVersionList")].into_iter().collect();
        if let Ok(promise) = method.call1(&data, &hints).and_then(|p| p.dyn_into::<js_sys::Promise>())
            && let Ok(values) = JsFuture::from(promise).await
        {
            for brand in array(&get(&values, "fullVersionList")).iter() {
                let name = get(&brand, "brand").as_string().unwrap_or_default();
                if (name == "Google Chrome" || name == "Chromium")
                    && let Some(version) = get(&brand, "version").as_string()
                {
                    browser_version = format!("Chrome/{version}");
                }
            }
        }
    }
    Environment { extension_version, user_agent, browser_version }
}

/// What the core decides from at start-up: the saved shared tabs and
/// grants, the tabs Chrome's debugger has attached, every tab with its
/// group, the tab groups (or why there are none), and the session rules
/// an earlier run left.
async fn start_facts() -> StartFacts {
    let keys: Array = ["sharedTabs", "grants"].iter().map(|k| JsValue::from_str(k)).collect();
    let stored = settle(storage::session_get(&keys.into())).await.unwrap_or(JsValue::UNDEFINED);
    let persisted: Vec<PersistedTab> =
        serde_json::from_str(&stringify(&get(&stored, "sharedTabs"))).unwrap_or_default();
    // Absent (stored before grants): none.
    let grants: PersistedGrants = serde_json::from_str(&stringify(&get(&stored, "grants"))).unwrap_or_default();
    let rules = settle(declarative_net_request::get_session_rules()).await.unwrap_or(JsValue::UNDEFINED);
    let session_rules = array(&rules).iter().filter_map(|rule| get(&rule, "id").as_f64()).map(|id| id as i64).collect();
    let targets = settle(debugger::get_targets()).await.unwrap_or(JsValue::UNDEFINED);
    let debugger_attached = array(&targets)
        .iter()
        .filter(|t| get(t, "attached").as_bool() == Some(true))
        .filter_map(|t| {
            Some(TabInfo {
                tab_id: get(&t, "tabId").as_f64()? as TabId,
                window_id: None,
                url: get(&t, "url").as_string().unwrap_or_default(),
                title: get(&t, "title").as_string().unwrap_or_default(),
                fav_icon_url: get(&t, "faviconUrl").as_string().filter(|icon| !icon.is_empty()),
                active: false,
                opener_tab_id: None,
                grant: None,
            })
        })
        .collect();
    let all = Object::new().into();
    let tabs = settle(tabs::query(&all)).await.map(|t| tabs_from_chrome(&stringify(&t))).unwrap_or_default();
    // The notifications shown (an object keyed by their ids).
    let shown = settle(notifications::get_all()).await.unwrap_or(JsValue::UNDEFINED);
    let notifications = if shown.is_object() {
        Object::keys(shown.unchecked_ref::<Object>()).iter().filter_map(|id| id.as_string()).collect()
    } else {
        Vec::new()
    };
    let groups = if !tab_groups::present() {
        Err(crate::core::NO_TAB_GROUPS.into())
    } else {
        match settle(tab_groups::query(&all)).await {
            Ok(groups) => Ok(groups_from_chrome(&stringify(&groups))),
            Err(e) => Err(format!("chrome.tabGroups.query failed: {e}")),
        }
    };
    StartFacts { persisted, debugger_attached, tabs, groups, grants, session_rules, notifications }
}

/// Called once by `background.js` after the WASM module loaded.
// Exported to the worker's JavaScript by wasm-bindgen, not to a crate.
#[allow(unreachable_pub)]
#[wasm_bindgen]
pub fn start() {
    spawn_local(async {
        let settings = read_settings().await;
        let env = environment().await;
        let facts = start_facts().await;
        CORE.with(|cell| {
            let mut core = Core::new(WasmHost::default());
            core.start(settings, env, facts);
            *cell.borrow_mut() = Some(core);
        });
        // A periodic wake-up: if the worker was stopped, an alarm restarts
        // it and the core reconnects.
        let info = object(&[("periodInMinutes", JsValue::from_f64(0.5))]);
        let _ = settle(alarms::create("browser-relay-keepalive", &info)).await;
        for (kind, payload) in EARLY.with(|early| std::mem::take(&mut *early.borrow_mut())) {
            dispatch(kind, payload);
        }
    });
}

/// Every `chrome.*` event, forwarded by `background.js` as `(kind, payload)`.
// Exported to the worker's JavaScript by wasm-bindgen, not to a crate.
#[allow(unreachable_pub)]
#[wasm_bindgen]
pub fn dispatch(kind: String, payload: JsValue) {
    let started = CORE.with(|cell| cell.try_borrow().map(|c| c.is_some()).unwrap_or(true));
    if !started {
        EARLY.with(|early| early.borrow_mut().push((kind, payload)));
        return;
    }
    match kind.as_str() {
        "action.onClicked" => {
            if let Some(tab) = tab_of(&get(&payload, "tab")) {
                with_core(move |core| core.on_action_clicked(tab));
            }
        }
        "debugger.onEvent" => forward_debugger_event(&payload),
        "debugger.onDetach" => {
            let Some(tab) = get(&get(&payload, "source"), "tabId").as_f64() else { return };
            let reason = get(&payload, "reason").as_string().unwrap_or_default();
            with_core(move |core| core.on_debugger_detach(tab as TabId, &reason));
        }
        "tabs.onCreated" => {
            let chrome_tab = get(&payload, "tab");
            let group = get(&chrome_tab, "groupId").as_f64().map_or(NO_GROUP, |g| g as GroupId);
            if let Some(tab) = tab_of(&chrome_tab) {
                with_core(move |core| core.on_tab_created(tab, group));
            }
        }
        "tabs.onRemoved" => {
            if let Some(tab) = get(&payload, "tabId").as_f64() {
                with_core(move |core| core.on_tab_removed(tab as TabId));
            }
        }
        "tabs.onReplaced" => {
            let added = get(&payload, "addedTabId").as_f64();
            let removed = get(&payload, "removedTabId").as_f64();
            if let (Some(added), Some(removed)) = (added, removed) {
                with_core(move |core| core.on_tab_replaced(added as TabId, removed as TabId));
            }
        }
        "tabs.onUpdated" => tab_updated(&payload),
        "tabGroups.onRemoved" => {
            if let Some(group) = get(&get(&payload, "group"), "id").as_f64() {
                with_core(move |core| core.on_group_removed(group as GroupId));
            }
        }
        "tabGroups.onCreated" => {
            if let Some(group) = group_from_chrome(&stringify(&get(&payload, "group"))) {
                with_core(move |core| core.on_group_appeared(group));
            }
        }
        "tabGroups.onUpdated" | "tabGroups.onMoved" => {
            if let Some(group) = group_from_chrome(&stringify(&get(&payload, "group"))) {
                with_core(move |core| core.on_group_updated(group));
            }
        }
        "runtime.onMessage" => options_page_message(&get(&payload, "message")),
        "contextMenus.onClicked" => menu_item_clicked(&payload),
        "notifications.onButtonClicked" => {
            let Some(id) = get(&payload, "notificationId").as_string() else { return };
            let Some(button) = get(&payload, "buttonIndex").as_f64() else { return };
            with_core(move |core| core.on_notification_button(&id, button as u32));
        }
        "windows.onRemoved" => {
            if let Some(window) = get(&payload, "windowId").as_f64() {
                with_core(move |core| core.on_window_removed(window as i64));
            }
        }
        "alarms.onAlarm" => with_core(|core| core.on_alarm()),
        "storage.onChanged" if get(&payload, "areaName").as_string().as_deref() == Some("local") => {
            pairing_changed(get(&payload, "changes"));
        }
        // runtime.onStartup/onInstalled: `start` already ran.
        _ => {}
    }
}

/// A `chrome.tabs.Tab` as the core takes it.
fn tab_of(value: &JsValue) -> Option<TabInfo> {
    tab_info_from_chrome(&stringify(value))
}

/// `debugger.onEvent`: its params stay a JavaScript string (see `json_text`).
fn forward_debugger_event(payload: &JsValue) {
    let source = get(payload, "source");
    let Some(tab) = get(&source, "tabId").as_f64() else { return };
    let session = get(&source, "sessionId").as_string();
    let method = get(payload, "method").as_string().unwrap_or_default();
    let params = get(payload, "params");
    let params = (!params.is_undefined()).then(|| json_text(&params));
    with_core(move |core| core.on_debugger_event(tab as TabId, session.as_deref(), &method, params));
}

/// `tabs.onUpdated`, and the tab's move to another group if it says so.
fn tab_updated(payload: &JsValue) {
    let Some(tab) = tab_of(&get(payload, "tab")) else { return };
    let group = get(&get(payload, "changeInfo"), "groupId").as_f64().map(|g| g as GroupId);
    with_core(move |core| {
        core.on_tab_updated(tab.clone());
        if let Some(group) = group {
            core.on_tab_group_changed(tab, group);
        }
    });
}

/// A message of the options page (`runtime.onMessage`).
fn options_page_message(message: &JsValue) {
    match get(message, "type").as_string().as_deref() {
        Some("stopSharing") => {
            if let Some(tab) = get(message, "tabId").as_f64() {
                with_core(move |core| core.on_stop_sharing(Some(tab as TabId)));
            }
        }
        Some("stopSharingAll") => with_core(|core| core.on_stop_sharing(None)),
        // `status` is answered by `status()`.
        _ => {}
    }
}

/// `contextMenus.onClicked`: a handoff's Done, or "Share this tab with NAME".
fn menu_item_clicked(payload: &JsValue) {
    let item = get(&get(payload, "info"), "menuItemId").as_string().unwrap_or_default();
    // "Done: give the tab back to NAME": the item names the tab.
    if let Some(tab) = item.strip_prefix(DONE_MENU_PREFIX).and_then(|t| t.parse::<TabId>().ok()) {
        return with_core(move |core| core.on_done_clicked(tab));
    }
    let Some(grant) = item.strip_prefix(MENU_PREFIX).map(str::to_string) else { return };
    if let Some(tab) = tab_of(&get(payload, "tab")) {
        with_core(move |core| core.on_menu_clicked(&grant, tab));
    }
}

/// `storage.onChanged` in `local`: the pairing, applied at once from the
/// change itself (not read back later), so that an event queued after it
/// (the click that follows pairing) finds the new settings.
fn pairing_changed(changes: JsValue) {
    with_core(move |core| {
        let current = core.settings().clone();
        let value = |key: &str, now: JsValue| {
            let change = get(&changes, key);
            if change.is_undefined() { now } else { get(&change, "newValue") }
        };
        let port = value("relayPort", JsValue::from_f64(f64::from(current.port)));
        let token = value("relayToken", current.token.map_or(JsValue::UNDEFINED, JsValue::from));
        let code = value("pairingCode", current.pairing_code.map_or(JsValue::UNDEFINED, JsValue::from));
        let code_port =
            value("pairingPort", current.pairing_port.map_or(JsValue::UNDEFINED, |p| JsValue::from_f64(f64::from(p))));
        core.on_settings(settings_from(&port, &token, &code, &code_port));
    });
}

/// The connection state, for the options page.
// Exported to the worker's JavaScript by wasm-bindgen, not to a crate.
#[allow(unreachable_pub)]
#[wasm_bindgen]
pub fn status() -> JsValue {
    let status = CORE.with(|cell| cell.try_borrow().ok().and_then(|c| c.as_ref().map(|core| core.status())));
    match status {
        Some(status) => JSON::parse(&serde_json::to_string(&status).unwrap_or_default()).unwrap_or(JsValue::NULL),
        None => object(&[("state", "starting".into()), ("detail", "starting…".into()), ("attachedTabs", 0.into())]),
    }
}
