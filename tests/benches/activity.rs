//! What the activity record costs a relay command, side by side in one run:
//! two relays in this process, each with a scripted extension that answers
//! at once; one keeps the record (on disk, in a temporary state directory),
//! the other has it off (`recordActivity = false`). One page-level client
//! per relay sends the same commands, interleaved in blocks, so both see
//! the same machine. Three kinds of command: one the record leaves out
//! (`DOM.getDocument`: one string match), one it folds (`Runtime.evaluate`)
//! and one it keeps each time (a click at a new place each time). Then the
//! record's own work per command, timed alone (summary and push).
//! Run: `cargo bench -p e2e --bench activity` (ROUNDS=N per command and relay).

#![allow(clippy::print_stdout)] // the report is the output

use std::time::{Duration, Instant};

use activity::{ActivityRecord, Entry, Source};
use browser_relay::RunningServer;
use e2e::fake_extension::{FakeExtension, Mode, fake_tab, fake_target_id, hello};
use futures_util::{SinkExt as _, StreamExt as _};
use state_dir::Token;
use tokio_tungstenite::tungstenite::Message;

const BLOCK: usize = 250;

struct Relay {
    server: RunningServer,
    _ext: FakeExtension,
    _state: Option<tempfile::TempDir>,
    url: String,
}

async fn relay(record: bool) -> Relay {
    let token = Token::generate();
    let mut options = e2e::test_options(Some(token.clone()));
    let state = record.then(|| tempfile::tempdir().unwrap());
    options.state_root = state.as_ref().map(|s| s.path().to_path_buf());
    options.record_activity = record;
    let server = RunningServer::start(options).await.unwrap();
    let ext = FakeExtension::connect(server.addr, Some(token.as_str()), Some(hello(vec![fake_tab(1)])), Mode::Echo)
        .await
        .unwrap();
    e2e::wait_for_stats(&server.relay, "the tab", Duration::from_secs(5), |s| s.targets == 1).await.unwrap();
    let url = format!(
        "ws://{}/devtools/page/{}?token={}",
        server.addr,
        fake_target_id(1),
        browser_relay::cdp_key(&token).as_str()
    );
    Relay { server, _ext: ext, _state: state, url }
}

/// A command's frame for a round trip's id.
type Frame = dyn Fn(usize) -> String;

