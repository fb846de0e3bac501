#!/bin/sh
# make check-install-paths (run by make check-install, so by CI): make install
# and make uninstall with hostile paths, and what uninstall must never touch.
#
# For each layout (spaces, both quotes, a backslash, a '*' in PREFIX; the same
# and a newline in DESTDIR; DESTDIR empty with such a PREFIX):
#   1. a directory of the user's own exists before install (PREFIX/share/doc,
#      empty; PREFIX/lib with a file): install must not claim them;
#   2. make install twice: the new files are exactly the expected list (made
#      here from the source tree, not from the manifest), the manifest lists
#      exactly them, refenc.pc and the Python module's _paths.py name the
#      final paths exactly (quotes and all);
#   3. a user file planted in every directory of the tree: make uninstall
#      removes exactly the installed files, every user file (and so every
#      directory) stays;
#   4. without user files: install then uninstall gives back the tree before
#      install exactly (the directories install created are gone, the user's
#      are not).
# A newline in PREFIX is refused by install and uninstall, with a message
# naming it, and nothing is created; a manifest entry with '..' is refused
# and nothing removed.  The negative control: the old uninstall (rm -rf of
# the include, share and Python directories) run on the planted tree makes
# the check of step 3 fail.
#
# usage: check-install-paths.sh   (from the source tree, after make)
set -eu
cd "$(dirname "$0")/.."
work=$(mktemp -d "${TMPDIR:-/tmp}/refenc-paths.XXXXXX")
trap 'rm -rf "$work"' EXIT
nl='
'
fail() { printf 'check-install-paths: %s\n' "$*" >&2; exit 1; }
ver=$(/usr/bin/python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
version=$(sed -n 's/^#define REFENC_VERSION "\(.*\)"/\1/p' ref/core/version.h)

# The files install writes, relative to PREFIX, one a line (none has a newline).
expected() {
    printf '%s\n' bin/refenc lib/librefenc.a "lib/librefenc.so.$version" lib/librefenc.so.0 lib/librefenc.so \
        lib/pkgconfig/refenc.pc share/refenc/install-manifest.txt \
        share/refenc/golden/manifest.json share/refenc/golden/catalogue.json share/doc/refenc/README.md
    for h in ref/*.h ref/core/*.h ref/io/*.h ref/tool/*.h; do
        case $h in ref/tool/random_params.h|ref/io/atomic_write.h) ;; *) echo "include/refenc/${h#ref/}" ;; esac
    done
    for f in golden/cases/*.safetensors; do echo "share/refenc/${f}"; done
    for f in docs/*.md docs/examples/*; do echo "share/doc/refenc/${f#docs/}"; done
    for f in scripts/python/refenc/*.py; do echo "lib/python$ver/dist-packages/refenc/${f##*/}"; done
    echo "lib/python$ver/dist-packages/refenc/install-manifest.txt"
}

# Every path under $1 with its type (f, d, l), relative, sorted, NUL-separated.
snap() { find "$1" -mindepth 1 -printf '%y %P\0' | LC_ALL=C sort -z; }
lines() { tr '\0' '\n' < "$1"; }

# Prints each line of stdin after "$1/".
under() { while IFS= read -r l; do printf '%s/%s\n' "$1" "$l"; done; }

