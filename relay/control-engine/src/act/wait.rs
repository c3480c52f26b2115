//! `wait`: for a time, text, a selector, the URL, a load state or a
//! function of the agent's.

use std::time::Duration;

use cdp_client::protocol::runtime;
use serde_json::{Value, json};
use tokio::sync::broadcast;
use tokio::time::Instant;

use crate::api::{ACT_TIMEOUT_MAX_MS, WaitFor};
use crate::engine::Engine;
use crate::error::ControlError;
use crate::in_page::answer::Met;
use crate::in_page::{self, LiveFrame};
use crate::tabs::PageTarget;

impl Engine {
    pub(super) async fn wait(&self, page: &PageTarget, timeout: Duration, what: WaitFor) -> Result<(), ControlError> {
        let deadline = Instant::now() + timeout;
        let ms = timeout.as_millis() as u64;
        let timed_out = |what: String| ControlError::Timeout { what, ms };
        if let Some(time_ms) = what.time_ms {
            tokio::time::sleep(Duration::from_millis(time_ms.min(ACT_TIMEOUT_MAX_MS))).await;
            return Ok(());
        }
        let in_page = match (&what.text, &what.text_gone, &what.selector) {
            (Some(text), _, _) => Some((json!({"text": text}), format!("text \"{text}\" to appear"))),
            (_, Some(text), _) => Some((json!({"textGone": text}), format!("text \"{text}\" to go"))),
            (_, _, Some(selector)) => Some((json!({"selector": selector}), format!("'{selector}' to be visible"))),
            _ => None,
        };
        if let Some((arg, description)) = in_page {
            let met = wait_in_page(page, arg, deadline).await?;
            return if met { Ok(()) } else { Err(timed_out(description)) };
        }
        let (expression, description) = match (&what.url, &what.load_state, &what.function) {
            (Some(url), _, _) => (
                format!(
                    "(() => {{ const want = {}; const href = location.href; if (!want.includes('*')) return href.includes(want); const re = new RegExp('^' + want.split('*').map(p => p.replace(/[.*+?^${{}}()|[\\]\\\\]/g, '\\\\$&')).join('.*') + '$'); return re.test(href); }})()",
                    json!(url)
                ),
                format!("the URL to match '{url}'"),
            ),
            (_, Some(state), _) if state == "networkidle" => {
                // Chrome's own signal: no requests for 500 ms in this document.
                return self
                    .wait_lifecycle(page, "networkIdle", deadline)
                    .await
                    .map_err(|_| timed_out(format!("the page to reach '{state}'")));
            }
            (_, Some(state), _) => {
                let ready = match state.as_str() {
                    "domcontentloaded" => "document.readyState !== 'loading'",
                    "load" => "document.readyState === 'complete'",
                    other => {
                        return Err(ControlError::BadRequest(format!(
                            "loadState '{other}': use domcontentloaded, load or networkidle"
                        )));
                    }
                };
                (ready.to_string(), format!("the page to reach '{state}'"))
            }
            (_, _, Some(function)) => (
                format!(
                    "(async () => {{ const f = ({function}); return !!(typeof f === 'function' ? await f() : f); }})()"
                ),
                "the function to return true".to_string(),
            ),
            _ => {
                return Err(ControlError::BadRequest(
                    "wait needs one of timeMs, text, textGone, selector, url, loadState or fn".into(),
                ));
            }
        };
        let met = poll_until_true(page, &expression, deadline).await?;
        if met { Ok(()) } else { Err(timed_out(description)) }
    }

    /// Waits until the tab's current document reaches `event` (a
    /// `Page.lifecycleEvent` name); `Err` when the deadline passes first.
    async fn wait_lifecycle(&self, page: &PageTarget, event: &str, deadline: Instant) -> Result<(), ()> {
        let mut events = page.conn.subscribe();
        while !page.conn.reached(&page.id, event) {
            match tokio::time::timeout_at(deadline, events.recv()).await {
                Ok(Ok(_)) | Ok(Err(broadcast::error::RecvError::Lagged(_))) => {}
                Ok(Err(broadcast::error::RecvError::Closed)) | Err(_) => return Err(()),
            }
        }
        Ok(())
    }
}

/// Runs the page's `waitFor` script with `arg` until it is met (`true`) or
/// `deadline` passes (`false`), waiting on in the new document when a
/// navigation destroys the world mid-wait.
async fn wait_in_page(page: &PageTarget, mut arg: Value, deadline: Instant) -> Result<bool, ControlError> {
    let main = LiveFrame::main(&page.session, &page.id);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        arg["timeoutMs"] = json!(left.as_millis() as u64);
        match in_page::call_script::<Met>(&page.conn, &main, "waitFor", arg.clone()).await {
            Ok(result) if result.met => return Ok(true),
            Ok(_) if Instant::now() >= deadline => return Ok(false),
            Ok(_) => {}
            Err(ControlError::Page(_)) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(error) => return Err(error),
        }
    }
}

/// Evaluates `expression` in the page every 50 ms until it is true
/// (`true`) or `deadline` passes (`false`); its exception is the error.
async fn poll_until_true(page: &PageTarget, expression: &str, deadline: Instant) -> Result<bool, ControlError> {
    loop {
        let evaluate = runtime::Evaluate::awaited(expression.to_string());
        if let Ok(evaluated) = page.conn.client().send(&evaluate, Some(&page.session)).await {
            if let Some(details) = evaluated.exception_details {
                let text = details.exception.and_then(|e| e.description).unwrap_or_else(|| "an exception".into());
                return Err(ControlError::Page(format!("the wait threw: {text}")));
            }
            if evaluated.result.value == Some(Value::Bool(true)) {
                return Ok(true);
            }
        }
        if Instant::now() >= deadline {
            return Ok(false);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
