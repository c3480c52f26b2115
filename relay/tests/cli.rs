//! The `browser-relay` binary as a user or script runs it: text by default,
//! a stable `--json` envelope, non-zero exit codes on failure.
//!
//! Unix only: it starts Chromium and signals process groups. The Windows binary's own run is
//! `tests/tests/e2e_wine.rs`.
#![cfg(unix)]

// Shared with the e2e harness, whose items are `pub`.
#[path = "../../tests/src/chromium.rs"]
#[allow(dead_code, unreachable_pub)]
mod chromium;
#[path = "../../tests/src/mcp_host.rs"]
#[allow(dead_code, unreachable_pub)]
mod mcp_host;

use mcp_host::{McpHost, ToolAnswer};

use std::process::Command;

fn browser_relay(home: &std::path::Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_browser-relay"))
        .args(args)
        .env("BROWSER_RELAY_HOME", home)
        .output()
        .expect("the binary runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[test]
fn profile_commands_ask_the_running_serve_and_say_how_to_start_one() {
    let home = tempfile::tempdir().unwrap();
    let port = free_port().to_string();
    let (code, stdout, _) = browser_relay(home.path(), &["status", "--control-port", &port, "--json"]);
    assert_eq!(code, 1);
    let envelope: serde_json::Value = serde_json::from_str(&stdout).expect(&stdout);
    assert_eq!(envelope["ok"], false);
    assert!(envelope["error"]["message"].as_str().unwrap().contains("browser-relay serve"), "{envelope}");
    let (code, _, stderr) = browser_relay(home.path(), &["start", "--profile", "managed", "--control-port", &port]);
    assert_eq!(code, 1);
    assert!(stderr.contains("browser-relay serve"), "{stderr}");

    std::fs::write(home.path().join("config.toml"), "[profiles.managed]\nheadles = true\n").unwrap();
    let (code, _, stderr) = browser_relay(home.path(), &["profiles"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("config.toml") && stderr.contains("headles"), "{stderr}");
}

/// config.toml runs what a profile's `executablePath` names, as the user:
/// one that another user could have written is refused by every command
/// that reads it, with the command that fixes it, and runs nothing. So is
/// a token someone else planted.
#[test]
fn a_config_or_token_others_could_write_runs_nothing_and_says_how_to_fix_it() {
    use std::os::unix::fs::PermissionsExt;
    let home = tempfile::tempdir().unwrap();
    let ran = home.path().join("ran");
    let program = home.path().join("not-chrome.sh");
    std::fs::write(&program, format!("#!/bin/sh\ntouch '{}'\nsleep 30\n", ran.display())).unwrap();
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    let config = home.path().join("config.toml");
    let toml = format!("[profiles.managed]\nheadless = true\nexecutablePath = {:?}\n", program.display().to_string());
    std::fs::write(&config, toml).unwrap();
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o666)).unwrap();
    let fix = format!("chmod go-w '{}'", config.display());

    // serve would launch it at once.
    let log_path = home.path().join("serve.log");
    let serve = Command::new(env!("CARGO_BIN_EXE_browser-relay"))
        .args(["serve", "--port", "0", "--control-port", &free_port().to_string(), "--start", "managed"])
        .env("BROWSER_RELAY_HOME", home.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log_path).unwrap())
        .spawn()
        .expect("serve starts");
    let mut running = Running { serve, home: home.path().to_path_buf() };
    within("serve to refuse config.toml", 20, || matches!(running.serve.try_wait(), Ok(Some(_))));
    assert_eq!(running.serve.try_wait().unwrap().unwrap().code(), Some(1));
    let said = std::fs::read_to_string(&log_path).unwrap();
    assert!(said.contains(&format!("refusing to use {}", config.display())) && said.contains(&fix), "{said}");
    for args in [&["profiles"][..], &["cdp-url"]] {
        let (code, _, stderr) = browser_relay(home.path(), args);
        assert_eq!(code, 1, "{args:?}");
        assert!(stderr.contains(&fix), "{args:?}: {stderr}");
    }
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(!ran.exists(), "the program config.toml names never ran");

    // Fixed as it says, it is read again.
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o644)).unwrap();
    assert_eq!(browser_relay(home.path(), &["profiles"]).0, 0);

    // A token another user planted is one they know.
    std::fs::remove_file(home.path().join("token")).ok();
    std::fs::write(home.path().join("token"), "a".repeat(64)).unwrap();
    if std::os::unix::fs::chown(home.path().join("token"), Some(4242), None).is_ok() {
        let (code, stdout, stderr) = browser_relay(home.path(), &["token"]);
        assert_eq!(code, 1);
        assert!(!stdout.contains(&"a".repeat(64)), "{stdout}");
        assert!(stderr.contains("belongs to user 4242") && stderr.contains("chown root"), "{stderr}");
    }
}

#[test]
fn profiles_and_pairing_and_endpoints() {
    let home = tempfile::tempdir().unwrap();
    let (code, stdout, _) = browser_relay(home.path(), &["profiles"]);
    assert_eq!(code, 0);
    assert!(
        stdout.starts_with("default: auto") && stdout.contains("chrome\t") && stdout.contains("#FF4500"),
        "{stdout}"
    );
    let (_, printed, _) = browser_relay(home.path(), &["token"]);
    // Each door gets a key of its own, derived from the secret: none is
    // the secret, nor another's. `token` prints the extension's.
    let secret = state_dir::StateDir::at(home.path()).load_or_create_token().unwrap();
    let token = secret.as_str();
    assert_eq!(printed.trim(), browser_relay::extension_key(&secret).as_str());
    assert!(!printed.contains(token), "`token` prints the secret: {printed}");
    let cdp_key = browser_relay::cdp_key(&secret);
    let (_, url, _) = browser_relay(home.path(), &["cdp-url"]);
    assert_eq!(url.trim(), format!("http://127.0.0.1:18792/?token={}", cdp_key.as_str()));
    assert!(!url.contains(token), "the secret is not what clients send: {url}");
    let (_, url, _) = browser_relay(home.path(), &["cdp-url", "--profile", "managed", "--port", "18000"]);
    assert_eq!(url.trim(), format!("http://127.0.0.1:18000/profiles/managed/?token={}", cdp_key.as_str()));
    let (_, control, _) = browser_relay(home.path(), &["token", "--control"]);
    assert_eq!(control.trim(), browser_relay::control_key(&secret).as_str());
    assert!(control.trim() != token && control.trim() != cdp_key.as_str());
    let (_, pair, _) = browser_relay(home.path(), &["pair"]);
    assert!(
        pair.contains("chrome-extension://jmiiinhebnhaoabpngnocjfmolckbbea/options.html#port=18792&code="),
        "{pair}"
    );
    assert!(!pair.contains(token), "the link holds a one-time code, never the secret: {pair}");
    let codes = std::fs::read_dir(home.path().join("pairing")).unwrap().count();
    assert_eq!(codes, 1, "the code waits in the state directory for serve");
}

/// `browser-relay serve` and the managed browser, stopped when the test ends
/// (also when it fails): the server by pid, the browser by process group.
struct Running {
    serve: std::process::Child,
    home: std::path::PathBuf,
}

impl Running {
    /// No serve of its own: only the browsers launched for `home` are
    /// stopped on drop (an MCP server that runs its own relay).
    fn for_browsers_of(home: &std::path::Path) -> Self {
        let serve = Command::new("true").spawn().expect("true runs");
        Self { serve, home: home.to_path_buf() }
    }

