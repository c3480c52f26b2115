//! CDP framing for the client side: parse a command without copying its
//! params, and build responses and events by splicing raw JSON (payloads the
//! relay only passes through are never re-serialised).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt::{Display, Write as _};

use serde::Deserialize;
use serde_json::value::RawValue;

/// Chrome's error codes, so clients see what they would see from Chrome.
pub mod code {
    pub const PARSE_ERROR: i64 = -32700;
    pub const INVALID_REQUEST: i64 = -32600;
    pub const METHOD_NOT_FOUND: i64 = -32601;
    pub const INVALID_PARAMS: i64 = -32602;
    pub const SERVER_ERROR: i64 = -32000;
    /// Chrome's "Session with given id not found."
    pub const SESSION_NOT_FOUND: i64 = -32001;
}

/// One command from a CDP client.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Command<'a> {
    pub id: i64,
    #[serde(borrow)]
    pub method: Cow<'a, str>,
    #[serde(borrow, default)]
    pub session_id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub params: Option<&'a RawValue>,
}

/// Why a frame is not a command, with what Chrome would answer.
#[derive(Debug, PartialEq, Eq)]
pub struct BadCommand {
    /// The id to answer, when one could be read.
    pub id: Option<i64>,
    pub code: i64,
    pub message: String,
}

impl<'a> Command<'a> {
    pub fn parse(text: &'a str) -> Result<Self, BadCommand> {
        match serde_json::from_str(text) {
            // serde also reads a struct from an array (`[7,"A.b"]`); Chrome
            // takes objects only. Valid JSON starts with its first byte or
            // JSON whitespace.
            Ok(command) if text.trim_start_matches([' ', '\t', '\n', '\r']).starts_with('{') => Ok(command),
            Ok(_) => Err(Self::explain(text, "not an object")),
            Err(e) => Err(Self::explain(text, e)),
        }
    }

    /// What Chrome answers a frame that is not a command: a parse error for
    /// text that is not JSON, else an invalid request, with the id whenever
    /// the frame is an object with an integer one (so the client can match
    /// the error to its request).
    fn explain(text: &str, error: impl Display) -> BadCommand {
        // The members as raw text: any depth (no recursion), and a repeated
        // key keeps its last value, as JSON parsers do.
        let Ok(members) = serde_json::from_str::<BTreeMap<String, &RawValue>>(text) else {
            return if serde_json::from_str::<&RawValue>(text).is_ok() {
                BadCommand { id: None, code: code::INVALID_REQUEST, message: "Message must be an object".into() }
            } else {
                BadCommand { id: None, code: code::PARSE_ERROR, message: format!("Message is not valid JSON: {error}") }
            };
        };
        match members.get("id").and_then(|id| serde_json::from_str::<i64>(id.get()).ok()) {
            Some(id) => {
                BadCommand { id: Some(id), code: code::INVALID_REQUEST, message: format!("Invalid command: {error}") }
            }
            None => BadCommand {
                id: None,
                code: code::INVALID_REQUEST,
                message: "Message must have integer 'id' property".into(),
            },
        }
    }

    /// Parses `params` into `T`; absent params parse as `{}`.
    pub fn params<T: Deserialize<'a>>(&self) -> Result<T, String> {
        let raw = self.params.map_or("{}", RawValue::get);
        serde_json::from_str(raw).map_err(|e| format!("Invalid parameters for {}: {e}", self.method))
    }
}

fn push_json_str(out: &mut String, s: &str) {
    // serde_json escapes exactly as JSON requires; session ids and method
    // names are short, so this is not on the payload path.
    out.push_str(&serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into()));
}

fn push_session(out: &mut String, session: Option<&str>) {
    if let Some(session) = session {
        out.push_str(",\"sessionId\":");
        push_json_str(out, session);
    }
}

/// `{"id":…,"result":<raw>,"sessionId":…}`
pub fn response(id: i64, result: &str, session: Option<&str>) -> String {
    let mut out = String::with_capacity(result.len() + 80);
    let _ = write!(out, "{{\"id\":{id},\"result\":");
    out.push_str(result);
    push_session(&mut out, session);
    out.push('}');
    out
}

/// `{"id":…,"error":{"code":…,"message":…},"sessionId":…}`; without an id
/// (the frame had none) the error is sent bare, as Chrome does.
pub fn error(id: Option<i64>, code: i64, message: &str, session: Option<&str>) -> String {
    let mut out = String::with_capacity(message.len() + 96);
    out.push('{');
    if let Some(id) = id {
        let _ = write!(out, "\"id\":{id},");
    }
    let _ = write!(out, "\"error\":{{\"code\":{code},\"message\":");
    push_json_str(&mut out, message);
    out.push('}');
    push_session(&mut out, session);
    out.push('}');
    out
}

