//! Which versions the options page shows: the extension's own and the
//! relay's, and a sentence when the two do not take each other's protocol
//! (issue 45).
//!
//! The relay decides whether it takes the extension (it refuses another
//! protocol, `close_code::PROTOCOL_MISMATCH`); the extension only says what
//! the relay said of itself, where the person reads it: its version and
//! protocols, from its `welcome` or, when it sent none (it refused us), from
//! its status route. Both come before or without any proof of the pairing
//! (any program on the port can say them): they are shown, never acted on.
//!
//! Tests: `core/tests.rs` (`the_options_page_shows_both_versions_…`,
//! `a_relay_that_refuses_our_protocol_is_asked_its_versions_…`) and this
//! module's own.

use serde::{Deserialize, Serialize};
use shared_protocol::{PROTOCOL_VERSION, ProtocolRange};

/// What the relay last said of itself.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct RelayVersions {
    pub(super) version: Option<String>,
    /// None: a relay older than the field, which does not say.
    pub(super) protocols: Option<ProtocolRange>,
}

impl RelayVersions {
    /// From the relay's status route's JSON (`relayVersion`, `protocols`);
    /// none from a relay that says neither.
    pub(super) fn from_status(body: &str) -> Option<Self> {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Said {
            #[serde(default)]
            relay_version: Option<String>,
            #[serde(default)]
            protocols: Option<ProtocolRange>,
        }
        let said: Said = serde_json::from_str(body).ok()?;
        (said.relay_version.is_some() || said.protocols.is_some())
            .then_some(Self { version: said.relay_version, protocols: said.protocols })
    }
}

/// For the options page: "Extension 0.1.0 (protocol 8) · Relay 0.1.0
/// (protocols 8–8)", and what to do when they do not match.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VersionsStatus {
    pub line: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mismatch: Option<String>,
}

pub(super) fn versions_status(extension_version: &str, relay: Option<&RelayVersions>) -> VersionsStatus {
    let ours = format!("Extension {} (protocol {PROTOCOL_VERSION})", or_unknown(extension_version));
    let Some(relay) = relay else {
        return VersionsStatus { line: format!("{ours} · Relay: not heard from yet"), mismatch: None };
    };
    let version = relay.version.as_deref().map(or_unknown).unwrap_or("(version not said)");
    let protocols = match relay.protocols {
        Some(ProtocolRange { oldest, newest }) => format!("protocols {oldest}–{newest}"),
        None => "protocols not said: a relay older than this extension".into(),
    };
    let mismatch = relay.protocols.filter(|range| !range.takes(PROTOCOL_VERSION)).map(|range| {
        if PROTOCOL_VERSION > range.newest {
            format!(
                "The relay is older than this extension: it takes protocols {}–{}, this extension speaks {PROTOCOL_VERSION}. Update browser-relay (run the installer again), or load the extension that came with the relay.",
                range.oldest, range.newest
            )
        } else {
            format!(
                "This extension is older than the relay: it speaks protocol {PROTOCOL_VERSION}, the relay takes {}–{}. Load the extension that came with the relay again (chrome://extensions, its reload button, or \"Load unpacked\" on the relay's extension folder).",
                range.oldest, range.newest
            )
        }
    });
    VersionsStatus { line: format!("{ours} · Relay {version} ({protocols})"), mismatch }
}

fn or_unknown(version: &str) -> &str {
    if version.is_empty() { "(version unknown)" } else { version }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn relay(version: &str, oldest: u32, newest: u32) -> RelayVersions {
        RelayVersions { version: Some(version.into()), protocols: Some(ProtocolRange { oldest, newest }) }
    }

    #[test]
    fn both_versions_on_one_line_and_nothing_more_when_they_match() {
        let shown = versions_status("0.1.0", Some(&relay("0.1.0", PROTOCOL_VERSION, PROTOCOL_VERSION)));
        assert_eq!(
            shown.line,
            format!(
                "Extension 0.1.0 (protocol {PROTOCOL_VERSION}) · Relay 0.1.0 (protocols {PROTOCOL_VERSION}–{PROTOCOL_VERSION})"
            )
        );
        assert_eq!(shown.mismatch, None);
        // Another release that still takes our protocol is no mismatch.
        let shown = versions_status("0.1.0", Some(&relay("0.3.0", PROTOCOL_VERSION, PROTOCOL_VERSION + 2)));
        assert_eq!(shown.mismatch, None, "{shown:?}");
    }

    #[test]
    fn an_older_relay_says_update_the_relay_a_newer_one_says_reload_the_extension() {
        let older = versions_status("0.1.0", Some(&relay("0.0.9", 1, PROTOCOL_VERSION - 1)));
        let said = older.mismatch.expect("a mismatch");
        assert!(
            said.starts_with("The relay is older than this extension") && said.contains("Update browser-relay"),
            "{said}"
        );
        let newer = versions_status("0.1.0", Some(&relay("0.9.0", PROTOCOL_VERSION + 1, PROTOCOL_VERSION + 3)));
        let said = newer.mismatch.expect("a mismatch");
        assert!(
            said.starts_with("This extension is older than the relay") && said.contains("Load the extension"),
            "{said}"
        );
        assert_eq!(
            newer.line,
            format!(
                "Extension 0.1.0 (protocol {PROTOCOL_VERSION}) · Relay 0.9.0 (protocols {}–{})",
                PROTOCOL_VERSION + 1,
                PROTOCOL_VERSION + 3
            )
        );
    }

    #[test]
    fn a_relay_not_heard_from_or_that_does_not_say_is_shown_as_such() {
        let none = versions_status("0.1.0", None);
        assert_eq!(none.line, format!("Extension 0.1.0 (protocol {PROTOCOL_VERSION}) · Relay: not heard from yet"));
        let older = versions_status("0.1.0", Some(&RelayVersions { version: Some("0.1.0".into()), protocols: None }));
        assert!(
            older.line.ends_with("Relay 0.1.0 (protocols not said: a relay older than this extension)"),
            "{older:?}"
        );
        assert_eq!(older.mismatch, None, "the relay itself refuses what it does not take");
    }

    #[test]
    fn the_status_routes_versions_are_read_and_a_route_that_says_none_gives_none() {
        let said = RelayVersions::from_status(
            r#"{"connected":false,"relayVersion":"0.1.0","protocols":{"oldest":8,"newest":9}}"#,
        );
        assert_eq!(said, Some(relay("0.1.0", 8, 9)));
        assert_eq!(RelayVersions::from_status(r#"{"connected":false,"grants":1}"#), None);
        assert_eq!(RelayVersions::from_status("not json"), None);
    }
}
