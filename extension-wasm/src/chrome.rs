//! Thin bindings to the `chrome.*` functions the extension is allowed to use,
//! one module per namespace. Each returns the API's promise; errors carry
//! Chrome's own message. Nothing else of `chrome.*` is reachable from Rust.

#![allow(missing_debug_implementations)]

/// `chrome.debugger`: attach, detach, sendCommand, getTargets.
pub(crate) mod debugger {
    use js_sys::Promise;
    use wasm_bindgen::prelude::*;

    #[wasm_bindgen]
    extern "C" {
        #[wasm_bindgen(catch, js_namespace = ["chrome", "debugger"], js_name = attach)]
        pub fn attach(target: &JsValue, version: &str) -> Result<Promise, JsValue>;
        #[wasm_bindgen(catch, js_namespace = ["chrome", "debugger"], js_name = detach)]
        pub fn detach(target: &JsValue) -> Result<Promise, JsValue>;
        #[wasm_bindgen(catch, js_namespace = ["chrome", "debugger"], js_name = sendCommand)]
        pub fn send_command(target: &JsValue, method: &str, params: &JsValue) -> Result<Promise, JsValue>;
        #[wasm_bindgen(catch, js_namespace = ["chrome", "debugger"], js_name = getTargets)]
        pub fn get_targets() -> Result<Promise, JsValue>;
    }
}

/// `chrome.tabs`: get, create, remove, update, query, group, ungroup.
pub(crate) mod tabs {
    use js_sys::Promise;
    use wasm_bindgen::prelude::*;

    #[wasm_bindgen]
    extern "C" {
        #[wasm_bindgen(catch, js_namespace = ["chrome", "tabs"], js_name = get)]
        pub fn get(tab_id: f64) -> Result<Promise, JsValue>;
        #[wasm_bindgen(catch, js_namespace = ["chrome", "tabs"], js_name = create)]
        pub fn create(properties: &JsValue) -> Result<Promise, JsValue>;
        #[wasm_bindgen(catch, js_namespace = ["chrome", "tabs"], js_name = remove)]
        pub fn remove(tab_id: f64) -> Result<Promise, JsValue>;
        #[wasm_bindgen(catch, js_namespace = ["chrome", "tabs"], js_name = update)]
        pub fn update(tab_id: f64, properties: &JsValue) -> Result<Promise, JsValue>;
        #[wasm_bindgen(catch, js_namespace = ["chrome", "tabs"], js_name = query)]
        pub fn query(query: &JsValue) -> Result<Promise, JsValue>;
        #[wasm_bindgen(catch, js_namespace = ["chrome", "tabs"], js_name = group)]
        pub fn group(options: &JsValue) -> Result<Promise, JsValue>;
        #[wasm_bindgen(catch, js_namespace = ["chrome", "tabs"], js_name = ungroup)]
        pub fn ungroup(tab_ids: &JsValue) -> Result<Promise, JsValue>;
    }
}

/// `chrome.tabGroups`: query, update (name and colour of our group).
pub(crate) mod tab_groups {
    use js_sys::{Promise, Reflect};
    use wasm_bindgen::prelude::*;

    #[wasm_bindgen]
    extern "C" {
        #[wasm_bindgen(catch, js_namespace = ["chrome", "tabGroups"], js_name = query)]
        pub fn query(query: &JsValue) -> Result<Promise, JsValue>;
        #[wasm_bindgen(catch, js_namespace = ["chrome", "tabGroups"], js_name = update)]
        pub fn update(group_id: f64, properties: &JsValue) -> Result<Promise, JsValue>;
    }

    /// Whether this browser has `chrome.tabGroups` at all.
    pub(crate) fn present() -> bool {
        let chrome = Reflect::get(&js_sys::global(), &"chrome".into()).unwrap_or(JsValue::UNDEFINED);
        !chrome.is_undefined() && Reflect::get(&chrome, &"tabGroups".into()).is_ok_and(|g| !g.is_undefined())
    }
}

/// `chrome.windows`: update (bring a window to the front), create (a
/// grant's own window, unfocused).
pub(crate) mod windows {
    use js_sys::Promise;
    use wasm_bindgen::prelude::*;

