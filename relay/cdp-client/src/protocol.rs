//! Typed CDP: the commands and events Browser Relay's engines speak, each a
//! struct named after its method, with its result type. A field typo no
//! longer compiles, and a result is read by name, not by `v["x"]["y"]`.
//!
//! Only what the engines use is here, with the fields they read (serde
//! ignores the rest). The relay's pass-through stays raw: it forwards
//! clients' CDP byte for byte and types nothing it does not route on.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// An event as received.
#[derive(Debug, Clone, PartialEq)]
pub struct CdpEvent {
    pub method: String,
    pub params: Value,
    pub session_id: Option<String>,
}

/// A CDP command: its method and the result it answers with.
pub trait Command: Serialize {
    const METHOD: &'static str;
    type Response: DeserializeOwned;
}

/// A CDP event: its method and its parameters.
pub trait Event: DeserializeOwned {
    const METHOD: &'static str;
}

impl CdpEvent {
    /// The event's parameters as `E`, when it is that event.
    pub fn parse<E: Event>(&self) -> Option<E> {
        if self.method != E::METHOD {
            return None;
        }
        match E::deserialize(&self.params) {
            Ok(event) => Some(event),
            Err(error) => {
                tracing::debug!(method = E::METHOD, "an event that does not parse: {error}");
                None
            }
        }
    }
}

/// A result with nothing in it (`{}`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct Empty {}

macro_rules! command {
    ($type:ty, $method:literal => $response:ty) => {
        impl Command for $type {
            const METHOD: &'static str = $method;
            type Response = $response;
        }
    };
}

macro_rules! event {
    ($type:ty, $method:literal) => {
        impl Event for $type {
            const METHOD: &'static str = $method;
        }
    };
}

pub mod browser {
    use super::*;

    #[derive(Debug, Clone, Default, Serialize)]
    pub struct GetVersion {}
    command!(GetVersion, "Browser.getVersion" => Version);

    #[derive(Debug, Clone, Default, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct Version {
        #[serde(default)]
        pub protocol_version: String,
        /// e.g. `Chrome/156.0.8078.73` (`HeadlessChrome/…` when headless).
        #[serde(default)]
        pub product: String,
        #[serde(default)]
        pub user_agent: String,
        #[serde(default)]
        pub js_version: String,
        /// The Blink revision (what `/json/version`'s `WebKit-Version` names).
        #[serde(default)]
        pub revision: String,
    }

    #[derive(Debug, Clone, Default, Serialize)]
    pub struct Close {}
    command!(Close, "Browser.close" => Empty);
}

pub mod target {
    use super::*;

