#!/bin/sh
# make check-slurm: the Slurm recipe of docs/certify.md ("Long runs"), the
# block between <!-- slurm-recipe:begin --> and its end, run as it stands on
# a one-node Slurm cluster started here: a job array of 8 shards
# (`refenc golden --shard auto`) and the merge as a job that waits for it
# (--dependency=afterok).  The merged case must be byte for byte the
# unsharded one, and certify must pass the reference on it.  Then the rerun
# the page describes: a lost part computed again by its task alone, with
# --shard auto/8, is the same bytes.  Last, a task killed midway (SIGKILL) on
# a fresh run: merge names it missing, and submitting the same block again
# is all it takes: the seven parts there are kept, not written again, and
# the merged case is again the unsharded one and certifies.
#
# The cluster: munged with a key made for the run, slurmctld and slurmd with
# a slurm.conf written here, every socket, state, spool, pid and log file in
# a temporary directory, on two free ports of 127.0.0.1; no cgroups
# (proctrack/linuxproc, task/none), no accounting, the node as `slurmd -C`
# sees this machine (its CPUs and memory).  Run as root (the daemons are;
# jobs run as the submitting user).  Whatever happens, the trap on EXIT
# cancels the jobs, stops the three daemons (by their process ids), keeps
# their logs in OUT_DIR/logs and removes the temporary directory.  Installs
# Debian's slurm-wlm and munge if they are missing (scripts/install-deps.sh).
#
# usage: scripts/check-slurm.sh REFENC_CLI OUT_DIR
# Prints a line per step and per check, then "N passed, N failed"; exit 1 if
# a check failed.
# shellcheck disable=SC2016 # sh -c '...' - ARGS: the single quotes are meant
set -u
cd "$(dirname "$0")/.." || exit 1
me=check-slurm
cli=$(cd "$(dirname "${1:?usage: check-slurm.sh REFENC_CLI OUT_DIR}")" && pwd)/$(basename "$1")
out=${2:?usage: check-slurm.sh REFENC_CLI OUT_DIR}
# shellcheck source=scripts/shard-checks.sh
. scripts/shard-checks.sh
wait_s=120 # the recipe's jobs take about 25 s here; the bound only stops a hang

say "Debian's slurm-wlm and munge, installed if missing"
sh scripts/install-deps.sh slurm-wlm munge || exit 1
[ "$(id -u)" -eq 0 ] || { echo "$me: run as root: the cluster's daemons are started here" >&2; exit 1; }
rm -rf "$out" && mkdir -p "$out/work" "$out/logs" && out=$(cd "$out" && pwd)
tmp=$(mktemp -d /tmp/refenc-slurm.XXXXXX) || exit 1
# munged wants the path to its socket searchable by everyone, its key private
chmod 755 "$tmp"
mkdir -p "$tmp/run" "$tmp/munge" "$tmp/state" "$tmp/spool" "$tmp/log"
chmod 700 "$tmp/munge"
export SLURM_CONF="$tmp/slurm.conf"
munged_pid='' ctld_pid='' slurmd_pid=''

# stop PID NAME: SIGTERM, then SIGKILL after 15 s; reaps it
stop() {
    [ -n "$1" ] || return 0
    kill "$1" 2>/dev/null
    for _ in $(seq 30); do
        # a child that exited stays a zombie until waited for: count it gone
        case $(ps -o stat= -p "$1" 2>/dev/null) in '' | Z*) break ;; esac
        sleep 0.5
    done
    kill -9 "$1" 2>/dev/null
    wait "$1" 2>/dev/null
    echo "$me: stopped $2 (pid $1)"
}

