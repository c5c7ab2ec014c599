#!/usr/bin/env bash
# Real time on a busy host (docs/design.md §4.4): does the pacer hold its
# classes' rates in real time when every core is busy, with no flag? In one
# run, for both clocks (clockless: what a veth gets, frames released at
# their real-time due times; byte: --clock byte --gap-horizon inf, the
# paper's rule, every idle byte a gap frame), with and without a CPU hog (a
# busy loop `sh -c 'while :; do :; done'` per core at normal priority,
# bounded in time and always killed), each daemon set-up in turn:
#   --sched normal        the old default: a normal task
#   default               the new default: SCHED_DEADLINE with reclaim
#   --sched fifo --cpu C  the old fix: pinned, SCHED_FIFO
# Table 1 (busy host): three paced UDP classes (--rates, default 500, 250
# and 50 Mbit/s, each offered 1.3x, the senders SCHED_FIFO 1) on the
# 1 Gbit/s lab wire. Per
# set-up: underrun time (the wire idle while a class was backlogged, byte
# clock) and lost wire time (lost_wire_ns: underruns and late wake-ups) in
# % of the interval, frames TC passed unpaced (tc_passed, and the
# classifier's pacer_dead), each class's real-time rate (its L2 bytes sent
# over wall-clock time) in % of its target with the smallest backlog
# sampled (0: the senders, not the pacer, fell behind), and the daemon's
# CPU (utime + stime, % of one core). Goal with no flag: every class within
# 1 % of its rate clockless, 0.1 % and underrun <= 0.1 % on the byte clock,
# 0 frames unpaced.
# Table 2 (cost, no hog): the daemon's CPU with one class at 20, 100 and 500
# Mbit/s (offered 1.3x), --sched normal against the default, both clocks.
#
#   sudo bench/run_dp_realtime.sh [--seconds S] [--cpu C] [--modes "clockless byte"]
#                                 [--rates "500 250 50"] [--only busy|cpu] [--no-hog]
#                                 [--json]
#
# A benchmark: it prints figures and fails only when it cannot run. Run it
# alone on the machine (flock /work/wt/measure.lock ... on the shared VM).
set -u
SECS=10
CPU=1
HOGS="0 1"
JSON=0
MODES="clockless byte"
ONLY=
RATES="500 250 50"
while (($#)); do
    case $1 in
    --seconds) SECS=${2:?}; shift 2 ;;
    --cpu) CPU=${2:?}; shift 2 ;;
    --no-hog) HOGS=0; shift ;;
    --modes) MODES=${2:?}; shift 2 ;;
    --only) ONLY=${2:?}; shift 2 ;;
    --rates) RATES=${2:?}; shift 2 ;;
    --json) JSON=1; shift ;;
    -h | --help) sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run_dp_realtime: unknown argument \"$1\"" >&2; exit 2 ;;
    esac
done
[[ $SECS =~ ^[0-9]+$ ]] && ((SECS >= 2 && SECS <= 120)) || { echo "--seconds: 2..120" >&2; exit 2; }
for m in $MODES; do
    [[ $m == clockless || $m == byte ]] || { echo "run_dp_realtime: --modes \"$m\": clockless or byte" >&2; exit 2; }
done
[[ $RATES =~ ^[0-9]+( [0-9]+){0,2}$ ]] || { echo "run_dp_realtime: --rates: 1 to 3 Mbit/s figures" >&2; exit 2; }
[[ -z $ONLY || $ONLY == busy || $ONLY == cpu ]] || { echo "run_dp_realtime: --only busy or cpu" >&2; exit 2; }
mode_args() { # MODE: its attach arguments
    case $1 in
    clockless) echo "--clock none" ;;
    byte) echo "--clock byte --gap-horizon inf" ;;
    esac
}
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lab/netns.sh"
psp_require run_dp_realtime "$PSPXDP" "$TRAFFIC" -- ip python3 nsenter timeout taskset chrt
NET=${BENCH_NET:-10.89.0} # BENCH_TAG, BENCH_NET: namespaces' tag, the wire's /24
psp_lab_begin "${BENCH_TAG:-brt}" "$NET"
RESULTS=$TMP/results.jsonl
say() { ((JSON)) || echo "$*" >&2; }

BUSY=()
i=0
for r in $RATES; do
    ((++i))
    BUSY+=("1:$i ${r}mbit $((5000 + i)) $((r * 13 / 10))mbit")
