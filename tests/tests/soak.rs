//! Soak and fault runs: measurements, not CI tests (each is `#[ignore]`d).
//! `scripts/soak.sh` runs them in release and SECURITY.md records the last
//! figures. Each prints what it measured to stderr and fails only when a
//! bound that must hold is broken (memory that does not come back, a
//! pending command left unanswered, a tab lost, a process left behind).
//!
//! - `soak_relay_memory`: the real `browser-relay serve` binary (its RSS is
//!   read from /proc) with a scripted extension: 1,000 client cycles, 20,000
//!   session attach/detach cycles, 80,000 session attempts, 512 unread
//!   screenshots.
//! - `soak_faults_with_real_chrome`: Chromium with the real extension and a
//!   shared tab; the extension's socket killed (its worker stopped), the
//!   relay restarted, Chrome killed, each with a command in flight.

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use cdp_client::{CdpClient, CdpError};
use e2e::extension_env::ExtensionEnv;
use e2e::fake_extension::{FakeExtension, Mode, fake_tab, fake_target_id, hello};
use serde_json::json;

const MIB: u64 = 1 << 20;

/// `browser-relay serve` as a user runs it, in a state folder of its own;
/// killed (with its process group) when dropped.
struct Serve {
    child: Child,
    addr: SocketAddr,
    token: String,
    _home: tempfile::TempDir,
}

