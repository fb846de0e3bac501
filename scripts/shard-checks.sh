# What scripts/check-slurm.sh and scripts/check-parallel.sh share (sourced,
# not run): the counted checks, progress lines, and the checks of a merged
# case against the unsharded one.  The caller sets `me` (its name) and `cli`
# (the refenc program, an absolute path).
# shellcheck shell=sh disable=SC2154,SC2016 # me and cli are the caller's; sh -c '...' - ARGS

passed=0
failed=0
t0=$(date +%s)

say() { echo "$me: [$(($(date +%s) - t0)) s] $*"; }

# check WHAT COMMAND...: counts COMMAND's success as one check passed; returns
# COMMAND's success
check() {
    what=$1
    shift
    if "$@"; then
        passed=$((passed + 1))
        echo "  ok    $what"
        return 0
    fi
    failed=$((failed + 1))
    echo "  FAIL  $what"
    return 1
}

# fails WHAT COMMAND...: a negative control, passes when COMMAND fails
fails() {
    what=$1
    shift
    if "$@"; then
        failed=$((failed + 1))
        echo "  FAIL  $what (it succeeded)"
        return 1
    fi
    passed=$((passed + 1))
    echo "  ok    $what"
    return 0
}

# The closing line; exit status 1 when a check failed.
summary() {
    say "done"
    echo "$passed passed, $failed failed"
    [ "$failed" -eq 0 ]
}

# The recipe block NAME of docs/certify.md, as it stands, into FILE.
recipe() {
    /usr/bin/python3 scripts/docs-block.py extract docs/certify.md "$1" > "$2" && [ -s "$2" ]
}

# verify_merged WORK N: after a recipe ran in WORK on scripts/shard-fixture.sh's
# files (case 'bert', per layer, N shards, merged into WORK/g): the N parts
# are there, the case is byte for byte the unsharded run's, and certify
# passes the reference on it; each comparison with its negative control.
verify_merged() {
    w=$1
    n=$2
    parts=$(find "$w/g/parts" -name "bert.part-*-of-$n.safetensors" 2>/dev/null | wc -l)
    check "$n parts written, one per shard (found $parts)" [ "$parts" -eq "$n" ]
    check "the merged case g/cases/bert.safetensors exists" [ -s "$w/g/cases/bert.safetensors" ]
    say "the unsharded run of the same command, for comparison"
    (cd "$w" && "$cli" golden --config bert.json --weights w.safetensors --inputs i.safetensors --per-layer \
        --quiet --out-file unsharded.safetensors &&
        "$cli" golden --config bert.json --weights w.safetensors --inputs i.safetensors \
            --quiet --out-file whole-stack.safetensors)
    check "the merged case is byte for byte the unsharded one" \
        cmp "$w/g/cases/bert.safetensors" "$w/unsharded.safetensors"
    fails "control: the case without --per-layer differs from it" \
        cmp -s "$w/g/cases/bert.safetensors" "$w/whole-stack.safetensors"
    mkdir -p "$w/results" "$w/results-bug"
    "$cli" run --case "$w/g/cases/bert.safetensors" --out "$w/results/bert.safetensors" >/dev/null &&
        "$cli" run --case "$w/g/cases/bert.safetensors" --bug unbiased_variance \
            --out "$w/results-bug/bert.safetensors" >/dev/null
    check "refenc certify passes the reference on the merged case" \
        "$cli" certify --golden "$w/g" --results "$w/results" --quiet
    fails "control: refenc certify fails the reference with unbiased variance on it" \
        sh -c '"$1" certify --golden "$2/g" --results "$2/results-bug" --quiet > "$2/certify-bug.log"' - "$cli" "$w"
}
