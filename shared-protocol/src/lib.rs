//! The wire protocol between the Browser Relay server ("the relay") and its
//! Chrome extension. See `PROTOCOL.md` in this crate for the contract with
//! examples; this module is its executable form.
//!
//! Shape: the extension is a thin, allow-listed forwarder of `chrome.*` calls
//! and events. The relay decides everything else (targets, sessions, which tab
//! to attach). Every message is one JSON object with exactly one key naming the
//! message, e.g. `{"debugger.sendCommand": {"id": 7, "tabId": 3, ...}}`.
//!
//! Payloads the relay only passes through (CDP `params`, results) are
//! [`RawValue`]s borrowed from the received frame, so neither side re-parses
//! or re-serialises them. This crate does no I/O and compiles for native
//! targets and `wasm32-unknown-unknown`.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
pub use serde_json::value::RawValue;

pub mod auth;

/// Bumped on any incompatible change. The relay refuses another version
/// (closing the socket with [`close_code::PROTOCOL_MISMATCH`]).
/// Version 2: the pairing token never travels; both sides prove it
/// ([`auth`]). Version 3: the proofs are bound to the relay's port.
/// Version 4: the extension's proof comes alone (`prove`) before its
/// `hello`, so the relay reads no more than [`PRE_PROOF_BYTES`] from a
/// connection that has not proved the pairing. Version 5: a frame of the
/// extension's may hold several messages, one per line ([`messages`]),
/// once the relay's `welcome` says 5; a relay of version 5 still takes
/// version 4's extensions (one message per frame). Version 6: grants
/// (`grants`, a tab's `grant`, `tab.grant`, `tabs.create`'s `grant`);
/// a relay sends `grants` only to an extension of version 6 or later.
/// Version 7: the person in the loop (`ask`, `ask.closed`, `ask.answer`,
/// `handoff`, `handoff.end`, `handoff.done`). Version 8: the extension
/// proves the pairing with a key of its own, derived from the install's
/// secret (`auth::KeyPurpose::Extension`), and a pairing link's `welcome`
/// seals that key: the secret never reaches the browser. An extension
/// holding a secret from before proves the key it derives from it and
/// keeps that key in its place. Older extensions (which prove the secret
/// itself) are told to update.
pub const PROTOCOL_VERSION: u32 = 8;

/// The first version whose extension keeps grants' tab groups.
pub const GRANTS_SINCE: u32 = 6;

/// The first version whose extension asks the person (notifications) and
/// hands tabs over.
pub const ASKS_SINCE: u32 = 7;

/// The oldest extension protocol the relay still takes: 8, the first
/// whose extension holds a key of its own rather than the secret.
pub const OLDEST_PROTOCOL_VERSION: u32 = 8;

/// The extension protocols a relay takes, oldest to newest: its `welcome`
/// and its status route (`GET /extension/status`) say them, so that the
/// extension's options page can tell the person which of the two to update.
/// Optional in the `welcome` (a relay from before it sends none), so no
/// version bump: an extension that does not know the field ignores it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProtocolRange {
    pub oldest: u32,
    pub newest: u32,
}

impl ProtocolRange {
    /// This build's: [`OLDEST_PROTOCOL_VERSION`] to [`PROTOCOL_VERSION`].
    pub const THIS: Self = Self { oldest: OLDEST_PROTOCOL_VERSION, newest: PROTOCOL_VERSION };

    pub fn takes(&self, version: u32) -> bool {
        (self.oldest..=self.newest).contains(&version)
    }
}

/// The first version whose extension may batch messages into a frame.
pub const BATCHES_SINCE: u32 = 5;

/// The messages of one frame from the extension: one, or (protocol 5)
/// several, one per line. Compact JSON has no raw newline (a string's is
/// escaped), so a line is a message.
pub fn messages(frame: &str) -> impl Iterator<Item = &str> {
    frame.split('\n').filter(|line| !line.is_empty())
}

/// What the relay reads, at most, from an extension connection before its
/// proof checks out (`auth` and `prove` are about 100 bytes each): a local
/// program that forged the extension's Origin can make it hold no more.
pub const PRE_PROOF_BYTES: usize = 8 * 1024;

/// WebSocket subprotocol the extension offers and the relay selects.
pub const SUBPROTOCOL: &str = "browser-relay.v2";

/// The subprotocol of version 1 extensions, which sent the token itself:
/// the relay accepts the socket only to close it with a reason that says to
/// update the extension.
pub const SUBPROTOCOL_V1: &str = "browser-relay.v1";

