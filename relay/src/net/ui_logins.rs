//! Who may use the dashboard (`/ui` on the control port), and the one
//! function that decides each of its requests ([`UiLogins::admit`]).
//!
//! - The way in is a login link from `browser-relay ui` (which asks the
//!   control API with its key): it carries a one-time code, good for
//!   [`CODE_TTL`], never the token or a key.
//! - Redeeming the code sets a session cookie: `HttpOnly` (no script reads
//!   it), `SameSite=Strict` (no other site's page sends it), `Path=/ui`,
//!   named after the port (cookies do not tell ports apart).
//! - Every request: a loopback `Host` (DNS rebinding); no `Origin` but the
//!   dashboard's own (`http://<Host>`); no `Sec-Fetch-Site` but
//!   `same-origin` (or `none`, a typed address, for the page itself). The
//!   login link alone may come from anywhere (`browser-relay ui` opens it
//!   from a local file): a code only comes from a holder of the control
//!   key, and guessing one (256 bits) is hopeless.
//! - Every change (`POST`) also carries the session's CSRF token in
//!   [`CSRF_HEADER`], which only the dashboard's own page has.
//!
//! Each rule is in SECURITY.md with the test that tries to break it.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, Method, StatusCode, header};
use subtle::ConstantTimeEq as _;

use super::guard::is_loopback_host;

/// How long a login link works.
pub(crate) const CODE_TTL: Duration = Duration::from_secs(120);
/// How long a dashboard session lasts.
pub(crate) const SESSION_TTL: Duration = Duration::from_secs(12 * 3600);
/// Login links not yet used, and sessions, kept at once (the oldest go).
const MAX_CODES: usize = 8;
const MAX_SESSIONS: usize = 8;
/// The header every dashboard change carries its CSRF token in.
pub(crate) const CSRF_HEADER: &str = "x-browser-relay-csrf";

#[derive(Debug)]
struct UiSession {
    id: String,
    csrf: String,
    expires: Instant,
}

#[derive(Debug, Default)]
struct State {
    codes: Vec<(String, Instant)>,
    sessions: Vec<UiSession>,
}

/// The dashboard's login codes and sessions (in memory: a new serve asks
/// for a new login).
#[derive(Debug)]
pub(crate) struct UiLogins {
    port: u16,
    state: Mutex<State>,
}

/// What a request to the dashboard is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UiRoute {
    /// `/ui/login?code=…`: no session yet.
    Login,
    /// `/ui/app.js`, `/ui/app.css`, `/favicon.ico`: the same for everyone, no secrets.
    Asset,
    /// `/ui`: the page.
    Page,
    /// `/ui/api/*`: the dashboard's data and its stop buttons.
    Api,
}

impl UiRoute {
    pub(crate) fn of(path: &str) -> Self {
        match path {
            "/ui/login" => Self::Login,
            "/ui/app.js" | "/ui/app.css" | "/favicon.ico" => Self::Asset,
            _ if path.starts_with("/ui/api/") => Self::Api,
            _ => Self::Page,
        }
    }
}

/// Why a dashboard request was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum UiRejection {
    NonLoopbackHost,
    ForeignOrigin(String),
    CrossSite(String),
    NoSession,
    NoCsrf,
}

impl UiRejection {
    pub(crate) fn status(&self) -> StatusCode {
        match self {
            Self::NoSession => StatusCode::UNAUTHORIZED,
            _ => StatusCode::FORBIDDEN,
        }
    }

    pub(crate) fn message(&self) -> String {
        match self {
            Self::NonLoopbackHost => {
                "the dashboard answers only requests for a loopback Host (DNS-rebinding protection)".into()
            }
            Self::ForeignOrigin(origin) => {
                format!(
                    "requests from other origins are refused (Origin '{origin}'): only the dashboard's own page may call it"
                )
            }
            Self::CrossSite(site) => format!("requests from other sites are refused (Sec-Fetch-Site: {site})"),
            Self::NoSession => "not logged in: run `browser-relay ui` and open the link it prints".into(),
            Self::NoCsrf => format!("a dashboard change needs the page's CSRF token in {CSRF_HEADER}"),
        }
    }
}