# The cluster's slurmstepd processes (detached from slurmd): those that hold
# a file of the temporary directory open (slurmd's log, which they inherit).
our_stepds() {
    for d in /proc/[0-9]*; do
        [ "$(cat "$d/comm" 2>/dev/null)" = slurmstepd ] || continue
        for f in "$d"/fd/*; do
            case $(readlink "$f" 2>/dev/null) in "$tmp"/*) echo "${d#/proc/}" && break ;; esac
        done
    done
}

no_stepds() { [ -z "$(our_stepds)" ]; }

teardown() {
    trap - EXIT INT TERM HUP
    if [ -n "$ctld_pid" ]; then
        scancel --user="$(id -un)" 2>/dev/null
        for _ in $(seq 30); do
            [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break
            sleep 0.5
        done
    fi
    # a job's slurmstepd outlives the job by a moment: let it end before slurmd
    poll 15 no_stepds
    stop "$slurmd_pid" slurmd
    stop "$ctld_pid" slurmctld
    stop "$munged_pid" munged
    for p in $(our_stepds); do
        stop "$p" slurmstepd
    done
    cp "$tmp"/log/* "$tmp/slurm.conf" "$out/logs/" 2>/dev/null
    rm -rf "$tmp"
    echo "$me: cluster stopped, $tmp removed; its logs and slurm.conf are in $out/logs"
}
trap teardown EXIT
trap 'exit 130' INT TERM HUP

# poll SECONDS COMMAND...: true as soon as COMMAND succeeds, false after SECONDS
poll() {
    n=$(($1 * 2))
    shift
    for _ in $(seq "$n"); do
        "$@" && return 0
        sleep 0.5
    done
    return 1
}

# The daemons' logs, when one did not start.
dump_logs() {
    for f in "$tmp"/log/*; do
        echo "$me: --- the end of $f"
        tail -n 25 "$f"
    done
}

node_idle() { [ "$(sinfo -h -N -o %t 2>/dev/null)" = idle ]; }

start_cluster() {
    say "munged, with a new key, socket $tmp/run/munge.socket"
    mungekey --create --keyfile="$tmp/munge/munge.key" || return 1
    (cd "$tmp" && exec munged --foreground --key-file="$tmp/munge/munge.key" --socket="$tmp/run/munge.socket" \
        --pid-file="$tmp/run/munged.pid" --seed-file="$tmp/munge/seed" --log-file="$tmp/log/munged.log" \
        ) >"$tmp/log/munged.out" 2>&1 &
    munged_pid=$!
    check "munged is up" poll 10 sh -c 'munge -n -S "$1" | unmunge -S "$1" >/dev/null 2>&1' - "$tmp/run/munge.socket" ||
        return 1
    ports=$(/usr/bin/python3 -c '
import socket
s = [socket.socket() for _ in range(2)]
for x in s:
    x.bind(("127.0.0.1", 0))
print(*(x.getsockname()[1] for x in s))') || return 1
    write_conf "${ports% *}" "${ports#* }" || return 1
    say "slurmctld on 127.0.0.1:${ports% *}, slurmd on :${ports#* } ($SLURM_CONF)"
    (cd "$tmp" && exec slurmctld -D) >"$tmp/log/slurmctld.out" 2>&1 &
    ctld_pid=$!
    check "slurmctld answers" poll 30 sh -c 'scontrol ping | grep -q "is UP"' || return 1
    (cd "$tmp" && exec slurmd -D) >"$tmp/log/slurmd.out" 2>&1 &
    slurmd_pid=$!
    check "the node is idle" poll 30 node_idle || return 1
    say "node $(sinfo -h -N -o '%N: %c CPUs, %m MB' 2>/dev/null), partition $(sinfo -h -o %P)"
}

# write_conf CTLD_PORT SLURMD_PORT: the cluster's slurm.conf
write_conf() {
    node=$(slurmd -C | head -n 1)
    case $node in NodeName=*) ;; *) echo "$me: slurmd -C said '$node'" >&2; return 1 ;; esac
    : >"$tmp/plugstack.conf"
    cat >"$SLURM_CONF" <<CONF
# a one-node cluster of scripts/check-slurm.sh, removed at its end
ClusterName=refenc-check
SlurmctldHost=$(hostname -s)(127.0.0.1)
SlurmctldPort=$1
SlurmdPort=$2
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$tmp/run/munge.socket
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/run/slurmctld.pid
SlurmdPidFile=$tmp/run/slurmd.pid
SlurmctldLogFile=$tmp/log/slurmctld.log
SlurmdLogFile=$tmp/log/slurmd.log
PlugStackConfig=$tmp/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
MinJobAge=600
$node NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=check Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
}

# true when no job is left to run: every one ended, or one waits on a
# dependency that can no longer be met (a task failed)
jobs_settled() {
    scontrol -o show job >"$out/jobs.txt" 2>/dev/null || return 1
    ! grep -E 'JobState=(PENDING|CONFIGURING|RUNNING|COMPLETING|SUSPENDED|REQUEUED)' "$out/jobs.txt" |
        grep -vq 'Reason=DependencyNeverSatisfied'
}

# field NAME: the values of NAME= in the job lines on stdin
field() { tr ' ' '\n' | sed -n "s/^$1=//p"; }

check_jobs() {
    tasks=$(grep -c 'ArrayTaskId=' "$out/jobs.txt")
    done_tasks=$(grep 'ArrayTaskId=' "$out/jobs.txt" | grep -c 'JobState=COMPLETED')
    check "the array's 8 tasks completed ($done_tasks of $tasks)" test "$tasks" -eq 8 -a "$done_tasks" -eq 8
    merge_line=$(grep "^JobId=$merge_id " "$out/jobs.txt")
    check "the merge job $merge_id completed" sh -c 'echo "$1" | grep -q "JobState=COMPLETED"' - "$merge_line"
    last_end=$(grep 'ArrayTaskId=' "$out/jobs.txt" | field EndTime | sort | tail -n 1)
    merge_start=$(echo "$merge_line" | field StartTime)
    # ISO times: their order is the string order
    check "the merge started after the last task ended ($merge_start >= $last_end)" \
        sh -c '[ -n "$1" ] && [ -n "$2" ] && ! expr "$1" \< "$2" >/dev/null' - "$merge_start" "$last_end"
}

run_recipe() {
    check "docs/certify.md has the slurm-recipe block" recipe slurm-recipe "$out/recipe.sh" || return 1
    say "the recipe, as docs/certify.md writes it, refenc from $(dirname "$cli"):"
    sed 's/^/    /' "$out/recipe.sh"
    rc=0
    (cd "$out/work" && PATH="$(dirname "$cli"):$PATH" sh -e "$out/recipe.sh") >"$out/recipe.log" 2>&1 || rc=$?
    sed 's/^/    | /' "$out/recipe.log"
    merge_id=$(sed -n 's/^Submitted batch job \([0-9][0-9]*\)$/\1/p' "$out/recipe.log")
    check "the recipe submitted its jobs, exit 0 (got $rc)" test "$rc" -eq 0 -a -n "$merge_id" || return 1
    say "waiting for the array and the merge job (at most $wait_s s)"
    check "the jobs ended within $wait_s s" poll "$wait_s" jobs_settled
    check_jobs
    for f in "$out"/work/slurm-*.out; do
        [ -s "$f" ] && { echo "$me: --- $f"; cat "$f"; }
    done
}

# The rerun docs/certify.md describes: part 3 lost, task 3 submitted again
# alone with --shard auto/8 gives the same part; plain auto refuses that array.
rerun_task() {
    w=$out/work
    say "the documented rerun: part 3 removed, task 3 submitted again alone"
    mv "$w/g/parts/bert.part-3-of-8.safetensors" "$w/part-3.saved" || return 1
    check "merge names the missing shard 3/8" sh -c 'cd "$1" && ! "$2" golden merge --out-file merged.safetensors \
        g/parts/bert.part-*-of-8.safetensors 2>merge.err && grep -q "missing: 3/8" merge.err' - "$w" "$cli"
    sed 's|--shard auto |--shard auto/8 |' "$w/shards.sh" >"$w/rerun.sh"
    PATH="$(dirname "$cli"):$PATH"
    export PATH
    check "control: shards.sh as it is (plain auto) fails as task 3 alone, refused by refenc" \
        sh -c 'cd "$1" && ! timeout 60 sbatch --quiet --wait --array=3 shards.sh &&
            grep -q "auto needs a whole array" slurm-*_3.out' - "$w"
    check "rerun.sh (--shard auto/8) completes as task 3 alone" \
        sh -c 'cd "$1" && grep -q -- "--shard auto/8 " rerun.sh && timeout 60 sbatch --quiet --wait --array=3 rerun.sh' - "$w"
    check "the part it wrote is the lost one, byte for byte" \
        cmp "$w/g/parts/bert.part-3-of-8.safetensors" "$w/part-3.saved"
}

# The job lines of the array job $1 and of the merge job $2, into
# $out/array.txt and $out/merge.txt, from $out/jobs.txt (jobs_settled).
array_lines() {
    grep "ArrayJobId=$1 " "$out/jobs.txt" | grep 'ArrayTaskId=' >"$out/array.txt"
    grep "^JobId=$2 " "$out/jobs.txt" >"$out/merge.txt"
}

# The recipe submitted again, as it stands, into $out/work; sets merge_id
# and array_id (the job the merge waits for).  $1: a directory put first on
# PATH, or ''.
submit_recipe() {
    (cd "$out/work" && PATH="${1:+$1:}$(dirname "$cli"):$PATH" sh -e "$out/recipe.sh") >"$out/recipe.log" 2>&1
    merge_id=$(sed -n 's/^Submitted batch job \([0-9][0-9]*\)$/\1/p' "$out/recipe.log")
    array_id=$(scontrol -o show job "$merge_id" 2>/dev/null | sed -n 's/.*Dependency=afterok:\([0-9][0-9]*\).*/\1/p')
    check "the recipe submitted the array $array_id and the merge job $merge_id" \
        test -n "$merge_id" -a -n "$array_id"
}

