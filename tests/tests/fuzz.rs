//! Property-based fuzzing, on stable Rust, of every parser that reads input
//! from outside the process: the extension protocol (full parser and the
//! layout fast path), the relay's CDP command parser, the HTTP guard, the
//! control API's request parsing, the CDP client's frame handling, the
//! config file and the HTTP client's response parser.
//!
//! Each property states a rule for arbitrary input (never panic, agree with
//! the full parser, refuse what the guard must refuse, ...), not a replay of
//! the implementation. Inputs mix arbitrary text, mutations of valid frames
//! (the documented examples of PROTOCOL.md and the docs) and structured
//! values built to reach the interesting paths.
//!
//! Case counts: `PROPTEST_CASES` (proptest's default, 256, makes the CI pass
//! short); targets whose cases cost more (a socket, deep nesting) run a
//! share of it.
//! `scripts/fuzz.sh` runs long in release. Failures are not persisted to
//! files: a failing run prints the minimal input, which is what a
//! regression test next to the fix needs. Every test prints its case count
//! and time to stderr (`fuzz-stats: ...`, shown with `--nocapture`).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt::Debug;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::Path;
use std::sync::{PoisonError, RwLock, RwLockReadGuard};
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, HeaderName, HeaderValue, header};
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, TestCaseResult, TestRunner};
use serde_json::{Map, Value, json};
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};

use browser_relay::{DEFAULT_EXTENSION_ID, Guard, Rejection, RouteClass, is_loopback_host};
use browser_relay::{Sessions, client_secret};
use cdp_client::{CdpClient, CdpError, Channels};
use control_engine::api::{self, Route, Selected, TabSelector};
use relay_engine::cdp::{Command, code};
use settings::{Config as RelayConfig, Driver, redacted_url};
use shared_protocol::layout::{self, RawEvent, RawReply, VALIDATED_PAYLOAD};
use shared_protocol::{DebuggerEvent, ExtensionMessage, RawValue, RelayMessage, Reply, SendCommand, TabQuery, encode};
use state_dir::Token;

// ---- the runner ------------------------------------------------------------

/// Counts every allocation of this test binary, so that
/// [`pure_parsers_allocate_in_proportion_to_their_input`] can bound it.
#[global_allocator]
static GLOBAL: &StatsAlloc<std::alloc::System> = &INSTRUMENTED_SYSTEM;

/// The allocation counters are global: the test that reads them runs alone
/// (write lock) while the others share (read lock).
static MEASURING: RwLock<()> = RwLock::new(());

/// Every test but the allocation one starts with this and keeps it to its
/// end: building strategies and runtimes allocates too.
fn shared() -> RwLockReadGuard<'static, ()> {
    MEASURING.read().unwrap_or_else(PoisonError::into_inner)
}

/// proptest's configuration with `PROPTEST_CASES` applied, divided by
/// `share` for the targets whose cases cost more (a loopback socket round
/// trip, tens of kilobytes to parse).
fn config(share: u32) -> Config {
    let mut config = Config::default();
    config.cases = (config.cases / share).max(1);
    // Keep CI clean: no `proptest-regressions/` in the source tree.
    config.failure_persistence = None;
    config
}

/// Runs `property` over `config.cases` inputs and reports the count and
/// time; a failure panics with proptest's minimal failing input.
fn fuzz<S>(config: Config, strategy: S, property: impl Fn(S::Value) -> TestCaseResult)
where
    S: Strategy,
    S::Value: Debug,
{
    // libtest names each test's thread after the test.
    let name = std::thread::current().name().unwrap_or("fuzz").to_string();
    let cases = config.cases;
    let started = Instant::now();
    let result = TestRunner::new(config).run(&strategy, property);
    let seconds = started.elapsed().as_secs_f64();
    eprintln!("fuzz-stats: {name} cases={cases} seconds={seconds:.2}");
    if let Err(error) = result {
        panic!("{name}: {error}");
    }
}

fn fail(message: impl std::fmt::Display) -> TestCaseError {
    TestCaseError::fail(message.to_string())
}

// ---- shared strategies -----------------------------------------------------

/// Any text, newlines, quotes, backslashes and control characters included.
fn any_text(max: usize) -> BoxedStrategy<String> {
    proptest::string::string_regex(&format!("(?s).{{0,{max}}}")).expect("valid regex").boxed()
}

/// Characters that matter to JSON, TOML and HTTP, and sometimes any other.
fn syntax_char() -> impl Strategy<Value = char> {
    prop_oneof![
        4 => prop::sample::select(&b"{}[]\"':,;=\\/0123456789-+.eExtnfalsruh#@?&% \r\n\t"[..]).prop_map(char::from),
        1 => any::<char>(),
    ]
}

/// Any JSON value, a few levels deep.
fn json_value() -> BoxedStrategy<Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        // Finite floats only (JSON has no others): no filter, so no rejects.
        (prop::num::f64::POSITIVE | prop::num::f64::NEGATIVE | prop::num::f64::NORMAL | prop::num::f64::ZERO)
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        any_text(12).prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((any_text(6), inner), 0..6)
                .prop_map(|members| Value::Object(members.into_iter().collect())),
        ]
    })
    .boxed()
}

/// A JSON payload as an extension or Chrome writes it: compact or pretty,
/// and now and then larger than the fast path validates.
fn json_payload() -> BoxedStrategy<String> {
    prop_oneof![
        12 => json_value().prop_map(|v| v.to_string()),
        4 => json_value().prop_map(|v| serde_json::to_string_pretty(&v).expect("serialises")),
        1 => (VALIDATED_PAYLOAD - 8..VALIDATED_PAYLOAD + 64).prop_map(|n| format!("\"{}\"", "x".repeat(n))),
    ]
    .boxed()
}

/// One edit of a mutation.
#[derive(Debug, Clone)]
enum Edit {
    Insert(Index, char),
    Delete(Index),
    Replace(Index, char),
    Truncate(Index),
    /// Copies a slice of the text to another place.
    Duplicate(Index, Index, Index),
}

fn edits() -> impl Strategy<Value = Vec<Edit>> {
    let edit = prop_oneof![
        4 => (any::<Index>(), syntax_char()).prop_map(|(at, c)| Edit::Insert(at, c)),
        3 => any::<Index>().prop_map(Edit::Delete),
        4 => (any::<Index>(), syntax_char()).prop_map(|(at, c)| Edit::Replace(at, c)),
        1 => any::<Index>().prop_map(Edit::Truncate),
        1 => (any::<Index>(), any::<Index>(), any::<Index>()).prop_map(|(a, b, c)| Edit::Duplicate(a, b, c)),
    ];
    prop::collection::vec(edit, 1..5)
}

/// Applies edits on character boundaries.
fn mutate(text: &str, edits: &[Edit]) -> String {
    let mut chars: Vec<char> = text.chars().collect();
    for edit in edits {
        let len = chars.len();
        match edit {
            Edit::Insert(at, c) => chars.insert(at.index(len + 1), *c),
            Edit::Delete(at) if len > 0 => {
                chars.remove(at.index(len));
            }
            Edit::Replace(at, c) if len > 0 => chars[at.index(len)] = *c,
            Edit::Truncate(at) => chars.truncate(at.index(len + 1)),
            Edit::Duplicate(from, to, at) if len > 0 => {
                let (a, b) = (from.index(len), to.index(len));
                let slice: Vec<char> = chars[a.min(b)..=a.max(b)].to_vec();
                let at = at.index(len + 1);
                chars.splice(at..at, slice);
            }
            _ => {}
        }
    }
    chars.into_iter().collect()
}

/// The bytes version of [`mutate`], for HTTP answers.
fn mutate_bytes(bytes: &[u8], edits: &[Edit]) -> Vec<u8> {
    let text: String = bytes.iter().map(|&b| char::from(b)).collect();
    // Every char of `text` is below 256; inserted ones are cut to a byte.
    mutate(&text, edits).chars().map(|c| c as u32 as u8).collect()
}

// ---- 1. the extension <-> relay protocol -----------------------------------

/// The documented frames of PROTOCOL.md, both directions.
fn documented_frames() -> Vec<String> {
    let frames: Vec<String> = include_str!("../../shared-protocol/PROTOCOL.md")
        .lines()
        .filter_map(|line| line.strip_prefix("ext> ").or_else(|| line.strip_prefix("relay> ")))
        .map(str::to_string)
        .collect();
    assert!(frames.len() >= 20, "PROTOCOL.md examples found: {}", frames.len());
    frames
}

fn call_id() -> impl Strategy<Value = u64> {
    prop_oneof![
        4 => 0..10_000u64,
        2 => any::<u64>(),
        1 => prop::sample::select(vec![999_999_999_999_999_999, 1_000_000_000_000_000_000, u64::MAX]),
    ]
}

fn tab_id() -> impl Strategy<Value = i64> {
    prop_oneof![
        4 => -5..10_000i64,
        2 => any::<i64>(),
        1 => prop::sample::select(vec![
            i64::MIN,
            i64::MAX,
            -999_999_999_999_999_999,
            999_999_999_999_999_999,
            1_000_000_000_000_000_000,
            -1_000_000_000_000_000_000,
        ]),
    ]
}

/// A CDP method or session id: usually plain, sometimes needing escapes.
fn name() -> BoxedStrategy<String> {
    prop_oneof![
        3 => "[A-Z][a-zA-Z]{0,8}\\.[a-z][a-zA-Z]{0,12}",
        2 => "[0-9A-F]{32}",
        2 => any_text(16),
    ]
    .boxed()
}

/// A `reply` or `debugger.onEvent` as the extension sends it.
#[derive(Debug, Clone)]
enum HotFrame {
    Reply { id: u64, result: Option<String> },
    Event { tab_id: i64, session: Option<String>, method: String, params: Option<String> },
}

fn hot_frame() -> impl Strategy<Value = HotFrame> {
    prop_oneof![
        (call_id(), prop::option::of(json_payload())).prop_map(|(id, result)| HotFrame::Reply { id, result }),
        (tab_id(), prop::option::of(name()), name(), prop::option::of(json_payload()))
            .prop_map(|(tab_id, session, method, params)| HotFrame::Event { tab_id, session, method, params }),
    ]
}

fn raw(json: &str) -> Box<RawValue> {
    RawValue::from_string(json.to_string()).expect("generated JSON is valid")
}

/// A payload as the parsers read it: `null` is none, as serde reads an
/// `Option<&RawValue>`.
fn read(payload: &Option<String>) -> Option<&str> {
    payload.as_deref().filter(|p| *p != "null")
}

/// A string the layout takes as is: JSON needs no escape in it.
fn plain(s: &str) -> bool {
    serde_json::to_string(s).is_ok_and(|quoted| quoted.len() == s.len() + 2)
}

fn encode_hot(frame: &HotFrame) -> String {
    match frame {
        HotFrame::Reply { id, result } => {
            let result = result.as_deref().map(raw);
            encode(&ExtensionMessage::Reply(Reply { id: *id, result: result.as_deref(), error: None }))
        }
        HotFrame::Event { tab_id, session, method, params } => {
            let params = params.as_deref().map(raw);
            encode(&ExtensionMessage::DebuggerEvent(DebuggerEvent {
                tab_id: *tab_id,
                session_id: session.as_deref().map(Cow::Borrowed),
                method: Cow::Borrowed(method),
                params: params.as_deref(),
            }))
        }
    }
}

