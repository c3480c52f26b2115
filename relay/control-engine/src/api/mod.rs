//! The control API's contract, defined once: one request type per route
//! (its fields, its method and path, what it answers) and the answers.
//!
//! The HTTP router, the engine ([`Handle`]), the typed client, the CLI and
//! the MCP server all use these types: adding a field to a route means
//! adding it here and to the code that reads it. JSON Schemas (MCP tool
//! inputs, query-string typing) are derived from the same types.

use std::borrow::Cow;
use std::fmt::Debug;
use std::future::Future;
use std::path::PathBuf;

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::error::ControlError;

mod actions;
pub use actions::{
    ActKind, Action, Click, CloseCurrent, Drag, Evaluate, Fill, FillField, Hover, MouseButton, Press, Resize,
    SelectOptions, TypeText, WaitFor,
};
use settings::{Driver, Profile};

/// How a route is called over HTTP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Get,
    Post,
    Delete,
}

/// Which of the selector's fields a route takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Neither (`GET /profiles`).
    None,
    /// `profile` only: the route is about a profile's browser.
    Profile,
    /// `profile` and `targetId` (default: the profile's current tab).
    Tab,
    /// `profile` and a required `targetId`.
    RequiredTab,
}

/// One route of the control API: a request type knows where it goes and
/// what comes back.
pub trait Route: Serialize + DeserializeOwned + JsonSchema + Debug + Send + Sync + 'static {
    const METHOD: Method;
    /// In axum's syntax; `{targetId}` is the selector's tab.
    const PATH: &'static str;
    const SCOPE: Scope;
    type Answer: Serialize + DeserializeOwned + Debug + Send + 'static;

    /// How long a client waits for this request's answer, when the answer
    /// may take longer than a request's usual minute (a handoff waits for
    /// the person).
    fn patience(&self) -> Option<std::time::Duration> {
        None
    }
}

/// Which profile and tab a request is about. Both default: the profile to
/// config.toml's `defaultProfile` (`auto`: the shared tabs, else the
/// managed Chrome), the tab to the profile's current one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TabSelector {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_id: Option<String>,
}

impl TabSelector {
    pub fn profile(&self) -> Option<&str> {
        self.profile.as_deref()
    }

    pub fn target_id(&self) -> Option<&str> {
        self.target_id.as_deref()
    }
}

/// A request as sent: the selector's fields beside the route's own, in one
/// JSON object (`{"profile": …, "targetId": …, "url": …}`).
///
/// Deserializing is strict: an unknown field, or a selector field the route
/// does not take, is an error that names it.
#[derive(Debug, Clone, PartialEq)]
pub struct Selected<R> {
    pub tab: TabSelector,
    pub request: R,
}

impl<R> Selected<R> {
    pub fn new(tab: TabSelector, request: R) -> Self {
        Self { tab, request }
    }

    /// The request for the default profile and tab.
    pub fn default_tab(request: R) -> Self {
        Self { tab: TabSelector::default(), request }
    }
}

impl<R: Route> Selected<R> {
    /// From a JSON object, with serde's precise message (and the field's
    /// path) for mistakes.
    pub fn from_json(value: Value) -> Result<Self, ControlError> {
        serde_json::from_value(value).map_err(|e| ControlError::BadRequest(e.to_string()))
    }

    /// The whole request as one JSON object.
    pub fn to_json(&self) -> Map<String, Value> {
        match serde_json::to_value(self) {
            Ok(Value::Object(map)) => map,
            _ => Map::new(),
        }
    }
}

impl<R: Route> Serialize for Selected<R> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = match serde_json::to_value(&self.request).map_err(serde::ser::Error::custom)? {
            Value::Object(map) => map,
            Value::Null => Map::new(),
            _ => return Err(serde::ser::Error::custom("a request serialises to an object")),
        };
        if let Some(profile) = &self.tab.profile {
            map.insert("profile".into(), Value::String(profile.clone()));
        }
        if let Some(target) = &self.tab.target_id {
            map.insert("targetId".into(), Value::String(target.clone()));
        }
        map.serialize(serializer)
    }
}

impl<'de, R: Route> Deserialize<'de> for Selected<R> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let Value::Object(mut fields) = Value::deserialize(deserializer)? else {
            return Err(D::Error::custom("the body must be a JSON object"));
        };
        let mut text = |key: &str| match fields.remove(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(D::Error::custom(format!("{key} must be a string"))),
        };
        let profile = if R::SCOPE == Scope::None { None } else { text("profile")? };
        let target_id = if matches!(R::SCOPE, Scope::Tab | Scope::RequiredTab) { text("targetId")? } else { None };
        if R::SCOPE == Scope::RequiredTab && target_id.is_none() {
            return Err(D::Error::missing_field("targetId"));
        }
        let request = serde_path_to_error::deserialize(Value::Object(fields)).map_err(|e| {
            let path = e.path().to_string();
            let inner = e.into_inner();
            D::Error::custom(if path == "." { inner.to_string() } else { format!("{path}: {inner}") })
        })?;
        Ok(Self { tab: TabSelector { profile, target_id }, request })
    }
}

