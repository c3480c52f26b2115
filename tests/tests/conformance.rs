//! The differential conformance suite: one battery of client scenarios, each
//! run against Chrome's own debugging port, the relay with the real
//! extension (a tab shared by a real toolbar click), and the relay with the
//! managed driver, at the same time; what the clients observed must be the
//! same on all three. Where the user's browser must differ from Chrome (it
//! is not closed by `Browser.close`, takes no new browser contexts, keeps no
//! tabs a client left open), the scenario checks the documented difference
//! instead (`own` in its observation; docs/limits.md).
//!
//! Clients: Playwright, Puppeteer and chrome-remote-interface
//! (`tests/js/conformance.mjs`, one scenario per run), and chromiumoxide
//! (here). The endpoints live for the whole battery, so every scenario is
//! also the next client after the previous one left.

use std::time::Duration;

use e2e::endpoints::{ChromePort, Endpoint, Managed, extension_endpoint};
use e2e::extension_env::ExtensionEnv;
use futures_util::StreamExt;
use serde_json::{Value, json};

/// The Node scenarios, in the order they run (`browser_limits` comes last,
/// after the Rust client: it closes Chrome's and the managed browser).
const SCENARIOS: [&str; 13] = [
    "churn",
    "two_clients",
    "dying_client",
    "left_behind_tabs",
    "puppeteer_tabs",
    "page_sockets",
    "cri_browser",
    "workers",
    "downloads",
    "cdp_sessions",
    "person_data",
    "interception",
    "traces",
];

/// chromiumoxide, as its README uses it: connect, a new page, evaluate, a
/// screenshot (it activates the page on the page's own session first), close.
async fn chromiumoxide_scenario(endpoint: &Endpoint) -> Result<Value, String> {
    let scenario = async {
        let (browser, mut handler) = chromiumoxide::Browser::connect(endpoint.ws.clone()).await?;
        let driver = tokio::spawn(async move { while handler.next().await.is_some() {} });
        let url = format!("{}/index.html?oxide", endpoint.fixture);
        let page = browser.new_page(url.as_str()).await?;
        let title = page.get_title().await?;
        let product: i64 = page.evaluate("6 * 7").await?.into_value()?;
        let png = page.screenshot(chromiumoxide::page::ScreenshotParams::builder().build()).await?;
        let is_png = png.starts_with(&[0x89, b'P', b'N', b'G']);
        let search: String = page.evaluate("location.search").await?.into_value()?;
        page.close().await?;
        // Page.close closes the tab, as the endpoint's list shows.
        let closed = wait_until(|| async {
            let (_, list) = e2e::http_get(&endpoint.json_url("/json/list")).await.unwrap_or_default();
            !list.contains("?oxide")
        })
        .await;
        drop(browser);
        driver.abort();
        anyhow::Ok(json!({"same": {
            "title": title, "product": product, "screenshotIsPng": is_png, "search": search, "pageClosed": closed,
        }}))
    };
    tokio::time::timeout(Duration::from_secs(60), scenario)
        .await
        .map_err(|_| "chromiumoxide: no result within 60 s".to_string())?
        .map_err(|e| format!("chromiumoxide: {e:#}"))
}

