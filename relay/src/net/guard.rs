//! Who may talk to the relay. One pure function, [`Guard::admit`], decides
//! every HTTP request and every WebSocket upgrade; the axum middleware in
//! [`guard_layer`] only feeds it. Each rule is listed in SECURITY.md with the
//! test that tries to break it.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use state_dir::Token;

/// The extension id pinned by the `"key"` in the extension's manifest.
pub const DEFAULT_EXTENSION_ID: &str = "jmiiinhebnhaoabpngnocjfmolckbbea";

#[derive(Debug, Clone)]
pub struct Guard {
    /// The install's secret; `None` only with `--no-auth`.
    token: Option<Token>,
    /// The key of this door, derived from the secret (`crate::keys`): the
    /// CDP key on the relay's routes, the control key on the control API.
    door_key: Option<Token>,
    /// Extension ids whose `chrome-extension://<id>` origin may open `/extension`.
    extension_ids: Arc<[String]>,
    /// The control API has no extension route and one public route
    /// (`POST /session`): every other path needs the token (or a session
    /// secret) and no `Origin` is welcome.
    control: bool,
    /// The control API's sessions, whose secrets stand for the token.
    sessions: Option<Arc<super::sessions::Sessions>>,
    /// The grants whose keys open this door too, each to its own share.
    lent: Option<Arc<crate::lent::Lent>>,
}

/// What the guard found out about a request it let in.
#[derive(Debug, Clone, Default)]
pub struct Admitted {
    /// The control session it was made in, when its bearer is a session's
    /// secret (for the signature of its answer).
    pub session: Option<super::sessions::SessionNonces>,
    /// Whose key it presented: the person's, or a grant's.
    pub access: grants::Access,
}

/// Which rules apply to a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteClass {
    /// `/`, `/extension/status` and `/json/protocol` (also a profile's):
    /// health checks and Chrome's protocol description, no token, no
    /// secrets (Chrome serves the protocol to anyone who asks).
    Public,
    /// `/json*`, `/cdp`, `/devtools/*`: CDP clients; token required.
    Client,
    /// `/extension`: only the pinned extension (its `Origin`). No token on
    /// the upgrade: the pairing is proved inside the socket, both ways
    /// (`shared_protocol::auth`), so it never travels.
    Extension,
}

impl RouteClass {
    pub fn of(path: &str) -> Self {
        let path = path.strip_suffix('/').filter(|p| !p.is_empty()).unwrap_or(path);
        match path {
            "/extension" => Self::Extension,
            "/" | "/extension/status" | "/json/protocol" => Self::Public,
            _ if is_profile_protocol(path) => Self::Public,
            _ => Self::Client,
        }
    }
}

/// `/profiles/<name>/json/protocol`.
fn is_profile_protocol(path: &str) -> bool {
    path.strip_prefix("/profiles/")
        .and_then(|rest| rest.strip_suffix("/json/protocol"))
        .is_some_and(|name| !name.is_empty() && !name.contains('/'))
}

/// Why a request was refused. The message tells a legitimate user what to do
/// and never echoes a presented token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejection {
    MissingHost,
    NonLoopbackHost(String),
    WebOrigin(String),
    ExtensionOrigin(Option<String>),
    MissingToken,
    WrongToken,
    /// A grant's key, after the grant expired.
    GrantExpired(String),
    /// A grant's key on a route that is the person's alone.
    PersonOnly(String),
}

impl Rejection {
    pub fn status(&self) -> StatusCode {
        match self {
            Self::MissingHost => StatusCode::BAD_REQUEST,
            Self::NonLoopbackHost(_) | Self::WebOrigin(_) | Self::ExtensionOrigin(_) => StatusCode::FORBIDDEN,
            Self::MissingToken | Self::WrongToken | Self::GrantExpired(_) => StatusCode::UNAUTHORIZED,
            Self::PersonOnly(_) => StatusCode::FORBIDDEN,
        }
    }

