//! The Browser Relay extension's service worker, in Rust.
//!
//! - [`core`]: every decision (what to attach, when to reconnect, what the
//!   badge says, which calls the relay may make), as a state machine over a
//!   small [`core::Host`] trait. Plain Rust, tested natively with a fake host.
//! - `chrome` (wasm32 only): thin bindings, one module per `chrome.*`
//!   namespace the extension is allowed to use.
//! - `glue` (wasm32 only): the entry points `background.js` calls, and the
//!   real `Host`: runs chrome calls, the relay WebSocket and timers, and
//!   feeds their outcomes back into the core.
//! - `text` (wasm32 only): large JavaScript strings into Rust in one copy.

pub mod core;

#[cfg(target_arch = "wasm32")]
mod chrome;
#[cfg(target_arch = "wasm32")]
mod glue;
#[cfg(target_arch = "wasm32")]
mod text;
