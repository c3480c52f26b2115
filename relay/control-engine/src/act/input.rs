//! Real input: mouse and keyboard events through `Input.dispatch*`, sent in
//! order.

use cdp_client::protocol::{Command, input};

use crate::api::MouseButton;
use crate::error::ControlError;
use crate::keys::{self, Chord};
use crate::tabs::PageTarget;

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

/// One mouse event (a press or release of `button`, or a move).
fn mouse_event(
    kind: &'static str,
    (x, y): (f64, f64),
    button: MouseButton,
    click_count: i64,
    modifiers: i64,
) -> input::DispatchMouseEvent {
    let moved = kind == "mouseMoved";
    input::DispatchMouseEvent {
        kind,
        x,
        y,
        modifiers,
        button: (!moved).then(|| button.name()),
        buttons: (!moved).then(|| if kind == "mousePressed" { button.bit() } else { 0 }),
        click_count: (!moved).then_some(click_count),
    }
}

pub(super) async fn mouse(
    page: &PageTarget,
    kind: &'static str,
    point: (f64, f64),
    button: MouseButton,
    click_count: i64,
) -> Result<(), ControlError> {
    page.cdp(&mouse_event(kind, point, button, click_count, 0)).await.map(drop)
}

/// Sends commands in order without waiting between them, then waits for
/// every answer.
async fn in_order<C: Command>(page: &PageTarget, commands: Vec<C>) -> Result<(), ControlError> {
    let client = page.conn.client();
    let session = Some(page.session.as_str());
    let calls: Vec<_> = commands.iter().map(|command| client.start(command, session)).collect();
    for call in calls {
        call.await.map_err(ControlError::cdp(&page.profile.name))?;
    }
    Ok(())
}

/// Move, then press and release (twice for a double click).
pub(super) async fn click_at(
    page: &PageTarget,
    point: (f64, f64),
    button: MouseButton,
    clicks: i64,
    modifiers: i64,
) -> Result<(), ControlError> {
    let mut events = vec![mouse_event("mouseMoved", point, button, 0, modifiers)];
    for count in 1..=clicks {
        for kind in ["mousePressed", "mouseReleased"] {
            events.push(mouse_event(kind, point, button, count, modifiers));
        }
    }
    in_order(page, events).await
}

/// Presses a chord: modifiers down, the key down and up, modifiers up.
pub(super) async fn press(page: &PageTarget, chord: &Chord) -> Result<(), ControlError> {
    let event = |kind: &'static str, key: &keys::Key, modifiers: i64, text: Option<&str>| input::DispatchKeyEvent {
        kind,
        key: key.key.clone(),
        code: key.code.clone(),
        windows_virtual_key_code: key.key_code,
        native_virtual_key_code: key.key_code,
        modifiers,
        text: text.map(str::to_string),
        unmodified_text: text.map(str::to_string),
    };
    let mut events = Vec::new();
    let mut held = 0;
    for modifier in &chord.modifiers {
        held |= modifier.modifier;
        events.push(event("rawKeyDown", modifier, held, None));
    }
    let text = chord.key.text.as_deref();
    let down = if text.is_some() { "keyDown" } else { "rawKeyDown" };
    events.push(event(down, &chord.key, held, text));
    events.push(event("keyUp", &chord.key, held, None));
    for modifier in chord.modifiers.iter().rev() {
        held &= !modifier.modifier;
        events.push(event("keyUp", modifier, held, None));
    }
    in_order(page, events).await
}

/// A drag from one point to another: pointer-driven drags see the mouse
/// events; HTML5 drag and drop is intercepted by Chrome and replayed with
/// `Input.dispatchDragEvent`, as a user's drop would be.
pub(super) async fn drag(page: &PageTarget, from: (f64, f64), to: (f64, f64)) -> Result<(), ControlError> {
    let mut events = page.conn.subscribe();
    page.cdp(&input::SetInterceptDrags { enabled: true }).await?;
    let result = async {
        mouse(page, "mouseMoved", from, MouseButton::Left, 0).await?;
        mouse(page, "mousePressed", from, MouseButton::Left, 1).await?;
        let steps = 5;
        for step in 1..=steps {
            let t = f64::from(step) / f64::from(steps);
            let point = (from.0 + (to.0 - from.0) * t, from.1 + (to.1 - from.1) * t);
            // Moving with the button held.
            let moved = input::DispatchMouseEvent {
                button: Some("left"),
                buttons: Some(1),
                ..mouse_event("mouseMoved", point, MouseButton::Left, 0, 0)
            };
            page.cdp(&moved).await?;
        }
        let mut data = None;
        while let Ok(event) = events.try_recv() {
            if event.session_id.as_deref() == Some(page.session.as_str())
                && let Some(intercepted) = event.parse::<input::DragIntercepted>()
            {
                data = Some(intercepted.data);
            }
        }
        if let Some(data) = data {
            for kind in ["dragEnter", "dragOver", "drop"] {
                let drop = input::DispatchDragEvent { kind, x: to.0, y: to.1, data: data.clone(), modifiers: 0 };
                page.cdp(&drop).await?;
            }
        }
        mouse(page, "mouseReleased", to, MouseButton::Left, 1).await
    }
    .await;
    let _ = page.cdp(&input::SetInterceptDrags { enabled: false }).await;
    result
}
