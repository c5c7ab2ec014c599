#!/usr/bin/env bash
# A service paced by its cgroup alone (docs/design.md §1.3.1): a UDP sender
# offering 300 Mbit/s through a 100mbit class, once started in a cgroup that
# a "cgroup PATH classid 1:1" filter names, once through `pspxdp run --class
# 1:2 --rate 100mbit`. No header filter: the cgroup is the only thing that
# tells its traffic apart. Measured in real time over the middle of each run
# (two samples --seconds apart): the class's tx_bytes (L2 with FCS, as the
# rate counts) and what the peer received (rx_bytes of PEER, no FCS), per
# second, beside the class rate. Prints the commands it runs and a table.
# Real-time figures on a shared VM are noisy: run it under /work/wt/measure
# (or alone) and report the load.
#
#   sudo bench/run_cgroup_pacing.sh [--seconds S]
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
SECS=4
while (($#)); do
    case $1 in
    --seconds) SECS=$2; shift 2 ;;
    *) echo "usage: $0 [--seconds S]" >&2; exit 2 ;;
    esac
done
source "$ROOT/lab/netns.sh"
psp_require run_cgroup_pacing "$PSPXDP" "$TRAFFIC" -- python3
CG=$(psp_cgroup2)
[[ -n $CG ]] || { echo "run_cgroup_pacing: no cgroup2 mount" >&2; exit 77; }
NET=$(psp_random_net)
psp_lab_begin snm $NET
SVC=/pspxdp-bench-svc-$$
trap 'for p in $(cat $CG$SVC/cgroup.procs 2>/dev/null); do kill $p; done; rmdir $CG$SVC 2>/dev/null; psp_end' EXIT
say() { echo "\$ $*"; "$@"; }

echo "\$ $N $PSPXDP attach $DEV --line-rate 1gbit"
$N "$PSPXDP" attach $DEV --line-rate 1gbit >/dev/null || exit 1
say mkdir $CG$SVC
say $N "$PSPXDP" class add $DEV 1:1 100mbit
say $N "$PSPXDP" filter add $DEV cgroup $SVC classid 1:1
psp_wait_for 10 psp_status_is $DEV 'c("1:1")["state"] == "served"' || exit 1

# sample CLASS: "t_ns tx_bytes peer_rx_bytes"
sample() {
    local t tx rx
    t=$(date +%s%N)
    tx=$($N "$PSPXDP" status $DEV -j | python3 -c "import json,sys; d=json.load(sys.stdin); print(next(c['tx_bytes'] for c in d['classes'] if c['class']=='$1'))")
    rx=$(ip -n $DST -j -s link show $PEER | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["stats64"]["rx"]["bytes"])')
    echo "$t $tx $rx"
}
# measure CLASS LABEL: samples 1 s into the run and SECS later, prints a row.
measure() {
    local a b
    sleep 1 # let the class's backlog build: the sender offers 3x the rate
    a=$(sample $1)
    sleep $SECS
    b=$(sample $1)
    python3 "$HERE/cgroup_pacing.py" row "$a" "$b" "$2"
}
echo
echo "| run (class 100mbit, sender offers 300mbit)      | s      | class tx Mbit/s | peer rx Mbit/s |"
echo "|---|---|---|---|"
RUNS=$((SECS + 3))
bash -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$CG$SVC" $N "$TRAFFIC" send $NET.2 5001 --rate 300mbit --size 1400 --seconds $RUNS >$TMP/svc.json &
PIDS+=($!)
measure 1:1 "sender in cgroup $SVC (filter cgroup -> 1:1)"
wait ${PIDS[-1]}
$N "$PSPXDP" run $DEV --class 1:2 --rate 100mbit -- "$TRAFFIC" send $NET.2 5001 --rate 300mbit --size 1400 --seconds $RUNS >$TMP/run.json &
PIDS+=($!)
psp_wait_for 10 psp_status_is $DEV 'c("1:2")["state"] == "served"' 2>/dev/null
measure 1:2 "pspxdp run --class 1:2 --rate 100mbit -- sender"
wait ${PIDS[-1]}
echo
echo "commands of the second run:"
echo "\$ $N $PSPXDP run $DEV --class 1:2 --rate 100mbit -- $TRAFFIC send $NET.2 5001 --rate 300mbit --size 1400 --seconds $RUNS"
$N "$PSPXDP" detach $DEV >/dev/null
