#!/bin/sh
# make install, uninstall, install-python and uninstall-python
# (scripts/make/install.mk, scripts/make/python.mk; docs/c-api.md says what
# goes where).
#
#   install.sh install BUILD VERSION SO_MAJOR HEADER...   the program, the
#       libraries, the headers, refenc.pc, the golden cases and the docs
#   install.sh install-python PYTHON                       the Python module
#   install.sh uninstall | uninstall-python
#
# The paths come from the environment, verbatim, never through a recipe's
# text (where a quote, a space or a newline would become shell syntax):
# REFENC_INSTALL_DESTDIR, _PREFIX, _BINDIR, _LIBDIR, _INCLUDEDIR, _DATADIR,
# _DOCDIR, _GOLDENDIR, _PYTHONDIR (empty: the directory Debian's python3
# searches for PREFIX), the make variables of the same names.
#
# Install records what it did in a manifest, one entry a line:
#   f PATH   a file it wrote        l PATH   a symbolic link it made
#   d PATH   a directory it created (it did not exist before)
# PATH is the final path (without DESTDIR).  The C side's manifest is
# DATADIR/refenc/install-manifest.txt, the Python module's
# PYTHONDIR/refenc/install-manifest.txt.  A second install keeps the first
# one's entries that still exist (the directories it created stay its own).
# Uninstall reads the manifest and removes exactly those files and links
# (only if they still are a file or a link), then the manifest, then the
# directories install created, deepest first, each only if empty: a file of
# the user's own in any of them stays, and so does the directory holding it.
# Nothing here removes a directory with its contents.
#
# The final paths must be absolute, without a newline (refenc.pc and the
# manifest hold one path a line) and without a ".." component; DESTDIR may
# hold any character.  refenc.pc holds the final paths backslash-escaped, as
# pkg-config expects (pc_escape).
set -eu
nl='
'
cmd=${1:?usage: install.sh install|uninstall|install-python|uninstall-python ...}
shift
D=${REFENC_INSTALL_DESTDIR-}
HEADER="# refenc install manifest 1: f file, l link, d directory created; final paths, without DESTDIR"

die() { printf 'make %s: %s\n' "$cmd" "$*" >&2; exit 2; }

# A final path the rules above allow: absolute, no newline, no "..".
check_path() { # NAME VALUE
    case $2 in
        *"$nl"*) die "$1 holds a newline: refenc.pc and the install manifest hold one path a line, so it cannot be installed there (DESTDIR may hold one)" ;;
        /*) ;;
        *) die "$1 '$2' is not an absolute path" ;;
    esac
    case /$2/ in */../*) die "$1 '$2' has a '..' component" ;; esac
}

PREFIX=${REFENC_INSTALL_PREFIX:-/usr/local}
check_path PREFIX "$PREFIX"
BINDIR=${REFENC_INSTALL_BINDIR:-$PREFIX/bin}
LIBDIR=${REFENC_INSTALL_LIBDIR:-$PREFIX/lib}
INCLUDEDIR=${REFENC_INSTALL_INCLUDEDIR:-$PREFIX/include}
DATADIR=${REFENC_INSTALL_DATADIR:-$PREFIX/share}
DOCDIR=${REFENC_INSTALL_DOCDIR:-$DATADIR/doc/refenc}
GOLDENDIR=${REFENC_INSTALL_GOLDENDIR:-$DATADIR/refenc/golden}
for v in BINDIR LIBDIR INCLUDEDIR DATADIR DOCDIR GOLDENDIR; do
    eval "check_path $v \"\$$v\""
done

python_dir() { # PYTHON -> the module's parent directory
    if [ -n "${REFENC_INSTALL_PYTHONDIR-}" ]; then
        printf '%s' "$REFENC_INSTALL_PYTHONDIR"
    elif [ "$PREFIX" = /usr ]; then
        printf '%s' /usr/lib/python3/dist-packages
    else
        printf '%s/lib/python%s/dist-packages' "$PREFIX" \
            "$("$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
    fi
}

# ---- install ----------------------------------------------------------------

entries=''   # the temporary list of this run's entries
manifest=''  # the manifest's final path

rec() { printf '%s %s\n' "$1" "$2" >> "$entries"; }

# Creates FINALDIR under DESTDIR, one component at a time, recording each it creates.
mkdirs() {
    if [ -n "$D" ] && [ ! -d "$D" ]; then
        mkdir -p -- "$D" || die "cannot create DESTDIR '$D'"
    fi
    rest=${1#/} p=
    while [ -n "$rest" ]; do
        c=${rest%%/*}
        case $rest in */*) rest=${rest#*/} ;; *) rest= ;; esac
        [ -n "$c" ] && [ "$c" != . ] || continue
        p=$p/$c
        if [ ! -d "$D$p" ]; then
            [ ! -e "$D$p" ] && [ ! -L "$D$p" ] || die "'$D$p' exists and is not a directory"
            mkdir -- "$D$p" || die "cannot create '$D$p'"
            rec d "$p"
        fi
    done
}

