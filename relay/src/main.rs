//! `browser-relay`: the command-line edge. Errors become anyhow here and
//! nowhere else.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;

use anyhow::Context as _;
use browser_relay::net::guard::DEFAULT_EXTENSION_ID;
use browser_relay::server::{RunningServer, ServerOptions};
use browser_relay::state_dir::StateDir;
use clap::{Parser, Subcommand};

/// The extension relay's default port (the extension's default too).
const DEFAULT_RELAY_PORT: u16 = 18792;

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

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let state = StateDir::resolve(cli.state_dir.as_deref())?;
    match cli.command {
        Command::Serve { port, host, extension_ids, no_auth } => {
            serve(&state, SocketAddr::new(host, port), extension_ids, no_auth).await
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
fn println_stdout(line: &str) {
    println!("{line}");
}

async fn serve(state: &StateDir, addr: SocketAddr, extension_ids: Vec<String>, no_auth: bool) -> anyhow::Result<()> {
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
    let server = RunningServer::start(options).await?;
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
