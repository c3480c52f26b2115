#!/usr/bin/env bash
# Makes the README's pictures of the tab groups: the real extension in a
# headed Chromium under Xvfb (apt-get install xvfb), set up by an ignored
# test, whose screen this copies once the tabs are in place. Not a test; run
# it after a UI change.
#   scripts/screenshot-headed.sh            docs/tab-group.png: the "Browser
#                                           Relay" group, two tabs shared, a third not
#   scripts/screenshot-headed.sh grants     docs/grants.png: two grants' groups,
#                                           each in its window, beside the person's
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-tab-group}" in
  tab-group) test_file=e2e_extension test_name=screenshot_of_the_tab_group screen=1024x480 keep=200 out=docs/tab-group.png ;;
  grants) test_file=e2e_grants test_name=screenshot_of_two_grants screen=1560x480 keep=200 out=docs/grants.png ;;
  *) echo "usage: $0 [tab-group|grants]" >&2; exit 2 ;;
esac
command -v Xvfb >/dev/null || { echo "needs Xvfb: apt-get install xvfb" >&2; exit 1; }
fbdir=$(mktemp -d /tmp/browser-relay-xvfb.XXXXXX)
display=":$((100 + RANDOM % 400))"
# -fbdir: Xvfb keeps its screen in a file (XWD), so no capture tool is needed.
Xvfb "$display" -screen 0 "${screen}x24" -fbdir "$fbdir" -nolisten tcp &
xvfb=$!
trap 'kill "$xvfb" 2>/dev/null || true; wait "$xvfb" 2>/dev/null || true; rm -rf "$fbdir"' EXIT
sleep 1
DISPLAY="$display" BROWSER_RELAY_TEST_HEADED=1 XVFB_FRAME="$fbdir/Xvfb_screen0" SCREENSHOT_XWD="$fbdir/shot.xwd" \
  cargo test -q -p e2e --test "$test_file" "$test_name" -- --ignored --exact
# XWD (32 bits per pixel, as Xvfb writes it at depth 24) to PNG, top part only.
python3 - "$fbdir/shot.xwd" "$out" "$keep" <<'PY'
import struct, sys, zlib
data = open(sys.argv[1], "rb").read()
fields = struct.unpack(">25I", data[:100])
header, width, height, byte_order, bpp, stride, ncolors = (fields[0], fields[4], fields[5], fields[7],
                                                           fields[11], fields[12], fields[19])
assert bpp == 32, f"expected 32 bits per pixel, got {bpp}"
pixels = data[header + 12 * ncolors:]
keep = min(height, int(sys.argv[3]))  # the tab strip, the toolbar and the top of the page
rows = []
for y in range(keep):
    line = pixels[y * stride:y * stride + width * 4]
    rgb = bytearray()
    for x in range(width):
        b0, b1, b2, b3 = line[4 * x:4 * x + 4]
        rgb += bytes((b2, b1, b0)) if byte_order == 0 else bytes((b1, b2, b3))
    rows.append(b"\0" + bytes(rgb))
def chunk(kind, body):
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, keep, 8, 2, 0, 0, 0))
png += chunk(b"IDAT", zlib.compress(b"".join(rows), 9)) + chunk(b"IEND", b"")
open(sys.argv[2], "wb").write(png)
print(f"==> {sys.argv[2]}: {width}x{keep}")
PY
