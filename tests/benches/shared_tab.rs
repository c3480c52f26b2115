//! What an agent pays on a tab the person shares: the control API's
//! snapshot and click by ref on the extension driver, request to response,
//! and the engine's first call after its connection to the relay is gone
//! (connecting again, then listing the tabs). Real Chromium, the real
//! extension, a real toolbar click.
//!
//! `cargo bench -p e2e --bench shared_tab` (ROUNDS=200 snapshots and clicks,
//! interleaved; CONNECTS=30).

#![allow(clippy::print_stdout)] // a benchmark reports on stdout

use std::time::{Duration, Instant};

use e2e::control_env::ref_of;
use e2e::extension_env::ExtensionEnv;
use serde_json::json;

fn percentile(xs: &mut [f64], p: f64) -> f64 {
    xs.sort_by(f64::total_cmp);
    let at = ((xs.len() as f64 - 1.0) * p).round() as usize;
    xs[at]
}

fn ms(started: Instant) -> f64 {
    started.elapsed().as_secs_f64() * 1000.0
}

fn row(what: &str, xs: &mut [f64]) {
    let (p50, p99) = (percentile(xs, 0.5), percentile(xs, 0.99));
    println!("{what:<44} {p50:>9.2} {p99:>9.2} {:>6}", xs.len());
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let rounds: usize = std::env::var("ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(200);
    let connects: usize = std::env::var("CONNECTS").ok().and_then(|r| r.parse().ok()).unwrap_or(30);
    let env = ExtensionEnv::start().await?;
    let page = format!("{}/act/bench.html", env.fixtures.url());
    env.click_toolbar(&env.index_url()).await?;
    env.wait_for_tabs(1, Duration::from_secs(20)).await?;
    let api = &env.control;
    api.ok("POST", "/navigate", Some(json!({"url": page}))).await;
    let snapshot = api.ok("GET", "/snapshot", None).await;
    let count = ref_of(snapshot["snapshot"].as_str().unwrap_or_default(), "button \"Count\"");
    let click = json!({"kind": "click", "ref": count});
    api.ok("POST", "/act", Some(click.clone())).await; // warm-up

    let (mut snapshots, mut clicks) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let started = Instant::now();
        api.ok("GET", "/snapshot", None).await;
        snapshots.push(ms(started));
        let started = Instant::now();
        api.ok("POST", "/act", Some(click.clone())).await;
        clicks.push(ms(started));
    }
    let read = json!({"kind": "evaluate", "fn": "() => +document.getElementById('count').dataset.n"});
    let landed = api.ok("POST", "/act", Some(read)).await;
    anyhow::ensure!(landed["result"] == json!(rounds + 1), "every click landed: {landed}");

    let engine = env.server().control.as_ref().map(|(_, engine)| engine.clone()).expect("the control API runs");
    let mut reconnects = Vec::new();
    for _ in 0..connects {
        engine.disconnect("chrome").await;
        let started = Instant::now();
        api.ok("GET", "/tabs", None).await;
        reconnects.push(ms(started));
    }
    let mut listings = Vec::new();
    for _ in 0..connects {
        let started = Instant::now();
        api.ok("GET", "/tabs", None).await;
        listings.push(ms(started));
    }

    println!("an agent on a shared tab (extension driver), control API over HTTP, request to response");
    println!("{:<44} {:>9} {:>9} {:>6}", "call", "p50 ms", "p99 ms", "n");
    row("GET /snapshot (act/bench.html)", &mut snapshots);
    row("POST /act click by ref", &mut clicks);
    row("GET /tabs, connected", &mut listings);
    row("GET /tabs after the engine's connection went", &mut reconnects);
    Ok(())
}