    #[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct TargetInfo {
        pub target_id: String,
        #[serde(rename = "type")]
        pub kind: String,
        #[serde(default)]
        pub title: String,
        #[serde(default)]
        pub url: String,
        #[serde(default)]
        pub attached: bool,
        #[serde(default)]
        pub opener_id: Option<String>,
        #[serde(default)]
        pub browser_context_id: Option<String>,
    }

    #[derive(Debug, Clone, Serialize)]
    pub struct SetDiscoverTargets {
        pub discover: bool,
    }
    command!(SetDiscoverTargets, "Target.setDiscoverTargets" => Empty);

    #[derive(Debug, Clone, Default, Serialize)]
    pub struct GetTargets {}
    command!(GetTargets, "Target.getTargets" => Targets);

    #[derive(Debug, Clone, Default, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct Targets {
        pub target_infos: Vec<TargetInfo>,
    }

    #[derive(Debug, Clone, Serialize)]
    #[serde(rename_all = "camelCase")]
    pub struct AttachToTarget {
        pub target_id: String,
        pub flatten: bool,
    }
    command!(AttachToTarget, "Target.attachToTarget" => Attached);

    #[derive(Debug, Clone, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct Attached {
        pub session_id: String,
    }

    #[derive(Debug, Clone, Serialize)]
    #[serde(rename_all = "camelCase")]
    pub struct SetAutoAttach {
        pub auto_attach: bool,
        pub wait_for_debugger_on_start: bool,
        pub flatten: bool,
    }
    command!(SetAutoAttach, "Target.setAutoAttach" => Empty);

    #[derive(Debug, Clone, Serialize)]
    pub struct CreateTarget {
        pub url: String,
    }
    command!(CreateTarget, "Target.createTarget" => Created);

    #[derive(Debug, Clone, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct Created {
        pub target_id: String,
    }

    #[derive(Debug, Clone, Serialize)]
    #[serde(rename_all = "camelCase")]
    pub struct CloseTarget {
        pub target_id: String,
    }
    command!(CloseTarget, "Target.closeTarget" => Empty);

    #[derive(Debug, Clone, Serialize)]
    #[serde(rename_all = "camelCase")]
    pub struct ActivateTarget {
        pub target_id: String,
    }
    command!(ActivateTarget, "Target.activateTarget" => Empty);

    /// One target as the browser knows it: answered by the browser, so it
    /// works while the page's scripts are paused (by a dialog). Without a
    /// `target_id`, the target of the connection itself (on a browser
    /// connection, the browser's).
    #[derive(Debug, Clone, Serialize)]
    #[serde(rename_all = "camelCase")]
    pub struct GetTargetInfo {
        #[serde(skip_serializing_if = "Option::is_none")]
        pub target_id: Option<String>,
    }
    command!(GetTargetInfo, "Target.getTargetInfo" => TargetInfoOf);

    #[derive(Debug, Clone, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct TargetInfoOf {
        pub target_info: TargetInfo,
    }

    #[derive(Debug, Clone, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct TargetCreated {
        pub target_info: TargetInfo,
    }
    event!(TargetCreated, "Target.targetCreated");

    #[derive(Debug, Clone, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct TargetInfoChanged {
        pub target_info: TargetInfo,
    }
    event!(TargetInfoChanged, "Target.targetInfoChanged");

    #[derive(Debug, Clone, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct TargetDestroyed {
        pub target_id: String,
    }
    event!(TargetDestroyed, "Target.targetDestroyed");

    #[derive(Debug, Clone, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct AttachedToTarget {
        pub session_id: String,
        pub target_info: TargetInfo,
        #[serde(default)]
        pub waiting_for_debugger: bool,
    }
    event!(AttachedToTarget, "Target.attachedToTarget");

    #[derive(Debug, Clone, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct DetachedFromTarget {
        pub session_id: String,
    }
    event!(DetachedFromTarget, "Target.detachedFromTarget");
}

pub mod page {
    use super::*;

    #[derive(Debug, Clone, Default, Serialize)]
    pub struct Enable {}
    command!(Enable, "Page.enable" => Empty);

    #[derive(Debug, Clone, Serialize)]
    pub struct SetLifecycleEventsEnabled {
        pub enabled: bool,
    }
    command!(SetLifecycleEventsEnabled, "Page.setLifecycleEventsEnabled" => Empty);

    #[derive(Debug, Clone, Serialize)]
    pub struct Navigate {
        pub url: String,
    }
    command!(Navigate, "Page.navigate" => Navigated);

