//! `GET /requests` and `GET /requests/body`: the tab's network log
//! (`network.rs`), filtered, and a response's body from Chrome, bounded.

use cdp_client::CdpError;
use cdp_client::protocol::network as cdp_network;

use crate::api::{Handle, ListRequests, Profiled, ReadResponseBody, RequestList, ResponseBody, Selected};
use crate::engine::Engine;
use crate::error::ControlError;
use crate::network::{Selection, bounded_body, select};

impl Handle<ListRequests> for Engine {
    /// The tab's requests that match the filters, newest last.
    async fn handle(&self, request: Selected<ListRequests>) -> Result<Profiled<RequestList>, ControlError> {
        let (profile, conn, id) = self.tab(&request.tab).await?;
        self.session(&conn, &id).await?;
        // Events that arrived before the last reply are in the log.
        conn.catch_up().await;
        let (requests, page) = conn.requests(&id).unwrap_or_default();
        let Selection { shown, total, earlier } = select(requests, &request.request, page);
        let list =
            RequestList { target_id: id, shown: shown.len(), requests: shown, total, page, earlier_pages: earlier };
        Ok(Profiled::new(&profile, list))
    }
}

impl Handle<ReadResponseBody> for Engine {
    /// A response's body from Chrome, bounded.
    async fn handle(&self, request: Selected<ReadResponseBody>) -> Result<Profiled<ResponseBody>, ControlError> {
        let request_id = request.request.request_id;
        let (profile, conn, id) = self.tab(&request.tab).await?;
        self.session(&conn, &id).await?;
        conn.catch_up().await;
        let recorded =
            conn.request(&id, &request_id).ok_or_else(|| ControlError::UnknownRequest(request_id.clone()))?;
        let no_body = |reason: String| ControlError::NoResponseBody { request_id: request_id.clone(), reason };
        if let Some(failure) = &recorded.request.failure {
            return Err(no_body(format!("the request failed ({failure})")));
        }
        if recorded.request.status.is_none() {
            return Err(no_body("no response yet".into()));
        }
        let get = cdp_network::GetResponseBody { request_id: request_id.clone() };
        let answer = conn.client().send(&get, Some(&recorded.session)).await.map_err(|error| match error {
            // "No resource with given identifier found", "No data found
            // for resource with given identifier": gone from Chrome's buffer.
            CdpError::Protocol { message, .. } => no_body(format!("Chrome no longer has it ({message})")),
            other => ControlError::cdp(&profile.name)(other),
        })?;
        let (body, truncated, bytes) = bounded_body(answer.body, answer.base64_encoded)?;
        let body = ResponseBody {
            target_id: id,
            request_id,
            mime_type: recorded.request.mime_type.unwrap_or_default(),
            body,
            base64_encoded: answer.base64_encoded,
            truncated,
            bytes,
        };
        Ok(Profiled::new(&profile, body))
    }
}
