#!/usr/bin/env bash
# Safety, identity (docs/design.md §1.10). An attachment is DEV's name,
# ifindex and network namespace; pins and run files are keyed by the name and
# shared by every namespace, so every command must check all three:
#   1. from another namespace where another device has DEV's ifindex, detach,
#      status, class, filter and daemon are refused and touch nothing (that
#      device's qdisc and filter stay, the real attachment keeps running); a
#      second attachment of the same name from a third namespace is refused;
#   2. device names are checked before they become paths ("../../tmp/X");
#   5. `ip netns exec NS pspxdp ...` works (the host's pins, not a private
#      bpffs), and without CAP_SYS_ADMIN it is refused with an explanation.
# Exit 77 = skipped.
TAG=psi$$
source "$(cd "$(dirname "$0")" && pwd)/safety_lib.sh"
A=$TAG-a B=$TAG-b C=$TAG-c
DEV=${TAG}d
psp_netns $A && psp_netns $B && psp_netns $C || exit 1
mkdev $A $DEV || exit 1
IDX=$(ifindex $A $DEV)
# In B, a device that happens to have DEV's ifindex, with its own clsact
# qdisc and filter (someone else's); in C, a device with DEV's name.
ip -n $B link add ${TAG}x index "$IDX" type veth peer name ${TAG}y || exit 1
ip -n $B link set ${TAG}x up
psp_in_ns $B tc qdisc add dev ${TAG}x clsact
psp_in_ns $B tc filter add dev ${TAG}x egress prio 1 handle 0x5053 protocol ip u32 match u32 0 0 classid 1:1
mkdev $C $DEV || exit 1
before_b=$(psp_in_ns $B tc qdisc show dev ${TAG}x; psp_in_ns $B tc filter show dev ${TAG}x egress)

psp_check "attach $DEV in A" works psp_in_ns $A "$PSPXDP" attach $DEV --line-rate 1gbit
PID=$(psp_daemon_pid $DEV)
before_a=$(snapshot $A $DEV)
state_before=$(cat /run/pspxdp/$DEV.state 2>/dev/null)

# --- 1. from B, nothing may act on A's attachment or on B's device
for cmd in "detach $DEV" "status $DEV" "class set $DEV 1:1 10mbit" "class show $DEV" \
           "filter add $DEV dst 10.0.0.0/8 classid 1:ffff" "daemon $DEV"; do
    psp_check "from B: $cmd is refused" fails psp_in_ns $B timeout 10 "$PSPXDP" $cmd
    psp_check "  ... naming the namespace it is attached in, in one line" \
        bash -c "grep -q 'attached in network namespace net:\[[0-9]*\], not this one (net:\[[0-9]*\])' $TMP/err && [[ \$(wc -l <$TMP/err) -eq 1 ]]"
done
show_err
psp_check "B's device kept its clsact qdisc and filter" \
    test "$(psp_in_ns $B tc qdisc show dev ${TAG}x; psp_in_ns $B tc filter show dev ${TAG}x egress)" == "$before_b"
psp_check "A's attachment is untouched (TC filter, veth, pins, run files)" test "$(snapshot $A $DEV)" == "$before_a"
psp_check "A's state file is unchanged" test "$(cat /run/pspxdp/$DEV.state 2>/dev/null)" == "$state_before"
psp_check "A's daemon still runs" alive "$PID"
psp_check "status from A: alive" bash -c "nsenter --net=/run/netns/$A $PSPXDP status $DEV | grep -q 'alive, heartbeat'"

# --- a second attachment of the same name, from C, is refused
psp_check "from C: attach of another $DEV is refused" fails psp_in_ns $C "$PSPXDP" attach $DEV --line-rate 1gbit
psp_check "  ... saying where $DEV is attached" said "attached in network namespace"
psp_check "C's $DEV got no qdisc" bash -c "! nsenter --net=/run/netns/$C tc qdisc show dev $DEV | grep -q clsact"
psp_check "A's attachment still untouched" test "$(snapshot $A $DEV)" == "$before_a"

psp_check "detach from A" works psp_in_ns $A "$PSPXDP" detach $DEV
psp_check "nothing of pspxdp is left for $DEV" test -z "$(ls /sys/fs/bpf/pspxdp/$DEV /run/pspxdp/$DEV.* 2>/dev/null; psp_in_ns $A ip -o link show | grep ' psp[0-9]*[ab]')"

