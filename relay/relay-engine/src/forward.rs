//! A call to the extension from its send to its answer, in one place: a
//! client's forwarded command (what the grant lets through, the books kept
//! before it goes, what its reply means to the relay besides the client),
//! the relay's own calls, and the undo commands of a client that left.
//! [`PendingCalls`](crate::pending::PendingCalls) holds each call until it
//! is answered: by its reply, or with an error when its extension
//! connection is gone. No file but this one and `pending.rs` reaches into
//! its table.

use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use grants::AskKind;
use serde::Deserialize;
use serde_json::{Value, json};
use shared_protocol::{CallId, RawValue, RelayMessage, SendCommand, TabId, encode};
use tokio::sync::oneshot;

use crate::cdp::{self, Command, code};
use crate::client::{ClientHandle, Replier};
use crate::error::CallError;
use crate::interception;
use crate::ledger::{self, Decision};
use crate::lending;
use crate::link::ExtensionLink;
use crate::pending::{EXTENSION_GONE, Pending, ReplyHook, RuntimeEnable};
use crate::questions::{AskedTab, Verdict};
use crate::queue::{self, Charge};
use crate::relay::Relay;
use crate::targets::EnableEffect;

/// What `debugger.sendCommand` adds around a command's method and params
/// (type, ids, keys), for the charge taken before the frame is built.
const FRAME_ENVELOPE: usize = 96;

/// The most `IO.read` asks Chrome for at once: Chrome's own default chunk.
/// A client may ask for more (`size`), and Chrome would send it in one
/// reply through the extension's one socket, past its message limit, which
/// would cut every client off; a smaller chunk is a valid answer (clients
/// read until `eof`).
pub(crate) const IO_READ_MAX: u64 = 10 << 20;

/// `IO.read`'s params with `size` brought down to [`IO_READ_MAX`], when
/// they ask for more.
fn io_read_within_budget(params: Option<&RawValue>) -> Option<String> {
    let mut params: serde_json::Map<String, Value> = serde_json::from_str(params?.get()).ok()?;
    let size = params.get("size")?.as_u64()?;
    (size > IO_READ_MAX).then(|| {
        params.insert("size".into(), IO_READ_MAX.into());
        Value::Object(params).to_string()
    })
}

impl Relay {
    /// The one path for the relay's own calls: register the pending reply,
    /// send, wait with a deadline, and never leave an entry behind.
    pub(crate) async fn roundtrip(
        &self,
        frame: impl FnOnce(CallId) -> (&'static str, String),
    ) -> Result<String, CallError> {
        let link = self.link().ok_or(CallError::NoExtension)?;
        let pending = &self.0.pending;
        let id = pending.next_id();
        let (name, text) = frame(id);
        let (tx, rx) = oneshot::channel();
        pending.insert(id, Pending::Internal { reply: tx, generation: link.generation, name });
        if !link.send(text).await {
            pending.take(id);
            return Err(CallError::Disconnected(name));
        }
        let timeout = self.0.config.call_timeout;
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => Err(CallError::Disconnected(name)),
            Err(_) => {
                pending.take(id);
                Err(CallError::Timeout(name, timeout))
            }
        }
    }

    /// Queues a command that puts a tab back after a client left; its answer
    /// is only logged.
    pub(crate) fn send_undo(&self, link: &ExtensionLink, tab_id: TabId, undo: ledger::Undo) {
        let id = self.0.pending.next_id();
        let params = RawValue::from_string(undo.params).ok();
        let frame = encode(&RelayMessage::DebuggerSendCommand(SendCommand {
            id,
            tab_id,
            session_id: undo.child.as_deref().map(Into::into),
            method: undo.method.as_str().into(),
            params: params.as_deref(),
        }));
        tracing::debug!(tab = tab_id, child = undo.child.as_deref(), method = %undo.method, "undoing a client's state");
        self.0.pending.insert(id, Pending::Undo { generation: link.generation, method: undo.method });
        if !link.send_now(frame) {
            self.0.pending.take(id);
            tracing::warn!(tab = tab_id, "the extension's queue is full: a client's state on this tab was not undone");
        }
    }

