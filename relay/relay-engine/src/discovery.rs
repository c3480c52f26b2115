//! Chrome's discovery documents, `/json/version` and one `/json/list`
//! entry, in the shape Chrome's own port serves them: the one place that
//! builds them, for the user's tabs (the relay, from the extension's hello
//! and its registry) and for managed profiles (the binary's
//! `/profiles/<name>/json/*`, from the browser's answers).

use serde::Serialize;

/// `/json/version`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VersionDocument {
    #[serde(rename = "Browser")]
    pub browser: String,
    #[serde(rename = "Protocol-Version")]
    pub protocol_version: String,
    #[serde(rename = "User-Agent")]
    pub user_agent: String,
    #[serde(rename = "V8-Version")]
    pub v8_version: String,
    #[serde(rename = "WebKit-Version")]
    pub webkit_version: String,
    /// The browser-level socket; `None` (JSON `null`) before the server knows
    /// its own address.
    #[serde(rename = "webSocketDebuggerUrl")]
    pub web_socket_debugger_url: Option<String>,
}

impl VersionDocument {
    /// `WebKit-Version` as Chrome writes it from its Blink revision.
    pub fn webkit_version_of(revision: &str) -> String {
        format!("537.36 ({revision})")
    }
}

/// One target of `/json/list` (and `PUT /json/new`'s answer).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ListEntry {
    pub description: String,
    pub devtools_frontend_url: String,
    pub id: String,
    pub title: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub url: String,
    /// The target's own socket (`/devtools/page/<id>` on the relay).
    pub web_socket_debugger_url: Option<String>,
    /// The page's icon, when it has one (as Chrome lists it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub favicon_url: Option<String>,
}

impl ListEntry {
    /// A target as Chrome lists it; the relay serves no DevTools front end.
    pub fn new(id: &str, kind: &str, title: &str, url: &str, web_socket_debugger_url: Option<String>) -> Self {
        Self {
            description: String::new(),
            devtools_frontend_url: String::new(),
            id: id.to_string(),
            title: title.to_string(),
            kind: kind.to_string(),
            url: url.to_string(),
            web_socket_debugger_url,
            favicon_url: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_documents_have_chromes_keys() {
        let version = VersionDocument {
            browser: "Chrome/156.0.8078.73".into(),
            protocol_version: "1.3".into(),
            user_agent: "Mozilla/5.0".into(),
            v8_version: "15.6".into(),
            webkit_version: VersionDocument::webkit_version_of("abc"),
            web_socket_debugger_url: Some("ws://127.0.0.1:1/devtools/browser/x".into()),
        };
        assert_eq!(
            serde_json::to_value(&version).unwrap(),
            json!({"Browser": "Chrome/156.0.8078.73", "Protocol-Version": "1.3", "User-Agent": "Mozilla/5.0",
                   "V8-Version": "15.6", "WebKit-Version": "537.36 (abc)",
                   "webSocketDebuggerUrl": "ws://127.0.0.1:1/devtools/browser/x"})
        );
        let entry = ListEntry::new("T", "page", "Example", "https://example.com/", None);
        assert_eq!(
            serde_json::to_value(&entry).unwrap(),
            json!({"description": "", "devtoolsFrontendUrl": "", "id": "T", "title": "Example", "type": "page",
                   "url": "https://example.com/", "webSocketDebuggerUrl": null})
        );
        // A page with an icon lists it under Chrome's key.
        let with_icon = ListEntry { favicon_url: Some("https://example.com/favicon.ico".into()), ..entry };
        assert_eq!(serde_json::to_value(&with_icon).unwrap()["faviconUrl"], "https://example.com/favicon.ico");
    }
}
