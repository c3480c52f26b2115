//! The control API's grants routes, the person's alone (a grant's key is
//! refused with 403: `http::persons_only`): `GET /grants`, every grant with its tabs and
//! clients now, and `POST /grants/reload`, which `browser-relay grant`
//! calls after it changed `grants.json` (a revoked grant's connections
//! close at once). No answer carries a key: the CLI derives them from the
//! secret it reads itself.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// What the grants' routes need.
#[derive(Debug, Clone)]
pub(crate) struct GrantsState {
    pub lent: Arc<crate::lent::Lent>,
    /// For each grant's tabs and clients (none in the route tests).
    pub relay: Option<relay_engine::Relay>,
}

/// One grant as `GET /grants` shows it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct GrantView {
    pub name: String,
    /// Chrome's tab group colour, and how Chrome paints it.
    pub color: String,
    pub color_hex: String,
    /// As written (`example.com`, `*.wiki.org`); empty: every site.
    pub sites: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at_ms: Option<u64>,
    /// `never`, `in 7h 59m`, `expired`.
    pub expires: String,
    pub evaluate: bool,
    /// What it asks the person about first (`--ask`).
    pub ask: Vec<grants::AskKind>,
    pub created_at_ms: u64,
    /// Its shared tabs now (target ids, URLs, titles).
    pub tabs: Vec<relay_engine::SharedTab>,
    /// Its connected clients now.
    pub clients: Vec<relay_engine::ClientSummary>,
}

/// `GET /grants`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct GrantList {
    pub grants: Vec<GrantView>,
    /// Why `grants.json` is not honoured, if it is not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

impl GrantsState {
    pub(crate) fn list(&self) -> GrantList {
        let now = grants::now_ms();
        let (tabs, clients) = match &self.relay {
            Some(relay) => (relay.shared_tabs(), relay.clients()),
            None => (Vec::new(), Vec::new()),
        };
        let grants = self
            .lent
            .all()
            .iter()
            .map(|grant| {
                let name = grant.name.to_string();
                let its = |g: &Option<String>| g.as_deref() == Some(name.as_str());
                GrantView {
                    color: grant.color.name().into(),
                    color_hex: grant.color.hex().into(),
                    sites: grant.sites.patterns().iter().map(ToString::to_string).collect(),
                    expires_at_ms: grant.expires_at_ms,
                    expires: grant.expiry_text(now),
                    evaluate: grant.evaluate,
                    ask: grant.ask.clone(),
                    created_at_ms: grant.created_at_ms,
                    tabs: tabs.iter().filter(|t| its(&t.grant)).cloned().collect(),
                    clients: clients.iter().filter(|c| its(&c.grant)).cloned().collect(),
                    name,
                }
            })
            .collect();
        GrantList { grants, problem: self.lent.problem() }
    }
}

/// `GET /grants`: every grant, with its tabs and clients now.
pub(crate) async fn list(State(state): State<GrantsState>) -> Response {
    axum::Json(state.list()).into_response()
}

/// `POST /grants/reload`: `grants.json` changed; a grant gone from it
/// ends now.
pub(crate) async fn reload(State(state): State<GrantsState>) -> Response {
    state.lent.reload();
    (StatusCode::OK, axum::Json(state.list())).into_response()
}
