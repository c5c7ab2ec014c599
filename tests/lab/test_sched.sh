#!/usr/bin/env bash
# How the kernel schedules the daemon (--sched, design §4.4): by default
# (auto) SCHED_DEADLINE (policy 6 in /proc/PID/sched) with the reservation
# the log names; --sched fifo runs it SCHED_FIFO 10 and --cpu pins it;
# --sched normal leaves it a normal task. attach says on stdout which
# scheduling the daemon got and status shows it (text and JSON). Where the
# kernel cannot grant it (no CAP_SYS_NICE: setpriv --bounding-set=-sys_nice;
# confined to one CPU: taskset -c 0, where deadline needs every CPU of its
# cpuset) the default falls back to a normal task and attach says so and
# why; a policy named (--sched deadline|fifo) is refused, exit 1, nothing
# left behind. Refused, changing nothing: --cpu with deadline or auto (the
# kernel never pins a deadline task), a --sched word that is not a policy,
# the old --rt. On a host of 2 CPUs or fewer attach notes what the pacer
# shares there. On an idle attachment the wire time lost by running late
# (lost_wire_ns, status's lost_wire_share) is 0.
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
host_view() { $N ip -o link show | cut -d' ' -f2; $N tc qdisc show dev $DEV; $N tc filter show dev $DEV egress; }
BEFORE=$(host_view)
LOG=/run/pspxdp/$DEV.log
# policy PID: the policy number of PID's main thread (the loop).
policy() { sed -n 's/^policy *: *//p' "/proc/$1/sched"; }
# the daemon's status -j, once its first once-a-second figures are published.
published() { psp_status_is $DEV 'd["daemon"]["accounting_checks"] >= 1'; }

psp_check "attach (default --sched)" bash -c "$N $PSPXDP attach $DEV --line-rate 1gbit >$TMP/attach.out" || exit 1
PID=$(psp_daemon_pid $DEV)
psp_check "the daemon logs its scheduling" psp_wait_for 10 grep -q 'scheduling: ' "$LOG"
if grep -q 'cannot run SCHED_DEADLINE: .*\(EPERM\|EBUSY\|Operation not permitted\|Device or resource busy\)' "$LOG"; then
    echo "test_sched: the kernel refuses SCHED_DEADLINE here: $(grep 'cannot run' "$LOG")" >&2
    P detach $DEV >/dev/null 2>&1
    exit 77
fi
psp_check "default: SCHED_DEADLINE (policy $(policy "$PID"))" test "$(policy "$PID")" = 6
psp_check "the log names the reservation" \
    grep -q 'scheduling: SCHED_DEADLINE, 300 us of every 500 us reserved and no more' "$LOG"
psp_check "attach says the scheduling on stdout" grep -qx \
    'pspxdp: daemon scheduling: deadline (SCHED_DEADLINE): 300 us of every 500 us reserved' \
    "$TMP/attach.out"
if (($(nproc) <= 2)); then
    psp_check "a small host: attach says so, once" test "$(grep -c "^pspxdp: note: a small host ($(nproc) CPUs): " "$TMP/attach.out")" = 1
else
    psp_check "not a small host: no note" bash -c "! grep -q 'note: a small host' $TMP/attach.out"
fi
psp_check "status shows it" bash -c "$N $PSPXDP status $DEV | grep -q '^scheduling: deadline (SCHED_DEADLINE): 300 us of every 500 us'"
psp_check "status -j shows it" psp_status_is $DEV \
    'd["scheduling"] == {"policy": "deadline", "priority": 0, "runtime_ns": 300000, "period_ns": 500000, "reclaim": False}'
psp_check "idle: status published" psp_wait_for 10 published
P status $DEV -j >"$TMP/idle.json"
P status $DEV >"$TMP/idle.txt"
psp_check "idle: lost_wire_ns 0, lost_wire_ppm 0, lost_wire_share 0" psp_json_is "$TMP/idle.json" \
    'd["daemon"]["lost_wire_ns"] == 0 and d["daemon"]["lost_wire_ppm"] == 0 and d["lost_wire_share"] == 0'
psp_check "idle: status text says none lost" \
    grep -q "lost 0.00 % of the wire's time in the last second" "$TMP/idle.txt"
psp_check "detach" P detach $DEV

