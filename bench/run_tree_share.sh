#!/usr/bin/env bash
# Class trees through the daemon in real time (clockless veth, design §3.12):
# 1:1 rate 300mbit ceil 300mbit with two children of rate 100mbit ceil
# 300mbit, each offered 250 Mbit/s of UDP for 3 s; 1:20 at prio 1, then at
# prio 0 beside 1:10's prio 0. Prints each child's tx_bytes over the run
# (stats before and after the sender) and what the sink received; the rules
# say 200/100, then 150/150. A measurement, not a test: run it with
# /work/wt/lab (namespaces) on a quiet machine.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)/../tests/lab
source "$HERE/../../lab/netns.sh"
psp_require tree_share "$PSPXDP" "$TRAFFIC" -- python3
NET=$(psp_random_net)
psp_lab_begin tr $NET
P() { $N "$PSPXDP" "$@"; }
psp_check "attach" P attach $DEV --line-rate 1gbit || { psp_finish; exit 1; }
chrt -a -f -p 10 "$(psp_daemon_pid $DEV)" >/dev/null 2>&1 || true
for prio2 in 1 0; do
  P class set $DEV 1:1 rate 300mbit ceil 300mbit
  P class set $DEV 1:10 parent 1:1 rate 100mbit ceil 300mbit prio 0 flows off
  P class set $DEV 1:20 parent 1:1 rate 100mbit ceil 300mbit prio $prio2 flows off
  P filter add $DEV proto udp dport 5001 classid 1:10 2>/dev/null
  P filter add $DEV proto udp dport 5002 classid 1:20 2>/dev/null
  psp_wait_for 10 psp_status_is $DEV 'c("1:20")["state"] == "served"'
  P stats $DEV -j > $TMP/s0.json
  $D timeout 10 "$TRAFFIC" sink 5001,5002 --seconds 5 >"$TMP/sink.json" 2>&1 &
  PIDS+=($!)
  psp_wait_for 10 psp_listening $DST udp 5002
  $N timeout 10 "$TRAFFIC" send --flow $NET.2:5001:250mbit --flow $NET.2:5002:250mbit --size 1400 --seconds 3 >"$TMP/send.json"
  P stats $DEV -j > $TMP/s1.json
  wait ${PIDS[-1]} 2>/dev/null
  echo "prio of 1:20 = $prio2 (1:10 prio 0); ideal $([[ $prio2 == 1 ]] && echo '200/100' || echo '150/150') Mbit/s"
  python3 "$HERE/../../bench/tree_share.py" "$TMP/s0.json" "$TMP/s1.json"
  cat "$TMP/sink.json" | head -30
done
P detach $DEV
psp_finish
