//! `browser-relay mcp`: the control API as MCP tools over stdio, for agents
//! whose host speaks MCP. Each tool is one control API route (or one `/act`
//! kind): its input schema is derived from the route's request type, its
//! arguments are read as that type (with the API's own messages for
//! mistakes), and the request goes to the running `browser-relay serve`,
//! which owns the relay, the extension link and the browsers. A failed
//! request is a tool error whose text is the API's message and hint, so the
//! model reads what to do next.

use std::sync::Arc;

use base64::Engine as _;
use browser_relay::control::client::ControlClient;
use control_engine::act::{
    ActKind, Click, CloseCurrent, Drag, Evaluate, Fill, Hover, Press, Resize, SelectOptions, TypeText, WaitFor,
};
use control_engine::api::{
    Act, ActOutcome, ArmDialog, ArmFileChooser, CloseTab, ConsoleReport, DialogArmed, FilesArmed, FindInPage, FocusTab,
    Found, GetStatus, ListTabs, Navigate, Navigated, OpenTab, Pdf, PrintPdf, ProfileStatus, ReadConsole, Route, Scope,
    Screenshot, Selected, Snapshot, StartBrowser, Status, StopBrowser, TabDone, TabInfo, TabList, TakeScreenshot,
    TakeSnapshot, add_selector,
};
use futures_util::future::BoxFuture;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation, JsonObject, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use schemars::Schema;
use serde_json::{Map, Value, json};

/// A tool's outcome as the model reads it (or the error text it reads).
type Outcome = Result<Vec<ContentBlock>, String>;

/// One tool: its name and description, its input schema, and the request
/// its arguments make.
struct ToolSpec {
    name: &'static str,
    description: &'static str,
    schema: fn() -> Schema,
    call: for<'a> fn(&'a Surface, Map<String, Value>) -> BoxFuture<'a, Outcome>,
}

/// What the tools work with: the control API, and the one folder whose
/// files they may read (screenshots the API saved there).
#[derive(Debug)]
pub struct Surface {
    client: ControlClient,
    media: state_dir::MediaDir,
}

impl std::fmt::Debug for ToolSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolSpec").field("name", &self.name).finish()
    }
}

/// A route's tool: the arguments are the route's request.
const fn route<R: Route>(name: &'static str, description: &'static str) -> ToolSpec
where
    R::Answer: Shown,
{
    ToolSpec { name, description, schema: route_schema::<R>, call: call_route::<R> }
}

/// An `/act` kind's tool: the arguments are the kind's fields (and the
/// action's `timeoutMs`).
const fn action<K: ActKind>(name: &'static str, description: &'static str) -> ToolSpec {
    ToolSpec { name, description, schema: action_schema::<K>, call: call_action::<K> }
}

