#!/usr/bin/env bash
# The edges a new user hits, each with what pspxdp must say:
#   read     group pspxdp reads the pins; anyone else: "permission denied:
#            ... (group pspxdp can read)", never "pins ... are gone"
#   again    attach with the same options / detach of a detached device:
#            exit 0 and one line; attach with other options: exit 2 naming
#            the difference; status without DEV lists the attachment
#   exits    one rule for exit codes across commands (0 / 1 / 2): a class
#            past the last slot and change without its RATE are refusals (2)
#   race     two attaches at once: one attaches, the other says "being
#            attached by another pspxdp (pid N)" or "attached already"
#   killed   an attach killed at each step of its build: the next attach
#            replaces the half-made attachment; nothing is left after detach
#   dead     after kill -9, status never says "DEAD" beside "pacer alive"
#   filefile filter add --file names duplicates by line and filter id
#   stats    one line per class by default, -d every counter, JSON alike
#   log      line rate and default class changes are logged, with what
#   gone     DEV deleted: status says "DEV gone; last mode clockless"
# Exit 77 = skipped.
TAG=e6$$
source "$(cd "$(dirname "$0")" && pwd)/safety_lib.sh"
command -v setpriv >/dev/null && command -v useradd >/dev/null && command -v flock >/dev/null ||
    { echo "skip: setpriv, useradd or flock missing"; exit 77; }
one_dev
PINS=/sys/fs/bpf/pspxdp/$DEV
# Throwaway users (and the group, if this test made it): removed whatever happens.
RO=e6r$$ NO=e6n$$ MADE_GROUP=
edges_end() {
    userdel "$RO" 2>/dev/null
    userdel "$NO" 2>/dev/null
    [[ -n $MADE_GROUP ]] && groupdel pspxdp 2>/dev/null
    psp_end
}
trap edges_end EXIT
out_has() { grep -q -- "$1" "$TMP/out"; }

# ---- exits: not attached
for cmd in "class add $DEV 1:1 10mbit" "filter add $DEV dport 1 classid 1:1" "show $DEV" \
           "stats $DEV" "save $DEV" "status $DEV"; do
    psp_check "exits: $cmd when not attached: 2" exits 2 P $cmd
done
psp_check "exits: detach when not attached: 0" exits 0 P detach $DEV
psp_check "  ... one line saying so" bash -c "grep -qx 'pspxdp: $DEV is not attached: nothing to detach' $TMP/out && [[ ! -s $TMP/err ]]"
psp_check "  ... nothing created" is_clean
# A device that does not exist is named and not there: 2 for every command
# (attach's used to exit 1 while stats' exited 2).
psp_check "exits: attach nosuchdev0: 2" exits 2 P attach nosuchdev0 --line-rate 1gbit
psp_check "  ... one line naming it: no such device" \
    bash -c "[[ \$(wc -l <$TMP/err) -eq 1 ]] && grep -q 'nosuchdev0.*no such device' $TMP/err"
for cmd in "stats nosuchdev0" "status nosuchdev0" "show nosuchdev0"; do
    psp_check "exits: $cmd: 2" exits 2 P $cmd
done
psp_check "exits: a bad word: 2" exits 2 P attach $DEV --line-rate 1xbit
psp_check "exits: an unknown command: 2" exits 2 P frobnicate

# ---- again: idempotent attach and detach
psp_check "attach" works P attach $DEV --line-rate 1gbit
PID=$(psp_daemon_pid $DEV)
psp_check "again: attach with the same options: 0" exits 0 P attach $DEV --line-rate 1gbit
psp_check "  ... one line: attached already, nothing to do" bash -c "[[ \$(wc -l <$TMP/out) -eq 1 ]] && grep -q 'attached already with these options.*nothing to do' $TMP/out && [[ ! -s $TMP/err ]]"
psp_check "  ... the same daemon runs" test "$(psp_daemon_pid $DEV)" = "$PID"
psp_check "again: attach with another line rate: 2" exits 2 P attach $DEV --line-rate 500mbit
psp_check "  ... naming the difference, one line" bash -c "grep -q 'line rate 1Gbit, not 500Mbit' $TMP/err && [[ \$(wc -l <$TMP/err) -eq 1 ]]"
psp_check "again: attach with another clock: 2" exits 2 P attach $DEV --line-rate 1gbit --clock byte
psp_check "  ... naming --clock" said "--clock"
psp_check "  ... the daemon still runs" alive "$PID"
psp_check "again: status without DEV: 0" exits 0 P status
psp_check "  ... lists $DEV alive with its daemon" grep -q "^$DEV: alive, daemon pid $PID" "$TMP/out"
psp_check "again: status -j without DEV: an array naming $DEV" bash -c "nsenter --net=/run/netns/$NS $PSPXDP status -j |
    python3 -c 'import json,sys; d=json.load(sys.stdin); assert any(x[\"dev\"] == \"$DEV\" and x[\"state\"] == \"alive\" for x in d)'"

