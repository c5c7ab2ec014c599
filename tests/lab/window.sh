# Judged windows for the lab tests that judge pacing (test_clockless,
# test_horizon, test_dp_tcp, test_lab_10k). Source after lab/netns.sh and
# psp_lab_begin (uses $N, $PSPXDP, $DEV). Verdicts: verdict_pacing.py.
VERDICT=${VERDICT:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/verdict_pacing.py}

# window_served SECONDS CLASS...: waits until the daemon serves every CLASS
# (class set returns before the daemon has read the change).
window_served() {
    local secs=$1
    shift
    psp_wait_for "$secs" psp_status_is $DEV \
        "set('$*'.split()) <= {x['class'] for x in d['classes'] if x['state'] == 'served'}"
}

# window_open NAME: the counters before the window: NAME.s0 (status -j),
# NAME.dev0 and NAME.peer0 (the link counters of DEV and of its peer $PEER).
window_open() {
    $N "$PSPXDP" status $DEV -j >"$1.s0"
    $N ip -s -j link show $DEV >"$1.dev0"
    $D ip -s -j link show $PEER >"$1.peer0"
}

# window_close NAME [SECONDS]: waits (default 10 s) until nothing is
# backlogged and the daemon's counters, published every 100 ms, account for
# every frame that left DEV since window_open; writes NAME.s1, NAME.dev1 and
# NAME.peer1 (the last reading if it never settles: the verdict shows why).
window_close() {
    psp_wait_for "${2:-10}" _window_settled "$1"
}
_window_settled() {
    $N "$PSPXDP" status $DEV -j >"$1.s1" && $N ip -s -j link show $DEV >"$1.dev1" &&
        $D ip -s -j link show $PEER >"$1.peer1" && python3 "$VERDICT" settled "$1"
}

# window_captured NAME: waits until the capture into NAME (psp_capture, pid
# PSP_CAPTURE_PID) took in every frame $PEER received in the window NAME:
# tcpdump hands frames over a block at a time (a block retires when full or
# after a second), and a SIGINT loses the block in flight, uncounted.
window_captured() { psp_wait_for 5 _window_captured "$1"; }
_window_captured() { kill -USR1 $PSP_CAPTURE_PID && python3 "$VERDICT" captured "$1"; }

# window_loaded NAME [CAPTURE]: prints why NAME's window cannot be judged on
# this machine now (empty: it can); CAPTURE: a psp_capture FILE (its
# FILE.tcpdump says what the capture dropped).
window_loaded() { python3 "$VERDICT" loaded "$@"; }

# window_skip WHY: the end of a test whose judged window could not be
# judged twice: its failures (if any) fail it, else it is skipped (77).
window_skip() {
    psp_finish || exit 1
    echo "skipped: machine too loaded ($1)"
    exit 77
}

# window_one_class NAME SECONDS ANALYZE_CLOCK ATTACH_ARGS...: one judged
# window $TMP/NAME.* of one class: attach (1 Gbit/s, ATTACH_ARGS),
# class 1:1 at $RATE fed by UDP port $PORT, a capture at the far end ($PEER
# through $D), SECONDS of $OFFER from $NET.1 to $NET.2; the window opens on
# the idle wire and closes once drained and counted; NAME.status (status
# text), NAME.json (`pspxdp analyze` with ANALYZE_CLOCK, e.g. "--real-time");
# detach.
window_one_class() {
    local name=$1 secs=$2 clock=$3 out=$TMP/$1 cap
    shift 3
    psp_check "$name: attach $*" $N "$PSPXDP" attach $DEV --line-rate 1gbit "$@"
    psp_check "$name: class 1:1 $RATE, filter udp dport $PORT" bash -c \
        "$N $PSPXDP class set $DEV 1:1 $RATE && $N $PSPXDP filter add $DEV proto udp dport $PORT classid 1:1"
    psp_check "$name: the daemon serves 1:1" window_served 5 1:1
    psp_check "$name: capture starts" psp_capture "$D" $PEER "$out" 262144
    cap=$PSP_CAPTURE_PID
    window_open "$out"
    $N timeout 20 "$TRAFFIC" send $NET.2 $PORT --rate $OFFER --size 1400 --seconds "$secs" >/dev/null 2>&1
    psp_check "$name: drained, every frame counted" window_close "$out"
    $N "$PSPXDP" status $DEV >"$out.status"
    psp_check "$name: the capture took in every frame the peer received" window_captured "$out"
    kill -INT $cap
    wait $cap 2>/dev/null
    # shellcheck disable=SC2086 # ANALYZE_CLOCK is words
    psp_check "$name: analyze" bash -c '"$@" >"$0"' "$out.json" "$PSPXDP" analyze "$out.pcap" $clock \
        --flow c="proto udp dport $PORT" --target c=$RATE -j
    psp_check "$name: detach" $N "$PSPXDP" detach $DEV
}

# window_retry RUN WHY: runs RUN (the judged runs), then WHY (prints why
# they cannot be judged: window_loaded...); if it printed anything, both
# once more. LOADED: what WHY printed last (empty: judged; else the test
# ends with window_skip "$LOADED" once its other checks are done).
window_retry() {
    local attempt
    for attempt in 1 2; do
        "$1"
        LOADED=$("$2" | grep . | paste -sd ';')
        [[ -z $LOADED ]] && return
        echo "     attempt $attempt: not judged: $LOADED"
    done
}
