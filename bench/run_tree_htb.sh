#!/usr/bin/env bash
# pspxdp's class tree (design §3.12) beside htb, the same trees and the same
# offered load, one sender process per subscriber (bench/tree_htb.py has
# the trees and the analysis). Two cases, each on fresh attaches:
#  - tree: the ISP tree scaled to 2 cores: a 400 Mbit/s root on a 1 Gbit/s
#    line, 4 sites of rate 80 ceil 160, 5 subscribers each of rate 16
#    ceil 48; 3 subscribers per site offer 60 Mbit/s each. Three phases of
#    --phase S seconds: all on; site 1:40 idle (the others borrow); site
#    1:40 back (they give back). Runs: pspxdp on the byte clock (--clock
#    byte --gap-horizon inf: gap frames, judged in wire bytes at the far
#    end), pspxdp clockless (a veth's default, real time), htb (real time)
#    with tc's default quantum and again with quantum 1514.
#    The frames go to a MAC nobody has (the far end drops them after the
#    capture, as bench/run_dp_bench.sh's): no sink's receive on the
#    senders' CPU, for either shaper.
#  - prio: a prio-0 class with a 1 Mbit/s stamped flow of small datagrams
#    beside a prio-1 bulk class offered 150 Mbit/s, both under a 100 Mbit/s
#    parent: the latency flow's one-way delay (its sink's receive stamps)
#    and the bulk class's take of the spare; pspxdp on both clocks, htb,
#    each also without the bulk flow (what the shaper's path adds by
#    itself), and the bare wire (no shaper, the latency flow alone) for
#    the baseline.
# Prints the tables and writes ROOT/<date>-tree-vs-htb-fair/ (README.md,
# classes.csv, priority.csv, rate-over-time.png). A measurement, not a
# test: run it under /work/wt/measure on a machine as quiet as can be.
#
#   bench/run_tree_htb.sh [--phase S] [--only tree|prio] [--leaf-limit TIME] [--spin] [--results ROOT]
#     --phase S: seconds per phase of the tree case (default 4; 3..30)
#     --only tree|prio: one case (default both)
#     --leaf-limit TIME: the tree case's pspxdp leaves get `limit TIME`
#       (e.g. 50ms; default: the class default); the folder is then
#       <date>-tree-vs-htb-fair-limit-TIME
#     --spin: pspxdp attaches with --spin (the daemon busy-polls while
#       backlogged, so it sees an arriving frame at once instead of
#       napping through a planned idle); the folder gets -spin
#     --results ROOT: where the results folder goes (default build/results;
#       docs/results to publish)
set -u
PHASE=4
PRIO_S=6
ONLY=
LIMIT=
SPIN=
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$HERE/../build/results
COMMAND="bench/run_tree_htb.sh $*"
while (($#)); do
    case $1 in
    --phase) PHASE=${2:?}; shift 2 ;;
    --only) ONLY=${2:?}; shift 2 ;;
    --leaf-limit) LIMIT=${2:?}; shift 2 ;;
    --spin) SPIN=--spin; shift ;;
    --results) ROOT=${2:?}; shift 2 ;;
    -h | --help) sed -n '2,37p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run_tree_htb: unknown argument \"$1\"" >&2; exit 2 ;;
    esac