    #[wasm_bindgen]
    extern "C" {
        #[wasm_bindgen(catch, js_namespace = ["chrome", "windows"], js_name = update)]
        pub fn update(window_id: f64, properties: &JsValue) -> Result<Promise, JsValue>;
        #[wasm_bindgen(catch, js_namespace = ["chrome", "windows"], js_name = create)]
        pub fn create(properties: &JsValue) -> Result<Promise, JsValue>;
    }
}

/// `chrome.declarativeNetRequest`: the grants' cookie rules, as session
/// rules (updateSessionRules), and what an earlier run left
/// (getSessionRules).
pub(crate) mod declarative_net_request {
    use js_sys::Promise;
    use wasm_bindgen::prelude::*;

    #[wasm_bindgen]
    extern "C" {
        #[wasm_bindgen(catch, js_namespace = ["chrome", "declarativeNetRequest"], js_name = updateSessionRules)]
        pub fn update_session_rules(options: &JsValue) -> Result<Promise, JsValue>;
        #[wasm_bindgen(catch, js_namespace = ["chrome", "declarativeNetRequest"], js_name = getSessionRules)]
        pub fn get_session_rules() -> Result<Promise, JsValue>;
    }
}

/// `chrome.contextMenus`: the toolbar button's "Share this tab with NAME"
/// items. They take callbacks (`create` returns no promise); each is made
/// a promise here, settled by `chrome.runtime.lastError`.
pub(crate) mod context_menus {
    use js_sys::{Function, Promise, Reflect};
    use wasm_bindgen::prelude::*;

    #[wasm_bindgen]
    extern "C" {
        #[wasm_bindgen(catch, js_namespace = ["chrome", "contextMenus"], js_name = create)]
        fn create_with(properties: &JsValue, callback: &Function) -> Result<JsValue, JsValue>;
        #[wasm_bindgen(catch, js_namespace = ["chrome", "contextMenus"], js_name = remove)]
        fn remove_with(id: &str, callback: &Function) -> Result<JsValue, JsValue>;
        #[wasm_bindgen(catch, js_namespace = ["chrome", "contextMenus"], js_name = removeAll)]
        fn remove_all_with(callback: &Function) -> Result<JsValue, JsValue>;
    }

    /// `chrome.runtime.lastError`, read in a callback.
    fn last_error() -> Option<JsValue> {
        let chrome = Reflect::get(&js_sys::global(), &"chrome".into()).ok()?;
        let runtime = Reflect::get(&chrome, &"runtime".into()).ok()?;
        Reflect::get(&runtime, &"lastError".into()).ok().filter(|e| !e.is_undefined() && !e.is_null())
    }

    /// A promise over a callback-taking call.
    fn settled(start: impl FnOnce(&Function) -> Result<JsValue, JsValue>) -> Promise {
        let mut start = Some(start);
        Promise::new(&mut |resolve: Function, reject: Function| {
            let refuse = reject.clone();
            let settle = Closure::once_into_js(move || {
                let _ = match last_error() {
                    Some(error) => refuse.call1(&JsValue::NULL, &error),
                    None => resolve.call0(&JsValue::NULL),
                };
            });
            if let Some(start) = start.take()
                && let Err(error) = start(settle.unchecked_ref())
            {
                // Thrown at once (bad arguments): the callback never runs.
                let _ = reject.call1(&JsValue::NULL, &error);
            }
        })
    }

    pub(crate) fn create(properties: &JsValue) -> Promise {
        settled(|callback| create_with(properties, callback))
    }

    pub(crate) fn remove(id: &str) -> Promise {
        settled(|callback| remove_with(id, callback))
    }

    pub(crate) fn remove_all() -> Promise {
        settled(remove_all_with)
    }
}

/// `chrome.notifications`: the relay's questions (Allow, Deny) and a
/// grant's handoffs (Done): create, clear, and what is shown (getAll).
pub(crate) mod notifications {
    use js_sys::Promise;
    use wasm_bindgen::prelude::*;