impl<R: Route> JsonSchema for Selected<R> {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        format!("Selected_{}", R::schema_name()).into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let mut schema = R::json_schema(generator);
        add_selector(&mut schema, R::SCOPE);
        schema
    }
}

/// Adds the selector's fields that `scope` takes to a request's schema.
pub fn add_selector(schema: &mut Schema, scope: Scope) {
    let object = schema.ensure_object();
    let mut selector = Map::new();
    if scope != Scope::None {
        selector.insert("profile".into(), serde_json::json!({"type": "string", "description": PROFILE_FIELD}));
    }
    if matches!(scope, Scope::Tab | Scope::RequiredTab) {
        selector.insert("targetId".into(), serde_json::json!({"type": "string", "description": TARGET_FIELD}));
    }
    match object.get_mut("properties") {
        Some(Value::Object(properties)) => properties.extend(selector),
        _ => {
            object.insert("properties".into(), Value::Object(selector));
        }
    }
    if scope == Scope::RequiredTab {
        let required = object.entry("required").or_insert_with(|| Value::Array(Vec::new()));
        if let Value::Array(required) = required {
            required.push(Value::String("targetId".into()));
        }
    }
}

/// The selector's fields as documented in schemas.
pub const PROFILE_FIELD: &str = "profile (default: the configured default)";
pub const TARGET_FIELD: &str = "tab id (default: the current tab)";

/// What an engine does for one route. [`Engine`](crate::Engine) implements
/// it once per route, in the module of that route's concern; the route
/// tests implement it with a recording fake.
pub trait Handle<R: Route> {
    fn handle(&self, request: Selected<R>) -> impl Future<Output = Result<R::Answer, ControlError>> + Send;
}

/// Calls `$then!` with every route's request type, in the order the docs
/// list them: the one list of the control API's routes (the engine's
/// [`ControlApi`] bound and the HTTP router are made from it).
#[macro_export]
macro_rules! for_each_route {
    ($then:ident) => {
        $then! {
            GetStatus,
            ListProfiles,
            StartBrowser,
            StopBrowser,
            ListTabs,
            OpenTab,
            FocusTab,
            CloseTab,
            Navigate,
            GoBack,
            GoForward,
            TakeSnapshot,
            FindInPage,
            TakeScreenshot,
            ReadConsole,
            ListRequests,
            ReadResponseBody,
            Act,
            ArmDialog,
            ArmFileChooser,
            PrintPdf,
            HandOver
        }
    };
}

/// An engine as one grant's agents see it (the person's keys see it
/// whole): its tabs, its sites, its abilities.
pub trait Lend: Sized {
    fn lent_to(&self, access: &grants::Access) -> Result<Self, ControlError>;
}

macro_rules! control_api {
    ($($route:ident),*) => {
        /// Every route: what the HTTP router needs of an engine.
        pub trait ControlApi: $(Handle<$route> +)* Lend + Clone + Send + Sync + 'static {}

        impl<E> ControlApi for E where E: $(Handle<$route> +)* Lend + Clone + Send + Sync + 'static {}
    };
}
for_each_route!(control_api);

macro_rules! route {
    ($request:ty, $method:ident $path:literal, $scope:ident => $answer:ty) => {
        impl Route for $request {
            const METHOD: Method = Method::$method;
            const PATH: &'static str = $path;
            const SCOPE: Scope = Scope::$scope;
            type Answer = $answer;
        }
    };
    ($request:ty, $method:ident $path:literal, $scope:ident => $answer:ty, patience: $patience:expr) => {
        impl Route for $request {
            const METHOD: Method = Method::$method;
            const PATH: &'static str = $path;
            const SCOPE: Scope = Scope::$scope;
            type Answer = $answer;

            fn patience(&self) -> Option<std::time::Duration> {
                #[allow(clippy::redundant_closure_call)]
                Some(($patience)(self))
            }
        }
    };
}

/// An answer about a profile's tabs, with the profile it is about: a
/// request may leave the profile out (`auto` chooses), and the agent must
/// know whether it drove the user's own Chrome or an isolated one. Reads as
/// the answer itself (`Deref`); in JSON, `profile` sits beside its fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Profiled<A> {
    pub profile: String,
    #[serde(flatten)]
    pub answer: A,
}

impl<A> Profiled<A> {
    pub fn new(profile: &Profile, answer: A) -> Self {
        Self { profile: profile.name.clone(), answer }
    }
}

impl<A> std::ops::Deref for Profiled<A> {
    type Target = A;

    fn deref(&self) -> &A {
        &self.answer
    }
}

// ---- profiles and browsers -------------------------------------------------

/// `GET /`: every profile's state, or one profile's (with `profile`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GetStatus {}
route!(GetStatus, Get "/", Profile => Status);

