//! Running the page script (`snapshot.js`) in a frame's isolated world, and
//! turning frame coordinates into tab viewport coordinates.

use std::time::Duration;

use serde_json::{Value, json};

use crate::conn::{Conn, WORLD_NAME};
use crate::error::ControlError;
use crate::refs::FrameLoc;

/// The page script as written: one function, `browserRelay(op, arg)`, after
/// a header comment that documents it.
const PAGE_SCRIPT_SOURCE: &str = include_str!("snapshot.js");

/// The page script as sent: re-sent with every call (its state lives on the
/// world's global), so without the header, comment lines and indentation
/// (a third of its size; about a millisecond per call on a small page).
/// Safe because the script has no template literals or multi-line strings.
pub static PAGE_SCRIPT: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    let body =
        PAGE_SCRIPT_SOURCE.find("function browserRelay").map_or(PAGE_SCRIPT_SOURCE, |i| &PAGE_SCRIPT_SOURCE[i..]);
    let mut out = String::with_capacity(body.len());
    for line in body.lines().map(str::trim) {
        if !line.is_empty() && !line.starts_with("//") {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
});

/// How long an out-of-process iframe may take to get its session.
const CHILD_SESSION_WITHIN: Duration = Duration::from_secs(3);

/// A frame resolved to a live session.
#[derive(Debug, Clone)]
pub struct LiveFrame {
    pub session: String,
    pub frame_id: String,
}

impl LiveFrame {
    /// A tab's main frame, in its session (a page's main frame id is its
    /// target id).
    pub fn main(session: &str, tab: &str) -> Self {
        Self { session: session.to_string(), frame_id: tab.to_string() }
    }
}

/// Finds the session that holds `frame` now (sessions change on reconnect).
pub async fn live_frame(conn: &Conn, tab: &str, frame: &FrameLoc) -> Result<LiveFrame, ControlError> {
    let session = match conn.session_of(&frame.session_target) {
        Some(session) => session,
        None if frame.session_target != tab => conn
            .wait_for_session(&frame.session_target, CHILD_SESSION_WITHIN)
            .await
            .ok_or_else(|| ControlError::Page(format!("the frame {} is gone", frame.frame_id)))?,
        None => return Err(ControlError::Page(format!("tab {tab} is not attached"))),
    };
    Ok(LiveFrame { session, frame_id: frame.frame_id.clone() })
}

/// The execution context of our isolated world in a frame (created once per
/// document; a navigation destroys it with the document).
async fn world(conn: &Conn, frame: &LiveFrame) -> Result<i64, ControlError> {
    if let Some(id) = conn.world(&frame.session, &frame.frame_id) {
        return Ok(id);
    }
    let created = conn
        .client()
        .call(
            "Page.createIsolatedWorld",
            json!({"frameId": frame.frame_id, "worldName": WORLD_NAME, "grantUniveralAccess": false}),
            Some(&frame.session),
        )
        .await
        .map_err(ControlError::cdp(&conn.profile))?;
    let id = created["executionContextId"]
        .as_i64()
        .ok_or_else(|| ControlError::Page("Page.createIsolatedWorld gave no context".into()))?;
    conn.remember_world(&frame.session, &frame.frame_id, id);
    Ok(id)
}

/// Calls `browserRelay(op, arg)` in the frame's isolated world. By value:
/// the JSON result; otherwise the remote object (for its `objectId`).
pub async fn call_script(
    conn: &Conn,
    frame: &LiveFrame,
    op: &str,
    arg: Value,
    by_value: bool,
) -> Result<Value, ControlError> {
    // A navigation can destroy the world between our lookup and the call:
    // then make a new one, once.
    for attempt in 0..2 {
        let context = world(conn, frame).await?;
        let result = conn
            .client()
            .call(
                "Runtime.callFunctionOn",
                json!({
                    "functionDeclaration": PAGE_SCRIPT.as_str(),
                    "executionContextId": context,
                    "arguments": [{"value": op}, {"value": arg}],
                    "returnByValue": by_value,
                    "awaitPromise": true,
                    "objectGroup": WORLD_NAME,
                }),
                Some(&frame.session),
            )
            .await;
        match result {
            Ok(mut reply) => {
                if let Some(details) = reply.get("exceptionDetails") {
                    return Err(ControlError::Page(exception_text(details)));
                }
                let mut object = reply["result"].take();
                return Ok(if by_value { object["value"].take() } else { object });
            }
            Err(cdp_client::CdpError::Protocol { message, .. }) if attempt == 0 && message.contains("context") => {
                conn.forget_world(&frame.session, &frame.frame_id);
            }
            Err(error) => return Err(ControlError::cdp(&conn.profile)(error)),
        }
    }
    Err(ControlError::Page("the frame's document kept changing".into()))
}

fn exception_text(details: &Value) -> String {
    details["exception"]["description"]
        .as_str()
        .or_else(|| details["text"].as_str())
        .unwrap_or("script error")
        .lines()
        .next()
        .unwrap_or_default()
        .to_string()
}

/// Where a frame's viewport origin is in the tab's viewport: the sum of the
/// content-box origins of the `<iframe>` elements that hold it.
pub async fn frame_offset(conn: &Conn, tab: &str, frame: &FrameLoc) -> Result<(f64, f64), ControlError> {
    let (mut x, mut y) = (0.0, 0.0);
    let mut current = frame.owner.clone();
    while let Some(owner) = current {
        let parent = live_frame(conn, tab, &owner.parent).await?;
        let model = conn
            .client()
            .call("DOM.getBoxModel", json!({"backendNodeId": owner.backend_node_id}), Some(&parent.session))
            .await
            .map_err(ControlError::cdp(&conn.profile))?;
        let content = &model["model"]["content"];
        x += content[0].as_f64().unwrap_or_default();
        y += content[1].as_f64().unwrap_or_default();
        current = owner.parent.owner.clone();
    }
    Ok((x, y))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_script_is_sent_without_its_comments() {
        assert!(PAGE_SCRIPT.starts_with("function browserRelay(op, arg) {"));
        assert!(PAGE_SCRIPT.trim_end().ends_with('}'));
        assert!(
            PAGE_SCRIPT.len() * 10 < PAGE_SCRIPT_SOURCE.len() * 8,
            "{} of {}",
            PAGE_SCRIPT.len(),
            PAGE_SCRIPT_SOURCE.len()
        );
        assert!(!PAGE_SCRIPT.contains('`'), "no template literals: lines are trimmed");
    }
}