    /// The pid (and process group) of the managed Chrome, from its run.json.
    fn browser_pid(&self) -> Option<u32> {
        let run = std::fs::read_to_string(self.home.join("profiles/managed/run.json")).ok()?;
        let run: serde_json::Value = serde_json::from_str(&run).ok()?;
        run["pid"].as_u64().map(|pid| pid as u32)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        // SIGTERM: serve stops the browsers it launched in order. (A killed
        // serve's browser quits when its pipe closes, and leaves its socket
        // folder in the temporary folder.) SIGKILL after 10 s.
        // Only a serve not reaped yet: a reaped one's pid may be another's.
        if matches!(self.serve.try_wait(), Ok(None)) {
            let serve = nix::unistd::Pid::from_raw(self.serve.id() as i32);
            let _ = nix::sys::signal::kill(serve, nix::sys::signal::Signal::SIGTERM);
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while matches!(self.serve.try_wait(), Ok(None)) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let _ = self.serve.kill();
        let _ = self.serve.wait();
        if let Some(pid) = self.browser_pid() {
            chromium::kill_group(pid);
        }
    }
}

/// This install's secret, from its token file (`browser-relay token`
/// prints the extension's key, not the secret).
fn token_of(home: &std::path::Path) -> String {
    state_dir::StateDir::at(home).load_or_create_token().unwrap().as_str().to_string()
}

/// Neither `text` nor serve's log (so far) holds the token.
fn assert_no_token(home: &std::path::Path, what: &str, text: &str) {
    let token = token_of(home);
    assert!(!text.contains(&token), "{what} shows the token: {text}");
    let log = std::fs::read_to_string(home.join("serve.log")).unwrap_or_default();
    assert!(!log.contains(&token), "serve's log holds the token");
}

/// At the end of a session: serve's whole log, which by then has content
/// (so the check means something), never held the token.
fn assert_log_has_no_token(home: &std::path::Path) {
    let log = std::fs::read_to_string(home.join("serve.log")).unwrap_or_default();
    assert!(log.contains("DEBUG") || log.contains("INFO"), "serve logs at debug level: {log}");
    assert_no_token(home, "serve's log", "");
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// `browser-relay serve` on free ports, with the managed profile as the
/// default; stopped (with its browser) when the guard drops. The control port.
fn serve_managed(home: &std::path::Path) -> (Running, String) {
    std::fs::write(home.join("config.toml"), "defaultProfile = \"managed\"\n").unwrap();
    let control = free_port().to_string();
    // Its log, at the most detailed level, must never hold the token.
    let log = std::fs::File::create(home.join("serve.log")).unwrap();
    let serve = Command::new(env!("CARGO_BIN_EXE_browser-relay"))
        .args(["serve", "--port", "0", "--control-port", &control])
        .env("BROWSER_RELAY_HOME", home)
        .env("BROWSER_RELAY_LOG", "debug")
        .stdout(std::process::Stdio::null())
        .stderr(log)
        .spawn()
        .expect("serve starts");
    (Running { serve, home: home.to_path_buf() }, control)
}

#[test]
fn agent_commands_drive_the_managed_browser_through_the_control_api() {
    let home = tempfile::tempdir().unwrap();
    let (_running, control) = serve_managed(home.path());
    let run = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["--control-port", control.as_str()]);
        let out = browser_relay(home.path(), &all);
        assert_no_token(home.path(), &format!("`browser-relay {}`", args.join(" ")), &format!("{}{}", out.1, out.2));
        out
    };
    // The control API answers once serve is up (the tabs error before start).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let (_, _, stderr) = run(&["tabs"]);
        if !stderr.contains("is `browser-relay serve` running") {
            assert!(stderr.contains("profile 'managed' is not running"), "{stderr}");
            assert!(
                stderr.contains("hint: `browser-relay start --profile managed` launches it"),
                "the hint names the CLI's command: {stderr}"
            );
            break;
        }
        assert!(std::time::Instant::now() < deadline, "serve did not come up: {stderr}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // Status, in the stable envelope: the endpoint never with the token,
    // and the command that prints it with.
    let (code, stdout, stderr) = run(&["status", "--profile", "managed", "--json"]);
    assert_eq!(code, 0, "{stderr}");
    let envelope: serde_json::Value = serde_json::from_str(&stdout).expect(&stdout);
    assert_eq!(envelope["ok"], true);
    let data = &envelope["data"];
    assert_eq!(
        (data["profile"].as_str(), data["state"].as_str(), data["color"].as_str()),
        (Some("managed"), Some("stopped"), Some("#FF4500"))
    );
    let endpoint = data["cdpEndpoint"].as_str().unwrap();
    assert!(endpoint.ends_with("/profiles/managed/") && !endpoint.contains("token"), "{endpoint}");
    assert_eq!(data["cdpUrlCommand"], "browser-relay cdp-url --profile managed");
    let (code, stdout, _) = run(&["start", "--profile", "chrome", "--json"]);
    assert_eq!(code, 1);
    let envelope: serde_json::Value = serde_json::from_str(&stdout).expect(&stdout);
    assert!(envelope["error"]["message"].as_str().unwrap().contains("click the Browser Relay icon"), "{envelope}");
    // An ephemeral start needs a name of its own.
    let (code, _, stderr) = run(&["start", "--ephemeral"]);
    assert!(code != 0 && stderr.contains("--profile"), "{stderr}");
    let (code, _, stderr) = run(&["start", "--profile", "managed", "--ephemeral"]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains("profile 'managed' already exists")
            && stderr.contains("hint: `browser-relay start --profile managed` starts that profile"),
        "{stderr}"
    );
    let (code, _, stderr) = run(&["status", "--profile", "nope"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("no profile named 'nope'") && stderr.contains("chrome, managed"), "{stderr}");

    let (code, started, stderr) = run(&["start", "--profile", "managed"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(started.contains("running") && started.contains("browser-relay cdp-url --profile managed"), "{started}");

    let page = "data:text/html,<title>CLI</title><input aria-label=Name><button onclick=\"document.title='clicked'\">Go</button>";
    let (code, stdout, stderr) = run(&["open", page]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("CLI"), "{stdout}");
    let (code, snapshot, stderr) = run(&["snapshot", "--interactive"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(snapshot.trim(), "textbox \"Name\" [e1]\nbutton \"Go\" [e2]");
    let (_, typed, _) = run(&["type", "e1", "Ada"]);
    assert!(typed.starts_with("ok  data:text/html") && typed.trim().ends_with("CLI  [managed]"), "{typed}");
    let (_, clicked, _) = run(&["click", "e2"]);
    assert!(clicked.trim().ends_with("clicked  [managed]"), "the page's new title: {clicked}");
    let (_, title, _) =
        run(&["act", r#"{"kind":"evaluate","fn":"() => [document.title, document.querySelector('input').value]"}"#]);
    assert_eq!(title.trim(), r#"["clicked","Ada"]"#);
    let (code, found, stderr) = run(&["find", "GO"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(found.trim(), "button \"Go\" [e2]");
    assert_eq!(run(&["find", "--role", "textbox"]).1.trim(), "textbox \"Name\" [e1]: Ada");
    assert_eq!(run(&["find", "nothing like it"]).1.trim(), "# no match");
    let (code, json, _) = run(&["press", "Tab", "--json"]);
    assert_eq!(code, 0);
    let envelope: serde_json::Value = serde_json::from_str(&json).expect(&json);
    assert_eq!((envelope["ok"].as_bool(), envelope["data"]["kind"].as_str()), (Some(true), Some("press")));
    let (code, path, _) = run(&["screenshot"]);
    assert_eq!(code, 0);
    assert!(std::fs::read(path.trim()).unwrap().starts_with(b"\x89PNG"), "{path}");
    let (code, tabs, _) = run(&["tabs"]);
    assert_eq!(code, 0);
    assert!(tabs.lines().any(|l| l.starts_with('*') && l.contains("clicked")), "the current tab is marked: {tabs}");

    // The network log and the history: a second page, back and forward.
    let second = "data:text/html,<title>Second</title>";
    assert_eq!(run(&["navigate", second]).0, 0);
    let (code, requests, stderr) = run(&["requests", "--type", "document"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(requests.lines().any(|l| l.contains(" 200 GET Document ") && l.ends_with(second)), "{requests}");
    let (code, back, stderr) = run(&["back"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(back.trim().ends_with(&format!("{page}  [managed]")), "{back}");
    assert!(run(&["forward"]).1.contains("Second"));
    let (code, _, stderr) = run(&["forward"]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains("no page to go forward") && stderr.contains("hint: `browser-relay navigate URL`"),
        "{stderr}"
    );

    let (code, _, stderr) = run(&["click", "e99"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("no ref e99 in the last snapshot of this tab"), "{stderr}");
    let (code, json, _) = run(&["click", "e99", "--json"]);
    assert_eq!(code, 1);
    let envelope: serde_json::Value = serde_json::from_str(&json).expect(&json);
    assert_eq!(envelope["ok"], false);
    // The MCP tools' other page commands, in the CLI too.
    let (code, value, stderr) = run(&["evaluate", "() => { console.warn('careful'); return document.title }"]);
    assert_eq!((code, value.trim()), (0, r#""Second""#), "{stderr}");
    let (code, console, stderr) = run(&["console", "--level", "warning"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(console.lines().any(|l| l.starts_with("warning") && l.contains("careful")), "{console}");
    let (code, pdf, stderr) = run(&["pdf"]);
    assert_eq!(code, 0, "{stderr}");
    let pdf_path = pdf.split("  (").next().unwrap().trim().to_string();
    assert!(std::fs::read(&pdf_path).unwrap().starts_with(b"%PDF"), "{pdf}");
    let (code, opened, stderr) = run(&["open", "data:text/html,<title>Closing</title>"]);
    assert_eq!(code, 0, "{stderr}");
    let closing = opened.split_whitespace().next().unwrap().to_string();
    let (code, closed, stderr) = run(&["close-tab", &closing]);
    assert_eq!((code, closed.trim().starts_with(&format!("{closing} closed"))), (0, true), "{closed}{stderr}");
    assert!(!run(&["tabs"]).1.contains("Closing"), "the tab is gone");
    let (code, _, stderr) = run(&["focus", &closing]);
    assert!(code == 1 && stderr.contains("hint: `browser-relay tabs`"), "a closed tab cannot be focused: {stderr}");

    // The activity record: what this agent did, with time, who and tab;
    // what it typed only as a length.
    let (code, activity, stderr) = run(&["activity", "--limit", "500"]);
    assert_eq!(code, 0, "{stderr}");
    let click = activity.lines().find(|l| l.contains("click e2")).unwrap_or_else(|| panic!("{activity}"));
    assert!(click.contains("agent (cli)") && click.contains("managed · data:text/html"), "{click}");
    assert!(click.starts_with("20") && click.contains("Z  "), "a UTC time first: {click}");
    assert!(activity.contains("type into e1: 3 characters") && !activity.contains("Ada"), "{activity}");
    let (code, json, _) = run(&["activity", "--json", "--limit", "1"]);
    assert_eq!(code, 0);
    let envelope: serde_json::Value = serde_json::from_str(&json).expect(&json);
    let newest = &envelope["data"]["entries"][0];
    assert_eq!((newest["source"].as_str(), newest["client"].as_str()), (Some("agent"), Some("cli")), "{newest}");
    assert!(newest["tab"].is_string() && newest["at"].as_u64().is_some(), "{newest}");
    // The dashboard's login link: printed, with a one-time code, no key.
    let (code, link, stderr) = run(&["ui", "--no-open"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(link.starts_with(&format!("http://127.0.0.1:{control}/ui/login?code=")), "{link}");
    assert_no_token(home.path(), "the login link", &link);
    assert_eq!(run(&["stop", "--profile", "managed"]).0, 0);
    assert_log_has_no_token(home.path());
}

/// `browser-relay mcp --control-port PORT`, as an agent host runs it.
fn mcp_host(home: &std::path::Path, control_port: &str) -> McpHost {
    mcp_host_with(home, &["mcp", "--control-port", control_port], std::process::Stdio::null())
}

/// `browser-relay ARGS` as an MCP host runs it (the host keeps its stderr
/// where `stderr` says; a failure shows serve.log). No answer may show the
/// token: the model reads them all.
fn mcp_host_with(home: &std::path::Path, args: &[&str], stderr: impl Into<std::process::Stdio>) -> McpHost {
    let mut command = Command::new(env!("CARGO_BIN_EXE_browser-relay"));
    command.args(args).env("BROWSER_RELAY_HOME", home).stderr(stderr);
    McpHost::spawn(&mut command).unwrap().never_showing(token_of(home)).with_log(home.join("serve.log"))
}

/// Waits until serve's control API listens (its log says so).
fn wait_for_control_api(home: &std::path::Path) {
    within("serve's control API to listen", 10, || {
        std::fs::read_to_string(home.join("serve.log")).unwrap_or_default().contains("control API on")
    });
}

#[test]
fn an_mcp_host_drives_the_managed_browser_with_tools() {
    let home = tempfile::tempdir().unwrap();
    let (_running, control) = serve_managed(home.path());
    // With serve running, the MCP server uses it (without, it would run
    // its own relay: see the standalone test).
    wait_for_control_api(home.path());
    let mut host = mcp_host(home.path(), &control);

    let init = host.initialize("test-host").unwrap();
    assert_eq!(init["serverInfo"]["name"], "browser-relay", "{init}");
    assert!(init["capabilities"]["tools"].is_object(), "{init}");
    let tools = host.request("tools/list", serde_json::json!({})).unwrap();
    let names: Vec<&str> = tools["tools"].as_array().unwrap().iter().filter_map(|t| t["name"].as_str()).collect();
    for expected in ["browser_snapshot", "browser_click", "browser_type", "browser_screenshot", "browser_handle_dialog"]
    {
        assert!(names.contains(&expected), "{expected} in {names:?}");
    }

    // The API's errors reach the model as tool errors it can act on, the
    // next step named as a tool.
    let ToolAnswer { is_error, text, .. } = host.call("browser_tabs", serde_json::json!({})).unwrap();
    assert!(is_error, "{text}");
    assert!(
        text.contains("profile 'managed' is not running") && text.contains("hint: browser_start "),
        "the hint names the tool: {text}"
    );
    let ToolAnswer { is_error, text, .. } = host.call("browser_start", serde_json::json!({})).unwrap();
    assert!(!is_error, "{text}");

    let page = "data:text/html,<title>MCP</title><input aria-label=Name><button onclick=\"document.title='clicked'\">Go</button>";
    let ToolAnswer { is_error, text, .. } = host.call("browser_open", serde_json::json!({"url": page})).unwrap();
    assert!(!is_error && text.contains("\"title\":\"MCP\""), "{text}");
    let snapshot = host.call("browser_snapshot", serde_json::json!({"interactive": true})).unwrap().text;
    assert!(snapshot.ends_with("textbox \"Name\" [e1]\nbutton \"Go\" [e2]"), "{snapshot}");
    assert!(!host.call("browser_type", serde_json::json!({"ref": "e1", "text": "Ada"})).unwrap().is_error);
    assert!(!host.call("browser_click", serde_json::json!({"ref": "e2"})).unwrap().is_error);
    let value = host
        .call(
            "browser_evaluate",
            serde_json::json!({"fn": "() => [document.title, document.querySelector('input').value]"}),
        )
        .unwrap()
        .text;
    assert!(value.contains(r#""result":["clicked","Ada"]"#), "{value}");
    let ToolAnswer { is_error, text: found, .. } =
        host.call("browser_find", serde_json::json!({"text": "go"})).unwrap();
    assert!(!is_error && found.ends_with("\n1 of 1 matches\nbutton \"Go\" [e2]"), "{found}");
    let ToolAnswer { is_error, image, .. } = host.call("browser_screenshot", serde_json::json!({})).unwrap();
    assert!(!is_error);
    use base64::Engine as _;
    let png = base64::engine::general_purpose::STANDARD.decode(image.expect("an image")).unwrap();
    assert!(png.starts_with(b"\x89PNG"), "a PNG the model can look at");
    // What this agent did, from the activity record: its click and its
    // typing (as a length), named as the MCP server's.
    let ToolAnswer { is_error, text: activity, .. } =
        host.call("browser_activity", serde_json::json!({"limit": 100})).unwrap();
    assert!(!is_error, "{activity}");
    let click = activity.lines().find(|l| l.contains("click e2")).unwrap_or_else(|| panic!("{activity}"));
    assert!(click.contains("agent (mcp)") && click.contains("managed · data:text/html"), "{click}");
    assert!(activity.contains("type into e1: 3 characters") && !activity.contains("Ada"), "{activity}");

    let ToolAnswer { is_error, text, .. } = host.call("browser_click", serde_json::json!({"ref": "e99"})).unwrap();
    assert!(is_error);
    assert!(text.contains("no ref e99 in the last snapshot of this tab") && text.contains("hint:"), "{text}");
    let ToolAnswer { is_error, text, .. } = host.call("browser_click", serde_json::json!({"reff": "e2"})).unwrap();
    assert!(is_error && text.contains("reff"), "a mistaken field is named: {text}");
    // Every other tool once, for the token check on their answers (in
    // `request`): the status tools name endpoints without it.
    let ToolAnswer { is_error, text: status, .. } = host.call("browser_status", serde_json::json!({})).unwrap();
    assert!(!is_error && status.contains("/profiles/managed/") && status.contains("cdpUrlCommand"), "{status}");
    for (tool, arguments) in [
        ("browser_tabs", serde_json::json!({})),
        ("browser_console", serde_json::json!({})),
        ("browser_navigate", serde_json::json!({"url": "about:blank"})),
        ("browser_back", serde_json::json!({})),
        ("browser_forward", serde_json::json!({})),
        ("browser_network_requests", serde_json::json!({"failed": true})),
        ("browser_pdf", serde_json::json!({})),
        ("browser_handle_dialog", serde_json::json!({"accept": true})),
        ("browser_press", serde_json::json!({"key": "Tab"})),
    ] {
        let ToolAnswer { is_error, text, .. } = host.call(tool, arguments).unwrap();
        assert!(!is_error, "{tool}: {text}");
    }
    let ToolAnswer { is_error, text, .. } =
        host.call("browser_network_request_body", serde_json::json!({"requestId": "nope"})).unwrap();
    assert!(is_error && text.contains("no request nope") && text.contains("hint: browser_network_requests"), "{text}");
    assert!(!host.call("browser_stop", serde_json::json!({})).unwrap().is_error);
    assert_log_has_no_token(home.path());

    // The host closing stdin ends the server.
    let status = host.close(std::time::Duration::from_secs(10)).unwrap();
    assert!(status.success(), "{status:?}");
}

/// `browser-relay mcp` alone in the state directory `home` (no serve: it
/// runs the relay itself), initialized as a host does, its log in
/// serve.log; a guard for the browsers it launches; its control port.
/// Every MCP tool is a CLI command too (`browser-relay tool NAME JSON`),
/// from the one table: the same names as `tools/list`, the same answers,
/// and a clear error for a tool or arguments that do not exist.
#[test]
fn every_mcp_tool_is_a_cli_command_from_the_same_table() {
    let home = tempfile::tempdir().unwrap();
    let (_running, control) = serve_managed(home.path());
    wait_for_control_api(home.path());
    let run = |args: &[&str]| {
        let mut all = vec!["tool"];
        all.extend_from_slice(args);
        all.extend(["--control-port", control.as_str()]);
        browser_relay(home.path(), &all)
    };
    let mut host = mcp_host(home.path(), &control);
    host.initialize("test-host").unwrap();
    let tools = host.request("tools/list", serde_json::json!({})).unwrap();
    let mut served: Vec<String> =
        tools["tools"].as_array().unwrap().iter().filter_map(|t| t["name"].as_str().map(str::to_string)).collect();
    let (code, listed, stderr) = run(&[]);
    assert_eq!(code, 0, "{stderr}");
    let mut names: Vec<String> = listed.lines().filter_map(|l| l.split('\t').next().map(str::to_string)).collect();
    served.sort();
    names.sort();
    assert_eq!(names, served, "the CLI's tools are MCP's");

    let (code, _, stderr) = run(&["browser_start", r#"{"profile":"managed"}"#]);
    assert_eq!(code, 0, "{stderr}");
    let page = "data:text/html,<title>Tool</title><button onclick=\"document.title='clicked'\">Go</button>";
    let (code, opened, stderr) = run(&["browser_open", &serde_json::json!({"url": page}).to_string()]);
    assert_eq!(code, 0, "{stderr}");
    assert!(opened.contains("Tool"), "{opened}");
    let (code, snapshot, stderr) = run(&["browser_snapshot", r#"{"interactive":true}"#]);
    assert_eq!(code, 0, "{stderr}");
    assert!(snapshot.contains("button \"Go\" [e1]"), "{snapshot}");
    let (code, clicked, stderr) = run(&["browser_click", r#"{"ref":"e1"}"#]);
    assert_eq!(code, 0, "{stderr}");
    assert!(clicked.contains("clicked"), "the click's answer names the new title: {clicked}");
    // The same answer as the MCP host reads.
    let (_, snapshot, _) = run(&["browser_snapshot", r#"{"interactive":true}"#]);
    assert!(snapshot.contains(" · clicked · "), "{snapshot}");
    let ToolAnswer { is_error, text, .. } =
        host.call("browser_snapshot", serde_json::json!({"interactive": true})).unwrap();
    assert!(!is_error && text.trim() == snapshot.trim(), "{text}\n---\n{snapshot}");

    let (code, _, stderr) = run(&["browser_nope"]);
    assert!(code != 0 && stderr.contains("no tool browser_nope: `browser-relay tool` lists them"), "{stderr}");
    let (code, _, stderr) = run(&["browser_click", "[1]"]);
    assert!(code != 0 && stderr.contains("one JSON object"), "{stderr}");
    let (code, _, _) = run(&["browser_stop", r#"{"profile":"managed"}"#]);
    assert_eq!(code, 0);
}

fn mcp_alone(home: &std::path::Path) -> (McpHost, Running, String) {
    let control = free_port().to_string();
    let log = std::fs::File::create(home.join("serve.log")).unwrap();
    let mut host = mcp_host_with(home, &["mcp", "--port", "0", "--control-port", &control], log);
    let guard = Running::for_browsers_of(home);
    host.initialize("test-host").unwrap();
    (host, guard, control)
}

/// The one thing an MCP host needs: `browser-relay mcp` in its config. In a
/// fresh state directory with nothing else running, it runs the relay
/// itself, the agent's first tool call launches the managed Chrome (no tab
/// is shared), and the browser goes when the host ends the server.
#[test]
fn mcp_alone_is_enough_in_a_fresh_state_directory() {
    let home = tempfile::tempdir().unwrap();
    let (mut host, guard, control) = mcp_alone(home.path());

    let site = tiny_site(
        "<title>Alone</title><button onclick=\"fetch('/api/missing.json').then(() => document.title = 'clicked')\">Go</button>",
    );
    let page = format!("{site}/");
    let ToolAnswer { is_error, text: opened, .. } =
        host.call("browser_open", serde_json::json!({"url": page})).unwrap();
    assert!(!is_error, "{opened}");
    let opened: serde_json::Value = serde_json::from_str(&opened).expect(&opened);
    assert_eq!((opened["profile"].as_str(), opened["title"].as_str()), (Some("managed"), Some("Alone")), "{opened}");
    let snapshot = host.call("browser_snapshot", serde_json::json!({})).unwrap().text;
    assert!(snapshot.starts_with("managed · Alone · ") && snapshot.contains("button \"Go\" [e1]"), "{snapshot}");
    let ToolAnswer { is_error, text: clicked, .. } =
        host.call("browser_click", serde_json::json!({"ref": "e1"})).unwrap();
    assert!(!is_error, "{clicked}");
    let clicked: serde_json::Value = serde_json::from_str(&clicked).expect(&clicked);
    assert_eq!(clicked["page"]["url"], page.as_str(), "the answer carries the page's state: {clicked}");
    let ToolAnswer { is_error, text: waited, .. } =
        host.call("browser_wait", serde_json::json!({"fn": "() => document.title === 'clicked'"})).unwrap();
    assert!(!is_error, "{waited}");
    let ToolAnswer { is_error, text: requests, .. } =
        host.call("browser_network_requests", serde_json::json!({"failed": true})).unwrap();
    assert!(!is_error, "{requests}");
    assert!(
        requests.lines().any(|l| l.contains(" 404 GET ") && l.ends_with("/api/missing.json")),
        "the failed fetch is in the network log: {requests}"
    );

    // The relay this process runs is the one the extension and CDP
    // clients reach: the control API answers the CLI on the same port.
    let (code, tabs, stderr) = browser_relay(home.path(), &["tabs", "--control-port", &control]);
    assert_eq!(code, 0, "{stderr}");
    assert!(tabs.contains("clicked"), "{tabs}");

    let pid = guard.browser_pid().expect("the managed Chrome was launched and recorded");
    assert!(host.close(std::time::Duration::from_secs(10)).unwrap().success());
    within("the managed Chrome to go with the MCP server", 10, || !chromium::group_runs(pid));
    assert_no_token(home.path(), "the MCP server's log", "");
}

/// A host that ends its MCP server with a signal (SIGTERM; Ctrl-C in its
/// terminal) rather than by closing stdin: the server stops the browser it
/// launched in order, as serve does, and ends.
#[test]
fn an_mcp_server_ended_by_a_signal_stops_its_browser_in_order() {
    let home = tempfile::tempdir().unwrap();
    let (mut host, guard, _) = mcp_alone(home.path());
    let site = tiny_site("<title>Signal</title>");
    let opened = host.call("browser_open", serde_json::json!({"url": format!("{site}/")})).unwrap();
    assert!(!opened.is_error, "{}", opened.text);
    let pid = guard.browser_pid().expect("the managed Chrome was launched and recorded");

    let server = nix::unistd::Pid::from_raw(host.id() as i32);
    nix::sys::signal::kill(server, nix::sys::signal::Signal::SIGTERM).unwrap();
    let status = host.wait(std::time::Duration::from_secs(15)).unwrap();
    assert!(status.success(), "{status:?}");
    within("the managed Chrome to go with the MCP server", 10, || !chromium::group_runs(pid));
    let log = std::fs::read_to_string(home.path().join("serve.log")).unwrap();
    assert!(
        log.contains("shutting down (SIGTERM)") && log.contains("stopped the managed browser"),
        "stopped in order: {log}"
    );
}

/// Two agents on one machine, each with its MCP server: the first runs the
/// relay and the control API, the second uses them. When the first one's
/// host ends it (and its browsers with it), the second keeps working: its
/// next call finds nothing listening and it runs its own server.
#[test]
fn the_second_mcp_server_keeps_working_when_the_first_ends() {
    let home = tempfile::tempdir().unwrap();
    let control = free_port().to_string();
    let log = || std::fs::OpenOptions::new().create(true).append(true).open(home.path().join("serve.log")).unwrap();
    let args = ["mcp", "--port", "0", "--control-port", &control];
    // The first answers only once its server runs (it starts before stdio).
    let mut first = mcp_host_with(home.path(), &args, log());
    let guard = Running::for_browsers_of(home.path());
    first.initialize("test-host").unwrap();
    let mut second = mcp_host_with(home.path(), &args, log());
    second.initialize("test-host").unwrap();

    let site = tiny_site("<title>Shared</title>");
    let ToolAnswer { is_error, text: opened, .. } =
        second.call("browser_open", serde_json::json!({"url": format!("{site}/")})).unwrap();
    assert!(!is_error, "{opened}");
    let first_chrome = guard.browser_pid().expect("the first's server launched the managed Chrome");
    assert!(first.close(std::time::Duration::from_secs(10)).unwrap().success());
    within("the first's Chrome to go with it", 10, || !chromium::group_runs(first_chrome));

    let again = format!("{site}/?again");
    let ToolAnswer { is_error, text: opened, .. } =
        second.call("browser_open", serde_json::json!({"url": again})).unwrap();
    assert!(!is_error, "the second MCP server lost its control API: {opened}");
    let opened: serde_json::Value = serde_json::from_str(&opened).expect(&opened);
    assert_eq!((opened["profile"].as_str(), opened["url"].as_str()), (Some("managed"), Some(again.as_str())));
    let second_chrome = guard.browser_pid().expect("a managed Chrome of its own");
    assert_ne!(second_chrome, first_chrome);
    let ToolAnswer { is_error, text: snapshot, .. } = second.call("browser_snapshot", serde_json::json!({})).unwrap();
    assert!(!is_error && snapshot.starts_with("managed · Shared · "), "{snapshot}");
    assert!(second.close(std::time::Duration::from_secs(10)).unwrap().success());
    within("the second's Chrome to go with it", 10, || !chromium::group_runs(second_chrome));
    assert_no_token(home.path(), "the MCP servers' log", "");
}

/// The README's main command, then the agent commands as a new user types
/// them, without a flag: they reach the managed Chrome run.sh started (no
/// tab is shared, so `auto` means it). The ports are moved through the
/// environment, as every command reads them, so that nothing here touches
/// a user's own ports.
#[test]
fn run_sh_then_agent_commands_with_no_flags() {
    use std::os::unix::process::CommandExt as _;
    let home = tempfile::tempdir().unwrap();
    let control = free_port().to_string();
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/run.sh");
    let log_path = home.path().join("serve.log");
    let serve = Command::new("bash")
        .arg(&script)
        .env("BROWSER_RELAY_HOME", home.path())
        .env("BROWSER_RELAY_BIN", env!("CARGO_BIN_EXE_browser-relay"))
        .env("BROWSER_RELAY_PORT", "0")
        .env("BROWSER_RELAY_CONTROL_PORT", &control)
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log_path).unwrap())
        .process_group(0)
        .spawn()
        .expect("run.sh starts");
    let _running = Running { serve, home: home.path().to_path_buf() };
    within("run.sh to start the managed Chrome", 120, || {
        std::fs::read_to_string(&log_path).unwrap_or_default().contains("profile managed: running")
    });
    let agent = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_browser-relay"))
            .args(args)
            .env("BROWSER_RELAY_HOME", home.path())
            .env("BROWSER_RELAY_CONTROL_PORT", &control)
            .output()
            .expect("the binary runs");
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout).to_string(), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "`browser-relay {}`: {stderr}", args.join(" "));
        stdout
    };
    let page = "data:text/html,<title>Plain</title><button onclick=\"document.title='pressed'\">Press me</button>";
    let opened = agent(&["open", page]);
    assert!(opened.contains("  Plain  ") && opened.trim().ends_with("[managed]"), "{opened}");
    let snapshot = agent(&["snapshot"]);
    assert!(snapshot.contains("button \"Press me\" [e1]"), "{snapshot}");
    let clicked = agent(&["click", "e1"]);
    assert!(clicked.trim().ends_with("pressed  [managed]"), "{clicked}");
    let tabs = agent(&["tabs"]);
    assert!(tabs.lines().any(|l| l.starts_with('*') && l.contains("pressed")), "{tabs}");
}

/// A web site of one page on a free loopback port, at `/` and `/?anything`
/// (`/slow-fail` answers 503 after 300 ms; every other path is a 404), for
/// as long as the test runs; its `http://127.0.0.1:PORT`.
fn tiny_site(page: &'static str) -> String {
    use std::io::{Read as _, Write as _};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { break };
            std::thread::spawn(move || {
                let mut buffer = [0u8; 4096];
                let n = stream.read(&mut buffer).unwrap_or(0);
                let request = String::from_utf8_lossy(&buffer[..n]);
                let (status, body) = match request.split_whitespace().nth(1) {
                    Some(path) if path == "/" || path.starts_with("/?") => ("200 OK", page),
                    Some("/slow-fail") => {
                        std::thread::sleep(std::time::Duration::from_millis(300));
                        ("503 Service Unavailable", "try later")
                    }
                    _ => ("404 Not Found", "not here"),
                };
                let response = format!(
                    "HTTP/1.1 {status}\r\ncontent-type: text/html\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(response.as_bytes());
            });
        }
    });
    format!("http://{addr}")
}

/// What an action caused is in its own answer, as an agent reads it
/// through MCP: a request that fails after the click (and what the page
/// logged about it), the page's title while an alert holds it, the URL of
/// a tab it opened; and the network log after a navigation is the new
/// page's.
#[test]
fn an_mcp_action_answer_tells_what_the_action_caused() {
    let home = tempfile::tempdir().unwrap();
    let (_running, control) = serve_managed(home.path());
    wait_for_control_api(home.path());
    let mut host = mcp_host(home.path(), &control);
    host.initialize("test-host").unwrap();
    assert!(!host.call("browser_start", serde_json::json!({})).unwrap().is_error);
    let site = tiny_site(concat!(
        "<title>Consequences</title>",
        "<button onclick=\"fetch('/slow-fail').then((r) => console.error('saving failed: ' + r.status))\">Save</button>",
        "<button onclick=\"alert('Sure?')\">Ask</button>",
        "<button onclick=\"window.open('/?opened')\">Open</button>",
    ));
    let ToolAnswer { is_error, text: opened, .. } =
        host.call("browser_open", serde_json::json!({"url": format!("{site}/")})).unwrap();
    assert!(!is_error, "{opened}");
    let snapshot = host.call("browser_snapshot", serde_json::json!({})).unwrap().text;
    assert!(snapshot.contains("button \"Open\" [e3]"), "{snapshot}");
    let click = |host: &mut McpHost, element: &str| -> serde_json::Value {
        let ToolAnswer { is_error, text, .. } =
            host.call("browser_click", serde_json::json!({"ref": element})).unwrap();
        assert!(!is_error, "{text}");
        serde_json::from_str(&text).expect(&text)
    };

    let saved = click(&mut host, "e1");
    let page = &saved["page"];
    assert_eq!(page["failedRequests"], serde_json::json!([format!("503 GET {site}/slow-fail")]), "{saved}");
    assert_eq!(page["consoleErrors"], serde_json::json!(["saving failed: 503"]), "{saved}");
    assert!(!saved.to_string().contains("favicon"), "the browser's own fetch is no news: {saved}");

    let asked = click(&mut host, "e2");
    assert_eq!(asked["page"]["dialog"]["message"], "Sure?", "{asked}");
    assert_eq!(asked["page"]["title"], "Consequences", "the title, not the URL: {asked}");
    assert!(!host.call("browser_handle_dialog", serde_json::json!({"accept": true})).unwrap().is_error);

    let opened = click(&mut host, "e3");
    let new_tabs = opened["page"]["newTabs"].as_array().expect("the new tab is told");
    assert_eq!(new_tabs.len(), 1, "{opened}");
    assert_eq!(new_tabs[0]["url"], format!("{site}/?opened"), "with the URL it opened: {opened}");

    let ToolAnswer { is_error, text: navigated, .. } =
        host.call("browser_navigate", serde_json::json!({"url": format!("{site}/?next")})).unwrap();
    assert!(!is_error, "{navigated}");
    let requests = host.call("browser_network_requests", serde_json::json!({})).unwrap().text;
    assert!(requests.contains(" GET Document ") && requests.contains(&format!("{site}/?next")), "{requests}");
    assert!(!requests.contains("slow-fail"), "the earlier page's requests are not this page's: {requests}");
    assert!(requests.contains("more of earlier pages (all: true)"), "{requests}");
    let every = host.call("browser_network_requests", serde_json::json!({"all": true})).unwrap().text;
    assert!(every.contains("/slow-fail") && every.contains("(the current page)"), "{every}");
    assert_log_has_no_token(home.path());
}

/// `serve` with `args` on a free relay port: the guard, its log, and the
/// control port it was given; returns once the relay says it listens.
fn serve_until_listening(home: &std::path::Path, args: &[&str]) -> (Running, String, String) {
    let control = free_port().to_string();
    let log_path = home.join("serve.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let serve = Command::new(env!("CARGO_BIN_EXE_browser-relay"))
        .args(["serve", "--port", "0", "--control-port", &control])
        .args(args)
        .env("BROWSER_RELAY_HOME", home)
        .stdout(std::process::Stdio::null())
        .stderr(log)
        .spawn()
        .expect("serve starts");
    let running = Running { serve, home: home.to_path_buf() };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let text = std::fs::read_to_string(&log_path).unwrap_or_default();
        if text.contains("relay listening on") {
            return (running, control, text);
        }
        assert!(std::time::Instant::now() < deadline, "serve did not start: {text}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn no_auth_leaves_the_control_api_closed_unless_asked_twice() {
    let home = tempfile::tempdir().unwrap();
    let (_running, control, log) = serve_until_listening(home.path(), &["--no-auth"]);
    assert!(
        std::net::TcpStream::connect(format!("127.0.0.1:{control}")).is_err(),
        "nothing listens on the control port"
    );
    assert!(log.contains("ANY local process can read and drive every shared tab"), "{log}");
    assert!(log.contains("control API is not started"), "the warning says what is open and what is not: {log}");
    assert!(!log.contains('\x1b'), "a log file gets no colour escapes: {log:?}");
    drop(_running);

    let home = tempfile::tempdir().unwrap();
    let (_running, control, log) = serve_until_listening(home.path(), &["--no-auth", "--no-auth-control"]);
    assert!(std::net::TcpStream::connect(format!("127.0.0.1:{control}")).is_ok(), "asked twice: it runs");
    assert!(log.contains("ANY local process can also use the control API"), "{log}");

    let (code, _, stderr) = browser_relay(home.path(), &["serve", "--no-auth-control"]);
    assert_eq!(code, 2, "--no-auth-control alone is refused by the parser: {stderr}");
}

/// A program on the control port that is not `serve`: it records every
/// request and answers `/session` with a forged proof, anything else with
/// a screenshot pointing at the token file.
fn squat_control_port(home: &std::path::Path) -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use std::io::{Read as _, Write as _};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let record = seen.clone();
    let token_file = home.join("token").display().to_string();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { break };
            let mut buffer = vec![0u8; 65536];
            let n = stream.read(&mut buffer).unwrap_or(0);
            let request = String::from_utf8_lossy(&buffer[..n]).to_string();
            let body = if request.starts_with("POST /session") {
                format!(r#"{{"nonce":"{}","proof":"{}"}}"#, "a".repeat(64), "b".repeat(64))
            } else {
                format!(r#"{{"targetId":"T","path":"{token_file}","mime":"image/png","width":1,"height":1,"bytes":1}}"#)
            };
            record.lock().unwrap().push(request);
            let response = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(response.as_bytes());
        }
    });
    (port, seen)
}

#[test]
fn the_cli_and_mcp_tell_a_squatter_on_the_control_port_nothing() {
    let home = tempfile::tempdir().unwrap();
    let token = token_of(home.path());
    let (port, seen) = squat_control_port(home.path());
    let (code, _, stderr) = browser_relay(home.path(), &["tabs", "--control-port", &port]);
    assert_eq!(code, 1);
    assert!(stderr.contains("is not this install's `browser-relay serve`"), "{stderr}");

    let mut host = mcp_host(home.path(), &port);
    host.initialize("test-host").unwrap();
    let ToolAnswer { is_error, text, image } = host.call("browser_screenshot", serde_json::json!({})).unwrap();
    assert!(is_error && text.contains("could not prove the pairing token"), "{text}");
    assert!(image.is_none(), "no file read for it");

    let requests = seen.lock().unwrap().clone();
    assert!(!requests.is_empty());
    for request in &requests {
        assert!(request.starts_with("POST /session"), "nothing but the session was asked: {request}");
        assert!(!request.contains(&token), "the token never went out: {request}");
    }
}

/// Polls (a process that is not our child gives no event) until `done`.
fn within(what: &str, secs: u64, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while !done() {
        assert!(std::time::Instant::now() < deadline, "{what} within {secs} s");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Stopped (Ctrl-C's SIGINT behaves as SIGTERM), its terminal closed
/// (SIGHUP) or killed, serve leaves no browser behind.
#[test]
fn the_browser_serve_launched_ends_with_serve_stopped_or_killed() {
    use nix::sys::signal::Signal;
    for signal in [Signal::SIGTERM, Signal::SIGHUP, Signal::SIGKILL] {
        let home = tempfile::tempdir().unwrap();
        let log = std::fs::File::create(home.path().join("serve.log")).unwrap();
        let serve = with_default_hangup(&mut Command::new(env!("CARGO_BIN_EXE_browser-relay")))
            .args(["serve", "--port", "0", "--control-port", &free_port().to_string(), "--start", "managed"])
            .env("BROWSER_RELAY_HOME", home.path())
            // Killed, it leaves Chrome's socket folder: in the test's folder.
            .env("TMPDIR", home.path())
            .stdout(std::process::Stdio::null())
            .stderr(log)
            .spawn()
            .expect("serve starts");
        let mut running = Running { serve, home: home.path().to_path_buf() };
        let record = home.path().join("profiles/managed/run.json");
        let mut pid = 0;
        within("serve launches the managed browser", 30, || {
            let value =
                std::fs::read_to_string(&record).ok().and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok());
            pid = value.and_then(|v| v["pid"].as_u64()).unwrap_or(0) as u32;
            pid != 0
        });
        assert!(chromium::group_runs(pid));
        let serve_pid = nix::unistd::Pid::from_raw(running.serve.id() as i32);
        nix::sys::signal::kill(serve_pid, signal).unwrap();
        within(&format!("serve to end after its {signal}"), 30, || matches!(running.serve.try_wait(), Ok(Some(_))));
        // Stopped by serve on SIGTERM and SIGHUP; on SIGKILL its pipe
        // closes and the browser quits by itself: no orphan either way.
        within(&format!("the browser's processes end after serve's {signal}"), 15, || !chromium::group_runs(pid));
        let log = std::fs::read_to_string(home.path().join("serve.log")).unwrap();
        match signal {
            Signal::SIGTERM => assert!(log.contains("shutting down (SIGTERM)"), "{log}"),
            Signal::SIGHUP => assert!(log.contains("shutting down (the terminal closing)"), "{log}"),
            _ => {}
        }
        if signal != Signal::SIGKILL {
            assert!(log.contains("stopped the managed browser"), "serve stopped it: {log}");
        }
        drop(running);
    }
}

/// The Chrome Web Store gives the published extension an id of its own:
/// config.toml's `extensionIds` lets it in next to the pinned development
/// id (pairing links for both), and no other extension gets in.
#[test]
fn a_store_extension_id_from_config_is_paired_and_let_in_and_no_other() {
    use std::io::{Read, Write};
    let home = tempfile::tempdir().unwrap();
    let store = "abcdefghijklmnopabcdefghijklmnop";
    std::fs::write(home.path().join("config.toml"), format!("extensionIds = [{store:?}]\n")).unwrap();
    let (_, pair, _) = browser_relay(home.path(), &["pair", "--port", "18000"]);
    for id in ["jmiiinhebnhaoabpngnocjfmolckbbea", store] {
        assert!(pair.contains(&format!("chrome-extension://{id}/options.html#port=18000&code=")), "{pair}");
    }

    let port = free_port();
    let log = std::fs::File::create(home.path().join("serve.log")).unwrap();
    let serve = Command::new(env!("CARGO_BIN_EXE_browser-relay"))
        .args(["serve", "--port", &port.to_string(), "--no-control"])
        .env("BROWSER_RELAY_HOME", home.path())
        .stdout(std::process::Stdio::null())
        .stderr(log)
        .spawn()
        .expect("serve starts");
    let _running = Running { serve, home: home.path().to_path_buf() };
    // The status line of a WebSocket upgrade of /extension from `origin`.
    let upgrade = |origin: &str| -> Option<String> {
        let mut socket = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
        let request = format!(
            "GET /extension HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nOrigin: {origin}\r\nUpgrade: websocket\r\n\
             Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        );
        socket.write_all(request.as_bytes()).ok()?;
        let mut head = [0u8; 12];
        socket.read_exact(&mut head).ok()?;
        Some(String::from_utf8_lossy(&head).into_owned())
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let store_answer = loop {
        if let Some(answer) = upgrade(&format!("chrome-extension://{store}")) {
            break answer;
        }
        assert!(std::time::Instant::now() < deadline, "serve did not come up");
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(store_answer, "HTTP/1.1 101", "the store's extension is let in");
    // The Origin is checked before the one extension slot, which the
    // store's connection may still hold (409) until serve sees it closed.
    let pinned = upgrade("chrome-extension://jmiiinhebnhaoabpngnocjfmolckbbea").unwrap();
    assert!(["HTTP/1.1 101", "HTTP/1.1 409"].contains(&pinned.as_str()), "so is the development one: {pinned}");
    let other = upgrade("chrome-extension://pponmlkjihgfedcbaponmlkjihgfedcba").unwrap();
    assert_eq!(other, "HTTP/1.1 403", "an extension of another id is not");
}

/// `rotate` makes a new secret (so every key derived from the old one goes)
/// and prints the new pairing link; while something listens on serve's
/// ports it refuses, as serve keeps the old secret in memory.
#[test]
fn rotate_replaces_the_secret_only_while_serve_is_stopped() {
    let home = tempfile::tempdir().unwrap();
    let free = || std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port().to_string();
    let (port, control) = (free(), free());
    let (_, old, _) = browser_relay(home.path(), &["token"]);
    let (_, old_cdp, _) = browser_relay(home.path(), &["cdp-url", "--port", &port]);
    let (code, said, stderr) = browser_relay(home.path(), &["rotate", "--port", &port, "--control-port", &control]);
    assert_eq!(code, 0, "{stderr}");
    let (_, new, _) = browser_relay(home.path(), &["token"]);
    assert_ne!(old.trim(), new.trim(), "a new secret");
    assert!(said.contains("paired again") && said.contains(&format!("#port={port}&code=")), "{said}");
    assert!(!said.contains(old.trim()) && !said.contains(new.trim()), "{said}");
    let (_, new_cdp, _) = browser_relay(home.path(), &["cdp-url", "--port", &port]);
    assert_ne!(old_cdp, new_cdp, "the CDP key follows the secret");
    // A serve (here: anything) on the port: refused, the secret kept.
    let listening = std::net::TcpListener::bind(format!("127.0.0.1:{port}")).unwrap();
    let (code, _, stderr) = browser_relay(home.path(), &["rotate", "--port", &port, "--control-port", &control]);
    assert_eq!(code, 1);
    assert!(stderr.contains("stop `browser-relay serve` first"), "{stderr}");
    assert_eq!(browser_relay(home.path(), &["token"]).1, new, "unchanged");
    drop(listening);
}

/// A serve on ports other than the ones `rotate` is told (before: only
/// those were asked, so the secret changed under a running serve, whose
/// clients and extension then lost it at once).
#[test]
fn rotate_finds_a_serve_on_any_port_by_its_state_folder() {
    let home = tempfile::tempdir().unwrap();
    let (running, control, _) = serve_until_listening(home.path(), &[]);
    let (_, before, _) = browser_relay(home.path(), &["token"]);
    let (elsewhere, other_control) = (free_port().to_string(), free_port().to_string());
    let (code, _, stderr) =
        browser_relay(home.path(), &["rotate", "--port", &elsewhere, "--control-port", &other_control]);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("stop it first") && stderr.contains(&format!("control API on 127.0.0.1:{control}")),
        "{stderr}"
    );
    assert_eq!(browser_relay(home.path(), &["token"]).1, before, "the secret is kept");
    drop(running);
    let (code, _, stderr) =
        browser_relay(home.path(), &["rotate", "--port", &elsewhere, "--control-port", &other_control]);
    assert_eq!(code, 0, "serve stopped: {stderr}");
    assert_ne!(browser_relay(home.path(), &["token"]).1, before, "a new secret");
}

/// One raw HTTP/1.1 GET with `host` as its Host header: the status code,
/// or why there was none within 5 s.
fn status_of_get(port: u16, path: &str, host: &str) -> Result<u16, String> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    stream.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").map_err(|e| e.to_string())?;
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).map_err(|e| format!("no answer: {e}"))?;
    String::from_utf8_lossy(&head[9..12]).parse().map_err(|e| format!("{e}"))
}

#[test]
fn a_serve_whose_stderr_nobody_reads_keeps_answering_and_loses_no_line() {
    let home = tempfile::tempdir().unwrap();
    let port = free_port();
    // A parent that reads only stdout: serve's stderr is a pipe nobody
    // reads, which takes 64 KiB and then no more.
    let mut serve = Command::new(env!("CARGO_BIN_EXE_browser-relay"))
        .args(["serve", "--port", &port.to_string(), "--control-port", &free_port().to_string()])
        .env("BROWSER_RELAY_HOME", home.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("serve starts");
    let stderr = serve.stderr.take().unwrap();
    let _running = Running { serve, home: home.path().to_path_buf() };
    within("serve listens", 10, || status_of_get(port, "/json/version", "127.0.0.1").is_ok());
    // Each refused request logs a warning of about 300 bytes: 600 are more
    // than the pipe takes. A relay writing its log in the task that logged
    // stopped answering after about 200 of them.
    for n in 0..600 {
        let status = status_of_get(port, "/json/version", "rebinding.example");
        assert_eq!(status, Ok(403), "request {n} while stderr is full");
    }
    assert!(status_of_get(port, "/json/version", "127.0.0.1").is_ok(), "and a good request after them");
    // Read at last: every refusal is in the log (the queue held them), in
    // plain text on a pipe.
    let (refusal, refusals) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.contains("refused: Host 'rebinding.example'") && refusal.send(line).is_err() {
                return;
            }
        }
    });
    for n in 0..600 {
        let line = refusals.recv_timeout(std::time::Duration::from_secs(10)).unwrap_or_else(|_| panic!("refusal {n}"));
        assert!(!line.contains('\x1b'), "plain text on a pipe: {line:?}");
    }
}

/// The macOS archive's double-click launcher (`Start Browser Relay.command`,
/// which Finder runs in Terminal) starts serve with the pairing link; it
/// finds the program beside it, else in ~/.local/bin (where INSTALL.txt
/// puts it), else on PATH, and found nowhere it says where to put it. Run
/// by this system's POSIX sh (dash on Debian: stricter than macOS's).
#[test]
fn the_macos_launcher_starts_serve_with_the_pairing_link() {
    use std::io::BufRead as _;
    use std::os::unix::fs::{PermissionsExt as _, symlink};
    let launcher_source =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/install/Start Browser Relay.command");
    let mode = std::fs::metadata(&launcher_source).unwrap().permissions().mode();
    assert_eq!(mode & 0o111, 0o111, "Finder runs only an executable .command");
    // The unpacked archive: the launcher, and (first) the real program.
    let unpacked = tempfile::tempdir().unwrap();
    let launcher = unpacked.path().join("Start Browser Relay.command");
    std::fs::copy(&launcher_source, &launcher).unwrap();
    let home = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let run = |path: &str| {
        let mut command = Command::new(&launcher);
        command.env("HOME", home.path()).env("BROWSER_RELAY_HOME", state.path()).env("PATH", path);
        command
    };

    // Beside it: serve, with the link for the port it got (the test's own
    // ports: the launcher passes its arguments on, Finder gives none).
    symlink(env!("CARGO_BIN_EXE_browser-relay"), unpacked.path().join("browser-relay")).unwrap();
    let serve = {
        use std::os::unix::process::CommandExt as _;
        run("/usr/bin:/bin")
            .args(["--port", "0", "--control-port", "0"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::fs::File::create(state.path().join("serve.log")).unwrap())
            .process_group(0)
            .spawn()
            .expect("the launcher runs")
    };
    // Whatever the launcher started goes with the test, also a serve that
    // a launcher without `exec` left behind its shell.
    let _group = chromium::KilledGroup(serve.id());
    let mut running = Running { serve, home: state.path().to_path_buf() };
    let stdout = std::io::BufReader::new(running.serve.stdout.take().unwrap());
    let (lines, printed) = std::sync::mpsc::channel();
    std::thread::spawn(move || stdout.lines().map_while(Result::ok).try_for_each(|line| lines.send(line)));
    let link = std::iter::from_fn(|| printed.recv_timeout(std::time::Duration::from_secs(30)).ok())
        .find(|line| line.contains("chrome-extension://"))
        .unwrap_or_else(|| {
            let log = std::fs::read_to_string(state.path().join("serve.log")).unwrap_or_default();
            panic!("no pairing link within 30 s; serve's log:\n{log}")
        });
    assert!(link.contains("/options.html#port=") && link.contains("&code="), "{link}");
    if cfg!(target_os = "linux") {
        // The shell became serve (`exec`): Ctrl-C and the window's end reach
        // serve itself, and no shell is left waiting.
        let exe = std::fs::read_link(format!("/proc/{}/exe", running.serve.id())).unwrap();
        assert!(exe.ends_with("browser-relay"), "{}", exe.display());
    }
    drop(running);

    // Elsewhere: a stand-in that says how it was run.
    let stand_in = |dir: &std::path::Path| {
        std::fs::create_dir_all(dir).unwrap();
        let path = dir.join("browser-relay");
        std::fs::write(&path, "#!/bin/sh\necho \"ran $0 $*\"\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    };
    std::fs::remove_file(unpacked.path().join("browser-relay")).unwrap();
    let on_path = tempfile::tempdir().unwrap();
    let path_with = format!("{}:/usr/bin:/bin", on_path.path().display());
    let in_path = stand_in(on_path.path());
    let output = |command: &mut Command| {
        let out = command.output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).trim().to_string(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, stdout, _) = output(&mut run(&path_with));
    assert_eq!((code, stdout), (Some(0), format!("ran {} serve --pair", in_path.display())), "on PATH");
    let local = stand_in(&home.path().join(".local/bin"));
    let (code, stdout, _) = output(&mut run(&path_with));
    assert_eq!((code, stdout), (Some(0), format!("ran {} serve --pair", local.display())), "~/.local/bin first");

    // Beside it but not executable (an unpacker that dropped the modes):
    // it says how to fix it.
    std::fs::write(unpacked.path().join("browser-relay"), "").unwrap();
    let (code, _, stderr) = output(&mut run(&path_with));
    assert_eq!(code, Some(1));
    assert!(stderr.contains("browser-relay cannot be run: make it executable with  chmod +x"), "{stderr}");
    std::fs::remove_file(unpacked.path().join("browser-relay")).unwrap();

    // Nowhere: it says where to put it.
    std::fs::remove_file(local).unwrap();
    let (code, stdout, stderr) = output(&mut run("/usr/bin:/bin"));
    assert_eq!((code, stdout.as_str()), (Some(1), ""));
    assert!(stderr.contains("browser-relay is not beside this file, in ~/.local/bin or on PATH"), "{stderr}");
}

/// How `pid` takes SIGHUP, from /proc (Linux): (caught, ignored).
fn hangup_disposition(pid: u32) -> (bool, bool) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let mask = |name: &str| {
        let hex = status.lines().find_map(|line| line.strip_prefix(name)).unwrap().trim();
        u64::from_str_radix(hex, 16).unwrap()
    };
    // SIGHUP is signal 1: the masks' lowest bit.
    (mask("SigCgt:") & 1 != 0, mask("SigIgn:") & 1 != 0)
}

/// Started under `nohup`, serve leaves SIGHUP ignored: it goes on when
/// the terminal it was started from closes. Started plainly, it catches
/// SIGHUP (and stops cleanly: the test above).
#[test]
fn serve_under_nohup_goes_on_when_its_terminal_closes() {
    use nix::sys::signal::Signal;
    for nohup in [false, true] {
        let home = tempfile::tempdir().unwrap();
        let control = free_port().to_string();
        let mut command = Command::new(if nohup { "nohup" } else { env!("CARGO_BIN_EXE_browser-relay") });
        if nohup {
            command.arg(env!("CARGO_BIN_EXE_browser-relay"));
        }
        let serve = with_default_hangup(&mut command)
            .args(["serve", "--port", "0", "--control-port", &control])
            .env("BROWSER_RELAY_HOME", home.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(home.path().join("serve.log")).unwrap())
            .spawn()
            .expect("serve starts");
        let running = Running { serve, home: home.path().to_path_buf() };
        wait_for_control_api(home.path());
        let pid = running.serve.id();
        if !cfg!(target_os = "linux") {
            continue;
        }
        assert_eq!(hangup_disposition(pid), (!nohup, nohup), "nohup: {nohup}");
        if nohup {
            nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), Signal::SIGHUP).unwrap();
            let (code, _, stderr) = browser_relay(home.path(), &["status", "--control-port", &control]);
            assert_eq!(code, 0, "serve answers after the hangup: {stderr}");
        }
        drop(running);
        let log = std::fs::read_to_string(home.path().join("serve.log")).unwrap();
        assert!(log.contains("shutting down (SIGTERM)"), "{log}");
    }
}

/// `command` with SIGHUP at its default in the child, whatever this test
/// process inherited (`nohup cargo test` would hand serve an ignored
/// SIGHUP): the hangup tests send it as a closing terminal does.
#[allow(unsafe_code)]
fn with_default_hangup(command: &mut Command) -> &mut Command {
    use nix::sys::signal::{SigHandler, Signal, signal};
    use std::os::unix::process::CommandExt as _;
    // SAFETY: between fork and exec the child only calls `signal`, which
    // is async-signal-safe.
    unsafe { command.pre_exec(|| signal(Signal::SIGHUP, SigHandler::SigDfl).map(drop).map_err(std::io::Error::from)) }
}

/// `--version` (and `-V`) names the version, the commit it was built from,
/// the day, and the extension protocol (issue 45).
#[test]
fn version_names_the_commit_the_build_day_and_the_extension_protocol() {
    let home = tempfile::tempdir().unwrap();
    for flag in ["--version", "-V"] {
        let (code, stdout, stderr) = browser_relay(home.path(), &[flag]);
        assert_eq!(code, 0, "{stderr}");
        let line = stdout.trim();
        assert!(line.starts_with(&format!("browser-relay {} (commit ", env!("CARGO_PKG_VERSION"))), "{line}");
        assert!(line.ends_with(&format!("extension protocol {})", shared_protocol::PROTOCOL_VERSION)), "{line}");
        let built = line.split(", built ").nth(1).expect(line);
        let day = &built[..10];
        assert!(
            day.len() == 10
                && day.chars().enumerate().all(|(i, c)| if i == 4 || i == 7 { c == '-' } else { c.is_ascii_digit() }),
            "{line}"
        );
        // The commit the test runs at, as git names it (a source tree
        // without git says `unknown`, and so does the binary).
        let git =
            Command::new("git").args(["rev-parse", "--short", "HEAD"]).current_dir(env!("CARGO_MANIFEST_DIR")).output();
        let expected = match git {
            Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout).trim().to_string(),
            _ => "unknown".into(),
        };
        assert!(line.contains(&format!("(commit {expected}")), "{line} does not name {expected}");
    }
}
