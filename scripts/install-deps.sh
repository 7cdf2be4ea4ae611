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
# shellcheck disable=SC2046
$sudo apt-get install -y --no-install-recommends $(grep -hv '^#' $lists)
