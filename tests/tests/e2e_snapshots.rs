//! Snapshots of the fixture pages with real Chromium (managed driver):
//! golden `ai` snapshots (`UPDATE_EXPECT=1 cargo test -p e2e --test
//! e2e_snapshots` rewrites them; review the diff), and the roles and names
//! of every interactive element checked against Chrome's own accessibility
//! tree.

use std::collections::BTreeMap;

use e2e::ControlEnv;
use serde_json::{Value, json};

/// The roles that get refs (issue 5, after the seeds' list).
const INTERACTIVE: [&str; 17] = [
    "button",
    "link",
    "textbox",
    "checkbox",
    "radio",
    "combobox",
    "listbox",
    "menuitem",
    "menuitemcheckbox",
    "menuitemradio",
    "option",
    "searchbox",
    "slider",
    "spinbutton",
    "switch",
    "tab",
    "treeitem",
];

/// (role, name) pairs where we knowingly differ from Chrome, and why (the
/// walker's header lists these differences too). Each entry is (page, role,
/// name, the side that has it, reason).
const KNOWN_DIFFERENCES: &[(&str, &str, &str, &str, &str)] = &[
    (
        "snap/form.html",
        "button",
        "Show date picker Show date picker",
        "chrome",
        "user-agent shadow parts of a date/time input: we show the input as one textbox",
    ),
    (
        "snap/form.html",
        "button",
        "Show local date and time picker Show local date and time picker",
        "chrome",
        "user-agent shadow parts of a date/time input: we show the input as one textbox",
    ),
    (
        "snap/form.html",
        "button",
        "Show month picker Show month picker",
        "chrome",
        "user-agent shadow parts of a date/time input: we show the input as one textbox",
    ),
    (
        "snap/form.html",
        "button",
        "Show time picker Show time picker",
        "chrome",
        "user-agent shadow parts of a date/time input: we show the input as one textbox",
    ),
    (
        "snap/form.html",
        "button",
        "Show week picker Show week picker",
        "chrome",
        "user-agent shadow parts of a date/time input: we show the input as one textbox",
    ),
    (
        "snap/form.html",
        "spinbutton",
        "AM/PM AM/PM",
        "chrome",
        "user-agent shadow parts of a date/time input: we show the input as one textbox",
    ),
    (
        "snap/form.html",
        "spinbutton",
        "Day Day",
        "chrome",
        "user-agent shadow parts of a date/time input: we show the input as one textbox",
    ),
    (
        "snap/form.html",
        "spinbutton",
        "Hours Hours",
        "chrome",
        "user-agent shadow parts of a date/time input: we show the input as one textbox",
    ),
    (
        "snap/form.html",
        "spinbutton",
        "Minutes Minutes",
        "chrome",
        "user-agent shadow parts of a date/time input: we show the input as one textbox",
    ),
    (
        "snap/form.html",
        "spinbutton",
        "Month Month",
        "chrome",
        "user-agent shadow parts of a date/time input: we show the input as one textbox",
    ),
    (
        "snap/form.html",
        "spinbutton",
        "Week Week",
        "chrome",
        "user-agent shadow parts of a date/time input: we show the input as one textbox",
    ),
    (
        "snap/form.html",
        "spinbutton",
        "Year Year",
        "chrome",
        "user-agent shadow parts of a date/time input: we show the input as one textbox",
    ),
    (
        "snap/form.html",
        "option",
        "France",
        "chrome",
        "options of a single <select> popup: the combobox shows its value inline",
    ),
    (
        "snap/form.html",
        "option",
        "United Kingdom",
        "chrome",
        "options of a single <select> popup: the combobox shows its value inline",
    ),
    (
        "snap/form.html",
        "option",
        "United States",
        "chrome",
        "options of a single <select> popup: the combobox shows its value inline",
    ),
    (
        "snap/form.html",
        "textbox",
        "Alarm",
        "ours",
        "Chrome's internal Date/DateTime/InputTime roles: an agent fills these like a textbox",
    ),
    (
        "snap/form.html",
        "textbox",
        "Birthday",
        "ours",
        "Chrome's internal Date/DateTime/InputTime roles: an agent fills these like a textbox",
    ),
    (
        "snap/form.html",
        "textbox",
        "Meeting",
        "ours",
        "Chrome's internal Date/DateTime/InputTime roles: an agent fills these like a textbox",
    ),
    (
        "snap/form.html",
        "textbox",
        "Month",
        "ours",
        "Chrome's internal Date/DateTime/InputTime roles: an agent fills these like a textbox",
    ),
    (
        "snap/form.html",
        "textbox",
        "Week",
        "ours",
        "Chrome's internal Date/DateTime/InputTime roles: an agent fills these like a textbox",
    ),
    ("snap/form.html", "textbox", "Favourite colour", "ours", "Chrome's internal ColorWell role"),
    (
        "snap/landmarks.html",
        "button",
        "More details",
        "ours",
        "<summary>: Chrome's internal DisclosureTriangle role; it is clicked like a button",
    ),
    (
        "snap/landmarks.html",
        "button",
        "Open details",
        "ours",
        "<summary>: Chrome's internal DisclosureTriangle role; it is clicked like a button",
    ),
    (
        "snap/landmarks.html",
        "textbox",
        "Editor",
        "ours",
        "contenteditable: Chrome reports generic; an agent types into it",
    ),
    (
        "snap/hidden.html",
        "button",
        "Closed shadow button",
        "chrome",
        "closed shadow roots are invisible to page scripts",
    ),
];

