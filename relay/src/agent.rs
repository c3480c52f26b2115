//! The agent commands of the CLI (`tabs`, `open`, `snapshot`, `click`, …):
//! each builds one control API request, sends it to the running `serve`,
//! and prints the answer as text, or with `--json` in the stable
//! `{"ok": true, "data": …}` envelope.

use anyhow::Context as _;
use browser_relay::ControlClient;
use browser_relay::DEFAULT_CONTROL_PORT;
use control_engine::api::{
    Act, ActOutcome, ArmDialog, CloseTab, ConsoleReport, DialogArmed, FindInPage, FocusTab, Found, GetStatus, GoBack,
    GoForward, HandOver, HandedBack, HandoffEnded, ListRequests, ListTabs, Navigate, Navigated, OpenTab, Pdf, PrintPdf,
    ProfileStatus, Profiled, ReadConsole, ReadResponseBody, RequestList, Route, Selected, StartBrowser, Status,
    StopBrowser, TabDone, TabInfo, TabList, TabSelector, TakeScreenshot, TakeSnapshot, Trouble,
};
use control_engine::api::{Click, Evaluate, Press, TypeText};
use control_engine::{Step, Surface};
use serde::Serialize;
use state_dir::StateDir;

use crate::println_stdout;

/// The control API from the command line; each prints text, or with
/// `--json` the API's own JSON in the `{"ok", "data" | "error"}` envelope.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum AgentCommand {
    /// Launch a profile's browser in the running `serve` (the managed
    /// profile: an isolated Chrome). A no-op if it runs.
    Start {
        /// A throwaway isolated Chrome named by --profile (not one of
        /// config.toml's): deleted with its folder when stopped.
        #[arg(long, requires = "profile")]
        ephemeral: bool,
        #[command(flatten)]
        args: ProfileArgs,
    },
    /// Stop a profile's browser: Browser.close, then, if it lingers, its processes are ended (SIGTERM, then SIGKILL; on Windows at once).
    Stop(ProfileArgs),
    /// Show a profile (every profile without --profile): running, tabs, CDP endpoint.
    Status(ProfileArgs),
    /// List the tabs (the current one is marked with *).
    Tabs(AgentArgs),
    /// Open a tab at URL (it becomes the current tab).
    Open {
        url: String,
        #[command(flatten)]
        args: AgentArgs,
    },
    /// Load URL in the current tab (or --target).
    Navigate {
        url: String,
        #[command(flatten)]
        args: AgentArgs,
    },
    /// Go back one page in the tab's history.
    Back(AgentArgs),
    /// Go forward one page in the tab's history.
    Forward(AgentArgs),
    /// The accessibility snapshot with refs (e1, e2, …).
    Snapshot {
        /// Interactive elements only, as a flat list.
        #[arg(long)]
        interactive: bool,
        /// The full tree in the older, Playwright-like form (every wrapper,
        /// two spaces a level, `- /url:` lines).
        #[arg(long)]
        full: bool,
        /// With --full: drop unnamed structural wrappers.
        #[arg(long)]
        compact: bool,
        /// Only this CSS selector's subtree.
        #[arg(long)]
        selector: Option<String>,
        /// The part to show of a snapshot longer than its maxChars (100,000).
        #[arg(long)]
        part: Option<u32>,
        #[command(flatten)]
        args: AgentArgs,
    },
    /// Find in the page: the snapshot lines that match, with refs and
    /// their ancestors (TEXT in a name, value or text; any case).
    Find {
        text: Option<String>,
        /// The exact role: button, link, textbox, option…
        #[arg(long)]
        role: Option<String>,
        /// Text in the accessible name only.
        #[arg(long)]
        name: Option<String>,
        /// Matches to show (default 20, at most 200).
        #[arg(long)]
        limit: Option<usize>,
        #[command(flatten)]
        args: AgentArgs,
    },
    /// Click a ref of the last snapshot.
    Click {
        element: String,
        #[arg(long)]
        double: bool,
        #[command(flatten)]
        args: AgentArgs,
    },
    /// Replace a field's text (with --submit, press Enter after).
    Type {
        element: String,
        text: String,
        #[arg(long)]
        submit: bool,
        #[command(flatten)]
        args: AgentArgs,
    },
    /// Press a key or chord: Enter, Tab, Control+A, Alt+ArrowLeft…
    Press {
        key: String,
        #[command(flatten)]
        args: AgentArgs,
    },
    /// Answer the tab's open JavaScript dialog (or arm the answer to its next one).
    Dialog {
        answer: DialogAnswer,
        /// The text to answer a prompt with.
        #[arg(long)]
        text: Option<String>,
        #[command(flatten)]
        args: AgentArgs,
    },
    /// Any /act action as JSON, e.g. '{"kind":"fill","fields":[…]}'.
    Act {
        action: String,
        #[command(flatten)]
        args: AgentArgs,
    },
    /// Save a screenshot (prints its path).
    Screenshot {
        #[arg(long)]
        full_page: bool,
        /// One element: a ref of the last snapshot.
        #[arg(long = "ref")]
        element: Option<String>,
        /// Orange boxes with the last snapshot's refs.
        #[arg(long)]
        labels: bool,
        #[command(flatten)]
        args: AgentArgs,
    },
    /// The tab's console messages and page errors, newest last.
    Console {
        /// The lowest level shown: debug, log, warning or error.
        #[arg(long)]
        level: Option<String>,
        /// How many (the newest).
        #[arg(long)]
        limit: Option<usize>,
        #[command(flatten)]
        args: AgentArgs,
    },
    /// Run JavaScript in the page and print its value: a function
    /// (`() => document.title`) or an expression.
    Evaluate {
        function: String,
        /// A ref of the last snapshot: the function gets that element.
        #[arg(long = "ref")]
        element: Option<String>,
        #[command(flatten)]
        args: AgentArgs,
    },
    /// Open the dashboard (`/ui`): prints a one-time login link (good for
    /// two minutes) and opens it in your browser where a desktop is present.
    Ui {
        /// Only print the link.
        #[arg(long)]
        no_open: bool,
        #[command(flatten)]
        args: ServiceArgs,
    },
    /// Hand the tab to the person (a login, a CAPTCHA, a choice only they
    /// can make) and wait until they say Done: the extension brings it to
    /// the front and shows REASON; meanwhile the agent may not act there.
    /// Prints where the tab is when it comes back.
    Handoff {
        /// What the person is to do, in a few words.
        reason: String,
        /// How long to wait for the person: 90s, 10m (default), 1h at most.
        #[arg(long, value_name = "DURATION")]
        timeout: Option<String>,
        #[command(flatten)]
        args: AgentArgs,
    },
    /// The questions waiting for you (a grant's `--ask`: a form, a
    /// download, a file, a new site, input) and the tabs handed to you.
    Asks {
        #[command(flatten)]
        args: ServiceArgs,
    },
    /// Allow what question ID asks (`browser-relay asks` lists them).
    Allow {
        id: u64,
        /// And the same kind on the same site, for this grant, for 10 minutes.
        #[arg(long)]
        for_site: bool,
        #[command(flatten)]
        args: ServiceArgs,
    },
    /// Refuse what question ID asks: it never happens.
    Deny {
        id: u64,
        #[command(flatten)]
        args: ServiceArgs,
    },
    /// Give a handed-over tab back to its agent (TARGET: its targetId; the
    /// only one handed over when left out).
    Done {
        target: Option<String>,
        #[command(flatten)]
        args: ServiceArgs,
    },
    /// What clients and agents did to which tab, newest first: time (UTC),
    /// who, tab, what (typed text is never kept, only its length).
    Activity {
        /// How many entries (default 100, at most 5000).
        #[arg(long)]
        limit: Option<usize>,
        /// Only the last N minutes.
        #[arg(long, value_name = "N")]
        minutes: Option<u64>,
        /// Only this CDP client (its number, as the dashboard shows it).
        #[arg(long)]
        client: Option<u64>,
        /// Only this tab (its targetId).
        #[arg(long = "target")]
        tab: Option<String>,
        /// Only this profile (`chrome`: your shared tabs).
        #[arg(long)]
        profile: Option<String>,
        /// Only what came through this grant.
        #[arg(long, value_name = "NAME")]
        grant: Option<String>,
        #[command(flatten)]
        args: ServiceArgs,
    },
    /// Print the tab to a PDF file (prints its path; headless browsers,
    /// such as the managed profile, only).
    Pdf(AgentArgs),
    /// Close a tab.
    CloseTab {
        /// The tab's targetId (`browser-relay tabs` lists them).
        target_id: String,
        #[command(flatten)]
        args: ProfileArgs,
    },
    /// Bring a tab to the front of its window and make it the current tab
    /// (on your own browser this takes your screen).
    Focus {
        /// The tab's targetId (`browser-relay tabs` lists them).
        target_id: String,
        #[command(flatten)]
        args: ProfileArgs,
    },
    /// The tab's network requests, newest last: id, status, method, type,
    /// size, time, URL (and why it failed).
    Requests {
        /// Only failures and HTTP errors (status 400 and up).
        #[arg(long)]
        failed: bool,
        /// Only URLs containing this text.
        #[arg(long)]
        url: Option<String>,
        /// Only this type: Document, Script, Image, Fetch, XHR, …
        #[arg(long = "type")]
        resource_type: Option<String>,
        /// How many (the newest; default 100).
        #[arg(long)]
        limit: Option<usize>,
        /// Earlier pages' requests too (default: the current page's, since
        /// the tab last loaded a document).
        #[arg(long)]
        all: bool,
        /// Print this request's response body instead (text up to 256 KiB).
        #[arg(long, value_name = "REQUEST_ID", conflicts_with_all = ["failed", "url", "resource_type", "limit", "all"])]
        body: Option<String>,
        #[command(flatten)]
        args: AgentArgs,
    },
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(crate) enum DialogAnswer {
    /// OK.
    Accept,
    /// Cancel.
    Dismiss,
}

