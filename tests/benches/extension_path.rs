//! What the extension driver costs against the floor of any extension relay
//! and Chrome's own port, on the same tab, in one run: headless Chromium
//! with the real extension sharing the fixture's index tab, a minimal
//! extension of the benchmark's own beside it, and three sockets to that tab:
//!
//! - relay:  client ⇄ Browser Relay ⇄ the extension's worker ⇄ chrome.debugger
//! - floor:  client ⇄ the minimal extension's worker ⇄ chrome.debugger: one
//!   WebSocket and `sendCommand`, one `send` per answer and per event, and
//!   nothing else (`tests/fixtures/floor-extension`): what any extension
//!   relay pays before doing anything of its own
//! - direct: client ⇄ Chrome's own `--remote-debugging-port` page socket
//!
//! Round trips are interleaved in blocks of 50 (relay, floor, direct, ...)
//! so that the paths see the same machine state. Measured: sequential
//! `Runtime.evaluate("1")` round trips (small results), a 1 MiB string
//! result, and event throughput (a page that logs 10,000 console messages:
//! time until the client has them all).
//! Run: `cargo bench -p e2e --bench extension_path` (ROUNDS=N, default 1000;
//! PROFILE_WORKERS=1 adds a CPU profile of each extension's worker).

#![allow(clippy::print_stdout)] // the report is the output

use std::time::{Duration, Instant};

use e2e::extension_env::ExtensionEnv;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

struct Path {
    name: &'static str,
    ws: e2e::RawSocket,
    next_id: u64,
}

impl Path {
    async fn open(name: &'static str, url: &str) -> Self {
        let config = WebSocketConfig::default().max_message_size(Some(256 << 20)).max_frame_size(Some(256 << 20));
        let (ws, _) = tokio_tungstenite::connect_async_with_config(url, Some(config), true).await.unwrap();
        Self { name, ws, next_id: 1 }
    }

