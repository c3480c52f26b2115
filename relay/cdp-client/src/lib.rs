//! The one CDP client of Browser Relay, and the HTTP client it uses to find
//! a browser's endpoint.
//!
//! - [`client`]: [`CdpClient`], one WebSocket to a browser- or page-level
//!   endpoint (or an in-process [`Channels`] pair, a managed browser's pipe): numbered calls matched by id, events in order on a channel.
//! - [`http`]: a small HTTP/1.1 client (a browser's `/json/*`, the CLI and
//!   the tests talking to the control API).
//! - [`protocol`]: typed CDP commands and events, the ones the engines use,
//!   and [`CdpEvent`], an event as received.
//! - [`endpoint`]: the one way to turn a CDP endpoint (`http(s)://…`,
//!   `ws(s)://…`) into a browser WebSocket URL; [`EndpointError`] (its own
//!   module, below `net` and `http`), why an endpoint could not be reached.
//! - [`net`]: how an endpoint is reached ([`Dial`]: headers that are
//!   [`Secret`]s, TLS roots, connect and handshake deadlines).
//!
//! It knows nothing of the relay, the managed driver or the control API.

// Faces: `protocol` (a type per CDP command, by domain), `endpoint` (the
// one way from an endpoint to a browser socket) and `http` (bounded
// requests) are namespaces other crates use as such; the rest is here.
mod client;
pub mod endpoint;
mod endpoint_error;
pub mod http;
mod net;
pub mod protocol;

pub use client::{CdpClient, CdpError, Channels, USER_AGENT, redact};
pub use endpoint_error::EndpointError;
pub use net::{CONNECT_WITHIN, Dial, HANDSHAKE_WITHIN, Secret};
pub use protocol::CdpEvent;
