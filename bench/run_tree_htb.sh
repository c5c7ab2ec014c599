#!/usr/bin/env bash
# pspxdp's class tree (design §3.12) beside htb, the same tree and the same
# offered load, in real time on the lab's veth (pspxdp clockless). The tree
# (bench/tree_htb.py): a 400 Mbit/s root on a 1 Gbit/s line, 2 sites of rate
# 150 ceil 300 Mbit/s, each with 3 subscribers of rate 30 ceil 120 (the
# third at prio 1), every subscriber offered 100 Mbit/s of UDP; after
# --phase S seconds the second site's subscribers stop (a demand change),
# the first site's go on for S more. The ISP tree scaled down to what 2
# cores can offer and capture.
#
# For each shaper, on a fresh namespace pair: pspxdp attached with
# --line-rate 1gbit (clockless on a veth), or htb with the same classes,
# rates, ceils and prios via tc (default buckets). A capture at the far
# end; bench/tree_htb.py prints per leaf the rate over the steady part of
# each phase against the ideal water-filling of the rules, the burstiness
# at the leaf's mean rate (`pspxdp analyze --real-time`, per phase) and the
# time the first site's leaves take to borrow what the second site left,
# and writes ROOT/<date>-tree-vs-htb/ (README.md, leaves.csv, a plot of
# each leaf's rate over time). A measurement, not a test: run it under
# /work/wt/measure on a machine as quiet as can be.
#
#   sudo bench/run_tree_htb.sh [--phase S] [--results ROOT]
#     --phase S: seconds per phase (default 5; 3..30)
#     --results ROOT: where the results folder goes (default build/results;
#       docs/results to publish)
set -u
PHASE=5
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$HERE/../build/results
COMMAND="bench/run_tree_htb.sh $*"
while (($#)); do
    case $1 in
    --phase) PHASE=${2:?}; shift 2 ;;
    --results) ROOT=${2:?}; shift 2 ;;
    -h | --help) sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run_tree_htb: unknown argument \"$1\"" >&2; exit 2 ;;
    esac
done
[[ $PHASE =~ ^[0-9]+$ ]] && ((PHASE >= 3 && PHASE <= 30)) || { echo "--phase: whole seconds, 3..30" >&2; exit 2; }
source "$HERE/../lab/netns.sh"
psp_require run_tree_htb "$PSPXDP" "$TRAFFIC" -- ip tc tcpdump python3 nsenter timeout
LOAD_BEFORE=$(uptime)
# Debian's python3 (python3-matplotlib is installed for it, scripts/setup.sh), as lab/lab.sh.
PYTHON=${PYTHON:-/usr/bin/python3}
TREE=("$PYTHON" "$HERE/tree_htb.py")
NET=${BENCH_NET:-10.89.0}  # BENCH_NET: the first wire's /24; the second is .1 higher in the third byte
psp_lab_begin "${BENCH_TAG:-tl}" "$NET"
PORTS=$(seq -s, 5011 5013),$(seq -s, 5021 5023)

# run SHAPER SRC_NS DST_NS DEV PEER NET: one run on that wire; files $TMP/SHAPER.*
run() {
    local shaper=$1 src=$2 dst=$3 dev=$4 peer=$5 net=$6 out=$TMP/$1 line sink
    local n="nsenter --net=/run/netns/$src" d="nsenter --net=/run/netns/$dst"
    if [[ $shaper == pspxdp ]]; then
        $n "$PSPXDP" attach "$dev" --line-rate 1gbit >/dev/null || { echo "run_tree_htb: attach failed" >&2; exit 1; }
        while read -r line; do
            # shellcheck disable=SC2086 # one class's words
            $n "$PSPXDP" class set "$dev" $line >/dev/null || { echo "run_tree_htb: class set $line" >&2; exit 1; }
        done < <("${TREE[@]}" pspxdp-classes)
        "${TREE[@]}" pspxdp-filters | $n "$PSPXDP" filter add "$dev" --file - >/dev/null ||
            { echo "run_tree_htb: filters refused" >&2; exit 1; }
        N=$n psp_wait_for 10 psp_status_is "$dev" 'all(c(k)["state"] == "served" for k in ("1:13", "1:23"))' ||
            { echo "run_tree_htb: the leaves are not served" >&2; exit 1; }
    else
        while read -r line; do
            # shellcheck disable=SC2086 # one tc command's words
            $n tc $line || { echo "run_tree_htb: tc $line" >&2; exit 1; }
        done < <("${TREE[@]}" tc "$dev")
    fi
    $d timeout $((2 * PHASE + 10)) "$TRAFFIC" sink "$PORTS" --seconds $((2 * PHASE + 5)) >"$out.sink.json" 2>&1 &
    sink=$!
    PIDS+=($sink)
    psp_wait_for 10 psp_listening "$dst" udp 5023 || { echo "run_tree_htb: no sink" >&2; exit 1; }
    psp_capture "$d" "$peer" "$out" 524288 udp || exit 1
    local cap=$PSP_CAPTURE_PID
    # shellcheck disable=SC2046 # the --flow arguments
    $n timeout $((2 * PHASE + 10)) "$TRAFFIC" send $("${TREE[@]}" flows "$net.2" "$PHASE") --size 1472 \
        --seconds $((2 * PHASE)) >"$out.send.json"
    # What the shaper still holds drains; then the capture stops.
    sleep 1
    kill -INT "$cap"
    wait "$cap" 2>/dev/null
    kill "$sink" 2>/dev/null
    wait "$sink" 2>/dev/null
    if [[ $shaper == pspxdp ]]; then
        $n "$PSPXDP" stats "$dev" -j >"$out.stats.json"
        $n "$PSPXDP" detach "$dev" >/dev/null
    else
        $n tc -s -j class show dev "$dev" >"$out.stats.json"
        $n tc qdisc del dev "$dev" root
    fi
}

echo "pspxdp: ${PHASE} s all subscribers, ${PHASE} s site 1:20's off" >&2
run pspxdp "$SRC" "$DST" "$DEV" "$PEER" "$NET"
# htb on a fresh namespace pair (psp_end deletes it with the first).
IFS=. read -r a b c <<<"$NET"
NET2=$a.$b.$((c + 1))
SRC2=psp-${BENCH_TAG:-tl}$$-hs DST2=psp-${BENCH_TAG:-tl}$$-hd DEV2=p${BENCH_TAG:-tl}$$c PEER2=p${BENCH_TAG:-tl}$$d
psp_make_wire "$SRC2" "$DST2" "$DEV2" "$PEER2" "$NET2" || exit 1
echo "htb: the same" >&2
run htb "$SRC2" "$DST2" "$DEV2" "$PEER2" "$NET2"
LOAD_AFTER=$(uptime)
"${TREE[@]}" report --results "$ROOT" --phase "$PHASE" --command "$COMMAND" --load-before "$LOAD_BEFORE" \
    --load-after "$LOAD_AFTER" --pspxdp "$PSPXDP" pspxdp="$TMP/pspxdp" htb="$TMP/htb"