# ---- exits: refusals of what does not fit or is missing (exit 2, one line, nothing changed)
psp_check "exits: change DEV line-rate without the RATE: 2" exits 2 P change $DEV line-rate
psp_check "  ... one line: the RATE is missing" bash -c "grep -q 'line-rate: the RATE is missing' $TMP/err && [[ \$(wc -l <$TMP/err) -eq 1 ]]"
# Every slot taken: the default class and 131,070 normal classes in one
# batch (majors 2 and 3: a minor is at most ffff).
P save $DEV >"$TMP/small.saved"
python3 -c 'print("\n".join("%d:%x normal" % (m, i) for m in (2, 3) for i in range(1, 0x10000)))' >"$TMP/full"
psp_check "131,070 classes in one batch: every slot taken" works P class add $DEV --file "$TMP/full"
P save $DEV >"$TMP/full.saved"
psp_check "exits: class add past the last slot: 2" exits 2 P class add $DEV 1:1 normal
psp_check "  ... one line: no free slot" bash -c "grep -q 'no free slot: 131071 classes exist' $TMP/err && [[ \$(wc -l <$TMP/err) -eq 1 ]]"
printf '1:1 normal\n1:2 10mbit\n' >"$TMP/two"
psp_check "exits: a batch of 2 past the last slot: 2" exits 2 P class add $DEV --file "$TMP/two"
psp_check "  ... says no free slot" said "no free slot"
psp_check "  ... nothing changed" bash -c "nsenter --net=/run/netns/$NS $PSPXDP save $DEV | cmp -s - $TMP/full.saved"
psp_check "the classes go again (apply of the configuration before)" works P apply -q $DEV "$TMP/small.saved"

# ---- exits: the lock held by someone else (this shell holds DEV's lock
# file on a descriptor of its own: flock(2) locks belong to the open file,
# so pspxdp's own open of it conflicts; no holder process to time or kill)
exec {HOLD}>>/run/pspxdp/$DEV.lock
psp_check "another holder takes DEV's lock" flock -n "$HOLD"
psp_check "exits: attach while another holds DEV's lock: 1" exits 1 P attach $DEV --line-rate 1gbit {HOLD}>&-
psp_check "  ... says another pspxdp is at work on $DEV" said "another pspxdp .*working on $DEV"
exec {HOLD}>&-

# ---- read: group pspxdp
if ! getent group pspxdp >/dev/null; then groupadd pspxdp && MADE_GROUP=1; fi
useradd -M -N -s /usr/sbin/nologin -G pspxdp "$RO" && useradd -M -N -s /usr/sbin/nologin "$NO"
BIN=$TMP/bin
mkdir -p "$BIN" && cp "$PSPXDP" "$BIN/pspxdp" && chmod 755 "$TMP" "$BIN" "$BIN/pspxdp"
U() { local who=$1; shift; psp_in_ns $NS setpriv --reuid="$who" --regid=nogroup --init-groups --inh-caps=-all "$BIN/pspxdp" "$@"; }
psp_check "detach" works P detach $DEV
psp_check "attach (group pspxdp exists)" works P attach $DEV --line-rate 1gbit
psp_check "read: the pins are root:pspxdp, group-readable, not world-readable" bash -c "
    [[ \$(stat -c %G:%a $PINS) == pspxdp:750 ]] && ! find $PINS -type f ! -group pspxdp | grep -q . &&
    ! find $PINS -type f -perm /o+r | grep -q . && ! find $PINS -type f -perm /g+w | grep -q ."
