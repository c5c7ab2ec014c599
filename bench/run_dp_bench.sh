#!/usr/bin/env bash
# The data-path benchmark (docs/design.md §4.4, §4.6), side by side in one run:
#  1. frames per second: the pacer daemon flat out (real + PAUSE gap frames)
#     against a bare AF_XDP TX loop on the same veth and core;
#  2. CPU per paced Gbit/s on the 1 Gbit/s lab wire: pspxdp in both clock
#     modes (byte clock and clockless; default attach, and spinning) next to
#     tbf and htb at the same rate and offered load, at each --cpu-rates
#     rate; with --steer-rx also the sender apart from the veth peer's
#     receive (the split);
#  3. class scaling: 10 / 1,000 / 10,000 / 100,000 classes configured, a few
#     hundred of them backlogged: daemon fps and CPU flat out, RSS, and how
#     long attach, re-attach after kill -9, and detach take.
# A benchmark prints figures, it is not a test: it never fails on a figure,
# only when it cannot run.
#
#   sudo bench/run_dp_bench.sh [--seconds S] [--repeat N] [--cpu C] [--json]
#                              [--scale LIST] [--no-scale] [--no-fps] [--no-cpu]
#                              [--cpu-rates "R..."] [--no-spin] [--steer-rx]
#                              [--keep DIR] [--flows on|off] [--ports N]
#                              [--tree-depth D]
#
#   --seconds S     length of each measured interval (default 3, 1..30)
#   --repeat N      rounds of parts 1 and 2; medians are reported (default 3)
#   --cpu C         the core the bare loop and the daemon are pinned to
#                   (default 1); the senders run on the other cores (part 2:
#                   unpinned, as its deadline daemon is, unless --steer-rx)
#   --scale LIST    class counts of part 3 (default 10,1000,10000,100000)
#   --no-scale      skip part 3
#   --no-fps        skip part 1
#   --no-cpu        skip part 2 (frames per second alone: an A/B of a change)
#   --cpu-rates L   part 2: the class rates in Mbit/s (default "100 500");
#                   each offered 1.3x its rate, at most rate + 200
#   --no-spin       part 2: skip the spinning daemon's rows
#   --steer-rx      part 2: add the split: the daemon pinned to C with and
#                   without the veth peer's receive steered (RPS) to the
#                   other cores
#   --json          one JSON object on stdout instead of the tables
#   --keep DIR      keep the logs and the raw samples in DIR
#   --flows on|off  the classes' flows (docs/design.md §1.5; default on, as class set):
#                   run once each way for an A/B of what flow queuing costs
#   --ports N       parts 1 and 2: the sender's UDP flows (destination ports
#                   5001..5000+N, default 1), so that flows on has N flows
#   --tree-depth D  part 1: the backlogged class is a leaf at depth D of a
#                   class tree (design §3.12; default 1, flat): 1:1 rate =
#                   ceil 4gbit, then one class a level (1:2 .. 1:D-1 rate
#                   3gbit ceil 4gbit), the leaf 1:D rate 2gbit ceil 4gbit:
#                   half its frames guaranteed, half borrowed (1..8)
#
# Needs root, a build (BUILD_DIR, default build/), python3, ip, tc, taskset,
# bpftool. Everything lives in two network namespaces psp-bdp$$-s/-d joined by
# one veth wire and is removed on exit, even on failure; a watchdog ends the
# run after 20 minutes. Nothing touches the machine's own interfaces.
#
# How each figure is taken:
#  - bare: bench_dp_txloop, PAUSE frames of 1514 B (and 60 B), pinned to C.
#    Both it and the daemon flat out run SCHED_FIFO 10 pinned to C (chrt,
#    attach --sched fifo --cpu C): on a machine busy with other work the
#    comparison is then one of code paths, not of how much CPU each happened
#    to get.
#  - daemon flat out: line rate 100gbit, so the wire position runs away from
#    anything the daemon can emit and it never waits; one class backlogged.
#    Frames counted on the veth (tx_packets). ratio = daemon / bare 1514 B,
#    the round's bare runs before and after it averaged. The real frames go
#    to a MAC nobody has, so the receiving veth drops them as early as PAUSE
#    frames: the receiver's cost (on the sender's core) is alike per frame.
#  - CPU per paced Gbit/s: line 1gbit, one class at R Mbit/s (each of
#    --cpu-rates) offered min(1.3 R, R + 200) Mbit/s of UDP (psp_traffic,
#    unpinned as the daemon is; with --steer-rx on the other cores).
#    "machine" = busy time of all CPUs (/proc/stat) over the interval;
#    cores per paced Gbit/s = (machine - the round's idle baseline, an
#    interval with nothing running) / 100 / paced Gbit/s; "vs
#    tbf" = that figure over tbf's at the same rate in the same round
#    (median of the rounds' ratios). "daemon" = the daemon's time on a CPU
#    (/proc/PID/schedstat; utime+stime in the JSON too), which includes the
#    veth peer's receive: copy-mode AF_XDP TX hands each frame to the peer
#    inside the daemon's sendto() (netif_rx, then NET_RX in the same
#    task's softirq). Each round's paced rate is printed with the core the
#    daemon was seen on most (polled every 50 ms): a deadline daemon is
#    never pinned, and the core it lands on decides what it gets. Per rate
#    and clock (--clock byte: gap frames;
#    --clock none: clockless, what a veth gets by default) one attach: the
#    daemon as attach starts it (the default --sched deadline, which the
#    kernel never pins); "spin": the same daemon, same arguments (its
#    --clock too), restarted with --sleep-min 0. With --steer-rx, the same
#    daemon again restarted with --sched fifo --cpu C (a deadline task
#    cannot be pinned, and a steer away from an unpinned task means
#    nothing): "pinned", then "pinned, rx steered" with the peer's rx-0
#    rps_cpus (in the receiving namespace) set to every core but C, so the
#    peer's receive runs in the other cores' NET_RX softirq; rps_cpus is
#    restored after. Each split row records per CPU the frames its receive
#    processed (/proc/net/softnet_stat), NET_RX raised (/proc/softirqs) and
#    softirq time (/proc/stat, tick-sampled), so the table shows that the
#    steer moved the receive whatever the daemon's CPU did; the softirq
#    time on C with the receive there is the receive's own cost.
#    tbf/htb: the same sender, the qdisc on DEV at R (burst 32kb); paced
#    rate = DEV's L2 bytes (+FCS); pspxdp's = its class's tx_bytes.
#  - scaling: N classes at 500kbit (class set --file), 256 of them with a UDP
#    flow offered 1.2 Mbit/s each; line 100gbit, the daemon flat out.
set -u

