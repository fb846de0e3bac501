#!/bin/sh
# make check-install: what a C user of refenc does, out of the tree.
#   1. make install into a fresh prefix (and DESTDIR staging into another);
#   2. copy the documented example peer (docs/examples/peer.c) to a
#      directory of its own, build it with nothing but
#      `pkg-config --cflags --libs refenc`, shared, and with
#      `pkg-config --static` and -static;
#   3. run each on every installed golden case and certify the results with
#      the installed refenc: PASS on every case;
#   4. make uninstall leaves nothing behind, not even the directories;
#   5. scripts/check-install-paths.sh (make check-install runs it next):
#      hostile paths, and the user's files that uninstall must keep.
# usage: check-install.sh   (from the source tree; uses make and cc)
set -eu
src=$(pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/refenc-install.XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
fail() { echo "check-install: $*" >&2; exit 1; }

make -s install PREFIX="$prefix" >/dev/null
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
pkg-config --exists refenc || fail "pkg-config does not find refenc in $PKG_CONFIG_PATH"
case $(pkg-config --libs --static refenc) in *gsl*|*mpfr*) fail "refenc.pc asks for GSL or MPFR";; esac
golden=$(pkg-config --variable=goldendir refenc)
[ -f "$golden/manifest.json" ] || fail "no golden cases under $golden"

mkdir "$work/user" && cp docs/examples/peer.c "$work/user/"
cd "$work/user"
# shellcheck disable=SC2046
cc -std=c11 -Wall -Wextra -Werror -O2 peer.c $(pkg-config --cflags --libs refenc) -lm -o peer
# shellcheck disable=SC2046
cc -std=c11 -Wall -Wextra -Werror -O2 -static peer.c $(pkg-config --static --cflags --libs refenc) -o peer-static
# the umbrella from C++: every public header compiles there too
printf '#include <refenc/refenc.h>\nint main() { refenc_error e; return refenc_error_set(&e, REFENC_OK, "%%s", "") + (int)refenc_st_dtype_size(REFENC_ST_F64) - 8; }\n' > cxx.cpp
# shellcheck disable=SC2046
c++ -Wall -Wextra -Werror cxx.cpp $(pkg-config --cflags --libs refenc) -o cxx && LD_LIBRARY_PATH="$prefix/lib" ./cxx ||
    fail "a C++ program cannot include and call <refenc/refenc.h>"
ldd peer | grep -q "librefenc.so" || fail "the shared build does not use librefenc.so"
ldd peer-static >/dev/null 2>&1 && fail "the -static build is dynamic"

for p in peer peer-static; do
    mkdir "results-$p"
    LD_LIBRARY_PATH="$prefix/lib" "./$p" "$golden" "results-$p" > "$p.log" || { cat "$p.log"; fail "$p failed"; }
    "$prefix/bin/refenc" certify --golden "$golden" --results "results-$p" > "certify-$p.log" ||
        { tail -20 "certify-$p.log"; fail "$p does not certify"; }
    echo "check-install: $p ($(tail -1 "$p.log" | sed 's/^peer: //')): $(tail -1 "certify-$p.log")"
done

# the Python module, installed with the rest, finds the installed program and cases
pydir=$(find "$prefix/lib" -type d -name refenc -path '*dist-packages*' | head -1)
[ -n "$pydir" ] || fail "make install did not install the Python module"
PYTHONPATH=$(dirname "$pydir") /usr/bin/python3 -c "
import refenc, sys
cases = refenc.all_cases()
assert len(cases) > 0 and refenc.golden_dir().startswith(sys.argv[1]), refenc.golden_dir()
print('check-install: the Python module lists', len(cases), 'installed cases')
" "$prefix" || fail "the installed Python module does not work"

cd "$src"
make -s install DESTDIR="$work/stage" PREFIX=/opt/refenc >/dev/null
[ -x "$work/stage/opt/refenc/bin/refenc" ] || fail "DESTDIR is not honoured"
grep -q '^prefix=/opt/refenc$' "$work/stage/opt/refenc/lib/pkgconfig/refenc.pc" ||
    fail "refenc.pc under DESTDIR does not name the final prefix"

make -s uninstall PREFIX="$prefix" >/dev/null
# install created the prefix: uninstall removes it, every directory of it
[ ! -e "$prefix" ] || fail "make uninstall left: $(find "$prefix" | head -5)"
echo "check-install: installed, built out of tree (shared and static), certified, uninstalled"