/// What the profile commands take: no tab.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct ProfileArgs {
    /// Profile (default: defaultProfile in config.toml; unset: your shared tabs if any, else the managed Chrome).
    #[arg(long)]
    profile: Option<String>,
    /// Act as this grant (`browser-relay grant add`): its tabs and sites only.
    #[arg(long, env = GRANT_ENV, value_name = "NAME")]
    grant: Option<String>,
    /// Port of the control API.
    #[arg(long, env = "BROWSER_RELAY_CONTROL_PORT", default_value_t = DEFAULT_CONTROL_PORT)]
    control_port: u16,
    /// The API's JSON in an {"ok", "data" | "error"} envelope instead of text.
    #[arg(long)]
    pub json: bool,
}

/// What the commands about the whole service take: no profile, no tab.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct ServiceArgs {
    /// Port of the control API.
    #[arg(long, env = "BROWSER_RELAY_CONTROL_PORT", default_value_t = DEFAULT_CONTROL_PORT)]
    control_port: u16,
    /// The API's JSON in an {"ok", "data" | "error"} envelope instead of text.
    #[arg(long)]
    pub json: bool,
}

/// The environment variable that names the grant agent commands and
/// `mcp` act as (`--grant`): an agent host started with it set stays
/// within the grant's tabs and sites.
pub(crate) const GRANT_ENV: &str = "BROWSER_RELAY_GRANT";