    #[derive(Debug, Clone, Default, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct Navigated {
        #[serde(default)]
        pub frame_id: String,
        /// None for a same-document navigation.
        #[serde(default)]
        pub loader_id: Option<String>,
        #[serde(default)]
        pub error_text: Option<String>,
    }

    #[derive(Debug, Clone, Default, Serialize)]
    pub struct GetFrameTree {}
    command!(GetFrameTree, "Page.getFrameTree" => FrameTreeResult);

    #[derive(Debug, Clone, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct FrameTreeResult {
        pub frame_tree: FrameTree,
    }

    #[derive(Debug, Clone, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct FrameTree {
        pub frame: Frame,
        #[serde(default)]
        pub child_frames: Vec<FrameTree>,
    }

    impl FrameTree {
        /// Whether this tree holds the frame.
        pub fn contains(&self, frame_id: &str) -> bool {
            self.frame.id == frame_id || self.child_frames.iter().any(|child| child.contains(frame_id))
        }
    }

    #[derive(Debug, Clone, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct Frame {
        pub id: String,
        #[serde(default)]
        pub parent_id: Option<String>,
        #[serde(default)]
        pub url: String,
        /// The document's loader (its lifecycle events carry the same id).
        #[serde(default)]
        pub loader_id: String,
    }

    #[derive(Debug, Clone, Serialize)]
    #[serde(rename_all = "camelCase")]
    pub struct CreateIsolatedWorld {
        pub frame_id: String,
        pub world_name: String,
        /// Chrome's spelling.
        #[serde(rename = "grantUniveralAccess")]
        pub grant_universal_access: bool,
    }
    command!(CreateIsolatedWorld, "Page.createIsolatedWorld" => IsolatedWorld);

    #[derive(Debug, Clone, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct IsolatedWorld {
        pub execution_context_id: i64,
    }

    #[derive(Debug, Clone, Default, Serialize)]
    pub struct GetLayoutMetrics {}
    command!(GetLayoutMetrics, "Page.getLayoutMetrics" => LayoutMetrics);

    #[derive(Debug, Clone, Default, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct LayoutMetrics {
        pub css_visual_viewport: VisualViewport,
        pub css_content_size: Rect,
    }

    #[derive(Debug, Clone, Copy, Default, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct VisualViewport {
        pub page_x: f64,
        pub page_y: f64,
    }

    #[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
    pub struct Rect {
        #[serde(default)]
        pub x: f64,
        #[serde(default)]
        pub y: f64,
        pub width: f64,
        pub height: f64,
    }

    /// A region of the page to capture, in CSS pixels.
    #[derive(Debug, Clone, Copy, PartialEq, Serialize)]
    pub struct Viewport {
        pub x: f64,
        pub y: f64,
        pub width: f64,
        pub height: f64,
        pub scale: f64,
    }

    #[derive(Debug, Clone, Default, Serialize)]
    #[serde(rename_all = "camelCase")]
    pub struct CaptureScreenshot {
        /// `png` or `jpeg`.
        pub format: &'static str,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub quality: Option<u8>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub clip: Option<Viewport>,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        pub capture_beyond_viewport: bool,
    }
    command!(CaptureScreenshot, "Page.captureScreenshot" => Data);

    #[derive(Debug, Clone, Default, Serialize)]
    #[serde(rename_all = "camelCase")]
    pub struct PrintToPdf {
        pub print_background: bool,
    }
    command!(PrintToPdf, "Page.printToPDF" => Data);

    /// Base64 data (screenshots, PDFs).
    #[derive(Debug, Clone, Default, Deserialize)]
    pub struct Data {
        pub data: String,
    }

    #[derive(Debug, Clone, Serialize)]
    #[serde(rename_all = "camelCase")]
    pub struct HandleJavaScriptDialog {
        pub accept: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub prompt_text: Option<String>,
    }
    command!(HandleJavaScriptDialog, "Page.handleJavaScriptDialog" => Empty);

    #[derive(Debug, Clone, Serialize)]
    pub struct SetInterceptFileChooserDialog {
        pub enabled: bool,
    }
    command!(SetInterceptFileChooserDialog, "Page.setInterceptFileChooserDialog" => Empty);

    #[derive(Debug, Clone, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct LifecycleEvent {
        pub frame_id: String,
        #[serde(default)]
        pub loader_id: String,
        pub name: String,
    }
    event!(LifecycleEvent, "Page.lifecycleEvent");

    #[derive(Debug, Clone, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct FrameNavigated {
        pub frame: Frame,
        /// `Navigation`, or `BackForwardCacheRestore` (a page restored
        /// whole: no lifecycle events follow).
        #[serde(rename = "type", default)]
        pub kind: String,
    }
    event!(FrameNavigated, "Page.frameNavigated");

    #[derive(Debug, Clone, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct NavigatedWithinDocument {
        pub frame_id: String,
        #[serde(default)]
        pub url: String,
    }
    event!(NavigatedWithinDocument, "Page.navigatedWithinDocument");

    #[derive(Debug, Clone, Default, Serialize)]
    pub struct GetNavigationHistory {}
    command!(GetNavigationHistory, "Page.getNavigationHistory" => NavigationHistory);

    #[derive(Debug, Clone, Default, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct NavigationHistory {
        pub current_index: usize,
        pub entries: Vec<NavigationEntry>,
    }

    #[derive(Debug, Clone, Default, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct NavigationEntry {
        pub id: i64,
        #[serde(default)]
        pub url: String,
        #[serde(default)]
        pub title: String,
    }

    #[derive(Debug, Clone, Serialize)]
    #[serde(rename_all = "camelCase")]
    pub struct NavigateToHistoryEntry {
        pub entry_id: i64,
    }
    command!(NavigateToHistoryEntry, "Page.navigateToHistoryEntry" => Empty);

    /// A frame's navigation, from its request to its first load; the
    /// three events that say one has begun.
    #[derive(Debug, Clone, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct FrameRequestedNavigation {
        pub frame_id: String,
    }
    event!(FrameRequestedNavigation, "Page.frameRequestedNavigation");

    #[derive(Debug, Clone, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct FrameStartedNavigating {
        pub frame_id: String,
    }
    event!(FrameStartedNavigating, "Page.frameStartedNavigating");

    #[derive(Debug, Clone, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct FrameStartedLoading {
        pub frame_id: String,
    }
    event!(FrameStartedLoading, "Page.frameStartedLoading");

    #[derive(Debug, Clone, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct JavascriptDialogOpening {
        #[serde(rename = "type", default)]
        pub kind: String,
        #[serde(default)]
        pub message: String,
        #[serde(default)]
        pub default_prompt: Option<String>,
    }
    event!(JavascriptDialogOpening, "Page.javascriptDialogOpening");

    #[derive(Debug, Clone, Deserialize)]
    pub struct JavascriptDialogClosed {}
    event!(JavascriptDialogClosed, "Page.javascriptDialogClosed");

    #[derive(Debug, Clone, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct FileChooserOpened {
        #[serde(default)]
        pub backend_node_id: Option<i64>,
    }
    event!(FileChooserOpened, "Page.fileChooserOpened");
}

