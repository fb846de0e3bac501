#!/bin/sh
# make install-python and uninstall-python, staged under DESTDIR: for PREFIX
# /usr the module lands in /usr/lib/python3/dist-packages, for /usr/local in
# /usr/local/lib/python3.X/dist-packages (both on Debian's /usr/bin/python3
# path); the installed module imports from there and finds the installed
# program and golden cases; uninstall leaves nothing behind, not even the
# directories install created.
#
# usage: scripts/check-install-python.sh STAGE_DIR
set -eu
stage=${1:?usage: check-install-python.sh STAGE_DIR}
cd "$(dirname "$0")/.."
rm -rf "$stage" && mkdir -p "$stage" && stage=$(cd "$stage" && pwd)
ver=$(/usr/bin/python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
for prefix in /usr /usr/local; do
    case $prefix in
        /usr) dir=/usr/lib/python3/dist-packages ;;
        *) dir=$prefix/lib/python$ver/dist-packages ;;
    esac
    /usr/bin/python3 -c "import sys; assert '$dir' in sys.path, '$dir is not on the path of /usr/bin/python3'"
    make --no-print-directory -s install-python DESTDIR="$stage" PREFIX=$prefix >/dev/null
    [ -f "$stage$dir/refenc/__init__.py" ] || { echo "check-install-python: nothing in $stage$dir/refenc" >&2; exit 1; }
    PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$stage$dir" /usr/bin/python3 - "$stage$dir" "$prefix" <<'PY'
import sys
import refenc
from refenc import _paths
stage, prefix = sys.argv[1], sys.argv[2]
assert refenc.__file__.startswith(stage), refenc.__file__
assert _paths.CLI == prefix + "/bin/refenc", _paths.CLI
assert _paths.GOLDEN == prefix + "/share/refenc/golden", _paths.GOLDEN
PY
    make --no-print-directory -s uninstall-python DESTDIR="$stage" PREFIX=$prefix >/dev/null
    left=$(find "$stage" -mindepth 1 | head -n 3)
    [ -z "$left" ] || { echo "check-install-python: uninstall left $left" >&2; exit 1; }
done
rm -rf "$stage"
echo "check-install-python: install-python and uninstall-python, PREFIX /usr and /usr/local, staged"
