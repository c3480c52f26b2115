//! Request interception (`Fetch`) by several clients on one shared session.
//!
//! On Chrome's own port every session that enables `Fetch` puts an
//! interceptor of its own in the request's path: a request goes through
//! them one after the other, each continuing it (maybe changed) to the next,
//! until one fulfils or fails it or the last continues it to the network.
//! Through the extension all clients share the tab's one `chrome.debugger`
//! session, whose `Fetch.enable` is one set of patterns: the last client's
//! would replace the others', and every client would get every paused
//! request and race to answer it.
//!
//! So the relay keeps the interceptors itself, per session (the tab or a
//! child session):
//! - Chrome gets the union of every client's patterns, and
//!   `handleAuthRequests` if any client asked for it;
//! - a paused request goes to the first client (in the order they enabled
//!   `Fetch`) whose own patterns match it; a plain `Fetch.continueRequest`
//!   (or `continueWithAuth` with `Default`) hands it, with any changes made
//!   so far, to the next matching client, and only the last continue reaches
//!   Chrome, carrying every change;
//! - `fulfillRequest`, `failRequest` or any other answer ends the request's
//!   path there, as it does on Chrome's port;
//! - a client that disables `Fetch` or leaves hands on what it holds and
//!   takes its patterns along.
//!
//! Plain data, no I/O: the caller sends what it returns.

use std::collections::HashMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use crate::ledger::{Decision, Undo};

/// A paused request handed to one client: Chrome's event, as that client
/// is to see it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Delivery {
    pub client: u64,
    /// The child session (`None`: the tab itself).
    pub child: Option<Arc<str>>,
    pub request_id: String,
    pub method: &'static str,
    pub params: String,
}

/// Where a paused request goes next.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Route {
    /// To this client.
    Deliver(Delivery),
    /// To Chrome: no client (left) takes it, so the relay lets it go on.
    Chrome(Undo),
}

/// What to do with a client's `Fetch.*` command.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Outcome {
    /// For the command itself.
    pub decision: Decision,
    /// Paused requests handed to another client, or let go to Chrome.
    pub routes: Vec<Route>,
}

/// One of `Fetch.enable`'s `patterns`, as Chrome reads it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Pattern {
    #[serde(skip_serializing_if = "Option::is_none")]
    url_pattern: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    resource_type: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    request_stage: Option<String>,
}

impl Pattern {
    /// What `Fetch.enable` without `patterns` intercepts: every request.
    fn everything() -> Self {
        Self { url_pattern: Some("*".into()), resource_type: None, request_stage: None }
    }

    fn matches(&self, request: &Request, stage: Stage) -> bool {
        let stage_matches = match stage {
            Stage::Auth => true,
            Stage::Request => self.request_stage.as_deref().is_none_or(|s| s == "Request"),
            Stage::Response => self.request_stage.as_deref() == Some("Response"),
        };
        stage_matches
            && self.resource_type.as_deref().is_none_or(|t| t == request.resource_type)
            && wildcard_match(self.url_pattern.as_deref().unwrap_or("*"), &request.url)
    }
}

/// Chrome's `urlPattern`: `*` is any run of characters, `?` exactly one,
/// and a backslash takes the next character as itself.
fn wildcard_match(pattern: &str, text: &str) -> bool {
    #[derive(Clone, Copy, PartialEq)]
    enum Token {
        Any,
        One,
        Char(char),
    }
    let mut tokens = Vec::new();
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        tokens.push(match c {
            '*' => Token::Any,
            '?' => Token::One,
            '\\' => Token::Char(chars.next().unwrap_or('\\')),
            c => Token::Char(c),
        });
    }
    let text: Vec<char> = text.chars().collect();
    // The classic two-pointer match with one backtrack point per `*`.
    let (mut t, mut p) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match tokens.get(p) {
            Some(Token::Any) => {
                star = Some((p, t));
                p += 1;
            }
            Some(Token::One) => {
                p += 1;
                t += 1;
            }
            Some(Token::Char(c)) if *c == text[t] => {
                p += 1;
                t += 1;
            }
            _ => match star {
                Some((star_p, star_t)) => {
                    p = star_p + 1;
                    t = star_t + 1;
                    star = Some((star_p, star_t + 1));
                }
                None => return false,
            },
        }
    }
    tokens[p..].iter().all(|token| *token == Token::Any)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Request,
    Response,
    /// `Fetch.authRequired`.
    Auth,
}

/// What of a paused request the patterns look at.
#[derive(Debug, Default)]
struct Request {
    url: String,
    resource_type: String,
}