pub mod runtime {
    use super::*;

    #[derive(Debug, Clone, Default, Serialize)]
    pub struct Enable {}
    command!(Enable, "Runtime.enable" => Empty);

    #[derive(Debug, Clone, Default, Serialize)]
    pub struct RunIfWaitingForDebugger {}
    command!(RunIfWaitingForDebugger, "Runtime.runIfWaitingForDebugger" => Empty);

    /// A JavaScript value as CDP describes it.
    #[derive(Debug, Clone, Default, PartialEq, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct RemoteObject {
        #[serde(rename = "type", default)]
        pub kind: String,
        #[serde(default)]
        pub subtype: Option<String>,
        /// Set when returned by value (absent for `undefined`).
        #[serde(default)]
        pub value: Option<Value>,
        #[serde(default)]
        pub unserializable_value: Option<String>,
        #[serde(default)]
        pub description: Option<String>,
        #[serde(default)]
        pub object_id: Option<String>,
    }

    impl RemoteObject {
        /// The value, `Null` when there is none (`undefined`).
        pub fn into_value(self) -> Value {
            self.value.unwrap_or(Value::Null)
        }
    }

    #[derive(Debug, Clone, Default, PartialEq, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct ExceptionDetails {
        #[serde(default)]
        pub text: String,
        #[serde(default)]
        pub url: Option<String>,
        #[serde(default)]
        pub line_number: i64,
        #[serde(default)]
        pub column_number: i64,
        #[serde(default)]
        pub exception: Option<RemoteObject>,
    }

    impl ExceptionDetails {
        /// What a developer would read: the exception's description (its
        /// message and stack), else its value, else the text.
        pub fn description(&self) -> String {
            let exception = self.exception.as_ref();
            exception
                .and_then(|e| e.description.clone())
                .or_else(|| exception.and_then(|e| e.value.as_ref()).and_then(Value::as_str).map(str::to_string))
                .unwrap_or_else(|| self.text.clone())
        }
    }

    #[derive(Debug, Clone, Default, Serialize)]
    #[serde(rename_all = "camelCase")]
    pub struct Evaluate {
        pub expression: String,
        pub return_by_value: bool,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        pub await_promise: bool,
    }
    command!(Evaluate, "Runtime.evaluate" => Evaluated);

    impl Evaluate {
        /// An expression whose value comes back as JSON.
        pub fn value(expression: impl Into<String>) -> Self {
            Self { expression: expression.into(), return_by_value: true, await_promise: false }
        }

        /// Like [`Self::value`], awaiting a promise.
        pub fn awaited(expression: impl Into<String>) -> Self {
            Self { expression: expression.into(), return_by_value: true, await_promise: true }
        }
    }

    #[derive(Debug, Clone, Default, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct Evaluated {
        pub result: RemoteObject,
        #[serde(default)]
        pub exception_details: Option<ExceptionDetails>,
    }

    /// An argument of `Runtime.callFunctionOn`: a JSON value or an object.
    #[derive(Debug, Clone, PartialEq, Serialize)]
    #[serde(rename_all = "camelCase")]
    pub enum CallArgument {
        Value(Value),
        ObjectId(String),
    }

    #[derive(Debug, Clone, Default, Serialize)]
    #[serde(rename_all = "camelCase")]
    pub struct CallFunctionOn {
        /// Borrowed when it is a script of ours (sent with every call).
        pub function_declaration: std::borrow::Cow<'static, str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub object_id: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub execution_context_id: Option<i64>,
        pub arguments: Vec<CallArgument>,
        pub return_by_value: bool,
        pub await_promise: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub object_group: Option<String>,
    }
    command!(CallFunctionOn, "Runtime.callFunctionOn" => Evaluated);

    #[derive(Debug, Clone, Serialize)]
    #[serde(rename_all = "camelCase")]
    pub struct ReleaseObject {
        pub object_id: String,
    }
    command!(ReleaseObject, "Runtime.releaseObject" => Empty);

    #[derive(Debug, Clone, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct ExecutionContextDescription {
        pub id: i64,
        #[serde(default)]
        pub name: String,
        #[serde(default)]
        pub aux_data: Option<Value>,
    }

    impl ExecutionContextDescription {
        /// The frame it belongs to (Chrome's `auxData.frameId`).
        pub fn frame_id(&self) -> Option<&str> {
            self.aux_data.as_ref()?.get("frameId")?.as_str()
        }
    }

    #[derive(Debug, Clone, Deserialize)]
    pub struct ExecutionContextCreated {
        pub context: ExecutionContextDescription,
    }
    event!(ExecutionContextCreated, "Runtime.executionContextCreated");

    #[derive(Debug, Clone, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct ExecutionContextDestroyed {
        pub execution_context_id: i64,
    }
    event!(ExecutionContextDestroyed, "Runtime.executionContextDestroyed");

    #[derive(Debug, Clone, Deserialize)]
    pub struct ExecutionContextsCleared {}
    event!(ExecutionContextsCleared, "Runtime.executionContextsCleared");

    #[derive(Debug, Clone, Default, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct CallFrame {
        #[serde(default)]
        pub url: String,
        #[serde(default)]
        pub line_number: i64,
        #[serde(default)]
        pub column_number: i64,
    }

    #[derive(Debug, Clone, Default, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct StackTrace {
        #[serde(default)]
        pub call_frames: Vec<CallFrame>,
    }

    #[derive(Debug, Clone, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct ConsoleApiCalled {
        #[serde(rename = "type", default)]
        pub kind: String,
        #[serde(default)]
        pub args: Vec<RemoteObject>,
        #[serde(default)]
        pub timestamp: f64,
        #[serde(default)]
        pub stack_trace: Option<StackTrace>,
    }
    event!(ConsoleApiCalled, "Runtime.consoleAPICalled");

    #[derive(Debug, Clone, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct ExceptionThrown {
        #[serde(default)]
        pub timestamp: f64,
        pub exception_details: ExceptionDetails,
    }
    event!(ExceptionThrown, "Runtime.exceptionThrown");
}