const TOOLS: &[ToolSpec] = &[
    route::<GetStatus>(
        "browser_status",
        "Every profile (or one): driver (extension = the user's own Chrome, managed = an isolated Chrome), running/connected, tab count.",
    ),
    route::<StartBrowser>(
        "browser_start",
        "Launch the profile's browser (managed), or check a tab is shared (extension).",
    ),
    route::<StopBrowser>("browser_stop", "Stop the managed profile's browser."),
    route::<ListTabs>(
        "browser_tabs",
        "The profile's tabs: targetId, title, url, active (the current tab, which tools use when targetId is left out), and any open dialog.",
    ),
    route::<OpenTab>(
        "browser_open",
        "Open a URL in a new tab; it becomes the current tab and has loaded when this returns.",
    ),
    route::<FocusTab>("browser_focus_tab", "Bring a tab to the front and make it the current tab."),
    route::<CloseTab>("browser_close_tab", "Close a tab."),
    route::<Navigate>(
        "browser_navigate",
        "Load a URL in the tab and wait for it (default: the load event, at most 20 s).",
    ),
    route::<TakeSnapshot>(
        "browser_snapshot",
        "The page as an accessibility tree whose interactive elements carry refs (e1, e2, …) for the action tools. Take a new one after the page changes: a full snapshot replaces the tab's refs; one with selector, frame or depth keeps the refs it does not show.",
    ),
    route::<FindInPage>(
        "browser_find",
        "Find in a big page without reading all of it: the snapshot lines whose text, role or name match, with refs and their ancestors.",
    ),
    route::<TakeScreenshot>(
        "browser_screenshot",
        "A picture of the viewport, the full page, or one element (ref or selector); labels: true draws the last snapshot's refs on it.",
    ),
    route::<ReadConsole>("browser_console", "The tab's console messages and uncaught page errors (newest last)."),
    action::<Click>(
        "browser_click",
        "Click an element by ref, with real mouse events, once it is visible, enabled, still and not covered.",
    ),
    action::<TypeText>(
        "browser_type",
        "Replace a text field's content with text (slowly: key by key, appended); submit presses Enter after.",
    ),
    action::<Press>(
        "browser_press",
        "Press a key or chord on the focused element: Enter, Tab, PageDown, Control+A, Alt+ArrowLeft, a…",
    ),
    action::<Hover>("browser_hover", "Move the mouse over an element."),
    action::<Drag>("browser_drag", "Drag one element onto another (pointer drags and HTML5 drag and drop)."),
    action::<SelectOptions>(
        "browser_select",
        "Choose options of a <select> by value or label (several for a multiple select).",
    ),
    action::<Fill>(
        "browser_fill",
        "Fill several fields at once: text fields, checkboxes and radios (true/false), selects, date and number inputs, contenteditable.",
    ),
    action::<WaitFor>(
        "browser_wait",
        "Wait for one thing: timeMs, text to appear, textGone, a selector to be visible, the url (substring or * glob), a loadState (domcontentloaded, load, networkidle), or fn (a JavaScript function) to return true.",
    ),
    action::<Resize>("browser_resize", "Resize the tab's viewport."),
    action::<Evaluate>(
        "browser_evaluate",
        "Run JavaScript in the page and return its value (with ref, the function gets that element). Can be switched off in config.toml.",
    ),
    action::<CloseCurrent>("browser_close", "Close the tab (like browser_close_tab on the current tab)."),
    route::<PrintPdf>("browser_pdf", "Print the tab to a PDF file (headless browsers: the managed profile)."),
    route::<ArmDialog>(
        "browser_handle_dialog",
        "Answer the tab's open alert/confirm/prompt now, or the next one (armed for timeoutMs, at most 2 minutes). Arm it before an action that opens a dialog.",
    ),
    route::<ArmFileChooser>(
        "browser_upload_files",
        "Files for the next file chooser (arm, then click the upload button), or set at once on a file input with ref.",
    ),
];

/// A schema as MCP hosts take it: everything inline, nothing they need not
/// read (Rust's integer formats; `null` beside a type, since a field left
/// out is the same), and strict.
fn tool_schema(mut schema: Schema) -> Schema {
    fn lean(value: &mut Value) {
        match value {
            Value::Object(object) => {
                // The keyword (a string), not a property named "format".
                if object.get("format").is_some_and(Value::is_string) {
                    object.remove("format");
                }
                if let Some(Value::Array(types)) = object.get_mut("type") {
                    types.retain(|t| t != "null");
                    if let [only] = types.as_slice() {
                        let only = only.clone();
                        object.insert("type".into(), only);
                    }
                }
                object.values_mut().for_each(lean);
            }
            Value::Array(items) => items.iter_mut().for_each(lean),
            _ => {}
        }
    }
    if let Some(object) = schema.as_object_mut() {
        object.values_mut().for_each(lean);
        object.remove("$schema");
        object.remove("title");
        object.remove("description");
        object.insert("additionalProperties".into(), json!(false));
        if !object.contains_key("required") {
            object.insert("required".into(), json!([]));
        }
    }
    schema
}

fn generator() -> schemars::SchemaGenerator {
    schemars::generate::SchemaSettings::draft07().with(|s| s.inline_subschemas = true).into_generator()
}

fn route_schema<R: Route>() -> Schema {
    tool_schema(generator().into_root_schema_for::<Selected<R>>())
}

