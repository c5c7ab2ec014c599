#!/usr/bin/env bash
# Cluster mode: what a member must never do (docs/design.md §11.4.2, §11.5),
# on three hosts sharing 300 Mbit/s through a 3-member etcd (floors 50
# Mbit/s, no traffic: 100 Mbit/s each):
#
#   refused joins        a budget that is not the group's, floors that do not
#                        fit, a name a live member holds (another instance),
#                        an --etcd port out of range: exit 2, one line, and
#                        nothing changed: the class's rate, etcd's revision
#                        (no lease asked, no key written), no file left
#   status               tells what it knows: an agent stopped (NOT
#                        ANSWERING, the class's real rate), cut off from
#                        etcd (UNREACHABLE), killed (GONE, the class at its
#                        floor)
#   stop/continue        CL_PAUSE_CYCLES (default 12) SIGSTOP/SIGCONT cycles
#                        of the proposer's agent, stops of 0.3-3.6 s (past
#                        its lease's TTL of 3 s, so the others take its
#                        share meanwhile); every stop of 1.6 s or more is
#                        seen as a gap (§11.4.2, G3), and the replay checker
#                        finds 0 violations over every host's log
#   budget               `group budget` below the floors refused; 300 ->
#                        240 Mbit/s live: 80 each, within 300 throughout
#   leave                SIGTERM, `group leave`, and a leave after a kill -9
#                        and rejoin: the class back at its own rate
#                        (100 Mbit/s), not the floor or 1 bit/s
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../../lab/netns.sh"
psp_require test_cluster_pause "$PSPXDP" -- etcd curl python3
CL_PREFIX=${CL_PREFIX:-cl}
source "$HERE/cluster_lib.sh"
cl_begin clp

CYCLES=${CL_PAUSE_CYCLES:-12}
M50=50000000 M100=100000000 M125=125000000
cl_up
for i in 1 2 3; do cl_join $i --floor 50mbit; done
all_100() { cl_applied 1 $M100 && cl_applied 2 $M100 && cl_applied 3 $M100; }
psp_check "three hosts: 100 Mbit/s each" psp_wait_for 20 all_100

# ---- refused joins change nothing
cl_ns 2 "$PSPXDP" class set ${CL_P}d2$$ 1:2 50mbit
members() {
    cl_ns 1 "$PSPXDP" group show $CL_GROUP --etcd "$CL_ENDPOINTS" -j |
        python3 -c 'import json, sys; print(len(json.load(sys.stdin)["members"]))'
}
# refused TEXT ARGS...: a join of host 2's class 1:2 with ARGS is refused
# with one line holding TEXT, and nothing changed.
refused() {
    local text=$1 out rc classes rev
    shift
    classes=$(cl_ns 2 "$PSPXDP" class show ${CL_P}d2$$ -j)
    rev=$(cl_revision)
    out=$(cl_ns 2 timeout 20 "$PSPXDP" group join ${CL_P}d2$$ --group $CL_GROUP --class 1:2 \
        --log "$TMP/h2b.rates" "$@" 2>&1)
    rc=$?
    echo "     $out"
    psp_check "refused ($text): exit 2, one line" \
        test $rc -eq 2 -a "$(wc -l <<<"$out")" -eq 1 -a -n "$(grep -F -- "$text" <<<"$out")"
    psp_check "... the class unchanged" test "$(cl_ns 2 "$PSPXDP" class show ${CL_P}d2$$ -j)" = "$classes"
    psp_check "... etcd unchanged (its revision $rev; 3 members)" \
        eval 'test "$(cl_revision)" = "$rev" -a "$(members)" = 3'
    psp_check "... no file left (lock, state, rate log)" \
        test ! -e /run/pspxdp/${CL_P}d2$$.group-1-2.lock -a ! -e /run/pspxdp/${CL_P}d2$$.group-1-2.json \
        -a ! -e "$TMP/h2b.rates"
}
refused "group budget is 300Mbit, not 200Mbit" --etcd "$CL_ENDPOINTS" --budget 200mbit --name h2b
refused "floor 260Mbit does not fit" --etcd "$CL_ENDPOINTS" --budget $CL_BUDGET --name h2b --floor 260mbit
refused "host name h1 is in use in the group by a live member on" \
    --etcd "$CL_ENDPOINTS" --budget $CL_BUDGET --name h1
refused 'port "99999" is not 1-65535' --etcd "http://127.0.0.1:99999" --budget $CL_BUDGET --name h2b
refused 'nothing may follow the host but :PORT' --etcd "http://127.0.0.1:2379/v3" --budget $CL_BUDGET --name h2b
psp_check "the members still at 100 Mbit/s each" all_100

# ---- status tells what it knows
cl_cut 3
psp_check "cut off from etcd: status says etcd UNREACHABLE" \
    psp_wait_for 10 cl_state 3 "not s['etcd_reachable'] and s['agent_answering']"
