//! The agent side of the control API: one HTTP client for the CLI's agent
//! commands, the MCP server and the tests, which all talk to a running
//! `browser-relay serve` (the process that owns the relay and the
//! browsers). Requests are the route types of [`control_engine::api`].
//!
//! It never sends the token: it first has the server prove the pairing
//! (`POST /session`, see `net::sessions`), so a program squatting the port
//! is found out before it is asked anything, and then sends the session's
//! secret.

use cdp_client::http::{self as http_client, HttpResponse};
use control_engine::api::{Method, Route, Selected, path_of, query_pairs};
use control_engine::error::Surface;
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

/// Starts a control API on the client's port when none listens there any
/// more; `Ok` when one may be reached now (started, or another process
/// was faster), else why not.
pub type StartServer = dyn Fn() -> futures_util::future::BoxFuture<'static, Result<(), String>> + Send + Sync + 'static;

/// A control API on a loopback port, with this install's token (which
/// never leaves: see the module doc).
#[derive(Clone)]
pub struct ControlClient {
    port: u16,
    token: Token,
    /// Where the answers are read, so hints name steps taken there.
    surface: Surface,
    /// The session, once the server proved itself.
    session: std::sync::Arc<tokio::sync::Mutex<Option<Session>>>,
    /// What to do when nothing listens on the port (see [`Self::reviving`]).
    revive: Option<std::sync::Arc<StartServer>>,
}

impl std::fmt::Debug for ControlClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControlClient")
            .field("port", &self.port)
            .field("surface", &self.surface)
            .field("revives", &self.revive.is_some())
            .finish_non_exhaustive()
    }
}

impl ControlClient {
    pub fn new(port: u16, token: Token) -> Self {
        Self { port, token, surface: Surface::Http, session: Default::default(), revive: None }
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

    /// A client whose answers are read on `surface` (the CLI, MCP): the
    /// API's hints then name that surface's commands or tools.
    pub fn on(mut self, surface: Surface) -> Self {
        self.surface = surface;
        self
    }

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
        let value = self.call(method, &path, &query, body.as_ref()).await?;
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
        let encoded: String = url::form_urlencoded::Serializer::new(String::new()).extend_pairs(query).finish();
        let target = if encoded.is_empty() { path.to_string() } else { format!("{path}?{encoded}") };
        let response = self.raw(method, &target, &[], body).await?;
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
    /// A 401 (the server restarted and forgot the session) opens a new
    /// session and tries once more.
    pub async fn raw(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&Value>,
    ) -> Result<HttpResponse, ClientError> {
        let body = body.map(Value::to_string);
        for fresh in [false, true] {
            let session = self.session(fresh).await?;
            let auth = format!("Bearer {}", session.secret);
            let request_id = random_hex().map_err(|why| ClientError::NotOurServer { port: self.port, why })?;
            let mut all = vec![
                ("Authorization", auth.as_str()),
                (Surface::HEADER, self.surface.name()),
                (REQUEST_HEADER, request_id.as_str()),
            ];
            all.extend_from_slice(headers);
            let response = match self.http(method, path, &all, body.as_deref().map(str::as_bytes)).await {
                Ok(response) => response,
                Err(error) => {
                    // The server may be gone: whoever answers next proves
                    // itself again first.
                    self.forget_session().await;
                    return Err(error);
                }
            };
            if response.status == 401 && !fresh {
                continue;
            }
            // An answer this install's server did not sign is not taken,
            // and the next request proves the server again.
            let signature = response.header(ANSWER_HEADER).unwrap_or_default();
            let genuine = shared_protocol::auth::verify_answer(
                self.token.as_str(),
                &session.client_nonce,
                &session.server_nonce,
                &request_id,
                response.status,
                &response.body,
                signature,
            );
            if !genuine {
                self.forget_session().await;
                return Err(ClientError::NotOurServer {
                    port: self.port,
                    why: format!(
                        "its answer ({}) is not signed by the server that proved the pairing",
                        response.status
                    ),
                });
            }
            return Ok(response);
        }
        unreachable!("the second try returns")
    }

    async fn forget_session(&self) {
        *self.session.lock().await = None;
    }

    /// The session's secret: the one held, or (`fresh`, or none yet) a new
    /// one from a server that proved the pairing.
    async fn session(&self, fresh: bool) -> Result<Session, ClientError> {
        let mut held = self.session.lock().await;
        if let (Some(session), false) = (held.as_ref(), fresh) {
            return Ok(session.clone());
        }
        let mut random = [0u8; 32];
        getrandom::fill(&mut random).map_err(|e| ClientError::NotOurServer { port: self.port, why: e.to_string() })?;
        let nonce = shared_protocol::auth::nonce_hex(&random);
        let body = serde_json::json!({"nonce": nonce}).to_string();
        let response = self.http("POST", "/session", &[], Some(body.as_bytes())).await?;
        let not_ours = |why: &str| ClientError::NotOurServer { port: self.port, why: why.to_string() };
        if response.status != 200 {
            return Err(not_ours(&format!("POST /session answered {}", response.status)));
        }
        let opened = response.json();
        let (Some(server_nonce), Some(proof)) = (opened["nonce"].as_str(), opened["proof"].as_str()) else {
            return Err(not_ours("no nonce and proof"));
        };
        let secret = crate::net::sessions::client_secret(&self.token, self.port, &nonce, server_nonce, proof)
            .ok_or_else(|| not_ours("its proof is wrong"))?;
        let session = Session { secret, client_nonce: nonce, server_nonce: server_nonce.to_string() };
        *held = Some(session.clone());
        Ok(session)
    }

    async fn http(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&[u8]>,
    ) -> Result<HttpResponse, ClientError> {
        let url = format!("http://127.0.0.1:{}{path}", self.port);
        let unreachable = |source| ClientError::Unreachable { port: self.port, source };
        match (http_client::request(method, &url, headers, body).await, &self.revive) {
            (Err(refused), Some(start)) if refused.kind() == std::io::ErrorKind::ConnectionRefused => {
                start().await.map_err(|why| unreachable(std::io::Error::new(refused.kind(), why)))?;
                http_client::request(method, &url, headers, body).await.map_err(unreachable)
            }
            (answer, _) => answer.map_err(unreachable),
        }
    }
}
