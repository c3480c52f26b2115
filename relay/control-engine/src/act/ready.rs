//! A ref resolved in its frame, and the actionability checks an element
//! must pass before an action (attached, visible, enabled, still, not
//! covered), with errors in terms of the ref.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use crate::capture::ElementBox;
use crate::engine::Engine;
use crate::error::ControlError;
use crate::in_page::answer::{Actionable, Focused};
use crate::in_page::{self, LiveFrame};
use crate::refs::RefEntry;
use crate::tabs::PageTarget;

/// A disabled or covered element rarely changes by itself: give up sooner.
const STUCK_PATIENCE: Duration = Duration::from_secs(1);

/// An action's time: its deadline, and the timeout it came from (errors
/// name the timeout the agent asked for).
#[derive(Debug, Clone, Copy)]
pub(super) struct Budget {
    pub(super) deadline: Instant,
    pub(super) timeout: Duration,
}

/// Which checks an element must pass before an action.
#[derive(Debug, Clone, Copy)]
pub(super) struct Checks {
    enabled: bool,
    /// Same box over two frames: a pointer action must not land where the
    /// element was. Typing goes to the focused element wherever it is.
    stable: bool,
    hit_test: bool,
}

pub(super) const CLICKABLE: Checks = Checks { enabled: true, stable: true, hit_test: true };
pub(super) const HOVERABLE: Checks = Checks { enabled: false, stable: true, hit_test: true };
pub(super) const EDITABLE: Checks = Checks { enabled: true, stable: false, hit_test: false };

/// A ref resolved to its frame, for one action.
pub(crate) struct Target {
    pub(crate) name: String,
    pub(crate) entry: RefEntry,
    pub(crate) frame: LiveFrame,
}

impl Target {
    pub(super) fn arg(&self) -> Value {
        json!({"ref": self.name, "role": self.entry.role, "name": self.entry.name, "nth": self.entry.nth})
    }
}

impl Engine {
    /// A ref of the tab's last snapshot, in its live frame.
    pub(crate) async fn ref_target(&self, page: &PageTarget, element_ref: &str) -> Result<Target, ControlError> {
        let (name, entry) = self.ref_entry(&page.profile.name, &page.id, element_ref)?;
        let frame = in_page::live_frame(&page.conn, &page.id, &entry.frame)
            .await
            .map_err(|_| ControlError::StaleRef(name.clone()))?;
        Ok(Target { name, entry, frame })
    }

    /// Waits until the element passes `checks`; its box in the tab's
    /// viewport. Errors say what failed, in terms of the ref.
    pub(super) async fn ready_box(
        &self,
        page: &PageTarget,
        target: &Target,
        checks: Checks,
        budget: Budget,
    ) -> Result<ElementBox, ControlError> {
        Ok(self.ready(page, target, checks, budget, false).await?.0)
    }

    /// Like [`Self::ready_box`]; with `focus`, the element is also focused
    /// for typing and the second value says what it is (`kind`, `type`).
    pub(super) async fn ready(
        &self,
        page: &PageTarget,
        target: &Target,
        checks: Checks,
        budget: Budget,
        focus: bool,
    ) -> Result<(ElementBox, Option<Focused>), ControlError> {
        let deadline = budget.deadline;
        let mut arg = target.arg();
        arg["focus"] = json!(focus);
        arg["enabled"] = json!(checks.enabled);
        arg["hitTest"] = json!(checks.hit_test);
        arg["stable"] = json!(checks.stable);
        let started = Instant::now();
        let name = &target.name;
        loop {
            let state: Actionable = in_page::call_script(&page.conn, &target.frame, "actionable", arg.clone()).await?;
            match state.error.as_deref() {
                Some("unknown") => return Err(ControlError::UnknownRef(name.clone())),
                Some(_) => return Err(ControlError::StaleRef(name.clone())),
                None => {}
            }
            let now = Instant::now();
            let stuck = now.duration_since(started) >= STUCK_PATIENCE || now >= deadline;
            let waited = |what: &str| ControlError::Timeout {
                what: format!("{name} to {what}"),
                ms: budget.timeout.as_millis() as u64,
            };
            match state.state.as_deref() {
                Some("ok") => {
                    let (dx, dy) = in_page::frame_offset(&page.conn, &page.id, &target.entry.frame).await?;
                    let element =
                        ElementBox { x: state.x + dx, y: state.y + dy, width: state.width, height: state.height };
                    return Ok((element, state.focus));
                }
                Some("disabled") if stuck => return Err(ControlError::Disabled(name.clone())),
                Some("covered") if stuck => {
                    let by = state.by.unwrap_or_else(|| "another element".into());
                    return Err(ControlError::Covered { element: name.clone(), by });
                }
                Some("hidden") if now >= deadline => return Err(waited("become visible")),
                Some("unstable") if now >= deadline => return Err(waited("stop moving")),
                _ => {}
            }
            tokio::time::sleep(Duration::from_millis(30)).await;
        }
    }
}