cl_ns 3 "$PSPXDP" status ${CL_P}d3$$ | grep -A1 '^group ' | sed 's/^/     /'
cl_heal 3
psp_check "healed: 100 Mbit/s each" psp_wait_for 20 all_100
kill -STOP ${CL_AGENTS[2]}
psp_check "agent stopped: status says NOT ANSWERING, and the class's real rate (its floor)" \
    psp_wait_for 10 cl_state 2 "not s['agent_answering'] and s['agent_alive'] and s['class_rate_bps'] == $M50"
cl_ns 2 "$PSPXDP" status ${CL_P}d2$$ | grep -A1 '^group ' | sed 's/^/     /'
psp_check "... the text says so on one line, no line starting with ','" eval '
    out=$(cl_ns 2 "$PSPXDP" status ${CL_P}d2$$) &&
    grep -q "^group $CL_GROUP: class 1:1 as h2: paced at 50Mbit now; .*NOT ANSWERING" <<<"$out" &&
    ! grep -q "^ *," <<<"$out"'
kill -CONT ${CL_AGENTS[2]}
psp_check "continued: 100 Mbit/s each" psp_wait_for 20 all_100

# ---- SIGSTOP/SIGCONT cycles of the proposer (h1, the lowest name)
pauses=(0.3 1.6 2.4 3.6) runs=(0.4 1.0 2.0 0.7 1.5)
long=0
t0=$SECONDS
for ((k = 0; k < CYCLES; k++)); do
    p=${pauses[k % 4]} r=${runs[k % 5]}
    kill -STOP ${CL_AGENTS[1]}
    sleep "$p" # the stop's length is what is tested
    kill -CONT ${CL_AGENTS[1]}
    [[ $p != 0.3 ]] && long=$((long + 1))
    sleep "$r"
done
echo "     $CYCLES stop/continue cycles in $((SECONDS - t0)) s, $long of them of 1.6 s or more"
psp_check "every stop of 1.6 s or more was seen as a gap" \
    eval '(($(grep -c "the agent did not run for" "$TMP/h1.log") >= long))'
psp_check "after the cycles: 100 Mbit/s each" psp_wait_for 20 all_100
psp_check "the replay checker: 0 violations through the cycles" cl_check_logs 1 2 3

# ---- the budget of a live group changed
gb() { cl_ns 1 "$PSPXDP" group budget $CL_GROUP "$1" --etcd "$CL_ENDPOINTS"; }
out=$(gb 100mbit 2>&1)
rc=$?
echo "     $out"
psp_check "group budget below the floors: refused, one line" \
    eval '[[ $rc -eq 2 && $(wc -l <<<"$out") -eq 1 && $out == *"floors sum to 150Mbit, above 100Mbit"* ]]'
echo "     $(gb 240mbit)"
M80=80000000
psp_check "budget 240 Mbit/s: 80 Mbit/s each" \
    psp_wait_for 20 eval 'cl_applied 1 $M80 && cl_applied 2 $M80 && cl_applied 3 $M80'
psp_check "... the checker: within 300 Mbit/s (the old budget) throughout" cl_check_logs 1 2 3
gb 300mbit >/dev/null
psp_check "budget back to 300 Mbit/s: 100 Mbit/s each" psp_wait_for 20 all_100

# ---- leave gives the class its own rate back
t_kill=$(cl_now_ns)
kill -9 ${CL_AGENTS[3]}
psp_check "agent killed: status says GONE, the class at its floor" \
    psp_wait_for 10 cl_state 3 "not s['agent_alive'] and s['class_rate_bps'] == $M50"
psp_check "the others take its share above its floor (125 Mbit/s)" \
    psp_wait_for 10 eval 'cl_applied 1 $M125 && cl_applied 2 $M125'
: >"$TMP/h3.log"
cl_join 3 --floor 50mbit
psp_check "host 3 rejoins: 100 Mbit/s each" psp_wait_for 20 all_100
kill -TERM ${CL_AGENTS[1]}
wait ${CL_AGENTS[1]}
psp_check "SIGTERM: left (exit 0), the class at its own rate 100 Mbit/s" \
    eval 'test $? -eq 0 -a "$(cl_rate 1)" = $M100'
cl_ns 2 "$PSPXDP" group leave ${CL_P}d2$$ --group $CL_GROUP
psp_check "group leave: the class at its own rate 100 Mbit/s" \
    eval 'psp_wait_for 5 psp_gone ${CL_AGENTS[2]} && test "$(cl_rate 2)" = $M100'
cl_ns 3 "$PSPXDP" group leave ${CL_P}d3$$ --group $CL_GROUP
psp_check "leave after a kill -9 and a rejoin: its own rate (100 Mbit/s), not the floor" \
    eval 'psp_wait_for 5 psp_gone ${CL_AGENTS[3]} && test "$(cl_rate 3)" = $M100'
psp_check "the replay checker: 0 violations over every host's whole log" cl_check_logs 1 2 3
psp_check "the checker can fail: the same logs against 200 Mbit/s" \
    eval '! CL_BUDGET=200mbit cl_check_logs 1 2 3 >/dev/null'
psp_finish
