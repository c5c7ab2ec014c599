#!/usr/bin/env bash
# Cluster mode's fault tests (docs/design.md §11.6): three hosts,
# each a namespace with its own pspxdp on its own veth, share 300 Mbit/s
# through a 3-member etcd cluster (floors 50 Mbit/s, weights 1; no traffic,
# so every live host's share is equal: 150 each for two, 100 for three).
#
#   a host joining           the shares go 150/150 -> 100/100/100
#   a second group           on the same class: refused with one line
#   floors above the budget  refused at join (locally, and through etcd)
#   etcd through the class   refused at join: the agent's own etcd traffic
#                            would go through the class it holds at 0
#   one etcd member killed   nothing changes (no rate change anywhere)
#   etcd's leader killed     no rate change if the new leader is elected within
#                            1.294 s (safe span - keep-alive period - hedge); the
#                            checker's 0 violations whatever it takes
#   a host partitioned       it is at its floor within the safe span
#                            (2.494 s after its last answered keep-alive,
#                            asserted <= 3.0 s after the cut); the others
#                            raise only after its lease can have expired
#                            (>= TTL - keep-alive period = 2 s after the
#                            cut), then take its share above its floor
#   a host's agent stopped   (SIGSTOP, the agent hung): its watchdog puts
#                            the class at the floor by the same deadline
#   a host killed            its share goes to the others within the TTL:
#                            its watchdog lowers the class to the floor and
#                            revokes the lease at once (asserted: the lease
#                            revoked, the others raised < 3 s after the kill)
#   the whole etcd down      every host at its floor, status says it holds
#                            a safe allocation; shares back once etcd is up
#   leave                    SIGTERM: the agent leaves and exits 0
#
# Every host's applied-rate log goes through the invariant checker
# (pspxdp group check): 0 violations; the same logs against a budget a
# third lower must fail (the checker is not vacuous here).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../../lab/netns.sh"
psp_require test_cluster_faults "$PSPXDP" -- etcd curl python3
source "$HERE/cluster_lib.sh"
cl_begin cl

M50=50000000 M100=100000000 M125=125000000 M150=150000000
cl_up

rev0=$(cl_revision) t0=$SECONDS
cl_join 1 --floor 50mbit
cl_join 2 --floor 50mbit
psp_check "two hosts: 150 Mbit/s each" psp_wait_for 15 eval 'cl_applied 1 $M150 && cl_applied 2 $M150'
psp_check "the class paces what the agent applied" test "$(cl_rate 1)" = $M150

cl_join 3 --floor 50mbit
psp_check "a host joins: 100 Mbit/s each" \
    psp_wait_for 15 eval 'cl_applied 1 $M100 && cl_applied 2 $M100 && cl_applied 3 $M100'
cl_ns 1 "$PSPXDP" group show $CL_GROUP --etcd "$CL_ENDPOINTS" | sed 's/^/     /'
cl_ns 1 "$PSPXDP" group show $CL_GROUP --etcd "$CL_ENDPOINTS" -j >"$TMP/group.json"
psp_check "group show -j: settled, 3 live, 300 Mbit/s allocated" psp_json_is "$TMP/group.json" \
    'd["settled"] and d["allocated_bps"] == 300000000 and sum(m["live"] == "yes" for m in d["members"]) == 3'

# Refusals: one line, exit 2, nothing changed.
out=$(cl_ns 1 "$PSPXDP" group join ${CL_P}d1$$ --etcd "$CL_ENDPOINTS" --group other$$ --budget 1gbit \
    --class 1:1 --name x 2>&1)
rc=$?
echo "     $out"
psp_check "a second group on the same class: refused, one line" \
    test $rc -eq 2 -a "$(wc -l <<<"$out")" -eq 1 -a -n "$(grep 'already in a group' <<<"$out")"
