//! Browser Relay's server side, as a library for the `browser-relay` binary
//! and the end-to-end tests: the listeners and their guard (`net`), the
//! relay's HTTP routes (`http`), the control API's transport (`control`),
//! `server`, which starts them together, and `shutdown`, what ends `serve`
//! on each system. What the binary and the tests use is re-exported here;
//! the engines live in their own crates (see ARCHITECTURE.md).

mod control;
mod http;
mod keys;
mod lent;
mod net;
mod server;
mod shutdown;

// What the binary and the end-to-end tests use, at the root.
pub use control::DEFAULT_CONTROL_PORT;
pub use control::client::{ClientError, ControlClient, StartServer};
pub use keys::{cdp_key, control_key, extension_key};
pub use lent::Lent;
pub use net::guard::{DEFAULT_EXTENSION_ID, Guard, Rejection, RouteClass, is_loopback_host};
pub use net::sessions::{Sessions, client_secret};
pub use net::{BindError, ServeLimits, is_taken};
pub use server::{RunningServer, ServerOptions};
pub use shutdown::ShutdownSignals;