#[derive(Debug, Clone, clap::Args)]
pub(crate) struct AgentArgs {
    /// Profile (default: defaultProfile in config.toml; unset: your shared tabs if any, else the managed Chrome).
    #[arg(long)]
    profile: Option<String>,
    /// Act as this grant (`browser-relay grant add`): its tabs and sites only.
    #[arg(long, env = GRANT_ENV, value_name = "NAME")]
    pub grant: Option<String>,
    /// Tab (default: the profile's current tab).
    #[arg(long = "target")]
    target_id: Option<String>,
    /// Port of the control API.
    #[arg(long, env = "BROWSER_RELAY_CONTROL_PORT", default_value_t = DEFAULT_CONTROL_PORT)]
    control_port: u16,
    /// The API's JSON in an {"ok", "data" | "error"} envelope instead of text.
    #[arg(long)]
    pub json: bool,
}

impl AgentArgs {
    fn tab(&self) -> TabSelector {
        TabSelector { profile: self.profile.clone(), target_id: self.target_id.clone() }
    }
}

impl AgentCommand {
    /// The profile, tab, port and output every command has.
    pub(crate) fn args(&self) -> AgentArgs {
        match self {
            Self::Focus { target_id, args } | Self::CloseTab { target_id, args } => AgentArgs {
                profile: args.profile.clone(),
                grant: args.grant.clone(),
                target_id: Some(target_id.clone()),
                control_port: args.control_port,
                json: args.json,
            },
            Self::Start { args, .. } | Self::Stop(args) | Self::Status(args) => AgentArgs {
                profile: args.profile.clone(),
                grant: args.grant.clone(),
                target_id: None,
                control_port: args.control_port,
                json: args.json,
            },
            // The person's: no grant reads the record or logs in.
            Self::Ui { args, .. }
            | Self::Activity { args, .. }
            | Self::Asks { args }
            | Self::Allow { args, .. }
            | Self::Deny { args, .. }
            | Self::Done { args, .. } => AgentArgs {
                profile: None,
                grant: None,
                target_id: None,
                control_port: args.control_port,
                json: args.json,
            },
            Self::Tabs(args)
            | Self::Back(args)
            | Self::Forward(args)
            | Self::Requests { args, .. }
            | Self::Open { args, .. }
            | Self::Navigate { args, .. }
            | Self::Snapshot { args, .. }
            | Self::Find { args, .. }
            | Self::Click { args, .. }
            | Self::Type { args, .. }
            | Self::Press { args, .. }
            | Self::Act { args, .. }
            | Self::Dialog { args, .. }
            | Self::Screenshot { args, .. }
            | Self::Console { args, .. }
            | Self::Evaluate { args, .. }
            | Self::Handoff { args, .. }
            | Self::Pdf(args) => args.clone(),
        }
    }
}

