#!/usr/bin/env bash
# Builds and runs the relay (extension relay on 127.0.0.1:18792, control API for agents on
# 127.0.0.1:18791 by default).
# Extra arguments go to `browser-relay serve`, e.g. `--port 0`.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
cargo build --release --locked -p browser-relay
# The main job includes the isolated managed Chrome (skip with NO_MANAGED=1).
if [ "${NO_MANAGED:-0}" != 1 ]; then
  ./target/release/browser-relay start --profile managed
fi
echo "==> CDP endpoint for clients: $(./target/release/browser-relay cdp-url)"
echo "==> control API: http://127.0.0.1:18791 (header: Authorization: Bearer \$(browser-relay token)); POST /start {\"profile\":\"managed\"} launches the isolated Chrome"
exec ./target/release/browser-relay serve "$@"