done
HOG_PIDS=()
stop_hogs() {
    local p
    for p in "${HOG_PIDS[@]}"; do kill "$p" 2>/dev/null; done
    HOG_PIDS=()
}
trap 'stop_hogs; psp_end' EXIT

# measure TABLE LABEL MODE HOG CLASSES-VAR ATTACH-ARGS...: one set-up, S
# seconds, a JSON line into $RESULTS.
measure() {
    local table=$1 label=$2 mode=$3 hog=$4 c id rate port offered k
    local -n classes=$5
    shift 5
    # shellcheck disable=SC2046 # (the mode's words)
    $N "$PSPXDP" attach $DEV --line-rate 1gbit $(mode_args "$mode") "$@" >>"$TMP/attach.log" 2>&1 || {
        echo "run_dp_realtime: attach $* failed: $(tail -3 "$TMP/attach.log")" >&2
        exit 1
    }
    for c in "${classes[@]}"; do
        read -r id rate port offered <<<"$c"
        $N "$PSPXDP" class set $DEV "$id" "$rate" &&
            $N "$PSPXDP" filter add $DEV proto udp dport "$port" classid "$id" || exit 1
    done
    for c in "${classes[@]}"; do
        read -r id rate port offered <<<"$c"
        # SCHED_FIFO 1: the senders are the harness, not the contest; they
        # must keep the classes backlogged while the hog (and, on a shared
        # machine, everything else) competes with the daemon. nice -5 was not
        # enough at a load of 20. They sleep 200 us a round (psp_traffic), so
        # they cannot take a core whole; a deadline or fifo daemon preempts them.
        $N timeout $((SECS + 20)) chrt -f 1 "$TRAFFIC" send "$NET.2" "$port" --rate "$offered" \
            --size 1472 --seconds $((SECS + 8)) >"$TMP/send.$port.json" 2>&1 &
        PIDS+=($!)
    done
    if ((hog)); then
        for ((k = 0; k < $(nproc); ++k)); do
            timeout $((SECS + 10)) taskset -c $k sh -c 'while :; do :; done' &
            HOG_PIDS+=($!)
        done
    fi
    sleep 3 # backlogged from here on
    python3 "$HERE/dp_realtime.py" sample "$N" "$PSPXDP" "$DEV" "$SECS" "$table" "$label" "$mode" "$hog" \
        "$(psp_daemon_pid $DEV)" >>"$RESULTS"
    stop_hogs
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
    wait 2>/dev/null
    PIDS=()
    for c in "${classes[@]}"; do # what the senders managed, for a look (--keep)
        read -r id rate port offered <<<"$c"
        echo "$label $mode hog $hog $id: $(cat "$TMP/send.$port.json")" >>"$TMP/senders.log"
    done
    # detach removes the daemon's log: keep it (--keep, PSP_KEEP=1)
    { echo "== $label $mode hog $hog"; cat "/run/pspxdp/$DEV.log"; } >>"$TMP/daemon.log" 2>/dev/null
    $N "$PSPXDP" detach $DEV >>"$TMP/attach.log" 2>&1
}

say "real time on a busy host: ${SECS}s per set-up, clocks: $MODES, hog: $HOGS; $(uptime)"
if [[ $ONLY != cpu ]]; then
    for mode in $MODES; do
        for hog in $HOGS; do
            say "busy: $mode, hog $hog"
            measure busy "--sched normal" "$mode" "$hog" BUSY --sched normal
            measure busy "default" "$mode" "$hog" BUSY
            measure busy "--sched fifo --cpu $CPU" "$mode" "$hog" BUSY --sched fifo --cpu "$CPU"
        done
    done
fi
if [[ $ONLY != busy ]]; then
    for mode in $MODES; do
        for r in 20 100 500; do
            # shellcheck disable=SC2034 # (measure's CLASSES-VAR)
            ONE=("1:1 ${r}mbit 5001 $((r * 13 / 10))mbit")
            say "cpu: $mode, ${r} Mbit/s"
            measure cpu "--sched normal" "$mode" 0 ONE --sched normal
            measure cpu "default" "$mode" 0 ONE
        done
    done
fi

python3 "$HERE/dp_realtime.py" report "$RESULTS" "$JSON" "$(uptime)" "$RATES"