/// A Chrome tab id (`chrome.tabs.Tab.id`).
/// The relay's default port for `/extension`, `/cdp` and `/json/*` (the
/// extension's default too).
pub const DEFAULT_RELAY_PORT: u16 = 18792;

/// Pages no client may drive through Browser Relay: browser UI, DevTools,
/// other extensions (and Browser Relay's own pages), and the Web Store,
/// which Chrome protects. One rule for both sides: the extension never
/// shares such a tab, and the relay never announces such a child target
/// (an extension's frame inside a shared page). Case-insensitive, as
/// browsers treat schemes.
pub fn is_restricted_url(url: &str) -> bool {
    const PREFIXES: [&str; 10] = [
        "chrome://",
        "chrome-untrusted://",
        "chrome-search://",
        "chrome-extension://",
        "devtools://",
        "edge://",
        "view-source:",
        "about:devtools",
        "https://chromewebstore.google.com/",
        "https://chrome.google.com/webstore",
    ];
    let url = url.trim();
    PREFIXES.iter().any(|prefix| url.len() >= prefix.len() && url[..prefix.len()].eq_ignore_ascii_case(prefix))
}

pub type TabId = i64;
/// A Chrome window id.
pub type WindowId = i64;
/// Correlates a relay call with the extension's [`Reply`].
pub type CallId = u64;

/// WebSocket close codes with a meaning in this protocol.
pub mod close_code {
    /// The hello carried an unsupported protocol version.
    pub const PROTOCOL_MISMATCH: u16 = 4001;
    /// The extension sent no hello in time.
    pub const HELLO_TIMEOUT: u16 = 4002;
    /// A message could not be understood at all.
    pub const BAD_MESSAGE: u16 = 4003;
    /// A proof of the pairing was wrong (sent by whichever side checked it).
    pub const NOT_PAIRED: u16 = 4004;
}

/// What the relay knows about a tab. Sent by the extension in the hello, in
/// tab events and as the result of `tabs.create`/`tabs.update`/`tabs.query`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TabInfo {
    pub tab_id: TabId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_id: Option<WindowId>,
    #[serde(default)]
    pub url: String,
    #[serde(default)]
    pub title: String,
    /// The tab's icon as Chrome shows it (`chrome.tabs.Tab.favIconUrl`),
    /// when it has one; sent for shared tabs only, as `url` and `title`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fav_icon_url: Option<String>,
    #[serde(default)]
    pub active: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opener_tab_id: Option<TabId>,
    /// The grant whose tab group holds the tab (`None`: the person's own
    /// "Browser Relay" group, or none); protocol 6.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant: Option<String>,
}

/// One grant as the extension keeps it (`grants`): its tab groups' title
/// and colour, and where its tabs may send the person's cookies.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GrantGroup {
    /// The grant's name: its groups' title.
    pub name: String,
    /// Chrome's tab group colour (`chrome.tabGroups.Color`).
    pub color: String,
    /// One RE2 expression per site the grant may use
    /// (declarativeNetRequest's `regexFilter`): a request of one of its
    /// tabs to any other URL goes without the person's cookies, and the
    /// cookies its answer sets are dropped. Empty: every site.
    #[serde(default)]
    pub sites: Vec<String>,
}

/// The person's answer to a question (`ask.answer`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum AskAnswer {
    Allow,
    Deny,
}

/// The extension's third message, once both sides proved the pairing: who
/// it is and what it shares.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Hello {
    pub protocol_version: u32,
    pub extension_version: String,
    /// `navigator.userAgent` of the real browser.
    pub user_agent: String,
    /// Product and version as Chrome reports it, e.g. `Chrome/156.0.8078.73`.
    pub browser_version: String,
    /// Tabs the extension has the debugger attached to right now, so the relay
    /// re-announces them after either side restarted.
    #[serde(default)]
    pub attached_tabs: Vec<TabInfo>,
}

/// `debugger.sendCommand`: a CDP command for a tab, or for one of its flat
/// child sessions (an iframe or worker) when `session_id` is set.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendCommand<'a> {
    pub id: CallId,
    pub tab_id: TabId,
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub method: Cow<'a, str>,
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub params: Option<&'a RawValue>,
}

/// Filter of `tabs.query`; absent fields do not filter.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TabQuery {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_focused_window: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_id: Option<WindowId>,
}