/// A request's session: its id (for logout) and CSRF token (for the page).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Admitted {
    pub id: String,
    pub csrf: String,
}

impl UiLogins {
    pub(crate) fn new(port: u16) -> Self {
        Self { port, state: Mutex::default() }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The session cookie's name: one per control port.
    pub(crate) fn cookie_name(&self) -> String {
        format!("browser_relay_ui_{}", self.port)
    }

    /// A new one-time login code.
    pub(crate) fn issue_code(&self) -> Result<String, getrandom::Error> {
        let code = random_hex()?;
        let mut state = self.state();
        let now = Instant::now();
        state.codes.retain(|(_, expires)| *expires > now);
        if state.codes.len() >= MAX_CODES {
            state.codes.remove(0);
        }
        state.codes.push((code.clone(), now + CODE_TTL));
        Ok(code)
    }

    /// Redeems a login code (once): a new session, or `None`.
    pub(crate) fn redeem(&self, code: &str) -> Option<Admitted> {
        let mut state = self.state();
        let now = Instant::now();
        state.codes.retain(|(_, expires)| *expires > now);
        let index = position_of(state.codes.iter().map(|(c, _)| c.as_str()), code)?;
        state.codes.remove(index);
        let session = UiSession { id: random_hex().ok()?, csrf: random_hex().ok()?, expires: now + SESSION_TTL };
        let admitted = Admitted { id: session.id.clone(), csrf: session.csrf.clone() };
        state.sessions.retain(|s| s.expires > now);
        if state.sessions.len() >= MAX_SESSIONS {
            state.sessions.remove(0);
        }
        state.sessions.push(session);
        Some(admitted)
    }

    /// Ends a session (logout).
    pub(crate) fn end(&self, id: &str) {
        let mut state = self.state();
        if let Some(index) = position_of(state.sessions.iter().map(|s| s.id.as_str()), id) {
            state.sessions.remove(index);
        }
    }

    fn session(&self, id: &str) -> Option<Admitted> {
        let mut state = self.state();
        let now = Instant::now();
        state.sessions.retain(|s| s.expires > now);
        let index = position_of(state.sessions.iter().map(|s| s.id.as_str()), id)?;
        let session = &state.sessions[index];
        Some(Admitted { id: session.id.clone(), csrf: session.csrf.clone() })
    }

    /// Decides one dashboard request: `Ok(None)` for the login and the
    /// assets, `Ok(Some(session))` for the page and the API.
    pub(crate) fn admit(
        &self,
        method: &Method,
        path: &str,
        headers: &HeaderMap,
    ) -> Result<Option<Admitted>, UiRejection> {
        let host = headers.get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or_default();
        if !is_loopback_host(host) {
            return Err(UiRejection::NonLoopbackHost);
        }
        if let Some(origin) = headers.get(header::ORIGIN) {
            let origin = origin.to_str().unwrap_or("<non-ascii>");
            if origin != format!("http://{host}") {
                return Err(UiRejection::ForeignOrigin(origin.to_string()));
            }
        }
        let route = UiRoute::of(path);
        if let Some(site) = headers.get("sec-fetch-site").filter(|_| route != UiRoute::Login) {
            let site = site.to_str().unwrap_or("<non-ascii>");
            // `none`: the user opened it (typed, pasted, from a terminal);
            // only the login link and the page are opened that way.
            let typed = site == "none" && matches!(route, UiRoute::Login | UiRoute::Page);
            if site != "same-origin" && !typed {
                return Err(UiRejection::CrossSite(site.to_string()));
            }
        }
        if matches!(route, UiRoute::Login | UiRoute::Asset) {
            return Ok(None);
        }
        let session =
            cookie(headers, &self.cookie_name()).and_then(|id| self.session(&id)).ok_or(UiRejection::NoSession)?;
        if method != Method::GET {
            let presented = headers.get(CSRF_HEADER).and_then(|v| v.to_str().ok()).unwrap_or_default();
            if !bool::from(presented.as_bytes().ct_eq(session.csrf.as_bytes())) {
                return Err(UiRejection::NoCsrf);
            }
        }
        Ok(Some(session))
    }

    /// The `Set-Cookie` value of a new session.
    pub(crate) fn set_cookie(&self, session: &Admitted) -> String {
        format!(
            "{}={}; Path=/ui; HttpOnly; SameSite=Strict; Max-Age={}",
            self.cookie_name(),
            session.id,
            SESSION_TTL.as_secs()
        )
    }

    /// The `Set-Cookie` value that ends the session in the browser.
    pub(crate) fn clear_cookie(&self) -> String {
        format!("{}=; Path=/ui; HttpOnly; SameSite=Strict; Max-Age=0", self.cookie_name())
    }
}

/// The value of cookie `name` in the request's `Cookie` headers.
fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers.get_all(header::COOKIE).iter().filter_map(|v| v.to_str().ok()).flat_map(|v| v.split(';')).find_map(|pair| {
        let (key, value) = pair.trim().split_once('=')?;
        (key == name).then(|| value.to_string())
    })
}

