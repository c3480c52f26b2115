//! Refs (`e1`, `e2`, …): what a snapshot hands out and actions take back.
//!
//! The page keeps ref → element in its isolated world (see `snapshot.js`);
//! the engine keeps, per tab, where each ref lives (which frame, through
//! which iframe) and its role+name+nth for the fallback when the element was
//! replaced by an identical one. Tables are keyed by target, not by
//! connection, so they survive a reconnect of the engine.
//!
//! A full snapshot replaces the tab's table. A partial one (a `selector`,
//! `frame`, a `depth` or `limit` that cut the page, and `GET /find`)
//! merges into it ([`RefsJoin`]): the refs it shows
//! are re-issued (an element that had a ref keeps it), the others stay, and
//! a new ref takes a number above every number the table has ever held, so
//! no number ever means two things. Each frame's world keeps the refs the
//! table has for it ([`RefTable::kept_in`]); after a `limit` or `depth`
//! snapshot that showed the whole page (and so replaced the table) also
//! those of elements no longer shown, which the table no longer names and
//! the next merge prunes.

use std::collections::HashMap;
use std::sync::Arc;

use crate::error::ControlError;

/// How many tabs' refs are kept (least recently used go first).
pub(crate) const REF_TABLES_KEPT: usize = 50;

/// `e7`, `[e7]` (as a snapshot writes it), `@e7` and `ref=e7` (as the full
/// form and Playwright write it) all name ref `e7`.
pub(crate) fn parse_ref(input: &str) -> Result<String, ControlError> {
    let trimmed = input.trim();
    let trimmed = trimmed.strip_prefix('[').and_then(|r| r.strip_suffix(']')).unwrap_or(trimmed);
    let bare = trimmed.strip_prefix('@').or_else(|| trimmed.strip_prefix("ref=")).unwrap_or(trimmed);
    let valid = bare.len() > 1
        && bare.starts_with('e')
        && bare[1..].bytes().all(|b| b.is_ascii_digit())
        && !bare[1..].starts_with('0');
    if valid { Ok(bare.to_string()) } else { Err(ControlError::InvalidRef(input.to_string())) }
}

/// Where a frame's document is, in terms that survive a reconnect: the
/// target whose session holds the frame (the tab itself, or an out-of-process
/// iframe's own target) and the frame id. Child frames also remember the
/// `<iframe>` element that holds them, to turn frame coordinates into the
/// tab's viewport coordinates.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct FrameLoc {
    pub session_target: String,
    pub frame_id: String,
    pub owner: Option<Arc<FrameOwner>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct FrameOwner {
    /// The frame that contains the `<iframe>` element.
    pub parent: FrameLoc,
    /// The `<iframe>` element, in the parent's renderer.
    pub backend_node_id: i64,
}

impl FrameLoc {
    pub(crate) fn main(target_id: &str) -> Self {
        Self { session_target: target_id.to_string(), frame_id: target_id.to_string(), owner: None }
    }
}

/// One ref: its frame and what the page said it was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RefEntry {
    pub role: String,
    pub name: String,
    /// Index among refs with the same role and name, in document order.
    pub nth: u32,
    pub frame: FrameLoc,
}

/// The refs of one tab: its last full snapshot's, and what partial ones
/// added or re-issued since.
#[derive(Debug, Clone, Default)]
pub(crate) struct RefTable {
    pub refs: HashMap<String, RefEntry>,
    /// The number the next new ref takes (above every number handed out
    /// since the last full snapshot, also of refs later re-issued).
    next: u32,
    /// The text of the tab's last whole snapshot in the default form, which
    /// an action's `diff` is told against.
    pub seen: Option<Arc<str>>,
}

/// The refs one snapshot handed out, and the number after the last new one.
#[derive(Debug, Clone, Default)]
pub(crate) struct Issued {
    pub refs: Vec<(String, RefEntry)>,
    pub next: u32,
    /// Its walk left part of the page out (its node limit or depth).
    pub cut: bool,
}