psp_check "read: a member of pspxdp: status works" works U "$RO" status $DEV
psp_check "  ... and shows the pacer alive" grep -q 'alive, heartbeat' "$TMP/out"
psp_check "read: a member: stats -j works" works U "$RO" stats $DEV -j --interval 0
psp_check "read: a member: class set is refused" fails U "$RO" class set $DEV 1:1 10mbit
psp_check "read: anyone else: status refused (1)" exits 1 U "$NO" status $DEV
psp_check "  ... 'permission denied: ... (group pspxdp can read)', one line" bash -c "
    grep -q '^pspxdp: permission denied: .*(group pspxdp can read)' $TMP/err && [[ \$(wc -l <$TMP/err) -eq 1 ]]"
psp_check "  ... not 'gone'" bash -c "! grep -q 'gone' $TMP/err"
psp_check "read: under ip netns exec (its own /sys): 'cannot see', not 'gone'" bash -c "
    ip netns exec $NS setpriv --reuid=$RO --regid=nogroup --init-groups --inh-caps=-all $BIN/pspxdp status $DEV 2>&1 >/dev/null |
    grep -q 'cannot see .*ip netns exec'"

# ---- dead: kill -9, then status at once: one verdict
PID=$(psp_daemon_pid $DEV)
kill -9 "$PID"
psp_check "dead: the daemon is gone" psp_wait_for 5 psp_gone "$PID"
psp_check "dead: status exits 1 (attached, not paced)" exits 1 P status $DEV
cat "$TMP/out" "$TMP/err" >"$TMP/dead"
psp_check "dead: status says DEAD" grep -q '^DEAD: ' "$TMP/dead"
psp_check "  ... and nowhere 'pacer alive' or 'alive, heartbeat'" bash -c "! grep -q 'pacer alive\|alive, heartbeat' $TMP/dead"
psp_check "  ... status -j: pacer_alive false" bash -c "nsenter --net=/run/netns/$NS $PSPXDP status $DEV -j | python3 -c 'import json,sys; assert json.load(sys.stdin)[\"pacer_alive\"] is False'"
psp_check "re-attach replaces the dead attachment" works P attach $DEV --line-rate 1gbit

# ---- filefile: duplicates named by line and id
psp_check "class 1:1" works P class set $DEV 1:1 100mbit
psp_check "two filters" works bash -c "nsenter --net=/run/netns/$NS $PSPXDP filter add $DEV proto udp dport 7 classid 1:1 &&
    nsenter --net=/run/netns/$NS $PSPXDP filter add $DEV proto udp dport 8 classid 1:1"
ID8=$(P filter show $DEV -j | python3 -c 'import json,sys; print(next(f["id"] for f in json.load(sys.stdin) if f.get("dport_min") == 8))')
printf '# filters\nproto udp dport 20 classid 1:1\n\nproto udp dport 21 classid 1:1\nproto udp dport 8 classid 1:1\n' >"$TMP/dup_existing"
psp_check "filefile: a duplicate of an existing filter: 2" exits 2 P filter add $DEV --file "$TMP/dup_existing"
psp_check "  ... naming line 5 and filter id $ID8 (as filter show -j)" said "line 5: .*duplicate of the existing filter id $ID8 "
printf 'proto udp dport 20 classid 1:1\nproto udp dport 21 classid 1:1\n# x\nproto udp dport 20 classid 1:1\n' >"$TMP/dup_self"
psp_check "filefile: a duplicate within the file: 2" exits 2 P filter add $DEV --file "$TMP/dup_self"
psp_check "  ... naming line 4 and line 1" said "line 4: .*duplicate of line 1 "
psp_check "  ... nothing added" test "$(P filter show $DEV | wc -l)" -eq 2

# ---- stats: compact by default
psp_check "stats: one line per class" bash -c "nsenter --net=/run/netns/$NS $PSPXDP stats $DEV --interval 0 >$TMP/s &&
    [[ \$(grep -c '^class 1:1 ' $TMP/s) -eq 1 ]] && ! grep -q '^ ' $TMP/s && grep -q '^class 1:1 paced 100Mbit .*tx_frames 0 ' $TMP/s"
psp_check "stats -d: every counter" bash -c "nsenter --net=/run/netns/$NS $PSPXDP stats $DEV -d --interval 0 | grep -q ' drop_limit 0 '"
json_keys() { # the keys of stats -j (top level and a class's), with extra options
    P stats $DEV -j --interval 0 "$@" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(sorted(d), sorted(d["classes"][0]))'
}
KEYS=$(json_keys)
psp_check "stats -j and -d -j: the same keys" test -n "$KEYS" -a "$KEYS" = "$(json_keys -d)"

