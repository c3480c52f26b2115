//! The relay engine: one extension link, many CDP clients, the registry of
//! attached tabs, and routing by `id`/`sessionId` between them. It knows
//! nothing of HTTP; the `browser-relay` binary hands it upgraded sockets.
//!
//! Invariants:
//! - The relay answers every root-level `Target.*`/`Browser.*` command itself;
//!   the extension only ever sees `chrome.*` calls.
//! - Every pending command is answered exactly once: by the extension's reply,
//!   or with an error when the extension goes away.
//! - Events and the answers that depend on them are queued to a client while
//!   the registry lock is held, so "event before result" orderings hold.
//!   Lock order: the registry, then a client's `state`; no DashMap entry is
//!   held across taking the registry.
//! - Teardown of the extension connection (see `serve_extension`): stop the
//!   writer first (every later send fails and its caller answers), clear the
//!   link, fail this connection's pending calls (by `generation`, so a
//!   reconnecting extension's calls are untouched), drop and announce the
//!   targets, release the claim.
//!
//! **Event fan-out.** A tab-level event becomes one frame per distinct
//! session id among the tab's page subscriptions (root auto-attach gives
//! every client the same page session, so they share one reference-counted
//! frame); page-level (`/devtools/page/<id>`) subscribers get it without a
//! `sessionId`. `Runtime.executionContext*` events go only to clients that
//! enabled Runtime there ([`targets::Target::runtime`]); `Page.download*`
//! is re-emitted as `Browser.download*` at the root, where Playwright
//! listens.

mod asking;
mod browser_domain;
mod capture;
// A face: a client's command as the relay reads it, and CDP's error codes.
pub mod cdp;
mod client;
mod config;
mod discovery;
mod error;
mod extension;
mod forward;
mod in_process;
mod interception;
mod ledger;
mod lending;
mod link;
mod oversight;
mod pending;
mod questions;
mod queue;
mod relay;
mod routing;
mod targets;
mod withheld;

pub use asking::SITE_ALLOWANCE;
pub use capture::not_in_front_reason;
pub use client::{ClientLabel, client_name};
pub use config::{ASK_WITHIN, RelayConfig};
pub use discovery::{ListEntry, VersionDocument};
pub use error::CallError;
pub use extension::{ExtensionClaim, HandshakeSlot, ProofHook};
pub use in_process::{InProcessClient, TooManyClients};
pub use ledger::{SETTINGS as LEDGER_SETTINGS, Setting};
pub use oversight::{ClientSummary, DISCONNECTED_BY_USER, SharedTab, StopError};
pub use questions::{Answer, AnsweredBy, AskError, Handoff, HandoffEnd, Question};
pub use relay::{ClientSlot, MAX_HANDSHAKES, PublicBase, Relay, RelayStats, extension_key};
pub use withheld::DEVTOOLS_PROTOCOL;