# --- 2. device names are checked before any path is built from them
PLANT=/tmp/psp-safety$$
touch $PLANT.lock
mkdir -p $PLANT.d && touch $PLANT.d/keep
for word in "../../tmp/psp-safety$$" "../../../../tmp/psp-safety$$.d" ".." "a b" $'x\ny' "0123456789abcdefg" ""; do
    for cmd in detach attach status daemon; do
        psp_in_ns $A "$PSPXDP" $cmd "$word" >"$TMP/out" 2>"$TMP/err"
        rc=$?
        psp_check "$cmd $(printf %q "$word"): exit 2, one line naming the device name" \
            bash -c "[[ $rc -eq 2 ]] && grep -q 'device name' $TMP/err && [[ \$(wc -l <$TMP/err) -eq 1 ]]"
    done
done
psp_check "planted files outside pspxdp's directories are untouched" test -e $PLANT.lock -a -e $PLANT.d/keep
rm -rf $PLANT.lock $PLANT.d

# --- 5. ip netns exec: a private mount namespace without the host's bpffs
psp_check "ip netns exec A pspxdp attach" works ip netns exec $A "$PSPXDP" attach $DEV --line-rate 1gbit
psp_check "  ... pinned in the host's bpffs" test -e /sys/fs/bpf/pspxdp/$DEV/pacer_state
psp_check "  ... configurable from outside (nsenter)" works psp_in_ns $A "$PSPXDP" class set $DEV 1:1 10mbit
psp_check "ip netns exec A pspxdp status: alive" bash -c "ip netns exec $A $PSPXDP status $DEV | grep -q 'alive, heartbeat'"
psp_check "ip netns exec A pspxdp class show sees the class" bash -c "ip netns exec $A $PSPXDP class show $DEV | grep -q '^class 1:1 '"
psp_check "without CAP_SYS_ADMIN, ip netns exec is refused" \
    fails ip netns exec $A setpriv --bounding-set=-sys_admin --inh-caps=-sys_admin "$PSPXDP" status $DEV
psp_check "  ... with an explanation, in one line" bash -c "grep -q 'private mount namespace' $TMP/err && [[ \$(wc -l <$TMP/err) -eq 1 ]]"
show_err
psp_check "ip netns exec A pspxdp detach" works ip netns exec $A "$PSPXDP" detach $DEV
psp_check "nothing of pspxdp is left for $DEV" test -z "$(ls /sys/fs/bpf/pspxdp/$DEV /run/pspxdp/$DEV.* 2>/dev/null; psp_in_ns $A ip -o link show | grep ' psp[0-9]*[ab]')"

# --- the namespace an attachment was made in is gone: from anywhere, detach
# removes what is left (pins, run files; its devices went with it)
E=$TAG-e
psp_netns $E || exit 1
mkdev $E $DEV || exit 1
psp_check "attach in E" works psp_in_ns $E "$PSPXDP" attach $DEV --line-rate 1gbit
kill -9 "$(psp_daemon_pid $DEV)"
ip netns del $E
psp_check "E is gone" psp_wait_for 5 bash -c "! grep -q . <(ls -l /proc/[0-9]*/ns/net 2>/dev/null | grep -F \"\$(sed -n 's/^netns=//p' /run/pspxdp/$DEV.state)\")"
psp_check "status from B says E no longer exists" fails psp_in_ns $B "$PSPXDP" status $DEV
psp_check "  ... and that detach removes what is left" bash -c "grep -q 'no longer exists.*pspxdp detach' $TMP/err"
show_err
psp_check "detach from B" works psp_in_ns $B "$PSPXDP" detach $DEV
show_err
psp_check "  ... removed the pins and run files" test -z "$(ls /sys/fs/bpf/pspxdp/$DEV /run/pspxdp/$DEV.* 2>/dev/null)"
psp_check "  ... B's device still has its qdisc and filter" \
    test "$(psp_in_ns $B tc qdisc show dev ${TAG}x; psp_in_ns $B tc filter show dev ${TAG}x egress)" == "$before_b"
psp_finish
