# Shared by the lab, its tests and the benchmarks. Sourcing it sets the
# built binaries (each overridable from the environment): BUILD_DIR (the
# checkout's build/), PSPXDP, TRAFFIC (lab/psp_traffic), DELAY (psp_delay).
PSP_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$PSP_ROOT/build}
PSPXDP=${PSPXDP:-$BUILD_DIR/user/pspxdp}
TRAFFIC=${TRAFFIC:-$BUILD_DIR/lab/psp_traffic}
DELAY=${DELAY:-$BUILD_DIR/lab/psp_delay}

# A veth "wire"
# between two network namespaces. Source it, then:
#   psp_make_wire SRC_NS DST_NS DEV PEER NET    e.g. ... 10.77.0 -> .1 on DEV, .2 on PEER
# IPv6 is off in both namespaces (no ND/MLD frames on the wire) and the
# neighbours are static (no ARP mid-run), so the wire carries only what the
# caller sends. Returns non-zero with a message on stderr if any step fails.
psp_make_wire() {
    local src=$1 dst=$2 dev=$3 peer=$4 net=$5 ns mac_s mac_d
    ip netns add "$src" && ip netns add "$dst" || { echo "cannot create namespaces $src/$dst" >&2; return 1; }
    ip -n "$src" link add "$dev" type veth peer name "$peer" netns "$dst" ||
        { echo "cannot create the veth $dev/$peer" >&2; return 1; }
    for ns in "$src" "$dst"; do
        ip -n "$ns" link set lo up
        ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1
    done
    ip -n "$src" addr add "$net.1/24" dev "$dev"
    ip -n "$dst" addr add "$net.2/24" dev "$peer"
    ip -n "$src" link set "$dev" up
    ip -n "$dst" link set "$peer" up
    nsenter --net="/run/netns/$src" ping -c1 -W2 "$net.2" >/dev/null ||
        { echo "the wire $dev -> $peer does not carry ping" >&2; return 1; }
    mac_d=$(ip -n "$dst" -br link show "$peer" | awk '{print $3}')
    mac_s=$(ip -n "$src" -br link show "$dev" | awk '{print $3}')
    ip -n "$src" neigh replace "$net.2" lladdr "$mac_d" dev "$dev" nud permanent
    ip -n "$dst" neigh replace "$net.1" lladdr "$mac_s" dev "$peer" nud permanent
}