pub mod network {
    use super::*;

    #[derive(Debug, Clone, Default, Serialize)]
    pub struct Enable {}
    command!(Enable, "Network.enable" => Empty);

    #[derive(Debug, Clone, Default, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct Request {
        pub url: String,
        pub method: String,
    }

    #[derive(Debug, Clone, Default, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct Response {
        #[serde(default)]
        pub url: String,
        pub status: i64,
        #[serde(default)]
        pub mime_type: String,
        #[serde(default)]
        pub from_disk_cache: bool,
        #[serde(default)]
        pub from_prefetch_cache: bool,
        #[serde(default)]
        pub from_service_worker: bool,
        /// Bytes received so far (headers included).
        #[serde(default)]
        pub encoded_data_length: f64,
    }

    /// What made a request: `parser`, `script`, `preload`, `other` (the
    /// browser itself, e.g. a navigation or the favicon), …
    #[derive(Debug, Clone, Default, Deserialize)]
    pub struct Initiator {
        #[serde(rename = "type", default)]
        pub kind: String,
    }

    /// A request is about to be sent; with `redirect_response`, the same
    /// `request_id` is being redirected (the response that redirected it).
    #[derive(Debug, Clone, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct RequestWillBeSent {
        pub request_id: String,
        pub request: Request,
        /// Monotonic seconds (the clock of the other network events).
        pub timestamp: f64,
        /// Seconds since the epoch.
        #[serde(default)]
        pub wall_time: f64,
        /// `Document`, `Script`, `Image`, `Fetch`, `XHR`, …
        #[serde(rename = "type", default)]
        pub kind: Option<String>,
        #[serde(default)]
        pub redirect_response: Option<Response>,
        /// The document the request belongs to; a navigation's own
        /// request carries the loader of the document it will commit.
        #[serde(default)]
        pub loader_id: String,
        #[serde(default)]
        pub frame_id: Option<String>,
        #[serde(default)]
        pub initiator: Initiator,
    }
    event!(RequestWillBeSent, "Network.requestWillBeSent");

    #[derive(Debug, Clone, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct ResponseReceived {
        pub request_id: String,
        #[serde(default)]
        pub timestamp: f64,
        #[serde(rename = "type", default)]
        pub kind: Option<String>,
        pub response: Response,
    }
    event!(ResponseReceived, "Network.responseReceived");

    #[derive(Debug, Clone, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct LoadingFinished {
        pub request_id: String,
        pub timestamp: f64,
        /// Bytes received over the network (headers included).
        #[serde(default)]
        pub encoded_data_length: f64,
    }
    event!(LoadingFinished, "Network.loadingFinished");

    #[derive(Debug, Clone, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct LoadingFailed {
        pub request_id: String,
        pub timestamp: f64,
        #[serde(rename = "type", default)]
        pub kind: Option<String>,
        /// `net::ERR_…`
        #[serde(default)]
        pub error_text: String,
        #[serde(default)]
        pub canceled: bool,
        #[serde(default)]
        pub blocked_reason: Option<String>,
    }
    event!(LoadingFailed, "Network.loadingFailed");

    /// The request was answered from the memory cache.
    #[derive(Debug, Clone, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct RequestServedFromCache {
        pub request_id: String,
    }
    event!(RequestServedFromCache, "Network.requestServedFromCache");

    #[derive(Debug, Clone, Serialize)]
    #[serde(rename_all = "camelCase")]
    pub struct GetResponseBody {
        pub request_id: String,
    }
    command!(GetResponseBody, "Network.getResponseBody" => ResponseBody);

    #[derive(Debug, Clone, Default, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct ResponseBody {
        pub body: String,
        pub base64_encoded: bool,
    }
}