done
[[ $PHASE =~ ^[0-9]+$ ]] && ((PHASE >= 3 && PHASE <= 30)) || { echo "run_tree_htb: --phase: whole seconds, 3..30" >&2; exit 2; }
[[ -z $ONLY || $ONLY == tree || $ONLY == prio ]] || { echo "run_tree_htb: --only: tree or prio, not \"$ONLY\"" >&2; exit 2; }
[[ -z $LIMIT || $LIMIT =~ ^[0-9]+(us|ms|s)$ ]] || { echo "run_tree_htb: --leaf-limit: a time such as 50ms, not \"$LIMIT\"" >&2; exit 2; }
source "$HERE/../lab/netns.sh"
psp_require run_tree_htb "$PSPXDP" "$TRAFFIC" -- ip tc tcpdump python3 nsenter timeout
LOAD_BEFORE=$(uptime)
# Debian's python3 (python3-matplotlib is installed for it, scripts/setup.sh), as lab/lab.sh.
PYTHON=${PYTHON:-/usr/bin/python3}
TREE=("$PYTHON" "$HERE/tree_htb.py")
NET=${BENCH_NET:-10.89.0}  # BENCH_NET: the first wire's /24; the second is .1 higher in the third byte
TAG=${BENCH_TAG:-tL}
psp_lab_begin "$TAG" "$NET"
# htb on a second namespace pair (psp_end deletes it with the first).
IFS=. read -r a b c <<<"$NET"
NET2=$a.$b.$((c + 1))
SRC2=psp-$TAG$$-hs DST2=psp-$TAG$$-hd DEV2=p$TAG$$c PEER2=p$TAG$$d
psp_make_wire "$SRC2" "$DST2" "$DEV2" "$PEER2" "$NET2" || exit 1
die() { echo "run_tree_htb: $*" >&2; exit 1; }