cl_ns 1 "$PSPXDP" class set ${CL_P}d1$$ 1:2 10mbit
out=$(cl_ns 1 "$PSPXDP" group join ${CL_P}d1$$ --etcd "$CL_ENDPOINTS" --group $CL_GROUP --budget $CL_BUDGET \
    --class 1:2 --name h1b --floor 200mbit --log "$TMP/h1b.rates" 2>&1)
rc=$?
echo "     $out"
psp_check "floors above the budget: refused through etcd, one line" \
    test $rc -eq 2 -a -n "$(grep 'does not fit' <<<"$out")"
cl_ns 1 "$PSPXDP" group show $CL_GROUP --etcd "$CL_ENDPOINTS" -j >"$TMP/group.json"
psp_check "refused: the group's roster unchanged" psp_json_is "$TMP/group.json" 'len(d["members"]) == 3'

# Self-starvation: an etcd reached through DEV whose port a filter sends to
# the group's class. The class is held at 0 while the agent joins, so every
# request would time out: refused before anything is touched (no lock,
# state or rate log; the class's rate and the roster unchanged). The URL is
# the wire's peer (no etcd there: the check is the route and the filters).
self_port=$((CL_PORT + 5))
cl_ns 1 "$PSPXDP" filter add ${CL_P}d1$$ proto tcp dport $self_port classid 1:2
rate_before=$(cl_ns 1 "$PSPXDP" class show ${CL_P}d1$$ -j)
# (timeout: an agent that did not refuse would run in the foreground.)
out=$(cl_ns 1 timeout 10 "$PSPXDP" group join ${CL_P}d1$$ --etcd "http://10.99.1.2:$self_port" --group $CL_GROUP \
    --budget $CL_BUDGET --class 1:2 --name h1s --log "$TMP/h1s.rates" 2>&1)
rc=$?
echo "     $out"
psp_check "etcd reached through the group's class: refused, exit 2, one line" \
    test $rc -eq 2 -a "$(wc -l <<<"$out")" -eq 1 -a \
    -n "$(grep -F "etcd at http://10.99.1.2:$self_port is reached through ${CL_P}d1$$'s class 1:2" <<<"$out")"
psp_check "... it says what to do (a filter to an unpaced class)" \
    grep -qF "filter add ${CL_P}d1$$ proto tcp dport $self_port classid 1:ffff" <<<"$out"
psp_check "... nothing changed: classes, no lock, state or rate log, roster of 3" eval '
    test "$(cl_ns 1 "$PSPXDP" class show ${CL_P}d1$$ -j)" = "$rate_before" &&
    test ! -e /run/pspxdp/${CL_P}d1$$.group-1-2.lock -a ! -e /run/pspxdp/${CL_P}d1$$.group-1-2.json \
        -a ! -e "$TMP/h1s.rates" &&
    test "$(cl_ns 1 "$PSPXDP" group show $CL_GROUP --etcd "$CL_ENDPOINTS" -j |
        python3 -c "import json, sys; print(len(json.load(sys.stdin)[\"members\"]))")" = 3'
cl_ns 1 "$PSPXDP" filter del ${CL_P}d1$$ proto tcp dport $self_port

# One etcd member killed: every agent keeps its lease (renewed through
# another member) and no rate changes anywhere.
# The member the agents talk to (the first of their list), a follower:
# a leader's loss costs an election (1 s here) on top, which the safe span
# covers too, but not with the room a loaded machine needs.
psp_check "etcd member 0 is a follower" cl_etcd_not_leader 0
before=$(($(cl_lines 1) + $(cl_lines 2) + $(cl_lines 3)))
t_kill=$(cl_now_ns)
kill -9 ${CL_ETCD_PIDS[0]}
renewed_since() { # every agent's state written after T with its lease safe, 1.5 TTL later
    local i
    for i in 1 2 3; do
        cl_state $i "s['lease_safe'] and s['updated_ns'] > $1 + 4500000000" || return 1
    done
}
psp_check "one etcd member killed: the leases stay safe for 1.5 TTL" psp_wait_for 15 renewed_since $t_kill
psp_check "one etcd member killed: no rate changed" \
    test $(($(cl_lines 1) + $(cl_lines 2) + $(cl_lines 3))) -eq $before
