# Judged windows for the lab tests that judge pacing (test_clockless,
# test_horizon, test_dp_tcp, test_lab_10k). Source after lab/netns.sh and
# psp_lab_begin (uses $N, $PSPXDP, $DEV). Verdicts: verdict_pacing.py.
VERDICT=${VERDICT:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/verdict_pacing.py}

# window_served SECONDS CLASS...: waits until the daemon serves every CLASS
# (class set returns before the daemon has read the change).
window_served() {
    local secs=$1
    shift
    psp_wait_for "$secs" _window_served "$@"
}
_window_served() {
    $N "$PSPXDP" status $DEV -j >"$TMP/served.json" 2>/dev/null && python3 "$VERDICT" served "$TMP/served.json" "$@"
}

# window_open NAME: the counters before the window: NAME.s0 (status -j) and
# NAME.dev0 (DEV's link counters).
window_open() {
    $N "$PSPXDP" status $DEV -j >"$1.s0"
    $N ip -s -j link show $DEV >"$1.dev0"
}

# window_close NAME [SECONDS]: waits (default 10 s) until nothing is
# backlogged and the daemon's counters, published every 100 ms, account for
# every frame that left DEV since window_open; writes NAME.s1 and NAME.dev1
# (the last reading if it never settles: the verdict then shows why).
window_close() {
    psp_wait_for "${2:-10}" _window_settled "$1"
}
_window_settled() {
    $N "$PSPXDP" status $DEV -j >"$1.s1" && $N ip -s -j link show $DEV >"$1.dev1" &&
        python3 "$VERDICT" settled "$1"
}

# window_loaded NAME [ANALYZE_JSON]: prints why NAME's window cannot be
# judged on this machine now (empty: it can).
window_loaded() { python3 "$VERDICT" loaded "$@"; }

# window_skip WHY: the end of a test whose judged window could not be
# judged twice: its failures (if any) fail it, else it is skipped (77).
window_skip() {
    echo "$PSP_FAILS failure(s)"
    ((PSP_FAILS == 0)) || exit 1
    echo "skipped: machine too loaded ($1)"
    exit 77
}

# window_checks VERDICT_ARGS...: runs verdict_pacing.py VERDICT_ARGS, prints
# its figures and counts each "CHECK 0|1 WHAT" line it prints (psp_check);
# a verdict that dies is a failure.
window_checks() {
    local out ok what
    out=$(python3 "$VERDICT" "$@") || { psp_check "verdict $1 ran" false; return; }
    while IFS= read -r line; do
        if [[ $line == CHECK\ * ]]; then
            read -r _ ok what <<<"$line"
            psp_check "$what" test "$ok" = 1
        else
            echo "     $line"
        fi
    done <<<"$out"
}