/// One CDP client of the relay, as the extension shows it to the user.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientInfo {
    /// The relay's number for the connection (unique while the relay runs).
    pub id: u64,
    /// What the client calls itself: the first word of its `User-Agent`
    /// (`Playwright/1.57.0`, `Puppeteer`, `browser-relay/0.1.0` for the
    /// agent API), or `CDP client`.
    pub name: String,
}

/// The clients holding a session on one shared tab.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TabClients {
    pub tab_id: TabId,
    pub clients: Vec<ClientInfo>,
}

/// Relay → extension. Every variant but `ping`/`pong`/`welcome`/`clients` is
/// a call the extension answers with exactly one [`Reply`] carrying the same
/// `id`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all_fields = "camelCase")]
pub enum RelayMessage<'a> {
    /// Answer to `auth`: the relay's nonce and its proof of the pairing
    /// over both nonces ([`auth::Prover::Relay`]); for an `auth` that named
    /// a pairing code, made with the code.
    #[serde(rename = "challenge")]
    Challenge { nonce: String, proof: String },
    /// Answer to the hello: the relay accepted the extension. After a
    /// pairing code (proved by the extension, and spent), `sealed` holds
    /// the install's secret sealed for the code ([`auth::seal`]).
    #[serde(rename = "welcome")]
    Welcome {
        protocol_version: u32,
        relay_version: String,
        /// The protocols the relay takes (none from a relay older than
        /// the field).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        protocols: Option<ProtocolRange>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sealed: Option<String>,
    },
    #[serde(rename = "debugger.attach")]
    DebuggerAttach { id: CallId, tab_id: TabId },
    #[serde(rename = "debugger.detach")]
    DebuggerDetach { id: CallId, tab_id: TabId },
    #[serde(rename = "debugger.sendCommand", borrow)]
    DebuggerSendCommand(SendCommand<'a>),
    /// Result: the new tab's [`TabInfo`].
    #[serde(rename = "tabs.create")]
    TabsCreate {
        id: CallId,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        url: Option<String>,
        #[serde(default)]
        active: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        opener_tab_id: Option<TabId>,
        /// A grant's tab (protocol 6): in that grant's tab group, in the
        /// background, in a window of the grant's own (made, unfocused,
        /// for its first tab), never taking the person's focus.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        grant: Option<String>,
    },
    /// The extension refuses to remove the user's last tab.
    #[serde(rename = "tabs.remove")]
    TabsRemove { id: CallId, tab_id: TabId },
    /// Result: the updated [`TabInfo`].
    #[serde(rename = "tabs.update")]
    TabsUpdate {
        id: CallId,
        tab_id: TabId,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        url: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        active: Option<bool>,
    },
    /// Result: an array of [`TabInfo`].
    #[serde(rename = "tabs.query")]
    TabsQuery { id: CallId, query: TabQuery },
    #[serde(rename = "windows.update")]
    WindowsUpdate {
        id: CallId,
        window_id: WindowId,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        focused: Option<bool>,
    },
    #[serde(rename = "ping")]
    Ping { nonce: u64 },
    #[serde(rename = "pong")]
    Pong { nonce: u64 },
    /// A notice, not a call: which clients hold each shared tab (tabs with
    /// none are left out), sent when it changes. The extension shows it on
    /// its options page.
    #[serde(rename = "clients")]
    Clients { tabs: Vec<TabClients> },
    /// A notice, not a call (protocol 6): every grant, sent after the
    /// welcome and whenever one is made, revoked or expires. The extension
    /// keeps a tab group per grant and window, titled with its name in its
    /// colour; a tab in it is shared with that grant. The groups of a
    /// grant no longer listed are dissolved and their tabs unshared.
    #[serde(rename = "grants")]
    Grants { grants: Vec<GrantGroup> },
    /// A notice (protocol 7): a grant's action is held until the person
    /// answers; the extension shows `title` and `message` in a
    /// notification with Allow and Deny, and answers with `ask.answer`.
    #[serde(rename = "ask")]
    Ask { id: u64, grant: String, tab_id: TabId, title: String, message: String },
    /// A notice (protocol 7): the question `id` needs no answer any more
    /// (answered elsewhere, or timed out): its notification goes.
    #[serde(rename = "ask.closed")]
    AskClosed { id: u64 },
    /// A notice (protocol 7): a grant's agent hands the tab to the person
    /// (a login, a CAPTCHA): the tab comes to the front, its group's title
    /// and badge say "`grant` needs you: `reason`", and a notification
    /// offers Done (`handoff.done`).
    #[serde(rename = "handoff")]
    Handoff { tab_id: TabId, grant: String, reason: String },
    /// A notice (protocol 7): the handoff of `tab_id` is over (Done, or its
    /// time ran out): the group's title, the badge and the notification
    /// are as before.
    #[serde(rename = "handoff.end")]
    HandoffEnd { tab_id: TabId },
}