async fn open_case(env: &ControlEnv, path: &str) {
    let url = env.fixture(path).replace("ALT", &env.fixtures.alt_url());
    env.api.ok("POST", "/navigate", Some(json!({"url": url}))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshots_match_their_goldens() {
    let env = ControlEnv::start().await.unwrap();
    env.start_browser().await;
    env.open("index.html").await;
    // `lean_*`: the default form; the others: the full tree (`full=true`),
    // as it read before the lean form became the default (issue 43).
    let cases = [
        ("lean_form", "snap/form.html", ""),
        ("form", "snap/form.html", "full=true"),
        ("lean_landmarks", "snap/landmarks.html", ""),
        ("landmarks", "snap/landmarks.html", "full=true"),
        ("landmarks_interactive", "snap/landmarks.html", "interactive=true"),
        ("landmarks_compact", "snap/landmarks.html", "full=true&compact=true"),
        ("landmarks_depth2", "snap/landmarks.html", "full=true&depth=2"),
        ("lean_landmarks_depth2", "snap/landmarks.html", "depth=2"),
        ("landmarks_selector_nav", "snap/landmarks.html", "full=true&selector=nav"),
        ("lean_table_lists", "snap/table.html", ""),
        ("table_lists", "snap/table.html", "full=true"),
        ("lean_hidden_shadow_dialog", "snap/hidden.html", ""),
        ("hidden_shadow_dialog", "snap/hidden.html", "full=true"),
        ("lean_frames", "snap/frames.html?alt=ALT", ""),
        ("frames", "snap/frames.html?alt=ALT", "full=true"),
        ("frames_only_cross_site", "snap/frames.html?alt=ALT", "full=true&frame=%23xsite"),
        ("article_max_chars", "snap/article.html", "full=true&maxChars=600"),
        ("lean_article_max_chars", "snap/article.html", "maxChars=600"),
        ("lean_article_part2", "snap/article.html", "maxChars=600&part=2"),
        ("lean_choices", "snap/choices.html", ""),
        ("choices", "snap/choices.html", "full=true"),
        ("choices_interactive", "snap/choices.html", "interactive=true"),
        ("choices_depth3", "snap/choices.html", "full=true&depth=3"),
    ];
    // The cases of a page run in order on one tab: a partial snapshot
    // (selector, frame, depth) shows the refs the full one before it gave.
    let mut current = String::new();
    for (name, path, query) in cases {
        if current != path {
            open_case(&env, path).await;
            current = path.to_string();
        }
        let result = env.api.ok("GET", &format!("/snapshot?{query}"), None).await;
        let mut text = env.normalize(result["snapshot"].as_str().unwrap());
        for note in result["notes"].as_array().unwrap() {
            text.push_str(&format!("\n# {}", note.as_str().unwrap()));
        }
        text.push('\n');
        expect_test::expect_file![format!("../snapshots/{name}.txt")].assert_eq(&text);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_an_agent_chooses_shows_in_the_next_snapshot() {
    // The user lets the agent upload from one folder (uploadRoots).
    let dir = tempfile::tempdir().unwrap();
    let config = format!("defaultProfile = \"managed\"\nuploadRoots = [{:?}]\n", dir.path().display().to_string());
    let env = ControlEnv::start_with(Some(&config)).await.unwrap();
    env.start_browser().await;
    env.open("snap/choices.html").await;
    let before = env.snapshot_text("").await;
    let ticket = e2e::control_env::ref_of(&before, "button \"Ticket\"");
    let country = e2e::control_env::ref_of(&before, "combobox \"Country\"");
    assert!(before.contains(&format!("button \"Ticket\" [{ticket}]: no file chosen")), "{before}");

    // Files set on the input, and an option past the first 25 chosen.
    let paths: Vec<String> = ["report.pdf", "notes.txt"]
        .iter()
        .map(|name| {
            let path = dir.path().join(name);
            std::fs::write(&path, name).unwrap();
            path.display().to_string()
        })
        .collect();
    env.api.ok("POST", "/hooks/file-chooser", Some(json!({"paths": paths, "ref": ticket}))).await;
    env.api.ok("POST", "/act", Some(json!({"kind": "select", "ref": country, "values": ["Spain"]}))).await;

    let after = env.snapshot_text("").await;
    assert!(after.contains(&format!("button \"Ticket\" [{ticket}]: files: report.pdf, notes.txt")), "{after}");
    let options: Vec<&str> = after.lines().filter(|l| l.trim_start().starts_with("option \"")).collect();
    assert!(options.contains(&"  option \"Spain\" [selected]"), "the chosen one is shown: {after}");
    assert!(!after.contains("\"Romania\" [selected]"), "{after}");
    assert!(after.contains("  text: … 4 more options"), "Romania went back among the rest: {after}");
    let interactive = env.snapshot_text("interactive=true").await;
    assert!(interactive.contains(&format!("combobox \"Country\" [required] [{country}]: Spain")), "{interactive}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_inside_a_sentence_reads_in_it_and_its_ref_acts() {
    let env = ControlEnv::start().await.unwrap();
    env.start_browser().await;
    open_case(&env, "snap/landmarks.html").await;
    let lean = env.snapshot_text("").await;
    let sentence = lean.lines().find(|l| l.contains("Some introductory text")).expect("the sentence");
    let (before, after) = sentence.split_once("[a link](#more) [").unwrap_or_else(|| panic!("{sentence}"));
    assert_eq!(before.trim_start(), "paragraph: Some introductory text with ", "{lean}");
    let (link, rest) = after.split_once(']').unwrap();
    assert_eq!(rest, " inside.", "the sentence goes on after the link: {sentence}");
    assert!(!lean.contains("link \"a link\""), "the link has no line of its own: {lean}");
    // A run of links is a list, a line each (the navigation's).
    assert!(lean.contains("\n  link \"News\" [e2] -> /news\n"), "{lean}");
    // The full form still has the link on its own line, with the same ref.
    let full = env.snapshot_text("full=true").await;
    assert!(full.contains(&format!("- link \"a link\" [ref={link}]:")), "{full}");

    let clicked = env.api.ok("POST", "/act", Some(json!({"kind": "click", "ref": link}))).await;
    assert!(clicked["page"]["url"].as_str().unwrap().ends_with("/snap/landmarks.html#more"), "{clicked}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn find_answers_with_usable_refs_and_where_they_are() {
    let env = ControlEnv::start().await.unwrap();
    env.start_browser().await;
    let tab = env.open("control/refs.html").await;

    // No snapshot first: the refs find hands out act.
    let found = env.api.ok("GET", "/find?text=FAR", None).await;
    assert_eq!(found["total"], 1, "{found}");
    let far = found["matches"][0]["ref"].as_str().unwrap().to_string();
    assert_eq!(found["matches"][0]["line"], format!("button \"Far away\" [{far}]"), "{found}");
    env.api.ok("POST", "/act", Some(json!({"kind": "click", "ref": far}))).await;
    assert_eq!(env.eval(&tab, "document.getElementById('status').textContent").await, "Far clicked");

    // After a full snapshot, find keeps its refs and every option of a
    // select is searched, under its select's ref.
    env.api.ok("POST", "/navigate", Some(json!({"url": env.fixture("snap/choices.html")}))).await;
    let snapshot = env.snapshot_text("").await;
    let country = e2e::control_env::ref_of(&snapshot, "combobox \"Country\"");
    let fish = e2e::control_env::ref_of(&snapshot, "option \"Fish\"");
    assert!(!snapshot.contains("Spain"), "past the first 25 options: {snapshot}");
    let found = env.api.ok("GET", "/find?text=spain", None).await;
    assert_eq!(found["total"], 1, "{found}");
    assert_eq!(found["matches"][0]["line"], "option \"Spain\"");
    assert_eq!(found["matches"][0]["path"], format!("form \"Trip\" > combobox \"Country\" [{country}]"), "{found}");
    let found = env.api.ok("GET", "/find?role=option&name=fish", None).await;
    assert_eq!(found["matches"][0]["ref"], fish.as_str(), "the snapshot's ref: {found}");
    env.api.ok("POST", "/act", Some(json!({"kind": "select", "ref": country, "values": ["Spain"]}))).await;

    // Many matches: the first `limit`, all counted.
    let options = env.api.ok("GET", "/find?role=option", None).await;
    assert_eq!((options["total"].as_u64(), options["matches"].as_array().unwrap().len()), (Some(36), 20));
    assert!(options["notes"][0].as_str().unwrap().contains("36 matches, 20 shown"), "{options}");
    let (status, error) = env.api.call("GET", "/find", None).await;
    assert_eq!((status, error["error"]["code"].as_str()), (400, Some("bad_request")), "{error}");
}

/// `role "name" … [eN]` (or the full form's `- role "name" … [ref=eN]`)
/// → (role, name).
fn parse_ref_line(line: &str) -> Option<(String, String)> {
    let rest = line.trim_start();
    let rest = rest.strip_prefix("- ").unwrap_or(rest);
    e2e::control_env::line_ref(line)?;
    let role_end = rest.find([' ', ':']).unwrap_or(rest.len());
    let role = rest[..role_end].to_string();
    let after = rest[role_end..].trim_start();
    let name = if after.starts_with('"') {
        serde_json::Deserializer::from_str(after).into_iter::<String>().next()?.ok()?
    } else {
        String::new()
    };
    Some((role, name))
}

fn count(pairs: impl Iterator<Item = (String, String)>) -> BTreeMap<(String, String), i32> {
    let mut map = BTreeMap::new();
    for pair in pairs {
        *map.entry(pair).or_insert(0) += 1;
    }
    map
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roles_and_names_agree_with_chromes_accessibility_tree() {
    let env = ControlEnv::start().await.unwrap();
    env.start_browser().await;
    env.open("index.html").await;
    let mut mismatches = Vec::new();
    let mut checked = 0;
    for path in [
        "snap/form.html",
        "snap/landmarks.html",
        "snap/table.html",
        "snap/hidden.html",
        "snap/frames.html?alt=ALT",
        "snap/article.html",
    ] {
        open_case(&env, path).await;
        let ai = env.snapshot_text("interactive=true").await;
        let ours = count(ai.lines().filter_map(parse_ref_line));
        let aria = env.api.ok("GET", "/snapshot?format=aria&limit=100000", None).await;
        let chrome = count(aria["nodes"].as_array().unwrap().iter().filter_map(|node: &Value| {
            let role = node["role"].as_str()?;
            INTERACTIVE.contains(&role).then(|| (role.to_string(), node["name"].as_str().unwrap_or("").to_string()))
        }));
        checked += chrome.values().sum::<i32>();
        let keys: std::collections::BTreeSet<_> = ours.keys().chain(chrome.keys()).cloned().collect();
        for key in keys {
            let (a, b) = (ours.get(&key).copied().unwrap_or(0), chrome.get(&key).copied().unwrap_or(0));
            if a == b {
                continue;
            }
            let side = if a > b { "ours" } else { "chrome" };
            let known = KNOWN_DIFFERENCES
                .iter()
                .any(|(p, role, name, s, _)| path.starts_with(p) && *role == key.0 && *name == key.1 && *s == side);
            if !known {
                mismatches.push(format!("{path}: {} {:?}: ours {a}, Chrome {b}", key.0, key.1));
            }
        }
    }
    assert!(checked > 60, "the fixtures have many interactive elements ({checked})");
    assert!(mismatches.is_empty(), "roles/names that differ from Chrome's tree:\n{}", mismatches.join("\n"));
}

#[test]
fn ref_lines_parse() {
    assert_eq!(
        parse_ref_line("  - button \"Save \\\"now\\\"\" [disabled] [ref=e3]"),
        Some(("button".into(), "Save \"now\"".into()))
    );
    assert_eq!(parse_ref_line("- textbox [ref=e9]: hello"), Some(("textbox".into(), String::new())));
    assert_eq!(parse_ref_line("button \"Save\" [disabled] [e3]"), Some(("button".into(), "Save".into())));
    assert_eq!(parse_ref_line(" textbox [e9]: [e1]"), Some(("textbox".into(), String::new())));
    assert_eq!(parse_ref_line("- heading \"Title\" [level=1]"), None);
    assert_eq!(parse_ref_line("heading \"Title\" [level=1]"), None);
    assert_eq!(parse_ref_line("checkbox \"x\" [expanded] [e12x]"), None, "not a ref");
}

/// A long snapshot of a page the agent (or the person) scrolled down comes
/// first as the part in view, saying so; `part=1` still gives the top.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_snapshot_of_a_scrolled_page_starts_with_the_part_in_view() {
    let env = ControlEnv::start().await.unwrap();
    env.start_browser().await;
    let tab = env.open("snap/big.html").await;
    let notes = |answer: &Value| answer["notes"].to_string();
    let top = env.api.ok("GET", "/snapshot?limit=100000&maxChars=20000", None).await;
    assert!(notes(&top).contains("part 1 of"), "{}", notes(&top));
    assert!(!top["snapshot"].as_str().unwrap().contains("\"R299C4\""), "the table's last row is far below");

    env.eval(&tab, "window.scrollTo(0, document.scrollingElement.scrollHeight)").await;
    let seen = env.api.ok("GET", "/snapshot?limit=100000&maxChars=20000", None).await;
    let text = seen["snapshot"].as_str().unwrap();
    assert!(text.contains("\"R299C4\""), "the part with what is in view: {}", notes(&seen));
    assert!(notes(&seen).contains("the one in view") && !notes(&seen).contains("part 1 of"), "{}", notes(&seen));
    let first = env.api.ok("GET", "/snapshot?limit=100000&maxChars=20000&part=1", None).await;
    assert_eq!(first["snapshot"], top["snapshot"], "part=1 is the top, as before");
}
