#!/bin/sh
# make bench-variants: what the bug variants cost a user's golden (issue 26:
# a golden with variants at most 1.5 times the time and the memory of one
# without).  Makes the same golden three ways, each measured with
# /usr/bin/time (wall and CPU seconds, peak resident memory):
#
#   none       refenc golden --no-variants
#   reference  refenc golden                 (the default: the double
#                                             reference's variants)
#   oracle     refenc golden --variants      (the oracle's, as before; for
#                                             comparison, not enforced)
#
# on a BERT-style config (Post-LN, exact GELU, token embeddings of a
# 30 522-word vocabulary, padding), D 256, H 4, F 1024, L 128, B 1, by
# default 2 layers (LAYERS=N sets them; WIDTH=base: BERT-base's D 768, H 12,
# F 3072).  Prints the figures and the ratios to the case without variants,
# in CPU seconds and in wall seconds, and exits 1 if the reference's exceed
# 1.5 in CPU time (the goal's figure: the wall time of a shared machine
# wanders, and the variants' share of it falls with --threads while their
# CPU time does not) or in memory.  Timings are only meaningful on a quiet
# machine.
#
# usage: scripts/bench-variants.sh REFENC WORKDIR   (THREADS, default 2; LAYERS, default 2;
#        WIDTH=base; ORACLE=0 skips the oracle's run)
set -eu
refenc=$1 dir=$2
threads=${THREADS:-2}
layers=${LAYERS:-2}
case ${WIDTH:-256} in
base) d=768 h=12 f=3072 ;;
256) d=256 h=4 f=1024 ;;
*) echo "bench-variants: WIDTH is 256 or base" >&2; exit 2 ;;
esac
mkdir -p "$dir"
cat > "$dir/bert.json" <<EOF
{"model": {"d_model": $d, "n_heads": $h, "d_ff": $f, "n_layers": $layers, "norm": "post",
           "activation": "gelu", "layer_norm_eps": 1e-12, "positional": "learned", "max_len": 512,
           "vocab_size": 30522, "type_vocab_size": 2, "embedding_norm": true, "padding_idx": 0},
 "input": {"batch": 1, "seq_len": 128, "padding": [16]}}
EOF

# measure VAR ARGS...: runs refenc golden ARGS, sets VAR_wall, VAR_cpu (s) and VAR_mib (peak)
measure() {
    var=$1
    shift
    /usr/bin/time -f "%e %U %S %M" -o "$dir/time.txt" "$refenc" golden --config "$dir/bert.json" \
        --threads "$threads" --quiet "$@" > "$dir/out.txt" 2> "$dir/err.txt" || {
        cat "$dir/err.txt" >&2
        exit 2
    }
    read -r w u s k < "$dir/time.txt"
    eval "${var}_wall=$w ${var}_cpu=$(echo "$u + $s" | bc) ${var}_mib=$(echo "$k / 1024" | bc)"
}

measure none --no-variants --out-file "$dir/none.safetensors"
measure ref --out-file "$dir/reference.safetensors"
echo "bench-variants: $layers-layer BERT-style golden, D $d, F $f, L 128, V 30522, $threads threads"
printf '  %-28s %8s %8s %8s\n' "" "wall s" "CPU s" "peak MiB"
printf '  %-28s %8s %8s %8s\n' "no variants" "$none_wall" "$none_cpu" "$none_mib"
printf '  %-28s %8s %8s %8s\n' "variants (double reference)" "$ref_wall" "$ref_cpu" "$ref_mib"
if [ "${ORACLE:-1}" != 0 ]; then
    measure orc --variants --out-file "$dir/oracle.safetensors"
    printf '  %-28s %8s %8s %8s\n' "variants (oracle)" "$orc_wall" "$orc_cpu" "$orc_mib"
fi
t=$(echo "scale=3; $ref_cpu / $none_cpu" | bc)
w=$(echo "scale=3; $ref_wall / $none_wall" | bc)
m=$(echo "scale=3; $ref_mib / $none_mib" | bc)
echo "  the reference's variants: x$t CPU time, x$m peak memory (goal: at most x1.5 each); x$w wall time"
status=0
[ "$(echo "$t <= 1.5" | bc)" = 1 ] || { echo "bench-variants: CPU time x$t > 1.5" >&2; status=1; }
[ "$(echo "$m <= 1.5" | bc)" = 1 ] || { echo "bench-variants: peak memory x$m > 1.5" >&2; status=1; }
exit $status