/// `GET /profiles`: the profiles of config.toml.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListProfiles {}
route!(ListProfiles, Get "/profiles", None => ProfileList);

/// `POST /start`: launches a managed browser (a no-op when it runs), or
/// checks that the extension shares a tab.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StartBrowser {
    /// A throwaway isolated Chrome under the name given as `profile` (not
    /// one of config.toml's): default settings, a fresh folder, deleted
    /// with everything in it when it is stopped (or serve ends).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ephemeral: bool,
}
route!(StartBrowser, Post "/start", Profile => ProfileStatus);

/// `POST /stop`: stops a managed browser (never the user's own Chrome).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StopBrowser {}
route!(StopBrowser, Post "/stop", Profile => ProfileStatus);

/// `GET /`'s answer: with `profile`, that profile; without, all of them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Status {
    One(ProfileStatus),
    All(ServiceStatus),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceStatus {
    pub service: String,
    pub version: String,
    pub profiles: Vec<ProfileStatus>,
}

/// One profile's state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProfileStatus {
    pub profile: String,
    pub driver: Driver,
    pub color: String,
    pub default: bool,
    /// Started with `ephemeral: true`: deleted when it stops.
    #[serde(default)]
    pub ephemeral: bool,
    /// Managed: the browser runs. Extension: the extension is connected.
    pub running: bool,
    pub connected: bool,
    pub state: String,
    /// Tabs the engine sees (shared tabs for the extension driver).
    pub tabs: Option<usize>,
    /// Where a CDP client connects, never with the token.
    pub cdp_endpoint: Option<String>,
    /// The command that prints `cdp_endpoint` with the token, for a user
    /// to paste into their client (the token never travels in answers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cdp_url_command: Option<String>,
    pub detail: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProfileList {
    pub default_profile: String,
    pub profiles: Vec<Profile>,
}

// ---- tabs ------------------------------------------------------------------

/// `GET /tabs`: the profile's tabs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListTabs {}
route!(ListTabs, Get "/tabs", Profile => Profiled<TabList>);

/// `POST /tabs/open`: a new tab, loaded, which becomes the current one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OpenTab {
    /// The address to open.
    pub url: String,
}
route!(OpenTab, Post "/tabs/open", Profile => Profiled<TabInfo>);

/// `POST /tabs/focus`: brings the tab to the front and makes it current.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FocusTab {}
route!(FocusTab, Post "/tabs/focus", RequiredTab => Profiled<TabDone>);

/// `DELETE /tabs/{targetId}`: closes the tab.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CloseTab {}
route!(CloseTab, Delete "/tabs/{targetId}", RequiredTab => Profiled<TabDone>);

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TabList {
    pub tabs: Vec<TabInfo>,
}

/// A tab as `GET /tabs` shows it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct TabInfo {
    pub target_id: String,
    pub title: String,
    pub url: String,
    #[serde(rename = "type")]
    pub kind: String,
    /// The tab that requests without `targetId` go to.
    pub active: bool,
    /// A JavaScript dialog waiting for an answer (`POST /hooks/dialog`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dialog: Option<DialogInfo>,
}

/// An open `alert`, `confirm`, `prompt` or `beforeunload` dialog.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct DialogInfo {
    #[serde(rename = "type")]
    pub kind: String,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_prompt: Option<String>,
}

impl From<DialogInfo> for ControlError {
    /// A page operation refused while the dialog is open.
    fn from(dialog: DialogInfo) -> Self {
        Self::DialogOpen { kind: dialog.kind, message: dialog.message }
    }
}

/// A tab focused or closed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TabDone {
    pub ok: bool,
    pub target_id: String,
}

// ---- navigation ------------------------------------------------------------

/// `POST /navigate`: loads `url` in the tab and waits for `waitUntil`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Navigate {
    /// The address to load.
    pub url: String,
    #[serde(default)]
    pub wait_until: WaitUntil,
    /// How long to wait (default 20000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}
route!(Navigate, Post "/navigate", Tab => Profiled<Navigated>);

/// `POST /back`: goes one entry back in the tab's history and waits for
/// `waitUntil`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GoBack {
    #[serde(default)]
    pub wait_until: WaitUntil,
    /// How long to wait (default 20000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}
route!(GoBack, Post "/back", Tab => Profiled<Navigated>);

/// `POST /forward`: goes one entry forward in the tab's history and waits
/// for `waitUntil`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GoForward {
    #[serde(default)]
    pub wait_until: WaitUntil,
    /// How long to wait (default 20000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}
