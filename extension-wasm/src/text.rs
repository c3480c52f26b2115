//! JavaScript strings into Rust, fast for the large ones.
//!
//! wasm-bindgen's own conversion (`JsValue::as_string`) copies an ASCII
//! string into WASM memory one character at a time in JavaScript; for a
//! 1 MiB CDP answer (a screenshot, a big evaluate) that loop alone took
//! 7.6 ms, against 0.15 ms for one `TextEncoder.encodeInto` into the
//! string's final buffer. Chrome hands the worker such strings on the hot
//! path twice: every `JSON.stringify` of a result or event, and every relay
//! frame's text.

use js_sys::{JsString, Reflect};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;

#[wasm_bindgen]
extern "C" {
    type TextEncoder;
    #[wasm_bindgen(constructor)]
    fn new() -> TextEncoder;
    /// Returns `{read, written}`: UTF-16 units consumed, bytes written.
    #[wasm_bindgen(method, js_name = encodeInto)]
    fn encode_into(this: &TextEncoder, source: &JsString, destination: &mut [u8]) -> JsValue;
}

thread_local! {
    static ENCODER: TextEncoder = TextEncoder::new();
}

/// Below this many UTF-16 units wasm-bindgen's loop is as quick as a call
/// that allocates a buffer and a result object.
const LARGE: u32 = 4096;

/// `value`'s text if it is a string.
pub(crate) fn rust_string(value: &JsValue) -> Option<String> {
    let text: &JsString = value.dyn_ref()?;
    let units = text.length();
    if units < LARGE {
        return text.as_string();
    }
    // One byte per unit is exact for ASCII, the common case (JSON of CDP
    // answers, base64 screenshots); what does not fit is encoded after.
    let mut bytes = vec![0u8; units as usize];
    let (read, written) = encode_into(text, &mut bytes)?;
    bytes.truncate(written);
    if read < units {
        // UTF-8 takes at most 3 bytes per UTF-16 unit.
        let rest = text.slice(read, units);
        let mut more = vec![0u8; (units - read) as usize * 3];
        let (_, written) = encode_into(&rest, &mut more)?;
        bytes.extend_from_slice(&more[..written]);
    }
    // encodeInto writes well-formed UTF-8 (a lone surrogate becomes U+FFFD,
    // as with `as_string`); the check is a pass, not a copy.
    String::from_utf8(bytes).ok()
}

/// `TextEncoder.encodeInto`: (units read, bytes written).
fn encode_into(text: &JsString, into: &mut [u8]) -> Option<(u32, usize)> {
    let outcome = ENCODER.with(|encoder| encoder.encode_into(text, into));
    let field = |name: &str| Reflect::get(&outcome, &name.into()).ok().and_then(|v| v.as_f64());
    Some((field("read")? as u32, (field("written")? as usize).min(into.len())))
}
