//! Grants on the person's shared tabs: what a grant's client sees and may do.
//! The person's own keys see and do everything, as before.
//!
//! - **Its tabs only.** A tab belongs to a grant when it sits in one of the
//!   grant's tab groups ([`Target::grant`], which the extension reports, or
//!   the relay sets for a tab a grant's client opened and for a popup of a
//!   grant's tab). A grant's client is shown only those: in `/json/list`,
//!   `Target.getTargets`, discovery and auto-attach; any other target id is
//!   unknown to it, as Chrome answers an unknown one ([`ClientHandle::sees`]).
//!   A tab moved into or out of a grant's group appears to or leaves its
//!   clients at once ([`Relay::on_tab_grant`]).
//! - **Its sites only.** The top-level documents of a grant's tab go
//!   through the relay's site hold first (`interception::SITE_HOLD`, a
//!   `Fetch` interceptor ahead of every client's): one to a site outside
//!   the grant's list is failed as `Aborted` before it leaves Chrome, so
//!   the tab stays where it was, whoever started it (a client's
//!   `Page.navigate`, a link, a form, `location = …`, a redirect, a meta
//!   refresh). A client's own `Page.navigate` or `Target.createTarget`
//!   outside is refused at once with the grant named ([`refusal`]); what
//!   the page started is recorded in the activity record.
//! - **Its cookies only.** Cookie answers (`Network.getAllCookies`,
//!   `getCookies`, `Storage.getCookies`) keep the cookies sent to its
//!   sites ([`only_its_cookies`]); setting, deleting or clearing others is
//!   refused, as are other origins' storage. What its tabs send to other
//!   sites goes without the person's cookies: the extension's
//!   declarativeNetRequest rules, below the page (`sites` in `grants`).
//! - **Revoked or expired**: its clients are closed at once, with the
//!   reason ([`Relay::end_grant`]); the extension dissolves its groups.

use std::sync::Arc;

use grants::{AskKind, Grant, Sites, UrlVerdict};
use serde_json::{Value, json};
use shared_protocol::{GrantGroup, RelayMessage, encode};

use super::cdp;
use super::client::{ClientHandle, SessionKind};
use super::interception::{Delivery, Route, SITE_HOLD};
use super::ledger::Undo;
use super::link::ExtensionLink;
use super::questions::{AskedTab, Verdict};
use super::relay::Relay;
use super::targets::{SubKind, Target};

/// The close code of a grant's connection that its grant no longer opens:
/// a policy (1008), with the reason in words.
pub(crate) const GRANT_ENDED: u16 = 1008;

/// Why a grant's client may not send `method` with `params` on a tab's
/// session (`child`: a frame's or worker's; `page`: the tab's own frame
/// id, its target id), if it may not.
pub(crate) fn refusal(
    grant: &Grant,
    method: &str,
    params: Option<&str>,
    child: Option<&str>,
    page: Option<&str>,
) -> Option<String> {
    let params: Value = params.and_then(|p| serde_json::from_str(p).ok()).unwrap_or(Value::Null);
    let name = &grant.name;
    let sites = &grant.sites;
    let str_at = |pointer: &str| params.pointer(pointer).and_then(Value::as_str);
    match method {
        // A frame may go anywhere; the page itself (no frame named, or its
        // own: Playwright names it) only to its sites.
        "Page.navigate" if child.is_none() && str_at("/frameId").is_none_or(|frame| Some(frame) == page) => {
            let url = str_at("/url").unwrap_or_default();
            (!sites.allows_url(url)).then(|| outside(grant, url))
        }
        // A request changed on its way: the hold saw the old one. A grant
        // that asks the person watches requests, and rewrites none: what
        // the person was asked about (or not) is what goes.
        "Fetch.continueRequest" | "Network.continueInterceptedRequest" => {
            let asks = [AskKind::Submit, AskKind::NewSite].iter().any(|k| grant.asks(*k));
            let rewrites = ["/url", "/method", "/postData"].iter().any(|p| params.pointer(p).is_some());
            if asks && rewrites {
                return Some(format!(
                    "Browser Relay: the grant '{name}' asks the person first: it may not change a request's URL, method or body"
                ));
            }
            let url = str_at("/url")?;
            (!sites.is_any() && !sites.allows_url(url)).then(|| outside(grant, url))
        }
        "Fetch.fulfillRequest" | "Fetch.continueResponse" if grant.asks(AskKind::Download) => Some(format!(
            "Browser Relay: the grant '{name}' asks the person before a download: it may not answer requests itself"
        )),
        "Network.clearBrowserCookies" | "Storage.clearCookies" => {
            Some(format!("Browser Relay: the grant '{name}' may not clear the person's cookies"))
        }
        "Network.setCookie" | "Network.deleteCookies" => cookie_refusal(grant, &params),
        "Network.setCookies" | "Storage.setCookies" => {
            let cookies = params.get("cookies").and_then(Value::as_array)?;
            cookies.iter().find_map(|cookie| cookie_refusal(grant, cookie))
        }
        method if reads_other_origins(method) => {
            let origin =
                ["/origin", "/securityOrigin", "/storageKey", "/storageId/securityOrigin", "/storageId/storageKey"]
                    .iter()
                    .find_map(|p| str_at(p))?;
            // A storage key is an origin with `^`-parts after it.
            let origin = origin.split('^').next().unwrap_or_default();
            (!sites.is_any() && !sites.allows_url(&format!("{}/", origin.trim_end_matches('/')))).then(|| {
                format!(
                    "Browser Relay: the grant '{name}' may not reach {origin}'s storage: its sites are {}",
                    sites.describe()
                )
            })
        }
        _ => None,
    }
}