#[test]
fn the_layout_fast_path_agrees_with_the_full_parser_on_every_encoded_frame() {
    let _shared = shared();
    fuzz(config(1), hot_frame(), |frame| {
        let text = encode_hot(&frame);
        match &frame {
            HotFrame::Reply { id, result } => {
                // The extension's direct encoder writes what `encode` writes.
                if let Some(result) = result {
                    prop_assert_eq!(&layout::encode_reply(*id, result), &text);
                }
                let Ok(ExtensionMessage::Reply(full)) = ExtensionMessage::parse(&text) else {
                    return Err(fail(format!("not read back as a reply: {text}")));
                };
                prop_assert_eq!((full.id, full.result.map(RawValue::get)), (*id, read(result)));
                prop_assert!(full.error.is_none());
                // The layout reads every id of up to 18 digits.
                let expected = (*id < 10u64.pow(18)).then_some(RawReply { id: *id, result: read(result) });
                prop_assert_eq!(layout::reply(&text), expected, "{}", text);
                prop_assert_eq!(layout::debugger_event(&text), None);
            }
            HotFrame::Event { tab_id, session, method, params } => {
                let direct = layout::encode_event(*tab_id, session.as_deref(), method, params.as_deref());
                prop_assert_eq!(&direct, &text);
                let Ok(ExtensionMessage::DebuggerEvent(full)) = ExtensionMessage::parse(&text) else {
                    return Err(fail(format!("not read back as an event: {text}")));
                };
                prop_assert_eq!(
                    (full.tab_id, full.session_id.as_deref(), &*full.method, full.params.map(RawValue::get)),
                    (*tab_id, session.as_deref(), method.as_str(), read(params))
                );
                // The layout takes every event whose names need no escape.
                let takes =
                    tab_id.unsigned_abs() < 10u64.pow(18) && plain(method) && session.as_deref().is_none_or(plain);
                let expected = takes.then_some(RawEvent {
                    tab_id: *tab_id,
                    session_id: session.as_deref(),
                    method,
                    params: read(params),
                });
                prop_assert_eq!(layout::debugger_event(&text), expected, "{}", text);
                prop_assert_eq!(layout::reply(&text), None);
            }
        }
        Ok(())
    });
}