/// A client's `Fetch.enable` on one session.
#[derive(Debug)]
struct Interceptor {
    client: u64,
    patterns: Vec<Pattern>,
    auth: bool,
}

/// A request paused by Chrome and held by one client.
#[derive(Debug)]
struct Paused {
    stage: Stage,
    holder: u64,
    /// The clients it goes to after the holder, in order.
    next: Vec<u64>,
    method: &'static str,
    /// Chrome's event, with the changes made so far.
    event: Value,
    /// The changes of the continues handed on (`url`, `method`, `headers`,
    /// `postData`, `interceptResponse`), for the continue that reaches Chrome.
    changes: Map<String, Value>,
}

/// The interception of one session.
#[derive(Debug, Default)]
struct Books {
    /// In the order the clients enabled `Fetch`: the first gets a request first.
    interceptors: Vec<Interceptor>,
    paused: HashMap<String, Paused>,
    /// Requests continued with `interceptResponse`: who gets the response.
    response_asked: HashMap<String, u64>,
}

impl Books {
    /// The `Fetch.enable` Chrome needs for every interceptor together, or
    /// `None` when nobody intercepts.
    fn union(&self) -> Option<String> {
        if self.interceptors.is_empty() {
            return None;
        }
        let mut patterns: Vec<&Pattern> = Vec::new();
        for pattern in self.interceptors.iter().flat_map(|i| &i.patterns) {
            if !patterns.contains(&pattern) {
                patterns.push(pattern);
            }
        }
        let auth = self.interceptors.iter().any(|i| i.auth);
        Some(json!({"patterns": patterns, "handleAuthRequests": auth}).to_string())
    }

    /// The command that puts Chrome's interception in line with the books.
    fn in_effect(&self) -> (&'static str, String) {
        match self.union() {
            Some(params) => ("Fetch.enable", params),
            None => ("Fetch.disable", "{}".into()),
        }
    }

    /// Hands the request on from its holder: to the next client, or to
    /// Chrome with every change made on the way.
    fn pass_on(&mut self, child: &Option<Arc<str>>, request_id: &str) -> Option<Route> {
        let paused = self.paused.get_mut(request_id)?;
        if !paused.next.is_empty() {
            paused.holder = paused.next.remove(0);
            return Some(Route::Deliver(Delivery {
                client: paused.holder,
                child: child.clone(),
                request_id: request_id.to_string(),
                method: paused.method,
                params: paused.event.to_string(),
            }));
        }
        let (method, params) = self.go_on(request_id)?;
        Some(Route::Chrome(Undo { child: child.clone(), method: method.into(), params }))
    }

    /// The request's path ends: the continue that lets it go on in Chrome,
    /// carrying every change made on the way.
    fn go_on(&mut self, request_id: &str) -> Option<(&'static str, String)> {
        let paused = self.paused.remove(request_id)?;
        let (method, mut params) = match paused.stage {
            Stage::Auth => ("Fetch.continueWithAuth", json!({"authChallengeResponse": {"response": "Default"}})),
            Stage::Request | Stage::Response => ("Fetch.continueRequest", Value::Object(paused.changes)),
        };
        params["requestId"] = request_id.into();
        Some((method, params.to_string()))
    }

    /// `client` no longer intercepts here: it hands on what it holds, and
    /// is skipped by what others hold.
    fn release(&mut self, client: u64, child: &Option<Arc<str>>) -> Vec<Route> {
        self.interceptors.retain(|i| i.client != client);
        self.response_asked.retain(|_, asker| *asker != client);
        let mut held = Vec::new();
        for (request_id, paused) in &mut self.paused {
            paused.next.retain(|c| *c != client);
            if paused.holder == client {
                held.push(request_id.clone());
            }
        }
        held.sort();
        held.iter().filter_map(|request_id| self.pass_on(child, request_id)).collect()
    }

    /// `client`'s `Fetch.enable`: it intercepts with these patterns (in
    /// its place, when it already did), and Chrome gets them all together.
    fn enable(&mut self, client: u64, mut params: Map<String, Value>) -> Outcome {
        let patterns = match params.remove("patterns") {
            None | Some(Value::Null) => vec![Pattern::everything()],
            Some(patterns) => match serde_json::from_value(patterns) {
                Ok(patterns) => patterns,
                // Chrome says what is wrong with them.
                Err(_) => return Outcome::default(),
            },
        };
        let auth = params.get("handleAuthRequests").and_then(Value::as_bool).unwrap_or(false);
        match self.interceptors.iter_mut().find(|i| i.client == client) {
            // Enabling again changes the patterns, not the order.
            Some(interceptor) => {
                interceptor.patterns = patterns;
                interceptor.auth = auth;
            }
            None => self.interceptors.push(Interceptor { client, patterns, auth }),
        }
        let (method, params) = self.in_effect();
        Outcome { decision: Decision::Replace { method, params }, routes: Vec::new() }
    }

