//! The agent side of the control API: one HTTP client for the CLI's agent
//! commands, the MCP server and the tests, which all talk to a running
//! `browser-relay serve` (the process that owns the relay and the
//! browsers). Requests are the route types of [`control_engine::api`].
//!
//! It never sends the token: on each connection it first has the server
//! prove the pairing (`POST /session`, see `net::sessions`), so a program
//! squatting the port is found out before it is asked anything, and then
//! sends the session's secret. Connections are kept between requests; a
//! server that went away closes them, and whatever listens next is met on
//! a new connection and must prove itself before it hears a request.

use cdp_client::http::{HttpResponse, KeptConnection};
use control_engine::Surface;
use control_engine::api::{Method, Route, Selected, path_of, query_pairs};
use serde_json::Value;
use state_dir::Token;

use crate::net::sessions::{ANSWER_HEADER, REQUEST_HEADER};

/// 16 random bytes as hex: a request's name.
fn random_hex() -> Result<String, String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| e.to_string())?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("no control API on 127.0.0.1:{port}: is `browser-relay serve` running? ({source})")]
    Unreachable { port: u16, source: std::io::Error },
    /// The API's own error: its message and, when it has one, its hint
    /// (what agents and people read; the code and status add nothing here).
    #[error("{message}{}", hint.as_ref().map(|h| format!(" (hint: {h})")).unwrap_or_default())]
    Api { message: String, hint: Option<String> },
    /// The program on the port could not prove this install's pairing.
    #[error(
        "the program on 127.0.0.1:{port} is not this install's `browser-relay serve`: it could not prove the pairing token ({why}); nothing was sent to it"
    )]
    NotOurServer { port: u16, why: String },
    /// A 200 whose body is not the route's answer: a control API of another
    /// version.
    #[error("the control API answered {path} with something unexpected ({reason}): is `serve` the same version?")]
    Unexpected { path: String, reason: String },
}

/// A session with a server that proved the pairing: the secret the client
/// presents, and the nonces the server signs its answers for.
#[derive(Debug, Clone)]
struct Session {
    secret: String,
    client_nonce: String,
    server_nonce: String,
}

/// A connection and the session its server proved on it.
struct Proven {
    connection: KeptConnection,
    session: Session,
    /// Kept idle since then.
    idle_since: std::time::Instant,
}

/// How long a proven connection is kept idle: less than the server's
/// header-read timeout (10 s), which closes idle connections, so that a
/// kept one is not closed just as a request leaves on it.
const KEPT_IDLE: std::time::Duration = std::time::Duration::from_secs(5);

/// Proven connections kept between requests (requests at once beyond it
/// open connections of their own, proved and then let go).
const MAX_IDLE: usize = 4;

/// Starts a control API on the client's port when none listens there any
/// more; `Ok` when one may be reached now (started, or another process
/// was faster), else why not.
pub type StartServer = dyn Fn() -> futures_util::future::BoxFuture<'static, Result<(), String>> + Send + Sync + 'static;

/// A control API on a loopback port, with this install's token (which
/// never leaves: see the module doc).
#[derive(Clone)]
pub struct ControlClient {
    port: u16,
    /// The control key its sessions are proved with (the install's, or a
    /// grant's).
    token: Token,
    /// Where the answers are read, so hints name steps taken there.
    surface: Surface,
    /// Connections whose server proved itself on them, idle.
    idle: std::sync::Arc<std::sync::Mutex<Vec<Proven>>>,
    /// What to do when nothing listens on the port (see [`Self::reviving`]).
    revive: Option<std::sync::Arc<StartServer>>,
    /// The grant whose session it opens (`token` is then the grant's
    /// control key), held to the grant's tabs and sites.
    grant: Option<String>,
    /// How long an answer is awaited (a route may ask for longer:
    /// `Route::patience`).
    patience: std::time::Duration,
}

impl std::fmt::Debug for ControlClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControlClient")
            .field("port", &self.port)
            .field("surface", &self.surface)
            .field("revives", &self.revive.is_some())
            .field("grant", &self.grant)
            .finish_non_exhaustive()
    }
}

impl ControlClient {
    /// A client of the person's (`secret`: the install's, from the token
    /// file): its sessions are proved with the control key derived from
    /// it, never with the secret (keys.rs).
    pub fn new(port: u16, secret: Token) -> Self {
        Self {
            port,
            token: crate::keys::control_key(&secret),
            surface: Surface::Http,
            idle: Default::default(),
            revive: None,
            grant: None,
            patience: cdp_client::http::REQUEST_WITHIN,
        }
    }

