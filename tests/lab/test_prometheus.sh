#!/usr/bin/env bash
# A real Prometheus scrapes pspxdp exporter while paced traffic flows, and
# the query API says what the class sent: rate(pspxdp_class_tx_bytes_total
# {class="1:1"}[5s])*8 is the class's rate within 1 %. On the byte clock
# that is exact (the gap frames queued ahead keep the wire's time, so the
# class's bytes per second of real time are its rate) unless the daemon fell
# behind real time, which it counts as an underrun: when underruns and late
# wake-ups cost the wire more than 0.25 % of the 5 s judged, the machine was
# too loaded to judge and the test skips (77). Also:
# promtool check metrics passes on what the endpoint serves (the lateness
# histogram included); every query of the Grafana dashboard
# (packaging/grafana-pspxdp.json) returns data from that Prometheus; bad
# --listen is refused; a scrape after detach answers 503.
#
# Everything runs inside the lab's sender namespace: the exporter on its
# loopback 127.0.0.1:19091, Prometheus on 127.0.0.1:19090 with a scratch
# config and storage under $TMP (removed by psp_end). Exit 77 = skipped.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
source "$ROOT/lab/netns.sh"
psp_require test_prometheus "$PSPXDP" "$TRAFFIC" -- prometheus promtool curl jq

DASHBOARD=$ROOT/packaging/grafana-pspxdp.json
RATE_BPS=20000000
EXPORTER=127.0.0.1:19091
PROM=http://127.0.0.1:19090
NET=$(psp_random_net)
psp_lab_begin prm $NET
P() { $N "$PSPXDP" "$@"; }

# query PROMQL [TIME]: the API's JSON answer to an instant query.
query() {
    $N curl -sf --max-time 5 --get "$PROM/api/v1/query" --data-urlencode "query=$1" \
        ${2:+--data-urlencode "time=$2"}
}
# answered FILE: the API's JSON answer in FILE is a success with at least one sample.
answered() { jq -e '.status == "success" and (.data.result | length > 0)' "$1" >/dev/null; }
# has_data PROMQL [TIME]: the query succeeds with at least one sample.
has_data() { query "$@" >"$TMP/answer.json" && answered "$TMP/answer.json"; }

psp_check "bad --listen: exit 2, one line naming it" bash -c "
    $N $PSPXDP exporter $DEV --listen 127.0.0.1 2>$TMP/err; rc=\$?
    [[ \$rc -eq 2 && \$(wc -l <$TMP/err) -eq 1 ]] && grep -q -- '--listen' $TMP/err"
# --gap-horizon inf: the wire carries gap frames throughout, never idles by
# plan, so any lateness of the daemon that costs the class rate is an
# underrun (a finite horizon would also lose rate to late wake-ups from
# planned idles; those are counted too, below). The default window (64 kB,
# 5 ms at 100 Mbit/s): the counters lead the wire by at most that, 0.1 % of
# the 5 s judged.
psp_check "attach --clock byte --gap-horizon inf, line rate 100 Mbit/s" \
    P attach $DEV --clock byte --gap-horizon inf --line-rate 100mbit || { psp_finish; exit 1; }
psp_check "class 1:1 20mbit, filter udp dport 5001" bash -c \
    "$N $PSPXDP class set $DEV 1:1 20mbit && $N $PSPXDP filter add $DEV proto udp dport 5001 classid 1:1"
psp_check "the daemon serves 1:1" psp_wait_for 5 psp_status_is $DEV 'c("1:1")["state"] == "served"'

$N "$PSPXDP" exporter $DEV --listen $EXPORTER >"$TMP/exporter.out" 2>&1 &
PIDS+=($!)
psp_check "exporter listens on $EXPORTER" psp_wait_for 5 psp_listening "$SRC" tcp 19091
$N curl -sf "http://$EXPORTER/metrics" >"$TMP/scrape.prom"
psp_check "promtool check metrics passes on /metrics" \
    eval 'promtool check metrics <"$TMP/scrape.prom" >"$TMP/promtool.out" 2>&1'
