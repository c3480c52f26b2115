#!/usr/bin/env bash
# Installs what building and testing for Windows and macOS from Linux
# needs: the Rust targets, Debian's MinGW-w64 linker and Wine, zig (PyPI's
# ziglang) with cargo-zigbuild for macOS, and the Wine stand-in DLL
# (scripts/wine/bcryptprimitives.c). Idempotent: each step checks first.
# scripts/test.sh and scripts/package.sh call it.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

targets=(x86_64-pc-windows-gnu aarch64-apple-darwin x86_64-apple-darwin ${BROWSER_RELAY_EXTRA_TARGETS:-})
missing=()
for target in "${targets[@]}"; do
  rustup target list --installed | grep -qx "$target" || missing+=("$target")
done
if [ "${#missing[@]}" -gt 0 ]; then
  step "adding Rust targets: ${missing[*]}"
  rustup target add "${missing[@]}"
fi

if ! command -v x86_64-w64-mingw32-gcc >/dev/null 2>&1; then
  step "installing the MinGW-w64 linker for Windows (apt)"
  apt_install gcc-mingw-w64-x86-64
fi
if ! command -v wine >/dev/null 2>&1; then
  step "installing Wine, to run the Windows tests (apt)"
  apt_install wine64
fi

# zig links and compiles C for macOS (and Linux aarch64) without Apple's SDK.
if ! command -v cargo-zigbuild >/dev/null 2>&1 || ! python3 -m ziglang version >/dev/null 2>&1; then
  step "installing zig and cargo-zigbuild (pip)"
  python3 -m pip install --quiet --disable-pip-version-check ziglang cargo-zigbuild
  hash -r
fi

cache="${BROWSER_RELAY_CACHE:-$HOME/.cache/browser-relay}"
shim="$cache/wine-shim/bcryptprimitives.dll"
source_file=scripts/wine/bcryptprimitives.c
if [ ! -f "$shim" ] || [ "$source_file" -nt "$shim" ]; then
  step "building Wine's stand-in bcryptprimitives.dll (MinGW)"
  mkdir -p "$(dirname "$shim")"
  x86_64-w64-mingw32-gcc -O2 -shared -o "$shim" "$source_file" -ladvapi32
fi
