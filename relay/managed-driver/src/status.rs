//! What `status` says of a profile's browser.

use std::path::PathBuf;

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    Running,
    Stopped,
    /// It ran and exited without `stop`: the next `start` relaunches it.
    Crashed,
    /// A browser Browser Relay does not launch (attach-only, remote URL).
    External,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BrowserStatus {
    pub profile: String,
    pub state: State,
    pub pid: Option<u32>,
    pub browser_version: Option<String>,
    pub executable: Option<PathBuf>,
    pub user_data_dir: Option<PathBuf>,
    pub detail: String,
}
