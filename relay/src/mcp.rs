//! `browser-relay mcp`: the control API as MCP tools over stdio, for agents
//! whose host speaks MCP. Each tool is one control API request (the same
//! names, fields and errors as the HTTP API), sent to the running
//! `browser-relay serve`, which owns the relay, the extension link and the
//! browsers. A failed request is a tool error whose text is the API's
//! message and hint, so the model reads what to do next.

use std::sync::Arc;

use base64::Engine as _;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Map, Value, json};

use browser_relay::control::client::ControlClient;

/// Where a tool's arguments go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    /// A GET route: the arguments are its query.
    Get(&'static str),
    /// A POST route: the arguments are its body.
    Post(&'static str),
    /// `POST /act` with this `kind`.
    Act(&'static str),
    /// `DELETE /tabs/{targetId}`.
    CloseTab,
}

#[derive(Debug)]
struct ToolSpec {
    name: &'static str,
    description: &'static str,
    route: Route,
    /// Its own properties (name, JSON Schema), and which are required.
    properties: fn() -> Vec<(&'static str, Value)>,
    required: &'static [&'static str],
}

fn string(description: &str) -> Value {
    json!({"type": "string", "description": description})
}
fn boolean(description: &str) -> Value {
    json!({"type": "boolean", "description": description})
}
fn integer(description: &str) -> Value {
    json!({"type": "integer", "minimum": 0, "description": description})
}
fn element() -> (&'static str, Value) {
    ("ref", string("a ref of the tab's last snapshot, e.g. e7"))
}

const TOOLS: &[ToolSpec] = &[
    ToolSpec {
        name: "browser_status",
        description: "Every profile (or one): driver (extension = the user's own Chrome, managed = an isolated Chrome), running/connected, tab count.",
        route: Route::Get("/"),
        properties: Vec::new,
        required: &[],
    },
    ToolSpec {
        name: "browser_start",
        description: "Launch the profile's browser (managed), or check a tab is shared (extension).",
        route: Route::Post("/start"),
        properties: Vec::new,
        required: &[],
    },
    ToolSpec {
        name: "browser_stop",
        description: "Stop the managed profile's browser.",
        route: Route::Post("/stop"),
        properties: Vec::new,
        required: &[],
    },
    ToolSpec {
        name: "browser_tabs",
        description: "The profile's tabs: targetId, title, url, active (the current tab, which tools use when targetId is left out), and any open dialog.",
        route: Route::Get("/tabs"),
        properties: Vec::new,
        required: &[],
    },
    ToolSpec {
        name: "browser_open",
        description: "Open a URL in a new tab; it becomes the current tab and has loaded when this returns.",
        route: Route::Post("/tabs/open"),
        properties: || vec![("url", string("the address to open"))],
        required: &["url"],
    },
    ToolSpec {
        name: "browser_focus_tab",
        description: "Bring a tab to the front and make it the current tab.",
        route: Route::Post("/tabs/focus"),
        properties: Vec::new,
        required: &["targetId"],
    },
    ToolSpec {
        name: "browser_close_tab",
        description: "Close a tab.",
        route: Route::CloseTab,
        properties: Vec::new,
        required: &["targetId"],
    },
    ToolSpec {
        name: "browser_navigate",
        description: "Load a URL in the tab and wait for it (default: the load event, at most 20 s).",
        route: Route::Post("/navigate"),
        properties: || {
            vec![
                ("url", string("the address to load")),
                ("waitUntil", json!({"type": "string", "enum": ["commit", "domcontentloaded", "load", "networkidle"]})),
                ("timeoutMs", integer("how long to wait (default 20000)")),
            ]
        },
        required: &["url"],
    },
    ToolSpec {
        name: "browser_snapshot",
        description: "The page as an accessibility tree whose interactive elements carry refs (e1, e2, …) for the action tools. Take a new one after the page changes: each snapshot replaces the tab's refs.",
        route: Route::Get("/snapshot"),
        properties: || {
            vec![
                ("interactive", boolean("only interactive elements, as a flat list")),
                ("compact", boolean("drop unnamed structural wrappers")),
                ("depth", integer("levels to show")),
                ("limit", integer("nodes to show (default 5000)")),
                ("maxChars", integer("characters to return (default 100000)")),
                ("selector", string("a CSS selector: only that element's subtree")),
                ("frame", string("a CSS selector of an iframe: only that frame")),
                (
                    "format",
                    json!({"type": "string", "enum": ["ai", "aria"], "description": "aria: Chrome's raw tree, for debugging"}),
                ),
            ]
        },
        required: &[],
    },
    ToolSpec {
        name: "browser_screenshot",
        description: "A picture of the viewport, the full page, or one element (ref or selector); labels: true draws the last snapshot's refs on it.",
        route: Route::Post("/screenshot"),
        properties: || {
            vec![
                ("fullPage", boolean("the whole page, not just the viewport")),
                element(),
                ("selector", string("a CSS selector of one element")),
                ("labels", boolean("orange boxes with the refs of the last snapshot")),
                ("type", json!({"type": "string", "enum": ["png", "jpeg"]})),
                ("quality", integer("jpeg quality, 0–100")),
            ]
        },
        required: &[],
    },
    ToolSpec {
        name: "browser_console",
        description: "The tab's console messages and uncaught page errors (newest last).",
        route: Route::Get("/console"),
        properties: || {
            vec![
                (
                    "level",
                    json!({"type": "string", "enum": ["debug", "log", "warning", "error"], "description": "the lowest level to show"}),
                ),
                ("limit", integer("messages to return")),
            ]
        },
        required: &[],
    },
    ToolSpec {
        name: "browser_click",
        description: "Click an element by ref, with real mouse events, once it is visible, enabled, still and not covered.",
        route: Route::Act("click"),
        properties: || {
            vec![
                element(),
                ("doubleClick", boolean("a double click")),
                ("button", json!({"type": "string", "enum": ["left", "right", "middle"]})),
                ("modifiers", json!({"type": "array", "items": {"type": "string"}, "description": "e.g. [\"Shift\"]"})),
            ]
        },
        required: &["ref"],
    },
    ToolSpec {
        name: "browser_type",
        description: "Replace a text field's content with text (slowly: key by key, appended); submit presses Enter after.",
        route: Route::Act("type"),
        properties: || {
            vec![
                element(),
                ("text", string("what to type")),
                ("submit", boolean("press Enter after")),
                ("slowly", boolean("one key at a time, into what is there")),
            ]
        },
        required: &["ref", "text"],
    },
    ToolSpec {
        name: "browser_press",
        description: "Press a key or chord on the focused element: Enter, Tab, PageDown, Control+A, Alt+ArrowLeft, a…",
        route: Route::Act("press"),
        properties: || vec![("key", string("a key name or chord"))],
        required: &["key"],
    },
    ToolSpec {
        name: "browser_hover",
        description: "Move the mouse over an element.",
        route: Route::Act("hover"),
        properties: || vec![element()],
        required: &["ref"],
    },
    ToolSpec {
        name: "browser_drag",
        description: "Drag one element onto another (pointer drags and HTML5 drag and drop).",
        route: Route::Act("drag"),
        properties: || vec![("startRef", string("the element to drag")), ("endRef", string("where to drop it"))],
        required: &["startRef", "endRef"],
    },
    ToolSpec {
        name: "browser_select",
        description: "Choose options of a <select> by value or label (several for a multiple select).",
        route: Route::Act("select"),
        properties: || vec![element(), ("values", json!({"type": "array", "items": {"type": "string"}}))],
        required: &["ref", "values"],
    },
    ToolSpec {
        name: "browser_fill",
        description: "Fill several fields at once: text fields, checkboxes and radios (true/false), selects, date and number inputs, contenteditable.",
        route: Route::Act("fill"),
        properties: || {
            vec![(
                "fields",
                json!({"type": "array", "items": {"type": "object", "properties": {
                    "ref": {"type": "string"}, "type": {"type": "string"}, "value": {}
                }, "required": ["ref", "value"]}}),
            )]
        },
        required: &["fields"],
    },
    ToolSpec {
        name: "browser_wait",
        description: "Wait for one thing: timeMs, text to appear, textGone, a selector to be visible, the url (substring or * glob), a loadState (domcontentloaded, load, networkidle), or fn (a JavaScript function) to return true.",
        route: Route::Act("wait"),
        properties: || {
            vec![
                ("timeMs", integer("a plain pause")),
                ("text", string("text to appear")),
                ("textGone", string("text to go")),
                ("selector", string("a CSS selector to become visible")),
                ("url", string("the URL to match")),
                ("loadState", json!({"type": "string", "enum": ["domcontentloaded", "load", "networkidle"]})),
                ("fn", string("a JavaScript function or expression")),
            ]
        },
        required: &[],
    },
    ToolSpec {
        name: "browser_resize",
        description: "Resize the tab's viewport.",
        route: Route::Act("resize"),
        properties: || vec![("width", integer("CSS pixels")), ("height", integer("CSS pixels"))],
        required: &["width", "height"],
    },
    ToolSpec {
        name: "browser_evaluate",
        description: "Run JavaScript in the page and return its value (with ref, the function gets that element). Can be switched off in config.toml.",
        route: Route::Act("evaluate"),
        properties: || vec![("fn", string("a function, e.g. () => document.title")), element()],
        required: &["fn"],
    },
    ToolSpec {
        name: "browser_close",
        description: "Close the tab (like browser_close_tab on the current tab).",
        route: Route::Act("close"),
        properties: Vec::new,
        required: &[],
    },
    ToolSpec {
        name: "browser_pdf",
        description: "Print the tab to a PDF file (headless browsers: the managed profile).",
        route: Route::Post("/pdf"),
        properties: Vec::new,
        required: &[],
    },
    ToolSpec {
        name: "browser_handle_dialog",
        description: "Answer the tab's open alert/confirm/prompt now, or the next one (armed for timeoutMs, at most 2 minutes). Arm it before an action that opens a dialog.",
        route: Route::Post("/hooks/dialog"),
        properties: || {
            vec![
                ("accept", boolean("OK (true) or Cancel (false)")),
                ("promptText", string("the answer to a prompt")),
                ("timeoutMs", integer("how long the arm lasts")),
            ]
        },
        required: &["accept"],
    },
    ToolSpec {
        name: "browser_upload_files",
        description: "Files for the next file chooser (arm, then click the upload button), or set at once on a file input with ref.",
        route: Route::Post("/hooks/file-chooser"),
        properties: || {
            vec![
                ("paths", json!({"type": "array", "items": {"type": "string"}, "description": "absolute file paths"})),
                element(),
                ("timeoutMs", integer("how long the arm lasts")),
            ]
        },
        required: &["paths"],
    },
];

impl ToolSpec {
    /// Its JSON Schema: its own properties plus the selectors every route takes.
    fn input_schema(&self) -> Map<String, Value> {
        let mut properties: Map<String, Value> =
            (self.properties)().into_iter().map(|(name, schema)| (name.to_string(), schema)).collect();
        properties.insert("profile".into(), string("the profile (default: config.toml's defaultProfile)"));
        if !matches!(self.route, Route::Get("/" | "/tabs") | Route::Post("/start" | "/stop")) {
            properties.insert("targetId".into(), string("the tab (default: the current tab)"));
        }
        if let Route::Act(_) = self.route {
            properties
                .insert("timeoutMs".into(), integer("how long to wait for the element (default 8000, 500–60000)"));
        }
        let mut schema = Map::new();
        schema.insert("type".into(), json!("object"));
        schema.insert("properties".into(), Value::Object(properties));
        schema.insert("required".into(), json!(self.required));
        schema.insert("additionalProperties".into(), json!(false));
        schema
    }

    fn tool(&self) -> Tool {
        Tool::new(self.name, self.description, self.input_schema())
    }
}

/// One control API request.
#[derive(Debug, Clone, PartialEq)]
struct ApiRequest {
    method: &'static str,
    path: String,
    query: Vec<(String, String)>,
    body: Option<Value>,
}

/// The request a tool call makes. Field names and values pass through as
/// they are: the API checks them and names any mistake.
fn request_for(route: Route, arguments: Map<String, Value>) -> Result<ApiRequest, String> {
    let as_query = |arguments: Map<String, Value>| -> Vec<(String, String)> {
        arguments
            .into_iter()
            .map(|(key, value)| {
                let text = match value {
                    Value::String(s) => s,
                    other => other.to_string(),
                };
                (key, text)
            })
            .collect()
    };
    Ok(match route {
        Route::Get(path) => ApiRequest { method: "GET", path: path.into(), query: as_query(arguments), body: None },
        Route::Post(path) => {
            ApiRequest { method: "POST", path: path.into(), query: vec![], body: Some(Value::Object(arguments)) }
        }
        Route::Act(kind) => {
            let mut body = arguments;
            body.insert("kind".into(), json!(kind));
            ApiRequest { method: "POST", path: "/act".into(), query: vec![], body: Some(Value::Object(body)) }
        }
        Route::CloseTab => {
            let mut rest = arguments;
            let target = match rest.remove("targetId") {
                Some(Value::String(id)) if !id.is_empty() => id,
                _ => return Err("targetId is required: browser_tabs lists the tabs".into()),
            };
            let path = format!("/tabs/{}", url::form_urlencoded::byte_serialize(target.as_bytes()).collect::<String>());
            ApiRequest { method: "DELETE", path, query: as_query(rest), body: None }
        }
    })
}

/// What the model reads of an answer: the snapshot as text, a screenshot
/// as an image, anything else as JSON.
fn content_for(route: Route, answer: &Value) -> Vec<ContentBlock> {
    match route {
        Route::Get("/snapshot") if answer["snapshot"].is_string() => {
            let mut text = answer["snapshot"].as_str().unwrap_or_default().to_string();
            for note in answer["notes"].as_array().into_iter().flatten().filter_map(Value::as_str) {
                text.push_str(&format!("\n# {note}"));
            }
            vec![ContentBlock::text(format!(
                "tab {} · {} · {}\n{text}",
                answer["targetId"].as_str().unwrap_or_default(),
                answer["title"].as_str().unwrap_or_default(),
                answer["url"].as_str().unwrap_or_default()
            ))]
        }
        Route::Post("/screenshot") => {
            let mut content = vec![ContentBlock::text(answer.to_string())];
            let image = answer["path"].as_str().and_then(|path| std::fs::read(path).ok());
            if let Some(bytes) = image {
                let mime = answer["type"].as_str().unwrap_or("image/png");
                content.push(ContentBlock::image(base64::engine::general_purpose::STANDARD.encode(bytes), mime));
            }
            content
        }
        _ => vec![ContentBlock::text(answer.to_string())],
    }
}

/// The MCP server: the tool table over a control API client.
#[derive(Debug, Clone)]
pub struct McpServer {
    client: Arc<ControlClient>,
}

impl McpServer {
    pub fn new(client: ControlClient) -> Self {
        Self { client: Arc::new(client) }
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
        let request = match request_for(spec.route, arguments) {
            Ok(request) => request,
            Err(message) => return Ok(CallToolResult::error(vec![ContentBlock::text(message)])),
        };
        match self.client.call(request.method, &request.path, &request.query, request.body.as_ref()).await {
            Ok(answer) => Ok(CallToolResult::success(content_for(spec.route, &answer))),
            Err(error) => Ok(CallToolResult::error(vec![ContentBlock::text(error.to_string())])),
        }
    }
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
        Ok(ListToolsResult::with_all_items(TOOLS.iter().map(ToolSpec::tool).collect()))
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

    fn args(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap()
    }

    #[test]
    fn tool_calls_become_the_control_api_requests_they_name() {
        let snapshot = request_for(Route::Get("/snapshot"), args(json!({"interactive": true, "depth": 2}))).unwrap();
        assert_eq!((snapshot.method, snapshot.path.as_str()), ("GET", "/snapshot"));
        assert_eq!(snapshot.query, [("depth".to_string(), "2".to_string()), ("interactive".into(), "true".into())]);
        let click = request_for(Route::Act("click"), args(json!({"ref": "e3", "targetId": "T1"}))).unwrap();
        assert_eq!(click.body, Some(json!({"kind": "click", "ref": "e3", "targetId": "T1"})));
        let close = request_for(Route::CloseTab, args(json!({"targetId": "A/B", "profile": "work"}))).unwrap();
        assert_eq!((close.method, close.path.as_str()), ("DELETE", "/tabs/A%2FB"));
        assert_eq!(close.query, [("profile".to_string(), "work".to_string())]);
        let missing = request_for(Route::CloseTab, Map::new()).unwrap_err();
        assert!(missing.contains("targetId"), "{missing}");
    }

    #[test]
    fn every_tool_has_a_strict_schema_with_its_required_fields() {
        let mut names: Vec<&str> = TOOLS.iter().map(|t| t.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), TOOLS.len(), "tool names are unique");
        for spec in TOOLS {
            let schema = spec.input_schema();
            let properties = schema["properties"].as_object().unwrap();
            for required in spec.required {
                assert!(properties.contains_key(*required), "{}: {required} is described", spec.name);
            }
            assert!(properties.contains_key("profile"), "{}", spec.name);
            assert_eq!(schema["additionalProperties"], false, "{}", spec.name);
        }
        let kinds: Vec<&str> =
            TOOLS.iter().filter_map(|t| if let Route::Act(k) = t.route { Some(k) } else { None }).collect();
        assert_eq!(kinds.len(), 11, "one tool per /act kind: {kinds:?}");
    }

    #[test]
    fn snapshots_read_as_text_with_their_notes() {
        let answer = json!({"targetId": "T1", "title": "Form", "url": "http://x/", "snapshot": "- button \"Go\" [ref=e1]", "notes": ["cut at depth 2"]});
        let content = content_for(Route::Get("/snapshot"), &answer);
        let text = serde_json::to_value(&content[0]).unwrap()["text"].as_str().unwrap().to_string();
        assert_eq!(text, "tab T1 · Form · http://x/\n- button \"Go\" [ref=e1]\n# cut at depth 2");
    }
}
