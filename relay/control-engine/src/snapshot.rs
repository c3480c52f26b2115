//! Snapshots. `ai` (the default) is computed in the page by `snapshot.js`,
//! one frame at a time: the script walks its own frame and same-origin
//! iframes, and names the iframes it cannot enter; the engine walks those in
//! their own frames (and sessions, for out-of-process iframes) and splices
//! their lines in place. `aria` is Chrome's own accessibility tree, for
//! debugging and for parity with what Chrome sees.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::{Value, json};

use cdp_client::protocol::{accessibility, dom, page, runtime};

use crate::api::{Format, Snapshot, TakeSnapshot};
use crate::conn::Conn;
use crate::error::ControlError;
use crate::in_page::answer::{Walked, WalkedRef};
use crate::in_page::{self, LiveFrame};
use crate::refs::{FrameLoc, FrameOwner, Issued, RefEntry, RefTable};

pub(crate) const DEFAULT_AI_LIMIT: u32 = 5_000;
pub(crate) const DEFAULT_ARIA_LIMIT: u32 = 2_000;
pub(crate) const DEFAULT_MAX_CHARS: usize = 100_000;
/// Options listed per `<select>` in a snapshot (then the selected ones and
/// a count of the rest).
pub(crate) const OPTIONS_SHOWN: u32 = 25;

/// How many options of each `<select>` a walk lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OptionsListed {
    /// [`OPTIONS_SHOWN`], then the selected ones (a snapshot).
    FirstFew,
    /// Every one (a search: `GET /find` finds an option of a long list).
    All,
}

/// Takes a snapshot of a tab; the refs it handed out are `None` for `aria`.
/// `merge_into`: the tab's table, for a partial snapshot (its refs are
/// re-issued to their elements and new ones numbered after it); `None` for
/// a full one (every ref is new, from `e1`).
pub(crate) async fn take(
    conn: &Conn,
    tab: &str,
    options: &TakeSnapshot,
    merge_into: Option<&RefTable>,
    listed: OptionsListed,
) -> Result<(Snapshot, Option<Issued>), ControlError> {
    match options.format {
        Format::Ai => {
            let (result, issued) = take_ai(conn, tab, options, merge_into, listed).await?;
            Ok((result, Some(issued)))
        }
        Format::Aria => Ok((take_aria(conn, tab, options).await?, None)),
    }
}

/// What one frame's walk produced, its child frames spliced in.
#[derive(Debug, Default)]
struct Walk {
    lines: Vec<String>,
    refs: Vec<(String, RefEntry)>,
    /// The number after the last new ref.
    next_ref: u32,
    nodes: u32,
    limit_hit: bool,
    depth_cut: u32,
    /// On a page scrolled down, the first line in view (after splicing).
    view_line: Option<usize>,
}

struct WalkParams<'a> {
    conn: &'a Conn,
    tab: &'a str,
    interactive: bool,
    compact: bool,
    /// The lean form (the default): one space a level, no `- ` bullet,
    /// no `:` before children, a ref as `[eN]`, a link's address on its line.
    lean: bool,
    merge_into: Option<&'a RefTable>,
    /// Options per `<select>`; `None`: all.
    options_max: Option<u32>,
}

