//! Cookies below the page: a grant's tabs send the person's cookies only to
//! the grant's own sites. Two kinds of `chrome.declarativeNetRequest`
//! session rules per grant with sites, over the grant's tab ids (its shared
//! tabs, the tabs joining its groups, its popups and new tabs):
//!
//! - priority 1: every request drops its `cookie` header and every answer
//!   its `set-cookie` headers;
//! - priority 2, one per site expression: `allow`, which wins over the
//!   lower priority, so a request to one of the grant's sites keeps them.
//!
//! A grant without sites (every site) or without tabs has no rules: DNR
//! refuses an empty `tabIds`. Each grant has a slot for the worker's life,
//! its rules the ids `slot * RULES_PER_GRANT + k` (`k` 0 for the cookie
//! rule, then one per site), so its ids stay the same while its tabs
//! change, and two grants never share one. A change replaces a grant's
//! rules as a set (its old ids removed, its new rules added, in one call,
//! which Chrome applies whole or not at all). The composition is plain
//! Rust, tested here; [`super::grants`] applies it.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use shared_protocol::{GrantGroup, TabId};

use super::op_id::OpId;

/// Rule ids each grant's slot holds: the cookie rule and up to 999 sites.
pub const RULES_PER_GRANT: i64 = 1000;

/// Every resource type declarativeNetRequest knows: without the list, a
/// rule leaves out `main_frame`, the page itself.
pub const RESOURCE_TYPES: [&str; 15] = [
    "main_frame",
    "sub_frame",
    "stylesheet",
    "script",
    "image",
    "font",
    "object",
    "xmlhttprequest",
    "ping",
    "csp_report",
    "media",
    "websocket",
    "webtransport",
    "webbundle",
    "other",
];

/// One `declarativeNetRequest.Rule`, serialised as Chrome takes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionRule {
    pub id: i64,
    pub priority: u32,
    pub action: RuleAction,
    pub condition: RuleCondition,
}

/// A rule's action.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type")]
pub enum RuleAction {
    /// The person's cookies neither sent nor taken.
    #[serde(rename = "modifyHeaders", rename_all = "camelCase")]
    ModifyHeaders { request_headers: Vec<HeaderChange>, response_headers: Vec<HeaderChange> },
    /// A grant's own site: the cookie rule does not apply.
    #[serde(rename = "allow")]
    Allow,
}

/// A header a rule removes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HeaderChange {
    pub header: &'static str,
    pub operation: &'static str,
}

/// Which requests a rule matches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RuleCondition {
    pub tab_ids: Vec<TabId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub regex_filter: Option<String>,
    pub resource_types: Vec<&'static str>,
}

/// A grant's rules over `tabs` (sorted, each once), its ids from `slot`;
/// none when it has no sites, no tabs, or more sites than a slot holds
/// (then the cookie rule alone: no cookies anywhere, and the status says
/// so).
pub(super) fn compose(slot: u32, grant: &GrantGroup, tabs: &[TabId]) -> Vec<SessionRule> {
    if grant.sites.is_empty() || tabs.is_empty() {
        return Vec::new();
    }
    let base = i64::from(slot) * RULES_PER_GRANT;
    let condition = |regex_filter: Option<&String>| RuleCondition {
        tab_ids: tabs.to_vec(),
        regex_filter: regex_filter.cloned(),
        resource_types: RESOURCE_TYPES.to_vec(),
    };
    let remove = |header| vec![HeaderChange { header, operation: "remove" }];
    let mut rules = vec![SessionRule {
        id: base,
        priority: 1,
        action: RuleAction::ModifyHeaders { request_headers: remove("cookie"), response_headers: remove("set-cookie") },
        condition: condition(None),
    }];
    if fits(grant) {
        rules.extend(grant.sites.iter().zip(1..).map(|(site, k)| SessionRule {
            id: base + k,
            priority: 2,
            action: RuleAction::Allow,
            condition: condition(Some(site)),
        }));
    }
    rules
}

/// Whether a grant's sites fit in its slot.
fn fits(grant: &GrantGroup) -> bool {
    (grant.sites.len() as i64) < RULES_PER_GRANT
}

/// Where a grant's rules stand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum RulesState {
    /// Sent; Chrome has not answered the latest update yet.
    Pending(OpId),
    /// Chrome took the latest update.
    InForce,
    /// Chrome refused the latest update, with its message.
    Failed(String),
}

/// What the worker applied of one grant's rules.
#[derive(Debug)]
struct Applied {
    /// The rules last sent (`None`: unknown, after a refusal: sent again
    /// at the next change).
    sent: Option<Vec<SessionRule>>,
    /// Every id that may be in force (removing an id that is not is
    /// harmless; adding one that is fails the whole update).
    maybe: BTreeSet<i64>,
    state: RulesState,
}

/// One update to send: the ids to remove, the rules to add, and the grants
/// it is for.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Update {
    pub(super) remove: Vec<i64>,
    pub(super) add: Vec<SessionRule>,
    pub(super) grants: Vec<String>,
}