/// What a grant's client's command would ask the person first, if it asks
/// (its grant's `--ask`): the kind, the site and the words. `tab_url` is
/// where the tab is; `known` says whether the grant's tabs have been on a
/// site; `page` is the tab's own frame id.
pub(crate) fn command_question(
    grant: &Grant,
    method: &str,
    params: Option<&str>,
    child: Option<&str>,
    page: Option<&str>,
    tab_url: &str,
    known: impl Fn(&str) -> bool,
) -> Option<(AskKind, String, String)> {
    let name = &grant.name;
    let here = grants::host_of(tab_url).unwrap_or_else(|| "this page".into());
    let asks = |kind| grant.asks(kind);
    // Files dropped on the page are files given to it, as through a file
    // input.
    let dropped_files = (method == "Input.dispatchDragEvent")
        .then(|| params.and_then(|p| serde_json::from_str::<Value>(p).ok()))
        .flatten()
        .filter(|p| p.get("type").and_then(Value::as_str) == Some("drop"))
        .and_then(|p| p.pointer("/data/files").and_then(Value::as_array).filter(|f| !f.is_empty()).cloned());
    if asks(AskKind::Upload) && dropped_files.is_some() {
        let files = dropped_files.unwrap_or_default();
        let files = files_said(files.iter().filter_map(Value::as_str));
        return Some((AskKind::Upload, here.clone(), format!("{name} wants to drop {files} on {here}")));
    }
    if asks(AskKind::Input) && starts_input(method, params) {
        let what = match method {
            "Input.dispatchKeyEvent" | "Input.insertText" | "Input.imeSetComposition" => "type",
            "Input.dispatchDragEvent" => "drop something",
            _ => "click",
        };
        return Some((AskKind::Input, here.clone(), format!("{name} wants to {what} on {here}")));
    }
    if asks(AskKind::Upload) && method == "DOM.setFileInputFiles" {
        let params: Value = params.and_then(|p| serde_json::from_str(p).ok()).unwrap_or_default();
        let files = params.get("files").and_then(Value::as_array).cloned().unwrap_or_default();
        let files = files_said(files.iter().filter_map(Value::as_str));
        return Some((
            AskKind::Upload,
            here.clone(),
            format!("{name} wants to give {files} to a file input on {here}"),
        ));
    }
    if asks(AskKind::NewSite) && method == "Page.navigate" && child.is_none() {
        let params: Value = params.and_then(|p| serde_json::from_str(p).ok()).unwrap_or_default();
        let frame = params.get("frameId").and_then(Value::as_str);
        let url = params.get("url").and_then(Value::as_str).unwrap_or_default();
        let host = grants::host_of(url)?;
        let top = frame.is_none_or(|frame| Some(frame) == page);
        if top && !known(&host) && grants::host_of(tab_url).as_deref() != Some(host.as_str()) {
            let what = format!("{name} wants to go to {host}, a site its tabs have not been on ({url})");
            return Some((AskKind::NewSite, host, what));
        }
    }
    None
}

/// Files as a question names them: their names (not their folders), how
/// many.
fn files_said<'a>(paths: impl Iterator<Item = &'a str>) -> String {
    let names: Vec<&str> = paths.map(|f| f.rsplit(['/', '\\']).next().unwrap_or(f)).collect();
    let said = match names.as_slice() {
        [] => "no file (clearing the input)".to_string(),
        [one] => one.to_string(),
        many => format!("{} files ({})", many.len(), many.join(", ")),
    };
    said.chars().filter(|c| !c.is_control()).take(200).collect()
}

/// Whether an input command starts an action the person is asked about:
/// a press, a key going down, text, a touch, a drop (not the moves,
/// releases and wheels around them).
fn starts_input(method: &str, params: Option<&str>) -> bool {
    let kind = || {
        let params: Value = params.and_then(|p| serde_json::from_str(p).ok()).unwrap_or_default();
        params.get("type").and_then(Value::as_str).unwrap_or_default().to_string()
    };
    match method {
        "Input.dispatchMouseEvent" | "Input.emulateTouchFromMouseEvent" => kind() == "mousePressed",
        "Input.dispatchKeyEvent" => matches!(kind().as_str(), "keyDown" | "rawKeyDown" | "char"),
        "Input.dispatchTouchEvent" => kind() == "touchStart",
        "Input.dispatchDragEvent" => kind() == "drop",
        "Input.insertText" | "Input.imeSetComposition" | "Input.synthesizeTapGesture" => true,
        _ => false,
    }
}

/// What a grant's client may still do in a tab the person has (its grant
/// handed it over): turn domains on and off, read the frame tree and
/// history, answer a request it held before. Nothing that acts, reads the
/// page or runs script: what the person types there is theirs.
pub(crate) fn refused_while_handed_over(method: &str) -> bool {
    let allowed = method.ends_with(".enable")
        || method.ends_with(".disable")
        || (method.starts_with("Fetch.") && method != "Fetch.fulfillRequest")
        || matches!(
            method,
            "Page.getFrameTree"
                | "Page.getNavigationHistory"
                | "Page.getLayoutMetrics"
                | "Page.setLifecycleEventsEnabled"
                | "Page.stopScreencast"
                | "Runtime.runIfWaitingForDebugger"
                | "Runtime.releaseObject"
                | "Runtime.releaseObjectGroup"
                | "Target.setAutoAttach"
        );
    !allowed
}

/// The events of a tab the person has that a grant's client still gets:
/// where the tab is and what loads, not what is in it or sent from it.
pub(crate) fn shown_while_handed_over(method: &str) -> bool {
    method.starts_with("Target.")
        || method.starts_with("Inspector.")
        || method.starts_with("Runtime.executionContext")
        || matches!(
            method,
            "Page.frameNavigated"
                | "Page.navigatedWithinDocument"
                | "Page.frameAttached"
                | "Page.frameDetached"
                | "Page.frameStartedLoading"
                | "Page.frameStoppedLoading"
                | "Page.domContentEventFired"
                | "Page.loadEventFired"
                | "Page.lifecycleEvent"
        )
}

/// The commands that read a request's body or answer: refused to a
/// grant's client for a request the person made in a tab they had.
pub(crate) fn reads_a_request(method: &str) -> bool {
    matches!(
        method,
        "Network.getRequestPostData"
            | "Network.getResponseBody"
            | "Network.getResponseBodyForInterception"
            | "Network.takeResponseBodyForInterceptionAsStream"
            | "Network.replayXHR"
            | "Network.streamResourceContent"
            | "Fetch.getResponseBody"
            | "Fetch.takeResponseBodyAsStream"
    )
}

