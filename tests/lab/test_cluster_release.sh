#!/usr/bin/env bash
# Cluster mode: a dead host's floor released (docs/design.md §11.4.1, R7
# and R8), with the group's --orphan-after 2s. Three hosts share 300 Mbit/s
# through a 3-member etcd cluster (floors 50 Mbit/s, no traffic: equal
# shares, exact rates). TTL 3 s, keep-alives every 1 s, safe span 2.494 s;
# G = 2 s x (1+1e-3)/(1-1e-3) + 0.5 s = 2.504 s.
#
#   another --orphan-after   refused at join through etcd, one line
#   a host killed            its watchdog puts its class at 0 at once (the
#                            agent is gone: nobody will renew); its share
#                            goes to the others within the TTL, its floor
#                            only once its record has been gone G (2.502 s
#                            through the drift): its watchdog revokes the
#                            lease once the class is at 0, else the lease
#                            expires, no earlier than 2 s (TTL - keep-alive
#                            period) after the kill
#   a host partitioned       at its floor by its deadline (<= 3.0 s after
#                            the cut), at 0 one orphan span (2 s) later
#                            (<= 5.0 s), and before the other takes its floor
#   healed                   it rejoins and re-establishes: equal shares
#
# The checker over every host's log: 0 violations, and the same logs
# against 200 Mbit/s must fail.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../../lab/netns.sh"
psp_require test_cluster_release "$PSPXDP" -- etcd curl python3
source "$HERE/cluster_lib.sh"
cl_begin clr

M50=50000000 M100=100000000 M125=125000000 M150=150000000 M250=250000000
cl_up

for i in 1 2 3; do cl_join $i --floor 50mbit --orphan-after 2s; done
psp_check "three hosts: 100 Mbit/s each" \
    psp_wait_for 20 eval 'cl_applied 1 $M100 && cl_applied 2 $M100 && cl_applied 3 $M100'

# The orphan span is the group's: a member with another is refused.
cl_ns 1 "$PSPXDP" class set ${CL_P}d1$$ 1:2 10mbit
out=$(cl_ns 1 timeout 20 "$PSPXDP" group join ${CL_P}d1$$ --etcd "$CL_ENDPOINTS" --group $CL_GROUP \
    --budget $CL_BUDGET --class 1:2 --name h1b --orphan-after 5s --log "$TMP/h1b.rates" 2>&1)
rc=$?
echo "     $out"
psp_check "another --orphan-after: refused through etcd, exit 2, one line saying why" \
    test $rc -eq 2 -a "$(grep -c 'releases a dead member.s floor after 2000 ms, not 5000 ms' <<<"$out")" -eq 1

# Host 3 killed.
t_kill=$(cl_now_ns)
kill -9 ${CL_AGENTS[3]}
psp_check "killed: its watchdog puts the class at 0 (held: 1 bit/s)" \
    psp_wait_for 5 eval 'test "$(cl_rate 3)" = 1'
psp_check "... at once (<= 1.0 s)" cl_within $t_kill "$(cl_first_after 3 $t_kill == 0)" 1.0
psp_check "its share to the others (125 Mbit/s)" psp_wait_for 10 eval 'cl_applied 1 $M125 && cl_applied 2 $M125'
psp_check "its floor too, once released (150 Mbit/s)" \
    psp_wait_for 15 eval 'cl_applied 1 $M150 && cl_applied 2 $M150'
# Its record goes when its watchdog revokes the lease (the class at 0 by
# then, design §11.3); the floor is released G after that.
psp_check "its watchdog revoked its lease" cl_revoked 3
psp_check "... its floor not before G after its record went (2.502 s after the kill)" \
    cl_after $t_kill "$(cl_first_after 1 $t_kill '>' $M125)" 2.502
psp_check "... within TTL + G + 1 s (6.504 s)" cl_within $t_kill "$(cl_first_after 1 $t_kill '>' $M125)" 6.504

# Host 2 partitioned from etcd.
t_cut=$(cl_now_ns)
cl_cut 2
psp_check "partitioned: at its floor" psp_wait_for 10 eval 'test "$(cl_rate 2)" = $M50'
psp_check "... within 3.0 s of the cut (safe span 2.494 s)" \
    cl_within $t_cut "$(cl_first_after 2 $t_cut == $M50)" 3.0
psp_check "then at 0 (held: 1 bit/s)" psp_wait_for 10 eval 'test "$(cl_rate 2)" = 1'
t_zero=$(cl_first_after 2 $t_cut == 0)
psp_check "... within 5.0 s of the cut (safe span + orphan span 2 s)" cl_within $t_cut "$t_zero" 5.0
psp_check "the other takes its share (250), then its floor (300 Mbit/s)" \
    psp_wait_for 15 cl_applied 1 $CL_BUDGET_BPS
psp_check "... its floor only after the partitioned host was at 0" \
    cl_after "$t_zero" "$(cl_first_after 1 $t_cut '>' $M250)" 0
cl_heal 2
psp_check "healed: it rejoins, 150 Mbit/s each" \
    psp_wait_for 20 eval 'cl_applied 1 $M150 && cl_applied 2 $M150'

for i in 1 2 3; do echo "     host $i: $(cl_lines $i) rate changes"; done
psp_check "the invariant checker: 0 violations over every host's log" cl_check_logs 1 2 3
psp_check "the checker can fail: the same logs against 200 Mbit/s" \
    eval '! CL_BUDGET=200mbit cl_check_logs 1 2 3 >/dev/null'
psp_finish
