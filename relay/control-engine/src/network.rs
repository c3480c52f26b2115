//! What the tab asked of the network. [`NetworkLog`] is each tab's bounded
//! log, fed by `conn.rs` from the `Network.*` events of the tab's sessions
//! (its out-of-process iframes and workers included); the handlers of
//! `GET /requests` and `GET /requests/body` (`requests.rs`) filter it, and
//! ask Chrome for a body only when an agent wants one.
//!
//! A request is keyed by its `requestId`. A redirect keeps one entry per
//! hop (as DevTools lists them): the hop that was redirected gets the
//! redirect's status, and the next hop is a new entry with the same
//! `requestId`; a body is always the last hop's.

use std::collections::VecDeque;

use base64::Engine as _;
use cdp_client::protocol::network;

use crate::api::{ListRequests, NetworkRequest, RequestList, ResponseBody};
use crate::error::ControlError;

/// Requests kept per tab (the newest).
pub(crate) const REQUESTS_KEPT: usize = 500;
/// Characters of a URL kept (data: URLs can be megabytes).
pub(crate) const URL_KEPT: usize = 2_000;
/// Bytes of a body answered.
pub(crate) const BODY_KEPT: usize = 256 * 1024;
/// Requests `GET /requests` answers without a `limit`.
const DEFAULT_LIMIT: usize = 100;

/// One request (one hop of a redirect), and what reading its body needs.
#[derive(Debug, Clone)]
pub(crate) struct Recorded {
    pub request: NetworkRequest,
    /// The session whose events reported the response: Chrome keeps the
    /// body there.
    pub session: String,
    /// When it was sent, in the network events' monotonic seconds.
    sent: f64,
    /// Its place among the requests the log ever recorded.
    order: u64,
    /// The document it belongs to (a navigation's own request: the one it
    /// commits).
    loader: String,
    /// Fetched by the browser for itself (the favicon), not by the page.
    pub browsers_own: bool,
}

/// A tab's requests, oldest first, at most [`REQUESTS_KEPT`], each marked
/// with the page (the main frame's document) it belongs to.
#[derive(Debug)]
pub(crate) struct NetworkLog {
    entries: VecDeque<Recorded>,
    /// Requests recorded so far: an action's mark (the ones after it are
    /// its doing).
    recorded: u64,
    /// The current page: 1 for the document the log began with, one more
    /// for each the main frame committed since.
    page: u32,
    /// The newest pages' documents: a late request of a page that is gone
    /// (a beacon as it unloads) still belongs to it.
    loaders: VecDeque<(String, u32)>,
}

/// Pages whose document is remembered.
const PAGES_KNOWN: usize = 16;

impl Default for NetworkLog {
    fn default() -> Self {
        Self { entries: VecDeque::new(), recorded: 0, page: 1, loaders: VecDeque::new() }
    }
}

impl NetworkLog {
    /// `Network.requestWillBeSent`: a new request, or the next hop of a
    /// redirected one.
    pub(crate) fn will_be_sent(&mut self, session: &str, sent: network::RequestWillBeSent) {
        if let Some(redirect) = &sent.redirect_response {
            if let Some(hop) = self.newest_mut(&sent.request_id) {
                hop.respond(session, redirect);
                hop.end(sent.timestamp);
                hop.request.size = Some(redirect.encoded_data_length.max(0.0) as u64);
            }
        } else if self.newest_mut(&sent.request_id).is_some() {
            // Reported twice (a frame's request seen by its parent's
            // session and its own): the first report stands.
            return;
        }
        let kind = sent.kind.unwrap_or_else(|| "Other".into());
        let browsers_own = kind == "Other" && sent.initiator.kind == "other";
        let page = self.loaders.iter().find(|(loader, _)| *loader == sent.loader_id).map_or(self.page, |(_, p)| *p);
        let request = NetworkRequest {
            request_id: sent.request_id,
            method: sent.request.method,
            url: capped_url(&sent.request.url),
            resource_type: kind,
            start_time: (sent.wall_time * 1000.0).round(),
            page,
            ..NetworkRequest::default()
        };
        if self.entries.len() == REQUESTS_KEPT {
            self.entries.pop_front();
        }
        let order = self.recorded;
        self.recorded += 1;
        self.entries.push_back(Recorded {
            request,
            session: session.to_string(),
            sent: sent.timestamp,
            order,
            loader: sent.loader_id,
            browsers_own,
        });
    }