# A task killed midway, then the same recipe run again and nothing else
# (docs/certify.md, "Long runs"): task 5 of a fresh run is killed with
# SIGKILL while it runs; the merge job never starts, and merge by hand names
# shard 5 as missing.  The recipe submitted again as it stands completes:
# tasks 1-4 and 6-8 find their parts whole and keep them (not written
# again), task 5 computes its own, the merge job joins them, and the case is
# the unsharded one (verify_merged).  To catch task 5 while it runs, a
# `refenc` put first on PATH for that run only stops task 5 (SIGSTOP) when
# it starts, before it execs refenc; the check kills it there.
kill_and_rerun() {
    w=$out/work
    say "a task killed midway: a fresh run of the recipe, task 5 killed with SIGKILL while it runs"
    rm -rf "$w/g" "$w"/slurm-*.out "$w/task5.pid" "$w/shim"
    mkdir -p "$w/shim"
    printf '#!/bin/sh\nif [ "${SLURM_ARRAY_TASK_ID:-}" = 5 ] && [ "$1" = golden ]; then\n' >"$w/shim/refenc"
    printf '    echo $$ >"%s/task5.pid"\n    kill -STOP $$\nfi\nexec "%s" "$@"\n' "$w" "$cli" >>"$w/shim/refenc"
    chmod +x "$w/shim/refenc"
    submit_recipe "$w/shim" || return 1
    check "task 5 is running (stopped where the shim stops it)" poll 60 sh -c \
        '[ -s "$1" ] && grep -q "^State:.*stopped" "/proc/$(cat "$1")/status"' - "$w/task5.pid" || return 1
    kill -9 "$(cat "$w/task5.pid")"
    check "the jobs ended within $wait_s s" poll "$wait_s" jobs_settled
    array_lines "$array_id" "$merge_id"
    check "task 5 failed, the 7 others completed" sh -c 'grep "ArrayTaskId=5 " "$1" | grep -q JobState=FAILED &&
        [ "$(grep -v "ArrayTaskId=5 " "$1" | grep -c JobState=COMPLETED)" -eq 7 ]' - "$out/array.txt"
    check "the merge job waits for good (DependencyNeverSatisfied)" \
        grep -q 'JobState=PENDING.*Reason=DependencyNeverSatisfied' "$out/merge.txt"
    scancel "$merge_id"
    check "merge by hand names the missing shard 5/8 and writes nothing" sh -c 'cd "$1" && ! "$2" golden merge \
        --out-file merged.safetensors g/parts/bert.part-*-of-8.safetensors 2>merge.err &&
        grep -q "missing: 5/8" merge.err && [ ! -e merged.safetensors ]' - "$w" "$cli"
    sed 's/^/    | /' "$w/merge.err"
    stat -c '%n %i %.9Y' "$w"/g/parts/bert.part-*-of-8.safetensors >"$out/kept.txt"
    say "the same recipe submitted again, as it stands"
    submit_recipe '' || return 1
    check "the jobs ended within $wait_s s" poll "$wait_s" jobs_settled
    array_lines "$array_id" "$merge_id"
    check "the rerun's 8 tasks completed" test "$(grep -c JobState=COMPLETED "$out/array.txt")" -eq 8
    check "its merge job completed" grep -q JobState=COMPLETED "$out/merge.txt"
    stat -c '%n %i %.9Y' "$w"/g/parts/bert.part-*-of-8.safetensors | grep -v part-5-of-8 >"$out/after.txt"
    check "the 7 parts there were kept, not written again (the same inode and time)" cmp "$out/kept.txt" "$out/after.txt"
    rm -f "$w/unsharded.safetensors" "$w/whole-stack.safetensors"
    verify_merged "$w" 8
}

if start_cluster; then
    say "the model's files (scripts/shard-fixture.sh) in $out/work"
    sh scripts/shard-fixture.sh "$cli" "$out/work" && run_recipe && verify_merged "$out/work" 8 && rerun_task &&
        kill_and_rerun
else
    dump_logs
fi
teardown
summary
