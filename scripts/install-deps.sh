#!/bin/sh
# Installs the Debian packages refenc needs, if any is missing; does nothing
# (quickly, and silently) when all are present.  Called by make before every
# build, so that on a fresh Debian 12 machine `make demo` and `make check`
# are the only set-up commands.
#
# usage: scripts/install-deps.sh [EXTRA_PACKAGE ...]
#   EXTRA_PACKAGE: further packages a make target needs (for example
#   python3-torch for `make certify-torch`).
#
# With root: apt-get (after apt-get update).  Otherwise: sudo apt-get.
# Neither: a message naming the missing packages and the command to run, exit 1.
set -eu

packages="gcc make pkg-config libgsl-dev libmpfr-dev libcriterion-dev libjansson-dev nettle-dev gcovr $*"

missing=""
for p in $packages; do
    # dpkg-query prints "install ok installed" for an installed package
    status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    case "$status" in
        *"ok installed") ;;
        *) missing="$missing $p" ;;
    esac
done
[ -z "$missing" ] && exit 0

echo "refenc: installing missing packages:$missing" >&2
if [ "$(id -u)" -eq 0 ]; then
    apt="apt-get"
elif command -v sudo >/dev/null 2>&1; then
    apt="sudo apt-get"
else
    echo "refenc: these Debian packages are missing:$missing" >&2
    echo "refenc: you are not root and sudo is not available; as root, run:" >&2
    echo "    apt-get update && apt-get install -y$missing" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
$apt update -q
# shellcheck disable=SC2086 # word splitting of the package list is intended
$apt install -y -q --no-install-recommends $missing