/// The rules this run of the worker applied, per grant.
#[derive(Debug, Default)]
pub(super) struct SessionRules {
    slots: BTreeMap<String, u32>,
    last_slot: u32,
    applied: BTreeMap<String, Applied>,
    /// Rules an earlier run of the worker left (its ids), removed by the
    /// next update.
    stale: Vec<i64>,
    /// Whether the next update goes even with nothing to change (the start,
    /// to remove what an earlier run left).
    sweep: bool,
}

impl SessionRules {
    /// At the worker's start: the session rules an earlier run left go with
    /// the first update.
    pub(super) fn left_by_earlier_run(&mut self, ids: Vec<i64>) {
        self.sweep = !ids.is_empty();
        self.stale = ids;
    }

    /// `grant`'s slot, given on first use and kept for the worker's life.
    pub(super) fn slot(&mut self, grant: &str) -> u32 {
        if let Some(slot) = self.slots.get(grant) {
            return *slot;
        }
        self.last_slot += 1;
        self.slots.insert(grant.to_string(), self.last_slot);
        self.last_slot
    }

    /// The update that makes `wanted` (every listed grant's rules) the
    /// rules in force, if anything changes; a grant no longer in `wanted`
    /// has its rules removed.
    pub(super) fn update(&mut self, wanted: &BTreeMap<String, Vec<SessionRule>>) -> Option<Update> {
        let none = Vec::new();
        let names: BTreeSet<&String> = wanted.keys().chain(self.applied.keys()).collect();
        let mut update = Update { remove: std::mem::take(&mut self.stale), add: Vec::new(), grants: Vec::new() };
        for name in names {
            let rules = wanted.get(name).unwrap_or(&none);
            let applied = self.applied.get(name);
            if applied.is_none() && rules.is_empty() {
                continue;
            }
            if applied.is_some_and(|a| a.sent.as_ref() == Some(rules)) {
                continue;
            }
            if let Some(applied) = applied {
                update.remove.extend(applied.maybe.iter().copied());
            }
            update.add.extend(rules.iter().cloned());
            update.grants.push(name.clone());
        }
        if update.grants.is_empty() && !std::mem::take(&mut self.sweep) {
            return None;
        }
        self.sweep = false;
        update.remove.sort_unstable();
        update.remove.dedup();
        Some(update)
    }

    /// `update` was sent as `op`.
    pub(super) fn sent(&mut self, op: OpId, update: &Update) {
        for name in &update.grants {
            let rules: Vec<SessionRule> =
                update.add.iter().filter(|r| self.slots.get(name) == Some(&slot_of(r.id))).cloned().collect();
            let applied = self.applied.entry(name.clone()).or_insert_with(|| Applied {
                sent: None,
                maybe: BTreeSet::new(),
                state: RulesState::InForce,
            });
            applied.maybe.extend(rules.iter().map(|r| r.id));
            applied.sent = Some(rules);
            applied.state = RulesState::Pending(op);
        }
    }

    /// Chrome answered update `op` for `grants`: what the latest update
    /// of each says holds.
    pub(super) fn done(&mut self, op: OpId, grants: &[String], outcome: Result<(), String>) {
        for name in grants {
            let Some(applied) = self.applied.get_mut(name) else { continue };
            if applied.state != RulesState::Pending(op) {
                // A later update is on its way; it says what holds.
                continue;
            }
            match &outcome {
                Ok(()) => {
                    let sent = applied.sent.clone().unwrap_or_default();
                    if sent.is_empty() {
                        // Nothing of the grant's is left: forgotten.
                        self.applied.remove(name);
                    } else {
                        applied.maybe = sent.iter().map(|r| r.id).collect();
                        applied.state = RulesState::InForce;
                    }
                }
                Err(why) => {
                    applied.sent = None;
                    applied.state = RulesState::Failed(why.clone());
                }
            }
        }
    }

    /// Where `grant`'s rules stand (`None`: it has none, nor had).
    pub(super) fn state(&self, grant: &str) -> Option<&RulesState> {
        self.applied.get(grant).map(|a| &a.state)
    }
}

