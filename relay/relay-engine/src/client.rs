//! One connected CDP client as the rest of the relay sees it: its queue
//! (a client that does not read is dropped), the sessions it holds and the
//! targets it asked to be told of, its commands in flight, and the reply to
//! one of its commands. Serving its socket is `routing.rs`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use axum::extract::ws::{Message, Utf8Bytes};
use serde::Deserialize;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::cdp;
use crate::config::RelayConfig;
use crate::queue::{self, Charge, Farewell, Meter, Outgoing, OverBudget, SharedFrame};

/// One entry of CDP's `TargetFilter`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
pub(crate) struct FilterEntry {
    #[serde(default, rename = "type")]
    pub target_type: Option<String>,
    #[serde(default)]
    pub exclude: bool,
}

/// CDP's `TargetFilter`: entries are tried in order and the first whose type
/// matches (or that has no type) decides; no match excludes. Absent, it is
/// `[{type: "browser", exclude: true}, {type: "tab", exclude: true}, {}]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TargetFilter(Vec<FilterEntry>);

impl Default for TargetFilter {
    fn default() -> Self {
        let exclude = |t: &str| FilterEntry { target_type: Some(t.into()), exclude: true };
        Self(vec![exclude("browser"), exclude("tab"), FilterEntry::default()])
    }
}

impl TargetFilter {
    pub(crate) fn from_param(entries: Option<Vec<FilterEntry>>) -> Self {
        entries.map_or_else(Self::default, Self)
    }

    pub(crate) fn matches(&self, target_type: &str) -> bool {
        self.0.iter().find(|e| e.target_type.as_deref().is_none_or(|t| t == target_type)).is_some_and(|e| !e.exclude)
    }
}

/// What a session id a client holds stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SessionKind {
    /// A page session on the target with this page id.
    Page(Arc<str>),
    /// A Puppeteer tab session on the target with this page id.
    Tab(Arc<str>),
    /// An emulated browser session (`Target.attachToBrowserTarget`).
    Browser,
}

#[derive(Debug, Default)]
pub(crate) struct ClientState {
    pub(crate) auto_attach: Option<TargetFilter>,
    pub(crate) discover: Option<TargetFilter>,
    pub(crate) sessions: HashMap<Arc<str>, SessionKind>,
}

/// One connected CDP client, as the rest of the relay sees it.
#[derive(Debug)]
pub(crate) struct ClientHandle {
    pub id: u64,
    /// What the client calls itself ([`client_name`]), for the extension's
    /// options page.
    pub name: Arc<str>,
    /// Its whole `User-Agent` (visible ASCII, cut), for the dashboard.
    pub user_agent: Arc<str>,
    /// When it connected (ms since the epoch).
    pub since_ms: u64,
    /// The commands it sent.
    pub commands_sent: std::sync::atomic::AtomicU64,
    /// The managed profile a piped client drives (`None`: the user's tabs).
    pub profile: Option<Arc<str>>,
    /// Whose key it presented: the person's (every shared tab) or a
    /// grant's (its own tabs, within its sites: `crate::grants`).
    pub access: grants::Access,
    tx: mpsc::Sender<Outgoing>,
    /// Bytes queued to this client, and to all clients.
    queued: Arc<Meter>,
    all_clients: Arc<Meter>,
    /// Bytes of this client's commands queued to the extension.
    pub(crate) commands: Arc<Meter>,
    /// Cancelled when the connection ends: whatever waits on its behalf stops.
    pub(crate) kill: CancellationToken,
    /// The close frame it gets when the relay ends the connection.
    pub(crate) farewell: Farewell,
    in_flight: InFlight,
    /// For page-level endpoints: the session commands without a `sessionId` use.
    pub(crate) default_session: Option<Arc<str>>,
    state: Mutex<ClientState>,
}