/// How a snapshot's refs join the tab's table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RefsJoin {
    /// Every ref new, from `e1`; the tab's others go.
    Replace,
    /// Into the tab's: the refs it shows are re-issued, the others stay.
    Merge,
    /// Walked as a merge, and kept as one only if the walk left part of the
    /// page out; one that showed it all replaces the table (with the
    /// numbers it re-issued), so refs of elements gone go too.
    MergeIfCut,
}

impl RefTable {
    pub(crate) fn get(&self, r: &str) -> Result<&RefEntry, ControlError> {
        self.refs.get(r).ok_or_else(|| ControlError::UnknownRef(r.to_string()))
    }

    /// A full snapshot's table.
    pub(crate) fn from_issued(issued: Issued) -> Self {
        let mut table = Self::default();
        table.merge(issued);
        table
    }

    /// Where a merging snapshot numbers its new refs.
    pub(crate) fn next_ref(&self) -> u32 {
        self.next.max(1)
    }

    /// A partial snapshot's refs: re-issued ones replace their entries (the
    /// element's role, name or position may have changed), new ones join.
    pub(crate) fn merge(&mut self, issued: Issued) {
        let highest = issued.refs.iter().filter_map(|(name, _)| ref_number(name)).max().unwrap_or(0);
        self.next = self.next_ref().max(issued.next).max(highest + 1);
        self.refs.extend(issued.refs);
    }

    /// The numbers of the refs that live in `frame`'s document (what its
    /// world may keep when a partial snapshot walks it again).
    pub(crate) fn kept_in(&self, frame: &FrameLoc) -> Vec<u32> {
        let mut numbers: Vec<u32> = self
            .refs
            .iter()
            .filter(|(_, entry)| {
                entry.frame.session_target == frame.session_target && entry.frame.frame_id == frame.frame_id
            })
            .filter_map(|(name, _)| ref_number(name))
            .collect();
        numbers.sort_unstable();
        numbers
    }
}

/// `e7` → 7.
fn ref_number(name: &str) -> Option<u32> {
    name.strip_prefix('e')?.parse().ok()
}

/// Ref tables by (profile, target), least recently used evicted first.
#[derive(Debug, Default)]
pub(crate) struct RefStore {
    tables: HashMap<(String, String), (u64, Arc<RefTable>)>,
    tick: u64,
}

impl RefStore {
    /// Records what a snapshot handed out: a full snapshot's refs (`base`
    /// none) replace the tab's table; a partial one's merge into `base`, the
    /// table the snapshot started from.
    pub(crate) fn record(&mut self, profile: &str, target_id: &str, base: Option<&RefTable>, issued: Issued) {
        let table = match base {
            Some(base) => {
                let mut table = base.clone();
                table.merge(issued);
                table
            }
            None => RefTable::from_issued(issued),
        };
        self.put(profile, target_id, table);
    }

    /// What the agent last read of the whole tab (a snapshot in the default
    /// form), or `None` when what it read since is not that.
    pub(crate) fn remember(&mut self, profile: &str, target_id: &str, seen: Option<Arc<str>>) {
        if let Some((_, table)) = self.tables.get_mut(&(profile.to_string(), target_id.to_string())) {
            Arc::make_mut(table).seen = seen;
        }
    }

    /// Replaces a tab's refs.
    pub(crate) fn put(&mut self, profile: &str, target_id: &str, table: RefTable) {
        self.tick += 1;
        self.tables.insert((profile.to_string(), target_id.to_string()), (self.tick, Arc::new(table)));
        while self.tables.len() > REF_TABLES_KEPT {
            let oldest = self.tables.iter().min_by_key(|(_, (tick, _))| *tick).map(|(key, _)| key.clone());
            if let Some(key) = oldest {
                self.tables.remove(&key);
            }
        }
    }

    pub(crate) fn get(&mut self, profile: &str, target_id: &str) -> Option<Arc<RefTable>> {
        self.tick += 1;
        let tick = self.tick;
        self.tables.get_mut(&(profile.to_string(), target_id.to_string())).map(|(used, table)| {
            *used = tick;
            table.clone()
        })
    }

