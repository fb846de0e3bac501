#!/bin/sh
# Negative controls for the accuracy suite: builds variants of the reference
# in which one intermediate is rounded to float, (double)(float)x, and checks
# that the accuracy tests (Criterion suites accuracy_*) fail for every one.
#
# usage: scripts/float-variants.sh          (or: make check-float-variants)
#
# Works in a temporary copy of the tree (the files git tracks, as they are in
# the working tree); committed sources are never modified.  Prints, for each
# variant, the tests that failed; exits 1 if a variant passes the suite (its
# bounds would then be too loose to matter) or a patch does not apply.
set -eu
cd "$(dirname "$0")/.."
root=$(pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/refenc-float-variants.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM

git ls-files -z | tar --null -T - -cf - | tar -xf - -C "$tmp"
jobs=$(nproc 2>/dev/null || echo 2)

# name | file[@function] | exact text | replacement
# With @function the text must occur exactly once in that function's body
# (from its definition to the next "}" in column 0): the forward kernels share
# lines with their _backward, and only the forward is under test here.
variants='layernorm_sd|ref/layernorm.c|const double sd = sqrt(var + eps);|const double sd = (double)(float)sqrt(var + eps);
layernorm_mean|ref/layernorm.c@refenc_layernorm_forward|const double mu = sum / (double)D;|const double mu = (double)(float)(sum / (double)D);
softmax_exp|ref/softmax.c|y_r[i] = exp(s_r[i] / tau - m);|y_r[i] = (double)(float)exp(s_r[i] / tau - m);
attention_scores|ref/attention.c@score|return s;|return (double)(float)s;
ffn_activation|ref/ffn.c|refenc_activation_forward(hidden, hidden, N * F, act);|refenc_activation_forward(hidden, hidden, N * F, act); for (size_t i_ = 0; i_ < N * F; i_++) hidden[i_] = (double)(float)hidden[i_];
gelu_output|ref/activation.c|return x * (0.5 * erfc(-x * M_SQRT1_2));|return (double)(float)(x * (0.5 * erfc(-x * M_SQRT1_2)));
pe_angle|ref/sinusoidal.c|return (double)pos * refenc_sinusoidal_frequency(i, D);|return (double)(float)((double)pos * refenc_sinusoidal_frequency(i, D));
rope_angle|ref/rope.c@rotate_rows|const double angle = (double)p * refenc_rope_scaled_frequency(j, R, base, sc, S);|const double angle = (double)(float)((double)p * refenc_rope_scaled_frequency(j, R, base, sc, S));
rope_yarn_frequency|ref/rope_scaling.c@yarn_frequency|return theta / s->factor * (1.0 - e) + theta * e;|return (double)(float)(theta / s->factor * (1.0 - e) + theta * e);
rope_llama3_frequency|ref/rope_scaling.c@llama3_frequency|return (1.0 - m) * theta / s->factor + m * theta;|return (double)(float)((1.0 - m) * theta / s->factor + m * theta);
linear_output|ref/linear.c|y_n[o] = b != NULL ? acc + b[o] : acc;|y_n[o] = (double)(float)(b != NULL ? acc + b[o] : acc);
quick_gelu_output|ref/activation.c|return x / (1.0 + exp(-t));|return (double)(float)(x / (1.0 + exp(-t)));
embedding_add|ref/embedding.c|y_bl[d] = x_bl[d] + row[d];|y_bl[d] = (double)(float)(x_bl[d] + row[d]);
softcap_tanh|ref/softcap.c|const double t = tanh(s / cap);|const double t = (double)(float)tanh(s / cap);'

echo "float-variants: building the unmodified copy in $tmp"
make -C "$tmp" -s build/checks/refenc-checks >"$tmp/build.log" 2>&1 || { cat "$tmp/build.log"; exit 1; }
# the unmodified reference must pass, or the failures below prove nothing
if ! "$tmp/build/checks/refenc-checks" --filter 'accuracy_*/*' --jobs="$jobs" >"$tmp/base.log" 2>&1; then
    cat "$tmp/base.log"
    echo "float-variants: the unmodified reference fails the accuracy suite" >&2
    exit 1
fi

status=0
caught=0
total=0
old_ifs=$IFS
IFS='
'
for v in $variants; do
    IFS='|' read -r name file from to <<EOV
$v
EOV
    total=$((total + 1))
    func=
    case $file in *@*) func=${file#*@}; file=${file%@*} ;; esac
    cp "$tmp/$file" "$tmp/$file.orig"
    if ! python3 - "$tmp/$file" "$from" "$to" "$func" <<'EOPY'
import re, sys
path, old, new, func = sys.argv[1:5]
s = open(path).read()
lo, hi = 0, len(s)
if func:
    m = re.search(r"^[^\n]*\b" + re.escape(func) + r"\(", s, re.M)
    if m is None:
        sys.exit(1)
    lo = m.start()
    end = s.find("\n}\n", lo)
    hi = len(s) if end < 0 else end + 3
body = s[lo:hi]
if body.count(old) != 1:
    sys.exit(1)
open(path, "w").write(s[:lo] + body.replace(old, new) + s[hi:])
EOPY
    then
        echo "float-variants: $name: the text to patch is not (exactly once) in $file${func:+ (function $func)}" >&2
        status=1
        continue
    fi
    if ! make -C "$tmp" -s build/checks/refenc-checks >"$tmp/build.log" 2>&1; then
        cat "$tmp/build.log"
        echo "float-variants: $name does not build" >&2
        status=1
    else
        "$tmp/build/checks/refenc-checks" --filter 'accuracy_*/*' --jobs="$jobs" \
            >"$tmp/$name.log" 2>&1 || true
        failed=$(grep -E '^\[FAIL\]' "$tmp/$name.log" | sed -e 's/^\[FAIL\] //' -e 's/: (.*//' | tr '\n' ' ')
        if [ -n "$failed" ]; then
            caught=$((caught + 1))
            echo "CAUGHT  $name ($file): $failed"
        else
            echo "MISSED  $name ($file): every accuracy test passed" >&2
            status=1
        fi
    fi
    mv "$tmp/$file.orig" "$tmp/$file"
    touch "$tmp/$file"
done
IFS=$old_ifs
echo "float-variants: $caught of $total variants caught by the accuracy suite"
exit $status
