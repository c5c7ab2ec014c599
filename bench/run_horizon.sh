#!/usr/bin/env bash
# The gap horizon and the clockless mode measured (docs/design.md §4.5), on the lab's
# 1 Gbit/s veth wire between two network namespaces. Prints tables; fails
# only when it cannot run.
#
# A. pspxdp alone, the same offered load per row, three ways:
#      H=inf      --clock byte --gap-horizon inf   (the paper's rule)
#      H=50us     --clock byte --gap-horizon 50us  (the default on a NIC)
#      clockless  --clock none                     (the default on a veth)
#    for one 20 Mbit/s class (offered 25) and the paper's 5-class mix
#    (500/300/100/50/20 Mbit/s, each offered 20 % more). Per row: daemon
#    CPU (utime + stime of its process over the run, in % of one core),
#    PAUSE frames per second and their share of the wire's time while
#    sending (daemon counters), real-time and byte-clock burstiness at the
#    class rate (`pspxdp analyze`; the byte clock is the hybrid one, real
#    time across idle periods), rate error in real time and on that hybrid
#    clock (what tests/lab/test_horizon.sh prints but, being this machine's
#    timing, does not judge), late wake-ups and underruns (daemon counters).
#    Mix rows: the worst
#    class among those whose sender offered at least their rate (a sender
#    that falls short on a busy machine leaves its class idle); every class
#    is listed after the table.
# B. one flow at 10, 100 and 500 Mbit/s (offered 30 % more, at most
#    +200 Mbit/s): pspxdp clockless beside tbf (burst 2 MTU) and htb as the
#    root qdisc of the same veth. Per row: real-time burstiness at the target
#    rate, rate error, machine CPU (kernel time machine-wide + the daemon's
#    user time, in cores: other work on the machine adds to every row).
#
# C. the burst bound (docs/design.md §4.5): for bounds of 2, 3, 4 and 8 MTU, one flow
#    at 10, 100 and 500 Mbit/s (offered as in B), RUNS runs each: pspxdp
#    clockless with `attach --burst NmtU` beside tbf with a bucket of the
#    same size (N * 1518 B, stab overhead 4) on the same veth. Then the
#    three-class mix 333/77/21.5 Mbit/s (offered 1.3x; the 77 Mbit/s class
#    IPv6, the 21.5 Mbit/s one in random sizes, 60..1514-byte frames) beside
#    a greedy unclassified flow (600 Mbit/s offered, the default class),
#    pspxdp only.
#    The capture starts once the backlogs are built (0.5 s in), so the rate
#    is the steady one (a full bucket at the start, tbf's and pspxdp's
#    alike, is not in it). Per row: real-time burstiness at the target, rate
#    error (worst of RUNS), machine CPU, the classes' late_lost_ns over the
#    measured interval (status before and after it).
#
#    --sched POLICY: pspxdp's daemon policy in C (normal, fifo or deadline;
#    default: the daemon's default, deadline). On a loaded machine a daemon
#    at normal priority waits for the CPU for milliseconds, which no bound
#    absorbs; tbf runs in softirq either way.
#
#    --bounds "N ...": C's bounds in MTU (default "2 3 4 8").
#    --rates "R ...": C's one-flow rates in Mbit/s (default "10 100 500").
#    --shapers "S ...": C's one-flow shapers, pspxdp and/or tbf (default both;
#    "": the mix alone).
#    --no-mix: C without the three-class mix.
#    BENCH_KEEP=DIR keeps each run's daemon status and sender report there.
#
#   sudo bench/run_horizon.sh [--seconds S] [--only A|B|C] [--runs N] [--sched POLICY] [--bounds "N ..."]
#                             [--rates "R ..."] [--shapers "S ..."] [--no-mix]
set -u
SECS=3
ONLY=
RUNS=3
SCHED=()
BOUNDS="2 3 4 8"
RATES="10 100 500"
SHAPERS="pspxdp tbf"
WITH_MIX=yes
while (($#)); do
    case $1 in
    --seconds) SECS=${2:?}; shift 2 ;;
    --only) ONLY=${2:?}; shift 2 ;;
    --runs) RUNS=${2:?}; shift 2 ;;
    --sched) SCHED=(--sched "${2:?}"); shift 2 ;;
    --bounds) BOUNDS=${2:?}; shift 2 ;;
    --rates) RATES=${2:?}; shift 2 ;;
    --shapers) SHAPERS=${2?}; shift 2 ;; # "": the mix alone
    --no-mix) WITH_MIX=no; shift ;;
    -h | --help) sed -n '2,56p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run_horizon: unknown argument \"$1\"" >&2; exit 2 ;;
    esac