/// One request, printed as `--json` asks, or as `text` makes of it.
async fn run<R: Route>(
    client: &ControlClient,
    args: &AgentArgs,
    request: Selected<R>,
    text: impl FnOnce(&R::Answer) -> String,
) -> anyhow::Result<()> {
    let answer = client.send(&request).await?;
    if args.json {
        #[derive(Serialize)]
        struct Envelope<'a, T> {
            ok: bool,
            data: &'a T,
        }
        println_stdout(&serde_json::to_string(&Envelope { ok: true, data: &answer })?);
    } else {
        println_stdout(&text(&answer));
    }
    Ok(())
}

/// `asks` as text: a line per question, then per handoff.
fn asks_text(answer: &serde_json::Value) -> String {
    let mut lines = Vec::new();
    for q in answer["questions"].as_array().into_iter().flatten() {
        let left = q["deadline"].as_u64().unwrap_or(0).saturating_sub(activity::now_millis()) / 1000;
        lines.push(format!(
            "{}\t{}\t{}\t({left} s left: `browser-relay allow {0}` or `deny {0}`)",
            q["id"],
            q["kind"].as_str().unwrap_or_default(),
            q["what"].as_str().unwrap_or_default(),
        ));
    }
    for h in answer["handoffs"].as_array().into_iter().flatten() {
        lines.push(format!(
            "handed to you\t{}\t{} needs you: {}\t(`browser-relay done {0}`)",
            h["targetId"].as_str().unwrap_or_default(),
            h["grant"].as_str().unwrap_or_default(),
            h["reason"].as_str().unwrap_or_default(),
        ));
    }
    if lines.is_empty() {
        return "nothing waits for you".into();
    }
    lines.join("\n")
}

/// A raw call's answer, printed as `--json` asks, or as `text` makes of it.
fn print_value(args: &AgentArgs, answer: &serde_json::Value, text: impl FnOnce(&serde_json::Value) -> String) {
    if args.json {
        println_stdout(&serde_json::json!({"ok": true, "data": answer}).to_string());
    } else {
        println_stdout(&text(answer));
    }
}

/// One line per activity entry: time, who, where, what.
pub(crate) fn activity_text(answer: &serde_json::Value) -> String {
    let Ok(activity::Answer { recording, entries, dropped_today }) = serde_json::from_value(answer.clone()) else {
        return "no activity recorded".into();
    };
    if !recording {
        return "the activity record is off (recordActivity = false in config.toml)".into();
    }
    if entries.is_empty() {
        return "no activity recorded".into();
    }
    let lines: Vec<String> = entries
        .iter()
        .map(|entry| {
            let who = match (entry.source, entry.client_id) {
                (activity::Source::Agent, _) => format!("agent ({})", entry.client),
                (_, Some(id)) => format!("{} #{id}", entry.client),
                (_, None) => entry.client.clone(),
            };
            let who = match &entry.grant {
                Some(grant) => format!("{who} [grant {grant}]"),
                None => who,
            };
            let place: Vec<&str> = [entry.profile.as_deref(), entry.url.as_deref().or(entry.tab.as_deref())]
                .into_iter()
                .flatten()
                .collect();
            let count = if entry.count > 1 { format!(" ×{}", entry.count) } else { String::new() };
            let failed = if entry.failed { " (failed)" } else { "" };
            format!("{}  {who}  {}  {}{count}{failed}", activity::utc_text(entry.at), place.join(" · "), entry.summary)
        })
        .collect();
    let mut text = lines.join("\n");
    if dropped_today > 0 {
        text.push_str(&format!(
            "\n(today's record was full: its {dropped_today} oldest entries were dropped to keep the newest)"
        ));
    }
    text
}

