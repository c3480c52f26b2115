//! `browser-relay`: the command-line edge. Errors become anyhow here and
//! nowhere else.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;

use anyhow::Context as _;
use browser_relay::control::DEFAULT_CONTROL_PORT;
use browser_relay::control::client::ControlClient;
use browser_relay::net::guard::DEFAULT_EXTENSION_ID;
use browser_relay::server::{RunningServer, ServerOptions};
use managed_driver::ManagedBrowsers;
use managed_driver::config::{Config, Driver};
use state_dir::StateDir;

mod agent;
mod mcp;

use agent::AgentCommand;
use clap::{Parser, Subcommand};

use shared_protocol::DEFAULT_RELAY_PORT;

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
        #[arg(long, default_value_t = DEFAULT_RELAY_PORT)]
        port: u16,
        /// Loopback address to listen on (127.0.0.1 or ::1; nothing else is accepted).
        #[arg(long, default_value_t = IpAddr::V4(Ipv4Addr::LOCALHOST))]
        host: IpAddr,
        /// Port of the control API for agents (0 picks a free one).
        #[arg(long, default_value_t = DEFAULT_CONTROL_PORT)]
        control_port: u16,
        /// Do not run the control API (the relay only).
        #[arg(long)]
        no_control: bool,
        /// Extension ids allowed to connect to /extension (repeatable).
        #[arg(long = "extension-id", value_name = "ID", default_values_t = [DEFAULT_EXTENSION_ID.to_string()])]
        extension_ids: Vec<String>,
        /// Accept clients without the token. Only for throwaway sandboxes: any
        /// local process (or web page that guesses a rebinding trick we missed) could drive your browser.
        #[arg(long)]
        no_auth: bool,
    },
    /// Print this install's token (created on first use, mode 0600).
    Token,
    /// Print the endpoint to paste into connectOverCDP / puppeteer.connect.
    CdpUrl {
        #[arg(long, default_value_t = DEFAULT_RELAY_PORT)]
        port: u16,
    },
    /// Launch a profile's browser (the managed profile: an isolated Chrome). A no-op if it runs.
    Start(ProfileArgs),
    /// Stop a profile's browser: Browser.close, then SIGTERM, then SIGKILL.
    Stop(ProfileArgs),
    /// Show a profile's browser: running, pid, version, executable, profile folder, CDP endpoint.
    Status(ProfileArgs),
    /// List the profiles of config.toml (and the two defaults).
    Profiles {
        #[arg(long)]
        json: bool,
    },
    /// Agent commands: talk to a running `browser-relay serve`'s control API.
    #[command(flatten)]
    Agent(AgentCommand),
    /// Serve the control API as MCP tools on stdin/stdout (for agent hosts);
    /// each tool call goes to the running `browser-relay serve`.
    Mcp {
        /// Port of the control API.
        #[arg(long, default_value_t = DEFAULT_CONTROL_PORT)]
        control_port: u16,
    },
    /// Print the link that pairs the extension with this relay in one step
    /// (open it in the Chrome that has the extension).
    Pair {
        #[arg(long, default_value_t = DEFAULT_RELAY_PORT)]
        port: u16,
        /// The extension's id, if you loaded it with another key.
        #[arg(long, default_value = DEFAULT_EXTENSION_ID)]
        extension_id: String,
    },
}