usage() { sed -n '2,47p' "$0" | sed 's/^# \{0,1\}//'; }

SECS=3
REPEAT=3
CPU=1
JSON=0
SCALE=10,1000,10000,100000
KEEP=
CPU_PART=1
FPS_PART=1
CPU_RATES="100 500"
SPIN=1
STEER=0
FLOWS=on
PORTS=1
DEPTH=1
while (($#)); do
    case $1 in
    --seconds) SECS=${2:?}; shift 2 ;;
    --repeat) REPEAT=${2:?}; shift 2 ;;
    --cpu) CPU=${2:?}; shift 2 ;;
    --scale) SCALE=${2:?}; shift 2 ;;
    --no-scale) SCALE=; shift ;;
    --no-cpu) CPU_PART=0; shift ;;
    --no-fps) FPS_PART=0; shift ;;
    --cpu-rates) CPU_RATES=${2?}; shift 2 ;;
    --no-spin) SPIN=0; shift ;;
    --steer-rx) STEER=1; shift ;;
    --json) JSON=1; shift ;;
    --keep) KEEP=${2:?}; shift 2 ;;
    --flows) FLOWS=${2:?}; shift 2 ;;
    --ports) PORTS=${2:?}; shift 2 ;;
    --tree-depth) DEPTH=${2:?}; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "run_dp_bench: unknown argument \"$1\"" >&2; usage >&2; exit 2 ;;
    esac