    /// The main frame committed a new document (`loader`): a new page
    /// begins, with the request that brought it.
    pub(crate) fn new_page(&mut self, loader: &str) {
        if !loader.is_empty() && self.loaders.back().is_some_and(|(known, _)| known == loader) {
            return;
        }
        self.page += 1;
        if self.loaders.len() == PAGES_KNOWN {
            self.loaders.pop_front();
        }
        self.loaders.push_back((loader.to_string(), self.page));
        let page = self.page;
        // No loader named (a page restored whole): no request brought it.
        for entry in self.entries.iter_mut().filter(|entry| !loader.is_empty() && entry.loader == loader) {
            entry.request.page = page;
        }
    }

    /// The current page's number.
    pub(crate) fn page(&self) -> u32 {
        self.page
    }

    /// A mark: [`Self::in_flight_since`] counts the requests sent after it.
    pub(crate) fn mark(&self) -> u64 {
        self.recorded
    }

    /// Requests sent since `mark` that have not finished or failed yet.
    pub(crate) fn in_flight_since(&self, mark: u64) -> usize {
        self.entries.iter().rev().take_while(|e| e.order >= mark).filter(|e| e.request.duration_ms.is_none()).count()
    }

    /// `Network.responseReceived`: the status and headers are in.
    pub(crate) fn response(&mut self, session: &str, received: network::ResponseReceived) {
        if let Some(entry) = self.newest_mut(&received.request_id) {
            entry.respond(session, &received.response);
            if let Some(kind) = received.kind.filter(|_| entry.request.resource_type == "Other") {
                entry.request.resource_type = kind;
            }
        }
    }

    /// `Network.loadingFinished`: the whole body arrived.
    pub(crate) fn finished(&mut self, finished: network::LoadingFinished) {
        if let Some(entry) = self.newest_mut(&finished.request_id) {
            entry.end(finished.timestamp);
            entry.request.size = Some(finished.encoded_data_length.max(0.0) as u64);
        }
    }

    /// `Network.loadingFailed`: no (whole) answer, and why.
    pub(crate) fn failed(&mut self, failed: network::LoadingFailed) {
        if let Some(entry) = self.newest_mut(&failed.request_id) {
            entry.end(failed.timestamp);
            entry.request.failure =
                Some(failure(&failed.error_text, failed.canceled, failed.blocked_reason.as_deref()));
        }
    }

    /// `Network.requestServedFromCache`: answered from the memory cache.
    pub(crate) fn served_from_cache(&mut self, request_id: &str) {
        if let Some(entry) = self.newest_mut(request_id) {
            entry.request.from_cache = true;
        }
    }

    /// The requests, oldest first.
    pub(crate) fn requests(&self) -> Vec<NetworkRequest> {
        self.entries.iter().map(|entry| entry.request.clone()).collect()
    }

    /// The last hop of a request.
    pub(crate) fn find(&self, request_id: &str) -> Option<&Recorded> {
        self.entries.iter().rev().find(|entry| entry.request.request_id == request_id)
    }

    /// Events come soon after their request: searching from the newest
    /// finds it at once.
    fn newest_mut(&mut self, request_id: &str) -> Option<&mut Recorded> {
        self.entries.iter_mut().rev().find(|entry| entry.request.request_id == request_id)
    }
}

impl Recorded {
    fn respond(&mut self, session: &str, response: &network::Response) {
        self.session = session.to_string();
        self.request.status = u16::try_from(response.status).ok();
        self.request.mime_type = Some(response.mime_type.clone()).filter(|m| !m.is_empty());
        self.request.from_cache |= response.from_disk_cache || response.from_prefetch_cache;
    }

    fn end(&mut self, timestamp: f64) {
        let ms = (timestamp - self.sent) * 1000.0;
        self.request.duration_ms = Some((ms.max(0.0) * 10.0).round() / 10.0);
    }
}

