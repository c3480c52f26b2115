//! The control API's transport: the HTTP router over the control engine
//! ([`http`]) and the agent's client of it ([`client`]), which the CLI's
//! agent commands and the MCP server share.

pub(crate) mod asks;
pub(crate) mod client;
pub(crate) mod error;
pub(crate) mod grants;
pub(crate) mod http;
pub(crate) mod ui;

/// The control API's default port.
pub const DEFAULT_CONTROL_PORT: u16 = 18791;