    /// Forwards a command to the extension without re-serialising its params.
    pub(crate) async fn forward(
        &self,
        client: &Arc<ClientHandle>,
        command: &Command<'_>,
        tab_id: TabId,
        child: Option<&str>,
    ) {
        let reply = Replier { client, id: command.id, session: command.session_id.as_deref() };
        // A grant's client stays on its sites and its own cookies.
        if let Some(grant) = client.grant()
            && !self.grant_lets_through(grant, &reply, command, tab_id, child).await
        {
            return;
        }
        if !self.start_in_flight(&reply) {
            return;
        }
        let Some(link) = self.link() else {
            client.finish_command();
            return reply.err(code::SERVER_ERROR, &CallError::NoExtension.to_string());
        };
        let Some(charge) = charge_command(&link, &reply, command, child) else { return };
        // The books are kept before the command is queued, so that a client
        // leaving meanwhile sees this one's state (see `forget_client`).
        let Some((decision, hook)) = self.keep_books(&link, client, command, tab_id, child) else {
            client.finish_command();
            return reply.err(code::SESSION_NOT_FOUND, crate::browser_domain::NO_SESSION);
        };
        let replaced;
        let (method, params): (&str, Option<&RawValue>) = match &decision {
            Decision::AnswerLocally => {
                client.finish_command();
                return reply.ok(&json!({}));
            }
            Decision::Refuse { code, message } => {
                client.finish_command();
                return reply.err(*code, message);
            }
            Decision::Forward => (&command.method, command.params),
            Decision::Replace { method, params } => {
                replaced = RawValue::from_string(params.clone()).ok();
                (method, replaced.as_deref())
            }
        };
        let id = self.0.pending.next_id();
        let frame = encode(&RelayMessage::DebuggerSendCommand(SendCommand {
            id,
            tab_id,
            session_id: child.map(Cow::Borrowed),
            method: Cow::Borrowed(method),
            params,
        }));
        self.0.pending.insert(
            id,
            Pending::Client {
                client: client.clone(),
                cdp_id: command.id,
                session: command.session_id.as_deref().map(Arc::from),
                generation: link.generation,
                hook,
                queued_at: Instant::now(),
            },
        );
        if !link.send_charged(frame, charge).await && self.0.pending.take(id).is_some() {
            client.finish_command();
            return reply.err(code::SERVER_ERROR, EXTENSION_GONE);
        }
        if method == "Page.captureScreenshot" && child.is_none() {
            self.watch_capture(id, tab_id);
        }
    }

    /// Whether a grant's command may go on: refused (and answered) when it
    /// leaves the grant's sites or cookies, reads the person's request, or
    /// is not for a tab the person has; asked of the person when its grant
    /// says so, and this client's later commands wait behind it.
    async fn grant_lets_through(
        &self,
        grant: &Arc<grants::Grant>,
        reply: &Replier<'_>,
        command: &Command<'_>,
        tab_id: TabId,
        child: Option<&str>,
    ) -> bool {
        let params = command.params.map(|p| p.get());
        let here = self.registry().by_tab(tab_id).map(|t| {
            let persons = lending::reads_a_request(&command.method) && t.names_a_persons_request(params);
            (t.target_id.clone(), t.url.clone(), t.handed_over, persons)
        });
        let Some((page, url, handed_over, persons_request)) = here else {
            reply.err(code::SESSION_NOT_FOUND, crate::browser_domain::NO_SESSION);
            return false;
        };
        // Every rule after the first reads the params; what they cannot
        // read (a lone surrogate, a number past f64: Chrome's parser takes
        // both) would pass them all. A grant's client sends what the relay
        // can read, or nothing.
        let refusal = if persons_request {
            Some((
                code::SERVER_ERROR,
                "Browser Relay: that request was the person's, sent while they had the tab".into(),
            ))
        } else if params.is_some_and(|p| serde_json::from_str::<Value>(p).is_err()) {
            let message =
                "Browser Relay: params a grant sends must be plain JSON (no lone surrogate, no number out of range)";
            Some((code::INVALID_PARAMS, message.into()))
        } else if let Some(refusal) = lending::refusal(grant, &command.method, params, child, Some(&page)) {
            Some((code::SERVER_ERROR, refusal))
        } else if handed_over && lending::refused_while_handed_over(&command.method) {
            Some((code::SERVER_ERROR, self.handed_refusal(tab_id)))
        } else {
            None
        };
        if let Some((code, message)) = refusal {
            reply.err(code, &message);
            return false;
        }
        // What the grant asks the person about waits for their answer
        // here, and this client's later commands behind it.
        let known = |site: &str| self.visited(grant.name.as_str(), site);
        let question = lending::command_question(grant, &command.method, params, child, Some(&page), &url, known);
        match question {
            Some((kind, site, what))
                if !(kind == AskKind::Input && self.input_runs(reply.client.id, tab_id, &site)) =>
            {
                let tab = AskedTab { tab_id, target_id: page.to_string(), url };
                self.ask_before_sending(grant, reply, kind, &site, what, tab).await
            }
            _ => true,
        }
    }

