//! What the user sees of the relay's clients and stops from the dashboard:
//! who is connected, to which tabs, since when and with how many commands;
//! disconnecting one client; stopping sharing a tab. And the relay's side
//! of the activity record: each client's connection and the commands that
//! [`activity::summary::cdp_command`] names (everything else costs one
//! string match).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use activity::{ActivityRecord, Entry, Kind, Source};
use serde::Serialize;
use shared_protocol::{RelayMessage, TabId};

use super::cdp::Command;
use super::client::{ClientHandle, SessionKind};
use super::error::CallError;
use super::relay::Relay;

/// One connected client, as the dashboard lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientSummary {
    pub id: u64,
    pub name: String,
    pub user_agent: String,
    /// When it connected (ms since the epoch).
    pub since: u64,
    pub commands: u64,
    /// The managed profile it drives over the pipe; `None`: the user's
    /// shared tabs, through the extension.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// The shared tabs it holds a session on (target ids).
    pub tabs: Vec<String>,
    /// The grant whose key it presented (`None`: the person's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grant: Option<String>,
}

/// A tab the user shares, as the dashboard lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SharedTab {
    pub tab_id: TabId,
    pub target_id: String,
    pub url: String,
    pub title: String,
    /// Its icon, when Chrome has one the dashboard may load (see
    /// [`shown_icon`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fav_icon_url: Option<String>,
    /// The clients holding a session on it.
    pub clients: Vec<u64>,
    /// The grant whose group holds it (`None`: the person's own sharing).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grant: Option<String>,
}

/// Why a dashboard stop did not happen.
#[derive(Debug, thiserror::Error)]
pub enum StopError {
    #[error("no client {0} is connected")]
    NoSuchClient(u64),
    #[error("no shared tab has target id {0}")]
    NoSuchTab(String),
    #[error("the tab gave no frame: is it in front in its window?")]
    NoFrame,
    #[error(transparent)]
    Call(#[from] CallError),
}

/// The close frame's reason when the user disconnects a client.
pub const DISCONNECTED_BY_USER: &str = "disconnected by the user from the Browser Relay dashboard";

impl Relay {
    /// Where the dashboard is (`http://127.0.0.1:PORT/ui`), for the
    /// extension's options page (`/extension/status`).
    pub fn set_dashboard_url(&self, url: String) {
        let _ = self.0.dashboard.set(url);
    }

    /// Records what clients do into `record` from now on.
    pub fn record_activity_to(&self, record: ActivityRecord) {
        let _ = self.0.activity.set(record);
    }

    /// Every connected client: the relay's own, then the managed profiles'.
    pub fn clients(&self) -> Vec<ClientSummary> {
        let mut tabs_of: std::collections::HashMap<u64, Vec<String>> = std::collections::HashMap::new();
        for target in self.registry().iter() {
            for sub in &target.subs {
                let tabs = tabs_of.entry(sub.client.id).or_default();
                if !tabs.iter().any(|t| **t == *target.target_id) {
                    tabs.push(target.target_id.to_string());
                }
            }
        }
        let mut all: Vec<ClientSummary> = self
            .0
            .clients
            .iter()
            .chain(self.0.piped.iter())
            .map(|entry| {
                let client = entry.value();
                ClientSummary {
                    id: client.id,
                    name: client.name.to_string(),
                    user_agent: client.user_agent.to_string(),
                    since: client.since_ms,
                    commands: client.commands_sent.load(Ordering::Relaxed),
                    profile: client.profile.as_deref().map(str::to_string),
                    tabs: tabs_of.remove(&client.id).unwrap_or_default(),
                    grant: client.grant().map(|g| g.name.to_string()),
                }
            })
            .collect();
        all.sort_by_key(|c| c.id);
        all
    }

    /// The tabs the user shares, in tab order.
    pub fn shared_tabs(&self) -> Vec<SharedTab> {
        let registry = self.registry();
        let mut tabs: Vec<SharedTab> = registry
            .iter()
            .map(|target| {
                let mut clients: Vec<u64> = target.subs.iter().map(|s| s.client.id).collect();
                clients.sort_unstable();
                clients.dedup();
                SharedTab {
                    tab_id: target.tab_id,
                    target_id: target.target_id.to_string(),
                    url: target.url.clone(),
                    title: target.title.clone(),
                    fav_icon_url: target.fav_icon_url.as_deref().and_then(shown_icon),
                    clients,
                    grant: target.grant.as_deref().map(str::to_string),
                }
            })
            .collect();
        tabs.sort_by_key(|t| t.tab_id);
        tabs
    }

