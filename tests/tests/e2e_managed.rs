//! The managed driver with real Chromium: launch, status, Playwright through
//! the relay, stop without orphans, decoration surviving restarts, crash
//! detection and recovery, and one browser for concurrent starts; several
//! profiles at once, ephemeral profiles and the cap, through the control API.

use std::time::Duration;

use browser_relay::RunningServer;
use e2e::ControlEnv;
use managed_driver::{ManagedBrowsers, ManagedError, State};
use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use serde_json::{Value, json};
use settings::{Config, Profile};
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
    let token = Token::generate();
    let mut options = e2e::test_options(Some(token.clone()));
    options.state_root = Some(state.path().to_path_buf());
    let server = RunningServer::start(options).await.unwrap();
    // The server's browsers: what it launches, it serves.
    let browsers = server.browsers.clone().expect("a state directory");
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
    let fixtures = e2e::FixtureServer::start().await.unwrap();
    let key = browser_relay::cdp_key(&token);
    let endpoint = format!("http://{}/profiles/managed/?token={}", server.addr, key.as_str());
    let (status, version) =
        e2e::http_get(&format!("http://{}/profiles/managed/json/version?token={}", server.addr, key.as_str()))
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
    // Chrome's singleton folder, in the temporary folder: a killed Chrome
    // leaves it, and the relay removes it.
    let singleton = std::fs::read_link(user_data.join("SingletonSocket")).expect("Chrome links its socket");
    let singleton = singleton.parent().unwrap().to_path_buf();
    assert!(singleton.exists());
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
    assert!(!singleton.exists(), "the crashed browser's {} was left", singleton.display());
    let last = recovered.pid.unwrap();
    browsers.stop(&profile).await.unwrap();
    assert!(group_is_empty(last) && group_is_empty(crashed_pid));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_starts_at_once_launch_one_browser() {
    let state = tempfile::tempdir().unwrap();
    // Two requests of one serve at once (its browsers, shared).
    let a = ManagedBrowsers::new(state.path());
    let b = a.clone();
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

/// The managed profile's page socket of `tab`, from its `/json/list`.
async fn managed_page_socket(env: &ControlEnv, tab: &str) -> String {
    let list = env.cdp_url("managed").await.replacen("/?token=", "/json/list?token=", 1);
    let list = cdp_client::http::request("GET", &list, &[], None).await.unwrap().json();
    let entry = list.as_array().unwrap().iter().find(|t| t["id"] == tab).cloned().expect("the tab is listed");
    entry["webSocketDebuggerUrl"].as_str().unwrap().to_string()
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
    let relay = &env.server.relay;
    let (mut stalled, _) = tokio_tungstenite::connect_async(managed_page_socket(&env, &tab).await).await.unwrap();
    e2e::wait_for_stats(relay, "the stalled client connected", Duration::from_secs(10), |s| s.piped_clients == 1)
        .await
        .unwrap();
    // 64 answers of 1 MiB each, none read.
    for id in 1..=ANSWERS {
        let command = format!(
            r#"{{"id":{id},"method":"Runtime.evaluate","params":{{"expression":"'x'.repeat(1 << 20)","returnByValue":true}}}}"#
        );
        stalled.feed(Message::Text(command.into())).await.unwrap();
    }
    stalled.flush().await.unwrap();
    // Its queue may empty into the socket's kernel buffers now and then
    // before it fills: only the client leaving the relay's list is the drop.
    let peak = std::sync::atomic::AtomicUsize::new(0);
    e2e::wait_for_stats(relay, "the stalled client dropped", Duration::from_secs(30), |s| {
        peak.fetch_max(s.client_queue_bytes, std::sync::atomic::Ordering::Relaxed);
        s.piped_clients == 0 && s.client_queue_bytes == 0
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

/// A managed profile's sockets end with their browser session, saying why:
/// a page socket when its tab closes, a browser socket when the browser
/// stops.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_managed_profile_socket_closes_when_its_page_or_browser_goes() {
    use futures_util::{SinkExt as _, StreamExt as _};
    use tokio_tungstenite::tungstenite::Message;
    let env = ControlEnv::start().await.unwrap();
    env.start_browser().await;
    let tab = env.open("index.html").await;
    let (mut page, _) = tokio_tungstenite::connect_async(managed_page_socket(&env, &tab).await).await.unwrap();
    let endpoint = env.cdp_url("managed").await;
    let version = endpoint.replacen("/?token=", "/json/version?token=", 1);
    let version = cdp_client::http::request("GET", &version, &[], None).await.unwrap().json();
    let browser_socket = version["webSocketDebuggerUrl"].as_str().unwrap().to_string();
    let (mut browser, _) = tokio_tungstenite::connect_async(browser_socket).await.unwrap();
    // Both answer first.
    for socket in [&mut page, &mut browser] {
        socket.send(Message::Text(r#"{"id":1,"method":"Browser.getVersion"}"#.into())).await.unwrap();
        let answer = tokio::time::timeout(Duration::from_secs(10), socket.next()).await.unwrap().unwrap().unwrap();
        assert!(answer.to_text().unwrap().contains("\"product\""), "{answer:?}");
    }

    env.api.ok("DELETE", &format!("/tabs/{tab}?profile=managed"), None).await;
    let within = Duration::from_secs(20);
    assert_eq!(e2e::close_frame_of(&mut page, within).await, Some((1000, "the browser session ended".into())));

    env.api.ok("POST", "/stop", Some(json!({"profile": "managed"}))).await;
    assert_eq!(e2e::close_frame_of(&mut browser, within).await, Some((1000, "the browser session ended".into())));
}

// ---- several profiles at once, ephemeral profiles, the cap (issue 17) ------

/// `POST /tabs/open` in `profile`: the new tab's targetId.
async fn open_in(env: &ControlEnv, profile: &str, url: &str) -> String {
    let tab = env.api.ok("POST", "/tabs/open", Some(json!({"profile": profile, "url": url}))).await;
    assert_eq!(tab["profile"], profile, "{tab}");
    tab["targetId"].as_str().expect("targetId").to_string()
}

/// Runs `function` in `profile`'s current tab through `/act`.
async fn evaluate_in(env: &ControlEnv, profile: &str, function: &str) -> Value {
    let done = env.api.ok("POST", "/act", Some(json!({"profile": profile, "kind": "evaluate", "fn": function}))).await;
    done["result"].clone()
}

/// The pid of a profile's running browser, from `GET /?profile=`.
async fn pid_of(env: &ControlEnv, profile: &str) -> u32 {
    let status = env.api.ok("GET", &format!("/?profile={profile}"), None).await;
    assert_eq!(status["running"], true, "{status}");
    let folder = if status["ephemeral"] == true { "ephemeral" } else { "profiles" };
    let run = read_json(&env.state.path().join(folder).join(profile).join("run.json"));
    run["pid"].as_u64().expect("a pid") as u32
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_profiles_run_at_once_each_with_its_own_endpoint_pages_and_storage() {
    let env = ControlEnv::start_with(Some("[profiles.a]\ndriver = \"managed\"\n[profiles.b]\ndriver = \"managed\"\n"))
        .await
        .unwrap();
    let (a, b) = tokio::join!(
        env.api.call("POST", "/start", Some(json!({"profile": "a"}))),
        env.api.call("POST", "/start", Some(json!({"profile": "b"}))),
    );
    assert_eq!((a.0, b.0), (200, 200), "{a:?} {b:?}");
    assert!(a.1["cdpEndpoint"].as_str().unwrap().ends_with("/profiles/a/"), "{a:?}");
    assert!(b.1["cdpEndpoint"].as_str().unwrap().ends_with("/profiles/b/"), "{b:?}");
    let (pid_a, pid_b) = (pid_of(&env, "a").await, pid_of(&env, "b").await);
    assert_ne!(pid_a, pid_b);

    // A page in each, on the same origin; storage set in a.
    let page = env.fixture("index.html");
    let tab_a = open_in(&env, "a", &format!("{page}?in=a")).await;
    let tab_b = open_in(&env, "b", &format!("{page}?in=b")).await;
    let set =
        "() => { document.cookie = 'who=a; max-age=3600'; localStorage.setItem('who', 'a'); return document.cookie }";
    assert_eq!(evaluate_in(&env, "a", set).await, "who=a");
    let read = "() => [document.cookie, localStorage.getItem('who')]";
    assert_eq!(evaluate_in(&env, "b", read).await, json!(["", null]), "b sees nothing of a's storage");
    assert_eq!(evaluate_in(&env, "a", read).await, json!(["who=a", "a"]));

    // Each endpoint lists its own pages only.
    for (profile, own, other) in [("a", &tab_a, &tab_b), ("b", &tab_b, &tab_a)] {
        let (status, list) = env.relay_get(&format!("/profiles/{profile}/json/list")).await;
        assert_eq!(status, 200, "{list}");
        assert!(list.contains(own.as_str()) && list.contains(&format!("?in={profile}")), "{profile}: {list}");
        assert!(!list.contains(other.as_str()), "{profile} lists the other profile's page: {list}");
        assert!(list.contains(&format!("/profiles/{profile}/devtools/page/{own}")), "{list}");
    }

    // Stopping one leaves the other running and usable.
    let stopped = env.api.ok("POST", "/stop", Some(json!({"profile": "a"}))).await;
    assert_eq!(stopped["running"], false, "{stopped}");
    assert!(group_is_empty(pid_a));
    assert_eq!(pid_of(&env, "b").await, pid_b);
    let tabs = env.api.ok("GET", "/tabs?profile=b", None).await;
    assert!(tabs["tabs"].as_array().unwrap().iter().any(|t| t["targetId"] == tab_b.as_str()), "{tabs}");
    let (status, _) = env.relay_get("/profiles/a/json/list").await;
    assert_eq!(status, 503, "a stopped profile's endpoint says it does not run");
    env.api.ok("POST", "/stop", Some(json!({"profile": "b"}))).await;
    assert!(group_is_empty(pid_b));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ephemeral_profile_works_on_every_route_and_its_folder_goes_when_it_stops() {
    let env = ControlEnv::start().await.unwrap();
    let started = env.api.ok("POST", "/start", Some(json!({"profile": "tmp", "ephemeral": true}))).await;
    assert_eq!((started["running"].as_bool(), started["ephemeral"].as_bool()), (Some(true), Some(true)), "{started}");
    assert!(started["cdpEndpoint"].as_str().unwrap().ends_with("/profiles/tmp/"), "{started}");
    let folder = env.state.path().join("ephemeral/tmp");
    assert!(folder.join("user-data").is_dir(), "its folder is under the state directory's ephemeral/");
    assert!(!env.state.path().join("profiles/tmp").exists());
    let again = env.api.ok("POST", "/start", Some(json!({"profile": "tmp", "ephemeral": true}))).await;
    assert_eq!(again["detail"], started["detail"], "a second start is a no-op");
    let pid = pid_of(&env, "tmp").await;

    // Listed, marked; config.toml is not written.
    let all = env.api.ok("GET", "/", None).await;
    let listed = all["profiles"].as_array().unwrap().iter().find(|p| p["profile"] == "tmp").cloned();
    assert_eq!(listed.map(|p| p["ephemeral"].clone()), Some(json!(true)), "{all}");
    let profiles = env.api.ok("GET", "/profiles", None).await;
    let tmp = profiles["profiles"].as_array().unwrap().iter().find(|p| p["name"] == "tmp").cloned();
    assert_eq!(tmp.map(|p| (p["ephemeral"].clone(), p["driver"].clone())), Some((json!(true), json!("managed"))));
    assert!(!std::fs::read_to_string(env.state.path().join("config.toml")).unwrap().contains("tmp"));

    // Every route takes it as a profile: open, snapshot, act, the relay's endpoint.
    let tab = open_in(&env, "tmp", &env.fixture("act/page.html")).await;
    let snapshot = env.api.ok("GET", "/snapshot?profile=tmp&interactive=true", None).await;
    assert_eq!(snapshot["profile"], "tmp");
    let count = e2e::control_env::ref_of(snapshot["snapshot"].as_str().unwrap(), "button \"Count\"");
    let clicked = env.api.ok("POST", "/act", Some(json!({"profile": "tmp", "kind": "click", "ref": count}))).await;
    assert_eq!((clicked["profile"].as_str(), clicked["ok"].as_bool()), (Some("tmp"), Some(true)), "{clicked}");
    let (status, list) = env.relay_get("/profiles/tmp/json/list").await;
    assert!(status == 200 && list.contains(&tab), "{status} {list}");

    // Names it cannot take.
    for (body, status, code) in [
        (json!({"profile": "managed", "ephemeral": true}), 409, "profile_exists"),
        (json!({"profile": "auto", "ephemeral": true}), 400, "bad_request"),
        (json!({"profile": "../x", "ephemeral": true}), 400, "bad_request"),
        (json!({"ephemeral": true}), 400, "bad_request"),
    ] {
        let (got, error) = env.api.call("POST", "/start", Some(body.clone())).await;
        assert_eq!((got, error["error"]["code"].as_str()), (status, Some(code)), "{body}: {error}");
    }
    assert!(!env.state.path().join("ephemeral/managed").exists());

    // Stop: the browser, its folder and the profile are gone.
    let stopped = env.api.ok("POST", "/stop", Some(json!({"profile": "tmp"}))).await;
    assert_eq!(stopped["running"], false, "{stopped}");
    assert!(group_is_empty(pid));
    assert!(!folder.exists(), "the ephemeral folder survived stop");
    let (status, error) = env.api.call("GET", "/?profile=tmp", None).await;
    assert_eq!((status, error["error"]["code"].as_str()), (404, Some("unknown_profile")), "{error}");

    // When serve ends (`stop_owned`, after the server stops) ephemeral
    // profiles go too, crashed or running.
    env.api.ok("POST", "/start", Some(json!({"profile": "tmp", "ephemeral": true}))).await;
    env.api.ok("POST", "/start", Some(json!({"profile": "crashes", "ephemeral": true}))).await;
    let (tmp_pid, crashed_pid) = (pid_of(&env, "tmp").await, pid_of(&env, "crashes").await);
    kill(Pid::from_raw(crashed_pid as i32), Signal::SIGKILL).unwrap();
    env.server.browsers.clone().expect("a state directory").stop_owned(std::iter::empty()).await;
    assert!(group_is_empty(tmp_pid) && group_is_empty(crashed_pid));
    let left: Vec<_> = std::fs::read_dir(env.state.path().join("ephemeral")).unwrap().collect();
    assert!(left.is_empty(), "ephemeral folders left after serve: {left:?}");
    let all = env.api.ok("GET", "/", None).await;
    assert!(all["profiles"].as_array().unwrap().iter().all(|p| p["ephemeral"] == false), "{all}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_cap_a_start_is_refused_naming_the_running_browsers() {
    let env = ControlEnv::start_with(Some("defaultProfile = \"managed\"\nmaxManagedBrowsers = 2\n")).await.unwrap();
    // Three at once against a cap of two: the launches under way count.
    let start = |name: &'static str| env.api.call("POST", "/start", Some(json!({"profile": name, "ephemeral": true})));
    let (one, two, three) = tokio::join!(start("one"), start("two"), start("three"));
    let answers = [("one", one), ("two", two), ("three", three)];
    let refused: Vec<_> = answers.iter().filter(|(_, (status, _))| *status != 200).collect();
    assert_eq!(refused.len(), 1, "exactly one of three is refused: {answers:?}");
    let (loser, (status, error)) = refused[0];
    assert_eq!((*status, error["error"]["code"].as_str()), (409, Some("too_many_browsers")), "{error}");
    // Named in order, as the error lists them.
    let mut running: Vec<&str> = ["one", "two", "three"].into_iter().filter(|n| n != loser).collect();
    running.sort_unstable();
    let message = error["error"]["message"].as_str().unwrap();
    assert!(message.contains(&running.join(", ")) && message.contains("maxManagedBrowsers"), "{message}");
    let hint = error["error"]["hint"].as_str().unwrap();
    assert!(hint.contains(&format!("POST /stop {{\"profile\":\"{}\"}}", running[0])), "{hint}");
    assert!(!env.state.path().join("ephemeral").join(loser).exists(), "a refused ephemeral start leaves nothing");

    // The configured profile is refused too, until one stops.
    let (status, error) = env.api.call("POST", "/start", Some(json!({"profile": "managed"}))).await;
    assert_eq!((status, error["error"]["code"].as_str()), (409, Some("too_many_browsers")), "{error}");
    env.api.ok("POST", "/stop", Some(json!({"profile": running[0]}))).await;
    let managed = env.api.ok("POST", "/start", Some(json!({"profile": "managed"}))).await;
    assert_eq!(managed["running"], true, "{managed}");
    let pids = [pid_of(&env, running[1]).await, pid_of(&env, "managed").await];
    env.api.ok("POST", "/stop", Some(json!({"profile": running[1]}))).await;
    env.api.ok("POST", "/stop", Some(json!({"profile": "managed"}))).await;
    assert!(pids.into_iter().all(group_is_empty));
}

/// Found by the parallel-profiles benchmark: the engine held one lock over
/// every profile while it connected to one, so every start finished when the
/// slowest browser was ready, and a profile slow to connect held up all the
/// others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_profile_slow_to_connect_holds_up_no_other() {
    // A "remote browser" that accepts connections and never answers.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let config = format!(
        "defaultProfile = \"managed\"\n[profiles.remote]\ndriver = \"managed\"\ncdpUrl = \"http://{}\"\n",
        silent.local_addr().unwrap()
    );
    let env = ControlEnv::start_with(Some(&config)).await.unwrap();
    env.start_browser().await;
    let pid = pid_of(&env, "managed").await;

    let remote = env.api.call("GET", "/tabs?profile=remote", None);
    tokio::pin!(remote);
    // The remote's connection attempt is under way once it reaches the listener.
    let held = tokio::select! {
        accepted = silent.accept() => accepted.unwrap().0,
        answer = &mut remote => panic!("the silent browser answered: {answer:?}"),
    };
    tokio::select! {
        tabs = env.api.call("GET", "/tabs?profile=managed", None) => assert_eq!(tabs.0, 200, "{tabs:?}"),
        answer = &mut remote => panic!("the managed profile waited for the remote one: {answer:?}"),
    }
    drop(held);
    // Said as it is: the remote browser cannot be reached (not "start it":
    // Browser Relay never launches it).
    let (status, error) = remote.await;
    assert_eq!((status, error["error"]["code"].as_str()), (502, Some("unreachable")), "{error}");
    assert!(
        error["error"]["message"].as_str().unwrap().contains("cannot reach the browser of profile 'remote'"),
        "{error}"
    );
    env.api.ok("POST", "/stop", None).await;
    assert!(group_is_empty(pid));
}