    /// A closed tab's refs go with it.
    pub(crate) fn forget(&mut self, profile: &str, target_id: &str) {
        self.tables.remove(&(profile.to_string(), target_id.to_string()));
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.tables.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spellings_of_a_ref() {
        for spelling in ["e7", "[e7]", "@e7", "ref=e7", "[ref=e7]", " e7 "] {
            assert_eq!(parse_ref(spelling).unwrap(), "e7", "{spelling}");
        }
        for bad in ["", "e", "7", "e07", "E7", "e7x", "ref=", "@", "f1", "[e7", "[]", "[[e7]]"] {
            let error = parse_ref(bad).unwrap_err();
            assert!(matches!(error, ControlError::InvalidRef(_)), "{bad}");
        }
    }

    #[test]
    fn tables_are_evicted_least_recently_used_first() {
        let mut store = RefStore::default();
        for i in 0..REF_TABLES_KEPT {
            store.put("p", &format!("t{i}"), RefTable::default());
        }
        // Touch t0 so that t1 is now the oldest.
        assert!(store.get("p", "t0").is_some());
        store.put("p", "new", RefTable::default());
        assert_eq!(store.len(), REF_TABLES_KEPT);
        assert!(store.get("p", "t0").is_some(), "recently used survives");
        assert!(store.get("p", "t1").is_none(), "least recently used is evicted");
        assert!(store.get("p", "new").is_some());
        assert!(store.get("other", "t0").is_none(), "tables are per profile");
    }

    fn entry(role: &str, name: &str, frame: &FrameLoc) -> RefEntry {
        RefEntry { role: role.into(), name: name.into(), nth: 0, frame: frame.clone() }
    }

    fn issued(refs: &[(&str, RefEntry)], next: u32) -> Issued {
        Issued { refs: refs.iter().map(|(name, entry)| (name.to_string(), entry.clone())).collect(), next, cut: false }
    }

    #[test]
    fn a_partial_snapshot_merges_and_never_reuses_a_number() {
        let main = FrameLoc::main("T1");
        let child = FrameLoc { session_target: "F1".into(), frame_id: "F1".into(), owner: None };
        let mut store = RefStore::default();
        let full = issued(
            &[
                ("e1", entry("button", "Save", &main)),
                ("e2", entry("link", "Far", &main)),
                ("e3", entry("button", "In", &child)),
            ],
            4,
        );
        store.record("p", "T1", None, full);
        let base = store.get("p", "T1").unwrap();
        assert_eq!(base.next_ref(), 4);
        assert_eq!(base.kept_in(&main), [1, 2], "what the main frame's world may keep");
        assert_eq!(base.kept_in(&child), [3]);

        // A partial snapshot re-issues e1 (renamed) and hands out e4; e2 and
        // e3, which it did not cover, stay as they were.
        let partial = issued(&[("e1", entry("button", "Save all", &main)), ("e4", entry("button", "Undo", &main))], 5);
        store.record("p", "T1", Some(&base), partial);
        let table = store.get("p", "T1").unwrap();
        assert_eq!(table.get("e1").unwrap().name, "Save all");
        assert_eq!(table.get("e2").unwrap().name, "Far", "outside the partial snapshot: kept");
        assert_eq!(table.get("e3").unwrap().frame, child);
        assert_eq!(table.get("e4").unwrap().name, "Undo");
        assert_eq!(table.next_ref(), 5);

        // The next number is above every number handed out, even when the
        // walk said less (it never should).
        let mut merged = (*table).clone();
        merged.merge(issued(&[("e9", entry("button", "Late", &main))], 6));
        assert_eq!(merged.next_ref(), 10);

        // A full snapshot starts again from e1 and forgets the rest.
        store.record("p", "T1", None, issued(&[("e1", entry("button", "Only", &main))], 2));
        let table = store.get("p", "T1").unwrap();
        assert_eq!((table.refs.len(), table.next_ref()), (1, 2));
        assert!(table.get("e4").is_err());
    }

    #[test]
    fn unknown_refs_name_the_ref() {
        let table = RefTable::default();
        assert_eq!(table.get("e99").unwrap_err().to_string(), "no ref e99 in the last snapshot of this tab");
    }
}