    /// Ends one client's connection (its socket gets a close frame that
    /// says why); what it set on the tabs is taken back as when it leaves.
    pub fn disconnect_client(&self, id: u64) -> Result<(), StopError> {
        let client = self
            .0
            .clients
            .get(&id)
            .map(|c| c.value().clone())
            .or_else(|| self.0.piped.get(&id).map(|c| c.value().clone()))
            .ok_or(StopError::NoSuchClient(id))?;
        tracing::info!(client = id, name = %client.name, "the user disconnected a client");
        self.note(Entry::now(
            Source::Dashboard,
            "dashboard",
            Kind::Connection,
            format!("disconnect {} (#{id})", client.name),
        ));
        client.disconnect(1000, DISCONNECTED_BY_USER);
        Ok(())
    }

    /// Stops sharing a tab as the user's own click would: the extension
    /// detaches Chrome's debugger and takes the tab out of the group, and
    /// every client sees the tab go.
    pub async fn stop_sharing(&self, target_id: &str) -> Result<(), StopError> {
        let tab_id = self.shared_tab(target_id)?;
        let url = self.registry().by_tab(tab_id).map(|t| t.url.clone());
        // What the site hold keeps for the person fails first: Chrome lets
        // a paused request go when its debugger detaches.
        if let Some(target) = self.registry().by_tab_mut(tab_id) {
            self.release_site_hold(target, "the person stopped sharing the tab");
        }
        self.call(|id| RelayMessage::DebuggerDetach { id, tab_id }).await?;
        // Chrome tells the extension nothing of a detach it asked for.
        self.drop_tab(tab_id);
        self.note(Entry {
            tab: Some(target_id.to_string()),
            url,
            ..Entry::now(Source::Dashboard, "dashboard", Kind::Tab, "stop sharing the tab")
        });
        Ok(())
    }

    /// A small JPEG of a shared tab as it is now (base64), for the
    /// dashboard's live view: asked of the extension directly, so watching
    /// adds no client to the tab. A tab that is not painted (not in front
    /// of its window) gives nothing within `within`.
    pub async fn frame_of(&self, target_id: &str, within: std::time::Duration) -> Result<String, StopError> {
        let tab_id = self.shared_tab(target_id)?;
        let params = serde_json::json!({"format": "jpeg", "quality": 50});
        let shot = tokio::time::timeout(within, self.send_command(tab_id, "Page.captureScreenshot", Some(params)))
            .await
            .map_err(|_| StopError::NoFrame)??;
        #[derive(serde::Deserialize)]
        struct Shot {
            data: String,
        }
        serde_json::from_str::<Shot>(&shot).map(|shot| shot.data).map_err(|_| StopError::NoFrame)
    }

    /// The tab of a shared page target.
    fn shared_tab(&self, target_id: &str) -> Result<TabId, StopError> {
        self.tab_of_target(target_id).ok_or_else(|| StopError::NoSuchTab(target_id.to_string()))
    }

    /// An entry of `client`'s doing: its name, number and profile.
    fn client_entry(client: &ClientHandle, kind: Kind, summary: String) -> Entry {
        let mut entry = Entry::now(Source::Cdp, client.name.to_string(), kind, summary);
        entry.client_id = Some(client.id);
        entry.profile = client.profile.as_deref().map(str::to_string);
        entry.grant = client.grant().map(|g| g.name.to_string());
        entry
    }

    pub(crate) fn note(&self, entry: Entry) {
        if let Some(record) = self.0.activity.get() {
            record.record(entry);
        }
    }

    /// The site hold refused a navigation of a grant's tab (the page's own,
    /// or a client's by script): the person sees it in the record.
    pub(crate) fn note_refused_navigation(&self, target: &crate::targets::Target, grant: &grants::Grant, url: &str) {
        let mut entry = Entry::now(
            Source::Relay,
            "Browser Relay",
            Kind::Navigation,
            format!("refused {url}: outside the grant's sites ({})", grant.sites.describe()),
        );
        entry.tab = Some(target.target_id.to_string());
        entry.url = Some(target.url.clone());
        entry.grant = Some(grant.name.to_string());
        entry.failed = true;
        self.note(entry);
    }

    /// A grant's popup landed outside its sites and was closed.
    pub(crate) fn note_closed_popup(&self, grant: &grants::Grant, url: &str) {
        let mut entry = Entry::now(
            Source::Relay,
            "Browser Relay",
            Kind::Tab,
            format!("closed a popup at {url}: outside the grant's sites ({})", grant.sites.describe()),
        );
        entry.url = Some(url.to_string());
        entry.grant = Some(grant.name.to_string());
        entry.failed = true;
        self.note(entry);
    }