sed 's/^/     /' "$TMP/promtool.out"
psp_check "/metrics is stats --format prometheus's text (the same families)" bash -c "
    diff <(grep '^# TYPE' $TMP/scrape.prom) <($N $PSPXDP stats $DEV --format prometheus | grep '^# TYPE')"
psp_check "... with the lateness histogram" \
    grep -q '^pspxdp_release_lateness_seconds_bucket{dev="'$DEV'",le="+Inf"} ' "$TMP/scrape.prom"

cat >"$TMP/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: pspxdp
    static_configs:
      - targets: ['$EXPORTER']
EOF
$N prometheus --config.file="$TMP/prometheus.yml" --storage.tsdb.path="$TMP/tsdb" \
    --web.listen-address=127.0.0.1:19090 --log.level=warn >"$TMP/prometheus.log" 2>&1 &
PIDS+=($!)
psp_check "Prometheus scrapes the exporter (up == 1)" \
    psp_wait_for 20 has_data 'up{job="pspxdp"} == 1' || { cat "$TMP/prometheus.log"; psp_finish; exit 1; }

# 10 s of twice the rate: 1:1 stays backlogged and sends at its rate. The
# judged instant T is the first moment from t0 + 7 s on (the backlog built,
# the traffic still flowing) at which Prometheus holds all 5 scrapes of the
# last 5 s. A loaded Prometheus misses some, and then rate() reads low:
# it extrapolates a window's ends only up to 1.1 scrape intervals from its
# samples (measured here: 16 Mbit/s for 20 with 4 scrapes of 5).
P status $DEV -j >"$TMP/s0.json"
t0=$(date +%s.%N)
$N timeout 20 "$TRAFFIC" send $NET.2 5001 --rate 40mbit --size 1400 --seconds 10 >/dev/null 2>&1 &
SENDER=$!
PIDS+=($SENDER)
judged_at() { # writes T once Prometheus has 5 scrapes of (T - 5 s, T], T >= t0 + 7
    local now
    now=$(date +%s.%N)
    awk -v n="$now" -v t="$t0" 'BEGIN { exit !(n >= t + 7) }' || return 1
    has_data 'count_over_time(pspxdp_class_tx_bytes_total{class="1:1"}[5s]) >= 5' "$now" || return 1
    echo "$now" >"$TMP/T"
}
starved=""
psp_wait_for 11 judged_at ||
    starved="Prometheus scraped fewer than 5 times in 5 s between t0 + 7 s and t0 + 18 s"
loaded=$starved
T=$(cat "$TMP/T" 2>/dev/null || echo "$t0")
P status $DEV -j >"$TMP/s1.json"
measured=$(query "rate(pspxdp_class_tx_bytes_total{class=\"1:1\"}[5s])*8" "$T" |
    jq -r '.data.result[0].value[1] // "none"')
