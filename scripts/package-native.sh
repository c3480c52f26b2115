#!/usr/bin/env bash
# Builds the release archive of THIS system into dist/, on its own OS, with
# its own toolchain (on a Mac: linked against the real macOS SDK, not the
# link stubs scripts/package.sh uses from Linux): the release workflow
# (.github/workflows/release.yml) runs it on Windows and both Macs.
#   scripts/package-native.sh PLATFORM     macos-aarch64, macos-x86_64 or windows-x86_64
# The archive has the name and the contents scripts/package.sh gives it:
# browser-relay-<version>-<platform>.tar.gz (.zip on Windows) with the
# binary, the built extension/, INSTALL.txt (and on macOS "Start Browser
# Relay.command"). Keep the two in step: a change to what package.sh puts
# in an archive is a change here too.
# BROWSER_RELAY_SIGN_HOOK, when set, is a command run on the binary before
# it is archived (the release workflow signs there, when it has a
# certificate).
set -euo pipefail
cd "$(dirname "$0")/.."
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
extension_files=(manifest.json background.js options.html options.js icons pkg EXTENSION_ID)
for f in "${extension_files[@]}"; do
  [ -e "extension/$f" ] || { echo "extension/$f is missing" >&2; exit 1; }
done

step "building browser-relay for $platform ($target, release, on this system)"
cargo build --release --locked -p browser-relay --target "$target"
binary="${CARGO_TARGET_DIR:-target}/$target/release/$exe"
if [ -n "${BROWSER_RELAY_SIGN_HOOK:-}" ]; then
  step "signing: $BROWSER_RELAY_SIGN_HOOK $binary"
  $BROWSER_RELAY_SIGN_HOOK "$binary"
fi

name="browser-relay-$version-$platform"
stage="$dist/$name"
rm -rf "$stage"
mkdir -p "$stage/extension"
cp "$binary" "$stage/"
for f in "${extension_files[@]}"; do cp -R "extension/$f" "$stage/extension/"; done
os=${platform%%-*}
sed -e "s/@VERSION@/$version/g" -e "s/@PLATFORM@/$platform/g" "scripts/install/INSTALL-$os.txt" > "$stage/INSTALL.txt"
if [[ "$os" == macos ]]; then
  cp -p "scripts/install/Start Browser Relay.command" "$stage/"
fi
if [[ "$platform" == windows-* ]]; then
  sed -i 's/$/\r/' "$stage/INSTALL.txt"
  # Windows runners have `python`, not always `python3`.
  python=$(command -v python3 || command -v python)
  (cd "$dist" && "$python" -m zipfile -c "$name.zip" "$name" >/dev/null)
  step "$dist/$name.zip"
else
  tar -C "$dist" -czf "$dist/$name.tar.gz" "$name"
  step "$dist/$name.tar.gz"
fi
rm -rf "$stage"