async fn take_ai(
    conn: &Conn,
    tab: &str,
    options: &TakeSnapshot,
    merge_into: Option<&RefTable>,
    listed: OptionsListed,
) -> Result<(Snapshot, Issued), ControlError> {
    let limit = options.limit.unwrap_or(DEFAULT_AI_LIMIT).max(1);
    let options_max = match listed {
        OptionsListed::FirstFew => Some(OPTIONS_SHOWN),
        OptionsListed::All => None,
    };
    let params = WalkParams {
        conn,
        tab,
        interactive: options.interactive,
        compact: options.compact,
        lean: !options.full,
        merge_into,
        options_max,
    };
    let mut start = FrameLoc::main(tab);
    if let Some(frame_selector) = &options.frame {
        start = frame_by_selector(conn, tab, frame_selector).await?;
    }
    let first = merge_into.map_or(1, RefTable::next_ref);
    let walk = walk_frame(&params, start, options.selector.clone(), first, limit, options.depth).await?;

    let mut notes = walk_notes(&walk, options, limit);
    let max_chars = options.max_chars.unwrap_or(DEFAULT_MAX_CHARS);
    let parts = parts(&walk.lines, max_chars);
    // Not asked for a part: the one in view (the top, unless the page is scrolled down).
    let in_view = walk.view_line.and_then(|line| part_holding(&parts, line)).unwrap_or(1);
    let part = options.part.unwrap_or(in_view).max(1);
    let Some(&(start, end)) = parts.get(part as usize - 1) else {
        return Err(ControlError::BadRequest(format!(
            "part={part}: this snapshot has {} part{} at maxChars={max_chars}",
            parts.len(),
            if parts.len() == 1 { "" } else { "s" }
        )));
    };
    let mut text = walk.lines[start..end].join("\n");
    if text.len() > max_chars {
        // One line longer than maxChars (a long text): its start.
        let mut cut = max_chars;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
    }
    let in_parts = parts.len() > 1;
    if in_parts {
        let total: usize = walk.lines.iter().map(|l| l.len() + 1).sum::<usize>().saturating_sub(1);
        notes.push(parts_note(max_chars, part, parts.len(), total, options.part.is_none()));
    }
    let truncated = walk.limit_hit || walk.depth_cut > 0 || in_parts;
    let result = Snapshot {
        format: Format::Ai,
        snapshot: Some(text),
        refs: walk.refs.len(),
        node_count: walk.nodes as usize,
        truncated,
        notes,
        ..Snapshot::default()
    };
    let cut = walk.limit_hit || walk.depth_cut > 0;
    Ok((result, Issued { refs: walk.refs, next: walk.next_ref, cut }))
}

/// What the reader of a walk is told of it: where it was cut (by `limit` or
/// the depth), or that it found nothing.
fn walk_notes(walk: &Walk, options: &TakeSnapshot, limit: u32) -> Vec<String> {
    let mut notes = Vec::new();
    if walk.limit_hit {
        notes.push(format!(
            "cut at limit={limit} nodes: pass a higher limit, a selector, or interactive=true to see the rest, or search it with browser_find (GET /find, `browser-relay find`)"
        ));
    }
    if walk.depth_cut > 0 {
        notes.push(format!("{} nodes below depth {} are not shown", walk.depth_cut, options.depth.unwrap_or(0)));
    }
    if walk.lines.is_empty() {
        notes.push(match (&options.selector, options.interactive) {
            (Some(selector), _) => format!("nothing visible in '{selector}'"),
            (None, true) => "no interactive elements on this page".into(),
            (None, false) => "the page shows nothing (empty or hidden)".into(),
        });
    }
    notes
}

/// What the reader of `part` of `count` is told: how to go on; `chosen`:
/// the engine chose it (the part in view, when not the first).
fn parts_note(max_chars: usize, part: u32, count: usize, total: usize, chosen: bool) -> String {
    let next = if (part as usize) < count {
        format!("part={} gives the next", part + 1)
    } else {
        "this is the last".to_string()
    };
    let seen =
        if chosen && part > 1 { " (the one in view: the page is scrolled down; part=1 gives the top)" } else { "" };
    format!(
        "cut at maxChars={max_chars}: part {part} of {count}{seen} ({total} characters in all); {next}; or search it with browser_find (GET /find, `browser-relay find`), narrow it with selector, depth or interactive=true, or raise maxChars"
    )
}

/// The number (from 1) of the part of `parts` that holds `line`.
fn part_holding(parts: &[(usize, usize)], line: usize) -> Option<u32> {
    let index = parts.iter().position(|&(start, end)| start <= line && line < end)?;
    u32::try_from(index + 1).ok()
}

