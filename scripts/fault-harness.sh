#!/bin/bash
# The CLI under faults while it writes its outputs (docs/hardening.md): runs
# `refenc run --case CASE --out OUT`, `refenc certify ... --json OUT` and
# `refenc golden --config CFG --threads 2 --out-file OUT` (the oracle's
# OpenMP workers alive while the case is written: a signal may reach one of
# them) over an old file at OUT, ROUNDS times, each time with one fault drawn
# at random:
#
#   fsize    a file-size limit (ulimit -f, SIGXFSZ left at its default) drawn
#            between 0 and the output's size
#   signal   SIGINT, SIGTERM, SIGHUP or SIGQUIT sent after a random delay
#   planted  symbolic links to a victim file planted at the temporary names a
#            writer could use: OUT.tmp.<pid> for the next 64 pids, and 64
#            random OUT.tmp.XXXXXX
#   none     no fault (the control: the new file must appear)
#
# and each time at a short path or at one of exactly 4095 bytes (PATH_MAX -
# 1).  After every run: the exit code is 0, 1 or 2 (or the signal sent);
# OUT holds either the old bytes or exactly the bytes a run without fault
# writes (never a part, never anything else); no temporary file is left in
# OUT's directory; the victim is untouched; and a run without fault did
# write the new bytes.  Bash, for ulimit -f in 1024-byte units.
#
# usage: scripts/fault-harness.sh REFENC GOLDEN_DIR [ROUNDS [SEED]]
#   SEED defaults to 20240521 (REFENC_FAULT_SEED overrides); it is printed,
#   and a failure names the round, so any failure replays.
set -u
cli=$1 golden=$2 rounds=${3:-200} seed=${4:-${REFENC_FAULT_SEED:-20240521}}
cli_exe=$(readlink -f "$cli")
RANDOM=$seed
work=$(mktemp -d "${TMPDIR:-/tmp}/refenc-fault-XXXXXX")
trap 'rm -rf "$work"' EXIT
fail=0
say() { echo "fault-harness: $*"; }
bad() { say "round $round ($what): $*"; fail=$((fail + 1)); }

# the smallest case of the golden set, and the outputs a run without fault writes
read -r name file <<EOF
$(sh "$(dirname "$0")/golden-cases.sh" "$golden" | while read -r n f; do
      echo "$(wc -c <"$golden/cases/$f") $n $f"; done | sort -n | head -n 1 | cut -d' ' -f2-)