/// Chrome's own messages (a resource that failed to load, interventions,
/// violations): what DevTools shows beside the page's `console` calls.
pub mod log {
    use super::*;

    #[derive(Debug, Clone, Default, Serialize)]
    pub struct Enable {}
    command!(Enable, "Log.enable" => Empty);

    #[derive(Debug, Clone, Default, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct LogEntry {
        /// `network`, `javascript`, `security`, `violation`, `worker`, …
        #[serde(default)]
        pub source: String,
        /// `verbose`, `info`, `warning` or `error`.
        #[serde(default)]
        pub level: String,
        #[serde(default)]
        pub text: String,
        /// Milliseconds since the epoch.
        #[serde(default)]
        pub timestamp: f64,
        #[serde(default)]
        pub url: Option<String>,
        #[serde(default)]
        pub line_number: Option<i64>,
    }

    #[derive(Debug, Clone, Deserialize)]
    pub struct EntryAdded {
        pub entry: LogEntry,
    }
    event!(EntryAdded, "Log.entryAdded");
}

pub mod dom {
    use super::*;

    #[derive(Debug, Clone, Default, Serialize)]
    #[serde(rename_all = "camelCase")]
    pub struct DescribeNode {
        #[serde(skip_serializing_if = "Option::is_none")]
        pub object_id: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub backend_node_id: Option<i64>,
    }
    command!(DescribeNode, "DOM.describeNode" => Described);

    #[derive(Debug, Clone, Deserialize)]
    pub struct Described {
        pub node: Node,
    }