done
[[ $SECS =~ ^[0-9]+$ ]] && ((SECS >= 1 && SECS <= 30)) || { echo "--seconds: 1..30" >&2; exit 2; }
[[ $REPEAT =~ ^[0-9]+$ ]] && ((REPEAT >= 1 && REPEAT <= 10)) || { echo "--repeat: 1..10" >&2; exit 2; }
[[ -z $SCALE || $SCALE =~ ^[0-9]+(,[0-9]+)*$ ]] || { echo "--scale: N[,N...]" >&2; exit 2; }
CPU_RATES=${CPU_RATES//,/ }
# Below the 1gbit line with room for the 84-byte gap frames of the byte clock.
for r in $CPU_RATES; do
    [[ $r =~ ^[0-9]+$ ]] && ((r >= 1 && r <= 900)) ||
        { echo "run_dp_bench: --cpu-rates: Mbit/s 1..900 each, not \"$r\"" >&2; exit 2; }
done
[[ -n ${CPU_RATES// /} ]] || { echo "run_dp_bench: --cpu-rates: at least one rate" >&2; exit 2; }
NCPU=$(nproc)
[[ $CPU =~ ^[0-9]+$ ]] && ((CPU < NCPU)) || { echo "--cpu: 0..$((NCPU - 1))" >&2; exit 2; }
# The senders' cores: every core but C (on a 1-core machine they share it).
OTHER_CPUS=$(seq -s, 0 $((NCPU - 1)) | tr , '\n' | grep -vx "$CPU" | paste -sd,)
[[ -n $OTHER_CPUS ]] || OTHER_CPUS=$CPU
((STEER && NCPU < 2)) && { echo "run_dp_bench: --steer-rx: needs a second core to steer to" >&2; exit 2; }

[[ $FLOWS == on || $FLOWS == off ]] || { echo "run_dp_bench: --flows: on or off, not \"$FLOWS\"" >&2; exit 2; }
[[ $PORTS =~ ^[0-9]+$ ]] && ((PORTS >= 1 && PORTS <= 1024)) || { echo "run_dp_bench: --ports: 1..1024" >&2; exit 2; }
[[ $DEPTH =~ ^[0-9]+$ ]] && ((DEPTH >= 1 && DEPTH <= 8)) || { echo "run_dp_bench: --tree-depth: 1..8" >&2; exit 2; }
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lab/netns.sh"
TXLOOP=${TXLOOP:-$BUILD_DIR/bench/bench_dp_txloop}
psp_require run_dp_bench "$PSPXDP" "$TRAFFIC" "$TXLOOP" -- ip tc taskset chrt python3 nsenter bpftool

TAG=psp-bdp$$
SRC=$TAG-s
DST=$TAG-d
DEV=bdp$$a
PEER=bdp$$b
N="nsenter --net=/run/netns/$SRC"
WORK=$(mktemp -d /tmp/psp-bdp.XXXXXX)
RESULTS=$WORK/results.jsonl
PIDS=()
WATCHDOG=

cleanup() {
    trap - EXIT INT TERM
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
    if [[ -n $WATCHDOG ]]; then # its sleep first (by parent pid), then itself
        pkill -P "$WATCHDOG" 2>/dev/null
        kill "$WATCHDOG" 2>/dev/null
    fi
    wait 2>/dev/null
    psp_teardown "$PSPXDP" $SRC $DST $DEV
    if [[ -n $KEEP ]]; then mkdir -p "$KEEP" && cp -a "$WORK"/. "$KEEP"/; fi
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
(sleep 1200 && echo "run_dp_bench: watchdog: 20 minutes, stopping" >&2 && kill -TERM $$) \
    </dev/null >/dev/null 2>&1 &
WATCHDOG=$!

die() { echo "run_dp_bench: $*" >&2; exit 1; }
say() { ((JSON)) || echo "$*" >&2; }

# Sampling (counters over one interval, as one JSON line) and the report:
# bench/dp_bench.py.
DP=(python3 "$HERE/dp_bench.py")

# --- the wire: two namespaces, one veth
psp_make_wire $SRC $DST $DEV $PEER 10.88.0 || die "cannot build the wire"
# The real frames' destination MAC is nobody's: the receiving veth drops them
# (PACKET_OTHERHOST) as early as PAUSE frames, see above.
ip -n $SRC neigh replace 10.88.0.2 lladdr 02:00:00:00:bd:01 dev $DEV nud permanent

daemon_pid() { cat /run/pspxdp/$DEV.pid 2>/dev/null; }
now() { date +%s.%N; }
since() { "${DP[@]}" since "$1"; }

attach() { # attach RATE CLOCK [ATTACH-ARGS...]
    # CLOCK byte or none, always explicit: parts 1 and 3 measure the
    # gap-frame data path (--clock byte; a veth would get the clockless mode
    # by default), part 2 both. The flat-out parts add --gap-horizon inf:
    # under the default horizon a daemon whose classes are due far apart on
    # a 100gbit line idles instead of running flat out.
    $N "$PSPXDP" attach $DEV --line-rate "$1" --clock "$2" "${@:3}" >>"$WORK/attach.log" 2>&1 ||
        die "attach failed: $(tail -5 "$WORK/attach.log")"
    [[ -n $(daemon_pid) ]] || die "no daemon pid"
}
# The flat-out daemon: pinned to C and SCHED_FIFO 10, as the bare loop.
PINNED=(--sched fifo --cpu "$CPU")

detach() { # (detach removes the daemon's log: keep a copy)
    cp /run/pspxdp/$DEV.log "$WORK/daemon.tmp" 2>/dev/null
    $N "$PSPXDP" detach $DEV >>"$WORK/attach.log" 2>&1
    cat "$WORK/daemon.tmp" >>"$WORK/daemon.log" 2>/dev/null
}

bare() { # bare LEN [BUDGET]: kind bareLEN, or bareLENbBUDGET with a TX budget
    local kind=bare$1${2:+b$2}
    # The daemon just detached released queue 0 of DEV; the kernel frees it
    # later (deferred, under rtnl_lock: 12 s seen on a busy machine), and
    # the loop waits for it up to 30 s (datapath::retry_busy) and says so.
    $N chrt -f 10 taskset -c "$CPU" "$TXLOOP" $DEV --seconds "$SECS" --len "$1" --cpu "$CPU" \
        ${2:+--budget "$2"} --json >"$WORK/bare.json" 2>"$WORK/bare.err" ||
        die "bare loop failed: $(cat "$WORK/bare.err")"
    "${DP[@]}" kind "$WORK/bare.json" "$kind" >>"$RESULTS"
}

# Part 1 and the split pin the senders to the cores the daemon is not pinned
# to. Part 2's unpinned daemon (deadline) goes where the kernel puts it: a
# sender pinned to "the other core" then shares the daemon's core whenever
# the kernel put it there, the other core idle (a round in three lost 21-26 %
# at 500 Mbit/s so, both clocks): there the senders run unpinned, as a host's
# applications do. SENDER_CPUS empty: unpinned.
SENDER_CPUS=$OTHER_CPUS
sender() { # sender PORT RATE SECONDS [PORTS]: psp_traffic on SENDER_CPUS
    local pin=()
    [[ -n $SENDER_CPUS ]] && pin=(taskset -c "$SENDER_CPUS")
    $N "${pin[@]}" "$TRAFFIC" send 10.88.0.2 "$1" --rate "$2" --size 1472 \
        --seconds "$3" --ports "${4:-1}" >/dev/null 2>>"$WORK/sender.err" &
    PIDS+=($!)
    SENDER=$!
}

sample() { # sample LABEL [EXTRA-JSON]: one interval (the daemon's, if one runs)
    PEER_NS=$DST PEER_DEV=$PEER "${DP[@]}" sample $SRC $DEV "$(daemon_pid)" "$SECS" "$PSPXDP" "$1" "${2:-{\}}" \
        >>"$RESULTS" || die "sampling failed"
}

paced_class() { # paced_class RATE: class 1:1 at RATE, UDP dport 5001.. (--ports) to it
    local dport=5001
    ((PORTS > 1)) && dport=5001-$((5000 + PORTS))
    $N "$PSPXDP" class set $DEV 1:1 "$1" flows $FLOWS >/dev/null || die "class set failed"
    $N "$PSPXDP" filter add $DEV proto udp dport $dport classid 1:1 >/dev/null || die "filter failed"
}

fps_class() { # part 1's class: flat at 4gbit, or the leaf 1:DEPTH of a tree (--tree-depth)
    ((DEPTH > 1)) || { paced_class 4gbit; return; }
    local i dport=5001
    ((PORTS > 1)) && dport=5001-$((5000 + PORTS))
    $N "$PSPXDP" class set $DEV 1:1 rate 4gbit ceil 4gbit >/dev/null || die "class set 1:1 failed"
    for ((i = 2; i < DEPTH; ++i)); do
        $N "$PSPXDP" class set $DEV 1:$i parent 1:$((i - 1)) rate 3gbit ceil 4gbit >/dev/null ||
            die "class set 1:$i failed"
    done
    $N "$PSPXDP" class set $DEV 1:$DEPTH parent 1:$((DEPTH - 1)) rate 2gbit ceil 4gbit flows $FLOWS >/dev/null ||
        die "class set 1:$DEPTH failed"
    $N "$PSPXDP" filter add $DEV proto udp dport $dport classid 1:$DEPTH >/dev/null || die "filter failed"
}

# Linux >= 6.17 lets one copy-mode sendto() send more than 32 descriptors
# (XDP_MAX_TX_SKB_BUDGET); the daemon then asks for 64. The ratio is taken
# against a bare loop that asks the same, and shown against the default too.
BUDGET=
$N "$TXLOOP" $DEV --seconds 0.1 --budget 64 >/dev/null 2>&1 && BUDGET=64

daemon_arg() { # daemon_arg OPT: OPT's value in the running daemon's argv
    local argv i
    mapfile -d '' -t argv <"/proc/$(daemon_pid)/cmdline"
    for ((i = 1; i + 1 < ${#argv[@]}; ++i)); do [[ ${argv[i]} == "$1" ]] && echo "${argv[i + 1]}" && return; done
}

respawn() { # respawn CLOCK OPT VALUE...: the daemon again, its own argv with each OPT set to VALUE
    # Stops the one running (by its pid) and runs it by hand with the
    # arguments attach gave it (argv[0] is "pspxdp": attach runs
    # /proc/self/exe under that name), so a row differs from the default
    # one only in what it names; CLOCK is checked, never changed.
    local pid argv i clock=$1
    shift
    pid=$(daemon_pid)
    mapfile -d '' -t argv <"/proc/$pid/cmdline"
    [[ " ${argv[*]} " == *" --clock $clock "* ]] || die "the daemon's arguments lack --clock $clock: ${argv[*]}"
    while (($#)); do
        for ((i = 1; i < ${#argv[@]}; ++i)); do [[ ${argv[i]} == "$1" ]] && break; done
        if ((i < ${#argv[@]})); then argv[i + 1]=$2; else argv+=("$1" "$2"); fi
        shift 2
    done
    kill -TERM "$pid"
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    $N "$PSPXDP" "${argv[@]:1}" >>"$WORK/daemon-respawn.log" 2>&1 &
    PIDS+=($!)
    for _ in $(seq 50); do [[ $(daemon_pid) == "$!" ]] && break; sleep 0.1; done
    [[ $(daemon_pid) == "$!" ]] || die "the daemon did not start again: $(tail -3 "$WORK/daemon-respawn.log")"
}

# The split (--steer-rx): the receiving peer's RPS mask, in its namespace's
# sysfs (ip netns exec mounts it; nsenter --net alone shows the host's).
RPS=/sys/class/net/$PEER/queues/rx-0/rps_cpus
steer() { # steer MASK: the peer's receive to MASK's cores (RPS); its old value undoes it
    ip netns exec $DST sh -c "echo $1 >$RPS" || die "cannot write $1 to $RPS in $DST"
}
if ((STEER)); then
    RPS0=$(ip netns exec $DST cat $RPS) || die "no $RPS in $DST"
    # Every core but C, in the kernel's bitmap format (32-bit words, commas).
    STEER_MASK=$("${DP[@]}" steer-mask "$NCPU" "$CPU")
fi

say "pspxdp data-path benchmark: $REPEAT rounds of ${SECS}s, daemon on CPU $CPU (senders on $OTHER_CPUS), flows $FLOWS, $PORTS UDP flow(s); $(uptime)"
for ((r = 1; r <= REPEAT; r++)); do
    SENDER_CPUS=$OTHER_CPUS # part 1: the daemon pinned to C
    # The machine's own load, for the CPU figures: each round's, as other
    # work on the machine comes and goes.
    sample idle "{\"round\": $r}"
    if ((FPS_PART)); then
        say "round $r/$REPEAT: bare loop 1514 B${BUDGET:+ (32 and $BUDGET a kick)}, 60 B"
        bare 1514
        [[ -z $BUDGET ]] || bare 1514 $BUDGET
        bare 60

        say "round $r/$REPEAT: daemon flat out (line 100gbit, one class 4gbit offered 1500mbit)"
        attach 100gbit byte "${PINNED[@]}" --gap-horizon inf
        fps_class
        sender 5001 1500mbit $((SECS + 4)) $PORTS
        sleep 1.5 # backlogged from here on
        sample daemon_max
        kill $SENDER 2>/dev/null; wait $SENDER 2>/dev/null
        detach
        bare 1514 # the round's reference: the mean of before and after
        [[ -z $BUDGET ]] || bare 1514 $BUDGET
    fi
    ((CPU_PART)) || continue

    SENDER_CPUS=
    ((STEER)) && SENDER_CPUS=$OTHER_CPUS # the split pins the daemon to C
    for rate in $CPU_RATES; do
        offered=$((rate * 13 / 10 < rate + 200 ? rate * 13 / 10 : rate + 200))
        extra="\"round\": $r, \"rate_mbit\": $rate, \"offered_mbit\": $offered"
        for clock in byte none; do
            say "round $r/$REPEAT: CPU per paced Gbit/s: pspxdp --clock $clock at ${rate}mbit offered ${offered}mbit"
            attach 1gbit $clock
            paced_class ${rate}mbit
            sender 5001 ${offered}mbit $(((1 + SPIN + 2 * STEER) * (SECS + 8) + 4)) $PORTS
            sleep 1.5 # backlogged from here on
            sample cpu_pspxdp "{$extra, \"clock\": \"$clock\"}"
            sleep_min=$(daemon_arg --sleep-min)
            [[ -n $sleep_min ]] || die "the daemon's arguments lack --sleep-min"
            if ((SPIN)); then # a daemon that spins whenever backlogged
                respawn $clock --sleep-min 0
                sleep 1.5
                sample cpu_pspxdp_spin "{$extra, \"clock\": \"$clock\"}"
            fi
            if ((STEER)); then # the split: pinned to C, the peer's receive there or elsewhere
                respawn $clock --sleep-min "$sleep_min" --sched fifo --cpu "$CPU"
                sleep 1.5
                sample cpu_pspxdp_pinned "{$extra, \"clock\": \"$clock\", \"rps_cpus\": \"$RPS0\"}"
                steer "$STEER_MASK"
                sleep 1
                sample cpu_pspxdp_steered "{$extra, \"clock\": \"$clock\", \"rps_cpus\": \"$STEER_MASK\"}"
                steer "$RPS0"
            fi
            kill $SENDER 2>/dev/null; wait $SENDER 2>/dev/null
            detach
        done
        for q in tbf htb; do
            say "round $r/$REPEAT: CPU per paced Gbit/s: $q at ${rate}mbit offered ${offered}mbit"
            if [[ $q == tbf ]]; then
                $N tc qdisc add dev $DEV root tbf rate ${rate}mbit burst 32kb latency 10ms
            else
                $N tc qdisc add dev $DEV root handle 1: htb default 10
                $N tc class add dev $DEV parent 1: classid 1:10 htb rate ${rate}mbit ceil ${rate}mbit burst 32kb
            fi
            sender 5001 ${offered}mbit $((SECS + 3)) $PORTS
            sleep 1
            sample cpu_$q "{$extra}"
            kill $SENDER 2>/dev/null; wait $SENDER 2>/dev/null
            $N tc qdisc del dev $DEV root
        done
    done
done
SENDER_CPUS=$OTHER_CPUS # part 3: the daemon pinned to C

for n in ${SCALE//,/ }; do
    say "scaling: $n classes configured, 256 backlogged (line 100gbit)"
    t=$(now)
    attach 100gbit byte --buffer $((128 << 20)) "${PINNED[@]}" --gap-horizon inf
    t_attach=$(since "$t")
    for ((i = 1; i <= n; ++i)); do printf '2:%x 500kbit flows %s\n' $(((i - 1) % 65535 + 1)) $FLOWS; done |
        awk -v n="$n" 'NR <= 65535 {print; next} {split($1, a, ":"); $1 = "3:" a[2]; print}' \
            >"$WORK/classes"
    t=$(now)
    $N "$PSPXDP" class set $DEV --file "$WORK/classes" || die "class set --file ($n) failed"
    t_classes=$(since "$t")
    backlogged=$((n < 256 ? n : 256))
    psp_port_filters $DEV 20001 $backlogged 2 1 || die "filters failed"
    sleep 1 # the daemon takes the classes
    rss0=$("${DP[@]}" rss "$(daemon_pid)")
    sender 20001 $((backlogged * 1200))kbit $((SECS + 4)) $backlogged
    sleep 1.5
    sample scale "{\"classes\": $n, \"backlogged\": $backlogged, \"rss_idle\": $rss0, \"attach_s\": $t_attach, \"class_set_s\": $t_classes}"
    kill $SENDER 2>/dev/null; wait $SENDER 2>/dev/null
    # kill -9 and attach again: the new daemon takes over n classes.
    kill -9 "$(daemon_pid)"
    sleep 0.3
    t=$(now)
    attach 100gbit byte --buffer $((128 << 20)) "${PINNED[@]}" --gap-horizon inf
    t_reattach=$(since "$t")
    t=$(now)
    detach
    t_detach=$(since "$t")
    echo "{\"kind\": \"scale_times\", \"classes\": $n, \"reattach_s\": $t_reattach, \"detach_s\": $t_detach}" >>"$RESULTS"
done

# --- report: medians over rounds
"${DP[@]}" report "$RESULTS" "$JSON" "$CPU" "$(uptime)" "$FLOWS" "$PORTS" "$DEPTH"
