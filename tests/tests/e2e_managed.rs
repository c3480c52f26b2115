//! The managed driver with real Chromium: launch, status, Playwright through
//! the relay, stop without orphans, decoration surviving restarts, crash
//! detection and recovery, and one browser for concurrent starts.

use std::time::Duration;

use browser_relay::server::RunningServer;
use managed_driver::config::{Config, Profile};
use managed_driver::{ManagedBrowsers, ManagedError, State};
use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use state_dir::Token;

/// Kills the profile's browser (its whole process group) when the test ends,
/// also when an assertion fails before `stop`.
struct KillOnDrop(ManagedBrowsers);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(record) = self.0.record("managed") {
            let _ = killpg(Pid::from_raw(record.pid as i32), Signal::SIGKILL);
        }
    }
}

fn managed_profile() -> Profile {
    Config::defaults().profile(Some("managed")).unwrap().clone()
}

/// No live process of the browser's group is left (the group id is its
/// pid). Zombies do not count: they run nothing, and an init that does not
/// reap orphans (as in some sandboxes) keeps them listed.
fn group_is_empty(pid: u32) -> bool {
    if matches!(killpg(Pid::from_raw(pid as i32), None), Err(nix::errno::Errno::ESRCH)) {
        return true;
    }
    let live = std::fs::read_dir("/proc").unwrap().filter_map(Result::ok).filter_map(|entry| {
        let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
        // pid (comm) state ppid pgrp ...: comm may hold spaces, so split after ')'.
        let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
        let (state, pgrp) = (fields.first()?, fields.get(2)?);
        (pgrp.parse::<u32>().ok()? == pid && *state != "Z").then_some(())
    });
    live.count() == 0
}

/// The TCP sockets some live process of the browser's group listens on
/// (Linux: the LISTEN entries of /proc/net/tcp{,6}, matched by inode to the
/// group's open descriptors).
fn listening_sockets_of_group(pgid: u32) -> Vec<String> {
    let mut listening = std::collections::HashSet::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        for line in std::fs::read_to_string(table).unwrap_or_default().lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            // local_address rem_address st ... inode (the 10th field)
            if fields.get(3) == Some(&"0A") {
                listening.insert((fields[9].to_string(), fields[1].to_string()));
            }
        }
    }
    assert!(!listening.is_empty() || cfg!(not(target_os = "linux")), "no listening socket at all: the check is blind");
    let mut found = Vec::new();
    let mut processes = 0;
    for entry in std::fs::read_dir("/proc").unwrap().filter_map(Result::ok) {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        let fields: Vec<&str> = stat.rsplit_once(')').map(|(_, r)| r.split_whitespace().collect()).unwrap_or_default();
        if fields.get(2).and_then(|g| g.parse::<u32>().ok()) != Some(pgid) {
            continue;
        }
        processes += 1;
        for fd in std::fs::read_dir(entry.path().join("fd")).into_iter().flatten().filter_map(Result::ok) {
            let Ok(link) = std::fs::read_link(fd.path()) else { continue };
            let link = link.to_string_lossy().to_string();
            if let Some(inode) = link.strip_prefix("socket:[").and_then(|l| l.strip_suffix(']')) {
                found.extend(listening.iter().filter(|(i, _)| i == inode).map(|(_, addr)| addr.clone()));
            }
        }
    }
    assert!(processes > 1, "the browser's group has its processes ({processes})");
    found
}

