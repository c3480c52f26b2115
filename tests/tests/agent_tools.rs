//! Agent tools, unchanged, on both drivers: Playwright MCP, chrome-devtools-mcp
//! (over `--browserUrl` and `--wsEndpoint`) and browser-use, each run through
//! its own operations (navigate, snapshot, click, type, console, network,
//! screenshot, tabs, back) against the relay with the real extension and
//! the relay with the managed driver.
//!
//! They are not dependencies of the project, so these tests are ignored by
//! default: `scripts/verify-agent-tools.sh` installs the tools (pinned, in
//! `tests/agent-tools/`) and runs them.

use std::path::PathBuf;

use e2e::endpoints::{Endpoint, Managed, extension_endpoint};

fn agent_tools_dir() -> PathBuf {
    e2e::tests_dir().join("agent-tools")
}

async fn python_check(endpoint: &Endpoint) -> Result<String, String> {
    let venv_python = agent_tools_dir().join(".venv/bin/python");
    let mut command = tokio::process::Command::new(&venv_python);
    command.arg(agent_tools_dir().join("browser_use_check.py")).kill_on_drop(true);
    command.env("ANONYMIZED_TELEMETRY", "false").env("BROWSER_USE_CLOUD_SYNC", "false");
    for (key, value) in &endpoint.vars {
        command.env(key, value);
    }
    let output = tokio::time::timeout(std::time::Duration::from_secs(180), command.output())
        .await
        .map_err(|_| "browser-use ran for more than 3 minutes".to_string())?
        .map_err(|e| format!("{}: {e} (run scripts/verify-agent-tools.sh)", venv_python.display()))?;
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    if output.status.success() { Ok(text) } else { Err(text) }
}

/// Every tool on `endpoint`: the failures, with what each printed.
async fn every_tool(endpoint: &Endpoint) -> Vec<String> {
    let mut failures = Vec::new();
    let runs = [("playwright-mcp", "http"), ("chrome-devtools-mcp", "http"), ("chrome-devtools-mcp", "ws")];
    for (tool, connect) in runs {
        let extra = [("TOOL", tool.to_string()), ("CONNECT", connect.to_string())];
        match endpoint.run_node("agent_tools.mjs", &extra).await {
            Ok(out) => eprintln!("{tool} ({connect}) on {}:\n{out}", endpoint.kind),
            Err(why) => failures.push(format!("{tool} ({connect}) on {}: {why}", endpoint.kind)),
        }
    }
    match python_check(endpoint).await {
        Ok(out) => eprintln!("browser-use on {}:\n{out}", endpoint.kind),
        Err(why) => failures.push(format!("browser-use on {}: {why}", endpoint.kind)),
    }
    failures
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the agent tools: scripts/verify-agent-tools.sh"]
async fn agent_tools_work_on_the_extension_driver() {
    let (_env, endpoint) = extension_endpoint().await.expect("the relay with the real extension");
    let failures = every_tool(&endpoint).await;
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the agent tools: scripts/verify-agent-tools.sh"]
async fn agent_tools_work_on_the_managed_driver() {
    let managed = Managed::start().await.expect("the relay with the managed driver");
    let failures = every_tool(&managed.endpoint).await;
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
