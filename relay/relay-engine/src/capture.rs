//! Screenshots of tabs that are not in front.
//!
//! Chrome paints no tab that another tab hides in its window, nor any tab of
//! a minimized window, and `Page.captureScreenshot` waits for a painted
//! frame: on such a tab it answers late (measured on Chromium 156: a tab
//! hidden for more than about four seconds) or never, on Chrome's own port
//! as through `chrome.debugger`. Only bringing the tab to the front releases
//! it. The relay does not do that on its own (it would take the user's
//! screen from under them); it makes the wait bounded instead: a capture
//! still unanswered after [`RelayConfig::capture_check`] has its tab looked
//! at, and if the tab is not in front the client gets an error saying so at
//! once; any capture is answered by [`RelayConfig::capture_timeout`].
//!
//! [`RelayConfig::capture_check`]: crate::RelayConfig::capture_check
//! [`RelayConfig::capture_timeout`]: crate::RelayConfig::capture_timeout

use serde::Deserialize;
use shared_protocol::{CallId, RelayMessage, TabId, TabInfo, TabQuery};

use super::error::CallError;
use super::relay::Relay;

/// The start of the error a client gets for a tab that is not in front.
const NOT_IN_FRONT: &str = "Page.captureScreenshot: Chrome paints no tab that is not in front";

/// The error a client gets for a capture of a tab Chrome does not paint,
/// `why` being what keeps it from the front.
fn not_in_front_message(why: &str) -> String {
    format!(
        "{NOT_IN_FRONT} ({why}), so it has no frame to capture: bring the tab to the front \
         (Page.bringToFront) and capture again. Browser Relay does not do it for you: it \
         would take the user's screen."
    )
}

/// Why the tab was not in front, when `message` is the relay's error for a
/// capture of a tab Chrome does not paint ([`not_in_front_message`]); an
/// in-process client (the control engine) reads it here rather than
/// matching the words itself.
pub fn not_in_front_reason(message: &str) -> Option<&str> {
    let rest = message.strip_prefix(NOT_IN_FRONT)?.strip_prefix(" (")?;
    rest.split_once("), so it has no frame").map(|(why, _)| why)
}

impl Relay {
    /// Bounds the wait for the client's capture sent as extension call
    /// `call` on `tab`.
    pub(crate) fn watch_capture(&self, call: CallId, tab: TabId) {
        let relay = self.clone();
        tokio::spawn(async move {
            let (check, timeout) = (relay.0.config.capture_check, relay.0.config.capture_timeout);
            tokio::time::sleep(check).await;
            if !relay.0.pending.contains(call) {
                return;
            }
            let message = match relay.why_not_painted(tab).await {
                Ok(Some(why)) => not_in_front_message(why),
                _ => {
                    tokio::time::sleep(timeout.saturating_sub(check)).await;
                    format!(
                        "Page.captureScreenshot: Chrome produced no frame within {timeout:?} (is the window \
                         covered, or the tab in the background?)"
                    )
                }
            };
            // Answered like any reply, so the client's books stay right; a
            // late answer from Chrome then finds nobody waiting.
            relay.on_reply(
                call,
                Err(shared_protocol::CallError { message, code: Some(crate::cdp::code::SERVER_ERROR) }),
            );
        });
    }

    /// Why Chrome is not painting `tab` now, if it is not: another tab is
    /// active in its window, or its window is minimized.
    async fn why_not_painted(&self, tab: TabId) -> Result<Option<&'static str>, CallError> {
        let active = self
            .call(|id| RelayMessage::TabsQuery { id, query: TabQuery { active: Some(true), ..Default::default() } })
            .await?;
        let active: Vec<TabInfo> = serde_json::from_str(&active)
            .map_err(|e| CallError::Chrome(format!("unexpected tabs.query result: {e}")))?;
        let Some(window_id) = active.iter().find(|t| t.tab_id == tab).map(|t| t.window_id) else {
            return Ok(Some("another tab is in front of it in its window"));
        };
        if let Some(window_id) = window_id {
            #[derive(Deserialize)]
            struct Window {
                #[serde(default)]
                state: String,
            }
            let window = self.call(|id| RelayMessage::WindowsUpdate { id, window_id, focused: None }).await?;
            let window: Window =
                serde_json::from_str(&window).map_err(|e| CallError::Chrome(format!("unexpected window: {e}")))?;
            if window.state == "minimized" {
                return Ok(Some("its window is minimized"));
            }
        }
        // In front of its window, and the window is up: Chrome may still
        // not paint it, when the window is covered or off screen. The page
        // knows (bounded: a page paused by a dialog answers nothing).
        let visibility = self.send_command(
            tab,
            "Runtime.evaluate",
            Some(serde_json::json!({"expression": "document.visibilityState", "returnByValue": true})),
        );
        let hidden = matches!(
            tokio::time::timeout(std::time::Duration::from_secs(1), visibility).await,
            Ok(Ok(answer)) if answer.contains(r#""value":"hidden""#)
        );
        Ok(hidden.then_some("its window is covered or hidden"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reason_comes_back_out_of_the_message() {
        let why = "another tab is in front of it in its window";
        let message = not_in_front_message(why);
        assert!(message.starts_with(NOT_IN_FRONT), "{message}");
        assert_eq!(not_in_front_reason(&message), Some(why));
    }

    #[test]
    fn other_capture_errors_are_not_read_as_not_in_front() {
        let late = "Page.captureScreenshot: Chrome produced no frame within 30s (is the window covered, or the tab in the background?)";
        assert_eq!(not_in_front_reason(late), None);
        assert_eq!(not_in_front_reason("Not attached to an active page"), None);
        assert_eq!(not_in_front_reason(NOT_IN_FRONT), None, "a message without its reason is not ours");
    }
}
