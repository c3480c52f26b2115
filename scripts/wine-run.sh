#!/usr/bin/env bash
# Runs a Windows binary under Wine: Cargo's runner for
# x86_64-pc-windows-gnu (scripts/cross-env.sh sets it), and how the
# end-to-end test starts browser-relay.exe.
#   scripts/wine-run.sh path/to/program.exe [args...]
# Wine 8 lacks ProcessPrng, which Rust's standard library needs: the
# stand-in DLL scripts/cross-setup.sh builds goes beside the program, and
# its folder on the Windows PATH for the programs that one starts.
# Wine's own prefix is the project's (BROWSER_RELAY_WINEPREFIX, default
# ~/.cache/browser-relay/wine), never the user's ~/.wine.
set -euo pipefail
exe="$1"
shift
shim="${BROWSER_RELAY_CACHE:-$HOME/.cache/browser-relay}/wine-shim/bcryptprimitives.dll"
if [ ! -f "$shim" ]; then
  echo "wine-run: $shim is missing; run scripts/cross-setup.sh first" >&2
  exit 2
fi
dir="$(dirname "$exe")"
cmp -s "$shim" "$dir/bcryptprimitives.dll" || cp "$shim" "$dir/bcryptprimitives.dll"
export WINEPREFIX="${BROWSER_RELAY_WINEPREFIX:-${BROWSER_RELAY_CACHE:-$HOME/.cache/browser-relay}/wine}"
export WINEDEBUG="${WINEDEBUG:--all}"
shim_dir="$(cd "$(dirname "$shim")" && pwd)"
export WINEPATH="Z:${shim_dir//\//\\}${WINEPATH:+;$WINEPATH}"
export WINEDLLOVERRIDES="bcryptprimitives=n,b;mscoree,mshtml=;${WINEDLLOVERRIDES:-}"
mkdir -p "$WINEPREFIX"
# Wine keeps its server's socket and lock under TMPDIR, and leaves them. One
# folder beside the prefix for every run: runs under different TMPDIRs (the
# tests have one of their own) share one wineserver for the prefix and leave
# nothing in theirs. Windows programs take their temporary folder from the
# prefix, not from TMPDIR.
export TMPDIR="$WINEPREFIX-tmp"
mkdir -p "$TMPDIR"
# The Rust test harness and our binary talk on stdout/stderr; Wine's
# console is not needed.
exec wine "$exe" "$@"