    #[wasm_bindgen]
    extern "C" {
        #[wasm_bindgen(catch, js_namespace = ["chrome", "notifications"], js_name = create)]
        pub fn create(id: &str, options: &JsValue) -> Result<Promise, JsValue>;
        #[wasm_bindgen(catch, js_namespace = ["chrome", "notifications"], js_name = clear)]
        pub fn clear(id: &str) -> Result<Promise, JsValue>;
        #[wasm_bindgen(catch, js_namespace = ["chrome", "notifications"], js_name = getAll)]
        pub fn get_all() -> Result<Promise, JsValue>;
    }
}

/// `chrome.action`: the toolbar badge and tooltip.
pub(crate) mod action {
    use js_sys::Promise;
    use wasm_bindgen::prelude::*;

    #[wasm_bindgen]
    extern "C" {
        #[wasm_bindgen(catch, js_namespace = ["chrome", "action"], js_name = setBadgeText)]
        pub fn set_badge_text(details: &JsValue) -> Result<Promise, JsValue>;
        #[wasm_bindgen(catch, js_namespace = ["chrome", "action"], js_name = setBadgeBackgroundColor)]
        pub fn set_badge_background_color(details: &JsValue) -> Result<Promise, JsValue>;
        #[wasm_bindgen(catch, js_namespace = ["chrome", "action"], js_name = setTitle)]
        pub fn set_title(details: &JsValue) -> Result<Promise, JsValue>;
    }
}

/// `chrome.storage`: settings in `local`, attached tabs in `session`.
pub(crate) mod storage {
    use js_sys::Promise;
    use wasm_bindgen::prelude::*;

    #[wasm_bindgen]
    extern "C" {
        #[wasm_bindgen(catch, js_namespace = ["chrome", "storage", "local"], js_name = get)]
        pub fn local_get(keys: &JsValue) -> Result<Promise, JsValue>;
        /// Only the pairing a link's code brought (`Host::save_pairing`).
        #[wasm_bindgen(catch, js_namespace = ["chrome", "storage", "local"], js_name = set)]
        pub fn local_set(items: &JsValue) -> Result<Promise, JsValue>;
        #[wasm_bindgen(catch, js_namespace = ["chrome", "storage", "session"], js_name = get)]
        pub fn session_get(keys: &JsValue) -> Result<Promise, JsValue>;
        #[wasm_bindgen(catch, js_namespace = ["chrome", "storage", "session"], js_name = set)]
        pub fn session_set(items: &JsValue) -> Result<Promise, JsValue>;
    }
}

/// `chrome.alarms`: a periodic wake-up that outlives a stopped worker.
pub(crate) mod alarms {
    use js_sys::Promise;
    use wasm_bindgen::prelude::*;

    #[wasm_bindgen]
    extern "C" {
        #[wasm_bindgen(catch, js_namespace = ["chrome", "alarms"], js_name = create)]
        pub fn create(name: &str, info: &JsValue) -> Result<Promise, JsValue>;
    }
}

/// `chrome.runtime`: the extension's own manifest (its version).
pub(crate) mod runtime {
    use wasm_bindgen::prelude::*;

    #[wasm_bindgen]
    extern "C" {
        #[wasm_bindgen(js_namespace = ["chrome", "runtime"], js_name = getManifest)]
        pub fn get_manifest() -> JsValue;
    }
}

/// Globals of the service worker (`window` does not exist there).
pub(crate) mod global {
    use js_sys::Promise;
    use wasm_bindgen::prelude::*;

    #[wasm_bindgen]
    extern "C" {
        #[wasm_bindgen(js_name = setTimeout)]
        pub fn set_timeout(handler: &JsValue, ms: f64) -> JsValue;
        #[wasm_bindgen(js_name = clearTimeout)]
        pub fn clear_timeout(id: &JsValue);
        /// Only the relay's public status route (`Host::ask_relay_status`).
        #[wasm_bindgen(catch, js_name = fetch)]
        pub fn fetch(url: &str, init: &JsValue) -> Result<Promise, JsValue>;
        /// `AbortSignal.timeout`: a fetch's deadline.
        #[wasm_bindgen(catch, js_namespace = AbortSignal, js_name = timeout)]
        pub fn abort_after(ms: f64) -> Result<JsValue, JsValue>;
    }
}