/// A profile as the user reads it: what it is, its state, and where a
/// client connects (the token only through `browser-relay cdp-url`).
fn profile_text(status: &ProfileStatus) -> String {
    let default = if status.default { ", default" } else { "" };
    let mut text =
        format!("profile {} ({:?}, {}{default}): {}", status.profile, status.driver, status.color, status.detail);
    if let Some(endpoint) = &status.cdp_endpoint {
        text.push_str(&format!("\n  CDP  {endpoint}"));
        if let Some(command) = &status.cdp_url_command {
            text.push_str(&format!("  (with the token: `{command}`)"));
        }
    }
    text
}

fn tab_line(tab: &TabInfo) -> String {
    format!("{}  {}  {}", tab.target_id, tab.title, tab.url)
}

fn navigated_line(navigated: &Profiled<Navigated>) -> String {
    format!("{}  {}  {}  [{}]", navigated.target_id, navigated.title, navigated.url, navigated.profile)
}

/// One line per request, and how many more matched when `limit` cut them
/// or were left out as earlier pages'.
fn requests_text(list: &Profiled<RequestList>) -> String {
    let mut lines = list.lines();
    if list.total == 0 {
        lines.push("no requests".into());
    } else if list.shown < list.total {
        lines.push(format!("# the newest {} of {} (--limit)", list.shown, list.total));
    }
    if list.earlier_pages > 0 {
        lines.push(format!("# {} more of earlier pages (--all)", list.earlier_pages));
    }
    lines.join("\n")
}

/// One line per console message (level, text, where), then the page's
/// uncaught errors.
fn console_text(report: &Profiled<ConsoleReport>) -> String {
    let at = |location: &Option<String>| location.as_ref().map(|l| format!("  ({l})")).unwrap_or_default();
    let mut lines: Vec<String> =
        report.messages.iter().map(|m| format!("{:<7} {}{}", m.level, m.text, at(&m.location))).collect();
    lines.extend(report.page_errors.iter().map(|e| format!("page error: {}{}", e.message, at(&e.location))));
    if lines.is_empty() {
        lines.push("no console messages".into());
    }
    lines.join("\n")
}

/// What an action did and the page after it: the first line says where the
/// page is (or `evaluate`'s value); the next lines what needs attention.
fn act_text(outcome: &Profiled<ActOutcome>) -> String {
    let page = outcome.page.clone().unwrap_or_default();
    let mut lines = vec![match (&outcome.result, outcome.navigated) {
        (Some(result), _) => result.to_string(),
        (None, true) => format!("ok, navigated to {}  {}  [{}]", page.url, page.title, outcome.profile),
        (None, false) => format!("ok  {}  {}  [{}]", page.url, page.title, outcome.profile),
    }];
    if let Some(dialog) = &page.dialog {
        let answer = Step::AcceptDialog.named(Surface::Cli);
        lines.push(format!(
            "dialog: {} \"{}\" is open: {answer} (or `dismiss`) answers it",
            dialog.kind, dialog.message
        ));
    }
    trouble_lines(&mut lines, &page.caused, "");
    if let Some(earlier) = &page.earlier {
        trouble_lines(&mut lines, earlier, "before this action, ");
    }
    for tab in &page.new_tabs {
        lines.push(format!("new tab: {}  {}", tab.target_id, tab.url));
    }
    if let Some(changes) = &outcome.changes {
        lines.push(if changes.is_empty() { "no change in the page's snapshot".into() } else { changes.clone() });
    }
    if let Some(snapshot) = &outcome.snapshot {
        lines.push(snapshot.clone());
    }
    lines.join("\n")
}