route!(GoForward, Post "/forward", Tab => Profiled<Navigated>);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum WaitUntil {
    /// The new document is committed.
    Commit,
    #[serde(rename = "domcontentloaded")]
    DomContentLoaded,
    /// The load event fired (default).
    #[default]
    Load,
    #[serde(rename = "networkidle")]
    NetworkIdle,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Navigated {
    pub target_id: String,
    pub url: String,
    pub title: String,
}

// ---- what the page shows ---------------------------------------------------

/// `GET /snapshot`: the page as an accessibility tree with refs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TakeSnapshot {
    /// ai (default): the tree with refs; aria: Chrome's raw tree, for debugging.
    #[serde(default)]
    pub format: Format,
    /// Only interactive elements, as a flat list.
    #[serde(default)]
    pub interactive: bool,
    /// The older, whole tree (Playwright's form).
    #[serde(default)]
    pub full: bool,
    /// With full: drop unnamed wrappers.
    #[serde(default)]
    pub compact: bool,
    /// Levels to show.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub depth: Option<u32>,
    /// Nodes to show (default 5000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// Characters per part (default 100000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_chars: Option<usize>,
    /// The part of a longer snapshot (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub part: Option<u32>,
    /// A CSS selector: only that element's subtree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
    /// A CSS selector of an iframe in the top document: only that frame.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frame: Option<String>,
}
route!(TakeSnapshot, Get "/snapshot", Tab => Profiled<Snapshot>);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, Default, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    #[default]
    Ai,
    Aria,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Snapshot {
    pub target_id: String,
    pub url: String,
    pub title: String,
    pub format: Format,
    /// The `ai` snapshot text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<String>,
    /// The `aria` nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<Vec<Value>>,
    /// Refs handed out (ai).
    pub refs: usize,
    /// Nodes in the output.
    pub node_count: usize,
    pub truncated: bool,
    /// What was cut and how to see it.
    pub notes: Vec<String>,
    /// A dialog that pauses the page: the snapshot shows only it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dialog: Option<DialogInfo>,
}

/// `GET /find`: the lines of the page's snapshot that match, with their
/// refs and where they are, without reading the whole snapshot. Its refs
/// join the tab's as a partial snapshot's do.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FindInPage {
    /// Text in a line's name, value or text (any case).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The exact role: button, link, textbox, option, heading…
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// Text in the accessible name (any case).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Matches to return (default 20, at most 200).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
}
route!(FindInPage, Get "/find", Tab => Profiled<Found>);

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Found {
    pub target_id: String,
    pub url: String,
    pub title: String,
    /// Matches in the page (`matches` holds the first `limit`).
    pub total: usize,
    pub matches: Vec<FoundLine>,
    pub notes: Vec<String>,
}

/// One matching line of the snapshot, and where it is.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FoundLine {
    /// The ancestors, outermost first: `main > form "Sign up" [e3]`.
    pub path: String,
    /// The line as the default (lean) snapshot writes it.
    pub line: String,
    #[serde(rename = "ref", default, skip_serializing_if = "Option::is_none")]
    pub element_ref: Option<String>,
}

impl FoundLine {
    /// `main > form "Sign up" > textbox "Email" [e2]`: how agents read it.
    pub fn text(&self) -> String {
        if self.path.is_empty() { self.line.clone() } else { format!("{} > {}", self.path, self.line) }
    }
}

impl Snapshot {
    /// What a reader sees: the `ai` text (or the `aria` nodes as JSON), then
    /// each note on a `# ` line.
    pub fn text(&self) -> String {
        let mut text = match &self.snapshot {
            Some(text) => text.clone(),
            None => serde_json::to_string(&self.nodes).unwrap_or_default(),
        };
        for note in &self.notes {
            text.push_str(&format!("\n# {note}"));
        }
        text
    }
}

/// `POST /screenshot`: the viewport, the full page, or one element.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TakeScreenshot {
    /// The whole page, not just the viewport.
    #[serde(default)]
    pub full_page: bool,
    /// One element: a ref of the last snapshot.
    #[serde(rename = "ref", default, skip_serializing_if = "Option::is_none")]
    pub element_ref: Option<String>,
    /// One element: a CSS selector (`element` is accepted too).
    #[serde(alias = "element", default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
    #[serde(rename = "type", default)]
    pub image_type: ImageType,
    /// JPEG quality, 0–100.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quality: Option<u8>,
    /// Orange boxes with the refs of the last snapshot.
    #[serde(default)]
    pub labels: bool,
}
route!(TakeScreenshot, Post "/screenshot", Tab => Profiled<Screenshot>);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ImageType {
    #[default]
    Png,
    Jpeg,
}