/// Polls `done` (bounded: 10 s) for what no event announces: true once it
/// holds.
async fn wait_until<F: Future<Output = bool>>(mut done: impl FnMut() -> F) -> bool {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while tokio::time::Instant::now() < deadline {
        if done().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

/// The pages of the user's real browser (the test's own hands on Chrome's
/// port, never the path under test), sorted.
async fn real_tabs(env: &ExtensionEnv) -> Vec<String> {
    let targets = env.browser.call("Target.getTargets", json!({}), None).await.expect("Target.getTargets");
    let mut urls: Vec<String> = targets["targetInfos"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| t["type"] == "page")
        .filter_map(|t| t["url"].as_str().map(str::to_string))
        .collect();
    urls.sort();
    urls
}

/// After a scenario that failed halfway through: the user's one tab back on
/// the page it showed at the start (the test's own hands), so that one
/// failure is reported as one, not as every scenario after it failing to
/// find the user's tab.
async fn restore_user_tab(env: &ExtensionEnv, at_start: &[String]) {
    let [start] = at_start else { return };
    let Ok(targets) = env.browser.call("Target.getTargets", json!({}), None).await else { return };
    let pages: Vec<&Value> =
        targets["targetInfos"].as_array().into_iter().flatten().filter(|t| t["type"] == "page").collect();
    let [page] = pages.as_slice() else { return };
    if page["url"] == start.as_str() {
        return;
    }
    let Ok(attached) =
        env.browser.call("Target.attachToTarget", json!({"targetId": page["targetId"], "flatten": true}), None).await
    else {
        return;
    };
    let session = attached["sessionId"].as_str().unwrap_or_default().to_string();
    let _ = env.browser.call("Page.navigate", json!({"url": start}), Some(&session)).await;
    let _ = env.browser.call("Target.detachFromTarget", json!({"sessionId": session}), None).await;
    eprintln!("conformance: the user's tab was put back on {start} for the next scenario");
}

/// One scenario's outcome on the three endpoints: `None` when they agree.
fn compare(scenario: &str, results: [(&str, Result<Value, String>); 3]) -> Option<String> {
    let mut problems = Vec::new();
    for (kind, result) in &results {
        if let Err(why) = result {
            problems.push(format!("{scenario} failed on {kind}:\n{why}"));
        }
    }
    if let (Ok(reference), rest) = (&results[0].1, &results[1..]) {
        for (kind, result) in rest {
            if let Ok(observed) = result
                && observed["same"] != reference["same"]
            {
                problems.push(format!(
                    "{scenario}: {kind} observed\n  {}\nChrome's own port observed\n  {}",
                    observed["same"], reference["same"]
                ));
            }
        }
    }
    for (kind, result) in &results {
        if let Ok(observed) = result
            && observed["own"].as_object().is_some_and(|o| !o.is_empty())
        {
            eprintln!("{scenario} on {kind}, by design: {}", observed["own"]);
        }
    }
    (!problems.is_empty()).then(|| problems.join("\n\n"))
}

/// Compares, and says how it went.
fn judge(endpoints: &[&Endpoint; 3], scenario: &str, results: [Result<Value, String>; 3]) -> Option<String> {
    let [a, b, c] = results;
    let verdict = compare(scenario, [(endpoints[0].kind, a), (endpoints[1].kind, b), (endpoints[2].kind, c)]);
    eprintln!("conformance: {scenario:<18} {}", if verdict.is_none() { "same on all three" } else { "DIFFERS" });
    verdict
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_observe_the_same_on_chromes_port_the_extension_and_the_managed_driver() {
    e2e::init_logging();
    let (chrome, extension, managed) = tokio::join!(ChromePort::start(), extension_endpoint(), Managed::start());
    let chrome = chrome.expect("Chrome's own port");
    let (extension_env, extension) = extension.expect("the relay with the real extension");
    let managed = managed.expect("the relay with the managed driver");
    let endpoints = [&chrome.endpoint, &extension, &managed.endpoint];
    let real_tabs_at_start = real_tabs(&extension_env).await;

    let mut failures = Vec::new();
    // CONFORMANCE_ONLY=a,b runs only those Node scenarios (when chasing one).
    let only = std::env::var("CONFORMANCE_ONLY").ok();
    let picked = |scenario: &str| only.as_deref().is_none_or(|o| o.split(',').any(|s| s == scenario));
    for scenario in SCENARIOS.into_iter().filter(|s| picked(s)) {
        let (a, b, c) =
            tokio::join!(endpoints[0].run(scenario), endpoints[1].run(scenario), endpoints[2].run(scenario));
        if let Some(failure) = judge(&endpoints, scenario, [a, b, c]) {
            failures.push(failure);
            restore_user_tab(&extension_env, &real_tabs_at_start).await;
        }
    }
    let (a, b, c) = tokio::join!(
        chromiumoxide_scenario(endpoints[0]),
        chromiumoxide_scenario(endpoints[1]),
        chromiumoxide_scenario(endpoints[2])
    );
    failures.extend(judge(&endpoints, "chromiumoxide", [a, b, c]));

    // After every client above: the user's real browser has the tabs it
    // started with (the relay's view could hide a tab left behind). The
    // relay closes a leaving client's tabs when it sees the socket close.
    wait_until(|| async { real_tabs(&extension_env).await == real_tabs_at_start }).await;
    let real_tabs_at_end = real_tabs(&extension_env).await;
    if real_tabs_at_end != real_tabs_at_start {
        failures.push(format!("the user's browser had {real_tabs_at_start:?}, and ends with {real_tabs_at_end:?}"));
    }

    let (a, b, c) = tokio::join!(
        endpoints[0].run("browser_limits"),
        endpoints[1].run("browser_limits"),
        endpoints[2].run("browser_limits")
    );
    failures.extend(judge(&endpoints, "browser_limits", [a, b, c]));
    drop(chrome.fixtures);
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