/// Domains whose commands name another origin's storage.
fn reads_other_origins(method: &str) -> bool {
    ["Storage.", "DOMStorage.", "IndexedDB.", "CacheStorage."].iter().any(|domain| method.starts_with(domain))
}

/// The refusal of a URL outside a grant's sites.
pub(crate) fn outside(grant: &Grant, url: &str) -> String {
    grant.refuses_url(url).unwrap_or_else(|| format!("Browser Relay: the grant '{}' may not go to {url}", grant.name))
}

/// Why a grant may not set or delete `cookie` (CDP's `CookieParam`, or
/// `deleteCookies`' params), if it may not: its domain (or its URL's host)
/// must be one of the grant's sites.
fn cookie_refusal(grant: &Grant, cookie: &Value) -> Option<String> {
    if grant.sites.is_any() {
        return None;
    }
    let domain = cookie.get("domain").and_then(Value::as_str).map(|d| d.trim_start_matches('.').to_string());
    let host = cookie.get("url").and_then(Value::as_str).and_then(grants::host_of);
    let Some(domain) = domain.or(host) else {
        return Some(format!(
            "Browser Relay: the grant '{}' sets and deletes cookies by url or domain only (its sites: {})",
            grant.name,
            grant.sites.describe()
        ));
    };
    let allowed = ["https", "http"]
        .iter()
        .any(|scheme| grant.sites.check_url(&format!("{scheme}://{domain}/")) == UrlVerdict::Allowed);
    (!allowed).then(|| {
        format!(
            "Browser Relay: the grant '{}' may not set or delete cookies of {domain}: its sites are {}",
            grant.name,
            grant.sites.describe()
        )
    })
}

/// A cookie answer (`{"cookies": [...]}`) with only the cookies sent to
/// `sites`; `None` when there is nothing to take out.
pub(crate) fn only_its_cookies(sites: &Sites, result: &str) -> Option<String> {
    if sites.is_any() {
        return None;
    }
    let mut answer: Value = serde_json::from_str(result).ok()?;
    let cookies = answer.get_mut("cookies")?.as_array_mut()?;
    let before = cookies.len();
    cookies.retain(|cookie| {
        let domain = cookie.get("domain").and_then(Value::as_str).unwrap_or_default();
        let secure = cookie.get("secure").and_then(Value::as_bool).unwrap_or(false);
        sites.allows_cookie(domain, secure)
    });
    (cookies.len() != before).then(|| answer.to_string())
}

/// Whether a cookie answer of `method` is filtered for a grant.
pub(crate) fn answers_cookies(method: &str) -> bool {
    matches!(method, "Network.getAllCookies" | "Network.getCookies" | "Storage.getCookies")
}

/// What the site hold does with a paused request.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Hold {
    /// On to the next interceptor, or the network; a top-level document
    /// marks its site as one the grant's tabs have been on.
    Pass { visit: Option<String> },
    /// Failed as `Aborted`: a top-level document outside the sites.
    Refuse { url: String },
    /// Kept paused until the person answers (`asking.rs`).
    Ask { kind: AskKind, site: String, what: String, visit: Option<String> },
}

/// The site hold's verdict on a paused request of `target` (a grant's
/// tab): `known` says whether the grant's tabs have been on a site.
pub(crate) fn hold_verdict(target: &Target, grant: &Grant, delivery: &Delivery, known: impl Fn(&str) -> bool) -> Hold {
    let pass = Hold::Pass { visit: None };
    let event: Value = serde_json::from_str(&delivery.params).unwrap_or_default();
    let document = event.get("resourceType").and_then(Value::as_str) == Some("Document");
    if !document || delivery.child.is_some() {
        return pass;
    }
    // The page's own frame has the target's id; a frame in it another.
    let top = event.get("frameId").and_then(Value::as_str) == Some(&*target.target_id);
    let url = event.pointer("/request/url").and_then(Value::as_str).unwrap_or_default();
    let host = grants::host_of(url);
    let site = host.clone().unwrap_or_else(|| url.chars().take(80).collect());
    let name = &grant.name;
    // The person has the tab: what they do there is not asked about (the
    // grant's sites still hold: a tab handed back stays within them).
    let asks = |kind| grant.asks(kind) && !target.handed_over;
    if event.get("responseStatusCode").is_some() || event.get("responseErrorReason").is_some() {
        return match asks(AskKind::Download).then(|| download_name(&event)).flatten() {
            Some(file) => Hold::Ask {
                kind: AskKind::Download,
                what: format!("{name} wants to download {file} from {site}"),
                site,
                visit: None,
            },
            None => pass,
        };
    }
    if top && !grant.sites.allows_url(url) {
        return Hold::Refuse { url: url.to_string() };
    }
    let visit = top.then(|| host.clone()).flatten();
    if asks(AskKind::Submit) && event.pointer("/request/method").and_then(Value::as_str) == Some("POST") {
        let what = format!("{name} wants to submit a form to {site} ({url})");
        return Hold::Ask { kind: AskKind::Submit, site, what, visit };
    }
    let new_site = host.as_deref().is_some_and(|h| !known(h) && grants::host_of(&target.url).as_deref() != Some(h));
    if top && asks(AskKind::NewSite) && new_site {
        let what = format!("{name} wants to go to {site}, a site its tabs have not been on ({url})");
        return Hold::Ask { kind: AskKind::NewSite, site, what, visit };
    }
    Hold::Pass { visit }
}

