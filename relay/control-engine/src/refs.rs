//! Refs (`e1`, `e2`, …): what a snapshot hands out and actions take back.
//!
//! The page keeps ref → element in its isolated world (see `snapshot.js`);
//! the engine keeps, per tab, where each ref lives (which frame, through
//! which iframe) and its role+name+nth for the fallback when the element was
//! replaced by an identical one. Tables are keyed by target, not by
//! connection, so they survive a reconnect of the engine.

use std::collections::HashMap;
use std::sync::Arc;

use crate::error::ControlError;

/// How many tabs' refs are kept (least recently used go first).
pub const REF_TABLES_KEPT: usize = 50;

/// `e7`, `@e7` and `ref=e7` all name ref `e7`.
pub fn parse_ref(input: &str) -> Result<String, ControlError> {
    let trimmed = input.trim();
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
pub struct FrameLoc {
    pub session_target: String,
    pub frame_id: String,
    pub owner: Option<Arc<FrameOwner>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FrameOwner {
    /// The frame that contains the `<iframe>` element.
    pub parent: FrameLoc,
    /// The `<iframe>` element, in the parent's renderer.
    pub backend_node_id: i64,
}

impl FrameLoc {
    pub fn main(target_id: &str) -> Self {
        Self { session_target: target_id.to_string(), frame_id: target_id.to_string(), owner: None }
    }
}

/// One ref: its frame and what the page said it was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefEntry {
    pub role: String,
    pub name: String,
    /// Index among refs with the same role and name, in document order.
    pub nth: u32,
    pub frame: FrameLoc,
}

/// The refs of one tab's last snapshot.
#[derive(Debug, Clone, Default)]
pub struct RefTable {
    pub refs: HashMap<String, RefEntry>,
}

impl RefTable {
    pub fn get(&self, r: &str) -> Result<&RefEntry, ControlError> {
        self.refs.get(r).ok_or_else(|| ControlError::UnknownRef(r.to_string()))
    }
}

/// Ref tables by (profile, target), least recently used evicted first.
#[derive(Debug, Default)]
pub struct RefStore {
    tables: HashMap<(String, String), (u64, Arc<RefTable>)>,
    tick: u64,
}

impl RefStore {
    /// Replaces a tab's refs (each snapshot does).
    pub fn put(&mut self, profile: &str, target_id: &str, table: RefTable) {
        self.tick += 1;
        self.tables.insert((profile.to_string(), target_id.to_string()), (self.tick, Arc::new(table)));
        while self.tables.len() > REF_TABLES_KEPT {
            let oldest = self.tables.iter().min_by_key(|(_, (tick, _))| *tick).map(|(key, _)| key.clone());
            if let Some(key) = oldest {
                self.tables.remove(&key);
            }
        }
    }

    pub fn get(&mut self, profile: &str, target_id: &str) -> Option<Arc<RefTable>> {
        self.tick += 1;
        let tick = self.tick;
        self.tables.get_mut(&(profile.to_string(), target_id.to_string())).map(|(used, table)| {
            *used = tick;
            table.clone()
        })
    }

    /// A closed tab's refs go with it.
    pub fn forget(&mut self, profile: &str, target_id: &str) {
        self.tables.remove(&(profile.to_string(), target_id.to_string()));
    }

    pub fn len(&self) -> usize {
        self.tables.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tables.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_three_spellings_of_a_ref() {
        for spelling in ["e7", "@e7", "ref=e7", " e7 "] {
            assert_eq!(parse_ref(spelling).unwrap(), "e7", "{spelling}");
        }
        for bad in ["", "e", "7", "e07", "E7", "e7x", "ref=", "@", "f1"] {
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

    #[test]
    fn unknown_refs_name_the_ref() {
        let table = RefTable::default();
        assert_eq!(table.get("e99").unwrap_err().to_string(), "no ref e99 in the last snapshot of this tab");
    }
}