cl_etcd_member 0
psp_check "the member is back" psp_wait_for 15 cl_etcd_healthy 0

# etcd's leader killed: the survivors elect a new one (a follower campaigns
# a randomized election timeout, 0.5-1 s here, after the last heartbeat it
# heard: --election-timeout 500) and it keeps every lease (etcd's lessor
# promotes them with a full TTL). Meanwhile no renewal is answered, so a
# host's rate holds only while its deadline lasts: the safe span (2.494 s)
# from the send of its last answered keep-alive, at most one keep-alive
# period (1 s) before the kill; the agent's keep-alive goes to the next
# member every 200 ms it is not answered (members hold renewals through an
# election), so one is sent at most 200 ms after the new leader is there.
# No host falls to its floor if the election is over within
# 2.494 - 1 - 0.2 = 1.294 s of the kill (CL_ELECTION_BOUND_S; 1 s plus a
# vote's round trip with these settings); past that a drop to the floor is
# allowed (it is the deadline working), a violation never.
leader=$(cl_etcd_leader)
psp_check "etcd has a leader: member ${leader:-none}" test -n "$leader"
old_id=$(cl_etcd_status_id_of "$leader")
before=$(($(cl_lines 1) + $(cl_lines 2) + $(cl_lines 3)))
t_kill=$(cl_now_ns)
kill -9 ${CL_ETCD_PIDS[$leader]}
new_leader() { # a survivor answers with a leader, and a write goes through
    local k l
    for k in 0 1 2; do
        ((k == leader)) && continue
        l=$(cl_etcd_leader_seen_by $k) && [[ -n $l && $l != "$old_id" ]] && return 0
    done
    return 1
}
psp_check "leader killed: a new leader elected" psp_wait_for 15 new_leader
t_elected=$(cl_now_ns)
elected_s=$(CL seconds $t_kill $t_elected)
echo "     new leader seen ${elected_s} s after the kill (bound for no floor drop: ${CL_ELECTION_BOUND_S} s)"
psp_check "leader killed: the leases stay safe for 1.5 TTL" psp_wait_for 15 renewed_since $t_elected
lowered=$(($(cl_lines 1) + $(cl_lines 2) + $(cl_lines 3) - before))
if awk -v e="$elected_s" -v b="$CL_ELECTION_BOUND_S" 'BEGIN { exit !(e <= b) }'; then
    psp_check "elected within ${CL_ELECTION_BOUND_S} s: no rate changed" test $lowered -eq 0 ||
        for i in 1 2 3; do awk -v t=$t_kill '$1 > t' "$TMP/h$i.rates" | sed "s/^/     h$i: /"; grep -a 'etcd\|rate\|watchdog' "$TMP/h$i.log" | tail -5 | sed "s/^/     h$i: /"; done
else
    echo "     elected after the bound: $lowered rate changes allowed (the deadlines)"
    psp_check "... and every host back at 100 Mbit/s" \
        psp_wait_for 15 eval 'cl_applied 1 $M100 && cl_applied 2 $M100 && cl_applied 3 $M100'
fi
psp_check "leader killed: the invariant checker, 0 violations" cl_check_logs 1 2 3
cl_etcd_member $leader
psp_check "the old leader is back" psp_wait_for 15 cl_etcd_healthy $leader

# Host 3 partitioned from etcd.
t_cut=$(cl_now_ns)
cl_cut 3
psp_check "partitioned host at its floor" psp_wait_for 10 cl_applied 3 $M50
psp_check "... within 3.0 s of the cut (safe span 2.494 s)" \
    cl_within $t_cut "$(cl_first_after 3 $t_cut == $M50)" 3.0