impl RelayMessage<'_> {
    /// The call id, for messages the extension must answer.
    #[cfg(any(test, feature = "testing"))]
    pub fn call_id(&self) -> Option<CallId> {
        match self {
            Self::DebuggerAttach { id, .. }
            | Self::DebuggerDetach { id, .. }
            | Self::TabsCreate { id, .. }
            | Self::TabsRemove { id, .. }
            | Self::TabsUpdate { id, .. }
            | Self::TabsQuery { id, .. }
            | Self::WindowsUpdate { id, .. } => Some(*id),
            Self::DebuggerSendCommand(cmd) => Some(cmd.id),
            Self::Challenge { .. }
            | Self::Welcome { .. }
            | Self::Ping { .. }
            | Self::Pong { .. }
            | Self::Clients { .. }
            | Self::Grants { .. }
            | Self::Ask { .. }
            | Self::AskClosed { .. }
            | Self::Handoff { .. }
            | Self::HandoffEnd { .. } => None,
        }
    }

    /// The `chrome.*` name of the call, e.g. `debugger.sendCommand`.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Challenge { .. } => "challenge",
            Self::Welcome { .. } => "welcome",
            Self::DebuggerAttach { .. } => "debugger.attach",
            Self::DebuggerDetach { .. } => "debugger.detach",
            Self::DebuggerSendCommand(_) => "debugger.sendCommand",
            Self::TabsCreate { .. } => "tabs.create",
            Self::TabsRemove { .. } => "tabs.remove",
            Self::TabsUpdate { .. } => "tabs.update",
            Self::TabsQuery { .. } => "tabs.query",
            Self::WindowsUpdate { .. } => "windows.update",
            Self::Ping { .. } => "ping",
            Self::Pong { .. } => "pong",
            Self::Clients { .. } => "clients",
            Self::Grants { .. } => "grants",
            Self::Ask { .. } => "ask",
            Self::AskClosed { .. } => "ask.closed",
            Self::Handoff { .. } => "handoff",
            Self::HandoffEnd { .. } => "handoff.end",
        }
    }
}

/// An error reply: Chrome's own message where Chrome produced it
/// (e.g. "Another debugger is already attached to the tab with id: 5.").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallError {
    pub message: String,
    /// The CDP error code when the error came from a CDP command.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<i64>,
}

/// The extension's answer to one call.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Reply<'a> {
    pub id: CallId,
    /// Present on success (may be absent for calls without a result).
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub result: Option<&'a RawValue>,
    /// Present on failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<CallError>,
}

/// `chrome.debugger.onEvent`, forwarded as is.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DebuggerEvent<'a> {
    pub tab_id: TabId,
    /// The flat child session the event came from, if any.
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub method: Cow<'a, str>,
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub params: Option<&'a RawValue>,
}

