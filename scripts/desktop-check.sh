#!/usr/bin/env bash
# What CI checks on each desktop system (.github/workflows/ci.yml; Git Bash
# on Windows) with the built binary, the way a person uses it, and what
# runs here on Linux too:
#  1. discovery on the real disk: `browser-relay profiles` names the browser
#     the managed profile would launch (the runner's Chrome, where its
#     installer put it; Debian's Chromium here);
#  2. the managed driver against that real browser: serve, start over the
#     pipe, open a page, snapshot, click a ref, screenshot, stop, and no
#     process of the browser left running;
#  3. file privacy as the system enforces it: the state folder and its
#     token readable by this user alone (Unix modes; on Windows the access
#     list read back with icacls).
#   scripts/desktop-check.sh [BINARY]       default target/debug/browser-relay
set -euo pipefail
cd "$(dirname "$0")/.."
exe="${1:-target/debug/browser-relay}"
[ -f "$exe" ] || [ ! -f "$exe.exe" ] || exe="$exe.exe"
[ -f "$exe" ] || { echo "desktop-check: $exe is not built (cargo build -p browser-relay)" >&2; exit 1; }
exe="$(cd "$(dirname "$exe")" && pwd)/$(basename "$exe")"
step() { printf '==> %s\n' "$*"; }
fail() { echo "desktop-check: $*" >&2; exit 1; }
windows=""
case "$(uname -s)" in MINGW* | MSYS* | CYGWIN*) windows=1 ;; esac
python=$(command -v python3 || command -v python)

work=$(mktemp -d)
home="$work/state"
# A free port for each of serve's doors and the page server.
free_port() { "$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
port=$(free_port) control=$(free_port) pages=$(free_port)
# A Windows program is given Windows paths (Git Bash's are its own).
native() { if [ -n "$windows" ]; then cygpath -w "$1"; else echo "$1"; fi; }
BROWSER_RELAY_HOME=$(native "$home")
export BROWSER_RELAY_HOME BROWSER_RELAY_PORT="$port" BROWSER_RELAY_CONTROL_PORT="$control"
started=()
stop_all() {
  for pid in "${started[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap stop_all EXIT

step "1. discovery: browser-relay profiles"
profiles=$("$exe" profiles)
echo "$profiles"
browser=$(grep -E '^managed' <<<"$profiles" | awk -F'\t' '{print $4}')
[[ "$browser" == "browser: "* ]] || fail "the managed profile found no browser: $browser"
browser=${browser#browser: }

step "2. the managed driver with $browser"
"$python" -m http.server "$pages" --bind 127.0.0.1 --directory tests/fixtures >"$work/pages.log" 2>&1 &
started+=("$!")
"$exe" serve >"$work/serve.log" 2>&1 &
started+=("$!")
for try in $(seq 100); do
  "$exe" status --profile managed >/dev/null 2>&1 && break
  [ "$try" -lt 100 ] || { cat "$work/serve.log" >&2; fail "serve did not answer within 20 s"; }
  sleep 0.2
done
# Headless where there is no display (Linux); a window on Windows and macOS.
"$exe" start --profile managed
status=$("$exe" status --profile managed)
echo "$status"
pid=$(sed -n 's/.*running (pid \([0-9]*\)).*/\1/p' <<<"$status" | head -n 1)
[ -n "$pid" ] || fail "no pid in: $status"
"$exe" open --profile managed "http://127.0.0.1:$pages/index.html"
snapshot=$("$exe" snapshot --profile managed)
echo "$snapshot"
grep -q 'Fixture Index' <<<"$snapshot" || fail "the snapshot does not show the page"
ref=$(grep -E 'link "form"' <<<"$snapshot" | sed -n 's/.*\[ref=\(e[0-9]*\)\].*/\1/p' | head -n 1)
[ -n "$ref" ] || fail "no ref for the link 'form' in the snapshot"
"$exe" click --profile managed "$ref"
for try in $(seq 50); do
  tabs=$("$exe" tabs --profile managed)
  grep -q 'form.html' <<<"$tabs" && break
  [ "$try" -lt 50 ] || fail "the click did not follow the link: $tabs"
  sleep 0.2
done
shot=$("$exe" screenshot --profile managed | tail -n 1)
shot=${shot##* }
[ -z "$windows" ] || shot=$(cygpath -u "$shot")
[ -f "$shot" ] || fail "screenshot printed no file: $shot"
"$python" -c 'import sys; d = open(sys.argv[1], "rb").read(); sys.exit(0 if d[:8] == b"\x89PNG\r\n\x1a\n" and len(d) > 1000 else "not a PNG")' "$(native "$shot")"
echo "screenshot: $shot"
# Nothing of the browser left after stop: its pid, and any process whose
# command line names this state folder (the profile's --user-data-dir).
runs() {
  if [ -n "$windows" ]; then
    tasklist //FI "PID eq $pid" //NH | grep -q " $pid " && return 0
    powershell -NoProfile -Command "Get-CimInstance Win32_Process | Where-Object { \$_.CommandLine -like '*$(basename "$work")*state*' -and \$_.Name -notlike 'browser-relay*' } | Select-Object -First 1 | ForEach-Object { \$_.ProcessId }" | grep -q '[0-9]'
  else
    kill -0 "$pid" 2>/dev/null && return 0
    pgrep -f -- "--user-data-dir=$home" >/dev/null
  fi
}
runs || fail "the check for the browser's processes does not see it running: it is blind"
"$exe" stop --profile managed
for try in $(seq 50); do
  runs || break
  [ "$try" -lt 50 ] || fail "processes of the managed browser are still running after stop"
  sleep 0.2
done
echo "stopped: nothing of the browser runs"

step "3. file privacy: the state folder is this user's alone"
if [ -n "$windows" ]; then
  for path in "$home" "$home/token"; do
    acl=$(icacls "$(cygpath -w "$path")")
    echo "$acl"
    # The folder's access list is protected (nothing inherited from the
    # user's profile folder); the token inherits the folder's one entry.
    # Only this user (SYSTEM and Administrators would be allowed too, as
    # state-dir's private.rs allows them: they can take any file anyway).
    if [ "$path" = "$home" ] && grep -q '(I)' <<<"$acl"; then fail "$path inherits entries: $acl"; fi
    others=$(grep -vE "$USERNAME|NT AUTHORITY\\\\SYSTEM|BUILTIN\\\\Administrators|Successfully processed|^\s*$" <<<"$acl" || true)
    [ -z "$others" ] || fail "$path is open to others: $others"
  done
else
  mode() { stat -c %a "$1" 2>/dev/null || stat -f %Lp "$1"; }
  [ "$(mode "$home")" = 700 ] || fail "$home has mode $(mode "$home"), not 700"
  [ "$(mode "$home/token")" = 600 ] || fail "$home/token has mode $(mode "$home/token"), not 600"
  echo "$home: $(mode "$home"), token: $(mode "$home/token")"
fi
step "desktop checks passed"
