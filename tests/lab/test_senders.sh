#!/usr/bin/env bash
# Classify by who sends (docs/design.md §1.3.1), with real sockets on a real
# attachment: a process placed in a cgroup the test makes in the cgroup2 fs
# sends UDP and TCP, and its traffic - and only its - lands in the cgroup's
# class (a child cgroup inherits); SO_PRIORITY 1:7 from a small sender lands
# in 1:7 before any filter; `pspxdp run --class 1:5 --rate R -- SENDER` puts
# every frame of SENDER through the pacer in 1:5 (accounting: TC's and the
# pacer's counters, no timing), passes the exit status through and leaves
# no cgroup, filter or class behind - also when it is killed -9 (the next
# run sweeps it; detach removes a run's cgroup too).
# Exit 77 = skipped.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../../lab/netns.sh"
psp_require test_senders "$PSPXDP" "$TRAFFIC" -- python3

CG=$(psp_cgroup2)
[[ -n $CG ]] || { echo "test_senders: no cgroup2 mount (cgroup v1 only)" >&2; exit 77; }
NET=$(psp_random_net)
psp_lab_begin sn $NET
TOP=/pspxdp-labtest-$$
cleanup_cgroups() {
    local d
    # Whatever is still in the test's cgroups goes back to the root first.
    for d in $(find "$CG$TOP" -depth -type d 2>/dev/null); do
        while read -r p; do echo "$p" >"$CG/cgroup.procs" 2>/dev/null; done <"$d/cgroup.procs"
        rmdir "$d" 2>/dev/null
    done
}
trap 'cleanup_cgroups; psp_end' EXIT
mkdir -p "$CG$TOP/svc/child" "$CG$TOP/other"
P() { $N "$PSPXDP" "$@"; }
quiet() { "$@" >/dev/null; } # a sender's JSON report is not needed here

# in_cgroup REL CMD...: CMD in SRC's network namespace and the cgroup REL.
in_cgroup() {
    local rel=$1
    shift
    bash -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$CG$rel" $N "$@"
}
# Senders: UDP datagrams (with an SO_PRIORITY) from udp.py; TCP bytes, and
# the sink they go to, from lab/psplab/cluster_traffic.py (exit 1 when the
# sink did not take every byte).
UDP=(python3 "$HERE/udp.py")
TCP=(env PYTHONPATH="$PSP_ROOT/lab" python3 -m psplab.cluster_traffic)

psp_check "attach" P attach $DEV --line-rate 1gbit
psp_check "classes 1:1 (cgroup) 100mbit, 1:2 (child tcp) 100mbit, 1:7 (priority) 50mbit" \
    bash -c "$N $PSPXDP class add $DEV 1:1 100mbit && $N $PSPXDP class add $DEV 1:2 100mbit &&
             $N $PSPXDP class add $DEV 1:7 50mbit"
psp_check "filter: cgroup $TOP/svc -> 1:1" P filter add $DEV cgroup $TOP/svc classid 1:1
psp_check "filter: cgroup $TOP/svc/child proto tcp dport 873 -> 1:2 (pref 5)" \
    P filter add $DEV pref 5 cgroup $CG$TOP/svc/child proto tcp dport 873 classid 1:2
psp_wait_for 10 psp_status_is $DEV 'c("1:1")["state"] == "served" and c("1:ffff")["state"] == "served"'
# filter_stat PREF: matched_packets of the filter of pref PREF.
filter_stat() {
    P filter show $DEV -s -j | python3 -c "import json,sys; print(next(f['matched_packets'] for f in json.load(sys.stdin) if f['pref'] == $1))"
}
tcp_sink() { # PORT: a TCP sink in DST, returns once it listens
    $D "${TCP[@]}" sink --port "$1" --seconds 120 --out "$TMP/sink.$1.json" >/dev/null &
    PIDS+=($!)
    psp_wait_for 5 psp_listening $DST tcp "$1"
}
gt() { (($1 > $2)); }
tc_of() { psp_status_is $DEV "c('$1')['tc_packets'] + c('$1')['tc_passed'] == $2"; }
classified() { # CLASS: tc_packets + tc_passed
    P status $DEV -j | python3 -c "import json,sys; d=json.load(sys.stdin); c=next(x for x in d['classes'] if x['class']=='$1'); print(c['tc_packets']+c['tc_passed'])"
}