    /// A client connected or left.
    pub(crate) fn note_connection(&self, client: &ClientHandle, page: Option<&str>, connected: bool) {
        let Some(record) = self.0.activity.get() else { return };
        let what = match (connected, &client.profile) {
            (true, Some(profile)) => format!("connect to the {profile} profile ({})", client.user_agent),
            (true, None) => format!("connect ({})", client.user_agent),
            (false, _) => format!("leave after {} commands", client.commands_sent.load(Ordering::Relaxed)),
        };
        let mut entry = Self::client_entry(client, Kind::Connection, what);
        entry.tab = page.map(str::to_string);
        record.record(entry);
    }

    /// A client's command: counted, and recorded when it is one the record
    /// keeps, with the tab it went to; as failed when the relay `refused`
    /// it (a wipe of the person's cookies), so the record never says a
    /// refused command ran, nor leaves out that it was tried.
    pub(crate) fn note_command(&self, client: &ClientHandle, command: &Command<'_>, refused: bool) {
        client.commands_sent.fetch_add(1, Ordering::Relaxed);
        let Some(record) = self.0.activity.get() else { return };
        let Some((kind, summary)) = activity::summary::cdp_command(&command.method, command.params.map(|p| p.get()))
        else {
            return;
        };
        let session = command.session_id.as_deref().or(client.default_session.as_deref());
        let target_id = session.and_then(|session| self.target_of_session(client, session));
        // Cut as it is copied: a page's URL can run to megabytes.
        let url = target_id.as_deref().and_then(|t| self.registry().by_target_id(t).map(|t| activity::cut(&t.url)));
        let mut entry = Self::client_entry(client, kind, summary);
        entry.tab = target_id.map(|t| t.to_string());
        entry.url = url;
        entry.failed = refused;
        record.record(entry);
    }

    /// A frame a client sends a managed browser: counted, and recorded as
    /// [`Self::note_command`] does (the tab is the pipe's business).
    pub(crate) fn note_piped_frame(&self, client: &ClientHandle, frame: &str) {
        client.commands_sent.fetch_add(1, Ordering::Relaxed);
        let Some(record) = self.0.activity.get() else { return };
        let Some((kind, summary)) = activity::summary::cdp_frame(frame) else { return };
        record.record(Self::client_entry(client, kind, summary));
    }

    /// The page target a client's session stands for (a child session's
    /// tab's page).
    fn target_of_session(&self, client: &ClientHandle, session: &str) -> Option<Arc<str>> {
        match client.state().sessions.get(session) {
            Some(SessionKind::Page(target) | SessionKind::Tab(target)) => return Some(target.clone()),
            Some(SessionKind::Browser) => return None,
            None => {}
        }
        let tab = self.0.children.get(session).map(|e| *e.value())?;
        self.registry().by_tab(tab).map(|t| t.target_id.clone())
    }
}

/// `icon` if the dashboard may load it as an image: an `http(s)` address
/// or an inline image, as a page sets it; anything else Chrome may report
/// (`chrome://`, `chrome-extension://`, a `javascript:` a page wrote) is
/// not shown, nor one over [`ICON_MAX`] (a page's inline icon of megabytes
/// would ride along with every poll of the dashboard). Loading it repeats a
/// fetch the person's browser already made for its tab strip; the
/// dashboard sends no referrer with it.
fn shown_icon(icon: &str) -> Option<String> {
    let lower = icon.trim_start().to_ascii_lowercase();
    let loadable = ["http://", "https://", "data:image/"].iter().any(|scheme| lower.starts_with(scheme));
    (loadable && icon.len() <= ICON_MAX).then(|| icon.to_string())
}

/// The longest icon address the dashboard is handed (a 16 px PNG inline
/// is well under 2 KiB).
const ICON_MAX: usize = 32 << 10;

#[cfg(test)]
mod tests {
    use super::{ICON_MAX, shown_icon};

    #[test]
    fn only_web_and_inline_icons_are_shown() {
        for shown in ["https://example.com/favicon.ico", "http://127.0.0.1:8/i.png", "data:image/png;base64,iVBO"] {
            assert_eq!(shown_icon(shown).as_deref(), Some(shown));
        }
        for hidden in [
            "chrome://favicon2/?size=16",
            "chrome-extension://abc/icon.png",
            "javascript:alert(1)",
            " JavaScript:alert(1)",
            "data:text/html,<script>alert(1)</script>",
            "file:///etc/passwd",
            "",
        ] {
            assert_eq!(shown_icon(hidden), None, "{hidden}");
        }
        let huge = format!("data:image/png;base64,{}", "A".repeat(ICON_MAX));
        assert_eq!(shown_icon(&huge), None, "an inline icon of more than 32 KiB");
    }
}
