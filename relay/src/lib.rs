//! Browser Relay: a loopback CDP relay between CDP clients (Playwright,
//! Puppeteer, raw scripts) and the user's Chrome, reached through the Browser
//! Relay extension. See ARCHITECTURE.md for the map.

pub mod cdp_client;
pub mod control;
pub mod http;
pub mod managed;
pub mod mcp;
pub mod net;
pub mod relay;
pub mod server;
pub mod state_dir;

pub use relay::{Relay, RelayConfig};