/// The snapshot's lines in parts of at most `max_chars` characters each
/// (joined by newlines), cut between lines: `(first, end)` line ranges. A
/// line longer than `max_chars` is a part of its own.
fn parts(lines: &[String], max_chars: usize) -> Vec<(usize, usize)> {
    let mut parts = Vec::new();
    let (mut start, mut size) = (0, 0);
    for (index, line) in lines.iter().enumerate() {
        let added = if index == start { line.len() } else { line.len() + 1 };
        if index > start && size + added > max_chars {
            parts.push((start, index));
            start = index;
            size = line.len();
        } else {
            size += added;
        }
    }
    parts.push((start, lines.len()));
    parts
}

/// The frame of the `<iframe>` that `selector` names in the top document.
async fn frame_by_selector(conn: &Conn, tab: &str, selector: &str) -> Result<FrameLoc, ControlError> {
    let main = FrameLoc::main(tab);
    let live = in_page::live_frame(conn, tab, &main).await?;
    let element = in_page::script_object(conn, &live, "querySelector", json!(selector)).await?;
    let Some(object_id) = element.object_id else {
        return Err(ControlError::NoSuchElement(selector.to_string()));
    };
    child_frame(conn, &main, &live, &object_id)
        .await?
        .ok_or_else(|| ControlError::BadRequest(format!("'{selector}' is not an iframe with a document")))
}

/// The child frame held by the `<iframe>` element `object_id` (in `parent`).
async fn child_frame(
    conn: &Conn,
    parent: &FrameLoc,
    live_parent: &LiveFrame,
    object_id: &str,
) -> Result<Option<FrameLoc>, ControlError> {
    let describe = dom::DescribeNode { object_id: Some(object_id.to_string()), ..Default::default() };
    let described =
        conn.client().send(&describe, Some(&live_parent.session)).await.map_err(ControlError::cdp(&conn.profile))?;
    let (Some(frame_id), backend) = (described.node.frame_id.as_deref(), described.node.backend_node_id) else {
        return Ok(None);
    };
    // An out-of-process iframe is its own target, whose id is the frame id.
    // (A frame the parent's renderer does not hold is out of process, even
    // if its session is still being attached: `live_frame` waits for it.)
    let session_target =
        if conn.session_of(frame_id).is_some() || !frame_in_session(conn, &live_parent.session, frame_id).await {
            frame_id.to_string()
        } else {
            parent.session_target.clone()
        };
    Ok(Some(FrameLoc {
        session_target,
        frame_id: frame_id.to_string(),
        owner: Some(Arc::new(FrameOwner { parent: parent.clone(), backend_node_id: backend })),
    }))
}

/// Whether the session's renderer holds the frame (in-process iframe).
async fn frame_in_session(conn: &Conn, session: &str, frame_id: &str) -> bool {
    let tree = conn.client().send(&page::GetFrameTree {}, Some(session)).await;
    tree.is_ok_and(|tree| tree.frame_tree.contains(frame_id))
}

impl WalkParams<'_> {
    /// The page script's argument for walking `frame`.
    fn script_arg(
        &self,
        frame: &FrameLoc,
        selector: &Option<String>,
        ref_start: u32,
        limit: u32,
        max_depth: Option<u32>,
    ) -> Value {
        json!({
            "interactive": self.interactive,
            "compact": self.compact,
            "lean": self.lean,
            "maxDepth": max_depth,
            "limit": limit,
            "refStart": ref_start,
            "selector": selector,
            "keep": self.merge_into.map(|table| table.kept_in(frame)),
            "optionsMax": self.options_max,
        })
    }

    /// A text line `depth` levels down.
    fn text_line(&self, depth: u32, text: &str) -> String {
        format!("{}{}text: {text}", self.indent(depth), bullet(!self.lean))
    }

    /// The indentation of a line `depth` levels down.
    fn indent(&self, depth: u32) -> String {
        match (self.interactive, self.lean) {
            (true, _) => String::new(),
            (false, true) => " ".repeat(depth as usize),
            (false, false) => "  ".repeat(depth as usize),
        }
    }
}

/// What begins a line after its indentation: `- ` in the full form (as in
/// Playwright's aria snapshot), nothing in the lean one (`snapshot.js`
/// decides the same for the lines it writes).
pub(crate) fn bullet(full: bool) -> &'static str {
    if full { "- " } else { "" }
}