impl ImageType {
    pub fn mime(self) -> &'static str {
        match self {
            Self::Png => "image/png",
            Self::Jpeg => "image/jpeg",
        }
    }

    pub fn from_mime(mime: &str) -> Option<Self> {
        match mime {
            "image/png" => Some(Self::Png),
            "image/jpeg" => Some(Self::Jpeg),
            _ => None,
        }
    }

    pub fn extension(self) -> &'static str {
        match self {
            Self::Png => "png",
            Self::Jpeg => "jpg",
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Screenshot {
    pub target_id: String,
    pub path: PathBuf,
    pub width: u32,
    pub height: u32,
    pub bytes: usize,
    /// `image/png` or `image/jpeg`.
    #[serde(rename = "type")]
    pub mime: String,
    /// With `labels`: refs labelled, and refs not labelled (outside the
    /// viewport, beyond 150, or in another frame).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<u64>,
    /// The image itself (sent as bytes when the client accepts an image).
    #[serde(skip)]
    pub data: Vec<u8>,
}

/// `GET /console`: the tab's console messages and page errors.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReadConsole {
    /// The lowest level to show: debug, log, warning or error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level: Option<String>,
    /// Messages to return (the newest).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
}
route!(ReadConsole, Get "/console", Tab => Profiled<ConsoleReport>);

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConsoleReport {
    pub target_id: String,
    pub messages: Vec<ConsoleMessage>,
    pub page_errors: Vec<PageError>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ConsoleMessage {
    /// `error`, `warning`, `info`, `log` or `debug`.
    pub level: String,
    /// The console method (`log`, `table`, `assert`, …), or for Chrome's
    /// own messages their source (`network`, `security`, `violation`, …).
    #[serde(rename = "type")]
    pub kind: String,
    pub text: String,
    /// Milliseconds since the epoch.
    pub timestamp: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PageError {
    pub message: String,
    pub timestamp: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
}

// ---- network ---------------------------------------------------------------

/// `GET /requests`: the tab's network requests (the last 500 kept), newest
/// last.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ListRequests {
    /// Only URLs containing this text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Only failed requests and HTTP errors (status 400 and up).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub failed: bool,
    /// Only this type: Document, Script, Image, Fetch, XHR, Stylesheet, …
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_type: Option<String>,
    /// Requests to return (the newest; default 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
    /// Earlier pages' requests too (default: the current page's, since
    /// the tab's main frame last loaded a document).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub all: bool,
}
route!(ListRequests, Get "/requests", Tab => Profiled<RequestList>);

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestList {
    pub target_id: String,
    pub requests: Vec<NetworkRequest>,
    /// Requests kept that match the filters.
    pub total: usize,
    /// Requests in `requests` (the newest `limit` of `total`).
    pub shown: usize,
    /// The current page (each request says its own).
    pub page: u32,
    /// Requests of earlier pages that match, left out (`all` shows them).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub earlier_pages: usize,
}

/// One request as the tab made it. A redirect is one entry per hop, all
/// with the same `requestId`: each hop's `status` is its own (301, 302, …).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkRequest {
    pub request_id: String,
    pub method: String,
    /// At most 2,000 characters (a longer one ends with how much was cut).
    pub url: String,
    /// Chrome's type: `Document`, `Script`, `Image`, `Fetch`, `XHR`, …
    pub resource_type: String,
    /// The HTTP status (none: no response yet, or none at all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Bytes received over the network, headers included (once finished).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// When it was sent, in milliseconds since the epoch.
    pub start_time: f64,
    /// From sent to finished or failed (none: still loading).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<f64>,
    /// Why it failed: Chrome's `net::ERR_…`, and whether it was canceled
    /// or blocked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// Answered from the browser's cache.
    pub from_cache: bool,
    /// The page it belongs to: 1 for the tab's first document the log
    /// saw, one more for each document the tab loaded since.
    #[serde(default)]
    pub page: u32,
}

impl NetworkRequest {
    /// A failure, or an HTTP error status.
    pub fn failed(&self) -> bool {
        self.failure.is_some() || self.status.is_some_and(|status| status >= 400)
    }
}

/// `GET /requests/body`: a response's body, as Chrome still has it (text
/// up to 256 KiB; other bodies in base64, up to 256 KiB of bytes).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReadResponseBody {
    /// A requestId of GET /requests.
    pub request_id: String,
}
route!(ReadResponseBody, Get "/requests/body", Tab => Profiled<ResponseBody>);

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResponseBody {
    pub target_id: String,
    pub request_id: String,
    pub mime_type: String,
    pub body: String,
    /// `body` is base64 (binary content such as images).
    pub base64_encoded: bool,
    /// `body` is the first 256 KiB only.
    pub truncated: bool,
    /// The whole body's size in bytes.
    pub bytes: usize,
}

/// `POST /pdf`: the tab printed to PDF (headless browsers).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PrintPdf {}
route!(PrintPdf, Post "/pdf", Tab => Profiled<Pdf>);

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Pdf {
    pub target_id: String,
    pub path: PathBuf,
    pub pages: usize,
    pub bytes: usize,
}

// ---- the person in the loop ------------------------------------------------

/// How long a handoff waits for the person by default, and at most.
pub const HANDOFF_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10 * 60);
pub const HANDOFF_TIMEOUT_MAX_MS: u64 = 60 * 60 * 1000;
/// At least this long: a tab handed over is not taken back from the person
/// in the middle of what they do.
pub const HANDOFF_TIMEOUT_MIN_MS: u64 = 30 * 1000;

