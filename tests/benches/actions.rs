//! Our click-by-ref and 20-field fill against Playwright's `locator.click()`
//! and `locator.fill()` on the same page of the same Chromium, in one run.
//! Ours: `POST /act` over HTTP, request to response (the page's handler has
//! run when the response comes: Chrome acknowledges input after dispatch).
//!
//! `cargo bench -p e2e --bench actions` (RUNS=30 clicks, FILL_RUNS=10 forms).

#![allow(clippy::print_stdout)] // a benchmark reports on stdout

use std::time::Instant;

use e2e::ControlEnv;
use e2e::control_env::ref_of;
use serde_json::{Value, json};

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn ms(started: Instant) -> f64 {
    started.elapsed().as_secs_f64() * 1000.0
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let runs: usize = std::env::var("RUNS").ok().and_then(|r| r.parse().ok()).unwrap_or(30);
    let fill_runs: usize = std::env::var("FILL_RUNS").ok().and_then(|r| r.parse().ok()).unwrap_or(10);
    let env = ControlEnv::start().await?;
    env.start_browser().await;
    let cdp_http = env.cdp_url("managed").await;
    let url = env.fixture("act/bench.html");
    let tab = env.open("act/bench.html").await;
    let snapshot = env.snapshot_text("").await;
    let count = ref_of(&snapshot, "button \"Count\"");
    let fields: Vec<String> = (1..=20).map(|i| ref_of(&snapshot, &format!("textbox \"Field {i}\""))).collect();

    let click = json!({"kind": "click", "ref": count});
    env.api.ok("POST", "/act", Some(click.clone())).await; // warm-up
    let mut ours_click = Vec::new();
    for _ in 0..runs {
        let started = Instant::now();
        env.api.ok("POST", "/act", Some(click.clone())).await;
        ours_click.push(ms(started));
    }
    let clicks = env.eval(&tab, "+document.getElementById('count').dataset.n").await;
    anyhow::ensure!(clicks == json!(runs + 1), "every click landed: {clicks}");

    let fill = |round: i64| {
        let values: Vec<Value> =
            fields.iter().enumerate().map(|(i, r)| json!({"ref": r, "value": format!("ours {round} {i}")})).collect();
        json!({"kind": "fill", "fields": values})
    };
    env.api.ok("POST", "/act", Some(fill(-1))).await; // warm-up
    let mut ours_fill = Vec::new();
    for round in 0..fill_runs {
        let body = fill(round as i64);
        let started = Instant::now();
        env.api.ok("POST", "/act", Some(body)).await;
        ours_fill.push(ms(started));
    }
    let last = env.eval(&tab, "document.querySelector('input[name=f20]').value").await;
    anyhow::ensure!(last == json!(format!("ours {} 19", fill_runs - 1)), "the fill landed: {last}");

    let out = e2e::run_node(
        "bench_actions.mjs",
        &[("CDP_HTTP", cdp_http), ("PAGE_URL", url), ("RUNS", runs.to_string()), ("FILL_RUNS", fill_runs.to_string())],
    )
    .await?;
    let line = out.lines().find(|l| l.starts_with('{')).ok_or_else(|| anyhow::anyhow!("no result: {out}"))?;
    let pw: Value = serde_json::from_str(line)?;
    let pw_median = |key: &str| median(pw[key].as_array().into_iter().flatten().filter_map(Value::as_f64).collect());

    println!(
        "actions benchmark: medians after a warm-up; ours = POST /act over HTTP, Playwright = playwright-core over CDP"
    );
    println!("{:<26} {:>10} {:>16} {:>8}", "action", "ours (ms)", "Playwright (ms)", "ratio");
    let (oc, pc) = (median(ours_click), pw_median("click"));
    println!("{:<26} {oc:>10.2} {pc:>16.2} {:>8.2}", format!("click by ref ({runs}x)"), oc / pc);
    let (of, pf) = (median(ours_fill), pw_median("fill"));
    println!("{:<26} {of:>10.2} {pf:>16.2} {:>8.2}", format!("fill 20 fields ({fill_runs}x)"), of / pf);
    Ok(())
}
