# Shared by the lab, its tests and the benchmarks. Sourcing it sets the
# built binaries (each overridable from the environment): BUILD_DIR (the
# checkout's build/), PSPXDP, TRAFFIC (lab/psp_traffic), DELAY (psp_delay).
#
# It is also the lab tests' one harness. A test:
#   source lab/netns.sh; psp_require NAME BIN... -- TOOL...
#   psp_lab_begin TAG NET      (or psp_begin TAG and its own psp_netns)
#   psp_check "what" CMD...    (psp_wait_for SECONDS COND... for anything
#                               that takes time: never a fixed sleep)
#   psp_finish                 ("N failure(s)", non-zero if any)
# and whatever happens, psp_end undoes it on exit.
PSP_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$PSP_ROOT/build}
PSPXDP=${PSPXDP:-$BUILD_DIR/user/pspxdp}
TRAFFIC=${TRAFFIC:-$BUILD_DIR/lab/psp_traffic}
DELAY=${DELAY:-$BUILD_DIR/lab/psp_delay}
# The tests' Python (tests/lab/*.py, bench/*.py) leaves no __pycache__ in the
# checkout: test_lab_quick holds git status to what it was.
export PYTHONDONTWRITEBYTECODE=1
# ... and import the lab's package (psplab.cli's subcommand table, its report)
# with Debian's interpreter and the packages scripts/setup.sh gives it
# (scapy, matplotlib), whichever python3 the caller's PATH finds first.
export PYTHONPATH=$PSP_ROOT/lab${PYTHONPATH:+:$PYTHONPATH}
export PATH=/usr/bin:$PATH

# psp_netns NS: a namespace with lo up and IPv6 off (no ND/MLD frames),
# deleted by psp_end. Returns non-zero with a message on stderr if it cannot.
psp_netns() {
    ip netns add "$1" || { echo "cannot create the namespace $1" >&2; return 1; }
    PSP_NSES+=("$1")
    ip -n "$1" link set lo up
    ip netns exec "$1" sysctl -qw net.ipv6.conf.all.disable_ipv6=1
    ip netns exec "$1" sysctl -qw net.ipv6.conf.default.disable_ipv6=1 # and on the pacer veths
}

# psp_in_ns NS CMD...: CMD in NS's network namespace (not ip netns exec: that
# gives CMD a private mount namespace without the host's bpffs).
psp_in_ns() {
    local ns=$1
    shift
    nsenter --net="/run/netns/$ns" "$@"
}

# A veth "wire"
# between two network namespaces. Source it, then:
#   psp_make_wire SRC_NS DST_NS DEV PEER NET    e.g. ... 10.77.0 -> .1 on DEV, .2 on PEER
# IPv6 is off in both namespaces (no ND/MLD frames on the wire) and the
# neighbours are static (no ARP mid-run), so the wire carries only what the
# caller sends. Returns non-zero with a message on stderr if any step fails.
psp_make_wire() {
    local src=$1 dst=$2 dev=$3 peer=$4 net=$5 mac_s mac_d
    psp_netns "$src" && psp_netns "$dst" || return 1
    ip -n "$src" link add "$dev" type veth peer name "$peer" netns "$dst" ||
        { echo "cannot create the veth $dev/$peer" >&2; return 1; }
    ip -n "$src" addr add "$net.1/24" dev "$dev"
    ip -n "$dst" addr add "$net.2/24" dev "$peer"
    ip -n "$src" link set "$dev" up
    ip -n "$dst" link set "$peer" up
    psp_in_ns "$src" ping -c1 -W2 "$net.2" >/dev/null ||
        { echo "the wire $dev -> $peer does not carry ping" >&2; return 1; }
    mac_d=$(ip -n "$dst" -br link show "$peer" | awk '{print $3}')
    mac_s=$(ip -n "$src" -br link show "$dev" | awk '{print $3}')
    ip -n "$src" neigh replace "$net.2" lladdr "$mac_d" dev "$dev" nud permanent
    ip -n "$dst" neigh replace "$net.1" lladdr "$mac_s" dev "$peer" nud permanent
}

