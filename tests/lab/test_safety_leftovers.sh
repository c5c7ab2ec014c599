#!/usr/bin/env bash
# Safety, what is there before and after (docs/design.md §1.10,
# §6.5, and libbpf's messages). pspxdp shares only a real clsact qdisc and removes only what
# it created, from whatever state it finds:
#   3. an `ingress` qdisc on DEV: attach refused, nothing changed;
#   9. a foreign filter at egress prio 1: attach refused in one line (no
#      libbpf line), nothing changed;
#   8. the state file removed by hand: status and attach say so (and agree),
#      detach removes the daemon, TC filter, clsact, veth, pins;
#      a stray directory in the pin dir: detach removes the rest, leaves it
#      and says so; a foreign map pinned in the pin dir: left and named;
#      the pins removed by hand: status and attach agree (broken), detach
#      cleans up.
# After each case DEV is exactly as before attach. Exit 77 = skipped.
TAG=psv$$
source "$(cd "$(dirname "$0")" && pwd)/safety_lib.sh"
one_dev
attach() { P attach $DEV --line-rate 1gbit >/dev/null 2>&1; }
PINS=/sys/fs/bpf/pspxdp/$DEV

# --- 3. an ingress qdisc is not a clsact
psp_in_ns $NS tc qdisc add dev $DEV ingress
with_ingress=$(snapshot $NS $DEV)
psp_check "attach with an ingress qdisc is refused" fails P attach $DEV --line-rate 1gbit
psp_check "  ... explaining it, in one line" bash -c "grep -q 'ingress qdisc' $TMP/err && [[ \$(wc -l <$TMP/err) -eq 1 ]]"
show_err
psp_check "  ... nothing changed" test "$(snapshot $NS $DEV)" == "$with_ingress"
psp_in_ns $NS tc qdisc del dev $DEV ingress

# --- 9. a foreign filter at egress prio 1
psp_in_ns $NS tc qdisc add dev $DEV clsact
psp_in_ns $NS tc filter add dev $DEV egress prio 1 protocol ip u32 match u32 0 0 classid 1:1
with_filter=$(snapshot $NS $DEV)
psp_check "attach with a foreign filter at egress prio 1 is refused" fails P attach $DEV --line-rate 1gbit
psp_check "  ... in one line, no libbpf line" bash -c "grep -q 'prio 1' $TMP/err && ! grep -q libbpf $TMP/err && [[ \$(wc -l <$TMP/err) -eq 1 ]]"
show_err
psp_check "  ... nothing changed" test "$(snapshot $NS $DEV)" == "$with_filter"
psp_in_ns $NS tc qdisc del dev $DEV clsact
psp_check "DEV is clean again" is_clean

# --- 8a. the state file removed by hand
psp_check "attach" attach
PID=$(psp_daemon_pid $DEV)
rm -f /run/pspxdp/$DEV.state
psp_check "status without a state file: refused, says so" fails P status $DEV
psp_check "  ... (no state file, detach cleans up)" bash -c "grep -q 'no state file' $TMP/err && grep -q 'pspxdp detach' $TMP/err"
keep_err status
psp_check "attach without a state file: refused" fails P attach $DEV --line-rate 1gbit
psp_check "  ... with the same words as status (they agree)" same_as status
psp_check "detach without a state file" works P detach $DEV
show_err
psp_check "  ... stopped the daemon" psp_gone $PID
psp_check "  ... and removed TC filter, clsact, veth, pins, run files" is_clean

# --- 8b. a stray directory in the pin dir
psp_check "attach" attach
mkdir $PINS/stray
psp_check "detach with a stray directory in the pin dir" works P detach $DEV
psp_check "  ... says it left it" said "stray"
show_err
psp_check "  ... the stray directory is still there" test -d $PINS/stray
rmdir $PINS/stray $PINS
psp_check "  ... everything else went" is_clean

# --- 8c. a foreign map pinned inside our pin dir
if command -v bpftool >/dev/null; then
    psp_check "attach" attach
    bpftool map create $PINS/foreign type hash key 4 value 4 entries 4 name foreign
    psp_check "detach with a foreign map in the pin dir" works P detach $DEV
    psp_check "  ... says it left it" said "foreign"
    show_err
    psp_check "  ... the foreign map is still there" test -e $PINS/foreign
    rm -f $PINS/foreign; rmdir $PINS
    psp_check "  ... everything else went" is_clean
fi

# --- 8d. the pins removed by hand
psp_check "attach" attach
PID=$(psp_daemon_pid $DEV)
rm -rf $PINS
psp_check "status without pins: refused, says so" fails P status $DEV
psp_check "  ... (pins gone, detach cleans up)" bash -c "grep -q 'pins under' $TMP/err && grep -q 'pspxdp detach' $TMP/err"
keep_err status
psp_check "attach without pins: refused" fails P attach $DEV --line-rate 1gbit
psp_check "  ... with the same words as status (they agree)" same_as status
psp_check "detach without pins" works P detach $DEV
psp_check "  ... stopped the daemon" psp_gone $PID
psp_check "  ... and removed the rest" is_clean
psp_finish
