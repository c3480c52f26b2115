//! Every name `cdp_client::protocol` puts on the wire or reads from it is
//! Chrome's: each command's and event's method, each field of its
//! parameters and of its result, and the fields of the types nested in
//! them, exist in the vendored `relay/assets/devtools-protocol.json`.
//!
//! The names are taken from the types themselves, as serde sees them
//! (renames included), not from a list copied by hand that could drift:
//! a parameter struct is serialised by a recording serializer (which also
//! sees the fields `skip_serializing_if` leaves out), and a result or an
//! event is deserialised by a recording deserializer (which is handed the
//! struct's field names, and walks into every nested struct). Only the
//! list of types to check is written here ([`checked`]), and
//! [`every_typed_method_is_checked`] fails when `protocol.rs` types a
//! method that list lacks.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::sync::OnceLock;

use cdp_client::protocol::{
    Command, Event, accessibility, browser, dom, emulation, input, log, network, page, runtime, target,
};
use serde::de::value::Error;
use serde::de::{self, DeserializeOwned, IntoDeserializer, Visitor};
use serde::ser::{self, Impossible, Serialize};
use serde_json::{Value, json};

/// Fields the engines use that the vendored protocol does not list, each
/// with why it is kept (empty: every name is Chrome's).
const ABSENT: &[&str] = &[];

#[test]
fn every_typed_name_is_in_the_vendored_protocol() {
    let problems = problems(protocol(), &checked());
    assert_eq!(problems, ABSENT, "names of cdp_client::protocol that devtools-protocol.json lacks");
}

#[test]
fn every_typed_method_is_checked() {
    let source = include_str!("../src/protocol.rs");
    let typed: BTreeSet<&str> = ["command!(", "event!("]
        .iter()
        .flat_map(|macro_call| source.split(macro_call).skip(1))
        .filter_map(|call| call.split('"').nth(1))
        .collect();
    let checked: BTreeSet<&str> = checked().iter().map(|typed| typed.method).collect();
    assert_eq!(typed, checked, "add what protocol.rs types to `checked`");
}

/// The checker reports a planted mistake of every kind: a method, a
/// parameter (one left out when false), a result field, an event field,
/// and the fields of a nested type (found through an array) and of one
/// nested in a field Chrome does not have.
#[test]
fn a_wrong_name_is_reported() {
    macro_rules! planted {
        ($type:ty, $method:literal => $response:ty) => {
            impl Command for $type {
                const METHOD: &'static str = $method;
                type Response = $response;
            }
        };
    }
    #[derive(Default, serde::Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Attach {
        target_id: String,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        flaten: bool,
    }
    planted!(Attach, "Target.attachToTarget" => Attached);
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Attached {
        #[allow(dead_code)]
        session_ident: String,
    }
    #[derive(Default, serde::Serialize)]
    struct Unknown {}
    planted!(Unknown, "Target.attachToTargets" => Attached);
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    #[allow(dead_code)]
    struct Listed {
        target_infos: Vec<String>,
    }
    impl Event for Listed {
        const METHOD: &'static str = "Target.targetCreated";
    }
    #[derive(Default, serde::Serialize)]
    struct GetTargets {}
    planted!(GetTargets, "Target.getTargets" => Targets);
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    #[allow(dead_code)]
    struct Targets {
        target_infos: Vec<Info>,
    }
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    #[allow(dead_code)]
    struct Info {
        target_id: String,
        /// Chrome's `type`, its rename forgotten.
        kind: String,
        opener: Option<Opener>,
    }
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    #[allow(dead_code)]
    struct Opener {
        frame_id: String,
    }
    let planted =
        [command(Attach::default()), command(Unknown::default()), event::<Listed>(), command(GetTargets::default())];
    assert_eq!(
        problems(protocol(), &planted),
        [
            "Target.attachToTarget parameters: no `flaten`",
            "Target.attachToTarget result: no `sessionIdent`",
            "Target.attachToTargets: no such command",
            "Target.targetCreated parameters: no `targetInfos`",
            "Target.getTargets result: targetInfos: no `kind`",
            "Target.getTargets result: targetInfos: no `opener`",
            "Target.getTargets result: targetInfos.opener: `opener` is not in the protocol",
        ]
    );
}

