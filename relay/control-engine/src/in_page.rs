//! Running the page script (`snapshot.js`) in a frame's isolated world, and
//! turning frame coordinates into tab viewport coordinates.

use std::time::Duration;

use cdp_client::protocol::runtime::{self, CallArgument};
use cdp_client::protocol::{dom, page};
use serde::de::DeserializeOwned;
use serde_json::Value;

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
pub(crate) static PAGE_SCRIPT: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
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
pub(crate) struct LiveFrame {
    pub session: String,
    pub frame_id: String,
}

impl LiveFrame {
    /// A tab's main frame, in its session (a page's main frame id is its
    /// target id).
    pub(crate) fn main(session: &str, tab: &str) -> Self {
        Self { session: session.to_string(), frame_id: tab.to_string() }
    }
}

/// Finds the session that holds `frame` now (sessions change on reconnect).
pub(crate) async fn live_frame(conn: &Conn, tab: &str, frame: &FrameLoc) -> Result<LiveFrame, ControlError> {
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
    let create = page::CreateIsolatedWorld {
        frame_id: frame.frame_id.clone(),
        world_name: WORLD_NAME.into(),
        grant_universal_access: false,
    };
    let created = conn.client().send(&create, Some(&frame.session)).await.map_err(ControlError::cdp(&conn.profile))?;
    let id = created.execution_context_id;
    conn.remember_world(&frame.session, &frame.frame_id, id);
    Ok(id)
}

/// Calls `browserRelay(op, arg)` in the frame's isolated world; its result
/// as `T` (one of [`answer`]'s types, or a plain `Value`).
pub(crate) async fn call_script<T: DeserializeOwned>(
    conn: &Conn,
    frame: &LiveFrame,
    op: &str,
    arg: Value,
) -> Result<T, ControlError> {
    let value = in_world(conn, frame, op, arg, true).await?.into_value();
    serde_json::from_value(value)
        .map_err(|e| ControlError::Page(format!("the page script answered {op} unexpectedly: {e}")))
}

/// What the page script's ops answer (`snapshot.js` documents each op).
pub(crate) mod answer {
    use serde::Deserialize;

    /// `resolve`, `selectorBox`: an element's box in its frame (CSS
    /// pixels), or why there is none.
    #[derive(Debug, Clone, Default, Deserialize)]
    #[serde(default)]
    pub(crate) struct Located {
        /// `unknown` (no such ref), `stale`, or a message.
        pub error: Option<String>,
        pub hidden: bool,
        pub x: f64,
        pub y: f64,
        pub width: f64,
        pub height: f64,
    }

    /// `actionable`: whether the element can take an action now.
    #[derive(Debug, Clone, Default, Deserialize)]
    #[serde(default)]
    pub(crate) struct Actionable {
        pub error: Option<String>,
        /// `ok`, `hidden`, `disabled`, `unstable` or `covered`.
        pub state: Option<String>,
        pub x: f64,
        pub y: f64,
        pub width: f64,
        pub height: f64,
        /// What is on top, when covered (`<div class="modal">`).
        pub by: Option<String>,
        /// When asked to focus: what the element is.
        pub focus: Option<Focused>,
    }

    /// `focusForTyping`: the focused element, as typing sees it.
    #[derive(Debug, Clone, Default, Deserialize)]
    #[serde(default)]
    pub(crate) struct Focused {
        pub error: Option<String>,
        /// `input`, `textarea`, `contenteditable`, `other`…
        pub kind: Option<String>,
        /// An input's type.
        #[serde(rename = "type")]
        pub input_type: Option<String>,
    }

    /// `setValue`, `selectOptions`: done, or why not (with the options a
    /// select has, when the value was not one of them).
    #[derive(Debug, Clone, Default, Deserialize)]
    #[serde(default)]
    pub(crate) struct Done {
        pub error: Option<String>,
        pub options: Option<Vec<String>>,
    }

    /// `checkedState`.
    #[derive(Debug, Clone, Default, Deserialize)]
    #[serde(default)]
    pub(crate) struct Checked {
        pub error: Option<String>,
        pub checked: Option<bool>,
    }

    /// `waitFor`: whether the condition held before the time was up.
    #[derive(Debug, Clone, Default, Deserialize)]
    #[serde(default)]
    pub(crate) struct Met {
        pub met: bool,
    }

    /// `showLabels`: refs labelled.
    #[derive(Debug, Clone, Default, Deserialize)]
    #[serde(default)]
    pub(crate) struct Labels {
        pub labels: u64,
    }

    /// `snapshot`: one frame's walk.
    #[derive(Debug, Clone, Default, Deserialize)]
    #[serde(default, rename_all = "camelCase")]
    pub(crate) struct Walked {
        pub error: Option<String>,
        pub lines: Vec<String>,
        pub nodes: u32,
        pub limit_hit: bool,
        pub depth_cut: u32,
        pub refs: Vec<WalkedRef>,
        /// The number after the last new ref.
        pub ref_next: u32,
        /// Iframes it could not enter, in document order.
        pub frames: Vec<WalkedFrame>,
        /// On a page scrolled down, the first line in view.
        pub view_line: Option<usize>,
    }