impl Serve {
    fn start() -> Self {
        let bin = std::env::var("SOAK_BIN")
            .map_or_else(|_| e2e::tests_dir().join("../target/release/browser-relay"), std::path::PathBuf::from);
        assert!(bin.exists(), "{} is not built: run scripts/soak.sh", bin.display());
        let home = tempfile::tempdir().unwrap();
        let log_path = home.path().join("serve.log");
        let log = std::fs::File::create(&log_path).unwrap();
        let mut child = Command::new(&bin)
            .args(["serve", "--port", "0", "--control-port", "0"])
            .env("BROWSER_RELAY_HOME", home.path())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("serve starts");
        let deadline = Instant::now() + Duration::from_secs(20);
        let addr = loop {
            let text = std::fs::read_to_string(&log_path).unwrap_or_default();
            if let Some(rest) = text.split("relay listening on http://").nth(1) {
                break rest.split_whitespace().next().unwrap().parse().unwrap();
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("serve did not start: {text}");
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        // The install's secret, as serve made it (`browser-relay token`
        // prints the extension's key, not the secret).
        let token = state_dir::StateDir::at(home.path()).load_or_create_token().unwrap().as_str().to_string();
        Self { child, addr, token, _home: home }
    }

    /// (RSS now, peak RSS so far) in bytes.
    fn memory(&self) -> (u64, u64) {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
                .unwrap_or(0)
                * 1024
        };
        (field("VmRSS:"), field("VmHWM:"))
    }

    fn cdp_url(&self) -> String {
        format!("ws://{}/cdp?token={}", self.addr, cdp_key(&self.token))
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / MIB as f64)
}

/// Answers every call of a manual fake extension: screenshots with
/// `screenshot` bytes of data, everything else with `{}`.
/// The count of screenshots answered.
fn answer_everything(mut ext: FakeExtension, screenshot: usize) -> (Arc<FakeExtension>, Arc<AtomicUsize>) {
    let mut calls = std::mem::replace(&mut ext.calls, tokio::sync::mpsc::unbounded_channel().1);
    let ext = Arc::new(ext);
    let answered = Arc::new(AtomicUsize::new(0));
    let (answering, count) = (ext.clone(), answered.clone());
    tokio::spawn(async move {
        let data = "A".repeat(screenshot);
        while let Some(call) = calls.recv().await {
            let result = match call.method.as_deref() {
                Some("Page.captureScreenshot") => {
                    count.fetch_add(1, Ordering::AcqRel);
                    json!({"data": data})
                }
                _ => json!({}),
            };
            answering.reply(call.id, Ok(result));
        }
    });
    (ext, answered)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a soak run: scripts/soak.sh"]
async fn soak_relay_memory() {
    let serve = Serve::start();
    let ext = FakeExtension::connect(serve.addr, Some(&serve.token), Some(hello(vec![fake_tab(1)])), Mode::Manual)
        .await
        .unwrap();
    let (ext, answered) = answer_everything(ext, 2 << 20);
    let page = fake_target_id(1);
    let cycle = |n: usize| {
        let url = serve.cdp_url();
        async move {
            for _ in 0..n {
                let client = CdpClient::connect(&url).await.unwrap().with_timeout(Duration::from_secs(10));
                let mut events = client.take_events().unwrap();
                e2e::auto_attach(&client).await;
                let attached = e2e::next_event(&mut events, "Target.attachedToTarget", Duration::from_secs(10)).await;
                let session = attached.params["sessionId"].as_str().unwrap().to_string();
                client.call("Runtime.evaluate", json!({"expression": "1"}), Some(&session)).await.unwrap();
                drop(events);
                drop(client);
            }
        }
    };

    // 1,000 clients, one after another, each attaching and running a command.
    cycle(100).await;
    let (warm, _) = serve.memory();
    let started = Instant::now();
    cycle(1000).await;
    let (after_clients, _) = serve.memory();
    eprintln!(
        "1,000 client cycles in {:.1?}: RSS {} after 100 warm-up cycles, {} after 1,000 more",
        started.elapsed(),
        mib(warm),
        mib(after_clients)
    );

    // 20,000 sessions attached and detached by one client, 500 at a time.
    let client = CdpClient::connect(&serve.cdp_url()).await.unwrap().with_timeout(Duration::from_secs(30));
    let mut events = client.take_events().unwrap();
    let attach = json!({"targetId": page, "flatten": true});
    let started = Instant::now();
    for _ in 0..40 {
        let calls: Vec<_> =
            (0..500).map(|_| client.start_call("Target.attachToTarget", attach.clone(), None)).collect();
        let mut sessions = Vec::new();
        for call in calls {
            sessions.push(call.await.unwrap()["sessionId"].as_str().unwrap().to_string());
        }
        let calls: Vec<_> = sessions
            .iter()
            .map(|s| client.start_call("Target.detachFromTarget", json!({"sessionId": s}), None))
            .collect();
        for call in calls {
            call.await.unwrap();
        }
        while events.try_recv().is_ok() {}
    }
    let (after_sessions, _) = serve.memory();
    eprintln!(
        "20,000 session attach/detach cycles in {:.1?}: RSS {} (was {})",
        started.elapsed(),
        mib(after_sessions),
        mib(after_clients)
    );

    // 80,000 attempts: the per-client cap refuses all but 1,024; one page
    // event then reaches every session that was admitted.
    let started = Instant::now();
    let mut admitted = 0;
    for _ in 0..80 {
        let calls: Vec<_> =
            (0..1000).map(|_| client.start_call("Target.attachToTarget", attach.clone(), None)).collect();
        for call in calls {
            admitted += usize::from(call.await.is_ok());
        }
    }
    let attempts_took = started.elapsed();
    while events.try_recv().is_ok() {}
    let started = Instant::now();
    ext.event(1, None, "Page.domContentEventFired", json!({"timestamp": 1}));
    for _ in 0..admitted {
        e2e::next_event(&mut events, "Page.domContentEventFired", Duration::from_secs(10)).await;
    }
    let fan_out = started.elapsed();
    let (after_attempts, _) = serve.memory();
    eprintln!(
        "80,000 session attempts in {attempts_took:.1?}: {admitted} admitted; one page event reached all of them in {fan_out:.1?}; RSS {}",
        mib(after_attempts)
    );
    assert_eq!(admitted, 1024, "the per-client session cap");
    drop(events);
    client.close();

    // 512 screenshots of 2 MiB asked for and never read.
    let (before_shots, _) = serve.memory();
    let url = format!("ws://{}/devtools/page/{page}?token={}", serve.addr, cdp_key(&serve.token));
    let (mut stalled, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    use futures_util::{SinkExt, StreamExt};
    let started = Instant::now();
    for id in 1..=512 {
        let command = format!(r#"{{"id":{id},"method":"Page.captureScreenshot","params":{{}}}}"#);
        stalled.feed(tokio_tungstenite::tungstenite::Message::Text(command.into())).await.unwrap();
    }
    stalled.flush().await.unwrap();
    // Every screenshot is answered by the extension; then the client's
    // socket is read: a relay that kept all of them would hand over 512.
    let deadline = Instant::now() + Duration::from_secs(120);
    while answered.load(std::sync::atomic::Ordering::Acquire) < 512 {
        assert!(Instant::now() < deadline, "the extension was not asked for 512 screenshots");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let answered_in = started.elapsed();
    let mut frames = 0u64;
    let mut closed = None;
    while let Ok(Some(frame)) = tokio::time::timeout(Duration::from_secs(30), stalled.next()).await {
        match frame {
            Ok(tokio_tungstenite::tungstenite::Message::Close(frame)) => {
                closed = frame.map(|f| f.reason.to_string());
                break;
            }
            Ok(_) => frames += 1,
            Err(_) => break,
        }
    }
    let (after_shots, peak) = serve.memory();
    eprintln!(
        "512 unread screenshots of 2 MiB (1 GiB asked for), answered in {answered_in:.1?}: the client got {frames} replies, then {}; peak RSS {} (was {} before; the queue budget is 128 MiB); RSS after {}",
        closed.as_deref().map_or("the connection ended".to_string(), |r| format!("the close reason {r:?}")),
        mib(peak),
        mib(before_shots),
        mib(after_shots)
    );
    assert!(frames < 512, "the client that read nothing got all 512 replies queued");
    assert!(peak < before_shots + 512 * MIB, "peak RSS {} grew by more than half the 1 GiB asked for", mib(peak));

    // Flat: 1,000 more clients cost nothing lasting.
    cycle(1000).await;
    let (end, _) = serve.memory();
    eprintln!("after 1,000 more client cycles: RSS {}", mib(end));
    assert!(
        after_clients < warm + 16 * MIB,
        "1,000 client cycles grew RSS from {} to {}",
        mib(warm),
        mib(after_clients)
    );
    drop(ext);
}

/// A command that Chrome answers only after a minute: in flight when the
/// fault comes. Returns how long after `fault` began it was answered (the
/// fault's own time included), and how.
async fn in_flight_through<F: Future<Output = ()>>(
    client: &CdpClient,
    session: &str,
    fault: F,
) -> (Duration, Result<serde_json::Value, CdpError>) {
    let slow = json!({"expression": "new Promise(done => setTimeout(done, 60000))", "awaitPromise": true});
    let call = client.start_call("Runtime.evaluate", slow, Some(session));
    // It has reached the page once a later command has been answered.
    client.call("Runtime.evaluate", json!({"expression": "1"}), Some(session)).await.unwrap();
    let faulted = Instant::now();
    fault.await;
    let answer = tokio::time::timeout(Duration::from_secs(30), call).await.expect("answered at all");
    (faulted.elapsed(), answer)
}

/// A client of the relay attached to the shared tab: it and its session.
async fn attached_client(env: &ExtensionEnv) -> (CdpClient, String) {
    let url = env.server().relay.version_json()["webSocketDebuggerUrl"].as_str().unwrap().to_string();
    let client = CdpClient::connect(&url).await.unwrap().with_timeout(Duration::from_secs(90));
    let mut events = client.take_events().unwrap();
    e2e::auto_attach(&client).await;
    let attached = e2e::next_event(&mut events, "Target.attachedToTarget", Duration::from_secs(10)).await;
    (client, attached.params["sessionId"].as_str().unwrap().to_string())
}

/// Processes of a process group that are alive (not zombies).
fn live_in_group(group: i32) -> Vec<String> {
    let mut live = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        // pid (comm) state ppid pgrp ...: comm may hold spaces; split after it.
        let Some((_, rest)) = stat.rsplit_once(") ") else { continue };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.get(2).and_then(|g| g.parse::<i32>().ok()) == Some(group) && fields[0] != "Z" {
            live.push(stat.split(' ').take(2).collect::<Vec<_>>().join(" "));
        }
    }
    live
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a fault run: scripts/soak.sh"]
async fn soak_faults_with_real_chrome() {
    let (mut env, index) = ExtensionEnv::sharing_index().await.expect("a shared tab");
    const WITHIN: Duration = Duration::from_secs(1);

    // 1. The extension's socket dies mid-command: its worker is stopped, as
    // Chrome stops idle workers.
    let (client, session) = attached_client(&env).await;
    let worker = env.service_worker().await.unwrap();
    let (took, answer) = in_flight_through(&client, &session, async {
        env.browser.call("Target.closeTarget", json!({"targetId": worker}), None).await.unwrap();
    })
    .await;
    eprintln!("extension socket killed mid-command: answered in {took:.1?} with {answer:?}");
    assert!(answer.is_err() && took < WITHIN, "{took:?} {answer:?}");
    let back = Instant::now();
    env.wait_for_tabs(1, Duration::from_secs(90)).await.expect("the tab comes back without a click");
    eprintln!("  the worker came back with the tab in {:.1?}", back.elapsed());

    // 2. The relay restarts mid-command.
    let (client, session) = attached_client(&env).await;
    let stopped = {
        let env = &mut env;
        in_flight_through(&client, &session, async move { env.stop_relay().await }).await
    };
    let (took, answer) = stopped;
    eprintln!("relay stopped mid-command: answered in {took:.1?} with {answer:?}");
    assert!(answer.is_err() && took < WITHIN, "{took:?} {answer:?}");
    env.restart_relay().await.unwrap();
    let back = Instant::now();
    env.wait_for_tabs(1, Duration::from_secs(90)).await.expect("the tab comes back without a click");
    eprintln!("  the extension reconnected with the tab in {:.1?}", back.elapsed());
    let list = env.server().relay.list_json(&grants::Access::Person);
    assert_eq!(list[0]["url"], json!(index), "the same tab: {list}");

    // 3. Chrome is killed mid-command: every helper process with it.
    let (client, session) = attached_client(&env).await;
    let group = i32::try_from(env.chrome.pid()).unwrap();
    let (took, answer) = in_flight_through(&client, &session, async {
        let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(group), nix::sys::signal::Signal::SIGKILL);
    })
    .await;
    eprintln!("Chrome killed mid-command: answered in {took:.1?} with {answer:?}");
    assert!(answer.is_err() && took < WITHIN, "{took:?} {answer:?}");
    let stats = env.server().relay.stats();
    assert_eq!((stats.pending, stats.targets), (0, 0), "{stats:?}");
    drop(client);
    drop(env);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let live = live_in_group(group);
        if live.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "processes left: {live:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!("no process left in Chrome's group");
}

/// The CDP key of the install whose secret is `secret`: what clients send.
fn cdp_key(secret: &str) -> String {
    browser_relay::cdp_key(&state_dir::Token::parse(secret).expect("a secret")).as_str().to_string()
}