#[derive(Debug, clap::Args)]
struct ProfileArgs {
    /// Profile name (default: config.toml's defaultProfile, or `chrome`).
    #[arg(long)]
    profile: Option<String>,
    /// A stable JSON envelope instead of text: {"ok": true, "data": …} or {"ok": false, "error": …}.
    #[arg(long)]
    json: bool,
    /// Port of the relay whose endpoint to show.
    #[arg(long, default_value_t = DEFAULT_RELAY_PORT)]
    port: u16,
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let json = match &cli.command {
        Command::Start(a) | Command::Stop(a) | Command::Status(a) => a.json,
        Command::Profiles { json } => *json,
        Command::Agent(agent) => agent.args().json,
        _ => false,
    };
    match run(cli).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            if json {
                let envelope = serde_json::json!({"ok": false, "error": {"message": format!("{error:#}")}});
                println_stdout(&envelope.to_string());
            } else {
                eprintln!("browser-relay: {error:#}");
            }
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let state = StateDir::resolve(cli.state_dir.as_deref())?;
    match cli.command {
        Command::Start(args) => managed(&state, args, Action::Start).await,
        Command::Stop(args) => managed(&state, args, Action::Stop).await,
        Command::Status(args) => managed(&state, args, Action::Status).await,
        Command::Profiles { json } => {
            let config = Config::load(state.root())?;
            if json {
                let profiles: Vec<_> = config.profiles.values().collect();
                let data = serde_json::json!({"defaultProfile": config.default_profile, "profiles": profiles});
                println_stdout(&serde_json::json!({"ok": true, "data": data}).to_string());
            } else {
                for profile in config.profiles.values() {
                    let default = if profile.name == config.default_profile { " (default)" } else { "" };
                    let driver = match profile.driver {
                        Driver::Extension => "extension: your own Chrome",
                        Driver::Managed => "managed: an isolated Chrome",
                    };
                    println_stdout(&format!("{}{default}\t{driver}\t{}", profile.name, profile.color));
                }
            }
            Ok(())
        }
        Command::Agent(agent) => agent::agent_command(&state, agent).await,
        Command::Serve { port, host, control_port, no_control, extension_ids, no_auth } => {
            let control = (!no_control).then(|| SocketAddr::new(host, control_port));
            serve(&state, SocketAddr::new(host, port), control, extension_ids, no_auth).await
        }
        Command::Mcp { control_port } => {
            let client = ControlClient::new(control_port, state.load_or_create_token()?);
            mcp::McpServer::new(client).serve_stdio().await
        }
        Command::Token => {
            let token = state.load_or_create_token()?;
            println_stdout(token.as_str());
            Ok(())
        }
        Command::Pair { port, extension_id } => {
            let token = state.load_or_create_token()?;
            println_stdout(&format!(
                "Open this link in Chrome (paste it into the address bar) to pair the Browser Relay extension:\n\n  chrome-extension://{extension_id}/options.html#port={port}&token={}\n",
                token.as_str()
            ));
            Ok(())
        }
        Command::CdpUrl { port } => {
            let token = state.load_or_create_token()?;
            println_stdout(&format!("http://127.0.0.1:{port}/?token={}", token.as_str()));
            Ok(())
        }
    }
}

#[allow(clippy::print_stdout)]
pub(crate) fn println_stdout(line: &str) {
    println!("{line}");
}

#[derive(Debug, Clone, Copy)]
enum Action {
    Start,
    Stop,
    Status,
}

async fn managed(state: &StateDir, args: ProfileArgs, action: Action) -> anyhow::Result<()> {
    let config = Config::load(state.root())?;
    let profile = config.profile(args.profile.as_deref())?.clone();
    let browsers = ManagedBrowsers::new(state.root());
    let token = state.load_or_create_token()?;
    let relay_base = format!("http://127.0.0.1:{}", args.port);
    let endpoint = managed_driver::cdp_endpoint(&relay_base, &profile, Some(token.as_str())).unwrap_or_default();
    let status = match (action, profile.driver) {
        (Action::Start, _) => browsers.start(&profile).await?,
        (Action::Stop, _) => browsers.stop(&profile).await?,
        (Action::Status, _) => browsers.status(&profile),
    };
    if args.json {
        let mut data = serde_json::to_value(&status)?;
        data["driver"] = serde_json::to_value(profile.driver)?;
        data["color"] = serde_json::json!(profile.color);
        data["cdpEndpoint"] = serde_json::json!(endpoint);
        println_stdout(&serde_json::json!({"ok": true, "data": data}).to_string());
        return Ok(());
    }
    println_stdout(&format!("profile {} ({:?}, {}): {}", profile.name, profile.driver, profile.color, status.detail));
    if let Some(version) = &status.browser_version {
        println_stdout(&format!("  browser      {version}"));
    }
    if let Some(executable) = &status.executable {
        println_stdout(&format!("  executable   {}", executable.display()));
    }
    if let Some(dir) = &status.user_data_dir {
        println_stdout(&format!("  profile dir  {}", dir.display()));
    }
    println_stdout(&format!("  CDP          {endpoint}  (through `browser-relay serve`, port {})", args.port));
    Ok(())
}

async fn serve(
    state: &StateDir,
    addr: SocketAddr,
    control: Option<SocketAddr>,
    extension_ids: Vec<String>,
    no_auth: bool,
) -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("BROWSER_RELAY_LOG").unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let token = if no_auth {
        tracing::warn!("--no-auth: ANY local process can drive the attached tabs. Use only in a throwaway sandbox.");
        None
    } else {
        Some(state.load_or_create_token().context("loading the token")?)
    };
    let mut options = ServerOptions::new(addr, token);
    options.extension_ids = extension_ids;
    options.state_root = Some(state.root().to_path_buf());
    options.control_addr = control;
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
    tokio::signal::ctrl_c().await.context("waiting for Ctrl-C")?;
    tracing::info!("shutting down");
    server.stop().await;
    Ok(())
}
