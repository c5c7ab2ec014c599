#!/usr/bin/env bash
# Cluster mode on an inner class (design §11.10), measured: what the subtree
# sends against the share the group applies, over budget changes. The setup
# of tests/lab/test_cluster_tree.sh (3 hosts, a 3-member etcd, budget
# 300 Mbit/s, floors 50): host 1's group class is the inner class 1:10
# (rate 60 ceil 200 Mbit/s) with leaves 1:11 (rate 20) and 1:12 (rate 30,
# prio 1), both ceil 200 and offered 120 Mbit/s of UDP each; hosts 2 and 3
# idle. The budget goes to 150 Mbit/s after --phase S seconds and back to
# 300 after 2 S. Every 0.5 s host 1's counters are read; bench/cluster_tree.py
# prints, per interval, the subtree's L2 rate beside the applied shares of
# the agent's rate log over the same interval (the interval widened by the
# time the reads took), and the totals. Real time on the lab's veth
# (clockless): run it under /work/wt/measure.
#
#   bench/run_cluster_tree.sh [--phase S]     (as root; S whole seconds, 3..30, default 5)
set -u
PHASE=5
case ${1:-} in
    "") ;;
    --phase) PHASE=${2:-} ;;
    -h | --help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run_cluster_tree: unknown option $1 (--phase S)" >&2; exit 2 ;;
esac
[[ $PHASE =~ ^[0-9]+$ ]] && ((PHASE >= 3 && PHASE <= 30)) ||
    { echo "run_cluster_tree: --phase: whole seconds, 3..30" >&2; exit 2; }
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lab/netns.sh"
psp_require run_cluster_tree "$PSPXDP" "$TRAFFIC" -- etcd curl python3
CL_PREFIX=${CL_PREFIX:-tC}
CL_PORT_BASE=${CL_PORT_BASE:-23880}
source "$HERE/../tests/lab/cluster_lib.sh"
cl_begin tcb

cl_up
D1=${CL_P}d1$$
H1() { cl_ns 1 "$PSPXDP" "$@"; }
psp_check "host 1: the tree" cl_site_tree 1 || { psp_finish; exit 1; }
CL_CLASS=1:10 cl_join 1 --floor 50mbit
cl_join 2 --floor 50mbit
cl_join 3 --floor 50mbit
psp_check "three members" psp_wait_for 20 eval 'cl_applied 1 100000000 && cl_applied 2 100000000'

sample() { # one line: READ_START_NS READ_END_NS TX_1:11 TX_1:12 CEIL_1:10
    local a b j
    a=$(cl_now_ns)
    j=$(H1 status $D1 -j)
    b=$(cl_now_ns)
    echo "$a $b $(python3 "$PSP_ROOT/lab/status_is.py" --print \
        '" ".join(str(x) for x in (c("1:11")["tx_bytes"], c("1:12")["tx_bytes"], c("1:10")["ceil_bps"]))' \
        <<<"$j")"
}
for port in 5011 5012; do
    cl_ns 1 "$TRAFFIC" send 10.99.1.2 $port --rate 120mbit --size 1400 --seconds $((3 * PHASE + 1)) >/dev/null &
    PIDS+=($!)
done
: >"$TMP/samples"
start=$(cl_now_ns)
step=0
now=$start
while ((now - start < 3 * PHASE * 1000000000)); do
    sample >>"$TMP/samples"
    now=$(cl_now_ns)
    if ((step == 0 && now - start >= PHASE * 1000000000)); then
        cl_ns 1 "$PSPXDP" group budget $CL_GROUP 150mbit --etcd "$CL_ENDPOINTS" >/dev/null
        echo "budget $now 150000000" >>"$TMP/samples"
        step=1
    elif ((step == 1 && now - start >= 2 * PHASE * 1000000000)); then
        cl_ns 1 "$PSPXDP" group budget $CL_GROUP 300mbit --etcd "$CL_ENDPOINTS" >/dev/null
        echo "budget $now 300000000" >>"$TMP/samples"
        step=2
    fi
    sleep 0.5
done
wait "${PIDS[@]: -2}" 2>/dev/null
python3 "$HERE/cluster_tree.py" "$TMP/samples" "$TMP/h1.rates"
psp_check "group check: 0 violations (budget 300 Mbit/s, the larger)" cl_check_logs 1 2 3
psp_finish
