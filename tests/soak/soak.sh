#!/usr/bin/env bash
# Soak (issue 6): SOAK_SECONDS (default 600) of traffic through several
# paced classes and a normal one, with rate changes and class adds/deletes
# all along, and a kill -9 of the daemon + re-attach in the middle. Checks:
#   - drops uncounted: 0 - every datagram the senders sent either reached a
#     sink or is in a drop counter (pacer, daemon, XDP, pacer veths, the
#     receiver's UDP errors), per phase;
#   - UMEM frames leaked: 0 - the daemon's accounting balances, no failure;
#   - RSS flat: the daemon's resident size at the end of a phase is within
#     1 MiB + 5 % of what it was after the phase's first fifth.
# Phases: 1 (45 %), kill -9 + re-attach (10 %), 3 (45 %). Across the kill
# the next daemon counts what the dead one held (drop_died, died_in_rings):
# that phase is checked like the others.
# SOAK_SCALE (default 1) scales the offered rates (CI: 0.3).
# Exit 77 = skipped. Run: bash tests/soak/soak.sh  (SOAK_SECONDS=60 for CI)
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../../lab/netns.sh"
psp_require soak "$PSPXDP" "$TRAFFIC" -- ip nsenter python3 bpftool timeout
SECONDS_TOTAL=${SOAK_SECONDS:-600}
SCALE=${SOAK_SCALE:-1}
((SECONDS_TOTAL >= 30)) || { echo "SOAK_SECONDS must be >= 30"; exit 2; }
TAG=psk$$
SRC=$TAG-s DST=$TAG-d DEV=${TAG}a PEER=${TAG}b
N="nsenter --net=/run/netns/$SRC"
D="nsenter --net=/run/netns/$DST"
TMP=$(mktemp -d /tmp/psp-soak.XXXXXX)
PIDS=()
FAILS=0
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
    wait 2>/dev/null
    psp_teardown "$PSPXDP" $SRC $DST $DEV
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
check() { local what=$1; shift; if "$@"; then echo "ok   - $what"; else echo "FAIL - $what"; FAILS=$((FAILS + 1)); fi; }
P() { $N "$PSPXDP" "$@"; }
rate() { python3 -c "print(f'{int($1 * $SCALE)}kbit')"; }

