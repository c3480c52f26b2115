//! Browser Relay's server side, as a library for the `browser-relay` binary
//! and the end-to-end tests: the listeners and their guard ([`net`]), the
//! relay's HTTP routes ([`http`]), the control API's transport
//! ([`control`]), [`server`], which starts them together, and [`shutdown`], what ends
//! `serve` on each system. The engines
//! live in their own crates (see ARCHITECTURE.md).

pub mod control;
pub mod http;
pub mod net;
pub mod server;
pub mod shutdown;