type WalkFuture<'a> = Pin<Box<dyn Future<Output = Result<Walk, ControlError>> + Send + 'a>>;

/// Walks one frame with the page script, then the iframes it could not
/// enter, splicing their lines under their `- iframe` line.
fn walk_frame<'a>(
    params: &'a WalkParams<'a>,
    frame: FrameLoc,
    selector: Option<String>,
    ref_start: u32,
    limit: u32,
    max_depth: Option<u32>,
) -> WalkFuture<'a> {
    Box::pin(async move {
        let conn = params.conn;
        let live = in_page::live_frame(conn, params.tab, &frame).await?;
        let arg = params.script_arg(&frame, &selector, ref_start, limit, max_depth);
        let out: Walked = in_page::call_script(conn, &live, "snapshot", arg).await?;
        if let Some(error) = out.error {
            return Err(match &selector {
                Some(s) if error.contains("no element") => ControlError::NoSuchElement(s.clone()),
                _ => ControlError::Page(error),
            });
        }
        let lines = out.lines;
        let view_line = out.view_line;
        let mut walk = Walk {
            nodes: out.nodes,
            limit_hit: out.limit_hit,
            depth_cut: out.depth_cut,
            next_ref: out.ref_next.max(ref_start),
            ..Walk::default()
        };
        walk.refs = frame_refs(out.refs, &frame);

        // Child frames, spliced after their iframe line (and that line's
        // own subtree, which the script leaves empty).
        let mut inserts: HashMap<usize, Vec<String>> = HashMap::new();
        for (index, child) in out.frames.iter().enumerate() {
            let remaining = limit.saturating_sub(walk.nodes);
            if remaining == 0 {
                walk.limit_hit = true;
                break;
            }
            let (line, depth) = (child.line, child.depth);
            let child_depth = match max_depth {
                Some(max) if depth > max => {
                    walk.depth_cut += 1;
                    continue;
                }
                Some(max) => Some(max - depth),
                None => None,
            };
            let element = in_page::script_object(conn, &live, "frameElement", json!(index)).await?;
            let Some(object_id) = element.object_id else { continue };
            let child_loc = child_frame(conn, &frame, &live, &object_id).await;
            let _ = conn.client().send(&runtime::ReleaseObject { object_id }, Some(&live.session)).await;
            let Ok(Some(child_loc)) = child_loc else { continue };
            let sub = match walk_frame(params, child_loc, None, walk.next_ref, remaining, child_depth).await {
                Ok(sub) => sub,
                Err(error) => {
                    // One unreachable iframe must not cost the whole snapshot.
                    let text = params.text_line(depth, &format!("(frame not readable: {error})"));
                    inserts.entry(line).or_default().push(text);
                    continue;
                }
            };
            walk.next_ref = sub.next_ref;
            walk.nodes += sub.nodes;
            walk.limit_hit |= sub.limit_hit;
            walk.depth_cut += sub.depth_cut;
            walk.refs.extend(sub.refs);
            let indent = params.indent(depth);
            let spliced = inserts.entry(line).or_default();
            spliced.extend(sub.lines.into_iter().map(|l| format!("{indent}{l}")));
        }
        // The frames' lines spliced in before it move the line in view down.
        walk.view_line = view_line
            .map(|at| at + inserts.iter().filter(|(line, _)| **line < at).map(|(_, l)| l.len()).sum::<usize>());
        walk.lines = splice(lines, inserts, params.lean);
        Ok(walk)
    })
}

/// The refs the page script issued in `frame`, but those without a name
/// or a role.
fn frame_refs(refs: Vec<WalkedRef>, frame: &FrameLoc) -> Vec<(String, RefEntry)> {
    refs.into_iter()
        .filter(|r| !r.name.is_empty() && !r.role.is_empty())
        .map(|r| (r.name, RefEntry { role: r.role, name: r.label, nth: r.nth, frame: frame.clone() }))
        .collect()
}

