#!/usr/bin/env bash
# The lab's delay line (lab/psp_delay): three throwaway namespaces A - L - B,
# the delay line in L forwarding A's frames to B with a fixed delay.
#   1. accuracy: stamped UDP probes (2000/s for 3 s) through a 20 ms delay:
#      never early (the one-way delay at B's kernel >= 20 ms), no probe lost,
#      none reordered; the median, mean, p99 and max of the one-way delay
#      minus 20 ms, and the delay line's own lateness, are printed: how late
#      a timer fires is this machine's (with another program on a core,
#      milliseconds), not the delay line's;
#   2. bounded memory: a flood (1472 B at ~90 Mbit/s) into a 64 KiB buffer
#      that 20 ms of it (~230 KB) overflows: the buffer never holds more than its
#      size, the delay line's resident memory stays bounded, every frame sent
#      is received or counted as dropped, still none reordered.
# Everything carries the prefix psp-dly / psd and is removed on exit.
# Exit 77 = skipped (not root, not built).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../../lab/netns.sh"
psp_require test_lab_delay "$DELAY" "$TRAFFIC" -- ip python3 nsenter timeout ethtool

psp_begin dly
A=psp-dly$$-a L=psp-dly$$-l B=psp-dly$$-b
# A set-up step that fails ends the test: a failure, counted.
die() { psp_check "$*" false; psp_finish; exit 1; }

for ns in $A $L $B; do psp_netns $ns || die "namespace $ns"; done
ip -n $A link add psd$$a type veth peer name psd$$la netns $L || die "veth A-L"
ip -n $L link add psd$$lb type veth peer name psd$$b netns $B || die "veth L-B"
for x in "$A psd$$a" "$L psd$$la" "$L psd$$lb" "$B psd$$b"; do ip -n ${x% *} link set ${x#* } up; done
# Checksums must be complete before the delay line copies a frame (a veth
# hands AF_PACKET partial checksums otherwise, and B drops every datagram).
ip netns exec $A ethtool -K psd$$a tx off >/dev/null || die "ethtool -K tx off"
ip -n $A addr add 10.76.0.1/24 dev psd$$a
ip -n $B addr add 10.76.0.2/24 dev psd$$b
mac() { ip -n "$1" -br link show "$2" | awk '{print $3}'; }
# A sends to L's MAC (the delay line's input); the delay line rewrites it to B's.
ip -n $A neigh replace 10.76.0.2 lladdr "$(mac $L psd$$la)" dev psd$$a nud permanent
MAC_B=$(mac $B psd$$b)
A_="nsenter --net=/run/netns/$A" L_="nsenter --net=/run/netns/$L" B_="nsenter --net=/run/netns/$B"

run() { # run NAME DELAY_MS BUFFER SECONDS -- SENDER-ARGS...: one delay line, one sink, one sender
    local name=$1 ms=$2 buffer=$3 secs=$4; shift 5
    $L_ timeout $((secs + 10)) "$DELAY" --in psd$$la --out psd$$lb --dst-mac "$MAC_B" \
        --delay-ms "$ms" --buffer "$buffer" --seconds $((secs + 3)) --rt-priority 50 >"$TMP/$name.delay.json" &
    local dpid=$!
    PIDS+=($dpid)
    $B_ timeout $((secs + 10)) "$TRAFFIC" sink 7001 --seconds $((secs + 2)) --stamped >"$TMP/$name.sink.json" &
    local spid=$!
    PIDS+=($spid)
    psp_wait_for 10 psp_listening $B udp 7001 || die "$name: the sink did not bind port 7001"
    # The delay line is ready once it has its two AF_PACKET sockets (in, out).
    psp_wait_for 5 eval '(( $(psp_in_ns $L ss -H -0 | wc -l) >= 2 ))' || die "$name: the delay line did not open its sockets"
    $A_ timeout $((secs + 10)) "$TRAFFIC" send "$@" --seconds "$secs" --stamp >"$TMP/$name.send.json" &
    local tpid=$!
    PIDS+=($tpid)
    # The delay line's memory peak (VmHWM), read until the sender is done.
    local dproc
    dproc=$(pgrep -P $dpid psp_delay || echo $dpid)
    : >"$TMP/$name.hwm"
    peak_memory() {
        local kb
        kb=$(awk '/^VmHWM/ {print $2}' /proc/$dproc/status 2>/dev/null)
        [[ -n $kb ]] && echo "$kb" >"$TMP/$name.hwm"
        ! kill -0 $tpid 2>/dev/null
    }
    psp_wait_for $((secs + 10)) peak_memory
    wait $tpid $spid $dpid
    grep -q . "$TMP/$name.delay.json" || die "$name: the delay line printed nothing"
}

# 1. accuracy: 2000 probes/s of 100 B (~1.9 Mbit/s) through 20 ms.
run acc 20 $((8 << 20)) 3 -- 10.76.0.2 7001 --rate 2336kbit --size 100
# 2. memory: ~90 Mbit/s of 1472 B through 20 ms needs ~230 KB of queue: a
#    64 KiB buffer must overflow.
run mem 20 65536 2 -- 10.76.0.2 7001 --rate 90mbit --size 1472

psp_verdict python3 "$HERE/verdict_lab_delay.py" "$TMP"
psp_finish