# ---- a process in the cgroup: UDP
D0=$(classified 1:ffff)
psp_check "a UDP sender in $TOP/svc sent 300 datagrams" quiet in_cgroup $TOP/svc "$TRAFFIC" send $NET.2 5001 --rate 10mbit --size 200 --count 300
psp_check "its 300 datagrams went to 1:1 (TC), counted by the cgroup filter" \
    psp_wait_for 10 tc_of 1:1 300
psp_check "cgroup filter matched 300" test "$(filter_stat 49152)" = 300
psp_check "the same sender outside the cgroup: 200 datagrams" quiet in_cgroup $TOP/other "$TRAFFIC" send $NET.2 5001 --rate 10mbit --size 200 --count 200
psp_check "... to the default class, none to 1:1" \
    psp_wait_for 10 tc_of 1:ffff $((D0 + 200))
psp_check "1:1 still at 300" tc_of 1:1 300
# ---- TCP, and a child cgroup inherits
tcp_sink 5002
C1=$(classified 1:1)
psp_check "a TCP sender in $TOP/svc/child sent 200000 bytes to port 5002" in_cgroup $TOP/svc/child "${TCP[@]}" send --to $NET.2 --port 5002 --bytes 200000 --out "$TMP/sent.json"
psp_check "the child's TCP packets went to 1:1 (the parent's filter)" gt "$(classified 1:1)" $((C1 + 10))
psp_check "the child's tcp dport 873 filter did not match port 5002" test "$(filter_stat 5)" = 0
D1=$(classified 1:ffff)
C1=$(classified 1:1)
psp_check "a TCP sender outside the cgroup sent 200000 bytes" in_cgroup $TOP/other "${TCP[@]}" send --to $NET.2 --port 5002 --bytes 200000 --out "$TMP/sent.json"
psp_check "... to the default class" gt "$(classified 1:ffff)" $((D1 + 10))
psp_check "... none to 1:1" test "$(classified 1:1)" = "$C1"
tcp_sink 873
psp_check "a TCP sender in the child to port 873" in_cgroup $TOP/svc/child "${TCP[@]}" send --to $NET.2 --port 873 --bytes 100000 --out "$TMP/sent.json"
psp_check "... matched the child's own filter (pref 5 beats the parent's)" gt "$(filter_stat 5)" 10

# ---- SO_PRIORITY 1:7: before the filters
psp_check "a sender in $TOP/svc with SO_PRIORITY 0x10007: 150 datagrams" in_cgroup $TOP/svc "${UDP[@]}" send $NET.2 5003 150 200 0 0x10007
psp_check "its 150 datagrams went to 1:7, not to the cgroup's 1:1" psp_wait_for 10 tc_of 1:7 150
psp_check "prio_direct counted 150" psp_status_is $DEV "d['tc']['prio_direct'] == 150"
psp_check "change prio-direct off" P change $DEV prio-direct off
C1=$(classified 1:1)
psp_check "prio-direct off: the same sender, 40 datagrams" in_cgroup $TOP/svc "${UDP[@]}" send $NET.2 5003 40 200 0 0x10007
psp_check "... go to 1:1 (its cgroup)" psp_wait_for 10 tc_of 1:1 $((C1 + 40))
psp_check "change prio-direct on" P change $DEV prio-direct on

# ---- pspxdp run
runs_left() { # what runs of DEV left: cgroups, filters, records
    ls "$CG/pspxdp/$DEV" 2>/dev/null
    ls /run/pspxdp/$DEV.runs 2>/dev/null
    P filter show $DEV | grep -F "/pspxdp/$DEV/" || true
}
psp_check "pspxdp run --class 1:5 --rate 20mbit -- (300 datagrams): exit 0" \
    quiet P run $DEV --class 1:5 --rate 20mbit -- "$TRAFFIC" send $NET.2 5004 --rate 100mbit --size 1000 --count 300
