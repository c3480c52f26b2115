//! `GET /find`: what in a page matches a text, a role or a name, with refs
//! and where it is, so that an agent finds its way in a big page without
//! reading all of it. The page is walked as for a snapshot (compact, every
//! option of every `<select>`), its refs merged into the tab's as a partial
//! snapshot's are (so the refs found are usable at once), and the lines are
//! matched here, in plain Rust. The page is read in the full form (the
//! one with a `- ` bullet on every line, which `Line::parse` reads), and
//! what is found is told as the default (lean) form tells it: `[eN]`.

use crate::api::{FindInPage, Found, FoundLine, Handle, Profiled, Selected, TakeSnapshot};
use crate::engine::Engine;
use crate::error::ControlError;
use crate::refs::RefsJoin;
use crate::snapshot::OptionsListed;

pub(crate) const DEFAULT_MATCHES: usize = 20;
pub(crate) const MAX_MATCHES: usize = 200;
/// Nodes a search walks at most (a snapshot's default is 5,000: a search is
/// for pages too big to read).
pub(crate) const SEARCH_NODES: u32 = 20_000;
/// A matching line longer than this is shown around the match.
const LINE_SHOWN: usize = 200;

impl Handle<FindInPage> for Engine {
    async fn handle(&self, request: Selected<FindInPage>) -> Result<Profiled<Found>, ControlError> {
        let query = Query::new(&request.request)?;
        let limit = match request.request.limit {
            None => DEFAULT_MATCHES,
            Some(limit @ 1..=MAX_MATCHES) => limit,
            Some(other) => return Err(ControlError::BadRequest(format!("limit={other}: use 1–{MAX_MATCHES}"))),
        };
        let page = self.page_target(&request.tab).await?;
        let walk = TakeSnapshot {
            // The full form, which `Line::parse` reads (compacted).
            full: true,
            compact: true,
            limit: Some(SEARCH_NODES),
            max_chars: Some(usize::MAX),
            ..TakeSnapshot::default()
        };
        let snapshot = self.snapshot_of(&page, &walk, RefsJoin::Merge, OptionsListed::All).await?;
        let (total, matches) = search(snapshot.snapshot.as_deref().unwrap_or_default(), &query, limit);
        let mut notes = Vec::new();
        if snapshot.truncated {
            notes.push(format!("searched the first {SEARCH_NODES} nodes of the page only"));
        }
        if total > matches.len() {
            notes.push(format!(
                "{total} matches, {} shown: narrow it with text, role or name, or raise limit (at most {MAX_MATCHES})",
                matches.len()
            ));
        }
        let found =
            Found { target_id: snapshot.target_id, url: snapshot.url, title: snapshot.title, total, matches, notes };
        Ok(Profiled::new(&page.profile, found))
    }
}

/// What a line must match: every criterion given.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Query {
    /// Lowercase, in the name, the value or the text.
    text: Option<String>,
    role: Option<String>,
    /// Lowercase, in the name.
    name: Option<String>,
}

impl Query {
    pub(crate) fn new(request: &FindInPage) -> Result<Self, ControlError> {
        fn given(field: &Option<String>) -> Option<&str> {
            field.as_deref().map(str::trim).filter(|v| !v.is_empty())
        }
        let query = Self {
            text: given(&request.text).map(str::to_lowercase),
            role: given(&request.role).map(str::to_string),
            name: given(&request.name).map(str::to_lowercase),
        };
        if query == Self::default() {
            return Err(ControlError::BadRequest("find what? pass text, role or name".into()));
        }
        Ok(query)
    }

    fn matches(&self, line: &Line<'_>) -> bool {
        let name = line.name.as_deref().unwrap_or_default().to_lowercase();
        let inline = line.inline.unwrap_or_default().to_lowercase();
        self.role.as_deref().is_none_or(|role| role == line.role)
            && self.name.as_deref().is_none_or(|wanted| name.contains(wanted))
            && self.text.as_deref().is_none_or(|wanted| name.contains(wanted) || inline.contains(wanted))
    }
}

/// One line of a full-form `ai` snapshot: `  - role "name" [attrs] [ref=eN]: inline`.
#[derive(Debug, Clone, PartialEq)]
struct Line<'a> {
    depth: usize,
    /// `text` for a text line.
    role: &'a str,
    name: Option<String>,
    element_ref: Option<&'a str>,
    /// The value or text after `: `.
    inline: Option<&'a str>,
    /// The line without its indentation, `- ` and a trailing `:`.
    body: &'a str,
    /// Where in `body` the ref's `ref=` is.
    ref_at: Option<usize>,
}