    #[derive(Debug, Clone, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct Node {
        pub backend_node_id: i64,
        /// Set on `<iframe>` elements: the frame they hold.
        #[serde(default)]
        pub frame_id: Option<String>,
    }

    #[derive(Debug, Clone, Serialize)]
    #[serde(rename_all = "camelCase")]
    pub struct ResolveNode {
        pub backend_node_id: i64,
    }
    command!(ResolveNode, "DOM.resolveNode" => Resolved);

    #[derive(Debug, Clone, Deserialize)]
    pub struct Resolved {
        pub object: crate::protocol::runtime::RemoteObject,
    }

    #[derive(Debug, Clone, Serialize)]
    #[serde(rename_all = "camelCase")]
    pub struct GetBoxModel {
        pub backend_node_id: i64,
    }
    command!(GetBoxModel, "DOM.getBoxModel" => BoxModelResult);

    #[derive(Debug, Clone, Deserialize)]
    pub struct BoxModelResult {
        pub model: BoxModel,
    }

    #[derive(Debug, Clone, Deserialize)]
    pub struct BoxModel {
        /// The content box's four corners: x1, y1, … x4, y4.
        pub content: Vec<f64>,
    }

    #[derive(Debug, Clone, Default, Serialize)]
    #[serde(rename_all = "camelCase")]
    pub struct SetFileInputFiles {
        pub files: Vec<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub object_id: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub backend_node_id: Option<i64>,
    }
    command!(SetFileInputFiles, "DOM.setFileInputFiles" => Empty);
}

pub mod input {
    use super::*;

    #[derive(Debug, Clone, Default, Serialize)]
    #[serde(rename_all = "camelCase")]
    pub struct DispatchMouseEvent {
        /// `mouseMoved`, `mousePressed` or `mouseReleased`.
        #[serde(rename = "type")]
        pub kind: &'static str,
        pub x: f64,
        pub y: f64,
        pub modifiers: i64,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub button: Option<&'static str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub buttons: Option<i64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub click_count: Option<i64>,
    }
    command!(DispatchMouseEvent, "Input.dispatchMouseEvent" => Empty);

    #[derive(Debug, Clone, Default, Serialize)]
    #[serde(rename_all = "camelCase")]
    pub struct DispatchKeyEvent {
        /// `keyDown`, `rawKeyDown` or `keyUp`.
        #[serde(rename = "type")]
        pub kind: &'static str,
        pub key: String,
        pub code: String,
        pub windows_virtual_key_code: i64,
        pub native_virtual_key_code: i64,
        pub modifiers: i64,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub text: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub unmodified_text: Option<String>,
    }
    command!(DispatchKeyEvent, "Input.dispatchKeyEvent" => Empty);

    #[derive(Debug, Clone, Serialize)]
    pub struct InsertText {
        pub text: String,
    }
    command!(InsertText, "Input.insertText" => Empty);

    #[derive(Debug, Clone, Serialize)]
    pub struct SetInterceptDrags {
        pub enabled: bool,
    }
    command!(SetInterceptDrags, "Input.setInterceptDrags" => Empty);

    #[derive(Debug, Clone, Serialize)]
    #[serde(rename_all = "camelCase")]
    pub struct DispatchDragEvent {
        /// `dragEnter`, `dragOver`, `drop` or `dragCancel`.
        #[serde(rename = "type")]
        pub kind: &'static str,
        pub x: f64,
        pub y: f64,
        /// As `Input.dragIntercepted` gave it.
        pub data: Value,
        pub modifiers: i64,
    }
    command!(DispatchDragEvent, "Input.dispatchDragEvent" => Empty);

    #[derive(Debug, Clone, Deserialize)]
    pub struct DragIntercepted {
        pub data: Value,
    }
    event!(DragIntercepted, "Input.dragIntercepted");
}

pub mod emulation {
    use super::*;

    #[derive(Debug, Clone, Serialize)]
    #[serde(rename_all = "camelCase")]
    pub struct SetDeviceMetricsOverride {
        pub width: u32,
        pub height: u32,
        pub device_scale_factor: f64,
        pub mobile: bool,
    }
    command!(SetDeviceMetricsOverride, "Emulation.setDeviceMetricsOverride" => Empty);
}

pub mod accessibility {
    use super::*;

