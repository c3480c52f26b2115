//! The control API for agents: tabs, navigation, accessibility snapshots
//! with refs, screenshots and console, over both drivers. [`engine`] is the
//! plain-Rust engine; [`http`] its thin HTTP surface.

pub mod act;
pub mod api;
pub mod client;
pub mod conn;
pub mod engine;
pub mod error;
pub mod http;
pub mod keys;
pub mod page;
pub mod refs;
pub mod snapshot;

pub use api::ControlApi;
pub use engine::{Engine, RelayLink};
pub use error::{ControlError, ErrorKind};

/// The control API's default port.
pub const DEFAULT_CONTROL_PORT: u16 = 18791;
