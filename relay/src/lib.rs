//! Browser Relay's server side, as a library for the `browser-relay` binary
//! and the end-to-end tests: the listeners and their guard ([`net`]), the
//! relay's HTTP routes ([`http`]), the control API's transport
//! ([`control`]), [`server`], which starts them together, and [`shutdown`], what ends
//! `serve` on each system. The engines
//! live in their own crates (see ARCHITECTURE.md).

pub mod control;
pub mod http;
pub mod keys;
pub mod net;
pub mod server;
pub mod shutdown;

#[cfg(test)]
mod tests {
    /// The control engine knows the relay's "not in front" capture error by
    /// its start (it maps it to `not_in_front` with the focus step); the two
    /// crates do not depend on each other, so this keeps them in step.
    #[test]
    fn the_engine_knows_the_relays_not_in_front_error() {
        let relays = relay_engine::capture::NOT_IN_FRONT;
        assert_eq!(relays, format!("Page.captureScreenshot: {}", control_engine::capture::RELAY_NOT_IN_FRONT));
    }
}
