//! `browser-relay`: the command-line edge. Errors become anyhow here and in
//! the binary's other edges (`agent.rs`, `mcp.rs`), nowhere in the library.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use browser_relay::DEFAULT_CONTROL_PORT;
use browser_relay::DEFAULT_EXTENSION_ID;
use browser_relay::StartServer;
use browser_relay::{RunningServer, ServerOptions};
use control_engine::Surface;
use settings::{Config, Driver};
use state_dir::StateDir;

mod agent;
mod console;
mod desktop;
mod grant;
mod logging;
mod mcp;
mod memory;

use agent::AgentCommand;
use clap::{Parser, Subcommand};

use shared_protocol::DEFAULT_RELAY_PORT;

/// Environment variables for the ports, read by every command that takes
/// them (so that scripts and tests can move them without flags).
pub(crate) const PORT_ENV: &str = "BROWSER_RELAY_PORT";
pub(crate) const CONTROL_PORT_ENV: &str = "BROWSER_RELAY_CONTROL_PORT";

#[derive(Debug, Parser)]
#[command(
    name = "browser-relay",
    version,
    about = "Drive your own Chrome tabs from CDP clients and agents, over loopback"
)]
struct Cli {
    /// State directory (config, token, profiles). Default: $BROWSER_RELAY_HOME or ~/.browser-relay.
    #[arg(long, global = true, value_name = "DIR")]
    state_dir: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the relay: /extension for the extension, /cdp and /json/* for CDP clients.
    Serve {
        /// Port of the extension relay (0 picks a free one).
        #[arg(long, env = PORT_ENV, default_value_t = DEFAULT_RELAY_PORT)]
        port: u16,
        /// Loopback address to listen on (127.0.0.1 or ::1; nothing else is accepted).
        #[arg(long, default_value_t = IpAddr::V4(Ipv4Addr::LOCALHOST))]
        host: IpAddr,
        /// Port of the control API for agents (0 picks a free one).
        #[arg(long, env = CONTROL_PORT_ENV, default_value_t = DEFAULT_CONTROL_PORT)]
        control_port: u16,
        /// Do not run the control API (the relay only).
        #[arg(long)]
        no_control: bool,
        /// Extension ids allowed to connect to /extension (repeatable).
        #[arg(long = "extension-id", value_name = "ID", default_values_t = [DEFAULT_EXTENSION_ID.to_string()])]
        extension_ids: Vec<String>,
        /// Accept CDP clients without the token. Only for throwaway sandboxes: any
        /// local process can then read and drive every shared tab and managed browser.
        /// The control API is not started with it (see --no-auth-control).
        #[arg(long)]
        no_auth: bool,
        /// With --no-auth, run the control API without the token too: any local
        /// process can then launch browsers, open file:// pages (if allowed) and upload files.
        #[arg(long, requires = "no_auth")]
        no_auth_control: bool,
        /// Launch this profile's browser once serving (repeatable), e.g. --start managed.
        #[arg(long = "start", value_name = "PROFILE")]
        start: Vec<String>,
        /// Once listening, print a link that pairs the extension with this
        /// relay (as `browser-relay pair` does, for the port serve got).
        #[arg(long)]
        pair: bool,
    },
    /// Print the extension's key: what its options page pairs with (or open
    /// `pair`'s link instead). Each door has a key of its own, derived from
    /// the install's secret (the token file, created on first use, mode
    /// 0600), which opens none: CDP clients get theirs from `cdp-url`, HTTP
    /// agents theirs with `--control`.
    Token {
        /// The control API's key for HTTP agents (`Authorization: Bearer …`),
        /// which opens no CDP route and pairs nothing.
        #[arg(long)]
        control: bool,
    },
    /// Print the endpoint to paste into connectOverCDP / puppeteer.connect,
    /// with the CDP clients' key (`token`, `pair` and `rotate` show keys too).
    CdpUrl {
        #[arg(long, env = PORT_ENV, default_value_t = DEFAULT_RELAY_PORT)]
        port: u16,
        /// The profile whose endpoint (default: config.toml's defaultProfile).
        #[arg(long, conflicts_with = "grant")]
        profile: Option<String>,
        /// The grant's endpoint, with its key (`browser-relay grant add`).
        #[arg(long, value_name = "NAME")]
        grant: Option<String>,
    },
    /// Lend your browser to an agent or script: a revocable key of its
    /// own, its own tab group, the sites it may use.
    #[command(subcommand)]
    Grant(grant::GrantCommand),
    /// List the profiles of config.toml (and the two defaults).
    Profiles {
        #[arg(long)]
        json: bool,
    },
    /// Agent commands: talk to a running `browser-relay serve`'s control API.
    #[command(flatten)]
    Agent(AgentCommand),
    /// Serve the control API as MCP tools on stdin/stdout (for agent hosts).
    /// Tool calls go to the running `browser-relay serve`; with none running,
    /// this process runs the relay and the control API itself (on the same
    /// ports) and stops the browsers it launched when the host ends it.
    Mcp {
        /// Port of the control API (of the running serve, or of this one).
        #[arg(long, env = CONTROL_PORT_ENV, default_value_t = DEFAULT_CONTROL_PORT)]
        control_port: u16,
        /// Port of the extension relay, when this process runs it.
        #[arg(long, env = PORT_ENV, default_value_t = DEFAULT_RELAY_PORT)]
        port: u16,
        /// Act as this grant (`browser-relay grant add`): the agent sees
        /// only its tabs and stays on its sites.
        #[arg(long, env = agent::GRANT_ENV, value_name = "NAME")]
        grant: Option<String>,
    },
    /// Call any MCP tool from the command line (the same table MCP serves):
    /// without a name, the list; `browser-relay tool browser_click
    /// '{"ref":"e3"}'` prints what the model would read.
    Tool {
        /// The tool (`browser-relay tool` lists them).
        name: Option<String>,
        /// Its arguments: one JSON object, as its MCP schema says.
        arguments: Option<String>,
        /// Port of the running serve's control API.
        #[arg(long, env = CONTROL_PORT_ENV, default_value_t = DEFAULT_CONTROL_PORT)]
        control_port: u16,
        /// Act as this grant (`browser-relay grant add`).
        #[arg(long, env = agent::GRANT_ENV, value_name = "NAME")]
        grant: Option<String>,
    },
    /// Replace this install's secret with a new one (serve must be stopped):
    /// every key derived from the old one stops working (CDP URLs, the
    /// control key, control sessions), and the extension asks to be paired
    /// again; prints the new pairing link.
    Rotate {
        #[arg(long, env = PORT_ENV, default_value_t = DEFAULT_RELAY_PORT)]
        port: u16,
        #[arg(long, env = CONTROL_PORT_ENV, default_value_t = DEFAULT_CONTROL_PORT)]
        control_port: u16,
        /// The extension's id for the link (as `pair`).
        #[arg(long)]
        extension_id: Option<String>,
    },
    /// Print the link that pairs the extension with this relay in one step
    /// (open it in the Chrome that has the extension).
    Pair {
        #[arg(long, env = PORT_ENV, default_value_t = DEFAULT_RELAY_PORT)]
        port: u16,
        /// The extension's id (default: the pinned development id, and
        /// each of config.toml's extensionIds, e.g. the Chrome Web Store's).
        #[arg(long)]
        extension_id: Option<String>,
    },
}

/// What `--version` and `-V` print after the name: the version, the commit
/// and day of the build (`build.rs`), and the extension protocols this relay
/// takes (the newest is the one it speaks).
fn version_text() -> String {
    let protocols = match (shared_protocol::OLDEST_PROTOCOL_VERSION, shared_protocol::PROTOCOL_VERSION) {
        (oldest, newest) if oldest == newest => format!("extension protocol {newest}"),
        (oldest, newest) => format!("extension protocols {oldest}-{newest}"),
    };
    format!(
        "{} (commit {}, built {}, {protocols})",
        env!("CARGO_PKG_VERSION"),
        env!("BROWSER_RELAY_COMMIT"),
        env!("BROWSER_RELAY_BUILD_DATE"),
    )
}

/// [`Cli::parse_from`], with [`version_text`] as the version.
fn parse_cli(args: Vec<std::ffi::OsString>) -> Cli {
    use clap::{CommandFactory as _, FromArgMatches as _};
    // clap takes a `&'static str` (its `string` feature would rebuild it
    // for every crate): the one text, made once per run.
    let version: &'static str = Box::leak(version_text().into_boxed_str());
    let matches = Cli::command().version(version).get_matches_from(args);
    Cli::from_arg_matches(&matches).unwrap_or_else(|error| error.exit())
}

fn main() -> std::process::ExitCode {
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("browser-relay: cannot start: {error}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let code = runtime.block_on(main_async());
    // Everything the command does is awaited by now. What may be left is a
    // read of stdin that never returns (an MCP server a signal ended while
    // its host kept stdin open): wait a moment for other blocking work,
    // never for that.
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    code
}

async fn main_async() -> std::process::ExitCode {
    let own_window = console::window_of_its_own();
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if double_clicked(&args, own_window) {
        eprintln!("Browser Relay runs in this window: closing it (or Ctrl-C) stops it.\n");
        args.extend(DOUBLE_CLICK_ARGS.iter().map(std::ffi::OsString::from));
    }
    let cli = parse_cli(args);
    // serve and mcp log; the other commands answer on stdout and stderr
    // themselves.
    let log = matches!(cli.command, Command::Serve { .. } | Command::Mcp { .. }).then(init_logging);
    let json = match &cli.command {
        Command::Profiles { json } => *json,
        Command::Agent(agent) => agent.args().json,
        _ => false,
    };
    let outcome = run(cli).await;
    // The log's queued lines first, so that the error below comes last.
    drop(log);
    match outcome {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            if json {
                let envelope = serde_json::json!({"ok": false, "error": {"message": error_text(&error)}});
                println_stdout(&envelope.to_string());
            } else {
                eprintln!("browser-relay: {}", error_text(&error));
            }
            // The window closes with the process: keep the error readable
            // (not for a host that gave us pipes, an MCP host's window).
            if own_window && std::io::IsTerminal::is_terminal(&std::io::stdin()) {
                eprintln!("\nPress Enter to close this window.");
                let _ = std::io::stdin().read_line(&mut String::new());
            }
            std::process::ExitCode::FAILURE
        }
    }
}

/// An error and its causes, each said once. A library's message often
/// ends with its cause already ("cannot read config.toml: <why>"), and
/// anyhow's `{:#}` would say the cause again after it.
pub(crate) fn error_text(error: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in error.chain() {
        let said = cause.to_string();
        if text.is_empty() {
            text = said;
        } else if !text.ends_with(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
    }
    text
}

/// Whether this launch is a double-click in Explorer: no arguments, and a
/// console window of its own. Then `browser-relay.exe` starts the relay,
/// as its user means, rather than printing its help into a window that
/// closes at once.
fn double_clicked(args: &[std::ffi::OsString], window_of_its_own: bool) -> bool {
    args.len() == 1 && window_of_its_own
}

/// What a double-click runs: `serve`, with the pairing link in its window
/// (a user who double-clicks has no terminal to run `pair` in).
const DOUBLE_CLICK_ARGS: [&str; 2] = ["serve", "--pair"];

async fn run(cli: Cli) -> anyhow::Result<()> {
    let state = StateDir::resolve(cli.state_dir.as_deref())?;
    match cli.command {
        Command::Profiles { json } => list_profiles(&state, json),
        Command::Agent(agent) => agent::agent_command(&state, agent).await,
        Command::Serve {
            port,
            host,
            control_port,
            no_control,
            extension_ids,
            no_auth,
            no_auth_control,
            start,
            pair,
        } => {
            // Without the token the control API is open to every local user:
            // only when asked for twice.
            let control = (!no_control && (!no_auth || no_auth_control)).then(|| SocketAddr::new(host, control_port));
            let options = Serve { addr: SocketAddr::new(host, port), control, extension_ids, no_auth, start, pair };
            serve(&state, options).await
        }
        Command::Mcp { control_port, port, grant } => mcp(&state, port, control_port, grant.as_deref()).await,
        Command::Tool { name, arguments, control_port, grant } => {
            let client = grant::control_client(&state, control_port, grant.as_deref())?.on(Surface::Mcp);
            mcp::run_tool(client, state.media(), name.as_deref(), arguments.as_deref()).await
        }
        Command::Grant(command) => grant::grant_command(&state, command).await,
        Command::Token { control } => {
            let token = state.load_or_create_token()?;
            // A door's key, never the secret (browser_relay::keys).
            let shown = if control { browser_relay::control_key(&token) } else { browser_relay::extension_key(&token) };
            println_stdout(shown.as_str());
            Ok(())
        }
        Command::Rotate { port, control_port, extension_id } => rotate(&state, port, control_port, extension_id),
        Command::Pair { port, extension_id } => {
            let token = state.load_or_create_token()?;
            print_pairing(&state, &token, port, extension_id)
        }
        Command::CdpUrl { port, grant: Some(name), .. } => {
            println_stdout(&grant::cdp_url(&state, port, &name)?);
            Ok(())
        }
        Command::CdpUrl { port, profile, grant: None } => {
            let config = Config::load(state.root())?;
            let profile = config.profile(profile.as_deref())?;
            // The CDP key, never the secret: a client sends it to whatever
            // listens on the port (browser_relay::keys).
            let token = browser_relay::cdp_key(&state.load_or_create_token()?);
            // Through the relay, which holds a remote browser's secrets (its
            // cdpUrl's token, its headers) and its one connection.
            let url = match profile.driver {
                Driver::Extension => format!("http://127.0.0.1:{port}/?token={}", token.as_str()),
                Driver::Managed => {
                    format!("http://127.0.0.1:{port}/profiles/{}/?token={}", profile.name, token.as_str())
                }
            };
            println_stdout(&url);
            Ok(())
        }
    }
}

/// `profiles`: each profile, its driver and, for a local managed one, the
/// browser it would launch here (or why none).
fn list_profiles(state: &StateDir, json: bool) -> anyhow::Result<()> {
    let config = Config::load(state.root())?;
    if json {
        let profiles: Vec<_> = config.profiles.values().collect();
        let data = serde_json::json!({"defaultProfile": config.default_profile, "profiles": profiles});
        println_stdout(&serde_json::json!({"ok": true, "data": data}).to_string());
    } else {
        if config.default_is_auto() {
            println_stdout(
                "default: auto (your shared tabs when a tab is shared, else the managed Chrome, launched on first use)",
            );
        }
        for profile in config.profiles.values() {
            let default = if profile.name == config.default_profile { " (default)" } else { "" };
            let driver = match (profile.driver, profile.remote_url()) {
                (Driver::Extension, _) => "extension: your own Chrome".to_string(),
                (Driver::Managed, None) => "managed: an isolated Chrome".to_string(),
                // Shown without its secrets (query, credentials).
                (Driver::Managed, Some(url)) => {
                    format!("managed: remote, never launched ({})", settings::redacted_url(&url))
                }
            };
            // Which browser a local managed profile would launch here
            // (discovery on this computer's disk), or why none.
            let browser = match (profile.driver, profile.remote_url()) {
                (Driver::Managed, None) => match managed_driver::find_executable(profile.executable_path.as_deref()) {
                    Ok(path) => format!("\tbrowser: {}", path.display()),
                    Err(error) => format!("\t{error}"),
                },
                _ => String::new(),
            };
            println_stdout(&format!("{}{default}\t{driver}\t{}{browser}", profile.name, profile.color));
        }
    }
    Ok(())
}

/// `rotate`: a new secret, while no relay runs on it; the grants keep
/// their sites, with new keys.
fn rotate(state: &StateDir, port: u16, control_port: u16, extension_id: Option<String>) -> anyhow::Result<()> {
    // A running serve keeps the old secret in memory: rotating under
    // it would leave the two out of step. Every relay of this state
    // folder holds its lock, on whatever port (state-dir's
    // serving.rs); the ports are asked too, for one from before.
    let _alone = state.hold_for_rotation()?;
    for taken in [port, control_port] {
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], taken));
        if browser_relay::is_taken(addr) {
            anyhow::bail!(
                "something listens on {addr}: stop `browser-relay serve` first (it holds the secret), then rotate and start it again"
            );
        }
    }
    let old = state.load_or_create_token()?;
    let token = state.rotate_token()?;
    // The grants stay, with new keys (derived from the new secret).
    let grants = grants::GrantBook::new(state.clone()).resign(&old, &token);
    match grants {
        Ok(0) => {}
        Ok(n) => println_stdout(&format!(
            "{n} grant(s) keep their sites with new keys: print each one's with `browser-relay cdp-url --grant NAME`.\n"
        )),
        Err(error) => eprintln!("browser-relay: the grants were not moved to the new secret: {error}"),
    }
    println_stdout(
        "A new secret replaces the old one: CDP URLs (`browser-relay cdp-url`), the control key \
         (`browser-relay token --control`) and sessions made with the old one no longer work, and the \
         extension asks to be paired again.\n",
    );
    print_pairing(state, &token, port, extension_id)
}

/// `pair`'s and `rotate`'s answer: the pairing link(s) for `extension_id`,
/// else for the pinned id and config.toml's `extensionIds`.
fn print_pairing(
    state: &StateDir,
    token: &state_dir::Token,
    port: u16,
    extension_id: Option<String>,
) -> anyhow::Result<()> {
    println_stdout(&pairing_text(state, token, port, &pairing_ids(state, extension_id)?)?);
    Ok(())
}

/// The extensions `pair` and `rotate` print links for: the one asked for,
/// else the pinned development id and config.toml's `extensionIds`.
fn pairing_ids(state: &StateDir, extension_id: Option<String>) -> anyhow::Result<Vec<String>> {
    Ok(match extension_id {
        Some(id) => vec![id],
        None => with_published_ids(vec![DEFAULT_EXTENSION_ID.to_string()], &Config::load(state.root())?),
    })
}

/// `ids`, then config.toml's `extensionIds` (the published extension's)
/// not among them.
fn with_published_ids(mut ids: Vec<String>, config: &Config) -> Vec<String> {
    for id in &config.extension_ids {
        if !ids.contains(id) {
            ids.push(id.clone());
        }
    }
    ids
}

/// What `pair` prints: the link(s) that pair the extension with this
/// relay, one per extension id in `ids`, with a one-time code issued for
/// them.
fn pairing_text(state: &StateDir, token: &state_dir::Token, port: u16, ids: &[String]) -> anyhow::Result<String> {
    // A one-time code, never the secret: Chrome keeps every address it
    // opens in its history, fragment and all.
    let code = state.pairing_codes().issue(token)?;
    let links: Vec<String> = ids
        .iter()
        .map(|id| format!("  chrome-extension://{id}/options.html#port={port}&code={}", code.as_str()))
        .collect();
    let which = match links.len() {
        1 => "",
        _ => " (one per extension id: the one of the extension you installed opens)",
    };
    let tail = |text: &str| text[text.len() - 6..].to_string();
    // The extension names its pairing by the end of the key it holds.
    let (token_tail, code_tail) = (tail(browser_relay::extension_key(token).as_str()), tail(code.as_str()));
    let minutes = state_dir::CODE_LIFETIME.as_secs() / 60;
    Ok(format!(
        "Open this link in Chrome (paste it into the address bar) to pair the Browser Relay extension{which}:\n\n{}\n\n\
         It holds a one-time code, good for {minutes} minutes, not the secret: `browser-relay serve` must be \
         running when you open it. If the extension asks before replacing another pairing, check that it names \
         \"the relay on port {port} that printed this link (code …{code_tail})\". Once paired, it names this \
         relay \"the relay on port {port} (token …{token_tail})\".\n",
        links.join("\n")
    ))
}

/// `serve --pair` in a terminal or console window: the link once
/// listening, and a new one shortly before its code expires while no
/// extension has connected to this serve, so the window (a double-click's)
/// always shows a link that works; an extension already paired connects
/// within seconds, and nothing more is printed. Printed elsewhere (a log
/// file), the one link is all: a log would keep a live code for as long
/// as serve runs.
///
/// The code's age is the wall clock's (`now`), which goes on while the
/// computer sleeps; tokio's sleeps do not. It is looked at every
/// [`PAIRING_LINK_CHECK`].
async fn keep_a_pairing_link(
    lifetime: std::time::Duration,
    now: impl Fn() -> std::time::SystemTime,
    connected: impl Fn() -> bool,
    mut print: impl FnMut(Link),
) {
    let mut issued = now();
    print(Link::First);
    loop {
        tokio::time::sleep(PAIRING_LINK_CHECK).await;
        if connected() {
            return;
        }
        // A clock set back makes the code look issued later, which the
        // relay takes as expired: a new link then too.
        if now().duration_since(issued).is_ok_and(|age| age + PAIRING_LINK_CHECK < lifetime) {
            continue;
        }
        issued = now();
        print(Link::Renewed);
    }
}

/// How often `serve --pair` looks whether an extension connected and
/// whether its link is about to expire.
const PAIRING_LINK_CHECK: std::time::Duration = std::time::Duration::from_secs(30);

/// Which of `serve --pair`'s links is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Link {
    First,
    /// The one before expired unused.
    Renewed,
}

/// `serve --pair`'s link, for the port serve got (`--port 0` included).
/// Serving does not depend on it: a code that cannot be issued, or a
/// stdout that takes nothing (closed, full, a console window whose text is
/// being selected), is a warning, and the write has a thread of its own.
fn print_serves_pairing(state: &StateDir, token: &state_dir::Token, port: u16, ids: &[String], link: Link) {
    let text = match pairing_text(state, token, port, ids) {
        Ok(text) if link == Link::Renewed => {
            format!("The link above expires now, and no extension has connected. A new one:\n\n{text}")
        }
        Ok(text) => text,
        Err(error) => {
            tracing::warn!("no pairing link: {} (`browser-relay pair` prints one)", error_text(&error));
            return;
        }
    };
    std::thread::spawn(move || {
        use std::io::Write as _;
        let mut stdout = std::io::stdout().lock();
        if let Err(error) = writeln!(stdout, "{text}").and_then(|()| stdout.flush()) {
            tracing::warn!("the pairing link could not be printed ({error}): `browser-relay pair` prints one");
        }
    });
}

#[allow(clippy::print_stdout)]
pub(crate) fn println_stdout(line: &str) {
    println!("{line}");
}

/// What `serve` was asked for.
#[derive(Debug)]
struct Serve {
    addr: SocketAddr,
    control: Option<SocketAddr>,
    extension_ids: Vec<String>,
    no_auth: bool,
    /// Profiles to launch once serving.
    start: Vec<String>,
    /// Print a pairing link once listening.
    pair: bool,
}

/// The relay (and the control API, at `control`) as `serve` and a
/// standalone `mcp` run them.
fn server_options(
    state: &StateDir,
    addr: SocketAddr,
    control: Option<SocketAddr>,
    extension_ids: Vec<String>,
    no_auth: bool,
) -> anyhow::Result<ServerOptions> {
    let pairing = state.load_or_create_token().context("loading the token")?;
    let mut options = ServerOptions::new(addr, (!no_auth).then(|| pairing.clone()));
    // The extension proves its pairing even when CDP clients need no token.
    options.pairing = Some(pairing);
    // The published extension's id (config.toml's extensionIds) next to
    // the ones asked for.
    let config = Config::load(state.root()).context("reading config.toml")?;
    options.extension_ids = with_published_ids(extension_ids, &config);
    options.relay.wipes_allowed = config.allow_wiping_browser_data;
    options.record_activity = config.record_activity;
    options.state_root = Some(state.root().to_path_buf());
    options.control_addr = control;
    Ok(options)
}

/// Logs to stderr (stdout is the CLI's answer, or MCP's channel), at the
/// level `BROWSER_RELAY_LOG` asks for, except tungstenite's trace events at
/// any level: they quote whole WebSocket requests, and a remote profile's
/// carry its token and headers (SECURITY.md R43). Lines are written from a
/// thread of their own ([`logging`]): an unread stderr never stops the
/// relay. Keep the returned [`logging::Flush`] until the process ends.
fn init_logging() -> logging::Flush {
    use std::io::IsTerminal as _;
    use tracing_subscriber::prelude::*;
    let filter = tracing_subscriber::EnvFilter::try_from_env("BROWSER_RELAY_LOG").unwrap_or_else(|_| "info".into());
    let quotes_requests = tracing_subscriber::filter::filter_fn(|meta| {
        !(*meta.level() == tracing::Level::TRACE && meta.target().contains("tungstenite"))
    });
    let colours = logging::colours(
        std::io::stderr().is_terminal(),
        std::env::var_os("NO_COLOR").as_deref(),
        console::shows_colours,
    );
    let (lines, flush) = logging::stderr_lines();
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(lines)
                .with_ansi(colours)
                .with_filter(filter)
                .with_filter(quotes_requests),
        )
        .init();
    flush
}

/// Stops the server, then the browsers this process launched: they speak
/// only over its pipes (were it killed instead, its pipes close and they
/// quit).
async fn stop_server(state: &StateDir, server: RunningServer) {
    let browsers = server.browsers.clone();
    server.stop().await;
    // Ephemeral profiles are stopped (and deleted) even when config.toml
    // cannot be read now.
    let profiles = Config::load(state.root()).map(|c| c.profiles).unwrap_or_default();
    if let Some(browsers) = browsers {
        browsers.stop_owned(profiles.values()).await;
    }
}

/// `browser-relay mcp`: the tools over the running serve's control API
/// when one listens on `control_port`; else over a relay and control API
/// this process runs itself, on the usual ports (the extension and CDP
/// clients reach it as they reach serve), until the host ends it. When the
/// server it used goes away later (another `mcp` that ran it was closed by
/// its host), it runs its own from then on: agents sharing one machine keep
/// working whichever of them ends first.
async fn mcp(state: &StateDir, port: u16, control_port: u16, grant: Option<&str>) -> anyhow::Result<()> {
    // A host may end its server with a signal rather than by closing stdin
    // (or Ctrl-C reaches it in a terminal): the browsers it launched are
    // then stopped in order all the same, as serve's are.
    let mut signals = browser_relay::ShutdownSignals::listen().context("listening for Ctrl-C")?;
    // A grant that is not given stops the server before it serves a tool.
    let client = grant::control_client(state, control_port, grant)?;
    let control = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), control_port);
    let own: Arc<tokio::sync::Mutex<Option<RunningServer>>> = Arc::default();
    if let Some(server) = own_server(state, port, control)
        .await
        .context("no `browser-relay serve` answers, and this MCP server cannot run its own")?
    {
        tracing::info!(
            "no `browser-relay serve` was running: this MCP server runs the relay on {} and the control API on {} until its host ends it",
            server.addr,
            server.control_url().unwrap_or_default()
        );
        *own.lock().await = Some(server);
    }
    let control_port = match own.lock().await.as_ref().and_then(|s| s.control.as_ref()) {
        Some((addr, _)) => addr.port(),
        None => control_port,
    };
    let revive: Arc<StartServer> = {
        let (state, own) = (state.clone(), own.clone());
        let control = SocketAddr::new(control.ip(), control_port);
        Arc::new(move || {
            let (state, own) = (state.clone(), own.clone());
            Box::pin(async move {
                let mut own = own.lock().await;
                if own.is_some() {
                    // Ours answers no more: nothing this process can mend.
                    return Err("this MCP server's own control API stopped answering".to_string());
                }
                match own_server(&state, port, control).await {
                    Ok(Some(server)) => {
                        tracing::info!(
                            "the control API this MCP server used went away: it now runs the relay on {} and the control API on {} itself",
                            server.addr,
                            server.control_url().unwrap_or_default()
                        );
                        *own = Some(server);
                        Ok(())
                    }
                    // Another process took the port first: use it.
                    Ok(None) => Ok(()),
                    Err(error) => {
                        Err(format!("it went away, and this MCP server cannot run its own: {}", error_text(&error)))
                    }
                }
            })
        })
    };
    let client = client.with_port(control_port).on(Surface::Mcp).reviving(revive);
    let served = tokio::select! {
        served = mcp::McpServer::new(client, state.media()).serve_stdio() => served,
        why = signals.recv() => {
            tracing::info!("shutting down ({why})");
            Ok(())
        }
    };
    if let Some(server) = own.lock().await.take() {
        stop_server(state, server).await;
    }
    served
}

/// A relay on `port` and a control API on `control`, run by this process,
/// unless something already listens on `control` (`None`: use that).
async fn own_server(state: &StateDir, port: u16, control: SocketAddr) -> anyhow::Result<Option<RunningServer>> {
    if browser_relay::is_taken(control) {
        return Ok(None);
    }
    let addr = SocketAddr::new(control.ip(), port);
    let options = server_options(state, addr, Some(control), vec![DEFAULT_EXTENSION_ID.to_string()], false)?;
    match RunningServer::start(options).await {
        Ok(server) => {
            // This process now serves: what a page's megabytes took goes
            // back when freed (issue 46).
            memory::return_large_blocks();
            Ok(Some(server))
        }
        // Another process (a second MCP server, a serve starting) took the
        // port meanwhile: use it.
        Err(_) if browser_relay::is_taken(control) => Ok(None),
        Err(error) => Err(error.into()),
    }
}

async fn serve(
    state: &StateDir,
    Serve { addr, control, extension_ids, no_auth, start, pair }: Serve,
) -> anyhow::Result<()> {
    if control.is_none() && !start.is_empty() {
        anyhow::bail!(
            "--start needs the control API, which is off (--no-control, or --no-auth without --no-auth-control)"
        );
    }
    if no_auth {
        tracing::warn!(
            "--no-auth: ANY local process can read and drive every shared tab and managed browser through the relay \
             (/cdp, /devtools/*, /json/*, /profiles/*). Use only in a throwaway sandbox."
        );
        match control {
            Some(_) => tracing::warn!(
                "--no-auth-control: ANY local process can also use the control API: launch browsers, open pages, upload files"
            ),
            None => {
                tracing::warn!("the control API is not started (add --no-auth-control to run it without the token too)")
            }
        }
    }
    let options = server_options(state, addr, control, extension_ids, no_auth)?;
    let pairing = pair.then(|| (options.pairing.clone(), options.extension_ids.clone()));
    // From here on Ctrl-C and the system's stop requests end serve cleanly
    // (also while `--start` is launching browsers).
    let mut signals = browser_relay::ShutdownSignals::listen().context("listening for Ctrl-C")?;
    // What a page's megabytes take goes back when freed (issue 46).
    memory::return_large_blocks();
    let server = RunningServer::start(options).await?;
    if let Some(url) = server.control_url() {
        tracing::info!(
            "control API on {url} (send the token as 'Authorization: Bearer …'; `browser-relay token` prints it)"
        );
    }
    tracing::info!(
        "relay listening on http://{} (state: {}); CDP endpoint: `browser-relay cdp-url --port {}`",
        server.addr,
        state.root().display(),
        server.addr.port()
    );
    let pairing_links = match pairing {
        Some((Some(token), ids)) => {
            let (relay, state, port) = (server.relay.clone(), state.clone(), server.addr.port());
            let print = move |link| print_serves_pairing(&state, &token, port, &ids, link);
            if std::io::IsTerminal::is_terminal(&std::io::stdout()) {
                let connected = move || relay.stats().extension_connections > 0;
                let now = std::time::SystemTime::now;
                Some(tokio::spawn(keep_a_pairing_link(state_dir::CODE_LIFETIME, now, connected, print)))
            } else {
                print(Link::First);
                None
            }
        }
        _ => None,
    };
    if let Some((_, engine)) = &server.control {
        for profile in &start {
            use control_engine::api::{Handle as _, Selected, StartBrowser, TabSelector};
            let selector = TabSelector { profile: Some(profile.clone()), target_id: None };
            match engine.handle(Selected::new(selector, StartBrowser::default())).await {
                Ok(status) => tracing::info!("profile {profile}: {}", status.detail),
                Err(e) => tracing::error!("profile {profile} did not start: {e}"),
            }
        }
    }
    let why = signals.recv().await;
    tracing::info!("shutting down ({why})");
    if let Some(links) = pairing_links {
        links.abort();
    }
    stop_server(state, server).await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{
        Cli, Command, Config, DEFAULT_EXTENSION_ID, DOUBLE_CLICK_ARGS, Link, double_clicked, error_text,
        keep_a_pairing_link, with_published_ids,
    };

    #[tokio::test(start_paused = true)]
    async fn serve_pair_prints_a_new_link_while_no_extension_connected() {
        use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
        use std::sync::{Arc, Mutex};
        use std::time::{Duration, SystemTime};
        let lifetime = Duration::from_secs(600);
        let printed = Arc::new(Mutex::new(Vec::new()));
        let connected = Arc::new(AtomicBool::new(false));
        // The wall clock: tokio's paused time, plus what a sleeping
        // computer skips (which tokio's clock does not see).
        let (start, skipped) = (tokio::time::Instant::now(), Arc::new(AtomicU64::new(0)));
        let (seen, now_connected, slept) = (printed.clone(), connected.clone(), skipped.clone());
        let now = move || SystemTime::UNIX_EPOCH + start.elapsed() + Duration::from_secs(slept.load(Ordering::SeqCst));
        let links = tokio::spawn(keep_a_pairing_link(
            lifetime,
            now,
            move || now_connected.load(Ordering::SeqCst),
            move |link| seen.lock().unwrap().push(link),
        ));
        let printed_after = |wait: Duration| {
            let printed = printed.clone();
            async move {
                tokio::time::sleep(wait).await;
                printed.lock().unwrap().clone()
            }
        };
        assert_eq!(printed_after(Duration::from_secs(1)).await, [Link::First]);
        // Well before the code expires: nothing new.
        assert_eq!(printed_after(Duration::from_secs(500)).await, [Link::First]);
        // About to expire, nobody connected: a new link before it does.
        assert_eq!(printed_after(Duration::from_secs(89)).await, [Link::First, Link::Renewed]);
        assert_eq!(printed_after(lifetime).await, [Link::First, Link::Renewed, Link::Renewed]);
        // The computer slept through the code's lifetime: a new link at the
        // next look, not ten minutes later.
        skipped.store(lifetime.as_secs(), Ordering::SeqCst);
        assert_eq!(printed_after(Duration::from_secs(31)).await.len(), 4);
        // An extension connected: no more links, and the task ends.
        connected.store(true, Ordering::SeqCst);
        tokio::time::sleep(lifetime * 3).await;
        assert_eq!(printed.lock().unwrap().len(), 4);
        assert!(links.is_finished());
    }

    #[test]
    fn a_double_click_starts_the_relay_and_a_terminal_gets_what_it_typed() {
        let args = |list: &[&str]| list.iter().map(std::ffi::OsString::from).collect::<Vec<_>>();
        assert!(double_clicked(&args(&["browser-relay.exe"]), true), "no arguments, a window of its own: serve");
        assert!(!double_clicked(&args(&["browser-relay"]), false), "a terminal: the help");
        assert!(!double_clicked(&args(&["browser-relay.exe", "tabs"]), true), "arguments are never replaced");
    }

    #[test]
    fn an_errors_cause_is_said_once() {
        let missing = std::io::Error::new(std::io::ErrorKind::NotFound, "The system cannot find the file specified.");
        let read = settings::ConfigError::Read { path: "C:\\config.toml".into(), source: missing };
        // A library error whose message holds its cause, in a context.
        let error = anyhow::Error::from(read).context("reading config.toml");
        assert_eq!(
            error_text(&error),
            "reading config.toml: cannot read C:\\config.toml: The system cannot find the file specified."
        );
        // A cause that is not in the message yet is still said.
        let plain = anyhow::anyhow!("os error 5").context("cannot write run.json");
        assert_eq!(error_text(&plain), "cannot write run.json: os error 5");
    }

    #[test]
    fn the_published_extensions_id_joins_the_ones_asked_for_once() {
        let store = "abcdefghijklmnopabcdefghijklmnop";
        let text = format!("extensionIds = [{store:?}, {DEFAULT_EXTENSION_ID:?}]\n");
        let config = Config::parse(&text, std::path::Path::new("config.toml")).unwrap();
        let ids = with_published_ids(vec![DEFAULT_EXTENSION_ID.to_string()], &config);
        assert_eq!(ids, [DEFAULT_EXTENSION_ID, store], "one link, one allowed origin, per extension");
    }

    #[test]
    fn a_double_click_serves_and_shows_the_pairing_link() {
        use clap::Parser as _;
        let launched = std::iter::once("browser-relay.exe").chain(DOUBLE_CLICK_ARGS);
        let cli = Cli::try_parse_from(launched).expect("the parser takes what a double-click runs");
        assert!(matches!(cli.command, Command::Serve { pair: true, .. }), "{:?}", cli.command);
    }
}
