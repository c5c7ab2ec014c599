#!/usr/bin/env bash
# End to end through the real data path, in two throwaway network namespaces:
# attach (checks, veth pair, BPF, daemon), class + filter, UDP through a paced
# class (rate, no loss, UMEM accounting balanced), rate change, delete with
# backlog (drained, not lost), more classes than sockets (all served), detach
# (nothing left; a clsact qdisc that was there before stays). Exit 77 =
# skipped (not root / no binary).
set -u
source "$(cd "$(dirname "$0")" && pwd)/../../lab/netns.sh"
[[ $EUID -eq 0 ]] || { echo "skip: needs root"; exit 77; }
[[ -x $PSPXDP ]] || { echo "skip: no $PSPXDP"; exit 77; }
command -v python3 >/dev/null || { echo "skip: no python3"; exit 77; }

TAG=psp-dp-e2e$$
SRC=$TAG-s DST=$TAG-d DEV=dpe2e0
N="nsenter --net=/run/netns/$SRC"
D="nsenter --net=/run/netns/$DST"
TMP=$(mktemp -d)
FAILS=0

cleanup() {
    psp_teardown "$PSPXDP" $SRC $DST $DEV
    rm -rf "$TMP"
}
trap cleanup EXIT

check() { # check DESCRIPTION COMMAND...
    local what=$1; shift
    if "$@"; then echo "ok   - $what"; else echo "FAIL - $what"; FAILS=$((FAILS + 1)); fi
}

ip netns add $SRC && ip netns add $DST || exit 1
ip -n $SRC link add $DEV type veth peer name $DEV netns $DST || exit 1
ip -n $SRC addr add 10.199.0.1/24 dev $DEV
ip -n $DST addr add 10.199.0.2/24 dev $DEV
ip -n $SRC link set $DEV up; ip -n $DST link set $DEV up
ip -n $SRC link set lo up; ip -n $DST link set lo up
ip -n $SRC link add dpdown0 type veth peer name dpdown1
$N ping -c1 -W2 10.199.0.2 >/dev/null

cat >"$TMP/recv.py" <<'PY'
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("0.0.0.0", int(sys.argv[1]))); s.settimeout(0.3)
ts, end = [], time.time() + float(sys.argv[2])
while time.time() < end:
    try: d = s.recv(65536)
    except socket.timeout: continue
    ts.append((time.monotonic(), len(d)))
rate = 0
if len(ts) > 2:
    rate = sum(max(l + 42, 60) + 4 for _, l in ts[1:]) * 8 / (ts[-1][0] - ts[0][0])
print(len(ts), int(rate))
PY
cat >"$TMP/send.py" <<'PY'
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for i in range(int(sys.argv[2])): s.sendto(b"x" * int(sys.argv[3]), (sys.argv[1], 5001))
PY

# --- refused attaches change nothing
check "attach of a missing device fails" bash -c "! $N $PSPXDP attach nosuch0 2>/dev/null"
check "attach of a non-Ethernet device fails" bash -c "! $N $PSPXDP attach lo 2>/dev/null"
check "attach of a down device fails" bash -c "! $N $PSPXDP attach dpdown0 2>/dev/null"
check "refused attaches left no pins" test ! -e /sys/fs/bpf/pspxdp/nosuch0 -a ! -e /sys/fs/bpf/pspxdp/lo

# --- a clsact qdisc that is not ours must survive detach
$N tc qdisc add dev $DEV clsact
check "attach" $N "$PSPXDP" attach $DEV --line-rate 1gbit --queues 4
check "second attach refused" bash -c "! $N $PSPXDP attach $DEV 2>/dev/null"
check "status says alive" bash -c "$N $PSPXDP status $DEV | grep -q 'alive, heartbeat'"
check "class set 1:1 10mbit" $N "$PSPXDP" class set $DEV 1:1 10mbit
check "filter udp dport 5001" $N "$PSPXDP" filter add $DEV proto udp dport 5001 classid 1:1
sleep 0.1

