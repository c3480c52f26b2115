//! Our `ai` snapshot against Playwright's on the same page of the same
//! Chromium, in one run: a generated page of ~5,000 elements and a long
//! article. Prints medians, the ratio (ours / Playwright) and output sizes.
//!
//! `cargo bench -p e2e --bench snapshot` (RUNS=7 by default).

#![allow(clippy::print_stdout)] // a benchmark reports on stdout

use std::time::Instant;

use e2e::ControlEnv;
use serde_json::{Value, json};

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let runs: usize = std::env::var("RUNS").ok().and_then(|r| r.parse().ok()).unwrap_or(7);
    let env = ControlEnv::start().await?;
    env.start_browser().await;
    let cdp_http = env.cdp_url("managed").await;
    println!("snapshot benchmark: {runs} runs after a warm-up; medians; ours = GET /snapshot over HTTP");
    println!(
        "{:<14} {:>12} {:>16} {:>8} {:>10} {:>10}",
        "page", "ours (ms)", "Playwright (ms)", "ratio", "our chars", "PW chars"
    );
    for page in ["snap/big.html", "snap/article.html"] {
        let url = env.fixture(page);
        env.api.ok("POST", "/navigate", Some(json!({"url": url}))).await;
        let tab = env.api.ok("GET", "/tabs", None).await;
        let elements = env
            .eval(tab["tabs"][0]["targetId"].as_str().unwrap_or_default(), "document.querySelectorAll('*').length")
            .await;
        let path = "/snapshot?limit=1000000&maxChars=100000000";
        env.api.ok("GET", path, None).await;
        let mut ours = Vec::new();
        let mut chars = 0;
        for _ in 0..runs {
            let started = Instant::now();
            let result = env.api.ok("GET", path, None).await;
            ours.push(started.elapsed().as_secs_f64() * 1000.0);
            chars = result["snapshot"].as_str().map_or(0, str::len);
        }
        let out = e2e::run_node(
            "bench_aria_snapshot.mjs",
            &[("CDP_HTTP", cdp_http.clone()), ("PAGE_URL", url.clone()), ("RUNS", runs.to_string())],
        )
        .await?;
        let line = out.lines().find(|l| l.starts_with('{')).ok_or_else(|| anyhow::anyhow!("no result: {out}"))?;
        let pw: Value = serde_json::from_str(line)?;
        let pw_ms =
            |key: &str| pw[key]["ms"].as_array().map(|ms| median(ms.iter().filter_map(Value::as_f64).collect()));
        let ours_ms = median(ours);
        let name = format!("{} ({}el)", page.trim_start_matches("snap/").trim_end_matches(".html"), elements);
        if let Some(aria) = pw_ms("ariaSnapshot") {
            println!(
                "{name:<14} {ours_ms:>12.1} {:>16} {:>8.2} {chars:>10} {:>10}",
                format!("{aria:.1} aria"),
                ours_ms / aria,
                pw["ariaSnapshot"]["chars"]
            );
        }
        if let Some(ai) = pw_ms("snapshotForAI") {
            println!(
                "{name:<14} {ours_ms:>12.1} {:>16} {:>8.2} {chars:>10} {:>10}",
                format!("{ai:.1} forAI"),
                ours_ms / ai,
                pw["snapshotForAI"]["chars"]
            );
        }
    }
    Ok(())
}