psp_check "the others take its share above its floor: 125 Mbit/s" \
    psp_wait_for 10 eval 'cl_applied 1 $M125 && cl_applied 2 $M125'
psp_check "... not before its lease can have expired (>= 2 s after the cut)" \
    cl_after $t_cut "$(cl_first_after 1 $t_cut '>' $M100)" 2.0
psp_check "partitioned host: status says it holds a safe allocation" \
    psp_wait_for 5 cl_state 3 "s['holding_safe_allocation'] and not s['etcd_reachable']"
cl_heal 3
psp_check "healed: 100 Mbit/s each again" \
    psp_wait_for 15 eval 'cl_applied 1 $M100 && cl_applied 2 $M100 && cl_applied 3 $M100'

# Host 2's agent hangs (SIGSTOP): its watchdog holds the deadline.
t_stop=$(cl_now_ns)
kill -STOP ${CL_AGENTS[2]}
rate_is() { test "$(cl_rate $1)" = "$2"; }
psp_check "hung agent: the watchdog puts the class at its floor" psp_wait_for 10 rate_is 2 $M50
psp_check "... within 3.0 s of the stop" cl_within $t_stop "$(cl_first_after 2 $t_stop == $M50)" 3.0
psp_check "the others raise (125 Mbit/s)" psp_wait_for 10 eval 'cl_applied 1 $M125 && cl_applied 3 $M125'
psp_check "... not before its lease can have expired (>= 2 s after the stop)" \
    cl_after $t_stop "$(cl_first_after 1 $t_stop '>' $M100)" 2.0
kill -CONT ${CL_AGENTS[2]}
psp_check "resumed: it rejoins, 100 Mbit/s each" \
    psp_wait_for 15 eval 'cl_applied 1 $M100 && cl_applied 2 $M100 && cl_applied 3 $M100'

# Host 3 killed (its agent; the watchdog leaves the class at its floor).
t_kill=$(cl_now_ns)
kill -9 ${CL_AGENTS[3]}
psp_check "killed agent: its watchdog lowers and exits" \
    psp_wait_for 5 eval '[[ -z $(pgrep -f -- "group join ${CL_P}d3$$ .*--group $CL_GROUP( |$)") ]]'
psp_check "host killed: its share goes to the others (125 Mbit/s)" \
    psp_wait_for 10 eval 'cl_applied 1 $M125 && cl_applied 2 $M125'
# The watchdog revokes the lease once the class is at its fallback (design
# §11.3): the others raise one epoch later, well within the TTL (3 s).
psp_check "... its watchdog revoked its lease" cl_revoked 3
psp_check "... the others raised within the TTL (3.0 s)" \
    cl_within $t_kill "$(cl_first_after 1 $t_kill '>' $M100)" 3.0
echo "     the others raised $(CL seconds $t_kill "$(cl_first_after 1 $t_kill '>' $M100)") s after the kill"
grep -a 'watchdog' "$TMP/h3.log" | tail -2 | sed 's/^/     h3: /'
psp_check "the dead host's class holds its floor" psp_wait_for 5 rate_is 3 $M50

# The whole etcd cluster down.
for k in 0 1 2; do kill -9 ${CL_ETCD_PIDS[$k]}; done
psp_check "etcd down: every host at its floor" psp_wait_for 10 eval 'cl_applied 1 $M50 && cl_applied 2 $M50'
for i in 1 2; do
    psp_check "etcd down: status of host $i says it holds a safe allocation" \
        psp_wait_for 5 cl_state $i "s['holding_safe_allocation'] and not s['etcd_reachable']"
done
cl_ns 1 "$PSPXDP" status ${CL_P}d1$$ | grep -A1 'group ' | sed 's/^/     /'
for k in 0 1 2; do cl_etcd_member $k; done
psp_check "etcd back: the shares back (125 Mbit/s)" \
    psp_wait_for 20 eval 'cl_applied 1 $M125 && cl_applied 2 $M125'

