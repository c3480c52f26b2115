//! The agent side of the control API: one HTTP client for the CLI's agent
//! commands and the MCP server, which both talk to a running
//! `browser-relay serve` (the process that owns the relay and the browsers).

use serde_json::Value;

use cdp_client::http as http_client;
use state_dir::Token;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("no control API on 127.0.0.1:{port}: is `browser-relay serve` running? ({source})")]
    Unreachable { port: u16, source: std::io::Error },
    /// The API's own error: its message and, when it has one, its hint
    /// (what agents and people read; the code and status add nothing here).
    #[error("{message}{}", hint.as_ref().map(|h| format!(" (hint: {h})")).unwrap_or_default())]
    Api { message: String, hint: Option<String> },
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

    /// One request; the answer's JSON on success, the API's error otherwise.
    pub async fn call(
        &self,
        method: &str,
        path: &str,
        query: &[(String, String)],
        body: Option<&Value>,
    ) -> Result<Value, ClientError> {
        let encoded: String = url::form_urlencoded::Serializer::new(String::new()).extend_pairs(query).finish();
        let url = format!(
            "http://127.0.0.1:{}{path}{}",
            self.port,
            if encoded.is_empty() { String::new() } else { format!("?{encoded}") }
        );
        let auth = format!("Bearer {}", self.token.as_str());
        let body = body.map(Value::to_string);
        let response =
            http_client::request(method, &url, &[("Authorization", &auth)], body.as_deref().map(str::as_bytes))
                .await
                .map_err(|source| ClientError::Unreachable { port: self.port, source })?;
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
}