fn read_json(path: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn managed_profile_lifecycle_with_playwright_through_the_relay() {
    e2e::init_logging();
    let state = tempfile::tempdir().unwrap();
    let browsers = ManagedBrowsers::new(state.path());
    let _cleanup = KillOnDrop(browsers.clone());
    let profile = managed_profile();

    let started = browsers.start(&profile).await.expect("starts");
    assert_eq!(started.state, State::Running);
    let pid = started.pid.unwrap();
    assert!(started.browser_version.as_deref().is_some_and(|v| v.starts_with("Chrome/")), "{started:?}");
    assert_eq!(browsers.start(&profile).await.unwrap().pid, Some(pid), "a second start is a no-op");
    // No debugging port: no process of the browser listens on TCP at all.
    assert_eq!(listening_sockets_of_group(pid), Vec::<String>::new(), "the managed browser listens on TCP");

    // Playwright through the relay's guarded endpoint, like any CDP client.
    let token = Token::generate();
    let mut options = e2e::test_options(Some(token.clone()));
    options.state_root = Some(state.path().to_path_buf());
    let server = RunningServer::start(options).await.unwrap();
    let fixtures = e2e::FixtureServer::start().await.unwrap();
    let endpoint = format!("http://{}/profiles/managed/?token={}", server.addr, token.as_str());
    let (status, version) =
        e2e::http_get(&format!("http://{}/profiles/managed/json/version?token={}", server.addr, token.as_str()))
            .await
            .unwrap();
    assert_eq!(status, 200, "{version}");
    assert!(
        version.contains(&format!("ws://127.0.0.1:{}/profiles/managed/devtools/browser/", server.addr.port())),
        "{version}"
    );
    let (status, _) = e2e::http_get(&format!("http://{}/profiles/managed/json/version", server.addr)).await.unwrap();
    assert_eq!(status, 401, "the managed browser is behind the token too");
    e2e::run_node("playwright_managed.mjs", &[("RELAY_HTTP", endpoint), ("FIXTURE", fixtures.url())])
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));

    // Stop: nothing of ours is left.
    let stopped = browsers.stop(&profile).await.unwrap();
    assert_eq!(stopped.state, State::Stopped);
    assert!(group_is_empty(pid), "processes of the browser's group survived stop");

    // Start again: same profile folder, decoration still there.
    let again = browsers.start(&profile).await.unwrap();
    let user_data = browsers.user_data_dir("managed");
    let local = read_json(&user_data.join("Local State"));
    assert_eq!(local["profile"]["info_cache"]["Default"]["name"], "managed");
    assert_eq!(local["profile"]["info_cache"]["Default"]["profile_highlight_color"], -47872, "#FF4500");
    let prefs = read_json(&user_data.join("Default/Preferences"));
    assert_eq!(prefs["browser"]["theme"]["user_color"], -47872);

    // A crash is reported, and the next start recovers.
    let crashed_pid = again.pid.unwrap();
    kill(Pid::from_raw(crashed_pid as i32), Signal::SIGKILL).unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while browsers.status(&profile).state != State::Crashed {
        assert!(tokio::time::Instant::now() < deadline, "crash not detected: {:?}", browsers.status(&profile));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(browsers.status(&profile).detail.contains("relaunches"), "the status says what to do");
    let recovered = browsers.start(&profile).await.unwrap();
    assert_eq!(recovered.state, State::Running);
    assert_ne!(recovered.pid, Some(crashed_pid));
    let last = recovered.pid.unwrap();
    browsers.stop(&profile).await.unwrap();
    assert!(group_is_empty(last) && group_is_empty(crashed_pid));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_starts_at_once_launch_one_browser() {
    let state = tempfile::tempdir().unwrap();
    let (a, b) = (ManagedBrowsers::new(state.path()), ManagedBrowsers::new(state.path()));
    let _cleanup = KillOnDrop(a.clone());
    let profile = managed_profile();
    let (first, second) = tokio::join!(a.start(&profile), b.start(&profile));
    let (first, second) = (first.unwrap(), second.unwrap());
    assert_eq!(first.pid, second.pid, "the lock let only one launch");
    let pid = first.pid.unwrap();
    a.stop(&profile).await.unwrap();
    assert!(group_is_empty(pid));
}

#[tokio::test]
async fn attach_only_and_remote_profiles_are_never_launched() {
    let state = tempfile::tempdir().unwrap();
    let config = Config::parse(
        "[profiles.attached]\ndriver = \"managed\"\nattachOnly = true\ncdpPort = 1\n[profiles.remote]\ndriver = \"managed\"\ncdpUrl = \"http://10.255.255.1:9333\"\n",
        std::path::Path::new("config.toml"),
    )
    .unwrap();
    let browsers = ManagedBrowsers::new(state.path());
    for name in ["attached", "remote"] {
        let profile = config.profile(Some(name)).unwrap();
        match browsers.start(profile).await {
            Err(ManagedError::AttachUnreachable { .. }) => {}
            other => panic!("{name}: expected an attach-only error, got {other:?}"),
        }
        assert!(!browsers.user_data_dir(name).exists(), "{name}: no profile folder was created");
        assert_eq!(browsers.status(profile).state, State::External);
    }
}

/// A client of a managed profile's page socket that stops reading is
/// dropped at its byte budget, as the relay's own clients are: the pipe's
/// answers do not pile up in the relay's memory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_managed_profile_client_that_never_reads_is_dropped_at_its_byte_budget() {
    use futures_util::{SinkExt as _, StreamExt as _};
    use tokio_tungstenite::tungstenite::Message;
    const BUDGET: usize = 4 << 20;
    const ANSWERS: usize = 64;
    let env = e2e::ControlEnv::start_with_relay(None, |relay| relay.client_queue_bytes = BUDGET).await.unwrap();
    env.start_browser().await;
    let tab = env.open("index.html").await;
    let list = env.cdp_url("managed").await.replacen("/?token=", "/json/list?token=", 1);
    let list = cdp_client::http::request("GET", &list, &[], None).await.unwrap().json();
    let socket = list.as_array().unwrap().iter().find(|t| t["id"] == tab.as_str()).expect("the tab is listed")
        ["webSocketDebuggerUrl"]
        .as_str()
        .unwrap()
        .to_string();
    let (mut stalled, _) = tokio_tungstenite::connect_async(socket).await.unwrap();
    // 64 answers of 1 MiB each, none read.
    for id in 1..=ANSWERS {
        let command = format!(
            r#"{{"id":{id},"method":"Runtime.evaluate","params":{{"expression":"'x'.repeat(1 << 20)","returnByValue":true}}}}"#
        );
        stalled.feed(Message::Text(command.into())).await.unwrap();
    }
    stalled.flush().await.unwrap();
    let relay = &env.server.relay;
    let peak = std::sync::atomic::AtomicUsize::new(0);
    e2e::wait_for_stats(relay, "the stalled client dropped", Duration::from_secs(30), |s| {
        let seen = peak.fetch_max(s.client_queue_bytes, std::sync::atomic::Ordering::Relaxed).max(s.client_queue_bytes);
        seen > 0 && s.client_queue_bytes == 0
    })
    .await
    .unwrap();
    let peak = peak.into_inner();
    // Once it reads again: some answers, then the reason.
    let read = async {
        let mut answers = 0;
        while let Some(frame) = stalled.next().await {
            match frame {
                Ok(Message::Text(_)) => answers += 1,
                Ok(Message::Close(frame)) => {
                    return (answers, frame.map(|f| (u16::from(f.code), f.reason.to_string())));
                }
                Ok(_) => {}
                Err(_) => return (answers, None),
            }
        }
        (answers, None)
    };
    let (answers, close) = tokio::time::timeout(Duration::from_secs(10), read).await.expect("the relay ends it");
    assert!(answers < ANSWERS, "dropped before all {ANSWERS} answers were queued: {answers} arrived");
    let (code, reason) = close.expect("a close frame with the reason");
    assert_eq!(code, 1008, "{reason}");
    assert!(reason.contains("did not read its messages") && reason.contains("limit is 4 MiB"), "{reason}");
    assert!(peak <= BUDGET + (2 << 20), "peak {peak} bytes queued to one client");
    // The profile serves the next request as before.
    env.api.ok("GET", "/tabs", None).await;
}
