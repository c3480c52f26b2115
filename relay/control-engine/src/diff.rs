//! What changed in a tab's snapshot since the last one the agent read
//! (`POST /act {diff: true}`): the new snapshot's lines that are new or
//! changed, the old ones that are gone, and the ancestors they sit under,
//! so that the agent reads the part of the page its action changed and not
//! the page again. The new snapshot merged its refs into the tab's, so an
//! element that did not change keeps its ref and its line reads the same.

/// Lines of both snapshots beyond which the middle part that differs is
/// not aligned line by line (its cost grows with their product) but shown
/// whole.
const ALIGNED_AT_MOST: usize = 4_000_000;

/// `old` → `new` as the agent reads it: each line is a snapshot line after
/// a mark, `+` (new or changed), `-` (gone) or a space (an unchanged
/// ancestor of a change, for context). Empty when nothing changed.
pub(crate) fn changes(old: &str, new: &str) -> String {
    let old: Vec<&str> = old.lines().collect();
    let new: Vec<&str> = new.lines().collect();
    let (added, removed) = edits(&old, &new);
    // The ancestors of each change, in the new tree: the nearest line above
    // it at each shallower depth.
    let mut context = vec![false; new.len()];
    let mut mark_ancestors = |at: usize, depth: usize| {
        let mut depth = depth;
        for i in (0..at).rev() {
            if depth == 0 {
                break;
            }
            let d = depth_of(new[i]);
            if d < depth {
                context[i] = true;
                depth = d;
            }
        }
    };
    for (i, line) in new.iter().enumerate() {
        if added[i] {
            mark_ancestors(i, depth_of(line));
        }
    }
    for (at, line) in &removed {
        mark_ancestors(*at, depth_of(line));
    }
    let mut out = Vec::new();
    let mut gone = removed.iter().peekable();
    for (i, line) in new.iter().enumerate() {
        while let Some((_, old_line)) = gone.next_if(|(at, _)| *at == i) {
            out.push(format!("-{old_line}"));
        }
        if added[i] {
            out.push(format!("+{line}"));
        } else if context[i] {
            out.push(format!(" {line}"));
        }
    }
    out.extend(gone.map(|(_, old_line)| format!("-{old_line}")));
    out.join("\n")
}

/// The depth of a snapshot line: its indentation (one space a level in the
/// lean form; the full form's two count as two levels, which orders them
/// the same).
fn depth_of(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len()
}

/// Which new lines are added, and which old lines are gone (with the index
/// of the new line they stood before).
fn edits<'a>(old: &[&'a str], new: &[&str]) -> (Vec<bool>, Vec<(usize, &'a str)>) {
    let prefix = old.iter().zip(new).take_while(|(a, b)| a == b).count();
    let suffix = old[prefix..].iter().rev().zip(new[prefix..].iter().rev()).take_while(|(a, b)| a == b).count();
    let (old_mid, new_mid) = (&old[prefix..old.len() - suffix], &new[prefix..new.len() - suffix]);
    let mut added = vec![false; new.len()];
    let mut removed = Vec::new();
    if old_mid.len().saturating_mul(new_mid.len()) > ALIGNED_AT_MOST {
        added[prefix..new.len() - suffix].iter_mut().for_each(|a| *a = true);
        removed.extend(old_mid.iter().map(|line| (prefix, *line)));
        return (added, removed);
    }
    // The longest common subsequence of the middles, by dynamic programming
    // from the end: lcs[i][j] for old_mid[i..] and new_mid[j..].
    let (n, m) = (old_mid.len(), new_mid.len());
    let mut lcs = vec![0u32; (n + 1) * (m + 1)];
    let at = |i: usize, j: usize| i * (m + 1) + j;
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[at(i, j)] = if old_mid[i] == new_mid[j] {
                lcs[at(i + 1, j + 1)] + 1
            } else {
                lcs[at(i + 1, j)].max(lcs[at(i, j + 1)])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    while i < n || j < m {
        if i < n && j < m && old_mid[i] == new_mid[j] {
            i += 1;
            j += 1;
        } else if i < n && (j == m || lcs[at(i + 1, j)] >= lcs[at(i, j + 1)]) {
            // What is gone is told before what came in its place.
            removed.push((prefix + j, old_mid[i]));
            i += 1;
        } else {
            added[prefix + j] = true;
            j += 1;
        }
    }
    (added, removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_reads_under_its_ancestors_and_nothing_else_does() {
        let old = "banner\n link \"Home\" [e1] -> /\nmain\n heading \"Cart\" [level=1]\n list\n  listitem: Tea\n button \"Add\" [e2]\ncontentinfo: ©";
        let new = "banner\n link \"Home\" [e1] -> /\nmain\n heading \"Cart\" [level=1]\n list\n  listitem: Tea\n  listitem: Milk\n button \"Add\" [e2]\ncontentinfo: ©";
        assert_eq!(changes(old, new), " main\n  list\n+  listitem: Milk");
        assert_eq!(changes(new, new), "", "nothing changed");
    }

    #[test]
    fn a_changed_line_is_gone_and_new() {
        let old = "main\n status: Saving\n button \"Save\" [e1]";
        let new = "main\n status: Saved\n button \"Save\" [disabled] [e1]";
        assert_eq!(
            changes(old, new),
            " main\n- status: Saving\n- button \"Save\" [e1]\n+ status: Saved\n+ button \"Save\" [disabled] [e1]"
        );
    }

    #[test]
    fn lines_gone_at_the_end_are_told() {
        let old = "a\ndialog \"Sure?\"\n button \"OK\" [e3]";
        assert_eq!(changes(old, "a"), " a\n-dialog \"Sure?\"\n- button \"OK\" [e3]");
    }
}
