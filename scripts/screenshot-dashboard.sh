#!/usr/bin/env bash
# Makes docs/dashboard.png, the README's picture of the dashboard: the
# dashboard end-to-end test (real extension, managed profile, a Playwright
# script on a shared tab) saves the page as it shows them. Not a test; run
# it after a dashboard change.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build-extension.sh >/dev/null
DASHBOARD_SCREENSHOT="$PWD/docs/dashboard.png" \
  cargo test -q -p e2e --test e2e_dashboard the_dashboard_shows_both_drivers_watches_a_tab_and_disconnects_a_client -- --exact
echo "==> docs/dashboard.png"