    /// `client`'s `Fetch.disable`: what it holds is handed on, and Chrome
    /// gets the others' patterns.
    fn disable(&mut self, client: u64, child: &Option<Arc<str>>) -> Outcome {
        if !self.interceptors.iter().any(|i| i.client == client) {
            // Nothing of this client's to disable; others' stays.
            let decision = if self.interceptors.is_empty() { Decision::Forward } else { Decision::AnswerLocally };
            return Outcome { decision, routes: Vec::new() };
        }
        let routes = self.release(client, child);
        let (method, params) = self.in_effect();
        Outcome { decision: Decision::Replace { method, params }, routes }
    }

    /// `client` answers a paused request it holds (`Fetch.continueRequest`,
    /// `fulfillRequest`, …): it goes on to the next interceptor with the
    /// changes so far, on to Chrome from the last, or ends here.
    fn answer_paused(
        &mut self,
        client: u64,
        child: &Option<Arc<str>>,
        method: &str,
        mut params: Map<String, Value>,
    ) -> Outcome {
        // No readable id: refused here, never sent on for Chrome to
        // read otherwise (fail closed).
        let Some(request_id) = params.get("requestId").and_then(Value::as_str).map(str::to_string) else {
            return invalid_interception_id();
        };
        // Only the request this client holds: one it was never
        // handed, or that another holds (the relay's site hold
        // waiting for the person, say), is unknown to its session,
        // as on Chrome's port; it never reaches Chrome.
        let Some(paused) = self.paused.get_mut(&request_id).filter(|p| p.holder == client) else {
            return invalid_interception_id();
        };
        // Reading a held response's body changes nothing of its path.
        if matches!(method, "Fetch.getResponseBody" | "Fetch.takeResponseBodyAsStream") {
            return Outcome { decision: Decision::Forward, routes: Vec::new() };
        }
        params.remove("requestId");
        let hands_on = match (method, paused.stage) {
            ("Fetch.continueRequest", Stage::Request) => true,
            ("Fetch.continueRequest" | "Fetch.continueResponse", Stage::Response) => params.is_empty(),
            ("Fetch.continueWithAuth", Stage::Auth) => {
                params.get("authChallengeResponse").and_then(|r| r.get("response")).and_then(Value::as_str)
                    == Some("Default")
            }
            _ => false,
        };
        if !hands_on {
            // This answer ends the request's path.
            self.paused.remove(&request_id);
            return Outcome::default();
        }
        if paused.stage == Stage::Request {
            apply_changes(paused, params);
        }
        let last = paused.next.is_empty();
        if last && paused.changes.get("interceptResponse") == Some(&Value::Bool(true)) {
            self.response_asked.insert(request_id.clone(), client);
        }
        if last {
            // The last continue, carrying every change on the way.
            return self.go_on(&request_id).map_or_else(Outcome::default, |(method, params)| Outcome {
                decision: Decision::Replace { method, params },
                routes: Vec::new(),
            });
        }
        let routes = self.pass_on(child, &request_id).into_iter().collect();
        Outcome { decision: Decision::AnswerLocally, routes }
    }
}

/// The interception books of a tab: its own session and its child sessions.
#[derive(Debug, Default)]
pub(crate) struct Interception {
    sessions: Vec<(Option<Arc<str>>, Books)>,
}

/// The relay's own interceptor in the books: the site hold of a grant's tab
/// (`crate::grants`), first in every request's path, so no client sees a
/// request the hold refuses. No client has this number.
pub(crate) const SITE_HOLD: u64 = u64::MAX;

/// What the site hold looks at: the tab's documents, before they leave.
const SITE_HOLD_PATTERN: &str = r#"{"urlPattern":"*","resourceType":"Document","requestStage":"Request"}"#;

/// And, when its grant asks before a download, their responses: a
/// download is known by its response.
const SITE_HOLD_RESPONSES: &str = r#"{"urlPattern":"*","resourceType":"Document","requestStage":"Response"}"#;

/// Chrome's events of a paused request, which go to one client at a time.
pub(crate) fn paused_event(method: &str) -> Option<&'static str> {
    match method {
        "Fetch.requestPaused" => Some("Fetch.requestPaused"),
        "Fetch.authRequired" => Some("Fetch.authRequired"),
        _ => None,
    }
}