/// The file a document response downloads, or `None` when the tab shows
/// it: an attachment, a type Chrome does not show, or the request of a
/// link's `download` (Chrome's download manager sends no
/// `Upgrade-Insecure-Requests`, which every navigation carries).
fn download_name(event: &Value) -> Option<String> {
    let status = event.get("responseStatusCode").and_then(Value::as_u64)?;
    if !(200..300).contains(&status) || status == 204 || status == 205 {
        return None;
    }
    let header = |name: &str| {
        event.get("responseHeaders")?.as_array()?.iter().find_map(|h| {
            (h.get("name")?.as_str()?.eq_ignore_ascii_case(name))
                .then(|| h.get("value")?.as_str().map(str::to_string))?
        })
    };
    let disposition = header("content-disposition").unwrap_or_default();
    let content_type = header("content-type").unwrap_or_default().to_ascii_lowercase();
    let link_download = event
        .pointer("/request/headers")
        .and_then(Value::as_object)
        .is_some_and(|headers| !headers.keys().any(|k| k.eq_ignore_ascii_case("upgrade-insecure-requests")));
    let attachment = disposition.trim_start().to_ascii_lowercase().starts_with("attachment");
    if !(attachment || link_download || !shown_in_a_tab(&content_type)) {
        return None;
    }
    let named = disposition.split(';').find_map(|part| {
        let (key, value) = part.trim().split_once('=')?;
        (key.trim().eq_ignore_ascii_case("filename")).then(|| value.trim().trim_matches('"').to_string())
    });
    let url = event.pointer("/request/url").and_then(Value::as_str).unwrap_or_default();
    let last = url.split(['?', '#']).next().unwrap_or_default().rsplit('/').find(|s| !s.is_empty()).map(str::to_string);
    let name = named.or(last).unwrap_or_else(|| "a file".into());
    Some(name.chars().filter(|c| !c.is_control()).take(100).collect())
}

/// Whether Chrome shows a response of `content_type` in the tab (no type:
/// it sniffs, and shows).
fn shown_in_a_tab(content_type: &str) -> bool {
    let mime = content_type.split(';').next().unwrap_or_default().trim();
    mime.is_empty()
        || ["text/", "image/", "video/", "audio/", "multipart/"].iter().any(|p| mime.starts_with(p))
        || matches!(
            mime,
            "application/pdf"
                | "application/json"
                | "application/xml"
                | "application/xhtml+xml"
                | "application/javascript"
                | "application/signed-exchange"
        )
        || mime.ends_with("+xml")
        || mime.ends_with("+json")
}

impl Relay {
    /// The grants the relay honours now (the binary keeps them from
    /// `grants.json`), sent to the extension (protocol 6) so that it keeps
    /// their tab groups. A client of a grant no longer among them is
    /// closed ([`Self::end_grant`] says why when it knows).
    pub fn set_grants(&self, grants: Vec<Arc<Grant>>) {
        let names: Vec<String> = grants.iter().map(|g| g.name.to_string()).collect();
        *self.0.grants.write().unwrap_or_else(|p| p.into_inner()) = grants;
        // What a grant asks may have changed (`grant set --ask`): its tabs'
        // holds follow.
        for target in self.registry().iter_mut().filter(|t| t.grant.is_some()) {
            self.fit_site_hold(target);
        }
        for client in self.0.clients.iter() {
            if let Some(grant) = client.grant()
                && !names.iter().any(|n| n == grant.name.as_str())
            {
                let reason = format!("Browser Relay: the grant '{}' is no longer given", grant.name);
                client.disconnect(GRANT_ENDED, &reason);
            }
        }
        if let Some(link) = self.link() {
            self.send_grants(&link);
        }
    }

    /// Closes every connection of the grant `name` at once, with `reason`
    /// in its close frame (revoked, expired).
    pub fn end_grant(&self, name: &str, reason: &str) {
        self.withdraw_questions(|q| q.grant == name, "the grant ended");
        for client in self.0.clients.iter() {
            if client.grant().is_some_and(|g| g.name.as_str() == name) {
                tracing::info!(client = client.id, grant = name, "closing a grant's client: {reason}");
                client.disconnect(GRANT_ENDED, reason);
            }
        }
    }

    /// The grant named `name`, if the relay honours it.
    pub(crate) fn grant_named(&self, name: &str) -> Option<Arc<Grant>> {
        let grants = self.0.grants.read().unwrap_or_else(|p| p.into_inner());
        grants.iter().find(|g| g.name.as_str() == name).cloned()
    }

    /// The `grants` notice, for an extension that keeps grants.
    pub(crate) fn send_grants(&self, link: &ExtensionLink) {
        if link.hello.protocol_version < shared_protocol::GRANTS_SINCE {
            return;
        }
        let grants: Vec<GrantGroup> = {
            let grants = self.0.grants.read().unwrap_or_else(|p| p.into_inner());
            grants
                .iter()
                .map(|g| GrantGroup {
                    name: g.name.to_string(),
                    color: g.color.name().into(),
                    sites: g.sites.url_regexes(),
                })
                .collect()
        };
        let _ = link.send_now(encode(&RelayMessage::Grants { grants }));
    }

    /// The grant of `target`, when its site hold is needed: it has a list
    /// of sites, or asks the person before a form, a new site or a
    /// download.
    pub(crate) fn held_by(&self, target: &Target) -> Option<Arc<Grant>> {
        let grant = self.grant_named(target.grant.as_deref()?)?;
        let asks = [AskKind::Submit, AskKind::NewSite, AskKind::Download].iter().any(|k| grant.asks(*k));
        (!grant.sites.is_any() || asks).then_some(grant)
    }

    /// Puts `target` under its grant's site hold, or takes it away, as its
    /// grant says (called under the registry lock, when a tab is announced
    /// or moves between groups, and when the grants change).
    pub(crate) fn fit_site_hold(&self, target: &mut Target) {
        let link = self.link();
        match self.held_by(target) {
            Some(grant) => {
                if let (Some(enable), Some(link)) =
                    (target.interception.hold_sites(grant.asks(AskKind::Download)), &link)
                {
                    self.send_undo(link, target.tab_id, enable);
                }
            }
            None => self.release_site_hold(target, "the tab is no longer under a grant that asks"),
        }
    }

