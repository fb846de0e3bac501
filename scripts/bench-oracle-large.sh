#!/bin/sh
# make bench-oracle-large: the oracle at BERT-base size, against the goals
# of docs/oracle.md.  Prints the figures (wall and CPU seconds, peak
# memory) and the goals, and exits 1 if a goal is missed.  Timings are only
# meaningful on a quiet machine: other processes on the same cores slow the
# oracle's threads down.  The 12-layer figure is a projection (96 times one
# item's layer), reported but not enforced.
#
#   1. one BERT-base layer (D 768, H 12, F 3072, exact GELU, Post-LN), B1
#      L128, every step certified: goal <= 30 s wall on 2 cores;
#   2. one D = 768 layer at B8 L512: the oracle evaluates one item at a time,
#      so its memory is one item's; measured as the peak memory of one
#      item's run (shard 1/8), goal <= 1 GB;
#   2b. 12 such layers with --per-layer are 96 (layer, item) units: two
#      units run at once, one thread each (the recipe of docs/certify.md,
#      two shards on one machine), and 48 times their wall time, plus the
#      double reference's layer inputs of the busier shard, projects the 12
#      layers, goal <= 30 min (issue 27; the first goal was < 1 h);
#   3. 1 vs 2 shards of a per-layer case: each of the 2 takes about half the
#      time of the whole (what a second machine saves), and their merge is
#      the whole run's file, byte for byte;
#   llama. one Llama-3-8B-shaped (layer, item) unit: the "llama" preset (D
#      4096, 32 query heads over 8 KV heads, head_dim 128, F 14336 SwiGLU,
#      RMSNorm, RoPE) with 1 layer and no vocabulary (vocab_size 0: the
#      layer's input is x itself, no embedding table), B1 L512 (LLAMA_L),
#      --per-layer --shard 1/1: one unit, its part file written as a job's
#      shard writes it.  Goal (issues 24 and 27): <= 20 min of CPU and
#      <= 4 GB; reported, not enforced (a benchmark, not a timed test).
#      Long: about 10 min of CPU, 13 min of wall time on 2 loaded cores;
#      its peak memory and the figures before and after the oracle's memory
#      changes: docs/oracle.md.
#   grad. the backward golden of step 1's layer (issue 25): the same config,
#      B1 L128, the same threads, run back to back: the golden (every
#      forward intermediate) and the golden with --grad, which makes that
#      same golden and then the oracle's backward (every gradient and
#      gradient step certified).  The backward's own cost is the difference
#      of the two; goal: <= 3 times the forward golden's, in wall time
#      (make bench-oracle-grad runs this step alone).  Also printed: CPU
#      and peak memory of both, and the whole --grad run over the forward.
#
# usage: scripts/bench-oracle-large.sh REFENC WORKDIR
#   THREADS (default 2); STEPS, the steps to run (default "1 2 2b 3 grad
#   llama": every one; make bench-oracle-llama runs STEPS=llama, make
#   bench-oracle-grad STEPS=grad); LLAMA_L (512).
set -eu
refenc=$1 dir=$2
threads=${THREADS:-2}
steps=" ${STEPS:-1 2 2b 3 grad llama} "
mkdir -p "$dir"
status=0
step() { case "$steps" in *" $1 "*) return 0 ;; esac; return 1; }

# measure VAR CMD...: runs CMD, sets VAR_wall, VAR_cpu (s) and VAR_mib (peak)
measure() {
    var=$1
    shift
    /usr/bin/time -f "%e %U %S %M" -o "$dir/time.txt" "$@" > "$dir/out.txt" 2> "$dir/err.txt" || {
        cat "$dir/err.txt" >&2
        exit 2
    }
    read -r w u s k < "$dir/time.txt"
    eval "${var}_wall=$w ${var}_cpu=$(echo "$u + $s" | bc) ${var}_mib=$(echo "$k / 1024" | bc)"
}

