# Shared by tests/lab/test_cluster_*.sh (docs/design.md §11.6): a 3-member
# etcd cluster and hosts, each a network namespace with its own pspxdp
# attachment on its own veth, whose agents reach etcd over a control veth to
# a bridge. Source it after lab/netns.sh and psp_begin:
#
#   cl_etcd_up                 3 members in namespace $CL_ETCD_NS, healthy
#   cl_host I                  host I: DEV ${CL_P}dI$$ attached, class 1:1 paced
#   cl_join I [ARGS...]        its agent joins group $CL_GROUP in the background
#   cl_site_tree I             host I: an inner class 1:10 with two leaves that borrow
#   cl_applied I RATE_BPS      true when host I's agent applies RATE_BPS
#   cl_cut I / cl_heal I       host I's control veth down / up
#
#   cl_ours                    pids of this test's agents and watchdogs
#
# Start with cl_begin (not psp_begin): every agent and watchdog goes with
# cl_end, then every namespace, attachment and etcd member with psp_end.
# The lease TTL is 3 s, keep-alives every 1 s, the safe span 2.494 s
# (§11.3); timing bounds below are derived from those, with room for a
# loaded machine.

# Names start with CL_P (c3 unless CL_PREFIX says otherwise), etcd's
# client ports are CL_PORT+K and its peer ports CL_PORT+10+K (23790 unless
# CL_PORT_BASE says otherwise): two runs side by side do not collide.
CL_P=${CL_PREFIX:-c3}
CL_PORT=${CL_PORT_BASE:-23790}
CL_NET=$(psp_random_net)
CL_ETCD_NS=${CL_P}e$$ CL_BR_NS=${CL_P}b$$
CL_GROUP=g$$
CL_BUDGET=300mbit CL_BUDGET_BPS=300000000
CL_ETCD_PIDS=(0 0 0)
CL_AGENTS=()
# JSON fields and time checks: tests/lab/cluster_checks.py.
CL() { python3 "$PSP_ROOT/tests/lab/cluster_checks.py" "$@"; }
CL_ENDPOINTS="http://$CL_NET.10:$CL_PORT,http://$CL_NET.10:$((CL_PORT + 1)),http://$CL_NET.10:$((CL_PORT + 2))"

# cl_etcd_member K [new|existing]: member K (0..2) on $CL_NET.10, client
# port CL_PORT+K, peer CL_PORT+10+K; its data under $TMP (kept across restarts).
cl_etcd_member() {
    local k=$1 cluster="" i
    for i in 0 1 2; do cluster+="${cluster:+,}m$i=http://$CL_NET.10:$((CL_PORT + 10 + i))"; done
    # etcd's own timing: heartbeat 100 ms, election timeout 500 ms (a
    # follower campaigns 0.5-1 s after the last heartbeat it heard, so a
    # lost leader is replaced within the agents' deadlines: see the leader
    # kill in test_cluster_faults.sh). Niced, as the daemons are, so that a
    # loaded machine (builds) does not make its members miss heartbeats and
    # elect leaders all the time.
    # nsenter, not a function: $! must be etcd's own pid (nsenter and nice exec).
    nsenter --net=/run/netns/$CL_ETCD_NS nice -n -10 etcd --name m$k --data-dir "$TMP/etcd$k" \
        --listen-client-urls http://$CL_NET.10:$((CL_PORT + k)) \
        --advertise-client-urls http://$CL_NET.10:$((CL_PORT + k)) \
        --listen-peer-urls http://$CL_NET.10:$((CL_PORT + 10 + k)) \
        --initial-advertise-peer-urls http://$CL_NET.10:$((CL_PORT + 10 + k)) \
        --initial-cluster "$cluster" --initial-cluster-token $CL_P$$ \
        --initial-cluster-state new --heartbeat-interval 100 --election-timeout 500 \
        >>"$TMP/etcd$k.log" 2>&1 &
    CL_ETCD_PIDS[$k]=$!
    PIDS+=($!)
}

# cl_etcd_healthy K: member K answers /health with a leader.
cl_etcd_healthy() {
    psp_in_ns $CL_ETCD_NS curl -s -m 1 "http://$CL_NET.10:$((CL_PORT + $1))/health" 2>/dev/null |
        grep -q '"health":"true"'
}

