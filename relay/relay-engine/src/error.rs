//! Errors of the relay's own calls to the extension.

use std::time::Duration;

/// Errors of the relay's own calls to the extension.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum CallError {
    #[error("no extension connected: click the Browser Relay icon on a tab")]
    NoExtension,
    #[error("the Browser Relay extension disconnected before answering {0}")]
    Disconnected(&'static str),
    #[error("the Browser Relay extension did not answer {0} within {1:?}")]
    Timeout(&'static str, Duration),
    #[error("{0}")]
    Chrome(String),
}