fn action_schema<K: ActKind>() -> Schema {
    let mut schema = generator().into_root_schema_for::<K>();
    let timeout = json!({"type": "integer", "minimum": 0, "description": "how long to wait for the element (default 8000, 500–60000)"});
    if let Some(Value::Object(properties)) = schema.as_object_mut().and_then(|o| o.get_mut("properties")) {
        properties.insert("timeoutMs".into(), timeout);
    } else {
        schema.ensure_object().insert("properties".into(), json!({"timeoutMs": timeout}));
    }
    add_selector(&mut schema, Scope::Tab);
    tool_schema(schema)
}

fn call_route<R: Route>(surface: &Surface, arguments: Map<String, Value>) -> BoxFuture<'_, Outcome>
where
    R::Answer: Shown,
{
    Box::pin(async move {
        let request = Selected::<R>::from_json(Value::Object(arguments)).map_err(|e| e.to_string())?;
        let answer = surface.client.send(&request).await.map_err(|e| e.to_string())?;
        Ok(answer.content(&surface.media))
    })
}

fn call_action<K: ActKind>(surface: &Surface, mut arguments: Map<String, Value>) -> BoxFuture<'_, Outcome> {
    arguments.insert("kind".into(), json!(K::KIND));
    call_route::<Act>(surface, arguments)
}

/// What the model reads of an answer: JSON, unless said otherwise.
trait Shown: serde::Serialize {
    fn content(&self, _media: &state_dir::MediaDir) -> Vec<ContentBlock> {
        vec![ContentBlock::text(serde_json::to_string(self).unwrap_or_default())]
    }
}

impl Shown for Status {}
impl Shown for ProfileStatus {}
impl Shown for TabList {}
impl Shown for TabInfo {}
impl Shown for TabDone {}
impl Shown for Navigated {}
impl Shown for ConsoleReport {}
impl Shown for ActOutcome {}
impl Shown for DialogArmed {}
impl Shown for FilesArmed {}
impl Shown for Pdf {}

/// A snapshot reads as its text, under a line that says which tab.
impl Shown for Snapshot {
    fn content(&self, _media: &state_dir::MediaDir) -> Vec<ContentBlock> {
        let mut text = match &self.snapshot {
            Some(snapshot) => snapshot.clone(),
            None => serde_json::to_string(&self.nodes).unwrap_or_default(),
        };
        for note in &self.notes {
            text.push_str(&format!("\n# {note}"));
        }
        vec![ContentBlock::text(format!("tab {} · {} · {}\n{text}", self.target_id, self.title, self.url))]
    }
}

/// A search reads as its matching lines, each after its ancestors.
impl Shown for Found {
    fn content(&self, _media: &state_dir::MediaDir) -> Vec<ContentBlock> {
        let mut text = format!("tab {} · {} · {}\n", self.target_id, self.title, self.url);
        text.push_str(&format!("{} of {} matches", self.matches.len(), self.total));
        for found in &self.matches {
            text.push_str(&format!("\n{}", found.text()));
        }
        for note in &self.notes {
            text.push_str(&format!("\n# {note}"));
        }
        vec![ContentBlock::text(text)]
    }
}

/// A screenshot is an image the model sees, after its facts. The file is
/// read only from the media folder: the answer names a path, and a server
/// that is not ours must not make this process read any other file.
impl Shown for Screenshot {
    fn content(&self, media: &state_dir::MediaDir) -> Vec<ContentBlock> {
        let mut content = vec![ContentBlock::text(serde_json::to_string(self).unwrap_or_default())];
        if !media.contains(&self.path) {
            content.push(ContentBlock::text(format!(
                "(not shown: {} is not in {})",
                self.path.display(),
                media.path().display()
            )));
        } else if let Ok(bytes) = std::fs::read(&self.path) {
            content.push(ContentBlock::image(base64::engine::general_purpose::STANDARD.encode(bytes), &self.mime));
        }
        content
    }
}

/// The MCP server: the tool table over a control API client.
#[derive(Debug, Clone)]
pub struct McpServer {
    surface: Arc<Surface>,
}

