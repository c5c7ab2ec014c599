#!/usr/bin/env bash
# Soak (docs/design.md §6): SOAK_SECONDS (default 600) of traffic through several
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
psp_require soak "$PSPXDP" "$TRAFFIC" -- ip nsenter python3 bpftool timeout jq
SECONDS_TOTAL=${SOAK_SECONDS:-600}
SCALE=${SOAK_SCALE:-1}
((SECONDS_TOTAL >= 30)) || { echo "SOAK_SECONDS must be >= 30"; exit 2; }
psp_lab_begin sk 10.82.0
P() { $N "$PSPXDP" "$@"; }
rate() { python3 -c "print(f'{int($1 * $SCALE)}kbit')"; }

psp_check "attach" P attach $DEV --line-rate 1gbit --sockets 8 >/dev/null
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

rss() { awk '/^VmRSS/ {print $2}' "/proc/$(psp_daemon_pid $DEV)/status" 2>/dev/null || echo 0; }
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
        sleep 1 # the churn's cadence (the test's subject), not a wait
    done
}

# phase NAME SECONDS [kill]: senders, sinks and churn for SECONDS; the
# balance after everything has drained.
phase() {
    local name=$1 secs=$2 kill=${3:-}
    local t0 senders=() cls port kbit kind rss0=0 rss1=0
    local t_start=$SECONDS
    snap "$name.before"
    $D timeout $((secs + 70)) "$TRAFFIC" sink $PORTS --seconds $((secs + 60)) >"$TMP/$name.sink" &
    local sink=$!
    PIDS+=($sink)
    psp_check "$name: sink bound to its ports" psp_wait_for 10 psp_listening $DST udp 6005
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
        sleep $((secs / 3)) # traffic, not a wait: the daemon dies mid-stream
        local dpid
        dpid=$(psp_daemon_pid $DEV)
        kill -9 "$dpid"
        psp_check "$name: daemon dead after kill -9" psp_wait_for 5 psp_gone "$dpid"
        psp_check "$name: status says the daemon is not running" \
            psp_wait_for 5 bash -c "$N $PSPXDP status $DEV | grep -q 'daemon: not running'"
        psp_check "$name: re-attach after kill -9" P attach $DEV --line-rate 1gbit --sockets 8 >/dev/null 2>"$TMP/reattach.err" ||
            cat "$TMP/reattach.err"
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
    # The sink stops once the pacer has drained and the sink has read what
    # arrived (its sockets' queues empty). The drain's bound is what the
    # daemon reports it holds: the longest backlog in time at its class's
    # rate, plus 5 s for a daemon sharing its core (it publishes every 100 ms).
    local t_sent=$SECONDS drain_s
    drain_s=$(P status $DEV -j | python3 "$HERE/account.py" drain-seconds)
    psp_check "$name: the pacer drained (within ${drain_s:-5} s: its backlog at its rates + 5 s)" \
        psp_wait_for "${drain_s:-5}" psp_settled $DEV || P status $DEV -j | python3 "$HERE/account.py" classes
    psp_check "$name: the sink has read everything" \
        psp_wait_for 5 eval "! $D ss -Hlun | awk '\$2 > 0' | grep -q ."
    kill -TERM $sink # timeout passes it on to the sink
    wait $sink
    echo "     $name: ${secs} s of traffic took $((t_sent - t_start)) s, the drain and the sink's reads $((SECONDS - t_sent)) s"
    snap "$name.after"
    python3 "$HERE/account.py" balance "$TMP/$name.before.json" "$TMP/$name.after.json" \
        "$TMP/$name".send.* -- "$TMP/$name.sink" >"$TMP/$name.balance"
    local ok=$?
    echo "     $name: $(cat "$TMP/$name.balance")"
    psp_check "$name: drops uncounted 0" test $ok -eq 0
    psp_check "$name: UMEM accounting balanced (no accounting failure)" \
        test "$(jq .accounting_failures "$TMP/$name.balance")" = 0
    if [[ -z $kill ]]; then
        echo "     $name: daemon RSS $rss0 kB after the first fifth, $rss1 kB at the end"
        psp_check "$name: RSS flat (grew < 1 MiB + 5 %)" test $((rss1 - rss0)) -lt $((1024 + rss0 / 20))
    fi
}

P1=$((SECONDS_TOTAL * 45 / 100)) PK=$((SECONDS_TOTAL * 10 / 100))
PK=$((PK < 6 ? 6 : PK))
P3=$((SECONDS_TOTAL - P1 - PK))
echo "     soak: ${SECONDS_TOTAL} s (phase 1 ${P1} s, kill ${PK} s, phase 3 ${P3} s), rates x$SCALE"
phase phase1 $P1
phase kill $PK kill
phase phase3 $P3
psp_check "status alive at the end" bash -c "$N $PSPXDP status $DEV | grep -q 'alive, heartbeat'"
psp_check "detach" P detach $DEV >/dev/null
psp_finish
