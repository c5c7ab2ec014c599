#!/usr/bin/env bash
# Cluster mode on an inner class of a class tree (docs/design.md §11.10).
# Three hosts share 300 Mbit/s through a 3-member etcd cluster; host 1's
# group class is the inner class 1:10 (rate 60 ceil 200 Mbit/s) whose two
# leaves borrow (1:11 rate 20, 1:12 rate 30 prio 1, both ceil 200 Mbit/s);
# hosts 2 and 3 join their flat class 1:1 as before.
#
#   refused, nothing changed   a floor below the children's rates (50 Mbit/s);
#                              a leaf inside the joined subtree
#   the share is the subtree's ceil: 1:10's ceil is the applied share, its
#                              rate min(own, share), its leaves' ceils within
#                              it, and the daemon refuses no tree meanwhile
#   demand                     the subtree's (both leaves offered 80 Mbit/s)
#   the budget lowered to 150  the subtree's ceil follows the applied share;
#                              its leaves' tx_bytes (per-class counters) over
#                              the whole run never above what the applied
#                              shares in the agent's log allow, plus one
#                              window and the daemon's reconcile (2 MB), and
#                              held there (its leaves dropped or marked)
#   group check                0 violations against the old budget (the
#                              sum never above max(old, new))
#   leave                      the subtree's own rates and ceils back, byte
#                              for byte as `save` printed them before
#   a leaf of the tree joined  its share is its ceil, its rate its own; its
#                              parent refused (one group per subtree)
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../../lab/netns.sh"
psp_require test_cluster_tree "$PSPXDP" "$TRAFFIC" -- etcd curl python3
CL_PREFIX=${CL_PREFIX:-tC}
CL_PORT_BASE=${CL_PORT_BASE:-23870}
source "$HERE/cluster_lib.sh"
cl_begin tct

M=1000000
cl_up
D1=${CL_P}d1$$
N="nsenter --net=/run/netns/${CL_P}h1$$" # psp_status_is on host 1
H1() { cl_ns 1 "$PSPXDP" "$@"; }
psp_check "host 1: the tree 1:10 (60 ceil 200), 1:11 (20 ceil 200), 1:12 (30 ceil 200 prio 1)" cl_site_tree 1 || { psp_finish; exit 1; }
H1 save $D1 >"$TMP/own"

refused() { # WHAT EXPECTED_TEXT ARGS... (group join on host 1 with ARGS)
    local what=$1 want=$2 out rc
    shift 2
    out=$(cl_ns 1 timeout 10 "$PSPXDP" group join $D1 --etcd "$CL_ENDPOINTS" --group $CL_GROUP \
        --budget $CL_BUDGET --name h1x --log "$TMP/h1x.rates" "$@" 2>&1)
    rc=$?
    H1 save $D1 >"$TMP/now"
    echo "     $what: $out"
    [[ $rc == 2 && $(wc -l <<<"$out") == 1 && $out == *"$want"* ]] && diff "$TMP/before" "$TMP/now"
}
cp "$TMP/own" "$TMP/before"
psp_check "refused: a floor below the children's rates (exit 2, one line, nothing changed)" \
    refused floor "children guaranteed 50Mbit (their rates' sum), above --floor 10Mbit" \
    --class 1:10 --floor 10mbit

CL_CLASS=1:10 cl_join 1 --floor 50mbit
cl_join 2 --floor 50mbit
cl_join 3 --floor 50mbit
psp_check "three hosts: 100 Mbit/s each" \
    psp_wait_for 20 eval 'cl_applied 1 $((100 * M)) && cl_applied 2 $((100 * M)) && cl_applied 3 $((100 * M))'
tree_is() { # SHARE_BPS: the subtree as the group makes it at that share
    psp_status_is $D1 "(c('1:10')['ceil_bps'] == $1 and c('1:10')['rate_bps'] == min(60 * 10**6, $1)
        and c('1:11')['ceil_bps'] == min($1, 200 * 10**6) and c('1:12')['ceil_bps'] == min($1, 200 * 10**6)
        and c('1:11')['rate_bps'] + c('1:12')['rate_bps'] <= c('1:10')['rate_bps']
        and d['daemon']['config_refused'] == 0)"
}
psp_check "1:10's ceil is the share (100), its leaves' ceils within it, no tree refused" \
    psp_wait_for 10 tree_is $((100 * M))
psp_check "status: the group's class is inner, 2 classes below it" \
    psp_wait_for 5 cl_state 1 "s['classes_below'] == 2 and s['class_ceil_bps'] == 100 * 10**6"