# psp_wire_v6 SRC_NS DST_NS DEV PEER PREFIX: IPv6 on a wire psp_make_wire
# made, e.g. PREFIX fd93:1:: -> PREFIX1/64 on DEV, PREFIX2/64 on PEER; for a
# run that sends IPv6. No DAD, no router solicitations, static neighbours:
# after the link's own MLD reports (at most a few frames when IPv6 comes
# up), the wire carries only what the caller sends. The pacer veths an
# attach makes later keep IPv6 off (the namespaces' default).
psp_wire_v6() {
    local src=$1 dst=$2 dev=$3 peer=$4 pre=$5 mac_s mac_d ns d
    for ns in "$src:$dev" "$dst:$peer"; do
        d=${ns#*:}
        ns=${ns%%:*}
        ip netns exec "$ns" sysctl -qw "net.ipv6.conf.$d.accept_dad=0" \
            "net.ipv6.conf.$d.router_solicitations=0" "net.ipv6.conf.$d.disable_ipv6=0" || return 1
    done
    ip -n "$src" addr add "${pre}1/64" dev "$dev" nodad &&
        ip -n "$dst" addr add "${pre}2/64" dev "$peer" nodad || return 1
    mac_d=$(ip -n "$dst" -br link show "$peer" | awk '{print $3}')
    mac_s=$(ip -n "$src" -br link show "$dev" | awk '{print $3}')
    ip -n "$src" -6 neigh replace "${pre}2" lladdr "$mac_d" dev "$dev" nud permanent &&
        ip -n "$dst" -6 neigh replace "${pre}1" lladdr "$mac_s" dev "$peer" nud permanent
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

# psp_daemon_pid DEV: the pid of DEV's daemon (empty if none).
psp_daemon_pid() { cat "/run/pspxdp/$1.pid" 2>/dev/null; }

# psp_drop_dev DEV: what may be left of DEV's attachment once its namespace
# goes or its daemon died: the daemon (kill -9 by pid), DEV's pins and run
# files, and the pin and run directories themselves if nothing else is
# attached.
psp_drop_dev() {
    local pid
    pid=$(psp_daemon_pid "$1")
    [[ -n $pid ]] && kill -9 "$pid" 2>/dev/null
    rm -rf "/sys/fs/bpf/pspxdp/$1"
    rm -f "/run/pspxdp/$1".*
    rmdir /sys/fs/bpf/pspxdp /run/pspxdp 2>/dev/null # only if empty: other devices may be attached
}

# psp_teardown PSPXDP SRC_NS DST_NS DEV: undoes a lab run whatever state it
# is in: detach (also after a kill -9 of the daemon), a daemon detach could
# not stop goes by pid, then the namespaces, DEV's pins and run files.
psp_teardown() {
    local pspxdp=$1 src=$2 dst=$3 dev=$4
    psp_in_ns "$src" "$pspxdp" detach "$dev" >/dev/null 2>&1
    psp_drop_dev "$dev"
    ip netns del "$src" 2>/dev/null
    ip netns del "$dst" 2>/dev/null
}

# psp_check DESCRIPTION COMMAND...: runs COMMAND, prints "ok   - " or
# "FAIL - " and DESCRIPTION, counts failures in PSP_FAILS and returns
# COMMAND's verdict (0 or 1). Every test ends with psp_finish.
PSP_FAILS=0
psp_check() {
    local what=$1
    shift
    if "$@"; then echo "ok   - $what"; return 0; fi
    echo "FAIL - $what"
    PSP_FAILS=$((PSP_FAILS + 1))
    return 1
}

# psp_verdict COMMAND...: a verdict computed elsewhere (a Python script that
# prints "ok   - " / "FAIL - " lines): its output, every FAIL line counted in
# PSP_FAILS, and one more failure if it exits non-zero without a FAIL line
# (it crashed, or judged nothing).
psp_verdict() {
    local out rc failed
    out=$("$@")
    rc=$?
    [[ -n $out ]] && echo "$out"
    failed=$(grep -c '^FAIL - ' <<<"$out")
    PSP_FAILS=$((PSP_FAILS + failed))
    if ((rc != 0 && failed == 0)); then
        echo "FAIL - the verdict ($*) exited $rc"
        PSP_FAILS=$((PSP_FAILS + 1))
    fi
    return 0
}

# psp_finish: the closing line of a test, "N failure(s)"; non-zero if N > 0.
psp_finish() {
    echo "$PSP_FAILS failure(s)"
    [[ $PSP_FAILS -eq 0 ]]
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

# psp_listening NS tcp|udp PORT: a socket in NS listens on (tcp) or is bound
# to (udp) PORT.
psp_listening() { psp_in_ns "$1" ss -Hln "--$2" "sport = :$3" 2>/dev/null | grep -q .; }

# psp_status_is DEV PYTHON_EXPRESSION: true when the expression holds for
# d, DEV's `pspxdp status -j` (run through $N, psp_lab_begin's nsenter, when
# set); c("1:1") is a class's object in it. E.g.
#   psp_wait_for 5 psp_status_is $DEV 'c("1:1")["state"] == "served"'
psp_status_is() {
    ${N:-} "$PSPXDP" status "$1" -j 2>/dev/null | python3 "$PSP_ROOT/lab/status_is.py" "$2" 2>/dev/null
}

# psp_json_is FILE PYTHON_EXPRESSION: the same for a status -j saved in FILE.
psp_json_is() { python3 "$PSP_ROOT/lab/status_is.py" "$2" "$1" 2>/dev/null; }

# psp_settled DEV [CLASS]: the daemon has published what TC handed CLASS
# (every served class if none): every frame taken from the sockets (or lost
# on the way: dropped by the kernel, left in a dead daemon's rings, no
# socket), the backlog empty.
psp_settled() {
    local cls="[x for x in d['classes'] if x['state'] == 'served']"
    [[ -n ${2:-} ]] && cls="[c('$2')]"
    psp_status_is "$1" "all(x['backlog_frames'] == 0 for x in $cls) and (sum(x['rx_frames'] for x in $cls)
        + sum(d['daemon'][k] for k in ('socket_ring_full', 'socket_fill_empty', 'died_in_rings'))
        + d['xdp']['no_socket'] >= sum(x['tc_frames'] for x in $cls))"
}

# psp_begin TAG: the set-up every lab test shares: TMP a scratch directory,
# PIDS for background jobs, PSP_NSES (namespaces, see psp_netns) and
# PSP_DEVS (devices pspxdp may attach to) to undo; on exit (also on failure
# or ^C) psp_end kills the jobs, DEVS' daemons (a test detaches what it
# attached: this is for a test cut short), removes their pins and run
# files, the namespaces (and with them every device in them) and TMP
# (kept, for a look at what went wrong, with PSP_KEEP=1 in the environment).
psp_begin() {
    TMP=$(mktemp -d "/tmp/psp-$1.XXXXXX")
    PIDS=() PSP_NSES=() PSP_DEVS=()
    trap psp_end EXIT
    trap 'exit 130' INT TERM
}
psp_end() {
    local p
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
    wait 2>/dev/null
    for p in "${PSP_DEVS[@]}"; do psp_drop_dev "$p"; done
    for p in "${PSP_NSES[@]}"; do ip netns del "$p" 2>/dev/null; done
    if [[ -n ${PSP_KEEP:-} ]]; then echo "kept $TMP"; else rm -rf "$TMP"; fi
}

# psp_random_net: a random 10.X.Y prefix for a test's /24s (X 20..219), so
# that runs side by side rarely pick the same addresses; each namespace is
# its own anyway, this keeps captures and logs of parallel runs apart.
psp_random_net() { echo "10.$((RANDOM % 200 + 20)).$((RANDOM % 250))"; }

# psp_lab_begin TAG NET: psp_begin, and a wire DEV=pTAG$$a -> PEER=pTAG$$b
# on NET.0/24 (.1 -> .2) between namespaces SRC=psp-TAG$$-s and
# DST=psp-TAG$$-d, N and D to run commands in them. TAG: up to 3 letters.
psp_lab_begin() {
    local tag=$1 net=$2
    psp_begin "$tag"
    SRC=psp-$tag$$-s DST=psp-$tag$$-d DEV=p$tag$$a PEER=p$tag$$b
    N="nsenter --net=/run/netns/$SRC"
    D="nsenter --net=/run/netns/$DST"
    PSP_DEVS+=("$DEV")
    psp_make_wire "$SRC" "$DST" "$DEV" "$PEER" "$net" || exit 1
}

# psp_capture NS_CMD IFACE FILE BUFFER_KB [FILTER...]: tcpdump of what
# arrives on IFACE (headers, nanosecond stamps) into FILE.pcap, its messages
# in FILE.tcpdump; returns once it listens. Its pid: PSP_CAPTURE_PID (also
# in PIDS, for psp_end). Stop it with kill -INT to flush the file.
psp_capture() {
    local ns_cmd=$1 iface=$2 file=$3 buffer_kb=$4
    shift 4
    $ns_cmd tcpdump -i "$iface" -Q in -s 96 -B "$buffer_kb" --time-stamp-precision=nano \
        -w "$file.pcap" "$@" >/dev/null 2>"$file.tcpdump" &
    PSP_CAPTURE_PID=$!
    PIDS+=($PSP_CAPTURE_PID)
    psp_wait_for 5 grep -qs listening "$file.tcpdump" && return 0
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

# psp_cgroup2: where the cgroup2 file system is mounted (from mountinfo,
# never assumed: a hybrid host has it at /sys/fs/cgroup/unified); empty
# when there is none (cgroup v1 only).
psp_cgroup2() { awk '/ - cgroup2 /{print $5; exit}' /proc/self/mountinfo; }