impl<'a> Line<'a> {
    /// `None` for what is not a node (`- /url:` lines are a link's property).
    fn parse(line: &'a str) -> Option<Self> {
        let trimmed = line.trim_start_matches(' ');
        let depth = (line.len() - trimmed.len()) / 2;
        let rest = trimmed.strip_prefix("- ")?;
        let body = rest.strip_suffix(':').unwrap_or(rest);
        if let Some(text) = rest.strip_prefix("text: ") {
            return Some(Self {
                depth,
                role: "text",
                name: None,
                element_ref: None,
                inline: Some(text),
                body,
                ref_at: None,
            });
        }
        if rest.starts_with('/') {
            return None;
        }
        let role_end = rest.find([' ', ':']).unwrap_or(rest.len());
        let role = &rest[..role_end];
        let mut after = &rest[role_end..];
        let mut name = None;
        if let Some(quoted) = after.strip_prefix(' ').filter(|q| q.starts_with('"')) {
            let mut names = serde_json::Deserializer::from_str(quoted).into_iter::<String>();
            if let Some(Ok(parsed)) = names.next() {
                name = Some(parsed);
                after = &quoted[names.byte_offset()..];
            }
        }
        let mut element_ref = None;
        let mut ref_at = None;
        while let Some(attribute) = after.strip_prefix(" [") {
            let Some(end) = attribute.find(']') else { break };
            if let Some(r) = attribute[..end].strip_prefix("ref=") {
                element_ref = Some(r);
                ref_at = Some(rest.len() - attribute.len());
            }
            after = &attribute[end + 1..];
        }
        let inline = after.strip_prefix(": ");
        Some(Self { depth, role, name, element_ref, inline, body, ref_at })
    }

    /// The line as the lean form has it: `button "Go" [e5]`.
    fn lean_body(&self) -> String {
        match self.ref_at {
            Some(at) => format!("{}{}", &self.body[..at], &self.body[at + "ref=".len()..]),
            None => self.body.to_string(),
        }
    }

    /// How it reads in a path: `form "Sign up" [e3]`.
    fn label(&self) -> String {
        let mut label = self.role.to_string();
        if let Some(name) = &self.name {
            label.push(' ');
            label.push_str(&serde_json::to_string(name).unwrap_or_default());
        }
        if let Some(r) = self.element_ref {
            label.push_str(&format!(" [{r}]"));
        }
        label
    }
}

/// The lines of `snapshot` that match, in page order: how many there are,
/// and the first `limit`, each with its ancestors.
pub(crate) fn search(snapshot: &str, query: &Query, limit: usize) -> (usize, Vec<FoundLine>) {
    let mut ancestors: Vec<(usize, String)> = Vec::new();
    let mut total = 0;
    let mut found = Vec::new();
    for line in snapshot.lines().filter_map(Line::parse) {
        while ancestors.last().is_some_and(|(depth, _)| *depth >= line.depth) {
            ancestors.pop();
        }
        if query.matches(&line) {
            total += 1;
            if found.len() < limit {
                let path: Vec<&str> = ancestors.iter().map(|(_, label)| label.as_str()).collect();
                found.push(FoundLine {
                    path: path.join(" > "),
                    line: shown(&line.lean_body(), query),
                    element_ref: line.element_ref.map(str::to_string),
                });
            }
        }
        if line.role != "text" {
            ancestors.push((line.depth, line.label()));
        }
    }
    (total, found)
}