    pub fn message(&self) -> String {
        match self {
            Self::MissingHost => "missing Host header".into(),
            Self::NonLoopbackHost(host) => format!(
                "Host '{host}' is not a loopback name: Browser Relay only answers requests for 127.0.0.1, localhost or [::1] (DNS-rebinding protection)"
            ),
            Self::WebOrigin(origin) => format!(
                "requests from web pages are refused (Origin '{origin}'): Browser Relay is for local CDP clients and its own extension"
            ),
            Self::ExtensionOrigin(None) => "/extension is only for the Browser Relay extension (no Origin header)".into(),
            Self::ExtensionOrigin(Some(origin)) => format!(
                "/extension is only for the Browser Relay extension; Origin '{origin}' is not on the allow-list (see --extension-id)"
            ),
            Self::MissingToken => "missing token: pass ?token=…, 'Authorization: Bearer …' or use the URL printed by `browser-relay cdp-url`".into(),
            Self::WrongToken => "wrong key: CDP clients use the URL `browser-relay cdp-url` prints, the control API takes `browser-relay token --control` (the install's secret opens neither door; a grant's key opens nothing once it is revoked: `browser-relay grant list`)".into(),
            Self::GrantExpired(name) => format!(
                "the grant '{name}' has expired: its keys open nothing any more (the person can give a new one: `browser-relay grant add`)"
            ),
            Self::PersonOnly(name) => format!(
                "the grant '{name}' reaches the person's shared tabs only: this route is the person's (a managed profile, the grants, the answers to questions)"
            ),
        }
    }
}

impl IntoResponse for Rejection {
    fn into_response(self) -> Response {
        (self.status(), [(header::CONTENT_TYPE, "text/plain; charset=utf-8")], self.message()).into_response()
    }
}

impl Guard {
    pub fn new(token: Option<Token>, extension_ids: Vec<String>) -> Self {
        let door_key = token.as_ref().map(crate::keys::cdp_key);
        Self { token, door_key, extension_ids: extension_ids.into(), control: false, sessions: None, lent: None }
    }

    /// The same guard, letting the grants' keys in too (each to its share).
    pub fn with_grants(mut self, lent: Arc<crate::lent::Lent>) -> Self {
        self.lent = Some(lent);
        self
    }

    /// The guard of the control API: Host and the token (or a session's
    /// secret) on every route but `POST /session`, and no `Origin` accepted
    /// (not even the extension's).
    pub fn control(token: Option<Token>, sessions: Arc<super::sessions::Sessions>) -> Self {
        let door_key = token.as_ref().map(crate::keys::control_key);
        Self { token, door_key, extension_ids: Arc::from([]), control: true, sessions: Some(sessions), lent: None }
    }

    pub fn sessions(&self) -> Option<&Arc<super::sessions::Sessions>> {
        self.sessions.as_ref()
    }

    #[cfg(feature = "testing")]
    pub fn token(&self) -> Option<&Token> {
        self.token.as_ref()
    }

    /// [`Self::admit`]'s verdict alone (for tests).
    #[cfg(any(test, feature = "testing"))]
    pub fn check(&self, path: &str, query: Option<&str>, headers: &HeaderMap) -> Result<(), Rejection> {
        self.admit(path, query, headers).map(|_| ())
    }

