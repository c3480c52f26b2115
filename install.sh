#!/bin/sh
# Installs Browser Relay from a release, on Linux or macOS (x86_64, aarch64):
#
#   curl -fsSL https://github.com/browser-relay/browser-relay/releases/latest/download/install.sh | sh
#   sh install.sh [--prefix DIR] [--base-url URL] [--version V]
#
# It fetches SHA256SUMS from the release, picks this machine's archive
# from it (browser-relay-<version>-<os>-<arch>.tar.gz, as scripts/package.sh
# names them), fetches the archive and checks it against SHA256SUMS:
# on a mismatch it stops and installs nothing. Then it puts
#   browser-relay  in  DIR/bin                          (~/.local/bin)
#   extension/     in  DIR/share/browser-relay/extension (load it unpacked)
# each replaced by a rename, so a run that stops half-way leaves the old
# install as it was. DIR is ~/.local unless --prefix says.
#
#   --base-url URL  a folder holding SHA256SUMS and the archives (what
#                   package.sh writes in dist/); by default the project's
#                   releases page: .../releases/latest/download, or
#                   .../releases/download/v<V> with --version.
#   --version V     that version (from the base URL's SHA256SUMS); by
#                   default the newest the base URL lists for this machine.
#
# POSIX sh (dash, busybox, macOS's sh); curl or wget; sha256sum or
# shasum -a 256 (or openssl). SHA256SUMS comes from the same place as the
# archive: the check catches a damaged or altered archive, not a release
# page someone else controls.
set -eu

# The project's releases page. It names the project's GitHub repository
# until the project says otherwise: change it here and in install.ps1.
RELEASES="https://github.com/browser-relay/browser-relay/releases"

say() { printf '%s\n' "$*"; }
fail() {
  printf 'install.sh: %s\n' "$*" >&2
  exit 1
}

usage() {
  cat <<'EOF'
Usage: install.sh [--prefix DIR] [--base-url URL] [--version V]
Installs browser-relay in DIR/bin (DIR: ~/.local) and its Chrome extension
in DIR/share/browser-relay/extension, from a release checked against its
SHA256SUMS.
  --prefix DIR     where to install (default ~/.local)
  --base-url URL   a folder with SHA256SUMS and the archives
                   (default: the project's releases page)
  --version V      the version to install (default: the newest)
EOF
}

prefix="${HOME:?HOME is not set}/.local"
base_url=""
version=""
while [ "$#" -gt 0 ]; do
  case "$1" in
    --prefix) [ "$#" -ge 2 ] || fail "--prefix needs a folder"; prefix="$2"; shift 2 ;;
    --prefix=*) prefix="${1#*=}"; shift ;;
    --base-url) [ "$#" -ge 2 ] || fail "--base-url needs a URL"; base_url="$2"; shift 2 ;;
    --base-url=*) base_url="${1#*=}"; shift ;;
    --version) [ "$#" -ge 2 ] || fail "--version needs a version, e.g. 0.1.0"; version="$2"; shift 2 ;;
    --version=*) version="${1#*=}"; shift ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; fail "unknown argument: $1" ;;
  esac
done
[ -n "$prefix" ] || fail "--prefix is empty"
version="${version#v}"
case "$version" in
  *[!A-Za-z0-9.+-]*) fail "not a version: $version" ;;
esac

# ---- which archive -----------------------------------------------------------
case "$(uname -s)" in
  Linux) os=linux ;;
  Darwin) os=macos ;;
  MINGW* | MSYS* | CYGWIN* | Windows_NT)
    fail "on Windows, run install.ps1 in PowerShell instead" ;;
  *) fail "no release for $(uname -s): build from source (cargo install --path relay --locked)" ;;
esac
case "$(uname -m)" in
  x86_64 | amd64) arch=x86_64 ;;
  aarch64 | arm64) arch=aarch64 ;;
  *) fail "no release for $(uname -m) on $os: build from source (cargo install --path relay --locked)" ;;
esac
# A shell under Rosetta says x86_64 on an Apple silicon Mac: the native
# build is the one to take.
if [ "$os" = macos ] && [ "$arch" = x86_64 ] && [ "$(sysctl -n sysctl.proc_translated 2>/dev/null || true)" = 1 ]; then
  arch=aarch64
fi
platform="$os-$arch"

if [ -z "$base_url" ]; then
  if [ -n "$version" ]; then
    base_url="$RELEASES/download/v$version"
  else
    base_url="$RELEASES/latest/download"
  fi
fi
base_url="${base_url%/}"

# ---- tools -------------------------------------------------------------------
if command -v curl >/dev/null 2>&1; then
  fetch() { curl -fsSL --retry 2 -o "$2" "$1"; }
elif command -v wget >/dev/null 2>&1; then
  fetch() { wget -q -O "$2" "$1"; }
else
  fail "neither curl nor wget is installed"
fi
if command -v sha256sum >/dev/null 2>&1; then
  sha256() { sha256sum "$1" | awk '{print $1}'; }