# Leave: SIGTERM, and pspxdp group leave.
kill -TERM ${CL_AGENTS[1]}
wait ${CL_AGENTS[1]}
psp_check "SIGTERM: the agent left and exited 0" test $? -eq 0
psp_check "... its watchdog gone with it" \
    psp_wait_for 5 eval '[[ -z $(pgrep -f -- "group join ${CL_P}d1$$ .*--group $CL_GROUP( |$)") ]]'
psp_check "... its lock file removed (the rate log kept)" \
    test ! -e /run/pspxdp/${CL_P}d1$$.group-1-1.lock -a ! -e /run/pspxdp/${CL_P}d1$$.group-1-1.json
psp_check "after a leave: the other takes the rest (250 Mbit/s)" psp_wait_for 10 cl_applied 2 250000000
cl_ns 2 "$PSPXDP" group leave ${CL_P}d2$$ --group $CL_GROUP
psp_check "group leave: the agent is gone" psp_wait_for 5 psp_gone ${CL_AGENTS[2]}
psp_check "left: the class back at its own rate (100 Mbit/s)" test "$(cl_rate 2)" = $M100

# The watchdog killed: the agent leaves (exit 1) rather than pace without
# it; the watchdog lowered to the fallback on its way out.
: >"$TMP/h3.log"
cl_join 3 --floor 50mbit
psp_check "host 3 rejoins alone: the whole budget" psp_wait_for 15 cl_applied 3 $CL_BUDGET_BPS
wd=$(cl_watchdog 3)
kill -TERM "$wd"
wait ${CL_AGENTS[3]}
psp_check "watchdog SIGTERMed: the agent left, exit 1" test $? -eq 1
psp_check "... left the group: the class at its own rate, no process of it left" \
    eval 'test "$(cl_rate 3)" = $M100 && [[ -z $(pgrep -f -- "group join ${CL_P}d3$$ .*--group $CL_GROUP( |$)") ]]'

# DEV detached under a hung agent: the watchdog cannot lower (DEV is gone):
# it retries every 250 ms, blocked in poll in between (it used to spin,
# one failed attempt after another); the agent, resumed, finds DEV gone
# and leaves on its own (exit 1).
: >"$TMP/h3.log"
cl_join 3 --floor 50mbit
psp_check "host 3 rejoins: the whole budget" psp_wait_for 15 cl_applied 3 $CL_BUDGET_BPS
wd=$(cl_watchdog 3)
kill -STOP ${CL_AGENTS[3]}
cl_ns 3 "$PSPXDP" detach ${CL_P}d3$$ >/dev/null
fails() { grep -c 'watchdog: ' "$TMP/h3.log"; }
psp_check "DEV gone, agent hung: the watchdog tries to lower" psp_wait_for 10 eval '(($(fails) >= 3))'
psp_check "... and retries (no spinning): $(fails) attempts by the third" test "$(fails)" -lt 20
psp_check "... its state is sleeping, not running" psp_wait_for 2 eval '[[ $(awk "{print \$3}" /proc/$wd/stat) == S ]]'
kill -CONT ${CL_AGENTS[3]}
wait ${CL_AGENTS[3]}
psp_check "resumed without DEV: the agent left on its own, exit 1" test $? -eq 1
psp_check "no agent or watchdog of this test left" psp_wait_for 5 eval '[[ -z $(cl_ours) ]]'

for i in 1 2 3; do echo "     host $i: $(cl_lines $i) rate changes"; done
# etcd's load: every write bumps the revision once (keep-alives do not).
rev1=$(cl_revision)
CL writes "${rev0:-0}" "${rev1:-0}" $((SECONDS - t0))
psp_check "the invariant checker: 0 violations over every host's log" cl_check_logs 1 2 3
psp_check "the checker can fail: the same logs against 200 Mbit/s" \
    eval '! CL_BUDGET=200mbit cl_check_logs 1 2 3 >/dev/null'
psp_finish