    #[derive(Debug, Clone, Default, Deserialize)]
    #[serde(default)]
    pub(crate) struct WalkedRef {
        #[serde(rename = "ref")]
        pub name: String,
        pub role: String,
        /// The accessible name.
        #[serde(rename = "name")]
        pub label: String,
        pub nth: u32,
    }

    /// An iframe's line in the walk's output, and its depth.
    #[derive(Debug, Clone, Default, Deserialize)]
    #[serde(default)]
    pub(crate) struct WalkedFrame {
        pub line: usize,
        pub depth: u32,
    }
}

/// Like [`call_script`], but the result as a remote object (for its
/// `objectId`: the element a ref names, say).
pub(crate) async fn script_object(
    conn: &Conn,
    frame: &LiveFrame,
    op: &str,
    arg: Value,
) -> Result<runtime::RemoteObject, ControlError> {
    in_world(conn, frame, op, arg, false).await
}

async fn in_world(
    conn: &Conn,
    frame: &LiveFrame,
    op: &str,
    arg: Value,
    by_value: bool,
) -> Result<runtime::RemoteObject, ControlError> {
    // A navigation can destroy the world between our lookup and the call:
    // then make a new one, once.
    for attempt in 0..2 {
        let context = world(conn, frame).await?;
        let call = runtime::CallFunctionOn {
            function_declaration: PAGE_SCRIPT.as_str().into(),
            execution_context_id: Some(context),
            arguments: vec![CallArgument::Value(Value::String(op.into())), CallArgument::Value(arg.clone())],
            return_by_value: by_value,
            await_promise: true,
            object_group: Some(WORLD_NAME.into()),
            ..Default::default()
        };
        match conn.client().send(&call, Some(&frame.session)).await {
            Ok(reply) => {
                if let Some(details) = reply.exception_details {
                    return Err(ControlError::Page(exception_text(&details)));
                }
                return Ok(reply.result);
            }
            Err(cdp_client::CdpError::Protocol { message, .. }) if attempt == 0 && message.contains("context") => {
                conn.forget_world(&frame.session, &frame.frame_id);
            }
            Err(error) => return Err(ControlError::cdp(&conn.profile)(error)),
        }
    }
    Err(ControlError::Page("the frame's document kept changing".into()))
}

/// The first line of what the script threw.
fn exception_text(details: &runtime::ExceptionDetails) -> String {
    let text = details.exception.as_ref().and_then(|e| e.description.clone()).unwrap_or_else(|| details.text.clone());
    let first = text.lines().next().unwrap_or_default();
    if first.is_empty() { "script error".into() } else { first.to_string() }
}

/// Where a frame's viewport origin is in the tab's viewport: the sum of the
/// content-box origins of the `<iframe>` elements that hold it.
pub(crate) async fn frame_offset(conn: &Conn, tab: &str, frame: &FrameLoc) -> Result<(f64, f64), ControlError> {
    let (mut x, mut y) = (0.0, 0.0);
    let mut current = frame.owner.clone();
    while let Some(owner) = current {
        let parent = live_frame(conn, tab, &owner.parent).await?;
        let get = dom::GetBoxModel { backend_node_id: owner.backend_node_id };
        let model = conn.client().send(&get, Some(&parent.session)).await.map_err(ControlError::cdp(&conn.profile))?;
        x += model.model.content.first().copied().unwrap_or_default();
        y += model.model.content.get(1).copied().unwrap_or_default();
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

    /// The function names declared twice at one indentation of `source`
    /// (the script's scopes go by its indentation): in JavaScript the later
    /// declaration silently replaces the earlier for every caller.
    fn declared_twice(source: &str) -> Vec<String> {
        let mut seen = std::collections::HashSet::new();
        let mut twice = Vec::new();
        for line in source.lines() {
            let body = line.trim_start();
            let indent = line.len() - body.len();
            let body = body.strip_prefix("async ").unwrap_or(body);
            let Some(rest) = body.strip_prefix("function ") else { continue };
            let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '$').collect();
            if !name.is_empty() && !seen.insert((indent, name.clone())) {
                twice.push(name);
            }
        }
        twice
    }

    #[test]
    fn no_function_of_the_page_script_replaces_another() {
        // Twice: `actionable` (the snapshot's test of a subtree and the op)
        // made every subtree look acted on; `isDisabled` had two versions.
        assert_eq!(declared_twice(PAGE_SCRIPT_SOURCE), Vec::<String>::new());
        let planted = "    function a(x) {\n    }\n      function a() {}\n    async function a() {}\n";
        assert_eq!(declared_twice(planted), ["a"], "found at the same indentation only");
    }
}