put() { # MODE SOURCE FINALDIR NAME
    mkdirs "$3"
    [ ! -d "$D$3/$4" ] || [ -L "$D$3/$4" ] || die "'$D$3/$4' is a directory: refusing to replace it"
    # GNU install removes an existing target before writing: a link there is replaced, never followed
    install -T -m "$1" -- "$2" "$D$3/$4" || die "cannot install '$D$3/$4'"
    rec f "$3/$4"
}

link() { # TARGET FINALDIR NAME
    mkdirs "$2"
    [ ! -d "$D$2/$3" ] || [ -L "$D$2/$3" ] || die "'$D$2/$3' is a directory: refusing to replace it"
    ln -sfT -- "$1" "$D$2/$3" || die "cannot make the link '$D$2/$3'"
    rec l "$2/$3"
}

# Writes the manifest: the old one's entries that still exist, and this run's.
write_manifest() {
    [ -n "$manifest" ] && [ -s "$entries" ] || return 0
    m=$D$manifest
    mkdirs "${manifest%/*}"
    old=
    if [ -f "$m" ]; then old=$(read_manifest "$m") || exit 2; fi
    new=$(mktemp "$m.XXXXXX") || die "cannot write the manifest '$m'"
    {
        printf '%s\n' "$HEADER"
        {
            printf '%s\n' "$old" | while IFS= read -r e; do
                p=${e#? }
                if [ -n "$e" ] && { [ -e "$D$p" ] || [ -L "$D$p" ]; }; then printf '%s\n' "$e"; fi
            done
            cat "$entries"
        } | LC_ALL=C sort -u
    } > "$new" && chmod 644 "$new" && mv -f -- "$new" "$m" || { rm -f -- "$new"; die "cannot write the manifest '$m'"; }
}

begin() { # MANIFEST_FINAL_PATH
    manifest=$1
    entries=$(mktemp "${TMPDIR:-/tmp}/refenc-install.XXXXXX")
    # whatever happens, what was installed is recorded (a failed install can be uninstalled)
    # shellcheck disable=SC2154
    trap 'st=$?; trap - EXIT; write_manifest; rm -f -- "$entries"; exit $st' EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
}

# refenc.pc's value of a final path: a backslash before every byte but
# letters, digits, /._+,:@%=- and those of UTF-8 characters; pkg-config reads
# "\c" as c (a space, a quote, a backslash, a $ stay part of the path).
pc_escape() {
    printf '%s' "$1" | LC_ALL=C sed 's/[^A-Za-z0-9/._+,:@%=\x80-\xff-]/\\&/g'
}

install_c() { # BUILD VERSION SO_MAJOR HEADER...
    build=$1 version=$2 so_name=librefenc.so.$3 so_file=librefenc.so.$2
    shift 3
    begin "$DATADIR/refenc/install-manifest.txt"
    put 755 "$build/refenc" "$BINDIR" refenc
    put 644 "$build/librefenc.a" "$LIBDIR" librefenc.a
    put 755 "$build/librefenc.so" "$LIBDIR" "$so_file"
    link "$so_file" "$LIBDIR" "$so_name"
    link "$so_name" "$LIBDIR" librefenc.so
    # pkg-config: Requires jansson, because the public headers use json_t
    # (safetensors metadata, config JSON); Requires.private nettle (the golden
    # cases' sha256, io/manifest.c) and Libs.private have what a static link
    # adds.  No GSL and no MPFR: the installed library does not need them.
    pc=$(mktemp "${TMPDIR:-/tmp}/refenc-pc.XXXXXX")
    printf '%s\n' "prefix=$(pc_escape "$PREFIX")" 'exec_prefix=${prefix}' \
        "libdir=$(pc_escape "$LIBDIR")" "includedir=$(pc_escape "$INCLUDEDIR")" \
        "goldendir=$(pc_escape "$GOLDENDIR")" '' 'Name: refenc' \
        'Description: reference Transformer encoder: kernels, golden cases, results files, certification' \
        "Version: $version" 'Requires: jansson' 'Requires.private: nettle' \
        'Libs: -L${libdir} -lrefenc' 'Libs.private: -lm' 'Cflags: -I${includedir}' > "$pc"
    put 644 "$pc" "$LIBDIR/pkgconfig" refenc.pc
    rm -f -- "$pc"
    for h in "$@"; do
        sub=${h#ref/}
        case $sub in */*) dir=$INCLUDEDIR/refenc/${sub%/*} ;; *) dir=$INCLUDEDIR/refenc ;; esac
        put 644 "$h" "$dir" "${h##*/}"
    done
    for f in golden/manifest.json golden/catalogue.json; do put 644 "$f" "$GOLDENDIR" "${f##*/}"; done
    for f in golden/cases/*.safetensors; do put 644 "$f" "$GOLDENDIR/cases" "${f##*/}"; done
    for f in README.md docs/*.md; do put 644 "$f" "$DOCDIR" "${f##*/}"; done
    for f in docs/examples/*; do put 644 "$f" "$DOCDIR/examples" "${f##*/}"; done
    write_manifest
    printf 'installed refenc %s under %s%s\n' "$version" "$D" "$PREFIX"
}

