//! Domains Chrome withholds from extensions, named from one rule rather
//! than a hand list: `chrome.debugger` answers "'IndexedDB.enable' wasn't
//! found" for a method the DevTools protocol has when it does not give
//! extensions that domain (Chromium 156 keeps 14: `Animation`, `Ads`,
//! `CrashReportContext`, `DOMStorage`, `EventBreakpoints`, `HeapProfiler`,
//! `IndexedDB`, `LayerTree`, `Media`, `Memory`, `Profiler`, `Schema`,
//! `Security`, `ServiceWorker`). So any such answer, for a method of the
//! vendored protocol, is told as what it is, with the way to a browser that
//! has it; a method the protocol does not have keeps Chrome's bare words
//! (the client misspelled it).

use std::collections::HashSet;
use std::sync::OnceLock;

/// The DevTools protocol this relay speaks (`relay/assets`, remade by
/// `scripts/update-cdp-protocol.sh`): served at `/json/protocol`, and the
/// methods the rule above knows.
pub const DEVTOOLS_PROTOCOL: &str = include_str!("../../assets/devtools-protocol.json");

/// The protocol's method names (`Domain.method`), read on the first
/// "wasn't found" (an error path: most relays never read them).
#[derive(Debug, Default)]
pub(crate) struct ProtocolMethods(OnceLock<HashSet<Box<str>>>);

impl ProtocolMethods {
    fn contains(&self, method: &str) -> bool {
        self.0.get_or_init(|| methods_of(DEVTOOLS_PROTOCOL)).contains(method)
    }

    /// Chrome's error `chromes`, told as a withheld domain when it is
    /// "'<method>' wasn't found" for a method of the protocol; else as it is.
    pub(crate) fn explain(&self, chromes: &str) -> String {
        let method = chromes.strip_prefix('\'').and_then(|rest| rest.strip_suffix("' wasn't found"));
        match method.filter(|m| self.contains(m)).and_then(|m| m.split_once('.')) {
            Some((domain, _)) => format!(
                "{chromes}: Chrome does not give extensions the {domain} domain, so a tab you share cannot have it; \
                 a browser Browser Relay launches does: `browser-relay start --profile managed`, then connect to \
                 `browser-relay cdp-url --profile managed`"
            ),
            None => chromes.to_string(),
        }
    }
}

/// Every `Domain.command` of a protocol document (empty if it is not one).
fn methods_of(document: &str) -> HashSet<Box<str>> {
    #[derive(serde::Deserialize)]
    struct Document {
        domains: Vec<Domain>,
    }
    #[derive(serde::Deserialize)]
    struct Domain {
        domain: String,
        #[serde(default)]
        commands: Vec<Named>,
    }
    #[derive(serde::Deserialize)]
    struct Named {
        name: String,
    }
    let Ok(document) = serde_json::from_str::<Document>(document) else {
        return HashSet::new();
    };
    document
        .domains
        .iter()
        .flat_map(|d| d.commands.iter().map(move |c| format!("{}.{}", d.domain, c.name).into_boxed_str()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_method_of_the_protocol_that_chrome_did_not_find_is_told_as_a_withheld_domain() {
        let methods = ProtocolMethods::default();
        // The six of the old hand list and the eight it missed.
        for method in [
            "Animation.enable",
            "HeapProfiler.enable",
            "Memory.getDOMCounters",
            "Profiler.enable",
            "Security.enable",
            "ServiceWorker.enable",
            "Ads.getAdMetrics",
            "CrashReportContext.getEntries",
            "DOMStorage.enable",
            "EventBreakpoints.setInstrumentationBreakpoint",
            "IndexedDB.enable",
            "LayerTree.enable",
            "Media.enable",
            "Schema.getDomains",
        ] {
            let domain = method.split_once('.').unwrap().0;
            let told = methods.explain(&format!("'{method}' wasn't found"));
            assert!(
                told.starts_with(&format!(
                    "'{method}' wasn't found: Chrome does not give extensions the {domain} domain"
                )),
                "{told}"
            );
            assert!(told.contains("browser-relay cdp-url --profile managed"), "{told}");
        }
    }

    #[test]
    fn other_errors_and_methods_the_protocol_lacks_keep_chromes_words() {
        let methods = ProtocolMethods::default();
        for chromes in [
            "'Target.teleport' wasn't found",
            "'Profilerx.enable' wasn't found",
            "'DOM.nope' wasn't found",
            "Invalid parameters",
            "'HeapProfiler.enable' wasn't found, and more",
        ] {
            assert_eq!(methods.explain(chromes), chromes);
        }
    }

    #[test]
    fn the_vendored_protocol_is_read_whole() {
        let methods = methods_of(DEVTOOLS_PROTOCOL);
        assert!(methods.len() > 500, "{} methods", methods.len());
        assert!(methods.contains("Page.navigate") && methods.contains("Runtime.evaluate"));
        assert!(methods_of("not json").is_empty());
    }
}