elif command -v shasum >/dev/null 2>&1; then
  sha256() { shasum -a 256 "$1" | awk '{print $1}'; }
elif command -v openssl >/dev/null 2>&1; then
  sha256() { openssl dgst -sha256 "$1" | awk '{print $NF}'; }
else
  fail "no SHA-256 tool (sha256sum, shasum or openssl) is installed"
fi

work="$(mktemp -d 2>/dev/null || mktemp -d -t browser-relay-install)"
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

say "Fetching $base_url/SHA256SUMS"
fetch "$base_url/SHA256SUMS" "$work/SHA256SUMS" || fail "cannot fetch $base_url/SHA256SUMS"

# Lines of SHA256SUMS: "<hash>  <name>" (or "<hash> *<name>").
# This machine's archives, "<version> <hash> <name>", one a line.
awk -v suffix="-$platform.tar.gz" '
  NF == 2 {
    name = $2; sub(/^\*/, "", name)
    if (substr(name, 1, 14) != "browser-relay-") next
    if (length(name) <= 14 + length(suffix)) next
    if (substr(name, length(name) - length(suffix) + 1) != suffix) next
    v = substr(name, 15, length(name) - 14 - length(suffix))
    if (v !~ /^[0-9]/) next
    if ($1 !~ /^[0-9a-fA-F]+$/ || length($1) != 64) next
    print v, tolower($1), name
  }' "$work/SHA256SUMS" >"$work/candidates"

if [ -n "$version" ]; then
  chosen="$(awk -v v="$version" '$1 == v' "$work/candidates" | head -n 1)"
  [ -n "$chosen" ] || fail "$base_url/SHA256SUMS lists no browser-relay $version for $platform"
else
  # The newest: numeric on each dotted part (a pre-release's suffix sorts
  # by its number part only).
  chosen="$(sort -t . -k 1,1n -k 2,2n -k 3,3n "$work/candidates" | tail -n 1)"
  [ -n "$chosen" ] || fail "$base_url/SHA256SUMS lists no browser-relay for $platform"
fi
version="$(printf '%s\n' "$chosen" | awk '{print $1}')"
expected="$(printf '%s\n' "$chosen" | awk '{print $2}')"
archive="$(printf '%s\n' "$chosen" | awk '{print $3}')"

say "Fetching $base_url/$archive"
fetch "$base_url/$archive" "$work/$archive" || fail "cannot fetch $base_url/$archive"
actual="$(sha256 "$work/$archive" | tr 'A-F' 'a-f')"
if [ "$actual" != "$expected" ]; then
  fail "$archive does not match SHA256SUMS (expected $expected, got $actual): it was damaged or altered on the way; nothing was installed"
fi
say "Checked $archive against SHA256SUMS (sha256 $actual)"

mkdir "$work/unpacked"
tar -xzf "$work/$archive" -C "$work/unpacked" || fail "cannot unpack $archive; nothing was installed"
unpacked="$work/unpacked/browser-relay-$version-$platform"
[ -f "$unpacked/browser-relay" ] || fail "$archive holds no browser-relay-$version-$platform/browser-relay; nothing was installed"
[ -f "$unpacked/extension/manifest.json" ] || fail "$archive holds no extension/manifest.json; nothing was installed"

# ---- install: each piece copied beside its place, then renamed in --------------
bin_dir="$prefix/bin"
share_dir="$prefix/share/browser-relay"
mkdir -p "$bin_dir" "$share_dir" || fail "cannot create $bin_dir or $share_dir"
new_bin="$bin_dir/.browser-relay.new.$$"
new_ext="$share_dir/.extension.new.$$"
old_ext="$share_dir/.extension.old.$$"
trap 'rm -rf "$work" "$new_bin" "$new_ext" "$old_ext"' EXIT
cp "$unpacked/browser-relay" "$new_bin"
chmod 0755 "$new_bin"
cp -R "$unpacked/extension" "$new_ext"
# Both are ready: now the renames.
if [ -e "$share_dir/extension" ]; then
  mv "$share_dir/extension" "$old_ext"
fi
mv "$new_ext" "$share_dir/extension"
mv -f "$new_bin" "$bin_dir/browser-relay"
rm -rf "$old_ext"
if [ -f "$unpacked/INSTALL.txt" ]; then
  cp "$unpacked/INSTALL.txt" "$share_dir/INSTALL.txt"
fi

say ""
say "Installed browser-relay $version for $platform:"
say "  the program:   $bin_dir/browser-relay"
say "  the extension: $share_dir/extension"
say "    (in Chrome: chrome://extensions, switch on Developer mode, \"Load unpacked\", pick that folder;"
say "     after an update, click its reload button there)"
say "Next: browser-relay serve, then browser-relay pair and open the link it prints."
case ":${PATH:-}:" in
  *":$bin_dir:"*) ;;
  *)
    say ""
    say "$bin_dir is not on your PATH. Add it, e.g. in ~/.profile (or ~/.zshrc):"
    say "  export PATH=\"$bin_dir:\$PATH\""
    ;;
esac