    /// One command; its answer's text. Events on the way are skipped.
    async fn call(&mut self, method: &str, params: &Value) -> String {
        let id = self.next_id;
        self.next_id += 1;
        let frame = json!({"id": id, "method": method, "params": params}).to_string();
        self.ws.send(Message::Text(frame.into())).await.unwrap();
        let prefix = format!(r#"{{"id":{id},"#);
        loop {
            let Some(Ok(Message::Text(text))) = self.ws.next().await else { panic!("{}: connection lost", self.name) };
            if text.starts_with(&prefix) {
                return text.to_string();
            }
        }
    }

    /// Sends a command without waiting for its answer (events it causes may
    /// come before the answer: through `chrome.debugger` they travel apart).
    async fn send(&mut self, method: &str, params: &Value) {
        let id = self.next_id;
        self.next_id += 1;
        let frame = json!({"id": id, "method": method, "params": params}).to_string();
        self.ws.send(Message::Text(frame.into())).await.unwrap();
    }

    /// Waits for `count` frames holding every one of `needles`.
    async fn frames_with_all(&mut self, needles: &[&str], count: usize) {
        let mut seen = 0;
        while seen < count {
            let next = tokio::time::timeout(Duration::from_secs(60), self.ws.next()).await;
            let Ok(Some(Ok(Message::Text(text)))) = next else {
                panic!("{}: {seen} of {count} frames with {needles:?} arrived, then none for 60 s", self.name)
            };
            seen += usize::from(needles.iter().all(|needle| text.contains(needle)));
        }
    }

    /// Waits for `count` frames holding `needle`; a lost one fails the run
    /// after a minute instead of hanging it.
    async fn frames_with(&mut self, needle: &str, count: usize) {
        let mut seen = 0;
        while seen < count {
            let next = tokio::time::timeout(Duration::from_secs(60), self.ws.next()).await;
            let Ok(next) = next else {
                panic!("{}: {seen} of {count} frames with {needle} arrived, then none for 60 s", self.name)
            };
            match next {
                Some(Ok(Message::Text(text))) => seen += usize::from(text.contains(needle)),
                other => panic!("{}: connection lost after {seen} of {count} frames: {other:?}", self.name),
            }
        }
    }
}

struct Stats {
    p50: Duration,
    p99: Duration,
}

fn stats(mut samples: Vec<Duration>) -> Stats {
    samples.sort();
    Stats { p50: samples[samples.len() / 2], p99: samples[(samples.len() * 99 / 100).min(samples.len() - 1)] }
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// `rounds` round trips of `params` on each path, in alternating blocks of 50,
/// after a warm-up of one block each.
async fn round_trips(paths: &mut [&mut Path], method: &str, params: &Value, rounds: usize) -> Vec<Stats> {
    let mut samples: Vec<Vec<Duration>> = vec![Vec::new(); paths.len()];
    for block in 0..=(rounds / 50) {
        for (path, samples) in paths.iter_mut().zip(samples.iter_mut()) {
            for _ in 0..50.min(rounds) {
                let started = Instant::now();
                let answer = path.call(method, params).await;
                assert!(answer.contains(r#""result":{"#), "{}: {}", path.name, &answer[..answer.len().min(200)]);
                if block > 0 {
                    samples.push(started.elapsed());
                }
            }
        }
    }
    samples.into_iter().map(stats).collect()
}

/// One measurement's table: each path's p50 and p99, and the relay's and
/// Chrome's port's ratios to the floor.
fn report(label: &str, rounds: usize, [relay, floor, direct]: [&Stats; 3], target: &str) {
    println!("{label} ({rounds} round trips per path, interleaved in blocks of 50)");
    println!("  {:<8} {:>10} {:>10}", "path", "p50 µs", "p99 µs");
    for (name, s) in [("relay", relay), ("floor", floor), ("direct", direct)] {
        println!("  {:<8} {:>10.0} {:>10.0}", name, us(s.p50), us(s.p99));
    }
    println!(
        "  relay / floor: p50 {:.2}x, p99 {:.2}x   ({target}); direct / floor: p50 {:.2}x\n",
        us(relay.p50) / us(floor.p50),
        us(relay.p99) / us(floor.p99),
        us(direct.p50) / us(floor.p50),
    );
}

/// What one more hop costs in this run (a bare forwarder in front of
/// Chrome's port against the port itself), and the relay against the floor
/// plus that hop: the least any relay between a client and the worker pays.
fn report_hop(relay: &Stats, floor: &Stats, direct: &Stats, proxy: &Stats) {
    let hop = |s: fn(&Stats) -> Duration| us(s(proxy)) - us(s(direct));
    let (hop50, hop99) = (hop(|s| s.p50), hop(|s| s.p99));
    println!(
        "  one more hop (a bare forwarder in front of Chrome's port): proxy p50 {:.0} µs, p99 {:.0} µs: \
         +{hop50:.0} µs at p50, +{hop99:.0} µs at p99 over direct",
        us(proxy.p50),
        us(proxy.p99),
    );
    println!(
        "  the floor plus that hop: p50 {:.0} µs ({:.2}x the floor), p99 {:.0} µs ({:.2}x); relay / (floor + hop): p50 {:.2}x, p99 {:.2}x\n",
        us(floor.p50) + hop50,
        (us(floor.p50) + hop50) / us(floor.p50),
        us(floor.p99) + hop99,
        (us(floor.p99) + hop99) / us(floor.p99),
        us(relay.p50) / (us(floor.p50) + hop50),
        us(relay.p99) / (us(floor.p99) + hop99),
    );
}

/// `PROFILE_WORKERS=1`: a CPU profile of each extension's worker (ours,
/// then the floor's) over 1000 small round trips on its own path, and where
/// its samples fell, busiest first. Chrome names a `chrome.*` call's native
/// binding after some method of the API (`sendCommand` shows as
/// `setUninstallURL` or `update`); the callers in the profile say which.
async fn profile_workers(env: &ExtensionEnv, relay: &mut Path, floor: &mut Path, params: &Value) {
    let targets = env.browser.call("Target.getTargets", json!({}), None).await.unwrap();
    let workers: Vec<(String, bool)> = targets["targetInfos"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| t["type"] == "service_worker")
        .filter_map(|t| Some((t["targetId"].as_str()?.to_string(), t["url"].as_str()?.contains(&env.id))))
        .collect();
    for (worker, ours) in workers {
        let attached = env
            .browser
            .call("Target.attachToTarget", json!({"targetId": worker, "flatten": true}), None)
            .await
            .unwrap();
        let session = attached["sessionId"].as_str().unwrap().to_string();
        let call = |method: &'static str| env.browser.call(method, json!({}), Some(&session));
        call("Profiler.enable").await.unwrap();
        env.browser.call("Profiler.setSamplingInterval", json!({"interval": 20}), Some(&session)).await.unwrap();
        call("Profiler.start").await.unwrap();
        let path = if ours { &mut *relay } else { &mut *floor };
        let started = Instant::now();
        for _ in 0..1000 {
            path.call("Runtime.evaluate", params).await;
        }
        let took = started.elapsed();
        let profile = call("Profiler.stop").await.unwrap();
        call("Profiler.disable").await.unwrap();
        let nodes = profile["profile"]["nodes"].as_array().cloned().unwrap_or_default();
        let names: std::collections::HashMap<i64, &str> = nodes
            .iter()
            .filter_map(|n| Some((n["id"].as_i64()?, n["callFrame"]["functionName"].as_str().unwrap_or(""))))
            .collect();
        let mut counts: std::collections::HashMap<&str, usize> = Default::default();
        for sample in profile["profile"]["samples"].as_array().into_iter().flatten() {
            let name = sample.as_i64().and_then(|id| names.get(&id)).copied().unwrap_or("?");
            *counts.entry(if name.is_empty() { "(script)" } else { name }).or_default() += 1;
        }
        let mut counts: Vec<(&str, usize)> = counts.into_iter().collect();
        counts.sort_by_key(|c| std::cmp::Reverse(c.1));
        let total: usize = counts.iter().map(|c| c.1).sum();
        let busy = total - counts.iter().find(|c| c.0 == "(idle)").map_or(0, |c| c.1);
        let top: Vec<String> = counts.iter().take(7).map(|(name, n)| format!("{name} {n}")).collect();
        println!(
            "  profile of {} worker: {:.0} µs a round trip, {total} samples, {busy} busy: {}",
            if ours { "our" } else { "the floor's" },
            us(took) / 1000.0,
            top.join(", ")
        );
    }
    println!();
}

/// A grant held to the fixture's site, a tab of its own at `index` (opened
/// through the grant's key: in its group, in its window), and a page-level
/// socket to that tab with the grant's key; the grant's browser-level client
/// keeps the tab open.
async fn grant_path(env: &ExtensionEnv, index: &str) -> (cdp_client::CdpClient, Path) {
    let book = grants::GrantBook::new(state_dir::StateDir::at(env.state.path()));
    let new = grants::NewGrant {
        name: grants::GrantName::parse("bench").unwrap(),
        sites: grants::Sites::parse_list(&env.fixtures.url()).unwrap(),
        color: None,
        expires_in: None,
        evaluate: true,
        ask: Vec::new(),
    };
    let grant = book.add(&env.token, new).unwrap();
    env.server().lent.reload();
    let key = grant.key(&env.token, grants::Door::Cdp);
    let client = cdp_client::CdpClient::connect(&format!("ws://127.0.0.1:{}/cdp?token={}", env.port, key.as_str()))
        .await
        .unwrap()
        .with_timeout(Duration::from_secs(20));
    let url = format!("{index}?grant");
    let created = client.call("Target.createTarget", json!({"url": url}), None).await.unwrap();
    let target = created["targetId"].as_str().unwrap().to_string();
    let socket = format!("ws://127.0.0.1:{}/devtools/page/{target}?token={}", env.port, key.as_str());
    let mut path = Path::open("grant", &socket).await;
    let loaded = json!({"expression": format!("location.href === {url:?} && document.readyState === 'complete'"), "returnByValue": true});
    let deadline = Instant::now() + Duration::from_secs(20);
    while !path.call("Runtime.evaluate", &loaded).await.contains(r#""value":true"#) {
        assert!(Instant::now() < deadline, "the grant's tab did not load {url}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    (client, path)
}

/// The minimal extension's copy, told the port of the benchmark's socket.
fn floor_extension(port: u16) -> tempfile::TempDir {
    let copy = tempfile::tempdir().unwrap();
    let source = e2e::tests_dir().join("fixtures/floor-extension");
    for file in ["manifest.json", "background.js"] {
        std::fs::copy(source.join(file), copy.path().join(file)).unwrap();
    }
    std::fs::write(copy.path().join("config.json"), json!({"port": port}).to_string()).unwrap();
    copy
}

/// The minimal extension's socket, once its worker connects; attached to
/// the tab showing `url`.
async fn floor_path(listener: tokio::net::TcpListener, url: &str) -> Path {
    let (stream, _) = tokio::time::timeout(Duration::from_secs(30), listener.accept())
        .await
        .expect("the floor extension's worker connects")
        .unwrap();
    let _ = stream.set_nodelay(true);
    let config = WebSocketConfig::default().max_message_size(Some(256 << 20)).max_frame_size(Some(256 << 20));
    let stream = tokio_tungstenite::MaybeTlsStream::Plain(stream);
    let ws = tokio_tungstenite::accept_async_with_config(stream, Some(config)).await.unwrap();
    let mut path = Path { name: "floor", ws, next_id: 1 };
    path.ws.send(Message::Text(json!({"attach": url}).to_string().into())).await.unwrap();
    let Some(Ok(Message::Text(attached))) = path.ws.next().await else { panic!("the floor extension did not attach") };
    assert_eq!(attached.as_str(), r#"{"attached":true}"#);
    path
}

/// Time until the client has the `Network.responseReceived` of each of
/// `count` requests the page makes at once (a busy page's `Network`
/// events: about five per request).
async fn network_throughput(path: &mut Path, fixture: &str, count: usize) -> Duration {
    static RUN: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let marker = format!("net{}", RUN.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    path.call("Network.enable", &json!({})).await;
    let started = Instant::now();
    let script = format!(
        "Promise.all(Array.from({{length: {count}}}, (_, i) => fetch('{fixture}/data.txt?{marker}-' + i).then(r => r.text())))"
    );
    path.send("Runtime.evaluate", &json!({"expression": script, "awaitPromise": true})).await;
    path.frames_with_all(&[r#""Network.responseReceived""#, &marker], count).await;
    let took = started.elapsed();
    path.call("Network.disable", &json!({})).await;
    took
}

/// A trace of the page under load (`Tracing.start`, 300 ms of layout
/// work, `Tracing.end`): the time from `Tracing.end` until the client has
/// every `Tracing.dataCollected` and the `tracingComplete`, and how many
/// data events there were.
async fn trace_collection(path: &mut Path) -> (Duration, usize) {
    let config = json!({"transferMode": "ReportEvents", "traceConfig": {"includedCategories": ["devtools.timeline", "v8.execute", "disabled-by-default-devtools.timeline"]}});
    path.call("Tracing.start", &config).await;
    let work = "(() => { const t = performance.now(); let n = 0; \
                while (performance.now() - t < 300) { document.body.style.width = (n++ % 100) + 'px'; document.body.offsetWidth; } \
                document.body.style.width = ''; return n; })()";
    path.call("Runtime.evaluate", &json!({"expression": work})).await;
    let started = Instant::now();
    path.send("Tracing.end", &json!({})).await;
    let mut data = 0;
    loop {
        let next = tokio::time::timeout(Duration::from_secs(60), path.ws.next()).await;
        let Ok(Some(Ok(Message::Text(text)))) = next else { panic!("{}: the trace never completed", path.name) };
        if text.contains(r#""Tracing.dataCollected""#) {
            data += 1;
        } else if text.contains(r#""Tracing.tracingComplete""#) {
            return (started.elapsed(), data);
        }
    }
}

/// Time until `count` console messages logged by the page reach the client.
/// Each run logs its own marker, so messages Chrome replays on
/// `Runtime.enable` are not counted, and counting starts when the command
/// is sent (an event may overtake the command's answer through the
/// extension).
async fn console_throughput(path: &mut Path, count: usize) -> Duration {
    static RUN: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let marker = format!("run{}", RUN.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    path.call("Runtime.enable", &json!({})).await;
    let started = Instant::now();
    let script = format!("setTimeout(() => {{ for (let i = 0; i < {count}; i++) console.log('{marker}', i); }}, 0)");
    path.send("Runtime.evaluate", &json!({"expression": script})).await;
    path.frames_with(&format!(r#""value":"{marker}""#), count).await;
    let took = started.elapsed();
    path.call("Runtime.disable", &json!({})).await;
    took
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let rounds: usize = std::env::var("ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(1000);
    let floor_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let floor_dir = floor_extension(floor_listener.local_addr().unwrap().port());
    let (env, index) = ExtensionEnv::sharing_index_beside(&[floor_dir.path().to_path_buf()])
        .await
        .expect("Chromium with the extension sharing a tab");
    let mut floor = floor_path(floor_listener, &index).await;
    // The relay's /json/list document, as its route serves it.
    let relay_list = env.server().relay.list_json(&grants::Access::Person);
    let chrome_list =
        cdp_client::endpoint::json_document(&format!("http://127.0.0.1:{}/json/list", env.chrome.port)).await.unwrap();
    let socket_of = |list: &Value| {
        list.as_array()
            .into_iter()
            .flatten()
            .find(|t| t["url"] == json!(index) && t["type"] == "page")
            .and_then(|t| t["webSocketDebuggerUrl"].as_str())
            .map(str::to_string)
            .expect("the shared tab is listed")
    };
    let mut relay = Path::open("relay", &socket_of(&relay_list)).await;
    let mut direct = Path::open("direct", &socket_of(&chrome_list)).await;
    // The hop any relay adds, measured in this run: a bare forwarder in
    // front of Chrome's own page socket.
    let forwarder = e2e::forwarder::minimal_forwarder(socket_of(&chrome_list)).await;
    let mut proxied = Path::open("proxy", &format!("ws://{forwarder}")).await;
    println!(
        "extension path benchmark: {} with the real extension, the fixture's index tab shared\n",
        env.browser.call("Browser.getVersion", json!({}), None).await.unwrap()["product"].as_str().unwrap_or("?")
    );

    // The same path through a grant: a tab of the grant's own (its group,
    // its window), on the same page, held to one site.
    let (_grant_client, mut granted) = grant_path(&env, &index).await;

    let small = json!({"expression": "1"});
    let [r, f, small_direct, p, g]: [Stats; 5] = round_trips(
        &mut [&mut relay, &mut floor, &mut direct, &mut proxied, &mut granted],
        "Runtime.evaluate",
        &small,
        rounds,
    )
    .await
    .try_into()
    .unwrap_or_else(|_| unreachable!());
    report("Runtime.evaluate(\"1\")", rounds, [&r, &f, &small_direct], "target: p50 <= 1.1x, p99 <= 1.2x");
    report_hop(&r, &f, &small_direct, &p);
    println!(
        "  through a grant (its own tab, held to one site): p50 {:.0} µs, p99 {:.0} µs; grant / relay: p50 {:.2}x, p99 {:.2}x   (target: 1.0x)\n",
        us(g.p50),
        us(g.p99),
        us(g.p50) / us(r.p50),
        us(g.p99) / us(r.p99),
    );
    if std::env::var_os("PROFILE_WORKERS").is_some() {
        profile_workers(&env, &mut relay, &mut floor, &small).await;
    }

    let big = json!({"expression": "'A'.repeat(1 << 20)", "returnByValue": true});
    let big_rounds = (rounds / 10).max(50);
    for (label, method, params) in [
        ("a 1 MiB string result", "Runtime.evaluate", &big),
        ("a screenshot (Page.captureScreenshot, PNG)", "Page.captureScreenshot", &json!({"format": "png"})),
    ] {
        let [r, f, d]: [Stats; 3] = round_trips(&mut [&mut relay, &mut floor, &mut direct], method, params, big_rounds)
            .await
            .try_into()
            .unwrap_or_else(|_| unreachable!());
        report(label, big_rounds, [&r, &f, &d], "target: <= 1.1x");
    }

    let count = 10_000;
    let mut relay_times = Vec::new();
    let mut floor_times = Vec::new();
    let mut direct_times = Vec::new();
    for _ in 0..3 {
        relay_times.push(console_throughput(&mut relay, count).await);
        floor_times.push(console_throughput(&mut floor, count).await);
        direct_times.push(console_throughput(&mut direct, count).await);
    }
    let floor_events = stats(floor_times);

    // A busy page's Network events, and a trace's data events.
    let fixture = env.fixtures.url();
    let requests = 400;
    let mut network: [Vec<Duration>; 3] = Default::default();
    let mut traces: [Vec<(Duration, usize)>; 3] = Default::default();
    for _ in 0..3 {
        for (i, path) in [&mut relay, &mut floor, &mut direct].into_iter().enumerate() {
            network[i].push(network_throughput(path, &fixture, requests).await);
            traces[i].push(trace_collection(path).await);
        }
    }
    let [net_relay, net_floor, net_direct] = network.map(stats);
    println!(
        "{requests} requests the page makes at once, until the client has each one's Network.responseReceived (median of 3)\n  \
         relay {:.0} ms, floor {:.0} ms, direct {:.0} ms; relay throughput / floor {:.2}x   (target >= 1.0x)",
        net_relay.p50.as_secs_f64() * 1e3,
        net_floor.p50.as_secs_f64() * 1e3,
        net_direct.p50.as_secs_f64() * 1e3,
        net_floor.p50.as_secs_f64() / net_relay.p50.as_secs_f64()
    );
    let median = |runs: &mut Vec<(Duration, usize)>| {
        runs.sort();
        runs[runs.len() / 2]
    };
    let [mut t_relay, mut t_floor, mut t_direct] = traces;
    let (t_relay, t_floor, t_direct) = (median(&mut t_relay), median(&mut t_floor), median(&mut t_direct));
    println!(
        "a trace of 300 ms of layout work, from Tracing.end to the client having every dataCollected and tracingComplete (median of 3)\n  \
         relay {:.0} ms ({} data events), floor {:.0} ms ({}), direct {:.0} ms ({}); relay / floor {:.2}x   (target <= 1.1x)\n",
        t_relay.0.as_secs_f64() * 1e3,
        t_relay.1,
        t_floor.0.as_secs_f64() * 1e3,
        t_floor.1,
        t_direct.0.as_secs_f64() * 1e3,
        t_direct.1,
        t_relay.0.as_secs_f64() / t_floor.0.as_secs_f64()
    );
    // Where the relay path's time goes: the extension's worker counts the
    // same events as chrome.debugger hands them to it (a listener beside
    // ours), so the stage before the worker is measured on its own.
    let worker = env.service_worker().await.unwrap();
    let attached =
        env.browser.call("Target.attachToTarget", json!({"targetId": worker, "flatten": true}), None).await.unwrap();
    let session = attached["sessionId"].as_str().unwrap().to_string();
    let in_worker = |expression: &str| {
        env.browser.call(
            "Runtime.evaluate",
            json!({"expression": expression, "returnByValue": true, "awaitPromise": true}),
            Some(&session),
        )
    };
    in_worker(
        "globalThis.__bench = {n: 0, first: 0, last: 0}; chrome.debugger.onEvent.addListener((s, m) => { \
         if (m !== 'Runtime.consoleAPICalled') return; const b = globalThis.__bench; \
         if (!b.n) b.first = performance.now(); b.n++; b.last = performance.now(); }); true",
    )
    .await
    .unwrap();
    in_worker(
        "globalThis.__bench.n = 0; const send = WebSocket.prototype.send; globalThis.__sends = {n: 0, send}; \
         WebSocket.prototype.send = function (d) { globalThis.__sends.n++; return send.call(this, d); }; true",
    )
    .await
    .unwrap();
    let staged = console_throughput(&mut relay, count).await;
    let sends =
        in_worker("WebSocket.prototype.send = globalThis.__sends.send; globalThis.__sends.n").await.unwrap()["result"]
            ["value"]
            .clone();
    let seen = in_worker("globalThis.__bench").await.unwrap()["result"]["value"].clone();
    let worker_span = seen["last"].as_f64().unwrap_or(0.0) - seen["first"].as_f64().unwrap_or(0.0);
    let (r, d) = (stats(relay_times), stats(direct_times));
    println!("{count} console messages from the page, until the client has them all (median of 3)");
    println!(
        "  relay {:.0} ms ({:.0}/s), floor {:.0} ms ({:.0}/s), direct {:.0} ms ({:.0}/s)",
        r.p50.as_secs_f64() * 1e3,
        count as f64 / r.p50.as_secs_f64(),
        floor_events.p50.as_secs_f64() * 1e3,
        count as f64 / floor_events.p50.as_secs_f64(),
        d.p50.as_secs_f64() * 1e3,
        count as f64 / d.p50.as_secs_f64(),
    );
    println!(
        "  relay throughput / floor {:.2}x   (target >= 1.0x); floor / direct {:.2}x",
        floor_events.p50.as_secs_f64() / r.p50.as_secs_f64(),
        d.p50.as_secs_f64() / floor_events.p50.as_secs_f64()
    );
    println!(
        "  stage: the extension's worker was handed {} of them by chrome.debugger over {:.0} ms (first to last), \
         in {sends} frames to the relay; the relay's client had them all {:.0} ms after the logging began",
        seen["n"],
        worker_span,
        staged.as_secs_f64() * 1e3
    );
    // The floor of event delivery to an extension: the worker attaches
    // chrome.debugger to a blank tab of its own (not shared, so nothing
    // goes to the relay) and counts the same 10,000 console events.
    let floor = in_worker(&format!(
        "(async () => {{ const tab = await chrome.tabs.create({{url: 'about:blank', active: false}}); \
         const target = {{tabId: tab.id}}; await chrome.debugger.attach(target, '1.3'); \
         await chrome.debugger.sendCommand(target, 'Runtime.enable'); let n = 0, done; \
         const all = new Promise(ok => {{ done = ok; setTimeout(ok, 60000); }}); \
         const count = (s, m) => {{ if (s.tabId === tab.id && m === 'Runtime.consoleAPICalled' && ++n === {count}) done(); }}; \
         chrome.debugger.onEvent.addListener(count); const start = performance.now(); \
         await chrome.debugger.sendCommand(target, 'Runtime.evaluate', \
           {{expression: \"setTimeout(() => {{ for (let i = 0; i < {count}; i++) console.log('m', i); }}, 0)\"}}); \
         await all; const took = performance.now() - start; chrome.debugger.onEvent.removeListener(count); \
         await chrome.debugger.detach(target); await chrome.tabs.remove(tab.id); return [took, n]; }})()"
    ))
    .await
    .unwrap();
    let floor = &floor["result"]["value"];
    let floor_ms = floor[0].as_f64().unwrap_or(f64::NAN);
    println!(
        "  the floor: {} of them delivered by chrome.debugger to the worker itself in {floor_ms:.0} ms ({:.0}/s, {:.2}x direct); \
         the relay path's throughput is {:.2}x that floor",
        floor[1],
        count as f64 / floor_ms * 1e3,
        d.p50.as_secs_f64() * 1e3 / floor_ms,
        floor_ms / (r.p50.as_secs_f64() * 1e3)
    );
    // Where a round trip's time goes. The relay path is Chrome's own
    // round trip plus stages, each measured on its own (means over whole
    // loops: `performance.now()` is coarsened to 100 µs in a worker, a loop
    // of hundreds is not):
    // - sendCommand: chrome.debugger.sendCommand called in the worker, no
    //   socket: the floor of any extension relay;
    // - stringify: JSON.stringify of its result, which any relay needs;
    // - ours in / ours out: our worker code, from a relay frame's arrival
    //   to the sendCommand call and from its result to the reply's send,
    //   stamped by wrappers put around those three browser functions for
    //   one extra loop (stringify, inside "ours out", is subtracted);
    // - socket: a WebSocket round trip between the worker and a bare server
    //   on loopback, frames of the same sizes;
    // - relay's view: the relay's own clock from queueing a command for
    //   the extension to its answer; what it adds to the stages above is
    //   unexplained, the client's mean minus it is the relay and the
    //   client's hop.
    let echo_port = echo_server().await;
    println!("\nwhere a relay round trip's time goes (mean µs; each stage measured on its own)");
    println!(
        "  {:<13} {:>7} {:>7} {:>8} {:>8} {:>7} {:>7} {:>7} {:>9} {:>8} {:>12}",
        "result",
        "relay",
        "direct",
        "sendCmd",
        "stringfy",
        "ours in",
        "our out",
        "socket",
        "relay's",
        "unexpl.",
        "relay+client"
    );
    for (label, params, size, rounds) in
        [("small", &small, 0usize, 300usize), ("1 MiB string", &big, 1usize << 20, 40usize)]
    {
        let before = env.server().relay.extension_round_trips();
        let (relay_mean, direct_mean) = mean_round_trips(&mut relay, &mut direct, params, rounds).await;
        let after = env.server().relay.extension_round_trips();
        let relays_view = us(after.1 - before.1) / (after.0 - before.0).max(1) as f64;
        let floor = in_worker(&floor_script(&index, params, rounds)).await.unwrap()["result"]["value"].clone();
        let (send_command, stringify) = (floor[0].as_f64().unwrap_or(f64::NAN), floor[1].as_f64().unwrap_or(f64::NAN));
        let socket = in_worker(&echo_script(echo_port, size, rounds)).await.unwrap()["result"]["value"]
            .as_f64()
            .unwrap_or(f64::NAN);
        in_worker(TRACE_ON).await.unwrap();
        for _ in 0..rounds {
            relay.call("Runtime.evaluate", params).await;
        }
        let traced = in_worker(TRACE_OFF).await.unwrap()["result"]["value"].clone();
        let n = traced["n"].as_f64().unwrap_or(0.0).max(1.0);
        let inbound = traced["inbound"].as_f64().unwrap_or(0.0) * 1e3 / n;
        let outbound = traced["outbound"].as_f64().unwrap_or(0.0) * 1e3 / n - stringify;
        let unexplained = relays_view - send_command - stringify - inbound - outbound - socket;
        println!(
            "  {label:<13} {relay_mean:>7.0} {direct_mean:>7.0} {send_command:>8.0} {stringify:>8.0} {inbound:>7.0} {outbound:>7.0} {socket:>7.0} {relays_view:>9.0} {unexplained:>8.0} {:>12.0}   ({rounds} each)",
            relay_mean - relays_view
        );
    }
    println!(
        "  relay = sendCmd + stringfy + ours in + our out + socket + unexplained + relay+client; relay's = relay - relay+client"
    );
    // The floor's tail: Chrome's two stages in series, per round trip, as
    // the relay path meets them (sendCommand, then a socket round trip).
    let serial = in_worker(&serial_floor_script(&index, echo_port, rounds)).await.unwrap()["result"]["value"].clone();
    let (floor_p50, floor_p99) = (serial[0].as_f64().unwrap_or(f64::NAN), serial[1].as_f64().unwrap_or(f64::NAN));
    println!(
        "\nthe floor per round trip (sendCommand, then the worker's socket to a bare server; {rounds} in series, 100 µs clock): \
         p50 {floor_p50:.0} µs, p99 {floor_p99:.0} µs; against direct (above) p50 {:.2}x, p99 {:.2}x",
        floor_p50 / us(small_direct.p50),
        floor_p99 / us(small_direct.p99)
    );
    drop(env);
}

/// Mean round trip of `params` on each path, interleaved in blocks of 50.
/// Unlike [`round_trips`] it keeps no warm-up block out: the relay's own
/// clock ([`relay_engine::Relay::extension_round_trips`]) is read around
/// the whole call, so both means must cover the same commands.
async fn mean_round_trips(relay: &mut Path, direct: &mut Path, params: &Value, rounds: usize) -> (f64, f64) {
    let mut totals = [Duration::ZERO; 2];
    for _ in 0..rounds.div_ceil(50) {
        for (i, path) in [&mut *relay, &mut *direct].into_iter().enumerate() {
            let started = Instant::now();
            for _ in 0..50.min(rounds) {
                path.call("Runtime.evaluate", params).await;
            }
            totals[i] += started.elapsed();
        }
    }
    let per = (rounds.div_ceil(50) * 50.min(rounds)) as f64;
    (us(totals[0]) / per, us(totals[1]) / per)
}

/// The worker's own chrome.debugger round trip and the JSON.stringify of
/// its result any relay needs: [mean µs of each] over `rounds` after 20.
fn floor_script(index: &str, params: &Value, rounds: usize) -> String {
    format!(
        "(async () => {{ const [tab] = await chrome.tabs.query({{url: {index:?}}}); let call = 0, text = 0; \
         const once = async () => {{ const a = performance.now(); \
           const r = await chrome.debugger.sendCommand({{tabId: tab.id}}, 'Runtime.evaluate', {params}); \
           const b = performance.now(); JSON.stringify(r); const c = performance.now(); call += b - a; text += c - b; }}; \
         for (let i = 0; i < 20; i++) await once(); call = 0; text = 0; \
         for (let i = 0; i < {rounds}; i++) await once(); \
         return [call * 1000 / {rounds}, text * 1000 / {rounds}]; }})()"
    )
}

/// Chrome's stages of one small relay round trip in series, as the relay
/// path meets them: `chrome.debugger.sendCommand`, then a WebSocket round
/// trip to [`echo_server`]. [p50, p99] µs over `rounds` after 20.
fn serial_floor_script(index: &str, port: u16, rounds: usize) -> String {
    format!(
        "(async () => {{ const [tab] = await chrome.tabs.query({{url: {index:?}}}); \
         const ws = new WebSocket('ws://127.0.0.1:{port}/'); \
         await new Promise((ok, no) => {{ ws.onopen = ok; ws.onerror = no; }}); \
         const once = async () => {{ const a = performance.now(); \
           const r = await chrome.debugger.sendCommand({{tabId: tab.id}}, 'Runtime.evaluate', {{expression: '1'}}); \
           await new Promise(ok => {{ ws.onmessage = ok; ws.send(JSON.stringify(r)); }}); return performance.now() - a; }}; \
         for (let i = 0; i < 20; i++) await once(); const t = []; \
         for (let i = 0; i < {rounds}; i++) t.push(await once()); ws.close(); t.sort((a, b) => a - b); \
         return [t[t.length >> 1] * 1000, t[Math.min(t.length - 1, Math.floor(t.length * 0.99))] * 1000]; }})()"
    )
}

/// A WebSocket round trip between the worker and [`echo_server`] shaped as
/// the relay path's: the worker sends a reply of `size` characters (0: a
/// small CDP answer's) and gets a command-sized frame back; mean µs.
fn echo_script(port: u16, size: usize, rounds: usize) -> String {
    format!(
        "(async () => {{ const ws = new WebSocket('ws://127.0.0.1:{port}/'); \
         await new Promise((ok, no) => {{ ws.onopen = ok; ws.onerror = no; }}); \
         const frame = {size} ? 'A'.repeat({size}) : '{{\"reply\":{{\"id\":1,\"result\":{{\"result\":{{\"type\":\"number\",\"value\":1,\"description\":\"1\"}}}}}}}}'; \
         const once = () => new Promise(ok => {{ ws.onmessage = ok; ws.send(frame); }}); \
         for (let i = 0; i < 20; i++) await once(); \
         const s = performance.now(); for (let i = 0; i < {rounds}; i++) await once(); \
         const mean = (performance.now() - s) * 1000 / {rounds}; ws.close(); return mean; }})()"
    )
}

/// Wraps the three browser functions our worker code sits between: a relay
/// frame's `data` being read, `chrome.debugger.sendCommand`, and
/// `WebSocket.send`. Sums (ms) the time from a frame's arrival to the call,
/// and from the call's result to the reply's send.
const TRACE_ON: &str = "(() => { const g = globalThis; \
    const tr = g.__trace = {inbound: 0, outbound: 0, n: 0, msg: 0, res: 0, undo: []}; \
    const data = Object.getOwnPropertyDescriptor(MessageEvent.prototype, 'data'); \
    Object.defineProperty(MessageEvent.prototype, 'data', {configurable: true, get() { tr.msg = performance.now(); return data.get.call(this); }}); \
    const call = chrome.debugger.sendCommand; \
    chrome.debugger.sendCommand = function (...a) { if (tr.msg) { tr.inbound += performance.now() - tr.msg; tr.msg = 0; } \
      return call.apply(this, a).then(v => { tr.res = performance.now(); return v; }); }; \
    const send = WebSocket.prototype.send; \
    WebSocket.prototype.send = function (d) { if (tr.res) { tr.outbound += performance.now() - tr.res; tr.res = 0; tr.n++; } return send.call(this, d); }; \
    tr.undo = [() => Object.defineProperty(MessageEvent.prototype, 'data', data), () => { chrome.debugger.sendCommand = call; }, () => { WebSocket.prototype.send = send; }]; \
    return true; })()";

/// Removes the wrappers; the sums.
const TRACE_OFF: &str = "(() => { const tr = globalThis.__trace; tr.undo.forEach(u => u()); \
    return {inbound: tr.inbound, outbound: tr.outbound, n: tr.n}; })()";

/// A bare WebSocket server on loopback, the socket stage's peer: it
/// answers every frame with one the size of the relay's command frame.
async fn echo_server() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let _ = stream.set_nodelay(true);
            tokio::spawn(async move {
                let config = WebSocketConfig::default().max_message_size(Some(64 << 20)).max_frame_size(Some(64 << 20));
                let Ok(mut ws) = tokio_tungstenite::accept_async_with_config(stream, Some(config)).await else {
                    return;
                };
                let command = r#"{"debugger.sendCommand":{"id":1,"tabId":1,"method":"Runtime.evaluate","params":{"expression":"1"}}}"#;
                while let Some(Ok(Message::Text(_))) = ws.next().await {
                    if ws.send(Message::Text(command.into())).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    port
}