impl ClientHandle {
    /// A client connection's handle, and the receiving end of its queue for
    /// its writer: the same frame and byte budgets for every client socket,
    /// the relay's own and the piped ones (`all_clients`: the bytes queued
    /// to every client together).
    pub(crate) fn new(
        id: u64,
        label: ClientLabel,
        profile: Option<Arc<str>>,
        access: grants::Access,
        default_session: Option<Arc<str>>,
        config: &RelayConfig,
        all_clients: Arc<Meter>,
    ) -> (Arc<Self>, mpsc::Receiver<Outgoing>) {
        let (tx, rx) = mpsc::channel(config.client_queue);
        let client = Arc::new(ClientHandle {
            id,
            name: label.name.into(),
            user_agent: label.user_agent.into(),
            since_ms: activity::now_millis(),
            commands_sent: std::sync::atomic::AtomicU64::new(0),
            profile,
            access,
            tx,
            queued: Meter::new(config.client_queue_bytes),
            all_clients,
            commands: Meter::new(config.client_command_bytes),
            kill: CancellationToken::new(),
            farewell: Farewell::default(),
            in_flight: InFlight::default(),
            default_session,
            state: Mutex::new(ClientState::default()),
        });
        (client, rx)
    }

    /// The grant it came through, if it did.
    pub(crate) fn grant(&self) -> Option<&Arc<grants::Grant>> {
        self.access.grant()
    }

    pub(crate) fn state(&self) -> MutexGuard<'_, ClientState> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Queues a frame. A client that lets its queue fill up (in frames or
    /// bytes) is too slow to keep: it is disconnected rather than allowed to
    /// stall everyone else or hold the relay's memory.
    pub(crate) fn send(&self, frame: impl Into<Utf8Bytes>) {
        let frame = frame.into();
        let charge = Meter::charge(&self.queued, &self.all_clients, frame.len());
        self.enqueue(frame, charge);
    }

    /// Queues a frame built once for many clients (see [`SharedFrame`]).
    pub(crate) fn send_shared(&self, frame: &SharedFrame) {
        self.enqueue(frame.text.clone(), frame.charge(&self.queued));
    }

    fn enqueue(&self, frame: Utf8Bytes, charge: Result<Charge, OverBudget>) {
        let charge = match charge {
            Ok(charge) => charge,
            Err(over) => return self.drop_unread(&over.describe()),
        };
        match self.tx.try_send(Outgoing { message: Message::Text(frame), _charge: charge }) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(_)) => {
                self.drop_unread(&format!("{} messages queued", self.tx.max_capacity()));
            }
            Err(mpsc::error::TrySendError::Closed(_)) => {}
        }
    }

    fn drop_unread(&self, why: &str) {
        tracing::warn!(client = self.id, "client is not reading its messages ({why}); disconnecting it");
        self.disconnect(
            queue::POLICY_VIOLATION,
            &format!("Browser Relay: this client did not read its messages: {why}"),
        );
    }

    /// Ends the connection now, dropping what is queued; the peer gets
    /// `reason` in the close frame if it still takes one.
    pub(crate) fn disconnect(&self, code: u16, reason: &str) {
        let _ = self.farewell.set(queue::close_frame(code, reason));
        self.kill.cancel();
    }

    /// Sends a close frame after everything already queued, then ends.
    pub(crate) fn close(&self, code: u16, reason: &str) {
        let close =
            Outgoing { message: Message::Close(Some(queue::close_frame(code, reason))), _charge: Charge::none() };
        if self.tx.try_send(close).is_err() {
            self.kill.cancel();
        }
    }

    /// Takes one of its slots for a command waiting on the extension
    /// (`false`: all `max` are taken).
    pub(crate) fn start_command(&self, max: usize) -> bool {
        self.in_flight.try_start(max)
    }

    pub(crate) fn finish_command(&self) {
        self.in_flight.finish();
    }

    pub(crate) fn forget_session(&self, session: &str) {
        self.state().sessions.remove(session);
    }

    pub(crate) fn discover_filter(&self) -> Option<TargetFilter> {
        self.state().discover.clone()
    }
}