# cl_etcd_status K FIELD: member K's /v3/maintenance/status FIELD ("leader",
# or "id": its own member id).
cl_etcd_status() {
    psp_in_ns $CL_ETCD_NS curl -s -m 1 -X POST -d '{}' \
        "http://$CL_NET.10:$((CL_PORT + $1))/v3/maintenance/status" 2>/dev/null | CL etcd-status "$2" 2>/dev/null
}
cl_etcd_follower() { # K: member K is up and not the leader
    local id
    id=$(cl_etcd_status "$1" id) && [[ -n $id && $id != "$(cl_etcd_status "$1" leader)" ]]
}
# cl_etcd_leader: the index (0..2) of the member that is the leader, or empty.
cl_etcd_leader() {
    local k id
    for k in 0 1 2; do
        id=$(cl_etcd_status $k id) && [[ -n $id && $id == "$(cl_etcd_status $k leader)" ]] &&
            { echo $k; return 0; }
    done
    return 1
}
cl_etcd_status_id_of() { cl_etcd_status "$1" id; }
# cl_etcd_leader_seen_by K: the leader member K knows (empty or 0: none).
cl_etcd_leader_seen_by() {
    local l
    l=$(cl_etcd_status "$1" leader) && [[ -n $l && $l != 0 ]] && echo "$l"
}
# The election bound of the leader-kill test: the safe span (TTL 3 s:
# 2.494 s) minus the keep-alive period (1 s) minus the agent's hedge (a
# keep-alive unanswered 200 ms goes to the next member too).
CL_ELECTION_BOUND_S=1.294

# cl_etcd_not_leader K: member K hands the leadership to the next member
# if it has it (etcd's MoveLeader), and is a follower.
cl_etcd_not_leader() {
    local k=$1 next=$((($1 + 1) % 3))
    cl_etcd_follower $k && return 0
    psp_in_ns $CL_ETCD_NS curl -s -m 2 -X POST -d "{\"targetID\": \"$(cl_etcd_status $next id)\"}" \
        "http://$CL_NET.10:$((CL_PORT + k))/v3/maintenance/transfer-leadership" >/dev/null
    psp_wait_for 10 cl_etcd_follower $k
}

cl_etcd_up() {
    psp_netns $CL_BR_NS && psp_netns $CL_ETCD_NS || return 1
    ip -n $CL_BR_NS link add br0 type bridge && ip -n $CL_BR_NS link set br0 up || return 1
    ip -n $CL_ETCD_NS link add ${CL_P}ev$$ type veth peer name ${CL_P}eb$$ netns $CL_BR_NS || return 1
    ip -n $CL_BR_NS link set ${CL_P}eb$$ master br0 up
    ip -n $CL_ETCD_NS addr add $CL_NET.10/24 dev ${CL_P}ev$$
    ip -n $CL_ETCD_NS link set ${CL_P}ev$$ up
    local k
    for k in 0 1 2; do cl_etcd_member $k; done
    for k in 0 1 2; do psp_wait_for 20 cl_etcd_healthy $k || { echo "etcd member $k not healthy" >&2; return 1; }; done
}

# cl_up: etcd's three members, then hosts 1..3 attached (cl_host); the test
# ends there (psp_finish, exit 1) if any of them is not up.
cl_up() {
    psp_check "etcd: 3 members healthy" cl_etcd_up || { psp_finish; exit 1; }
    local i
    for i in 1 2 3; do psp_check "host $i attached, class 1:1 paced" cl_host $i || { psp_finish; exit 1; }; done
}

# cl_host I: namespaces ${CL_P}hI$$ (the host) and ${CL_P}pI$$ (its peer), DEV
# ${CL_P}dI$$ attached with class 1:1 paced, a control veth ${CL_P}cI$$ on $CL_NET.I.
cl_host() {
    local i=$1 dev=${CL_P}d$1$$
    PSP_DEVS+=("$dev")
    # Each wire in its own namespaces: the addresses may repeat across tests.
    psp_make_wire ${CL_P}h$i$$ ${CL_P}p$i$$ "$dev" ${CL_P}q$i$$ "10.99.$i" || return 1
    ip -n ${CL_P}h$i$$ link add ${CL_P}c$i$$ type veth peer name ${CL_P}k$i$$ netns $CL_BR_NS || return 1
    ip -n $CL_BR_NS link set ${CL_P}k$i$$ master br0 up
    ip -n ${CL_P}h$i$$ addr add $CL_NET.$i/24 dev ${CL_P}c$i$$
    ip -n ${CL_P}h$i$$ link set ${CL_P}c$i$$ up
    cl_ns $i "$PSPXDP" attach "$dev" --line-rate 1gbit >/dev/null &&
        cl_ns $i "$PSPXDP" class set "$dev" 1:1 100mbit
}