/// Every command and event of `cdp_client::protocol`. A command is given
/// as a sample value: its `Option`s that hold a nested type are `Some`, so
/// that the type's fields are seen too.
fn checked() -> Vec<Typed> {
    use serde_json::Value as V;
    let text = String::new;
    vec![
        command(browser::GetVersion {}),
        command(browser::Close {}),
        command(target::SetDiscoverTargets { discover: true }),
        command(target::GetTargets {}),
        command(target::AttachToTarget { target_id: text(), flatten: true }),
        command(target::SetAutoAttach { auto_attach: true, wait_for_debugger_on_start: true, flatten: true }),
        command(target::CreateTarget { url: text() }),
        command(target::CloseTarget { target_id: text() }),
        command(target::ActivateTarget { target_id: text() }),
        command(target::GetTargetInfo { target_id: None }),
        event::<target::TargetCreated>(),
        event::<target::TargetInfoChanged>(),
        event::<target::TargetDestroyed>(),
        event::<target::AttachedToTarget>(),
        event::<target::DetachedFromTarget>(),
        command(page::Enable {}),
        command(page::SetLifecycleEventsEnabled { enabled: true }),
        command(page::Navigate { url: text() }),
        command(page::GetFrameTree {}),
        command(page::CreateIsolatedWorld { frame_id: text(), world_name: text(), grant_universal_access: true }),
        command(page::GetLayoutMetrics {}),
        command(page::CaptureScreenshot {
            clip: Some(page::Viewport { x: 0.0, y: 0.0, width: 1.0, height: 1.0, scale: 1.0 }),
            ..Default::default()
        }),
        command(page::PrintToPdf::default()),
        command(page::HandleJavaScriptDialog { accept: true, prompt_text: None }),
        command(page::SetInterceptFileChooserDialog { enabled: true }),
        event::<page::LifecycleEvent>(),
        event::<page::FrameNavigated>(),
        event::<page::NavigatedWithinDocument>(),
        command(page::GetNavigationHistory {}),
        command(page::NavigateToHistoryEntry { entry_id: 1 }),
        event::<page::FrameRequestedNavigation>(),
        event::<page::FrameStartedNavigating>(),
        event::<page::FrameStartedLoading>(),
        event::<page::JavascriptDialogOpening>(),
        event::<page::JavascriptDialogClosed>(),
        event::<page::FileChooserOpened>(),
        command(runtime::Enable {}),
        command(runtime::RunIfWaitingForDebugger {}),
        command(runtime::Evaluate::value("1")),
        command(runtime::CallFunctionOn {
            arguments: vec![runtime::CallArgument::Value(V::Null), runtime::CallArgument::ObjectId(text())],
            ..Default::default()
        }),
        command(runtime::ReleaseObject { object_id: text() }),
        event::<runtime::ExecutionContextCreated>(),
        event::<runtime::ExecutionContextDestroyed>(),
        event::<runtime::ExecutionContextsCleared>(),
        event::<runtime::ConsoleApiCalled>(),
        event::<runtime::ExceptionThrown>(),
        command(network::Enable {}),
        event::<network::RequestWillBeSent>(),
        event::<network::ResponseReceived>(),
        event::<network::LoadingFinished>(),
        event::<network::LoadingFailed>(),
        event::<network::RequestServedFromCache>(),
        command(network::GetResponseBody { request_id: text() }),
        command(log::Enable {}),
        event::<log::EntryAdded>(),
        command(dom::DescribeNode::default()),
        command(dom::ResolveNode { backend_node_id: 1 }),
        command(dom::GetBoxModel { backend_node_id: 1 }),
        command(dom::SetFileInputFiles::default()),
        command(input::DispatchMouseEvent::default()),
        command(input::DispatchKeyEvent::default()),
        command(input::InsertText { text: text() }),
        command(input::SetInterceptDrags { enabled: true }),
        command(input::DispatchDragEvent { kind: "drop", x: 0.0, y: 0.0, data: V::Null, modifiers: 0 }),
        event::<input::DragIntercepted>(),
        command(emulation::SetDeviceMetricsOverride { width: 1, height: 1, device_scale_factor: 1.0, mobile: false }),
        command(accessibility::GetFullAxTree::default()),
    ]
}

/// One typed method and the names its types put on the wire.
struct Typed {
    method: &'static str,
    command: bool,
    /// The parameters (sent, for a command; received, for an event).
    parameters: Vec<Traced>,
    /// A command's result.
    result: Vec<Traced>,
}

/// The fields of one struct, and where it is: the field names that lead
/// to it from the parameters or the result (empty: they themselves).
#[derive(Debug, Clone, PartialEq)]
struct Traced {
    path: Vec<&'static str>,
    fields: Vec<&'static str>,
}