/// What went wrong, a line each (`prefix` says when).
fn trouble_lines(lines: &mut Vec<String>, trouble: &Trouble, prefix: &str) {
    for error in &trouble.console_errors {
        lines.push(format!("{prefix}console error: {error}"));
    }
    if trouble.more_console_errors > 0 {
        lines.push(format!("… {} more console errors (`browser-relay console`)", trouble.more_console_errors));
    }
    for request in &trouble.failed_requests {
        lines.push(format!("{prefix}failed request: {request}"));
    }
    if trouble.more_failed_requests > 0 {
        lines.push(format!(
            "… {} more failed requests (`browser-relay requests --failed`)",
            trouble.more_failed_requests
        ));
    }
}

/// Opens a login link in the user's browser through an owner-only page in
/// the state directory that forwards to it: the code never appears on a
/// command line. Without a desktop, the printed link is all.
fn open_login_link(state: &StateDir, url: &str) {
    let escaped = url.replace('&', "&amp;").replace('"', "&quot;").replace('<', "&lt;");
    let page = format!(
        "<!doctype html><meta charset=utf-8><meta name=referrer content=no-referrer>\
         <meta http-equiv=refresh content=\"0;url={escaped}\"><title>Browser Relay</title>\
         <p><a href=\"{escaped}\">Open the Browser Relay dashboard</a></p>"
    );
    let opened = state
        .write_login_page(&page)
        .map_err(anyhow::Error::from)
        .and_then(|page| crate::desktop::open(&page).with_context(|| format!("could not open {}", page.display())));
    match opened {
        Ok(true) => {}
        Ok(false) => eprintln!("no desktop here: open the link above in a browser on this machine"),
        Err(e) => eprintln!("{}: open the link above yourself", crate::error_text(&e)),
    }
}

/// Runs one agent command against the control API of a running relay: the
/// person's side (the dashboard, questions, handoffs, the activity record)
/// here, the browser's in `browser_request`.
pub(crate) async fn agent_command(state: &StateDir, command: AgentCommand) -> anyhow::Result<()> {
    let args = command.args();
    let client = crate::grant::control_client(state, args.control_port, args.grant.as_deref())?.on(Surface::Cli);
    match command {
        AgentCommand::Ui { no_open, .. } => {
            let link = client.call("POST", "/ui/login-link", &[], Some(&serde_json::json!({}))).await?;
            let url = link["url"].as_str().context("the control API gave no login link")?.to_string();
            let seconds = link["expiresInSeconds"].as_u64().unwrap_or(120);
            print_value(&args, &link, |_| format!("{url}\n# the link logs one browser in, once, within {seconds} s"));
            if !no_open {
                open_login_link(state, &url);
            }
            Ok(())
        }
        AgentCommand::Handoff { reason, timeout, .. } => {
            let timeout_ms = timeout
                .map(|t| grants::parse_duration(&t).map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)))
                .transpose()
                .map_err(anyhow::Error::msg)?;
            eprintln!(
                "Waiting for the person to say Done (in the browser, on the dashboard, or `browser-relay done`)…"
            );
            run(&client, &args, Selected::new(args.tab(), HandOver { reason, timeout_ms }), handed_back_text).await
        }
        AgentCommand::Asks { .. } => {
            let answer = client.call("GET", "/asks", &[], None).await?;
            print_value(&args, &answer, asks_text);
            Ok(())
        }
        AgentCommand::Allow { id, for_site, .. } => {
            let said = if for_site { "allow-site" } else { "allow" };
            let body = serde_json::json!({"answer": said});
            let answer = client.call("POST", &format!("/asks/{id}"), &[], Some(&body)).await?;
            print_value(&args, &answer, |_| format!("allowed question {id}"));
            Ok(())
        }
        AgentCommand::Deny { id, .. } => {
            let body = serde_json::json!({"answer": "deny"});
            let answer = client.call("POST", &format!("/asks/{id}"), &[], Some(&body)).await?;
            print_value(&args, &answer, |_| format!("denied question {id}"));
            Ok(())
        }
        AgentCommand::Done { target, .. } => {
            let body = serde_json::json!({"targetId": target});
            let answer = client.call("POST", "/handoff/done", &[], Some(&body)).await?;
            print_value(&args, &answer, |a| format!("gave tab {} back", a["targetId"].as_str().unwrap_or("?")));
            Ok(())
        }
        AgentCommand::Activity { limit, minutes, client: client_id, tab: target, profile, grant, .. } => {
            let mut query: Vec<(String, String)> = Vec::new();
            query.extend(limit.map(|n| ("limit".into(), n.to_string())));
            if let Some(minutes) = minutes {
                let since = activity::now_millis().saturating_sub(minutes.saturating_mul(60_000));
                query.push(("since".into(), since.to_string()));
            }
            query.extend(client_id.map(|id| ("clientId".into(), id.to_string())));
            query.extend(target.map(|tab| ("tab".into(), tab)));
            query.extend(profile.map(|profile| ("profile".into(), profile)));
            query.extend(grant.map(|grant| ("grant".into(), grant)));
            let answer = client.call("GET", "/activity", &query, None).await?;
            print_value(&args, &answer, activity_text);
            Ok(())
        }
        command => browser_request(&client, &args, command).await,
    }
}