impl McpServer {
    /// `media`: the state directory's media folder, the only place tools
    /// read files from.
    pub fn new(client: ControlClient, media: state_dir::MediaDir) -> Self {
        Self { surface: Arc::new(Surface { client, media }) }
    }

    /// Serves MCP on stdin/stdout until the host closes it.
    pub async fn serve_stdio(self) -> anyhow::Result<()> {
        use rmcp::ServiceExt as _;
        let running = self.serve(rmcp::transport::stdio()).await?;
        running.waiting().await?;
        Ok(())
    }

    async fn call(&self, name: &str, arguments: Map<String, Value>) -> Result<CallToolResult, ErrorData> {
        let Some(spec) = TOOLS.iter().find(|t| t.name == name) else {
            return Err(ErrorData::invalid_params(format!("no tool {name}"), None));
        };
        Ok(match (spec.call)(&self.surface, arguments).await {
            Ok(content) => CallToolResult::success(content),
            Err(message) => CallToolResult::error(vec![ContentBlock::text(message)]),
        })
    }
}

fn tool(spec: &ToolSpec) -> Tool {
    let schema: JsonObject = match (spec.schema)().to_value() {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    };
    Tool::new(spec.name, spec.description, schema)
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("browser-relay", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Drive a real Chrome: browser_snapshot shows the page with refs (e1, e2, …); act on them with \
                 browser_click, browser_type, browser_fill…; take a new snapshot after the page changes. \
                 Without targetId, tools use the current tab (the last opened or focused).",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(TOOLS.iter().map(tool).collect()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        Ok(self.call(&request.name, request.arguments.unwrap_or_default()).await?.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use control_engine::api::FoundLine;

    fn spec(name: &str) -> &'static ToolSpec {
        TOOLS.iter().find(|t| t.name == name).unwrap()
    }

    fn properties(name: &str) -> Map<String, Value> {
        (spec(name).schema)().get("properties").and_then(Value::as_object).cloned().unwrap()
    }

    #[test]
    fn every_tool_has_a_strict_schema_with_its_required_fields() {
        let mut names: Vec<&str> = TOOLS.iter().map(|t| t.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), TOOLS.len(), "tool names are unique");
        for spec in TOOLS {
            let schema = (spec.schema)();
            let properties = schema.get("properties").and_then(Value::as_object).unwrap();
            for required in schema.get("required").and_then(Value::as_array).unwrap() {
                assert!(properties.contains_key(required.as_str().unwrap()), "{}: {required} is described", spec.name);
            }
            assert!(properties.contains_key("profile"), "{}", spec.name);
            assert_eq!(schema.get("additionalProperties"), Some(&json!(false)), "{}", spec.name);
            assert!(!schema.as_value().to_string().contains("$ref"), "{}: inline, no $ref", spec.name);
        }
        let kinds = TOOLS
            .iter()
            .filter(|t| {
                properties(t.name).contains_key("timeoutMs")
                    && t.name != "browser_navigate"
                    && t.name != "browser_handle_dialog"
                    && t.name != "browser_upload_files"
            })
            .count();
        assert_eq!(kinds, 11, "one tool per /act kind");
    }

    #[test]
    fn schemas_come_from_the_request_types() {
        let navigate = properties("browser_navigate");
        assert!(
            navigate.contains_key("url") && navigate.contains_key("waitUntil") && navigate.contains_key("targetId")
        );
        assert_eq!((spec("browser_navigate").schema)().get("required"), Some(&json!(["url"])));
        let click = properties("browser_click");
        assert!(click.contains_key("ref") && click.contains_key("doubleClick") && click.contains_key("timeoutMs"));
        assert!(!click.contains_key("kind"), "the tool is the kind");
        let snapshot = properties("browser_snapshot");
        assert_eq!(snapshot["format"]["enum"], json!(["ai", "aria"]), "a property named format stays");
        assert_eq!(snapshot["depth"]["type"], "integer", "no Rust integer formats, no null");
        let tabs = properties("browser_tabs");
        assert!(!tabs.contains_key("targetId"), "the tab list is about a profile, not a tab");
        assert_eq!((spec("browser_focus_tab").schema)().get("required"), Some(&json!(["targetId"])));
    }

    #[tokio::test]
    async fn bad_arguments_are_answered_before_any_request() {
        // Nothing listens on port 1: a request would fail with "no control API".
        let state = tempfile::tempdir().unwrap();
        let surface = Surface {
            client: ControlClient::new(1, state_dir::Token::generate()),
            media: state_dir::StateDir::at(state.path()).media(),
        };
        let arguments = json!({"reff": "e1"}).as_object().cloned().unwrap();
        let error = (spec("browser_click").call)(&surface, arguments).await.unwrap_err();
        assert!(error.contains("unknown field `reff`"), "{error}");
        let error = (spec("browser_navigate").call)(&surface, Map::new()).await.unwrap_err();
        assert!(error.contains("missing field `url`"), "{error}");
    }

    #[test]
    fn snapshots_read_as_text_with_their_notes() {
        let answer = Snapshot {
            target_id: "T1".into(),
            title: "Form".into(),
            url: "http://x/".into(),
            snapshot: Some("- button \"Go\" [ref=e1]".into()),
            notes: vec!["cut at depth 2".into()],
            ..Snapshot::default()
        };
        let state = tempfile::tempdir().unwrap();
        let content = answer.content(&state_dir::StateDir::at(state.path()).media());
        let text = serde_json::to_value(&content[0]).unwrap()["text"].as_str().unwrap().to_string();
        assert_eq!(text, "tab T1 · Form · http://x/\n- button \"Go\" [ref=e1]\n# cut at depth 2");
    }

    #[test]
    fn searches_read_as_lines_after_their_ancestors() {
        let answer = Found {
            target_id: "T1".into(),
            title: "Form".into(),
            url: "http://x/".into(),
            total: 3,
            matches: vec![
                FoundLine {
                    path: "main > form \"Sign up\"".into(),
                    line: "button \"Go\" [ref=e4]".into(),
                    element_ref: Some("e4".into()),
                },
                FoundLine { path: String::new(), line: "heading \"Go on\" [level=1]".into(), element_ref: None },
            ],
            notes: vec!["3 matches, 2 shown".into()],
        };
        let state = tempfile::tempdir().unwrap();
        let content = answer.content(&state_dir::StateDir::at(state.path()).media());
        let text = serde_json::to_value(&content[0]).unwrap()["text"].as_str().unwrap().to_string();
        assert_eq!(
            text,
            "tab T1 · Form · http://x/\n2 of 3 matches\nmain > form \"Sign up\" > button \"Go\" [ref=e4]\nheading \"Go on\" [level=1]\n# 3 matches, 2 shown"
        );
    }

    #[test]
    fn screenshots_are_read_only_from_the_media_folder() {
        let state = tempfile::tempdir().unwrap();
        let media = state_dir::StateDir::at(state.path()).media();
        let retention = state_dir::Retention { keep: 10, max_age: std::time::Duration::from_secs(60) };
        let saved = media.save("screenshot", "png", b"\x89PNG", retention).unwrap();
        let secret = state.path().join("token");
        std::fs::write(&secret, "the token").unwrap();
        let shot = |path: std::path::PathBuf| Screenshot { path, mime: "image/png".into(), ..Screenshot::default() };
        let kinds = |content: Vec<ContentBlock>| -> Vec<String> {
            content.iter().map(|c| serde_json::to_value(c).unwrap()["type"].as_str().unwrap().to_string()).collect()
        };
        assert_eq!(kinds(shot(saved).content(&media)), ["text", "image"]);
        // An answer naming another file (a server that is not ours) gets a
        // note, never the file's bytes.
        let refused = shot(secret).content(&media);
        assert_eq!(kinds(refused.clone()), ["text", "text"]);
        assert!(!serde_json::to_string(&refused).unwrap().contains("dGhlIHRva2Vu"), "no base64 of the file");
    }
}
