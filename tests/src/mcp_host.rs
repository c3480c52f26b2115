//! A JSON-RPC peer on an MCP server's stdio, as an agent host (Claude
//! Desktop, an IDE) runs `browser-relay mcp`: one for every test and
//! benchmark that talks MCP. The relay's own tests include this file by
//! path (they cannot depend on this crate), so it uses only std,
//! serde_json and anyhow.

use std::io::{BufRead as _, Write as _};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use serde_json::{Value, json};

/// How long an answer may take: a first call launches a browser, under
/// Wine too.
const ANSWER_WITHIN: Duration = Duration::from_secs(60);

/// An MCP server on stdio, killed when dropped (if it has not ended).
#[derive(Debug)]
pub struct McpHost {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    next_id: u64,
    /// What no line the server writes may show (the relay's token, a
    /// farm's credentials): the model reads every line.
    secrets: Vec<String>,
    /// The server's log, shown when it stops answering.
    log: Option<PathBuf>,
}

/// What a tool call answered.
#[derive(Debug, Clone)]
pub struct ToolAnswer {
    pub is_error: bool,
    /// Its text content, joined by newlines.
    pub text: String,
    /// Its first image's data (base64), if any.
    pub image: Option<String>,
}

impl McpHost {
    /// Starts `command` with its stdin and stdout piped (its stderr goes
    /// where the command says).
    pub fn spawn(command: &mut Command) -> anyhow::Result<Self> {
        let mut child =
            command.stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().context("the MCP server starts")?;
        let stdin = child.stdin.take().context("stdin")?;
        let stdout = std::io::BufReader::new(child.stdout.take().context("stdout")?);
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(Self { child, stdin: Some(stdin), lines, next_id: 1, secrets: Vec::new(), log: None })
    }

    /// Fails every request whose answer (or any line before it) shows
    /// `secret`.
    #[must_use]
    pub fn never_showing(mut self, secret: impl Into<String>) -> Self {
        let secret = secret.into();
        assert!(!secret.is_empty(), "an empty secret would be in every line");
        self.secrets.push(secret);
        self
    }

    /// The log a failure shows when the server stops answering.
    #[must_use]
    pub fn with_log(mut self, log: impl Into<PathBuf>) -> Self {
        self.log = Some(log.into());
        self
    }

    /// The server's pid (its process group, when the command made one).
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// The MCP handshake, as a host opens it; the server's `initialize`
    /// result.
    pub fn initialize(&mut self, client: &str) -> anyhow::Result<Value> {
        let params = json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": client, "version": "1"}});
        let init = self.request("initialize", params)?;
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
        Ok(init)
    }

    /// Writes one message (a line).
    pub fn send(&mut self, message: &Value) -> anyhow::Result<()> {
        let stdin = self.stdin.as_mut().context("stdin is closed")?;
        writeln!(stdin, "{message}")?;
        stdin.flush()?;
        Ok(())
    }

    /// A request; its result (the answer with the same id). An error
    /// answer, no answer within a minute, or a secret on any line read on
    /// the way is an error.
    pub fn request(&mut self, method: &str, params: Value) -> anyhow::Result<Value> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        loop {
            let line = match self.lines.recv_timeout(ANSWER_WITHIN) {
                Ok(line) => line,
                Err(e) => {
                    let what = match e {
                        RecvTimeoutError::Timeout => format!("no answer to {method} within {ANSWER_WITHIN:?}"),
                        RecvTimeoutError::Disconnected => format!("the MCP server ended before answering {method}"),
                    };
                    let status = self.child.try_wait();
                    let log = self.log.as_ref().map(|log| std::fs::read_to_string(log).unwrap_or_default());
                    bail!("{what}; the server: {status:?}; its log:\n{}", log.as_deref().unwrap_or("(none kept)"));
                }
            };
            if let Some(secret) = self.secrets.iter().find(|secret| line.contains(secret.as_str())) {
                bail!("an MCP answer to {method} shows a secret ({secret}): {line}");
            }
            let message: Value = serde_json::from_str(&line).with_context(|| format!("not JSON: {line}"))?;
            if message["id"] == id {
                anyhow::ensure!(message.get("error").is_none(), "{method}: {message}");
                return Ok(message["result"].clone());
            }
        }
    }

    /// A tool call.
    pub fn call(&mut self, tool: &str, arguments: Value) -> anyhow::Result<ToolAnswer> {
        let result = self.request("tools/call", json!({"name": tool, "arguments": arguments}))?;
        let content = result["content"].as_array().cloned().unwrap_or_default();
        let text = content.iter().filter_map(|c| c["text"].as_str()).collect::<Vec<_>>().join("\n");
        let image = content.iter().find(|c| c["type"] == "image").and_then(|c| c["data"].as_str()).map(str::to_string);
        Ok(ToolAnswer { is_error: result["isError"] == true, text, image })
    }

    /// Closes stdin, as a host does when it is done; the exit status, once
    /// the server ended within `within`.
    pub fn close(&mut self, within: Duration) -> anyhow::Result<ExitStatus> {
        drop(self.stdin.take());
        self.wait(within)
    }

    /// The exit status, once the server ended within `within` (stdin left
    /// open: a host that ends it with a signal).
    pub fn wait(&mut self, within: Duration) -> anyhow::Result<ExitStatus> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait()? {
                return Ok(status);
            }
            anyhow::ensure!(Instant::now() < deadline, "the MCP server did not end within {within:?}");
            // std's Child has no wait with a deadline.
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for McpHost {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
