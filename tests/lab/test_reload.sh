#!/usr/bin/env bash
# SIGHUP re-reads the file a device was attached with (attach --config):
# the file edited, kill -HUP: the reload counter goes up, the classes are
# what the file now says, the daemon is the same process and still beats.
# A bad file (a bad word; rates above the line): file_reload_failures goes
# up, the configuration is byte for byte unchanged, the daemon alive. The
# same in --foreground (where SIGHUP used to exit 129 and leave the TC
# filter), and a device attached without --config logs the SIGHUP and
# ignores it. A SIGHUP while another command holds DEV's lock waits for it,
# the pacer beating meanwhile. Exit 77 = skipped.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../../lab/netns.sh"
psp_require test_reload "$PSPXDP" -- python3

NET=$(psp_random_net)
psp_lab_begin rl $NET
P() { $N "$PSPXDP" "$@"; }
conf() { # RATE_1:1 SECOND_CLASS_LINE
    printf 'line-rate 1gbit\nclass 1:1 %s\n%s\nclass 1:ffff normal\nfilter proto udp dport 5001 classid 1:1\n' \
        "$1" "$2" >"$TMP/dev.conf"
}

# Both ways the daemon runs: spawned by attach, and attach --foreground.
for mode in spawned foreground; do
    echo "  $mode:"
    conf 100mbit 'class 1:2 50mbit'
    LOG=/run/pspxdp/$DEV.log
    if [[ $mode == spawned ]]; then
        psp_check "attach --config" P attach $DEV --config "$TMP/dev.conf" || break
    else
        P attach $DEV --config "$TMP/dev.conf" --foreground >"$TMP/fg.out" 2>&1 &
        FG=$!
        LOG=$TMP/fg.out
        PIDS+=($FG)
        psp_check "attach --config --foreground" psp_wait_for 10 psp_status_is $DEV 'd["pacer_alive"]' || break
    fi
    PID=$(psp_daemon_pid $DEV)
    psp_check "served as the file says" psp_wait_for 10 psp_status_is $DEV \
        'c("1:1")["rate_bps"] == 100000000 and c("1:2")["state"] == "served"'

    conf 200mbit 'class 1:3 30mbit'
    kill -HUP "$PID"
    psp_check "SIGHUP: file_reloads 1" psp_wait_for 10 psp_status_is $DEV 'd["daemon"]["file_reloads"] == 1'
    psp_check "... 1:1 at 200mbit, 1:3 served, 1:2 gone" psp_wait_for 10 psp_status_is $DEV \
        'c("1:1")["rate_bps"] == 200000000 and c("1:3")["state"] == "served" and "1:2" not in [x["class"] for x in d["classes"] if x["kind"] != "deleted"]'
    psp_check "... the same daemon (pid $PID), alive" bash -c \
        "[[ \$(cat /run/pspxdp/$DEV.pid) == $PID ]] && kill -0 $PID"
    psp_check "... logged with what changed" grep -q "SIGHUP: $TMP/dev.conf applied: 1 class added, 1 class changed, 1 class deleted" "$LOG"

    P save $DEV >"$TMP/before"
    n=0
    for bad in 'class 1:3 30xbit' 'class 1:3 900mbit'; do
        n=$((n + 1))
        conf 200mbit "$bad"
        kill -HUP "$PID"
        psp_check "bad file ($bad): file_reload_failures $n" psp_wait_for 10 psp_status_is $DEV \
            "d['daemon']['file_reload_failures'] == $n and d['daemon']['file_reloads'] == 1 and d['pacer_alive']"
        P save $DEV >"$TMP/after"
        psp_check "... nothing changed" cmp -s "$TMP/before" "$TMP/after"
        psp_check "... logged, one line" test "$(grep -c "SIGHUP: $TMP/dev.conf refused, configuration unchanged: " "$LOG")" -eq $n
    done
    psp_check "... the same daemon, alive" kill -0 "$PID"

    # A SIGHUP while another command holds DEV's lock: the loop paces on, the
    # reload waits for the lock and then applies.
    if [[ $mode == spawned ]]; then
        conf 150mbit 'class 1:3 30mbit'
        mkfifo "$TMP/hold"
        flock "/run/pspxdp/$DEV.lock" cat "$TMP/hold" >/dev/null &
        HOLDER=$!
        PIDS+=($HOLDER)
        psp_check "DEV's lock held by another process" \
            psp_wait_for 5 bash -c "! flock -n /run/pspxdp/$DEV.lock true"
        kill -HUP "$PID"
        psp_check "... SIGHUP meanwhile: the pacer beats, nothing applied yet" psp_status_is $DEV \
            'd["pacer_alive"] and d["daemon"]["file_reloads"] == 1 and c("1:1")["rate_bps"] == 200000000'
        echo >"$TMP/hold"
        wait $HOLDER
        psp_check "... lock released: applied (file_reloads 2, 1:1 at 150mbit)" psp_wait_for 10 \
            psp_status_is $DEV 'd["daemon"]["file_reloads"] == 2 and c("1:1")["rate_bps"] == 150000000'
    fi

    if [[ $mode == spawned ]]; then
        psp_check "detach" P detach $DEV
    else
        kill -TERM "$PID" # the attach process (FG is the shell around it)
        wait "$FG"
        psp_check "SIGTERM ends the foreground attach with 0 and detaches" test $? -eq 0 -a ! -e "/sys/fs/bpf/pspxdp/$DEV"
    fi
done

echo "  without --config:"
LOG=/run/pspxdp/$DEV.log
psp_check "attach" P attach $DEV
PID=$(psp_daemon_pid $DEV)
kill -HUP "$PID"
psp_check "SIGHUP logged and ignored" psp_wait_for 10 grep -q 'SIGHUP ignored: attached without --config' "$LOG"
psp_check "... the daemon alive, no reload counted" bash -c "kill -0 $PID && [[ \$($N $PSPXDP stats $DEV -j |
    python3 -c 'import json,sys; d=json.load(sys.stdin)[\"daemon\"]; print(d[\"file_reloads\"] + d[\"file_reload_failures\"])') == 0 ]]"
psp_check "detach" P detach $DEV
psp_finish
