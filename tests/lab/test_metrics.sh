#!/usr/bin/env bash
# pspxdp stats --format prometheus on a real attached device with a few
# classes and some traffic: promtool check metrics passes on it; every
# per-class series equals the counter `stats -j` gives (read after the
# traffic stopped and the daemon settled); --max-classes bounds the per-class
# series and says how many it left out, the device-wide sums still cover
# every class; --class picks which classes; the release-lateness histogram
# is there. Then the output's size and time at 10 and 10,000 classes,
# printed, not judged. Exit 77 = skipped.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../../lab/netns.sh"
psp_require test_metrics "$PSPXDP" "$TRAFFIC" -- python3 promtool

NET=$(psp_random_net)
psp_lab_begin mt $NET
P() { $N "$PSPXDP" "$@"; }
cat >"$TMP/a.conf" <<EOF
line-rate 1gbit
class 1:1 50mbit
class 1:2 20mbit
class 1:3 normal
class 1:ffff normal
filter proto udp dport 5001 classid 1:1
filter proto udp dport 5002 classid 1:2
filter proto udp dport 5003 classid 1:3
EOF
psp_check "attach --config (3 classes and the default)" P attach $DEV --config "$TMP/a.conf" ||
    { psp_finish; exit 1; }
psp_check "classes served" psp_wait_for 10 psp_status_is $DEV \
    'all(c(x)["state"] == "served" for x in ("1:1", "1:2", "1:3"))'
for port in 5001 5002 5003; do
    $N "$TRAFFIC" send $NET.2 $port --rate 10mbit --size 700 --count 40 >/dev/null
done
# (Not psp_settled: its expression spans two lines, which Python's eval
# refuses, so it never holds; reported.)
psp_check "the daemon took every frame" psp_wait_for 10 psp_status_is $DEV \
    'all(x["rx_frames"] == x["tc_frames"] == 40 and x["backlog_frames"] == 0 for x in map(c, ("1:1", "1:2", "1:3")))'

P stats $DEV -j >"$TMP/stats.json"
P stats $DEV --format prometheus >"$TMP/all.prom"
psp_check "promtool check metrics passes" eval 'promtool check metrics <"$TMP/all.prom" >"$TMP/promtool.out" 2>&1'
sed 's/^/     /' "$TMP/promtool.out"
psp_check "bad --format: exit 2, one line naming it" bash -c "
    $N $PSPXDP stats $DEV --format xml 2>$TMP/err >/dev/null; rc=\$?
    [[ \$rc -eq 2 && \$(wc -l <$TMP/err) -eq 1 ]] && grep -q -- '--format' $TMP/err"

# Every per-class counter of stats -j (its integers, but the configuration)
# against the series of the same name; then the sums and the gauges.
psp_verdict python3 "$HERE/verdict_metrics.py" "$TMP/stats.json" "$TMP/all.prom" 1000
P stats $DEV --format prometheus --max-classes 1 >"$TMP/one.prom"
echo "  --max-classes 1:"
psp_verdict python3 "$HERE/verdict_metrics.py" "$TMP/stats.json" "$TMP/one.prom" 1
psp_check "... and says so in a comment" grep -q '^# 3 classes left out (--max-classes 1)$' "$TMP/one.prom"
psp_check "promtool check metrics passes on it" eval 'promtool check metrics <"$TMP/one.prom" >/dev/null 2>&1'
P stats $DEV --format prometheus --class 1:2 --class 1:3 >"$TMP/pick.prom"
psp_check "--class 1:2 --class 1:3: per-class series for those two only" bash -c "
    [[ \$(grep -o 'class=\"[^\"]*\"' $TMP/pick.prom | sort -u | tr '\n' ' ') == 'class=\"1:2\" class=\"1:3\" ' ]]"
psp_check "... the others counted as omitted, and said" bash -c "
    grep -qx 'pspxdp_classes_omitted{dev=\"$DEV\"} 2' $TMP/pick.prom &&
        grep -qx '# 2 classes left out (--class, --max-classes 1000)' $TMP/pick.prom"
psp_check "the release-lateness histogram: buckets 100 ns .. 1 s and +Inf, _sum, _count" bash -c "
    [[ \$(grep -c '^pspxdp_release_lateness_seconds_bucket{' $TMP/all.prom) == 23 ]] &&
        grep -q '^pspxdp_release_lateness_seconds_bucket{dev=\"$DEV\",le=\"1e-07\"} ' $TMP/all.prom &&
        grep -q '^pspxdp_release_lateness_seconds_count{dev=\"$DEV\"} ' $TMP/all.prom &&
        grep -q '^pspxdp_release_lateness_seconds_sum{dev=\"$DEV\"} ' $TMP/all.prom"

# The cost, printed: 10 and 10,000 classes (normal ones: no rate to sum).
cost() { # CLASSES
    { echo "line-rate 1gbit"; echo "class 1:ffff normal"
      for ((i = 1; i < $1; ++i)); do printf 'class 2:%x normal\n' $i; done; } >"$TMP/n.conf"
    P apply $DEV --quiet "$TMP/n.conf" || return 1
    local t0 t1
    t0=$(date +%s%N)
    P stats $DEV --format prometheus --max-classes $1 >"$TMP/n.prom" || return 1
    t1=$(date +%s%N)
    printf '     %6d classes: %9d bytes, %6d series, %5d ms\n' "$1" "$(wc -c <"$TMP/n.prom")" \
        "$(grep -vc '^#' "$TMP/n.prom")" $(((t1 - t0) / 1000000))
}
echo "  cost of one scrape (stats --format prometheus, all classes shown):"
psp_check "10 classes" cost 10
psp_check "10,000 classes" cost 10000
psp_check "promtool check metrics passes at 10,000 classes" \
    eval 'promtool check metrics <"$TMP/n.prom" >/dev/null 2>&1'

psp_check "detach" P detach $DEV
psp_finish
