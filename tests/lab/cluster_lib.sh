# Shared by tests/lab/test_cluster_*.sh (docs/design.md §11.6): a 3-member
# etcd cluster and hosts, each a network namespace with its own pspxdp
# attachment on its own veth, whose agents reach etcd over a control veth to
# a bridge. Source it after lab/netns.sh and psp_begin:
#
#   cl_etcd_up                 3 members in namespace $CL_ETCD_NS, healthy
#   cl_host I                  host I: DEV c3dI$$ attached, class 1:1 paced
#   cl_join I [ARGS...]        its agent joins group $CL_GROUP in the background
#   cl_applied I RATE_BPS      true when host I's agent applies RATE_BPS
#   cl_cut I / cl_heal I       host I's control veth down / up
#
# Every namespace, attachment, etcd member and agent goes with psp_end.
# The lease TTL is 3 s, keep-alives every 1 s, the safe span 2.494 s
# (§11.3); timing bounds below are derived from those, with room for a
# loaded machine.

CL_NET=10.$((RANDOM % 200 + 20)).$((RANDOM % 250))
CL_ETCD_NS=c3e$$ CL_BR_NS=c3b$$
CL_GROUP=g$$
CL_BUDGET=300mbit CL_BUDGET_BPS=300000000
CL_ETCD_PIDS=(0 0 0)
CL_AGENTS=()
CL_ENDPOINTS="http://$CL_NET.10:23790,http://$CL_NET.10:23791,http://$CL_NET.10:23792"

# cl_etcd_member K [new|existing]: member K (0..2) on $CL_NET.10, client
# port 23790+K, peer 23800+K; its data under $TMP (kept across restarts).
cl_etcd_member() {
    local k=$1 cluster="" i
    for i in 0 1 2; do cluster+="${cluster:+,}m$i=http://$CL_NET.10:$((23800 + i))"; done
    # etcd's own timing (heartbeat 100 ms, election 1 s); niced, as the
    # daemons are, so that a loaded machine (builds) does not make its
    # members miss heartbeats and elect leaders all the time.
    # nsenter, not a function: $! must be etcd's own pid (nsenter and nice exec).
    nsenter --net=/run/netns/$CL_ETCD_NS nice -n -10 etcd --name m$k --data-dir "$TMP/etcd$k" \
        --listen-client-urls http://$CL_NET.10:$((23790 + k)) \
        --advertise-client-urls http://$CL_NET.10:$((23790 + k)) \
        --listen-peer-urls http://$CL_NET.10:$((23800 + k)) \
        --initial-advertise-peer-urls http://$CL_NET.10:$((23800 + k)) \
        --initial-cluster "$cluster" --initial-cluster-token c3$$ \
        --initial-cluster-state new --heartbeat-interval 100 --election-timeout 1000 \
        >>"$TMP/etcd$k.log" 2>&1 &
    CL_ETCD_PIDS[$k]=$!
    PIDS+=($!)
}

# cl_etcd_healthy K: member K answers /health with a leader.
cl_etcd_healthy() {
    psp_in_ns $CL_ETCD_NS curl -s -m 1 "http://$CL_NET.10:$((23790 + $1))/health" 2>/dev/null |
        grep -q '"health":"true"'
}

# cl_etcd_status K FIELD: member K's /v3/maintenance/status FIELD ("leader",
# or "id": its own member id).
cl_etcd_status() {
    psp_in_ns $CL_ETCD_NS curl -s -m 1 -X POST -d '{}' \
        "http://$CL_NET.10:$((23790 + $1))/v3/maintenance/status" 2>/dev/null | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(d["header"]["member_id"] if sys.argv[1] == "id" else d["leader"])' "$2" 2>/dev/null
}
cl_etcd_follower() { # K: member K is up and not the leader
    local id
    id=$(cl_etcd_status "$1" id) && [[ -n $id && $id != "$(cl_etcd_status "$1" leader)" ]]
}
# cl_etcd_not_leader K: member K hands the leadership to the next member
# if it has it (etcd's MoveLeader), and is a follower.
cl_etcd_not_leader() {
    local k=$1 next=$((($1 + 1) % 3))
    cl_etcd_follower $k && return 0
    psp_in_ns $CL_ETCD_NS curl -s -m 2 -X POST -d "{\"targetID\": \"$(cl_etcd_status $next id)\"}" \
        "http://$CL_NET.10:$((23790 + k))/v3/maintenance/transfer-leadership" >/dev/null
    psp_wait_for 10 cl_etcd_follower $k
}

cl_etcd_up() {
    psp_netns $CL_BR_NS && psp_netns $CL_ETCD_NS || return 1
    ip -n $CL_BR_NS link add br0 type bridge && ip -n $CL_BR_NS link set br0 up || return 1
    ip -n $CL_ETCD_NS link add c3ev$$ type veth peer name c3eb$$ netns $CL_BR_NS || return 1
    ip -n $CL_BR_NS link set c3eb$$ master br0 up
    ip -n $CL_ETCD_NS addr add $CL_NET.10/24 dev c3ev$$
    ip -n $CL_ETCD_NS link set c3ev$$ up
    local k
    for k in 0 1 2; do cl_etcd_member $k; done
    for k in 0 1 2; do psp_wait_for 20 cl_etcd_healthy $k || { echo "etcd member $k not healthy" >&2; return 1; }; done
}