# cl_site_tree I: on host I's DEV the inner class 1:10 (rate 60 ceil 200
# Mbit/s) with leaves 1:11 (rate 20) and 1:12 (rate 30, prio 1), both ceil
# 200, UDP ports 5011 and 5012 filtered to them (design §11.10).
cl_site_tree() {
    local i=$1 dev=${CL_P}d$1$$
    cl_ns $i "$PSPXDP" class add $dev 1:10 rate 60mbit ceil 200mbit &&
        cl_ns $i "$PSPXDP" class add $dev 1:11 parent 1:10 rate 20mbit ceil 200mbit &&
        cl_ns $i "$PSPXDP" class add $dev 1:12 parent 1:10 rate 30mbit ceil 200mbit prio 1 &&
        cl_ns $i "$PSPXDP" filter add $dev proto udp dport 5011 classid 1:11 &&
        cl_ns $i "$PSPXDP" filter add $dev proto udp dport 5012 classid 1:12
}

cl_ns() { # I CMD...: CMD in host I's namespace
    local i=$1
    shift
    psp_in_ns ${CL_P}h$i$$ "$@"
}

# cl_join I ARGS...: host I's agent (name hI, log $TMP/hI.rates, class
# $CL_CLASS, 1:1 unless set) in the
# background; its pid in CL_AGENTS[I]. setpriv --pdeathsig: if this script
# dies without its traps (SIGKILL, a timeout), the agent gets SIGTERM and
# leaves, and its watchdog follows it (nsenter, setpriv and nice exec: the
# agent is this shell's child).
cl_join() {
    local i=$1
    shift
    nsenter --net=/run/netns/${CL_P}h$i$$ setpriv --pdeathsig TERM nice -n -10 "$PSPXDP" group join \
        ${CL_P}d$i$$ --etcd "$CL_ENDPOINTS" --group $CL_GROUP \
        --budget $CL_BUDGET --class "${CL_CLASS:-1:1}" --name h$i --log "$TMP/h$i.rates" "$@" \
        >>"$TMP/h$i.log" 2>&1 &
    CL_AGENTS[$i]=$!
}

# cl_ours: the pids of every agent of this test's group and of their
# watchdogs (forks of the agent: the same command line).
cl_ours() { pgrep -f -- "group join .*--group $CL_GROUP( |$)"; }

# cl_watchdog I: the pid of host I's agent's watchdog (its log says it).
cl_watchdog() { sed -n 's/.*watchdog pid \([0-9]*\)).*/\1/p' "$TMP/h$1.log" | tail -1; }

# cl_end: every agent of ours (and its watchdog) ends: continued (one may be
# stopped), SIGTERM (they leave), then after 5 s SIGKILL. Runs before
# psp_end (whose wait would hang on a stopped one), also on failure.
cl_end() {
    local p left
    for p in $(cl_ours); do kill -CONT "$p" 2>/dev/null; kill -TERM "$p" 2>/dev/null; done
    psp_wait_for 5 eval '[[ -z $(cl_ours) ]]'
    left=$(cl_ours)
    [[ -n $left ]] && echo "cluster: agents still running after SIGTERM, killed: $left" >&2
    for p in $left; do kill -KILL "$p" 2>/dev/null; done
}
cl_begin() { # psp_begin, with cl_end before psp_end on exit
    psp_begin "$1"
    trap 'cl_end; psp_end' EXIT
}

# cl_state I EXPR: true when EXPR holds for s, host I's agent state (status -j's groups[0]).
cl_state() {
    cl_ns "$1" "$PSPXDP" status ${CL_P}d$1$$ -j 2>/dev/null | CL state "$2" 2>/dev/null
}
cl_applied() { cl_state "$1" "s['applied_bps'] == $2 and s['phase'] == 'member'"; }

# cl_rate I: the rate host I's class is configured with now (the daemon's view).
cl_rate() {
    cl_ns "$1" "$PSPXDP" class show ${CL_P}d$1$$ -j | CL rate
}

# cl_revoked I: host I's watchdog revoked its gone agent's lease (its log says so).
cl_revoked() { grep -aq 'the agent is gone: lease [0-9]* revoked' "$TMP/h$1.log"; }

cl_cut() { ip -n ${CL_P}h$1$$ link set ${CL_P}c$1$$ down; }
cl_heal() { ip -n ${CL_P}h$1$$ link set ${CL_P}c$1$$ up; }

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
    CL within "$1" "$2" "$3"
}
cl_after() { # A_NS B_NS MIN_S: B - A >= MIN_S seconds
    [[ -n $2 ]] || { echo "     (no such change)"; return 1; }
    CL after "$1" "$2" "$3"
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
            "http://$CL_NET.10:$((CL_PORT + k))/v3/kv/range" 2>/dev/null |
            CL revision 2>/dev/null &&
            return 0
    done
    return 1
}
