//! Keys for `press` and typing: a key name or chord (`Enter`, `Control+A`,
//! `Alt+ArrowLeft`, `Shift+Tab`, `a`) to the fields of CDP's
//! `Input.dispatchKeyEvent`.

use crate::error::ControlError;

/// CDP modifier bits.
pub(crate) const ALT: i64 = 1;
pub(crate) const CONTROL: i64 = 2;
pub(crate) const META: i64 = 4;
pub(crate) const SHIFT: i64 = 8;

/// One key as CDP wants it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Key {
    /// `key` (e.g. `Enter`, `a`, `A`).
    pub key: String,
    /// `code` (e.g. `Enter`, `KeyA`).
    pub code: String,
    /// `windowsVirtualKeyCode`.
    pub key_code: i64,
    /// The text the key types, if any (none with Control, Alt or Meta held).
    pub text: Option<String>,
    /// Its own modifier bit, for modifier keys.
    pub modifier: i64,
}

/// A chord: modifiers held, then one key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Chord {
    pub modifiers: Vec<Key>,
    pub key: Key,
}

impl Chord {
    /// The modifier bits held while the key is pressed.
    #[cfg(test)]
    fn modifier_bits(&self) -> i64 {
        self.modifiers.iter().map(|m| m.modifier).fold(0, |a, b| a | b)
    }
}

/// Parses `Control+Shift+K`, `Meta+a`, `PageDown`, `+` (the plus key).
pub(crate) fn parse_chord(input: &str) -> Result<Chord, ControlError> {
    let bad = |why: &str| ControlError::BadRequest(format!("key '{input}': {why}"));
    if input.is_empty() {
        return Err(bad("empty"));
    }
    // The last part is the key; "+" alone (or a trailing "++") is the plus key.
    let (mods, last) = match input.strip_suffix("++") {
        Some(rest) => (rest, "+"),
        None if input == "+" => ("", "+"),
        None => match input.rsplit_once('+') {
            Some((mods, last)) => (mods, last),
            None => ("", input),
        },
    };
    let mut modifiers = Vec::new();
    for name in mods.split('+').filter(|m| !m.is_empty()) {
        let key = key(name).filter(|k| k.modifier != 0).ok_or_else(|| {
            bad(&format!("'{name}' is not a modifier (use Control, Shift, Alt or Meta; ControlOrMeta is Control here)"))
        })?;
        modifiers.push(key);
    }
    let mut key = key(last).ok_or_else(|| bad(&format!("unknown key '{last}'")))?;
    let shift = modifiers.iter().any(|m| m.modifier == SHIFT);
    if shift && key.key.chars().count() == 1 {
        let upper = key.key.to_uppercase();
        key.key.clone_from(&upper);
        key.text = Some(upper);
    }
    if modifiers.iter().any(|m| m.modifier & (CONTROL | ALT | META) != 0) {
        key.text = None;
    }
    Ok(Chord { modifiers, key })
}