# cl_host I: namespaces c3hI$$ (the host) and c3pI$$ (its peer), DEV
# c3dI$$ attached with class 1:1 paced, a control veth c3cI$$ on $CL_NET.I.
cl_host() {
    local i=$1 dev=c3d$1$$
    PSP_DEVS+=("$dev")
    # Each wire in its own namespaces: the addresses may repeat across tests.
    psp_make_wire c3h$i$$ c3p$i$$ "$dev" c3q$i$$ "10.99.$i" || return 1
    ip -n c3h$i$$ link add c3c$i$$ type veth peer name c3k$i$$ netns $CL_BR_NS || return 1
    ip -n $CL_BR_NS link set c3k$i$$ master br0 up
    ip -n c3h$i$$ addr add $CL_NET.$i/24 dev c3c$i$$
    ip -n c3h$i$$ link set c3c$i$$ up
    cl_ns $i "$PSPXDP" attach "$dev" --line-rate 1gbit >/dev/null &&
        cl_ns $i "$PSPXDP" class set "$dev" 1:1 100mbit
}

cl_ns() { # I CMD...: CMD in host I's namespace
    local i=$1
    shift
    psp_in_ns c3h$i$$ "$@"
}

# cl_join I ARGS...: host I's agent (name hI, log $TMP/hI.rates) in the
# background; its pid in CL_AGENTS[I].
cl_join() {
    local i=$1
    shift
    nsenter --net=/run/netns/c3h$i$$ nice -n -10 "$PSPXDP" group join c3d$i$$ --etcd "$CL_ENDPOINTS" --group $CL_GROUP \
        --budget $CL_BUDGET --class 1:1 --name h$i --log "$TMP/h$i.rates" "$@" \
        >>"$TMP/h$i.log" 2>&1 &
    CL_AGENTS[$i]=$!
    PIDS+=($!)
}

# cl_state I EXPR: true when EXPR holds for s, host I's agent state (status -j's groups[0]).
cl_state() {
    cl_ns "$1" "$PSPXDP" status c3d$1$$ -j 2>/dev/null | python3 -c '
import json, sys
d = json.load(sys.stdin)
s = d["groups"][0]
sys.exit(0 if eval(sys.argv[1]) else 1)' "$2" 2>/dev/null
}
cl_applied() { cl_state "$1" "s['applied_bps'] == $2 and s['phase'] == 'member'"; }

# cl_rate I: the rate host I's class is configured with now (the daemon's view).
cl_rate() {
    cl_ns "$1" "$PSPXDP" class show c3d$1$$ -j | python3 -c '
import json, sys
print(next(c["rate_bps"] for c in json.load(sys.stdin)["classes"] if c["class"] == "1:1"))'
}

cl_cut() { ip -n c3h$1$$ link set c3c$1$$ down; }
cl_heal() { ip -n c3h$1$$ link set c3c$1$$ up; }

# cl_lines I: lines in host I's rate log.
cl_lines() { wc -l <"$TMP/h$1.rates"; }
# cl_first_after I T_NS [OP RATE]: time (ns) of host I's first change after
# T_NS (to a rate OP RATE, e.g. "== 50000000"), or empty.
cl_first_after() {
    awk -v t="$2" -v op="${3:-}" -v r="${4:-0}" '$1 > t && (op == "" || (op == "==" && $2 == r) ||
        (op == ">" && $2 > r)) {print $1; exit}' "$TMP/h$1.rates"
}
cl_now_ns() { date +%s%N; }
# cl_within A_NS B_NS MAX_S: B - A <= MAX_S seconds (and B given); prints it.
cl_within() {
    [[ -n $2 ]] || { echo "     (no such change)"; return 1; }
    python3 -c 'import sys; d = (int(sys.argv[2]) - int(sys.argv[1])) / 1e9
print(f"     {d:.3f} s"); sys.exit(0 if d <= float(sys.argv[3]) else 1)' "$1" "$2" "$3"
}
cl_after() { # A_NS B_NS MIN_S: B - A >= MIN_S seconds
    [[ -n $2 ]] || { echo "     (no such change)"; return 1; }
    python3 -c 'import sys; d = (int(sys.argv[2]) - int(sys.argv[1])) / 1e9
print(f"     {d:.3f} s"); sys.exit(0 if d >= float(sys.argv[3]) else 1)' "$1" "$2" "$3"
}
# cl_check_logs: the invariant checker over every host's rate log.
cl_check_logs() {
    local logs=() i
    for i in "$@"; do logs+=("$TMP/h$i.rates"); done
    "$PSPXDP" group check --budget $CL_BUDGET "${logs[@]}"
}
# cl_revision: etcd's store revision (every write bumps it once).
cl_revision() {
    local k
    for k in 0 1 2; do
        psp_in_ns $CL_ETCD_NS curl -s -m 2 -X POST -d '{"key":"AA=="}' \
            "http://$CL_NET.10:$((23790 + k))/v3/kv/range" 2>/dev/null |
            python3 -c 'import json, sys; print(json.load(sys.stdin)["header"]["revision"])' 2>/dev/null &&
            return 0
    done
    return 1
}
