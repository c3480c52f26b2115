//! Who may use the dashboard (`/ui` on the control port), and the one
//! function that decides each of its requests ([`UiLogins::admit`]).
//!
//! - The way in is a login link from `browser-relay ui` (which asks the
//!   control API with its key): it carries a one-time code, good for
//!   [`CODE_TTL`], never the token or a key.
//! - Redeeming the code answers the page itself with a new session token
//!   in it, once: the page keeps it in its tab's `sessionStorage` (a
//!   reload keeps it; no other tab, origin or program has it) and sends it
//!   in [`SESSION_HEADER`] on every API request, reads and changes alike.
//!   No cookie: a cookie is sent to every port of 127.0.0.1, and Chrome
//!   hands the profile's cookies to any CDP client of the person's tabs
//!   (`Network.getAllCookies`), so whatever a cookie carries, a local
//!   program or a CDP key holder could replay. The page's shell (`/ui`,
//!   what a reload or a typed address fetches) carries no secret.
//! - Every request: a loopback `Host` (DNS rebinding); no `Origin` but the
//!   dashboard's own (`http://<Host>`); no `Sec-Fetch-Site` but
//!   `same-origin` (or `none`, a typed address, for the page itself). The
//!   login link alone may come from anywhere (`browser-relay ui` opens it
//!   from a local file): a code only comes from a holder of the control
//!   key, and guessing one (256 bits) is hopeless. A header is no proof of
//!   a page (curl sends none); the session token is.
//!
//! Each rule is in SECURITY.md with the test that tries to break it.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, StatusCode, header};
use subtle::ConstantTimeEq as _;

use super::guard::is_loopback_host;

/// How long a login link works.
pub(crate) const CODE_TTL: Duration = Duration::from_secs(120);
/// How long a dashboard session lasts.
pub(crate) const SESSION_TTL: Duration = Duration::from_secs(12 * 3600);
/// Login links not yet used, and sessions, kept at once (the oldest go).
const MAX_CODES: usize = 8;
const MAX_SESSIONS: usize = 8;
/// The header every request of the dashboard's page to its API carries
/// the session token in.
pub(crate) const SESSION_HEADER: &str = "x-browser-relay-session";

#[derive(Debug)]
struct UiSession {
    token: String,
    expires: Instant,
}

#[derive(Debug, Default)]
struct State {
    codes: Vec<(String, Instant)>,
    sessions: Vec<UiSession>,
}

/// The dashboard's login codes and sessions (in memory: a new serve asks
/// for a new login).
#[derive(Debug, Default)]
pub(crate) struct UiLogins {
    state: Mutex<State>,
}

/// What a request to the dashboard is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UiRoute {
    /// `/ui/login?code=…`: no session yet; its answer hands the page one.
    Login,
    /// `/ui/app.js`, `/ui/app.css`, `/favicon.ico`: the same for everyone, no secrets.
    Asset,
    /// `/ui`: the page's shell, the same for everyone, no secrets (the
    /// page finds its session in its tab, or says how to log in).
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
            Self::NoSession => format!(
                "no dashboard session in {SESSION_HEADER} (a cookie is not one): open the dashboard with `browser-relay ui`"
            ),
        }
    }
}

/// A request's session: its token (for logout).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Admitted {
    pub token: String,
}