/// Runs one agent command on a browser: a profile's (start, stop, status,
/// its tabs) or a tab's.
async fn browser_request(client: &ControlClient, args: &AgentArgs, command: AgentCommand) -> anyhow::Result<()> {
    let tab = args.tab();
    let profile_only = TabSelector { profile: args.profile.clone(), target_id: None };
    match command {
        AgentCommand::Start { ephemeral, .. } => {
            run(client, args, Selected::new(profile_only, StartBrowser { ephemeral }), profile_text).await
        }
        AgentCommand::Stop(_) => run(client, args, Selected::new(profile_only, StopBrowser {}), profile_text).await,
        AgentCommand::Status(_) => run(client, args, Selected::new(profile_only, GetStatus {}), status_text).await,
        AgentCommand::Tabs(_) => run(client, args, Selected::new(profile_only, ListTabs {}), tabs_text).await,
        AgentCommand::Open { url, .. } => {
            run(client, args, Selected::new(profile_only, OpenTab { url }), opened_line).await
        }
        AgentCommand::Navigate { url, .. } => {
            let request = Navigate { url, wait_until: Default::default(), timeout_ms: None };
            run(client, args, Selected::new(tab, request), navigated_line).await
        }
        AgentCommand::Console { level, limit, .. } => {
            run(client, args, Selected::new(tab, ReadConsole { level, limit }), console_text).await
        }
        AgentCommand::Evaluate { function, element, .. } => {
            run(client, args, Selected::new(tab, Act::new(Evaluate { function, element })), act_text).await
        }
        AgentCommand::Pdf(_) => run(client, args, Selected::new(tab, PrintPdf {}), pdf_line).await,
        AgentCommand::CloseTab { .. } => run(client, args, Selected::new(tab, CloseTab {}), closed_line).await,
        AgentCommand::Focus { .. } => run(client, args, Selected::new(tab, FocusTab {}), focused_line).await,
        AgentCommand::Back(_) => run(client, args, Selected::new(tab, GoBack::default()), navigated_line).await,
        AgentCommand::Forward(_) => run(client, args, Selected::new(tab, GoForward::default()), navigated_line).await,
        AgentCommand::Requests { body: Some(request_id), .. } => {
            let request = ReadResponseBody { request_id };
            run(client, args, Selected::new(tab, request), |body| format!("# {}\n{}", body.header(), body.body)).await
        }
        AgentCommand::Requests { failed, url, resource_type, limit, all, body: None, .. } => {
            let request = ListRequests { url, failed, resource_type, limit, all };
            run(client, args, Selected::new(tab, request), requests_text).await
        }
        AgentCommand::Snapshot { interactive, full, compact, selector, part, .. } => {
            let request = TakeSnapshot { interactive, full, compact, selector, part, ..TakeSnapshot::default() };
            run(client, args, Selected::new(tab, request), |snapshot| snapshot.text()).await
        }
        AgentCommand::Find { text, role, name, limit, .. } => {
            run(client, args, Selected::new(tab, FindInPage { text, role, name, limit }), found_text).await
        }
        AgentCommand::Click { element, double, .. } => {
            let click = Click { element, double_click: double, ..Click::default() };
            run(client, args, Selected::new(tab, Act::new(click)), act_text).await
        }
        AgentCommand::Type { element, text, submit, .. } => {
            let typed = TypeText { element, text, submit, slowly: false };
            run(client, args, Selected::new(tab, Act::new(typed)), act_text).await
        }
        AgentCommand::Press { key, .. } => {
            run(client, args, Selected::new(tab, Act::new(Press { key })), act_text).await
        }
        AgentCommand::Dialog { answer, text, .. } => {
            let accept = matches!(answer, DialogAnswer::Accept);
            let request = ArmDialog { accept, prompt_text: text, timeout_ms: None };
            run(client, args, Selected::new(tab, request), armed_text).await
        }
        AgentCommand::Act { action, .. } => run(client, args, act_from_json(&action, tab)?, act_text).await,
        AgentCommand::Screenshot { full_page, element, labels, .. } => {
            let request = TakeScreenshot { full_page, element_ref: element, labels, ..TakeScreenshot::default() };
            run(client, args, Selected::new(tab, request), |shot| shot.path.display().to_string()).await
        }
        AgentCommand::Ui { .. }
        | AgentCommand::Handoff { .. }
        | AgentCommand::Asks { .. }
        | AgentCommand::Allow { .. }
        | AgentCommand::Deny { .. }
        | AgentCommand::Done { .. }
        | AgentCommand::Activity { .. } => unreachable!("agent_command runs the person's side itself"),
    }
}

