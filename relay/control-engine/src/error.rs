//! The control engine's one error type. Every variant carries what an agent
//! needs to act: a stable `code`, a message, and a hint for the next step.
//! The HTTP layer only maps [`ErrorKind`] to a status.

use crate::api::DialogInfo;
use cdp_client::CdpError;
use managed_driver::ManagedError;
use managed_driver::config::ConfigError;

/// What kind of failure, for the transport (HTTP status, CLI exit code).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The request itself is wrong (bad JSON, bad parameter).
    BadRequest,
    /// Something named in the request does not exist (profile, tab, ref).
    NotFound,
    /// The request is fine but the state does not allow it now (browser not
    /// running, no tab shared, stale ref).
    Conflict,
    /// The browser did not answer in time.
    Timeout,
    /// The browser or the page failed.
    Upstream,
    /// The user's configuration does not allow it.
    Forbidden,
}

#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error("{0}")]
    BadRequest(String),
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Managed(#[from] ManagedError),
    #[error("profile '{0}' is not running")]
    NotRunning(String),
    #[error("the Browser Relay extension is not connected")]
    NoExtension,
    #[error("no tab is shared with Browser Relay")]
    NoSharedTab,
    #[error("no tab is open in profile '{0}'")]
    NoTab(String),
    #[error("several tabs are open and none is current: pass targetId (one of {0})")]
    AmbiguousTab(String),
    #[error("no tab {target_id} in profile '{profile}'; tabs: {tabs}")]
    UnknownTab { profile: String, target_id: String, tabs: String },
    #[error("'{0}' is not a ref: refs look like e7 (also accepted: @e7, ref=e7)")]
    InvalidRef(String),
    #[error("no ref {0} in the last snapshot of this tab")]
    UnknownRef(String),
    #[error("ref {0} is stale: take a new snapshot")]
    StaleRef(String),
    #[error("no element matches selector '{0}'")]
    NoSuchElement(String),
    #[error("navigation to {url} failed: {reason}")]
    Navigation { url: String, reason: String },
    /// `back` or `forward`: the tab's history has no entry that way.
    #[error("there is no page to go {0} to in this tab's history")]
    NoHistory(&'static str),
    #[error("no request {0} in this tab's network log")]
    UnknownRequest(String),
    #[error("no body for request {request_id}: {reason}")]
    NoResponseBody { request_id: String, reason: String },
    #[error("timed out after {} waiting for {what}", human_ms(*.ms))]
    Timeout { what: String, ms: u64 },
    #[error("{element} is covered by {by}: close it or take a new snapshot")]
    Covered { element: String, by: String },
    #[error("{0} is disabled")]
    Disabled(String),
    #[error("a dialog '{message}' is open ({kind}); arm /hooks/dialog and retry")]
    DialogOpen { kind: String, message: String },
    #[error("evaluate is switched off in config.toml (allowEvaluate = false)")]
    EvaluateDisabled,
    /// What the user's config does not allow, and the key that would.
    #[error("{what}: not allowed by config.toml ({key})")]
    NotAllowed { what: String, key: &'static str },
    #[error("{0}")]
    Action(String),
    #[error("cannot print a PDF here: {0}")]
    Pdf(String),
    #[error("the browser connection of profile '{profile}' failed: {source}")]
    Cdp { profile: String, source: CdpError },
    #[error("the page failed: {0}")]
    Page(String),
    #[error("cannot write {path}: {source}")]
    Io { path: std::path::PathBuf, source: std::io::Error },
}

/// `8000` → "8 s", `1500` → "1.5 s", `250` → "250 ms".
fn human_ms(ms: u64) -> String {
    match ms {
        ms if ms < 1000 => format!("{ms} ms"),
        ms if ms % 1000 == 0 => format!("{} s", ms / 1000),
        ms => format!("{:.1} s", ms as f64 / 1000.0),
    }
}

impl ControlError {
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::BadRequest(_) | Self::InvalidRef(_) | Self::Action(_) => ErrorKind::BadRequest,
            Self::Covered { .. }
            | Self::Disabled(_)
            | Self::DialogOpen { .. }
            | Self::EvaluateDisabled
            | Self::NoHistory(_)
            | Self::NoResponseBody { .. }
            | Self::Pdf(_) => ErrorKind::Conflict,
            Self::Config(ConfigError::UnknownProfile { .. })
            | Self::UnknownTab { .. }
            | Self::UnknownRef(_)
            | Self::UnknownRequest(_)
            | Self::NoSuchElement(_) => ErrorKind::NotFound,
            Self::Config(_)
            | Self::NotRunning(_)
            | Self::NoExtension
            | Self::NoSharedTab
            | Self::NoTab(_)
            | Self::AmbiguousTab(_)
            | Self::StaleRef(_) => ErrorKind::Conflict,
            Self::Managed(ManagedError::ExtensionProfile(_)) => ErrorKind::Conflict,
            Self::NotAllowed { .. } => ErrorKind::Forbidden,
            Self::Timeout { .. } | Self::Cdp { source: CdpError::Timeout(..), .. } => ErrorKind::Timeout,
            Self::Managed(_) | Self::Navigation { .. } | Self::Cdp { .. } | Self::Page(_) | Self::Io { .. } => {
                ErrorKind::Upstream
            }
        }
    }

    /// A stable, machine-readable name.
    pub fn code(&self) -> &'static str {
        match self {
            Self::BadRequest(_) => "bad_request",
            Self::Config(ConfigError::UnknownProfile { .. }) => "unknown_profile",
            Self::Config(_) => "bad_config",
            Self::Managed(_) => "launch_failed",
            Self::NotRunning(_) => "not_running",
            Self::NoExtension => "no_extension",
            Self::NoSharedTab => "no_shared_tab",
            Self::NoTab(_) => "no_tab",
            Self::AmbiguousTab(_) => "ambiguous_tab",
            Self::UnknownTab { .. } => "unknown_tab",
            Self::InvalidRef(_) => "invalid_ref",
            Self::UnknownRef(_) => "unknown_ref",
            Self::StaleRef(_) => "stale_ref",
            Self::NoSuchElement(_) => "no_such_element",
            Self::Navigation { .. } => "navigation_failed",
            Self::NoHistory(_) => "no_history",
            Self::UnknownRequest(_) => "unknown_request",
            Self::NoResponseBody { .. } => "no_response_body",
            Self::Timeout { .. } => "timeout",
            Self::Cdp { source: CdpError::Timeout(..), .. } => "timeout",
            Self::Cdp { .. } => "browser_error",
            Self::Page(_) => "page_error",
            Self::Io { .. } => "io_error",
            Self::Covered { .. } => "covered",
            Self::Disabled(_) => "disabled",
            Self::DialogOpen { .. } => "dialog_open",
            Self::EvaluateDisabled => "evaluate_disabled",
            Self::NotAllowed { .. } => "not_allowed",
            Self::Action(_) => "bad_action",
            Self::Pdf(_) => "pdf_unavailable",
        }
    }

    /// What to do next, when there is something to say.
    pub fn hint(&self) -> Option<String> {
        Some(match self {
            Self::NotRunning(profile) => format!("POST /start {{\"profile\":\"{profile}\"}} launches it"),
            Self::NoExtension => "click the Browser Relay icon on a tab to share it (no icon? load the extension and pair it: `browser-relay pair`)".into(),
            Self::NoSharedTab => "click the Browser Relay icon on a tab to share it".into(),
            Self::NoTab(_) => "POST /tabs/open {\"url\": \"…\"} opens one".into(),
            Self::AmbiguousTab(_) | Self::UnknownTab { .. } => "GET /tabs lists the tabs with their targetId".into(),
            Self::UnknownRef(_) | Self::StaleRef(_) => "GET /snapshot gives fresh refs".into(),
            Self::Config(ConfigError::UnknownProfile { .. }) => "GET /profiles lists the profiles".into(),
            Self::Cdp { profile, .. } => format!("GET /?profile={profile} shows whether the browser still runs"),
            Self::DialogOpen { .. } => {
                "POST /hooks/dialog {\"accept\": true} answers it (and the next one); GET /tabs shows it".into()
            }
            Self::Covered { .. } => "GET /snapshot shows what is on the page now".into(),
            Self::NoHistory(_) => "POST /navigate {\"url\": \"…\"} loads a page".into(),
            Self::UnknownRequest(_) => "GET /requests lists the tab's requests with their requestId (the last 500)".into(),
            Self::NoResponseBody { .. } => {
                "Chrome keeps bodies only for a while, and only of the page still open: reload it (POST /navigate), \
                 then read the new requestId's body from GET /requests"
                    .into()
            }
            Self::NotAllowed { key, .. } => {
                format!("only the user can allow it: `{key}` in config.toml in the state directory (~/.browser-relay)")
            }
            _ => return None,
        })
    }

    /// The PDF call's failure: Chrome's own words, with the way out when
    /// the browser cannot print at all (a headed browser answers "PrintToPDF
    /// is not implemented" or "… only supported in headless mode").
    pub(crate) fn pdf(profile: &str) -> impl FnOnce(CdpError) -> Self + '_ {
        move |source| match source {
            CdpError::Protocol { message, .. } if message.contains("PrintToPDF") => Self::Pdf(format!(
                "{message} (Chrome prints to PDF only when headless: use a headless managed profile)"
            )),
            source => Self::Cdp { profile: profile.to_string(), source },
        }
    }

    pub(crate) fn cdp(profile: &str) -> impl FnOnce(CdpError) -> Self + '_ {
        move |source| Self::Cdp { profile: profile.to_string(), source }
    }
}