verdict() { # verdict FIGURE GOAL: PASS if FIGURE <= GOAL (a MISS fails the target)
    if [ "$(echo "$1 <= $2" | bc)" = 1 ]; then echo PASS; else echo MISS; status=1; fi
}
report() { # the same for a benchmark's figure: reported, never failing the target
    if [ "$(echo "$1 <= $2" | bc)" = 1 ]; then echo "PASS (reported)"; else echo "MISS (reported, not enforced)"; fi
}
projection() { # the same for a figure projected, not measured: reported only
    if [ "$(echo "$1 <= $2" | bc)" = 1 ]; then echo "PASS (projected)"; else echo "MISS (projected)"; fi
}

model='"d_model": 768, "n_heads": 12, "d_ff": 3072, "norm": "post", "activation": "gelu", "layer_norm_eps": 1e-12'
echo "{\"model\": {$model, \"n_layers\": 1}, \"input\": {\"batch\": 1, \"seq_len\": 128}}" > "$dir/b1_l128.json"
echo "{\"model\": {$model, \"n_layers\": 1}, \"input\": {\"batch\": 8, \"seq_len\": 512}}" > "$dir/b8_l512.json"
echo "{\"model\": {$model, \"n_layers\": 2}, \"input\": {\"batch\": 1, \"seq_len\": 32}}" > "$dir/shards.json"

echo "oracle at BERT-base and Llama-3-8B size, steps$steps($threads threads, $(nproc) cores; $(uptime | sed 's/.*load/load/'))"
echo

# 1. one layer, B1 L128
if step 1; then
measure ref "$refenc" run --config "$dir/b1_l128.json" --out "$dir/ref.safetensors"
measure one "$refenc" golden --config "$dir/b1_l128.json" --threads "$threads" --quiet --out-file "$dir/b1_l128.safetensors"
printf '%-52s %8s s wall %8s s CPU  goal <= 30 s wall  %s\n' "BERT-base layer, B1 L128, certified:" \
    "$one_wall" "$one_cpu" "$(verdict "$one_wall" 30)"
printf '%-52s %8s s wall %8s s CPU  (oracle/reference CPU: %s)\n' "  the double reference on it:" "$ref_wall" \
    "$ref_cpu" "$(echo "scale=0; $one_cpu / ($ref_cpu + 0.001)" | bc)"
fi

# 2. B8 L512, one layer: one item's run (shard 1/8), all outputs kept
if step 2; then
measure big "$refenc" golden --config "$dir/b8_l512.json" --shard 1/8 --threads "$threads" --out-file "$dir/b8_l512.part"
estimate=$(sed -n 's/.*about \([0-9]*\) MiB of MPFR storage and \([0-9]*\) MiB of outputs.*/\1 MiB of MPFR storage + \2 MiB of outputs/p' "$dir/err.txt")
printf '%-52s %8s MiB peak (one item: %s s wall, %s s CPU)  goal <= 1024 MiB  %s\n' \
    "memory, one D=768 layer at B8 L512:" "$big_mib" "$big_wall" "$big_cpu" "$(verdict "$big_mib" 1024)"
echo "  the oracle's estimate for the whole B8 L512 layer, all outputs kept: $estimate"
fi
# 12 layers at B8 L512 with --per-layer are 96 units, each a (layer, item)
# pair whose input is the stored double; the documented recipe (docs/certify.md)
# runs them one per core (make -j2 or parallel -j2, --threads 1).  Two units
# run that way, at once: 48 such pairs make the 12 layers.
if step 2b; then
pair_start=$(date +%s.%N)
/usr/bin/time -f "%e %U %S %M" -o "$dir/time1.txt" "$refenc" golden --config "$dir/b8_l512.json" --per-layer \
    --shard 1/8 --threads 1 --quiet --out-file "$dir/u1.part" 2> "$dir/err1.txt" &
