//! The agent side of the control API: one HTTP client for the CLI's agent
//! commands, the MCP server and the tests, which all talk to a running
//! `browser-relay serve` (the process that owns the relay and the
//! browsers). Requests are the route types of [`control_engine::api`].

use cdp_client::http::{self as http_client, HttpResponse};
use control_engine::api::{Method, Route, Selected, path_of, query_pairs};
use serde_json::Value;
use state_dir::Token;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("no control API on 127.0.0.1:{port}: is `browser-relay serve` running? ({source})")]
    Unreachable { port: u16, source: std::io::Error },
    /// The API's own error: its message and, when it has one, its hint
    /// (what agents and people read; the code and status add nothing here).
    #[error("{message}{}", hint.as_ref().map(|h| format!(" (hint: {h})")).unwrap_or_default())]
    Api { message: String, hint: Option<String> },
    /// A 200 whose body is not the route's answer: a control API of another
    /// version.
    #[error("the control API answered {path} with something unexpected ({reason}): is `serve` the same version?")]
    Unexpected { path: String, reason: String },
}

/// A control API on a loopback port, with this install's token.
#[derive(Debug, Clone)]
pub struct ControlClient {
    port: u16,
    token: Token,
}

impl ControlClient {
    pub fn new(port: u16, token: Token) -> Self {
        Self { port, token }
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
    /// the token and any extra headers; the response as it came.
    pub async fn raw(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&Value>,
    ) -> Result<HttpResponse, ClientError> {
        let url = format!("http://127.0.0.1:{}{path}", self.port);
        let auth = format!("Bearer {}", self.token.as_str());
        let mut all = vec![("Authorization", auth.as_str())];
        all.extend_from_slice(headers);
        let body = body.map(Value::to_string);
        http_client::request(method, &url, &all, body.as_deref().map(str::as_bytes))
            .await
            .map_err(|source| ClientError::Unreachable { port: self.port, source })
    }
}