fn command<C: Command>(sample: C) -> Typed {
    let found = RefCell::new(Vec::new());
    sample.serialize(Recorder { path: &[], found: &found }).expect("a command serialises");
    Typed { method: C::METHOD, command: true, parameters: found.into_inner(), result: deserialized::<C::Response>() }
}

fn event<E: Event>() -> Typed {
    Typed { method: E::METHOD, command: false, parameters: deserialized::<E>(), result: Vec::new() }
}

fn deserialized<T: DeserializeOwned>() -> Vec<Traced> {
    let found = RefCell::new(Vec::new());
    T::deserialize(Reader { path: Vec::new(), within: Vec::new(), found: &found }).expect("a type is traced");
    found.into_inner()
}

/// The vendored protocol, read once.
fn protocol() -> &'static Value {
    static PROTOCOL: OnceLock<Value> = OnceLock::new();
    PROTOCOL.get_or_init(|| {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../assets/devtools-protocol.json");
        serde_json::from_slice(&std::fs::read(path).expect("the vendored protocol")).expect("its JSON")
    })
}

/// What of `typed` the protocol lacks, one line each.
fn problems(protocol: &Value, typed: &[Typed]) -> Vec<String> {
    let mut problems = Vec::new();
    for typed in typed {
        let (domain, name) = typed.method.split_once('.').unwrap_or(("", typed.method));
        let kind = if typed.command { "commands" } else { "events" };
        let found = domain_of(protocol, domain)
            .and_then(|d| d[kind].as_array())
            .and_then(|methods| methods.iter().find(|m| m["name"] == name));
        let Some(method) = found else {
            problems.push(format!("{}: no such {}", typed.method, kind.trim_end_matches('s')));
            continue;
        };
        for (part, key, traced) in
            [("parameters", "parameters", &typed.parameters), ("result", "returns", &typed.result)]
        {
            for Traced { path, fields } in traced {
                let at = format!("{} {part}", typed.method);
                let at = if path.is_empty() { at } else { format!("{at}: {}", path.join(".")) };
                match properties_at(protocol, domain, &method[key], path) {
                    Ok(properties) => {
                        for field in fields {
                            if !properties.iter().any(|p| p["name"] == *field) {
                                problems.push(format!("{at}: no `{field}`"));
                            }
                        }
                    }
                    // The missing field itself is reported with its parent.
                    Err(why) => problems.push(format!("{at}: {why}")),
                }
            }
        }
    }
    problems
}

fn domain_of<'a>(protocol: &'a Value, domain: &str) -> Option<&'a Value> {
    protocol["domains"].as_array()?.iter().find(|d| d["domain"] == domain)
}

/// The properties of the object that `path` leads to from `properties`
/// (a method's parameters or returns, in `domain`).
fn properties_at<'a>(
    protocol: &'a Value,
    mut domain: &'a str,
    properties: &'a Value,
    path: &[&str],
) -> Result<Vec<&'a Value>, String> {
    let mut properties: &'a [Value] = properties.as_array().map_or(&[], Vec::as_slice);
    for step in path {
        let property =
            properties.iter().find(|p| p["name"] == *step).ok_or_else(|| format!("`{step}` is not in the protocol"))?;
        let reference = property["$ref"].as_str().or(property["items"]["$ref"].as_str());
        let reference = reference.ok_or_else(|| format!("`{step}` is not an object type"))?;
        let (in_domain, id) = reference.split_once('.').unwrap_or((domain, reference));
        let kind = domain_of(protocol, in_domain)
            .and_then(|d| d["types"].as_array())
            .and_then(|types| types.iter().find(|t| t["id"] == id))
            .ok_or_else(|| format!("no type {reference}"))?;
        properties = kind["properties"].as_array().ok_or_else(|| format!("{reference} has no properties"))?;
        domain = in_domain;
    }
    Ok(properties.iter().collect())
}

/// A serializer that records the field names of every struct it is
/// given, at its path, and ignores every value.
#[derive(Clone, Copy)]
struct Recorder<'a> {
    path: &'a [&'static str],
    found: &'a RefCell<Vec<Traced>>,
}

/// One struct (or an enum's variant, `{"variant": value}`) being recorded,
/// or a sequence, whose items are at its path.
struct Recording<'a> {
    path: Vec<&'static str>,
    /// Where its fields go (none: a sequence or a map).
    index: Option<usize>,
    found: &'a RefCell<Vec<Traced>>,
}

impl<'a> Recording<'a> {
    fn field<T: ?Sized + Serialize>(&mut self, key: &'static str, value: Option<&T>) -> Result<(), Error> {
        let index = self.index.expect("a struct");
        self.found.borrow_mut()[index].fields.push(key);
        let Some(value) = value else { return Ok(()) };
        let mut path = self.path.clone();
        path.push(key);
        value.serialize(Recorder { path: &path, found: self.found })
    }
}