pid1=$!
/usr/bin/time -f "%e %U %S %M" -o "$dir/time2.txt" "$refenc" golden --config "$dir/b8_l512.json" --per-layer \
    --shard 2/8 --threads 1 --quiet --out-file "$dir/u2.part" 2> "$dir/err2.txt" || { cat "$dir/err2.txt" >&2; exit 2; }
wait $pid1 || { cat "$dir/err1.txt" >&2; exit 2; }
pair_wall=$(echo "$(date +%s.%N) - $pair_start" | bc)
read -r _ u1 s1 _ < "$dir/time1.txt"
read -r _ u2 s2 _ < "$dir/time2.txt"
unit_cpu=$(echo "scale=1; ($u1 + $s1 + $u2 + $s2) / 2" | bc)
# Each shard also runs the double reference for its layers' stored inputs:
# with 2 shards (one per core), the second runs layers 0 to 10 on the 8
# items, 88 (layer, item) passes, while the first runs 40.  One pass costs
# the reference's B8 L512 layer / 8 (measured in part 1's way).
measure refl "$refenc" run --config "$dir/b8_l512.json" --out "$dir/ref512.safetensors"
pass=$(echo "scale=2; $refl_cpu / 8" | bc)
hours=$(echo "scale=2; (48 * $pair_wall + 88 * $pass) / 3600" | bc)
printf '%-52s %8.1f s wall for 2 units at once (%s s CPU each)\n' "one (layer, item) unit at L512, --threads 1:" \
    "$pair_wall" "$unit_cpu"
printf '%-52s %8s s CPU per (layer, item)\n' "  the double reference's layer inputs:" "$pass"
printf '%-52s %8s h on this machine (2 shards, one per core: 48 pairs of units + 88 reference passes)  goal <= 0.5 h  %s\n' \
    "12-layer BERT-base at B8 L512, --per-layer:" "$hours" "$(projection "$hours" 0.5)"
fi

# 3. 1 vs 2 shards of a per-layer case
if step 3; then
measure whole "$refenc" golden --config "$dir/shards.json" --per-layer --threads "$threads" --quiet --out-file "$dir/whole.safetensors"
measure s1 "$refenc" golden --config "$dir/shards.json" --per-layer --shard 1/2 --threads "$threads" --quiet --out-file "$dir/s1.part"
measure s2 "$refenc" golden --config "$dir/shards.json" --per-layer --shard 2/2 --threads "$threads" --quiet --out-file "$dir/s2.part"
"$refenc" golden merge --out-file "$dir/merged.safetensors" --quiet "$dir/s1.part" "$dir/s2.part"
same=$(cmp -s "$dir/whole.safetensors" "$dir/merged.safetensors" && echo "merge == whole, byte for byte" || echo "MERGE DIFFERS")
slowest=$(echo "if ($s1_wall > $s2_wall) $s1_wall else $s2_wall" | bc)
printf '%-52s %8s s wall\n' "per-layer D=768, 2 layers, B1 L32, one machine:" "$whole_wall"
printf '%-52s %8s s and %s s wall: on 2 machines %s s (%s%% of one); %s\n' "  shard 1/2 and shard 2/2:" "$s1_wall" \
    "$s2_wall" "$slowest" "$(echo "100 * $slowest / $whole_wall" | bc)" "$same"
[ "$same" = "merge == whole, byte for byte" ] || status=1
fi