    /// Asks the person about a grant's command: `false` (answered) when they
    /// refuse, or when the tab changed meanwhile; the client gone meanwhile,
    /// nothing of it is sent.
    async fn ask_before_sending(
        &self,
        grant: &Arc<grants::Grant>,
        reply: &Replier<'_>,
        kind: AskKind,
        site: &str,
        what: String,
        tab: AskedTab,
    ) -> bool {
        let verdict = tokio::select! {
            verdict = self.ask(grant, kind, site, what, Some(&tab)) => verdict,
            // Gone meanwhile: nothing of it is sent.
            () = reply.client.kill.cancelled() => return false,
        };
        if let Verdict::Refused(why) = verdict {
            reply.err(code::SERVER_ERROR, &why);
            return false;
        }
        // The yes was for this tab as it was: where it is now, and
        // whose, is read again.
        let now = self.registry().by_tab(tab.tab_id).map(|t| (grants::host_of(&t.url), t.handed_over));
        let changed = match now {
            None => Some("the tab was closed"),
            Some((_, true)) => Some("the tab was handed to the person"),
            Some((host, _)) if host != grants::host_of(&tab.url) => Some("the tab went to another site"),
            _ if self.grant_named(grant.name.as_str()).is_none_or(|g| !Arc::ptr_eq(&g, grant)) => {
                Some("the grant ended")
            }
            _ => None,
        };
        if let Some(changed) = changed {
            let message = format!("Browser Relay: {changed} while the person was asked; nothing was done");
            reply.err(code::SERVER_ERROR, &message);
            return false;
        }
        match kind {
            AskKind::Input => self.start_input_run(reply.client.id, tab.tab_id, site),
            AskKind::NewSite => self.visit(grant.name.as_str(), site),
            _ => {}
        }
        true
    }

    /// What the command does to the tab's books (`None`: the tab is gone),
    /// and what its reply will mean to them.
    fn keep_books(
        &self,
        link: &ExtensionLink,
        client: &Arc<ClientHandle>,
        command: &Command<'_>,
        tab_id: TabId,
        child: Option<&str>,
    ) -> Option<(Decision, Option<ReplyHook>)> {
        let mut registry = self.registry();
        let target = registry.by_tab_mut(tab_id)?;
        Some(match &*command.method {
            // Other clients on this shared session keep their Runtime.
            "Runtime.disable" if !target.runtime_disable(client.id, child) => (Decision::AnswerLocally, None),
            "Runtime.disable" => (Decision::Forward, None),
            "Runtime.enable" => {
                let effect = target.runtime_enable(client.id, child);
                tracing::debug!(client = client.id, tab = tab_id, child, ?effect, "Runtime.enable");
                let enable = RuntimeEnable { tab: tab_id, child: child.map(Arc::from), effect };
                (Decision::Forward, Some(ReplyHook::RuntimeEnable(enable)))
            }
            "IO.read" => match io_read_within_budget(command.params) {
                Some(params) => (Decision::Replace { method: "IO.read", params }, None),
                None => (Decision::Forward, None),
            },
            method if interception::is_interception(method) => {
                let outcome = target.interception.command(client.id, child, method, command.params);
                for route in outcome.routes {
                    self.route_paused(Some(link), target, route);
                }
                (outcome.decision, None)
            }
            method => {
                let decision = target.ledger.record(client.id, child, method, command.params);
                let hook = if method == "Page.addScriptToEvaluateOnNewDocument" {
                    Some(ReplyHook::ScriptAdded { tab: tab_id, child: child.map(Arc::from) })
                } else {
                    client.grant().filter(|_| lending::answers_cookies(method)).cloned().map(ReplyHook::OnlyItsCookies)
                };
                (decision, hook)
            }
        })
    }

    /// One reply: the raw result (if any), or Chrome's error.
    pub(crate) fn on_reply(&self, id: CallId, reply: Result<Option<&str>, shared_protocol::CallError>) {
        let Some(pending) = self.0.pending.take(id) else {
            tracing::debug!(id, "reply for a call nobody waits for (timed out?)");
            return;
        };
        match pending {
            Pending::Client { client, cdp_id, session, hook, queued_at, .. } => {
                client.finish_command();
                let took = queued_at.elapsed();
                self.0.answered.fetch_add(1, Ordering::Relaxed);
                self.0.answered_ns.fetch_add(took.as_nanos() as u64, Ordering::Relaxed);
                tracing::trace!(id, cdp_id, micros = took.as_micros() as u64, "extension round trip");
                let session = session.as_deref();
                if let Some(hook) = &hook {
                    self.apply_reply_hook(&client, hook, &reply, session);
                }
                let text = match &reply {
                    Err(error) => {
                        let message = self.0.protocol_methods.explain(&error.message);
                        cdp::error(Some(cdp_id), error.code.unwrap_or(code::SERVER_ERROR), &message, session)
                    }
                    Ok(Some(result)) => match &hook {
                        Some(ReplyHook::OnlyItsCookies(grant)) => {
                            let kept = lending::only_its_cookies(&grant.sites, result);
                            cdp::response(cdp_id, kept.as_deref().unwrap_or(result), session)
                        }
                        _ => cdp::response(cdp_id, result, session),
                    },
                    Ok(None) => cdp::response(cdp_id, "{}", session),
                };
                client.send(text);
            }
            Pending::Internal { reply: tx, .. } => {
                let result = match reply {
                    Err(error) => Err(CallError::Chrome(error.message)),
                    Ok(result) => Ok(result.unwrap_or("null").to_string()),
                };
                let _ = tx.send(result);
            }
            Pending::Undo { method, .. } => {
                if let Err(error) = reply {
                    tracing::debug!(%method, "undoing a client's state: {}", error.message);
                }
            }
        }
    }

