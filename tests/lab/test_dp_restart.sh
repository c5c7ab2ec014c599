#!/usr/bin/env bash
# Data path v2: kill -9 under traffic loses nothing uncounted (docs/design.md §1.9).
#
# A UDP stream at 3x its paced class's rate keeps the class at its limit. The
# daemon is killed with kill -9 mid-stream, pspxdp attach replaces the dead
# attachment, the stream goes on. Afterwards every datagram the sender sent
# is accounted for:
#
#   sent = received at the sink
#        + receiver drops (UdpRcvbufErrors, UdpInErrors)
#        + the class's pacer drops (drop_limit, drop_died: what the killed
#          daemon held, counted by the next one, ...)
#        + kernel drops of the pacer sockets, frames lost in the killed
#          daemon's socket rings (died_in_rings), XDP drops without a socket
#        + drops on the sender's veths (DEV, the pacer pair)
#
# and the restart was counted (restarts 1, drop_died > 0: the class had a
# backlog when it died). Exit 77 = skipped.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../../lab/netns.sh"
psp_require test_dp_restart "$PSPXDP" "$TRAFFIC" -- ip nstat python3 nsenter timeout

psp_lab_begin rst 10.79.0
psp_check "attach" $N "$PSPXDP" attach $DEV --line-rate 1gbit
psp_check "class 1:1 5mbit" $N "$PSPXDP" class set $DEV 1:1 5mbit
psp_check "filter udp dport 5002" $N "$PSPXDP" filter add $DEV proto udp dport 5002 classid 1:1
psp_check "class 1:1 served" psp_wait_for 10 psp_status_is $DEV 'c("1:1")["state"] == "served"'

# Drops the sender's namespace counted on its links: DEV and the pacer veth
# pair. (The receiving end counts every PAUSE gap frame as dropped: not
# comparable, and a 15 Mbit/s stream cannot overrun it.)
link_drops() {
    $N ip -s -j link show | python3 "$HERE/dp_restart.py" link-drops
}
drops0=$(link_drops)
$D nstat -n >/dev/null 2>&1
$D timeout 30 "$TRAFFIC" sink 5002 --seconds 12 >"$TMP/sink.json" &
SINK=$!
PIDS+=($SINK)
psp_check "sink bound to port 5002" psp_wait_for 10 psp_listening $DST udp 5002
$N timeout 20 "$TRAFFIC" send 10.79.0.2 5002 --rate 15mbit --size 200 --seconds 7 >"$TMP/send.json" &
SEND=$!
PIDS+=($SEND)
# Killed once the class is at its limit: it then holds a full backlog.
psp_check "class 1:1 at its limit (drop_limit > 0)" psp_wait_for 10 psp_status_is $DEV 'c("1:1")["drop_limit"] > 0'
DPID=$(psp_daemon_pid $DEV)
psp_check "daemon pid known ($DPID)" test -n "$DPID"
[[ -n $DPID ]] && kill -9 "$DPID"
psp_check "daemon dead after kill -9" psp_wait_for 5 psp_gone "$DPID"
psp_check "status says the daemon is not running" \
    psp_wait_for 5 bash -c "$N $PSPXDP status $DEV | grep -q 'daemon: not running'"
psp_check "attach replaces the dead attachment" $N "$PSPXDP" attach $DEV --line-rate 1gbit
wait $SEND
# The class drains its backlog at 5 Mbit/s: wait until it is empty.
psp_check "the backlog drains" psp_wait_for 10 psp_status_is $DEV 'all(c["backlog_frames"] == 0 for c in d["classes"])'
# The sink listens 5 s past the stream's end: the daemon has published the
# kernel's counts (every 100 ms) long before it returns.
wait $SINK
$N "$PSPXDP" status $DEV -j >"$TMP/status.json"
$D nstat -az UdpRcvbufErrors UdpInErrors >"$TMP/nstat.txt" 2>/dev/null
drops1=$(link_drops)

python3 "$HERE/dp_restart.py" verdict "$TMP" $((drops1 - drops0)) >"$TMP/verdict"
sed 's/^/     /' "$TMP/verdict" | grep -v RESULT
read -r _ sent accounted restarts died died_rings acct <<<"$(grep RESULT "$TMP/verdict")"
psp_check "every datagram sent is received or counted ($sent sent, $accounted accounted)" \
    test "$sent" -eq "$accounted"
psp_check "the restart is counted (restarts $restarts)" test "$restarts" -eq 1
psp_check "the killed daemon's backlog is counted as drop_died ($died)" test "$died" -gt 0
psp_check "UMEM accounting balanced in the new daemon" test "$acct" -eq 0
psp_check "detach" $N "$PSPXDP" detach $DEV
psp_finish