nothing_left() { [[ -z $(runs_left) ]]; }
psp_check "after it: no cgroup, filter or record left" nothing_left
psp_check "... and class 1:5 is gone (the run created it)" bash -c "! $N $PSPXDP save $DEV | grep -q '^class 1:5 '"
# The same with an existing class, to read its counters after: every frame paced in 1:5.
psp_check "class 1:5 20mbit limit 1mb flows off (no frame dropped)" P class add $DEV 1:5 20mbit limit 1mb flows off
psp_check "pspxdp run --class 1:5 -- (300 datagrams at 100mbit offered)" \
    quiet P run $DEV --class 1:5 -- "$TRAFFIC" send $NET.2 5004 --rate 100mbit --size 1000 --count 300
psp_check "TC handed all 300 to the pacer in 1:5" psp_wait_for 10 psp_status_is $DEV "c('1:5')['tc_packets'] == 300"
psp_check "the pacer sent all 300 in 1:5 at its rate (tx_frames 300, no drop)" \
    psp_wait_for 20 psp_status_is $DEV "c('1:5')['tx_frames'] == 300 and sum(v for k, v in c('1:5').items() if k.startswith('drop_')) == 0"
psp_check "nothing of the run left" nothing_left
P run $DEV --class 1:5 -- sh -c 'exit 7'
psp_check "the exit status passes through (7)" test $? -eq 7
P run $DEV --class 1:5 -- /nonexistent/cmd 2>/dev/null
psp_check "a command that does not exist: 127" test $? -eq 127

# ---- kill -9 of pspxdp run: the next run sweeps, detach removes
$N "$PSPXDP" run $DEV --class 1:5 -- sleep 60 &
RUN=$!
PIDS+=($RUN)
psp_check "a run (sleep 60) has its cgroup and filter" \
    psp_wait_for 10 bash -c "[[ -n \$(cat $CG/pspxdp/$DEV/run-$RUN-*/cgroup.procs 2>/dev/null) ]]"
SLEEPER=$(cat $CG/pspxdp/$DEV/run-$RUN-*/cgroup.procs)
PIDS+=($SLEEPER)
kill -9 $RUN
wait $RUN 2>/dev/null # its "Killed" note
psp_wait_for 5 psp_gone $RUN
psp_check "after kill -9 its cgroup and filter are still there (stale)" \
    bash -c "ls -d $CG/pspxdp/$DEV/run-$RUN-* >/dev/null && $N $PSPXDP filter show $DEV | grep -q run-$RUN-"
psp_check "the next run sweeps it" P run $DEV --class 1:5 -- true
psp_check "nothing of either run left" nothing_left
psp_check "its command went back to the cgroup pspxdp run was in" \
    bash -c "[[ \$(sed -n 's/^0:://p' /proc/$SLEEPER/cgroup) == \$(sed -n 's/^0:://p' /proc/$$/cgroup) ]]"
kill $SLEEPER 2>/dev/null
$N "$PSPXDP" run $DEV --class 1:5 -- sleep 60 &
RUN=$!
PIDS+=($RUN)
psp_wait_for 10 bash -c "[[ -n \$(cat $CG/pspxdp/$DEV/run-$RUN-*/cgroup.procs 2>/dev/null) ]]"
SLEEPER=$(cat $CG/pspxdp/$DEV/run-$RUN-*/cgroup.procs 2>/dev/null)
PIDS+=($SLEEPER)
kill -9 $RUN
wait $RUN 2>/dev/null # its "Killed" note
psp_wait_for 5 psp_gone $RUN
psp_check "detach" P detach $DEV
psp_check "detach removed the killed run's cgroup, record and pspxdp's cgroup subtree" \
    bash -c "[[ ! -e $CG/pspxdp/$DEV && ! -e /run/pspxdp/$DEV.runs ]]"
kill $SLEEPER 2>/dev/null
psp_check "run on a device not attached: refused" bash -c "$N $PSPXDP run $DEV --class 1:5 -- true 2>&1 | grep -q 'not attached'"
psp_finish
