//! The control engine for agents: tabs, navigation, accessibility snapshots
//! with refs, actions, screenshots and console, over both drivers. Plain
//! Rust over CDP: it knows nothing of HTTP (the `browser-relay` binary
//! serves it), nor of the relay engine (it reaches the user's tabs through
//! the relay's `/cdp`, as any client does).

pub mod act;
pub mod api;
pub mod capture;
pub mod conn;
pub mod engine;
pub mod error;
pub mod hooks;
pub mod in_page;
pub mod keys;
pub mod navigation;
pub mod profiles;
pub mod refs;
pub mod snapshot;
pub mod tabs;

pub use api::{ControlApi, Handle, Route, Selected, TabSelector};
pub use engine::{Engine, RelayLink, SharedTabs};
pub use error::{ControlError, ErrorKind};
