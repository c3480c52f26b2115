//! What each client set on a tab's shared debugger session, so that it goes
//! when the client goes.
//!
//! On Chrome's own port every client has a session of its own, and what it
//! set there (an emulated viewport, extra headers, request interception,
//! scripts for new documents, bindings, enabled domains, auto-attach) goes
//! with the session. Through the extension all clients share the tab's one
//! `chrome.debugger` session, so the relay keeps the books: which client
//! set what, on which session (the tab or one of its child sessions), and
//! what undoes it. When a client leaves, [`Ledger::forget_client`] returns
//! the commands that put the tab back: the next setter's value where
//! another client still set the same thing, the undo where nobody does.
//!
//! It is plain data: no I/O, no locks. The caller sends what it returns.
//! Runtime is kept apart ([`crate::targets::Target::runtime`]) because a
//! late client needs Chrome's contexts replayed.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::value::RawValue;

/// A command the relay sends to put a session back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Undo {
    /// The child session (`None`: the tab itself).
    pub child: Option<Arc<str>>,
    pub method: String,
    /// Raw JSON params.
    pub params: String,
}

/// What a client's command does to the shared session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Effect {
    /// Leaves no state behind (or none the relay undoes): forward it.
    None,
    /// `<Domain>.enable`: the domain is on while any client wants it.
    Enable(String),
    /// `<Domain>.disable`: reaches Chrome only from the last client.
    Disable(String),
    /// A setting (an override); the last setter's value is in effect.
    Set(&'static Setting),
    /// Clears a setting (`Emulation.clearDeviceMetricsOverride`, …).
    Clear(&'static Setting),
    /// `Page.addScriptToEvaluateOnNewDocument`: undone by its identifier.
    AddScript,
    /// `Page.removeScriptToEvaluateOnNewDocument {identifier}`.
    RemoveScript(String),
    /// `Runtime.addBinding {name}`.
    AddBinding(String),
    /// `Runtime.removeBinding {name}`.
    RemoveBinding(String),
    /// A setting Chrome takes once per session (`Page.setFontFamilies`).
    Once,
}

/// A setting a client can make, and what undoes it.
#[derive(Debug, PartialEq, Eq)]
pub struct Setting {
    /// The command that sets it.
    pub method: &'static str,
    /// The command that clears it (if there is one), besides the undo.
    pub clear: Option<&'static str>,
    /// What undoes it: a method and its params.
    pub undo: (&'static str, &'static str),
}

/// Every setting the relay undoes. This crate's PROTOCOL.md lists them
/// ("What a client sets, it takes with it"); a test keeps it complete.
pub static SETTINGS: &[Setting] = &[
    setting(
        "Emulation.setDeviceMetricsOverride",
        Some("Emulation.clearDeviceMetricsOverride"),
        "Emulation.clearDeviceMetricsOverride",
        "{}",
    ),
    setting("Emulation.setUserAgentOverride", None, "Emulation.setUserAgentOverride", r#"{"userAgent":""}"#),
    setting("Emulation.setTouchEmulationEnabled", None, "Emulation.setTouchEmulationEnabled", r#"{"enabled":false}"#),
    setting(
        "Emulation.setEmitTouchEventsForMouse",
        None,
        "Emulation.setEmitTouchEventsForMouse",
        r#"{"enabled":false}"#,
    ),
    setting("Emulation.setEmulatedMedia", None, "Emulation.setEmulatedMedia", r#"{"media":"","features":[]}"#),
    setting(
        "Emulation.setGeolocationOverride",
        Some("Emulation.clearGeolocationOverride"),
        "Emulation.clearGeolocationOverride",
        "{}",
    ),
    setting("Emulation.setTimezoneOverride", None, "Emulation.setTimezoneOverride", r#"{"timezoneId":""}"#),
    setting("Emulation.setLocaleOverride", None, "Emulation.setLocaleOverride", "{}"),
    setting("Emulation.setFocusEmulationEnabled", None, "Emulation.setFocusEmulationEnabled", r#"{"enabled":false}"#),
    setting("Emulation.setScriptExecutionDisabled", None, "Emulation.setScriptExecutionDisabled", r#"{"value":false}"#),
    setting("Emulation.setCPUThrottlingRate", None, "Emulation.setCPUThrottlingRate", r#"{"rate":1}"#),
    setting("Emulation.setDefaultBackgroundColorOverride", None, "Emulation.setDefaultBackgroundColorOverride", "{}"),
    setting(
        "Emulation.setEmulatedVisionDeficiency",
        None,
        "Emulation.setEmulatedVisionDeficiency",
        r#"{"type":"none"}"#,
    ),
    setting("Emulation.setIdleOverride", Some("Emulation.clearIdleOverride"), "Emulation.clearIdleOverride", "{}"),
    setting("Emulation.setAutoDarkModeOverride", None, "Emulation.setAutoDarkModeOverride", "{}"),
    setting(
        "Emulation.setDeviceOrientationOverride",
        Some("Emulation.clearDeviceOrientationOverride"),
        "Emulation.clearDeviceOrientationOverride",
        "{}",
    ),
    setting("Emulation.setPageScaleFactor", None, "Emulation.setPageScaleFactor", r#"{"pageScaleFactor":1}"#),
    setting(
        "Emulation.setDocumentCookieDisabled",
        None,
        "Emulation.setDocumentCookieDisabled",
        r#"{"disabled":false}"#,
    ),
    setting("Emulation.setDisabledImageTypes", None, "Emulation.setDisabledImageTypes", r#"{"imageTypes":[]}"#),
    setting("Emulation.setScrollbarsHidden", None, "Emulation.setScrollbarsHidden", r#"{"hidden":false}"#),
    setting("Network.setUserAgentOverride", None, "Network.setUserAgentOverride", r#"{"userAgent":""}"#),
    setting("Network.setExtraHTTPHeaders", None, "Network.setExtraHTTPHeaders", r#"{"headers":{}}"#),
    setting(
        "Network.emulateNetworkConditions",
        None,
        "Network.emulateNetworkConditions",
        r#"{"offline":false,"latency":0,"downloadThroughput":-1,"uploadThroughput":-1}"#,
    ),
    setting("Network.setCacheDisabled", None, "Network.setCacheDisabled", r#"{"cacheDisabled":false}"#),
    setting("Network.setBypassServiceWorker", None, "Network.setBypassServiceWorker", r#"{"bypass":false}"#),
    setting("Network.setBlockedURLs", None, "Network.setBlockedURLs", r#"{"urls":[]}"#),
    setting("Network.setRequestInterception", None, "Network.setRequestInterception", r#"{"patterns":[]}"#),
    setting("Page.setInterceptFileChooserDialog", None, "Page.setInterceptFileChooserDialog", r#"{"enabled":false}"#),
    setting("Page.setDownloadBehavior", None, "Page.setDownloadBehavior", r#"{"behavior":"default"}"#),
    setting("Page.setBypassCSP", None, "Page.setBypassCSP", r#"{"enabled":false}"#),
    setting("Page.setLifecycleEventsEnabled", None, "Page.setLifecycleEventsEnabled", r#"{"enabled":false}"#),
    setting("Page.setAdBlockingEnabled", None, "Page.setAdBlockingEnabled", r#"{"enabled":false}"#),
    setting("Security.setIgnoreCertificateErrors", None, "Security.setIgnoreCertificateErrors", r#"{"ignore":false}"#),
    setting("Input.setIgnoreInputEvents", None, "Input.setIgnoreInputEvents", r#"{"ignore":false}"#),
    setting("Input.setInterceptDrags", None, "Input.setInterceptDrags", r#"{"enabled":false}"#),
    // Session-scoped auto-attach (iframes, workers): left on with
    // waitForDebuggerOnStart, new workers would wait for a debugger that
    // is gone.
    setting(
        "Target.setAutoAttach",
        None,
        "Target.setAutoAttach",
        r#"{"autoAttach":false,"waitForDebuggerOnStart":false,"flatten":true}"#,
    ),
];

const fn setting(
    method: &'static str,
    clear: Option<&'static str>,
    undo: &'static str,
    params: &'static str,
) -> Setting {
    Setting { method, clear, undo: (undo, params) }
}

/// Settings Chrome accepts once per session: a second client's identical
/// call is answered by the relay (its value is in effect already).
const ONCE: [&str; 2] = ["Page.setFontFamilies", "Page.setFontSizes"];

/// Domains whose `enable`/`disable` the ledger does not count: Runtime (see
/// the module doc) and Fetch (every client's patterns are in force together:
/// see [`crate::interception`]).
const NOT_COUNTED: [&str; 2] = ["Runtime", "Fetch"];

/// Domains whose events reach only the clients that enabled the domain on
/// that session, as on Chrome's own port where each client's session gets
/// only what it enabled. Both are chatty and neither is enabled by a
/// command of another domain; Page and the others stay shared (Chrome
/// enables parts of them implicitly, e.g. DOM by `DOM.getDocument`).
const OWN_ENABLE_EVENTS: [&str; 2] = ["Network", "Log"];

/// The domain of an event that goes only to clients that enabled it
/// ([`Ledger::has_enabled`]), if `method` is one.
pub(crate) fn own_enable_domain(method: &str) -> Option<&str> {
    method.split_once('.').map(|(domain, _)| domain).filter(|domain| OWN_ENABLE_EVENTS.contains(domain))
}

/// What `method` (with raw `params`) does to the shared session.
pub(crate) fn classify(method: &str, params: Option<&RawValue>) -> Effect {
    if let Some(setting) = SETTINGS.iter().find(|s| s.method == method) {
        return Effect::Set(setting);
    }
    if let Some(setting) = SETTINGS.iter().find(|s| s.clear == Some(method)) {
        return Effect::Clear(setting);
    }
    if ONCE.contains(&method) {
        return Effect::Once;
    }
    #[derive(Deserialize)]
    struct Name {
        name: String,
    }
    #[derive(Deserialize)]
    struct Identifier {
        identifier: String,
    }
    let field = |params: Option<&RawValue>| params.map(RawValue::get).unwrap_or("{}").to_string();
    match method {
        "Page.addScriptToEvaluateOnNewDocument" => return Effect::AddScript,
        "Page.removeScriptToEvaluateOnNewDocument" => {
            return serde_json::from_str::<Identifier>(&field(params))
                .map_or(Effect::None, |p| Effect::RemoveScript(p.identifier));
        }
        "Runtime.addBinding" => {
            return serde_json::from_str::<Name>(&field(params)).map_or(Effect::None, |p| Effect::AddBinding(p.name));
        }
        "Runtime.removeBinding" => {
            return serde_json::from_str::<Name>(&field(params))
                .map_or(Effect::None, |p| Effect::RemoveBinding(p.name));
        }
        _ => {}
    }
    match method.split_once('.') {
        Some((domain, "enable")) if !NOT_COUNTED.contains(&domain) => Effect::Enable(domain.to_string()),
        Some((domain, "disable")) if !NOT_COUNTED.contains(&domain) => Effect::Disable(domain.to_string()),
        _ => Effect::None,
    }
}

/// What the relay does with a client's command, after the books are kept.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) enum Decision {
    /// Send it to Chrome.
    #[default]
    Forward,
    /// Answer `{}` without Chrome: what the command asks for is in effect
    /// (another client keeps a domain enabled, the same once-only value is
    /// set), or asking Chrome would undo another client's state.
    AnswerLocally,
    /// Send this instead (a clear that must leave another client's value
    /// in effect re-applies it).
    Replace { method: &'static str, params: String },
    /// Answer with this error without Chrome.
    Refuse { code: i64, message: String },
}

/// The books of one session (the tab's, or a child session's).
#[derive(Debug, Default)]
struct Books {
    /// Domain → the clients that enabled it.
    enabled: BTreeMap<String, Vec<u64>>,
    /// Setting → its setters, oldest first: (client, raw params). The last
    /// one is in effect.
    settings: BTreeMap<&'static str, Vec<(u64, String)>>,
    /// Scripts added for new documents: (client, identifier).
    scripts: Vec<(u64, String)>,
    /// Binding name → the clients that added it.
    bindings: BTreeMap<String, Vec<u64>>,
    /// Once-only settings applied: method → raw params.
    once: BTreeMap<String, String>,
}

impl Books {
    /// `client` clears `method`'s setting: what to send so that the
    /// setting left in effect is the last other setter's, if any.
    fn clear_setting(&mut self, client: u64, method: &'static str) -> Decision {
        let setters = self.settings.entry(method).or_default();
        let was_in_effect = setters.last().is_some_and(|(c, _)| *c == client);
        setters.retain(|(c, _)| *c != client);
        match setters.last() {
            None => {
                self.settings.remove(method);
                Decision::Forward
            }
            // Another client's value goes back into effect.
            Some((_, params)) if was_in_effect => Decision::Replace { method, params: params.clone() },
            // This client's value was not in effect (or it set
            // nothing): clearing would take another client's away.
            Some(_) => Decision::AnswerLocally,
        }
    }

    /// A once-only setting: sent when its value is new, answered here when
    /// the same value is already applied.
    fn apply_once(&mut self, method: &str, raw: String) -> Decision {
        match self.once.get(method) {
            Some(applied) if *applied == raw => Decision::AnswerLocally,
            Some(_) => Decision::Forward,
            None => {
                self.once.insert(method.to_string(), raw);
                Decision::Forward
            }
        }
    }
}

/// `client` wants `key` (a domain enabled, a binding added).
fn join(wanted: &mut BTreeMap<String, Vec<u64>>, key: String, client: u64) {
    let clients = wanted.entry(key).or_default();
    if !clients.contains(&client) {
        clients.push(client);
    }
}

/// `client` no longer wants `key`: Chrome hears it from the last client
/// only; while others want it, it is answered here.
fn leave(wanted: &mut BTreeMap<String, Vec<u64>>, key: String, client: u64) -> Decision {
    let clients = wanted.entry(key.clone()).or_default();
    clients.retain(|c| *c != client);
    if clients.is_empty() {
        wanted.remove(&key);
        Decision::Forward
    } else {
        Decision::AnswerLocally
    }
}

/// The books of a tab: its own session and its child sessions.
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    sessions: Vec<(Option<Arc<str>>, Books)>,
}

impl Ledger {
    fn books(&mut self, child: Option<&str>) -> &mut Books {
        let index = match self.sessions.iter().position(|(c, _)| c.as_deref() == child) {
            Some(index) => index,
            None => {
                self.sessions.push((child.map(Arc::from), Books::default()));
                self.sessions.len() - 1
            }
        };
        &mut self.sessions[index].1
    }

    /// Whether `client` enabled `domain` on `child` (`None`: the tab itself).
    pub(crate) fn has_enabled(&self, client: u64, child: Option<&str>, domain: &str) -> bool {
        self.sessions
            .iter()
            .find(|(c, _)| c.as_deref() == child)
            .and_then(|(_, books)| books.enabled.get(domain))
            .is_some_and(|clients| clients.contains(&client))
    }

    /// Keeps the books for `client`'s command on `child` (before it is
    /// sent), and says what to do with it.
    pub(crate) fn record(
        &mut self,
        client: u64,
        child: Option<&str>,
        method: &str,
        params: Option<&RawValue>,
    ) -> Decision {
        let raw = params.map(RawValue::get).unwrap_or("{}").to_string();
        let books = self.books(child);
        match classify(method, params) {
            Effect::None | Effect::AddScript => Decision::Forward,
            Effect::Enable(domain) => {
                join(&mut books.enabled, domain, client);
                // Chrome's enable is idempotent: always send it, so that a
                // domain that reports its state on every enable does so.
                // (Log does not: it replays its entries on the first only,
                // docs/limits.md.)
                Decision::Forward
            }
            Effect::Disable(domain) => leave(&mut books.enabled, domain, client),
            Effect::Set(setting) => {
                let setters = books.settings.entry(setting.method).or_default();
                setters.retain(|(c, _)| *c != client);
                setters.push((client, raw));
                Decision::Forward
            }
            Effect::Clear(setting) => books.clear_setting(client, setting.method),
            Effect::RemoveScript(identifier) => {
                books.scripts.retain(|(c, id)| !(*c == client && *id == identifier));
                Decision::Forward
            }
            Effect::AddBinding(name) => {
                join(&mut books.bindings, name, client);
                Decision::Forward
            }
            Effect::RemoveBinding(name) => leave(&mut books.bindings, name, client),
            Effect::Once => books.apply_once(method, raw),
        }
    }

    /// Chrome answered `Page.addScriptToEvaluateOnNewDocument` with this
    /// identifier.
    pub(crate) fn script_added(&mut self, client: u64, child: Option<&str>, identifier: String) {
        self.books(child).scripts.push((client, identifier));
    }

    /// A child session is gone (its frame or worker went away).
    pub(crate) fn forget_child(&mut self, child: &str) {
        self.sessions.retain(|(c, _)| c.as_deref() != Some(child));
    }

    /// `client` left: its entries go, and the commands that put each session
    /// back are returned, in the order to send them.
    pub(crate) fn forget_client(&mut self, client: u64) -> Vec<Undo> {
        let mut undo = Vec::new();
        for (child, books) in &mut self.sessions {
            let mut send = |method: &str, params: String| {
                undo.push(Undo { child: child.clone(), method: method.to_string(), params });
            };
            for (method, setters) in &mut books.settings {
                let was_in_effect = setters.last().is_some_and(|(c, _)| *c == client);
                setters.retain(|(c, _)| *c != client);
                if !was_in_effect {
                    continue;
                }
                match setters.last() {
                    Some((_, params)) => send(method, params.clone()),
                    None => {
                        let setting = SETTINGS.iter().find(|s| s.method == *method).expect("only known settings");
                        send(setting.undo.0, setting.undo.1.to_string());
                    }
                }
            }
            books.settings.retain(|_, setters| !setters.is_empty());
            for (_, identifier) in books.scripts.iter().filter(|(c, _)| *c == client) {
                send(
                    "Page.removeScriptToEvaluateOnNewDocument",
                    serde_json::json!({"identifier": identifier}).to_string(),
                );
            }
            books.scripts.retain(|(c, _)| *c != client);
            for (name, clients) in &mut books.bindings {
                if clients.contains(&client) && clients.len() == 1 {
                    send("Runtime.removeBinding", serde_json::json!({"name": name}).to_string());
                }
                clients.retain(|c| *c != client);
            }
            books.bindings.retain(|_, clients| !clients.is_empty());
            // Domains last: a disable may depend on nothing above still
            // being in use (Fetch.disable before Network.disable, say).
            for (domain, clients) in &mut books.enabled {
                if clients.contains(&client) && clients.len() == 1 {
                    send(&format!("{domain}.disable"), "{}".into());
                }
                clients.retain(|c| *c != client);
            }
            books.enabled.retain(|_, clients| !clients.is_empty());
        }
        undo
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(json: &str) -> Box<RawValue> {
        RawValue::from_string(json.to_string()).unwrap()
    }

    fn record(ledger: &mut Ledger, client: u64, method: &str, params: &str) -> Decision {
        let params = raw(params);
        ledger.record(client, None, method, Some(&params))
    }

    #[test]
    fn a_leaving_client_takes_its_viewport_headers_and_auto_attach_along() {
        let mut ledger = Ledger::default();
        let metrics = r#"{"width":1000,"height":700,"deviceScaleFactor":1,"mobile":false}"#;
        assert_eq!(record(&mut ledger, 1, "Emulation.setDeviceMetricsOverride", metrics), Decision::Forward);
        record(&mut ledger, 1, "Network.setExtraHTTPHeaders", r#"{"headers":{"x-a":"1"}}"#);
        record(
            &mut ledger,
            1,
            "Target.setAutoAttach",
            r#"{"autoAttach":true,"waitForDebuggerOnStart":true,"flatten":true}"#,
        );
        let undo: Vec<(String, String)> = ledger.forget_client(1).into_iter().map(|u| (u.method, u.params)).collect();
        let undo: Vec<(&str, String)> = undo.iter().map(|(m, p)| (m.as_str(), p.clone())).collect();
        assert!(undo.contains(&("Emulation.clearDeviceMetricsOverride", "{}".into())), "{undo:?}");
        assert!(undo.contains(&("Network.setExtraHTTPHeaders", r#"{"headers":{}}"#.into())), "{undo:?}");
        assert!(
            undo.contains(&(
                "Target.setAutoAttach",
                r#"{"autoAttach":false,"waitForDebuggerOnStart":false,"flatten":true}"#.into()
            )),
            "{undo:?}"
        );
        assert!(ledger.forget_client(1).is_empty(), "undone once");
    }

    #[test]
    fn the_client_still_connected_keeps_what_it_set() {
        let mut ledger = Ledger::default();
        let small = r#"{"width":800,"height":600,"deviceScaleFactor":1,"mobile":false}"#;
        let large = r#"{"width":1920,"height":1080,"deviceScaleFactor":1,"mobile":false}"#;
        record(&mut ledger, 1, "Emulation.setDeviceMetricsOverride", small);
        record(&mut ledger, 2, "Emulation.setDeviceMetricsOverride", large);
        // The later setter leaves: the earlier one's value comes back.
        let undo = ledger.forget_client(2);
        assert_eq!(
            undo,
            [Undo { child: None, method: "Emulation.setDeviceMetricsOverride".into(), params: small.into() }]
        );
        // An earlier setter leaving changes nothing in effect.
        record(&mut ledger, 3, "Emulation.setDeviceMetricsOverride", large);
        assert!(ledger.forget_client(1).is_empty());
        assert_eq!(ledger.forget_client(3)[0].method, "Emulation.clearDeviceMetricsOverride");
    }

    #[test]
    fn a_clear_never_takes_another_clients_value() {
        let mut ledger = Ledger::default();
        let value = r#"{"latitude":1,"longitude":2,"accuracy":1}"#;
        record(&mut ledger, 1, "Emulation.setGeolocationOverride", value);
        assert_eq!(record(&mut ledger, 2, "Emulation.clearGeolocationOverride", "{}"), Decision::AnswerLocally);
        record(&mut ledger, 2, "Emulation.setGeolocationOverride", r#"{"latitude":9,"longitude":9,"accuracy":1}"#);
        assert_eq!(
            record(&mut ledger, 2, "Emulation.clearGeolocationOverride", "{}"),
            Decision::Replace { method: "Emulation.setGeolocationOverride", params: value.into() }
        );
        assert_eq!(record(&mut ledger, 1, "Emulation.clearGeolocationOverride", "{}"), Decision::Forward);
    }

    #[test]
    fn domains_stay_enabled_while_any_client_wants_them() {
        let mut ledger = Ledger::default();
        assert_eq!(record(&mut ledger, 1, "Network.enable", "{}"), Decision::Forward);
        assert_eq!(record(&mut ledger, 2, "Network.enable", "{}"), Decision::Forward);
        assert_eq!(record(&mut ledger, 1, "Network.disable", "{}"), Decision::AnswerLocally);
        assert!(ledger.forget_client(1).is_empty());
        let undo = ledger.forget_client(2);
        assert_eq!(undo, [Undo { child: None, method: "Network.disable".into(), params: "{}".into() }]);
        // Runtime and Fetch are kept elsewhere.
        assert_eq!(classify("Runtime.enable", None), Effect::None);
        assert_eq!(classify("Fetch.enable", None), Effect::None);
    }

    #[test]
    fn scripts_and_bindings_go_with_their_client() {
        let mut ledger = Ledger::default();
        record(&mut ledger, 1, "Page.addScriptToEvaluateOnNewDocument", r#"{"source":"1"}"#);
        ledger.script_added(1, None, "7".into());
        record(&mut ledger, 2, "Page.addScriptToEvaluateOnNewDocument", r#"{"source":"2"}"#);
        ledger.script_added(2, None, "8".into());
        record(&mut ledger, 1, "Runtime.addBinding", r#"{"name":"shared"}"#);
        record(&mut ledger, 2, "Runtime.addBinding", r#"{"name":"shared"}"#);
        record(&mut ledger, 1, "Runtime.addBinding", r#"{"name":"mine"}"#);
        let undo: Vec<(String, String)> = ledger.forget_client(1).into_iter().map(|u| (u.method, u.params)).collect();
        assert_eq!(
            undo,
            [
                ("Page.removeScriptToEvaluateOnNewDocument".to_string(), r#"{"identifier":"7"}"#.to_string()),
                ("Runtime.removeBinding".to_string(), r#"{"name":"mine"}"#.to_string()),
            ]
        );
        assert_eq!(record(&mut ledger, 2, "Runtime.removeBinding", r#"{"name":"shared"}"#), Decision::Forward);
    }

    #[test]
    fn a_once_only_setting_is_answered_for_the_next_client() {
        let mut ledger = Ledger::default();
        let fonts = r#"{"fontFamilies":{"standard":"Times New Roman"}}"#;
        assert_eq!(record(&mut ledger, 1, "Page.setFontFamilies", fonts), Decision::Forward);
        assert!(ledger.forget_client(1).is_empty(), "Chrome cannot take it back");
        assert_eq!(record(&mut ledger, 2, "Page.setFontFamilies", fonts), Decision::AnswerLocally);
        let other = r#"{"fontFamilies":{"standard":"Arial"}}"#;
        assert_eq!(record(&mut ledger, 2, "Page.setFontFamilies", other), Decision::Forward, "Chrome says why not");
    }

    #[test]
    fn child_sessions_keep_books_of_their_own() {
        let mut ledger = Ledger::default();
        let params = raw("{}");
        ledger.record(1, Some("CHILD"), "Network.enable", Some(&params));
        ledger.record(1, None, "Network.enable", Some(&params));
        ledger.forget_child("CHILD");
        let undo = ledger.forget_client(1);
        assert_eq!(
            undo,
            [Undo { child: None, method: "Network.disable".into(), params: "{}".into() }],
            "the gone child is not undone"
        );
    }
}
