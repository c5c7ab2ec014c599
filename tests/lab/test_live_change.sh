#!/usr/bin/env bash
# Then a class deleted with frames queued: every frame sent is delivered or
# counted (drop_deleted), none lost silently.
#
# A live rate change: a saturated paced class is changed 300 -> 100 -> 300
# Mbit/s mid-run. From a capture at the far end: the step time (the first
# frame of a run spaced at the new rate, minus the time the command was
# issued) and the loss (none: every frame TC handed to the pacer arrives,
# the pacer drops nothing).
#
# Saturated without loss: a TCP flow (iperf3) whose window (-w) is far above
# its bandwidth-delay product but below what the pacer can hold, so the class
# is backlogged all the time and nothing needs to be dropped: at 100 Mbit/s
# the backlog is at most one window.
#
# The step time is taken on the capture's clock (the receiving kernel's
# timestamps, CLOCK_REALTIME as `date`): a veth has no serialization clock,
# so these are real-time figures, printed, not judged. Exit 77 = skipped
# (also when the daemon stalled past its heartbeat or the capture lost
# frames: the machine was too loaded to judge anything).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../../lab/netns.sh"
psp_require test_live_change "$PSPXDP" "$TRAFFIC" -- python3 iperf3 tcpdump

NET=$(psp_random_net)
psp_lab_begin lc $NET
now() { date +%s.%N; }

psp_check "attach" $N "$PSPXDP" attach $DEV --line-rate 1gbit || { psp_finish; exit 1; }
# Real-time priority for our daemon, as the lab gives it: on a busy 2-core
# machine a daemon at normal priority misses its heartbeat and TC passes
# traffic unpaced (fail-open), which is not what this test is about.
chrt -a -f -p 10 "$(psp_daemon_pid $DEV)" >/dev/null 2>&1 || echo "     (no real-time priority for the daemon)"
# Only words every pspxdp version takes (class set, status -j), so the same
# test measures the data path before and after a change to it.
psp_check "class set 1:1 300mbit" $N "$PSPXDP" class set $DEV 1:1 300mbit flows off
psp_check "filter tcp dport 5201 -> 1:1" $N "$PSPXDP" filter add $DEV proto tcp dport 5201 classid 1:1
psp_check "class 1:1 served" psp_wait_for 10 psp_status_is $DEV 'c("1:1")["state"] == "served"'

$D timeout 20 iperf3 -s -1 -p 5201 >"$TMP/server.log" 2>&1 &
PIDS+=($!)
psp_check "iperf3 server listening" psp_wait_for 10 psp_listening $DST tcp 5201
# Headers only (the lengths are in the pcap records): every frame towards
# the server, the frames TC handed to class 1:1.
psp_check "capture on $PEER" psp_capture "$D" $PEER "$TMP/cap" 16384 "tcp dst port 5201"
$N "$PSPXDP" status $DEV -j >"$TMP/s0"

$N timeout 20 iperf3 -c $NET.2 -p 5201 -t 3.2 -w 256K -J >"$TMP/iperf3.json" 2>"$TMP/iperf3.err" &
CLIENT=$!
# The command's time: taken inside the namespace just before pspxdp starts
# (nsenter's own start-up is not the command's). With strace, also the
# moment it wrote class_config (its first map update): the daemon's own
# reaction, whatever the command's start-up costs on a loaded machine.
change() { # RATE TRACE_FILE
    if command -v strace >/dev/null; then
        $N sh -c 'date +%s.%N; exec strace -ttt -e trace=bpf -o "$0" "$@"' "$2" \
            "$PSPXDP" class set $DEV 1:1 "$1" flows off
    else
        $N sh -c 'date +%s.%N; exec "$0" "$@"' "$PSPXDP" class set $DEV 1:1 "$1" flows off
    fi
}
written() { # TRACE_FILE: the time of the first map update, or 0
    awk '/BPF_MAP_UPDATE/ {print $1; exit}' "$1" 2>/dev/null | grep . || echo 0
}
sleep 1.0 # traffic, not a wait: 1 s at 300 Mbit/s (its mean rate is measured)
T1=$(change 100mbit "$TMP/trace1")
T1_END=$(now)
sleep 1.0 # traffic, not a wait: 1 s at 100 Mbit/s (its mean rate is measured)
T2=$(change 300mbit "$TMP/trace2")
T2_END=$(now)
W1=$(written "$TMP/trace1") W2=$(written "$TMP/trace2")
wait $CLIENT
client_rc=$?
psp_check "1:1 settled: the daemon published what TC handed it" psp_wait_for 10 psp_settled $DEV 1:1
$N "$PSPXDP" status $DEV -j >"$TMP/s1"
kill -INT $PSP_CAPTURE_PID 2>/dev/null
wait $PSP_CAPTURE_PID 2>/dev/null
psp_check "iperf3 ran" test $client_rc -eq 0

python3 "$HERE/live_change.py" change "$TMP/cap.pcap" "$TMP/iperf3.json" "$TMP/s0" "$TMP/s1" "$T1" "$T1_END" \
    "$T2" "$T2_END" "$TMP/cap.tcpdump" "$W1" "$W2" >"$TMP/result"
