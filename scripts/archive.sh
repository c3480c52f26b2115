# shellcheck shell=bash
# Sourced by scripts/package.sh (every platform, built from Linux) and
# scripts/package-native.sh (one platform, built on its own system): what a
# release archive holds and how its debug info is kept apart, in one place,
# so the two kinds of build give the same archives.

# What Chrome loads: everything of extension/ but its build notes.
extension_files=(manifest.json background.js options.html options.js icons pkg EXTENSION_ID)

check_extension_built() {
  local f
  for f in "${extension_files[@]}"; do
    [ -e "extension/$f" ] || { echo "extension/$f is missing (scripts/build-extension.sh builds it)" >&2; exit 1; }
  done
}

# keep_debug_info_apart PLATFORM BINARY SYMBOLS_DIR: moves the binary's
# debug info to SYMBOLS_DIR, for symbolicating a crash report, to make the
# download smaller (issue 45).
#  - ELF (Linux) and MinGW's PE (Windows, built from Linux): the DWARF
#    sections go to SYMBOLS_DIR/<exe>.debug; the binary keeps its symbol
#    table (a panic's backtrace still names functions) and a GNU debuglink
#    to the file, which gdb, lldb and addr2line follow.
#  - MSVC's PE (Windows, built on Windows): the exe has no DWARF; its
#    browser_relay.pdb, beside it, is copied.
#  - macOS: the binary has no DWARF (rustc leaves it in the object files,
#    split-debuginfo's default on Apple targets); dsymutil, where there is
#    one (a Mac), gathers it into browser-relay.dSYM. Nothing touches the
#    binary, whose signature any change would void.
keep_debug_info_apart() {
  local platform=$1 binary=$2 symbols=$3 objcopy debug
  mkdir -p "$symbols"
  case "$platform" in
    linux-*) objcopy=llvm-objcopy ;;
    windows-*) objcopy=x86_64-w64-mingw32-objcopy ;;
  esac
  if [[ "$platform" == windows-* ]] && [ -e "$(dirname "$binary")/browser_relay.pdb" ]; then
    cp "$(dirname "$binary")/browser_relay.pdb" "$symbols/"
  elif [[ "$platform" == macos-* ]]; then
    if command -v dsymutil >/dev/null 2>&1 && [ "$(uname -s)" = Darwin ]; then
      dsymutil "$binary" -o "$symbols/browser-relay.dSYM"
    fi
  else
    debug="$symbols/$(basename "$binary").debug"
    "$objcopy" --only-keep-debug "$binary" "$debug"
    "$objcopy" --strip-debug --add-gnu-debuglink="$debug" "$binary"
  fi
}

# pack_archive PLATFORM BINARY DIST VERSION: DIST/browser-relay-<version>-<platform>.tar.gz
# (.zip on Windows) with the binary, the built extension/ (to load
# unpacked), INSTALL.txt for its system and, on macOS, "Start Browser
# Relay.command" (what a Mac user double-clicks: the binary alone would
# only print its help in Terminal). Prints the archive's path.
pack_archive() {
  local platform=$1 binary=$2 dist=$3 version=$4 name stage os python f
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
  if [[ "$os" == windows ]]; then
    # Windows users expect CRLF in a text file they open in Notepad.
    sed -i 's/$/\r/' "$stage/INSTALL.txt"
    # Windows runners have `python`, not always `python3`.
    python=$(command -v python3 || command -v python)
    (cd "$dist" && "$python" -m zipfile -c "$name.zip" "$name" >/dev/null)
    echo "$dist/$name.zip"
  else
    tar -C "$dist" -czf "$dist/$name.tar.gz" "$name"
    echo "$dist/$name.tar.gz"
  fi
  rm -rf "$stage"
}

# pack_symbols DIST VERSION PLATFORM SYMBOLS_DIR: DIST/browser-relay-<version>-<platform>-symbols.tar.gz
# (.zip on Windows, which has no tar everywhere) from SYMBOLS_DIR, if it
# holds anything. Its name does not end in -<platform>.tar.gz, so
# install.sh never takes it for the binary's archive.
pack_symbols() {
  local dist=$1 version=$2 platform=$3 symbols=$4 name python
  # Nothing to keep (a Mac build without dsymutil): no archive, no empty folder left in DIST.
  if [ -z "$(ls -A "$symbols" 2>/dev/null)" ]; then
    rm -rf "$symbols"
    return 0
  fi
  name="browser-relay-$version-$platform-symbols"
  rm -rf "${dist:?}/$name"
  mv "$symbols" "$dist/$name"
  if [[ "$platform" == windows-* ]]; then
    python=$(command -v python3 || command -v python)
    (cd "$dist" && "$python" -m zipfile -c "$name.zip" "$name" >/dev/null)
  else
    tar -C "$dist" -czf "$dist/$name.tar.gz" "$name"
  fi
  rm -rf "${dist:?}/$name"
}
