//! The control engine's one error type. Every variant carries what an agent
//! needs to act: a stable `code`, a message, and a hint for the next step,
//! named in the words of the surface the agent uses ([`Surface`]: a route
//! over HTTP, a command in the CLI, a tool in MCP). The HTTP layer only maps
//! [`ErrorKind`] to a status.

use cdp_client::CdpError;
use managed_driver::ManagedError;
use settings::ConfigError;

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

/// Where an agent reads an answer, so that a hint names a step it can take
/// there. Clients say which (the `Browser-Relay-Surface` header); HTTP is
/// the default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Surface {
    #[default]
    Http,
    Cli,
    Mcp,
}

impl Surface {
    /// The header a client names its surface in.
    pub const HEADER: &'static str = "browser-relay-surface";

    pub fn name(self) -> &'static str {
        match self {
            Self::Http => "http",
            Self::Cli => "cli",
            Self::Mcp => "mcp",
        }
    }

    /// From the header's value; anything else is HTTP.
    pub fn from_name(name: &str) -> Self {
        match name {
            "cli" => Self::Cli,
            "mcp" => Self::Mcp,
            _ => Self::Http,
        }
    }
}

/// A next step an answer can point to; each surface names it its own way.
/// The one place a hint's wording per surface lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step<'a> {
    /// Launch a profile's browser.
    Start(&'a str),
    /// Stop a profile's browser.
    Stop(&'a str),
    /// Whether a profile's browser runs.
    Status(&'a str),
    OpenTab,
    ListTabs,
    ListProfiles,
    Snapshot,
    /// Load a page in the tab.
    Navigate,
    /// The tab's network log.
    Requests,
    /// Answer the open dialog (OK).
    AcceptDialog,
    /// Bring this tab to the front.
    Focus(&'a str),
}

impl Step<'_> {
    pub fn named(self, surface: Surface) -> String {
        match (self, surface) {
            (Self::Start(profile), Surface::Http) => format!("POST /start {{\"profile\":\"{profile}\"}}"),
            (Self::Start(profile), Surface::Cli) => format!("`browser-relay start --profile {profile}`"),
            (Self::Start(profile), Surface::Mcp) => format!("browser_start {{\"profile\":\"{profile}\"}}"),
            (Self::Stop(profile), Surface::Http) => format!("POST /stop {{\"profile\":\"{profile}\"}}"),
            (Self::Stop(profile), Surface::Cli) => format!("`browser-relay stop --profile {profile}`"),
            (Self::Stop(profile), Surface::Mcp) => format!("browser_stop {{\"profile\":\"{profile}\"}}"),
            (Self::Status(profile), Surface::Http) => format!("GET /?profile={profile}"),
            (Self::Status(profile), Surface::Cli) => format!("`browser-relay status --profile {profile}`"),
            (Self::Status(profile), Surface::Mcp) => format!("browser_status {{\"profile\":\"{profile}\"}}"),
            (Self::OpenTab, Surface::Http) => "POST /tabs/open {\"url\": \"…\"}".into(),
            (Self::OpenTab, Surface::Cli) => "`browser-relay open URL`".into(),
            (Self::OpenTab, Surface::Mcp) => "browser_open".into(),
            (Self::ListTabs, Surface::Http) => "GET /tabs".into(),
            (Self::ListTabs, Surface::Cli) => "`browser-relay tabs`".into(),
            (Self::ListTabs, Surface::Mcp) => "browser_tabs".into(),
            (Self::ListProfiles, Surface::Http) => "GET /profiles".into(),
            (Self::ListProfiles, Surface::Cli) => "`browser-relay profiles`".into(),
            (Self::ListProfiles, Surface::Mcp) => "browser_status".into(),
            (Self::Snapshot, Surface::Http) => "GET /snapshot".into(),
            (Self::Snapshot, Surface::Cli) => "`browser-relay snapshot`".into(),
            (Self::Snapshot, Surface::Mcp) => "browser_snapshot".into(),
            (Self::Navigate, Surface::Http) => "POST /navigate {\"url\": \"…\"}".into(),
            (Self::Navigate, Surface::Cli) => "`browser-relay navigate URL`".into(),
            (Self::Navigate, Surface::Mcp) => "browser_navigate".into(),
            (Self::Requests, Surface::Http) => "GET /requests".into(),
            (Self::Requests, Surface::Cli) => "`browser-relay requests`".into(),
            (Self::Requests, Surface::Mcp) => "browser_network_requests".into(),
            (Self::AcceptDialog, Surface::Http) => "POST /hooks/dialog {\"accept\": true}".into(),
            (Self::AcceptDialog, Surface::Cli) => "`browser-relay dialog accept`".into(),
            (Self::AcceptDialog, Surface::Mcp) => "browser_handle_dialog {\"accept\": true}".into(),
            (Self::Focus(tab), Surface::Http) => format!("POST /tabs/focus {{\"targetId\":\"{tab}\"}}"),
            (Self::Focus(tab), Surface::Cli) => format!("`browser-relay focus {tab}`"),
            (Self::Focus(tab), Surface::Mcp) => format!("browser_focus_tab {{\"targetId\":\"{tab}\"}}"),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error("{0}")]
    BadRequest(String),
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Managed(ManagedError),
    /// A managed start past config.toml's `maxManagedBrowsers`.
    #[error(
        "{max} managed browsers already run from this serve, its limit (maxManagedBrowsers in config.toml): {}",
        running.join(", ")
    )]
    TooManyBrowsers { max: usize, running: Vec<String> },
    /// An ephemeral start under the name of one of config.toml's profiles.
    /// Not a fresh copy of it: a name means one profile, and its endpoint,
    /// folder and status would then mean two; the user keeps what
    /// config.toml says (its folder, cookies and logins are untouched).
    #[error("profile '{0}' already exists (in config.toml, or built in): an ephemeral profile needs a name of its own")]
    ProfileExists(String),
    #[error("profile '{0}' is not running")]
    NotRunning(String),
    #[error("the Browser Relay extension is not connected")]
    NoExtension,
    /// The relay's client places are all taken (its `maxClients`).
    #[error("{0}")]
    TooManyClients(String),
    #[error("no tab is shared with Browser Relay")]
    NoSharedTab,
    #[error("no tab is open in profile '{0}'")]
    NoTab(String),
    #[error("several tabs are open and none is current: pass targetId (one of {0})")]
    AmbiguousTab(String),
    #[error("no tab {target_id} in profile '{profile}'; tabs: {tabs}")]
    UnknownTab { profile: String, target_id: String, tabs: String },
    #[error("'{0}' is not a ref: refs look like e7 (also accepted: [e7], @e7, ref=e7)")]
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
    #[error("a dialog '{message}' is open ({kind}): the page is paused until it is answered")]
    DialogOpen { kind: String, message: String },
    /// A screenshot of a tab Chrome does not paint: another tab is in front
    /// of it, or its window is minimized or covered.
    #[error("the tab is not in front ({why}): Chrome paints no hidden tab, so it has nothing to capture")]
    NotInFront { target_id: String, why: String },
    /// What the user's config does not allow, and the key that would.
    #[error("{what}: not allowed by config.toml ({key})")]
    NotAllowed { what: String, key: &'static str },
    /// What the grant the agent came through does not give it (its sites,
    /// `--no-evaluate`, the person's managed profiles), in words that name
    /// the grant.
    #[error("{0}")]
    NotGranted(String),
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
            | Self::NoHistory(_)
            | Self::NoResponseBody { .. }
            | Self::NotInFront { .. }
            | Self::Pdf(_) => ErrorKind::Conflict,
            Self::Config(ConfigError::UnknownProfile { .. })
            | Self::UnknownTab { .. }
            | Self::UnknownRef(_)
            | Self::UnknownRequest(_)
            | Self::NoSuchElement(_) => ErrorKind::NotFound,
            Self::Config(_)
            | Self::TooManyBrowsers { .. }
            | Self::ProfileExists(_)
            | Self::NotRunning(_)
            | Self::NoExtension
            | Self::TooManyClients(_)
            | Self::NoSharedTab
            | Self::NoTab(_)
            | Self::AmbiguousTab(_)
            | Self::StaleRef(_) => ErrorKind::Conflict,
            Self::Managed(ManagedError::ExtensionProfile(_)) => ErrorKind::Conflict,
            Self::NotAllowed { .. } | Self::NotGranted(_) => ErrorKind::Forbidden,
            Self::Timeout { .. } | Self::Cdp { source: CdpError::Timeout(..), .. } => ErrorKind::Timeout,
            Self::Managed(ManagedError::AttachUnreachable { source, .. }) if source.is_timeout() => ErrorKind::Timeout,
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
            Self::Managed(ManagedError::AttachUnreachable { .. }) => "unreachable",
            Self::Managed(_) => "launch_failed",
            Self::TooManyBrowsers { .. } => "too_many_browsers",
            Self::ProfileExists(_) => "profile_exists",
            Self::NotRunning(_) => "not_running",
            Self::NoExtension => "no_extension",
            Self::TooManyClients(_) => "too_many_clients",
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
            Self::NotAllowed { .. } => "not_allowed",
            Self::NotGranted(_) => "not_granted",
            Self::Action(_) => "bad_action",
            Self::Pdf(_) => "pdf_unavailable",
            Self::NotInFront { .. } => "not_in_front",
        }
    }

    /// What to do next, when there is something to say, in the words of
    /// `surface`.
    pub fn hint(&self, surface: Surface) -> Option<String> {
        let step = |step: Step<'_>| step.named(surface);
        Some(match self {
            Self::NotRunning(profile) => format!("{} launches it", step(Step::Start(profile))),
            Self::TooManyBrowsers { running, .. } => format!(
                "stop one first, e.g. {} (or raise maxManagedBrowsers in config.toml)",
                step(Step::Stop(running.first().map_or("NAME", String::as_str)))
            ),
            Self::ProfileExists(profile) => format!(
                "{} starts that profile; pick another name for an ephemeral one ({} lists the names taken)",
                step(Step::Start(profile)),
                step(Step::ListProfiles)
            ),
            Self::NoExtension => "click the Browser Relay icon on a tab to share it (no icon? load the extension and pair it: `browser-relay pair`)".into(),
            Self::NoSharedTab => "click the Browser Relay icon on a tab to share it".into(),
            Self::TooManyClients(_) => {
                "close a CDP client: the dashboard lists them and can disconnect one".into()
            }
            Self::NoTab(_) => format!("{} opens one", step(Step::OpenTab)),
            Self::AmbiguousTab(_) | Self::UnknownTab { .. } => {
                format!("{} lists the tabs with their targetId", step(Step::ListTabs))
            }
            Self::UnknownRef(_) | Self::StaleRef(_) => format!("{} gives fresh refs", step(Step::Snapshot)),
            Self::Config(ConfigError::UnknownProfile { .. }) => {
                format!("{} lists the profiles", step(Step::ListProfiles))
            }
            Self::Cdp { profile, .. } => format!("{} shows whether the browser still runs", step(Step::Status(profile))),
            Self::DialogOpen { .. } => format!("{} answers it (and the next one)", step(Step::AcceptDialog)),
            Self::Covered { .. } => format!("{} shows what is on the page now", step(Step::Snapshot)),
            Self::NoHistory(_) => format!("{} loads a page", step(Step::Navigate)),
            Self::UnknownRequest(_) => {
                format!("{} lists the tab's requests with their requestId (the last 500)", step(Step::Requests))
            }
            Self::NoResponseBody { .. } => format!(
                "Chrome keeps bodies only for a while, and only of the page still open: reload it ({}), then read the new requestId's body from {}",
                step(Step::Navigate),
                step(Step::Requests)
            ),
            Self::NotInFront { target_id, .. } => format!(
                "{} brings it to the front, then capture again (on the user's own browser it takes their \
                 screen: ask them first, or capture a tab they left in front)",
                step(Step::Focus(target_id))
            ),
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

/// The driver's errors, the cap's as a variant of its own (its hint names
/// the surface's stop step).
impl From<ManagedError> for ControlError {
    fn from(error: ManagedError) -> Self {
        match error {
            ManagedError::TooManyBrowsers { max, running } => Self::TooManyBrowsers { max, running },
            other => Self::Managed(other),
        }
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
            ControlError::TooManyClients("too many CDP clients connected (64); close one and retry".into()),
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
            for surface in [Surface::Http, Surface::Cli, Surface::Mcp] {
                assert!(error.hint(surface).is_some(), "{error} has no hint");
            }
        }
        assert_eq!(ControlError::StaleRef("e7".into()).to_string(), "ref e7 is stale: take a new snapshot");
        assert_eq!(ControlError::UnknownRef("e99".into()).to_string(), "no ref e99 in the last snapshot of this tab");
        let timeout = ControlError::Timeout { what: "e5 to become visible".into(), ms: 8000 };
        assert_eq!(timeout.to_string(), "timed out after 8 s waiting for e5 to become visible");
        let covered = ControlError::Covered { element: "e5".into(), by: "<div class=\"modal\">".into() };
        assert_eq!(covered.to_string(), "e5 is covered by <div class=\"modal\">: close it or take a new snapshot");
    }

    #[test]
    fn hints_name_steps_in_the_surfaces_own_words() {
        let errors = [
            ControlError::NotRunning("managed".into()),
            ControlError::NoTab("managed".into()),
            ControlError::AmbiguousTab("T1, T2".into()),
            ControlError::StaleRef("e7".into()),
            ControlError::DialogOpen { kind: "alert".into(), message: "hi".into() },
            ControlError::Covered { element: "e1".into(), by: "<div>".into() },
            ControlError::Config(ConfigError::UnknownProfile { name: "x".into(), known: "managed".into() }),
            ControlError::TooManyBrowsers { max: 2, running: vec!["a".into(), "b".into()] },
            ControlError::ProfileExists("work".into()),
            ControlError::NotInFront { target_id: "T9".into(), why: "another tab is in front of it".into() },
        ];
        for error in &errors {
            let http = error.hint(Surface::Http).unwrap();
            let cli = error.hint(Surface::Cli).unwrap();
            let mcp = error.hint(Surface::Mcp).unwrap();
            assert!(http.contains("GET /") || http.contains("POST /"), "{http}");
            assert!(cli.contains("`browser-relay ") && !cli.contains("GET /") && !cli.contains("POST /"), "{cli}");
            assert!(mcp.contains("browser_") && !mcp.contains("GET /") && !mcp.contains("POST /"), "{mcp}");
        }
        assert_eq!(
            ControlError::StaleRef("e7".into()).hint(Surface::Mcp).as_deref(),
            Some("browser_snapshot gives fresh refs")
        );
        // A hidden tab's screenshot names the step that shows it, for that tab.
        let hidden = ControlError::NotInFront { target_id: "T9".into(), why: "its window is minimized".into() };
        assert!(hidden.hint(Surface::Cli).unwrap().starts_with("`browser-relay focus T9` brings it"));
        assert!(hidden.hint(Surface::Mcp).unwrap().starts_with(r#"browser_focus_tab {"targetId":"T9"}"#));
        assert!(hidden.hint(Surface::Http).unwrap().starts_with(r#"POST /tabs/focus {"targetId":"T9"}"#));
        assert_eq!(Surface::from_name(Surface::Mcp.name()), Surface::Mcp);
        let cap: ControlError =
            ManagedError::TooManyBrowsers { max: 2, running: vec!["a".into(), "tmp".into()] }.into();
        assert_eq!((cap.code(), cap.kind()), ("too_many_browsers", ErrorKind::Conflict));
        assert_eq!(
            cap.to_string(),
            "2 managed browsers already run from this serve, its limit (maxManagedBrowsers in config.toml): a, tmp"
        );
        assert_eq!(
            cap.hint(Surface::Cli).as_deref(),
            Some("stop one first, e.g. `browser-relay stop --profile a` (or raise maxManagedBrowsers in config.toml)")
        );
        assert_eq!(Surface::from_name("teletype"), Surface::Http);
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