psp_check "attach --reclaim" P attach $DEV --line-rate 1gbit --reclaim
psp_check "--reclaim: the daemon reclaims" psp_status_is $DEV \
    'd["scheduling"]["policy"] == "deadline" and d["scheduling"]["reclaim"]'
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
psp_check "normal: status -j says so" psp_status_is $DEV 'd["scheduling"]["policy"] == "normal"'
psp_check "detach" P detach $DEV

# Nothing of DEV's attachment left: no pins, no run files but the lock, and
# the namespace's links and DEV's qdiscs and filters as before any attach.
clean() {
    ! ls /sys/fs/bpf/pspxdp/$DEV >/dev/null 2>&1 &&
        [[ -z $(ls /run/pspxdp/$DEV.* 2>/dev/null | grep -v '\.lock$') ]] &&
        [[ "$(host_view)" == "$BEFORE" ]]
}
# Where the kernel cannot grant deadline (WRAP... runs attach): the default
# falls back to a normal task and says why; a policy named is refused, exit 1.
cannot() {
    local what=$1 why=$2 rc
    shift 2
    $N "$@" "$PSPXDP" attach $DEV --line-rate 1gbit >"$TMP/out" 2>&1
    rc=$?
    psp_check "$what, default: attached (exit $rc)" test $rc = 0
    psp_check "$what, default: says it runs normal, and why" grep -qF \
        "pspxdp: daemon scheduling: normal (SCHED_OTHER): a busy host delays the pacer, not deadline: the kernel refused it ($why" \
        "$TMP/out"
    PID=$(psp_daemon_pid $DEV)
    psp_check "$what, default: SCHED_OTHER (policy $(policy "$PID"))" test "$(policy "$PID")" = 0
    psp_check "$what, default: status -j says normal" psp_status_is $DEV 'd["scheduling"]["policy"] == "normal"'
    psp_check "$what, default: the log says why" grep -qF "warning: cannot run SCHED_DEADLINE" "$LOG"
    psp_check "$what: detach" P detach $DEV
    local sched
    for sched in deadline fifo; do
        [[ $sched == fifo && $why == confined* ]] && continue # fifo can be pinned
        $N "$@" "$PSPXDP" attach $DEV --line-rate 1gbit --sched $sched >"$TMP/out" 2>&1
        rc=$?
        psp_check "$what, --sched $sched: refused (exit $rc)" test $rc = 1
        psp_check "$what, --sched $sched: one line, says why" bash -c \
            "[[ \$(wc -l <$TMP/out) == 1 ]] && grep -qF 'attach: --sched $sched cannot be had here: $why' $TMP/out"
        psp_check "$what, --sched $sched: nothing left behind" clean
    done
}
if command -v setpriv >/dev/null; then
    cannot "without CAP_SYS_NICE" "no CAP_SYS_NICE" setpriv --bounding-set=-sys_nice
else
    echo "test_sched: no setpriv: the CAP_SYS_NICE cases are not run"
fi
if command -v taskset >/dev/null && (($(nproc) >= 2)); then
    cannot "on one CPU" "confined to 1 of $(nproc) CPUs" taskset -c 0
    # fifo can be pinned: had.
    psp_check "on one CPU, --sched fifo: attached" $N taskset -c 0 "$PSPXDP" attach $DEV --line-rate 1gbit --sched fifo
    psp_check "on one CPU, --sched fifo: status -j says fifo" psp_status_is $DEV 'd["scheduling"]["policy"] == "fifo"'
    psp_check "detach" P detach $DEV
else
    echo "test_sched: no taskset or one CPU: the confined cases are not run"
fi

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
refused "--cpu 0 with the default" \
    "attach: --cpu 0 with --sched auto: the kernel runs a deadline task on any CPU" --cpu 0
refused "--cpu 0 with deadline" \
    "attach: --cpu 0 with --sched deadline: the kernel runs a deadline task on any CPU" --cpu 0 --sched deadline
refused "--reclaim with fifo" "attach: --reclaim with --sched fifo: only a deadline task reclaims" \
    --sched fifo --reclaim
refused "--sched rt" 'option --sched: "rt" is not one of auto, normal, fifo or deadline' --sched rt
refused "--rt" "unknown option --rt" --rt
psp_finish