impl<'a> Recorder<'a> {
    fn open(self, fields: bool) -> Recording<'a> {
        let index = fields.then(|| {
            let mut found = self.found.borrow_mut();
            found.push(Traced { path: self.path.to_vec(), fields: Vec::new() });
            found.len() - 1
        });
        Recording { path: self.path.to_vec(), index, found: self.found }
    }
}

/// Values carry no names: each is taken and forgotten.
macro_rules! ignore_values {
    ($($method:ident: $type:ty),*) => {
        $(fn $method(self, _: $type) -> Result<(), Error> {
            Ok(())
        })*
    };
}

impl<'a> ser::Serializer for Recorder<'a> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Recording<'a>;
    type SerializeTuple = Impossible<(), Error>;
    type SerializeTupleStruct = Impossible<(), Error>;
    type SerializeTupleVariant = Impossible<(), Error>;
    type SerializeMap = Impossible<(), Error>;
    type SerializeStruct = Recording<'a>;
    type SerializeStructVariant = Impossible<(), Error>;

    ignore_values!(
        serialize_bool: bool,
        serialize_i8: i8,
        serialize_i16: i16,
        serialize_i32: i32,
        serialize_i64: i64,
        serialize_u8: u8,
        serialize_u16: u16,
        serialize_u32: u32,
        serialize_u64: u64,
        serialize_f32: f32,
        serialize_f64: f64,
        serialize_char: char,
        serialize_str: &str,
        serialize_bytes: &[u8]
    );
    fn serialize_none(self) -> Result<(), Error> {
        Ok(())
    }
    fn serialize_some<T: ?Sized + Serialize>(self, value: &T) -> Result<(), Error> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), Error> {
        Ok(())
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<(), Error> {
        Ok(())
    }
    fn serialize_unit_variant(self, _: &'static str, _: u32, _: &'static str) -> Result<(), Error> {
        Ok(())
    }
    fn serialize_newtype_struct<T: ?Sized + Serialize>(self, _: &'static str, value: &T) -> Result<(), Error> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: ?Sized + Serialize>(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        self.open(true).field(variant, Some(value))
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Recording<'a>, Error> {
        Ok(self.open(false))
    }
    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, Error> {
        Err(ser::Error::custom("a tuple is not a CDP object"))
    }
    fn serialize_tuple_struct(self, name: &'static str, _: usize) -> Result<Self::SerializeTupleStruct, Error> {
        Err(ser::Error::custom(format!("{name}: a tuple struct is not a CDP object")))
    }
    fn serialize_tuple_variant(
        self,
        name: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, Error> {
        Err(ser::Error::custom(format!("{name}: a tuple variant is not a CDP object")))
    }
    /// A map is untyped JSON (a `Value` passed on), with no names to
    /// check: a sample holds `Value::Null` there.
    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, Error> {
        Err(ser::Error::custom("a sample's untyped JSON is to be null"))
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Recording<'a>, Error> {
        Ok(self.open(true))
    }
    fn serialize_struct_variant(
        self,
        name: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, Error> {
        Err(ser::Error::custom(format!("{name}: a struct variant is not a CDP object")))
    }
}

impl ser::SerializeStruct for Recording<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: ?Sized + Serialize>(&mut self, key: &'static str, value: &T) -> Result<(), Error> {
        self.field(key, Some(value))
    }
    /// A field `skip_serializing_if` leaves out is a name all the same.
    fn skip_field(&mut self, key: &'static str) -> Result<(), Error> {
        self.field::<()>(key, None)
    }
    fn end(self) -> Result<(), Error> {
        Ok(())
    }
}

impl ser::SerializeSeq for Recording<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_element<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), Error> {
        value.serialize(Recorder { path: &self.path, found: self.found })
    }
    fn end(self) -> Result<(), Error> {
        Ok(())
    }
}

/// A deserializer that records the field names of every struct asked of
/// it, at its path, and answers every field with an empty value: a
/// sequence with one item, an option with a value, so that the nested
/// types are reached. A type found inside itself (a frame tree's children)
/// is an empty sequence there.
struct Reader<'a> {
    path: Vec<&'static str>,
    /// The structs being read, outermost first.
    within: Vec<&'static str>,
    found: &'a RefCell<Vec<Traced>>,
}

const RECURSIVE: &str = "a type inside itself";

