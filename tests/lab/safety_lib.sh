# Shared by the safety tests (test_safety_*.sh), on top of lab/netns.sh's
# harness (psp_begin, psp_check, psp_in_ns, psp_wait_for, psp_finish): what
# a command said, a device in a throwaway namespace, a snapshot of
# everything pspxdp may touch. Source it after setting TAG (unique per run,
# e.g. pss$$) - device names are derived from it and must stay under 16
# characters.
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$HERE/../../lab/netns.sh"
psp_require "$(basename "$0")" "$PSPXDP" -- ip tc nsenter timeout python3 jq
psp_begin safety

# fails CMD... : the command exits non-zero (its stderr in $TMP/err, stdout in $TMP/out)
fails() { ! "$@" >"$TMP/out" 2>"$TMP/err"; }
# works CMD... : the command exits 0 (outputs as for fails)
works() { "$@" >"$TMP/out" 2>"$TMP/err"; }
# rc CMD...: CMD's exit code, its stdout/stderr in $TMP/out, $TMP/err.
rc() { "$@" >"$TMP/out" 2>"$TMP/err"; echo $?; }
exits() { # exits WANT CMD...: CMD exits WANT
    local want=$1 got
    shift
    got=$(rc "$@")
    [[ $got == "$want" ]] && return 0
    echo "     exit $got (want $want): $(head -c 300 "$TMP/err")"
    return 1
}
said() { grep -q -- "$1" "$TMP/err"; }        # the last command's stderr says $1
one_line() { [[ $(wc -l <"$TMP/err") -eq 1 ]]; } # ... in exactly one line
no_libbpf() { ! grep -q 'libbpf' "$TMP/err"; }
show_err() { sed 's/^/     | /' "$TMP/err"; }
keep_err() { cp "$TMP/err" "$TMP/err.$1"; } # keep_err NAME: keep the last stderr
# Compares messages without the "pspxdp: " and "pspxdp: CMD: " prefixes.
same_as() { diff -q <(sed -E 's/^pspxdp: (attach: |detach: |status: )?//' "$TMP/err") <(sed -E 's/^pspxdp: (attach: |detach: |status: )?//' "$TMP/err.$1") >/dev/null; }

# mkdev NS DEV: a veth DEV (peer DEV-p... truncated to DEVp) in NS, both up;
# DEV's pins and run files are removed at exit.
mkdev() {
    PSP_DEVS+=("$2")
    ip -n "$1" link add "$2" type veth peer name "${2}p" || return 1
    ip -n "$1" link set "$2" up && ip -n "$1" link set "${2}p" up
}
ifindex() { psp_in_ns "$1" cat "/sys/class/net/$2/ifindex" 2>/dev/null || psp_in_ns "$1" ip -o link show "$2" | cut -d: -f1; }
# Everything pspxdp may touch for DEV in NS, as text.
snapshot() { # snapshot NS DEV
    local ns=$1 dev=$2
    echo "## links";   psp_in_ns "$ns" ip -o link show | sed 's/ link-netns [^ ]*//'
    echo "## qdiscs";  psp_in_ns "$ns" tc qdisc show dev "$dev"
    echo "## egress";  psp_in_ns "$ns" tc filter show dev "$dev" egress
    echo "## ingress"; psp_in_ns "$ns" tc filter show dev "$dev" ingress
    echo "## pins";    ls -lA "/sys/fs/bpf/pspxdp/$dev" 2>/dev/null # not ..: other devices come and go
    echo "## run";     ls "/run/pspxdp/$dev".* 2>/dev/null
}
alive() { [[ -n $1 ]] && ! psp_gone "$1"; }

# one_dev: the usual set-up of a test on one device: namespace $NS with the
# veth $DEV, P (pspxdp there), and is_clean (DEV as it was before anything).
one_dev() {
    NS=$TAG-n DEV=${TAG}d
    psp_netns $NS || exit 1
    mkdev $NS $DEV || exit 1
    clean=$(snapshot $NS $DEV)
}
P() { psp_in_ns $NS "$PSPXDP" "$@"; }
is_clean() { [[ "$(snapshot $NS $DEV)" == "$clean" ]]; }
