#!/usr/bin/env bash
# End to end through the real data path, in two throwaway network namespaces:
# attach (checks, veth pair, BPF, daemon), class + filter, UDP through a paced
# class (rate, no loss, UMEM accounting balanced), rate change, delete with
# backlog (drained, not lost), more classes than sockets (all served), detach
# (nothing left; a clsact qdisc that was there before stays). Exit 77 =
# skipped (not root / no binary).
set -u
source "$(cd "$(dirname "$0")" && pwd)/../../lab/netns.sh"
psp_require test_pacer_e2e "$PSPXDP" -- ip tc python3 nsenter timeout

psp_lab_begin e2e 10.199.0
ip -n $SRC link add dpdown0 type veth peer name dpdown1

UDP=(python3 "$PSP_ROOT/tests/lab/udp.py")

# --- refused attaches change nothing
psp_check "attach of a missing device fails" bash -c "! $N $PSPXDP attach nosuch0 2>/dev/null"
psp_check "attach of a non-Ethernet device fails" bash -c "! $N $PSPXDP attach lo 2>/dev/null"
psp_check "attach of a down device fails" bash -c "! $N $PSPXDP attach dpdown0 2>/dev/null"
psp_check "refused attaches left no pins" test ! -e /sys/fs/bpf/pspxdp/nosuch0 -a ! -e /sys/fs/bpf/pspxdp/lo

# --- a clsact qdisc that is not ours must survive detach
$N tc qdisc add dev $DEV clsact
psp_check "attach" $N "$PSPXDP" attach $DEV --line-rate 1gbit
pid_before=$(psp_daemon_pid $DEV)
psp_check "second attach: nothing to do (exit 0), the same daemon" bash -c \
    "$N $PSPXDP attach $DEV 2>&1 | grep -q 'nothing to do' && [[ \$(cat /run/pspxdp/$DEV.pid) == $pid_before ]]"
psp_check "status says alive" bash -c "$N $PSPXDP status $DEV | grep -q 'alive, heartbeat'"
psp_check "class set 1:1 10mbit flows off (a FIFO: lossless within its limit)" $N "$PSPXDP" class set $DEV 1:1 10mbit flows off
psp_check "filter udp dport 5001" $N "$PSPXDP" filter add $DEV proto udp dport 5001 classid 1:1
psp_check "class 1:1 served" psp_wait_for 10 psp_status_is $DEV 'c("1:1")["state"] == "served"'

# --- 600 x 1000 B at 10 Mbit/s: ~0.5 s, nothing lost, never faster than the class
$D timeout 10 "${UDP[@]}" recv 5001 2.5 >"$TMP/r1" &
psp_check "receiver bound to port 5001" psp_wait_for 10 psp_listening $DST udp 5001
$N timeout 5 "${UDP[@]}" send 10.199.0.2 5001 600 1000
wait $!
read -r got rate <"$TMP/r1"
echo "     10mbit: received $got, rate $rate bit/s"
psp_check "all 600 datagrams arrived" test "$got" -eq 600
# Never faster than the class (the pacer's promise). How much slower is the
# machine's: a daemon starved of CPU has the engine cut the stall out of the
# byte clock instead of bursting to catch up, so the rate above is printed,
# not floored.
psp_check "rate <= 10 Mbit/s + 3 %" test "$rate" -lt 10300000
$N "$PSPXDP" status $DEV -j >"$TMP/s1"
psp_check "pacer counted 600 frames on 1:1" psp_json_is "$TMP/s1" \
    '(c("1:1")["tx_frames"] == 600 and c("1:1")["backlog_frames"] == 0
      and sum(v for k, v in c("1:1").items() if k.startswith("drop_")) == 0)'

# --- delete a class with a backlog: drained, not lost
# daemon_counter NAME: one of the daemon's counters, now.
daemon_counter() { $N "$PSPXDP" status $DEV -j | python3 -c 'import json,sys; print(json.load(sys.stdin)["daemon"][sys.argv[1]])' "$1"; }
RELOADS=$(daemon_counter config_reloads)
psp_check "rate change to 2mbit" $N "$PSPXDP" class set $DEV 1:1 2mbit flows off
psp_check "  ... the daemon took it" psp_wait_for 10 psp_status_is $DEV "d['daemon']['config_reloads'] > $RELOADS"
$D timeout 10 "${UDP[@]}" recv 5001 4 >"$TMP/r2" &
RECV=$!
psp_check "receiver bound to port 5001" psp_wait_for 10 psp_listening $DST udp 5001
$N timeout 5 "${UDP[@]}" send 10.199.0.2 5001 300 1000
psp_check "1:1 has a backlog" psp_wait_for 10 psp_status_is $DEV 'c("1:1")["backlog_frames"] > 0'
$N "$PSPXDP" filter del $DEV proto udp dport 5001
psp_check "class del with backlog" $N "$PSPXDP" class del $DEV 1:1
wait $RECV
read -r got rate <"$TMP/r2"
echo "     2mbit + delete: received $got, rate $rate bit/s"
psp_check "all 300 queued datagrams drained after delete" test "$got" -eq 300
psp_check "drained at <= 2 Mbit/s + 3 %" test "$rate" -lt 2060000
# The daemon checks its UMEM accounting once a second, silently when it
# balances: a check that started after the drain has judged it.
CHECKS=$(daemon_counter accounting_checks)
psp_check "the daemon checked its UMEM accounting after the drain" \
    psp_wait_for 10 psp_status_is $DEV "d['daemon']['accounting_checks'] > $CHECKS"
$N "$PSPXDP" status $DEV -j >"$TMP/s2"
psp_check "UMEM accounting balanced" psp_json_is "$TMP/s2" \
    'd["daemon"]["accounting_failures"] == 0 and d["daemon"]["rx_frames"] > 0'

# --- more classes than sockets: classes are not sockets, every one is served
SOCKETS=$($N "$PSPXDP" status $DEV -j | python3 -c 'import json,sys; print(json.load(sys.stdin)["queues"])')
MORE=$((SOCKETS + 1))
for ((i = 1; i <= MORE; ++i)); do $N "$PSPXDP" class set $DEV 1:$(printf %x $i) 1mbit; done
psp_check "$MORE classes on $SOCKETS sockets are all served" psp_wait_for 10 psp_status_is $DEV "
all(c('1:%x' % i)['state'] == 'served' for i in range(1, $MORE + 1))"

# --- detach removes exactly what attach created
psp_check "detach" $N "$PSPXDP" detach $DEV
psp_check "no pacer veths left" bash -c "! $N ip -br link | grep -q '^psp'"
psp_check "no pins left" test ! -e /sys/fs/bpf/pspxdp/$DEV
psp_check "no run files left" bash -c "! ls /run/pspxdp/$DEV.* 2>/dev/null | grep -q ."
psp_check "foreign clsact qdisc kept" bash -c "$N tc qdisc show dev $DEV | grep -q clsact"
psp_check "no TC filter left" bash -c "[ -z \"\$($N tc filter show dev $DEV egress)\" ]"
$N tc qdisc del dev $DEV clsact

# --- our own clsact goes with us
$N "$PSPXDP" attach $DEV --line-rate 1gbit >/dev/null 2>&1
$N "$PSPXDP" detach $DEV >/dev/null
psp_check "clsact created by attach is removed by detach" bash -c "! $N tc qdisc show dev $DEV | grep -q clsact"

psp_finish
