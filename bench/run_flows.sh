#!/usr/bin/env bash
# Flows inside a class (issue 21), measured: the latency a sparse flow sees
# through a 100 Mbit/s class it shares with bulk TCP, on the lab's 1 Gbit/s
# veth. Prints a table; fails only when it cannot run.
#
# A ping every 10 ms (ICMP, 84 bytes) goes through class 1:1 (the default
# class: everything DEV sends) beside 1, 16 and 128 bulk TCP flows (one
# iperf3 -P N, cubic), ECN off and on (the sender's net.ipv4.tcp_ecn), three
# shapers on the same wire in the same run:
#   flows      pspxdp, class 1:1 100mbit (flows on, the default)
#   fifo       pspxdp, class 1:1 100mbit flows off (one FIFO, CE above 4 ms)
#   htb        htb rate 100mbit ceil 100mbit, its default leaf (pfifo); this
#              kernel has no fq_codel, cake, sfq or codel (CONFIG_NET_SCH_*)
# Per row: the ping's added latency (its RTT less the idle RTT measured on
# the same shaper; the reply path is not shaped), p50/p99/max in ms; the
# bulk throughput and retransmits (iperf3); the class's CoDel drops and CE
# marks (pspxdp counters). Real time, on whatever the machine is doing.
#
#   bench/run_flows.sh [--seconds S] [--flows 1,16,128] [--shapers flows,fifo,htb]
set -u
SECS=4
FLOWS=1,16,128
SHAPERS=flows,fifo,htb
while (($#)); do
    case $1 in
    --seconds) SECS=${2:?}; shift 2 ;;
    --flows) FLOWS=${2:?}; shift 2 ;;
    --shapers) SHAPERS=${2:?}; shift 2 ;;
    -h | --help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run_flows: unknown argument \"$1\"" >&2; exit 2 ;;
    esac
done
[[ $SECS =~ ^[0-9]+$ ]] && ((SECS >= 2 && SECS <= 60)) || { echo "run_flows: --seconds: 2..60" >&2; exit 2; }
[[ $FLOWS =~ ^[0-9]+(,[0-9]+)*$ ]] || { echo "run_flows: --flows: numbers, comma separated" >&2; exit 2; }
for s in ${SHAPERS//,/ }; do
    case $s in flows | fifo | htb) ;; *) echo "run_flows: --shapers: flows, fifo or htb, not \"$s\"" >&2; exit 2 ;; esac
done
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lab/netns.sh"
psp_require run_flows "$PSPXDP" -- ip tc ping iperf3 python3 nsenter timeout
psp_lab_begin bfl 10.89.0
NET=10.89.0
ROWS=$TMP/rows.jsonl

shaper_up() { # SHAPER
    case $1 in
    htb)
        $N tc qdisc replace dev $DEV root handle 1: htb default 1 &&
            $N tc class add dev $DEV parent 1: classid 1:1 htb rate 100mbit ceil 100mbit
        ;;
    *)
        local words=()
        [[ $1 == fifo ]] && words=(flows off)
        $N "$PSPXDP" attach $DEV --line-rate 1gbit >/dev/null &&
            $N "$PSPXDP" class set $DEV 1:1 100mbit "${words[@]}" &&
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
# ping_ms COUNT FILE: COUNT pings 10 ms apart, their RTTs (ms) one a line.
ping_ms() {
    $N timeout 5 ping -n -q -i 0.01 -c 3 -W 1 $NET.2 >/dev/null 2>&1 # neighbour resolved
    $N timeout $(($1 / 50 + 10)) ping -n -i 0.01 -c "$1" -W 1 $NET.2 2>/dev/null |
        sed -n 's/.*time=\([0-9.]*\) ms.*/\1/p' >"$2"
}

$D timeout 3600 iperf3 -s -p 5201 >/dev/null 2>&1 &
PIDS+=($!)
psp_wait_for 10 psp_listening $DST tcp 5201 || { echo "run_flows: iperf3 server did not start" >&2; exit 1; }
PINGS=$((SECS * 100 - 100)) # 10 ms apart: SECS - 1 seconds, after the bulk flows' first second

for shaper in ${SHAPERS//,/ }; do
    shaper_up $shaper || { echo "run_flows: $shaper did not come up" >&2; exit 1; }
    ping_ms 200 "$TMP/idle.$shaper"
    for ecn in 0 1; do
        $N sysctl -qw net.ipv4.tcp_ecn=$ecn
        for n in ${FLOWS//,/ }; do
            out=$TMP/$shaper.$ecn.$n
            [[ $shaper != htb ]] && $N "$PSPXDP" status $DEV -j >"$out.s0"
            # The bulk flows run a second longer than the pings: every ping is sent while they do.
            $N timeout $((SECS + 20)) iperf3 -c $NET.2 -p 5201 -P "$n" -t $((SECS + 1)) -J >"$out.iperf" 2>&1 &
            cl=$!
            sleep 1 # the bulk flows fill the class before the pings start: traffic, not a wait
            ping_ms $PINGS "$out.ping"
            wait $cl
            [[ $shaper != htb ]] && $N "$PSPXDP" status $DEV -j >"$out.s1"
            python3 - "$out" "$shaper" "$ecn" "$n" "$TMP/idle.$shaper" >>"$ROWS" <<'PY'
import json, os, statistics, sys
out, shaper, ecn, n, idle = sys.argv[1:6]
def ms(path):
    with open(path) as f:
        return sorted(float(x) for x in f if x.strip())
base, rtt = ms(idle), ms(f"{out}.ping")
row = {"shaper": shaper, "ecn": int(ecn), "bulk": int(n), "pings": len(rtt)}
if base and rtt:
    b = statistics.median(base)
    add = [max(0.0, r - b) for r in rtt]
    q = lambda p: add[min(len(add) - 1, int(p * len(add)))]
    row.update(p50=q(0.50), p99=q(0.99), max=add[-1], idle=b)
try:
    with open(f"{out}.iperf") as f:
        ip = json.load(f)["end"]
    row["mbit"] = ip["sum_received"]["bits_per_second"] / 1e6
    row["retr"] = ip["sum_sent"].get("retransmits", 0)
except (OSError, ValueError, KeyError):
    pass
if os.path.exists(f"{out}.s1"):
    with open(f"{out}.s0") as f0, open(f"{out}.s1") as f1:
        c0, c1 = (next(x for x in json.load(f)["classes"] if x["class"] == "1:1") for f in (f0, f1))
    for k in ("drop_aqm", "ce_marked", "drop_limit"):
        row[k] = c1[k] - c0[k]
print(json.dumps(row))
PY
        done
    done
    shaper_down $shaper
done

python3 - "$ROWS" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("\nA ping every 10 ms through a 100 Mbit/s class beside bulk TCP (real time; added latency, ms)")
print(f"{'shaper':7} {'ECN':>3} {'bulk':>4} {'p50':>8} {'p99':>8} {'max':>8} {'bulk Mbit/s':>11} {'retr':>6} {'aqm drop':>8} {'CE':>7} {'limit':>6}")
for r in rows:
    f = lambda k, fmt: (fmt % r[k]) if k in r else "-"
    print(f"{r['shaper']:7} {('on' if r['ecn'] else 'off'):>3} {r['bulk']:>4} {f('p50', '%8.2f')} {f('p99', '%8.2f')} "
          f"{f('max', '%8.2f')} {f('mbit', '%11.1f')} {f('retr', '%6d')} {f('drop_aqm', '%8d')} "
          f"{f('ce_marked', '%7d')} {f('drop_limit', '%6d')}")
PY
echo "(load: $(cut -d' ' -f1-3 /proc/loadavg))"
