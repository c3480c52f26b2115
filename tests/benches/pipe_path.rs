//! What the managed profile's pipe path costs against Chrome's own port, in
//! one run: a managed Chromium (no port: CDP over `--remote-debugging-pipe`,
//! reached through the relay's `/profiles/managed/devtools/page/<id>`)
//! and a plain Chromium of the same build with `--remote-debugging-port`,
//! each on the fixture's index page, a page-level socket to each:
//!
//! - pipe:   client ⇄ Browser Relay ⇄ the managed browser's pipe (a session of its own)
//! - direct: client ⇄ Chrome's own page socket
//! - proxy:  client ⇄ a bare forwarder ⇄ Chrome's own page socket: the hop
//!   any relay in front of Chrome adds, measured in the same run
//! - in-process: the same managed page over the relay's pipe, from inside
//!   the relay's process (`Pipe::connect`, channels, no client socket): what
//!   the managed browser and its pipe cost without the client's hop
//!
//! Round trips interleaved in blocks of 50 after a warm-up block.
//! Run: `cargo bench -p e2e --bench pipe_path` (ROUNDS=N, default 2000).

#![allow(clippy::print_stdout)] // the report is the output

use std::time::{Duration, Instant};

use e2e::ControlEnv;
use e2e::chromium::Chromium;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

use e2e::RawSocket as Socket;

async fn open(url: &str) -> Socket {
    let config = WebSocketConfig::default().max_message_size(Some(256 << 20)).max_frame_size(Some(256 << 20));
    tokio_tungstenite::connect_async_with_config(url, Some(config), true).await.unwrap().0
}

/// One round trip over a pipe session's channels, from inside the process.
async fn call_in_process(channels: &mut cdp_client::Channels, id: u64, params: &Value) -> Duration {
    let frame = json!({"id": id, "method": "Runtime.evaluate", "params": params}).to_string();
    let started = Instant::now();
    channels.outgoing.send(frame).unwrap();
    let prefix = format!(r#"{{"id":{id},"#);
    loop {
        let text = channels.incoming.recv().await.expect("the pipe session lives");
        if text.starts_with(&prefix) {
            assert!(text.contains(r#""result":{"#), "{}", &text[..text.len().min(200)]);
            return started.elapsed();
        }
    }
}

/// One round trip of `frame` (its id `id`).
async fn call(ws: &mut Socket, id: u64, params: &Value) -> Duration {
    let frame = json!({"id": id, "method": "Runtime.evaluate", "params": params}).to_string();
    let started = Instant::now();
    ws.send(Message::Text(frame.into())).await.unwrap();
    let prefix = format!(r#"{{"id":{id},"#);
    loop {
        let Some(Ok(Message::Text(text))) = ws.next().await else { panic!("connection lost") };
        if text.starts_with(&prefix) {
            assert!(text.contains(r#""result":{"#), "{}", &text[..text.len().min(200)]);
            return started.elapsed();
        }
    }
}

fn percentiles(mut samples: Vec<Duration>) -> (f64, f64) {
    samples.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    (us(samples[samples.len() / 2]), us(samples[(samples.len() * 99 / 100).min(samples.len() - 1)]))
}

/// A page's socket from a `/json/list` document: the page showing `url`.
fn page_socket(list: &Value, url: &str) -> String {
    list.as_array()
        .into_iter()
        .flatten()
        .find(|t| t["type"] == "page" && t["url"] == json!(url))
        .and_then(|t| t["webSocketDebuggerUrl"].as_str())
        .map(str::to_string)
        .unwrap_or_else(|| panic!("no page at {url} in {list}"))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let rounds: usize = std::env::var("ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(2000);
    let env = ControlEnv::start().await.expect("serve with the control API");
    env.start_browser().await;
    env.open("index.html").await;
    let index = env.fixture("index.html");
    let endpoint = env.cdp_url("managed").await;
    let (base, query) = endpoint.split_once('?').unwrap();
    let list = cdp_client::endpoint::json_document(&format!("{}json/list?{query}", base)).await.unwrap();
    let mut pipe = open(&page_socket(&list, &index)).await;
    let managed_page = list
        .as_array()
        .into_iter()
        .flatten()
        .find(|t| t["type"] == "page" && t["url"] == json!(index))
        .and_then(|t| t["id"].as_str())
        .expect("the managed page")
        .to_string();
    let browsers = env.server.browsers.clone().expect("serve's managed browsers");
    let mut in_process = browsers
        .served_pipe("managed")
        .await
        .unwrap()
        .connect(managed_driver::Endpoint::Page(managed_page))
        .await
        .unwrap();
    let chrome = Chromium::launch(&[], &index).unwrap();
    let list =
        cdp_client::endpoint::json_document(&format!("http://127.0.0.1:{}/json/list", chrome.port)).await.unwrap();
    let mut direct = open(&page_socket(&list, &index)).await;
    let forwarder = e2e::forwarder::minimal_forwarder(page_socket(&list, &index)).await;
    let mut proxy = open(&format!("ws://{forwarder}")).await;

    println!(
        "pipe path benchmark: the managed profile's pipe through the relay against Chrome's own port, same page\n"
    );
    for (label, params, rounds) in [
        ("Runtime.evaluate(\"1\")", json!({"expression": "1"}), rounds),
        ("a 1 MiB string result", json!({"expression": "'A'.repeat(1 << 20)", "returnByValue": true}), rounds / 20),
    ] {
        let (mut on_pipe, mut on_direct, mut on_proxy, mut on_channels) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let mut id = 0;
        for block in 0..=(rounds / 50) {
            for _ in 0..50 {
                id += 1;
                let took = call_in_process(&mut in_process, id, &params).await;
                if block > 0 {
                    on_channels.push(took);
                }
            }
            for (ws, samples) in [(&mut pipe, &mut on_pipe), (&mut direct, &mut on_direct), (&mut proxy, &mut on_proxy)]
            {
                for _ in 0..50 {
                    id += 1;
                    let took = call(ws, id, &params).await;
                    if block > 0 {
                        samples.push(took);
                    }
                }
            }
        }
        let ((pipe50, pipe99), (direct50, direct99)) = (percentiles(on_pipe), percentiles(on_direct));
        let (proxy50, proxy99) = percentiles(on_proxy);
        let (channels50, channels99) = percentiles(on_channels);
        println!("{label} ({} round trips per path, interleaved in blocks of 50)", rounds / 50 * 50);
        println!("  {:<8} {:>10} {:>10}", "path", "p50 µs", "p99 µs");
        println!("  {:<8} {:>10.0} {:>10.0}", "pipe", pipe50, pipe99);
        println!("  {:<8} {:>10.0} {:>10.0}", "direct", direct50, direct99);
        println!("  {:<8} {:>10.0} {:>10.0}", "proxy", proxy50, proxy99);
        println!(
            "  {:<8} {:>10.0} {:>10.0}   (the managed page from inside the relay)",
            "in-proc", channels50, channels99
        );
        println!(
            "  pipe / direct: p50 {:.2}x, p99 {:.2}x   (target: p50 <= 1.05x, p99 <= 1.2x)",
            pipe50 / direct50,
            pipe99 / direct99
        );
        println!(
            "  proxy / direct: p50 {:.2}x, p99 {:.2}x (one bare hop); pipe / proxy: p50 {:.2}x, p99 {:.2}x\n",
            proxy50 / direct50,
            proxy99 / direct99,
            pipe50 / proxy50,
            pipe99 / proxy99
        );
    }
    drop((direct, proxy));
    drop(chrome);
    env.api.ok("POST", "/stop", None).await;
}