impl UiLogins {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
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
        let session = UiSession { token: random_hex().ok()?, expires: now + SESSION_TTL };
        let admitted = Admitted { token: session.token.clone() };
        state.sessions.retain(|s| s.expires > now);
        if state.sessions.len() >= MAX_SESSIONS {
            state.sessions.remove(0);
        }
        state.sessions.push(session);
        Some(admitted)
    }

    /// Ends a session (logout).
    pub(crate) fn end(&self, token: &str) {
        let mut state = self.state();
        if let Some(index) = position_of(state.sessions.iter().map(|s| s.token.as_str()), token) {
            state.sessions.remove(index);
        }
    }

    fn session(&self, token: &str) -> Option<Admitted> {
        let mut state = self.state();
        let now = Instant::now();
        state.sessions.retain(|s| s.expires > now);
        let index = position_of(state.sessions.iter().map(|s| s.token.as_str()), token)?;
        Some(Admitted { token: state.sessions[index].token.clone() })
    }

    /// Decides one dashboard request: `Ok(None)` for the login, the page's
    /// shell and the assets, `Ok(Some(session))` for the API, which takes
    /// the session from [`SESSION_HEADER`] alone, for every method.
    pub(crate) fn admit(&self, path: &str, headers: &HeaderMap) -> Result<Option<Admitted>, UiRejection> {
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
        if route != UiRoute::Api {
            return Ok(None);
        }
        let presented = headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()).unwrap_or_default();
        if presented.is_empty() {
            return Err(UiRejection::NoSession);
        }
        self.session(presented).map(Some).ok_or(UiRejection::NoSession)
    }
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

    /// Every API route, reads and changes alike.
    const API: [&str; 11] = [
        "/ui/api/overview",
        "/ui/api/activity",
        "/ui/api/view",
        "/ui/api/asks",
        "/ui/api/answer",
        "/ui/api/handoff-done",
        "/ui/api/disconnect",
        "/ui/api/unshare",
        "/ui/api/stop",
        "/ui/api/revoke",
        "/ui/api/logout",
    ];

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        map.insert(header::HOST, HeaderValue::from_static(HOST));
        for (k, v) in pairs {
            map.append(axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(), HeaderValue::from_str(v).unwrap());
        }
        map
    }

    fn logged_in(logins: &UiLogins) -> Admitted {
        let code = logins.issue_code().unwrap();
        logins.redeem(&code).unwrap()
    }

    #[test]
    fn a_login_code_works_once() {
        let logins = UiLogins::default();
        let code = logins.issue_code().unwrap();
        assert_eq!(code.len(), 64);
        assert!(logins.redeem(&code).is_some());
        assert!(logins.redeem(&code).is_none(), "a second use of the link");
        assert!(logins.redeem("").is_none());
        assert!(logins.redeem(&"0".repeat(64)).is_none());
    }

    /// Issue 46, item 1: a cookie went to every port of 127.0.0.1 and to
    /// any CDP client of the person's Chrome, and opened the API alone.
    #[test]
    fn every_api_route_needs_the_session_header_and_a_cookie_is_no_session() {
        let logins = UiLogins::default();
        let session = logged_in(&logins);
        assert_eq!(session.token.len(), 64);
        let token = session.token.as_str();
        // What a program that lifted a cookie could send: the token as the
        // old session cookie was named (this port's and another's), and in
        // the old CSRF header.
        let cookie = format!("browser_relay_ui_7777={token}");
        let replayed: [&[(&str, &str)]; 5] = [
            &[],
            &[("cookie", &cookie)],
            &[("cookie", &cookie), ("x-browser-relay-csrf", token)],
            &[("cookie", &format!("{SESSION_HEADER}={token}"))],
            &[(SESSION_HEADER, "")],
        ];
        for path in API {
            for sent in replayed {
                assert_eq!(logins.admit(path, &headers(sent)), Err(UiRejection::NoSession), "{path} {sent:?}");
            }
            let wrong = "f".repeat(64);
            assert_eq!(logins.admit(path, &headers(&[(SESSION_HEADER, &wrong)])), Err(UiRejection::NoSession));
            let own = [(SESSION_HEADER, token), ("origin", "http://127.0.0.1:7777"), ("sec-fetch-site", "same-origin")];
            assert_eq!(logins.admit(path, &headers(&own)), Ok(Some(session.clone())), "{path}");
            assert_eq!(logins.admit(path, &headers(&[(SESSION_HEADER, token)])), Ok(Some(session.clone())));
        }
        assert_eq!(UiRejection::NoSession.status(), StatusCode::UNAUTHORIZED);
        assert!(UiRejection::NoSession.message().contains("browser-relay ui"));
        logins.end(token);
        let ended = headers(&[(SESSION_HEADER, token)]);
        assert_eq!(logins.admit("/ui/api/overview", &ended), Err(UiRejection::NoSession), "after logout");
    }

    #[test]
    fn the_page_shell_and_the_assets_need_no_session_and_carry_none() {
        let logins = UiLogins::default();
        for path in ["/ui", "/ui/", "/ui/app.js", "/ui/app.css", "/favicon.ico", "/ui/login"] {
            assert_eq!(logins.admit(path, &headers(&[])), Ok(None), "{path}");
        }
        // Logged in or not, the shell is the same (`Ok(None)`: no session for its handler).
        let session = logged_in(&logins);
        assert_eq!(logins.admit("/ui", &headers(&[(SESSION_HEADER, &session.token)])), Ok(None));
    }

    #[test]
    fn only_the_dashboards_own_origin_and_a_loopback_host_get_in() {
        let logins = UiLogins::default();
        let session = logged_in(&logins);
        let token = session.token.as_str();
        for origin in
            ["http://evil.example", "http://127.0.0.1:7778", "http://localhost:7777", "null", "chrome-extension://abc"]
        {
            let sent = [(SESSION_HEADER, token), ("origin", origin)];
            assert_eq!(
                logins.admit("/ui/api/stop", &headers(&sent)),
                Err(UiRejection::ForeignOrigin(origin.into())),
                "{origin}"
            );
            assert!(logins.admit("/ui/login", &headers(&[("origin", origin)])).is_err(), "{origin}");
            assert!(logins.admit("/ui", &headers(&[("origin", origin)])).is_err(), "{origin}");
        }
        let own = [(SESSION_HEADER, token), ("origin", "http://127.0.0.1:7777")];
        assert!(logins.admit("/ui/api/stop", &headers(&own)).is_ok());
        let mut rebound = headers(&[(SESSION_HEADER, token)]);
        rebound.insert(header::HOST, HeaderValue::from_static("evil.example:7777"));
        for path in ["/ui", "/ui/app.js", "/ui/api/overview"] {
            assert_eq!(logins.admit(path, &rebound), Err(UiRejection::NonLoopbackHost), "{path}");
        }
    }

    #[test]
    fn other_sites_cannot_send_the_user_through_the_dashboard() {
        let logins = UiLogins::default();
        let session = logged_in(&logins);
        let token = session.token.as_str();
        for site in ["cross-site", "same-site"] {
            for path in ["/ui", "/ui/api/overview", "/ui/app.js"] {
                let sent = [(SESSION_HEADER, token), ("sec-fetch-site", site)];
                assert_eq!(logins.admit(path, &headers(&sent)), Err(UiRejection::CrossSite(site.into())));
            }
        }
        // The login link is opened from a file (cross-site): its code is the proof.
        assert_eq!(logins.admit("/ui/login", &headers(&[("sec-fetch-site", "cross-site")])), Ok(None));
        // A typed address opens the page; the API is only the page's.
        assert_eq!(logins.admit("/ui", &headers(&[("sec-fetch-site", "none")])), Ok(None));
        let typed = [(SESSION_HEADER, token), ("sec-fetch-site", "none")];
        assert!(logins.admit("/ui/api/overview", &headers(&typed)).is_err());
        let own = [(SESSION_HEADER, token), ("sec-fetch-site", "same-origin")];
        assert!(logins.admit("/ui/api/overview", &headers(&own)).is_ok());
    }
}