read -r frames lost retr drops ring passed capdrops step_down step_up cmd1 cmd2 react_down react_up \
    r300 r100 r300b stale <"$TMP/result"
echo "     captured $frames data frames ($capdrops dropped by the capture)"
echo "     rate 300 -> 100 Mbit/s: step ${step_down} ms after the command started (it took $cmd1 ms)," \
    "${react_down} ms after it wrote class_config"
echo "     rate 100 -> 300 Mbit/s: step ${step_up} ms after the command started (it took $cmd2 ms)," \
    "${react_up} ms after it wrote class_config"
echo "     mean L2 rate: ${r300} Mbit/s before, ${r100} between, ${r300b} after"
echo "     loss: $lost frames (handed to the pacer and not delivered), pacer drops $drops," \
    "socket ring full $ring, TC passed unpaced $passed; TCP retransmits $retr (spurious ones included)"
# A daemon stalled past its heartbeat (fail-open: TC passed frames unpaced)
# leaves the pacer's ceiling and its loss unjudgeable on this run: the
# machine's load, not the change. Frames the capture missed (tcpdump starved)
# only lower the rates measured on it, and the loss is the kernel's count.
LOADED=
((stale > 0)) && LOADED="$stale frames passed on a stale heartbeat"
# Real-time figures on a shared 2-core VM (the step times and the mean rates
# above) are printed, not judged: a starved daemon or TCP sender sends
# slower. What is asserted is the configuration the daemon took and the
# pacer's promise (never faster than the class).
psp_check "the daemon runs 1:1 at 300 Mbit/s again" psp_status_is $DEV 'c("1:1")["rate_bps"] == 300000000'
psp_check "the daemon re-read its configuration for both changes" \
    python3 "$HERE/live_change.py" reloads "$TMP/s0" "$TMP/s1"
psp_check "zero loss: the pacer dropped nothing" test "$drops" -eq 0 -a "$ring" -eq 0
if [[ -z $LOADED ]]; then
    psp_check "the rate followed the change to 100 Mbit/s (never above it)" awk "BEGIN { exit !($r100 <= 103) }"
    psp_check "zero loss: every frame handed to the pacer was delivered" test "$lost" -eq 0
    psp_check "everything went through the pacer" test "$passed" -eq 0
else
    echo "skip - the ceiling and the loss not judged ($LOADED)"
fi

# ---- delete a class with a backlog: delivered or counted, nothing else
psp_check "class set 1:2 5mbit" $N "$PSPXDP" class set $DEV 1:2 5mbit flows off
psp_check "filter udp dport 5002 -> 1:2" $N "$PSPXDP" filter add $DEV proto udp dport 5002 classid 1:2
psp_check "class 1:2 served" psp_wait_for 10 psp_status_is $DEV 'c("1:2")["state"] == "served"'
$D timeout 10 "$TRAFFIC" sink 5002 --seconds 4 >"$TMP/sink.json" &
SINK=$!
PIDS+=($SINK)
psp_check "sink bound to port 5002" psp_wait_for 10 psp_listening $DST udp 5002
# 600 x 1000 B at 20 Mbit/s into a 5 Mbit/s class: ~0.9 s of backlog.
$N timeout 5 "$TRAFFIC" send $NET.2 5002 --rate 20mbit --size 1000 --count 600 >"$TMP/send.json" &
SEND=$!
PIDS+=($SEND)
psp_wait_for 10 psp_status_is $DEV 'c("1:2")["backlog_frames"] > 0'
$N "$PSPXDP" status $DEV -j >"$TMP/d0"
$N "$PSPXDP" filter del $DEV proto udp dport 5002 # the rest goes to the default class
$N "$PSPXDP" class del $DEV 1:2
del_rc=$?
# The deleted class drains: its counters while it does, until it is empty
# (backlog 0: nothing more is sent or dropped for it) or gone.
SAMPLES=0
drained() {
    SAMPLES=$((SAMPLES + 1))
    $N "$PSPXDP" status $DEV -j >"$TMP/d$SAMPLES"
    python3 "$HERE/live_change.py" drained "$TMP/d$SAMPLES"
}
psp_check "the deleted class drains" psp_wait_for 10 drained
wait $SEND
wait $SINK
psp_check "class del with a backlog" test $del_rc -eq 0
python3 "$HERE/live_change.py" deleted "$TMP/send.json" "$TMP/sink.json" "$TMP"/d* >"$TMP/del"
read -r sent got counted backlog <"$TMP/del"
echo "     class deleted with $backlog frames queued: sent $sent, delivered $got, counted drops $counted"
psp_check "deleted with a backlog" test "$backlog" -gt 0
psp_check "every datagram delivered or counted" test "$sent" -eq $((got + counted))

if [[ -n $LOADED ]] && ((PSP_FAILS == 0)); then
    echo "skipped: machine too loaded ($LOADED)"
    exit 77
fi
psp_finish
