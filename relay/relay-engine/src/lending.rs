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

use grants::{Grant, Sites, UrlVerdict};
use serde_json::{Value, json};
use shared_protocol::{GrantGroup, RelayMessage, encode};

use super::client::{ClientHandle, SessionKind};
use super::interception::{Delivery, Route, SITE_HOLD};
use super::ledger::Undo;
use super::targets::{SubKind, Target};
use super::{Relay, cdp};

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
        // A request's URL changed on its way: the hold saw the old one.
        "Fetch.continueRequest" | "Network.continueInterceptedRequest" => {
            let url = str_at("/url")?;
            (!sites.is_any() && !sites.allows_url(url)).then(|| outside(grant, url))
        }
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
    /// On to the next interceptor, or the network.
    Pass,
    /// Failed as `Aborted`: a top-level document outside the sites.
    Refuse { url: String },
}

/// The site hold's verdict on a paused request of `target` (a grant's tab
/// whose grant has `sites`).
pub(crate) fn hold_verdict(target: &Target, sites: &Sites, delivery: &Delivery) -> Hold {
    let event: Value = serde_json::from_str(&delivery.params).unwrap_or_default();
    let document = event.get("resourceType").and_then(Value::as_str) == Some("Document");
    // The page's own frame has the target's id; a frame in it another.
    let top = event.get("frameId").and_then(Value::as_str) == Some(&*target.target_id);
    let url = event.pointer("/request/url").and_then(Value::as_str).unwrap_or_default();
    match document && top && delivery.child.is_none() && !sites.allows_url(url) {
        true => Hold::Refuse { url: url.to_string() },
        false => Hold::Pass,
    }
}

impl Relay {
    /// The grants the relay honours now (the binary keeps them from
    /// `grants.json`), sent to the extension (protocol 6) so that it keeps
    /// their tab groups. A client of a grant no longer among them is
    /// closed ([`Self::end_grant`] says why when it knows).
    pub fn set_grants(&self, grants: Vec<Arc<Grant>>) {
        let names: Vec<String> = grants.iter().map(|g| g.name.to_string()).collect();
        *self.0.grants.write().unwrap_or_else(|p| p.into_inner()) = grants;
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
    pub(crate) fn send_grants(&self, link: &super::extension::ExtensionLink) {
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

    /// The sites of `target`'s grant, when it has a list (a hold is needed).
    pub(crate) fn held_sites(&self, target: &Target) -> Option<Arc<Grant>> {
        let grant = self.grant_named(target.grant.as_deref()?)?;
        (!grant.sites.is_any()).then_some(grant)
    }

    /// Puts `target` under its grant's site hold, or takes it away, as its
    /// grant says (called under the registry lock, when a tab is announced
    /// or moves between groups).
    pub(crate) fn fit_site_hold(&self, target: &mut Target) {
        let link = self.link();
        match self.held_sites(target) {
            Some(_) => {
                if let (Some(enable), Some(link)) = (target.interception.hold_sites(), &link) {
                    self.send_undo(link, target.tab_id, enable);
                }
            }
            None => {
                for route in target.interception.release_sites() {
                    self.route_paused(link.as_deref(), target, route);
                }
            }
        }
    }

    /// The site hold decides on a request delivered to it: the route it
    /// goes on by, or `None` when it ends here (refused, or handed to
    /// Chrome).
    pub(crate) fn site_hold_decides(
        &self,
        link: Option<&super::extension::ExtensionLink>,
        target: &mut Target,
        delivery: &Delivery,
    ) -> Option<Route> {
        let verdict = match self.held_sites(target) {
            Some(grant) => (hold_verdict(target, &grant.sites, delivery), Some(grant)),
            None => (Hold::Pass, None),
        };
        let request = json!({"requestId": delivery.request_id});
        match verdict {
            (Hold::Refuse { url }, Some(grant)) => {
                let params = json!({"requestId": delivery.request_id, "errorReason": "Aborted"}).to_string();
                let raw = serde_json::value::RawValue::from_string(params.clone()).ok();
                // The books forget it; Chrome fails it.
                target.interception.command(SITE_HOLD, None, "Fetch.failRequest", raw.as_deref());
                if let Some(link) = link {
                    self.send_undo(
                        link,
                        target.tab_id,
                        Undo { child: None, method: "Fetch.failRequest".into(), params },
                    );
                }
                tracing::info!(tab = target.tab_id, grant = %grant.name, "refused a navigation outside the grant's sites");
                self.note_refused_navigation(target, &grant, &url);
                None
            }
            _ => {
                let raw = serde_json::value::RawValue::from_string(request.to_string()).ok();
                let outcome = target.interception.command(SITE_HOLD, None, "Fetch.continueRequest", raw.as_deref());
                if let super::ledger::Decision::Replace { method, params } = outcome.decision
                    && let Some(link) = link
                {
                    self.send_undo(link, target.tab_id, Undo { child: None, method: method.into(), params });
                }
                outcome.routes.into_iter().next()
            }
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
