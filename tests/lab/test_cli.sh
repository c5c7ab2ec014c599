#!/usr/bin/env bash
# The control surface against a real attachment in two throwaway network
# namespaces: a table of bad inputs (each refused with its message and exit
# code 2, the configuration byte for byte unchanged), the JSON keys against
# stats --keys, bpftool's field names against design §1.8's map table, save and
# apply (round trip, atomic, 10,000 classes and filters), two commands at
# once, read-only use by an unprivileged user, a class change racing a detach.
# Exit 77 = skipped.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../../lab/netns.sh"
DESIGN=$HERE/../../docs/design.md
psp_require test_cli "$PSPXDP" "$TRAFFIC" -- python3 bpftool setpriv

NET=$(psp_random_net)
psp_lab_begin cli $NET
PINS=/sys/fs/bpf/pspxdp/$DEV
ROOT_MODE=
# The read-only part opens the pin root to others: closed again whatever happens.
trap '[[ -n $ROOT_MODE ]] && chmod "$ROOT_MODE" /sys/fs/bpf/pspxdp 2>/dev/null; psp_end' EXIT
P() { $N "$PSPXDP" "$@"; }
CLI() { python3 "$HERE/cli_checks.py" "$@"; }
psp_check "attach" P attach $DEV --line-rate 1gbit
psp_check "class add 1:1 300mbit limit 64kb ce_threshold 2ms" P class add $DEV 1:1 300mbit limit 64kb ce_threshold 2ms
psp_check "class add 1:2 normal" P class add $DEV 1:2 normal
psp_check "class set 1:3 10mbit limit 5ms" P class set $DEV 1:3 10mbit limit 5ms
psp_check "filter udp dport 5001 -> 1:1" P filter add $DEV proto udp dport 5001 classid 1:1
psp_check "filters on every rules map" bash -c "$N $PSPXDP filter add $DEV dst 10.9.9.0/24 classid 1:3 &&
    $N $PSPXDP filter add $DEV src 10.8.0.0/16 classid 1:3 &&
    $N $PSPXDP filter add $DEV dst 2001:db8::/32 classid 1:3 &&
    $N $PSPXDP filter add $DEV src 2001:db9::/32 classid 1:3"
SENT=$($N "$TRAFFIC" send $NET.2 5001 --rate 10mbit --size 1000 --count 50 |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["sent"])')
psp_check "TC counted the $SENT datagrams sent on 1:1" \
    psp_wait_for 10 psp_status_is $DEV "c('1:1')['tc_packets'] == ${SENT:-0}"

# ---- save / apply
psp_check "save" eval 'P save $DEV >"$TMP/saved"'
psp_check "save lists line rate, classes, default, filters" bash -c "
    grep -qx 'line-rate 1Gbit' $TMP/saved && grep -qx 'class 1:1 300Mbit limit 64kb ce_threshold 2ms' $TMP/saved &&
    grep -qx 'class 1:3 10Mbit limit 5ms' $TMP/saved && grep -qx 'default 1:ffff' $TMP/saved &&
    grep -qx 'filter pref 49152 proto udp dport 5001 classid 1:1' $TMP/saved"
gen() { P show $DEV -j | python3 -c 'import json,sys; print(json.load(sys.stdin)["config_gen"])'; }
GEN=$(gen)
psp_check "apply(save()) is a no-op" bash -c "$N $PSPXDP apply $DEV $TMP/saved | grep -q 'nothing to change'"
psp_check "... and writes nothing (config_gen $GEN unchanged)" test "$(gen)" = "$GEN"
P save $DEV >"$TMP/saved2"
psp_check "save after apply is byte for byte the same" cmp -s "$TMP/saved" "$TMP/saved2"