/// Chrome's error, and whether the request was canceled or blocked.
fn failure(error_text: &str, canceled: bool, blocked_reason: Option<&str>) -> String {
    let error = if error_text.is_empty() { "net::ERR_FAILED" } else { error_text };
    match (blocked_reason, canceled) {
        (Some(reason), _) => format!("{error} (blocked: {reason})"),
        (None, true) => format!("{error} (canceled)"),
        (None, false) => error.to_string(),
    }
}

/// The first [`URL_KEPT`] characters, and how many more there were.
fn capped_url(url: &str) -> String {
    match url.char_indices().nth(URL_KEPT) {
        None => url.to_string(),
        Some((cut, _)) => format!("{}… ({} more characters)", &url[..cut], url[cut..].chars().count()),
    }
}

/// What `GET /requests` shows of a tab's log.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Selection {
    /// The newest `limit` of the matching requests.
    pub shown: Vec<NetworkRequest>,
    /// Requests that match.
    pub total: usize,
    /// Requests of earlier pages that match the other filters, left out
    /// because `all` was not asked.
    pub earlier: usize,
}

/// The requests that match `filter` (by default the current `page`'s
/// only), the newest `limit` of them, and how many matched.
pub(crate) fn select(requests: Vec<NetworkRequest>, filter: &ListRequests, page: u32) -> Selection {
    let (matching, earlier): (Vec<NetworkRequest>, Vec<NetworkRequest>) = requests
        .into_iter()
        .filter(|r| filter.url.as_deref().is_none_or(|text| r.url.contains(text)))
        .filter(|r| !filter.failed || r.failed())
        .filter(|r| filter.resource_type.as_deref().is_none_or(|kind| r.resource_type.eq_ignore_ascii_case(kind)))
        .partition(|r| filter.all || r.page >= page);
    let total = matching.len();
    let skip = total.saturating_sub(filter.limit.unwrap_or(DEFAULT_LIMIT));
    Selection { shown: matching.into_iter().skip(skip).collect(), total, earlier: earlier.len() }
}

/// A body as answered: text cut at [`BODY_KEPT`] bytes (on a character
/// boundary), binary cut at as many bytes and re-encoded. Returns the
/// body, whether it was cut, and the whole body's size in bytes.
pub(crate) fn bounded_body(body: String, base64_encoded: bool) -> Result<(String, bool, usize), ControlError> {
    let base64 = base64::engine::general_purpose::STANDARD;
    if base64_encoded {
        let bytes = base64.decode(&body).map_err(|e| ControlError::Page(format!("the body is not base64: {e}")))?;
        if bytes.len() <= BODY_KEPT {
            return Ok((body, false, bytes.len()));
        }
        return Ok((base64.encode(&bytes[..BODY_KEPT]), true, bytes.len()));
    }
    let size = body.len();
    if size <= BODY_KEPT {
        return Ok((body, false, size));
    }
    let cut = (0..=BODY_KEPT).rev().find(|&i| body.is_char_boundary(i)).unwrap_or(0);
    let mut body = body;
    body.truncate(cut);
    Ok((body, true, size))
}

impl NetworkRequest {
    /// One line: id, status, method, type, size, duration, URL, and why it
    /// failed (the CLI's and the MCP tool's text).
    pub fn line(&self) -> String {
        let status = match (self.status, &self.failure) {
            (Some(status), _) => status.to_string(),
            (None, Some(_)) => "failed".into(),
            (None, None) => "…".into(),
        };
        let size = self.size.map_or_else(|| "-".into(), human_bytes);
        let duration = self.duration_ms.map_or_else(|| "-".into(), |ms| format!("{ms:.0} ms"));
        let mut line = format!(
            "{} {status} {} {} {size} {duration} {}",
            self.request_id, self.method, self.resource_type, self.url
        );
        if let Some(failure) = &self.failure {
            line.push_str(&format!(" ({failure})"));
        }
        if self.from_cache {
            line.push_str(" (cache)");
        }
        line
    }
}

