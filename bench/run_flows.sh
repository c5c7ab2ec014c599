#!/usr/bin/env bash
# Flows inside a class (docs/design.md §1.5), measured on the lab's 1 Gbit/s veth: the
# latency a sparse flow sees through a class it shares with bulk TCP, and
# the bulk flows' own fairness, rate, RTT and drops. Prints tables and
# writes them, a CSV and a latency CDF plot to a results directory; fails
# only when it cannot run. Real time, on whatever the machine is doing.
#
# Two sparse flows at once: a ping every 10 ms (ICMP, 84 bytes) and a
# 100-byte TCP request with a 100-byte reply every 10 ms on one persistent
# connection (lab/psp_rr.py, Nagle off, closed loop). Their added latency is
# their round trip less its idle median on the same shaper (the reply path
# is not shaped), p50/p99/max in ms, over what they sent between the bulk
# flows' first second and their end. Beside them, N bulk TCP
# flows (iperf3 -P N -C cubic, 1 s omitted start, then --seconds) in the same
# class, the sender's ECN off and on (net.ipv4.tcp_ecn), per shaper:
#   flows   pspxdp, flows on (the default)
#   fifo    pspxdp, flows off (one FIFO, CE above 4 ms)
#   htb     htb rate = ceil, its default pfifo leaf: this kernel has no
#           fq_codel, cake, sfq or codel (CONFIG_NET_SCH_*)
# pspxdp runs clockless (--clock none, the veth default) and/or on the byte
# clock (--clock byte: PAUSE gap frames fill the wire; the receiving
# namespace's stack drops them). htb has no clock: it runs once.
#   --classes 1    one 100 Mbit/s class, 1:1 (everything DEV sends)
#   --classes 10   ten 10 Mbit/s classes: the sparse flows and the N bulk
#                  flows in 1:1, one more bulk flow in each of 1:2..1:a (by
#                  TCP port), so every neighbour class is backlogged too
# Per row also: the bulk flows' goodput and Jain's index (per-stream bytes
# at the receiver), the class's rate from its sent-bytes counter over the
# run (pspxdp stats --interval; htb: two `tc -s class` reads), the senders' mean RTT, TCP retransmits beside every drop the shaper
# counted (limit, CoDel, overflow) and CE marks.
#
# Results accumulate in a directory (rows.jsonl: a row of the same classes,
# clock, shaper, ECN and bulk count replaces the earlier one), so the
# benchmark can run in short chunks (e.g. one --flows value each):
# $BUILD_DIR/results/flows, or with --publish docs/results/DATE-flows-in-a-class
# (README.md with the tables, flows.csv, flows-cdf.png), or --out DIR.
#
#   sudo bench/run_flows.sh [--seconds S] [--flows 1,16,128] [--shapers flows,fifo,htb]
#        [--clock none,byte] [--classes 1|10] [--out DIR | --publish]
set -u
SECS=10
FLOWS=1,16,128
SHAPERS=flows,fifo,htb
CLOCKS=none
CLASSES=1
OUT=
PUBLISH=0
COMMAND="bench/run_flows.sh $*"
while (($#)); do
    case $1 in
    --seconds) SECS=${2:?}; shift 2 ;;
    --flows) FLOWS=${2:?}; shift 2 ;;
    --shapers) SHAPERS=${2:?}; shift 2 ;;
    --clock) CLOCKS=${2:?}; shift 2 ;;
    --classes) CLASSES=${2:?}; shift 2 ;;
    --out) OUT=${2:?}; shift 2 ;;
    --publish) PUBLISH=1; shift ;;
    -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "run_flows: unknown argument \"$1\"" >&2; exit 2 ;;
    esac
done
[[ $SECS =~ ^[0-9]+$ ]] && ((SECS >= 5 && SECS <= 60)) || { echo "run_flows: --seconds: 5..60" >&2; exit 2; }
[[ $FLOWS =~ ^[0-9]+(,[0-9]+)*$ ]] || { echo "run_flows: --flows: numbers, comma separated" >&2; exit 2; }
for n in ${FLOWS//,/ }; do
    ((n >= 1 && n <= 128)) || { echo "run_flows: --flows: 1..128 each (iperf3 -P), not $n" >&2; exit 2; }
done
for s in ${SHAPERS//,/ }; do
    case $s in flows | fifo | htb) ;; *) echo "run_flows: --shapers: flows, fifo or htb, not \"$s\"" >&2; exit 2 ;; esac
done
for c in ${CLOCKS//,/ }; do
    case $c in none | byte) ;; *) echo "run_flows: --clock: none or byte, not \"$c\"" >&2; exit 2 ;; esac