    /// What a client's reply means to the tab's books, applied before the
    /// client gets it.
    fn apply_reply_hook(
        &self,
        client: &ClientHandle,
        hook: &ReplyHook,
        reply: &Result<Option<&str>, shared_protocol::CallError>,
        session: Option<&str>,
    ) {
        match hook {
            ReplyHook::ScriptAdded { tab, child } => {
                #[derive(Deserialize)]
                struct Added {
                    identifier: String,
                }
                let Ok(Some(result)) = reply else { return };
                if let Ok(added) = serde_json::from_str::<Added>(result)
                    && let Some(target) = self.registry().by_tab_mut(*tab)
                {
                    target.ledger.script_added(client.id, child.as_deref(), added.identifier);
                }
            }
            ReplyHook::RuntimeEnable(enable) => {
                // See `Target::runtime`: replay before the answer, as Chrome would.
                let mut registry = self.registry();
                let Some(target) = registry.by_tab_mut(enable.tab) else { return };
                match (&enable.effect, reply.is_err()) {
                    (EnableEffect::Replay, false) => {
                        let live = target.runtime_join(client.id, enable.child.as_deref());
                        tracing::debug!(client = client.id, replayed = live.len(), "Runtime.enable replay");
                        for params in live {
                            client.send(cdp::event("Runtime.executionContextCreated", &params, session));
                        }
                    }
                    (EnableEffect::EnablesChrome, true) => {
                        target.runtime_disable(client.id, enable.child.as_deref());
                    }
                    (EnableEffect::Replay, true) => {
                        target.runtime_join_failed(client.id, enable.child.as_deref());
                    }
                    (EnableEffect::EnablesChrome, false) => {}
                }
            }
            ReplyHook::OnlyItsCookies(_) => {}
        }
    }
}

/// Room in the extension's queue for a client's command, taken before
/// anything is booked, so a refused command leaves no trace (`None`: it
/// was refused and answered, or the client dropped). The frame is the
/// command re-wrapped: its size is the params' plus a small envelope.
fn charge_command(
    link: &ExtensionLink,
    reply: &Replier<'_>,
    command: &Command<'_>,
    child: Option<&str>,
) -> Option<Charge> {
    let client = reply.client;
    let size =
        command.params.map_or(0, |p| p.get().len()) + command.method.len() + child.map_or(0, str::len) + FRAME_ENVELOPE;
    match link.charge_command(&client.commands, size) {
        Ok(charge) => Some(charge),
        Err(over) if over.shared => {
            client.finish_command();
            let message = format!(
                "the Browser Relay extension is behind ({} of commands wait for it): retry when replies come",
                over.describe()
            );
            reply.err(code::SERVER_ERROR, &message);
            None
        }
        Err(over) => {
            client.finish_command();
            tracing::warn!(client = client.id, "client sends commands faster than the extension takes them");
            let reason =
                format!("Browser Relay: commands sent faster than the extension takes them: {}", over.describe());
            client.disconnect(queue::POLICY_VIOLATION, &reason);
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{IO_READ_MAX, io_read_within_budget};
    use shared_protocol::RawValue;

    #[test]
    fn a_read_of_a_stream_asks_chrome_for_at_most_its_default_chunk() {
        let read = |json: &str| io_read_within_budget(Some(&RawValue::from_string(json.to_string()).unwrap()));
        assert_eq!(
            read(r#"{"handle":"7","size":1073741824}"#),
            Some(format!(r#"{{"handle":"7","size":{IO_READ_MAX}}}"#))
        );
        assert_eq!(read(r#"{"handle":"7","size":65536}"#), None, "a smaller read goes as it is");
        assert_eq!(read(r#"{"handle":"7"}"#), None, "Chrome's default is the cap");
        assert_eq!(io_read_within_budget(None), None);
    }
}