    /// Takes `target`'s site hold away: what it keeps for the person fails
    /// (no answer is a no) and their questions are withdrawn, the others go
    /// on. Before the tab leaves its grant, its grant ends or asks no more,
    /// or the tab stops being shared (Chrome lets a paused request go when
    /// its debugger detaches).
    pub(crate) fn release_site_hold(&self, target: &mut Target, why: &str) {
        let link = self.link();
        for route in target.interception.release_sites() {
            self.route_paused(link.as_deref(), target, route);
        }
        let target_id = target.target_id.to_string();
        self.withdraw_questions(|q| q.target_id.as_deref() == Some(target_id.as_str()), why);
    }

    /// The site hold decides on a request delivered to it: the route it
    /// goes on by, or `None` when it ends here (refused, handed to Chrome,
    /// or kept until the person answers).
    pub(crate) fn site_hold_decides(
        &self,
        link: Option<&ExtensionLink>,
        target: &mut Target,
        delivery: &Delivery,
    ) -> Option<Route> {
        let Some(grant) = self.held_by(target) else {
            return self.site_hold_lets_go(link, target, &delivery.request_id);
        };
        match hold_verdict(target, &grant, delivery, |site| self.visited(grant.name.as_str(), site)) {
            Hold::Pass { visit } => {
                if let Some(site) = visit {
                    self.visit(grant.name.as_str(), &site);
                }
                self.site_hold_lets_go(link, target, &delivery.request_id)
            }
            Hold::Refuse { url } => {
                self.site_hold_fails(link, target, &delivery.request_id);
                tracing::info!(tab = target.tab_id, grant = %grant.name, "refused a navigation outside the grant's sites");
                self.note_refused_navigation(target, &grant, &url);
                None
            }
            Hold::Ask { kind, site, what, visit } => {
                let verdict = self.ask(&grant, kind, &site, what, Some(&AskedTab::of(target)));
                let (relay, tab, request_id) = (self.clone(), target.tab_id, delivery.request_id.clone());
                let grant_name = grant.name.to_string();
                tokio::spawn(async move {
                    let verdict = verdict.await;
                    if verdict == Verdict::Allowed
                        && let Some(site) = &visit
                    {
                        relay.visit(&grant_name, site);
                    }
                    relay.site_hold_answered(tab, &request_id, verdict);
                });
                None
            }
        }
    }

    /// The person answered about a request the site hold keeps: it goes
    /// on, or fails (and the page's console says why).
    fn site_hold_answered(&self, tab: shared_protocol::TabId, request_id: &str, verdict: Verdict) {
        let link = self.link();
        {
            let mut registry = self.registry();
            let Some(target) = registry.by_tab_mut(tab) else { return };
            if !target.interception.site_hold_holds(request_id) {
                // The tab was announced again meanwhile (the extension's
                // link dropped and came back): its books are new, but the
                // request may still be paused in Chrome, under the same
                // id. It is answered there, best effort (Chrome let it go
                // if its debugger detached).
                let (method, params) = match &verdict {
                    Verdict::Allowed => ("Fetch.continueRequest", json!({"requestId": request_id})),
                    Verdict::Refused(_) => {
                        ("Fetch.failRequest", json!({"requestId": request_id, "errorReason": "Aborted"}))
                    }
                };
                if let Some(link) = &link {
                    let undo = Undo { child: None, method: method.into(), params: params.to_string() };
                    self.send_undo(link, tab, undo);
                }
                return;
            }
            match &verdict {
                Verdict::Allowed => {
                    if let Some(route) = self.site_hold_lets_go(link.as_deref(), target, request_id) {
                        self.route_paused(link.as_deref(), target, route);
                    }
                    return;
                }
                Verdict::Refused(_) => self.site_hold_fails(link.as_deref(), target, request_id),
            }
        }
        if let Verdict::Refused(why) = verdict {
            let relay = self.clone();
            tokio::spawn(async move {
                let expression = format!("console.warn({})", Value::String(why));
                let params = json!({"expression": expression});
                if let Err(e) = relay.send_session_command(tab, None, "Runtime.evaluate", Some(params)).await {
                    tracing::debug!(tab, "could not tell the page's console why: {e}");
                }
            });
        }
    }

    /// The site hold lets `request_id` go on: the route it takes next.
    fn site_hold_lets_go(&self, link: Option<&ExtensionLink>, target: &mut Target, request_id: &str) -> Option<Route> {
        let request = json!({"requestId": request_id});
        let raw = serde_json::value::RawValue::from_string(request.to_string()).ok();
        let outcome = target.interception.command(SITE_HOLD, None, "Fetch.continueRequest", raw.as_deref());
        if let super::ledger::Decision::Replace { method, params } = outcome.decision
            && let Some(link) = link
        {
            self.send_undo(link, target.tab_id, Undo { child: None, method: method.into(), params });
        }
        outcome.routes.into_iter().next()
    }

    /// The site hold fails `request_id` as `Aborted`: the books forget it,
    /// Chrome fails it.
    fn site_hold_fails(&self, link: Option<&ExtensionLink>, target: &mut Target, request_id: &str) {
        let params = json!({"requestId": request_id, "errorReason": "Aborted"}).to_string();
        let raw = serde_json::value::RawValue::from_string(params.clone()).ok();
        target.interception.command(SITE_HOLD, None, "Fetch.failRequest", raw.as_deref());
        if let Some(link) = link {
            self.send_undo(link, target.tab_id, Undo { child: None, method: "Fetch.failRequest".into(), params });
        }
    }