# ---- log: configuration changes of the device
psp_check "change line-rate 900mbit" works P change $DEV line-rate 900mbit
psp_check "log: 'line rate 1Gbit -> 900Mbit'" psp_wait_for 5 grep -q 'line rate 1Gbit -> 900Mbit' /run/pspxdp/$DEV.log
psp_check "default 1:1" works P default $DEV 1:1
psp_check "log: 'default class 1:ffff -> 1:1'" psp_wait_for 5 grep -q 'default class 1:ffff -> 1:1' /run/pspxdp/$DEV.log
psp_check "detach" works P detach $DEV
psp_check "again: detach again: 0, one line" exits 0 P detach $DEV
psp_check "  ... nothing left" is_clean

# ---- race: two attaches at once, several rounds
for round in 1 2 3 4 5 6; do
    P attach $DEV --line-rate 1gbit >"$TMP/a1" 2>&1 &
    A1=$!
    P attach $DEV --line-rate 1gbit >"$TMP/a2" 2>&1 &
    A2=$!
    wait $A1; R1=$?
    wait $A2; R2=$?
    cat "$TMP/a1" "$TMP/a2" >"$TMP/race"
    psp_check "race $round: one attached ($R1, $R2)" test "$(grep -c "attached to $DEV:" "$TMP/race")" -eq 1
    psp_check "race $round: the other says 'being attached by another pspxdp (pid N)' or 'attached already'" bash -c "
        grep -q 'is being attached by another pspxdp (pid [0-9]*)\|attached already with these options' $TMP/race &&
        ! grep -v '^pspxdp: note:' $TMP/race | grep -q 'gone\|not attached\|broken\|half'" || sed 's/^/     | /' "$TMP/race"
    psp_check "race $round: the winner's attachment is alive" bash -c "nsenter --net=/run/netns/$NS $PSPXDP status $DEV | grep -q 'alive, heartbeat'"
    P detach $DEV >/dev/null 2>&1
done
psp_check "race: nothing left" is_clean

# ---- killed: an attach killed at each step of its build
for step in state veth pins loaded xdp clsact tc; do
    psp_check "killed at '$step': attach dies (137)" exits 137 psp_in_ns $NS env PSPXDP_TEST_KILL_AT=$step "$PSPXDP" attach $DEV --line-rate 1gbit
    ST_RC=$(rc P status $DEV)
    cat "$TMP/out" "$TMP/err" >"$TMP/st"
    psp_check "  ... status exits 1 (attached, not paced)" test "$ST_RC" = 1
    if [[ $step == tc ]]; then # built whole, no daemon: a dead attachment
        psp_check "  ... status: DEAD" grep -q '^DEAD: ' "$TMP/st"
    else
        psp_check "  ... status: half attached, attach replaces it" grep -q "$DEV is half attached (an attach was stopped before it finished.*pspxdp attach $DEV replaces it" "$TMP/st"
    fi
    psp_check "  ... not 'gone'" bash -c "! grep -q 'gone' $TMP/st"
    psp_check "  ... the next attach replaces it" works P attach $DEV --line-rate 1gbit
    psp_check "  ... alive" bash -c "nsenter --net=/run/netns/$NS $PSPXDP status $DEV | grep -q 'alive, heartbeat'"
    psp_check "  ... detach leaves nothing" bash -c "nsenter --net=/run/netns/$NS $PSPXDP detach $DEV >/dev/null"
    psp_check "  ... clean" is_clean
done

# ---- gone: DEV deleted under a running attachment (veth: clockless)
psp_check "attach" works P attach $DEV --line-rate 1gbit
PID=$(psp_daemon_pid $DEV)
ip -n $NS link del $DEV
psp_check "gone: the daemon stops itself" psp_wait_for 10 psp_gone "$PID"
P status $DEV >"$TMP/gone" 2>&1
psp_check "gone: status says '$DEV gone; last mode clockless'" grep -q "clock: $DEV gone; last mode clockless" "$TMP/gone"
psp_check "  ... not a reason from a device that is gone" bash -c "! grep -q 'driver unknown\|assumed a NIC' $TMP/gone"
psp_check "detach" works P detach $DEV
psp_finish
