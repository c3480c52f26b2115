//! What the relay hop costs: sequential CDP round trips, side by side in one
//! run, over three paths with the same client and a peer doing the same work
//! (parse the JSON it gets, answer with a small or 1 MiB result):
//!
//! - direct:  client ⇄ echo peer                       (one WebSocket hop)
//! - proxy:   client ⇄ minimal tokio-tungstenite forwarder ⇄ echo peer
//! - relay:   client ⇄ Browser Relay ⇄ echo extension   (what we ship)
//!
//! `proxy` is the floor for any relay: two hops, no routing. The relay adds
//! session routing, the extension protocol and the pending-call table.
//! Run: `cargo bench -p e2e --bench relay_hop` (ROUNDS=N to change the count).

#![allow(clippy::print_stdout)] // the report is the output

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use browser_relay::DEFAULT_EXTENSION_ID;
use browser_relay::RunningServer;
use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use shared_protocol::{PROTOCOL_VERSION, RelayMessage, SUBPROTOCOL};
use state_dir::Token;
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

const SMALL_RESULT: &str = r#"{"result":{"type":"number","value":2,"description":"2"}}"#;

fn big_result() -> String {
    format!(r#"{{"data":"{}"}}"#, "A".repeat(1 << 20))
}

fn ws_config() -> WebSocketConfig {
    WebSocketConfig::default().max_message_size(Some(64 << 20)).max_frame_size(Some(64 << 20))
}

/// A CDP peer: answers each command with `result`.
async fn echo_peer(result: String) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let result = result.clone();
            tokio::spawn(async move {
                let _ = stream.set_nodelay(true);
                let mut ws = tokio_tungstenite::accept_async_with_config(stream, Some(ws_config())).await.unwrap();
                while let Some(Ok(Message::Text(text))) = ws.next().await {
                    let command: Value = serde_json::from_str(&text).unwrap();
                    let id = command["id"].as_i64().unwrap();
                    let reply = format!(r#"{{"id":{id},"result":{result}}}"#);
                    if ws.send(Message::Text(reply.into())).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    addr
}

/// An extension that answers every `debugger.sendCommand` with `result`.
async fn echo_extension(relay: SocketAddr, token: &str, result: String) {
    let mut request = format!("ws://{relay}/extension").into_client_request().unwrap();
    request.headers_mut().insert("Origin", format!("chrome-extension://{DEFAULT_EXTENSION_ID}").parse().unwrap());
    request.headers_mut().insert("Sec-WebSocket-Protocol", SUBPROTOCOL.parse().unwrap());
    let (mut ws, _) = tokio_tungstenite::connect_async_with_config(request, Some(ws_config()), true).await.unwrap();
    let proof = e2e::pairing::ExtensionProof::new(Some(token), relay.port());
    ws.send(Message::Text(proof.auth_frame(PROTOCOL_VERSION).into())).await.unwrap();
    tokio::spawn(async move {
        while let Some(Ok(Message::Text(text))) = ws.next().await {
            let message = RelayMessage::parse(&text).unwrap();
            let reply = match &message {
                RelayMessage::Challenge { nonce, proof: relay_proof, .. } => {
                    let hello = e2e::fake_extension::hello(vec![e2e::fake_extension::fake_tab(1)]);
                    let [prove, hello] =
                        proof.answer_frames(nonce, relay_proof, hello).expect("the relay proves the pairing");
                    if ws.send(Message::Text(prove.into())).await.is_err() {
                        break;
                    }
                    hello
                }
                RelayMessage::DebuggerSendCommand(c) if c.method == "Target.getTargetInfo" => {
                    let target = e2e::fake_extension::fake_target_id(c.tab_id);
                    format!(
                        r#"{{"reply":{{"id":{},"result":{{"targetInfo":{{"targetId":"{target}","type":"page","url":"","title":""}}}}}}}}"#,
                        c.id
                    )
                }
                RelayMessage::DebuggerSendCommand(c) => format!(r#"{{"reply":{{"id":{},"result":{result}}}}}"#, c.id),
                RelayMessage::Ping { nonce } => format!(r#"{{"pong":{{"nonce":{nonce}}}}}"#),
                _ => continue,
            };
            if ws.send(Message::Text(reply.into())).await.is_err() {
                break;
            }
        }
    });
}

struct Stats {
    p50: Duration,
    p99: Duration,
    mean: Duration,
}

/// Sequential round trips of `Runtime.evaluate` on `url`, after a warm-up.
async fn measure(url: &str, session: Option<&str>, rounds: usize) -> Stats {
    let (mut ws, _) = tokio_tungstenite::connect_async_with_config(url, Some(ws_config()), true).await.unwrap();
    let session = session.map(|s| format!(r#","sessionId":"{s}""#)).unwrap_or_default();
    let mut samples = Vec::with_capacity(rounds);
    for i in 0..(rounds + rounds / 10) {
        let frame = format!(r#"{{"id":{i},"method":"Runtime.evaluate","params":{{"expression":"1+1"}}{session}}}"#);
        let start = Instant::now();
        ws.send(Message::Text(frame.into())).await.unwrap();
        loop {
            let Some(Ok(Message::Text(text))) = ws.next().await else { panic!("connection lost") };
            // Skip events; stop at our answer.
            if text.starts_with(&format!(r#"{{"id":{i},"#)) {
                break;
            }
        }
        if i >= rounds / 10 {
            samples.push(start.elapsed());
        }
    }
    samples.sort();
    let mean = samples.iter().sum::<Duration>() / samples.len() as u32;
    Stats { p50: samples[samples.len() / 2], p99: samples[samples.len() * 99 / 100], mean }
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let rounds: usize = std::env::var("ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(5000);
    println!("relay hop benchmark: {rounds} sequential Runtime.evaluate round trips per path (after a 10% warm-up)\n");
    for (label, result) in [("small result", SMALL_RESULT.to_string()), ("1 MiB result", big_result())] {
        let rounds = if result.len() > 1000 { rounds / 10 } else { rounds };
        let peer = echo_peer(result.clone()).await;
        let proxy = e2e::forwarder::minimal_forwarder(format!("ws://{peer}")).await;
        let token = Token::generate();
        let server = RunningServer::start(e2e::test_options(Some(token.clone()))).await.unwrap();
        echo_extension(server.addr, token.as_str(), result.clone()).await;
        assert!(server.relay.wait_for_extension(Duration::from_secs(5)).await);
        while server.relay.stats().targets == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await; // setup only, not measured
        }
        // The page-level endpoint: commands without a sessionId go to the tab.
        let target = e2e::fake_extension::fake_target_id(1);
        let page_url =
            format!("ws://{}/devtools/page/{target}?token={}", server.addr, browser_relay::cdp_key(&token).as_str());

        let direct = measure(&format!("ws://{peer}"), None, rounds).await;
        let proxied = measure(&format!("ws://{proxy}"), None, rounds).await;
        let relayed = measure(&page_url, None, rounds).await;
        println!("{label} ({rounds} round trips)");
        println!("  {:<8} {:>10} {:>10} {:>10}", "path", "p50 µs", "p99 µs", "mean µs");
        for (name, s) in [("direct", &direct), ("proxy", &proxied), ("relay", &relayed)] {
            println!("  {:<8} {:>10.1} {:>10.1} {:>10.1}", name, us(s.p50), us(s.p99), us(s.mean));
        }
        println!(
            "  relay / proxy: p50 {:.2}x, p99 {:.2}x   (target <= 1.3x)",
            us(relayed.p50) / us(proxied.p50),
            us(relayed.p99) / us(proxied.p99)
        );
        println!(
            "  relay / direct: p50 {:.2}x; relay hop adds {:.1} µs at p50 over a direct connection\n",
            us(relayed.p50) / us(direct.p50),
            us(relayed.p50) - us(direct.p50)
        );
        server.stop().await;
    }
}
