#!/bin/sh
# The rules between the rooms of ref/ (docs/architecture.md), checked on
# every #include of every .c and .h file:
#
#   kernels (ref/*.c, ref/*.h)  include kernels and core/ only; no MPFR,
#                               jansson, GSL or nettle header
#   core/                       includes core/ only; no MPFR, jansson, GSL or nettle
#   oracle/                     includes oracle/ and core/ only (and MPFR):
#                               it is an independent implementation, never
#                               the double kernels; no jansson, GSL or nettle
#   io/                         never oracle/, tool/ or cli/; no MPFR or GSL
#                               (the I/O layer links without them)
#   tool/                       never oracle/ or cli/; no MPFR; GSL only in
#                               tool/random_params.* (the internal library)
#   golden/                     the golden maker: kernels, core, io, tool,
#                               oracle, golden; never cli/ or the umbrella
#   cli/                        anything but oracle/: it parses arguments and
#                               prints, and reaches the oracle through golden/
#   ref/refenc.h                the umbrella of the installed API: anything
#                               but oracle/ and cli/; no room includes it but cli/
#
# usage: check-layering.sh [ROOT]   (ROOT: the tree holding ref/, default .)
# Prints one line per violation, "file:line: rule", and exits 1 if there is
# any; exits 0 (silent) when every rule holds, 2 on a usage error.
set -u
root=${1:-.}
[ -d "$root/ref" ] || { echo "check-layering: no ref/ under '$root'" >&2; exit 2; }
cd "$root" || exit 2

room() { # the room of a path relative to the root
    case $1 in
        ref/core/*) echo core ;;
        ref/oracle/*) echo oracle ;;
        ref/io/*) echo io ;;
        ref/tool/*) echo tool ;;
        ref/cli/*) echo cli ;;
        ref/golden/*) echo golden ;;
        ref/refenc.h) echo umbrella ;;
        ref/*/*) echo other ;;
        ref/*) echo kernels ;;
        *) echo outside ;;
    esac
}

violations=0
say() { echo "$1"; violations=$((violations + 1)); }

for f in $(find ref -name '*.[ch]' | LC_ALL=C sort); do
    from=$(room "$f")
    dir=$(dirname "$f")
    # "line:kind:target" for each include; kind q (quoted) or s (system)
    grep -n '^[[:space:]]*#[[:space:]]*include' "$f" |
        sed -n 's/^\([0-9]*\):[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1:q:\2/p;
                s/^\([0-9]*\):[[:space:]]*#[[:space:]]*include[[:space:]]*<\([^>]*\)>.*/\1:s:\2/p' \
        > "${TMPDIR:-/tmp}/layering.$$"
    while IFS=: read -r line kind target; do
        where="$f:$line"
        if [ "$kind" = s ]; then
            lib=
            case $target in
                mpfr.h|gmp.h) lib=MPFR ;;
                jansson.h) lib=jansson ;;
                gsl/*) lib=GSL ;;
                nettle/*) lib=nettle ;;
            esac
            [ -n "$lib" ] || continue
            case $from:$lib in
                umbrella:MPFR|umbrella:GSL) say "$where: the umbrella includes <$target>: the installed API needs neither MPFR nor GSL" ;;
                kernels:*|core:*) say "$where: $from includes <$target>: the kernels and core use no $lib" ;;
                oracle:jansson|oracle:GSL|oracle:nettle) say "$where: oracle includes <$target>: the oracle needs MPFR only" ;;
                io:MPFR|io:GSL) say "$where: io includes <$target>: the I/O layer links without $lib" ;;
                tool:MPFR) say "$where: tool includes <$target>: the tools link without MPFR" ;;
                tool:GSL) case $f in ref/tool/random_params.*) ;;
                          *) say "$where: tool includes <$target>: GSL only in tool/random_params" ;; esac ;;
            esac
            continue
        fi
        resolved=$(realpath -m --relative-to=. "$dir/$target")
        to=$(room "$resolved")
        case $from:$to in
            umbrella:oracle|umbrella:cli|umbrella:golden) say "$where: the umbrella includes $resolved ($to): the installed API has no MPFR, no generator and no CLI" ;;
            umbrella:*) ;;
            cli:oracle) say "$where: cli includes $resolved ($to): the program reaches the oracle through golden/" ;;
            cli:*) ;;
            *:umbrella) say "$where: $from includes the umbrella ref/refenc.h: only cli/ may" ;;
            kernels:kernels|kernels:core|core:core|oracle:oracle|oracle:core) ;;
            kernels:*) say "$where: kernels include $resolved ($to): kernels include only kernels and core" ;;
            core:*) say "$where: core includes $resolved ($to): core includes only core" ;;
            oracle:*) say "$where: oracle includes $resolved ($to): the oracle includes only core" ;;
            io:oracle|io:tool|io:cli|io:golden) say "$where: io includes $resolved ($to): io never includes oracle, tool, golden or cli" ;;
            tool:oracle|tool:cli|tool:golden) say "$where: tool includes $resolved ($to): tool never includes oracle, golden or cli" ;;
            golden:cli) say "$where: golden includes $resolved ($to): the golden maker is a library the program calls, never the reverse" ;;
            golden:*) ;;
        esac
    done < "${TMPDIR:-/tmp}/layering.$$"
done
rm -f "${TMPDIR:-/tmp}/layering.$$"
[ "$violations" -eq 0 ] || { echo "check-layering: $violations violation(s) of the rules in docs/architecture.md"; exit 1; }
exit 0