/// A long line (a paragraph's text) cut around what matched.
fn shown(body: &str, query: &Query) -> String {
    if body.chars().count() <= LINE_SHOWN {
        return body.to_string();
    }
    let wanted = query.text.as_deref().or(query.name.as_deref()).unwrap_or_default();
    // Char positions: lowercasing may change byte lengths.
    let chars: Vec<char> = body.chars().collect();
    let lower: Vec<char> = body.chars().map(|c| c.to_lowercase().next().unwrap_or(c)).collect();
    let wanted: Vec<char> = wanted.chars().collect();
    let at = (!wanted.is_empty())
        .then(|| lower.windows(wanted.len()).position(|w| w == wanted.as_slice()))
        .flatten()
        .unwrap_or(0);
    let start = at.saturating_sub(LINE_SHOWN / 3);
    let end = (start + LINE_SHOWN).min(chars.len());
    let mut out = String::new();
    if start > 0 {
        out.push('…');
    }
    out.extend(&chars[start..end]);
    if end < chars.len() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = r#"- banner:
  - link "Home" [ref=e1]:
    - /url: /
- main:
  - heading "Sign up" [level=1]
  - form "Sign up":
    - textbox "Email" [required] [ref=e2]: ada@example.com
    - combobox "Country" [ref=e3]:
      - option "France"
      - option "United Kingdom" [selected]
    - checkbox "Send me the newsletter [weekly]" [checked] [ref=e4]
    - button "Sign up" [ref=e5]
  - paragraph: Already signed up? Sign in instead.
- contentinfo:
  - text: Copyright 2024
  - link "Sign in" [ref=e6]:
    - /url: /login"#;

    fn query(text: Option<&str>, role: Option<&str>, name: Option<&str>) -> Query {
        Query::new(&FindInPage {
            text: text.map(Into::into),
            role: role.map(Into::into),
            name: name.map(Into::into),
            limit: None,
        })
        .unwrap()
    }

    fn lines(found: &[FoundLine]) -> Vec<String> {
        found.iter().map(FoundLine::text).collect()
    }

    #[test]
    fn lines_parse_into_role_name_ref_and_inline_text() {
        let line = Line::parse(r#"    - checkbox "Send me the newsletter [weekly]" [checked] [ref=e4]"#).unwrap();
        assert_eq!((line.depth, line.role), (2, "checkbox"));
        assert_eq!(line.name.as_deref(), Some("Send me the newsletter [weekly]"));
        assert_eq!((line.element_ref, line.inline), (Some("e4"), None));
        let line = Line::parse(r#"  - textbox "Say \"hi\"" [ref=e2]: hello: world"#).unwrap();
        assert_eq!(line.name.as_deref(), Some("Say \"hi\""));
        assert_eq!((line.element_ref, line.inline), (Some("e2"), Some("hello: world")));
        let line = Line::parse("- textbox [ref=e9]").unwrap();
        assert_eq!((line.name, line.element_ref), (None, Some("e9")));
        let line = Line::parse("  - link \"Home\" [ref=e1]:").unwrap();
        assert_eq!((line.body, line.inline), ("link \"Home\" [ref=e1]", None));
        assert_eq!(line.lean_body(), "link \"Home\" [e1]");
        let line = Line::parse("- text: a [ref=e7] that is text").unwrap();
        assert_eq!((line.role, line.element_ref, line.inline), ("text", None, Some("a [ref=e7] that is text")));
        assert_eq!(line.lean_body(), "text: a [ref=e7] that is text", "text is shown as it is");
        let line = Line::parse(r#"- button "[ref=e1]" [ref=e2]: [ref=e3]"#).unwrap();
        assert_eq!(line.lean_body(), r#"button "[ref=e1]" [e2]: [ref=e3]"#, "only the ref attribute changes");
        assert_eq!(Line::parse("    - /url: /login"), None, "a property, not a node");
        assert_eq!(Line::parse("# a note"), None);
    }

    #[test]
    fn text_matches_names_values_and_text_in_any_case() {
        let (total, found) = search(PAGE, &query(Some("sign"), None, None), 20);
        assert_eq!(total, 5);
        assert_eq!(
            lines(&found),
            [
                r#"main > heading "Sign up" [level=1]"#,
                r#"main > form "Sign up""#,
                r#"main > form "Sign up" > button "Sign up" [e5]"#,
                "main > paragraph: Already signed up? Sign in instead.",
                r#"contentinfo > link "Sign in" [e6]"#,
            ]
        );
        let (_, found) = search(PAGE, &query(Some("ADA@"), None, None), 20);
        assert_eq!(found[0].element_ref.as_deref(), Some("e2"), "a field's value");
        let (_, found) = search(PAGE, &query(Some("kingdom"), None, None), 20);
        assert_eq!(
            lines(&found),
            [r#"main > form "Sign up" > combobox "Country" [e3] > option "United Kingdom" [selected]"#],
            "an option without a ref names its select's ref"
        );
        assert_eq!(search(PAGE, &query(Some("/login"), None, None), 20).0, 0, "urls are not text");
    }

    #[test]
    fn role_is_exact_and_name_is_the_name_only() {
        let (_, found) = search(PAGE, &query(None, Some("link"), None), 20);
        assert_eq!(found.iter().map(|f| f.element_ref.as_deref()).collect::<Vec<_>>(), [Some("e1"), Some("e6")]);
        assert_eq!(search(PAGE, &query(None, Some("lin"), None), 20).0, 0);
        let (_, found) = search(PAGE, &query(None, Some("button"), Some("sign up")), 20);
        assert_eq!(lines(&found), [r#"main > form "Sign up" > button "Sign up" [e5]"#]);
        assert_eq!(search(PAGE, &query(None, None, Some("already")), 20).0, 0, "text is not a name");
        let (_, found) = search(PAGE, &query(None, Some("text"), None), 20);
        assert_eq!(lines(&found), ["contentinfo > text: Copyright 2024"], "text lines have the role text");
    }

    #[test]
    fn at_most_limit_matches_and_all_are_counted() {
        let (total, found) = search(PAGE, &query(Some("s"), None, None), 2);
        assert_eq!((total, found.len()), (6, 2));
    }

    #[test]
    fn a_query_needs_something_to_find() {
        let empty = FindInPage { text: Some("  ".into()), ..FindInPage::default() };
        let error = Query::new(&empty).unwrap_err();
        assert_eq!((error.code(), error.to_string().as_str()), ("bad_request", "find what? pass text, role or name"));
    }

    #[test]
    fn long_lines_are_shown_around_the_match() {
        let long = format!("- paragraph: {} needle {}", "a".repeat(300), "b".repeat(300));
        let (_, found) = search(&long, &query(Some("NEEDLE"), None, None), 1);
        let line = &found[0].line;
        assert!(line.starts_with('…') && line.ends_with('…') && line.contains(" needle "), "{line}");
        assert!(line.chars().count() <= LINE_SHOWN + 2, "{}", line.chars().count());
    }
}
