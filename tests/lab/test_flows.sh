#!/usr/bin/env bash
# Flows inside a class (docs/design.md §1.5), what is deterministic about them: two
# 50 Mbit/s classes, each offered four UDP flows of 40 Mbit/s (not
# ECN-capable) for 1.5 s: 1:1 with flows on (the default), 1:2 with flows
# off (one FIFO).
# - 1:1 counts every flow as new at least once (new_flows >= 4), CoDel
#   drops from the standing queue (drop_aqm > 0: the flows are 3.2 times
#   the rate for far longer than CoDel's 100 ms interval) and the rest of
#   the excess from the fattest flows at the limit; 1:2 never counts flows
#   or CoDel (new_flows = drop_aqm = 0), its excess goes to its limit
#   (drop_limit, or drop_overflow when the shared buffer fills first).
# - Every frame is accounted for: rx = tx + drops in each class, and once
#   idle no flow is left (flows = sparse_flows = bulk_flows = 0).
# - show -j says flows true / false; a bad flows word is refused with one
#   line and changes nothing.
# - GSO against the limit (datapath/gso_gate.hpp): local TCP (iperf3, GSO
#   on) for 2 s into two 20 Mbit/s classes with limit 10ms (25 KB, less
#   than a 64 KB GSO packet), 1:3 flows on, 1:4 flows off: the packets were
#   handed over as GSO packets (tc_frames > tc_packets), and every frame is
#   accounted for (rx = tx + drops, nothing left queued). How many TCP
#   retransmits that costs is timing: bench/run_gso.sh.
# Latency through the flows (a ping behind bulk TCP) is real time: it is in
# bench/run_flows.sh, not here. Exit 77 = skipped (the sender could not
# overload the classes on this machine: nothing to judge).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../../lab/netns.sh"
psp_require test_flows "$PSPXDP" "$TRAFFIC" -- python3 iperf3 ethtool

NET=$(psp_random_net)
psp_lab_begin fl $NET

psp_check "attach" $N "$PSPXDP" attach $DEV --line-rate 1gbit || { psp_finish; exit 1; }
psp_check "class set 1:1 50mbit (flows on: the default)" $N "$PSPXDP" class set $DEV 1:1 50mbit
psp_check "class set 1:2 50mbit flows off" $N "$PSPXDP" class set $DEV 1:2 50mbit flows off
psp_check "filter udp dport 5001 -> 1:1" $N "$PSPXDP" filter add $DEV proto udp dport 5001 classid 1:1
psp_check "filter udp dport 5002 -> 1:2" $N "$PSPXDP" filter add $DEV proto udp dport 5002 classid 1:2
psp_check "class set 1:3 20mbit limit 10ms" $N "$PSPXDP" class set $DEV 1:3 20mbit limit 10ms
psp_check "class set 1:4 20mbit limit 10ms flows off" \
    $N "$PSPXDP" class set $DEV 1:4 20mbit limit 10ms flows off
psp_check "filter tcp dport 5203 -> 1:3" $N "$PSPXDP" filter add $DEV proto tcp dport 5203 classid 1:3
psp_check "filter tcp dport 5204 -> 1:4" $N "$PSPXDP" filter add $DEV proto tcp dport 5204 classid 1:4
psp_check "show -j: 1:1 flows true, 1:2 flows false" psp_status_is $DEV \
    'c("1:1")["flows"] is True and c("1:2")["flows"] is False'
$N "$PSPXDP" class change $DEV 1:1 50mbit flows maybe >"$TMP/bad.out" 2>"$TMP/bad.err"
bad_rc=$?
psp_check "flows maybe: refused, one line naming it" \
    test $bad_rc -ne 0 -a "$(wc -l <"$TMP/bad.err")" -eq 1 -a -n "$(grep -F '"maybe"' "$TMP/bad.err")"
psp_check "flows maybe: nothing changed" psp_status_is $DEV 'c("1:1")["flows"] is True'
psp_check "both classes served" psp_wait_for 10 psp_status_is $DEV \
    'all(c(x)["state"] == "served" for x in ("1:1", "1:2", "1:3", "1:4"))'

flows=()
for port in 5001 5002; do
    for i in 1 2 3 4; do flows+=(--flow $NET.2:$port:40mbit); done
done
$D timeout 10 "$TRAFFIC" sink 5001,5002 --seconds 4 >"$TMP/sink.json" 2>&1 &
PIDS+=($!)
psp_check "sink listening" psp_wait_for 10 psp_listening $DST udp 5002
psp_check "8 flows, 1.5 s" $N timeout 10 "$TRAFFIC" send "${flows[@]}" --size 1200 --seconds 1.5 \
    >"$TMP/send.json"
$N ethtool -K $DEV gso on tso on >/dev/null 2>&1
for port in 5203 5204; do
    $D timeout 20 iperf3 -s -1 -p $port >/dev/null 2>&1 &
    PIDS+=($!)
    psp_check "iperf3 server on $port" psp_wait_for 10 psp_listening $DST tcp $port
done
tcp_pids=()
for port in 5203 5204; do
    $N timeout 15 iperf3 -c $NET.2 -p $port -t 2 >"$TMP/tcp.$port" 2>&1 &
    tcp_pids+=($!)
done
psp_check "local TCP into 1:3 and 1:4, 2 s" wait "${tcp_pids[@]}"
psp_check "settled: every class idle, every frame published" psp_wait_for 10 psp_settled $DEV
$N "$PSPXDP" status $DEV -j >"$TMP/status.json"

python3 "$HERE/verdict_flows.py" "$TMP/status.json" >"$TMP/verdict"
if grep -q '^SKIP' "$TMP/verdict"; then
    sed 's/^SKIP /skipped: /' "$TMP/verdict"
    psp_finish
    exit 77
fi
psp_verdict cat "$TMP/verdict"

psp_check "detach" $N "$PSPXDP" detach $DEV
psp_finish
