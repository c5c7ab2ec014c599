# Shared by the safety tests (test_safety_*.sh): the binary, a device in a
# throwaway network namespace, check(), a snapshot of everything pspxdp may
# touch, and a cleanup that undoes every state. Source it after setting TAG
# (unique per run, e.g. pss$$) - device names are derived from it and must
# stay under 16 characters.
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$HERE/../../lab/netns.sh"
psp_require "$(basename "$0")" "$PSPXDP" -- ip tc nsenter timeout python3
FAILS=0
NSES=()   # namespaces to delete at exit
DEVS=()   # device names whose pins/run files to remove at exit
TMP=$(mktemp -d /tmp/psp-safety.XXXXXX)

check() { # check DESCRIPTION COMMAND...
    local what=$1; shift
    if "$@"; then echo "ok   - $what"; else echo "FAIL - $what"; FAILS=$((FAILS + 1)); fi
}
# fails CMD... : the command exits non-zero (its stderr in $TMP/err, stdout in $TMP/out)
fails() { ! "$@" >"$TMP/out" 2>"$TMP/err"; }
# works CMD... : the command exits 0 (outputs as for fails)
works() { "$@" >"$TMP/out" 2>"$TMP/err"; }
said() { grep -q -- "$1" "$TMP/err"; }        # the last command's stderr says $1
one_line() { [[ $(wc -l <"$TMP/err") -eq 1 ]]; } # ... in exactly one line
no_libbpf() { ! grep -q 'libbpf' "$TMP/err"; }
show_err() { sed 's/^/     | /' "$TMP/err"; }
keep_err() { cp "$TMP/err" "$TMP/err.$1"; } # keep_err NAME: keep the last stderr
# Compares messages without the "pspxdp: " and "pspxdp: CMD: " prefixes.
same_as() { diff -q <(sed -E 's/^pspxdp: (attach: |detach: |status: )?//' "$TMP/err") <(sed -E 's/^pspxdp: (attach: |detach: |status: )?//' "$TMP/err.$1") >/dev/null; }

# mkns NAME: a namespace with lo up; removed at exit.
mkns() {
    ip netns add "$1" || { echo "cannot create netns $1"; exit 1; }
    NSES+=("$1")
    ip -n "$1" link set lo up
}
# mkdev NS DEV: a veth DEV (peer DEV-p... truncated to DEVp) in NS, both up.
mkdev() {
    ip -n "$1" link add "$2" type veth peer name "${2}p" || return 1
    ip -n "$1" link set "$2" up && ip -n "$1" link set "${2}p" up
}
in_ns() { local ns=$1; shift; nsenter --net="/run/netns/$ns" "$@"; }
ifindex() { in_ns "$1" cat "/sys/class/net/$2/ifindex" 2>/dev/null || in_ns "$1" ip -o link show "$2" | cut -d: -f1; }
# Everything pspxdp may touch for DEV in NS, as text.
snapshot() { # snapshot NS DEV
    local ns=$1 dev=$2
    echo "## links";   in_ns "$ns" ip -o link show | sed 's/ link-netns [^ ]*//'
    echo "## qdiscs";  in_ns "$ns" tc qdisc show dev "$dev"
    echo "## egress";  in_ns "$ns" tc filter show dev "$dev" egress
    echo "## ingress"; in_ns "$ns" tc filter show dev "$dev" ingress
    echo "## pins";    ls -la "/sys/fs/bpf/pspxdp/$dev" 2>/dev/null
    echo "## run";     ls "/run/pspxdp/$dev".* 2>/dev/null
}
daemon_pid() { cat "/run/pspxdp/$1.pid" 2>/dev/null; }
alive() { [[ -n $1 ]] && ! psp_gone "$1"; }
# wait_for SECONDS CMD...: polls every 0.1 s until CMD succeeds.
wait_for() {
    local n=$(($1 * 10)); shift
    while ((n-- > 0)); do "$@" && return 0; sleep 0.1; done
    return 1
}

# one_dev: the usual set-up of a test on one device: namespace $NS with the
# veth $DEV, P (pspxdp there), and is_clean (DEV as it was before anything).
one_dev() {
    NS=$TAG-n DEV=${TAG}d
    DEVS+=("$DEV")
    mkns $NS
    mkdev $NS $DEV || exit 1
    clean=$(snapshot $NS $DEV)
}
P() { in_ns $NS "$PSPXDP" "$@"; }
is_clean() { [[ "$(snapshot $NS $DEV)" == "$clean" ]]; }

safety_cleanup() {
    local d ns pid
    for d in "${DEVS[@]}"; do
        pid=$(daemon_pid "$d"); [[ -n $pid ]] && kill -9 "$pid" 2>/dev/null
    done
    for ns in "${NSES[@]}"; do ip netns del "$ns" 2>/dev/null; done
    for d in "${DEVS[@]}"; do
        rm -rf "/sys/fs/bpf/pspxdp/$d"
        rm -f "/run/pspxdp/$d".*
    done
    rmdir /sys/fs/bpf/pspxdp /run/pspxdp 2>/dev/null
    rm -rf "$TMP"
}
trap safety_cleanup EXIT
trap 'exit 130' INT TERM

finish() {
    echo "$FAILS failure(s)"
    [[ $FAILS -eq 0 ]]
}