    /// A shared tab moved into the group of `grant` (`None`: the person's
    /// own): it leaves the clients that no longer see it (as a detached
    /// target), appears to those that now do (as a new one), and goes
    /// under (or out of) its new grant's site hold. The person took a tab
    /// a grant's client opened: it is theirs now, kept when that client
    /// leaves.
    pub(crate) fn on_tab_grant(&self, tab_id: shared_protocol::TabId, grant: Option<&str>) {
        let mut registry = self.registry();
        let Some(target) = registry.by_tab_mut(tab_id) else { return };
        if target.grant.as_deref() == grant {
            return;
        }
        let clients: Vec<Arc<ClientHandle>> = self.0.clients.iter().map(|c| c.value().clone()).collect();
        let saw: Vec<u64> = clients.iter().filter(|c| c.sees(target)).map(|c| c.id).collect();
        target.grant = grant.map(Arc::from);
        tracing::info!(tab = tab_id, grant, "a shared tab moved to another group");
        // The person put it there: where it is counts as visited.
        if let (Some(grant), Some(host)) = (grant, grants::host_of(&target.url)) {
            self.visit(grant, &host);
        }
        let lost: Vec<&Arc<ClientHandle>> = clients.iter().filter(|c| saw.contains(&c.id) && !c.sees(target)).collect();
        for client in &lost {
            self.hide_from(client, target);
        }
        target.owners.retain(|owner| !lost.iter().any(|c| c.id == *owner));
        let context_id = self.context_id().clone();
        let found: Vec<&Arc<ClientHandle>> =
            clients.iter().filter(|c| !saw.contains(&c.id) && c.sees(target)).collect();
        for client in found {
            if let Some(filter) = client.discover_filter() {
                for (kind, info) in [("tab", target.tab_info(&context_id)), ("page", target.page_info(&context_id))] {
                    if filter.matches(kind) {
                        client.send(cdp::event("Target.targetCreated", &json!({"targetInfo": info}).to_string(), None));
                    }
                }
            }
            client.auto_attach_root(target, &context_id);
        }
        self.fit_site_hold(target);
        self.holders_changed();
    }

