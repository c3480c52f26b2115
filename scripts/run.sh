#!/usr/bin/env bash
# Builds and runs Browser Relay: the extension relay on 127.0.0.1:18792, the control API for
# agents on 127.0.0.1:18791, and the isolated managed Chrome (skip it with NO_MANAGED=1).
# Extra arguments go to `browser-relay serve`, e.g. `--port 0`.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
cargo build --release --locked -p browser-relay
start=(--start managed)
if [ "${NO_MANAGED:-0}" = 1 ]; then start=(); fi
echo "==> CDP endpoint for clients: $(./target/release/browser-relay cdp-url)  (managed: \`browser-relay cdp-url --profile managed\`)"
echo "==> agents: \`browser-relay mcp\` (MCP on stdio), \`browser-relay tabs|open|snapshot|…\`, or the control API on http://127.0.0.1:18791"
exec ./target/release/browser-relay serve "${start[@]}" "$@"
