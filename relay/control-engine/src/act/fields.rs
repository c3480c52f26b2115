//! Form fields: typing into them (`type`, `fill`), choosing options
//! (`select`), checking boxes, and the element handles file inputs need.

use cdp_client::protocol::input;
use serde_json::{Value, json};

use super::input::{click_at, press};
use super::ready::{Budget, CLICKABLE, EDITABLE, Target};
use crate::api::{FillField, MouseButton};
use crate::engine::Engine;
use crate::error::ControlError;
use crate::in_page;
use crate::in_page::answer::{Checked, Done, Focused};
use crate::keys;
use crate::tabs::PageTarget;

/// Inputs a user sets with a picker rather than by typing.
const PICKER_TYPES: [&str; 7] = ["date", "time", "datetime-local", "month", "week", "color", "range"];
/// `input` types that take no typed text.
const NOT_TEXT_TYPES: [&str; 8] = ["checkbox", "radio", "file", "button", "submit", "reset", "image", "hidden"];

impl Engine {
    /// Replaces an editable element's content with `text`, as typing would
    /// (`Input.insertText` fires the page's input events); pickers (date,
    /// colour, range) get their value set with input and change events.
    ///
    /// `focus`: what [`Self::ready`] reported (else it focuses the element
    /// now). Each insertion is awaited before anything else happens: Input
    /// (browser side) and Runtime (renderer side) commands are not ordered
    /// with each other, and the next field's focus must not overtake it.
    pub(super) async fn replace_text(
        &self,
        page: &PageTarget,
        target: &Target,
        text: &str,
        focus: Option<Focused>,
    ) -> Result<(), ControlError> {
        let focus = match focus {
            Some(focus) => focus,
            None => in_page::call_script(&page.conn, &target.frame, "focusForTyping", target.arg()).await?,
        };
        check_script_error(focus.error.as_deref(), &target.name)?;
        let kind = focus.kind.as_deref().unwrap_or("other");
        let input_type = focus.input_type.as_deref().unwrap_or_default();
        if kind == "input" && PICKER_TYPES.contains(&input_type) {
            let mut arg = target.arg();
            arg["value"] = json!(text);
            let set: Done = in_page::call_script(&page.conn, &target.frame, "setValue", arg).await?;
            return check_script_error(set.error.as_deref(), &target.name);
        }
        if kind == "other" || (kind == "input" && NOT_TEXT_TYPES.contains(&input_type)) {
            return Err(ControlError::Action(format!(
                "{} ({}) is not a text field: use click, select or press",
                target.name, target.entry.role
            )));
        }
        if text.is_empty() {
            press(page, &keys::parse_chord("Delete")?).await
        } else {
            page.cdp(&input::InsertText { text: text.to_string() }).await.map(drop)
        }
    }

    pub(super) async fn select(
        &self,
        page: &PageTarget,
        target: &Target,
        values: &[String],
    ) -> Result<(), ControlError> {
        let mut arg = target.arg();
        arg["values"] = json!(values);
        let selected: Done = in_page::call_script(&page.conn, &target.frame, "selectOptions", arg).await?;
        if let (Some(error), Some(options)) = (&selected.error, &selected.options) {
            return Err(ControlError::Action(format!("{}: {error}; options: {}", target.name, options.join(", "))));
        }
        check_script_error(selected.error.as_deref(), &target.name)
    }

    pub(super) async fn fill_field(
        &self,
        page: &PageTarget,
        field: &FillField,
        deadline: Budget,
    ) -> Result<(), ControlError> {
        let target = self.ref_target(page, &field.element).await?;
        let kind = field.kind.as_deref().unwrap_or(match target.entry.role.as_str() {
            "checkbox" | "radio" | "switch" | "menuitemcheckbox" | "menuitemradio" => "checkbox",
            "combobox" | "listbox" => "select",
            _ => "text",
        });
        match kind {
            "checkbox" | "radio" | "switch" => {
                let wanted = truthy(&field.value);
                let state: Checked =
                    in_page::call_script(&page.conn, &target.frame, "checkedState", target.arg()).await?;
                check_script_error(state.error.as_deref(), &target.name)?;
                if state.checked != Some(wanted) {
                    if !wanted && kind == "radio" {
                        return Err(ControlError::Action(format!(
                            "{} is a radio button: check another one of its group instead",
                            target.name
                        )));
                    }
                    let point = self.ready_box(page, &target, CLICKABLE, deadline).await?.center();
                    click_at(page, point, MouseButton::Left, 1, 0).await?;
                }
                Ok(())
            }
            "select" => {
                let values: Vec<String> = match &field.value {
                    Value::Array(items) => items.iter().map(text_of).collect(),
                    value => vec![text_of(value)],
                };
                self.ready_box(page, &target, EDITABLE, deadline).await?;
                match self.select(page, &target, &values).await {
                    // A combobox that is a text input with suggestions.
                    Err(ControlError::Action(message)) if message.ends_with("not a <select>") => {
                        self.replace_text(page, &target, &values.join(","), None).await
                    }
                    other => other,
                }
            }
            _ => {
                let (_, focus) = self.ready(page, &target, EDITABLE, deadline, true).await?;
                self.replace_text(page, &target, &text_of(&field.value), focus).await
            }
        }
    }
}

/// The `objectId` of a ref's element, in its frame's isolated world.
pub(crate) async fn element_object(page: &PageTarget, target: &Target) -> Result<String, ControlError> {
    let stale = || ControlError::StaleRef(target.name.clone());
    let handle =
        in_page::script_object(&page.conn, &target.frame, "element", target.arg()).await.map_err(|_| stale())?;
    handle.object_id.ok_or_else(stale)
}

/// The page script's `error`, in terms of the ref.
fn check_script_error(error: Option<&str>, element: &str) -> Result<(), ControlError> {
    match error {
        None => Ok(()),
        Some("unknown") => Err(ControlError::UnknownRef(element.to_string())),
        Some("stale") => Err(ControlError::StaleRef(element.to_string())),
        Some(error) => Err(ControlError::Action(format!("{element}: {error}"))),
    }
}

fn truthy(value: &Value) -> bool {
    match value {
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|n| n != 0.0),
        Value::String(s) => matches!(s.to_ascii_lowercase().as_str(), "true" | "on" | "yes" | "checked" | "1"),
        _ => false,
    }
}

fn text_of(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_for_checkboxes_and_fields() {
        assert!(truthy(&json!(true)) && truthy(&json!("on")) && truthy(&json!(1)));
        assert!(!truthy(&json!(false)) && !truthy(&json!("off")) && !truthy(&json!(null)));
        assert_eq!(text_of(&json!(42)), "42");
        assert_eq!(text_of(&json!("a")), "a");
    }
}