# --- 600 x 1000 B at 10 Mbit/s: ~0.5 s, nothing lost, rate within 5 %
$D timeout 10 python3 "$TMP/recv.py" 5001 2.5 >"$TMP/r1" & sleep 0.3
$N timeout 5 python3 "$TMP/send.py" 10.199.0.2 600 1000
wait
read -r got rate <"$TMP/r1"
echo "     10mbit: received $got, rate $rate bit/s"
check "all 600 datagrams arrived" test "$got" -eq 600
# Never faster than the class (the pacer's promise); slower only when the
# daemon is starved of CPU (a loaded 2-vCPU VM): the engine then cuts the
# stall out of the byte clock instead of bursting to catch up.
check "rate <= 10 Mbit/s + 3 %" test "$rate" -lt 10300000
check "rate >= 10 Mbit/s - 40 % (loaded VM)" test "$rate" -gt 6000000
$N "$PSPXDP" status $DEV -j >"$TMP/s1"
check "pacer counted 600 frames on 1:1" python3 -c "
import json; d = json.load(open('$TMP/s1'))
c = [c for c in d['classes'] if c['class'] == '1:1'][0]
drops = sum(v for k, v in c.items() if k.startswith('drop_'))
assert c['tx_frames'] == 600 and drops == 0 and c['backlog_frames'] == 0, c"

# --- delete a class with a backlog: drained, not lost
check "rate change to 2mbit" $N "$PSPXDP" class set $DEV 1:1 2mbit
sleep 0.1
$D timeout 10 python3 "$TMP/recv.py" 5001 4 >"$TMP/r2" & sleep 0.3
$N timeout 5 python3 "$TMP/send.py" 10.199.0.2 300 1000
sleep 0.2
$N "$PSPXDP" filter del $DEV proto udp dport 5001
check "class del with backlog" $N "$PSPXDP" class del $DEV 1:1
wait
read -r got rate <"$TMP/r2"
echo "     2mbit + delete: received $got, rate $rate bit/s"
check "all 300 queued datagrams drained after delete" test "$got" -eq 300
check "drained at <= 2 Mbit/s + 3 %" test "$rate" -lt 2060000
check "drained at >= 2 Mbit/s - 40 % (loaded VM)" test "$rate" -gt 1200000
sleep 1.2 # the daemon checks its UMEM accounting every second
$N "$PSPXDP" status $DEV -j >"$TMP/s2"
check "UMEM accounting balanced" python3 -c "
import json; d = json.load(open('$TMP/s2'))['daemon']
assert d['accounting_failures'] == 0 and d['rx_frames'] > 0, d"

# --- more classes than sockets: classes are not sockets, every one is served
for i in 1 2 3 4 5; do $N "$PSPXDP" class set $DEV 1:$i 1mbit; done
sleep 0.1
$N "$PSPXDP" status $DEV -j >"$TMP/s3"
check "5 classes on 4 sockets are all served" python3 -c "
import json; d = json.load(open('$TMP/s3'))
c = {c['class']: c for c in d['classes']}
assert all(c['1:%d' % i]['state'] == 'served' for i in range(1, 6)), c"

# --- detach removes exactly what attach created
check "detach" $N "$PSPXDP" detach $DEV
check "no pacer veths left" bash -c "! $N ip -br link | grep -q '^psp'"
check "no pins left" test ! -e /sys/fs/bpf/pspxdp/$DEV
check "no run files left" bash -c "! ls /run/pspxdp/$DEV.* 2>/dev/null | grep -q ."
check "foreign clsact qdisc kept" bash -c "$N tc qdisc show dev $DEV | grep -q clsact"
check "no TC filter left" bash -c "[ -z \"\$($N tc filter show dev $DEV egress)\" ]"
$N tc qdisc del dev $DEV clsact

# --- our own clsact goes with us
$N "$PSPXDP" attach $DEV --line-rate 1gbit --queues 2 >/dev/null 2>&1
$N "$PSPXDP" detach $DEV >/dev/null
check "clsact created by attach is removed by detach" bash -c "! $N tc qdisc show dev $DEV | grep -q clsact"

echo "$FAILS failure(s)"
[[ $FAILS -eq 0 ]]
