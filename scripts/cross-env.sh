# Sourced by scripts/test.sh and scripts/package.sh: how Cargo builds for
# the other systems from Linux.
#  - Windows (x86_64-pc-windows-gnu): MinGW-w64 links; Wine runs what Cargo
#    runs (tests), through scripts/wine-run.sh.
#  - macOS and Linux aarch64: `cargo zigbuild` (zig as C compiler and
#    linker); macOS frameworks resolve against scripts/macos-stubs.
#  - Their builds go to a target folder of their own, kept between runs
#    (BROWSER_RELAY_CROSS_TARGET), so a second run only builds what changed.
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export CARGO_TARGET_X86_64_PC_WINDOWS_GNU_LINKER=x86_64-w64-mingw32-gcc
export CARGO_TARGET_X86_64_PC_WINDOWS_GNU_RUNNER="$root/scripts/wine-run.sh"
export CARGO_TARGET_AARCH64_APPLE_DARWIN_RUSTFLAGS="-C link-arg=-F$root/scripts/macos-stubs"
export CARGO_TARGET_X86_64_APPLE_DARWIN_RUSTFLAGS="-C link-arg=-F$root/scripts/macos-stubs"
cross_target_dir="${BROWSER_RELAY_CROSS_TARGET:-${BROWSER_RELAY_CACHE:-$HOME/.cache/browser-relay}/target-cross}"