# shaper_on RUN CASE NS DEV: pspxdp (RUN pspxdp/byte or pspxdp/none) or htb (htb/none) with CASE's tree.
shaper_on() {
    local run=$1 case=$2 n="nsenter --net=/run/netns/$3" dev=$4 line clock=${1#*/} leaves
    case $run in
    pspxdp/*)
        local extra=() limit=()
        [[ $clock == byte ]] && extra=(--gap-horizon inf)
        [[ -n $SPIN ]] && extra+=(--spin)
        [[ $case == tree && -n $LIMIT ]] && limit=(--leaf-limit "$LIMIT")
        $n "$PSPXDP" attach "$dev" --line-rate 1gbit --clock "$clock" "${extra[@]}" >/dev/null || die "attach failed"
        while read -r line; do
            # shellcheck disable=SC2086 # one class's words
            $n "$PSPXDP" class set "$dev" $line >/dev/null || die "class set $line"
        done < <("${TREE[@]}" pspxdp-classes "$case" "${limit[@]}")
        "${TREE[@]}" pspxdp-filters "$case" | $n "$PSPXDP" filter add "$dev" --file - >/dev/null || die "filters refused"
        leaves=$("${TREE[@]}" leaves "$case")
        N=$n psp_wait_for 10 psp_status_is "$dev" "all(c(k)['state'] == 'served' for k in '$leaves'.split())" ||
            die "the leaves are not served"
        ;;
    htb/* | htbq/*)
        local quantum=()
        [[ $run == htbq/* ]] && quantum=(--quantum 1514)
        while read -r line; do
            # shellcheck disable=SC2086 # one tc command's words
            $n tc $line || die "tc $line"
        done < <("${TREE[@]}" tc "$case" "$dev" "${quantum[@]}")
        ;;
    esac
}

# shaper_off RUN NS DEV OUT: its counters into OUT.stats.json, then detach / delete.
shaper_off() {
    local n="nsenter --net=/run/netns/$2"
    case $1 in
    pspxdp/*) $n "$PSPXDP" stats "$3" -j >"$4.stats.json"; $n "$PSPXDP" detach "$3" >/dev/null ;;
    htb*) $n tc -s -j class show dev "$3" >"$4.stats.json"; $n tc qdisc del dev "$3" root ;;
    esac
}

# senders CASE NET SECONDS OUT NS [PORT]: one psp_traffic per leaf (only PORT's if given), waited for.
senders() {
    local case=$1 net=$2 secs=$3 out=$4 n="nsenter --net=/run/netns/$5" only=${6:-} port args pids=()
    while read -r port args; do
        [[ -z $only || $port == "$only" ]] || continue
        # shellcheck disable=SC2086 # the sender's arguments
        $n timeout $((secs + 10)) "$TRAFFIC" send $args --seconds "$secs" >"$out.send.$port.json" &
        pids+=($!)
        PIDS+=($!)
    done < <("${TREE[@]}" senders "$case" "$net" $((secs / 3)))
    wait "${pids[@]}"
}

# run_tree RUN SRC DST DEV PEER NET: the tree case on that wire; files $TMP/tree-RUN.*
run_tree() {
    local run=$1 src=$2 dst=$3 dev=$4 peer=$5 net=$6 out=$TMP/tree-${1/\//-} ip cap
    for ip in $("${TREE[@]}" dsts tree "$net"); do
        ip -n "$src" neigh replace "$ip" lladdr 02:00:00:00:bd:01 dev "$dev" nud permanent
    done
    shaper_on "$run" tree "$src" "$dev"
    echo "$net" >"$out.net" # the sites' addresses, for the analysis
    psp_capture "nsenter --net=/run/netns/$dst" "$peer" "$out" 16384 || exit 1
    cap=$PSP_CAPTURE_PID
    senders tree "$net" $((3 * PHASE)) "$out" "$src"
    sleep 1 # what the shaper still holds drains; then the capture stops
    kill -INT "$cap"
    wait "$cap" 2>/dev/null
    shaper_off "$run" "$src" "$dev" "$out"
    TREE_RUNS+=(--tree "$run=$out")
}

# run_prio RUN SRC DST DEV PEER NET: the priority case; files $TMP/prio-RUN.*. RUN: SHAPER/CLOCK,
# SHAPER/CLOCK/alone (no bulk flow) or bare/none (no shaper, no bulk).
run_prio() {
    local run=$1 src=$2 dst=$3 dev=$4 peer=$5 net=$6 out=$TMP/prio-${1//\//-} cap sink only= shaper=${1%/alone}
    local d="nsenter --net=/run/netns/$dst"
    [[ $run == bare/* || $run == */alone ]] && only=6001
    [[ $run == bare/* ]] || shaper_on "$shaper" prio "$src" "$dev"
    $d timeout $((PRIO_S + 15)) "$TRAFFIC" sink 6001,6002 --seconds $((PRIO_S + 10)) --stamped >"$out.sink.json" &
    sink=$!
    PIDS+=($sink)
    psp_wait_for 10 psp_listening "$dst" udp 6002 || die "no sink"
    psp_capture "$d" "$peer" "$out" 4096 udp || exit 1
    cap=$PSP_CAPTURE_PID
    senders prio "$net" "$PRIO_S" "$out" "$src" $only
    sleep 1
    kill -INT "$cap" "$sink"
    wait "$cap" "$sink" 2>/dev/null
    [[ $run == bare/* ]] || shaper_off "$shaper" "$src" "$dev" "$out"
    PRIO_RUNS+=(--prio "$run=$out")
}

TREE_RUNS=() PRIO_RUNS=()
if [[ $ONLY != prio ]]; then
    for run in pspxdp/byte pspxdp/none; do
        echo "tree: $run, 3 phases of $PHASE s" >&2
        run_tree $run "$SRC" "$DST" "$DEV" "$PEER" "$NET"
    done
    for run in htb/none htbq/none; do
        echo "tree: $run, the same" >&2
        run_tree $run "$SRC2" "$DST2" "$DEV2" "$PEER2" "$NET2"
    done
fi
if [[ $ONLY != tree ]]; then
    for run in bare/none pspxdp/byte/alone pspxdp/byte pspxdp/none/alone pspxdp/none; do
        echo "prio: $run, $PRIO_S s" >&2
        run_prio $run "$SRC" "$DST" "$DEV" "$PEER" "$NET"
    done
    for run in htb/none/alone htb/none; do
        echo "prio: $run" >&2
        run_prio $run "$SRC2" "$DST2" "$DEV2" "$PEER2" "$NET2"
    done
fi
LOAD_AFTER=$(uptime)
"${TREE[@]}" report --results "$ROOT" --phase "$PHASE" --prio-seconds "$PRIO_S" --command "$COMMAND" \
    --load-before "$LOAD_BEFORE" --load-after "$LOAD_AFTER" --pspxdp "$PSPXDP" ${LIMIT:+--leaf-limit "$LIMIT"} $SPIN \
    "${TREE_RUNS[@]}" "${PRIO_RUNS[@]}"