/// `POST /handoff {reason}`: hands the tab to the person (a login, a
/// CAPTCHA, a choice only they can make) and waits until they say Done or
/// `timeoutMs` passes. Meanwhile the agent may not act in the tab. The
/// extension brings the tab to the front and shows `reason`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HandOver {
    /// What the person is to do.
    pub reason: String,
    /// Default 600000 (10 min), 30000 to 3600000.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "whole_millis")]
    pub timeout_ms: Option<u64>,
}
route!(HandOver, Post "/handoff", Tab => Profiled<HandedBack>, patience: |h: &HandOver| h.within() + std::time::Duration::from_secs(30));

impl HandOver {
    /// How long it waits for the person.
    pub fn within(&self) -> std::time::Duration {
        self.timeout_ms.map_or(HANDOFF_TIMEOUT, |ms| {
            std::time::Duration::from_millis(ms.clamp(HANDOFF_TIMEOUT_MIN_MS, HANDOFF_TIMEOUT_MAX_MS))
        })
    }
}

/// How a handoff ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum HandoffEnded {
    /// The person said Done: the tab is the agent's again.
    Done,
    /// `timeoutMs` passed first; the tab is the agent's again.
    TimedOut,
    /// The tab was closed meanwhile.
    TabClosed,
}

/// The tab back from the person: how it ended, and where the tab is now
/// (the person may have gone on, after a login).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HandedBack {
    pub ended: HandoffEnded,
    pub target_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The page now, as `GET /snapshot?interactive=true` shows it (cut
    /// short), with fresh refs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<String>,
}

// ---- actions and hooks -----------------------------------------------------

/// `POST /act {kind, …}`: one action on the tab (see [`Action`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Act {
    /// How long to wait for the element (default 8000, 500–60000).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "whole_millis")]
    pub timeout_ms: Option<u64>,
    /// Answer with the page's new snapshot too (its refs replace the tab's).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub snapshot: bool,
    /// Answer with what changed in the page's snapshot since the last one
    /// (the refs of what did not change stay as they were).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub diff: bool,
    #[serde(flatten)]
    pub action: Action,
}
route!(Act, Post "/act", Tab => Profiled<ActOutcome>);

/// Default and bounds of an action's timeout (`timeoutMs`).
pub const ACT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(8);
pub const ACT_TIMEOUT_MIN_MS: u64 = 500;
pub const ACT_TIMEOUT_MAX_MS: u64 = 60_000;

impl Act {
    pub fn new(action: impl Into<Action>) -> Self {
        Self { timeout_ms: None, snapshot: false, diff: false, action: action.into() }
    }
}

/// `timeoutMs` as the engine obeys it: the default, or clamped to the bounds.
pub fn clamp_act_timeout(ms: Option<u64>) -> std::time::Duration {
    ms.map_or(ACT_TIMEOUT, |ms| std::time::Duration::from_millis(ms.clamp(ACT_TIMEOUT_MIN_MS, ACT_TIMEOUT_MAX_MS)))
}

/// What an action did, and the page after it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ActOutcome {
    pub ok: bool,
    pub kind: String,
    pub target_id: String,
    /// The action started a navigation that committed: refs are stale now.
    pub navigated: bool,
    /// `evaluate`'s value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// The tab after the action (none after `close`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page: Option<PageState>,
    /// With `snapshot: true`: the tab's new snapshot, in the `ai` format
    /// (with `diff: true` too when there is nothing to tell it against: no
    /// snapshot before, or a navigation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<String>,
    /// With `diff: true`: the snapshot's lines that changed since the last
    /// one, each after a mark (`+` new, `-` gone, a space: an unchanged
    /// ancestor); empty when nothing changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changes: Option<String>,
}

/// A tab as an agent checks it after acting: where it is, whether a dialog
/// waits, what went wrong because of the action, and what went wrong
/// before it (since the last answer).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PageState {
    pub url: String,
    /// The page's title (also while a dialog holds the page).
    pub title: String,
    /// A dialog the action opened (or one still open): the action happened;
    /// answer the dialog before the next one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dialog: Option<DialogInfo>,
    /// What went wrong from the action's start until its answer: the
    /// requests it started (waited for, briefly) and the errors logged.
    #[serde(flatten)]
    pub caused: Trouble,
    /// What went wrong after the last answer but before this action began:
    /// not the action's doing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub earlier: Option<Trouble>,
    /// Tabs the action opened (popups, `target=_blank`), with the URL of
    /// their first page.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub new_tabs: Vec<NewTab>,
    /// Where the page changed when it did not navigate: the parts an agent
    /// would name (`dialog "Sign in" (new)`, `form "Search"`, `main`,
    /// `menu (gone)`, else `the page`), the innermost first in page order,
    /// at most three and `and N more`; empty when nothing changed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changed: Vec<String>,
}