    /// A client of the grant `name` (`--grant`), whose control key (derived
    /// from the secret: `grants::Grant::key`) is `key`: its sessions are the
    /// grant's, and the server holds them to its tabs and sites.
    pub fn as_grant(mut self, name: &str, key: Token) -> Self {
        self.grant = Some(name.to_string());
        self.token = key;
        // Its input, uploads and navigations may wait for the person (`--ask`).
        self.patience = cdp_client::http::REQUEST_WITHIN + relay_engine::ASK_WITHIN;
        self
    }

    /// A client that, finding nothing listening on its port (the server it
    /// used ended: another `browser-relay mcp` that ran it was closed by
    /// its host), has `start` run one and sends the request again. Only a
    /// refused connection does this: the request never reached a server,
    /// so sending it again cannot do anything twice.
    pub fn reviving(mut self, start: std::sync::Arc<StartServer>) -> Self {
        self.revive = Some(start);
        self
    }

    /// The same client, on another port.
    pub fn with_port(mut self, port: u16) -> Self {
        self.port = port;
        self
    }

    /// A client whose answers are read on `surface` (the CLI, MCP): the
    /// API's hints then name that surface's commands or tools.
    pub fn on(mut self, surface: Surface) -> Self {
        self.surface = surface;
        self
    }

    #[cfg(feature = "testing")]
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Sends a request of one route and reads its answer.
    pub async fn send<R: Route>(&self, request: &Selected<R>) -> Result<R::Answer, ClientError> {
        let path = path_of(request);
        let (method, query, body) = match R::METHOD {
            Method::Get => ("GET", query_pairs(request), None),
            Method::Delete => ("DELETE", query_pairs(request), None),
            Method::Post => ("POST", Vec::new(), Some(Value::Object(request.to_json()))),
        };
        let within = request.request.patience().unwrap_or(self.patience);
        let value = self.call_within(method, &path, &query, body.as_ref(), within).await?;
        serde_json::from_value(value).map_err(|e| ClientError::Unexpected { path, reason: e.to_string() })
    }

    /// One request; the answer's JSON on success, the API's error otherwise.
    pub async fn call(
        &self,
        method: &str,
        path: &str,
        query: &[(String, String)],
        body: Option<&Value>,
    ) -> Result<Value, ClientError> {
        self.call_within(method, path, query, body, self.patience).await
    }

    /// [`Self::call`], its answer awaited for `within`.
    pub async fn call_within(
        &self,
        method: &str,
        path: &str,
        query: &[(String, String)],
        body: Option<&Value>,
        within: std::time::Duration,
    ) -> Result<Value, ClientError> {
        let encoded: String = url::form_urlencoded::Serializer::new(String::new()).extend_pairs(query).finish();
        let target = if encoded.is_empty() { path.to_string() } else { format!("{path}?{encoded}") };
        let response = self.raw_within(method, &target, &[], body, within).await?;
        let value: Value = serde_json::from_slice(&response.body).unwrap_or(Value::Null);
        if response.status == 200 {
            return Ok(value);
        }
        let error = &value["error"];
        Err(ClientError::Api {
            message: error["message"].as_str().map_or_else(|| response.text(), str::to_string),
            hint: error["hint"].as_str().map(str::to_string),
        })
    }

    /// One request as it goes over the wire (`path` with its query), with
    /// the session's secret and any extra headers; the response as it came.
    /// It goes over a connection whose server proved the pairing on it; a
    /// 401 (the server forgot the session) proves it again and tries once
    /// more.
    #[cfg(feature = "testing")]
    pub async fn raw(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&Value>,
    ) -> Result<HttpResponse, ClientError> {
        self.raw_within(method, path, headers, body, self.patience).await
    }

    async fn raw_within(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&Value>,
        within: std::time::Duration,
    ) -> Result<HttpResponse, ClientError> {
        let body = body.map(Value::to_string);
        let (mut proven, mut reused) = self.proven().await?;
        let mut proved_again = false;
        loop {
            let auth = format!("Bearer {}", proven.session.secret);
            let request_id = random_hex().map_err(|why| ClientError::NotOurServer { port: self.port, why })?;
            let mut all = vec![
                ("Authorization", auth.as_str()),
                (Surface::HEADER, self.surface.name()),
                (REQUEST_HEADER, request_id.as_str()),
            ];
            all.extend_from_slice(headers);
            // An error leaves the connection behind: whoever answers next
            // is met on a new one, and proves itself first.
            let sent = body.as_deref().map(str::as_bytes);
            let response = match proven.connection.request_within(method, path, &all, sent, within).await {
                Ok(response) => response,
                // A kept connection the server closed before the request
                // was written (it never left): a new one, as an HTTP
                // client's pool does. A request that may have reached the
                // server is never sent twice.
                Err(error) if reused && error.unsent => {
                    reused = false;
                    proven = self.fresh().await?;
                    continue;
                }
                Err(error) => return Err(ClientError::Unreachable { port: self.port, source: error.source }),
            };
            // The server forgot the session (it restarted on this port, or
            // let it go): the request was refused, not run. A new
            // connection and session, once.
            if response.status == 401 && !proved_again {
                proved_again = true;
                proven = self.fresh().await?;
                continue;
            }
            if response.status == 401 {
                return Err(ClientError::Api {
                    message: "the server forgot the session it had just proved (too many opened at once?)".into(),
                    hint: Some("try again".into()),
                });
            }
            // An answer this install's server did not sign is not taken,
            // and its connection is dropped.
            let signature = response.header(ANSWER_HEADER).unwrap_or_default();
            let genuine = shared_protocol::auth::verify_answer(
                self.token.as_str(),
                &proven.session.client_nonce,
                &proven.session.server_nonce,
                &request_id,
                response.status,
                &response.body,
                signature,
            );
            if !genuine {
                return Err(ClientError::NotOurServer {
                    port: self.port,
                    why: format!(
                        "its answer ({}) is not signed by the server that proved the pairing",
                        response.status
                    ),
                });
            }
            self.keep(proven);
            return Ok(response);
        }
    }