psp_make_wire $SRC $DST $DEV $PEER 10.82.0 || exit 1
check "attach" P attach $DEV --line-rate 1gbit --sockets 8 >/dev/null
# class port offered (kbit/s, before SOAK_SCALE)
CLASSES="1:1 6001 240000 paced:200mbit
1:2 6002 110000 paced:100mbit
1:3 6003 30000 paced:20mbit
1:4 6004 300000 normal"
while read -r cls port _ kind; do
    if [[ $kind == normal ]]; then P class set $DEV $cls normal; else P class set $DEV $cls ${kind#paced:}; fi
    P filter add $DEV proto udp dport $port classid $cls
done <<<"$CLASSES"
PORTS=6001,6002,6003,6004,6005

rss() { awk '/^VmRSS/ {print $2}' "/proc/$(cat /run/pspxdp/$DEV.pid 2>/dev/null)/status" 2>/dev/null || echo 0; }
snap() { python3 "$HERE/account.py" snap $DEV $SRC $DST >"$TMP/$1.json"; }

# churn UNTIL: rate changes on 1:2 every 2 s, class 1:5 (and its filter)
# added and deleted every 3 s; a low-rate sender to 6005 all along (it
# lands in 1:5 or in the default class), so deletes happen with traffic.
CHURN_I=0
churn() {
    local until=$1 i
    while (($(date +%s) < until)); do
        i=$CHURN_I
        if ((i % 2)); then P class set $DEV 1:2 50mbit; else P class set $DEV 1:2 100mbit; fi
        if ((i % 3 == 0)); then
            P class set $DEV 1:5 10mbit && P filter add $DEV proto udp dport 6005 classid 1:5
        elif ((i % 3 == 2)); then
            P filter del $DEV proto udp dport 6005 && P class del $DEV 1:5
        fi
        CHURN_I=$((i + 1))
        sleep 1
    done
}

# phase NAME SECONDS [kill]: senders, sinks and churn for SECONDS; the
# balance after everything has drained.
phase() {
    local name=$1 secs=$2 kill=${3:-}
    local t0 senders=() cls port kbit kind rss0=0 rss1=0
    snap "$name.before"
    $D timeout $((secs + 70)) "$TRAFFIC" sink $PORTS --seconds $((secs + 60)) >"$TMP/$name.sink" &
    local sink=$!
    PIDS+=($sink)
    sleep 0.5
    while read -r cls port kbit kind; do
        $N timeout $((secs + 10)) "$TRAFFIC" send 10.82.0.2 $port --rate "$(rate $kbit)" --size 1000 \
            --seconds $secs >"$TMP/$name.send.$port" &
        senders+=($!)
    done <<<"$CLASSES"
    $N timeout $((secs + 10)) "$TRAFFIC" send 10.82.0.2 6005 --rate "$(rate 2000)" --size 500 \
        --seconds $secs >"$TMP/$name.send.6005" &
    senders+=($!)
    PIDS+=("${senders[@]}")
    t0=$(date +%s)
    if [[ -n $kill ]]; then
        sleep $((secs / 3))
        kill -9 "$(cat /run/pspxdp/$DEV.pid)"
        sleep 1
        P attach $DEV --line-rate 1gbit --sockets 8 >/dev/null 2>"$TMP/reattach.err" ||
            { echo "FAIL - re-attach after kill -9"; cat "$TMP/reattach.err"; FAILS=$((FAILS + 1)); }
        churn $((t0 + secs))
    else
        churn $((t0 + secs / 5))
        rss0=$(rss)
        churn $((t0 + secs))
        rss1=$(rss)
    fi
    wait "${senders[@]}"
    # Class 1:5 goes at the end of a phase, so every phase starts alike.
    P filter del $DEV proto udp dport 6005 2>/dev/null && P class del $DEV 1:5 2>/dev/null
    CHURN_I=0
    # The sink stops once the pacer has drained (two empty reads 0.2 s
    # apart, at most 30 s) and what was in flight has arrived.
    local empty=0 n=150
    while ((empty < 2 && n-- > 0)); do
        if [[ $(python3 "$HERE/account.py" backlog $DEV) == 0 ]]; then empty=$((empty + 1)); else empty=0; fi
        sleep 0.2
    done
    sleep 0.5
    kill -TERM $sink # timeout passes it on to the sink
    wait $sink
    sleep 0.2
    snap "$name.after"
    python3 "$HERE/account.py" balance "$TMP/$name.before.json" "$TMP/$name.after.json" \
        "$TMP/$name".send.* -- "$TMP/$name.sink" >"$TMP/$name.balance"
    local ok=$?
    echo "     $name: $(cat "$TMP/$name.balance")"
    check "$name: drops uncounted 0" test $ok -eq 0
    check "$name: UMEM accounting balanced (no accounting failure)" python3 -c "
import json; b = json.load(open('$TMP/$name.balance'))
assert b['accounting_failures'] == 0, b"
    if [[ -z $kill ]]; then
        echo "     $name: daemon RSS $rss0 kB after the first fifth, $rss1 kB at the end"
        check "$name: RSS flat (grew < 1 MiB + 5 %)" test $((rss1 - rss0)) -lt $((1024 + rss0 / 20))
    fi
}

P1=$((SECONDS_TOTAL * 45 / 100)) PK=$((SECONDS_TOTAL * 10 / 100))
PK=$((PK < 6 ? 6 : PK))
P3=$((SECONDS_TOTAL - P1 - PK))
echo "     soak: ${SECONDS_TOTAL} s (phase 1 ${P1} s, kill ${PK} s, phase 3 ${P3} s), rates x$SCALE"
phase phase1 $P1
phase kill $PK kill
phase phase3 $P3
check "status alive at the end" bash -c "$N $PSPXDP status $DEV | grep -q 'alive, heartbeat'"
check "detach" P detach $DEV >/dev/null
echo "$FAILS failure(s)"
[[ $FAILS -eq 0 ]]