type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// `count` sequential round trips of `frame(i)`; their durations.
async fn block(ws: &mut Socket, start_id: usize, count: usize, frame: &dyn Fn(usize) -> String) -> Vec<Duration> {
    let mut samples = Vec::with_capacity(count);
    for i in start_id..start_id + count {
        let started = Instant::now();
        ws.send(Message::Text(frame(i).into())).await.unwrap();
        let prefix = format!(r#"{{"id":{i},"#);
        loop {
            let Some(Ok(Message::Text(text))) = ws.next().await else { panic!("connection lost") };
            if text.starts_with(&prefix) {
                break;
            }
        }
        samples.push(started.elapsed());
    }
    samples
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn summary(mut samples: Vec<Duration>) -> (f64, f64) {
    samples.sort();
    let mean = samples.iter().sum::<Duration>() / samples.len() as u32;
    (us(samples[samples.len() / 2]), us(mean))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let rounds: usize = std::env::var("ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(6000);
    let on = relay(true).await;
    let off = relay(false).await;
    let (mut on_ws, _) = tokio_tungstenite::connect_async(on.url.as_str()).await.unwrap();
    let (mut off_ws, _) = tokio_tungstenite::connect_async(off.url.as_str()).await.unwrap();
    let kinds: [(&str, Box<Frame>); 3] = [
        (
            "DOM.getDocument (left out)",
            Box::new(|i| format!(r#"{{"id":{i},"method":"DOM.getDocument","params":{{}}}}"#)),
        ),
        (
            "Runtime.evaluate (folded)",
            // The same code each time, as a framework's: only that folds.
            Box::new(|i| {
                format!(r#"{{"id":{i},"method":"Runtime.evaluate","params":{{"expression":"document.readyState"}}}}"#)
            }),
        ),
        (
            "a click (kept each time)",
            Box::new(|i| {
                format!(
                    r#"{{"id":{i},"method":"Input.dispatchMouseEvent","params":{{"type":"mousePressed","x":{},"y":7,"button":"left","clickCount":1}}}}"#,
                    i % 1000
                )
            }),
        ),
    ];
    println!(
        "activity record benchmark: {rounds} round trips per command and relay, interleaved in blocks of {BLOCK} (after a warm-up block)\n"
    );
    println!(
        "  {:<28} {:>10} {:>10} {:>11} {:>11} {:>12}",
        "command", "on p50 µs", "off p50 µs", "on mean µs", "off mean µs", "mean diff µs"
    );
    let mut id = 0;
    for (name, frame) in &kinds {
        block(&mut on_ws, id, BLOCK, frame.as_ref()).await;
        block(&mut off_ws, id, BLOCK, frame.as_ref()).await;
        id += BLOCK;
        let (mut with, mut without) = (Vec::new(), Vec::new());
        for round in 0..rounds / BLOCK {
            // Each goes first in every other pair of blocks.
            if round % 2 == 0 {
                with.extend(block(&mut on_ws, id, BLOCK, frame.as_ref()).await);
                without.extend(block(&mut off_ws, id, BLOCK, frame.as_ref()).await);
            } else {
                without.extend(block(&mut off_ws, id, BLOCK, frame.as_ref()).await);
                with.extend(block(&mut on_ws, id, BLOCK, frame.as_ref()).await);
            }
            id += BLOCK;
        }
        let ((on_p50, on_mean), (off_p50, off_mean)) = (summary(with), summary(without));
        println!(
            "  {name:<28} {on_p50:>10.1} {off_p50:>10.1} {on_mean:>11.1} {off_mean:>11.1} {:>12.2}",
            on_mean - off_mean
        );
    }
    let kept =
        on.server.activity.read(&activity::Query { limit: Some(activity::QUERY_LIMIT_MAX), ..Default::default() });
    let clicks = kept.iter().filter(|e| e.kind == activity::Kind::Input).count();
    let evaluations: u32 = kept.iter().filter(|e| e.kind == activity::Kind::Evaluation).map(|e| e.count).sum();
    println!(
        "\n  the newest {} entries of the record: {clicks} clicks, {evaluations} evaluations folded into runs",
        kept.len()
    );

    // The record's own work per command, alone: the summary (a string
    // match; for a kept command, its params read) and the push.
    let record = ActivityRecord::new(None, activity::DEFAULT_RETENTION);
    let big_script =
        format!(r#"{{"functionDeclaration":"(utilityScript, ...args) => {}","arguments":[]}}"#, "x".repeat(300 << 10));
    let cases: [(&str, &str, String); 3] = [
        ("DOM.getDocument (left out)", "DOM.getDocument", "{}".into()),
        (
            "a click (kept each time)",
            "Input.dispatchMouseEvent",
            r#"{"type":"mousePressed","x":3,"y":7,"button":"left"}"#.into(),
        ),
        ("a 300 KiB script (folded)", "Runtime.callFunctionOn", big_script),
    ];
    println!(
        "\n  the record's work alone, per command (mean of 200,000; the click's push includes its entry's allocation)"
    );
    for (name, method, params) in &cases {
        let n = 200_000u32;
        let started = Instant::now();
        for i in 0..n {
            if let Some((kind, text)) = activity::summary::cdp_command(method, Some(params)) {
                let mut entry = Entry::now(Source::Cdp, "bench", kind, text);
                entry.tab = Some("T".into());
                entry.at += u64::from(i % 7);
                record.record(entry);
            }
            if i % 1000 == 0 {
                record.flush();
            }
        }
        println!("  {name:<28} {:>8.0} ns", started.elapsed().as_nanos() as f64 / f64::from(n));
    }
    on.server.stop().await;
    off.server.stop().await;
}
