#!/usr/bin/env bash
# GSO packets against a class limit (docs/design.md §1.5): local TCP (iperf3, cubic,
# one flow, ECN off) through one paced class of RATE with `limit 10ms`, the
# sender's GSO on (up to 64 KB, 44 frames: larger than the limit's
# 25 KB at 20 Mbit/s), on the lab's 1 Gbit/s veth. Per row: TCP's
# retransmits, goodput, and the class's counters (drop_limit, drop_aqm).
# Three shapers on the same wire:
#   flows   pspxdp class RATE limit 10ms (flows on, the default)
#   fifo    pspxdp class RATE limit 10ms flows off
#   htb     htb rate RATE ceil RATE, its default pfifo leaf (txqueuelen
#           1000 packets, a GSO packet one; no byte limit)
# Real time: retransmits are timing, so this is a benchmark, not a test.
#
#   bench/run_gso.sh [--seconds S] [--rates 20mbit,50mbit] [--shapers flows,fifo,htb]
set -u
SECS=10
RATES=20mbit,50mbit
SHAPERS=flows,fifo,htb
while (($#)); do
    case $1 in
    --seconds) SECS=${2:?}; shift 2 ;;
    --rates) RATES=${2:?}; shift 2 ;;
    --shapers) SHAPERS=${2:?}; shift 2 ;;
    -h | --help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run_gso: unknown argument \"$1\"" >&2; exit 2 ;;
    esac
done
[[ $SECS =~ ^[0-9]+$ ]] && ((SECS >= 2 && SECS <= 60)) || { echo "run_gso: --seconds: 2..60" >&2; exit 2; }
[[ $RATES =~ ^[0-9]+mbit(,[0-9]+mbit)*$ ]] || { echo "run_gso: --rates: like 20mbit,50mbit" >&2; exit 2; }
for s in ${SHAPERS//,/ }; do
    case $s in flows | fifo | htb) ;; *) echo "run_gso: --shapers: flows, fifo or htb, not \"$s\"" >&2; exit 2 ;; esac
done
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lab/netns.sh"
psp_require run_gso "$PSPXDP" -- ip tc iperf3 python3 nsenter timeout ethtool
psp_lab_begin fc 10.92.0
NET=10.92.0
ROWS=$TMP/rows.jsonl
$N ethtool -K $DEV gso on tso on >/dev/null 2>&1

shaper_up() { # SHAPER RATE
    case $1 in
    htb)
        $N tc qdisc replace dev $DEV root handle 1: htb default 1 &&
            $N tc class add dev $DEV parent 1: classid 1:1 htb rate $2 ceil $2
        ;;
    *)
        local words=()
        [[ $1 == fifo ]] && words=(flows off)
        $N "$PSPXDP" attach $DEV --line-rate 1gbit >/dev/null &&
            $N "$PSPXDP" class set $DEV 1:1 $2 limit 10ms "${words[@]}" &&
            $N "$PSPXDP" default $DEV 1:1 &&
            psp_wait_for 10 psp_status_is $DEV 'c("1:1")["state"] == "served"'
        ;;
    esac
}
shaper_down() { # SHAPER
    case $1 in
    htb) $N tc qdisc del dev $DEV root 2>/dev/null ;;
    *) $N "$PSPXDP" detach $DEV >/dev/null ;;
    esac
}

$D timeout 3600 iperf3 -s -p 5201 >/dev/null 2>&1 &
PIDS+=($!)
psp_wait_for 10 psp_listening $DST tcp 5201 || { echo "run_gso: iperf3 server did not start" >&2; exit 1; }
$N sysctl -qw net.ipv4.tcp_ecn=0

for rate in ${RATES//,/ }; do
    for shaper in ${SHAPERS//,/ }; do
        shaper_up $shaper $rate || { echo "run_gso: $shaper did not come up" >&2; exit 1; }
        out=$TMP/$shaper.$rate
        [[ $shaper != htb ]] && $N "$PSPXDP" status $DEV -j >"$out.s0"
        $N timeout $((SECS + 20)) iperf3 -c $NET.2 -p 5201 -t $SECS -J >"$out.iperf" 2>&1
        [[ $shaper != htb ]] && $N "$PSPXDP" status $DEV -j >"$out.s1"
        shaper_down $shaper
        python3 "$HERE/gso_bench.py" row "$out" "$shaper" "$rate" >>"$ROWS"
    done
done

python3 "$HERE/gso_bench.py" report "$ROWS" "$SECS"
echo "(load: $(cut -d' ' -f1-3 /proc/loadavg))"
