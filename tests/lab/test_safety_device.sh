#!/usr/bin/env bash
# Safety, the device changes under the pacer (docs/design.md §1.10, §6):
#  10. DEV's MTU raised to 2000: the pacer veth follows, 1900-byte datagrams
#      through a paced class arrive (before: they vanished in the pacer veth);
#      raised to 9000 (more than an AF_XDP frame carries): the daemon stops,
#      says why in its log and in status, and traffic passes unpaced;
#   4. DEV deleted: the daemon notices, removes the pacer veth, marks the
#      state and exits; status says DEV is gone; DEV re-created: attach
#      replaces the dead attachment and keeps the classes and filters.
# Exit 77 = skipped.
TAG=psd$$
source "$(cd "$(dirname "$0")" && pwd)/safety_lib.sh"
S=$TAG-s D=$TAG-d
DEV=${TAG}a PEER=${TAG}b
PSP_DEVS+=("$DEV")
psp_make_wire $S $D $DEV $PEER 10.79.0 || exit 1
N="nsenter --net=/run/netns/$S" # for psp_status_is
P() { psp_in_ns $S "$PSPXDP" "$@"; }
# through COUNT SIZE: datagrams of SIZE bytes to port 5001 (class 1:1); prints how many arrived
through() {
    psp_in_ns $D timeout 10 python3 "$PSP_ROOT/tests/lab/udp.py" recv 5001 2 >"$TMP/got" & local r=$!
    psp_wait_for 10 psp_listening $D udp 5001 || echo "     (the receiver did not bind port 5001)"
    # Spaced 5 ms apart: a 10 Mbit/s class takes that without a backlog.
    psp_in_ns $S timeout 5 python3 "$PSP_ROOT/tests/lab/udp.py" send 10.79.0.2 5001 "$1" "$2" 0.005
    wait $r; read -r got _ <"$TMP/got"; echo "$got"
}
tx_frames() { # the pacer's tx_frames of class 1:1
    local n
    n=$(P status $DEV -j 2>/dev/null | jq '[.classes[] | select(.class == "1:1") | .tx_frames // 0] | add // 0' 2>/dev/null)
    echo "${n:--1}"
}
set_mtu() { ip -n $S link set $DEV mtu $1; ip -n $D link set $PEER mtu $1; }
pacer_mtu() { psp_in_ns $S ip -o link show "psp$(ifindex $S $DEV)$1" 2>/dev/null | grep -o 'mtu [0-9]*' | cut -d' ' -f2; }

psp_check "attach" works P attach $DEV --line-rate 1gbit
psp_check "class 1:1 10mbit" works P class set $DEV 1:1 10mbit
psp_check "filter udp dport 5001 -> 1:1" works P filter add $DEV proto udp dport 5001 classid 1:1
PID=$(psp_daemon_pid $DEV)

# --- 10. MTU raised within what the pacer carries: followed
set_mtu 2000
# The pacer veth carries DEV's MTU plus the 8-byte hand-over tag.
psp_check "the pacer veth follows DEV's MTU (2000 + 16, the tag)" psp_wait_for 5 bash -c "[[ \$(nsenter --net=/run/netns/$S ip -o link show psp$(ifindex $S $DEV)a | grep -o 'mtu [0-9]*') == 'mtu 2016' ]]"
psp_check "  ... both ends" test "$(pacer_mtu b)" == 2016
psp_check "  ... the daemon is the same process and alive (its loop restarted)" psp_wait_for 5 bash -c "[[ \$(cat /run/pspxdp/$DEV.pid) == $PID ]] && nsenter --net=/run/netns/$S $PSPXDP status $DEV | grep -q 'alive, heartbeat'"
psp_check "  ... serving class 1:1 again" psp_wait_for 10 psp_status_is $DEV 'c("1:1")["state"] == "served"'
tx0=$(tx_frames)
got=$(through 20 1900)
echo "     20 x 1900 B at MTU 2000: $got arrived"
psp_check "1900-byte datagrams through the paced class arrive" test "$got" -eq 20
counted_since() { (( $(tx_frames) - $1 >= 20 )); }
psp_check "  ... paced (counted by the pacer)" psp_wait_for 3 counted_since "$tx0"

