//! Real input: mouse and keyboard events through `Input.dispatch*`, sent in
//! order.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::cdp;
use crate::error::ControlError;
use crate::keys::{self, Chord};
use crate::tabs::PageTarget;

/// Which mouse button a click uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum MouseButton {
    #[default]
    Left,
    Right,
    Middle,
}

impl MouseButton {
    fn name(self) -> &'static str {
        match self {
            Self::Left => "left",
            Self::Right => "right",
            Self::Middle => "middle",
        }
    }
    fn bit(self) -> i64 {
        match self {
            Self::Left => 1,
            Self::Right => 2,
            Self::Middle => 4,
        }
    }
}

pub(super) async fn mouse(
    page: &PageTarget,
    kind: &str,
    x: f64,
    y: f64,
    button: MouseButton,
    click_count: i64,
    modifiers: i64,
) -> Result<(), ControlError> {
    let mut params = json!({"type": kind, "x": x, "y": y, "modifiers": modifiers});
    if kind != "mouseMoved" {
        params["button"] = json!(button.name());
        params["buttons"] = json!(if kind == "mousePressed" { button.bit() } else { 0 });
        params["clickCount"] = json!(click_count);
    }
    cdp(page, "Input.dispatchMouseEvent", params).await.map(drop)
}

/// Move, then press and release (twice for a double click), sent in order
/// without waiting between them.
pub(super) async fn click_at(
    page: &PageTarget,
    (x, y): (f64, f64),
    button: MouseButton,
    clicks: i64,
    modifiers: i64,
) -> Result<(), ControlError> {
    let client = page.conn.client();
    let session = Some(page.session.as_str());
    let mut calls = vec![client.start_call(
        "Input.dispatchMouseEvent",
        json!({"type": "mouseMoved", "x": x, "y": y, "modifiers": modifiers}),
        session,
    )];
    for count in 1..=clicks {
        for kind in ["mousePressed", "mouseReleased"] {
            let buttons = if kind == "mousePressed" { button.bit() } else { 0 };
            let params = json!({"type": kind, "x": x, "y": y, "button": button.name(), "buttons": buttons,
                "clickCount": count, "modifiers": modifiers});
            calls.push(client.start_call("Input.dispatchMouseEvent", params, session));
        }
    }
    for call in calls {
        call.await.map_err(ControlError::cdp(&page.profile.name))?;
    }
    Ok(())
}

/// Presses a chord: modifiers down, the key down and up, modifiers up.
pub(super) async fn press(page: &PageTarget, chord: &Chord) -> Result<(), ControlError> {
    let client = page.conn.client();
    let session = Some(page.session.as_str());
    let mut calls = Vec::new();
    let mut held = 0;
    let event = |kind: &str, key: &keys::Key, modifiers: i64, text: Option<&str>| {
        let mut params = json!({
            "type": kind, "key": key.key, "code": key.code, "windowsVirtualKeyCode": key.key_code,
            "nativeVirtualKeyCode": key.key_code, "modifiers": modifiers,
        });
        if let Some(text) = text {
            params["text"] = json!(text);
            params["unmodifiedText"] = json!(text);
        }
        params
    };
    for modifier in &chord.modifiers {
        held |= modifier.modifier;
        calls.push(client.start_call("Input.dispatchKeyEvent", event("rawKeyDown", modifier, held, None), session));
    }
    let text = chord.key.text.as_deref();
    let down = if text.is_some() { "keyDown" } else { "rawKeyDown" };
    calls.push(client.start_call("Input.dispatchKeyEvent", event(down, &chord.key, held, text), session));
    calls.push(client.start_call("Input.dispatchKeyEvent", event("keyUp", &chord.key, held, None), session));
    for modifier in chord.modifiers.iter().rev() {
        held &= !modifier.modifier;
        calls.push(client.start_call("Input.dispatchKeyEvent", event("keyUp", modifier, held, None), session));
    }
    for call in calls {
        call.await.map_err(ControlError::cdp(&page.profile.name))?;
    }
    Ok(())
}

/// A drag from one point to another: pointer-driven drags see the mouse
/// events; HTML5 drag and drop is intercepted by Chrome and replayed with
/// `Input.dispatchDragEvent`, as a user's drop would be.
pub(super) async fn drag(page: &PageTarget, from: (f64, f64), to: (f64, f64)) -> Result<(), ControlError> {
    let mut events = page.conn.subscribe();
    cdp(page, "Input.setInterceptDrags", json!({"enabled": true})).await?;
    let result = async {
        mouse(page, "mouseMoved", from.0, from.1, MouseButton::Left, 0, 0).await?;
        mouse(page, "mousePressed", from.0, from.1, MouseButton::Left, 1, 0).await?;
        let steps = 5;
        for step in 1..=steps {
            let t = f64::from(step) / f64::from(steps);
            let (x, y) = (from.0 + (to.0 - from.0) * t, from.1 + (to.1 - from.1) * t);
            let params = json!({"type": "mouseMoved", "x": x, "y": y, "button": "left", "buttons": 1});
            cdp(page, "Input.dispatchMouseEvent", params).await?;
        }
        let mut data = None;
        while let Ok(event) = events.try_recv() {
            if event.method == "Input.dragIntercepted" && event.session_id.as_deref() == Some(page.session.as_str()) {
                data = Some(event.params["data"].clone());
            }
        }
        if let Some(data) = data {
            for kind in ["dragEnter", "dragOver", "drop"] {
                let params = json!({"type": kind, "x": to.0, "y": to.1, "data": data, "modifiers": 0});
                cdp(page, "Input.dispatchDragEvent", params).await?;
            }
        }
        mouse(page, "mouseReleased", to.0, to.1, MouseButton::Left, 1, 0).await
    }
    .await;
    let _ = cdp(page, "Input.setInterceptDrags", json!({"enabled": false})).await;
    result
}
