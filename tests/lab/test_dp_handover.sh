#!/usr/bin/env bash
# Data path v2: the hand-over tag, end to end, with GSO.
#
# TCP (iperf3) with TSO on DEV hands the TC program GSO super-packets; TC tags
# each one and the pacer veth (TSO off) segments it. Checks:
#   - GSO happened (TC saw fewer packets than segments),
#   - every segment reached the daemon tagged with its class: the class's
#     pacer rx_frames equal TC's segment count, no unknown tag, none invalid;
#   - nothing reached the wire with a tag: every frame captured on the
#     receiving end is addressed to the receiver (or is a PAUSE gap frame),
#     carries a known ethertype and is at most 1514 bytes.
# (A class that is not served passes untouched: tests/bpf.) Exit 77 = skipped.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../../lab/netns.sh"
psp_require test_dp_handover "$PSPXDP" "$TRAFFIC" -- ip iperf3 tcpdump ethtool python3 nsenter timeout

psp_lab_begin hnd 10.81.0
$N ethtool -K $DEV tso on gso on >/dev/null 2>&1
psp_check "TSO on DEV (TC sees GSO packets)" bash -c "$N ethtool -k $DEV | grep -q '^tcp-segmentation-offload: on'"
psp_check "attach" $N "$PSPXDP" attach $DEV --line-rate 1gbit
psp_check "class 1:1 200mbit" $N "$PSPXDP" class set $DEV 1:1 200mbit
psp_check "filter tcp dport 5201 -> 1:1" $N "$PSPXDP" filter add $DEV proto tcp dport 5201 classid 1:1
psp_check "class 1:1 served" psp_wait_for 10 psp_status_is $DEV 'c("1:1")["state"] == "served"'
PACER_A=$($N "$PSPXDP" status $DEV -j | python3 -c "import json,sys; print(json.load(sys.stdin)['pacer_veth'][0])")
psp_check "the pacer veth segments (TSO off on $PACER_A)" \
    bash -c "$N ethtool -k $PACER_A | grep -q '^tcp-segmentation-offload: off'"

psp_check "capture on $PEER" psp_capture "$D" $PEER "$TMP/cap" 65536
$D timeout 20 iperf3 -s -1 -p 5201 >/dev/null 2>&1 &
PIDS+=($!)
psp_check "iperf3 server listening" psp_wait_for 10 psp_listening $DST tcp 5201
$N timeout 15 iperf3 -c 10.81.0.2 -p 5201 -t 2 -J >"$TMP/iperf3.json" 2>/dev/null
psp_check "iperf3 through 1:1" test $? -eq 0
# Every segment TC handed over is accounted for once the daemon has
# published its counts (every 100 ms): taken, or dropped by the kernel.
psp_wait_for 10 psp_status_is $DEV 'c("1:1")["rx_frames"] + d["daemon"]["socket_ring_full"] + d["daemon"]["socket_fill_empty"] >= c("1:1")["tc_frames"]'
kill -INT $PSP_CAPTURE_PID; wait $PSP_CAPTURE_PID 2>/dev/null
$N "$PSPXDP" status $DEV -j >"$TMP/status.json"

python3 "$HERE/dp_handover.py" "$TMP" >"$TMP/verdict"
sed 's/^/     /' "$TMP/verdict" | grep -v RESULT
read -r _ packets segs rx unknown invalid kdrops captured bad longest long_frames passed <<<"$(grep RESULT "$TMP/verdict")"
psp_check "GSO: TC saw $packets packets carrying $segs segments" test "$segs" -gt "$packets"
psp_check "every segment reached the pacer tagged with its class ($rx of $segs)" \
    test "$((rx + kdrops))" -eq "$segs"
psp_check "no unknown tag, no invalid frame ($unknown, $invalid)" test "$unknown" -eq 0 -a "$invalid" -eq 0
psp_check "nothing on the wire with a tag: $bad of $captured frames not for the receiver" \
    test "$bad" -eq 0 -a "$captured" -gt 1000
# The pacer sends segments only; a GSO packet reaches the wire whole only
# when TC passed it unpaced (the daemon stalled past its heartbeat: the
# fail-open path, counted in tc_passed), so each long frame is one of those.
psp_check "no frame longer than 1514 B on the wire but what TC passed unpaced ($long_frames long, longest $longest B; $passed passed)" \
    test "$long_frames" -le "$passed"

psp_check "detach" $N "$PSPXDP" detach $DEV
psp_finish