underruns=$(jq -s '(.[1].daemon.underruns - .[0].daemon.underruns) + (.[1].daemon.late_wakeups - .[0].daemon.late_wakeups)' "$TMP/s0.json" "$TMP/s1.json")
# The wire time those cost the class, in µs: an underrun cuts its bytes out
# of the byte clock (at the line rate, 100 Mbit/s: 0.08 µs a byte), a late
# wake-up its lateness; the class loses at most that share of the 5 s judged.
lost_us=$(jq -s '((.[1].daemon.underrun_bytes - .[0].daemon.underrun_bytes) * 0.08)
    + ((.[1].daemon.late_ns - .[0].daemon.late_ns) / 1000) | floor' "$TMP/s0.json" "$TMP/s1.json")
echo "     rate(pspxdp_class_tx_bytes_total{class=\"1:1\"}[5s])*8 at t0 + $(awk -v T="$T" -v t="$t0" 'BEGIN { printf "%.1f", T - t }') s: $measured bit/s" \
    "(class rate $RATE_BPS; underruns and late wake-ups in the window: $underruns, wire time lost: $lost_us us)"
# What else makes the window unjudgeable on a loaded machine: the sender
# fell short (1:1's backlog ran dry: it sent less than its rate, rightly), or
# the exporter answered slowly (a sample's timestamp is the scrape's start,
# its value read up to the scrape's duration later: 25 ms of 5 s is a 0.5 %
# error).
at_T() { query "$1" "$T" | jq -r '.data.result[0].value[1] // "none"'; }
min_backlog=$(at_T 'min_over_time(pspxdp_class_backlog_frames{class="1:1"}[5s])')
max_scrape=$(at_T 'max_over_time(scrape_duration_seconds{job="pspxdp"}[5s])')
echo "     in the window: 1:1's backlog at least $min_backlog frames, scrapes took at most $max_scrape s"
if [[ -n $loaded ]]; then
    :
elif ((lost_us > 12500)); then
    # 0.25 % of the 5 s: more could move the rate by a quarter of the 1 %
    # judged; less cannot, so a stray underrun does not make the test skip.
    loaded="$underruns underruns or late wake-ups cost $lost_us us of wire time: the daemon fell behind real time"
elif [[ $min_backlog == none || $min_backlog == 0 ]]; then
    loaded="1:1's backlog ran dry: the sender fell short of twice the rate"
elif awk -v d="$max_scrape" 'BEGIN { exit !(d == "none" || d > 0.025) }'; then
    loaded="a scrape took $max_scrape s: its timestamp is that uncertain"
else
    psp_check "Prometheus measures the class's rate within 1 %" awk -v m="$measured" -v r=$RATE_BPS \
        'BEGIN { d = (m - r) / r; exit !(m != "none" && d < 0.01 && d > -0.01) }'
fi

if [[ -z $starved ]]; then
    # Every panel's query of the dashboard, its variables set ($dev, $class:
    # 1:1, $__rate_interval: 5s), at T: each returns data.
    mapfile -t exprs < <(jq -r '.panels[] | .title as $t | .targets[] | "\($t)\t\(.expr)"' "$DASHBOARD")
    psp_check "the dashboard has queries (${#exprs[@]})" test ${#exprs[@]} -ge 6
    for row in "${exprs[@]}"; do
        title=${row%%$'\t'*} expr=${row#*$'\t'}
        expr=${expr//\$__rate_interval/5s}
        expr=${expr//\$dev/$DEV}
        expr=${expr//\$class/1:1}
        query "$expr" "$T" >"$TMP/panel.json"
        psp_check "dashboard '$title': $(jq -c '[.data.result[] | .value[1]][:3]' "$TMP/panel.json")" \
            answered "$TMP/panel.json" || echo "     $expr"
    done
fi
psp_check "release lateness recorded while paced (histogram count > 0)" psp_wait_for 10 has_data \
    "pspxdp_release_lateness_seconds_count{dev=\"$DEV\"} > 0"
P status $DEV | grep '^release lateness' | sed 's/^/     /'
psp_check "status prints the lateness p50/p99/max" bash -c \
    "$N $PSPXDP status $DEV | grep -q '^release lateness: [0-9]* wake-ups, p50 .* us, p99 .* us, max .* us'"

wait $SENDER 2>/dev/null
psp_check "detach" P detach $DEV
psp_check "a scrape after detach answers 503 with the reason" bash -c "
    [[ \$($N curl -s -o $TMP/gone -w '%{http_code}' http://$EXPORTER/metrics) == 503 ]] &&
        grep -q 'not attached' $TMP/gone"
if [[ -n $loaded ]]; then
    psp_finish || exit 1
    echo "skipped: machine too loaded ($loaded)"
    exit 77
fi
psp_finish
