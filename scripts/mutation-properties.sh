#!/bin/sh
# Mutation trials for the property suites: each mutation is one
# deliberate bug put into a temporary copy of the tree (never into the
# committed sources); the property suites must fail on every one of them.
#
# usage: scripts/mutation-properties.sh [MUTATION ...]
#   With no argument, runs the unmutated copy (which must pass) and every
#   mutation below.  Prints, per mutation, the property tests that failed,
#   and exits 1 if a mutation was not caught (or the baseline fails).
#   REFENC_SEED is passed through to the suites.
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/property-suites.sh"   # PROPERTY_FILTER

# name ~ file ~ sed expression ~ description
mutations='
rope_k_layout~ref/mha.c~/refenc_rope_forward(w->kh/s/rope->layout)/!rope->layout)/~RoPE layout of k only (q and k rotated in different layouts)
scale_sqrt_d~ref/attention.c~s/sqrt((double)Dh)/sqrt((double)(H * Dh))/~attention scale 1/sqrt(D) instead of 1/sqrt(Dh)
unbiased_var~ref/layernorm.c~s|ss / (double)D; /\* biased \*/|ss / (double)(D - 1);|~unbiased variance in LayerNorm
eps_outside~ref/layernorm.c~s/sqrt(var + eps)/(sqrt(var) + eps)/~eps outside the square root
alibi_geometric~ref/alibi.c~s|size_t C = 1; /\* the largest power of two <= H \*/|size_t C = H;|;s|while (C \* 2 <= H)|while (0)|~ALiBi slopes geometric for every H (no closest-power-of-two rule)
no_max_sub~ref/softmax.c~s|exp(s_r\[i\] / tau - m)|exp(s_r[i] / tau)|~softmax without the max subtraction
no_final_norm~ref/encoder.c~s/if (cfg->final_norm) {/if (0) {/~Pre-LN stack without its final LayerNorm
'

# Runs the property suites of tree $1; prints one line per failing test,
# "suite::test [how]":
#   [property]      the property's own comparison failed, and its
#                   precondition held (or it has none);
#   [property; precondition failed too]
#                   the comparison failed, but the encoder was no longer the
#                   documented composition of stages (fb_encoder_checked), so
#                   the bounds it used were derived for another computation;
#   [precondition only]
#                   only that precondition failed.
# A mutation counts as caught only if some test reports [property].
run_suites() {
    "$1/build/checks/refenc-checks" --filter "$PROPERTY_FILTER" --jobs=2 2>&1 |
        awk '
            /^\[(RUN |PASS|SKIP)\]/ { msgs = ""; next }
            /^\[----\]/ { msgs = msgs "\n" $0; next }
            /^\[FAIL\]/ {
                name = $2; sub(/:$/, "", name)
                n = split(msgs, m, "\n"); prop = 0; comp = 0
                for (i = 1; i <= n; i++)
                    if (m[i] ~ /Assertion Failed/) {
                        if (m[i + 2] ~ /composition of its documented/) comp = 1; else prop = 1
                    }
                if (!prop && !comp) prop = 1   # a crash or a message we do not parse
                how = prop ? (comp ? "property; precondition failed too" : "property") \
                           : "precondition only"
                print name " [" how "]"
                msgs = ""
            }' | sort -u
}

copy_tree() { # $1: destination
    tar -C "$root" --exclude=./build --exclude=./.git -cf - . | tar -C "$1" -xf -
}

build() { # $1: tree
    make -C "$1" build/checks/refenc-checks >"$1/build.log" 2>&1 || {
        echo "build failed in $1:" >&2
        tail -20 "$1/build.log" >&2
        return 1
    }
}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/refenc-mut.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM

status=0
echo "== baseline (no mutation)"
mkdir "$tmp/base"
copy_tree "$tmp/base"
build "$tmp/base"
failed=$(run_suites "$tmp/base")
if [ -n "$failed" ]; then
    echo "baseline fails, mutation results would mean nothing:"
    echo "$failed"
    exit 1
fi
echo "   all property tests pass"

echo "$mutations" | while IFS='~' read -r name file expr desc; do
    [ -n "$name" ] || continue
    if [ $# -gt 0 ]; then
        case " $* " in *" $name "*) ;; *) continue ;; esac
    fi
    dir="$tmp/$name"
    mkdir "$dir"
    copy_tree "$dir"
    sed -i "$expr" "$dir/$file"
    if cmp -s "$root/$file" "$dir/$file"; then
        echo "== $name: the sed expression did not change $file (stale mutation)" >&2
        exit 1
    fi
    echo "== $name: $desc"
    diff -u "$root/$file" "$dir/$file" | sed -n 's/^[-+][^-+]/   &/p'
    build "$dir" || exit 1
    failed=$(run_suites "$dir")
    if ! echo "$failed" | grep -q '\[property\]$'; then
        echo "   NOT CAUGHT by a property comparison"
        echo "$failed" | sed 's/^/   (failing: /;s/$/)/'
        exit 1
    fi
    echo "$failed" | sed 's/^/   caught by /'
    rm -rf "$dir"
done || status=1
exit $status
