#!/usr/bin/env bash
# pspxdp exporter against clients that misbehave, and the one verdict on a
# daemon that runs without beating (design §1.9, §1.11):
#   clients   idle, half-request, trickling and keep-alive connections held
#             open while scrapes must answer within 1 s; every held
#             connection closed by its deadline; a flood past the cap
#             answered 503 at once (tests/lab/exporter_clients.py)
#   port      a second exporter on a port in use exits 1 in one line naming
#             the port and leaves nothing: the first answers every scrape
#   resolve   --listen banana:9469 says the address does not resolve, exit 2
#   stopped   a SIGSTOPped daemon: status without DEV (text and -j), status
#             DEV -j and the exporter's pspxdp_pacer_alive all say it is not
#             beating; after SIGCONT all say alive again
# Everything runs in a throwaway namespace, the exporter on its loopback.
# Exit 77 = skipped.
TAG=ex$$
source "$(cd "$(dirname "$0")" && pwd)/safety_lib.sh"
psp_require test_exporter "$PSPXDP" -- python3 curl
one_dev
PORT=19469
URL=http://127.0.0.1:$PORT/metrics
STOPPED=
# A stopped daemon is resumed whatever happens (psp_end then removes it).
trap '[[ -n $STOPPED ]] && kill -CONT "$STOPPED" 2>/dev/null; psp_end' EXIT
N="nsenter --net=/run/netns/$NS" # psp_status_is runs status there

# ---- resolve: checked before anything else (DEV need not be attached)
psp_check "--listen banana:9469: exit 2" exits 2 P exporter $DEV --listen banana:9469
psp_check "  ... one line: the address does not resolve" \
    bash -c "grep -q 'the address \"banana\" does not resolve' $TMP/err && [[ \$(wc -l <$TMP/err) -eq 1 ]]"
show_err

psp_check "attach" works P attach $DEV --line-rate 1gbit || { psp_finish; exit 1; }
$N "$PSPXDP" exporter $DEV --listen 127.0.0.1:$PORT >"$TMP/exporter.out" 2>&1 &
EXPORTER=$!
PIDS+=($EXPORTER)
psp_check "the exporter listens on 127.0.0.1:$PORT" psp_wait_for 10 psp_listening $NS tcp $PORT

# ---- port: a second exporter on the same port
psp_check "a second exporter on port $PORT: exit 1" exits 1 timeout 10 $N "$PSPXDP" exporter $DEV --listen 127.0.0.1:$PORT
psp_check "  ... one line naming the port in use" \
    bash -c "grep -q 'cannot listen on 127.0.0.1:$PORT: port $PORT is in use' $TMP/err && [[ \$(wc -l <$TMP/err) -eq 1 ]]"
show_err
psp_check "  ... one socket listens on the port, the first exporter's" \
    bash -c "[[ \$($N ss -Hltnp 'sport = :$PORT' | grep -c 'pid=$EXPORTER,') -eq 1 &&
               \$($N ss -Hltn 'sport = :$PORT' | wc -l) -eq 1 ]]"
ok=0
for i in $(seq 20); do
    $N curl -sf --max-time 5 "$URL" | grep -q "^pspxdp_pacer_alive{dev=\"$DEV\"} 1" && ok=$((ok + 1))
done
psp_check "  ... the first answers 20 of 20 scrapes ($ok)" test $ok -eq 20

# ---- clients: held connections, scrapes answer
psp_verdict $N python3 "$HERE/exporter_clients.py" 127.0.0.1 $PORT $DEV

# ---- stopped: one verdict for every reader
all_says() { # all_says STATE PACER_ALIVE: status -j without DEV says so of DEV
    $N "$PSPXDP" status -j | python3 "$PSP_ROOT/lab/status_is.py" \
        "dev('$DEV')['state'] == '$1' and dev('$DEV')['pacer_alive'] == ('$2' == 'true')"
}
scrape_says() { $N curl -sf --max-time 5 "$URL" | grep -q "^pspxdp_pacer_alive{dev=\"$DEV\"} $1\$"; }
DAEMON=$(psp_daemon_pid $DEV)
psp_check "before: status -j without DEV: alive" all_says alive true
kill -STOP "$DAEMON" && STOPPED=$DAEMON
psp_check "SIGSTOP: status -j without DEV says 'not beating', pacer_alive false" \
    psp_wait_for 5 all_says "not beating" false
psp_check "  ... status DEV -j the same (pacer_alive false)" psp_status_is $DEV 'd["pacer_alive"] is False'
psp_check "  ... status DEV: 'NOT beating'" bash -c "$N $PSPXDP status $DEV | grep -q '^daemon: pid $DAEMON, NOT beating'"
psp_check "  ... status without DEV: '$DEV: not beating, daemon pid $DAEMON'" \
    bash -c "$N $PSPXDP status | grep -q '^$DEV: not beating, daemon pid $DAEMON, .*(stopped or stuck)'"
psp_check "  ... the exporter: pspxdp_pacer_alive 0" scrape_says 0
kill -CONT "$DAEMON" && STOPPED=
psp_check "SIGCONT: status -j without DEV says alive again" psp_wait_for 5 all_says alive true
psp_check "  ... status DEV -j the same" psp_status_is $DEV 'd["pacer_alive"] is True'
psp_check "  ... the exporter: pspxdp_pacer_alive 1" scrape_says 1

kill -TERM $EXPORTER
psp_check "SIGTERM: the exporter exits" psp_wait_for 10 psp_gone $EXPORTER
psp_check "detach" works P detach $DEV
psp_check "  ... nothing left" is_clean
psp_finish
