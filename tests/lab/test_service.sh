#!/usr/bin/env bash
# The systemd unit's ExecStart, run as systemd would without systemd: with
# the unit's CapabilityBoundingSet alone (read from packaging/pspxdp@.service.in)
# and NOTIFY_SOCKET pointing at a stand-in for systemd's notification socket:
#   - attach --foreground --config paces with exactly those capabilities,
#     and says READY=1 (Type=notify) once pacing, not before;
#   - SIGHUP (ExecReload): RELOADING=1, the file applied, READY=1;
#   - SIGTERM: STOPPING=1, exit 0, DEV detached;
#   - without any one of the capabilities it refuses, naming what failed,
#     and never says READY=1: the set is not larger than needed
#     (CAP_IPC_LOCK: the UMEM under RLIMIT_MEMLOCK 8 MB, systemd's default;
#     CAP_SYS_NICE: attach --rt).
# PID 1 here need not be systemd: nothing below asks it anything. Exit 77 =
# skipped (not root, no setpriv).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../../lab/netns.sh"
psp_require test_service "$PSPXDP" -- python3 setpriv prlimit
UNIT=$HERE/../../packaging/pspxdp@.service.in
read -ra CAPS <<<"$(sed -n 's/^CapabilityBoundingSet=//p' "$UNIT")"
# setpriv's spelling: CAP_NET_ADMIN -> +net_admin
setpriv_caps() { local c out=-all; for c in "$@"; do out+=",+${c#CAP_}"; done; echo "${out,,}"; }

NET=$(psp_random_net)
psp_lab_begin i7 $NET
printf 'line-rate 1gbit\nclass 1:1 100mbit\nclass 1:ffff normal\n' >"$TMP/dev.conf"

# systemd's side of sd_notify: a datagram socket; each message one line.
python3 "$HERE/notify_socket.py" "$TMP/notify" "$TMP/notify.log" &
PIDS+=($!)
psp_check "notification socket ready" psp_wait_for 5 test -S "$TMP/notify" || exit 1
: >"$TMP/notify.log"

# ExecStart as the unit runs it: in DEV's namespace, the bounding set the unit's.
# The limits a service gets by default: RLIMIT_MEMLOCK 8 MB, no RLIMIT_RTPRIO.
start() { # CAPS... (the bounding set); EXTRA: more attach options
    NOTIFY_SOCKET=$TMP/notify prlimit --memlock=8388608:8388608 --rtprio=0:0 \
        $N setpriv --inh-caps=-all --bounding-set="$(setpriv_caps "$@")" \
        "$PSPXDP" attach $DEV --foreground --config "$TMP/dev.conf" ${EXTRA:-} >"$TMP/fg.out" 2>&1 &
    FG=$!
    PIDS+=($FG)
}
notified() { grep -qx "$1" "$TMP/notify.log"; }

echo "  with the unit's capabilities (${CAPS[*]}):"
start "${CAPS[@]}"
psp_check "READY=1 once pacing" psp_wait_for 15 notified "READY=1 STATUS=pacing $DEV" || {
    cat "$TMP/fg.out"
    exit 1
}
psp_check "... the pacer alive then" psp_status_is $DEV 'd["pacer_alive"]'
psp_check "... with no capability beyond the unit's" bash -c \
    "[[ \$(grep CapBnd /proc/$FG/status) == \$(setpriv --bounding-set='$(setpriv_caps "${CAPS[@]}")' grep CapBnd /proc/self/status) ]]"

printf 'line-rate 1gbit\nclass 1:1 200mbit\nclass 1:ffff normal\n' >"$TMP/dev.conf"
kill -HUP $FG
psp_check "SIGHUP: RELOADING=1, then READY=1 again" psp_wait_for 10 bash -c \
    "[[ \$(tr '\n' '|' <'$TMP/notify.log') == 'READY=1 STATUS=pacing $DEV|RELOADING=1|READY=1|' ]]"
psp_check "... the file applied (1:1 at 200mbit)" psp_status_is $DEV \
    'd["daemon"]["file_reloads"] == 1 and c("1:1")["rate_bps"] == 200000000'

kill -TERM $FG
wait $FG
rc=$?
psp_check "SIGTERM: exit 0 ($rc)" test $rc -eq 0
psp_check "... STOPPING=1 said" notified "STOPPING=1"
psp_check "... DEV detached" test ! -e /sys/fs/bpf/pspxdp/$DEV

# Each capability attach needs: without it, a refusal and no READY=1.
for drop in "${CAPS[@]}"; do
    EXTRA=
    [[ $drop == CAP_SYS_NICE ]] && EXTRA=--rt
    fewer=()
    for c in "${CAPS[@]}"; do [[ $c != "$drop" ]] && fewer+=("$c"); done
    : >"$TMP/notify.log"
    start "${fewer[@]}"
    wait $FG
    rc=$?
    why=$(grep -m1 -iE 'cannot|needs|denied|failed' "$TMP/fg.out")
    psp_check "without $drop: attach${EXTRA:+ $EXTRA} fails (exit $rc: ${why:-$(tail -1 "$TMP/fg.out")})" test $rc -ne 0
    psp_check "... never READY=1" bash -c "! grep -q READY=1 '$TMP/notify.log'"
    $N "$PSPXDP" detach $DEV >/dev/null 2>&1
done
psp_finish
