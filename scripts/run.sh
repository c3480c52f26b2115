#!/usr/bin/env bash
# Builds and runs the relay (extension relay on 127.0.0.1:18792 by default).
# Extra arguments go to `browser-relay serve`, e.g. `--port 0`.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
cargo build --release --locked -p browser-relay
echo "==> CDP endpoint for clients: $(./target/release/browser-relay cdp-url)"
exec ./target/release/browser-relay serve "$@"
