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