    /// A connection to a server that proved the pairing on it: one kept
    /// from an earlier request while still open (`true`), else a new one.
    async fn proven(&self) -> Result<(Proven, bool), ClientError> {
        loop {
            let kept = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
            match kept {
                Some(proven) if proven.connection.is_open() && proven.idle_since.elapsed() < KEPT_IDLE => {
                    return Ok((proven, true));
                }
                Some(_closed) => continue,
                None => return Ok((self.fresh().await?, false)),
            }
        }
    }

    /// A new connection, its server proved before anything else is sent.
    async fn fresh(&self) -> Result<Proven, ClientError> {
        let mut connection = self.connect().await?;
        let session = self.prove(&mut connection).await?;
        Ok(Proven { connection, session, idle_since: std::time::Instant::now() })
    }

    /// Kept for the next request, unless the server closed it.
    fn keep(&self, mut proven: Proven) {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if proven.connection.is_open() && idle.len() < MAX_IDLE {
            proven.idle_since = std::time::Instant::now();
            idle.push(proven);
        }
    }

    /// Has the server on `connection` prove the pairing (`POST /session`);
    /// the session it opened.
    async fn prove(&self, connection: &mut KeptConnection) -> Result<Session, ClientError> {
        let mut random = [0u8; 32];
        getrandom::fill(&mut random).map_err(|e| ClientError::NotOurServer { port: self.port, why: e.to_string() })?;
        let nonce = shared_protocol::auth::nonce_hex(&random);
        let body = match &self.grant {
            Some(grant) => serde_json::json!({"nonce": nonce, "grant": grant}).to_string(),
            None => serde_json::json!({"nonce": nonce}).to_string(),
        };
        let response = connection
            .request("POST", "/session", &[], Some(body.as_bytes()))
            .await
            .map_err(|error| ClientError::Unreachable { port: self.port, source: error.source })?;
        let not_ours = |why: &str| ClientError::NotOurServer { port: self.port, why: why.to_string() };
        if let (Some(grant), 401) = (&self.grant, response.status) {
            let said = response.json()["error"]["message"].as_str().map(str::to_string);
            let message = said.unwrap_or_else(|| format!("the grant '{grant}' is not given"));
            return Err(ClientError::Api { message, hint: None });
        }
        if response.status != 200 {
            return Err(not_ours(&format!("POST /session answered {}", response.status)));
        }
        let opened = response.json();
        let (Some(server_nonce), Some(proof)) = (opened["nonce"].as_str(), opened["proof"].as_str()) else {
            return Err(not_ours("no nonce and proof"));
        };
        let secret = crate::net::sessions::client_secret(&self.token, self.port, &nonce, server_nonce, proof)
            .ok_or_else(|| not_ours("its proof is wrong"))?;
        Ok(Session { secret, client_nonce: nonce, server_nonce: server_nonce.to_string() })
    }

    /// A new connection to the port; when nothing listens there and the
    /// client revives its server, one is started first.
    async fn connect(&self) -> Result<KeptConnection, ClientError> {
        let host = format!("127.0.0.1:{}", self.port);
        let unreachable = |source| ClientError::Unreachable { port: self.port, source };
        match (KeptConnection::open(&host).await, &self.revive) {
            (Err(refused), Some(start)) if refused.kind() == std::io::ErrorKind::ConnectionRefused => {
                start().await.map_err(|why| unreachable(std::io::Error::new(refused.kind(), why)))?;
                KeptConnection::open(&host).await.map_err(unreachable)
            }
            (connection, _) => connection.map_err(unreachable),
        }
    }
}
