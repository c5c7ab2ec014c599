# Shared by the lab, its tests and the data-path benchmark: a veth "wire"
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