cl_ns 1 "$PSPXDP" group show $CL_GROUP --etcd "$CL_ENDPOINTS" -j >"$TMP/group.json"
psp_check "group show: h1's class 1:10 is inner (2 classes below it), h2's and h3's have none" \
    psp_json_is "$TMP/group.json" '({m["host"]: (m["classid"], m["classes_below"]) for m in d["members"]}
        == {"h1": ("1:10", 2), "h2": ("1:1", 0), "h3": ("1:1", 0)})'
H1 save $D1 >"$TMP/before"
psp_check "refused: a leaf inside the joined subtree (exit 2, one line, nothing changed)" \
    refused inside "is inside class 1:10, which a group holds" --class 1:11

# Both leaves offered 80 Mbit/s (above their rates: they borrow) for 8 s.
t0=$(cl_now_ns)
tx0=$(cl_ns 1 "$PSPXDP" status $D1 -j | python3 "$PSP_ROOT/lab/status_is.py" --print \
    'c("1:11")["tx_bytes"] + c("1:12")["tx_bytes"]')
for port in 5011 5012; do
    cl_ns 1 "$TRAFFIC" send 10.99.1.2 $port --rate 80mbit --size 1400 --seconds 8 >/dev/null &
    PIDS+=($!)
done
psp_check "demand: the subtree's (above the share: it asks for more)" \
    psp_wait_for 10 cl_state 1 "s['offered_bps'] > 100 * 10**6"
psp_check "the leaves borrow inside the subtree" psp_wait_for 10 psp_status_is $D1 \
    'c("1:11")["borrowed_bytes"] > 0 and c("1:12")["borrowed_bytes"] > 0'
psp_check "the budget lowered to 150 Mbit/s" \
    cl_ns 1 "$PSPXDP" group budget $CL_GROUP 150mbit --etcd "$CL_ENDPOINTS"
psp_check "host 1's share below 150, and 1:10's ceil follows it" psp_wait_for 15 eval '
    s=$(cl_ns 1 "$PSPXDP" status $D1 -j | python3 "$PSP_ROOT/lab/status_is.py" --print "d[\"groups\"][0][\"applied_bps\"]") &&
    (( s > 0 && s < 150 * M )) && tree_is $s'
wait "${PIDS[@]: -2}" 2>/dev/null
tx1=$(cl_ns 1 "$PSPXDP" status $D1 -j | python3 "$PSP_ROOT/lab/status_is.py" --print \
    'c("1:11")["tx_bytes"] + c("1:12")["tx_bytes"]')
t1=$(cl_now_ns)
allowed=$(CL share-bytes "$TMP/h1.rates" "$t0" "$t1")
echo "     subtree sent $((tx1 - tx0)) bytes; the applied shares allowed $allowed (+2 MB)"
psp_check "the subtree's bytes within its applied shares (+2 MB)" \
    test $((tx1 - tx0)) -le $((allowed + 2000000))
psp_check "... and was held there: its leaves dropped or marked (offered 160 Mbit/s, share 50)" \
    psp_status_is $D1 'sum(c(k)[f] for k in ("1:11", "1:12") for f in ("drop_limit", "drop_aqm", "ce_marked")) > 0'

psp_check "the invariant checker: 0 violations over every host's log" cl_check_logs 1 2 3
psp_check "the checker can fail: the same logs against 100 Mbit/s" \
    eval '! CL_BUDGET=100mbit cl_check_logs 1 2 3 >/dev/null'

psp_check "host 1 leaves" cl_ns 1 "$PSPXDP" group leave $D1 --group $CL_GROUP
H1 save $D1 >"$TMP/after"
psp_check "... its subtree's own rates and ceils back, as save printed them" cmp "$TMP/own" "$TMP/after"

# A leaf of the tree joined: its share is its ceil (its rate stays its own),
# and its parent cannot join above it. Members joining now give the new budget.
CL_BUDGET=150mbit
CL_CLASS=1:11 cl_join 1 --floor 50mbit
psp_check "the leaf 1:11 joined: 50 Mbit/s each (budget 150)" psp_wait_for 20 cl_applied 1 $((50 * M))
psp_check "... its ceil is the share, its rate its own 20 Mbit/s" psp_wait_for 10 psp_status_is $D1 \
    "c('1:11')['ceil_bps'] == 50 * 10**6 and c('1:11')['rate_bps'] == 20 * 10**6 and c('1:10')['ceil_bps'] == 200 * 10**6"
H1 save $D1 >"$TMP/before"
psp_check "refused: its parent 1:10 (exit 2, one line, nothing changed)" \
    refused above "has class 1:11 below it, which a group holds" --class 1:10 --floor 50mbit
psp_check "the leaf leaves: the tree as it was" eval '
    cl_ns 1 "$PSPXDP" group leave $D1 --group $CL_GROUP && H1 save $D1 | cmp - "$TMP/own"'
psp_finish