/// A single key by its name (as in `KeyboardEvent.key`), or one character.
pub(crate) fn key(name: &str) -> Option<Key> {
    let named = |key: &str, code: &str, key_code: i64, text: Option<&str>, modifier: i64| Key {
        key: key.to_string(),
        code: code.to_string(),
        key_code,
        text: text.map(str::to_string),
        modifier,
    };
    Some(match name {
        "Enter" | "Return" => named("Enter", "Enter", 13, Some("\r"), 0),
        "Tab" => named("Tab", "Tab", 9, None, 0),
        "Escape" | "Esc" => named("Escape", "Escape", 27, None, 0),
        "Backspace" => named("Backspace", "Backspace", 8, None, 0),
        "Delete" => named("Delete", "Delete", 46, None, 0),
        "Insert" => named("Insert", "Insert", 45, None, 0),
        " " | "Space" => named(" ", "Space", 32, Some(" "), 0),
        "ArrowUp" => named("ArrowUp", "ArrowUp", 38, None, 0),
        "ArrowDown" => named("ArrowDown", "ArrowDown", 40, None, 0),
        "ArrowLeft" => named("ArrowLeft", "ArrowLeft", 37, None, 0),
        "ArrowRight" => named("ArrowRight", "ArrowRight", 39, None, 0),
        "Home" => named("Home", "Home", 36, None, 0),
        "End" => named("End", "End", 35, None, 0),
        "PageUp" => named("PageUp", "PageUp", 33, None, 0),
        "PageDown" => named("PageDown", "PageDown", 34, None, 0),
        "Shift" => named("Shift", "ShiftLeft", 16, None, SHIFT),
        "Control" | "Ctrl" | "ControlOrMeta" => named("Control", "ControlLeft", 17, None, CONTROL),
        "Alt" => named("Alt", "AltLeft", 18, None, ALT),
        "Meta" | "Command" | "Cmd" => named("Meta", "MetaLeft", 91, None, META),
        _ => {
            if let Some(n) = name.strip_prefix('F').and_then(|n| n.parse::<i64>().ok()).filter(|n| (1..=12).contains(n))
            {
                return Some(named(name, name, 111 + n, None, 0));
            }
            let mut chars = name.chars();
            let (Some(c), None) = (chars.next(), chars.next()) else { return None };
            return Some(char_key(c));
        }
    })
}

/// A printable character: its key, code and key code on a US layout.
pub(crate) fn char_key(c: char) -> Key {
    let (code, key_code) = if c.is_ascii_alphabetic() {
        (format!("Key{}", c.to_ascii_uppercase()), i64::from(c.to_ascii_uppercase() as u8))
    } else if c.is_ascii_digit() {
        (format!("Digit{c}"), i64::from(c as u8))
    } else {
        let (code, key_code) = match c {
            '-' | '_' => ("Minus", 189),
            '=' | '+' => ("Equal", 187),
            '[' | '{' => ("BracketLeft", 219),
            ']' | '}' => ("BracketRight", 221),
            ';' | ':' => ("Semicolon", 186),
            '\'' | '"' => ("Quote", 222),
            ',' | '<' => ("Comma", 188),
            '.' | '>' => ("Period", 190),
            '/' | '?' => ("Slash", 191),
            '\\' | '|' => ("Backslash", 220),
            '`' | '~' => ("Backquote", 192),
            ' ' => ("Space", 32),
            _ => ("", 0),
        };
        (code.to_string(), key_code)
    };
    Key { key: c.to_string(), code, key_code, text: Some(c.to_string()), modifier: 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chords_parse_into_modifiers_and_a_key() {
        let select_all = parse_chord("Control+A").unwrap();
        assert_eq!(select_all.modifier_bits(), CONTROL);
        assert_eq!((select_all.key.code.as_str(), select_all.key.key_code), ("KeyA", 65));
        assert_eq!(select_all.key.text, None, "no text with Control held");

        let back = parse_chord("Alt+ArrowLeft").unwrap();
        assert_eq!((back.modifier_bits(), back.key.key.as_str()), (ALT, "ArrowLeft"));

        let enter = parse_chord("Enter").unwrap();
        assert_eq!((enter.modifier_bits(), enter.key.text.as_deref()), (0, Some("\r")));

        let shifted = parse_chord("Shift+a").unwrap();
        assert_eq!((shifted.key.key.as_str(), shifted.key.text.as_deref()), ("A", Some("A")));

        let plus = parse_chord("Control++").unwrap();
        assert_eq!((plus.modifier_bits(), plus.key.key.as_str()), (CONTROL, "+"));
        assert_eq!(parse_chord("+").unwrap().key.key, "+");
        assert_eq!(parse_chord("F5").unwrap().key.key_code, 116);
        assert_eq!(parse_chord("PageDown").unwrap().key.key_code, 34);
    }

    #[test]
    fn unknown_keys_are_named_in_the_error() {
        let error = parse_chord("Control+Banana").unwrap_err().to_string();
        assert!(error.contains("unknown key 'Banana'"), "{error}");
        let error = parse_chord("Enter+a").unwrap_err().to_string();
        assert!(error.contains("'Enter' is not a modifier"), "{error}");
        assert!(parse_chord("").is_err());
    }
}
