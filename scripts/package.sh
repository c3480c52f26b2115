#!/usr/bin/env bash
# Builds the release archives into dist/:
#   browser-relay-<version>-linux-x86_64.tar.gz    (this machine's build)
#   browser-relay-<version>-linux-aarch64.tar.gz   (zig as cross linker)
#   browser-relay-<version>-macos-aarch64.tar.gz   (zig; frameworks from scripts/macos-stubs)
#   browser-relay-<version>-macos-x86_64.tar.gz
#   browser-relay-<version>-windows-x86_64.zip     (MinGW-w64)
# each with the binary, the built extension (extension/, to load unpacked)
# and INSTALL.txt for its system (macOS: and "Start Browser Relay.command",
# to double-click; scripts/archive.sh makes them, as for package-native.sh);
# the extension as a zip for the Chrome Web Store
# (browser-relay-extension-<version>-store.zip: the manifest without its
# development "key", which the store refuses); and SHA256SUMS.
# The binaries are built with the `dist` profile (Cargo.toml: release with
# fat LTO) and stripped of their debug info, which goes to
# browser-relay-<version>-<platform>-symbols.tar.gz (<exe>.debug, for
# symbolicating a crash report; the binary names it by a GNU debuglink).
# Beside them, install.sh and install.ps1 (the one-line installs, which
# take such a folder as their base URL), browser-relay.rb (a Homebrew formula) and browser-relay.json
# (a Scoop manifest), from the archives' SHA-256, with URLs under
# RELEASE_BASE_URL (default: the project's release page for the version).
# Idempotent; installs what it needs (scripts/setup.sh, cross-setup.sh).
# PACKAGE_TARGETS="linux-x86_64 windows-x86_64" builds only those.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
# shellcheck source=scripts/archive.sh
source scripts/archive.sh
./scripts/setup.sh
BROWSER_RELAY_EXTRA_TARGETS=aarch64-unknown-linux-gnu ./scripts/cross-setup.sh
# shellcheck source=scripts/cross-env.sh
source scripts/cross-env.sh

version=$(awk -F'"' '/^version = /{print $2; exit}' Cargo.toml)
read -r -a platforms <<<"${PACKAGE_TARGETS:-linux-x86_64 linux-aarch64 macos-aarch64 macos-x86_64 windows-x86_64}"
dist=dist
rm -rf "$dist"
mkdir -p "$dist"

step "building the extension"
./scripts/build-extension.sh
check_extension_built

command -v llvm-objcopy >/dev/null 2>&1 || apt_install llvm
sizes=()

triple() {
  case "$1" in
    linux-x86_64) echo x86_64-unknown-linux-gnu ;;
    linux-aarch64) echo aarch64-unknown-linux-gnu ;;
    macos-aarch64) echo aarch64-apple-darwin ;;
    macos-x86_64) echo x86_64-apple-darwin ;;
    windows-x86_64) echo x86_64-pc-windows-gnu ;;
    *) echo "unknown platform $1" >&2; exit 2 ;;
  esac
}

for platform in "${platforms[@]}"; do
  target=$(triple "$platform")
  step "building browser-relay for $platform ($target, the dist profile: release with whole-program optimisation)"
  case "$platform" in
    linux-x86_64 | windows-*) cargo build --profile dist --locked -p browser-relay --target "$target" --target-dir "$cross_target_dir" ;;
    *) cargo-zigbuild zigbuild --profile dist --locked -p browser-relay --target "$target" --target-dir "$cross_target_dir" ;;
  esac
  exe=browser-relay
  [[ "$platform" == windows-* ]] && exe=browser-relay.exe
  if [[ "$platform" == macos-aarch64 ]]; then
    # macOS kills an arm64 program without a code signature at its first
    # instruction; zig's linker signs ad hoc. Checked, as no Mac runs here.
    python3 - "$cross_target_dir/$target/dist/$exe" <<'PY'
import struct, sys
data = open(sys.argv[1], "rb").read()
magic, _, _, _, ncmds = struct.unpack_from("<IiiII", data)
assert magic == 0xFEEDFACF, f"{sys.argv[1]} is not a 64-bit Mach-O"
offset, commands = 32, []
for _ in range(ncmds):
    cmd, size = struct.unpack_from("<II", data, offset)
    commands.append(cmd)
    offset += size
LC_CODE_SIGNATURE = 0x1D
sys.exit(0 if LC_CODE_SIGNATURE in commands else f"{sys.argv[1]} has no code signature: macOS would kill it")
PY
  fi
  built="$dist/.built/$platform"
  rm -rf "$built"
  mkdir -p "$built"
  cp "$cross_target_dir/$target/dist/$exe" "$built/"
  unstripped=$(stat -c %s "$built/$exe")
  keep_debug_info_apart "$platform" "$built/$exe" "$built/symbols"
  archive=$(pack_archive "$platform" "$built/$exe" "$dist" "$version")
  pack_symbols "$dist" "$version" "$platform" "$built/symbols"
  sizes+=("$(awk -v p="$platform" -v built="$unstripped" -v stripped="$(stat -c %s "$built/$exe")" \
    -v name="$(basename "$archive")" -v packed="$(stat -c %s "$archive")" \
    'BEGIN { printf "%-16s %6.1f MB built, %6.1f MB stripped; %s %6.1f MB", p, built / 1e6, stripped / 1e6, name, packed / 1e6 }')")
  rm -rf "$built"
done
rmdir "$dist/.built"

# The one-line installers, for .../releases/latest/download/install.sh.
cp install.sh install.ps1 "$dist/"
step "browser-relay.rb (Homebrew) and browser-relay.json (Scoop)"
python3 scripts/release-manifests.py "$dist" "$version" \
  "${RELEASE_BASE_URL:-https://github.com/browser-relay/browser-relay/releases/download/v$version}"

step "the extension for the Chrome Web Store (no development key)"
store="$dist/browser-relay-extension-$version-store"
mkdir -p "$store"
for f in "${extension_files[@]}"; do
  [ "$f" = EXTENSION_ID ] || cp -R "extension/$f" "$store/"
done
python3 - "$store/manifest.json" <<'PY'
import json, sys
path = sys.argv[1]
manifest = json.load(open(path))
manifest.pop("key", None)
json.dump(manifest, open(path, "w"), indent=2)
PY
# The store wants manifest.json at the zip's root.
(cd "$store" && python3 -m zipfile -c "../$(basename "$store").zip" . >/dev/null)
rm -rf "$store"

step "SHA256SUMS"
(cd "$dist" && sha256sum -- *.tar.gz *.zip > SHA256SUMS)
ls -l "$dist"
printf '%s\n' "${sizes[@]}"

# The Chrome Web Store's listing beside the store zip (extension/store/:
# the listing's text, the permission justifications, the privacy policy,
# the 1280x800 screenshots and the 128 px icon, made by
# scripts/store-screenshots.sh), to fill in the store's forms from.
step "the Chrome Web Store listing (extension/store/)"
listing="$dist/browser-relay-extension-$version-store-listing"
cp -R extension/store "$listing"
ls -l "$listing"