/// `act`'s JSON action, its tab as `--profile` and `--target` say, where
/// they do: they win over the JSON's own.
fn act_from_json(action: &str, tab: TabSelector) -> anyhow::Result<Selected<Act>> {
    let value: serde_json::Value = serde_json::from_str(action).context("the action is not JSON")?;
    let mut act = Selected::<Act>::from_json(value).context("the action is not a valid /act body")?;
    act.tab.profile = tab.profile.or(act.tab.profile);
    act.tab.target_id = tab.target_id.or(act.tab.target_id);
    Ok(act)
}

fn opened_line(tab: &Profiled<TabInfo>) -> String {
    format!("{}  [{}]", tab_line(tab), tab.profile)
}

fn pdf_line(pdf: &Profiled<Pdf>) -> String {
    format!("{}  ({} pages)", pdf.path.display(), pdf.pages)
}

fn closed_line(done: &Profiled<TabDone>) -> String {
    format!("{} closed  [{}]", done.target_id, done.profile)
}

fn focused_line(done: &Profiled<TabDone>) -> String {
    format!("{} is in front  [{}]", done.target_id, done.profile)
}

/// How a handoff ended, and the page then.
fn handed_back_text(back: &Profiled<HandedBack>) -> String {
    let how = match back.ended {
        HandoffEnded::Done => "the person said Done",
        HandoffEnded::TimedOut => "the time ran out before the person said Done",
        HandoffEnded::TabClosed => "the tab was closed",
    };
    let at = back.url.as_deref().map(|u| format!(": {u}")).unwrap_or_default();
    let page = back.snapshot.as_deref().map(|s| format!("\n{s}")).unwrap_or_default();
    format!("{how}; tab {}{at}{page}", back.target_id)
}

/// One profile's status, or each profile's.
fn status_text(status: &Status) -> String {
    match status {
        Status::One(profile) => profile_text(profile),
        Status::All(all) => all.profiles.iter().map(profile_text).collect::<Vec<_>>().join("\n"),
    }
}

/// A line per tab, the active one starred.
fn tabs_text(list: &Profiled<TabList>) -> String {
    let lines: Vec<String> =
        list.tabs.iter().map(|tab| format!("{} {}", if tab.active { "*" } else { " " }, tab_line(tab))).collect();
    lines.join("\n")
}

/// A line per match, then the notes, or that nothing matched.
fn found_text(found: &Profiled<Found>) -> String {
    let mut lines: Vec<String> = found.matches.iter().map(|m| m.text()).collect();
    lines.extend(found.notes.iter().map(|note| format!("# {note}")));
    if found.total == 0 {
        lines.push("# no match".into());
    }
    lines.join("\n")
}

/// The dialog answered, or that the next one will be.
fn armed_text(armed: &Profiled<DialogArmed>) -> String {
    match &armed.answered {
        Some(dialog) => format!("answered the {} \"{}\"", dialog.kind, dialog.message),
        None => "no dialog is open: the next one will be answered (for 2 minutes)".into(),
    }
}
