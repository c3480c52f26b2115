//! The browser-level protocol the relay answers itself: the `Target` and
//! `Browser` domains, at the root (and on an emulated browser session) and
//! on page sessions, where Chrome offers them too. Every answer is built
//! from the registry; what needs the user's browser (a new tab, a tab to
//! the front) goes to the extension as one allow-listed `chrome.*` call.
//! This crate's PROTOCOL.md has the table of every method and what the
//! relay answers; a test keeps it complete.

use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Value, json};
use shared_protocol::{RelayMessage, TabId, TabInfo};

use super::cdp::{self, Command, code};
use super::client::{ClientHandle, FilterEntry, Replier, SessionKind, TargetFilter};
use super::error::CallError;
use super::relay::Relay;
use super::targets::{SubKind, Subscription, attached_event, new_id};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct AutoAttachParams {
    auto_attach: bool,
    #[serde(default)]
    flatten: bool,
    #[serde(default)]
    filter: Option<Vec<FilterEntry>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct DiscoverParams {
    discover: bool,
    #[serde(default)]
    filter: Option<Vec<FilterEntry>>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct TargetIdParams {
    #[serde(default)]
    target_id: Option<String>,
    #[serde(default)]
    flatten: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SessionParams {
    #[serde(default)]
    session_id: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CreateTargetParams {
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    background: bool,
}

#[derive(Deserialize)]
struct FilterParams {
    #[serde(default)]
    filter: Option<Vec<FilterEntry>>,
}

pub(crate) const NO_TARGET: &str = "No target with given id found";
pub(crate) const NO_SESSION: &str = "Session with given id not found.";

/// Where a browser-domain command was sent.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Scope<'a> {
    /// The root connection (or an emulated browser session).
    Root,
    /// A page's session (its target id): Chrome offers the browser domains
    /// there too, but not the browser-only methods, and a missing
    /// `targetId` means the page itself.
    Page(&'a str),
}

/// The domains the relay answers for the user's browser.
pub(crate) fn is_browser_domain(method: &str) -> bool {
    method.starts_with("Target.") || method.starts_with("Browser.")
}

/// Chrome's refusal.
const NOT_ALLOWED: &str = "Not allowed";

/// Methods Chrome offers at the root only: on a page session it answers
/// "Not allowed".
const ROOT_ONLY: [&str; 7] = [
    "Target.attachToBrowserTarget",
    "Target.createBrowserContext",
    "Target.disposeBrowserContext",
    "Target.getBrowserContexts",
    "Target.getDevToolsTarget",
    "Target.openDevTools",
    "Target.exposeDevToolsProtocol",
];

/// What a client may not do to the user's browser through the relay:
/// Chrome's refusal, with the reason (docs/limits.md lists them).
const USER_BROWSER_ONLY: [&str; 12] = [
    "Browser.grantPermissions",
    "Browser.setPermission",
    "Browser.resetPermissions",
    "Browser.cancelDownload",
    "Browser.crash",
    "Browser.crashGpuProcess",
    "Browser.setWindowBounds",
    "Browser.setContentsSize",
    "Browser.executeBrowserCommand",
    "Browser.addPrivacySandboxEnrollmentOverride",
    "Browser.addMockCamera",
    "Browser.setGlobalPrivacyControl",
];

/// What would wipe the user's whole cookie jar or cache, signing them out
/// of every site: refused on the user's browser unless config.toml allows
/// it. Reading, setting and deleting cookies by name or domain stay open.
const WIPES: [&str; 3] = ["Storage.clearCookies", "Network.clearBrowserCookies", "Network.clearBrowserCache"];

/// The refusal of a wipe (`None`: `method` is no wipe, or wipes are allowed).
pub(crate) fn wipe_refusal(method: &str, wipes_allowed: bool) -> Option<String> {
    if wipes_allowed || !WIPES.contains(&method) {
        return None;
    }
    let what = if method == "Network.clearBrowserCache" { "the cache" } else { "the cookies" };
    Some(format!(
        "Browser Relay refuses '{method}' on your own browser: it would clear {what} of every site, signing you out \
         everywhere. Delete cookies by name or domain (Network.deleteCookies), or set allowWipingBrowserData = true \
         in config.toml"
    ))
}

/// How many cookies the clients of the user's browser may delete in a
/// minute, together, unless config.toml allows wipes: a client that reads
/// the jar and deletes it cookie by cookie wipes it as surely as
/// `Storage.clearCookies` (issue 46, item 9). A script tidying up after
/// itself deletes a handful.
pub(crate) const COOKIE_DELETIONS_PER_MINUTE: usize = 50;

/// How many cookies (or origins' jars) `method` with `params` deletes:
/// `Network.deleteCookies`; a cookie set to expire before `now_secs` (how
/// CDP deletes by overwriting); an origin's storage cleared with its
/// cookies. 0 for everything else.
pub(crate) fn cookies_deleted(method: &str, params: Option<&serde_json::value::RawValue>, now_secs: f64) -> usize {
    #[derive(Deserialize, Default)]
    #[serde(rename_all = "camelCase", default)]
    struct Cookie {
        expires: Option<f64>,
    }
    #[derive(Deserialize, Default)]
    #[serde(rename_all = "camelCase", default)]
    struct Params {
        expires: Option<f64>,
        cookies: Vec<Cookie>,
        storage_types: Option<String>,
    }
    let expired = |expires: Option<f64>| expires.is_some_and(|at| at > 0.0 && at < now_secs);
    let read = || params.and_then(|raw| serde_json::from_str::<Params>(raw.get()).ok()).unwrap_or_default();
    match method {
        "Network.deleteCookies" => 1,
        "Network.setCookie" => usize::from(expired(read().expires)),
        "Network.setCookies" | "Storage.setCookies" => read().cookies.iter().filter(|c| expired(c.expires)).count(),
        "Storage.clearDataForOrigin" | "Storage.clearDataForStorageKey" => {
            let types = read().storage_types.unwrap_or_default();
            usize::from(types.split(',').any(|t| matches!(t.trim(), "cookies" | "all")))
        }
        _ => 0,
    }
}

impl Relay {
    /// Whether `count` more cookie deletions fit the minute's budget of
    /// the user's browser; counted when they do. Always, with wipes allowed.
    pub(crate) fn take_cookie_deletions(&self, count: usize) -> bool {
        if count == 0 || self.config().wipes_allowed {
            return true;
        }
        let mut recent = self.0.cookie_deletions.lock().unwrap_or_else(|p| p.into_inner());
        let now = std::time::Instant::now();
        while recent.front().is_some_and(|at| now.duration_since(*at) >= std::time::Duration::from_secs(60)) {
            recent.pop_front();
        }
        if recent.len() + count > COOKIE_DELETIONS_PER_MINUTE {
            return false;
        }
        recent.extend(std::iter::repeat_n(now, count));
        true
    }
}

/// The refusal of a deletion past the minute's budget.
pub(crate) fn cookie_budget_refusal(method: &str) -> String {
    format!(
        "Browser Relay refuses '{method}' on your own browser: clients deleted {COOKIE_DELETIONS_PER_MINUTE} cookies \
         in the last minute, and deleting them one by one wipes the jar as clearing it would, signing you out \
         everywhere. Wait a minute, or set allowWipingBrowserData = true in config.toml"
    )
}

/// A browser-level command answered through the extension.
#[derive(Debug)]
enum ExtensionCall {
    /// `Target.createTarget`, `closeTarget`, `activateTarget`, cookies.
    Target { method: String, params: Option<String> },
    /// `Browser.getWindowForTarget` (or `getWindowBounds`: the bounds only).
    Window { tab: TabId, bounds_only: bool },
}

impl Relay {
    /// Commands on a Puppeteer tab session: the page lives under it.
    pub(crate) fn tab_command(
        &self,
        client: &Arc<ClientHandle>,
        command: &Command<'_>,
        session: &str,
        target_id: &str,
    ) {
        let reply = Replier { client, id: command.id, session: Some(session) };
        match &*command.method {
            "Target.setAutoAttach" => {
                let mut registry = self.registry();
                let Some(target) = registry.by_target_id_mut(target_id) else {
                    return reply.err(code::SESSION_NOT_FOUND, NO_SESSION);
                };
                let page_session = target.page_session.clone();
                if !target.is_subscribed(client.id, &page_session) {
                    let info = target.page_info(self.context_id());
                    client.subscribe(
                        &mut client.state(),
                        target,
                        SubKind::Page,
                        page_session.clone(),
                        Some(session.into()),
                    );
                    client.send(attached_event(&page_session, info, Some(session)));
                    self.holders_changed();
                }
                reply.ok(&json!({}));
            }
            "Runtime.runIfWaitingForDebugger" => reply.ok(&json!({})),
            "Target.getTargetInfo" => match self.registry().by_target_id(target_id) {
                Some(target) => reply.ok(&json!({"targetInfo": target.tab_info(self.context_id())})),
                None => reply.err(code::SESSION_NOT_FOUND, NO_SESSION),
            },
            method => reply.err(code::METHOD_NOT_FOUND, &format!("'{method}' wasn't found")),
        }
    }

    /// A `Target.*` or `Browser.*` command (or anything at the root, where
    /// only those domains exist), answered as Chrome answers it in `scope`.
    pub(crate) fn browser_command(
        &self,
        client: &Arc<ClientHandle>,
        command: &Command<'_>,
        session: Option<&str>,
        scope: Scope<'_>,
    ) {
        let reply = Replier { client, id: command.id, session };
        let on_page = matches!(scope, Scope::Page(_));
        let method: &str = &command.method;
        if on_page && ROOT_ONLY.contains(&method) {
            // As Chrome: the browser-only methods refuse page sessions.
            let code =
                if method == "Target.exposeDevToolsProtocol" { code::INVALID_PARAMS } else { code::SERVER_ERROR };
            return reply.err(code, NOT_ALLOWED);
        }
        match method {
            method if method.starts_with("Browser.") => self.browser_method(command, &reply, scope),
            // What needs the user's browser: a new tab, a tab to the front,
            // the cookie jar.
            "Target.createTarget" | "Target.closeTarget" | "Target.activateTarget" => {
                self.through_extension(client, command, session)
            }
            "Storage.getCookies" | "Storage.setCookies" | "Storage.clearCookies" if !on_page => {
                self.through_extension(client, command, session)
            }
            method if method.starts_with("Target.") => self.target_method(command, &reply, scope),
            method => reply.err(
                code::METHOD_NOT_FOUND,
                &format!("'{method}' wasn't found at the browser level: send page commands with a page's sessionId"),
            ),
        }
    }

    /// A `Browser.*` command: what Chrome says of itself, or a refusal of
    /// what would change the user's browser.
    fn browser_method(&self, command: &Command<'_>, reply: &Replier<'_>, scope: Scope<'_>) {
        let client = reply.client;
        match &*command.method {
            "Browser.getVersion" => {
                let hello = self.hello();
                reply.ok(&json!({
                    "protocolVersion": "1.3",
                    "product": hello.as_ref().map_or("Chrome/0.0.0.0", |h| h.browser_version.as_str()),
                    "revision": "",
                    "userAgent": hello.as_ref().map_or("", |h| h.user_agent.as_str()),
                    "jsVersion": "",
                }));
            }
            // Downloads go where the user's browser puts them; their events are
            // re-emitted at the browser level (see `download_event`).
            "Browser.setDownloadBehavior" => reply.ok(&json!({})),
            "Browser.close" => {
                // Never the user's browser: this client's connection only.
                reply.ok(&json!({}));
                client.close(1000, "Browser.close: this client is disconnected; the user's browser stays open");
            }
            "Browser.setDockTile" => reply.ok(&json!({})),
            // What the user's Chrome (started without --enable-automation) says.
            "Browser.getBrowserCommandLine" => {
                reply.err(code::SERVER_ERROR, "Command line not returned because --enable-automation not set.")
            }
            "Browser.getHistogram" => {
                let name = command.params::<Value>().ok().and_then(|p| p["name"].as_str().map(str::to_string));
                reply.err(code::INVALID_PARAMS, &format!("Cannot find histogram: {}", name.unwrap_or_default()));
            }
            "Browser.getHistograms" => reply.ok(&json!({"histograms": []})),
            method if USER_BROWSER_ONLY.contains(&method) => reply.err(
                code::SERVER_ERROR,
                &format!("{NOT_ALLOWED}: Browser Relay does not let clients change the user's browser ({method})"),
            ),
            method @ ("Browser.getWindowForTarget" | "Browser.getWindowBounds") => {
                let tab = match self.window_tab(client, method, command, scope) {
                    Ok(tab) => tab,
                    Err(message) => return reply.err(code::SERVER_ERROR, &message),
                };
                let bounds_only = method == "Browser.getWindowBounds";
                self.extension_answer(client, command, reply.session, ExtensionCall::Window { tab, bounds_only });
            }
            method => reply.err(code::METHOD_NOT_FOUND, &format!("'{method}' wasn't found")),
        }
    }

    /// A `Target.*` command the relay answers from its registry: the
    /// targets, attaching and detaching, and the refusals of what the
    /// user's browser does not offer clients (other contexts, DevTools).
    fn target_method(&self, command: &Command<'_>, reply: &Replier<'_>, scope: Scope<'_>) {
        let (client, session) = (reply.client, reply.session);
        match &*command.method {
            "Target.setRemoteLocations" => reply.ok(&json!({})),
            "Target.setAutoAttach" => self.set_auto_attach(client, command, session),
            "Target.setDiscoverTargets" => self.set_discover_targets(client, command, session),
            "Target.getTargets" => match command.params::<FilterParams>() {
                Ok(p) => {
                    let infos = self.seen_target_infos(client, &TargetFilter::from_param(p.filter));
                    reply.ok(&json!({"targetInfos": infos}))
                }
                Err(e) => reply.err(code::INVALID_PARAMS, &e),
            },
            "Target.getTargetInfo" => {
                let params: TargetIdParams = command.params().unwrap_or_default();
                match self.seen_target_info(client, params.target_id, scope) {
                    Some(info) => reply.ok(&json!({"targetInfo": info})),
                    None => reply.err(code::INVALID_PARAMS, NO_TARGET),
                }
            }
            "Target.attachToTarget" => self.attach_to_target(client, command, session),
            "Target.attachToBrowserTarget" => self.attach_to_browser_target(reply),
            "Target.detachFromTarget" => self.detach_from_target(client, command, session),
            "Target.getBrowserContexts" => {
                reply.ok(&json!({"browserContextIds": [], "defaultBrowserContextId": &**self.context_id()}))
            }
            "Target.createBrowserContext" => reply.err(
                code::SERVER_ERROR,
                "Browser Relay drives the user's own browser profile: separate browser contexts are not available; use the default context",
            ),
            "Target.disposeBrowserContext" => {
                let id = command.params::<Value>().ok().and_then(|p| p["browserContextId"].as_str().map(str::to_string));
                reply.err(code::SERVER_ERROR, &format!("Failed to find context with id {}", id.unwrap_or_default()));
            }
            "Target.getDevToolsTarget" => reply.ok(&json!({})),
            "Target.openDevTools" => reply.err(code::SERVER_ERROR, "Failed to create DevTools window"),
            "Target.exposeDevToolsProtocol" => reply.err(
                code::SERVER_ERROR,
                &format!("{NOT_ALLOWED}: Browser Relay does not give pages of the user's browser the protocol"),
            ),
            "Target.autoAttachRelated" if matches!(scope, Scope::Page(_)) => {
                reply.err(code::SERVER_ERROR, "Target.autoAttachRelated is only supported on the Browser target")
            }
            "Target.autoAttachRelated" => reply.err(code::INVALID_PARAMS, "Target does not support auto-attaching"),
            "Target.sendMessageToTarget" => reply.err(
                code::SERVER_ERROR,
                "When using flat protocol, messages are routed to the target via the sessionId attribute.",
            ),
            method => reply.err(code::METHOD_NOT_FOUND, &format!("'{method}' wasn't found")),
        }
    }

    /// `Target.getTargets`' answer: the browser, and the tab and page
    /// target of each tab `client` sees, as `filter` asks.
    fn seen_target_infos(&self, client: &ClientHandle, filter: &TargetFilter) -> Vec<Value> {
        let context_id = self.context_id().clone();
        let mut infos = Vec::new();
        if filter.matches("browser") {
            infos.push(self.browser_info());
        }
        for target in self.registry().iter().filter(|t| client.sees(t)) {
            if filter.matches("tab") {
                infos.push(target.tab_info(&context_id));
            }
            if filter.matches("page") {
                infos.push(target.page_info(&context_id));
            }
        }
        infos
    }

    /// `Target.getTargetInfo`'s answer: of the target named, one `client`
    /// sees (`None`: no such target).
    fn seen_target_info(&self, client: &ClientHandle, target_id: Option<String>, scope: Scope<'_>) -> Option<Value> {
        let context_id = self.context_id().clone();
        // Without an id: the browser at the root, the page itself on
        // its own session (as Chrome).
        let id = match (target_id, scope) {
            (Some(id), _) => id,
            (None, Scope::Page(page)) => page.to_string(),
            (None, Scope::Root) => return Some(self.browser_info()),
        };
        if id == self.browser_id() {
            return Some(self.browser_info());
        }
        match self.registry().by_target_id(&id).filter(|t| client.sees(t)) {
            Some(t) if *t.tab_target_id == *id => Some(t.tab_info(&context_id)),
            Some(t) => Some(t.page_info(&context_id)),
            None => None,
        }
    }

    /// `Target.attachToBrowserTarget`: a browser session on this client's
    /// connection (the relay answers on it as at the root).
    fn attach_to_browser_target(&self, reply: &Replier<'_>) {
        let client = reply.client;
        if let Some(refusal) = self.session_cap(client) {
            return reply.err(code::SERVER_ERROR, &refusal);
        }
        let browser_session = new_id();
        client.state().sessions.insert(browser_session.clone(), SessionKind::Browser);
        client.send(attached_event(&browser_session, self.browser_info(), reply.session));
        reply.ok(&json!({"sessionId": &*browser_session}));
    }

    /// What the extension answers with one allow-listed `chrome.*` call:
    /// `Target.createTarget`, `closeTarget`, `activateTarget`, and the
    /// cookie jar at the browser level.
    fn through_extension(&self, client: &Arc<ClientHandle>, command: &Command<'_>, session: Option<&str>) {
        let method = command.method.to_string();
        let params = command.params.map(|p| p.get().to_string());
        self.extension_answer(client, command, session, ExtensionCall::Target { method, params });
    }

    /// The tab whose window `Browser.getWindowForTarget` (or
    /// `getWindowBounds`) asks about.
    fn window_tab(
        &self,
        client: &ClientHandle,
        method: &str,
        command: &Command<'_>,
        scope: Scope<'_>,
    ) -> Result<TabId, String> {
        #[derive(Deserialize, Default)]
        #[serde(rename_all = "camelCase")]
        struct WindowParams {
            target_id: Option<String>,
            window_id: Option<i64>,
        }
        let params: WindowParams = command.params().unwrap_or_default();
        let registry = self.registry();
        if method == "Browser.getWindowBounds" {
            let window = params.window_id;
            return registry
                .iter()
                .find(|t| window.is_some() && t.window_id == window && client.sees(t))
                .map(|t| t.tab_id)
                .ok_or_else(|| "Browser window not found".to_string());
        }
        let target = match (params.target_id, scope) {
            (Some(id), _) => id,
            (None, Scope::Page(page)) => page.to_string(),
            (None, Scope::Root) => return Err("No web contents in the target".into()),
        };
        let visible = registry.by_target_id(&target).filter(|t| client.sees(t));
        visible.map(|t| t.tab_id).ok_or_else(|| "No target with given id".to_string())
    }

    /// Answers a command with `chrome.*` calls.
    fn extension_answer(
        &self,
        client: &Arc<ClientHandle>,
        command: &Command<'_>,
        session: Option<&str>,
        call: ExtensionCall,
    ) {
        let (relay, owner) = (self.clone(), client.clone());
        self.answer_later(client, command, session, async move {
            match call {
                ExtensionCall::Target { method, params } => {
                    let result = relay.extension_backed(&method, params.as_deref(), &owner.access).await;
                    if let (Ok(created), "Target.createTarget") = (&result, method.as_str()) {
                        relay.own_created_tab(&owner, created);
                    }
                    result
                }
                ExtensionCall::Window { tab, bounds_only } => relay.window_of(tab, bounds_only).await,
            }
        });
    }

    /// Answers a command with what `work` gives (a raw result), from a task
    /// so that this client's other commands keep flowing; it counts as in
    /// flight meanwhile.
    fn answer_later(
        &self,
        client: &Arc<ClientHandle>,
        command: &Command<'_>,
        session: Option<&str>,
        work: impl Future<Output = Result<String, CallError>> + Send + 'static,
    ) {
        if !self.start_in_flight(&Replier { client, id: command.id, session }) {
            return;
        }
        let client = client.clone();
        let (id, session) = (command.id, session.map(str::to_string));
        tokio::spawn(async move {
            let result = work.await;
            client.finish_command();
            let reply = Replier { client: &client, id, session: session.as_deref() };
            match result {
                Ok(result) => client.send(cdp::response(id, &result, session.as_deref())),
                // Chrome's code for an unknown target.
                Err(CallError::Chrome(e)) if e == NO_TARGET => reply.err(code::INVALID_PARAMS, &e),
                Err(e) => reply.err(code::SERVER_ERROR, &e.to_string()),
            }
        });
    }

    /// The tab `client` created is its: closed when the client leaves (at
    /// once if it already has).
    fn own_created_tab(&self, client: &Arc<ClientHandle>, created: &str) {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Created {
            target_id: String,
        }
        let Ok(Created { target_id }) = serde_json::from_str(created) else { return };
        let mut registry = self.registry();
        let Some(target) = registry.by_target_id_mut(&target_id) else { return };
        // Under the registry lock, as `forget_client`: either it sees this
        // owner, or this sees that the client is gone.
        if self.0.clients.contains_key(&client.id) {
            target.owners.push(client.id);
        } else {
            let tab = target.tab_id;
            drop(registry);
            self.close_orphans(vec![tab]);
        }
    }

    /// `{windowId, bounds}` (or `{bounds}`) of a tab's window: the window as
    /// `chrome.windows.update` with no change reports it.
    async fn window_of(&self, tab: TabId, bounds_only: bool) -> Result<String, CallError> {
        let window_id = self
            .registry()
            .by_tab(tab)
            .and_then(|t| t.window_id)
            .ok_or_else(|| CallError::Chrome("Browser window not found".into()))?;
        let window = self.call(|id| RelayMessage::WindowsUpdate { id, window_id, focused: None }).await?;
        let window: Value =
            serde_json::from_str(&window).map_err(|e| CallError::Chrome(format!("unexpected window: {e}")))?;
        let bounds = json!({
            "left": window["left"], "top": window["top"], "width": window["width"], "height": window["height"],
            "windowState": window["state"].as_str().unwrap_or("normal"),
        });
        let answer =
            if bounds_only { json!({"bounds": bounds}) } else { json!({"windowId": window_id, "bounds": bounds}) };
        Ok(answer.to_string())
    }

    fn browser_info(&self) -> Value {
        json!({
            "targetId": self.browser_id(),
            "type": "browser",
            "title": "",
            "url": "",
            "attached": true,
            "canAccessOpener": false,
        })
    }

    fn set_auto_attach(&self, client: &Arc<ClientHandle>, command: &Command<'_>, session: Option<&str>) {
        let reply = Replier { client, id: command.id, session };
        let params = match command.params::<AutoAttachParams>() {
            Ok(p) => p,
            Err(e) => return reply.err(code::INVALID_PARAMS, &e),
        };
        if params.auto_attach && !params.flatten {
            // As Chrome: browser-level auto-attach needs flat sessions.
            return reply.err(code::SERVER_ERROR, "Only flatten protocol is supported with browser level auto-attach");
        }
        // Hold the registry while announcing so that no tab event can slip in
        // between a client's attachedToTarget and our answer.
        let mut registry = self.registry();
        client.state().auto_attach = params.auto_attach.then(|| TargetFilter::from_param(params.filter));
        for target in registry.iter_mut() {
            client.auto_attach_root(target, self.context_id());
        }
        self.holders_changed();
        reply.ok(&json!({}));
    }

    fn set_discover_targets(&self, client: &Arc<ClientHandle>, command: &Command<'_>, session: Option<&str>) {
        let reply = Replier { client, id: command.id, session };
        let params = match command.params::<DiscoverParams>() {
            Ok(p) => p,
            Err(e) => return reply.err(code::INVALID_PARAMS, &e),
        };
        let registry = self.registry();
        let filter = params.discover.then(|| TargetFilter::from_param(params.filter));
        if let Some(filter) = &filter {
            let created =
                |info: Value| cdp::event("Target.targetCreated", &json!({"targetInfo": info}).to_string(), None);
            if filter.matches("browser") {
                client.send(created(self.browser_info()));
            }
            for target in registry.iter().filter(|t| client.sees(t)) {
                if filter.matches("tab") {
                    client.send(created(target.tab_info(self.context_id())));
                }
                if filter.matches("page") {
                    client.send(created(target.page_info(self.context_id())));
                }
            }
        }
        client.state().discover = filter;
        reply.ok(&json!({}));
    }

    fn attach_to_target(&self, client: &Arc<ClientHandle>, command: &Command<'_>, session: Option<&str>) {
        let reply = Replier { client, id: command.id, session };
        let params: TargetIdParams = match command.params() {
            Ok(p) => p,
            Err(e) => return reply.err(code::INVALID_PARAMS, &e),
        };
        if !params.flatten {
            return reply.err(code::SERVER_ERROR, "Browser Relay supports flat sessions only: pass flatten: true");
        }
        let Some(target_id) = params.target_id else {
            return reply.err(code::INVALID_PARAMS, "Invalid parameters: targetId is required");
        };
        if let Some(refusal) = self.session_cap(client) {
            return reply.err(code::SERVER_ERROR, &refusal);
        }
        let mut registry = self.registry();
        // Another grant's tab is as unknown to this client as a closed one.
        let Some(target) = registry.by_target_id_mut(&target_id).filter(|t| client.sees(t)) else {
            return reply.err(code::INVALID_PARAMS, NO_TARGET);
        };
        let (kind, info) = if *target.tab_target_id == *target_id {
            (SubKind::Tab, target.tab_info(self.context_id()))
        } else {
            (SubKind::Page, target.page_info(self.context_id()))
        };
        // Each explicit attach is a new session, as in Chrome, so detaching
        // it never disturbs the client's other sessions on the same page.
        let new_session = new_id();
        client.subscribe(&mut client.state(), target, kind, new_session.clone(), session.map(Arc::from));
        client.send(attached_event(&new_session, info, session));
        self.holders_changed();
        reply.ok(&json!({"sessionId": &*new_session}));
    }

    /// Why `client` may not attach one more session, if it may not.
    fn session_cap(&self, client: &ClientHandle) -> Option<String> {
        let max = self.config().max_sessions_per_client;
        (client.state().sessions.len() >= max).then(|| {
            format!("too many sessions on this connection ({max}): detach some first (Target.detachFromTarget)")
        })
    }

    fn detach_from_target(&self, client: &Arc<ClientHandle>, command: &Command<'_>, session: Option<&str>) {
        let reply = Replier { client, id: command.id, session };
        let Ok(SessionParams { session_id: Some(detach) }) = command.params::<SessionParams>() else {
            return reply.err(code::INVALID_PARAMS, "Invalid parameters: sessionId is required");
        };
        let held = client.state().sessions.get(detach.as_str()).cloned();
        match held {
            Some(SessionKind::Browser) => {
                client.forget_session(&detach);
                let params = json!({"sessionId": detach, "targetId": self.browser_id()}).to_string();
                client.send(cdp::event("Target.detachedFromTarget", &params, None));
                reply.ok(&json!({}));
            }
            Some(SessionKind::Page(target_id) | SessionKind::Tab(target_id)) => {
                let mut registry = self.registry();
                if let Some(target) = registry.by_target_id_mut(&target_id) {
                    // Detaching a tab session takes the page sessions under it along.
                    let mut gone: Vec<Subscription> = Vec::new();
                    target.subs.retain(|s| {
                        let hit = s.client.id == client.id
                            && (*s.session == *detach || s.parent.as_deref() == Some(detach.as_str()));
                        if hit {
                            gone.push(s.clone());
                        }
                        !hit
                    });
                    gone.sort_by_key(|s| s.kind == SubKind::Tab);
                    for sub in gone {
                        client.forget_session(&sub.session);
                        let id = if sub.kind == SubKind::Tab { &target.tab_target_id } else { &target.target_id };
                        let params = json!({"sessionId": &*sub.session, "targetId": &**id}).to_string();
                        client.send(cdp::event("Target.detachedFromTarget", &params, sub.parent.as_deref()));
                    }
                }
                self.holders_changed();
                reply.ok(&json!({}));
            }
            None => match self.0.children.get(detach.as_str()).map(|e| *e.value()) {
                // Chrome's own child session: Chrome detaches it.
                Some(tab) => {
                    let relay = self.clone();
                    self.answer_later(client, command, session, async move {
                        let params = json!({"sessionId": detach});
                        relay.send_command(tab, "Target.detachFromTarget", Some(params)).await.map(|_| "{}".into())
                    });
                }
                None => reply.err(code::SESSION_NOT_FOUND, "No session with given id"),
            },
        }
    }

    /// Browser-level commands that need the extension, for a client of
    /// `access` (a grant's opens its tabs in its group, reaches only its
    /// own tabs and cookies: `lending.rs`). Returns the raw result.
    pub(crate) async fn extension_backed(
        &self,
        method: &str,
        params: Option<&str>,
        access: &grants::Access,
    ) -> Result<String, CallError> {
        let params = params.unwrap_or("{}");
        let bad = |e: serde_json::Error| CallError::Chrome(format!("Invalid parameters for {method}: {e}"));
        let target_tab = |params: &str| -> Result<TabId, CallError> {
            let p: TargetIdParams = serde_json::from_str(params).map_err(bad)?;
            let id = p.target_id.ok_or_else(|| CallError::Chrome("targetId is required".into()))?;
            self.visible_tab_of_target(&id, access).ok_or_else(|| CallError::Chrome(NO_TARGET.into()))
        };
        let grant = access.grant();
        if let Some(grant) = grant
            && let Some(refusal) = crate::lending::refusal(grant, method, Some(params), None, None)
        {
            return Err(CallError::Chrome(refusal));
        }
        match method {
            "Target.createTarget" => {
                let p: CreateTargetParams = serde_json::from_str(params).map_err(bad)?;
                let url = p.url.filter(|u| !u.is_empty()).unwrap_or_else(|| "about:blank".into());
                let Some(grant) = grant else {
                    let created = self
                        .call(|id| RelayMessage::TabsCreate {
                            id,
                            url: Some(url),
                            active: !p.background,
                            opener_tab_id: None,
                            grant: None,
                        })
                        .await?;
                    let tab: TabInfo = serde_json::from_str(&created)
                        .map_err(|e| CallError::Chrome(format!("unexpected tabs.create result: {e}")))?;
                    // Announced to auto-attaching clients before we answer.
                    let target_id = self.attach_and_register(&tab).await?;
                    return Ok(json!({"targetId": &*target_id}).to_string());
                };
                self.create_grant_tab(grant, &url).await
            }
            "Target.closeTarget" => {
                self.close_tab(target_tab(params)?).await?;
                Ok(json!({"success": true}).to_string())
            }
            "Target.activateTarget" => {
                self.activate_tab(target_tab(params)?).await?;
                Ok("{}".into())
            }
            // Cookies are per profile; any attached tab reaches them (a
            // grant's: one of its own, and only its sites' cookies).
            "Storage.getCookies" => {
                let all = self.send_command(self.any_tab(access)?, "Network.getAllCookies", None).await?;
                Ok(match grant.and_then(|g| crate::lending::only_its_cookies(&g.sites, &all)) {
                    Some(kept) => kept,
                    None => all,
                })
            }
            "Storage.setCookies" => {
                #[derive(Deserialize)]
                struct Cookies {
                    cookies: Value,
                }
                let p: Cookies = serde_json::from_str(params).map_err(bad)?;
                let params = json!({"cookies": p.cookies});
                let tab = self.any_tab(access)?;
                self.send_command(tab, "Network.setCookies", Some(params)).await.map(|_| "{}".into())
            }
            "Storage.clearCookies" => {
                let tab = self.any_tab(access)?;
                self.send_command(tab, "Network.clearBrowserCookies", None).await.map(|_| "{}".into())
            }
            other => Err(CallError::Chrome(format!("'{other}' wasn't found"))),
        }
    }

    /// A tab a grant's client opens: made in the background in the grant's
    /// group (the extension keeps it away from the person's focus) on an
    /// empty page, announced as the grant's, put under its site hold, and
    /// only then sent to `url`, so that its first request already goes
    /// through the hold.
    async fn create_grant_tab(&self, grant: &grants::Grant, url: &str) -> Result<String, CallError> {
        if !grant.sites.allows_url(url) {
            return Err(CallError::Chrome(crate::lending::outside(grant, url)));
        }
        let name = grant.name.to_string();
        let created = self
            .call(|id| RelayMessage::TabsCreate {
                id,
                url: Some("about:blank".into()),
                active: false,
                opener_tab_id: None,
                grant: Some(name.clone()),
            })
            .await?;
        let mut tab: TabInfo = serde_json::from_str(&created)
            .map_err(|e| CallError::Chrome(format!("unexpected tabs.create result: {e}")))?;
        // Its client asked for it: the grant's, whatever an older
        // extension says.
        tab.grant = Some(name);
        let target_id = self.attach_and_register(&tab).await?;
        if url != "about:blank" {
            let tab_id = tab.tab_id;
            let relay = self.clone();
            let params = json!({"url": url});
            // As Chrome's `createTarget`: the answer does not wait for the load.
            tokio::spawn(async move {
                if let Err(e) = relay.send_command(tab_id, "Page.navigate", Some(params)).await {
                    tracing::debug!(tab = tab_id, "a grant's new tab did not navigate: {e}");
                }
            });
        }
        Ok(json!({"targetId": &*target_id}).to_string())
    }

    /// An attached tab to reach the browser's cookies through: any, for
    /// the person; one of its own, for a grant.
    fn any_tab(&self, access: &grants::Access) -> Result<TabId, CallError> {
        self.registry()
            .iter()
            .find(|t| access.sees(t.grant.as_deref()))
            .map(|t| t.tab_id)
            .ok_or_else(|| CallError::Chrome("no tab is attached: click the Browser Relay icon on a tab first".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wipes_are_refused_unless_allowed_and_name_the_key() {
        for method in WIPES {
            let refusal = wipe_refusal(method, false).expect(method);
            assert!(refusal.contains("allowWipingBrowserData = true") && refusal.contains(method), "{refusal}");
            assert_eq!(wipe_refusal(method, true), None);
        }
        for open in ["Network.deleteCookies", "Storage.getCookies", "Storage.setCookies", "Storage.clearDataForOrigin"]
        {
            assert_eq!(wipe_refusal(open, false), None, "{open}");
        }
    }

    #[test]
    fn what_deletes_cookies_is_counted_by_the_cookie() {
        let raw = |text: &str| serde_json::value::RawValue::from_string(text.to_string()).unwrap();
        let now = 1_800_000_000.0;
        let count = |method: &str, params: &str| cookies_deleted(method, Some(&raw(params)), now);
        assert_eq!(count("Network.deleteCookies", r#"{"name":"sid","domain":".bank.example"}"#), 1);
        assert_eq!(count("Network.setCookie", r#"{"name":"sid","value":"","expires":1}"#), 1, "expired: deleted");
        assert_eq!(count("Network.setCookie", r#"{"name":"sid","value":"x","expires":1900000000}"#), 0);
        assert_eq!(count("Network.setCookie", r#"{"name":"sid","value":"x"}"#), 0, "a session cookie");
        let three =
            r#"{"cookies":[{"name":"a","expires":5},{"name":"b","expires":6},{"name":"c"},{"name":"d","expires":7}]}"#;
        assert_eq!(count("Storage.setCookies", three), 3);
        assert_eq!(count("Network.setCookies", three), 3);
        assert_eq!(
            count(
                "Storage.clearDataForOrigin",
                r#"{"origin":"https://a.example","storageTypes":"local_storage, cookies"}"#
            ),
            1
        );
        assert_eq!(count("Storage.clearDataForOrigin", r#"{"origin":"https://a.example","storageTypes":"all"}"#), 1);
        assert_eq!(
            count("Storage.clearDataForOrigin", r#"{"origin":"https://a.example","storageTypes":"local_storage"}"#),
            0
        );
        assert_eq!(count("Storage.getCookies", "{}"), 0);
        assert_eq!(
            cookies_deleted("Network.setCookies", Some(&raw("[1,2]")), now),
            0,
            "not understood: nothing counted"
        );
    }
}