/// The `Fetch` commands the books follow.
pub(crate) fn is_interception(method: &str) -> bool {
    matches!(
        method,
        "Fetch.enable"
            | "Fetch.disable"
            | "Fetch.continueRequest"
            | "Fetch.continueResponse"
            | "Fetch.continueWithAuth"
            | "Fetch.getResponseBody"
            | "Fetch.takeResponseBodyAsStream"
            | "Fetch.fulfillRequest"
            | "Fetch.failRequest"
    )
}

/// The refusal of an answer to a request the client does not hold, as
/// Chrome refuses an unknown one.
fn invalid_interception_id() -> Outcome {
    let decision =
        Decision::Refuse { code: crate::cdp::code::INVALID_PARAMS, message: "Invalid InterceptionId.".into() };
    Outcome { decision, routes: Vec::new() }
}

fn object(params: Option<&RawValue>) -> Map<String, Value> {
    params.and_then(|p| serde_json::from_str(p.get()).ok()).unwrap_or_default()
}

impl Interception {
    fn books(&mut self, child: Option<&str>) -> (Option<Arc<str>>, &mut Books) {
        let index = match self.sessions.iter().position(|(c, _)| c.as_deref() == child) {
            Some(index) => index,
            None => {
                self.sessions.push((child.map(Arc::from), Books::default()));
                self.sessions.len() - 1
            }
        };
        let (child, books) = &mut self.sessions[index];
        (child.clone(), books)
    }

    /// Keeps the books for `client`'s `Fetch.*` command on `child` (see
    /// [`is_interception`]), and says what to send.
    pub(crate) fn command(
        &mut self,
        client: u64,
        child: Option<&str>,
        method: &str,
        params: Option<&RawValue>,
    ) -> Outcome {
        let (child, books) = self.books(child);
        let params = object(params);
        match method {
            "Fetch.enable" => books.enable(client, params),
            "Fetch.disable" => books.disable(client, &child),
            _ => books.answer_paused(client, &child, method, params),
        }
    }

    /// Chrome paused a request (`Fetch.requestPaused`) or asks for
    /// credentials (`Fetch.authRequired`) on `child`: whose it is.
    pub(crate) fn paused(&mut self, child: Option<&str>, method: &'static str, params: &str) -> Route {
        let (child, books) = self.books(child);
        let event: Value = serde_json::from_str(params).unwrap_or_default();
        let request_id = event.get("requestId").and_then(Value::as_str).unwrap_or_default().to_string();
        let stage = if method == "Fetch.authRequired" {
            Stage::Auth
        } else if event.get("responseStatusCode").is_some() || event.get("responseErrorReason").is_some() {
            Stage::Response
        } else {
            Stage::Request
        };
        let request = Request {
            url: event.pointer("/request/url").and_then(Value::as_str).unwrap_or_default().to_string(),
            resource_type: event.get("resourceType").and_then(Value::as_str).unwrap_or_default().to_string(),
        };
        let mut takers: Vec<u64> = books
            .interceptors
            .iter()
            .filter(|i| (stage != Stage::Auth || i.auth) && i.patterns.iter().any(|p| p.matches(&request, stage)))
            .map(|i| i.client)
            .collect();
        if stage == Stage::Response
            && let Some(asker) = books.response_asked.remove(&request_id)
            && books.interceptors.iter().any(|i| i.client == asker)
        {
            takers.retain(|c| *c != asker);
            takers.insert(0, asker);
        }
        // The holder is set by `pass_on` from the head of `next`.
        books
            .paused
            .insert(request_id.clone(), Paused { stage, holder: 0, next: takers, method, event, changes: Map::new() });
        books.pass_on(&child, &request_id).expect("just inserted")
    }

    /// `client` could not take a request handed to it (it holds no session
    /// here any more): the next one gets it.
    pub(crate) fn skip(&mut self, delivery: &Delivery) -> Option<Route> {
        let (child, books) = self.books(delivery.child.as_deref());
        books.pass_on(&child, &delivery.request_id)
    }

    /// A child session is gone, with everything paused on it.
    pub(crate) fn forget_child(&mut self, child: &str) {
        self.sessions.retain(|(c, _)| c.as_deref() != Some(child));
    }