# ---- bad inputs: exit code, one line on stderr naming the word, nothing changed
cat >"$TMP/bad_rate.conf" <<EOF
line-rate 1gbit
class 1:1 300mbit
class 1:2 5xbit
class 1:ffff normal
EOF
printf 'class 1:ffff normal\nfrobnicate 1\n' >"$TMP/bad_word.conf"
printf 'class 1:1 600mbit\nclass 1:2 600mbit\nclass 1:ffff normal\n' >"$TMP/bad_sum.conf"
printf 'class 1:1 normal\n' >"$TMP/bad_default.conf"
printf 'class 1:ffff normal\nfilter dst 10.0.0.0/8 classid 1:7\n' >"$TMP/bad_filter.conf"
printf 'class 1:ffff normal\nclass 1:ffff normal\n' >"$TMP/bad_dup.conf"
printf 'line-rate 100mbit\nclass 1:1 300mbit\nclass 1:ffff normal\n' >"$TMP/bad_line.conf"
# exit | message (a fixed string stderr must contain) | arguments (@DEV@, @TMP@)
# refused WANT MSG ARGS...: pspxdp ARGS exits WANT with one stderr line
# containing MSG, and the configuration is byte for byte as saved.
refused() {
    local want=$1 msg=$2 rc lines
    shift 2
    $N "$PSPXDP" "$@" >"$TMP/out" 2>"$TMP/err"
    rc=$?
    lines=$(wc -l <"$TMP/err")
    P save $DEV >"$TMP/after" 2>/dev/null
    [[ $rc -eq $want ]] && [[ $lines -eq 1 ]] && grep -qF -- "$msg" "$TMP/err" && cmp -s "$TMP/saved" "$TMP/after" &&
        return 0
    echo "     exit $rc (want $want), $lines stderr line(s): $(cat "$TMP/err")"
    cmp -s "$TMP/saved" "$TMP/after" || { echo "     configuration changed:"; diff "$TMP/saved" "$TMP/after"; }
    return 1
}
while IFS='|' read -r want msg args; do
    [[ -z $want || $want == \#* ]] && continue
    args=${args//@DEV@/$DEV}
    args=${args//@TMP@/$TMP}
    eval "set -- $args"
    psp_check "refused: $args" refused "$want" "$msg" "$@"
done <<'TABLE'
2|option --watch: time "abc": not a number|stats @DEV@ --watch abc
2|option --interval: time "5x": unknown unit "x"|stats @DEV@ --interval 5x
2|option --count: "-1" is not a whole number|stats @DEV@ --watch 1 --count -1
2|option --watch: "0" is out of range 100ms..3600s|stats @DEV@ --watch 0
2|unknown option --bogus|stats @DEV@ --bogus
2|unknown option -x|show @DEV@ -x
2|option --json takes no value|show @DEV@ --json=1
2|unexpected argument "extra"|show @DEV@ extra
2|class 1:4: rate "5xbit": unknown unit "xbit"|class add @DEV@ 1:4 5xbit
2|class 1:4: missing RATE or "normal"|class add @DEV@ 1:4
2|class id "1:0": minor 0 names a qdisc, not a class|class add @DEV@ 1:0 10mbit
2|class id "1": no ':'|class add @DEV@ 1 10mbit
2|class id "10000:1": major is not a 16-bit hex number|class add @DEV@ 10000:1 10mbit
2|class 1:4: rate "0mbit": zero rate|class add @DEV@ 1:4 0mbit
2|class 1:4: rate "-5mbit": negative rate|class add @DEV@ 1:4 -5mbit
2|rate "990mbit" is above what one class can reach on|class add @DEV@ 1:4 990mbit
2|class 1:4: rate "800mbit": paced rates would sum to 1110Mbit, above the line rate 1Gbit|class add @DEV@ 1:4 800mbit
2|class 1:1: rate "1000mbit" is above what one class can reach|class change @DEV@ 1:1 1000mbit
2|class 1:1 already exists on|class add @DEV@ 1:1 100mbit
2|class 1:9 does not exist on|class change @DEV@ 1:9 100mbit
2|class 1:9 does not exist on|class del @DEV@ 1:9
2|class 1:ffff is the default class of|class del @DEV@ 1:ffff
2|class 1:1 is used by 1 filter ("pref 49152 proto udp dport 5001 classid 1:1")|class del @DEV@ 1:1
2|class 1:4: limit "5x": size "5x": unknown unit "x"|class add @DEV@ 1:4 10mbit limit 5x
2|class 1:4: limit "100": out of range 1518b..1gb|class add @DEV@ 1:4 10mbit limit 100
2|class 1:4: limit "2gb": out of range|class add @DEV@ 1:4 10mbit limit 2gb
2|class 1:4: limit "10ms": a time limit needs a paced class|class add @DEV@ 1:4 normal limit 10ms
2|class 1:4: ce_threshold "0": out of range 1us..10s|class add @DEV@ 1:4 10mbit ce_threshold 0
2|class 1:4: ce_threshold "1ms": needs a paced class|class add @DEV@ 1:4 normal ce_threshold 1ms
2|class 1:4: ce_threshold "abc": time "abc": not a number|class add @DEV@ 1:4 10mbit ce_threshold abc
2|class 1:4: burst 1000b is below one largest frame (1518 bytes at MTU 1500 of|class add @DEV@ 1:4 10mbit burst 1000
2|class 1:4: burst "2.5mtu": not a whole number of largest frames|class add @DEV@ 1:4 10mbit burst 2.5mtu
2|class 1:4: burst "3mtu": needs a paced class|class add @DEV@ 1:4 normal burst 3mtu
2|class 1:4: unknown word "bucket"|class add @DEV@ 1:4 10mbit bucket 10kb
2|class 1:4: "limit" needs a value|class add @DEV@ 1:4 10mbit limit
2|class 1:4: limit given twice ("32kb")|class add @DEV@ 1:4 10mbit limit 64kb limit 32kb
2|class: unknown action "frob"|class frob @DEV@ 1:1
2|nosuch0 is not attached|class add nosuch0 1:4 10mbit
2|device name "bad/name": contains '/'|class add bad/name 1:4 10mbit
2|device name "averyveryverylongname": longer than 15 bytes|class add averyveryverylongname 1:4 10mbit
2|class 1:9 does not exist on|default @DEV@ 1:9
2|class id "1:0": minor 0 names a qdisc|default @DEV@ 1:0
2|line-rate 305Mbit refused: class 1:3: rate "10Mbit": paced rates would sum to 310Mbit, above the line rate 305Mbit|change @DEV@ line-rate 305mbit
2|line-rate 300Mbit refused: class 1:1: rate "300Mbit" is above what one class can reach on|change @DEV@ line-rate 300mbit
2|change: line-rate: rate "abc": not a number|change @DEV@ line-rate abc
2|change: unknown parameter "mtu" (line-rate, prio-direct)|change @DEV@ mtu 1500
2|/nonexistent.conf: No such file or directory|apply @DEV@ /nonexistent.conf
2|bad_rate.conf: line 3: class 1:2: rate "5xbit": unknown unit "xbit"|apply @DEV@ @TMP@/bad_rate.conf
2|bad_word.conf: line 2: unknown statement "frobnicate"|apply @DEV@ @TMP@/bad_word.conf
2|line 2: class 1:2: rate "600mbit": paced rates would sum to 1200Mbit|apply @DEV@ @TMP@/bad_sum.conf
2|default class 1:ffff is not among the classes|apply @DEV@ @TMP@/bad_default.conf
2|line 2: filter "pref 49152 dst 10.0.0.0/8 classid 1:7": class 1:7 is not among the classes|apply @DEV@ @TMP@/bad_filter.conf
2|line 2: class 1:ffff given twice (first on line 1)|apply @DEV@ @TMP@/bad_dup.conf
2|class 1:1: rate "300mbit" is above what one class can reach on|apply @DEV@ @TMP@/bad_line.conf
2|classid 1:7: no such class|filter add @DEV@ proto udp dport 5002 classid 1:7
2|duplicate of "pref 49152 proto udp dport 5001 classid 1:1"|filter add @DEV@ proto udp dport 5001 classid 1:2
2|nosuch0 is not attached|show nosuch0
2|nosuch0 is not attached|save nosuch0
2|option --window: "1kb" is out of range 1514b..64mb|daemon @DEV@ --window 1kb
2|option --sleep-min: time "5x": unknown unit "x"|daemon @DEV@ --sleep-min 5x
2|option --cpu: "9999" is out of range 0..4095|daemon @DEV@ --cpu 9999
TABLE

# status -j: valid JSON for any device name, attached or not.
for name in "$DEV" nosuch0 'we"ird\name' 'a/b' "$(printf 'x\377y')"; do
    $N "$PSPXDP" status "$name" -j >"$TMP/status" 2>/dev/null
    psp_check "status -j prints one JSON object for \"$name\"" \
        CLI status-object "$TMP/status"
done

# DEV may be left out when exactly one device is attached (others' tests
# may have attached theirs meanwhile: then this check is skipped).
if [[ $(ls /sys/fs/bpf/pspxdp 2>/dev/null | wc -l) -eq 1 ]]; then
    psp_check "DEV left out: the only attached device" bash -c "$N $PSPXDP show | grep -q '^dev $DEV '"
else
    psp_check "DEV left out with several attached: refused, naming them" bash -c "
        $N $PSPXDP show 2>&1 >/dev/null | grep -q 'several devices attached (.*$DEV'"
fi

# ---- JSON keys: exactly the documented ones (pspxdp stats --keys)
"$PSPXDP" stats --keys >"$TMP/keys"
P stats $DEV -j --interval 100ms >"$TMP/stats.json"
P status $DEV -j >"$TMP/status.json"
psp_check "stats -j / status -j keys are exactly the documented ones, raw numbers" \
    CLI keys "$TMP/keys" "$TMP/stats.json" "$TMP/status.json" "$SENT"
psp_check "text and JSON name a counter alike" bash -c "$N $PSPXDP stats $DEV -d --interval 0 | grep -q ' tc_packets $SENT '"

# ---- bpftool: every pinned map shows named fields, design §1.8's
psp_check "bpftool dumps every pinned map with design §1.8's field names" CLI maps "$PINS" "$DESIGN"

# ---- atomic apply: one bad line at the end changes nothing
{ cat "$TMP/saved"; echo "class 1:5 20mbit"; echo "class 1:6 bogus"; } >"$TMP/late_bad.conf"
$N "$PSPXDP" apply $DEV "$TMP/late_bad.conf" 2>/dev/null
P save $DEV >"$TMP/after"
psp_check "a file with one bad line changes nothing" cmp -s "$TMP/saved" "$TMP/after"

# ---- a real change through apply, and back
sed -e 's/^class 1:3 10Mbit limit 5ms$/class 1:3 20Mbit/' -e '$a class 1:7 5mbit' "$TMP/saved" >"$TMP/changed.conf"
psp_check "apply a changed file" bash -c "$N $PSPXDP apply $DEV $TMP/changed.conf | grep -q '1 class added, 1 class changed'"
psp_check "the device has it" bash -c "$N $PSPXDP save $DEV | grep -qx 'class 1:3 20Mbit' && $N $PSPXDP save $DEV | grep -qx 'class 1:7 5Mbit'"
psp_check "apply the saved file back" bash -c "$N $PSPXDP apply -q $DEV $TMP/saved"
P save $DEV >"$TMP/after"
psp_check "back to byte for byte the same" cmp -s "$TMP/saved" "$TMP/after"

# ---- 10,000 classes and 10,000 filters in one apply
CLI big-conf "$TMP/big.conf"
# How long it takes is this machine's (printed); what is asserted is the
# work: all of it there, written as one change (config_gen bumped once).
GEN=$(gen)
t0=$(date +%s%N)
$N "$PSPXDP" apply -q $DEV "$TMP/big.conf"
rc=$?
t1=$(date +%s%N)
echo "     10,000 classes + 10,000 filters applied in $(((t1 - t0) / 1000000)) ms"
psp_check "10k classes and 10k filters apply" test $rc -eq 0
psp_check "... as one change (config_gen $GEN -> $((GEN + 1)))" test "$(gen)" = $((GEN + 1))
psp_check "... all there" bash -c "[ \$($N $PSPXDP save $DEV | grep -c '^class\|^filter') -eq 20001 ]"
psp_check "apply back to the small configuration" bash -c "$N $PSPXDP apply -q $DEV $TMP/saved"
P save $DEV >"$TMP/after"
psp_check "... byte for byte" cmp -s "$TMP/saved" "$TMP/after"

# ---- two commands at once: 20 adds of 100mbit with 690 Mbit/s left -> 6 fit
for i in $(seq 20 39); do ($N "$PSPXDP" class add $DEV 1:$i 100mbit 2>/dev/null; echo $?) & done >"$TMP/par"
wait
psp_check "20 concurrent class adds: exactly 6 fit the line rate" \
    bash -c "[ \$(grep -cx 0 $TMP/par) -eq 6 ] && [ \$(grep -cx 2 $TMP/par) -eq 14 ]"
psp_check "paced sum is within the line rate" bash -c "
    $N $PSPXDP show $DEV -j | python3 $HERE/cli_checks.py paced-within"
$N "$PSPXDP" apply -q $DEV "$TMP/saved"

# ---- the framing ceiling follows DEV's MTU: 986.5 Mbit/s is above what one
# class reaches on 1 Gbit/s at MTU 1400 (1418/1438: 986.092), below it at
# 1500 (1518/1538: 986.996, where the sum with the other classes refuses it)
$N ip link set $DEV mtu 1400
psp_check "MTU 1400: a class above 1418/1438 of the line is refused" bash -c "
    $N $PSPXDP class add $DEV 1:4 986500kbit 2>&1 | grep -qF '(1418/1438 of it, 1414-byte frames at MTU 1400)'"
$N ip link set $DEV mtu 1500
psp_check "MTU 1500: the same rate is within the ceiling (the sum refuses it)" bash -c "
    $N $PSPXDP class add $DEV 1:4 986500kbit 2>&1 | grep -qF 'paced rates would sum to'"

# ---- read-only: an unprivileged user who may read the pins
ROOT_MODE=$(stat -c %a /sys/fs/bpf/pspxdp)
chmod o+x /sys/fs/bpf/pspxdp
chgrp -R nogroup "$PINS" && chmod g+rx "$PINS" && chmod g+r "$PINS"/*
cp "$PSPXDP" "$TMP/pspxdp" && chmod 755 "$TMP" "$TMP/pspxdp"
RO="setpriv --reuid=65534 --regid=65534 --clear-groups"
psp_check "show works for a user who may read the pins" bash -c "$N $RO $TMP/pspxdp show $DEV | grep -q '^class 1:1 paced'"
psp_check "stats -j works for them" bash -c "$N $RO $TMP/pspxdp stats $DEV -j --interval 0 | python3 -m json.tool >/dev/null"
# Theirs is a copy of pacer_stats' slots in use (a read-only fd cannot be
# mapped): the same counters as root's view of the map itself.
TX=$(P status $DEV -j | python3 "$PSP_ROOT/lab/status_is.py" --print 'c("1:1")["tx_frames"]')
psp_check "... with the pacer's counters of 1:1 (served, tx_frames $TX)" bash -c "$N $RO $TMP/pspxdp stats $DEV -j \
    --interval 0 | python3 $PSP_ROOT/lab/status_is.py 'c(\"1:1\")[\"state\"] == \"served\" and c(\"1:1\")[\"tx_frames\"] == ${TX:-0} > 0'"
psp_check "save works for them" bash -c "$N $RO $TMP/pspxdp save $DEV | cmp -s - $TMP/saved"
psp_check "a change is refused for them" bash -c "! $N $RO $TMP/pspxdp class add $DEV 1:9 1mbit 2>/dev/null"
chmod "$ROOT_MODE" /sys/fs/bpf/pspxdp
ROOT_MODE=
psp_check "pins are not writable by others" bash -c "[ -z \"\$(find $PINS -perm /o+w)\" ]"

# ---- a class change racing a detach: each either lands or is refused cleanly
(for i in $(seq 1 40); do
    $N "$PSPXDP" class set $DEV 1:3 $((i + 1))mbit 2>>"$TMP/race_err"
    echo $?
done) >"$TMP/race" &
RACE=$!
PIDS+=($RACE)
# The detach goes in once the first class set has landed: the race is
# between the later ones and the detach.
psp_check "racing class set: the first one lands" psp_wait_for 10 grep -qx 0 "$TMP/race"
P detach $DEV >/dev/null
wait $RACE
psp_check "racing class set: only 0 (before the detach) or 2 (after)" bash -c "! grep -qvx '[02]' $TMP/race"
psp_check "racing class set: refusals say not attached" bash -c "! grep -v 'not attached' $TMP/race_err | grep -q ."
psp_check "nothing left after the detach" bash -c "[ ! -e $PINS ] && ! ls /run/pspxdp/$DEV.* 2>/dev/null | grep -q ."

psp_finish