impl RequestList {
    /// The requests one line each, oldest first; when they span several
    /// pages, a `# page N` line where each page begins.
    pub fn lines(&self) -> Vec<String> {
        let several = self.requests.first().zip(self.requests.last()).is_some_and(|(a, b)| a.page != b.page);
        let mut lines = Vec::with_capacity(self.requests.len());
        let mut page = None;
        for request in &self.requests {
            if several && page != Some(request.page) {
                page = Some(request.page);
                let current = if request.page == self.page { " (the current page)" } else { "" };
                lines.push(format!("# page {}{current}", request.page));
            }
            lines.push(request.line());
        }
        lines
    }
}

impl ResponseBody {
    /// What the body is: its request, type, size, and whether it is cut or
    /// base64 (the line above it in the CLI's and the MCP tool's text).
    pub fn header(&self) -> String {
        let mut header = format!("request {} · {} · {} bytes", self.request_id, self.mime_type, self.bytes);
        if self.truncated {
            header.push_str(" · truncated to the first 256 KiB");
        }
        if self.base64_encoded {
            header.push_str(" · base64");
        }
        header
    }
}

/// `512 B`, `1.5 KiB`, `2.0 MiB`.
fn human_bytes(bytes: u64) -> String {
    match bytes {
        b if b < 1024 => format!("{b} B"),
        b if b < 1024 * 1024 => format!("{:.1} KiB", b as f64 / 1024.0),
        b => format!("{:.1} MiB", b as f64 / (1024.0 * 1024.0)),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn sent(id: &str, url: &str, at: f64, redirect: Option<i64>) -> network::RequestWillBeSent {
        let mut params = json!({
            "requestId": id, "request": {"url": url, "method": "GET"}, "timestamp": at,
            "wallTime": 1_700_000_000.0 + at, "type": "Fetch",
        });
        if let Some(status) = redirect {
            params["redirectResponse"] = json!({"url": "http://x/old", "status": status, "encodedDataLength": 120.0});
        }
        serde_json::from_value(params).unwrap()
    }

    fn response(id: &str, status: i64) -> network::ResponseReceived {
        serde_json::from_value(json!({"requestId": id, "timestamp": 0.0, "type": "Fetch",
            "response": {"url": "http://x/", "status": status, "mimeType": "application/json", "fromDiskCache": false}}))
        .unwrap()
    }

    fn finished(id: &str, at: f64, bytes: f64) -> network::LoadingFinished {
        serde_json::from_value(json!({"requestId": id, "timestamp": at, "encodedDataLength": bytes})).unwrap()
    }

    #[test]
    fn a_request_is_sent_answered_and_finished() {
        let mut log = NetworkLog::default();
        log.will_be_sent("S", sent("1", "http://x/a.json", 10.0, None));
        log.response("S", response("1", 404));
        log.finished(finished("1", 10.0123, 345.0));
        let [request] = log.requests().try_into().unwrap();
        assert_eq!(request.status, Some(404));
        assert_eq!((request.size, request.duration_ms), (Some(345), Some(12.3)));
        assert_eq!(request.start_time, 1_700_000_010_000.0, "ms since the epoch");
        assert_eq!(request.mime_type.as_deref(), Some("application/json"));
        assert!(request.failed(), "an HTTP error is a failure");
        assert_eq!(request.line(), "1 404 GET Fetch 345 B 12 ms http://x/a.json");
    }

    #[test]
    fn failures_say_why() {
        let mut log = NetworkLog::default();
        for (id, canceled, blocked) in [("1", false, None), ("2", true, None), ("3", false, Some("inspector"))] {
            log.will_be_sent("S", sent(id, "http://x/", 1.0, None));
            let failed = json!({"requestId": id, "timestamp": 1.5, "errorText": "net::ERR_ABORTED",
                "canceled": canceled, "blockedReason": blocked});
            log.failed(serde_json::from_value(failed).unwrap());
        }
        let failures: Vec<String> = log.requests().into_iter().filter_map(|r| r.failure).collect();
        assert_eq!(
            failures,
            ["net::ERR_ABORTED", "net::ERR_ABORTED (canceled)", "net::ERR_ABORTED (blocked: inspector)"]
        );
        assert!(log.requests()[0].line().starts_with("1 failed GET Fetch - 500 ms"), "{}", log.requests()[0].line());
    }

    #[test]
    fn a_redirect_is_one_entry_per_hop_and_the_body_is_the_last_hops() {
        let mut log = NetworkLog::default();
        log.will_be_sent("S", sent("7", "http://x/old", 1.0, None));
        log.will_be_sent("S", sent("7", "http://x/new", 1.25, Some(302)));
        log.response("S", response("7", 200));
        let hops = log.requests();
        assert_eq!(hops.len(), 2);
        assert_eq!((hops[0].status, hops[0].duration_ms, hops[0].size), (Some(302), Some(250.0), Some(120)));
        assert_eq!((hops[1].url.as_str(), hops[1].status), ("http://x/new", Some(200)));
        assert_eq!(log.find("7").unwrap().request.url, "http://x/new");
        // The same request reported twice is one entry.
        log.will_be_sent("S2", sent("7", "http://x/new", 1.3, None));
        assert_eq!(log.requests().len(), 2);
    }

    #[test]
    fn a_committed_document_begins_a_page_with_the_request_that_brought_it() {
        let mut log = NetworkLog::default();
        let on = |mut sent: network::RequestWillBeSent, loader: &str| {
            sent.loader_id = loader.into();
            sent
        };
        log.will_be_sent("S", on(sent("1", "http://x/a.html", 1.0, None), "L1"));
        log.will_be_sent("S", on(sent("2", "http://x/api", 1.1, None), "L1"));
        // The next document's request is sent while the first page shows.
        log.will_be_sent("S", on(sent("L2", "http://x/b.html", 2.0, None), "L2"));
        assert_eq!(log.requests().iter().map(|r| r.page).collect::<Vec<_>>(), [1, 1, 1]);
        log.new_page("L2");
        log.new_page("L2");
        assert_eq!(log.page(), 2, "one page per document, however often it is told");
        log.will_be_sent("S", on(sent("3", "http://x/b.js", 2.1, None), "L2"));
        assert_eq!(log.requests().iter().map(|r| r.page).collect::<Vec<_>>(), [1, 1, 2, 2]);
        let ids = |filter: ListRequests| -> (Vec<String>, usize) {
            let selection = select(log.requests(), &filter, log.page());
            (selection.shown.into_iter().map(|r| r.request_id).collect(), selection.earlier)
        };
        assert_eq!(ids(ListRequests::default()), (vec!["L2".into(), "3".into()], 2));
        assert_eq!(ids(ListRequests { all: true, ..Default::default() }).0.len(), 4);
        assert_eq!(ids(ListRequests { url: Some("api".into()), ..Default::default() }), (vec![], 1));
        let list = RequestList {
            target_id: "T".into(),
            requests: log.requests(),
            total: 4,
            shown: 4,
            page: 2,
            earlier_pages: 0,
        };
        let lines = list.lines();
        assert_eq!((lines[0].as_str(), lines[3].as_str()), ("# page 1", "# page 2 (the current page)"), "{lines:?}");
        assert_eq!(lines.len(), 6);
    }

    #[test]
    fn requests_in_flight_are_counted_from_a_mark() {
        let mut log = NetworkLog::default();
        log.will_be_sent("S", sent("1", "http://x/old", 1.0, None));
        let mark = log.mark();
        assert_eq!(log.in_flight_since(mark), 0, "what was sent before the mark is not counted");
        log.will_be_sent("S", sent("2", "http://x/a", 2.0, None));
        log.will_be_sent("S", sent("3", "http://x/b", 2.0, None));
        assert_eq!(log.in_flight_since(mark), 2);
        log.finished(finished("2", 2.5, 10.0));
        // A redirect ends one hop and sends the next.
        log.will_be_sent("S", sent("3", "http://x/c", 2.6, Some(302)));
        assert_eq!(log.in_flight_since(mark), 1);
        let failed = json!({"requestId": "3", "timestamp": 3.0, "errorText": "net::ERR_FAILED"});
        log.failed(serde_json::from_value(failed).unwrap());
        assert_eq!(log.in_flight_since(mark), 0);
    }

    #[test]
    fn the_browsers_own_fetches_are_told_apart() {
        let mut log = NetworkLog::default();
        let mut favicon = sent("9", "http://x/favicon.ico", 1.0, None);
        (favicon.kind, favicon.initiator.kind) = (Some("Other".into()), "other".into());
        log.will_be_sent("S", favicon);
        let mut fetched = sent("10", "http://x/api", 1.0, None);
        fetched.initiator.kind = "script".into();
        log.will_be_sent("S", fetched);
        assert!(log.find("9").unwrap().browsers_own);
        assert!(!log.find("10").unwrap().browsers_own);
    }

    #[test]
    fn the_log_keeps_the_newest_and_urls_are_capped() {
        let mut log = NetworkLog::default();
        for i in 0..REQUESTS_KEPT + 20 {
            log.will_be_sent("S", sent(&i.to_string(), "http://x/", 1.0, None));
        }
        let requests = log.requests();
        assert_eq!((requests.len(), requests[0].request_id.as_str()), (REQUESTS_KEPT, "20"));
        let long = format!("data:text/plain,{}", "é".repeat(3000));
        let capped = capped_url(&long);
        assert!(capped.starts_with("data:text/plain,é"), "cut on a character");
        assert!(capped.ends_with("… (1016 more characters)"), "{}", &capped[capped.len() - 40..]);
        assert_eq!(capped_url("http://x/"), "http://x/");
    }

    #[test]
    fn filters_pick_by_url_failure_and_type_and_limit_keeps_the_newest() {
        let request = |id: &str, url: &str, kind: &str, status: Option<u16>, failure: Option<&str>| NetworkRequest {
            request_id: id.into(),
            url: url.into(),
            resource_type: kind.into(),
            status,
            failure: failure.map(Into::into),
            page: 1,
            ..NetworkRequest::default()
        };
        let all = vec![
            request("1", "http://x/", "Document", Some(200), None),
            request("2", "http://x/app.js", "Script", Some(200), None),
            request("3", "http://x/api/missing.json", "Fetch", Some(404), None),
            request("4", "http://y/pic.png", "Image", None, Some("net::ERR_CONNECTION_REFUSED")),
            request("5", "http://x/api/data.json", "Fetch", Some(200), None),
        ];
        let ids = |filter: ListRequests| {
            let selection = select(all.clone(), &filter, 1);
            (selection.shown.into_iter().map(|r| r.request_id).collect::<Vec<_>>(), selection.total)
        };
        assert_eq!(
            ids(ListRequests::default()),
            (vec!["1", "2", "3", "4", "5"].into_iter().map(String::from).collect(), 5)
        );
        assert_eq!(ids(ListRequests { failed: true, ..Default::default() }).0, ["3", "4"]);
        assert_eq!(ids(ListRequests { url: Some("/api/".into()), ..Default::default() }).0, ["3", "5"]);
        assert_eq!(ids(ListRequests { resource_type: Some("fetch".into()), ..Default::default() }).0, ["3", "5"]);
        assert_eq!(ids(ListRequests { limit: Some(2), ..Default::default() }), (vec!["4".into(), "5".into()], 5));
    }

    #[test]
    fn bodies_are_cut_at_256_kib() {
        let small = bounded_body("{\"ok\":true}".into(), false).unwrap();
        assert_eq!(small, ("{\"ok\":true}".into(), false, 11));
        // A two-byte character across the limit is not split.
        let text = format!("{}é{}", "a".repeat(BODY_KEPT - 1), "b".repeat(10));
        let (body, truncated, bytes) = bounded_body(text, false).unwrap();
        assert_eq!((body.len(), truncated, bytes), (BODY_KEPT - 1, true, BODY_KEPT + 11));
        let base64 = base64::engine::general_purpose::STANDARD;
        let image = vec![7u8; BODY_KEPT + 5];
        let (body, truncated, bytes) = bounded_body(base64.encode(&image), true).unwrap();
        assert_eq!((base64.decode(body).unwrap().len(), truncated, bytes), (BODY_KEPT, true, BODY_KEPT + 5));
        assert!(bounded_body("not base64!".into(), true).is_err());
    }
}
