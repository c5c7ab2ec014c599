#!/usr/bin/env bash
# The good neighbour (design §4.5): what the pacer costs the host's other
# work. A new user's first test: iperf3 UDP at a class's rate through the
# pacer to a receiver on the same host (the far end of the lab's veth, in a
# namespace), and beside it a CPU-bound job (a fixed amount of work, timed)
# at normal priority. Per clock (clockless; byte: --clock byte, its default
# gap horizon), class rate (--rates, default 20 100 500 Mbit/s) and set-up:
#   tbf          no pacer: tbf on DEV at the same rate (burst 3 MTU) paces it
#   SETUP...     pspxdp attach with these arguments ("default": none)
# it prints what the receiver got (L2 bytes with FCS of the datagrams it
# received over the sender's interval, % of the class rate: the figure a
# class's rate counts), the datagrams lost and the receiver's
# UdpRcvbufErrors (its socket buffer overflowed: the receiver did not run
# in time), what the sender managed (% of what it offered), the job's time
# against the same job alone just before (its loss, %), and the daemon's CPU
# (% of one core). The sender offers the class's rate in payload (iperf3
# -b R: 3 % above the class on the wire, as a user's first test does), one
# stream, 1472-byte datagrams, the receiver's default socket buffer.
#
#   sudo bench/run_good_neighbour.sh [--seconds S] [--rates "20 100 500"]
#        [--modes "clockless byte"] [--setup "LABEL=ATTACH ARGS"]... [--json]
#
# --setup may be given several times (LABEL=ARGS; "default=" is attach as
# a user runs it); without it: default and "--sched normal".
# A benchmark: it prints figures and fails only when it cannot run. On the
# shared VM run it under /work/wt/measure and record the load: real-time
# figures on a shared 2-core VM are noisy.
set -u
SECS=5
RATES="20 100 500"
MODES="clockless byte"
JSON=0
SETUPS=()
while (($#)); do
    case $1 in
    --seconds) SECS=${2:?}; shift 2 ;;
    --rates) RATES=${2:?}; shift 2 ;;
    --modes) MODES=${2:?}; shift 2 ;;
    --setup) SETUPS+=("${2:?}"); shift 2 ;;
    --json) JSON=1; shift ;;
    -h | --help) sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run_good_neighbour: unknown argument \"$1\"" >&2; exit 2 ;;
    esac
done
[[ $SECS =~ ^[0-9]+$ ]] && ((SECS >= 2 && SECS <= 60)) || { echo "--seconds: 2..60" >&2; exit 2; }
[[ $RATES =~ ^[0-9]+( [0-9]+)*$ ]] || { echo "run_good_neighbour: --rates: Mbit/s figures" >&2; exit 2; }
for m in $MODES; do
    [[ $m == clockless || $m == byte ]] || { echo "run_good_neighbour: --modes \"$m\": clockless or byte" >&2; exit 2; }
done
((${#SETUPS[@]})) || SETUPS=("default=" "--sched normal=--sched normal")
for s in "${SETUPS[@]}"; do
    [[ $s == *=* ]] || { echo "run_good_neighbour: --setup \"$s\": LABEL=ARGS" >&2; exit 2; }
done
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lab/netns.sh"
psp_require run_good_neighbour "$PSPXDP" -- ip tc python3 nsenter timeout iperf3 nstat
NET=${BENCH_NET:-10.88.7} # BENCH_TAG, BENCH_NET: namespaces' tag, the wire's /24
psp_lab_begin "${BENCH_TAG:-bgn}" "$NET"
RESULTS=$TMP/results.jsonl
say() { ((JSON)) || echo "$*" >&2; }
PORT=5201
LOAD0=$(uptime)

# The CPU-bound job: a fixed amount of work (~2 s alone on an idle core of
# the lab VM); prints its wall-clock seconds.
job() {
    python3 "$HERE/good_neighbour.py" job
}

# run LABEL MODE RATE JOB-ALONE [DAEMON-PID]: one set-up with traffic: the
# iperf3 server in DST, the job in the root namespace, the iperf3 client in
# SRC; one JSON line into $RESULTS.
run() {
    local label=$1 mode=$2 rate=$3 alone=$4 pid=${5:-0} spid jpid
    $D timeout $((SECS + 20)) iperf3 -s -1 -p $PORT -J >"$TMP/srv.json" 2>&1 &
    spid=$!
    psp_wait_for 5 bash -c "$D ss -ltn | grep -q ':$PORT '" || { echo "iperf3 server did not start" >&2; exit 1; }
    local e0
    e0=$($D nstat -az UdpRcvbufErrors | awk '/UdpRcvbufErrors/ {print $2}')
    local k0=0
    [[ $pid != 0 ]] && k0=$(awk '{print $14 + $15}' "/proc/$pid/stat")
    local t0=$EPOCHREALTIME
    $N timeout $((SECS + 15)) iperf3 -c "$NET.2" -p $PORT -u -b "${rate}M" -l 1472 -t "$SECS" -J \
        >"$TMP/cli.json" 2>&1 &
    local cpid=$!
    sleep 1 # the traffic flows before the job starts
    job >"$TMP/job" &
    jpid=$!
    wait $cpid
    local t1=$EPOCHREALTIME
    wait $jpid
    local k1=0
    [[ $pid != 0 ]] && k1=$(awk '{print $14 + $15}' "/proc/$pid/stat" 2>/dev/null || echo 0)
    wait $spid
    local e1
    e1=$($D nstat -az UdpRcvbufErrors | awk '/UdpRcvbufErrors/ {print $2}')
    python3 "$HERE/good_neighbour.py" row "$TMP/srv.json" "$TMP/cli.json" "$label" "$mode" "$rate" "$alone" \
        "$(cat "$TMP/job")" "$((e1 - e0))" "$k0" "$k1" "$t0" "$t1" "$(getconf CLK_TCK)" >>"$RESULTS"
}

say "good neighbour: ${SECS}s per set-up, clocks: $MODES, rates: $RATES; $LOAD0"
for mode in $MODES; do
    for r in $RATES; do
        alone=$(job)
        say "$mode ${r} Mbit/s: the job alone ${alone}s"
        # tbf: the kernel paces the same traffic (DEV's root qdisc), no pacer.
        $N tc qdisc replace dev $DEV root tbf rate "${r}mbit" burst 4542 latency 20ms
        run tbf "$mode" "$r" "$alone"
        $N tc qdisc del dev $DEV root
        for s in "${SETUPS[@]}"; do
            label=${s%%=*} args=${s#*=}
            # shellcheck disable=SC2086 # (the set-up's words)
            $N "$PSPXDP" attach $DEV --line-rate 1gbit --clock "${mode/clockless/none}" $args >>"$TMP/attach.log" 2>&1 || {
                echo "run_good_neighbour: attach $args failed: $(tail -3 "$TMP/attach.log")" >&2
                exit 1
            }
            $N "$PSPXDP" class set $DEV 1:1 "${r}mbit" >/dev/null &&
                $N "$PSPXDP" filter add $DEV proto udp dport $PORT classid 1:1 >/dev/null || exit 1
            run "$label" "$mode" "$r" "$alone" "$(psp_daemon_pid $DEV)"
            { echo "== $label $mode $r"; cat "/run/pspxdp/$DEV.log"; } >>"$TMP/daemon.log" 2>/dev/null
            $N "$PSPXDP" detach $DEV >>"$TMP/attach.log" 2>&1
        done
    done
done

python3 "$HERE/good_neighbour.py" report "$RESULTS" "$JSON" "$LOAD0" "$(uptime)"