/// A reply addressed to the session a command came on.
pub(crate) struct Replier<'a> {
    pub(crate) client: &'a Arc<ClientHandle>,
    pub(crate) id: i64,
    pub(crate) session: Option<&'a str>,
}

impl Replier<'_> {
    pub(crate) fn ok(&self, result: &Value) {
        self.client.send(cdp::response(self.id, &result.to_string(), self.session));
    }

    pub(crate) fn err(&self, code: i64, message: &str) {
        self.client.send(cdp::error(Some(self.id), code, message, self.session));
    }
}

/// The name a client goes by on the extension's options page: the first
/// word of its `User-Agent` (`Playwright/1.57.0`, `Puppeteer`), at most 64
/// visible ASCII characters, or `CDP client` when it sent none.
pub fn client_name(user_agent: Option<&str>) -> String {
    let word = user_agent.and_then(|ua| ua.split_whitespace().next()).unwrap_or_default();
    let name: String = word.chars().filter(char::is_ascii_graphic).take(64).collect();
    if name.is_empty() { "CDP client".into() } else { name }
}

/// How a client is shown: its [`client_name`], and its whole user agent
/// (visible ASCII and spaces, at most 200 characters) for the dashboard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientLabel {
    pub name: String,
    pub user_agent: String,
}

impl ClientLabel {
    pub fn of(user_agent: Option<&str>) -> Self {
        let whole: String =
            user_agent.unwrap_or_default().chars().filter(|c| *c == ' ' || c.is_ascii_graphic()).take(200).collect();
        Self { name: client_name(user_agent), user_agent: whole.trim().to_string() }
    }
}

/// Counts a client's commands waiting on the extension.
#[derive(Debug, Default)]
pub(crate) struct InFlight(AtomicUsize);

impl InFlight {
    pub(crate) fn try_start(&self, max: usize) -> bool {
        self.0.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < max).then_some(n + 1)).is_ok()
    }

    pub(crate) fn finish(&self) {
        let _ = self.0.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
    }
}

#[cfg(test)]
mod tests {
    use super::{TargetFilter, client_name};

    fn filter(json: &str) -> TargetFilter {
        TargetFilter::from_param(Some(serde_json::from_str(json).unwrap()))
    }

    #[test]
    fn default_filter_is_chromes() {
        let f = TargetFilter::from_param(None);
        assert!(f.matches("page") && f.matches("iframe") && f.matches("worker"));
        assert!(!f.matches("tab") && !f.matches("browser"));
    }

    #[test]
    fn puppeteer_filter_attaches_tabs_not_pages() {
        let f = filter(r#"[{"type":"page","exclude":true},{}]"#);
        assert!(f.matches("tab") && f.matches("browser") && !f.matches("page"));
    }

    #[test]
    fn explicit_filters() {
        assert!(filter("[{}]").matches("browser"));
        assert!(!filter("[]").matches("page"), "an empty filter matches nothing");
        let only_pages = filter(r#"[{"type":"page"}]"#);
        assert!(only_pages.matches("page") && !only_pages.matches("tab"));
    }

    #[test]
    fn clients_are_named_by_the_first_word_of_their_user_agent() {
        let playwright = "Playwright/1.57.0 (x64; debian 12) node/20.20";
        assert_eq!(client_name(Some(playwright)), "Playwright/1.57.0");
        assert_eq!(client_name(Some("Puppeteer 24.1.0")), "Puppeteer");
        assert_eq!(client_name(None), "CDP client");
        assert_eq!(client_name(Some("   ")), "CDP client");
        assert_eq!(client_name(Some("<b>\u{7}é</b>")), "<b></b>", "visible ASCII only (shown as text)");
        assert_eq!(client_name(Some(&"x".repeat(500))).len(), 64);
    }
}