done
[[ $SECS =~ ^[0-9]+$ ]] && ((SECS >= 1 && SECS <= 60)) || { echo "--seconds: 1..60" >&2; exit 2; }
[[ $RUNS =~ ^[0-9]+$ ]] && ((RUNS >= 1 && RUNS <= 10)) || { echo "--runs: 1..10" >&2; exit 2; }
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lab/netns.sh"
psp_require run_horizon "$PSPXDP" "$TRAFFIC" -- ip tc tcpdump python3 nsenter timeout
NET=${BENCH_NET:-10.88.0}                # BENCH_NET: the wire's /24 (sessions side by side)
NET6=${BENCH_NET6:-fd88::}               # BENCH_NET6: its IPv6 /64
psp_lab_begin "${BENCH_TAG:-bhz}" "$NET" # BENCH_TAG: the namespaces' tag
psp_wire_v6 "$SRC" "$DST" "$DEV" "$PEER" "$NET6" || { echo "run_horizon: no IPv6 on the wire" >&2; exit 1; }
SIZE=1472 # UDP payload: 1514-byte frames
ROWS=$TMP/rows.jsonl

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
kernel_ticks() { awk '/^cpu /{print $4 + $7 + $8, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9}' /proc/stat; }

# measure TABLE MODE LOAD SHAPER_SETUP FLOW...: FLOW = "PORT RATE OFFER [KIND]",
# KIND v6 (IPv6, full frames) or sizes=MIN-MAX (random UDP payloads).
# SHAPER_SETUP is a function run first (attach or tc), with the flows.
measure() {
    local table=$1 mode=$2 load=$3 setup=$4
    shift 4
    local flows=("$@") f port rate offer kind args=() pid=0 cap snd out=$TMP/run
    "$setup" "${flows[@]}" || { echo "run_horizon: $setup failed" >&2; exit 1; }
    for f in "${flows[@]}"; do
        read -r port rate offer kind <<<"$f"
        case $kind in
        v6) args+=(--flow "[${NET6}2]:$port:$offer,sizes=1452-1452") ;; # 1514-byte frames
        sizes=*) args+=(--flow "$NET.2:$port:$offer,$kind") ;;
        *) args+=(--flow "$NET.2:$port:$offer") ;;
        esac
    done
    [[ -f /run/pspxdp/$DEV.pid ]] && pid=$(cat /run/pspxdp/$DEV.pid)
    # C: the capture starts on the steady state (see the top).
    [[ $table != C ]] && { psp_capture "$D" $PEER "$out" 524288; cap=$PSP_CAPTURE_PID; }
    $N nice -n -5 timeout $((SECS + 10)) "$TRAFFIC" send "${args[@]}" --size $SIZE \
        --seconds $((SECS + 1)) >"$out.send.json" 2>/dev/null &
    snd=$!
    sleep 0.5 # backlogs build up
    [[ $table == C ]] && { psp_capture "$D" $PEER "$out" 524288; cap=$PSP_CAPTURE_PID; }
    [[ $pid != 0 ]] && $N "$PSPXDP" status $DEV -j >"$out.s0"
    local t0 c0 k0
    t0=$(date +%s.%N) c0=$(cpu_ticks $pid) k0=$(kernel_ticks)
    sleep "$SECS"
    local t1 c1 k1
    t1=$(date +%s.%N) c1=$(cpu_ticks $pid) k1=$(kernel_ticks)
    [[ $pid != 0 ]] && $N "$PSPXDP" status $DEV -j >"$out.s1"
    wait $snd
    sleep 0.2
    kill -INT $cap
    wait $cap 2>/dev/null
    if [[ -n ${BENCH_KEEP:-} ]]; then
        local keep
        keep=$BENCH_KEEP/$(date +%H%M%S)-${table}-${mode// /_}-$load
        mkdir -p "$BENCH_KEEP" && for f in "$out".s0 "$out".s1 "$out".send.json; do
            [[ -f $f ]] && cp "$f" "$keep.${f##*.}"
        done
    fi
    local fl=() tg=()
    for f in "${flows[@]}"; do
        read -r port rate offer <<<"$f"
        fl+=(--flow "p$port=proto udp dport $port")
        [[ $rate != - ]] && tg+=(--target "p$port=$rate") # -: unclassified, no target
    done
    "$PSPXDP" analyze "$out.pcap" --real-time "${fl[@]}" "${tg[@]}" -j >"$out.real.json"
    "$PSPXDP" analyze "$out.pcap" --line-rate 1gbit --idle-threshold 50us "${fl[@]}" "${tg[@]}" -j \
        >"$out.byte.json"
    python3 "$HERE/horizon_bench.py" row "$out" "$table" "$mode" "$load" "$t0" "$t1" "$c0" "$c1" "$k0" "$k1" "$pid" \
        $((SECS + 1)) >>"$ROWS"
    teardown_shaper
}

