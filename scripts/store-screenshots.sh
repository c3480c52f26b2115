#!/usr/bin/env bash
# Makes the Chrome Web Store's pictures in extension/store/ from the real
# extension: two 1280x800 screenshots of a headed Chromium under Xvfb
# (scripts/screenshot-headed.sh store-tabs, store-options: the shared tabs
# in their group, and the options page listing them with their client),
# and the 128 px icon (the extension's own). Not a test; run it after a UI
# change and commit what it wrote. Needs Xvfb (apt-get install xvfb) and
# the built extension (scripts/build-extension.sh, run here).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build-extension.sh >/dev/null
./scripts/screenshot-headed.sh store-tabs
./scripts/screenshot-headed.sh store-options
cp extension/icons/icon128.png extension/store/icon-128.png
# What the store takes: PNG, exactly 1280x800 (and the icon 128x128).
python3 - extension/store/screenshot-1-shared-tabs.png extension/store/screenshot-2-options.png extension/store/icon-128.png <<'PY'
import os, struct, sys
for path in sys.argv[1:]:
    data = open(path, "rb").read(24)
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    want = (128, 128) if path.endswith("icon-128.png") else (1280, 800)
    assert (width, height) == want, f"{path} is {width}x{height}, not {want[0]}x{want[1]}"
    print(f"==> {path}: {width}x{height}, {os.path.getsize(path) // 1024} KB")
PY
