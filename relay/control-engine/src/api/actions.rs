//! The kinds of `POST /act` ([`Action`]): what an agent may ask of a tab's
//! page, each with its fields. Part of the contract; `act/` carries them
//! out.

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The eleven kinds of `POST /act`, by `kind`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Action {
    Click(Click),
    Type(TypeText),
    Press(Press),
    Hover(Hover),
    Drag(Drag),
    Select(SelectOptions),
    Fill(Fill),
    Wait(WaitFor),
    Resize(Resize),
    Close(CloseCurrent),
    Evaluate(Evaluate),
}

/// One kind of action: its fields, and its `kind`.
pub trait ActKind: Into<Action> + Serialize + DeserializeOwned + JsonSchema {
    const KIND: &'static str;
}

macro_rules! kinds {
    ($($kind:literal => $variant:ident($type:ty)),* $(,)?) => {
        $(
            impl From<$type> for Action {
                fn from(kind: $type) -> Self {
                    Self::$variant(kind)
                }
            }
            impl ActKind for $type {
                const KIND: &'static str = $kind;
            }
        )*
        impl Action {
            pub fn kind(&self) -> &'static str {
                match self {
                    $(Self::$variant(_) => $kind,)*
                }
            }
        }
    };
}

kinds! {
    "click" => Click(Click),
    "type" => Type(TypeText),
    "press" => Press(Press),
    "hover" => Hover(Hover),
    "drag" => Drag(Drag),
    "select" => Select(SelectOptions),
    "fill" => Fill(Fill),
    "wait" => Wait(WaitFor),
    "resize" => Resize(Resize),
    "close" => Close(CloseCurrent),
    "evaluate" => Evaluate(Evaluate),
}

/// Click an element, with real mouse events.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Click {
    /// A ref of the tab's last snapshot, e.g. e7.
    #[serde(rename = "ref")]
    pub element: String,
    /// A double click.
    #[serde(default)]
    pub double_click: bool,
    #[serde(default)]
    pub button: MouseButton,
    /// Keys held during the click, e.g. ["Shift"].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub modifiers: Vec<String>,
}

/// Type into a text field (its content is replaced unless `slowly`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TypeText {
    /// A ref of the tab's last snapshot, e.g. e7.
    #[serde(rename = "ref")]
    pub element: String,
    /// What to type.
    pub text: String,
    /// Press Enter after.
    #[serde(default)]
    pub submit: bool,
    /// One key at a time, into what is there.
    #[serde(default)]
    pub slowly: bool,
}

/// Press a key or chord on the focused element.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Press {
    /// A key name or chord: Enter, Tab, PageDown, Control+A, Alt+ArrowLeft, a…
    pub key: String,
}

/// Move the mouse over an element.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Hover {
    /// A ref of the tab's last snapshot, e.g. e7.
    #[serde(rename = "ref")]
    pub element: String,
}

/// Drag one element onto another (pointer drags and HTML5 drag and drop).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Drag {
    /// The element to drag.
    pub start_ref: String,
    /// Where to drop it.
    pub end_ref: String,
}

/// Choose options of a `<select>` by value or label.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SelectOptions {
    /// A ref of the tab's last snapshot, e.g. e7.
    #[serde(rename = "ref")]
    pub element: String,
    /// Option values or labels (several for a multiple select).
    pub values: Vec<String>,
}

/// Fill several fields at once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Fill {
    pub fields: Vec<FillField>,
}

/// One field of `fill`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FillField {
    /// A ref of the tab's last snapshot, e.g. e7.
    #[serde(rename = "ref")]
    pub element: String,
    /// checkbox, radio, select, text… (default: from the element).
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Text, true/false for checkboxes and radios, an option (or several) for selects.
    pub value: Value,
}

/// Resize the tab's viewport.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Resize {
    /// CSS pixels, 100–10000.
    pub width: u32,
    /// CSS pixels, 100–10000.
    pub height: u32,
}

/// Close the tab.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CloseCurrent {}

/// Run JavaScript in the page and return its value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Evaluate {
    /// A function or an expression, e.g. () => document.title.
    #[serde(rename = "fn")]
    pub function: String,
    /// A ref: the function gets that element.
    #[serde(rename = "ref", default, skip_serializing_if = "Option::is_none")]
    pub element: Option<String>,
}

/// Which mouse button a click uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum MouseButton {
    #[default]
    Left,
    Right,
    Middle,
}

/// Wait for one thing: a time, text, a selector, the URL, a load state, or
/// a function to return true.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WaitFor {
    /// A plain pause, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_ms: Option<u64>,
    /// Text to appear.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Text to go.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text_gone: Option<String>,
    /// A CSS selector to become visible.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
    /// The URL to match (a substring, or a glob with *).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// domcontentloaded, load or networkidle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_state: Option<String>,
    /// A JavaScript function or expression that returns true.
    #[serde(rename = "fn", default, skip_serializing_if = "Option::is_none")]
    pub function: Option<String>,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::api::clamp_act_timeout;

    #[test]
    fn act_bodies_parse_and_unknown_fields_are_named() {
        let click: Action = serde_json::from_value(json!({"kind": "click", "ref": "e3", "doubleClick": true})).unwrap();
        assert!(matches!(click, Action::Click(Click { double_click: true, .. })));
        let fill: Action = serde_json::from_value(
            json!({"kind": "fill", "fields": [{"ref": "e1", "value": "x"}, {"ref": "e2", "type": "checkbox", "value": true}]}),
        )
        .unwrap();
        assert!(matches!(fill, Action::Fill(Fill { ref fields }) if fields.len() == 2));
        let error = serde_json::from_value::<Action>(json!({"kind": "click", "reff": "e3"})).unwrap_err().to_string();
        assert!(error.contains("reff"), "{error}");
        let wait: Action = serde_json::from_value(json!({"kind": "wait", "text": "Done"})).unwrap();
        assert!(matches!(wait, Action::Wait(WaitFor { text: Some(_), .. })));
        let error = serde_json::from_value::<Action>(json!({"kind": "wait", "txt": "Done"})).unwrap_err().to_string();
        assert!(error.contains("txt"), "{error}");
        let error = serde_json::from_value::<Action>(json!({"kind": "teleport"})).unwrap_err().to_string();
        assert!(error.contains("teleport") && error.contains("click"), "{error}");
    }

    #[test]
    fn every_kind_names_itself() {
        let kinds = [
            Action::from(Click::default()).kind(),
            Action::from(Press { key: "a".into() }).kind(),
            Action::from(CloseCurrent {}).kind(),
        ];
        assert_eq!(kinds, ["click", "press", "close"]);
        assert_eq!(<TypeText as ActKind>::KIND, "type");
        let typed = serde_json::to_value(Action::from(TypeText {
            element: "e1".into(),
            text: "x".into(),
            ..TypeText::default()
        }))
        .unwrap();
        assert_eq!(typed["kind"], "type");
    }

    #[test]
    fn timeouts_are_clamped_to_half_a_second_and_a_minute() {
        assert_eq!(clamp_act_timeout(None), std::time::Duration::from_secs(8));
        assert_eq!(clamp_act_timeout(Some(1)), std::time::Duration::from_millis(500));
        assert_eq!(clamp_act_timeout(Some(600_000)), std::time::Duration::from_secs(60));
    }
}
