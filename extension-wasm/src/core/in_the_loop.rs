//! What the person in the loop is shown: the relay's questions and the
//! tabs handed over, with their notification and menu ids (`person.rs`
//! shows them).

use shared_protocol::{AskAnswer, TabId};

use super::host::{ChromeCall, GroupId};

/// The prefix of a question's notification id; the relay's id follows.
pub(super) const ASK_PREFIX: &str = "ask-";
/// The prefix of a handoff's notification id; the tab id follows.
pub(super) const HANDOFF_PREFIX: &str = "handoff-";
/// The prefix of a handoff's "Done" menu item id; the tab id follows.
pub const DONE_MENU_PREFIX: &str = "handoff:";
/// The longest group title a handoff sets, its ellipsis included (Chrome
/// shows a group's whole title on the tab strip).
pub(super) const HANDOFF_TITLE_CHARS: usize = 60;

/// A question's buttons, in Chrome's order (`buttonIndex`).
pub(super) const ASK_BUTTONS: [(&str, AskAnswer); 2] = [("Allow", AskAnswer::Allow), ("Deny", AskAnswer::Deny)];

/// A question's notification id.
pub(super) fn ask_notification(id: u64) -> String {
    format!("{ASK_PREFIX}{id}")
}

/// A handoff's notification id.
pub(super) fn handoff_notification(tab: TabId) -> String {
    format!("{HANDOFF_PREFIX}{tab}")
}

/// A handoff's "Done" menu item id.
pub(super) fn done_menu(tab: TabId) -> String {
    format!("{DONE_MENU_PREFIX}{tab}")
}

/// "GRANT needs you: REASON" (no reason: "GRANT needs you"), one line.
pub(super) fn needs_you(grant: &str, reason: &str) -> String {
    let reason = reason.split_whitespace().collect::<Vec<_>>().join(" ");
    if reason.is_empty() { format!("{grant} needs you") } else { format!("{grant} needs you: {reason}") }
}

/// `text` cut to [`HANDOFF_TITLE_CHARS`] characters, an ellipsis last if
/// it was longer.
pub(super) fn cut(text: &str) -> String {
    if text.chars().count() <= HANDOFF_TITLE_CHARS {
        return text.to_string();
    }
    let kept: String = text.chars().take(HANDOFF_TITLE_CHARS - 1).collect();
    format!("{}…", kept.trim_end())
}

/// A tab handed to the person.
#[derive(Debug, Clone)]
pub(super) struct Handoff {
    pub(super) grant: String,
    pub(super) reason: String,
    /// Its notification and menu item (named by the tab id the relay
    /// gave; a tab Chrome replaced keeps them).
    pub(super) notification: String,
    pub(super) menu: String,
    /// The group last titled for it, named again when it ends.
    pub(super) titled: Option<GroupId>,
    /// Which handoff came last (a group with two shows the latest).
    pub(super) order: u64,
}

impl Handoff {
    /// What its group's title and its badge say.
    pub(super) fn what(&self) -> String {
        needs_you(&self.grant, &self.reason)
    }

    /// Its "Done" on the toolbar button's menu.
    pub(super) fn done_item(&self) -> ChromeCall {
        ChromeCall::MenusCreate { id: self.menu.clone(), title: format!("Done: give the tab back to {}", self.grant) }
    }
}

/// The questions and handoffs the relay sent on the current link.
#[derive(Debug, Default)]
pub(super) struct InTheLoop {
    /// The questions shown, by the relay's id.
    pub(super) asks: std::collections::BTreeSet<u64>,
    pub(super) handoffs: std::collections::BTreeMap<TabId, Handoff>,
    pub(super) next_order: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handoffs_title_is_one_line_cut_to_sixty_characters() {
        assert_eq!(needs_you("research", "sign in\n to   the library"), "research needs you: sign in to the library");
        assert_eq!(needs_you("research", "  "), "research needs you");
        let long = cut(&needs_you("research", &"solve the puzzle on this page ".repeat(4)));
        assert_eq!(long.chars().count(), HANDOFF_TITLE_CHARS, "{long}");
        assert!(long.ends_with('…') && long.starts_with("research needs you: solve"), "{long}");
        assert_eq!(cut("short"), "short");
        let exact = "x".repeat(HANDOFF_TITLE_CHARS);
        assert_eq!(cut(&exact), exact);
        assert_eq!(cut(&"é".repeat(100)).chars().count(), HANDOFF_TITLE_CHARS, "characters, not bytes");
    }
}
