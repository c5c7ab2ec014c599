#!/usr/bin/env bash
# Where a clockless pacer's rate goes when several pacing daemons share a
# small machine (docs/results/2026-11-28-pacer-shortfall-under-load): N
# wires (N of --hosts, default "1 2 3"), each with its own pspxdp daemon
# (--clock none), one class at --rate (140mbit) kept backlogged by a bounded
# UDP sender (--offer, 200mbit), the delivered rate counted at each wire's
# far end; per host the shortfall and where it went (the class's
# late_lost_ns and empty_ns, the daemon's late wake-ups, its run-queue wait
# and CPU), per N the machine's busy CPU and run queue.
#
#   sudo bench/run_pacer_shortfall.sh [--hosts "1 2 3"] [--rate 140mbit]
#        [--offer 200mbit] [--seconds 8] [--attach "ATTACH ARGS"] [--router] [--judge] [--readers] [--json]
#
# A benchmark: it prints figures and fails only when it cannot run. On the
# shared VM run it under /work/wt/measure: real-time figures on a shared
# 2-core VM are noisy (the load before and after is printed).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
case ${1:-} in -h | --help) exec /usr/bin/python3 "$HERE/pacer_shortfall.py" --help ;; esac
source "$HERE/../lab/netns.sh"
psp_require run_pacer_shortfall "$PSPXDP" "$TRAFFIC" -- ip nsenter tcpdump python3
export PSPXDP TRAFFIC BUILD_DIR
exec /usr/bin/python3 "$HERE/pacer_shortfall.py" run "$@"