install_python() { # PYTHON
    pydir=$(python_dir "$1")
    check_path PYTHONDIR "$pydir"
    begin "$pydir/refenc/install-manifest.txt"
    for f in scripts/python/refenc/*.py; do
        [ "${f##*/}" = _paths.py ] || put 644 "$f" "$pydir/refenc" "${f##*/}"
    done
    # where this installation keeps the program and the cases, as Python
    # literals (ascii(): any character, quotes included, stays a literal)
    paths=$(mktemp "${TMPDIR:-/tmp}/refenc-paths.XXXXXX")
    REFENC_CLI_PATH=$BINDIR/refenc REFENC_GOLDEN_PATH=$GOLDENDIR "$1" -c '
import os
print("# Written by make install-python: where this installation keeps them.")
print("CLI = %s" % ascii(os.environ["REFENC_CLI_PATH"]))
print("GOLDEN = %s" % ascii(os.environ["REFENC_GOLDEN_PATH"]))' > "$paths" || die "cannot write _paths.py"
    put 644 "$paths" "$pydir/refenc" _paths.py
    rm -f -- "$paths"
    write_manifest
    printf 'installed the refenc Python module in %s%s/refenc\n' "$D" "$pydir"
}

# ---- uninstall --------------------------------------------------------------

# The manifest's entries, checked: the header, then "f|l|d /PATH" lines only.
read_manifest() {
    { IFS= read -r first && [ "$first" = "$HEADER" ]; } < "$1" ||
        die "'$1' is not a refenc install manifest: nothing removed"
    tail -n +2 -- "$1" | while IFS= read -r e; do
        case $e in
            [fld]\ /*) case /${e#? }/ in */../*) die "'$1': entry '$e' has a '..' component: nothing removed" ;; esac
                       printf '%s\n' "$e" ;;
            *) die "'$1': entry '$e' is not 'f|l|d /PATH': nothing removed" ;;
        esac
    done
}

uninstall_from() { # MANIFEST_FINAL_PATH WHAT
    m=$D$1
    [ -f "$m" ] || die "no install manifest '$m': nothing of $2 is installed there (give the PREFIX, DESTDIR and directories install was given); nothing removed"
    list=$(read_manifest "$m") || exit 2
    printf '%s\n' "$list" | while IFS= read -r e; do
        p=$D${e#? }
        case $e in
            f*|l*) if [ -L "$p" ] || [ -f "$p" ]; then rm -f -- "$p"
                   elif [ -e "$p" ]; then printf 'make %s: %s is no longer a file: left\n' "$cmd" "$p" >&2; fi ;;
        esac
    done
    rm -f -- "$m"
    # deepest first: a directory sorts after its parent, whose path it starts with
    printf '%s\n' "$list" | sed -n 's/^d //p' | LC_ALL=C sort -r | while IFS= read -r p; do
        rmdir -- "$D$p" 2>/dev/null || true
    done
}

case $cmd in
    install) install_c "$@" ;;
    install-python) install_python "${1:?install-python needs the python program}" ;;
    uninstall)
        uninstall_from "$DATADIR/refenc/install-manifest.txt" refenc
        printf 'uninstalled refenc from %s%s\n' "$D" "$PREFIX" ;;
    uninstall-python)
        pydir=$(python_dir "${1:?uninstall-python needs the python program}")
        check_path PYTHONDIR "$pydir"
        uninstall_from "$pydir/refenc/install-manifest.txt" "the Python module"
        printf 'uninstalled the refenc Python module from %s%s\n' "$D" "$pydir" ;;
    *) die "unknown command '$cmd'" ;;
esac
