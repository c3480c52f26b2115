#!/bin/sh
# Browser Relay for macOS: double-click this file in Finder. Terminal opens
# and runs `browser-relay serve --pair` in its window: the relay, and the
# link that pairs the extension (a new one before it expires, until the
# extension connects). Ctrl-C, or closing the window, stops it.
#
# The program is looked for beside this file, then in ~/.local/bin (where
# INSTALL.txt puts it, which a Terminal window's PATH may not hold), then
# on PATH.
here=$(cd "$(dirname "$0")" && pwd)
for relay in "$here/browser-relay" "$HOME/.local/bin/browser-relay" "$(command -v browser-relay)"; do
  if [ -n "$relay" ] && [ -f "$relay" ]; then
    if [ -x "$relay" ]; then
      exec "$relay" serve --pair "$@"
    fi
    echo "$relay cannot be run: make it executable with  chmod +x \"$relay\"" >&2
    exit 1
  fi
done
echo "browser-relay is not beside this file, in ~/.local/bin or on PATH: INSTALL.txt says where to put it." >&2
exit 1
