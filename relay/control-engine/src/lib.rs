//! The control engine for agents: tabs, navigation, accessibility snapshots
//! with refs, actions, screenshots and console, over both drivers. Plain
//! Rust over CDP: it knows nothing of HTTP (the `browser-relay` binary
//! serves it), nor of the relay engine (it reaches the user's tabs through
//! the relay's `/cdp`, as any client does).
//!
//! [`api`] is the contract: one request type per route, and [`Handle`],
//! which [`Engine`] implements once per route in the module of its concern.
//!
//! **One engine, two drivers.** A profile's endpoint is a session on the
//! managed browser's pipe or on the one connection to a remote profile's
//! browser (a `cdpUrl`, an attach-only `cdpPort`), or the relay's `/cdp`
//! for the extension driver; [`conn::Conn::over`] then does the same
//! thing everywhere: discover the tabs, attach to each (flat sessions),
//! enable Runtime, Page, Network, Log and lifecycle events, and auto-attach
//! iframes.
//!
//! **Snapshots** run in the page ([`in_page`] calls `snapshot.js` in an
//! isolated world the page cannot see), not from
//! `Accessibility.getFullAXTree` (1.6 s against 41 ms on a 4,200-element
//! page). The walker enters same-origin iframes itself; [`snapshot`] walks
//! the others in their own frame or out-of-process session and splices
//! their lines in place.
//!
//! **Refs.** The page keeps ref → element; the engine keeps, per tab, each
//! ref's frame, role, name and nth ([`refs`]). A ref resolves to its
//! element while connected, else to the nth element with that role and
//! name, else it is stale. A full snapshot replaces a tab's refs; a partial
//! one (and [`find`]) merges into them. Current tabs and refs live on the
//! [`Engine`], not the connection, so they survive a reconnect.
//!
//! **Dialogs.** A JavaScript dialog stops the page's scripts and holds
//! Chrome's input events, so every page operation refuses while one is open
//! and stops waiting when one opens (`tabs::PageTarget::unless_dialog`);
//! an armed hook answers it first ([`hooks`]).

mod act;
// The face: the contract, one request type per route.
pub mod api;
mod capture;
mod conn;
mod diff;
mod engine;
mod error;
mod find;
mod hooks;
mod in_page;
mod keys;
mod navigation;
mod network;
mod profiles;
mod refs;
mod requests;
mod snapshot;
mod tabs;

pub use api::{ControlApi, Handle, Route, Selected, TabSelector};
pub use engine::{Engine, MEDIA_SWEEP, RelayLink, SharedTabs};
pub use error::{ControlError, ErrorKind, Step, Surface};
