#!/usr/bin/env bash
# The gap horizon H in the real daemon (docs/design.md §4.5), on the lab's 1 Gbit/s veth
# wire with the byte clock forced (--clock byte: a veth would get clockless).
#
# One 20 Mbit/s class, offered 25 Mbit/s (always backlogged), run twice in
# the same test: H = inf (the paper's rule: every idle byte a PAUSE frame)
# and H = 50us (the default). Everything arriving at the far end is captured.
# Judged (deterministic: counters and the byte clock, tests/lab/window.sh):
#   - the wire carried exactly what the daemon counted (frames, gap frames,
#     the class's frames);
#   - H = inf: the PAUSE share of the wire >= 80 % (~98 %), and on the byte
#     clock (the daemon's: underruns are cut out of both) the class's rate
#     within 0.01 % of 20 Mbit/s, its burstiness <= 2 MTU;
#   - H = 50us: the PAUSE share <= 10 % (the comparison that shows H works
#     is in the same test); its hybrid-clock rate and burstiness depend on
#     this machine's timers: printed here, measured by bench/run_horizon.sh;
#   - status names the clock, its reason and the horizon, with -j the same
#     as raw keys; the option errors exit 2 with one line and change nothing.
# A run the machine let down (a frame passed unpaced, dropped by the veth or
# by the capture) is repeated once, then the test is skipped.
# Exit 77 = skipped (not root, not built, tools missing).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../../lab/netns.sh"
source "$HERE/window.sh"
psp_require test_horizon "$PSPXDP" "$TRAFFIC" -- ip tcpdump python3 nsenter timeout

RATE=20mbit RATE_BPS=20000000 OFFER=25mbit SECONDS_RUN=3 PORT=5001
psp_lab_begin hz 10.84.0

# --- option errors: one line, exit 2, nothing attached
for bad in "--gap-horizon fast" "--gap-horizon 50" "--clock sometimes" "--clockless --clock byte"; do
    # shellcheck disable=SC2086
    $N "$PSPXDP" attach $DEV --line-rate 1gbit $bad >"$TMP/out" 2>"$TMP/err"
    rc=$?
    psp_check "attach $bad: exit 2 ($rc), one line: $(head -c 100 "$TMP/err")" \
        bash -c "[[ $rc -eq 2 && \$(wc -l <$TMP/err) -eq 1 ]]"
done
psp_check "refused attaches left nothing" test ! -e /sys/fs/bpf/pspxdp/$DEV
$N "$PSPXDP" daemon $DEV --gap-horizon 1x >/dev/null 2>"$TMP/err"
rc=$?
psp_check "daemon --gap-horizon 1x: exit 2 ($rc), one line" \
    bash -c "[[ $rc -eq 2 && \$(wc -l <$TMP/err) -eq 1 ]] && grep -q '1x' $TMP/err"

NET=10.84.0
# A window the machine let down (frames passed unpaced, dropped by the veth
# or the capture) is run again once, then the test is skipped.
# The judged windows (window.sh); H=inf on the byte clock (the paper's),
# H=50us idles: the hybrid clock.
runs() {
    window_one_class h-inf $SECONDS_RUN "--line-rate 1gbit" --gap-horizon inf --clock byte
    window_one_class h-50us $SECONDS_RUN "--line-rate 1gbit --idle-threshold 50us" --gap-horizon 50us --clock byte
}
why() { window_loaded "$TMP/h-inf" "$TMP/h-inf"; window_loaded "$TMP/h-50us" "$TMP/h-50us"; }
window_retry runs why
[[ -z $LOADED ]] || window_skip "$LOADED"

psp_verdict python3 "$VERDICT" horizon "$TMP/h-inf" "$TMP/h-50us" $RATE_BPS
read -r clock _ cl forced hz <<<"$(python3 "$VERDICT" clock "$TMP/h-50us.s1" clockless clock_forced gap_horizon_ns)"
read -r _ _ hz_inf <<<"$(python3 "$VERDICT" clock "$TMP/h-inf.s1" gap_horizon_ns)"
psp_check "status -j: byte clock, forced, horizon 50000 ns ($clock, forced $forced, $hz)" \
    test "$clock" = byte -a "$forced" = 1 -a "$hz" = 50000 -a "$cl" = 0
psp_check "status -j with inf: gap_horizon_ns 2^64-1 ($hz_inf)" test "$hz_inf" = 18446744073709551615
psp_check "status text: one clock line with mode, reason, horizon, PAUSE share, late wake-ups" \
    grep -Eq '^clock: byte clock \(forced: --clock byte\), gap horizon 50us, PAUSE [0-9.]+ % of the wire, late wake-ups [0-9]+' \
    "$TMP/h-50us.status"
psp_finish
