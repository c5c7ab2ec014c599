#!/usr/bin/env bash
# What one Prometheus scrape of pspxdp exporter costs (docs/design.md §1.11), at 10 and
# 100,000 classes: per row the time curl waited for /metrics (wall clock,
# median and max of --repeat scrapes), the exporter's CPU time per scrape
# (user + system, /proc/PID/stat: on a loaded machine the wall clock is
# mostly waiting for a CPU), the bytes and the series served, for
# the default bound (--max-classes 1000: per-class series for 1000 classes,
# device-wide sums always) and with every class's series. Classes are normal
# ones (no traffic: the cost is reading the pins and formatting, not the
# counters' values). Prints a table; fails only when it cannot run. Timing:
# run it alone, under flock /work/wt/measure.lock on a shared machine.
#
#   sudo bench/run_scrape_cost.sh [--repeat N] [--classes "10 100000"]
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
PSPXDP=${PSPXDP:-$ROOT/build/user/pspxdp}
TRAFFIC=${TRAFFIC:-$ROOT/build/lab/psp_traffic}
REPEAT=5
COUNTS="10 100000"
while (($#)); do
    case $1 in
    --repeat) REPEAT=$2; shift 2 ;;
    --classes) COUNTS=$2; shift 2 ;;
    *) echo "usage: $0 [--repeat N] [--classes \"10 100000\"]" >&2; exit 2 ;;
    esac
done
source "$ROOT/lab/netns.sh"
psp_require run_scrape_cost "$PSPXDP" -- curl
NET=$(psp_random_net)
psp_lab_begin scr $NET
PORT=19092

$N "$PSPXDP" attach $DEV --line-rate 1gbit >/dev/null || exit 1
# cpu_ms PID: the process's user + system time so far, ms.
cpu_ms() { awk -v hz="$(getconf CLK_TCK)" '{ print ($14 + $15) * 1000 / hz }' "/proc/$1/stat"; }
# scrape PID: "median_ms max_ms cpu_ms bytes series" of REPEAT scrapes of
# the exporter PID.
scrape() {
    local i t times=() c0 c1
    c0=$(cpu_ms "$1")
    for ((i = 0; i < REPEAT; ++i)); do
        t=$($N curl -s -o "$TMP/m.prom" -w '%{time_total}' "http://127.0.0.1:$PORT/metrics") || return 1
        times+=("$t")
    done
    c1=$(cpu_ms "$1")
    printf '%s\n' "${times[@]}" | sort -n | awk -v b="$(wc -c <"$TMP/m.prom")" \
        -v s="$(grep -vc '^#' "$TMP/m.prom")" -v cpu="$(((c1 - c0) / REPEAT))" \
        '{ t[NR] = $1 * 1000 } END { printf "%8.1f %8.1f %8d %12d %10d", t[int((NR + 1) / 2)], t[NR], cpu, b, s }'
}
printf '%9s  %-18s %8s %8s %8s %12s %10s\n' classes "per-class series" "med ms" "max ms" "cpu ms" \
    bytes series
for n in $COUNTS; do
    { echo "class 1:ffff normal"
      for ((i = 1; i < n; ++i)); do printf 'class %x:%x normal\n' $((2 + i / 65535)) $((1 + i % 65535)); done; } >"$TMP/n.conf"
    $N "$PSPXDP" apply $DEV --quiet "$TMP/n.conf" || exit 1
    bounds=("$n")
    ((n > 1000)) && bounds=(1000 "$n")
    for bound in "${bounds[@]}"; do
        $N "$PSPXDP" exporter $DEV --listen 127.0.0.1:$PORT --max-classes "$bound" >/dev/null &
        pid=$!
        psp_wait_for 10 psp_listening "$SRC" tcp $PORT || exit 1
        printf '%9d  %-18s %s\n' "$n" "$( ((bound == n)) && echo "all ($n)" || echo "first $bound")" \
            "$(scrape $pid)"
        kill $pid
        wait $pid 2>/dev/null
    done
done
$N "$PSPXDP" detach $DEV >/dev/null
uptime
