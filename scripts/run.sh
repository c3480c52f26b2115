#!/usr/bin/env bash
# Builds and runs Browser Relay: the extension relay on 127.0.0.1:18792, the control API for
# agents on 127.0.0.1:18791, and the isolated managed Chrome (skip it with NO_MANAGED=1).
# Extra arguments go to `browser-relay serve`, e.g. `--port 0`; the ports also follow
# BROWSER_RELAY_PORT and BROWSER_RELAY_CONTROL_PORT, as every browser-relay command does.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh --for run
# BROWSER_RELAY_BIN: a binary already built (the tests pass the one cargo
# built for them); otherwise the release build.
bin="${BROWSER_RELAY_BIN:-}"
if [ -z "$bin" ]; then
  cargo build --release --locked -p browser-relay
  bin=./target/release/browser-relay
fi
start=(--start managed)
if [ "${NO_MANAGED:-0}" = 1 ]; then start=(); fi
echo "==> CDP endpoint for clients: $("$bin" cdp-url)  (managed: \`browser-relay cdp-url --profile managed\`)"
echo "==> agents: \`browser-relay open URL\`, \`snapshot\`, \`click e1\`… (no flags needed), \`browser-relay mcp\` (MCP on stdio), or the control API on http://127.0.0.1:${BROWSER_RELAY_CONTROL_PORT:-18791}"
exec "$bin" serve "${start[@]}" "$@"