    /// `target` is no longer `client`'s to see: its sessions there end, as
    /// when a target goes (`Target.detachedFromTarget`; a page-level
    /// endpoint is closed), and a discovering client hears it destroyed.
    fn hide_from(&self, client: &Arc<ClientHandle>, target: &mut Target) {
        let mut gone = Vec::new();
        target.subs.retain(|s| {
            let hit = s.client.id == client.id;
            if hit {
                gone.push(s.clone());
            }
            !hit
        });
        gone.sort_by_key(|s| s.kind == SubKind::Tab);
        for sub in gone {
            client.forget_session(&sub.session);
            if sub.bare {
                client.send(cdp::event("Inspector.detached", r#"{"reason":"target_closed"}"#, None));
                client.close(1000, "target closed");
                continue;
            }
            let id = if sub.kind == SubKind::Tab { &target.tab_target_id } else { &target.target_id };
            let params = json!({"sessionId": &*sub.session, "targetId": &**id}).to_string();
            client.send(cdp::event("Target.detachedFromTarget", &params, sub.parent.as_deref()));
        }
        // Its flat child sessions on the tab (frames, workers) go with it.
        client
            .state()
            .sessions
            .retain(|_, kind| !matches!(kind, SessionKind::Page(t) | SessionKind::Tab(t) if **t == *target.target_id));
        if let Some(filter) = client.discover_filter() {
            for (kind, id) in [("page", &target.target_id), ("tab", &target.tab_target_id)] {
                if filter.matches(kind) {
                    let params = json!({"targetId": &**id}).to_string();
                    client.send(cdp::event("Target.targetDestroyed", &params, None));
                }
            }
        }
        // What it set on the tab goes, as when it leaves (`forget_client`).
        let link = self.link();
        for step in target.forget_client(client.id) {
            if let Some(link) = &link {
                self.send_undo(link, target.tab_id, step);
            }
        }
        for route in target.interception.forget_client(client.id) {
            self.route_paused(link.as_deref(), target, route);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use grants::GrantName;

    fn grant(sites: &str) -> Grant {
        let mut grant: Grant = serde_json::from_value(json!({
            "name": "research", "color": "blue", "evaluate": true, "createdAtMs": 0, "salt": "s",
        }))
        .unwrap();
        grant.name = GrantName::parse("research").unwrap();
        if !sites.is_empty() {
            grant.sites = Sites::parse_list(sites).unwrap();
        }
        grant
    }

    #[test]
    fn a_grants_client_is_refused_what_would_take_it_outside_its_sites() {
        let g = grant("app.test, http://127.0.0.1:8765");
        let refused = |method: &str, params: Value| refusal(&g, method, Some(&params.to_string()), None, Some("PAGE"));
        let navigate = refused("Page.navigate", json!({"url": "https://mail.test/"})).unwrap();
        assert!(navigate.contains("grant 'research'") && navigate.contains("https://mail.test/"), "{navigate}");
        assert!(navigate.contains("app.test, http://127.0.0.1:8765"), "names its sites: {navigate}");
        assert_eq!(refused("Page.navigate", json!({"url": "https://app.test/inbox"})), None);
        assert_eq!(refused("Page.navigate", json!({"url": "data:text/html,hi"})), None);
        assert_eq!(
            refused("Page.navigate", json!({"url": "https://mail.test/", "frameId": "F"})),
            None,
            "a frame may go anywhere"
        );
        assert_eq!(refusal(&g, "Page.navigate", Some(r#"{"url":"https://mail.test/"}"#), Some("CHILD"), None), None);
        assert!(refused("Fetch.continueRequest", json!({"requestId": "1", "url": "https://mail.test/"})).is_some());
        assert_eq!(refused("Fetch.continueRequest", json!({"requestId": "1"})), None);
        assert!(refused("Network.clearBrowserCookies", json!({})).is_some());
        assert!(refused("Network.setCookie", json!({"name": "a", "value": "b", "domain": ".mail.test"})).is_some());
        assert_eq!(refused("Network.setCookie", json!({"name": "a", "value": "b", "url": "https://app.test/x"})), None);
        assert!(refused("Network.deleteCookies", json!({"name": "sid", "url": "https://mail.test/"})).is_some());
        assert!(refused("Network.deleteCookies", json!({"name": "sid"})).is_some(), "by name alone: everywhere");
        assert!(
            refused("Network.setCookies", json!({"cookies": [{"name": "a", "value": "b", "url": "https://app.test/"}, {"name": "c", "value": "d", "domain": "bank.test"}]}))
                .is_some()
        );
        assert!(
            refused(
                "DOMStorage.getDOMStorageItems",
                json!({"storageId": {"securityOrigin": "https://mail.test", "isLocalStorage": true}})
            )
            .is_some()
        );
        assert_eq!(
            refused(
                "DOMStorage.getDOMStorageItems",
                json!({"storageId": {"securityOrigin": "https://app.test", "isLocalStorage": true}})
            ),
            None
        );
        assert!(
            refused(
                "Storage.clearDataForStorageKey",
                json!({"storageKey": "https://mail.test/^0", "storageTypes": "all"})
            )
            .is_some()
        );
        assert_eq!(
            refused("Runtime.evaluate", json!({"expression": "location = 'https://mail.test/'"})),
            None,
            "the hold catches it"
        );
        // Every site: only file URLs and the person's cookie jar are out.
        let any = grant("");
        assert_eq!(refusal(&any, "Page.navigate", Some(r#"{"url":"https://mail.test/"}"#), None, None), None);
        assert!(refusal(&any, "Page.navigate", Some(r#"{"url":"file:///etc/passwd"}"#), None, None).is_some());
        assert!(refusal(&any, "Network.clearBrowserCookies", None, None, None).is_some());
    }

    fn asking(sites: &str, ask: &[AskKind]) -> Grant {
        let mut grant = grant(sites);
        grant.ask = ask.to_vec();
        grant
    }

    /// A paused document request of `target`'s own frame (`response`: its
    /// response, with these headers), as the site hold gets it.
    fn paused(target: &Target, method: &str, url: &str, response: Option<Value>) -> Delivery {
        let mut headers = json!({"Upgrade-Insecure-Requests": "1", "Accept": "text/html"});
        if url.contains("download") {
            headers = json!({"Referer": "http://app.test/"});
        }
        let mut event = json!({
            "requestId": "r1", "frameId": &*target.target_id, "resourceType": "Document",
            "request": {"url": url, "method": method, "headers": headers},
        });
        if let Some(headers) = response {
            event["responseStatusCode"] = json!(200);
            event["responseHeaders"] = headers;
        }
        Delivery {
            client: SITE_HOLD,
            child: None,
            request_id: "r1".into(),
            method: "Fetch.requestPaused",
            params: event.to_string(),
        }
    }

    #[test]
    fn the_site_hold_asks_before_a_form_a_new_site_and_a_download() {
        let mut target = crate::targets::tests::shared_tab();
        target.url = "https://app.test/cart".into();
        let never = |_: &str| false;
        let g = asking("app.test, shop.test, news.test", &[AskKind::Submit, AskKind::NewSite, AskKind::Download]);
        let asked = |hold: Hold| match hold {
            Hold::Ask { kind, .. } => Some(kind),
            _ => None,
        };
        let post = paused(&target, "POST", "https://app.test/checkout", None);
        assert_eq!(asked(hold_verdict(&target, &g, &post, never)), Some(AskKind::Submit));
        let Hold::Ask { what, visit, .. } = hold_verdict(&target, &g, &post, never) else { unreachable!() };
        assert_eq!(what, "research wants to submit a form to app.test (https://app.test/checkout)");
        assert_eq!(visit.as_deref(), Some("app.test"));
        // Another site: asked once; where the tab is, or has been, is not new.
        let shop = paused(&target, "GET", "https://shop.test/", None);
        assert_eq!(asked(hold_verdict(&target, &g, &shop, never)), Some(AskKind::NewSite));
        assert_eq!(
            hold_verdict(&target, &g, &shop, |s| s == "shop.test"),
            Hold::Pass { visit: Some("shop.test".into()) }
        );
        let home = paused(&target, "GET", "https://app.test/next", None);
        assert_eq!(hold_verdict(&target, &g, &home, never), Hold::Pass { visit: Some("app.test".into()) });
        // Outside the sites is refused, not asked.
        let out = paused(&target, "GET", "https://mail.test/", None);
        assert!(matches!(hold_verdict(&target, &g, &out, never), Hold::Refuse { .. }));
        // Responses: an attachment, a type no tab shows, a link's download.
        let shown = paused(
            &target,
            "GET",
            "https://app.test/page",
            Some(json!([{"name": "Content-Type", "value": "text/html"}])),
        );
        assert_eq!(hold_verdict(&target, &g, &shown, never), Hold::Pass { visit: None });
        let attached = paused(
            &target,
            "GET",
            "https://app.test/x?id=1",
            Some(json!([{"name": "content-disposition", "value": "attachment; filename=\"invoice.pdf\""}])),
        );
        let Hold::Ask { kind, what, .. } = hold_verdict(&target, &g, &attached, never) else { panic!("not asked") };
        assert_eq!((kind, what.as_str()), (AskKind::Download, "research wants to download invoice.pdf from app.test"));
        let zip = paused(
            &target,
            "GET",
            "https://app.test/files/all.zip",
            Some(json!([{"name": "Content-Type", "value": "application/zip"}])),
        );
        assert_eq!(asked(hold_verdict(&target, &g, &zip, never)), Some(AskKind::Download));
        let link = paused(
            &target,
            "GET",
            "https://app.test/download/notes.txt",
            Some(json!([{"name": "Content-Type", "value": "text/plain"}])),
        );
        let Hold::Ask { what, .. } = hold_verdict(&target, &g, &link, never) else {
            panic!("a link's download not asked")
        };
        assert!(what.contains("notes.txt"), "{what}");
        // A grant that asks nothing; a tab the person has: no question.
        let quiet = asking("", &[]);
        assert_eq!(hold_verdict(&target, &quiet, &post, never), Hold::Pass { visit: Some("app.test".into()) });
        target.handed_over = true;
        assert!(
            matches!(hold_verdict(&target, &g, &out, never), Hold::Refuse { .. }),
            "the sites hold for the person too"
        );
        assert_eq!(
            hold_verdict(&target, &g, &post, never),
            Hold::Pass { visit: Some("app.test".into()) },
            "the person's own form"
        );
    }

    #[test]
    fn a_clients_command_asks_at_the_start_of_input_a_file_or_a_new_site() {
        let g = asking("", &[AskKind::Input, AskKind::Upload, AskKind::NewSite]);
        let ask = |method: &str, params: Value| {
            command_question(&g, method, Some(&params.to_string()), None, Some("PAGE"), "https://app.test/", |s| {
                s == "seen.test"
            })
        };
        let press = ask("Input.dispatchMouseEvent", json!({"type": "mousePressed", "x": 1, "y": 1}));
        assert_eq!(press, Some((AskKind::Input, "app.test".into(), "research wants to click on app.test".into())));
        assert_eq!(ask("Input.dispatchMouseEvent", json!({"type": "mouseMoved"})), None);
        assert_eq!(ask("Input.dispatchMouseEvent", json!({"type": "mouseReleased"})), None);
        assert_eq!(ask("Input.dispatchKeyEvent", json!({"type": "keyUp"})), None);
        assert!(ask("Input.dispatchKeyEvent", json!({"type": "rawKeyDown"})).unwrap().2.contains("type on"));
        assert!(ask("Input.insertText", json!({"text": "hi"})).is_some());
        let file =
            ask("DOM.setFileInputFiles", json!({"files": ["/home/me/tax/return.pdf", "C:\\a\\b.png"], "nodeId": 3}));
        assert_eq!(file.unwrap().2, "research wants to give 2 files (return.pdf, b.png) to a file input on app.test");
        let new = ask("Page.navigate", json!({"url": "https://news.test/today"})).unwrap();
        assert_eq!((new.0, new.1.as_str()), (AskKind::NewSite, "news.test"));
        assert_eq!(ask("Page.navigate", json!({"url": "https://seen.test/"})), None, "visited");
        assert_eq!(ask("Page.navigate", json!({"url": "https://app.test/other"})), None, "where it is");
        assert_eq!(ask("Page.navigate", json!({"url": "https://news.test/", "frameId": "FRAME"})), None, "a frame");
        let quiet = asking("", &[]);
        assert_eq!(
            command_question(
                &quiet,
                "Input.insertText",
                Some(r#"{"text":"x"}"#),
                None,
                None,
                "https://app.test/",
                |_| false
            ),
            None
        );
    }

    #[test]
    fn a_grant_that_asks_rewrites_no_request_and_a_drop_of_files_is_an_upload() {
        let g = asking("", &[AskKind::Submit, AskKind::Download, AskKind::Upload]);
        let refused = |method: &str, params: Value| refusal(&g, method, Some(&params.to_string()), None, Some("PAGE"));
        for rewrite in [
            json!({"requestId": "1", "method": "POST", "postData": "eA=="}),
            json!({"requestId": "1", "url": "https://app.test/x"}),
        ] {
            assert!(refused("Fetch.continueRequest", rewrite.clone()).unwrap().contains("may not change"), "{rewrite}");
        }
        assert_eq!(refused("Fetch.continueRequest", json!({"requestId": "1"})), None, "a plain continue goes");
        assert!(refused("Fetch.fulfillRequest", json!({"requestId": "1", "responseCode": 200})).is_some());
        let quiet = asking("", &[]);
        assert_eq!(
            refusal(&quiet, "Fetch.fulfillRequest", Some(r#"{"requestId":"1","responseCode":200}"#), None, None),
            None
        );
        let drop = json!({"type": "drop", "x": 1, "y": 1, "data": {"items": [], "files": ["/home/me/.ssh/id_ed25519"], "dragOperationsMask": 1}});
        let (kind, _, what) = command_question(
            &g,
            "Input.dispatchDragEvent",
            Some(&drop.to_string()),
            None,
            None,
            "https://app.test/",
            |_| true,
        )
        .unwrap();
        assert_eq!((kind, what.as_str()), (AskKind::Upload, "research wants to drop id_ed25519 on app.test"));
    }

    #[test]
    fn a_handed_over_tab_refuses_what_acts_looks_or_runs_script() {
        for method in [
            "Input.insertText",
            "Runtime.evaluate",
            "Runtime.callFunctionOn",
            "Runtime.addBinding",
            "Page.navigate",
            "Page.captureScreenshot",
            "Page.addScriptToEvaluateOnNewDocument",
            "Page.handleJavaScriptDialog",
            "Page.close",
            "DOM.setOuterHTML",
            "DOM.getOuterHTML",
            "Accessibility.getFullAXTree",
            "DOM.setFileInputFiles",
            "Network.getRequestPostData",
            "LayerTree.makeSnapshot",
            "Page.screencastFrameAck",
            "Fetch.fulfillRequest",
        ] {
            assert!(refused_while_handed_over(method), "{method}");
        }
        for method in
            ["Page.getFrameTree", "Runtime.enable", "Network.enable", "Fetch.continueRequest", "Page.stopScreencast"]
        {
            assert!(!refused_while_handed_over(method), "{method}");
        }
        assert!(shown_while_handed_over("Page.frameNavigated") && shown_while_handed_over("Target.detachedFromTarget"));
        for method in [
            "Network.requestWillBeSent",
            "Page.screencastFrame",
            "Runtime.consoleAPICalled",
            "Runtime.bindingCalled",
            "DOM.attributeModified",
        ] {
            assert!(!shown_while_handed_over(method), "{method}");
        }
    }

    #[test]
    fn cookie_answers_keep_only_the_grants_sites() {
        let sites = Sites::parse_list("app.test").unwrap();
        let answer = json!({"cookies": [
            {"name": "a", "domain": "app.test", "secure": true},
            {"name": "b", "domain": ".test", "secure": false},
            {"name": "c", "domain": "mail.test", "secure": false},
            {"name": "d", "domain": ".bank.example", "secure": true},
        ]})
        .to_string();
        let kept: Value = serde_json::from_str(&only_its_cookies(&sites, &answer).unwrap()).unwrap();
        let names: Vec<&str> =
            kept["cookies"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(only_its_cookies(&Sites::any(), &answer), None, "every site: as it is");
        let mine = json!({"cookies": [{"name": "a", "domain": "app.test"}]}).to_string();
        assert_eq!(only_its_cookies(&sites, &mine), None, "nothing taken out: the bytes as Chrome sent them");
    }
}
