#!/usr/bin/env bash
# Safety, what pspxdp says and what it refuses (docs/design.md §6.1,
# the i40e/ice refusal):
#   9. as a user without privileges every command names the capability it
#      needs (no raw "Permission denied" on a path); read-only commands work
#      where the administrator granted read access to the pins; user words
#      are quoted (a newline in a rate stays on one line); `class set DEV
#      1:1` without a rate says so;
#   7. re-attach after kill -9 with a --line-rate below the paced classes is
#      refused and changes nothing (and so is `pspxdp daemon --line-rate`);
#   -  a NIC driven by i40e or ice (driver name injected for the test) is
#      refused unless --force, and the refusal changes nothing.
# Exit 77 = skipped.
TAG=psm$$
source "$(cd "$(dirname "$0")" && pwd)/safety_lib.sh"
command -v setpriv >/dev/null || { echo "skip: setpriv missing"; exit 77; }
one_dev

# --- i40e / ice: refused unless --force, nothing changed
for drv in i40e ice; do
    psp_check "attach on a $drv NIC is refused" fails env PSPXDP_TEST_DRIVER=$drv nsenter --net=/run/netns/$NS "$PSPXDP" attach $DEV --line-rate 1gbit
    psp_check "  ... naming the driver, the PAUSE frames and --force, in one line" \
        bash -c "grep -q '$drv.*PAUSE.*--force' $TMP/err && [[ \$(wc -l <$TMP/err) -eq 1 ]]"
    psp_check "  ... nothing changed" is_clean
done
show_err
psp_check "attach on an i40e NIC with --force" works env PSPXDP_TEST_DRIVER=i40e nsenter --net=/run/netns/$NS "$PSPXDP" attach $DEV --line-rate 1gbit --force
psp_check "  ... warns" said "warning: .*i40e"
psp_check "detach" works P detach $DEV
psp_check "  ... nothing left" is_clean

# --- 7. re-attach with a line rate below the paced classes
psp_check "attach at 1gbit" works P attach $DEV --line-rate 1gbit
psp_check "class 1:1 800mbit" works P class set $DEV 1:1 800mbit
PID=$(psp_daemon_pid $DEV)
kill -9 "$PID"
psp_check "the daemon is dead after kill -9" psp_wait_for 5 psp_gone "$PID"
before=$(snapshot $NS $DEV; cat /run/pspxdp/$DEV.state)
psp_check "re-attach with --line-rate 500mbit is refused" fails P attach $DEV --line-rate 500mbit
psp_check "  ... saying the classes sum above it, in one line" \
    bash -c "grep -q 'sum to 800Mbit.*above the line rate 500Mbit' $TMP/err && [[ \$(wc -l <$TMP/err) -eq 1 ]]"
show_err
psp_check "  ... nothing changed (links, TC, pins, state file)" test "$(snapshot $NS $DEV; cat /run/pspxdp/$DEV.state)" == "$before"
psp_check "pspxdp daemon --line-rate 500mbit is refused too" fails P daemon $DEV --line-rate 500mbit
psp_check "  ... saying why" said "below .*paced classes"
psp_check "re-attach with --line-rate 1gbit works" works P attach $DEV --line-rate 1gbit
psp_check "  ... class 1:1 kept at 800Mbit" bash -c "nsenter --net=/run/netns/$NS $PSPXDP class show $DEV | grep -q '^class 1:1 .*800Mbit'"

# --- 9. messages: quoted words, a missing rate
psp_check "a rate with a newline is refused" fails P class set $DEV 1:2 $'10mbit\nINJECTED'
psp_check "  ... in one line, the newline escaped" bash -c "[[ \$(wc -l <$TMP/err) -eq 1 ]] && grep -q '10mbit\\\\nINJECTED' $TMP/err"
show_err
psp_check "class set DEV 1:1 without a rate is refused" fails P class set $DEV 1:1
psp_check "  ... saying the rate is missing" said "missing RATE"
show_err

# --- 9. without privileges (nobody, no capabilities)
BIN=$(mktemp -d /tmp/psp-safety-bin.XXXXXX)
chmod 755 "$BIN" && cp "$PSPXDP" "$BIN/pspxdp" && chmod 755 "$BIN/pspxdp"
U() { psp_in_ns $NS setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all "$BIN/pspxdp" "$@"; }
for cmd in "attach $DEV" "detach $DEV" "daemon $DEV" "class set $DEV 1:1 10mbit" \
           "filter add $DEV dst 10.0.0.0/8 classid 1:1" "status $DEV" "class show $DEV" "filter show $DEV"; do
    psp_check "as nobody, $cmd is refused" fails U $cmd
    psp_check "  ... naming a capability (or root), no raw 'Permission denied', one line" \
        bash -c "grep -q 'CAP_[A-Z_]*\|run as root' $TMP/err && ! grep -q 'Permission denied' $TMP/err && [[ \$(wc -l <$TMP/err) -eq 1 ]]"
done
show_err
psp_check "the attachment is untouched by all that" bash -c "nsenter --net=/run/netns/$NS $PSPXDP status $DEV | grep -q 'alive, heartbeat'"
# The administrator grants read access to DEV's pins: read-only commands work.
chmod o+x /sys/fs/bpf/pspxdp # the root of all pins: attach creates it 0755
chmod o+rx /sys/fs/bpf/pspxdp/$DEV && chmod o+r /sys/fs/bpf/pspxdp/$DEV/*
psp_check "as nobody with read access, status works" works U status $DEV
psp_check "  ... and shows the pacer alive" grep -q 'alive, heartbeat' "$TMP/out"
psp_check "as nobody with read access, class show works" works U class show $DEV
psp_check "  ... and lists class 1:1" grep -q '^class 1:1 ' "$TMP/out"
psp_check "as nobody with read access, filter show works" works U filter show $DEV
psp_check "as nobody, class set is still refused" fails U class set $DEV 1:1 10mbit
psp_check "  ... naming what it needs" said "run as root\|CAP_"
rm -rf "$BIN"
psp_check "detach" works P detach $DEV
psp_check "  ... nothing left" is_clean
psp_finish
