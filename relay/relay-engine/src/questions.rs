//! The person-in-the-loop's questions and handoffs as the relay keeps
//! them: what is asked, how it is answered, what waits (`asking.rs` asks).

use std::collections::{BTreeMap, HashMap, HashSet};

use grants::AskKind;
use serde::Serialize;
use shared_protocol::TabId;
use tokio::sync::{oneshot, watch};

/// A question to the person, as every surface shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Question {
    pub id: u64,
    pub grant: String,
    pub kind: AskKind,
    /// "research wants to submit a form to shop.example.com".
    pub what: String,
    /// The site it concerns (a host).
    pub site: String,
    /// The tab (its target id) and its URL when asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    pub asked_at: u64,
    /// When no answer becomes a no (ms since the epoch).
    pub deadline: u64,
}

/// The person's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    Allow,
    /// Allow, and the same kind on the same site for [`SITE_ALLOWANCE`](crate::SITE_ALLOWANCE).
    AllowSite,
    Deny,
}

impl Answer {
    /// The word every surface takes: `allow`, `allow-site` or `deny`.
    pub fn parse(word: &str) -> Result<Self, AskError> {
        match word {
            "allow" => Ok(Self::Allow),
            "allow-site" => Ok(Self::AllowSite),
            "deny" => Ok(Self::Deny),
            other => Err(AskError::NoSuchAnswer(other.chars().take(40).collect())),
        }
    }
}

/// Where an answer came from, for the record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnsweredBy {
    /// The extension's notification.
    Notification,
    Dashboard,
    /// The control API with the person's key (`browser-relay allow|deny`).
    Terminal,
}

impl AnsweredBy {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Notification => "the notification",
            Self::Dashboard => "the dashboard",
            Self::Terminal => "the terminal",
        }
    }
}

/// What a held action comes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    Allowed,
    /// No, with the words whoever caused it is told.
    Refused(String),
}

/// Why an answer was not taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AskError {
    #[error("no question {0} is waiting (answered already, or timed out)")]
    Unknown(u64),
    #[error("no answer '{0}': say allow, allow-site or deny")]
    NoSuchAnswer(String),
    #[error("no tab {0} is handed over")]
    NotHandedOver(String),
    #[error("no shared tab has target id {0}")]
    NoSuchTab(String),
    #[error("the tab is not the grant's: a grant hands over its own tabs only")]
    NotTheGrants,
    #[error("the grant '{0}' is handing this tab over already")]
    AlreadyHandedOver(String),
}

#[derive(Debug)]
pub(crate) struct Waiting {
    pub(crate) question: Question,
    pub(crate) reply: oneshot::Sender<Verdict>,
}

/// A tab the person has.
#[derive(Debug, Clone)]
pub struct Handoff {
    pub grant: String,
    pub reason: String,
    pub target_id: String,
    pub since: u64,
    /// How it ended, once it has; the agent's call waits on it.
    pub(crate) over: watch::Sender<Option<HandoffEnd>>,
}

/// How a handoff ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum HandoffEnd {
    /// The person said Done.
    Done,
    /// The agent's time ran out first.
    TimedOut,
    /// The tab was closed (or the relay stopped).
    TabClosed,
}

impl Serialize for Handoff {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serde_json::json!({"grant": self.grant, "reason": self.reason, "targetId": self.target_id, "since": self.since})
            .serialize(serializer)
    }
}

/// The questions waiting, what the person allowed for a while, the sites a
/// grant's tabs have been on, and the tabs handed over.
#[derive(Debug, Default)]
pub(crate) struct Asking {
    pub(crate) waiting: BTreeMap<u64, Waiting>,
    pub(crate) next_id: u64,
    /// (grant, kind, site) → until (ms since the epoch).
    pub(crate) allowed: HashMap<(String, AskKind, String), u64>,
    /// The sites a grant's tabs have been on since its clients connected.
    pub(crate) visited: HashMap<String, HashSet<String>>,
    /// Tab id → its handoff.
    pub(crate) handed: HashMap<TabId, Handoff>,
    /// (client, tab) → its allowed input going on without asking (an
    /// allowed click's release, the rest of allowed typing).
    pub(crate) input_runs: HashMap<(u64, TabId), InputRun>,
}

/// Input the person allowed, going on.
#[derive(Debug)]
pub(crate) struct InputRun {
    /// Renewed by each event, up to `ends`.
    pub(crate) until: std::time::Instant,
    pub(crate) ends: std::time::Instant,
    pub(crate) site: String,
}

/// The tab a question is about.
#[derive(Debug, Clone)]
pub(crate) struct AskedTab {
    pub tab_id: TabId,
    pub target_id: String,
    pub url: String,
}

impl AskedTab {
    pub(crate) fn of(target: &crate::targets::Target) -> Self {
        Self { tab_id: target.tab_id, target_id: target.target_id.to_string(), url: target.url.clone() }
    }
}
