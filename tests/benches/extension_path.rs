//! What the extension driver costs against Chrome's own port, on the same
//! tab, in one run: headless Chromium with the real extension sharing the
//! fixture's index tab, and two page-level WebSockets to that tab:
//!
//! - relay:  client ⇄ Browser Relay ⇄ the extension's worker ⇄ chrome.debugger
//! - direct: client ⇄ Chrome's own `--remote-debugging-port` page socket
//!
//! Round trips are interleaved in blocks of 50 (relay, direct, relay, ...)
//! so that both paths see the same machine state. Measured: sequential
//! `Runtime.evaluate("1")` round trips (small results), a 1 MiB string
//! result, and event throughput (a page that logs 10,000 console messages:
//! time until the client has them all).
//! Run: `cargo bench -p e2e --bench extension_path` (ROUNDS=N, default 1000).

#![allow(clippy::print_stdout)] // the report is the output

use std::time::{Duration, Instant};

use e2e::extension_env::ExtensionEnv;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

struct Path {
    name: &'static str,
    ws: Socket,
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

    /// Waits for `count` events named `method`.
    async fn events(&mut self, method: &str, count: usize) {
        let needle = format!(r#""method":"{method}""#);
        let mut seen = 0;
        while seen < count {
            let Some(Ok(Message::Text(text))) = self.ws.next().await else { panic!("{}: connection lost", self.name) };
            seen += usize::from(text.contains(&needle));
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
async fn round_trips(relay: &mut Path, direct: &mut Path, params: &Value, rounds: usize) -> (Stats, Stats) {
    let (mut on_relay, mut on_direct) = (Vec::new(), Vec::new());
    for block in 0..=(rounds / 50) {
        for (path, samples) in [(&mut *relay, &mut on_relay), (&mut *direct, &mut on_direct)] {
            for _ in 0..50.min(rounds) {
                let started = Instant::now();
                let answer = path.call("Runtime.evaluate", params).await;
                assert!(answer.contains(r#""result":{"#), "{}: {}", path.name, &answer[..answer.len().min(200)]);
                if block > 0 {
                    samples.push(started.elapsed());
                }
            }
        }
    }
    (stats(on_relay), stats(on_direct))
}

fn report(label: &str, rounds: usize, relay: &Stats, direct: &Stats, target: &str) {
    println!("{label} ({rounds} round trips per path, interleaved in blocks of 50)");
    println!("  {:<8} {:>10} {:>10}", "path", "p50 µs", "p99 µs");
    for (name, s) in [("relay", relay), ("direct", direct)] {
        println!("  {:<8} {:>10.0} {:>10.0}", name, us(s.p50), us(s.p99));
    }
    println!(
        "  relay / direct: p50 {:.2}x, p99 {:.2}x   ({target})\n",
        us(relay.p50) / us(direct.p50),
        us(relay.p99) / us(direct.p99)
    );
}

/// Time until `count` console messages logged by the page reach the client.
async fn console_throughput(path: &mut Path, count: usize) -> Duration {
    path.call("Runtime.enable", &json!({})).await;
    let started = Instant::now();
    let script = format!("setTimeout(() => {{ for (let i = 0; i < {count}; i++) console.log('m', i); }}, 0)");
    path.call("Runtime.evaluate", &json!({"expression": script})).await;
    path.events("Runtime.consoleAPICalled", count).await;
    let took = started.elapsed();
    path.call("Runtime.disable", &json!({})).await;
    took
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let rounds: usize = std::env::var("ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(1000);
    let (env, index) = ExtensionEnv::sharing_index().await.expect("Chromium with the extension sharing a tab");
    // The relay's /json/list document, as its route serves it.
    let relay_list = env.server().relay.list_json();
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
    println!(
        "extension path benchmark: {} with the real extension, the fixture's index tab shared\n",
        env.browser.call("Browser.getVersion", json!({}), None).await.unwrap()["product"].as_str().unwrap_or("?")
    );

    let small = json!({"expression": "1"});
    let (r, small_direct) = round_trips(&mut relay, &mut direct, &small, rounds).await;
    report("Runtime.evaluate(\"1\")", rounds, &r, &small_direct, "target: p50 <= 1.3x, p99 <= 1.5x");

    let big = json!({"expression": "'A'.repeat(1 << 20)", "returnByValue": true});
    let big_rounds = (rounds / 10).max(50);
    let (r, d) = round_trips(&mut relay, &mut direct, &big, big_rounds).await;
    report("a 1 MiB string result", big_rounds, &r, &d, "target: <= 1.3x");

    let count = 10_000;
    let mut relay_times = Vec::new();
    let mut direct_times = Vec::new();
    for _ in 0..3 {
        relay_times.push(console_throughput(&mut relay, count).await);
        direct_times.push(console_throughput(&mut direct, count).await);
    }
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
    in_worker("globalThis.__bench.n = 0; true").await.unwrap();
    let staged = console_throughput(&mut relay, count).await;
    let seen = in_worker("globalThis.__bench").await.unwrap()["result"]["value"].clone();
    let worker_span = seen["last"].as_f64().unwrap_or(0.0) - seen["first"].as_f64().unwrap_or(0.0);
    let (r, d) = (stats(relay_times), stats(direct_times));
    println!("{count} console messages from the page, until the client has them all (median of 3)");
    println!(
        "  relay {:.0} ms ({:.0}/s), direct {:.0} ms ({:.0}/s); relay throughput / direct {:.2}x   (target >= 0.8x)",
        r.p50.as_secs_f64() * 1e3,
        count as f64 / r.p50.as_secs_f64(),
        d.p50.as_secs_f64() * 1e3,
        count as f64 / d.p50.as_secs_f64(),
        d.p50.as_secs_f64() / r.p50.as_secs_f64()
    );
    println!(
        "  stage: the extension's worker was handed {} of them by chrome.debugger over {:.0} ms (first to last); \
         the relay's client had them all {:.0} ms after the logging began",
        seen["n"],
        worker_span,
        staged.as_secs_f64() * 1e3
    );
    // The floor of a round trip on this path: chrome.debugger.sendCommand
    // called in the extension's worker itself, no relay and no socket.
    let floor = in_worker(&format!(
        "(async () => {{ const [tab] = await chrome.tabs.query({{url: {index:?}}}); const t = []; \
         for (let i = 0; i < 250; i++) {{ const s = performance.now(); \
         await chrome.debugger.sendCommand({{tabId: tab.id}}, 'Runtime.evaluate', {{expression: '1'}}); \
         if (i >= 50) t.push(performance.now() - s); }} \
         t.sort((a, b) => a - b); return [t[t.length >> 1], t[Math.floor(t.length * 0.99)]]; }})()"
    ))
    .await
    .unwrap();
    let floor = &floor["result"]["value"];
    let (floor_p50, floor_p99) = (floor[0].as_f64().unwrap_or(0.0) * 1e3, floor[1].as_f64().unwrap_or(0.0) * 1e3);
    println!(
        "\nthe floor: chrome.debugger.sendCommand(Runtime.evaluate \"1\") in the extension's worker itself, 200 round trips: \
         p50 {floor_p50:.0} µs, p99 {floor_p99:.0} µs; against the direct p50 above that is {:.2}x",
        floor_p50 / us(small_direct.p50)
    );
    drop(env);
}