/// `{"method":…,"params":<raw>,"sessionId":…}`
pub fn event(method: &str, params: &str, session: Option<&str>) -> String {
    let mut out = String::with_capacity(params.len() + method.len() + 64);
    out.push_str("{\"method\":");
    push_json_str(&mut out, method);
    out.push_str(",\"params\":");
    out.push_str(params);
    push_session(&mut out, session);
    out.push('}');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn v(s: &str) -> Value {
        serde_json::from_str(s).unwrap()
    }

    #[test]
    fn builds_responses_events_and_errors() {
        assert_eq!(v(&response(3, r#"{"a":1}"#, Some("S"))), json!({"id": 3, "result": {"a": 1}, "sessionId": "S"}));
        assert_eq!(v(&response(3, "{}", None)), json!({"id": 3, "result": {}}));
        assert_eq!(
            v(&event("Page.x", "{}", Some("S\"q"))),
            json!({"method": "Page.x", "params": {}, "sessionId": "S\"q"})
        );
        assert_eq!(
            v(&error(Some(1), code::METHOD_NOT_FOUND, "'X.y' wasn't found", None)),
            json!({"id": 1, "error": {"code": -32601, "message": "'X.y' wasn't found"}})
        );
        assert_eq!(
            v(&error(None, code::PARSE_ERROR, "bad", None)),
            json!({"error": {"code": -32700, "message": "bad"}})
        );
    }

    #[test]
    fn parses_commands_and_explains_bad_ones() {
        let cmd =
            Command::parse(r#"{"id":7,"method":"Runtime.evaluate","sessionId":"AB","params":{"expression":"1"}}"#)
                .unwrap();
        assert_eq!((cmd.id, &*cmd.method, cmd.session_id.as_deref()), (7, "Runtime.evaluate", Some("AB")));
        assert_eq!(cmd.params.unwrap().get(), r#"{"expression":"1"}"#);

        let bad = Command::parse(r#"{"id":9,"params":{}}"#).unwrap_err();
        assert_eq!((bad.id, bad.code), (Some(9), code::INVALID_REQUEST));
        let bad = Command::parse(r#"{"method":"A.b"}"#).unwrap_err();
        assert_eq!((bad.id, bad.message.as_str()), (None, "Message must have integer 'id' property"));
        let bad = Command::parse("{not json").unwrap_err();
        assert_eq!((bad.id, bad.code), (None, code::PARSE_ERROR));
    }

    /// Found by `tests/tests/fuzz.rs`: an array was read as a command, and
    /// JSON whose id is not an integer (or is repeated) was answered as if
    /// it were not JSON at all.
    #[test]
    fn json_that_is_not_a_command_is_an_invalid_request_never_a_parse_error() {
        for (text, id, message) in [
            (r#"[7,"Runtime.evaluate"]"#, None, "Message must be an object"),
            (r#" "Runtime.evaluate""#, None, "Message must be an object"),
            (r#"{"id":"7","method":"A.b"}"#, None, "Message must have integer 'id' property"),
            (r#"{"id":7.5,"method":"A.b"}"#, None, "Message must have integer 'id' property"),
            (r#"{"id":18446744073709551615,"method":"A.b"}"#, None, "Message must have integer 'id' property"),
            (r#"{"id":1,"id":2,"method":"A.b"}"#, Some(2), "Invalid command: duplicate field `id`"),
        ] {
            let bad = Command::parse(text).unwrap_err();
            assert_eq!((bad.code, bad.id), (code::INVALID_REQUEST, id), "{text}");
            assert!(bad.message.starts_with(message), "{text}: {}", bad.message);
        }
        let deep = format!(r#"{{"id":3,"method":5,"params":{}{}}}"#, "[".repeat(5000), "]".repeat(5000));
        assert_eq!(Command::parse(&deep).unwrap_err().id, Some(3), "the id is found at any depth");
    }

    /// Issue 46, item 4: the activity record reads the method this parse
    /// gives; a second `method` or `params` never reaches the extension
    /// beside it, and an escaped key is the key it spells.
    #[test]
    fn a_repeated_member_is_refused_and_an_escaped_one_read_as_it_spells() {
        for text in [
            r#"{"id":1,"method":"DOM.getDocument","method":"Runtime.evaluate","params":{"expression":"steal()"}}"#,
            r#"{"id":1,"method":"Runtime.evaluate","params":{"expression":"1"},"params":{"expression":"steal()"}}"#,
        ] {
            let bad = Command::parse(text).unwrap_err();
            assert_eq!((bad.code, bad.id), (code::INVALID_REQUEST, Some(1)), "{text}");
        }
        let escaped = Command::parse(r#"{"id":1,"\u006dethod":"Runtime.\u0065valuate","\u0070arams":{}}"#).unwrap();
        assert_eq!((escaped.method.as_ref(), escaped.params.map(RawValue::get)), ("Runtime.evaluate", Some("{}")));
    }
}