    /// Decides one request (`query` is its raw query string, if any), and
    /// who is let in: the control session the request was made in (for the
    /// signature of its answer) and whose key it presented. One lookup
    /// decides all.
    pub fn admit(&self, path: &str, query: Option<&str>, headers: &HeaderMap) -> Result<Admitted, Rejection> {
        let host = headers.get(header::HOST).ok_or(Rejection::MissingHost)?;
        let host = host.to_str().unwrap_or("<non-ascii>");
        if !is_loopback_host(host) {
            return Err(Rejection::NonLoopbackHost(host.to_string()));
        }
        let class = match self.control {
            // Opening a session proves the server; it gives nothing to a
            // caller without the token (sessions.rs).
            true if path == "/session" => RouteClass::Public,
            true => RouteClass::Client,
            false => RouteClass::of(path),
        };
        let origin = headers.get(header::ORIGIN).map(|o| o.to_str().unwrap_or("<non-ascii>").to_string());
        match (class, origin) {
            (RouteClass::Extension, Some(origin)) if self.is_allowed_extension(&origin) => {}
            (RouteClass::Extension, origin) => return Err(Rejection::ExtensionOrigin(origin)),
            // Our own extension may read the public status routes (options page).
            (_, Some(origin)) if self.is_allowed_extension(&origin) && class == RouteClass::Public => {}
            // Any other Origin means a web page (or an unknown extension, or a
            // sandboxed `null` document) is making the request: refuse, on
            // plain HTTP routes (CSRF) and on upgrades (cross-site WebSocket
            // hijacking) alike.
            (_, Some(origin)) => return Err(Rejection::WebOrigin(origin)),
            (_, None) => {}
        }
        if matches!(class, RouteClass::Public | RouteClass::Extension) {
            return Ok(Admitted::default());
        }
        if self.token.is_none() {
            return Ok(Admitted::default());
        }
        let presented = presented_token(query, headers).ok_or(Rejection::MissingToken)?;
        // The door's own key; never the install's secret (keys.rs): one
        // that leaks from a door's traffic opens that door only.
        if self.door_key.as_ref().is_some_and(|key| key.matches(&presented)) {
            return Ok(Admitted::default());
        }
        let door = if self.control { grants::Door::Control } else { grants::Door::Cdp };
        if let Some(lent) = &self.lent {
            if let Some(grant) = lent.find(&presented, door) {
                return Ok(Admitted { session: None, access: grants::Access::Grant(grant) });
            }
            // An expired grant's key says so (a revoked one's is unknown).
            let expired = lent
                .all()
                .into_iter()
                .find(|g| g.expired() && lent.key_of(g, door).is_some_and(|key| key.matches(&presented)));
            if let Some(grant) = expired {
                return Err(Rejection::GrantExpired(grant.name.to_string()));
            }
        }
        match self.sessions.as_ref().and_then(|s| s.session(&presented)) {
            // A grant's session lives as long as its grant.
            Some((session, grants::Access::Grant(grant))) => match self.lent.as_ref().map(|lent| lent.now(&grant)) {
                Some(Ok(_)) => Ok(Admitted { session: Some(session), access: grants::Access::Grant(grant) }),
                _ if grant.expired() => Err(Rejection::GrantExpired(grant.name.to_string())),
                _ => Err(Rejection::WrongToken),
            },
            Some((session, access)) => Ok(Admitted { session: Some(session), access }),
            None => Err(Rejection::WrongToken),
        }
    }

    fn is_allowed_extension(&self, origin: &str) -> bool {
        origin
            .strip_prefix("chrome-extension://")
            .map(|id| id.trim_end_matches('/'))
            .is_some_and(|id| self.extension_ids.iter().any(|allowed| allowed == id))
    }
}