attach_mode() { # attach_mode ARGS... then classes for the flows
    local f port rate i=1
    $N "$PSPXDP" attach $DEV --line-rate 1gbit --sockets 2 "${MODE_ARGS[@]}" >/dev/null || return 1
    for f in "$@"; do
        read -r port rate _ <<<"$f"
        [[ $rate == - ]] && continue # unclassified: the default class
        $N "$PSPXDP" class set $DEV "1:$i" "$rate" >/dev/null || return 1
        $N "$PSPXDP" filter add $DEV proto udp dport "$port" classid "1:$i" >/dev/null || return 1
        i=$((i + 1))
    done
    sleep 0.2
}
# stab overhead 4: tc then counts a frame's FCS, as pspxdp's rates and the
# analyzer's targets do (else tc's "10mbit" is 0.26 % more in L2 bytes with
# FCS, and the burstiness at the target grows with the run).
tbf_mode() { # one flow: tbf at its rate, a bucket of TBF_BURST bytes (2 MTU: 3028 B)
    local port rate
    read -r port rate _ <<<"$1"
    $N tc qdisc replace dev $DEV root stab overhead 4 tbf rate "$rate" burst "${TBF_BURST:-3028}" \
        limit 262144
}
htb_mode() {
    local port rate
    read -r port rate _ <<<"$1"
    $N tc qdisc replace dev $DEV root handle 1: stab overhead 4 htb default 1 &&
        $N tc class add dev $DEV parent 1: classid 1:1 htb rate "$rate" ceil "$rate" 2>/dev/null
}
teardown_shaper() {
    $N "$PSPXDP" detach $DEV >/dev/null 2>&1
    $N tc qdisc del dev $DEV root >/dev/null 2>&1
    sleep 0.2
}

ONE=("5001 20mbit 25mbit")
MIX=("5001 500mbit 600mbit" "5002 300mbit 360mbit" "5003 100mbit 120mbit" "5004 50mbit 60mbit"
     "5005 20mbit 24mbit")
if [[ -z $ONLY || $ONLY == A ]]; then
    for mode in "H=inf" "H=50us" "clockless"; do
        case $mode in
        H=inf) MODE_ARGS=(--sched fifo --clock byte --gap-horizon inf) ;;
        H=50us) MODE_ARGS=(--sched fifo --clock byte --gap-horizon 50us) ;;
        clockless) MODE_ARGS=(--sched fifo --clock none) ;;
        esac
        echo "A: $mode, one 20 Mbit/s class" >&2
        measure A "$mode" "20M" attach_mode "${ONE[@]}"
        echo "A: $mode, the 5-class mix" >&2
        measure A "$mode" "mix" attach_mode "${MIX[@]}"
    done
fi
if [[ -z $ONLY || $ONLY == B ]]; then
    # Not --sched fifo: at 500 Mbit/s the clockless daemon spins from frame to frame,
    # and a SCHED_FIFO task that does leaves the fair tasks on its CPU
    # (ksoftirqd) only its naps: the kernel's fair server (6.12+, in place
    # of RT throttling) then stops it for 50 ms about once a second (-3 to
    # -5 % of the rate, measured with --sched fifo). tbf and htb run in softirq.
    MODE_ARGS=(--clock none)
    for r in 10 100 500; do
        offer=$((r * 13 / 10)); ((offer > r + 200)) && offer=$((r + 200))
        FLOW="5001 ${r}mbit ${offer}mbit"
        echo "B: ${r} Mbit/s: clockless, tbf, htb" >&2
        measure B "pspxdp clockless" "${r}M" attach_mode "$FLOW"
        measure B "tbf burst 2 MTU" "${r}M" tbf_mode "$FLOW"
        measure B "htb" "${r}M" htb_mode "$FLOW"
    done
fi
if [[ $ONLY == C || -z $ONLY ]]; then
    # The daemon's default policy unless --sched, as B.
    MIX3=("5001 333mbit 433mbit" "5002 77mbit 100mbit v6" "5003 21500kbit 28mbit sizes=18-1472"
          "5004 - 600mbit")
    for mtus in $BOUNDS; do
        [[ $mtus =~ ^[0-9]+$ ]] && ((mtus >= 1)) || { echo "--bounds: whole MTUs" >&2; exit 2; }
        MODE_ARGS=(--clock none --burst "${mtus}mtu" "${SCHED[@]}")
        TBF_BURST=$((mtus * 1518))
        for r in $RATES; do
            [[ $r =~ ^[0-9]+$ ]] && ((r >= 1 && r < 1000)) || { echo "--rates: Mbit/s, 1..999" >&2; exit 2; }
            offer=$((r * 13 / 10)); ((offer > r + 200)) && offer=$((r + 200))
            FLOW="5001 ${r}mbit ${offer}mbit"
            for run in $(seq "$RUNS"); do
                echo "C: bound ${mtus} MTU, ${r} Mbit/s, run $run: $SHAPERS" >&2
                for s in $SHAPERS; do
                    case $s in
                    pspxdp) measure C "pspxdp ${mtus}" "${r}M" attach_mode "$FLOW" ;;
                    tbf) measure C "tbf ${mtus}" "${r}M" tbf_mode "$FLOW" ;;
                    *) echo "--shapers: pspxdp, tbf" >&2; exit 2 ;;
                    esac
                done
            done
        done
        [[ $WITH_MIX == yes ]] && for run in $(seq "$RUNS"); do
            echo "C: bound ${mtus} MTU, the three-class mix, run $run" >&2
            measure C "pspxdp ${mtus}" "mix" attach_mode "${MIX3[@]}"
        done
    done
fi

[[ -n ${BENCH_KEEP:-} ]] && cp "$ROWS" "$BENCH_KEEP/rows-$(date +%H%M%S).jsonl"
python3 "$HERE/horizon_bench.py" report "$ROWS"