    #[derive(Debug, Clone, Default, Serialize)]
    #[serde(rename_all = "camelCase")]
    pub struct GetFullAxTree {
        /// A frame of the session (default: its main frame).
        #[serde(skip_serializing_if = "Option::is_none")]
        pub frame_id: Option<String>,
    }
    command!(GetFullAxTree, "Accessibility.getFullAXTree" => AxTree);

    /// Chrome's nodes as they come: the `aria` snapshot passes them on.
    #[derive(Debug, Clone, Default, Deserialize)]
    pub struct AxTree {
        pub nodes: Vec<Value>,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn commands_serialise_as_chrome_spells_them() {
        let world =
            page::CreateIsolatedWorld { frame_id: "F".into(), world_name: "w".into(), grant_universal_access: false };
        assert_eq!(
            serde_json::to_value(&world).unwrap(),
            json!({"frameId": "F", "worldName": "w", "grantUniveralAccess": false})
        );
        let call = runtime::CallFunctionOn {
            function_declaration: "f".into(),
            execution_context_id: Some(3),
            arguments: vec![runtime::CallArgument::Value(json!("op")), runtime::CallArgument::ObjectId("O".into())],
            ..Default::default()
        };
        let value = serde_json::to_value(&call).unwrap();
        assert_eq!(value["arguments"], json!([{"value": "op"}, {"objectId": "O"}]));
        assert!(value.get("objectId").is_none(), "absent options are left out");
        let click = input::DispatchMouseEvent { kind: "mousePressed", button: Some("left"), ..Default::default() };
        assert_eq!(serde_json::to_value(&click).unwrap()["type"], "mousePressed");
    }

    #[test]
    fn events_parse_only_as_themselves() {
        let event = CdpEvent {
            method: "Page.lifecycleEvent".into(),
            params: json!({"frameId": "F", "loaderId": "L", "name": "load", "timestamp": 1.0}),
            session_id: Some("S".into()),
        };
        assert_eq!(event.parse::<page::LifecycleEvent>().unwrap().name, "load");
        assert!(event.parse::<page::FrameNavigated>().is_none());
    }

    #[test]
    fn network_and_log_events_read_chromes_fields() {
        let redirected = CdpEvent {
            method: "Network.requestWillBeSent".into(),
            params: json!({"requestId": "R", "loaderId": "L", "timestamp": 2.5, "wallTime": 1.7e9, "type": "Document",
                "request": {"url": "http://x/new", "method": "GET", "headers": {}},
                "redirectResponse": {"url": "http://x/old", "status": 302, "statusText": "Found", "headers": {},
                    "mimeType": "", "encodedDataLength": 180}}),
            session_id: Some("S".into()),
        };
        let sent = redirected.parse::<network::RequestWillBeSent>().unwrap();
        assert_eq!((sent.kind.as_deref(), sent.redirect_response.map(|r| r.status)), (Some("Document"), Some(302)));
        let entry = CdpEvent {
            method: "Log.entryAdded".into(),
            params: json!({"entry": {"source": "network", "level": "error", "text": "Failed to load resource",
                "timestamp": 1.7e12, "url": "http://x/missing.json", "networkRequestId": "R"}}),
            session_id: Some("S".into()),
        };
        assert_eq!(entry.parse::<log::EntryAdded>().unwrap().entry.source, "network");
        let history: page::NavigationHistory = serde_json::from_value(json!({"currentIndex": 1, "entries": [
            {"id": 3, "url": "http://x/a", "userTypedURL": "", "title": "A", "transitionType": "typed"},
            {"id": 5, "url": "http://x/b", "userTypedURL": "", "title": "B", "transitionType": "link"}]}))
        .unwrap();
        assert_eq!((history.current_index, history.entries[0].id), (1, 3));
    }

    #[test]
    fn exceptions_read_as_a_developer_would() {
        let details: runtime::ExceptionDetails = serde_json::from_value(
            json!({"text": "Uncaught", "exception": {"type": "object", "description": "Error: boom\n    at x"}}),
        )
        .unwrap();
        assert!(details.description().starts_with("Error: boom"));
        let thrown: runtime::ExceptionDetails =
            serde_json::from_value(json!({"text": "Uncaught", "exception": {"type": "string", "value": "s"}})).unwrap();
        assert_eq!(thrown.description(), "s");
    }
}