/// A frame's `lines` with each child frame's lines in `inserts` spliced
/// after the line they belong under (which ends with `:`, unless `lean`).
fn splice(lines: Vec<String>, mut inserts: HashMap<usize, Vec<String>>, lean: bool) -> Vec<String> {
    if inserts.is_empty() {
        return lines;
    }
    let mut spliced = Vec::new();
    for (index, line) in lines.into_iter().enumerate() {
        let has_children = inserts.contains_key(&index);
        let colon = has_children && !lean && !line.ends_with(':');
        spliced.push(if colon { format!("{line}:") } else { line });
        if let Some(children) = inserts.remove(&index) {
            spliced.extend(children);
        }
    }
    spliced
}

/// Chrome's accessibility tree as flat nodes with depths, iframes spliced
/// in place, ignored nodes skipped (their children kept).
/// `aria` is Chrome's whole tree, bounded by `limit` and `depth`; the
/// options that shape the `ai` walk are refused rather than ignored.
fn check_aria_options(options: &TakeSnapshot) -> Result<(), ControlError> {
    let ai_only: Vec<&str> = [
        ("interactive", options.interactive),
        ("full", options.full),
        ("compact", options.compact),
        ("part", options.part.is_some()),
        ("selector", options.selector.is_some()),
        ("frame", options.frame.is_some()),
        ("maxChars", options.max_chars.is_some()),
    ]
    .into_iter()
    .filter_map(|(name, given)| given.then_some(name))
    .collect();
    if ai_only.is_empty() {
        return Ok(());
    }
    Err(ControlError::BadRequest(format!(
        "{} apply to format=ai only (format=aria takes limit and depth)",
        ai_only.join(", ")
    )))
}

async fn take_aria(conn: &Conn, tab: &str, options: &TakeSnapshot) -> Result<Snapshot, ControlError> {
    check_aria_options(options)?;
    let limit = options.limit.unwrap_or(DEFAULT_ARIA_LIMIT).max(1) as usize;
    let main = in_page::live_frame(conn, tab, &FrameLoc::main(tab)).await?;
    let mut out = Vec::new();
    let mut truncated = false;
    aria_frame(conn, tab, &main, None, 0, limit, options.depth, &mut out, &mut truncated).await?;
    let mut notes = Vec::new();
    if truncated {
        notes.push(format!("cut at limit={limit} nodes: pass a higher limit to see the rest"));
    }
    Ok(Snapshot {
        format: Format::Aria,
        node_count: out.len(),
        nodes: Some(out),
        truncated,
        notes,
        ..Snapshot::default()
    })
}

#[allow(clippy::too_many_arguments)]
fn aria_frame<'a>(
    conn: &'a Conn,
    tab: &'a str,
    frame: &'a LiveFrame,
    frame_id: Option<&'a str>,
    base_depth: u32,
    limit: usize,
    max_depth: Option<u32>,
    out: &'a mut Vec<Value>,
    truncated: &'a mut bool,
) -> Pin<Box<dyn Future<Output = Result<(), ControlError>> + Send + 'a>> {
    Box::pin(async move {
        let get = accessibility::GetFullAxTree { frame_id: frame_id.map(str::to_string) };
        let tree = conn.client().send(&get, Some(&frame.session)).await.map_err(ControlError::cdp(&conn.profile))?;
        let nodes = tree.nodes;
        let by_id: HashMap<&str, &Value> = nodes.iter().filter_map(|n| Some((n["nodeId"].as_str()?, n))).collect();
        let Some(root) = nodes.first() else { return Ok(()) };
        // Depth-first, iterative: (node, depth).
        let mut stack = vec![(root, base_depth)];
        while let Some((node, depth)) = stack.pop() {
            if out.len() >= limit {
                *truncated = true;
                return Ok(());
            }
            let ignored = node["ignored"] == true;
            let child_depth = if ignored { depth } else { depth + 1 };
            if !ignored {
                if max_depth.is_some_and(|max| depth > max) {
                    continue;
                }
                let mut entry = json!({
                    "ref": format!("ax{}", out.len() + 1),
                    "role": node["role"]["value"],
                    "name": node["name"]["value"].as_str().unwrap_or_default(),
                    "depth": depth,
                });
                if let Some(value) = node["value"]["value"].as_str().filter(|v| !v.is_empty()) {
                    entry["value"] = json!(value);
                }
                if let Some(backend) = node["backendDOMNodeId"].as_i64() {
                    entry["backendDOMNodeId"] = json!(backend);
                }
                for property in node["properties"].as_array().into_iter().flatten() {
                    let name = property["name"].as_str().unwrap_or_default();
                    if matches!(
                        name,
                        "checked" | "disabled" | "expanded" | "level" | "pressed" | "selected" | "focused"
                    ) {
                        entry[name] = property["value"]["value"].clone();
                    }
                }
                let is_frame = matches!(node["role"]["value"].as_str(), Some("Iframe" | "IframePresentational"));
                out.push(entry);
                if is_frame && let Some(backend) = node["backendDOMNodeId"].as_i64() {
                    aria_child_frame(conn, tab, frame, backend, child_depth, limit, max_depth, out, truncated).await?;
                }
            }
            let children: Vec<&Value> = node["childIds"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|id| id.as_str().and_then(|id| by_id.get(id).copied()))
                .collect();
            for child in children.into_iter().rev() {
                stack.push((child, child_depth));
            }
        }
        Ok(())
    })
}

