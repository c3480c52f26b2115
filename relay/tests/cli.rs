//! The `browser-relay` binary as a user or script runs it: text by default,
//! a stable `--json` envelope, non-zero exit codes on failure.

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
fn status_json_is_a_stable_envelope() {
    let home = tempfile::tempdir().unwrap();
    let (code, stdout, _) = browser_relay(home.path(), &["status", "--profile", "managed", "--json"]);
    assert_eq!(code, 0);
    let envelope: serde_json::Value = serde_json::from_str(&stdout).expect(&stdout);
    assert_eq!(envelope["ok"], true);
    let data = &envelope["data"];
    assert_eq!(
        (data["profile"].as_str(), data["state"].as_str(), data["color"].as_str()),
        (Some("managed"), Some("stopped"), Some("#FF4500"))
    );
    let endpoint = data["cdpEndpoint"].as_str().unwrap();
    assert!(endpoint.starts_with("http://127.0.0.1:18792/profiles/managed/?token="), "{endpoint}");
}

#[test]
fn failures_exit_non_zero_with_the_error_in_the_envelope_or_on_stderr() {
    let home = tempfile::tempdir().unwrap();
    let (code, stdout, _) = browser_relay(home.path(), &["start", "--profile", "chrome", "--json"]);
    assert_eq!(code, 1);
    let envelope: serde_json::Value = serde_json::from_str(&stdout).expect(&stdout);
    assert_eq!(envelope["ok"], false);
    assert!(envelope["error"]["message"].as_str().unwrap().contains("click the Browser Relay icon"), "{envelope}");

    let (code, _, stderr) = browser_relay(home.path(), &["status", "--profile", "nope"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("no profile named 'nope'") && stderr.contains("chrome, managed"), "{stderr}");

    std::fs::write(home.path().join("config.toml"), "[profiles.managed]\nheadles = true\n").unwrap();
    let (code, _, stderr) = browser_relay(home.path(), &["profiles"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("config.toml") && stderr.contains("headles"), "{stderr}");
}

#[test]
fn profiles_and_pairing_and_endpoints() {
    let home = tempfile::tempdir().unwrap();
    let (code, stdout, _) = browser_relay(home.path(), &["profiles"]);
    assert_eq!(code, 0);
    assert!(
        stdout.contains("chrome (default)") && stdout.contains("managed") && stdout.contains("#FF4500"),
        "{stdout}"
    );
    let (_, token, _) = browser_relay(home.path(), &["token"]);
    let token = token.trim();
    assert_eq!(token.len(), 64);
    let (_, url, _) = browser_relay(home.path(), &["cdp-url"]);
    assert_eq!(url.trim(), format!("http://127.0.0.1:18792/?token={token}"));
    let (_, pair, _) = browser_relay(home.path(), &["pair"]);
    assert!(
        pair.contains(&format!(
            "chrome-extension://jmiiinhebnhaoabpngnocjfmolckbbea/options.html#port=18792&token={token}"
        )),
        "{pair}"
    );
}

/// `browser-relay serve` and the managed browser, stopped when the test ends
/// (also when it fails): the server by pid, the browser by process group.
struct Running {
    serve: std::process::Child,
    home: std::path::PathBuf,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.serve.kill();
        let _ = self.serve.wait();
        let run = self.home.join("profiles/managed/run.json");
        if let Some(pid) = std::fs::read_to_string(run)
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .and_then(|v| v["pid"].as_i64())
        {
            let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pid as i32), nix::sys::signal::Signal::SIGKILL);
        }
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

#[test]
fn agent_commands_drive_the_managed_browser_through_the_control_api() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("config.toml"), "defaultProfile = \"managed\"\n").unwrap();
    let control = free_port().to_string();
    let serve = Command::new(env!("CARGO_BIN_EXE_browser-relay"))
        .args(["serve", "--port", "0", "--control-port", &control])
        .env("BROWSER_RELAY_HOME", home.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("serve starts");
    let _running = Running { serve, home: home.path().to_path_buf() };
    let run = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["--control-port", control.as_str()]);
        browser_relay(home.path(), &all)
    };
    // The control API answers once serve is up (the tabs error before start).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let (_, _, stderr) = run(&["tabs"]);
        if !stderr.contains("is `browser-relay serve` running") {
            assert!(stderr.contains("profile 'managed' is not running"), "{stderr}");
            assert!(stderr.contains("hint: POST /start"), "the hint is shown: {stderr}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "serve did not come up: {stderr}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(browser_relay(home.path(), &["start", "--profile", "managed"]).0, 0);

    let page = "data:text/html,<title>CLI</title><input aria-label=Name><button onclick=\"document.title='clicked'\">Go</button>";
    let (code, stdout, stderr) = run(&["open", page]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("CLI"), "{stdout}");
    let (code, snapshot, stderr) = run(&["snapshot", "--interactive"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(snapshot.trim(), "- textbox \"Name\" [ref=e1]\n- button \"Go\" [ref=e2]");
    assert_eq!(run(&["type", "e1", "Ada"]).1.trim(), "ok");
    assert_eq!(run(&["click", "e2"]).1.trim(), "ok");
    let (_, title, _) =
        run(&["act", r#"{"kind":"evaluate","fn":"() => [document.title, document.querySelector('input').value]"}"#]);
    assert_eq!(title.trim(), r#"["clicked","Ada"]"#);
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

    let (code, _, stderr) = run(&["click", "e99"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("no ref e99 in the last snapshot of this tab"), "{stderr}");
    let (code, json, _) = run(&["click", "e99", "--json"]);
    assert_eq!(code, 1);
    let envelope: serde_json::Value = serde_json::from_str(&json).expect(&json);
    assert_eq!(envelope["ok"], false);
    assert_eq!(browser_relay(home.path(), &["stop", "--profile", "managed"]).0, 0);
}