/// Extension → relay.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all_fields = "camelCase")]
pub enum ExtensionMessage<'a> {
    /// The extension's first message: its protocol and its nonce, nothing
    /// more until the relay has proved itself. `pairingCode` names
    /// ([`auth::pairing_code_id`]) the one-time code of a pairing link the
    /// extension has not redeemed yet: the proofs are then made with the
    /// code, and the relay sends the secret sealed for it.
    #[serde(rename = "auth")]
    Auth {
        protocol_version: u32,
        nonce: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pairing_code: Option<String>,
    },
    /// The extension's second message, once the relay proved itself:
    /// [`auth::proof`] by [`auth::Prover::Extension`] over the `auth` and
    /// `challenge` nonces. Alone, so that it is checked before anything
    /// larger is read.
    #[serde(rename = "prove")]
    Prove { proof: String },
    #[serde(rename = "hello")]
    Hello(Hello),
    #[serde(rename = "reply", borrow)]
    Reply(Reply<'a>),
    #[serde(rename = "debugger.onEvent", borrow)]
    DebuggerEvent(DebuggerEvent<'a>),
    /// `chrome.debugger.onDetach`, with Chrome's reason (`target_closed`,
    /// `canceled_by_user`, `replaced_with_devtools`, ...).
    #[serde(rename = "debugger.onDetach")]
    DebuggerDetached { tab_id: TabId, reason: String },
    #[serde(rename = "tabs.onCreated")]
    TabCreated { tab: TabInfo },
    #[serde(rename = "tabs.onRemoved")]
    TabRemoved { tab_id: TabId },
    #[serde(rename = "tabs.onReplaced")]
    TabReplaced { added_tab_id: TabId, removed_tab_id: TabId },
    #[serde(rename = "tabs.onUpdated")]
    TabUpdated { tab: TabInfo },
    /// The user shared `tab` (`attached: true`: the debugger is attached) or
    /// stopped sharing it (`false`: sent at once, the detach follows), by
    /// the toolbar button, the "Browser Relay" tab group or the options page.
    #[serde(rename = "user.toggledAttach")]
    UserToggledAttach { tab: TabInfo, attached: bool },
    /// The debugger was detached by something other than the user (Chrome
    /// reported `target_closed` for a tab that still exists) and the
    /// extension attached it again; announce the tab anew.
    #[serde(rename = "debugger.reattached")]
    DebuggerReattached { tab: TabInfo },
    /// A shared tab moved from one sharing group to another (protocol 6):
    /// into a grant's (`grant`), or into the person's own (`None`). Sent
    /// before anything else of the tab's after the move.
    #[serde(rename = "tab.grant")]
    TabGrant {
        tab_id: TabId,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        grant: Option<String>,
    },
    /// The person answered the question `id` in its notification
    /// (protocol 7).
    #[serde(rename = "ask.answer")]
    AskAnswer { id: u64, answer: AskAnswer },
    /// The person gave the handed-over tab back (Done, protocol 7).
    #[serde(rename = "handoff.done")]
    HandoffDone { tab_id: TabId },
    #[serde(rename = "ping")]
    Ping { nonce: u64 },
    #[serde(rename = "pong")]
    Pong { nonce: u64 },
}

impl ExtensionMessage<'_> {
    /// The message's name on the wire, e.g. `debugger.onEvent`.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Auth { .. } => "auth",
            Self::Prove { .. } => "prove",
            Self::Hello(_) => "hello",
            Self::Reply(_) => "reply",
            Self::DebuggerEvent(_) => "debugger.onEvent",
            Self::DebuggerDetached { .. } => "debugger.onDetach",
            Self::TabCreated { .. } => "tabs.onCreated",
            Self::TabRemoved { .. } => "tabs.onRemoved",
            Self::TabReplaced { .. } => "tabs.onReplaced",
            Self::TabUpdated { .. } => "tabs.onUpdated",
            Self::UserToggledAttach { .. } => "user.toggledAttach",
            Self::DebuggerReattached { .. } => "debugger.reattached",
            Self::TabGrant { .. } => "tab.grant",
            Self::AskAnswer { .. } => "ask.answer",
            Self::HandoffDone { .. } => "handoff.done",
            Self::Ping { .. } => "ping",
            Self::Pong { .. } => "pong",
        }
    }
}

impl<'a> ExtensionMessage<'a> {
    /// Parses one text frame. Borrowed payloads point into `text`.
    pub fn parse(text: &'a str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(text)
    }
}

/// The hot path: `reply` and `debugger.onEvent` frames in the canonical
/// layout [`encode`] produces, split by that layout. Anything that deviates
/// from the layout in any way returns `None`; use [`ExtensionMessage::parse`]
/// then. Payloads up to [`layout::VALIDATED_PAYLOAD`] bytes are checked to be
/// exactly one JSON value; larger ones (screenshots, PDFs: JSON that Chrome
/// itself produced) are passed on unscanned, which is the point of this path.
pub mod layout {
    use super::{CallId, TabId};

    /// Payloads up to this size are validated; larger ones are trusted.
    pub const VALIDATED_PAYLOAD: usize = 64 * 1024;