    /// Puts the site hold first in the tab's own path (not its child
    /// sessions': a frame may load from anywhere), looking at documents'
    /// responses too when `responses`: the `Fetch.enable` that puts Chrome
    /// in line, or `None` when it holds so already.
    pub(crate) fn hold_sites(&mut self, responses: bool) -> Option<Undo> {
        let (child, books) = self.books(None);
        let mut patterns: Vec<Pattern> =
            vec![serde_json::from_str(SITE_HOLD_PATTERN).expect("the hold's pattern reads")];
        if responses {
            patterns.push(serde_json::from_str(SITE_HOLD_RESPONSES).expect("the hold's pattern reads"));
        }
        match books.interceptors.iter_mut().find(|i| i.client == SITE_HOLD) {
            Some(hold) if hold.patterns == patterns => return None,
            Some(hold) => hold.patterns = patterns,
            None => books.interceptors.insert(0, Interceptor { client: SITE_HOLD, patterns, auth: false }),
        }
        let (method, params) = books.in_effect();
        Some(Undo { child, method: method.into(), params })
    }

    /// Whether the site hold holds the tab's paused request `request_id`
    /// (it waits for the person's answer).
    pub(crate) fn site_hold_holds(&self, request_id: &str) -> bool {
        self.sessions
            .iter()
            .find(|(child, _)| child.is_none())
            .and_then(|(_, books)| books.paused.get(request_id))
            .is_some_and(|paused| paused.holder == SITE_HOLD)
    }

    /// Takes the site hold away (the tab left its grant, its grant ended
    /// or asks no more): what it holds waits for the person, and fails, as
    /// no answer is a no; Chrome is put in line. Empty when it did not
    /// hold.
    pub(crate) fn release_sites(&mut self) -> Vec<Route> {
        let (child, books) = self.books(None);
        if !books.interceptors.iter().any(|i| i.client == SITE_HOLD) {
            return Vec::new();
        }
        let mut held: Vec<String> =
            books.paused.iter().filter(|(_, p)| p.holder == SITE_HOLD).map(|(id, _)| id.clone()).collect();
        held.sort();
        let mut routes = Vec::new();
        for request_id in held {
            books.paused.remove(&request_id);
            let params = json!({"requestId": request_id, "errorReason": "Aborted"}).to_string();
            routes.push(Route::Chrome(Undo { child: child.clone(), method: "Fetch.failRequest".into(), params }));
        }
        routes.extend(books.release(SITE_HOLD, &child));
        let (method, params) = books.in_effect();
        routes.push(Route::Chrome(Undo { child, method: method.into(), params }));
        routes
    }

    /// `client` left: what it holds goes on, and Chrome's interception is
    /// put in line with the clients that stay.
    pub(crate) fn forget_client(&mut self, client: u64) -> Vec<Route> {
        let mut routes = Vec::new();
        for (child, books) in &mut self.sessions {
            if !books.interceptors.iter().any(|i| i.client == client) {
                continue;
            }
            routes.extend(books.release(client, child));
            let (method, params) = books.in_effect();
            routes.push(Route::Chrome(Undo { child: child.clone(), method: method.into(), params }));
        }
        routes
    }
}

