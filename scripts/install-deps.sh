#!/bin/sh
# Installs the Debian packages libra needs. Usage: scripts/install-deps.sh [--bench]
# Run as root (or through sudo); it runs apt-get update first, as a fresh image needs.
set -eu
here=$(dirname "$0")
lists="$here/apt-packages.txt"
[ "${1:-}" = "--bench" ] && lists="$lists $here/apt-packages-bench.txt"
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update
# $lists and $packages are word lists: split on purpose.
# shellcheck disable=SC2086
packages=$(grep -hv '^#' $lists)
# Images that carry NodeSource's nodejs have its bundled npm, and that nodejs package conflicts
# with Debian's npm: where an npm is already on PATH, leave npm out of the list.
if command -v npm >/dev/null 2>&1; then
    # shellcheck disable=SC2086
    packages=$(printf '%s\n' $packages | grep -vx npm)
fi
# shellcheck disable=SC2086
$sudo apt-get install -y --no-install-recommends $packages