# check_layout ROOT DESTDIR PREFIX: the tree under ROOT is checked; the files
# land in DESTDIR/PREFIX, which is inside ROOT.
check_layout() {
    root=$1 dest=$2 prefix=$3 P=$2$3
    rel=${P#"$root"/}
    mkdir -p -- "$P/share/doc" "$P/lib" && echo mine > "$P/lib/keep.so"
    snap "$root" > "$work/before"
    make -s install DESTDIR="$dest" PREFIX="$prefix" > /dev/null
    make -s install DESTDIR="$dest" PREFIX="$prefix" > /dev/null  # the second keeps the first's record
    snap "$root" > "$work/after"
    # the new files and links: exactly the expected list
    LC_ALL=C comm -z -13 "$work/before" "$work/after" | tr '\0' '\n' | sed -n 's/^[fl] //p' | LC_ALL=C sort > "$work/new"
    expected | under "$rel" | LC_ALL=C sort > "$work/want"
    diff "$work/want" "$work/new" > "$work/d" || { cat "$work/d"; fail "install wrote other files than expected ($P)"; }
    # the manifests list exactly these (less themselves), as final paths
    for m in "$P/share/refenc/install-manifest.txt" "$P/lib/python$ver/dist-packages/refenc/install-manifest.txt"; do
        sed -n 's/^[fl] //p' "$m"
    done | LC_ALL=C sort > "$work/listed"
    expected | grep -v 'install-manifest.txt$' | under "$prefix" | LC_ALL=C sort > "$work/want-listed"
    diff "$work/want-listed" "$work/listed" > "$work/d" || { cat "$work/d"; fail "the manifests do not list the installed files"; }
    for m in "$P/share/refenc/install-manifest.txt" "$P/lib/python$ver/dist-packages/refenc/install-manifest.txt"; do
        grep -qxF -e "d $prefix/share/doc" -e "d $prefix/lib" "$m" &&
            fail "$m claims PREFIX/share/doc or PREFIX/lib, which install did not create"
    done
    # the recorded paths, exactly
    PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$P/lib/python$ver/dist-packages" /usr/bin/python3 -c '
import sys
from refenc import _paths
assert _paths.CLI == sys.argv[1] + "/bin/refenc", (_paths.CLI, sys.argv[1])
assert _paths.GOLDEN == sys.argv[1] + "/share/refenc/golden", _paths.GOLDEN' "$prefix" ||
        fail "_paths.py does not hold the installed paths"
    mkdir -p "$work/pc" && cp "$P/lib/pkgconfig/refenc.pc" "$work/pc/"
    eval "set -- $(PKG_CONFIG_PATH="$work/pc" pkg-config --cflags refenc)"
    [ $# -eq 1 ] && [ "$1" = "-I$prefix/include" ] || fail "refenc.pc gives the flags '$*', not -I$prefix/include"

    # without user files: uninstall gives back the tree before install, exactly
    make -s uninstall DESTDIR="$dest" PREFIX="$prefix" > /dev/null
    snap "$root" > "$work/final"
    if ! cmp -s "$work/before" "$work/final"; then
        lines "$work/before" > "$work/b" && lines "$work/final" > "$work/f" && diff "$work/b" "$work/f" | head -20
        fail "install twice + uninstall changed the tree ($P)"
    fi

    # a user file in every directory: uninstall removes exactly the installed files
    make -s install DESTDIR="$dest" PREFIX="$prefix" > /dev/null
    plant
    make -s uninstall DESTDIR="$dest" PREFIX="$prefix" > /dev/null
    verify_kept || fail "make uninstall did not remove exactly what install wrote ($P)"
    printf 'check-install-paths: DESTDIR [%s] PREFIX [%s]: %s files installed and removed, the tree as before, user files kept\n' \
        "$dest" "$prefix" "$(wc -l < "$work/want")"

    # the negative control: the old uninstall fails that check
    unplant
    make -s install DESTDIR="$dest" PREFIX="$prefix" > /dev/null
    plant
    old_uninstall "$P"
    if verify_kept 2> /dev/null; then fail "negative control: the old uninstall passes the check"; fi
    echo "check-install-paths: negative control: the old uninstall (rm -rf of the directories) fails it"
}

plant() {
    find "$root" -type d -exec sh -c 'for d; do echo mine > "$d/user'"'"'s file"; done' sh {} +
    snap "$root" > "$work/planted"
}
unplant() { find "$root" -name "user's file" -exec rm -f {} +; }

# After uninstall: the planted tree less exactly the installed files.
verify_kept() {
    snap "$root" > "$work/kept"
    LC_ALL=C comm -z -23 "$work/planted" "$work/kept" | tr '\0' '\n' | sed -n 's/^[fld] //p' | LC_ALL=C sort > "$work/gone"
    LC_ALL=C comm -z -13 "$work/planted" "$work/kept" | tr '\0' '\n' > "$work/extra"
    diff "$work/want" "$work/gone" > "$work/d" && [ ! -s "$work/extra" ] ||
        { head -20 "$work/d" "$work/extra" >&2; return 1; }
}

# The uninstall recipe before the install manifest, its paths quoted (unquoted
# it would run rm -rf on the first word of a DESTDIR with a space).
old_uninstall() {
    rm -f "$1/bin/refenc" "$1/lib/librefenc.a" "$1/lib/librefenc.so.$version" "$1/lib/librefenc.so.0" \
        "$1/lib/librefenc.so" "$1/lib/pkgconfig/refenc.pc"
    rm -rf "$1/include/refenc" "$1/share/refenc" "$1/share/doc/refenc" "$1/lib/python$ver/dist-packages/refenc"
    rmdir "$1/lib/pkgconfig" 2> /dev/null || true
}

odd="sp ace 'single' \"double\" back\\slash *star"
dest="$work/dest dir 'q' \"qq\"$nl second line"
mkdir "$dest" "$work/root"
check_layout "$dest" "$dest" "/opt/$odd/refenc"
check_layout "$work/root" "" "$work/root/$odd"

# A newline in PREFIX: refused, by install and uninstall, nothing created
mkdir "$work/nl"
for t in install uninstall install-python uninstall-python; do
    if make -s "$t" DESTDIR="$work/nl" PREFIX="/a$nl/b" > /dev/null 2> "$work/err"; then
        fail "make $t accepted a newline in PREFIX"
    fi
    grep -q "PREFIX holds a newline" "$work/err" || { cat "$work/err"; fail "make $t: no clear message for a newline in PREFIX"; }
done
[ -z "$(find "$work/nl" -mindepth 1)" ] || fail "a refused install created files"
echo "check-install-paths: a newline in PREFIX is refused by install, uninstall and their Python halves"

# A manifest entry outside the rules: refused, nothing removed
make -s install DESTDIR="$work/nl" PREFIX=/p > /dev/null
printf 'f /p/../../etc/passwd\n' >> "$work/nl/p/share/refenc/install-manifest.txt"
snap "$work/nl" > "$work/before"
if make -s uninstall DESTDIR="$work/nl" PREFIX=/p > /dev/null 2> "$work/err"; then fail "uninstall accepted a '..' entry"; fi
grep -q "has a '..' component: nothing removed" "$work/err" || { cat "$work/err"; fail "no clear message for a '..' entry"; }
snap "$work/nl" > "$work/after"
cmp -s "$work/before" "$work/after" || fail "uninstall removed files from a refused manifest"
echo "check-install-paths: a manifest entry with '..' is refused, nothing removed"
