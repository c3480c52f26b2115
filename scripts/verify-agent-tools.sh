#!/usr/bin/env bash
# Verifies the agent tools users point at Browser Relay, unchanged, on both
# drivers: Playwright MCP (--cdp-endpoint), chrome-devtools-mcp (--browserUrl
# and --wsEndpoint) and browser-use (cdp_url). They are not dependencies of
# the project, so CI does not install them; this script does (pinned, in
# tests/agent-tools/), then runs tests/tests/agent_tools.rs. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh

step() { printf '==> %s\n' "$*"; }
SUDO=""
if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null; then SUDO=sudo; fi

tools=tests/agent-tools
if [ ! -f $tools/node_modules/.package-lock.json ] || [ $tools/package-lock.json -nt $tools/node_modules/.package-lock.json ]; then
  step "npm ci in $tools (@playwright/mcp, chrome-devtools-mcp)"
  (cd $tools && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 PUPPETEER_SKIP_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error)
fi
if [ ! -x $tools/.venv/bin/python ]; then
  if ! python3 -m venv --help >/dev/null 2>&1 || ! python3 -c 'import ensurepip' 2>/dev/null; then
    step "installing python3-venv (apt)"
    $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-venv >/dev/null
  fi
  step "python venv in $tools/.venv"
  python3 -m venv $tools/.venv
fi
if ! $tools/.venv/bin/pip freeze 2>/dev/null | grep -qxF -f <(grep -v '^#' $tools/requirements.txt); then
  step "pip install -r $tools/requirements.txt (browser-use)"
  $tools/.venv/bin/pip install -q -r $tools/requirements.txt
fi

step "build the extension"
./scripts/build-extension.sh
step "the agent tools against the extension driver and the managed driver"
cargo test -p e2e --test agent_tools --locked -- --ignored --nocapture --test-threads 1
