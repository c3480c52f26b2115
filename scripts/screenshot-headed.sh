#!/usr/bin/env bash
# Makes the README's pictures of the tab groups and of a grant's question:
# the real extension in a headed Chromium under Xvfb (apt-get install xvfb),
# set up by an ignored test, whose screen this copies once the tabs are in
# place. Not a test; run it after a UI change.
#   scripts/screenshot-headed.sh            docs/tab-group.png: the "Browser
#                                           Relay" group, two tabs shared, a third not
#   scripts/screenshot-headed.sh grants     docs/grants.png: two grants' groups,
#                                           each in its window, beside the person's
#   scripts/screenshot-headed.sh asking     docs/ask-dashboard.png: the dashboard's
#                                           question beside the grant's waiting form
#   scripts/screenshot-headed.sh notification
#                                           docs/ask-notification.png: the same
#                                           question as the extension's notification
#   scripts/screenshot-headed.sh store-tabs, store-options
#                                           extension/store/screenshot-*.png, the
#                                           Chrome Web Store's (scripts/store-screenshots.sh)
# On Linux, Chromium hands its notifications over D-Bus to the desktop's
# notification daemon (org.freedesktop.Notifications), which draws them. This mode starts a session bus of its own and GNOME's
# notification-daemon on the Xvfb screen (apt-get install dbus
# notification-daemon); Chromium, started by the test, inherits the bus's
# address. No Chromium flag is needed (its system notifications are on by
# default on Linux).
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-tab-group}" in
  tab-group) test_file=e2e_extension test_name=screenshot_of_the_tab_group screen=1024x480 keep=200 out=docs/tab-group.png ;;
  grants) test_file=e2e_grants test_name=screenshot_of_two_grants screen=1560x480 keep=200 out=docs/grants.png ;;
  asking) test_file=e2e_asking test_name=screenshot_of_a_question_on_the_dashboard screen=1440x420 keep=420 out=docs/ask-dashboard.png ;;
  notification) test_file=e2e_asking test_name=screenshot_of_a_question_notification screen=1180x300 keep=300 out=docs/ask-notification.png notify=1 ;;
  # The Chrome Web Store's pictures: 1280x800, the window the whole screen
  # (scripts/store-screenshots.sh makes both).
  store-tabs) test_file=e2e_extension test_name=screenshot_of_the_tab_group screen=1280x800 keep=800 window=1280,800 out=extension/store/screenshot-1-shared-tabs.png ;;
  store-options) test_file=e2e_extension test_name=screenshot_of_the_options_page screen=1280x800 keep=800 window=1280,800 out=extension/store/screenshot-2-options.png ;;
  *) echo "usage: $0 [tab-group|grants|asking|notification|store-tabs|store-options]" >&2; exit 2 ;;
esac
command -v Xvfb >/dev/null || { echo "needs Xvfb: apt-get install xvfb" >&2; exit 1; }
fbdir=$(mktemp -d /tmp/browser-relay-xvfb.XXXXXX)
display=":$((100 + RANDOM % 400))"
# -fbdir: Xvfb keeps its screen in a file (XWD), so no capture tool is needed;
# -nocursor: no mouse pointer in the middle of the picture.
Xvfb "$display" -screen 0 "${screen}x24" -fbdir "$fbdir" -nolisten tcp -nocursor &
xvfb=$!
started=("$xvfb")
# Everything this script started goes, newest first, also when it fails.
stop() {
  for ((i = ${#started[@]} - 1; i >= 0; i--)); do
    kill "${started[i]}" 2>/dev/null || true
    wait "${started[i]}" 2>/dev/null || true
  done
  rm -rf "$fbdir"
}
trap stop EXIT
trap 'exit 1' INT TERM HUP
sleep 1
if [[ -n "${notify:-}" ]]; then
  notifier=/usr/lib/notification-daemon/notification-daemon
  [[ -x "$notifier" ]] && command -v dbus-daemon >/dev/null ||
    { echo "needs a session bus and a notification daemon: apt-get install dbus notification-daemon" >&2; exit 1; }
  # A session bus of its own (not the desktop's, if there is one), which
  # starts no service on demand: the daemon is the only one on it.
  cat >"$fbdir/bus.conf" <<CONF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path=$fbdir/bus</listen>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/><allow eavesdrop="true"/><allow own="*"/>
  </policy>
</busconfig>
CONF
  dbus-daemon --config-file="$fbdir/bus.conf" --nofork --print-address=3 3>"$fbdir/bus-address" 2>/dev/null &
  started+=("$!")
  for _ in $(seq 50); do [[ -s "$fbdir/bus-address" ]] && break; sleep 0.1; done
  DBUS_SESSION_BUS_ADDRESS=$(head -n1 "$fbdir/bus-address")
  export DBUS_SESSION_BUS_ADDRESS
  # NO_AT_BRIDGE: GTK would look for an accessibility bus.
  NO_AT_BRIDGE=1 DISPLAY="$display" "$notifier" --replace &
  started+=("$!")
  # Chromium asks the daemon what it can do once, as it starts: the daemon
  # must hold its name by then.
  for try in $(seq 50); do
    dbus-send --session --print-reply --reply-timeout=1000 --dest=org.freedesktop.DBus / \
      org.freedesktop.DBus.NameHasOwner string:org.freedesktop.Notifications 2>/dev/null |
      grep -q 'boolean true' && break
    ((try < 50)) || { echo "the notification daemon did not start" >&2; exit 1; }
    sleep 0.1
  done
fi
# The tests run the CLI (`grant add`, …): the binary first.
cargo build -q -p browser-relay
DISPLAY="$display" BROWSER_RELAY_TEST_HEADED=1 BROWSER_RELAY_TEST_WINDOW="${window:-1024,480}" XVFB_FRAME="$fbdir/Xvfb_screen0" SCREENSHOT_XWD="$fbdir/shot.xwd" \
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
