#!/usr/bin/env bash
# How the kernel schedules the daemon (docs/design.md §4.4, --sched): by default
# SCHED_DEADLINE (policy 6 in /proc/PID/sched) with the reservation the log
# names; --sched fifo runs it SCHED_FIFO 10 and --cpu pins it; --sched
# normal leaves it a normal task. Refused, changing nothing: --cpu with the
# default deadline (the kernel never pins a deadline task), a --sched word
# that is not a policy, the old --rt. On an idle attachment the wire time
# lost by running late (lost_wire_ns, status's lost_wire_share) is 0.
# Whether the policy holds a busy host's rate is bench/run_dp_realtime.sh's.
# Exit 77 = skipped (not root, not built, or the kernel refuses deadline
# tasks here: no CAP_SYS_NICE, a restricted cpuset).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../../lab/netns.sh"
psp_require test_sched "$PSPXDP" -- python3 nsenter

NET=$(psp_random_net)
psp_lab_begin sch $NET
P() { $N "$PSPXDP" "$@"; }
LOG=/run/pspxdp/$DEV.log
# policy PID: the policy number of PID's main thread (the loop).
policy() { sed -n 's/^policy *: *//p' "/proc/$1/sched"; }
# the daemon's status -j, once its first once-a-second figures are published.
published() { psp_status_is $DEV 'd["daemon"]["accounting_checks"] >= 1'; }

psp_check "attach (default --sched)" P attach $DEV --line-rate 1gbit || exit 1
PID=$(psp_daemon_pid $DEV)
psp_check "the daemon logs its scheduling" psp_wait_for 10 grep -q 'scheduling: ' "$LOG"
if grep -q 'cannot run SCHED_DEADLINE: .*\(EPERM\|EBUSY\|Operation not permitted\|Device or resource busy\)' "$LOG"; then
    echo "test_sched: the kernel refuses SCHED_DEADLINE here: $(grep 'cannot run' "$LOG")" >&2
    P detach $DEV >/dev/null 2>&1
    exit 77
fi
psp_check "default: SCHED_DEADLINE (policy $(policy "$PID"))" test "$(policy "$PID")" = 6
psp_check "the log names the reservation" \
    grep -q 'scheduling: SCHED_DEADLINE, 150 us of every 500 us reserved' "$LOG"
psp_check "idle: status published" psp_wait_for 10 published
P status $DEV -j >"$TMP/idle.json"
P status $DEV >"$TMP/idle.txt"
psp_check "idle: lost_wire_ns 0, lost_wire_ppm 0, lost_wire_share 0" psp_json_is "$TMP/idle.json" \
    'd["daemon"]["lost_wire_ns"] == 0 and d["daemon"]["lost_wire_ppm"] == 0 and d["lost_wire_share"] == 0'
psp_check "idle: status text says none lost" \
    grep -q "lost 0.00 % of the wire's time in the last second" "$TMP/idle.txt"
psp_check "detach" P detach $DEV

psp_check "attach --sched fifo --cpu 0" P attach $DEV --line-rate 1gbit --sched fifo --cpu 0
PID=$(psp_daemon_pid $DEV)
psp_check "fifo: SCHED_FIFO (policy $(policy "$PID")), priority 10" \
    bash -c "[[ \$(sed -n 's/^policy *: *//p' /proc/$PID/sched) == 1 && \$(awk '{print \$18}' /proc/$PID/stat) == -11 ]]"
psp_check "fifo: pinned to CPU 0" grep -q '^Cpus_allowed_list:[[:space:]]*0$' "/proc/$PID/status"
psp_check "detach" P detach $DEV

psp_check "attach --sched normal" P attach $DEV --line-rate 1gbit --sched normal
PID=$(psp_daemon_pid $DEV)
psp_check "normal: SCHED_OTHER (policy $(policy "$PID"))" test "$(policy "$PID")" = 0
psp_check "detach" P detach $DEV

# refused DESCRIPTION MESSAGE ARGS...: exit 2, MESSAGE, and nothing attached.
refused() {
    local what=$1 msg=$2 rc
    shift 2
    P attach $DEV --line-rate 1gbit "$@" >"$TMP/out" 2>&1
    rc=$?
    psp_check "$what: refused (exit $rc)" test $rc = 2
    psp_check "$what: says why" grep -qF -- "$msg" "$TMP/out"
    psp_check "$what: nothing attached" bash -c "! $N $PSPXDP status $DEV >/dev/null 2>&1"
}
refused "--cpu 0 with deadline" \
    "attach: --cpu 0 with --sched deadline: the kernel runs a deadline task on any CPU" --cpu 0
refused "--sched rt" 'option --sched: "rt" is not one of normal, fifo or deadline' --sched rt
refused "--rt" "unknown option --rt" --rt
psp_finish