# --- 10. MTU beyond what an AF_XDP frame carries: stop, say so, fail open
set_mtu 9000
psp_check "the daemon stops" psp_wait_for 5 psp_gone $PID
psp_check "  ... its log says why" grep -q "MTU changed from 2000 to 9000, which the pacer cannot carry (more than 3490)" /run/pspxdp/$DEV.log
P status $DEV >"$TMP/status" 2>&1
psp_check "  ... status says why" grep -q "DEAD.*MTU changed from 2000 to 9000" "$TMP/status"
sed 's/^/     | /' "$TMP/status" | head -2
psp_check "  ... the pacer veth is gone" test -z "$(pacer_mtu a)"
got=$(through 10 8000)
psp_check "8000-byte datagrams pass unpaced (fail-open)" test "$got" -eq 10

before=$(snapshot $S $DEV; cat /run/pspxdp/$DEV.state)
psp_check "attach at MTU 9000 is refused" fails P attach $DEV --line-rate 1gbit
psp_check "  ... saying the pacer cannot carry it" said "MTU 9000 is more than the pacer can carry"
psp_check "  ... nothing changed" test "$(snapshot $S $DEV; cat /run/pspxdp/$DEV.state)" == "$before"

# --- 4. DEV deleted under a live daemon
set_mtu 1500
psp_check "re-attach at MTU 1500 replaces the stopped attachment" works P attach $DEV --line-rate 1gbit
psp_check "  ... keeping class 1:1" bash -c "nsenter --net=/run/netns/$S $PSPXDP class show $DEV | grep -q '^class 1:1 .*10Mbit'"
PID=$(psp_daemon_pid $DEV)
OLDIDX=$(ifindex $S $DEV)
ip -n $S link del $DEV
psp_check "the daemon notices and exits" psp_wait_for 5 psp_gone $PID
psp_check "  ... after removing the pacer veth" bash -c "! nsenter --net=/run/netns/$S ip link show psp${OLDIDX}a >/dev/null 2>&1"
psp_check "  ... its log says DEV went" grep -q "was deleted" /run/pspxdp/$DEV.log
psp_check "  ... the state says why" grep -q "^stopped=.*was deleted" /run/pspxdp/$DEV.state
psp_check "  ... the pins (classes, filters) stay" test -e /sys/fs/bpf/pspxdp/$DEV/class_config
P status $DEV >"$TMP/status" 2>&1
psp_check "status says DEV is gone" grep -q "is gone from this network namespace" "$TMP/status"
sed 's/^/     | /' "$TMP/status" | head -1

# --- 4. DEV re-created: attach replaces the dead attachment, keeps the configuration
ip -n $S link add $DEV type veth peer name $PEER netns $D
ip -n $S addr add 10.79.0.1/24 dev $DEV; ip -n $D addr add 10.79.0.2/24 dev $PEER
ip -n $S link set $DEV up; ip -n $D link set $PEER up
ip -n $S neigh replace 10.79.0.2 lladdr "$(ip -n $D -br link show $PEER | awk '{print $3}')" dev $DEV nud permanent
ip -n $D neigh replace 10.79.0.1 lladdr "$(ip -n $S -br link show $DEV | awk '{print $3}')" dev $PEER nud permanent
psp_check "attach of the re-created DEV" works P attach $DEV --line-rate 1gbit
psp_check "  ... replaced the dead attachment" said "replacing it, classes and filters kept"
psp_check "  ... class 1:1 kept" bash -c "nsenter --net=/run/netns/$S $PSPXDP class show $DEV | grep -q '^class 1:1 .*10Mbit'"
psp_check "  ... filter kept" bash -c "nsenter --net=/run/netns/$S $PSPXDP filter show $DEV | grep -q 'dport 5001'"
psp_check "  ... status alive" bash -c "nsenter --net=/run/netns/$S $PSPXDP status $DEV | grep -q 'alive, heartbeat'"
psp_check "  ... serving class 1:1" psp_wait_for 10 psp_status_is $DEV 'c("1:1")["state"] == "served"'
got=$(through 20 1000)
psp_check "traffic through the paced class arrives" test "$got" -eq 20
psp_check "detach" works P detach $DEV
psp_check "nothing left" test -z "$(ls /sys/fs/bpf/pspxdp/$DEV /run/pspxdp/$DEV.* 2>/dev/null; psp_in_ns $S ip -o link show | grep ' psp[0-9]*[ab]')"
psp_finish
