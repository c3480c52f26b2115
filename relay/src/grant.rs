//! `browser-relay grant add|list|revoke`: the person lends part of their
//! browser to one agent or script at a time. `grants.json` is written here
//! (the `grants` crate's `GrantBook`), and a running `serve` is told to read
//! it again (`POST /grants/reload`), which closes a revoked grant's
//! connections at once. Also the `--grant` of the agent commands and of
//! `mcp`, and `cdp-url --grant`.

use anyhow::Context as _;
use browser_relay::ControlClient;
use grants::{AskKind, Door, Grant, GrantBook, GrantName, GroupColor, NewGrant, Sites};
use state_dir::StateDir;

use crate::println_stdout;

#[derive(Debug, clap::Subcommand)]
pub(crate) enum GrantCommand {
    /// Give an agent or script a key of its own: it sees only the tabs in
    /// its tab group, its tabs stay on its sites, and it reads only their
    /// cookies. Prints what to hand it.
    Add {
        /// Letters, digits, '-' and '_', at most 32: its tab group's title.
        name: String,
        /// Where its tabs may go, comma-separated: example.com (that host),
        /// *.example.com (any subdomain), https://app.example.com or
        /// http://127.0.0.1:8765 (that origin). Default: any site.
        #[arg(long, value_name = "LIST")]
        sites: Option<String>,
        /// Its tab group's colour: #RRGGBB or a Chrome tab group colour
        /// (grey, blue, red, yellow, green, pink, purple, cyan, orange).
        /// Default: one no other grant has.
        #[arg(long)]
        color: Option<String>,
        /// Its keys stop working after this long: 30m, 8h, 2d.
        #[arg(long, value_name = "DURATION")]
        expires: Option<String>,
        /// Its agents may not run JavaScript of their own in the page (the
        /// agent API's evaluate and wait with fn).
        #[arg(long)]
        no_evaluate: bool,
        /// What it asks you about before it happens, comma-separated:
        /// submit (a form sent), download, upload (a file given to a
        /// page), new-site (a site its tabs have not been on), input
        /// (every click and key), or all. You answer in the browser's
        /// notification, on the dashboard or with `browser-relay allow`.
        #[arg(long, value_name = "LIST")]
        ask: Option<String>,
        #[command(flatten)]
        ports: Ports,
    },
    /// Change what a grant asks you about first (`--ask`, as for add;
    /// `none` asks nothing); its keys stay.
    Set {
        name: String,
        #[arg(long, value_name = "LIST")]
        ask: String,
        #[command(flatten)]
        ports: Ports,
    },
    /// The grants: name, sites, expiry, tabs and connected clients.
    List {
        #[command(flatten)]
        ports: Ports,
        /// JSON in an {"ok", "data"} envelope instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Take a grant back: its connections close at once, its keys open
    /// nothing, its tab groups are dissolved (the tabs stay, unshared).
    Revoke {
        name: String,
        #[command(flatten)]
        ports: Ports,
    },
}

#[derive(Debug, Clone, clap::Args)]
pub(crate) struct Ports {
    /// Port of the extension relay (for the CDP URL).
    #[arg(long, env = crate::PORT_ENV, default_value_t = shared_protocol::DEFAULT_RELAY_PORT)]
    port: u16,
    /// Port of the control API (a running serve is told of the change).
    #[arg(long, env = crate::CONTROL_PORT_ENV, default_value_t = browser_relay::DEFAULT_CONTROL_PORT)]
    control_port: u16,
}

/// The grant `name`, as the file has it now: known and not expired.
fn given(state: &StateDir, secret: &state_dir::Token, name: &str) -> anyhow::Result<Grant> {
    let grants = GrantBook::new(state.clone()).load(secret)?;
    let grant = grants
        .into_iter()
        .find(|g| g.name.as_str() == name)
        .with_context(|| format!("there is no grant named '{name}': `browser-relay grant list` shows them"))?;
    if grant.expired() {
        anyhow::bail!("the grant '{name}' has expired: `browser-relay grant revoke {name}`, then add it again");
    }
    Ok(grant)
}

/// A control API client of the person, or (`grant`) of that grant.
pub(crate) fn control_client(state: &StateDir, port: u16, grant: Option<&str>) -> anyhow::Result<ControlClient> {
    let secret = state.load_or_create_token()?;
    let Some(name) = grant else { return Ok(ControlClient::new(port, secret)) };
    let grant = given(state, &secret, name)?;
    Ok(ControlClient::new(port, secret.clone()).as_grant(name, grant.key(&secret, Door::Control)))
}

/// The CDP URL of a grant (`cdp-url --grant`), with its CDP key.
pub(crate) fn cdp_url(state: &StateDir, port: u16, name: &str) -> anyhow::Result<String> {
    let secret = state.load_or_create_token()?;
    let grant = given(state, &secret, name)?;
    Ok(format!("http://127.0.0.1:{port}/?token={}", grant.key(&secret, Door::Cdp).as_str()))
}

pub(crate) async fn grant_command(state: &StateDir, command: GrantCommand) -> anyhow::Result<()> {
    let secret = state.load_or_create_token()?;
    let book = GrantBook::new(state.clone());
    match command {
        GrantCommand::Add { name, sites, color, expires, no_evaluate, ask, ports } => {
            let new = NewGrant {
                name: GrantName::parse(&name)?,
                sites: match sites {
                    Some(list) => Sites::parse_list(&list)?,
                    None => Sites::any(),
                },
                color: color.map(|c| GroupColor::parse(&c)).transpose().map_err(anyhow::Error::msg)?,
                expires_in: expires.map(|d| grants::parse_duration(&d)).transpose().map_err(anyhow::Error::msg)?,
                evaluate: !no_evaluate,
                ask: AskKind::parse_list(ask.as_deref().unwrap_or_default()).map_err(anyhow::Error::msg)?,
            };
            let grant = book.add(&secret, new)?;
            let told = tell_serve(state, ports.control_port).await;
            println_stdout(&handover(&grant, &secret, &ports, told));
            Ok(())
        }
        GrantCommand::Set { name, ask, ports } => {
            let ask = AskKind::parse_list(&ask).map_err(anyhow::Error::msg)?;
            let grant = book.set_ask(&secret, &name, ask)?;
            let told = tell_serve(state, ports.control_port).await;
            let serve = match told {
                Told::Yes => "The running serve honours it now.".to_string(),
                Told::NoServe => "serve honours it when it starts.".to_string(),
                Told::Failed(why) => format!("The running serve could not be told ({why}): restart it."),
            };
            println_stdout(&format!("Grant '{name}' {}. {serve}", asks_text(&grant.ask)));
            Ok(())
        }
        GrantCommand::Revoke { name, ports } => {
            book.revoke(&secret, &name)?;
            let told = tell_serve(state, ports.control_port).await;
            println_stdout(&match told {
                Told::Yes => format!(
                    "Revoked '{name}': its connections are closed and its keys open nothing; its tab groups are dissolved."
                ),
                Told::NoServe => format!("Revoked '{name}': its keys open nothing (no serve is running)."),
                Told::Failed(why) => format!(
                    "Revoked '{name}' in grants.json, but the running serve could not be told ({why}): restart it to close the grant's connections."
                ),
            });
            Ok(())
        }
        GrantCommand::List { ports, json } => {
            let client = ControlClient::new(ports.control_port, secret.clone()).on(control_engine::Surface::Cli);
            let live = client.call("GET", "/grants", &[], None).await;
            let listed = match live {
                Ok(live) => live,
                // No serve: the file alone (no tabs, no clients).
                Err(browser_relay::ClientError::Unreachable { .. }) => {
                    let grants = book.load(&secret)?;
                    let now = grants::now_ms();
                    let grants: Vec<serde_json::Value> = grants
                        .iter()
                        .map(|g| {
                            serde_json::json!({
                                "name": g.name, "color": g.color.name(), "sites": g.sites, "expires": g.expiry_text(now),
                                "expiresAtMs": g.expires_at_ms, "evaluate": g.evaluate, "createdAtMs": g.created_at_ms,
                                "ask": g.ask,
                            })
                        })
                        .collect();
                    serde_json::json!({"grants": grants, "serve": false})
                }
                Err(other) => return Err(other.into()),
            };
            if json {
                println_stdout(&serde_json::json!({"ok": true, "data": listed}).to_string());
            } else {
                println_stdout(&list_text(&listed));
            }
            Ok(())
        }
    }
}

/// Whether a running serve heard of the change.
enum Told {
    Yes,
    NoServe,
    Failed(String),
}

/// Tells a running serve that `grants.json` changed.
async fn tell_serve(state: &StateDir, control_port: u16) -> Told {
    let client = match control_client(state, control_port, None) {
        Ok(client) => client.on(control_engine::Surface::Cli),
        Err(e) => return Told::Failed(e.to_string()),
    };
    match client.call("POST", "/grants/reload", &[], Some(&serde_json::json!({}))).await {
        Ok(_) => Told::Yes,
        Err(browser_relay::ClientError::Unreachable { .. }) => Told::NoServe,
        Err(e) => Told::Failed(e.to_string()),
    }
}

/// What `grant add` prints: what the grant is, and what to hand over.
/// The CDP URL is the last line, as `cdp-url` prints it.
fn handover(grant: &Grant, secret: &state_dir::Token, ports: &Ports, told: Told) -> String {
    let name = &grant.name;
    let cdp = format!("http://127.0.0.1:{}/?token={}", ports.port, grant.key(secret, Door::Cdp).as_str());
    let control = grant.key(secret, Door::Control);
    let evaluate = if grant.evaluate { "may run its own JavaScript" } else { "may not run its own JavaScript" };
    let asks = asks_text(&grant.ask);
    let serve = match told {
        Told::Yes => "The running serve honours it now.".to_string(),
        Told::NoServe => "serve honours it when it starts.".to_string(),
        Told::Failed(why) => format!("The running serve could not be told ({why}): restart it to honour the grant."),
    };
    format!(
        "Grant '{name}': its tabs may go to {sites}; its tab group is {color}; it expires {expires}; it {evaluate}; it {asks}.\n\
         {serve}\n\
         Its tabs sit in the \"{name}\" tab group of your Chrome: drag a tab into it to lend it, out of it to take it back\n\
         (or right-click the Browser Relay button: \"Share this tab with {name}\"). It sees no other tab of yours.\n\
         \n\
         Hand over one of these (each opens only what the grant gives):\n\
         \x20 agent commands:  browser-relay <command> --grant {name}      (or BROWSER_RELAY_GRANT={name})\n\
         \x20 MCP:             browser-relay mcp --grant {name}\n\
         \x20 HTTP agents:     Authorization: Bearer {control}   (control API, http://127.0.0.1:{control_port})\n\
         \x20 CDP clients (Playwright connectOverCDP, Puppeteer connect), again with `browser-relay cdp-url --grant {name}`:\n\
         {cdp}",
        sites = grant.sites.describe(),
        color = grant.color.name(),
        expires = grant.expiry_text(grants::now_ms()),
        control = control.as_str(),
        control_port = ports.control_port,
    )
}

/// What a grant asks the person first, in words: "asks you nothing first",
/// "asks you before: submit, download".
fn asks_text(ask: &[AskKind]) -> String {
    if ask.is_empty() {
        return "asks you nothing first".into();
    }
    let kinds: Vec<&str> = ask.iter().map(|k| k.name()).collect();
    format!("asks you before: {}", kinds.join(", "))
}

/// `grant list` as text: a line per grant.
fn list_text(listed: &serde_json::Value) -> String {
    let grants = listed["grants"].as_array().cloned().unwrap_or_default();
    let mut lines = Vec::new();
    if let Some(problem) = listed["problem"].as_str() {
        lines.push(format!("warning: {problem}"));
    }
    if grants.is_empty() {
        lines.push("no grants: `browser-relay grant add NAME --sites LIST` lends an agent part of your browser".into());
        return lines.join("\n");
    }
    let live = listed["serve"].as_bool() != Some(false);
    for grant in &grants {
        let sites: Vec<&str> = grant["sites"].as_array().into_iter().flatten().filter_map(|s| s.as_str()).collect();
        let sites = if sites.is_empty() { "any site".to_string() } else { sites.join(", ") };
        let count = |key: &str| grant[key].as_array().map_or(0, Vec::len);
        let now = if live {
            format!("{} tabs, {} clients", count("tabs"), count("clients"))
        } else {
            "serve not running".to_string()
        };
        let evaluate = if grant["evaluate"].as_bool() == Some(false) { ", no evaluate" } else { "" };
        let asks: Vec<&str> = grant["ask"].as_array().into_iter().flatten().filter_map(|s| s.as_str()).collect();
        let asks = if asks.is_empty() { String::new() } else { format!(", asks: {}", asks.join(" ")) };
        lines.push(format!(
            "{}\t{}\tsites: {sites}\texpires: {}{evaluate}{asks}\t{now}",
            grant["name"].as_str().unwrap_or_default(),
            grant["color"].as_str().unwrap_or_default(),
            grant["expires"].as_str().unwrap_or_default(),
        ));
    }
    lines.join("\n")
}