/// `Host` names we answer: 127.0.0.0/8, `localhost`, `[::1]`, with any port.
pub fn is_loopback_host(host: &str) -> bool {
    let name = if let Some(rest) = host.strip_prefix('[') {
        // [v6]:port
        match rest.split_once(']') {
            Some((v6, port)) if port.is_empty() || valid_port(port) => v6,
            _ => return false,
        }
    } else {
        match host.rsplit_once(':') {
            Some((name, port)) if valid_port(port) => name,
            Some(_) => return false,
            None => host,
        }
    };
    if name.eq_ignore_ascii_case("localhost") {
        return true;
    }
    name.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

fn valid_port(with_colon: &str) -> bool {
    let port = with_colon.strip_prefix(':').unwrap_or(with_colon);
    !port.is_empty() && port.len() <= 5 && port.bytes().all(|b| b.is_ascii_digit())
}

/// The token a client presented: `Authorization: Bearer` or `?token=`.
fn presented_token(query: Option<&str>, headers: &HeaderMap) -> Option<String> {
    if let Some(bearer) =
        headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "))
    {
        return Some(bearer.trim().to_string());
    }
    query
        .and_then(|query| url::form_urlencoded::parse(query.as_bytes()).find(|(k, _)| k == "token"))
        .map(|(_, value)| value.into_owned())
}

/// axum middleware: applies [`Guard::admit`] to every request before routing.
pub(crate) async fn guard_layer(State(guard): State<Guard>, mut request: Request, next: Next) -> Response {
    let uri = request.uri().clone();
    match guard.admit(uri.path(), uri.query(), request.headers()) {
        Ok(admitted) => {
            request.extensions_mut().insert(admitted.access);
            next.run(request).await
        }
        Err(rejection) => {
            // Log the path only: the query may carry a token.
            tracing::warn!(path = uri.path(), status = %rejection.status(), "refused: {}", rejection.message());
            rejection.into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.append(axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(), HeaderValue::from_str(v).unwrap());
        }
        map
    }

    #[test]
    fn loopback_host_names() {
        for ok in ["127.0.0.1", "127.0.0.1:18792", "localhost", "LOCALHOST:1", "[::1]", "[::1]:18792", "127.3.4.5:80"] {
            assert!(is_loopback_host(ok), "{ok}");
        }
        for bad in [
            "evil.example",
            "evil.example:18792",
            "localhost.evil.example",
            "127.0.0.1.evil.example",
            "0.0.0.0",
            "10.0.0.1:18792",
            "[::2]:1",
            "127.0.0.1:99999999",
            "127.0.0.1:abc",
            "[::1]x",
            "",
        ] {
            assert!(!is_loopback_host(bad), "{bad}");
        }
    }

    #[test]
    fn token_sources() {
        let t = "a".repeat(64);
        assert_eq!(presented_token(None, &headers(&[("authorization", &format!("Bearer {t}"))])), Some(t.clone()));
        assert_eq!(presented_token(Some(&format!("x=1&token={t}")), &HeaderMap::new()), Some(t.clone()));
        let protocols = format!("browser-relay.v1, token.{t}");
        assert_eq!(
            presented_token(None, &headers(&[("sec-websocket-protocol", &protocols)])),
            None,
            "a subprotocol never carries a token (protocol 1's extensions did)"
        );
        assert_eq!(presented_token(Some("token"), &HeaderMap::new()), Some(String::new()));
        assert_eq!(presented_token(None, &headers(&[("authorization", "Basic abc")])), None);
    }

    #[test]
    fn the_extension_route_needs_the_pinned_origin_and_no_token() {
        let guard = Guard::new(Some(Token::generate()), vec![DEFAULT_EXTENSION_ID.into()]);
        let ours = format!("chrome-extension://{DEFAULT_EXTENSION_ID}");
        assert_eq!(guard.check("/extension", None, &headers(&[("host", "127.0.0.1"), ("origin", &ours)])), Ok(()));
        for origin in [None, Some("chrome-extension://abcdefghijklmnop"), Some("http://evil.example")] {
            let mut pairs = vec![("host", "127.0.0.1")];
            pairs.extend(origin.map(|o| ("origin", o)));
            assert!(guard.check("/extension", None, &headers(&pairs)).is_err(), "{origin:?}");
        }
    }

    #[test]
    fn only_health_and_the_protocol_description_are_public() {
        for public in ["/", "/extension/status", "/json/protocol", "/json/protocol/", "/profiles/managed/json/protocol"]
        {
            assert_eq!(RouteClass::of(public), RouteClass::Public, "{public}");
        }
        for client in [
            "/json/list",
            "/json/protocolx",
            "/json/new",
            "/profiles/a/b/json/protocol",
            "/profiles//json/protocol",
            "/profiles/managed/json/version",
            "/cdp",
        ] {
            assert_eq!(RouteClass::of(client), RouteClass::Client, "{client}");
        }
    }

    #[test]
    fn rejection_messages_never_echo_tokens() {
        let token = Token::generate();
        let guard = Guard::new(Some(token.clone()), vec![DEFAULT_EXTENSION_ID.into()]);
        let wrong = "b".repeat(64);
        let err =
            guard.check("/json/list", Some(&format!("token={wrong}")), &headers(&[("host", "127.0.0.1")])).unwrap_err();
        assert_eq!(err, Rejection::WrongToken);
        assert!(!err.message().contains(&wrong) && !err.message().contains(token.as_str()));
    }
}
