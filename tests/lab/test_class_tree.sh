#!/usr/bin/env bash
# Class trees (docs/design.md §3.12) through the CLI and the daemon: tc's
# words build a two-level tree; show -j prints parent, ceil and prio; the
# daemon serves every class and refuses nothing (config_refused 0); each
# refusal is one line, exit 2, and leaves the configuration byte for byte
# as it was; save | apply round-trips the tree; a live change of the inner
# class's rate is taken by the daemon; a borrowing leaf's borrowed bytes
# equal its lender's lent bytes (stats -j, the exporter). Exit 77 = skipped.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../../lab/netns.sh"
psp_require test_class_tree "$PSPXDP" "$TRAFFIC" -- python3

NET=$(psp_random_net)
psp_lab_begin tr $NET
P() { $N "$PSPXDP" "$@"; }

psp_check "attach" P attach $DEV --line-rate 1gbit || { psp_finish; exit 1; }
psp_check "class add 1:1 rate 900mbit ceil 1gbit" P class add $DEV 1:1 rate 900mbit ceil 1gbit
psp_check "class add 1:10 parent 1:1 rate 300mbit ceil 1gbit prio 0" \
    P class add $DEV 1:10 parent 1:1 rate 300mbit ceil 1gbit prio 0
psp_check "class add 1:20 parent 1:1 rate 100mbit ceil 600mbit prio 1 limit 10ms flows on" \
    P class add $DEV 1:20 parent 1:1 rate 100mbit ceil 600mbit prio 1 limit 10ms flows on
psp_check "class add 1:30 parent 1:1 rate 50mbit" P class add $DEV 1:30 parent 1:1 rate 50mbit
psp_check "show -j: parent, ceil, prio" psp_wait_for 10 psp_status_is $DEV \
    'c("1:10")["parent"] == "1:1" and c("1:10")["ceil_bps"] == 1000000000 and c("1:20")["prio"] == 1 and c("1:30")["ceil_bps"] == 50000000 and c("1:1")["parent"] == ""'
psp_check "the daemon serves all four" psp_wait_for 10 psp_status_is $DEV \
    'all(c(k)["state"] == "served" for k in ("1:1", "1:10", "1:20", "1:30"))'
psp_check "... and refused nothing" psp_status_is $DEV 'd["daemon"]["config_refused"] == 0'

P save $DEV >"$TMP/before"
P stats $DEV --format prometheus >"$TMP/metrics"
psp_check "exporter: a child carries its parent label, a top-level class none" bash -c "
    grep -q '^pspxdp_class_tx_bytes_total{dev=\"$DEV\",class=\"1:20\",parent=\"1:1\"} ' '$TMP/metrics' &&
    grep -q '^pspxdp_class_tx_bytes_total{dev=\"$DEV\",class=\"1:1\"} ' '$TMP/metrics'"
psp_check "exporter: 1:20's ceil, 600 Mbit/s in bytes" \
    grep -q '^pspxdp_class_ceil_bytes_per_second{dev="'"$DEV"'",class="1:20",parent="1:1"} 75000000$' "$TMP/metrics"
psp_check "save prints the tree" grep -q '^class 1:20 parent 1:1 100Mbit ceil 600Mbit prio 1' "$TMP/before"
refused() { # WHAT EXPECTED_TEXT CMD...
    local what=$1 want=$2
    shift 2
    local out rc
    out=$("$@" 2>&1)
    rc=$?
    P save $DEV >"$TMP/after"
    [[ $rc == 2 && $(wc -l <<<"$out") == 1 && $out == *"$want"* ]] && cmp -s "$TMP/before" "$TMP/after" ||
        { echo "     $what: rc $rc: $out"; return 1; }
}
psp_check "refused: unknown parent" refused parent "parent 1:9 does not exist" \
    P class add $DEV 1:40 parent 1:9 rate 1mbit
psp_check "refused: children's rates above the parent's" refused sum "children's rates sum to" \
    P class add $DEV 1:40 parent 1:1 rate 500mbit
psp_check "refused: a parent's ceil below a child's" refused ceil "above its parent 1:1's ceil" \
    P class change $DEV 1:1 rate 900mbit ceil 900mbit
psp_check "refused: ceil below rate" refused below "is below its rate" \
    P class add $DEV 1:40 parent 1:1 rate 50mbit ceil 10mbit
psp_check "refused: a cycle" refused cycle "form a cycle" \
    P class change $DEV 1:1 parent 1:10 rate 900mbit ceil 1gbit
psp_check "refused: deleting a class with children" refused del "has 3 children (1:10, 1:20, 1:30)" \
    P class del $DEV 1:1
psp_check "refused: a filter to a class with children" refused filter "has children" \
    P filter add $DEV proto udp dport 5001 classid 1:1
psp_check "refused: normal under a parent" refused normal "normal class cannot have a parent" \
    P class add $DEV 1:40 parent 1:1 normal

psp_check "filter to a leaf" P filter add $DEV proto udp dport 5001 classid 1:10
P save $DEV >"$TMP/saved"
psp_check "apply of the saved tree: nothing to change" P apply $DEV "$TMP/saved"
P save $DEV >"$TMP/again"
psp_check "... save again is the same" cmp -s "$TMP/saved" "$TMP/again"

psp_check "live change of the inner class's rate" P class change $DEV 1:1 rate 600mbit ceil 1gbit
psp_check "... the daemon takes it, refusing nothing" psp_wait_for 10 psp_status_is $DEV \
    'c("1:1")["rate_bps"] == 600000000 and d["daemon"]["config_refused"] == 0 and d["pacer_alive"]'
# Borrowing, counted: 1:40 (rate 1 Mbit/s, ceil 20) gets 100 frames of
# 1000 B at 8 Mbit/s, so most of them go beyond its rate on what its parent
# 1:1 has spare (1:1 is far below its own rate: it is the lender). The
# engine counts each borrowed frame once at the borrower and once at the
# lender, so the two counters are equal when the backlog is sent.
psp_check "a borrowing leaf 1:40 (rate 1mbit ceil 20mbit)" \
    P class add $DEV 1:40 parent 1:1 rate 1mbit ceil 20mbit flows off
psp_check "filter to 1:40" P filter add $DEV proto udp dport 5040 classid 1:40
psp_check "1:40 served" psp_wait_for 10 psp_status_is $DEV 'c("1:40")["state"] == "served"'
$N "$TRAFFIC" send $NET.2 5040 --rate 8mbit --size 1000 --count 100 >/dev/null
psp_check "1:40 sent its 100 frames" psp_wait_for 10 psp_status_is $DEV \
    'c("1:40")["tx_frames"] == 100 and c("1:40")["backlog_frames"] == 0'
psp_check "1:40 borrowed, 1:1 lent the same bytes (stats -j)" psp_wait_for 5 psp_status_is $DEV \
    'c("1:40")["borrowed_bytes"] > 0 and c("1:1")["lent_bytes"] == c("1:40")["borrowed_bytes"] and c("1:40")["lent_bytes"] == 0'
P stats $DEV --format prometheus >"$TMP/metrics2"
psp_check "exporter: pspxdp_class_borrowed_bytes_total of 1:40 under its parent" \
    grep -q '^pspxdp_class_borrowed_bytes_total{dev="'"$DEV"'",class="1:40",parent="1:1"} [1-9]' "$TMP/metrics2"

psp_check "detach" P detach $DEV
psp_finish
