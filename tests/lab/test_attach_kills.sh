#!/usr/bin/env bash
# attach killed (SIGKILL) at 1, 5, 10, 15, 20, 30, 50 and 100 ms after it
# starts, KILL_REPEAT times each (default 10): whatever a kill leaves, the
# next attach makes a live attachment of it (or says exactly what to run),
# and detach then leaves DEV as it was. test_edges.sh kills attach at each
# named step of its build; this kills it between them, where the clock
# falls (mid-load of the BPF objects, mid-pin, mid-start of the daemon);
# and the state of a kill mid-pin made deterministically. KILL_REPEAT=3 runs
# it in a third of the time.
# Exit 77 = skipped.
TAG=ak$$
source "$(cd "$(dirname "$0")" && pwd)/safety_lib.sh"
one_dev
REPEAT=${KILL_REPEAT:-10}
alive_now() { P status $DEV 2>/dev/null | grep -q 'alive, heartbeat'; }
for ms in 1 5 10 15 20 30 50 100; do
    bad=0
    for ((i = 1; i <= REPEAT; ++i)); do
        # timeout kills nsenter, which has exec'd pspxdp: the attach itself;
        # --foreground: only it (not a daemon it started), and timeout
        # returns once it is reaped (its lock released), not while it dies.
        timeout --foreground -s KILL "0.$(printf %03d $ms)" nsenter --net=/run/netns/$NS "$PSPXDP" attach $DEV --line-rate 1gbit \
            >/dev/null 2>&1
        P status $DEV >"$TMP/left" 2>&1
        # What the kill left, in status's word (tallied per kill time).
        P status -j 2>/dev/null | python3 "$PSP_ROOT/lab/status_is.py" --print \
            "next((x['state'] for x in d if x['dev'] == '$DEV'), 'nothing')" >>"$TMP/left.$ms"
        if ! works P attach $DEV --line-rate 1gbit; then
            # The one acceptable failure: a line naming the command to run.
            if ! grep -q "pspxdp detach $DEV" "$TMP/err"; then
                echo "     killed at $ms ms (#$i): the next attach failed: $(head -c 300 "$TMP/err")"
                echo "     what the kill left (status): $(head -c 300 "$TMP/left")"
                bad=$((bad + 1))
            fi
            works P detach $DEV || { echo "     ... and detach failed: $(head -c 300 "$TMP/err")"; bad=$((bad + 1)); }
        elif ! alive_now; then
            echo "     killed at $ms ms (#$i): attached, but not alive: $(P status $DEV 2>&1 | head -3)"
            bad=$((bad + 1))
        fi
        if ! works P detach $DEV; then
            echo "     killed at $ms ms (#$i): detach failed: $(head -c 300 "$TMP/err")"
            bad=$((bad + 1))
        fi
        if ! is_clean; then
            echo "     killed at $ms ms (#$i): detach left something:"
            diff <(echo "$clean") <(snapshot $NS $DEV) | sed 's/^/     | /' | head -10
            bad=$((bad + 1))
            P detach $DEV >/dev/null 2>&1
            psp_drop_dev $DEV
        fi
    done
    psp_check "killed at $ms ms, $REPEAT times: the next attach attaches, detach leaves nothing" test $bad -eq 0
    ((REPEAT)) && echo "     the kills left: $(sort "$TMP/left.$ms" | uniq -c | sed -E 's/^ *([0-9]+) (.*)/\2 x\1/' | paste -sd, - | sed 's/,/, /g')"
done
# Deterministically, the state a kill leaves while libbpf pins the maps one
# by one: pacer_state pinned, class_config not (killed at the step after
# the load, class_config's pin then removed).
psp_check "killed mid-pin: attach dies" exits 137 psp_in_ns $NS env PSPXDP_TEST_KILL_AT=loaded "$PSPXDP" attach $DEV --line-rate 1gbit
rm "/sys/fs/bpf/pspxdp/$DEV/class_config"
psp_check "  ... the next attach replaces it" works P attach $DEV --line-rate 1gbit
psp_check "  ... saying it was half attached" said "was half attached"
psp_check "  ... alive" alive_now
psp_check "  ... detach leaves nothing" bash -c "nsenter --net=/run/netns/$NS $PSPXDP detach $DEV >/dev/null"
psp_check "  ... clean" is_clean
psp_finish