EOF
case_file=$golden/cases/$file
mkdir -p "$work/results" "$work/expect"
"$cli" run --case "$case_file" --out "$work/results/$name.safetensors" >/dev/null || exit 2
cp "$work/results/$name.safetensors" "$work/expect/run"
# a small config for golden: the same bytes at any thread count
gcfg=$work/golden.json
printf '%s' '{"model": {"d_model": 16, "n_heads": 2, "d_ff": 24, "n_layers": 1}, "input": {"batch": 2, "seq_len": 4}}' >"$gcfg"
"$cli" golden --config "$gcfg" --name g --threads 2 --out-file "$work/expect/golden" --quiet || exit 2
# the certificate names its paths: made for each directory below, once
long=$work/long
while [ ${#long} -lt $((4095 - 1 - 200 - 1 - 200)) ]; do long=$long/$(printf '%0200d' 0); done
last=$((4095 - ${#long} - 1 - 200 - 1))
[ "$last" -ge 1 ] && [ "$last" -le 255 ] || { say "cannot make a path of 4095 bytes under $work"; exit 2; }
long=$long/$(printf 'e%.0s' $(seq 1 "$last"))
mkdir -p "$long" "$work/short"
victim=$work/victim
echo "the victim must never change" >"$victim"
say "seed $seed, $rounds rounds, case $name, outputs in $work/short and at paths of 4095 bytes"

for dir in "$work/short" "$long"; do
    base=$(printf 'j%.0s' $(seq 1 195))
    [ "$dir" = "$work/short" ] && base=cert
    "$cli" certify --golden "$golden" --results "$work/results" --case "$name" --json "$dir/$base.json" \
        >/dev/null 2>&1 || { say "certify without fault failed in $dir"; exit 2; }
    mv "$dir/$base.json" "$work/expect/certify-$([ "$dir" = "$long" ] && echo long || echo short)"
done

for round in $(seq 1 "$rounds"); do
    ops=(run certify golden)
    op=${ops[$((RANDOM % 3))]}
    where=$([ $((RANDOM % 3)) = 0 ] && echo long || echo short)
    dir=$work/short
    [ "$where" = long ] && dir=$long
    if [ "$op" = run ]; then
        out=$dir/out.safetensors
        [ "$where" = long ] && out=$dir/$(printf 'r%.0s' $(seq 1 188)).safetensors
        expect=$work/expect/run
        cmd=("$cli" run --case "$case_file" --out "$out")
    elif [ "$op" = golden ]; then
        out=$dir/case.safetensors
        [ "$where" = long ] && out=$dir/$(printf 'g%.0s' $(seq 1 188)).safetensors
        expect=$work/expect/golden
        cmd=("$cli" golden --config "$gcfg" --name g --threads 2 --out-file "$out" --quiet)
    else
        out=$dir/cert.json
        [ "$where" = long ] && out=$dir/$(printf 'j%.0s' $(seq 1 195)).json
        expect=$work/expect/certify-$where
        cmd=("$cli" certify --golden "$golden" --results "$work/results" --case "$name" --json "$out")
    fi
    printf 'old contents of round %d\n' "$round" >"$out"
    cp "$out" "$work/old"
    faults=(none fsize fsize signal signal planted)
    fault=${faults[$((RANDOM % 6))]}
    what="$op, $where path, $fault"
    sig=
    case $fault in
    fsize)
        size=$(wc -c <"$expect")
        kib=$((RANDOM % (size / 1024 + 1)))
        what="$what ${kib} KiB"
        (ulimit -f "$kib"; trap - XFSZ; exec "${cmd[@]}") >/dev/null 2>"$work/err"
        status=$?
        ;;
    signal)
        sigs=(INT TERM HUP QUIT)
        sig=${sigs[$((RANDOM % 4))]}
        delay=0.00$((RANDOM % 10))$((RANDOM % 10))
        what="$what SIG$sig after ${delay} s"
        "${cmd[@]}" >/dev/null 2>"$work/err" &
        pid=$!
        # the delay counts from the exec: a signal that reaches the forked
        # shell before it runs the program would run this shell's EXIT trap
        # there (rm -rf of the work directory), not test the program
        for _ in $(seq 1 2000); do
            [ "$(readlink "/proc/$pid/exe" 2>/dev/null)" = "$cli_exe" ] && break
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.001
        done
        sleep "$delay"
        kill -s "$sig" "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
        status=$?
        ;;
    planted)
        # (at a path of 4095 bytes no such name fits: nothing can be planted)
        next=$(sh -c 'echo $$')
        for k in $(seq 1 64); do
            ln -sf "$victim" "$out.tmp.$((next + k))" 2>/dev/null
            ln -sf "$victim" "$out.tmp.$(head -c 32 /dev/urandom | tr -dc 'A-Za-z0-9' | head -c 6)" 2>/dev/null
        done
        "${cmd[@]}" >/dev/null 2>"$work/err"
        status=$?
        ;;
    *)
        "${cmd[@]}" >/dev/null 2>"$work/err"
        status=$?
        ;;
    esac

    case $status in
    0 | 1 | 2) ;;
    *) [ -n "$sig" ] && [ "$status" -gt 128 ] || bad "exit $status: $(head -c 300 "$work/err")" ;;
    esac
    if ! cmp -s "$out" "$work/old" && ! cmp -s "$out" "$expect"; then
        bad "$out holds neither the old bytes nor the whole new output ($(wc -c <"$out") bytes)"
    fi
    if [ "$fault" = none ] && ! cmp -s "$out" "$expect"; then
        bad "a run without fault did not write the new output (exit $status: $(head -c 300 "$work/err"))"
    fi
    if [ "$fault" = planted ]; then
        find "$dir" -maxdepth 1 -type l -name '*.tmp.*' -delete
    fi
    left=$(find "$dir" -maxdepth 1 -name '*.tmp.*' | head -n 3)
    [ -z "$left" ] || bad "temporary files left: $left"
    [ "$(cat "$victim")" = "the victim must never change" ] || bad "the victim was written through a planted link"
    rm -f "$out"
done

if [ "$fail" -gt 0 ]; then
    say "$fail failure(s) in $rounds rounds (seed $seed): FAIL"
    exit 1
fi
say "$rounds rounds, every old file intact or wholly replaced, no temporary left (seed $seed)"