# grad. The backward golden of one BERT-base layer against its forward
# golden: the same config and threads, back to back (on a shared machine
# their ratio is fairer than either figure).  golden --grad writes the
# forward golden's outputs too, so the backward's own cost is the
# difference; its goal is 3 times the forward golden.
if step grad; then
measure fwd "$refenc" golden --config "$dir/b1_l128.json" --threads "$threads" --quiet --out-file "$dir/fwd.safetensors"
measure grd "$refenc" golden --config "$dir/b1_l128.json" --grad --threads "$threads" --quiet --out-file "$dir/grad.safetensors"
bwd_wall=$(echo "$grd_wall - $fwd_wall" | bc)
bwd_cpu=$(echo "$grd_cpu - $fwd_cpu" | bc)
ratio_wall=$(echo "scale=2; $bwd_wall / $fwd_wall" | bc)
ratio_cpu=$(echo "scale=2; $bwd_cpu / $fwd_cpu" | bc)
printf '%-52s %8s s wall %8s s CPU %6s MiB peak\n' "BERT-base layer, B1 L128, forward golden:" "$fwd_wall" "$fwd_cpu" "$fwd_mib"
printf '%-52s %8s s wall %8s s CPU %6s MiB peak\n' "  the same with --grad (forward + backward):" "$grd_wall" "$grd_cpu" "$grd_mib"
printf '%-52s %8s s wall %8s s CPU  (--grad / forward: %s wall, %s CPU)\n' "  the backward's own cost (the difference):" \
    "$bwd_wall" "$bwd_cpu" "$(echo "scale=2; $grd_wall / $fwd_wall" | bc)" "$(echo "scale=2; $grd_cpu / $fwd_cpu" | bc)"
printf '%-52s %8s x wall %8s x CPU  goal <= 3 x wall  %s\n' "  backward / forward golden:" "$ratio_wall" "$ratio_cpu" \
    "$(verdict "$ratio_wall" 3)"
fi

# llama. One Llama-3-8B-shaped (layer, item) unit.  A 32-layer job at B1 is
# 32 such units, each a (layer, item) pair fed its stored double input; the
# unit of layer 0 of a 1-layer config is the cheapest faithful one: no other
# layer's weights are drawn (218 M parameters a layer, 1.7 GB in double), no
# double reference runs before it (a shard of layer 0 takes the embedding
# alone), and with vocab_size 0 the embedding is the input x, N(0, 1), which
# the layer's RMSNorm scales as it would any embedding.  The unit also holds
# the final RMSNorm (L x D values, negligible).  --shard 1/1 writes the part
# a job's shard writes (the merge, not measured, computes the bug variants).
if step llama; then
llama_l=${LLAMA_L:-512}
echo "{\"model\": {\"family\": \"llama\", \"n_layers\": 1, \"vocab_size\": 0}, \"input\": {\"batch\": 1, \"seq_len\": $llama_l}}" \
    > "$dir/llama.json"
measure llama "$refenc" golden --config "$dir/llama.json" --per-layer --shard 1/1 --threads "$threads" \
    --out-file "$dir/llama.part"
estimate=$(sed -n 's/.*about \([0-9]*\) MiB of MPFR storage and \([0-9]*\) MiB of outputs.*/\1 MiB of MPFR storage + \2 MiB of outputs/p' "$dir/err.txt")
printf '%-52s %8s s wall %8s s CPU  goal <= 1200 s CPU  %s\n' \
    "Llama-3-8B layer unit (D 4096, H 32/8, F 14336), B1 L$llama_l:" "$llama_wall" "$llama_cpu" \
    "$(report "$llama_cpu" 1200)"
printf '%-52s %8s MiB peak  goal <= 4096 MiB  %s\n' "  its memory (--threads $threads):" "$llama_mib" \
    "$(report "$llama_mib" 4096)"
[ -z "$estimate" ] || echo "  the oracle's estimate: $estimate"
# the part's metadata: the first precision and the one that certified it
# (higher than p_0 + 64 if the unit had to be evaluated again)
p0=$(head -c 1000000 "$dir/llama.part" | grep -a -o '"prec":"[0-9]*"' | grep -o '[0-9][0-9]*' || true)
p1=$(head -c 1000000 "$dir/llama.part" | grep -a -o '"prec_check":"[0-9]*"' | grep -o '[0-9][0-9]*' || true)
echo "  computed at $p0 bits, certified at $p1; the part file: $(du -m "$dir/llama.part" | cut -f1) MiB (removed)"
rm -f "$dir/llama.part"
fi
exit $status