# psp_require WHO BIN... -- TOOL...: exits 77 (skipped) unless running as
# root with every BIN built and every TOOL installed.
psp_require() {
    local who=$1 x
    shift
    [[ $EUID -eq 0 ]] || { echo "$who: needs root (network namespaces, BPF, AF_XDP)" >&2; exit 77; }
    while (($#)) && [[ $1 != -- ]]; do
        [[ -x $1 ]] || { echo "$who: $1 not built (run scripts/build.sh)" >&2; exit 77; }
        shift
    done
    (($#)) && shift
    for x in "$@"; do
        command -v "$x" >/dev/null || { echo "$who: $x missing (run scripts/setup.sh)" >&2; exit 77; }
    done
}

# psp_teardown PSPXDP SRC_NS DST_NS DEV: undoes a lab run whatever state it
# is in: detach (also after a kill -9 of the daemon), a daemon detach could
# not stop goes by pid, then the namespaces, DEV's pins and run files, and
# /run/pspxdp itself if nothing else is attached.
psp_teardown() {
    local pspxdp=$1 src=$2 dst=$3 dev=$4
    nsenter --net="/run/netns/$src" "$pspxdp" detach "$dev" >/dev/null 2>&1
    if [[ -f /run/pspxdp/$dev.pid ]]; then kill -9 "$(cat "/run/pspxdp/$dev.pid")" 2>/dev/null; fi
    ip netns del "$src" 2>/dev/null
    ip netns del "$dst" 2>/dev/null
    rm -rf "/sys/fs/bpf/pspxdp/$dev"
    rm -f "/run/pspxdp/$dev".*
    rmdir /run/pspxdp 2>/dev/null # only if empty: other devices may be attached
}

# psp_check DESCRIPTION COMMAND...: runs COMMAND, prints "ok   - " or
# "FAIL - " and DESCRIPTION, counts failures in PSP_FAILS (a test ends with
# `echo "$PSP_FAILS failure(s)"; [[ $PSP_FAILS -eq 0 ]]`).
PSP_FAILS=0
psp_check() {
    local what=$1
    shift
    if "$@"; then echo "ok   - $what"; else echo "FAIL - $what"; PSP_FAILS=$((PSP_FAILS + 1)); fi
}

# psp_wait_for SECONDS CMD...: polls CMD every 50 ms until it succeeds
# (returns 0) or SECONDS pass (returns 1). Tests wait for a condition (a
# counter, a listening socket, a file), never for a fixed time.
psp_wait_for() {
    local deadline=$((SECONDS + $1))
    shift
    while ! "$@"; do
        ((SECONDS <= deadline)) || return 1
        sleep 0.05
    done
}

# psp_gone PID: true once PID is no process or a zombie (a killed daemon
# whose parent, the attach that spawned it, has exited).
psp_gone() { [[ ! -e /proc/$1 ]] || grep -q '^[0-9]* ([^)]*) Z' "/proc/$1/stat" 2>/dev/null; }

# psp_lab_begin TAG NET: the set-up of a lab test. Namespaces psp-TAG$$-s/-d,
# a wire DEV=pTAG$$a -> PEER=pTAG$$b on NET.0/24 (.1 -> .2), N and D to run
# commands in them, TMP a scratch directory, PIDS for background jobs; on
# exit (also on failure) the jobs are killed, everything is torn down
# (psp_teardown with $PSPXDP) and TMP removed. TAG: up to 3 letters.
psp_lab_begin() {
    local tag=$1 net=$2
    SRC=psp-$tag$$-s DST=psp-$tag$$-d DEV=p$tag$$a PEER=p$tag$$b
    N="nsenter --net=/run/netns/$SRC"
    D="nsenter --net=/run/netns/$DST"
    TMP=$(mktemp -d "/tmp/psp-$tag.XXXXXX")
    PIDS=()
    trap psp_lab_end EXIT
    trap 'exit 130' INT TERM
    psp_make_wire "$SRC" "$DST" "$DEV" "$PEER" "$net" || exit 1
}
psp_lab_end() {
    local p
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
    wait 2>/dev/null
    psp_teardown "$PSPXDP" "$SRC" "$DST" "$DEV"
    rm -rf "$TMP"
}

# psp_capture NS_CMD IFACE FILE BUFFER_KB [FILTER...]: tcpdump of what
# arrives on IFACE (headers, nanosecond stamps) into FILE.pcap, its messages
# in FILE.tcpdump; returns once it listens. Its pid: PSP_CAPTURE_PID (also
# in PIDS, for psp_lab_end). Stop it with kill -INT to flush the file.
psp_capture() {
    local ns_cmd=$1 iface=$2 file=$3 buffer_kb=$4 i
    shift 4
    $ns_cmd tcpdump -i "$iface" -Q in -s 96 -B "$buffer_kb" --time-stamp-precision=nano \
        -w "$file.pcap" "$@" >/dev/null 2>"$file.tcpdump" &
    PSP_CAPTURE_PID=$!
    PIDS+=($PSP_CAPTURE_PID)
    for ((i = 0; i < 50; ++i)); do grep -q listening "$file.tcpdump" && return 0; sleep 0.05; done
    echo "tcpdump on $iface did not start: $(cat "$file.tcpdump")" >&2
    return 1
}

# psp_port_filters DEV FIRST_PORT COUNT MAJOR FIRST_MINOR: UDP destination
# port FIRST_PORT + i -> class MAJOR:(FIRST_MINOR + i), i = 0..COUNT-1, as
# one change (pspxdp filter add --file). The one place lab scripts make port
# filters in bulk. Runs $PSPXDP in DEV's namespace through $N
# (psp_lab_begin's nsenter) when set.
psp_port_filters() {
    local dev=$1 port0=$2 count=$3 major=$4 minor0=$5 i
    for ((i = 0; i < count; ++i)); do
        printf 'pref 10 proto udp dport %d classid %x:%x\n' $((port0 + i)) "$major" $((minor0 + i))
    done | ${N:-} "$PSPXDP" filter add "$dev" --file -
}