done
case $CLASSES in 1) RATE_MBIT=100 ;; 10) RATE_MBIT=10 ;; *) echo "run_flows: --classes: 1 or 10" >&2; exit 2 ;; esac
[[ -n $OUT ]] && ((PUBLISH)) && { echo "run_flows: --out and --publish: one or the other" >&2; exit 2; }
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lab/netns.sh"
((PUBLISH)) && OUT=$PSP_ROOT/docs/results/$(date -u +%F)-flows-in-a-class
OUT=${OUT:-$BUILD_DIR/results/flows}
# Debian's python3 (python3-matplotlib is installed for it, scripts/setup.sh), as lab/lab.sh.
PYTHON=${PYTHON:-/usr/bin/python3}
psp_require run_flows "$PSPXDP" -- ip tc ss ping iperf3 "$PYTHON" nsenter timeout
"$PYTHON" -c "import matplotlib" 2>/dev/null || { echo "run_flows: python3-matplotlib missing (run scripts/setup.sh)" >&2; exit 77; }
REPORT=("$PYTHON" -B "$HERE/flows_report.py")
psp_lab_begin fl 10.91.0
NET=10.91.0
ROWS=$TMP/rows.jsonl
RR_PORT=11111

shaper_up() { # SHAPER CLOCK
    local i words=()
    case $1 in
    htb)
        $N tc qdisc replace dev $DEV root handle 1: htb default 1 || return 1
        for ((i = 1; i <= CLASSES; ++i)); do
            $N tc class add dev $DEV parent 1: classid 1:$(printf %x $i) htb rate ${RATE_MBIT}mbit \
                ceil ${RATE_MBIT}mbit || return 1
            if ((i > 1)); then
                $N tc filter add dev $DEV parent 1: protocol ip prio 1 u32 \
                    match ip dport $((5200 + i)) 0xffff flowid 1:$(printf %x $i) || return 1
            fi
        done
        ;;
    *)
        [[ $1 == fifo ]] && words=(flows off)
        $N "$PSPXDP" attach $DEV --line-rate 1gbit --clock "$2" >/dev/null || return 1
        for ((i = 1; i <= CLASSES; ++i)); do
            $N "$PSPXDP" class set $DEV 1:$(printf %x $i) ${RATE_MBIT}mbit "${words[@]}" || return 1
            if ((i > 1)); then
                $N "$PSPXDP" filter add $DEV proto tcp dport $((5200 + i)) classid 1:$(printf %x $i) \
                    >/dev/null || return 1
            fi
        done
        $N "$PSPXDP" default $DEV 1:1 && psp_wait_for 10 psp_status_is $DEV 'c("1:1")["state"] == "served"'
        ;;
    esac
}
shaper_down() { # SHAPER
    case $1 in
    htb) $N tc qdisc del dev $DEV root 2>/dev/null ;;
    *) $N "$PSPXDP" detach $DEV >/dev/null ;;
    esac
}
# snapshot SHAPER FILE: the class counters into FILE.*, the times before
# and after the call into FILE.t (the counters are read in between).
snapshot() {
    local t0 t1
    t0=$(date +%s.%N)
    if [[ $1 == htb ]]; then
        $N tc -s class show dev $DEV >"$2.c"
        t1=$(date +%s.%N)
        $N tc -s -j qdisc show dev $DEV >"$2.q" # its drops: not timed
    else
        $N "$PSPXDP" status $DEV -j >"$2.s"
        t1=$(date +%s.%N)
    fi
    echo "$t0 $t1" >"$2.t"
}
# probes_start FILE: the two sparse flows, from before the bulk flows start
# until probes_stop: pings into FILE.ping (ping -D: each reply's time), the
# request/response probe (lab/psp_rr.py, connected before the first timed
# request) into FILE.rr. The report keeps what was sent between the two
# counter snapshots, when the bulk flows certainly ran.
probes_start() {
    $N timeout 120 ping -D -n -i 0.01 -W 5 -w 110 $NET.2 >"$1.ping" 2>/dev/null &
    PROBES=($!)
    $N timeout 120 "$PYTHON" -B "$PSP_ROOT/lab/psp_rr.py" client $NET.2 $RR_PORT --seconds 110 --out "$1.rr" \
        2>"$1.rr.err" &
    PROBES+=($!)
    PIDS+=("${PROBES[@]}")
    psp_wait_for 10 test -s "$1.rr" || { echo "run_flows: the request/response probe did not start: $(cat "$1.rr.err")" >&2; exit 1; }
}
# probes_stop SHAPER: once the class is empty again (every probe sent in the
# interval has left it), SIGINT: ping prints what it has, psp_rr.py stops.
probes_stop() {
    if [[ $1 == htb ]]; then
        psp_wait_for 20 htb_empty
    else
        psp_wait_for 20 psp_settled $DEV
    fi || { echo "run_flows: the class did not drain" >&2; exit 1; }
    kill -INT "${PROBES[@]}" 2>/dev/null
    wait "${PROBES[@]}"
}
htb_empty() { $N tc -s qdisc show dev $DEV | grep -q 'backlog 0b 0p' && ! $N tc -s qdisc show dev $DEV | grep -v 'backlog 0b 0p' | grep -q backlog; }
established() { # established PORT COUNT: COUNT TCP connections from SRC to PORT are up
    (($($N ss -Htn state established "dport = :$1" | wc -l) >= $2))
}
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }

for ((i = 1; i <= CLASSES; ++i)); do
    $D timeout 3600 iperf3 -s -p $((5200 + i)) >/dev/null 2>&1 &
    PIDS+=($!)
done
$D timeout 3600 "$PYTHON" -B "$PSP_ROOT/lab/psp_rr.py" server $NET.2 $RR_PORT --seconds 3600 &
PIDS+=($!)
for ((i = 1; i <= CLASSES; ++i)); do
    psp_wait_for 10 psp_listening $DST tcp $((5200 + i)) || { echo "run_flows: iperf3 server did not start" >&2; exit 1; }
done
SERVERS=("${PIDS[@]}")
psp_wait_for 10 psp_listening $DST tcp $RR_PORT || { echo "run_flows: the request/response server did not start" >&2; exit 1; }
$N timeout 5 ping -n -q -c 3 -i 0.01 -W 1 $NET.2 >/dev/null 2>&1 # neighbour resolved (static anyway)

first_clock=${CLOCKS%%,*}
for clock in ${CLOCKS//,/ }; do
    for shaper in ${SHAPERS//,/ }; do
        [[ $shaper == htb && $clock != "$first_clock" ]] && continue # no clock: once
        ck=$clock
        [[ $shaper == htb ]] && ck=none
        echo "run_flows: $shaper, clock $ck, $CLASSES class(es)" >&2
        shaper_up $shaper $ck || { echo "run_flows: $shaper did not come up" >&2; exit 1; }
        idle=$TMP/idle.$ck.$shaper
        probes_start "$idle"
        snapshot $shaper "$idle.0"
        sleep 2 # the idle probes: traffic, not a wait
        snapshot $shaper "$idle.1"
        probes_stop $shaper
        PIDS=("${SERVERS[@]}")
        for ecn in 0 1; do
            $N sysctl -qw net.ipv4.tcp_ecn=$ecn
            for n in ${FLOWS//,/ }; do
                out=$TMP/$ck.$shaper.$ecn.$n
                load0=$(loadavg) date=$(date -u '+%Y-%m-%d %H:%M')
                probes_start "$out"
                bulk=()
                $N timeout $((SECS + 30)) iperf3 -c $NET.2 -p 5201 -P "$n" -C cubic -O 1 -t "$SECS" -J \
                    >"$out.iperf" 2>&1 &
                bulk+=($!)
                for ((i = 2; i <= CLASSES; ++i)); do # the neighbour classes' one flow each
                    $N timeout $((SECS + 30)) iperf3 -c $NET.2 -p $((5200 + i)) -C cubic -t $((SECS + 1)) \
                        >/dev/null 2>&1 &
                    bulk+=($!)
                done
                PIDS+=("${bulk[@]}")
                psp_wait_for 20 established 5201 $((n + 1)) ||
                    { echo "run_flows: the $n bulk flows did not connect" >&2; exit 1; }
                sleep 1 # iperf3's omitted first second: the bulk flows fill the class (traffic, not a wait)
                snapshot $shaper "$out.0"
                if [[ $shaper == htb ]]; then
                    sleep $((SECS - 1)) # the interval measured: traffic, not a wait
                    snapshot $shaper "$out.1"
                else # the class's rate over the interval, both ends read in one process
                    t0=$(date +%s.%N)
                    $N "$PSPXDP" stats $DEV -j --interval $((SECS - 1))s >"$out.1.s"
                    echo "$t0 $(date +%s.%N)" >"$out.1.t"
                fi
                wait "${bulk[@]}"
                probes_stop $shaper
                PIDS=("${SERVERS[@]}") # waited for: their pids are no longer ours to kill
                "${REPORT[@]}" row "$out" --idle "$idle" --classes $CLASSES --ecn $ecn --bulk "$n" \
                    --seconds "$SECS" --class-rate-mbit $RATE_MBIT --clock $ck \
                    --shaper $shaper --date "$date" --command "$COMMAND" --load-before "$load0" \
                    --load-after "$(loadavg)" >>"$ROWS" || { echo "run_flows: no row from $out" >&2; exit 1; }
            done
        done
        shaper_down $shaper
    done
done
$N sysctl -qw net.ipv4.tcp_ecn=2

echo
"${REPORT[@]}" report "$OUT" --add "$ROWS"
echo "(load: $(loadavg))"
