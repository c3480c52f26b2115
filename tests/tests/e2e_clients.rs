//! Real clients (Playwright, Puppeteer) through the relay to real Chromium,
//! with the simulated extension in between.

use e2e::RelayEnv;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn playwright_drives_the_attached_tab() {
    let env = RelayEnv::start().await.expect("environment");
    let out = env.run_node("playwright_basic.mjs").await.unwrap_or_else(|e| panic!("{e:#}"));
    assert!(out.contains("ok - "), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_playwright_clients_share_a_tab() {
    let env = RelayEnv::start().await.expect("environment");
    env.run_node("playwright_two_clients.mjs").await.unwrap_or_else(|e| panic!("{e:#}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn puppeteer_drives_the_attached_tab() {
    let env = RelayEnv::start().await.expect("environment");
    env.run_node("puppeteer_basic.mjs").await.unwrap_or_else(|e| panic!("{e:#}"));
}
