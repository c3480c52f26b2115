# Sourced by the set-up scripts: progress lines, and apt-get install with one
# `apt-get update` first (sudo where not root).
step() { printf '==> %s\n' "$*"; }
SUDO=""
if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null; then SUDO=sudo; fi
APT_UPDATED=""
apt_install() {
  if [ -z "$APT_UPDATED" ]; then $SUDO apt-get update -qq; APT_UPDATED=1; fi
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$@" >/dev/null
}