    /// A `reply` with a result (or none); error replies take the full parser.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct RawReply<'a> {
        pub id: CallId,
        pub result: Option<&'a str>,
    }

    /// A `debugger.onEvent`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct RawEvent<'a> {
        pub tab_id: TabId,
        pub session_id: Option<&'a str>,
        pub method: &'a str,
        pub params: Option<&'a str>,
    }

    /// An integer as JSON writes it: `01` is not JSON (the full parser
    /// refuses it), so a leading zero is the whole number.
    fn number(text: &str) -> Option<(u64, &str)> {
        let end = text.bytes().position(|b| !b.is_ascii_digit()).unwrap_or(text.len());
        if end == 0 || end > 18 || (end > 1 && text.starts_with('0')) {
            return None;
        }
        Some((text[..end].parse().ok()?, &text[end..]))
    }

    fn signed(text: &str) -> Option<(i64, &str)> {
        let (negative, digits) = match text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let (n, rest) = number(digits)?;
        // serde_json reads `-0` as a float, which no tab id is.
        if negative && n == 0 {
            return None;
        }
        let n = i64::try_from(n).ok()?;
        Some((if negative { -n } else { n }, rest))
    }

    /// A JSON string with no escapes; the string and the rest.
    fn plain_string(text: &str) -> Option<(&str, &str)> {
        let body = text.strip_prefix('"')?;
        let end = body.bytes().position(|b| b == b'"' || b == b'\\' || b < 0x20)?;
        (body.as_bytes()[end] == b'"').then(|| (&body[..end], &body[end + 1..]))
    }

    /// A payload as the full parser reads it: `null` is none (an
    /// `Option<&RawValue>`), so `"result":null` is a reply without result.
    fn present(raw: &str) -> Option<&str> {
        (raw != "null").then_some(raw)
    }

    /// The value before the closing `}}`; it must look like one at both ends.
    fn payload(rest: &str) -> Option<&str> {
        let raw = rest.strip_suffix("}}")?;
        let (first, last) = (*raw.as_bytes().first()?, *raw.as_bytes().last()?);
        let balanced = matches!((first, last), (b'{', b'}') | (b'[', b']') | (b'"', b'"'))
            || (first.is_ascii_digit() || first == b'-') && last.is_ascii_digit()
            || matches!(raw, "true" | "false" | "null");
        if !balanced {
            return None;
        }
        // Small payloads (nearly all) are checked to be exactly one value, so
        // an extension bug cannot smuggle extra keys into a client's frame.
        if raw.len() <= VALIDATED_PAYLOAD && serde_json::from_str::<&serde_json::value::RawValue>(raw).is_err() {
            return None;
        }
        Some(raw)
    }

    /// What closes a reply or an event frame after its payload.
    pub const TAIL: &str = "}}";

    /// A successful reply's frame up to its result: `head + result + TAIL`
    /// is the canonical layout (what [`super::encode`] would produce), made
    /// without re-parsing the result. The extension frames Chrome's answers
    /// so, where they are (its WASM side keeps large ones in JavaScript).
    pub fn reply_head(id: CallId) -> String {
        format!(r#"{{"reply":{{"id":{id},"result":"#)
    }

    /// A whole reply frame around an already-serialised result.
    pub fn encode_reply(id: CallId, result_json: &str) -> String {
        let mut out = reply_head(id);
        out.push_str(result_json);
        out.push_str(TAIL);
        out
    }

    /// A `debugger.onEvent` frame up to its params: `head + params + TAIL`.
    pub fn event_head(tab_id: TabId, session_id: Option<&str>, method: &str) -> String {
        let mut out = String::with_capacity(64 + method.len());
        out.push_str(r#"{"debugger.onEvent":{"tabId":"#);
        out.push_str(&tab_id.to_string());
        if let Some(session) = session_id {
            out.push_str(r#","sessionId":"#);
            out.push_str(&serde_json::to_string(session).unwrap_or_default());
        }
        out.push_str(r#","method":"#);
        out.push_str(&serde_json::to_string(method).unwrap_or_default());
        out.push_str(r#","params":"#);
        out
    }

    /// A whole `debugger.onEvent` frame around already-serialised params.
    pub fn encode_event(tab_id: TabId, session_id: Option<&str>, method: &str, params_json: Option<&str>) -> String {
        let mut out = event_head(tab_id, session_id, method);
        match params_json {
            Some(params) => out.push_str(params),
            // No params: the key goes too, as `encode` leaves it out.
            None => out.truncate(out.len() - r#","params":"#.len()),
        }
        out.push_str(TAIL);
        out
    }

    pub fn reply(text: &str) -> Option<RawReply<'_>> {
        let rest = text.strip_prefix(r#"{"reply":{"id":"#)?;
        let (id, rest) = number(rest)?;
        if rest == "}}" {
            return Some(RawReply { id, result: None });
        }
        Some(RawReply { id, result: present(payload(rest.strip_prefix(r#","result":"#)?)?) })
    }

    pub fn debugger_event(text: &str) -> Option<RawEvent<'_>> {
        let rest = text.strip_prefix(r#"{"debugger.onEvent":{"tabId":"#)?;
        let (tab_id, rest) = signed(rest)?;
        let (session_id, rest) = match rest.strip_prefix(r#","sessionId":"#) {
            Some(rest) => {
                let (session, rest) = plain_string(rest)?;
                (Some(session), rest)
            }
            None => (None, rest),
        };
        let (method, rest) = plain_string(rest.strip_prefix(r#","method":"#)?)?;
        let params = if rest == "}}" { None } else { present(payload(rest.strip_prefix(r#","params":"#)?)?) };
        Some(RawEvent { tab_id, session_id, method, params })
    }
}

impl<'a> RelayMessage<'a> {
    /// Parses one text frame. Borrowed payloads point into `text`.
    pub fn parse(text: &'a str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(text)
    }
}

/// Encodes a message as one text frame.
pub fn encode<T: Serialize>(message: &T) -> String {
    // Serialising these types cannot fail: every map key is a string and
    // every RawValue is valid JSON by construction.
    serde_json::to_string(message).unwrap_or_else(|e| unreachable!("protocol encode: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn roundtrip_relay(text: &str) {
        let msg = RelayMessage::parse(text).expect(text);
        let again = encode(&msg);
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&again).unwrap(),
            serde_json::from_str::<serde_json::Value>(text).unwrap(),
            "{text}"
        );
    }

    fn roundtrip_extension(text: &str) {
        let msg = ExtensionMessage::parse(text).expect(text);
        let again = encode(&msg);
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&again).unwrap(),
            serde_json::from_str::<serde_json::Value>(text).unwrap(),
            "{text}"
        );
    }

    /// The examples in PROTOCOL.md, verbatim: the document and the code agree.
    #[test]
    fn documented_examples_roundtrip() {
        let doc = include_str!("../PROTOCOL.md");
        let mut relay = 0;
        let mut extension = 0;
        for line in doc.lines() {
            if let Some(example) = line.strip_prefix("relay> ") {
                roundtrip_relay(example);
                let key = example.trim_start_matches("{\"").split('"').next().unwrap();
                assert_eq!(RelayMessage::parse(example).unwrap().name(), key, "{example}");
                relay += 1;
            } else if let Some(example) = line.strip_prefix("ext> ") {
                roundtrip_extension(example);
                let key = example.trim_start_matches("{\"").split('"').next().unwrap();
                assert_eq!(ExtensionMessage::parse(example).unwrap().name(), key, "{example}");
                extension += 1;
            }
        }
        assert!(relay >= 10 && extension >= 10, "examples found: {relay} relay, {extension} extension");
    }

    #[test]
    fn params_pass_through_byte_for_byte() {
        // Odd spacing and key order must survive: the relay never re-serialises.
        let frame = r#"{"debugger.onEvent":{"tabId":4,"method":"Page.x","params":{ "b":1,  "a":[2, 3] }}}"#;
        let ExtensionMessage::DebuggerEvent(ev) = ExtensionMessage::parse(frame).unwrap() else {
            panic!("wrong variant")
        };
        assert_eq!(ev.params.unwrap().get(), r#"{ "b":1,  "a":[2, 3] }"#);
        assert!(matches!(ev.method, Cow::Borrowed(_)), "method borrowed, not copied");
    }

    /// The layout splitter agrees with the full parser on every frame our
    /// encoder produces, and declines everything else.
    #[test]
    fn layout_matches_the_full_parser() {
        let params = RawValue::from_string(r#"{"a":[1,{"b":"}}"}],"c":"\"q\""}"#.into()).unwrap();
        let frames = [
            encode(&ExtensionMessage::Reply(Reply { id: 7, result: Some(&params), error: None })),
            encode(&ExtensionMessage::Reply(Reply { id: 8, result: None, error: None })),
            encode(&ExtensionMessage::DebuggerEvent(DebuggerEvent {
                tab_id: -3,
                session_id: Some("AB12".into()),
                method: "Page.x".into(),
                params: Some(&params),
            })),
            encode(&ExtensionMessage::DebuggerEvent(DebuggerEvent {
                tab_id: 4,
                session_id: None,
                method: "Page.y".into(),
                params: None,
            })),
        ];
        for frame in &frames {
            let full = ExtensionMessage::parse(frame).unwrap();
            match full {
                ExtensionMessage::Reply(r) => {
                    let fast = layout::reply(frame).expect(frame);
                    assert_eq!((fast.id, fast.result), (r.id, r.result.map(RawValue::get)));
                }
                ExtensionMessage::DebuggerEvent(e) => {
                    let fast = layout::debugger_event(frame).expect(frame);
                    assert_eq!(
                        (fast.tab_id, fast.session_id, fast.method, fast.params),
                        (e.tab_id, e.session_id.as_deref(), &*e.method, e.params.map(RawValue::get))
                    );
                }
                _ => unreachable!(),
            }
        }
        // The direct encoders produce exactly what `encode` does.
        assert_eq!(layout::encode_reply(7, params.get()), frames[0]);
        assert_eq!(layout::encode_event(-3, Some("AB12"), "Page.x", Some(params.get())), frames[2]);
        assert_eq!(layout::encode_event(4, None, "Page.y", None), frames[3]);
        for odd in [
            r#"{"reply":{"id":1,"error":{"message":"x"}}}"#,
            r#"{"reply":{"result":{},"id":1}}"#,
            r#"{"reply":{"id":1,"result":{}} }"#,
            r#"{ "reply":{"id":1,"result":{}}}"#,
            r#"{"reply":{"id":1,"result":}}"#,
            r#"{"debugger.onEvent":{"tabId":1,"method":"A\"b","params":{}}}"#,
            r#"{"debugger.onEvent":{"method":"A","tabId":1}}"#,
            r#"{"debugger.onEvent":{"tabId":1,"method":"A","params":{"x":1}}"#,
            // A payload that would smuggle a second id into the client's frame.
            r#"{"reply":{"id":1,"result":{"a":1},"id":7,"x":{"b":2}}}"#,
            r#"{"reply":{"id":1,"result":{"a":[}}}"#,
        ] {
            assert!(layout::reply(odd).is_none() && layout::debugger_event(odd).is_none(), "{odd}");
        }
    }

    /// Found by `tests/tests/fuzz.rs`: the layout split frames the full
    /// parser refuses (leading zeros, `-0`), and read a `null` payload as
    /// the text `null` where the full parser reads none.
    #[test]
    fn layout_numbers_and_null_payloads_read_as_the_full_parser_reads_them() {
        for refused in [
            r#"{"reply":{"id":00}}"#,
            r#"{"reply":{"id":07,"result":{}}}"#,
            r#"{"debugger.onEvent":{"tabId":-0,"method":"A.b"}}"#,
            r#"{"debugger.onEvent":{"tabId":012,"method":"A.b","params":{}}}"#,
        ] {
            assert!(ExtensionMessage::parse(refused).is_err(), "{refused}");
            assert!(layout::reply(refused).is_none() && layout::debugger_event(refused).is_none(), "{refused}");
        }
        assert_eq!(layout::reply(r#"{"reply":{"id":0}}"#), Some(layout::RawReply { id: 0, result: None }));
        // What the extension sends for a call without a result.
        let frame = layout::encode_reply(3, "null");
        let ExtensionMessage::Reply(full) = ExtensionMessage::parse(&frame).unwrap() else { panic!("a reply") };
        assert_eq!(full.result.map(RawValue::get), None);
        assert_eq!(layout::reply(&frame), Some(layout::RawReply { id: 3, result: None }));
        let event = layout::encode_event(0, None, "A.b", Some("null"));
        assert_eq!(layout::debugger_event(&event).map(|e| (e.tab_id, e.params)), Some((0, None)));
    }

    #[test]
    fn reply_without_result_or_error_parses() {
        let ExtensionMessage::Reply(reply) = ExtensionMessage::parse(r#"{"reply":{"id":3}}"#).unwrap() else {
            panic!("wrong variant")
        };
        assert_eq!((reply.id, reply.result.is_none(), reply.error.is_none()), (3, true, true));
    }

    #[test]
    fn unknown_message_is_an_error_naming_it() {
        let err = ExtensionMessage::parse(r#"{"tabs.explode":{}}"#).unwrap_err();
        assert!(err.to_string().contains("tabs.explode"), "{err}");
        assert!(RelayMessage::parse("not json").is_err());
    }

    #[test]
    fn call_ids_and_names() {
        let params = RawValue::from_string("{}".into()).unwrap();
        let msg = RelayMessage::DebuggerSendCommand(SendCommand {
            id: 9,
            tab_id: 1,
            session_id: None,
            method: "Runtime.evaluate".into(),
            params: Some(&params),
        });
        assert_eq!((msg.call_id(), msg.name()), (Some(9), "debugger.sendCommand"));
        assert_eq!(RelayMessage::Ping { nonce: 1 }.call_id(), None);
        let v: serde_json::Value = serde_json::from_str(&encode(&msg)).unwrap();
        assert_eq!(
            v,
            json!({"debugger.sendCommand": {"id": 9, "tabId": 1, "method": "Runtime.evaluate", "params": {}}})
        );
    }
}