/// Where `wanted` is among `items`, comparing each in constant time.
fn position_of<'a>(items: impl Iterator<Item = &'a str>, wanted: &str) -> Option<usize> {
    let mut found = None;
    for (index, item) in items.enumerate() {
        if bool::from(item.as_bytes().ct_eq(wanted.as_bytes())) {
            found = Some(index);
        }
    }
    found
}

fn random_hex() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    const HOST: &str = "127.0.0.1:7777";

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        map.insert(header::HOST, HeaderValue::from_static(HOST));
        for (k, v) in pairs {
            map.append(axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(), HeaderValue::from_str(v).unwrap());
        }
        map
    }

    fn logged_in(logins: &UiLogins) -> (Admitted, String) {
        let code = logins.issue_code().unwrap();
        let session = logins.redeem(&code).unwrap();
        let cookie = format!("{}={}", logins.cookie_name(), session.id);
        (session, cookie)
    }

    #[test]
    fn a_login_code_works_once() {
        let logins = UiLogins::new(7777);
        let code = logins.issue_code().unwrap();
        assert_eq!(code.len(), 64);
        assert!(logins.redeem(&code).is_some());
        assert!(logins.redeem(&code).is_none(), "a second use of the link");
        assert!(logins.redeem("").is_none());
        assert!(logins.redeem(&"0".repeat(64)).is_none());
    }

    #[test]
    fn the_page_and_the_api_need_the_session_cookie() {
        let logins = UiLogins::new(7777);
        let (session, cookie) = logged_in(&logins);
        for path in ["/ui", "/ui/api/overview"] {
            assert_eq!(logins.admit(&Method::GET, path, &headers(&[])), Err(UiRejection::NoSession), "{path}");
            let wrong = format!("{}={}", logins.cookie_name(), "f".repeat(64));
            assert_eq!(logins.admit(&Method::GET, path, &headers(&[("cookie", &wrong)])), Err(UiRejection::NoSession));
            // Another serve's cookie (another port) is not this one's.
            let other = format!("browser_relay_ui_7778={}", session.id);
            assert_eq!(logins.admit(&Method::GET, path, &headers(&[("cookie", &other)])), Err(UiRejection::NoSession));
            let admitted = logins.admit(&Method::GET, path, &headers(&[("cookie", &format!("a=b; {cookie}"))]));
            assert_eq!(admitted, Ok(Some(session.clone())), "{path}");
        }
        logins.end(&session.id);
        assert_eq!(logins.admit(&Method::GET, "/ui", &headers(&[("cookie", &cookie)])), Err(UiRejection::NoSession));
    }

    #[test]
    fn a_change_needs_the_csrf_token_even_with_the_cookie() {
        let logins = UiLogins::new(7777);
        let (session, cookie) = logged_in(&logins);
        // A stop button, and the person's answer to a grant's question or Done.
        for path in ["/ui/api/disconnect", "/ui/api/answer", "/ui/api/handoff-done"] {
            let cookie_only = headers(&[("cookie", &cookie)]);
            assert_eq!(logins.admit(&Method::POST, path, &cookie_only), Err(UiRejection::NoCsrf), "{path}");
            let wrong = [("cookie", cookie.as_str()), (CSRF_HEADER, session.id.as_str())];
            assert_eq!(logins.admit(&Method::POST, path, &headers(&wrong)), Err(UiRejection::NoCsrf), "{path}");
            let right = [("cookie", cookie.as_str()), (CSRF_HEADER, session.csrf.as_str())];
            assert!(logins.admit(&Method::POST, path, &headers(&right)).is_ok(), "{path}");
        }
    }

    #[test]
    fn only_the_dashboards_own_origin_and_a_loopback_host_get_in() {
        let logins = UiLogins::new(7777);
        let (session, cookie) = logged_in(&logins);
        let csrf = session.csrf.as_str();
        for origin in
            ["http://evil.example", "http://127.0.0.1:7778", "http://localhost:7777", "null", "chrome-extension://abc"]
        {
            let sent = [("cookie", cookie.as_str()), (CSRF_HEADER, csrf), ("origin", origin)];
            assert_eq!(
                logins.admit(&Method::POST, "/ui/api/stop", &headers(&sent)),
                Err(UiRejection::ForeignOrigin(origin.into())),
                "{origin}"
            );
            assert!(logins.admit(&Method::GET, "/ui/login", &headers(&[("origin", origin)])).is_err(), "{origin}");
        }
        let own = [("cookie", cookie.as_str()), (CSRF_HEADER, csrf), ("origin", "http://127.0.0.1:7777")];
        assert!(logins.admit(&Method::POST, "/ui/api/stop", &headers(&own)).is_ok());
        let mut rebound = headers(&[("cookie", cookie.as_str())]);
        rebound.insert(header::HOST, HeaderValue::from_static("evil.example:7777"));
        assert_eq!(logins.admit(&Method::GET, "/ui", &rebound), Err(UiRejection::NonLoopbackHost));
        assert_eq!(logins.admit(&Method::GET, "/ui/app.js", &rebound), Err(UiRejection::NonLoopbackHost));
    }

    #[test]
    fn other_sites_cannot_send_the_user_through_the_dashboard() {
        let logins = UiLogins::new(7777);
        let (_, cookie) = logged_in(&logins);
        for site in ["cross-site", "same-site"] {
            for path in ["/ui", "/ui/api/overview", "/ui/app.js"] {
                let sent = [("cookie", cookie.as_str()), ("sec-fetch-site", site)];
                assert_eq!(logins.admit(&Method::GET, path, &headers(&sent)), Err(UiRejection::CrossSite(site.into())));
            }
        }
        // The login link is opened from a file (cross-site): its code is the proof.
        assert_eq!(logins.admit(&Method::GET, "/ui/login", &headers(&[("sec-fetch-site", "cross-site")])), Ok(None));
        // A typed address opens the page; the API is only the page's.
        let typed = [("cookie", cookie.as_str()), ("sec-fetch-site", "none")];
        assert!(logins.admit(&Method::GET, "/ui", &headers(&typed)).is_ok());
        assert!(logins.admit(&Method::GET, "/ui/api/overview", &headers(&typed)).is_err());
        let own = [("cookie", cookie.as_str()), ("sec-fetch-site", "same-origin")];
        assert!(logins.admit(&Method::GET, "/ui/api/overview", &headers(&own)).is_ok());
    }

    #[test]
    fn the_cookie_is_http_only_strict_and_scoped_to_the_dashboard() {
        let logins = UiLogins::new(7777);
        let (session, _) = logged_in(&logins);
        let cookie = logins.set_cookie(&session);
        for part in ["browser_relay_ui_7777=", "HttpOnly", "SameSite=Strict", "Path=/ui"] {
            assert!(cookie.contains(part), "{cookie} lacks {part}");
        }
    }
}
