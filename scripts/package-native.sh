#!/usr/bin/env bash
# Builds the release archive of THIS system into dist/, on its own OS, with
# its own toolchain (on a Mac: linked against the real macOS SDK, not the
# link stubs scripts/package.sh uses from Linux): the release workflow
# (.github/workflows/release.yml) runs it on Windows and both Macs.
#   scripts/package-native.sh PLATFORM     macos-aarch64, macos-x86_64 or windows-x86_64
# The archive and its symbols archive have the names and the contents
# scripts/package.sh gives them (both use scripts/archive.sh):
# browser-relay-<version>-<platform>.tar.gz (.zip on Windows) and
# browser-relay-<version>-<platform>-symbols.tar.gz (.zip; on Windows the
# PDB, on a Mac the dSYM).
# BROWSER_RELAY_SIGN_HOOK, when set, is a command run on the binary before
# it is archived (the release workflow signs there, when it has a
# certificate).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/archive.sh
source scripts/archive.sh
platform="${1:?usage: $0 macos-aarch64|macos-x86_64|windows-x86_64}"
case "$platform" in
  macos-aarch64) target=aarch64-apple-darwin exe=browser-relay ;;
  macos-x86_64) target=x86_64-apple-darwin exe=browser-relay ;;
  windows-x86_64) target=x86_64-pc-windows-msvc exe=browser-relay.exe ;;
  linux-x86_64) target=x86_64-unknown-linux-gnu exe=browser-relay ;;
  *) echo "package-native.sh: unknown platform $platform" >&2; exit 2 ;;
esac
step() { printf '==> %s\n' "$*"; }
version=$(awk -F'"' '/^version = /{print $2; exit}' Cargo.toml)
dist=dist
mkdir -p "$dist"

step "building the extension"
./scripts/build-extension.sh
check_extension_built

step "building browser-relay for $platform ($target, the dist profile, on this system)"
cargo build --profile dist --locked -p browser-relay --target "$target"
binary="${CARGO_TARGET_DIR:-target}/$target/dist/$exe"
symbols="$dist/.symbols-$platform"
rm -rf "$symbols"
keep_debug_info_apart "$platform" "$binary" "$symbols"
if [ -n "${BROWSER_RELAY_SIGN_HOOK:-}" ]; then
  step "signing: $BROWSER_RELAY_SIGN_HOOK $binary"
  $BROWSER_RELAY_SIGN_HOOK "$binary"
fi
step "$(pack_archive "$platform" "$binary" "$dist" "$version")"
pack_symbols "$dist" "$version" "$platform" "$symbols"
ls -l "$dist"