/// What went wrong on a tab in a span of time: the newest few console
/// errors and uncaught exceptions (one line each) and failed requests
/// (status or reason, method, URL), each with how many more.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Trouble {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub console_errors: Vec<String>,
    /// Errors beyond those shown.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub more_console_errors: usize,
    /// Requests that failed or answered 400 or more.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_requests: Vec<String>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub more_failed_requests: usize,
}

impl Trouble {
    pub fn is_empty(&self) -> bool {
        self.console_errors.is_empty() && self.failed_requests.is_empty()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NewTab {
    pub target_id: String,
    pub url: String,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// `POST /hooks/dialog`: answers the tab's open dialog now, or its next one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ArmDialog {
    /// OK (true) or Cancel (false).
    pub accept: bool,
    /// The answer to a prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_text: Option<String>,
    /// How long the arm lasts (at most and by default 120000).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "whole_millis")]
    pub timeout_ms: Option<u64>,
}
route!(ArmDialog, Post "/hooks/dialog", Tab => Profiled<DialogArmed>);

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DialogArmed {
    pub ok: bool,
    pub target_id: String,
    /// Armed for the next dialog (false: an open one was answered now).
    pub armed: bool,
    /// The dialog answered now, if one was open.
    pub answered: Option<DialogInfo>,
}

/// `POST /hooks/file-chooser`: files for the tab's next file chooser, or,
/// with `ref`, set on that file input now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ArmFileChooser {
    /// Absolute paths of the files.
    pub paths: Vec<String>,
    /// A file input's ref: set the files on it now.
    #[serde(rename = "ref", default, skip_serializing_if = "Option::is_none")]
    pub element_ref: Option<String>,
    /// How long the arm lasts (at most and by default 120000).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "whole_millis")]
    pub timeout_ms: Option<u64>,
}
route!(ArmFileChooser, Post "/hooks/file-chooser", Tab => Profiled<FilesArmed>);

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FilesArmed {
    pub ok: bool,
    pub target_id: String,
    /// Armed for the next file chooser.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub armed: Option<Vec<String>>,
    /// Set on the file input now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set: Option<Vec<String>>,
}

/// A timeout in whole milliseconds, with a message that says so.
fn whole_millis<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<u64>, D::Error> {
    match Option::<Value>::deserialize(deserializer)? {
        None | Some(Value::Null) => Ok(None),
        Some(value) => {
            value.as_u64().map(Some).ok_or_else(|| D::Error::custom("must be a whole number of milliseconds"))
        }
    }
}

// ---- query strings ---------------------------------------------------------

/// A query string as the JSON object of a GET route's request: each value
/// typed by the request's schema (`interactive`, `=1` and `=true` are
/// true; numbers are whole numbers). `token` is the guard's, not the route's.
pub fn query_object<R: Route>(raw: Option<&str>) -> Result<Value, ControlError> {
    let schema = schemars::SchemaGenerator::default().into_root_schema_for::<Selected<R>>();
    let properties = schema.get("properties").and_then(Value::as_object).cloned().unwrap_or_default();
    let kind = |key: &str| -> Vec<String> {
        match properties.get(key).and_then(|p| p.get("type")) {
            Some(Value::String(t)) => vec![t.clone()],
            Some(Value::Array(types)) => types.iter().filter_map(Value::as_str).map(str::to_string).collect(),
            _ => Vec::new(),
        }
    };
    let mut map = Map::new();
    for (key, value) in url::form_urlencoded::parse(raw.unwrap_or_default().as_bytes()) {
        if key == "token" {
            continue;
        }
        let types = kind(&key);
        let typed = if types.iter().any(|t| t == "boolean") {
            match value.as_ref() {
                "" | "1" | "true" => Value::Bool(true),
                "0" | "false" => Value::Bool(false),
                other => return Err(ControlError::BadRequest(format!("{key}={other}: use true or false"))),
            }
        } else if types.iter().any(|t| t == "integer") {
            let number: u64 = value
                .parse()
                .map_err(|_| ControlError::BadRequest(format!("{key}={value}: expected a whole number")))?;
            Value::from(number)
        } else {
            Value::String(value.into_owned())
        };
        map.insert(key.into_owned(), typed);
    }
    Ok(Value::Object(map))
}

/// A request's fields as query pairs (GET and DELETE routes): scalars as
/// text; the `{targetId}` of the path is left out.
pub fn query_pairs<R: Route>(request: &Selected<R>) -> Vec<(String, String)> {
    let path_takes_target = R::PATH.contains("{targetId}");
    request
        .to_json()
        .into_iter()
        .filter(|(_, value)| !value.is_null())
        .filter(|(key, _)| !(path_takes_target && key == "targetId"))
        .map(|(key, value)| {
            let text = match value {
                Value::String(s) => s,
                other => other.to_string(),
            };
            (key, text)
        })
        .collect()
}

/// The request's path, with its tab filled in.
pub fn path_of<R: Route>(request: &Selected<R>) -> String {
    match &request.tab.target_id {
        Some(target) if R::PATH.contains("{targetId}") => {
            let encoded: String = url::form_urlencoded::byte_serialize(target.as_bytes()).collect();
            R::PATH.replace("{targetId}", &encoded)
        }
        _ => R::PATH.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use super::{Click, Press};

    #[test]
    fn selector_fields_sit_beside_the_routes_own() {
        let navigate = Selected::<Navigate>::from_json(json!({"url": "http://x/", "targetId": "T1"})).unwrap();
        assert_eq!(navigate.tab.target_id.as_deref(), Some("T1"));
        assert_eq!(navigate.request.wait_until, WaitUntil::Load);
        assert_eq!(
            Value::Object(navigate.to_json()),
            json!({"url": "http://x/", "waitUntil": "load", "targetId": "T1"})
        );
    }

    #[test]
    fn mistakes_are_named() {
        let error = Selected::<Navigate>::from_json(json!({"urll": "x"})).unwrap_err().to_string();
        assert!(error.contains("unknown field `urll`"), "{error}");
        let error = Selected::<ListTabs>::from_json(json!({"targetId": "T1"})).unwrap_err().to_string();
        assert!(error.contains("unknown field `targetId`"), "a route without a tab takes none: {error}");
        let error = Selected::<FocusTab>::from_json(json!({})).unwrap_err().to_string();
        assert!(error.contains("targetId"), "{error}");
        let error = Selected::<Act>::from_json(json!({"kind": "click", "ref": "e1", "timeoutMs": "soon"}))
            .unwrap_err()
            .to_string();
        assert!(error.contains("timeoutMs: must be a whole number"), "{error}");
        let error = Selected::<Act>::from_json(json!({"kind": "click", "reff": "e1"})).unwrap_err().to_string();
        assert!(error.contains("reff"), "{error}");
        let error = Selected::<Act>::from_json(json!(["click"])).unwrap_err().to_string();
        assert!(error.contains("the body must be a JSON object"), "{error}");
    }

    #[test]
    fn actions_round_trip_with_their_kind() {
        let act = Selected::new(
            TabSelector { profile: Some("work".into()), target_id: None },
            Act {
                timeout_ms: Some(900),
                snapshot: false,
                diff: true,
                action: Click { element: "e3".into(), ..Click::default() }.into(),
            },
        );
        let json = Value::Object(act.to_json());
        assert_eq!(json["kind"], "click");
        assert_eq!(json["profile"], "work");
        assert_eq!(Selected::<Act>::from_json(json).unwrap(), act);
        let press = Selected::<Act>::from_json(json!({"kind": "press", "key": "Enter"})).unwrap();
        assert_eq!(press.request.action, Press { key: "Enter".into() }.into());
    }

    #[test]
    fn query_strings_are_typed_by_the_schema() {
        let q = query_object::<TakeSnapshot>(Some(
            "interactive&compact=false&depth=3&maxChars=100&selector=%23main&token=x&targetId=T1",
        ))
        .unwrap();
        let snapshot = Selected::<TakeSnapshot>::from_json(q).unwrap();
        assert!(snapshot.request.interactive && !snapshot.request.compact);
        assert_eq!((snapshot.request.depth, snapshot.request.max_chars), (Some(3), Some(100)));
        assert_eq!(snapshot.request.selector.as_deref(), Some("#main"));
        assert_eq!(snapshot.tab.target_id.as_deref(), Some("T1"));
        let error = query_object::<TakeSnapshot>(Some("depth=deep")).unwrap_err().to_string();
        assert!(error.contains("depth=deep"), "{error}");
        let error = query_object::<TakeSnapshot>(Some("interactive=maybe")).unwrap_err().to_string();
        assert!(error.contains("use true or false"), "{error}");
    }

    #[test]
    fn paths_carry_the_tab_when_the_route_names_it() {
        let close =
            Selected::new(TabSelector { profile: Some("work".into()), target_id: Some("A/B".into()) }, CloseTab {});
        assert_eq!(path_of(&close), "/tabs/A%2FB");
        assert_eq!(query_pairs(&close), [("profile".to_string(), "work".to_string())]);
    }

    #[test]
    fn schemas_list_the_selector_the_route_takes() {
        let schema = schemars::schema_for!(Selected<Navigate>);
        let properties = schema.get("properties").and_then(Value::as_object).unwrap();
        assert!(properties.contains_key("url") && properties.contains_key("targetId"));
        let schema = schemars::schema_for!(Selected<ListTabs>);
        let properties = schema.get("properties").and_then(Value::as_object).unwrap();
        assert!(properties.contains_key("profile") && !properties.contains_key("targetId"));
        let schema = schemars::schema_for!(Selected<FocusTab>);
        assert_eq!(schema.get("required"), Some(&json!(["targetId"])));
    }
}