#[allow(clippy::too_many_arguments)]
async fn aria_child_frame(
    conn: &Conn,
    tab: &str,
    frame: &LiveFrame,
    iframe_backend_id: i64,
    depth: u32,
    limit: usize,
    max_depth: Option<u32>,
    out: &mut Vec<Value>,
    truncated: &mut bool,
) -> Result<(), ControlError> {
    let describe = dom::DescribeNode { backend_node_id: Some(iframe_backend_id), ..Default::default() };
    let Ok(described) = conn.client().send(&describe, Some(&frame.session)).await else {
        return Ok(());
    };
    let Some(child_id) = described.node.frame_id.as_deref() else { return Ok(()) };
    let child = match conn.session_of(child_id) {
        // Out of process: the child's own session, its main frame.
        Some(session) => LiveFrame { session, frame_id: child_id.to_string() },
        None => LiveFrame { session: frame.session.clone(), frame_id: child_id.to_string() },
    };
    let frame_param = if child.session == frame.session { Some(child.frame_id.as_str()) } else { None };
    aria_frame(conn, tab, &child, frame_param, depth, limit, max_depth, out, truncated).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_snapshot_comes_in_parts_cut_between_lines() {
        let lines: Vec<String> = ["- a", "- bb", "- ccc", "- dddddddddd", "- e"].map(String::from).to_vec();
        assert_eq!(parts(&lines, 1_000), [(0, 5)], "one part when it fits");
        // "- a\n- bb" is 8 characters; with "\n- ccc" 14.
        assert_eq!(parts(&lines, 8), [(0, 2), (2, 3), (3, 4), (4, 5)], "a long line is a part of its own");
        assert_eq!(parts(&lines, 14), [(0, 3), (3, 4), (4, 5)]);
        assert_eq!(parts(&[], 10), [(0, 0)], "an empty snapshot is one empty part");
        let cut = parts(&lines, 14);
        assert_eq!(part_holding(&cut, 0), Some(1));
        assert_eq!(part_holding(&cut, 3), Some(2), "the part the line is in");
        assert_eq!(part_holding(&cut, 4), Some(3));
        assert_eq!(part_holding(&cut, 5), None, "past the last line");
    }

    #[test]
    fn aria_snapshots_refuse_the_options_of_the_ai_walk() {
        let aria = TakeSnapshot { format: Format::Aria, limit: Some(10), depth: Some(3), ..Default::default() };
        assert!(check_aria_options(&aria).is_ok(), "limit and depth bound the aria tree");
        let shaped = TakeSnapshot { selector: Some("main".into()), interactive: true, ..aria };
        let error = check_aria_options(&shaped).unwrap_err();
        assert_eq!(
            error.to_string(),
            "interactive, selector apply to format=ai only (format=aria takes limit and depth)"
        );
        assert_eq!(error.code(), "bad_request");
    }
}