/// A continue handed on: its changes go into the event the next client
/// sees (URL, method and headers, as Chrome's next interceptor would see
/// them) and into the continue that finally reaches Chrome.
fn apply_changes(paused: &mut Paused, changes: Map<String, Value>) {
    for (key, value) in changes {
        match key.as_str() {
            "url" | "method" => paused.event["request"][key.as_str()] = value.clone(),
            "headers" => {
                // Continue's headers are a list of {name, value}; the
                // event's are an object.
                let headers: Map<String, Value> = value
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|h| Some((h.get("name")?.as_str()?.to_string(), h.get("value")?.clone())))
                    .collect();
                paused.event["request"]["headers"] = Value::Object(headers);
            }
            _ => {}
        }
        paused.changes.insert(key, value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(json: &str) -> Box<RawValue> {
        RawValue::from_string(json.to_string()).unwrap()
    }

    fn command(books: &mut Interception, client: u64, method: &str, params: &str) -> Outcome {
        let params = raw(params);
        books.command(client, None, method, Some(&params))
    }

    fn paused(url: &str, id: &str) -> String {
        json!({"requestId": id, "request": {"url": url, "method": "GET", "headers": {}}, "resourceType": "Document"})
            .to_string()
    }

    fn delivered_to(route: &Route) -> u64 {
        match route {
            Route::Deliver(delivery) => delivery.client,
            Route::Chrome(undo) => panic!("went to Chrome: {undo:?}"),
        }
    }

    const EVERYTHING: &str = r#"{"handleAuthRequests":true,"patterns":[{"urlPattern":"*"}]}"#;

    #[test]
    fn chrome_gets_every_clients_patterns_together() {
        let mut books = Interception::default();
        let outcome = command(&mut books, 1, "Fetch.enable", r#"{"patterns":[{"urlPattern":"*.png"}]}"#);
        assert_eq!(
            outcome.decision,
            Decision::Replace {
                method: "Fetch.enable",
                params: r#"{"handleAuthRequests":false,"patterns":[{"urlPattern":"*.png"}]}"#.into()
            }
        );
        let outcome = command(
            &mut books,
            2,
            "Fetch.enable",
            r#"{"patterns":[{"urlPattern":"*/api/*","requestStage":"Response"}],"handleAuthRequests":true}"#,
        );
        assert_eq!(
            outcome.decision,
            Decision::Replace {
                method: "Fetch.enable",
                params: r#"{"handleAuthRequests":true,"patterns":[{"urlPattern":"*.png"},{"requestStage":"Response","urlPattern":"*/api/*"}]}"#.into()
            }
        );
        // The first leaves: the second's patterns alone stay in force.
        let outcome = command(&mut books, 1, "Fetch.disable", "{}");
        assert_eq!(
            outcome.decision,
            Decision::Replace {
                method: "Fetch.enable",
                params:
                    r#"{"handleAuthRequests":true,"patterns":[{"requestStage":"Response","urlPattern":"*/api/*"}]}"#
                        .into()
            }
        );
        assert_eq!(
            command(&mut books, 2, "Fetch.disable", "{}").decision,
            Decision::Replace { method: "Fetch.disable", params: "{}".into() }
        );
        assert_eq!(command(&mut books, 3, "Fetch.disable", "{}").decision, Decision::Forward, "nobody intercepts");
    }

    #[test]
    fn a_continued_request_goes_to_the_next_client_then_to_chrome() {
        let mut books = Interception::default();
        command(&mut books, 1, "Fetch.enable", EVERYTHING);
        command(&mut books, 2, "Fetch.enable", EVERYTHING);
        command(&mut books, 3, "Fetch.enable", r#"{"patterns":[{"urlPattern":"*/other"}]}"#);
        let route = books.paused(None, "Fetch.requestPaused", &paused("http://a.test/page", "R1"));
        assert_eq!(delivered_to(&route), 1, "the first to enable gets it first; 3's pattern does not match");
        // Another client cannot answer what 1 holds.
        let outcome = command(&mut books, 2, "Fetch.fulfillRequest", r#"{"requestId":"R1","responseCode":200}"#);
        assert!(matches!(outcome.decision, Decision::Refuse { .. }), "{outcome:?}");
        // 1 continues with a header: 2 sees it, and the relay answers 1.
        let outcome = command(
            &mut books,
            1,
            "Fetch.continueRequest",
            r#"{"requestId":"R1","headers":[{"name":"x-by","value":"one"}]}"#,
        );
        assert_eq!(outcome.decision, Decision::AnswerLocally);
        let [Route::Deliver(delivery)] = &outcome.routes[..] else { panic!("{outcome:?}") };
        assert_eq!(delivery.client, 2);
        let event: Value = serde_json::from_str(&delivery.params).unwrap();
        assert_eq!(event["request"]["headers"], json!({"x-by": "one"}));
        // 2 continues too: Chrome gets one continue with 1's change.
        let outcome = command(&mut books, 2, "Fetch.continueRequest", r#"{"requestId":"R1"}"#);
        assert_eq!(
            outcome.decision,
            Decision::Replace {
                method: "Fetch.continueRequest",
                params: r#"{"headers":[{"name":"x-by","value":"one"}],"requestId":"R1"}"#.into()
            }
        );
        // Done with: a late answer is refused as Chrome refuses an id it
        // no longer holds, and never reaches it.
        assert!(matches!(
            command(&mut books, 2, "Fetch.continueRequest", r#"{"requestId":"R1"}"#).decision,
            Decision::Refuse { .. }
        ));
    }

    #[test]
    fn a_fulfilled_request_goes_no_further() {
        let mut books = Interception::default();
        command(&mut books, 1, "Fetch.enable", EVERYTHING);
        command(&mut books, 2, "Fetch.enable", EVERYTHING);
        books.paused(None, "Fetch.requestPaused", &paused("http://a.test/mine", "R1"));
        let outcome = command(&mut books, 1, "Fetch.fulfillRequest", r#"{"requestId":"R1","responseCode":200}"#);
        assert_eq!(outcome, Outcome::default(), "forwarded as it is, nothing handed on");
        assert!(books.forget_client(1).iter().all(|r| matches!(r, Route::Chrome(u) if u.method == "Fetch.enable")));
    }

    #[test]
    fn a_client_that_leaves_hands_on_what_it_holds() {
        let mut books = Interception::default();
        command(&mut books, 1, "Fetch.enable", EVERYTHING);
        command(&mut books, 2, "Fetch.enable", EVERYTHING);
        books.paused(None, "Fetch.requestPaused", &paused("http://a.test/1", "R1"));
        books.paused(None, "Fetch.requestPaused", &paused("http://a.test/2", "R2"));
        // 1 continues R2: 2 holds it. Then 2 dies.
        command(&mut books, 1, "Fetch.continueRequest", r#"{"requestId":"R2"}"#);
        let routes = books.forget_client(2);
        let Route::Chrome(continued) = &routes[0] else { panic!("{routes:?}") };
        assert_eq!(
            (continued.method.as_str(), continued.params.as_str()),
            ("Fetch.continueRequest", r#"{"requestId":"R2"}"#)
        );
        assert_eq!(
            routes[1],
            Route::Chrome(Undo {
                child: None,
                method: "Fetch.enable".into(),
                params: r#"{"handleAuthRequests":true,"patterns":[{"urlPattern":"*"}]}"#.into()
            })
        );
        // R1, still with 1, no longer goes to 2 after.
        let outcome = command(&mut books, 1, "Fetch.continueRequest", r#"{"requestId":"R1"}"#);
        assert_eq!(
            outcome.decision,
            Decision::Replace { method: "Fetch.continueRequest", params: r#"{"requestId":"R1"}"#.into() }
        );
        // The last one leaving turns interception off.
        let routes = books.forget_client(1);
        assert_eq!(routes, [Route::Chrome(Undo { child: None, method: "Fetch.disable".into(), params: "{}".into() })]);
        assert!(books.forget_client(1).is_empty());
    }

    #[test]
    fn auth_challenges_go_to_the_clients_that_handle_them() {
        let mut books = Interception::default();
        command(&mut books, 1, "Fetch.enable", r#"{"patterns":[{"urlPattern":"*"}]}"#);
        command(&mut books, 2, "Fetch.enable", EVERYTHING);
        command(&mut books, 3, "Fetch.enable", EVERYTHING);
        let challenge = json!({"requestId": "A1", "request": {"url": "http://a.test/secret"}, "resourceType": "Document", "authChallenge": {"origin": "http://a.test", "scheme": "basic", "realm": "r"}}).to_string();
        let route = books.paused(None, "Fetch.authRequired", &challenge);
        assert_eq!(delivered_to(&route), 2, "1 did not ask for auth challenges");
        let outcome = command(
            &mut books,
            2,
            "Fetch.continueWithAuth",
            r#"{"requestId":"A1","authChallengeResponse":{"response":"Default"}}"#,
        );
        assert_eq!(delivered_to(&outcome.routes[0]), 3, "Default hands it on");
        let outcome = command(
            &mut books,
            3,
            "Fetch.continueWithAuth",
            r#"{"requestId":"A1","authChallengeResponse":{"response":"ProvideCredentials","username":"u","password":"p"}}"#,
        );
        assert_eq!(outcome, Outcome::default(), "credentials end it: forwarded as they are");
        // Nobody left to ask: the relay lets Chrome do its default.
        books.forget_client(2);
        books.forget_client(3);
        let route = books.paused(None, "Fetch.authRequired", &challenge.replace("A1", "A2"));
        let Route::Chrome(undo) = route else { panic!() };
        assert_eq!(undo.params, r#"{"authChallengeResponse":{"response":"Default"},"requestId":"A2"}"#);
    }

    #[test]
    fn patterns_match_as_chromes_do() {
        assert!(wildcard_match("*", "http://a.test/"));
        assert!(wildcard_match("*.png", "http://a.test/x.png"));
        assert!(!wildcard_match("*.png", "http://a.test/x.png?v=1"));
        assert!(wildcard_match("http://?.test/*", "http://a.test/x"));
        assert!(!wildcard_match("http://?.test/*", "http://ab.test/x"));
        assert!(wildcard_match(r"*\*", "http://a.test/*"));
        assert!(!wildcard_match(r"*\*", "http://a.test/x"));
        assert!(wildcard_match("*a*b*c", "xxaxxbxxc"));
        assert!(!wildcard_match("*a*b*c", "xxaxxcxxb"));
        let request = Request { url: "http://a.test/x.js".into(), resource_type: "Script".into() };
        let script = Pattern { url_pattern: None, resource_type: Some("Script".into()), request_stage: None };
        assert!(script.matches(&request, Stage::Request));
        assert!(!script.matches(&request, Stage::Response), "request stage by default");
        let image = Pattern { resource_type: Some("Image".into()), ..script };
        assert!(!image.matches(&request, Stage::Request));
    }

    #[test]
    fn a_request_nobody_matches_goes_on_and_child_sessions_are_apart() {
        let mut books = Interception::default();
        let params = raw(r#"{"patterns":[{"urlPattern":"*.css"}]}"#);
        books.command(1, Some("CHILD"), "Fetch.enable", Some(&params));
        let route = books.paused(None, "Fetch.requestPaused", &paused("http://a.test/x.css", "R1"));
        assert!(matches!(route, Route::Chrome(undo) if undo.method == "Fetch.continueRequest" && undo.child.is_none()));
        let route = books.paused(Some("CHILD"), "Fetch.requestPaused", &paused("http://a.test/x.css", "R2"));
        let Route::Deliver(delivery) = route else { panic!() };
        assert_eq!(delivery.child.as_deref(), Some("CHILD"));
        books.forget_child("CHILD");
        assert!(books.forget_client(1).is_empty(), "the gone child is not undone");
    }

    #[test]
    fn a_request_is_answered_only_by_the_client_that_holds_it() {
        let mut books = Interception::default();
        assert!(matches!(command(&mut books, 1, "Fetch.enable", "{}").decision, Decision::Replace { .. }));
        let unseen = command(&mut books, 1, "Fetch.continueRequest", r#"{"requestId":"never-paused"}"#);
        assert!(matches!(unseen.decision, Decision::Refuse { .. }), "an id the relay never handed out: {unseen:?}");
        // Params the relay cannot read (a lone surrogate) are not Chrome's to read either.
        let unread = command(&mut books, 1, "Fetch.continueRequest", r#"{"requestId":"8","x":"\ud800"}"#);
        assert!(matches!(unread.decision, Decision::Refuse { .. }), "{unread:?}");
        let route = books.paused(None, "Fetch.requestPaused", &paused("https://a.test/", "7"));
        assert_eq!(delivered_to(&route), 1);
        // Held by the relay's site hold (waiting for the person): nobody else answers it.
        books.hold_sites(false);
        let route = books.paused(None, "Fetch.requestPaused", &paused("https://a.test/doc", "8"));
        assert_eq!(delivered_to(&route), SITE_HOLD);
        for method in ["Fetch.continueRequest", "Fetch.failRequest", "Fetch.getResponseBody"] {
            let stolen = command(&mut books, 1, method, r#"{"requestId":"8","errorReason":"Failed"}"#);
            assert!(matches!(stolen.decision, Decision::Refuse { .. }), "{method}: {stolen:?}");
        }
        assert!(books.site_hold_holds("8"), "still held");
        // Its own: its body read as is, then continued.
        let read = command(&mut books, 1, "Fetch.getResponseBody", r#"{"requestId":"7"}"#);
        assert_eq!(read.decision, Decision::Forward);
        let continued = command(&mut books, 1, "Fetch.continueRequest", r#"{"requestId":"7"}"#);
        assert!(matches!(continued.decision, Decision::Replace { .. }), "{continued:?}");
    }

    #[test]
    fn a_response_asked_for_goes_to_the_client_that_asked() {
        let mut books = Interception::default();
        command(&mut books, 1, "Fetch.enable", r#"{"patterns":[{"urlPattern":"*","requestStage":"Response"}]}"#);
        command(&mut books, 2, "Fetch.enable", r#"{"patterns":[{"urlPattern":"*"}]}"#);
        let route = books.paused(None, "Fetch.requestPaused", &paused("http://a.test/x", "R1"));
        assert_eq!(delivered_to(&route), 2);
        command(&mut books, 2, "Fetch.continueRequest", r#"{"requestId":"R1","interceptResponse":true}"#);
        let response = json!({"requestId": "R1", "request": {"url": "http://a.test/x"}, "resourceType": "Document", "responseStatusCode": 200}).to_string();
        let route = books.paused(None, "Fetch.requestPaused", &response);
        assert_eq!(delivered_to(&route), 2, "the client that asked for the response first");
        let outcome = command(&mut books, 2, "Fetch.continueRequest", r#"{"requestId":"R1"}"#);
        assert_eq!(delivered_to(&outcome.routes[0]), 1, "then the client whose pattern matches the response");
    }
}