impl<'a> Reader<'a> {
    fn deeper(&self, key: Option<&'static str>, within: Option<&'static str>) -> Reader<'a> {
        let mut reader = Reader { path: self.path.clone(), within: self.within.clone(), found: self.found };
        reader.path.extend(key);
        reader.within.extend(within);
        reader
    }
}

/// A primitive is answered with an empty value of its type.
macro_rules! answer_empty {
    ($($method:ident: $visit:ident($empty:expr)),*) => {
        $(fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
            visitor.$visit($empty)
        })*
    };
}

impl<'de> de::Deserializer<'de> for Reader<'_> {
    type Error = Error;

    /// Untyped JSON (`Value`): nothing to check.
    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }
    answer_empty!(
        deserialize_bool: visit_bool(false),
        deserialize_i8: visit_i64(0),
        deserialize_i16: visit_i64(0),
        deserialize_i32: visit_i64(0),
        deserialize_i64: visit_i64(0),
        deserialize_u8: visit_u64(0),
        deserialize_u16: visit_u64(0),
        deserialize_u32: visit_u64(0),
        deserialize_u64: visit_u64(0),
        deserialize_f32: visit_f64(0.0),
        deserialize_f64: visit_f64(0.0),
        deserialize_char: visit_char(' '),
        deserialize_str: visit_str(""),
        deserialize_string: visit_str(""),
        deserialize_bytes: visit_bytes(&[]),
        deserialize_byte_buf: visit_bytes(&[])
    );
    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_some(self)
    }
    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }
    fn deserialize_unit_struct<V: Visitor<'de>>(self, _: &'static str, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }
    fn deserialize_newtype_struct<V: Visitor<'de>>(self, _: &'static str, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }
    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_seq(OneItem(Some(self)))
    }
    fn deserialize_tuple<V: Visitor<'de>>(self, _: usize, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_seq(OneItem(Some(self)))
    }
    fn deserialize_tuple_struct<V: Visitor<'de>>(self, name: &'static str, _: usize, _: V) -> Result<V::Value, Error> {
        Err(de::Error::custom(format!("{name}: a tuple struct is not a CDP object")))
    }
    /// A map is untyped JSON: nothing to check.
    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_map(Fields { reader: self, fields: [].iter() })
    }
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        if self.within.contains(&name) {
            return Err(de::Error::custom(RECURSIVE));
        }
        self.found.borrow_mut().push(Traced { path: self.path.clone(), fields: fields.to_vec() });
        let reader = self.deeper(None, Some(name));
        visitor.visit_map(Fields { reader, fields: fields.iter() })
    }
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        _: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Error> {
        Err(de::Error::custom(format!("{name}: an enum is not traced")))
    }
    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_str("")
    }
    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }
}

/// A sequence of one item, or of none when the item is a type inside
/// itself.
struct OneItem<'a>(Option<Reader<'a>>);

impl<'de> de::SeqAccess<'de> for OneItem<'_> {
    type Error = Error;
    fn next_element_seed<T: de::DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>, Error> {
        let Some(reader) = self.0.take() else { return Ok(None) };
        match seed.deserialize(reader) {
            Ok(item) => Ok(Some(item)),
            Err(error) if error.to_string() == RECURSIVE => Ok(None),
            Err(error) => Err(error),
        }
    }
}

/// A struct's fields, each with an empty value.
struct Fields<'a> {
    reader: Reader<'a>,
    fields: std::slice::Iter<'static, &'static str>,
}

impl<'de> de::MapAccess<'de> for Fields<'_> {
    type Error = Error;
    fn next_key_seed<K: de::DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, Error> {
        let Some(field) = self.fields.as_slice().first() else { return Ok(None) };
        seed.deserialize((*field).into_deserializer()).map(Some)
    }
    fn next_value_seed<V: de::DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        let field = self.fields.next().expect("a key first");
        seed.deserialize(self.reader.deeper(Some(*field), None))
    }
}

#[test]
fn the_recorders_see_nested_and_skipped_fields() {
    let call =
        runtime::CallFunctionOn { arguments: vec![runtime::CallArgument::Value(json!("op"))], ..Default::default() };
    let traced = command(call).parameters;
    assert!(traced[0].fields.contains(&"objectId"), "a skipped field is seen: {:?}", traced[0]);
    assert_eq!(traced[1], Traced { path: vec!["arguments"], fields: vec!["value"] });
    let tree = deserialized::<page::FrameTreeResult>();
    let paths: Vec<String> = tree.iter().map(|t| t.path.join(".")).collect();
    assert_eq!(paths, ["", "frameTree", "frameTree.frame"], "{tree:?}");
}