/// The slot a rule id belongs to.
fn slot_of(id: i64) -> u32 {
    u32::try_from(id / RULES_PER_GRANT).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn grant(name: &str, sites: &[&str]) -> GrantGroup {
        GrantGroup { name: name.into(), color: "blue".into(), sites: sites.iter().map(|s| s.to_string()).collect() }
    }

    const LOCAL: &str = r"^(http|ws)://([^/?#@]*@)?127\.0\.0\.1:8765/";
    const WIKI: &str = r"^(https?|wss?)://([^/?#@]*@)?[^/?#@:]+\.wiki\.org(:[0-9]+)?/";

    #[test]
    fn a_grants_rules_are_composed_exactly_as_chrome_takes_them() {
        let rules = compose(3, &grant("research", &[LOCAL, WIKI]), &[12, 40]);
        let all = json!(RESOURCE_TYPES);
        assert_eq!(
            serde_json::to_value(&rules).unwrap(),
            json!([
                {"id": 3000, "priority": 1,
                 "action": {"type": "modifyHeaders",
                            "requestHeaders": [{"header": "cookie", "operation": "remove"}],
                            "responseHeaders": [{"header": "set-cookie", "operation": "remove"}]},
                 "condition": {"tabIds": [12, 40], "resourceTypes": all}},
                {"id": 3001, "priority": 2, "action": {"type": "allow"},
                 "condition": {"tabIds": [12, 40], "regexFilter": LOCAL, "resourceTypes": all}},
                {"id": 3002, "priority": 2, "action": {"type": "allow"},
                 "condition": {"tabIds": [12, 40], "regexFilter": WIKI, "resourceTypes": all}},
            ])
        );
        assert!(RESOURCE_TYPES.contains(&"main_frame"), "the page itself too");
        // Every site: no rules. No tabs: none either (DNR refuses an empty tabIds).
        assert!(compose(3, &grant("ci", &[]), &[12]).is_empty());
        assert!(compose(3, &grant("research", &[WIKI]), &[]).is_empty());
        // More sites than a slot holds: the cookie rule alone (no cookies anywhere).
        let many: Vec<String> = (0..RULES_PER_GRANT).map(|i| format!("^https://s{i}/")).collect();
        let crowded = GrantGroup { sites: many, ..grant("crowded", &[]) };
        assert_eq!(compose(1, &crowded, &[5]).len(), 1);
    }

    #[test]
    fn slots_are_stable_and_never_shared() {
        let mut rules = SessionRules::default();
        assert_eq!(rules.slot("a"), 1);
        assert_eq!(rules.slot("b"), 2);
        assert_eq!(rules.slot("a"), 1);
        assert_eq!(rules.slot("c"), 3);
    }

    #[test]
    fn a_change_replaces_a_grants_rules_as_a_set_and_an_empty_set_removes_them() {
        let mut rules = SessionRules::default();
        rules.left_by_earlier_run(vec![1000, 1001, 7000]);
        let research = grant("research", &[WIKI]);
        let slot = rules.slot("research");
        let wanted = |tabs: &[TabId]| BTreeMap::from([("research".to_string(), compose(slot, &research, tabs))]);

        // The first update also removes what an earlier run left.
        let first = rules.update(&wanted(&[5])).unwrap();
        assert_eq!(first.remove, vec![1000, 1001, 7000]);
        assert_eq!(first.add.iter().map(|r| r.id).collect::<Vec<_>>(), vec![1000, 1001]);
        rules.sent(1, &first);
        assert_eq!(rules.state("research"), Some(&RulesState::Pending(1)));
        assert_eq!(rules.update(&wanted(&[5])), None, "nothing changed: nothing sent");
        rules.done(1, &first.grants, Ok(()));
        assert_eq!(rules.state("research"), Some(&RulesState::InForce));

        // Another tab: the same ids, replaced.
        let second = rules.update(&wanted(&[5, 6])).unwrap();
        assert_eq!(second.remove, vec![1000, 1001]);
        assert_eq!(second.add[0].condition.tab_ids, vec![5, 6]);
        assert_eq!(second.add.iter().map(|r| r.id).collect::<Vec<_>>(), vec![1000, 1001]);
        rules.sent(2, &second);
        // A third before the second is answered removes what either may have put.
        let third = rules.update(&wanted(&[6])).unwrap();
        rules.sent(3, &third);
        rules.done(2, &second.grants, Ok(()));
        assert_eq!(rules.state("research"), Some(&RulesState::Pending(3)), "the latest says what holds");
        rules.done(3, &third.grants, Ok(()));

        // No tabs left: removed, and forgotten once Chrome took it.
        let gone = rules.update(&wanted(&[])).unwrap();
        assert_eq!((&gone.remove[..], &gone.add[..]), (&[1000, 1001][..], &[][..]));
        rules.sent(4, &gone);
        rules.done(4, &gone.grants, Ok(()));
        assert_eq!(rules.state("research"), None);
        // Nothing of a grant never applied is sent for it.
        assert_eq!(rules.update(&BTreeMap::from([("ci".to_string(), vec![])])), None);
    }

    #[test]
    fn a_refused_update_is_shown_and_sent_again_at_the_next_change() {
        let mut rules = SessionRules::default();
        let research = grant("research", &["(unclosed"]);
        let slot = rules.slot("research");
        let wanted = BTreeMap::from([("research".to_string(), compose(slot, &research, &[5]))]);
        let update = rules.update(&wanted).unwrap();
        rules.sent(1, &update);
        rules.done(1, &update.grants, Err("regexFilter is not a valid regular expression".into()));
        assert!(matches!(rules.state("research"), Some(RulesState::Failed(why)) if why.contains("regexFilter")));
        let again = rules.update(&wanted).unwrap();
        assert_eq!(again.remove, vec![1000, 1001], "whatever may be in force goes first");
        assert_eq!(again.add.len(), 2);
    }
}