/// Frames close to valid: the documented ones, encoded hot frames, and
/// hot frames whose numbers are written in every way JSON allows or not.
fn near_frames() -> BoxedStrategy<String> {
    let number = prop_oneof![
        "-?(0|[1-9][0-9]{0,19})(\\.[0-9]{1,3})?([eE][+-]?[0-9]{1,3})?",
        "-?0[0-9]{1,4}",
        Just("-0".to_string()),
        "[+-]?[0-9]{0,21}",
    ];
    let numbered = (number.clone(), number, 0..4usize).prop_map(|(a, b, shape)| match shape {
        0 => format!(r#"{{"reply":{{"id":{a}}}}}"#),
        1 => format!(r#"{{"reply":{{"id":{a},"result":{b}}}}}"#),
        2 => format!(r#"{{"debugger.onEvent":{{"tabId":{a},"method":"A.b"}}}}"#),
        _ => format!(r#"{{"debugger.onEvent":{{"tabId":{a},"sessionId":"S","method":"A.b","params":{b}}}}}"#),
    });
    prop_oneof![prop::sample::select(documented_frames()), hot_frame().prop_map(|frame| encode_hot(&frame)), numbered,]
        .boxed()
}

/// Whatever the decoders make of `text`, they return; and what the layout
/// splits, the full parser reads the same way.
fn decoders_agree(text: &str) -> TestCaseResult {
    let full = ExtensionMessage::parse(text);
    let _ = RelayMessage::parse(text);
    let _ = Command::parse(text);
    if let Some(fast) = layout::reply(text) {
        // Larger payloads are passed on unscanned by design.
        if fast.result.map_or(0, str::len) <= VALIDATED_PAYLOAD {
            let Ok(ExtensionMessage::Reply(full)) = &full else {
                return Err(fail(format!("the layout split a reply the full parser refuses ({full:?}): {text}")));
            };
            prop_assert_eq!((full.id, full.result.map(RawValue::get)), (fast.id, fast.result), "{}", text);
            prop_assert!(full.error.is_none());
        }
    }
    if let Some(fast) = layout::debugger_event(text)
        && fast.params.map_or(0, str::len) <= VALIDATED_PAYLOAD
    {
        let Ok(ExtensionMessage::DebuggerEvent(full)) = &full else {
            return Err(fail(format!("the layout split an event the full parser refuses ({full:?}): {text}")));
        };
        prop_assert_eq!(
            (full.tab_id, full.session_id.as_deref(), &*full.method, full.params.map(RawValue::get)),
            (fast.tab_id, fast.session_id, fast.method, fast.params),
            "{}",
            text
        );
    }
    if let Err(error) = &full {
        // serde's messages quote at most a bounded piece of the input.
        prop_assert!(error.to_string().len() <= 2 * text.len() + 512, "{}", error);
    }
    Ok(())
}

#[test]
fn mutated_frames_never_panic_and_the_layout_only_splits_what_the_full_parser_reads_the_same() {
    let _shared = shared();
    let input = prop_oneof![
        3 => (near_frames(), edits()).prop_map(|(frame, edits)| mutate(&frame, &edits)),
        1 => near_frames(),
        1 => any_text(64),
    ];
    fuzz(config(1), input, |text| decoders_agree(&text));
}

/// A call of the relay, from owned parts.
#[derive(Debug, Clone)]
enum Call {
    Send { id: u64, tab_id: i64, session: Option<String>, method: String, params: Option<String> },
    Create { id: u64, url: Option<String>, active: bool, opener: Option<i64>, grant: Option<String> },
    Update { id: u64, tab_id: i64, url: Option<String>, active: Option<bool> },
    Query { id: u64, active: Option<bool>, last_focused_window: Option<bool>, window_id: Option<i64> },
    Challenge { nonce: String, proof: String },
    Ping(u64),
}

fn relay_call() -> impl Strategy<Value = Call> {
    let option_bool = prop::option::of(any::<bool>());
    prop_oneof![
        (call_id(), tab_id(), prop::option::of(name()), name(), prop::option::of(json_payload()))
            .prop_map(|(id, tab_id, session, method, params)| Call::Send { id, tab_id, session, method, params }),
        (
            call_id(),
            prop::option::of(any_text(24)),
            any::<bool>(),
            prop::option::of(tab_id()),
            prop::option::of(name())
        )
            .prop_map(|(id, url, active, opener, grant)| Call::Create { id, url, active, opener, grant }),
        (call_id(), tab_id(), prop::option::of(any_text(24)), option_bool.clone())
            .prop_map(|(id, tab_id, url, active)| Call::Update { id, tab_id, url, active }),
        (call_id(), option_bool.clone(), option_bool, prop::option::of(tab_id())).prop_map(
            |(id, active, last_focused_window, window_id)| Call::Query { id, active, last_focused_window, window_id }
        ),
        (any_text(16), any_text(16)).prop_map(|(nonce, proof)| Call::Challenge { nonce, proof }),
        any::<u64>().prop_map(Call::Ping),
    ]
}

/// The relay's message for `call`, with `params` for a command.
fn relay_message<'a>(call: &'a Call, params: Option<&'a RawValue>) -> RelayMessage<'a> {
    match call {
        Call::Send { id, tab_id, session, method, .. } => RelayMessage::DebuggerSendCommand(SendCommand {
            id: *id,
            tab_id: *tab_id,
            session_id: session.as_deref().map(Cow::Borrowed),
            method: Cow::Borrowed(method),
            params,
        }),
        Call::Create { id, url, active, opener, grant } => RelayMessage::TabsCreate {
            id: *id,
            url: url.clone(),
            active: *active,
            opener_tab_id: *opener,
            grant: grant.clone(),
        },
        Call::Update { id, tab_id, url, active } => {
            RelayMessage::TabsUpdate { id: *id, tab_id: *tab_id, url: url.clone(), active: *active }
        }
        Call::Query { id, active, last_focused_window, window_id } => RelayMessage::TabsQuery {
            id: *id,
            query: TabQuery { active: *active, last_focused_window: *last_focused_window, window_id: *window_id },
        },
        Call::Challenge { nonce, proof } => RelayMessage::Challenge { nonce: nonce.clone(), proof: proof.clone() },
        Call::Ping(nonce) => RelayMessage::Ping { nonce: *nonce },
    }
}

#[test]
fn relay_messages_round_trip_through_encode_and_parse() {
    let _shared = shared();
    fuzz(config(1), relay_call(), |call| {
        let params = match &call {
            Call::Send { params, .. } => params.as_deref().map(raw),
            _ => None,
        };
        let sent = relay_message(&call, params.as_deref());
        let text = encode(&sent);
        let parsed = RelayMessage::parse(&text).map_err(|e| fail(format!("{e}: {text}")))?;
        prop_assert_eq!((parsed.name(), parsed.call_id()), (sent.name(), sent.call_id()));
        // `"params":null` reads as no params, as serde reads an Option.
        let read = relay_message(&call, params.as_deref().filter(|p| p.get() != "null"));
        prop_assert_eq!(encode(&parsed), encode(&read));
        Ok(())
    });
}

// ---- nesting ---------------------------------------------------------------

/// `depth` nested arrays or objects, closed or not.
fn nested(depth: usize, objects: bool, closed: bool) -> String {
    let (open, close) = if objects { (r#"{"a":"#, "}") } else { ("[", "]") };
    let mut text = open.repeat(depth);
    if closed {
        text.push_str(if objects { "1" } else { "" });
        text.push_str(&close.repeat(depth));
    }
    text
}

/// Every parser given `nesting`: it must return. Returns what the value
/// parsers (depth-limited) said.
fn parse_everywhere(nesting: &str) -> TestCaseResult {
    // Bare, and where a frame carries a payload the relay passes through
    // unparsed (a RawValue: skipped without recursion, so no limit needed).
    let frames = [
        nesting.to_string(),
        format!(r#"{{"reply":{{"id":1,"result":{nesting}}}}}"#),
        format!(r#"{{"debugger.onEvent":{{"tabId":1,"method":"A.b","params":{nesting}}}}}"#),
        format!(r#"{{"debugger.sendCommand":{{"id":1,"tabId":1,"method":"A.b","params":{nesting}}}}}"#),
    ];
    for frame in &frames {
        decoders_agree(frame)?;
        let _ = Command::parse(&format!(r#"{{"id":1,"method":"A.b","params":{nesting}}}"#));
    }
    prop_assert!(ExtensionMessage::parse(nesting).is_err() && RelayMessage::parse(nesting).is_err());
    prop_assert!(Command::parse(nesting).is_err());
    // The control API reads bodies as Values (serde_json stops at 128 levels).
    if let Ok(value) = serde_json::from_str::<Value>(nesting) {
        let _ = Selected::<api::Act>::from_json(value);
    }
    // The config file, as an array and as an inline table.
    let toml_arrays = format!("a = {}", nesting.replace("{\"a\":", "[").replace('}', "]"));
    let toml_tables = format!("a = {}", nesting.replace("{\"a\":", "{a=").replace('[', "{a=").replace(']', "}"));
    for text in [toml_arrays, toml_tables] {
        prop_assert!(RelayConfig::parse(&text, Path::new("/state/config.toml")).is_err());
    }
    Ok(())
}

#[test]
fn ten_thousand_open_brackets_are_an_error_not_a_stack_overflow() {
    let _shared = shared();
    for (objects, closed) in [(false, false), (false, true), (true, false), (true, true)] {
        let text = nested(10_000, objects, closed);
        parse_everywhere(&text).unwrap();
        assert!(serde_json::from_str::<Value>(&text).is_err(), "deeper than serde_json's limit");
    }
    // Inside a payload the relay passes through, closed nesting is a value.
    let deep = nested(10_000, false, true);
    let frame = format!(r#"{{"reply":{{"id":1,"result":{deep}}}}}"#);
    assert!(matches!(ExtensionMessage::parse(&frame), Ok(ExtensionMessage::Reply(_))));
    assert_eq!(layout::reply(&frame), Some(RawReply { id: 1, result: Some(&deep) }));
}

#[test]
fn any_nesting_depth_returns_from_every_parser() {
    let _shared = shared();
    // Each case parses tens of kilobytes several times: a sixteenth of the cases.
    fuzz(config(16), (0..20_000usize, any::<bool>(), any::<bool>()), |(depth, objects, closed)| {
        parse_everywhere(&nested(depth, objects, closed))
    });
}

// ---- 2. the relay's CDP command parser ---------------------------------------

/// What a frame's `id` is.
#[derive(Debug, Clone)]
enum IdField {
    Missing,
    Integer(i64),
    /// Anything JSON has that is not an integer of i64 (strings, floats,
    /// integers beyond i64, null, ...).
    Other(Value),
}

fn id_field() -> impl Strategy<Value = IdField> {
    let other = prop_oneof![
        json_value(),
        (i64::MAX as u64 + 1..=u64::MAX).prop_map(Value::from),
        any::<i64>().prop_map(|i| Value::String(i.to_string())),
        any::<i32>().prop_map(|i| json!(f64::from(i) + 0.5)),
    ]
    // Mapped, not filtered: long runs would exhaust proptest's reject budget.
    .prop_map(|v| if v.is_i64() { Value::String(v.to_string()) } else { v });
    prop_oneof![
        1 => Just(IdField::Missing),
        4 => any::<i64>().prop_map(IdField::Integer),
        2 => other.prop_map(IdField::Other),
    ]
}

/// A frame from a CDP client: an object with these members, perhaps.
#[derive(Debug, Clone)]
struct CommandFrame {
    id: IdField,
    method: Option<Value>,
    session: Option<Value>,
    params: Option<Value>,
    extra: Option<(String, Value)>,
    pretty: bool,
}

fn command_frame() -> impl Strategy<Value = CommandFrame> {
    let string_or_any = || prop_oneof![3 => name().prop_map(Value::String), 1 => json_value()];
    (
        id_field(),
        prop::option::weighted(0.9, string_or_any()),
        prop::option::of(string_or_any()),
        prop::option::of(json_value()),
        prop::option::weighted(0.2, ("[a-zA-Z]{1,8}", json_value())),
        any::<bool>(),
    )
        .prop_map(|(id, method, session, params, extra, pretty)| CommandFrame {
            id,
            method,
            session,
            params,
            extra,
            pretty,
        })
}

impl CommandFrame {
    fn text(&self) -> String {
        let mut members = Map::new();
        if let Some((key, value)) = &self.extra {
            members.insert(key.clone(), value.clone());
        }
        match &self.id {
            IdField::Missing => {}
            IdField::Integer(id) => {
                members.insert("id".into(), json!(id));
            }
            IdField::Other(value) => {
                members.insert("id".into(), value.clone());
            }
        }
        for (key, value) in [("method", &self.method), ("sessionId", &self.session), ("params", &self.params)] {
            if let Some(value) = value {
                members.insert(key.into(), value.clone());
            }
        }
        let value = Value::Object(members);
        if self.pretty { serde_json::to_string_pretty(&value).expect("serialises") } else { value.to_string() }
    }
}

/// Whether `text` is one JSON value (any depth: a `RawValue` is skipped
/// over without recursion).
fn is_json(text: &str) -> bool {
    serde_json::from_str::<&RawValue>(text).is_ok()
}

#[test]
fn valid_cdp_commands_round_trip_id_method_session_and_params() {
    let _shared = shared();
    fuzz(config(1), command_frame(), |mut frame| {
        // Only the valid shapes: an integer id and a string method.
        if !matches!(frame.id, IdField::Integer(_)) {
            frame.id = IdField::Integer(7);
        }
        if !matches!(frame.method, Some(Value::String(_))) {
            frame.method = Some(Value::String("A.b".into()));
        }
        if !matches!(frame.session, None | Some(Value::String(_) | Value::Null)) {
            frame.session = None;
        }
        if frame.extra.as_ref().is_some_and(|(key, _)| ["id", "method", "sessionId", "params"].contains(&key.as_str()))
        {
            frame.extra = None;
        }
        let text = frame.text();
        let command = Command::parse(&text).map_err(|bad| fail(format!("{bad:?}: {text}")))?;
        let IdField::Integer(id) = frame.id else { unreachable!() };
        prop_assert_eq!(command.id, id);
        prop_assert_eq!(Some(&*command.method), frame.method.as_ref().and_then(Value::as_str));
        prop_assert_eq!(command.session_id.as_deref(), frame.session.as_ref().and_then(Value::as_str));
        // Params pass through as the client wrote them (null is none).
        let params = command.params.map(|raw| serde_json::from_str::<Value>(raw.get()).expect("raw is JSON"));
        let expected = frame.params.filter(|p| !p.is_null()).map(|p| {
            serde_json::from_str::<Value>(&p.to_string()).expect("JSON") // the same float parsing on both sides
        });
        prop_assert_eq!(params, expected);
        Ok(())
    });
}

#[test]
fn bad_cdp_commands_get_chromes_error_and_keep_their_id() {
    let _shared = shared();
    let input = prop_oneof![
        4 => command_frame().prop_map(|frame| frame.text()),
        1 => json_value().prop_map(|v| v.to_string()),
        // A struct can be read from an array by serde; Chrome wants objects.
        1 => (any::<i64>(), name()).prop_map(|(id, method)| json!([id, method]).to_string()),
        2 => (command_frame(), edits()).prop_map(|(frame, edits)| mutate(&frame.text(), &edits)),
        1 => any_text(48),
    ];
    fuzz(config(1), input, |text| {
        // The frame's members, as raw JSON: params may hold numbers beyond
        // f64, which the relay passes on to Chrome as written.
        let members = serde_json::from_str::<BTreeMap<String, &RawValue>>(&text).ok();
        let member = |key: &str| members.as_ref().and_then(|m| m.get(key)).map(|raw| raw.get());
        let integer_id = member("id").and_then(|id| serde_json::from_str::<i64>(id).ok());
        let Err(bad) = Command::parse(&text) else {
            // Accepted: then it is an object with an integer id and a string method.
            prop_assert!(members.is_some(), "accepted a non-object: {}", text);
            let method = member("method").and_then(|m| serde_json::from_str::<String>(m).ok());
            prop_assert!(integer_id.is_some() && method.is_some(), "{}", text);
            return Ok(());
        };
        prop_assert!(bad.message.len() <= 2 * text.len() + 256, "{:?}", bad);
        if !is_json(&text) {
            prop_assert_eq!((bad.code, bad.id), (code::PARSE_ERROR, None), "{}", text);
            return Ok(());
        }
        // JSON, but not a command: an invalid request, never a parse error,
        // with the id whenever the frame has an integer one.
        prop_assert_eq!(bad.code, code::INVALID_REQUEST, "{}: {:?}", text, bad);
        prop_assert_eq!(bad.id, integer_id, "{}: {:?}", text, bad);
        Ok(())
    });
}

// ---- 3. the HTTP guard -----------------------------------------------------

fn port() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => Just(String::new()),
        4 => "[0-9]{1,5}".prop_map(|p| format!(":{p}")),
        1 => "[0-9]{6,9}".prop_map(|p| format!(":{p}")),
        1 => any_text(6).prop_map(|p| format!(":{p}")),
        1 => Just(":".to_string()),
    ]
}

/// Host names: loopback in its accepted forms, look-alikes, other
/// addresses, and anything.
fn host() -> BoxedStrategy<String> {
    let name = prop_oneof![
        any::<[u8; 3]>().prop_map(|[a, b, c]| format!("127.{a}.{b}.{c}")),
        Just("[::1]".to_string()),
        "[lL][oO][cC][aA][lL][hH][oO][sS][tT]",
        any::<[u8; 4]>().prop_map(|octets| Ipv4Addr::from(octets).to_string()),
        any::<u128>().prop_map(|v| format!("[{}]", Ipv6Addr::from(v))),
        prop::sample::select(vec![
            "[0:0:0:0:0:0:0:1]",
            "[::ffff:127.0.0.1]",
            "[::]",
            "::1",
            "127.1",
            "0x7f.0.0.1",
            "0177.0.0.1",
            "0127.0.0.1",
            "127.0.0.01",
            "2130706433",
            "localhost.",
            "local%68ost",
            "0.0.0.0",
        ])
        .prop_map(str::to_string),
        "(localhost|127\\.0\\.0\\.1)[.@:/#?a-z]{1,10}",
        "[a-z0-9@:/#?]{1,8}(localhost|127\\.0\\.0\\.1)",
        "[a-z0-9.-]{1,20}",
        any_text(24),
    ];
    (name, port()).prop_map(|(name, port)| name + &port).boxed()
}

/// Host names in the forms the guard accepts.
fn loopback_host() -> impl Strategy<Value = String> {
    let name = prop_oneof![
        any::<[u8; 3]>().prop_map(|[a, b, c]| format!("127.{a}.{b}.{c}")),
        Just("[::1]".to_string()),
        "[lL][oO][cC][aA][lL][hH][oO][sS][tT]",
    ];
    (name, prop::option::of("[0-9]{1,5}")).prop_map(|(name, port)| match port {
        Some(port) => format!("{name}:{port}"),
        None => name,
    })
}

/// Whether a browser (the URL standard) sends this Host for a loopback
/// address; `None` when it would not use it as a host at all.
fn browser_sees_loopback(host: &str) -> Option<bool> {
    let url = url::Url::parse(&format!("http://{host}/")).ok()?;
    Some(match url.host()? {
        url::Host::Domain(domain) => domain.eq_ignore_ascii_case("localhost"),
        url::Host::Ipv4(ip) => ip.is_loopback(),
        url::Host::Ipv6(ip) => ip.is_loopback(),
    })
}

#[test]
fn loopback_hosts_are_exactly_the_ones_a_browser_resolves_to_loopback() {
    let _shared = shared();
    fuzz(config(1), host(), |host| {
        let accepted = is_loopback_host(&host);
        // DNS rebinding: never accept a name the browser sends for another address.
        if accepted {
            prop_assert_ne!(browser_sees_loopback(&host), Some(false), "{}", host);
        }
        // The canonical forms are all accepted.
        let (name, port) = match host.rsplit_once(':') {
            Some((name, port)) if !host.ends_with(']') => (name, Some(port)),
            _ => (host.as_str(), None),
        };
        let canonical_name = name.eq_ignore_ascii_case("localhost")
            || name == "[::1]"
            || name.parse::<Ipv4Addr>().is_ok_and(|ip| ip.is_loopback() && ip.to_string() == name);
        let canonical_port = port.is_none_or(|p| (1..=5).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit()));
        if canonical_name && canonical_port {
            prop_assert!(accepted, "{}", host);
        }
        Ok(())
    });
}

/// The secrets and the guards built with them, shared by every case.
struct Guards {
    /// The install's secret: it opens no door (each has its own key).
    token: Token,
    cdp_key: Token,
    control_key: Token,
    session: String,
    relay: Guard,
    relay_open: Guard,
    control: Guard,
    control_open: Guard,
}

impl Guards {
    fn new() -> Self {
        let token = Token::generate();
        let (cdp_key, control_key) = (browser_relay::cdp_key(&token), browser_relay::control_key(&token));
        let sessions = std::sync::Arc::new(Sessions::new(Some(control_key.clone())));
        let nonce = shared_protocol::auth::nonce_hex(&[7; 32]);
        let opened = sessions.open(&nonce).expect("a session");
        let session =
            client_secret(&control_key, 0, &nonce, &opened.nonce, &opened.proof).expect("the server proves it");
        Self {
            relay: Guard::new(Some(token.clone()), vec![DEFAULT_EXTENSION_ID.into()]),
            relay_open: Guard::new(None, vec![DEFAULT_EXTENSION_ID.into()]),
            control: Guard::control(Some(token.clone()), sessions),
            control_open: Guard::control(None, std::sync::Arc::new(Sessions::new(None))),
            token,
            cdp_key,
            control_key,
            session,
        }
    }

    /// Puts the real secrets where a case has placeholders, in the case
    /// the case chose (keys are hex: either case is the key): `TOKEN` the
    /// install's secret, `CDPKEY` and `CTLKEY` the doors' keys, `SECRET` a
    /// control session's secret.
    fn fill(&self, text: &str, upper: bool) -> String {
        let cased = |key: &Token| if upper { key.as_str().to_ascii_uppercase() } else { key.as_str().to_string() };
        text.replace("TOKEN", &cased(&self.token))
            .replace("CDPKEY", &cased(&self.cdp_key))
            .replace("CTLKEY", &cased(&self.control_key))
            .replace("SECRET", &self.session)
    }
}

/// One request as the guard sees it. `TOKEN` and `SECRET` in the query
/// and the headers stand for the real token and a session's secret.
#[derive(Debug, Clone)]
struct GuardedRequest {
    host: Option<Vec<u8>>,
    path: String,
    query: Option<String>,
    origin: Option<Vec<u8>>,
    authorization: Option<Vec<u8>>,
    other: Option<(String, Vec<u8>)>,
    upper: bool,
}

fn header_bytes(text: impl Strategy<Value = String>) -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => text.prop_map(String::into_bytes),
        // Non-UTF-8 and non-visible bytes (HeaderValue refuses only controls).
        1 => prop::collection::vec(any::<u8>(), 0..40),
    ]
}

fn route_path() -> BoxedStrategy<String> {
    prop_oneof![
        3 => prop::sample::select(vec![
            "/", "", "/extension", "/extension/", "/extension//", "/extension/status", "/json", "/json/",
            "/json/version", "/json/list", "/json/new", "/json/protocol", "/json/protocol/", "/json/protocolx",
            "/cdp", "/cdp/", "/devtools/browser/x", "/session", "/session/", "/tabs", "/snapshot",
            "/profiles/managed/json/protocol", "/profiles//json/protocol", "/profiles/a/b/json/protocol",
        ])
        .prop_map(str::to_string),
        1 => "/(json|cdp|devtools|extension|profiles|session)[/a-z%.]{0,16}",
        1 => any_text(16).prop_map(|p| format!("/{p}")),
        1 => any_text(16),
    ]
    .boxed()
}

fn guarded_request() -> impl Strategy<Value = GuardedRequest> {
    let ours = format!("chrome-extension://{DEFAULT_EXTENSION_ID}");
    let origin = prop_oneof![
        Just(ours.clone()),
        Just(format!("{ours}/")),
        Just(format!("{ours}x")),
        Just("null".to_string()),
        "chrome-extension://[a-p]{32}",
        "https?://[a-z.]{1,12}(:[0-9]{1,5})?",
        any_text(24),
    ];
    let query = prop_oneof![
        "token=(TOKEN|CDPKEY|CTLKEY)",
        "[a-z]{1,4}=[a-z0-9]{0,4}&token=(TOKEN|CDPKEY|CTLKEY)",
        "token=(TOKEN|CDPKEY|CTLKEY)&token=[a-f0-9]{0,8}",
        "token=[a-f0-9]{0,8}&token=(TOKEN|CDPKEY|CTLKEY)",
        "token=(TOKEN|CDPKEY|CTLKEY|SECRET)[a-z0-9%]{1,3}",
        "(token|tok%65n|TOKEN)=[a-zA-Z0-9%+&=]{0,70}",
        any_text(40),
    ];
    let authorization = prop_oneof![
        "(Bearer|bearer|Basic) {0,2}(TOKEN|CDPKEY|CTLKEY|SECRET)? {0,2}",
        "Bearer (TOKEN|CDPKEY|CTLKEY|SECRET)[a-z0-9]{1,2}",
        "Bearer [a-zA-Z0-9]{0,70}",
        any_text(24),
    ];
    (
        prop::option::weighted(0.95, header_bytes(host())),
        route_path(),
        prop::option::weighted(0.7, query),
        prop::option::weighted(0.3, header_bytes(origin)),
        prop::option::weighted(0.4, header_bytes(authorization)),
        prop::option::weighted(0.2, ("x-[a-z]{1,8}", header_bytes(any_text(70)))),
        any::<bool>(),
    )
        .prop_map(|(host, path, query, origin, authorization, other, upper)| GuardedRequest {
            host,
            path,
            query,
            origin,
            authorization,
            other,
            upper,
        })
}

impl GuardedRequest {
    fn headers(&self, guards: &Guards) -> HeaderMap {
        let mut headers = HeaderMap::new();
        let fill = |bytes: &Vec<u8>| match std::str::from_utf8(bytes) {
            Ok(text) => guards.fill(text, self.upper).into_bytes(),
            Err(_) => bytes.clone(),
        };
        let named =
            [(header::HOST, &self.host), (header::ORIGIN, &self.origin), (header::AUTHORIZATION, &self.authorization)];
        for (name, value) in named {
            // A value HTTP cannot carry never reaches the guard.
            if let Some(value) = value.as_ref().and_then(|v| HeaderValue::from_bytes(&fill(v)).ok()) {
                headers.insert(name, value);
            }
        }
        if let Some((name, value)) = &self.other
            && let (Ok(name), Ok(value)) =
                (HeaderName::from_bytes(name.as_bytes()), HeaderValue::from_bytes(&fill(value)))
        {
            headers.insert(name, value);
        }
        headers
    }
}

/// Whether the request carries `secret` anywhere (a decoded query key or
/// value, any header), in either case.
fn carries(secret: &str, query: Option<&str>, headers: &HeaderMap) -> bool {
    let secret = secret.to_ascii_lowercase();
    let has = |text: &str| text.to_ascii_lowercase().contains(&secret);
    let in_query = query.is_some_and(|q| url::form_urlencoded::parse(q.as_bytes()).any(|(k, v)| has(&k) || has(&v)));
    in_query || headers.values().any(|v| has(&String::from_utf8_lossy(v.as_bytes())))
}

#[test]
fn the_guard_refuses_foreign_hosts_web_origins_and_requests_without_the_token() {
    let _shared = shared();
    let guards = Guards::new();
    fuzz(config(1), guarded_request(), |request| {
        let headers = request.headers(&guards);
        let query = request.query.as_deref().map(|q| guards.fill(q, request.upper));
        let path = request.path.as_str();
        let host = headers.get(header::HOST);
        let origin = headers.get(header::ORIGIN).map(|o| String::from_utf8_lossy(o.as_bytes()).into_owned());
        let ours = origin.as_deref().is_some_and(|o| {
            o.strip_prefix("chrome-extension://").is_some_and(|id| id.trim_end_matches('/') == DEFAULT_EXTENSION_ID)
        });
        for (guard, control, with_token) in [
            (&guards.relay, false, true),
            (&guards.relay_open, false, false),
            (&guards.control, true, true),
            (&guards.control_open, true, false),
        ] {
            let verdict = guard.check(path, query.as_deref(), &headers);
            let context = format!("control={control} token={with_token} {path:?} {query:?} {headers:?}: {verdict:?}");
            // Host first: missing, not text, or not loopback.
            match host.map(|h| h.to_str()) {
                None => prop_assert_eq!(&verdict, &Err(Rejection::MissingHost), "{}", context),
                Some(Err(_)) => {
                    prop_assert_eq!(&verdict, &Err(Rejection::NonLoopbackHost("<non-ascii>".into())), "{}", context)
                }
                Some(Ok(host)) if !is_loopback_host(host) => {
                    prop_assert_eq!(&verdict, &Err(Rejection::NonLoopbackHost(host.into())), "{}", context)
                }
                Some(Ok(_)) => prop_assert!(
                    !matches!(verdict, Err(Rejection::MissingHost | Rejection::NonLoopbackHost(_))),
                    "{}",
                    context
                ),
            }
            if let Err(rejection) = &verdict {
                // Messages are bounded by what they quote, and never quote a token.
                let quoted = host.map_or(0, |h| h.len()) + origin.as_ref().map_or(0, String::len);
                prop_assert!(rejection.message().len() <= quoted + 512, "{}", context);
                if matches!(rejection, Rejection::MissingToken | Rejection::WrongToken) {
                    for key in [&guards.token, &guards.cdp_key, &guards.control_key] {
                        prop_assert!(!rejection.message().contains(key.as_str()), "{}", context);
                    }
                }
            }
            if !with_token {
                prop_assert!(!matches!(verdict, Err(Rejection::MissingToken | Rejection::WrongToken)), "{}", context);
            }
            if verdict.is_err() {
                continue;
            }
            let class = if control {
                if path == "/session" { RouteClass::Public } else { RouteClass::Client }
            } else {
                RouteClass::of(path)
            };
            // An Origin is a web page, another extension or our own: only our
            // own, only on the public routes and /extension, only on the relay.
            if origin.is_some() {
                prop_assert!(!control && ours && class != RouteClass::Client, "{}", context);
            }
            if class == RouteClass::Extension {
                prop_assert!(ours, "/extension without our Origin: {}", context);
            }
            // Token routes open only to a request that carries the door's
            // own key or (control API) an open session's secret; never to
            // the install's secret alone.
            if with_token && class == RouteClass::Client {
                let session = control && carries(&guards.session, query.as_deref(), &headers);
                let key = if control { &guards.control_key } else { &guards.cdp_key };
                prop_assert!(carries(key.as_str(), query.as_deref(), &headers) || session, "{}", context);
            }
        }
        Ok(())
    });
}

#[test]
fn each_doors_key_or_a_session_secret_opens_every_token_route_and_the_install_secret_none() {
    let _shared = shared();
    let guards = Guards::new();
    let presented =
        prop_oneof!["token=KEY(&[a-z]{1,4}=[a-z0-9%]{0,6}){0,3}", "Bearer {1,3}KEY {0,2}", "Bearer {1,3}SECRET {0,2}",];
    let request = (loopback_host(), route_path(), presented, any::<bool>());
    fuzz(config(1), request, |(host, path, presented, upper)| {
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, HeaderValue::from_str(&host).map_err(fail)?);
        // One request with `key` where the case says KEY: its verdict.
        let check = |guard: &Guard, key: &str| -> Result<Result<(), Rejection>, TestCaseError> {
            let presented = guards.fill(&presented.replace("KEY", key), upper);
            let mut headers = headers.clone();
            let query = match presented.strip_prefix("Bearer") {
                Some(_) => {
                    headers.insert(header::AUTHORIZATION, HeaderValue::from_str(&presented).map_err(fail)?);
                    None
                }
                None => Some(presented.as_str()),
            };
            Ok(guard.check(&path, query, &headers))
        };
        let by_session = presented.contains("SECRET");
        let class = RouteClass::of(&path);
        if !by_session && class != RouteClass::Extension {
            prop_assert_eq!(check(&guards.relay, "CDPKEY")?, Ok(()), "{:?} {:?}", path, presented);
        }
        if !by_session && class == RouteClass::Client {
            prop_assert_eq!(check(&guards.relay, "TOKEN")?, Err(Rejection::WrongToken), "the secret: {:?}", path);
            prop_assert_eq!(check(&guards.relay, "CTLKEY")?, Err(Rejection::WrongToken), "another door's: {:?}", path);
        }
        prop_assert_eq!(check(&guards.control, "CTLKEY")?, Ok(()), "{:?} {:?}", path, presented);
        if !by_session && path != "/session" {
            prop_assert_eq!(check(&guards.control, "TOKEN")?, Err(Rejection::WrongToken), "the secret: {:?}", path);
            prop_assert_eq!(
                check(&guards.control, "CDPKEY")?,
                Err(Rejection::WrongToken),
                "another door's: {:?}",
                path
            );
        }
        Ok(())
    });
}

// ---- 4. the control API's requests -----------------------------------------

/// The fields the routes and actions know, and a few they do not.
const REQUEST_KEYS: &[&str] = &[
    "profile",
    "targetId",
    "url",
    "waitUntil",
    "timeoutMs",
    "format",
    "interactive",
    "full",
    "compact",
    "part",
    "depth",
    "limit",
    "maxChars",
    "selector",
    "frame",
    "fullPage",
    "ref",
    "element",
    "type",
    "quality",
    "labels",
    "level",
    "accept",
    "promptText",
    "paths",
    "kind",
    "button",
    "doubleClick",
    "startRef",
    "endRef",
    "fields",
    "fn",
    "width",
    "height",
    "key",
    "loadState",
    "modifiers",
    "slowly",
    "submit",
    "text",
    "textGone",
    "timeMs",
    "value",
    "values",
    "token",
    "",
    "unknown",
];

const ACTION_KINDS: &[&str] =
    &["click", "type", "press", "hover", "drag", "select", "fill", "wait", "resize", "close", "evaluate", "nope"];

fn request_value() -> BoxedStrategy<Value> {
    let key = prop_oneof![4 => prop::sample::select(REQUEST_KEYS).prop_map(str::to_string), 1 => any_text(8)];
    let value = prop_oneof![
        3 => json_value(),
        1 => prop::sample::select(ACTION_KINDS).prop_map(|k| json!(k)),
        1 => prop::sample::select(vec!["load", "commit", "networkidle", "ai", "aria", "png", "jpeg", "e1", "/tmp/x"])
            .prop_map(|v| json!(v)),
    ];
    prop_oneof![
        6 => prop::collection::vec((key, value), 0..6).prop_map(|members| Value::Object(members.into_iter().collect())),
        1 => json_value(),
    ]
    .boxed()
}

fn query_string() -> BoxedStrategy<String> {
    let key = prop_oneof![4 => prop::sample::select(REQUEST_KEYS).prop_map(str::to_string), 1 => any_text(8)];
    let value = prop_oneof![
        prop::sample::select(vec!["", "1", "0", "true", "false", "yes", "-1", "18446744073709551616", "ai", "aria"])
            .prop_map(str::to_string),
        "[0-9]{1,22}",
        any_text(12),
    ];
    prop_oneof![
        3 => prop::collection::vec((key, value), 0..6).prop_map(|pairs| {
            url::form_urlencoded::Serializer::new(String::new()).extend_pairs(pairs).finish()
        }),
        1 => any_text(40),
    ]
    .boxed()
}

/// Everything the router does with a request before a handler sees it,
/// for one route: a JSON body (POST), a query (GET, DELETE), a value.
fn read_request<R: Route>(value: &Value, body: &[u8], query: &str) -> TestCaseResult {
    let bounded = |error: &dyn std::fmt::Display, input: usize| -> TestCaseResult {
        let message = error.to_string();
        prop_assert!(message.len() <= 2 * input + 1024, "{} ({} bytes of input)", message, input);
        Ok(())
    };
    if let Err(e) = Selected::<R>::from_json(value.clone()) {
        bounded(&e, value.to_string().len())?;
    }
    if let Ok(value) = serde_json::from_slice::<Value>(body)
        && let Err(e) = Selected::<R>::from_json(value)
    {
        bounded(&e, body.len())?;
    }
    match api::query_object::<R>(Some(query)) {
        Ok(value) => {
            if let Err(e) = Selected::<R>::from_json(value) {
                bounded(&e, query.len())?;
            }
        }
        Err(e) => bounded(&e, query.len())?,
    }
    Ok(())
}

macro_rules! read_every_route {
    ($($route:ident),*) => {
        /// [`read_request`] for every route of the control API.
        fn read_every_route(value: &Value, body: &[u8], query: &str) -> TestCaseResult {
            $(read_request::<api::$route>(value, body, query)?;)*
            Ok(())
        }
    };
}
control_engine::for_each_route!(read_every_route);

#[test]
fn control_requests_never_panic_for_any_body_query_or_value() {
    let _shared = shared();
    let body = prop_oneof![
        2 => request_value().prop_map(|v| v.to_string().into_bytes()),
        2 => (request_value(), edits()).prop_map(|(v, edits)| mutate(&v.to_string(), &edits).into_bytes()),
        1 => prop::collection::vec(any::<u8>(), 0..64),
    ];
    fuzz(config(2), (request_value(), body, query_string()), |(value, body, query)| {
        read_every_route(&value, &body, &query)
    });
}

fn selector() -> impl Strategy<Value = TabSelector> {
    (prop::option::of(any_text(12)), prop::option::of(any_text(12)))
        .prop_map(|(profile, target_id)| TabSelector { profile, target_id })
}

/// A GET request survives its trip through a query string.
fn query_round_trip<R: Route + PartialEq>(request: Selected<R>) -> TestCaseResult {
    let query = url::form_urlencoded::Serializer::new(String::new()).extend_pairs(api::query_pairs(&request)).finish();
    let value = api::query_object::<R>(Some(&query)).map_err(|e| fail(format!("{e}: {query}")))?;
    let read = Selected::<R>::from_json(value).map_err(|e| fail(format!("{e}: {query}")))?;
    prop_assert_eq!(read, request, "{}", query);
    Ok(())
}

/// A POST request survives its trip through a JSON body.
fn body_round_trip<R: Route + PartialEq>(request: Selected<R>) -> TestCaseResult {
    let body = Value::Object(request.to_json()).to_string();
    let value = serde_json::from_str(&body).map_err(fail)?;
    let read = Selected::<R>::from_json(value).map_err(|e| fail(format!("{e}: {body}")))?;
    prop_assert_eq!(read, request, "{}", body);
    Ok(())
}

#[test]
fn control_requests_round_trip_through_their_query_string_or_body() {
    let _shared = shared();
    let snapshot = (
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        prop::option::of(any::<u32>()),
        prop::option::of(any::<u32>()),
        prop::option::of(any::<usize>()),
        prop::option::of(any::<u32>()),
        prop::option::of(any_text(12)),
        prop::option::of(any_text(12)),
    )
        .prop_map(|(aria, interactive, full, compact, depth, limit, max_chars, part, selector, frame)| {
            api::TakeSnapshot {
                format: if aria { api::Format::Aria } else { api::Format::Ai },
                interactive,
                full,
                compact,
                depth,
                limit,
                max_chars,
                part,
                selector,
                frame,
            }
        });
    let console = (prop::option::of(any_text(8)), prop::option::of(any::<usize>()))
        .prop_map(|(level, limit)| api::ReadConsole { level, limit });
    let wait_until = prop::sample::select(vec![
        api::WaitUntil::Commit,
        api::WaitUntil::DomContentLoaded,
        api::WaitUntil::Load,
        api::WaitUntil::NetworkIdle,
    ]);
    let navigate = (any_text(24), wait_until, prop::option::of(any::<u64>()))
        .prop_map(|(url, wait_until, timeout_ms)| api::Navigate { url, wait_until, timeout_ms });
    let files =
        (prop::collection::vec(any_text(12), 0..3), prop::option::of(any_text(6)), prop::option::of(any::<u64>()))
            .prop_map(|(paths, element_ref, timeout_ms)| api::ArmFileChooser { paths, element_ref, timeout_ms });
    let requests = (
        prop::option::of(any_text(12)),
        any::<bool>(),
        prop::option::of(any_text(6)),
        prop::option::of(any::<usize>()),
        any::<bool>(),
    )
        .prop_map(|(url, failed, resource_type, limit, all)| api::ListRequests {
            url,
            failed,
            resource_type,
            limit,
            all,
        });
    let find = (
        prop::option::of(any_text(12)),
        prop::option::of(any_text(8)),
        prop::option::of(any_text(12)),
        prop::option::of(any::<usize>()),
    )
        .prop_map(|(text, role, name, limit)| api::FindInPage { text, role, name, limit });
    let input = (selector(), snapshot, console, requests, navigate, (files, find));
    fuzz(config(2), input, |(tab, snapshot, console, requests, navigate, (files, find))| {
        query_round_trip(Selected::new(tab.clone(), snapshot))?;
        query_round_trip(Selected::new(tab.clone(), find))?;
        query_round_trip(Selected::new(tab.clone(), console))?;
        query_round_trip(Selected::new(tab.clone(), requests))?;
        body_round_trip(Selected::new(tab.clone(), navigate))?;
        body_round_trip(Selected::new(tab, files))
    });
}

// ---- 5. the CDP client's frame handling ------------------------------------

/// A frame from a hostile or broken browser, given the pending call's id.
#[derive(Debug, Clone)]
enum Hostile {
    Text(String),
    Json(Value),
    /// `{"id": <not our call, or not an integer>, ...}`.
    Reply {
        id: HostileId,
        body: Value,
    },
    /// An event with a method of any type, or none.
    Event {
        method: Option<Value>,
        params: Option<Value>,
        session: Option<Value>,
    },
    Nested(usize),
}

#[derive(Debug, Clone)]
enum HostileId {
    Unknown(u64),
    AsString,
    AsFloat,
    Negative,
    Huge,
    TooLarge,
    Other(Value),
}

fn hostile() -> impl Strategy<Value = Hostile> {
    let id = prop_oneof![
        any::<u64>().prop_map(HostileId::Unknown),
        Just(HostileId::AsString),
        Just(HostileId::AsFloat),
        Just(HostileId::Negative),
        Just(HostileId::Huge),
        Just(HostileId::TooLarge),
        json_value().prop_map(HostileId::Other),
    ];
    prop_oneof![
        any_text(40).prop_map(Hostile::Text),
        json_value().prop_map(Hostile::Json),
        (id, json_value()).prop_map(|(id, body)| Hostile::Reply { id, body }),
        (
            prop::option::of(prop_oneof![name().prop_map(Value::String), json_value()]),
            prop::option::of(json_value()),
            prop::option::of(prop_oneof![name().prop_map(Value::String), json_value()]),
        )
            .prop_map(|(method, params, session)| Hostile::Event { method, params, session }),
        (100..3_000usize).prop_map(Hostile::Nested),
    ]
}

impl Hostile {
    fn text(&self, pending: u64) -> String {
        match self {
            Self::Text(text) => text.clone(),
            Self::Json(value) => value.to_string(),
            Self::Reply { id, body } => {
                let id = match id {
                    HostileId::Unknown(n) => n.to_string(),
                    HostileId::AsString => format!("\"{pending}\""),
                    HostileId::AsFloat => format!("{pending}.0"),
                    HostileId::Negative => format!("-{pending}"),
                    HostileId::Huge => "1e400".into(),
                    HostileId::TooLarge => "18446744073709551616".into(),
                    HostileId::Other(value) => value.to_string(),
                };
                format!(r#"{{"id":{id},"result":{body}}}"#)
            }
            Self::Event { method, params, session } => {
                let mut members = Map::new();
                for (key, value) in [("method", method), ("params", params), ("sessionId", session)] {
                    if let Some(value) = value {
                        members.insert(key.into(), value.clone());
                    }
                }
                Value::Object(members).to_string()
            }
            Self::Nested(depth) => nested(*depth, false, true),
        }
    }
}

/// The pending call's answer, with members of any type.
#[derive(Debug, Clone)]
enum Answer {
    Result(Value),
    Error { code: Option<Value>, message: Option<Value> },
    Bare,
}

fn answer() -> impl Strategy<Value = Answer> {
    let member = || {
        prop::option::of(prop_oneof![
            any::<i64>().prop_map(Value::from),
            any_text(12).prop_map(Value::String),
            json_value()
        ])
    };
    prop_oneof![
        3 => json_value().prop_map(Answer::Result),
        2 => (member(), member()).prop_map(|(code, message)| Answer::Error { code, message }),
        1 => Just(Answer::Bare),
    ]
}

/// Sends garbage and then the answer to one pending call: the call gets its
/// answer, the events among the garbage arrive in order, the client lives.
async fn exchange(garbage: &[Hostile], answer: &Answer, session: Option<&str>) -> TestCaseResult {
    let (outgoing, mut sent) = tokio::sync::mpsc::unbounded_channel();
    let (browser, incoming) = tokio::sync::mpsc::unbounded_channel();
    let client = CdpClient::over(Channels { outgoing, incoming }).with_timeout(Duration::from_secs(5));
    let mut events = client.take_events().ok_or_else(|| fail("no event stream"))?;
    let call = client.start_call("Fuzz.call", json!({"n": 1}), session);
    let command: Value = serde_json::from_str(&sent.recv().await.ok_or_else(|| fail("nothing sent"))?).map_err(fail)?;
    prop_assert_eq!(&command["method"], "Fuzz.call");
    prop_assert_eq!(command.get("sessionId").and_then(Value::as_str), session);
    let id = command["id"].as_u64().ok_or_else(|| fail(format!("no id: {command}")))?;

    let mut expected_events = Vec::new();
    for frame in garbage {
        let text = frame.text(id);
        let value = serde_json::from_str::<Value>(&text).ok();
        let integer_id = value.as_ref().and_then(|v| v.get("id")).and_then(Value::as_u64);
        // An integer id equal to the call's is its answer, not garbage.
        if integer_id == Some(id) {
            continue;
        }
        // What CDP calls an event: an object with a string method and no integer id.
        if let Some(value) = value.filter(|_| integer_id.is_none())
            && let Some(method) = value.get("method").and_then(Value::as_str)
        {
            expected_events.push((
                method.to_string(),
                value.get("params").cloned().unwrap_or(Value::Null),
                value.get("sessionId").and_then(Value::as_str).map(str::to_string),
            ));
        }
        browser.send(text).map_err(|_| fail("the client stopped reading"))?;
    }
    let mut reply = Map::new();
    reply.insert("id".into(), json!(id));
    let expected = match answer {
        Answer::Result(result) => {
            reply.insert("result".into(), result.clone());
            Ok(serde_json::from_str::<Value>(&result.to_string()).map_err(fail)?)
        }
        Answer::Error { code, message } => {
            let mut error = Map::new();
            if let Some(code) = code {
                error.insert("code".into(), code.clone());
            }
            if let Some(message) = message {
                error.insert("message".into(), message.clone());
            }
            reply.insert("error".into(), Value::Object(error));
            Err(CdpError::Protocol {
                method: "Fuzz.call".into(),
                code: code.as_ref().and_then(Value::as_i64).unwrap_or(0),
                message: message.as_ref().and_then(Value::as_str).unwrap_or("").to_string(),
            })
        }
        Answer::Bare => Ok(Value::Null),
    };
    browser.send(Value::Object(reply).to_string()).map_err(|_| fail("the client stopped reading"))?;
    prop_assert_eq!(call.await, expected);
    for (method, params, session_id) in expected_events {
        let event = events.recv().await.ok_or_else(|| fail("event stream ended"))?;
        prop_assert_eq!((event.method, event.params, event.session_id), (method, params, session_id));
    }
    prop_assert!(events.try_recv().is_err(), "an event that is not one was delivered");
    prop_assert!(!client.is_closed());
    Ok(())
}

#[test]
fn the_cdp_client_survives_hostile_frames_and_still_answers_the_pending_call() {
    let _shared = shared();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    let input = (prop::collection::vec(hostile(), 0..8), answer(), prop::option::of(name()));
    fuzz(config(2), input, |(garbage, answer, session)| {
        runtime.block_on(async {
            tokio::time::timeout(Duration::from_secs(10), exchange(&garbage, &answer, session.as_deref()))
                .await
                .map_err(|_| fail("the client hung"))?
        })
    });
}

// ---- 6. the config file ----------------------------------------------------

/// The config examples of the README and the docs (configuration.md,
/// farms.md), and the config tests' valid ones.
fn config_examples() -> Vec<String> {
    let docs = [
        include_str!("../../README.md"),
        include_str!("../../docs/configuration.md"),
        include_str!("../../docs/farms.md"),
    ]
    .concat();
    let mut examples: Vec<String> = docs
        .split("```toml\n")
        .skip(1)
        .filter_map(|block| block.split_once("```").map(|(toml, _)| toml.to_string()))
        .collect();
    assert!(!examples.is_empty(), "the docs have a config example");
    examples.push(
        "uploadRoots = [\"/home/me\"]\nmediaKeep = 5\ndefaultProfile = \"work\"\n[profiles.work]\ndriver = \"managed\"\n\
         color = \"#00aa11\"\nattachOnly = true\ncdpUrl = \"wss://farm.example/?token=abc\"\n\
         cdpHeaders = { Authorization = \"Bearer abc\" }\ncdpCaFile = \"/etc/farm/ca.pem\"\nremoteCdpTimeoutMs = 5\n"
            .into(),
    );
    examples
}

fn parse_config(text: &str) -> Result<RelayConfig, String> {
    RelayConfig::parse(text, Path::new("/state/config.toml")).map_err(|e| e.to_string())
}

/// What every config that parses satisfies (the rules config.rs enforces
/// and docs/configuration.md states).
fn config_rules_hold(config: &RelayConfig) -> TestCaseResult {
    prop_assert!(config.profiles.contains_key("chrome") && config.profiles.contains_key("managed"));
    // The default names a profile, or is `auto`, which no profile may be called.
    prop_assert!(config.default_is_auto() || config.profiles.contains_key(&config.default_profile));
    prop_assert!(!config.profiles.contains_key(settings::AUTO_PROFILE));
    prop_assert!(config.media_keep >= 1 && config.media_max_age >= Duration::from_secs(3600));
    prop_assert!(config.upload_roots.iter().all(|root| root.is_absolute()));
    prop_assert!(!config.remote_deadlines.connect.is_zero() && !config.remote_deadlines.handshake.is_zero());
    for (name, profile) in &config.profiles {
        prop_assert_eq!(name, &profile.name);
        prop_assert!(!name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
        let hex = profile.color.strip_prefix('#').unwrap_or("");
        prop_assert!(hex.len() == 6 && hex.bytes().all(|b| b.is_ascii_digit() || (b'A'..=b'F').contains(&b)));
        prop_assert_ne!(profile.cdp_port, Some(9222));
        prop_assert!(profile.cdp_port.is_none() || profile.attach_only, "{:?}", profile);
        prop_assert!(!profile.attach_only || profile.cdp_port.is_some() || profile.cdp_url.is_some());
        // A remote browser's URL: one of four schemes, with a host, and no
        // credentials (they would go nowhere: headers carry them).
        if let Some(url) = &profile.cdp_url {
            let parsed = url::Url::parse(url);
            prop_assert!(parsed.is_ok(), "{}", url);
            let parsed = parsed.expect("checked");
            prop_assert!(["http", "https", "ws", "wss"].contains(&parsed.scheme()), "{}", url);
            prop_assert!(parsed.username().is_empty() && parsed.password().is_none(), "{}", url);
            prop_assert!(parsed.host_str().is_some_and(|h| !h.is_empty()), "{}", url);
        }
        // Headers and a CA file only for a cdpUrl; header values that cannot
        // break a request.
        prop_assert!(profile.cdp_url.is_some() || (profile.cdp_headers.is_empty() && profile.cdp_ca_file.is_none()));
        prop_assert!(profile.cdp_ca_file.as_ref().is_none_or(|ca| ca.is_absolute()));
        for (name, value) in &profile.cdp_headers.0 {
            prop_assert!(HeaderName::from_bytes(name.as_bytes()).is_ok(), "{}", name);
            prop_assert!(HeaderValue::from_str(value.expose()).is_ok(), "the value of {}", name);
            prop_assert!(
                !name.eq_ignore_ascii_case("host") && !name.to_ascii_lowercase().starts_with("sec-websocket-")
            );
        }
        prop_assert_eq!(profile.remote_deadlines, config.remote_deadlines);
        if profile.driver == Driver::Extension {
            prop_assert!(profile.executable_path.is_none() && profile.cdp_port.is_none() && profile.cdp_url.is_none());
        }
        let owned = ["--user-data-dir", "--remote-debugging-", "--profile-directory"];
        let overriding = profile.args.iter().find(|arg| owned.iter().any(|p| arg.starts_with(p)));
        prop_assert!(overriding.is_none(), "{:?}", overriding);
    }
    Ok(())
}

fn config_holds(text: &str) -> TestCaseResult {
    match parse_config(text) {
        Ok(config) => config_rules_hold(&config),
        Err(message) => {
            // toml quotes the offending line; our messages quote a value.
            prop_assert!(message.len() <= 3 * text.len() + 1024, "{} bytes for {} of input", message.len(), text.len());
            prop_assert!(message.starts_with("/state/config.toml"), "{}", message);
            Ok(())
        }
    }
}

#[test]
fn the_config_parser_never_panics_on_arbitrary_or_mutated_text() {
    let _shared = shared();
    let input = prop_oneof![
        3 => (prop::sample::select(config_examples()), edits()).prop_map(|(text, edits)| mutate(&text, &edits)),
        1 => any_text(200),
    ];
    fuzz(config(1), input, |text| config_holds(&text));
}

/// A TOML basic string (JSON's escapes are TOML's, but for DEL).
fn toml_string(s: &str) -> String {
    serde_json::to_string(s).expect("serialises").replace('\u{7f}', "\\u007F")
}

/// One profile of a generated config: every key may be set to a valid or
/// an invalid value.
#[derive(Debug, Clone)]
struct ProfileSpec {
    name: String,
    keys: Vec<(&'static str, String)>,
}

fn profile_spec() -> impl Strategy<Value = ProfileSpec> {
    let name = prop_oneof![
        4 => "[a-zA-Z0-9_-]{1,8}",
        2 => prop::sample::select(vec!["chrome", "managed"]).prop_map(str::to_string),
        1 => any_text(8),
    ];
    let text = |valid: &'static str| prop_oneof![3 => proptest::string::string_regex(valid).expect("regex"), 1 => any_text(12)];
    let value = prop_oneof![
        text("(extension|managed)").prop_map(|d| ("driver", toml_string(&d))),
        text("#[0-9a-fA-F]{6}").prop_map(|c| ("color", toml_string(&c))),
        any::<bool>().prop_map(|b| ("headless", b.to_string())),
        any::<bool>().prop_map(|b| ("noSandbox", b.to_string())),
        any::<bool>().prop_map(|b| ("attachOnly", b.to_string())),
        text("/[a-z/]{1,12}").prop_map(|p| ("executablePath", toml_string(&p))),
        prop_oneof![any::<u16>(), Just(9222u16)].prop_map(|p| ("cdpPort", p.to_string())),
        any::<i64>().prop_map(|p| ("cdpPort", p.to_string())),
        text("(http|ws|https|wss|ftp)://[a-z0-9.:@]{1,12}/[a-z?=&]{0,8}").prop_map(|u| ("cdpUrl", toml_string(&u))),
        (
            prop_oneof![3 => "[A-Za-z-]{1,12}", 1 => Just("Host".to_string()), 1 => any_text(6)],
            prop_oneof![3 => "[ -~]{1,16}", 1 => any_text(8)],
        )
            .prop_map(|(name, value)| (
                "cdpHeaders",
                format!("{{ {} = {} }}", toml_string(&name), toml_string(&value))
            )),
        text("/?[a-z/]{1,12}\\.pem").prop_map(|p| ("cdpCaFile", toml_string(&p))),
        prop::collection::vec(
            text("--(lang=fr|user-data-dir=/x|remote-debugging-port=1|profile-directory=x|mute-audio)"),
            0..3
        )
        .prop_map(|args| ("args", format!("[{}]", args.iter().map(|a| toml_string(a)).collect::<Vec<_>>().join(", ")))),
    ];
    (name, prop::collection::vec(value, 0..6)).prop_map(|(name, keys)| ProfileSpec { name, keys })
}

fn config_text() -> impl Strategy<Value = String> {
    let top = prop_oneof![
        prop_oneof![3 => "(chrome|managed|[a-z]{1,3})", 1 => any_text(6)]
            .prop_map(|p| ("defaultProfile", toml_string(&p))),
        any::<bool>().prop_map(|b| ("allowEvaluate", b.to_string())),
        any::<bool>().prop_map(|b| ("allowFileUrls", b.to_string())),
        prop::collection::vec("/?[a-z]{1,6}", 0..3).prop_map(|roots| (
            "uploadRoots",
            format!("[{}]", roots.iter().map(|r| toml_string(r)).collect::<Vec<_>>().join(", "))
        )),
        prop_oneof![0..1000i64, any::<i64>()].prop_map(|n| ("mediaKeep", n.to_string())),
        prop_oneof![0..1000i64, any::<i64>(), Just(i64::MAX)].prop_map(|n| ("mediaMaxAgeHours", n.to_string())),
        prop_oneof![0..10_000i64, any::<i64>()].prop_map(|n| ("remoteCdpTimeoutMs", n.to_string())),
        prop_oneof![0..10_000i64, any::<i64>()].prop_map(|n| ("remoteCdpHandshakeTimeoutMs", n.to_string())),
    ];
    (prop::collection::vec(top, 0..5), prop::collection::vec(profile_spec(), 0..4)).prop_map(|(top, profiles)| {
        let mut text = String::new();
        let mut seen = std::collections::HashSet::new();
        // Keys set twice are a TOML error: keep each key once, to reach the rules.
        for (key, value) in top {
            if seen.insert(key) {
                text.push_str(&format!("{key} = {value}\n"));
            }
        }
        let mut names = std::collections::HashSet::new();
        for profile in profiles.into_iter().filter(|p| names.insert(p.name.clone())) {
            text.push_str(&format!("[profiles.{}]\n", toml_string(&profile.name)));
            let mut seen = std::collections::HashSet::new();
            for (key, value) in profile.keys {
                if seen.insert(key) {
                    text.push_str(&format!("{key} = {value}\n"));
                }
            }
        }
        text
    })
}

#[test]
fn every_config_that_parses_obeys_the_documented_rules() {
    let _shared = shared();
    fuzz(config(1), config_text(), |text| config_holds(&text));
}

/// A remote profile whose secrets (a `cdpUrl` token, an `Authorization`
/// value) sit in lines that are broken in the ways a hand edit breaks them,
/// among other lines mutated at random: whatever the error, it never shows
/// a secret (toml quotes the offending line; config.rs does not).
#[test]
fn config_errors_never_show_a_remote_profiles_secrets() {
    let _shared = shared();
    let breakage =
        prop_oneof![Just(""), Just("\"unterminated"), Just("\""), Just("\n"), Just("\r\nx"), Just(" ]"), Just("' }"),];
    let input =
        ("[a-zA-Z0-9]{12,20}", "[a-zA-Z0-9]{12,20}", breakage, any::<bool>(), any::<bool>(), edits(), 0..4usize);
    fuzz(config(1), input, |(token, header, breakage, as_string, twice, edits, place)| {
        let url = format!("cdpUrl = \"wss://farm.example/?token={token}{}\"\n", if place == 0 { breakage } else { "" });
        let headers = match as_string {
            true => {
                format!("cdpHeaders = \"Authorization: Bearer {header}{}\"\n", if place == 1 { breakage } else { "" })
            }
            false => format!(
                "cdpHeaders = {{ Authorization = \"Bearer {header}{}\" }}\n",
                if place == 1 { breakage } else { "" }
            ),
        };
        let others = mutate(
            "defaultProfile = \"farm\"\nremoteCdpTimeoutMs = 2000\n[profiles.farm]\ndriver = \"managed\"\n",
            &edits,
        );
        let again = if twice { url.clone() } else { String::new() };
        let text = format!("{others}{url}{headers}{again}cdpCaFile = \"/etc/ca.pem\"\n");
        if let Err(message) = parse_config(&text) {
            for secret in [&token, &header] {
                prop_assert!(!message.contains(secret.as_str()), "{} shows {}: {}", text, secret, message);
            }
        }
        Ok(())
    });
}

/// A URL with a secret in its password, its query or fragment, or its path.
fn url_with_secret() -> impl Strategy<Value = (String, String)> {
    // RFC 3986: userinfo has no '/', '?', '#' or '@'; the secret is alphanumeric
    // so it cannot be made of the `***` and separators redaction adds.
    let userinfo_char = "[a-zA-Z0-9._~!$&'()*+,;=:%-]";
    (
        "(http|ws|https|wss)?",
        proptest::string::string_regex(&format!("{userinfo_char}{{0,8}}")).expect("regex"),
        "[a-zA-Z0-9]{8,16}",
        "[a-z0-9.:\\[\\]-]{0,16}",
        "(/[a-zA-Z0-9._~%!$&'()*+,;=:@-]{0,10}){0,3}",
        0..5usize,
    )
        .prop_map(|(scheme, user, secret, host, path, place)| {
            let scheme = if scheme.is_empty() { String::new() } else { format!("{scheme}://") };
            let url = match place {
                0 => format!("{scheme}{user}:{secret}@{host}{path}"),
                1 => format!("{scheme}{host}{path}?token={secret}"),
                2 => format!("{scheme}{user}@{host}{path}?a=1&apiKey={secret}#x"),
                3 => format!("{scheme}{host}{path}#access_token={secret}"),
                // A key in the path (as long as keys are, letters and digits).
                _ => {
                    let key = format!("key{secret}{secret}00");
                    return (format!("{scheme}{host}/session/{key}{path}"), key);
                }
            };
            (url, secret)
        })
}

#[test]
fn redacted_urls_never_show_a_password_a_query_or_fragment_secret_or_a_key_in_the_path() {
    let _shared = shared();
    let input = prop_oneof![
        3 => url_with_secret(),
        // Anything before a query: redaction never keeps what follows '?'.
        1 => (any_text(24), "[a-zA-Z0-9]{8,16}").prop_map(|(prefix, secret)| (format!("{prefix}?token={secret}"), secret)),
    ];
    fuzz(config(1), input, |(url, secret)| {
        let shown = redacted_url(&url);
        // Only where the secret is nowhere else in the URL by chance.
        if url.matches(&secret).count() == 1 {
            prop_assert!(!shown.contains(&secret), "{} shown as {}", url, shown);
        }
        prop_assert!(shown.len() <= url.len() + 16, "{}", shown);
        // And the CDP client's, for its connection errors.
        let shown = cdp_client::redact(&url);
        if url.matches(&secret).count() == 1 {
            prop_assert!(!shown.contains(&secret), "{} shown as {}", url, shown);
        }
        prop_assert!(shown.len() <= url.len() + 16, "{}", shown);
        Ok(())
    });
}

// ---- 7. the HTTP client's response parser ----------------------------------

/// A well-formed answer and how it is framed.
#[derive(Debug, Clone)]
struct HttpAnswer {
    status: u16,
    reason: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    framing: Framing,
}

#[derive(Debug, Clone)]
enum Framing {
    /// `Content-Length`, perhaps with bytes after the body.
    Length { extra: Vec<u8> },
    /// Chunks cut at these places, with sizes in upper or lower case and
    /// perhaps an extension.
    Chunked { cuts: Vec<Index>, upper: bool, extension: bool },
    /// No length: the body ends with the connection.
    Close,
}

fn http_answer() -> impl Strategy<Value = HttpAnswer> {
    let header = ("[A-Za-z0-9!#$%&'*+.^_|~-]{1,12}", "[!-~]([ -~]{0,24}[!-~])?")
        .prop_filter("not a framing header", |(name, _)| {
            !name.eq_ignore_ascii_case("content-length") && !name.eq_ignore_ascii_case("transfer-encoding")
        });
    let framing = prop_oneof![
        prop::collection::vec(any::<u8>(), 0..8).prop_map(|extra| Framing::Length { extra }),
        (prop::collection::vec(any::<Index>(), 0..4), any::<bool>(), any::<bool>())
            .prop_map(|(cuts, upper, extension)| Framing::Chunked { cuts, upper, extension }),
        Just(Framing::Close),
    ];
    (
        // A final answer with a body: 1xx are interim (the real answer
        // follows them), and 204 and 304 have no body by definition (RFC
        // 9110), whatever bytes follow.
        (200..1000u16).prop_filter("a status with a body", |s| *s != 204 && *s != 304),
        "[A-Za-z ]{0,12}",
        prop::collection::vec(header, 0..5),
        prop::collection::vec(any::<u8>(), 0..600),
        framing,
    )
        .prop_map(|(status, reason, headers, body, framing)| HttpAnswer { status, reason, headers, body, framing })
}

impl HttpAnswer {
    /// The answer on the wire, and the headers the client should report.
    fn bytes(&self) -> (Vec<u8>, Vec<(String, String)>) {
        let mut headers = self.headers.clone();
        let mut body = Vec::new();
        match &self.framing {
            Framing::Length { extra } => {
                headers.push(("Content-Length".into(), self.body.len().to_string()));
                body.extend_from_slice(&self.body);
                body.extend_from_slice(extra);
            }
            Framing::Chunked { cuts, upper, extension } => {
                headers.push(("Transfer-Encoding".into(), if *upper { "Chunked" } else { "chunked" }.into()));
                let mut cuts: Vec<usize> = cuts.iter().map(|c| c.index(self.body.len() + 1)).collect();
                cuts.extend([0, self.body.len()]);
                cuts.sort_unstable();
                cuts.dedup();
                for pair in cuts.windows(2) {
                    let chunk = &self.body[pair[0]..pair[1]];
                    let size = if *upper { format!("{:X}", chunk.len()) } else { format!("{:x}", chunk.len()) };
                    let extension = if *extension { ";name=value" } else { "" };
                    body.extend_from_slice(format!("{size}{extension}\r\n").as_bytes());
                    body.extend_from_slice(chunk);
                    body.extend_from_slice(b"\r\n");
                }
                body.extend_from_slice(b"0\r\n\r\n");
            }
            Framing::Close => body.extend_from_slice(&self.body),
        }
        let mut wire = format!("HTTP/1.1 {} {}\r\n", self.status, self.reason).into_bytes();
        for (name, value) in &headers {
            wire.extend_from_slice(format!("{name}: {value}\r\n").as_bytes());
        }
        wire.extend_from_slice(b"\r\n");
        wire.extend_from_slice(&body);
        (wire, headers)
    }
}

/// Serves `answer` once, in pieces cut at `cuts`, to whoever connects
/// first, then closes.
async fn serve_once(listener: &tokio::net::TcpListener, answer: Vec<u8>, cuts: Vec<Index>) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let Ok((mut socket, _)) = listener.accept().await else { return };
    // Read the request's head first, so that closing does not reset it.
    let mut request = Vec::new();
    let mut buffer = [0u8; 1024];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
        match socket.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(n) => request.extend_from_slice(&buffer[..n]),
        }
    }
    let mut cuts: Vec<usize> = cuts.iter().map(|c| c.index(answer.len() + 1)).collect();
    cuts.extend([0, answer.len()]);
    cuts.sort_unstable();
    for pair in cuts.windows(2) {
        if socket.write_all(&answer[pair[0]..pair[1]]).await.is_err() {
            return;
        }
        // Let the client read this piece on its own.
        tokio::task::yield_now().await;
    }
    let _ = socket.shutdown().await;
}

/// One request against `answer`: it returns (within the time a request may
/// take, far less here) and gives what it read.
async fn fetch(
    listener: &tokio::net::TcpListener,
    answer: Vec<u8>,
    cuts: Vec<Index>,
) -> Result<std::io::Result<cdp_client::http::HttpResponse>, TestCaseError> {
    let url = format!("http://{}/json/version", listener.local_addr().map_err(fail)?);
    let request = cdp_client::http::request("GET", &url, &[], None);
    let (response, ()) = tokio::time::timeout(Duration::from_secs(10), async {
        tokio::join!(request, serve_once(listener, answer, cuts))
    })
    .await
    .map_err(|_| fail("the HTTP client hung"))?;
    Ok(response)
}

#[test]
fn the_http_client_reads_well_formed_answers_exactly_however_they_arrive() {
    let _shared = shared();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).expect("a loopback port");
    let input = (http_answer(), prop::collection::vec(any::<Index>(), 0..4));
    fuzz(config(4), input, |(answer, cuts)| {
        let (wire, headers) = answer.bytes();
        let response = runtime.block_on(fetch(&listener, wire, cuts))?.map_err(fail)?;
        prop_assert_eq!(response.status, answer.status);
        // Names are case-insensitive (hyper gives them in lower case), and
        // hyper groups a repeated name's values together: the order between
        // names is not kept, the order of one name's values is (a stable
        // sort by name compares exactly that).
        let lower = |headers: Vec<(String, String)>| -> Vec<(String, String)> {
            let mut headers: Vec<(String, String)> =
                headers.into_iter().map(|(name, value)| (name.to_ascii_lowercase(), value)).collect();
            headers.sort_by(|a, b| a.0.cmp(&b.0));
            headers
        };
        prop_assert_eq!(lower(response.headers), lower(headers));
        prop_assert_eq!(response.body, answer.body);
        Ok(())
    });
}

#[test]
fn the_http_client_survives_any_answer_and_never_hangs() {
    let _shared = shared();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).expect("a loopback port");
    let hostile = prop_oneof![
        2 => (http_answer(), edits()).prop_map(|(answer, edits)| mutate_bytes(&answer.bytes().0, &edits)),
        // Lengths and chunk sizes that promise more than is sent.
        1 => ("[0-9]{1,25}|-1|0x10| 5", prop::collection::vec(any::<u8>(), 0..64)).prop_map(|(length, body)| {
            let mut wire = format!("HTTP/1.1 200 OK\r\nContent-Length: {length}\r\n\r\n").into_bytes();
            wire.extend(body);
            wire
        }),
        1 => ("[0-9a-fA-F]{1,20}|-1|\\+5| |;x", prop::collection::vec(any::<u8>(), 0..64)).prop_map(|(size, body)| {
            let mut wire = format!("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n{size}\r\n").into_bytes();
            wire.extend(body);
            wire.extend(b"\r\n0\r\n\r\n");
            wire
        }),
        1 => prop::collection::vec(any::<u8>(), 0..256),
    ];
    fuzz(config(4), (hostile, prop::collection::vec(any::<Index>(), 0..4)), |(wire, cuts)| {
        let sent = wire.len();
        // An error is a fine answer to garbage; a panic or a hang is not.
        if let Ok(response) = runtime.block_on(fetch(&listener, wire, cuts))? {
            prop_assert!(response.body.len() <= sent);
        }
        Ok(())
    });
}

// ---- allocation ------------------------------------------------------------

/// Bytes asked of the allocator while running `parse`: the least of three
/// runs, as libtest's own thread may allocate (to report another test)
/// during one of them, while the parsers allocate the same every time.
fn allocated_by(parse: impl Fn()) -> usize {
    (0..3)
        .map(|_| {
            let region = Region::new(GLOBAL);
            parse();
            let change = region.change();
            change.bytes_allocated + change.bytes_reallocated.max(0).unsigned_abs()
        })
        .min()
        .unwrap_or(0)
}

#[test]
fn pure_parsers_allocate_in_proportion_to_their_input() {
    // Alone: the allocation counters see every thread of this binary.
    let _alone = MEASURING.write().unwrap_or_else(PoisonError::into_inner);
    let guards = Guards::new();
    let frames = prop_oneof![
        2 => (near_frames(), edits()).prop_map(|(frame, edits)| mutate(&frame, &edits)),
        2 => command_frame().prop_map(|frame| frame.text()),
        1 => near_frames(),
        1 => any_text(64),
    ];
    let configs = prop_oneof![
        2 => config_text(),
        2 => (prop::sample::select(config_examples()), edits()).prop_map(|(text, edits)| mutate(&text, &edits)),
        1 => any_text(200),
    ];
    fuzz(config(2), (frames, configs), |(text, toml)| {
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, HeaderValue::from_static("127.0.0.1:18792"));
        let bytes = allocated_by(|| {
            let _ = std::hint::black_box((
                ExtensionMessage::parse(&text),
                RelayMessage::parse(&text),
                layout::reply(&text),
                layout::debugger_event(&text),
                Command::parse(&text),
                guards.relay.check("/json/list", Some(&text), &headers),
            ));
        });
        // Copies of strings, a parsed hello's tabs, error messages: a small
        // multiple of the input, never a size the input merely declares.
        let bound = 16 * text.len() + 16 * 1024;
        prop_assert!(bytes <= bound, "{} bytes allocated for {} bytes of input: {:?}", bytes, text.len(), text);
        // TOML builds a document (with spans) before our types: a larger
        // multiple, still of the input.
        let bytes = allocated_by(|| {
            let _ = std::hint::black_box((
                RelayConfig::parse(&toml, Path::new("/state/config.toml")),
                redacted_url(&toml),
                is_loopback_host(&toml),
            ));
        });
        let bound = 64 * toml.len() + 64 * 1024;
        prop_assert!(bytes <= bound, "{} bytes allocated for {} bytes of config: {:?}", bytes, toml.len(), toml);
        Ok(())
    });
}
