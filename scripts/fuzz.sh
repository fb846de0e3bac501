#!/bin/sh
# Runs the libFuzzer targets of checks/fuzz/, each for SECONDS seconds, on
# seed corpora made at run time from the golden cases:
#   safetensors  every golden file, and the reference's results file of each
#                case (refenc run --case), up to 64 KiB each
#   config       docs/examples/*.json, checks/unit/bad_configs/*.json, and
#                the config in each golden file's metadata, as {"model": ...}
#   certify      against the smallest encoder case of the manifest with a
#                don't-care mask: the reference's results for it (a PASS) and
#                for the other cases (errors)
#   case         every golden file up to 64 KiB, as a case for run --case
# The corpora grow in BUILD/corpus/TARGET between runs (never committed);
# a crash or a broken property stops the run with the input saved as
# BUILD/artifacts/TARGET-crash-*, and this script fails.  A crash found
# becomes a regression test in checks/ (docs/hardening.md).
#
# usage: scripts/fuzz.sh BUILD GOLDEN_DIR SECONDS REFENC TARGET...
#   BUILD holds the fuzz-TARGET binaries; REFENC is a (plain) refenc program.
set -eu
build=$1 golden=$2 secs=$3 cli=$4
shift 4
here=$(dirname "$0")
cases=$(sh "$here/golden-cases.sh" "$golden")
max_len=65536

# the header (JSON) of a safetensors file
header() {
    n=$(od -An -tu8 -N8 "$1" | tr -d ' ')
    tail -c +9 "$1" | head -c "$n"
}

seeds_safetensors() {
    echo "$cases" | while read -r name file; do
        cp "$golden/cases/$file" "$1/golden-$name.safetensors"
        "$cli" run --case "$golden/cases/$file" --out "$1/results-$name.safetensors" >/dev/null
    done
    find "$1" -type f -size +${max_len}c -delete
    if [ -z "$(ls "$1")" ]; then # every file is large: keep the start of the smallest golden file
        f=$(ls -S "$golden"/cases/* | tail -n 1)
        head -c "$max_len" "$f" >"$1/golden-prefix.safetensors"
    fi
}

seeds_config() {
    cp docs/examples/*.json "$1/"
    for f in checks/unit/bad_configs/*.json; do cp "$f" "$1/bad-$(basename "$f")"; done
    echo "$cases" | while read -r name file; do
        header "$golden/cases/$file" | jq -c '{model: (.__metadata__.config | fromjson)}' \
            >"$1/golden-$name.json"
    done
}

# The golden case of the certify target: the smallest encoder case with a
# don't-care mask (several outputs, optional ones, elements not compared)
# and without gradients (the target's independent rules are the forward's;
# certify's gradient rules are tested by the golden_grad suite), else the
# smallest encoder case, else the smallest case.
certify_case() {
    jq -r '.cases | map(select(.component == "encoder")) | sort_by(.bytes) | .[] | "\(.case) \(.file)"' \
        "$golden/manifest.json" | while read -r name file; do
        if header "$golden/cases/$file" |
            jq -e '(keys | any(startswith("dontcare."))) and (.__metadata__.grad_outputs == null)' >/dev/null; then
            echo "$name $file"
            return
        fi
    done | head -n 1 | grep . ||
        jq -r '((.cases | map(select(.component == "encoder")) | min_by(.bytes)) // (.cases | min_by(.bytes)))
               | "\(.case) \(.file)"' "$golden/manifest.json"
}

seeds_certify() {
    read -r cname cfile <<EOC
$(certify_case)
EOC
    echo "$cases" | while read -r name file; do
        "$cli" run --case "$golden/cases/$file" --out "$1/results-$name.safetensors" >/dev/null
    done
    find "$1" -type f -size +${max_len}c ! -name "results-$cname.safetensors" -delete
}

seeds_case() {
    echo "$cases" | while read -r name file; do
        cp "$golden/cases/$file" "$1/golden-$name.safetensors"
    done
    find "$1" -type f -size +${max_len}c -delete
}

summary="$build/fuzz-summary.txt"
: >"$summary"
status=0
for t in "$@"; do
    bin="$build/fuzz-$t"
    seeds="$build/seeds/$t" corpus="$build/corpus/$t"
    rm -rf "$seeds"
    mkdir -p "$seeds" "$corpus" "$build/artifacts"
    "seeds_$t" "$seeds"
    dict=checks/fuzz/$t.dict
    [ -f "$dict" ] || dict=checks/fuzz/safetensors.dict
    golden_case=
    if [ "$t" = certify ]; then
        read -r cname cfile <<EOC
$(certify_case)
EOC
        golden_case="$golden/cases/$cfile"
    fi
    log="$build/fuzz-$t.log"
    echo "fuzz $t: $secs s, $(ls "$seeds" | wc -l) seeds, corpus $corpus${golden_case:+, golden $golden_case}"
    if REFENC_FUZZ_GOLDEN="$golden_case" "$bin" -max_total_time="$secs" -print_final_stats=1 \
        -timeout=10 -rss_limit_mb=2048 -max_len="$max_len" -dict="$dict" \
        -artifact_prefix="$build/artifacts/$t-" "$corpus" "$seeds" >"$log" 2>&1; then
        execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
        cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1)
        echo "fuzz $t: ok, $execs executions, $cov, corpus $(ls "$corpus" | wc -l) inputs" | tee -a "$summary"
    else
        status=1
        echo "fuzz $t: FAILED (log $log)" | tee -a "$summary"
        grep -E "ERROR|fuzz property failed|SUMMARY|Test unit written" "$log" | head -n 20
        ls "$build"/artifacts/"$t"-* 2>/dev/null
    fi
done
exit $status