impl From<DialogInfo> for ControlError {
    fn from(dialog: DialogInfo) -> Self {
        Self::DialogOpen { kind: dialog.kind, message: dialog.message }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_state_error_says_what_to_do() {
        for error in [
            ControlError::NotRunning("managed".into()),
            ControlError::NoExtension,
            ControlError::NoSharedTab,
            ControlError::NoTab("managed".into()),
            ControlError::StaleRef("e7".into()),
            ControlError::UnknownRef("e99".into()),
            ControlError::NoHistory("back"),
            ControlError::UnknownRequest("1234.5".into()),
            ControlError::NoResponseBody { request_id: "1234.5".into(), reason: "evicted".into() },
        ] {
            assert_eq!(
                error.kind(),
                if matches!(error, ControlError::UnknownRef(_) | ControlError::UnknownRequest(_)) {
                    ErrorKind::NotFound
                } else {
                    ErrorKind::Conflict
                }
            );
            assert!(error.hint().is_some(), "{error} has no hint");
        }
        assert_eq!(ControlError::StaleRef("e7".into()).to_string(), "ref e7 is stale: take a new snapshot");
        assert_eq!(ControlError::UnknownRef("e99".into()).to_string(), "no ref e99 in the last snapshot of this tab");
        let timeout = ControlError::Timeout { what: "e5 to become visible".into(), ms: 8000 };
        assert_eq!(timeout.to_string(), "timed out after 8 s waiting for e5 to become visible");
        let covered = ControlError::Covered { element: "e5".into(), by: "<div class=\"modal\">".into() };
        assert_eq!(covered.to_string(), "e5 is covered by <div class=\"modal\">: close it or take a new snapshot");
    }

    #[test]
    fn a_browser_that_cannot_print_is_told_apart_from_other_failures() {
        let protocol = |message: &str| CdpError::Protocol {
            method: "Page.printToPDF".into(),
            code: -32000,
            message: message.into(),
        };
        for headed in ["PrintToPDF is not implemented", "PrintToPDF is only supported in headless mode"] {
            let error = ControlError::pdf("chrome")(protocol(headed));
            assert_eq!(error.code(), "pdf_unavailable");
            assert!(error.to_string().contains(headed) && error.to_string().contains("headless"), "{error}");
        }
        let other = ControlError::pdf("managed")(protocol("Page range exceeds page count"));
        assert_eq!(other.code(), "browser_error", "not blamed on headed mode: {other}");
        assert!(other.to_string().contains("Page range exceeds page count"), "{other}");
    }
}
