#!/usr/bin/env bash
# The data-path benchmark (docs/design.md §4.4, §4.6), side by side in one run:
#  1. frames per second: the pacer daemon flat out (real + PAUSE gap frames)
#     against a bare AF_XDP TX loop on the same veth and core;
#  2. CPU per paced Gbit/s on the 1 Gbit/s lab wire: pspxdp in both clock
#     modes (byte clock and clockless; default attach, and spinning) next to
#     tbf and htb at the same rate and offered load, at each --cpu-rates
#     rate; with --steer-rx also the sender apart from the veth peer's
#     receive (the split);
#  3. class scaling: 10 / 1,000 / 10,000 / 100,000 classes configured, a few
#     hundred of them backlogged: daemon fps and CPU flat out, RSS, and how
#     long attach, re-attach after kill -9, and detach take.
# A benchmark prints figures, it is not a test: it never fails on a figure,
# only when it cannot run.
#
#   sudo bench/run_dp_bench.sh [--seconds S] [--repeat N] [--cpu C] [--json]
#                              [--scale LIST] [--no-scale] [--no-fps] [--no-cpu]
#                              [--cpu-rates "R..."] [--no-spin] [--steer-rx]
#                              [--keep DIR] [--flows on|off] [--ports N]
#
#   --seconds S     length of each measured interval (default 3, 1..30)
#   --repeat N      rounds of parts 1 and 2; medians are reported (default 3)
#   --cpu C         the core the bare loop and the daemon are pinned to
#                   (default 1); the senders run on the other cores (part 2:
#                   unpinned, as its deadline daemon is, unless --steer-rx)
#   --scale LIST    class counts of part 3 (default 10,1000,10000,100000)
#   --no-scale      skip part 3
#   --no-fps        skip part 1
#   --no-cpu        skip part 2 (frames per second alone: an A/B of a change)
#   --cpu-rates L   part 2: the class rates in Mbit/s (default "100 500");
#                   each offered 1.3x its rate, at most rate + 200
#   --no-spin       part 2: skip the spinning daemon's rows
#   --steer-rx      part 2: add the split: the daemon pinned to C with and
#                   without the veth peer's receive steered (RPS) to the
#                   other cores
#   --json          one JSON object on stdout instead of the tables
#   --keep DIR      keep the logs and the raw samples in DIR
#   --flows on|off  the classes' flows (docs/design.md §1.5; default on, as class set):
#                   run once each way for an A/B of what flow queuing costs
#   --ports N       parts 1 and 2: the sender's UDP flows (destination ports
#                   5001..5000+N, default 1), so that flows on has N flows
#
# Needs root, a build (BUILD_DIR, default build/), python3, ip, tc, taskset,
# bpftool. Everything lives in two network namespaces psp-bdp$$-s/-d joined by
# one veth wire and is removed on exit, even on failure; a watchdog ends the
# run after 20 minutes. Nothing touches the machine's own interfaces.
#
# How each figure is taken:
#  - bare: bench_dp_txloop, PAUSE frames of 1514 B (and 60 B), pinned to C.
#    Both it and the daemon flat out run SCHED_FIFO 10 pinned to C (chrt,
#    attach --sched fifo --cpu C): on a machine busy with other work the
#    comparison is then one of code paths, not of how much CPU each happened
#    to get.
#  - daemon flat out: line rate 100gbit, so the wire position runs away from
#    anything the daemon can emit and it never waits; one class backlogged.
#    Frames counted on the veth (tx_packets). ratio = daemon / bare 1514 B,
#    the round's bare runs before and after it averaged. The real frames go
#    to a MAC nobody has, so the receiving veth drops them as early as PAUSE
#    frames: the receiver's cost (on the sender's core) is alike per frame.
#  - CPU per paced Gbit/s: line 1gbit, one class at R Mbit/s (each of
#    --cpu-rates) offered min(1.3 R, R + 200) Mbit/s of UDP (psp_traffic,
#    unpinned as the daemon is; with --steer-rx on the other cores).
#    "machine" = busy time of all CPUs (/proc/stat) over the interval;
#    cores per paced Gbit/s = (machine - the round's idle baseline, an
#    interval with nothing running) / 100 / paced Gbit/s; "vs
#    tbf" = that figure over tbf's at the same rate in the same round
#    (median of the rounds' ratios). "daemon" = the daemon's time on a CPU
#    (/proc/PID/schedstat; utime+stime in the JSON too), which includes the
#    veth peer's receive: copy-mode AF_XDP TX hands each frame to the peer
#    inside the daemon's sendto() (netif_rx, then NET_RX in the same
#    task's softirq). Each round's paced rate is printed with the core the
#    daemon was seen on most (polled every 50 ms): a deadline daemon is
#    never pinned, and the core it lands on decides what it gets. Per rate
#    and clock (--clock byte: gap frames;
#    --clock none: clockless, what a veth gets by default) one attach: the
#    daemon as attach starts it (the default --sched deadline, which the
#    kernel never pins); "spin": the same daemon, same arguments (its
#    --clock too), restarted with --sleep-min 0. With --steer-rx, the same
#    daemon again restarted with --sched fifo --cpu C (a deadline task
#    cannot be pinned, and a steer away from an unpinned task means
#    nothing): "pinned", then "pinned, rx steered" with the peer's rx-0
#    rps_cpus (in the receiving namespace) set to every core but C, so the
#    peer's receive runs in the other cores' NET_RX softirq; rps_cpus is
#    restored after. Each split row records per CPU the frames its receive
#    processed (/proc/net/softnet_stat), NET_RX raised (/proc/softirqs) and
#    softirq time (/proc/stat, tick-sampled), so the table shows that the
#    steer moved the receive whatever the daemon's CPU did; the softirq
#    time on C with the receive there is the receive's own cost.
#    tbf/htb: the same sender, the qdisc on DEV at R (burst 32kb); paced
#    rate = DEV's L2 bytes (+FCS); pspxdp's = its class's tx_bytes.
#  - scaling: N classes at 500kbit (class set --file), 256 of them with a UDP
#    flow offered 1.2 Mbit/s each; line 100gbit, the daemon flat out.
set -u

usage() { sed -n '2,39p' "$0" | sed 's/^# \{0,1\}//'; }

SECS=3
REPEAT=3
CPU=1
JSON=0
SCALE=10,1000,10000,100000
KEEP=
CPU_PART=1
FPS_PART=1
CPU_RATES="100 500"
SPIN=1
STEER=0
FLOWS=on
PORTS=1
while (($#)); do
    case $1 in
    --seconds) SECS=${2:?}; shift 2 ;;
    --repeat) REPEAT=${2:?}; shift 2 ;;
    --cpu) CPU=${2:?}; shift 2 ;;
    --scale) SCALE=${2:?}; shift 2 ;;
    --no-scale) SCALE=; shift ;;
    --no-cpu) CPU_PART=0; shift ;;
    --no-fps) FPS_PART=0; shift ;;
    --cpu-rates) CPU_RATES=${2?}; shift 2 ;;
    --no-spin) SPIN=0; shift ;;
    --steer-rx) STEER=1; shift ;;
    --json) JSON=1; shift ;;
    --keep) KEEP=${2:?}; shift 2 ;;
    --flows) FLOWS=${2:?}; shift 2 ;;
    --ports) PORTS=${2:?}; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "run_dp_bench: unknown argument \"$1\"" >&2; usage >&2; exit 2 ;;
    esac
done
[[ $SECS =~ ^[0-9]+$ ]] && ((SECS >= 1 && SECS <= 30)) || { echo "--seconds: 1..30" >&2; exit 2; }
[[ $REPEAT =~ ^[0-9]+$ ]] && ((REPEAT >= 1 && REPEAT <= 10)) || { echo "--repeat: 1..10" >&2; exit 2; }
[[ -z $SCALE || $SCALE =~ ^[0-9]+(,[0-9]+)*$ ]] || { echo "--scale: N[,N...]" >&2; exit 2; }
CPU_RATES=${CPU_RATES//,/ }
# Below the 1gbit line with room for the 84-byte gap frames of the byte clock.
for r in $CPU_RATES; do
    [[ $r =~ ^[0-9]+$ ]] && ((r >= 1 && r <= 900)) ||
        { echo "run_dp_bench: --cpu-rates: Mbit/s 1..900 each, not \"$r\"" >&2; exit 2; }
done
[[ -n ${CPU_RATES// /} ]] || { echo "run_dp_bench: --cpu-rates: at least one rate" >&2; exit 2; }
NCPU=$(nproc)
[[ $CPU =~ ^[0-9]+$ ]] && ((CPU < NCPU)) || { echo "--cpu: 0..$((NCPU - 1))" >&2; exit 2; }
# The senders' cores: every core but C (on a 1-core machine they share it).
OTHER_CPUS=$(seq -s, 0 $((NCPU - 1)) | tr , '\n' | grep -vx "$CPU" | paste -sd,)
[[ -n $OTHER_CPUS ]] || OTHER_CPUS=$CPU
((STEER && NCPU < 2)) && { echo "run_dp_bench: --steer-rx: needs a second core to steer to" >&2; exit 2; }

[[ $FLOWS == on || $FLOWS == off ]] || { echo "run_dp_bench: --flows: on or off, not \"$FLOWS\"" >&2; exit 2; }
[[ $PORTS =~ ^[0-9]+$ ]] && ((PORTS >= 1 && PORTS <= 1024)) || { echo "run_dp_bench: --ports: 1..1024" >&2; exit 2; }
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lab/netns.sh"
TXLOOP=${TXLOOP:-$BUILD_DIR/bench/bench_dp_txloop}
psp_require run_dp_bench "$PSPXDP" "$TRAFFIC" "$TXLOOP" -- ip tc taskset chrt python3 nsenter bpftool

TAG=psp-bdp$$
SRC=$TAG-s
DST=$TAG-d
DEV=bdp$$a
PEER=bdp$$b
N="nsenter --net=/run/netns/$SRC"
WORK=$(mktemp -d /tmp/psp-bdp.XXXXXX)
RESULTS=$WORK/results.jsonl
PIDS=()
WATCHDOG=

cleanup() {
    trap - EXIT INT TERM
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
    if [[ -n $WATCHDOG ]]; then # its sleep first (by parent pid), then itself
        pkill -P "$WATCHDOG" 2>/dev/null
        kill "$WATCHDOG" 2>/dev/null
    fi
    wait 2>/dev/null
    psp_teardown "$PSPXDP" $SRC $DST $DEV
    if [[ -n $KEEP ]]; then mkdir -p "$KEEP" && cp -a "$WORK"/. "$KEEP"/; fi
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
(sleep 1200 && echo "run_dp_bench: watchdog: 20 minutes, stopping" >&2 && kill -TERM $$) \
    </dev/null >/dev/null 2>&1 &
WATCHDOG=$!

die() { echo "run_dp_bench: $*" >&2; exit 1; }
say() { ((JSON)) || echo "$*" >&2; }

# --- sampling: counters over one interval, as one JSON line
cat >"$WORK/dp.py" <<'PY'
import json, os, subprocess, sys, time

def link_stats(ns, dev):  # the device's stats64 (rx, tx) in namespace ns
    out = subprocess.run(["ip", "-n", ns, "-s", "-j", "link", "show", dev],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)[0]["stats64"]

def link_tx(ns, dev):
    tx = link_stats(ns, dev)["tx"]
    return tx["packets"], tx["bytes"]

def link_rx_packets(ns, dev):
    return link_stats(ns, dev)["rx"]["packets"] if ns else 0

def run_ns(pid):  # the task's time on a CPU, ns (exact, where utime/stime are ticks)
    if not pid:
        return 0
    with open(f"/proc/{pid}/schedstat") as f:
        return int(f.read().split()[0])

def stat_fields(pid):  # /proc/PID/stat's fields after the command name (field 3 on)
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()

def watch_cpu(pid, seconds):
    """Sleeps SECONDS; where the task was seen (/proc/PID/stat processor), share per CPU.
    A deadline daemon is never pinned: which core it shares decides what it gets."""
    seen, end = {}, time.monotonic() + seconds
    while True:
        left = end - time.monotonic()
        if left <= 0:
            break
        if pid:
            try:
                c = stat_fields(pid)[36]  # processor
                seen[c] = seen.get(c, 0) + 1
            except OSError:
                pass
        time.sleep(min(left, 0.05))
    n = sum(seen.values())
    return {c: k / n for c, k in sorted(seen.items())} if n else {}

def proc_ticks(pid):
    if not pid:
        return 0, 0
    fields = stat_fields(pid)
    return int(fields[11]), int(fields[12])  # utime, stime

def cpu_ticks():
    """The machine's busy and total ticks (/proc/stat's cpu line), and per CPU: busy and
    softirq ticks, NET_RX raised (/proc/softirqs), frames the CPU's receive processed
    (/proc/net/softnet_stat: column 0, and its CPU in column 12)."""
    busy, soft, machine = {}, {}, (0, 0)
    with open("/proc/stat") as f:
        for line in f:
            w = line.split()
            if not w[0].startswith("cpu"):
                continue
            v = [int(x) for x in w[1:]]
            if w[0] == "cpu":
                machine = (sum(v) - v[3] - v[4], sum(v))  # idle and iowait are not busy
            else:
                busy[w[0][3:]], soft[w[0][3:]] = sum(v) - v[3] - v[4], v[6]
    net_rx = {}
    with open("/proc/softirqs") as f:
        cols = [c[3:] for c in f.readline().split()]
        for line in f:
            w = line.split()
            if w[0] == "NET_RX:":
                net_rx = dict(zip(cols, (int(x) for x in w[1:])))
    done = {}
    with open("/proc/net/softnet_stat") as f:
        for i, line in enumerate(f):
            w = line.split()
            done[str(int(w[12], 16)) if len(w) > 12 else str(i)] = int(w[0], 16)
    return machine, {c: (busy[c], soft[c], net_rx.get(c, 0), done.get(c, 0)) for c in busy}

def daemon_stats(dev):
    out = subprocess.run(["bpftool", "-j", "map", "lookup", "pinned",
                          f"/sys/fs/bpf/pspxdp/{dev}/daemon_stats", "key", "0", "0", "0", "0"],
                         capture_output=True, text=True, timeout=10).stdout
    try:
        return json.loads(out)["formatted"]["value"]
    except (ValueError, KeyError):
        return {}

def class_tx_bytes(ns, pspxdp, dev, cid):
    out = subprocess.run(["nsenter", f"--net=/run/netns/{ns}", pspxdp, "status", dev, "-j"],
                         capture_output=True, text=True, timeout=20).stdout
    try:
        return sum(c["tx_bytes"] for c in json.loads(out)["classes"] if c["class"] == cid)
    except (ValueError, KeyError):
        return 0

def rss(pid):
    if not pid:
        return {}
    r = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM"):
                r[k] = int(v.split()[0])
    return r

def sample(ns, dev, pid, seconds, pspxdp, label, extra):
    hz = os.sysconf("SC_CLK_TCK")
    peer_ns, peer = os.environ.get("PEER_NS"), os.environ.get("PEER_DEV")
    pid = int(pid) if pid else 0
    paced = label.startswith("cpu_pspxdp")  # one class, 1:1: its own byte count
    d0 = daemon_stats(dev) if pid else {}
    # The class's bytes over the status calls' own midpoints: a call takes
    # tens of ms, which over the interval's dt alone read as rate (+2.6 %
    # at 1 s, seen).
    s0 = time.monotonic(); c0 = class_tx_bytes(ns, pspxdp, dev, "1:1") if paced else 0
    s0 = (s0 + time.monotonic()) / 2
    t0 = time.monotonic(); p0, b0 = link_tx(ns, dev); u0, k0 = proc_ticks(pid); (m0, a0), q0 = cpu_ticks()
    n0 = run_ns(pid); x0 = link_rx_packets(peer_ns, peer)
    on_cpus = watch_cpu(pid, seconds)
    t1 = time.monotonic(); p1, b1 = link_tx(ns, dev); u1, k1 = proc_ticks(pid); (m1, a1), q1 = cpu_ticks()
    n1 = run_ns(pid); x1 = link_rx_packets(peer_ns, peer)
    d1 = daemon_stats(dev) if pid else {}
    s1 = time.monotonic(); c1 = class_tx_bytes(ns, pspxdp, dev, "1:1") if paced else 0
    s1 = (s1 + time.monotonic()) / 2
    dt = t1 - t0
    dd = lambda k: d1.get(k, 0) - d0.get(k, 0)
    real = dd("wire_frames")
    r = {"kind": label, "seconds": dt, "tx_packets": p1 - p0, "fps": (p1 - p0) / dt,
         # DEV's L2 bytes with FCS: what a class rate counts (real frames only
         # without the daemon; with it, real = wire_frames' share below)
         "dev_l2_gbit": ((b1 - b0) + 4 * (p1 - p0)) * 8 / dt / 1e9,
         "daemon_cpu_pct": (u1 - u0 + k1 - k0) / hz / dt * 100,
         "daemon_user_pct": (u1 - u0) / hz / dt * 100,
         "daemon_run_pct": (n1 - n0) / 1e9 / dt * 100,
         "peer_rx_fps": (x1 - x0) / dt,
         "daemon_on_cpus": on_cpus,
         "machine_cpu_pct": (m1 - m0) / (a1 - a0) * 100 * os.cpu_count() if a1 > a0 else 0,
         "real_fps": real / dt,
         "paced_gbit": (c1 - c0) * 8 / (s1 - s0) / 1e9,
         "kicks_per_frame": dd("kicks") / (p1 - p0) if p1 > p0 else None,
         "underrun_s": dd("underrun_bytes") * 8 / 1e9 / dt if pid else None,
         "rss": rss(pid),
         # where the veth peer's receive ran (the split, --steer-rx)
         "per_cpu": {c: {"busy_pct": (q1[c][0] - q0[c][0]) / hz / dt * 100,
                         "softirq_pct": (q1[c][1] - q0[c][1]) / hz / dt * 100,
                         "net_rx_per_s": (q1[c][2] - q0[c][2]) / dt,
                         "rx_frames_per_s": (q1[c][3] - q0[c][3]) / dt} for c in q1 if c in q0}}
    r.update(json.loads(extra))
    print(json.dumps(r))

cmd = sys.argv[1]
if cmd == "sample":
    sample(sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5]), sys.argv[6], sys.argv[7],
           sys.argv[8] if len(sys.argv) > 8 else "{}")
elif cmd == "rss":
    print(json.dumps(rss(int(sys.argv[2]))))
PY

# --- the wire: two namespaces, one veth
psp_make_wire $SRC $DST $DEV $PEER 10.88.0 || die "cannot build the wire"
# The real frames' destination MAC is nobody's: the receiving veth drops them
# (PACKET_OTHERHOST) as early as PAUSE frames, see above.
ip -n $SRC neigh replace 10.88.0.2 lladdr 02:00:00:00:bd:01 dev $DEV nud permanent

daemon_pid() { cat /run/pspxdp/$DEV.pid 2>/dev/null; }
now() { date +%s.%N; }
since() { python3 -c "import sys, time; print(f'{time.time() - float(sys.argv[1]):.3f}')" "$1"; }

attach() { # attach RATE CLOCK [ATTACH-ARGS...]
    # CLOCK byte or none, always explicit: parts 1 and 3 measure the
    # gap-frame data path (--clock byte; a veth would get the clockless mode
    # by default), part 2 both. The flat-out parts add --gap-horizon inf:
    # under the default horizon a daemon whose classes are due far apart on
    # a 100gbit line idles instead of running flat out.
    $N "$PSPXDP" attach $DEV --line-rate "$1" --clock "$2" "${@:3}" >>"$WORK/attach.log" 2>&1 ||
        die "attach failed: $(tail -5 "$WORK/attach.log")"
    [[ -n $(daemon_pid) ]] || die "no daemon pid"
}
# The flat-out daemon: pinned to C and SCHED_FIFO 10, as the bare loop.
PINNED=(--sched fifo --cpu "$CPU")

detach() { # (detach removes the daemon's log: keep a copy)
    cp /run/pspxdp/$DEV.log "$WORK/daemon.tmp" 2>/dev/null
    $N "$PSPXDP" detach $DEV >>"$WORK/attach.log" 2>&1
    cat "$WORK/daemon.tmp" >>"$WORK/daemon.log" 2>/dev/null
}

bare() { # bare LEN [BUDGET]: kind bareLEN, or bareLENbBUDGET with a TX budget
    local kind=bare$1${2:+b$2}
    # The daemon just detached released queue 0 of DEV; the kernel frees it
    # later (deferred, under rtnl_lock: 12 s seen on a busy machine), and
    # the loop waits for it up to 30 s (datapath::retry_busy) and says so.
    $N chrt -f 10 taskset -c "$CPU" "$TXLOOP" $DEV --seconds "$SECS" --len "$1" --cpu "$CPU" \
        ${2:+--budget "$2"} --json >"$WORK/bare.json" 2>"$WORK/bare.err" ||
        die "bare loop failed: $(cat "$WORK/bare.err")"
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); d['kind']=sys.argv[2]; print(json.dumps(d))" \
        "$WORK/bare.json" "$kind" >>"$RESULTS"
}

# Part 1 and the split pin the senders to the cores the daemon is not pinned
# to. Part 2's unpinned daemon (deadline) goes where the kernel puts it: a
# sender pinned to "the other core" then shares the daemon's core whenever
# the kernel put it there, the other core idle (a round in three lost 21-26 %
# at 500 Mbit/s so, both clocks): there the senders run unpinned, as a host's
# applications do. SENDER_CPUS empty: unpinned.
SENDER_CPUS=$OTHER_CPUS
sender() { # sender PORT RATE SECONDS [PORTS]: psp_traffic on SENDER_CPUS
    local pin=()
    [[ -n $SENDER_CPUS ]] && pin=(taskset -c "$SENDER_CPUS")
    $N "${pin[@]}" "$TRAFFIC" send 10.88.0.2 "$1" --rate "$2" --size 1472 \
        --seconds "$3" --ports "${4:-1}" >/dev/null 2>>"$WORK/sender.err" &
    PIDS+=($!)
    SENDER=$!
}

sample() { # sample LABEL [EXTRA-JSON]: one interval (the daemon's, if one runs)
    PEER_NS=$DST PEER_DEV=$PEER python3 "$WORK/dp.py" sample $SRC $DEV "$(daemon_pid)" "$SECS" "$PSPXDP" "$1" "${2:-{\}}" \
        >>"$RESULTS" || die "sampling failed"
}

paced_class() { # paced_class RATE: class 1:1 at RATE, UDP dport 5001.. (--ports) to it
    local dport=5001
    ((PORTS > 1)) && dport=5001-$((5000 + PORTS))
    $N "$PSPXDP" class set $DEV 1:1 "$1" flows $FLOWS >/dev/null || die "class set failed"
    $N "$PSPXDP" filter add $DEV proto udp dport $dport classid 1:1 >/dev/null || die "filter failed"
}

# Linux >= 6.17 lets one copy-mode sendto() send more than 32 descriptors
# (XDP_MAX_TX_SKB_BUDGET); the daemon then asks for 64. The ratio is taken
# against a bare loop that asks the same, and shown against the default too.
BUDGET=
$N "$TXLOOP" $DEV --seconds 0.1 --budget 64 >/dev/null 2>&1 && BUDGET=64

daemon_arg() { # daemon_arg OPT: OPT's value in the running daemon's argv
    local argv i
    mapfile -d '' -t argv <"/proc/$(daemon_pid)/cmdline"
    for ((i = 1; i + 1 < ${#argv[@]}; ++i)); do [[ ${argv[i]} == "$1" ]] && echo "${argv[i + 1]}" && return; done
}

respawn() { # respawn CLOCK OPT VALUE...: the daemon again, its own argv with each OPT set to VALUE
    # Stops the one running (by its pid) and runs it by hand with the
    # arguments attach gave it (argv[0] is "pspxdp": attach runs
    # /proc/self/exe under that name), so a row differs from the default
    # one only in what it names; CLOCK is checked, never changed.
    local pid argv i clock=$1
    shift
    pid=$(daemon_pid)
    mapfile -d '' -t argv <"/proc/$pid/cmdline"
    [[ " ${argv[*]} " == *" --clock $clock "* ]] || die "the daemon's arguments lack --clock $clock: ${argv[*]}"
    while (($#)); do
        for ((i = 1; i < ${#argv[@]}; ++i)); do [[ ${argv[i]} == "$1" ]] && break; done
        if ((i < ${#argv[@]})); then argv[i + 1]=$2; else argv+=("$1" "$2"); fi
        shift 2
    done
    kill -TERM "$pid"
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    $N "$PSPXDP" "${argv[@]:1}" >>"$WORK/daemon-respawn.log" 2>&1 &
    PIDS+=($!)
    for _ in $(seq 50); do [[ $(daemon_pid) == "$!" ]] && break; sleep 0.1; done
    [[ $(daemon_pid) == "$!" ]] || die "the daemon did not start again: $(tail -3 "$WORK/daemon-respawn.log")"
}

# The split (--steer-rx): the receiving peer's RPS mask, in its namespace's
# sysfs (ip netns exec mounts it; nsenter --net alone shows the host's).
RPS=/sys/class/net/$PEER/queues/rx-0/rps_cpus
steer() { # steer MASK: the peer's receive to MASK's cores (RPS); its old value undoes it
    ip netns exec $DST sh -c "echo $1 >$RPS" || die "cannot write $1 to $RPS in $DST"
}
if ((STEER)); then
    RPS0=$(ip netns exec $DST cat $RPS) || die "no $RPS in $DST"
    # Every core but C, in the kernel's bitmap format (32-bit words, commas).
    STEER_MASK=$(python3 -c 'import sys
n, c = int(sys.argv[1]), int(sys.argv[2])
h = f"{((1 << n) - 1) & ~(1 << c):x}"
h = h.zfill((len(h) + 7) // 8 * 8)
print(",".join(h[i:i + 8] for i in range(0, len(h), 8)))' "$NCPU" "$CPU")
fi

say "pspxdp data-path benchmark: $REPEAT rounds of ${SECS}s, daemon on CPU $CPU (senders on $OTHER_CPUS), flows $FLOWS, $PORTS UDP flow(s); $(uptime)"
for ((r = 1; r <= REPEAT; r++)); do
    SENDER_CPUS=$OTHER_CPUS # part 1: the daemon pinned to C
    # The machine's own load, for the CPU figures: each round's, as other
    # work on the machine comes and goes.
    sample idle "{\"round\": $r}"
    if ((FPS_PART)); then
        say "round $r/$REPEAT: bare loop 1514 B${BUDGET:+ (32 and $BUDGET a kick)}, 60 B"
        bare 1514
        [[ -z $BUDGET ]] || bare 1514 $BUDGET
        bare 60

        say "round $r/$REPEAT: daemon flat out (line 100gbit, one class 4gbit offered 1500mbit)"
        attach 100gbit byte "${PINNED[@]}" --gap-horizon inf
        paced_class 4gbit
        sender 5001 1500mbit $((SECS + 4)) $PORTS
        sleep 1.5 # backlogged from here on
        sample daemon_max
        kill $SENDER 2>/dev/null; wait $SENDER 2>/dev/null
        detach
        bare 1514 # the round's reference: the mean of before and after
        [[ -z $BUDGET ]] || bare 1514 $BUDGET
    fi
    ((CPU_PART)) || continue

    SENDER_CPUS=
    ((STEER)) && SENDER_CPUS=$OTHER_CPUS # the split pins the daemon to C
    for rate in $CPU_RATES; do
        offered=$((rate * 13 / 10 < rate + 200 ? rate * 13 / 10 : rate + 200))
        extra="\"round\": $r, \"rate_mbit\": $rate, \"offered_mbit\": $offered"
        for clock in byte none; do
            say "round $r/$REPEAT: CPU per paced Gbit/s: pspxdp --clock $clock at ${rate}mbit offered ${offered}mbit"
            attach 1gbit $clock
            paced_class ${rate}mbit
            sender 5001 ${offered}mbit $(((1 + SPIN + 2 * STEER) * (SECS + 8) + 4)) $PORTS
            sleep 1.5 # backlogged from here on
            sample cpu_pspxdp "{$extra, \"clock\": \"$clock\"}"
            sleep_min=$(daemon_arg --sleep-min)
            [[ -n $sleep_min ]] || die "the daemon's arguments lack --sleep-min"
            if ((SPIN)); then # a daemon that spins whenever backlogged
                respawn $clock --sleep-min 0
                sleep 1.5
                sample cpu_pspxdp_spin "{$extra, \"clock\": \"$clock\"}"
            fi
            if ((STEER)); then # the split: pinned to C, the peer's receive there or elsewhere
                respawn $clock --sleep-min "$sleep_min" --sched fifo --cpu "$CPU"
                sleep 1.5
                sample cpu_pspxdp_pinned "{$extra, \"clock\": \"$clock\", \"rps_cpus\": \"$RPS0\"}"
                steer "$STEER_MASK"
                sleep 1
                sample cpu_pspxdp_steered "{$extra, \"clock\": \"$clock\", \"rps_cpus\": \"$STEER_MASK\"}"
                steer "$RPS0"
            fi
            kill $SENDER 2>/dev/null; wait $SENDER 2>/dev/null
            detach
        done
        for q in tbf htb; do
            say "round $r/$REPEAT: CPU per paced Gbit/s: $q at ${rate}mbit offered ${offered}mbit"
            if [[ $q == tbf ]]; then
                $N tc qdisc add dev $DEV root tbf rate ${rate}mbit burst 32kb latency 10ms
            else
                $N tc qdisc add dev $DEV root handle 1: htb default 10
                $N tc class add dev $DEV parent 1: classid 1:10 htb rate ${rate}mbit ceil ${rate}mbit burst 32kb
            fi
            sender 5001 ${offered}mbit $((SECS + 3)) $PORTS
            sleep 1
            sample cpu_$q "{$extra}"
            kill $SENDER 2>/dev/null; wait $SENDER 2>/dev/null
            $N tc qdisc del dev $DEV root
        done
    done
done
SENDER_CPUS=$OTHER_CPUS # part 3: the daemon pinned to C

for n in ${SCALE//,/ }; do
    say "scaling: $n classes configured, 256 backlogged (line 100gbit)"
    t=$(now)
    attach 100gbit byte --buffer $((128 << 20)) "${PINNED[@]}" --gap-horizon inf
    t_attach=$(since "$t")
    for ((i = 1; i <= n; ++i)); do printf '2:%x 500kbit flows %s\n' $(((i - 1) % 65535 + 1)) $FLOWS; done |
        awk -v n="$n" 'NR <= 65535 {print; next} {split($1, a, ":"); $1 = "3:" a[2]; print}' \
            >"$WORK/classes"
    t=$(now)
    $N "$PSPXDP" class set $DEV --file "$WORK/classes" || die "class set --file ($n) failed"
    t_classes=$(since "$t")
    backlogged=$((n < 256 ? n : 256))
    psp_port_filters $DEV 20001 $backlogged 2 1 || die "filters failed"
    sleep 1 # the daemon takes the classes
    rss0=$(python3 "$WORK/dp.py" rss "$(daemon_pid)")
    sender 20001 $((backlogged * 1200))kbit $((SECS + 4)) $backlogged
    sleep 1.5
    sample scale "{\"classes\": $n, \"backlogged\": $backlogged, \"rss_idle\": $rss0, \"attach_s\": $t_attach, \"class_set_s\": $t_classes}"
    kill $SENDER 2>/dev/null; wait $SENDER 2>/dev/null
    # kill -9 and attach again: the new daemon takes over n classes.
    kill -9 "$(daemon_pid)"
    sleep 0.3
    t=$(now)
    attach 100gbit byte --buffer $((128 << 20)) "${PINNED[@]}" --gap-horizon inf
    t_reattach=$(since "$t")
    t=$(now)
    detach
    t_detach=$(since "$t")
    echo "{\"kind\": \"scale_times\", \"classes\": $n, \"reattach_s\": $t_reattach, \"detach_s\": $t_detach}" >>"$RESULTS"
done

# --- report: medians over rounds
python3 - "$RESULTS" "$JSON" "$CPU" "$(uptime)" "$FLOWS" "$PORTS" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
as_json, cpu, up = sys.argv[2] == "1", int(sys.argv[3]), sys.argv[4]
flows, ports = sys.argv[5], int(sys.argv[6])
def of(kind, key):
    return [r[key] for r in rows if r["kind"] == kind and r.get(key) is not None]
def med(kind, key):
    v = of(kind, key)
    return statistics.median(v) if v else None
def median(v):
    v = [x for x in v if x is not None]
    return statistics.median(v) if v else None
def rounds(kind):  # the mean of before/after the daemon, each round
    v = of(kind, "fps")
    return [(v[2 * i] + v[2 * i + 1]) / 2 for i in range(len(v) // 2)]
d, b32 = of("daemon_max", "fps"), rounds("bare1514")
budget = next((r["budget"] for r in rows if r["kind"].startswith("bare1514b")), 32)
b = rounds(f"bare1514b{budget}") if budget != 32 else b32  # like for like: the daemon's budget
ratios = [x / y for x, y in zip(d, b) if y]
ratios32 = [x / y for x, y in zip(d, b32) if y]
idle = med("idle", "machine_cpu_pct") or 0

# Part 2: one row per (shaper, clock, variant, rate), medians over rounds.
def paced(r):  # Gbit/s: the class's own bytes (pspxdp), DEV's L2 bytes (qdiscs)
    return r["paced_gbit"] if r["kind"].startswith("cpu_pspxdp") else r["dev_l2_gbit"]
idle_of = {r["round"]: r["machine_cpu_pct"] for r in rows if r["kind"] == "idle" and "round" in r}
def per_gbit(r):  # machine CPU % (net of the round's idle baseline) per paced Gbit/s
    return (r["machine_cpu_pct"] - idle_of.get(r["round"], idle)) / paced(r) if paced(r) > 0 else None
def samples(kind, rate, clock=None):
    return [r for r in rows if r["kind"] == kind and r.get("rate_mbit") == rate
            and (clock is None or r.get("clock") == clock)]
tbf_per = {(r["round"], r["rate_mbit"]): per_gbit(r) for r in rows if r["kind"] == "cpu_tbf"}
def others_pct(r, key):
    return sum(v[key] for c, v in r.get("per_cpu", {}).items() if int(c) != cpu)
def summarise(kind, rate, clock):
    s = samples(kind, rate, clock)
    if not s:
        return None
    vs = [per_gbit(r) / tbf_per[r["round"], rate] for r in s
          if per_gbit(r) is not None and tbf_per.get((r["round"], rate))]
    p = median([per_gbit(r) for r in s])
    here = lambda r, key: r.get("per_cpu", {}).get(str(cpu), {}).get(key)
    return {"rate_mbit": rate, "offered_mbit": s[0]["offered_mbit"], "rounds": len(s),
            "paced_gbit": median([paced(r) for r in s]),
            "machine_cpu_pct": median([r["machine_cpu_pct"] for r in s]),
            "machine_cpu_pct_per_gbit": p,
            "cores_per_gbit": p / 100 if p is not None else None,
            "daemon_cpu_pct": median([r["daemon_cpu_pct"] for r in s]) if kind.startswith("cpu_pspxdp") else None,
            "daemon_user_pct": median([r["daemon_user_pct"] for r in s]) if kind.startswith("cpu_pspxdp") else None,
            "daemon_run_pct": median([r.get("daemon_run_pct") for r in s]) if kind.startswith("cpu_pspxdp") else None,
            "fps": median([r["fps"] for r in s]),
            "peer_rx_fps": median([r.get("peer_rx_fps") for r in s]),
            "vs_tbf": median(vs),
            # per round: the paced Mbit/s and the core the daemon was seen on most
            "per_round": [{"round": r["round"], "paced_mbit": paced(r) * 1e3,
                           "daemon_on_cpus": r.get("daemon_on_cpus", {})} for r in s],
            # where the softirq work ran: the daemon's core and the others
            "softirq_pct_cpu": median([here(r, "softirq_pct") for r in s]),
            "softirq_pct_others": median([others_pct(r, "softirq_pct") for r in s]),
            "net_rx_per_s_cpu": median([here(r, "net_rx_per_s") for r in s]),
            "net_rx_per_s_others": median([others_pct(r, "net_rx_per_s") for r in s]),
            "rx_frames_per_s_cpu": median([here(r, "rx_frames_per_s") for r in s]),
            "rx_frames_per_s_others": median([others_pct(r, "rx_frames_per_s") for r in s]),
            "busy_pct_cpu": median([here(r, "busy_pct") for r in s])}
rates = sorted({r["rate_mbit"] for r in rows if "rate_mbit" in r})
cpu_rows, split = [], []
for rate in rates:
    for kind, clock, shaper, variant in (
            ("cpu_pspxdp", "byte", "pspxdp", "default"), ("cpu_pspxdp_spin", "byte", "pspxdp", "spin"),
            ("cpu_pspxdp", "none", "pspxdp", "default"), ("cpu_pspxdp_spin", "none", "pspxdp", "spin"),
            ("cpu_tbf", None, "tbf", "burst 32kb"), ("cpu_htb", None, "htb", "burst 32kb")):
        row = summarise(kind, rate, clock)
        if row:
            cpu_rows.append(dict(row, shaper=shaper, clock=clock, variant=variant))
    for clock in ("byte", "none"):
        pinned, steered = (summarise(k, rate, clock) for k in ("cpu_pspxdp_pinned", "cpu_pspxdp_steered"))
        if pinned and steered:
            split.append({"rate_mbit": rate, "clock": clock, "pinned": pinned, "steered": steered,
                          "daemon_run_pct_moved": pinned["daemon_run_pct"] - steered["daemon_run_pct"],
                          # the check that RPS moved the receive, whatever the daemon's CPU did:
                          # C's receive processed fewer frames, the other cores' more
                          "steer_moved_rx": (steered["rx_frames_per_s_others"] or 0) > (pinned["rx_frames_per_s_others"] or 0)
                          and (steered["rx_frames_per_s_cpu"] or 0) < (pinned["rx_frames_per_s_cpu"] or 0)})
# The issue-7 shape: the byte clock's rows at the highest rate, keyed by kind.
top = rates[-1] if rates else None
legacy = {}
for kind in ("cpu_pspxdp", "cpu_pspxdp_spin", "cpu_tbf", "cpu_htb"):
    s = summarise(kind, top, "byte" if kind.startswith("cpu_pspxdp") else None) if top else None
    legacy[kind] = {k: (s or {}).get(k) for k in ("paced_gbit", "machine_cpu_pct", "daemon_cpu_pct",
                                                  "machine_cpu_pct_per_gbit")}
scale = {}
for r in rows:
    if r["kind"] in ("scale", "scale_times"):
        scale.setdefault(r["classes"], {}).update(r)
summary = {"daemon_core": cpu, "uptime": up.strip(), "idle_machine_cpu_pct": idle,
           "flows": flows, "ports": ports,
           "tx_budget": budget,
           "bare_1514_mpps": statistics.median(b) / 1e6 if b else None,
           "bare_1514_default_budget_mpps": statistics.median(b32) / 1e6 if b32 else None,
           "bare_60_mpps": (med("bare60", "fps") or 0) / 1e6,
           "daemon_mpps": (med("daemon_max", "fps") or 0) / 1e6,
           "ratio": statistics.median(ratios) if ratios else None, "ratios": ratios,
           "ratio_default_budget": statistics.median(ratios32) if ratios32 else None,
           "target_ratio": 0.95, "daemon_max_cpu_pct": med("daemon_max", "daemon_cpu_pct"),
           "daemon_max_kicks_per_frame": med("daemon_max", "kicks_per_frame"),
           "cpu": legacy, "cpu_rows": cpu_rows, "cpu_split": split,
           "scale": [scale[k] for k in sorted(scale)],
           "samples": rows}
if as_json:
    print(json.dumps(summary))
    sys.exit(0)
f = lambda v, fmt: "-" if v is None else fmt.format(v)
if d or b32:
    print(f"pspxdp data path, one core (CPU {cpu}), veth, copy-mode AF_XDP; medians of {len(b)} rounds; "
          f"classes with flows {flows}, {ports} UDP flow(s) offered")
    print(f"{'':36} {'Mpps':>8}  per round")
    print(f"{'bare AF_XDP TX loop, 1514 B':36} {f(summary['bare_1514_default_budget_mpps'], '{:.3f}'):>8}  "
          + " ".join(f"{x/1e6:.3f}" for x in b32) + "  (mean of before/after the daemon; 32 a kick)")
    if budget != 32:
        print(f"{f'  the same, {budget} a kick as the daemon':36} {f(summary['bare_1514_mpps'], '{:.3f}'):>8}  "
              + " ".join(f"{x/1e6:.3f}" for x in b))
    print(f"{'bare AF_XDP TX loop, 60 B':36} {f(summary['bare_60_mpps'], '{:.3f}'):>8}")
    print(f"{'daemon flat out, real + gap frames':36} {f(summary['daemon_mpps'], '{:.3f}'):>8}  "
          + " ".join(f"{x/1e6:.3f}" for x in d))
    print(f"{f'ratio daemon / bare, {budget} a kick (>= 0.95)':36} {f(summary['ratio'], '{:.3f}'):>8}  "
          + " ".join(f"{x:.3f}" for x in ratios))
    if budget != 32:
        print(f"{'  against the bare loop at 32 a kick':36} "
              f"{f(summary['ratio_default_budget'], '{:.3f}'):>8}  " + " ".join(f"{x:.3f}" for x in ratios32))
    print(f"  daemon: {f(summary['daemon_max_cpu_pct'], '{:.0f}')}% CPU, "
          f"{f(summary['daemon_max_kicks_per_frame'], '{:.3f}')} kicks per frame")
    print()
names = {("byte", "default"): "pspxdp byte clock", ("byte", "spin"): "pspxdp byte clock --spin",
         ("none", "default"): "pspxdp clockless", ("none", "spin"): "pspxdp clockless --spin"}
if cpu_rows:
    print(f"CPU per paced Gbit/s: line 1gbit, one class at R offered min(1.3 R, R + 200); medians of "
          f"{max(r['rounds'] for r in cpu_rows)} rounds; machine = busy % of all cores; cores/Gbit net of "
          f"each round's idle baseline (median {idle:.0f}%); pspxdp as attach starts it (--sched deadline)")
    print(f"  {'R Mbit/s':>8}  {'shaper':26} {'paced Mbit/s':>12} {'frames/s':>8} {'machine %':>9} "
          f"{'cores/Gbit':>10} {'daemon %':>8} {'vs tbf':>6}  per round: Mbit/s @ the daemon's core")
    for s in cpu_rows:
        what = names.get((s["clock"], s["variant"]), f"{s['shaper']} {s['variant']}")
        print(f"  {s['rate_mbit']:>8}  {what:26} {f(s['paced_gbit'] and s['paced_gbit'] * 1e3, '{:.1f}'):>12} "
              f"{f(s['fps'], '{:.0f}'):>8} {f(s['machine_cpu_pct'], '{:.0f}'):>9} "
              f"{f(s['cores_per_gbit'], '{:.2f}'):>10} {f(s['daemon_run_pct'], '{:.1f}'):>8} "
              f"{f(s['vs_tbf'], '{:.2f}'):>6}  " + " ".join(
                  f"{x['paced_mbit']:.1f}" + (f"@{max(x['daemon_on_cpus'], key=x['daemon_on_cpus'].get)}"
                                              if x["daemon_on_cpus"] else "") for x in s["per_round"]))
    print("  frames/s: on DEV (real + gap frames); daemon %: its time on a CPU (schedstat), the peer's "
          "receive included; vs tbf: cores/Gbit over tbf's, same rate and round")
    print()
if split:
    print(f"The split: the daemon SCHED_FIFO pinned to CPU {cpu}; the veth peer's receive on its core "
          f"(inside its sendto()), or steered by RPS to the other cores; per core: softirq %, "
          f"frames received (softnet_stat)")
    print(f"  {'R Mbit/s':>8}  {'clock':9} {'peer rx':8} {'rx fr/s':>8} {'daemon %':>8} {'user %':>6} "
          f"{'machine %':>9} {'cores/Gbit':>10} {'softirq % C':>11} {'others':>6} {'rx fr/s C':>9} {'others':>8}")
    for s in split:
        for label, x in (("on C", s["pinned"]), ("steered", s["steered"])):
            print(f"  {s['rate_mbit']:>8}  {'byte' if s['clock'] == 'byte' else 'clockless':9} {label:8} "
                  f"{f(x['peer_rx_fps'], '{:.0f}'):>8} "
                  f"{f(x['daemon_run_pct'], '{:.1f}'):>8} {f(x['daemon_user_pct'], '{:.1f}'):>6} "
                  f"{f(x['machine_cpu_pct'], '{:.0f}'):>9} {f(x['cores_per_gbit'], '{:.2f}'):>10} "
                  f"{f(x['softirq_pct_cpu'], '{:.1f}'):>11} {f(x['softirq_pct_others'], '{:.1f}'):>6} "
                  f"{f(x['rx_frames_per_s_cpu'], '{:.0f}'):>9} {f(x['rx_frames_per_s_others'], '{:.0f}'):>8}")
    for s in split:
        p, q = s["pinned"], s["steered"]
        print(f"  {s['rate_mbit']} Mbit/s {'byte clock' if s['clock'] == 'byte' else 'clockless'}: the steer "
              + ("moved" if s["steer_moved_rx"] else "did NOT move")
              + f" the receive: frames/s received on CPU {cpu} {p['rx_frames_per_s_cpu']:.0f} -> "
              f"{q['rx_frames_per_s_cpu']:.0f}, on the others {p['rx_frames_per_s_others']:.0f} -> "
              f"{q['rx_frames_per_s_others']:.0f}, NET_RX raised on CPU {cpu} {p['net_rx_per_s_cpu']:.0f} -> "
              f"{q['net_rx_per_s_cpu']:.0f}/s "
              f"(the peer received {q['peer_rx_fps']:.0f} frames/s); the daemon: "
              f"{p['daemon_run_pct']:.1f} % of a CPU with the receive on its core, "
              f"{q['daemon_run_pct']:.1f} % with it steered away; softirq time on CPU {cpu} with the "
              f"receive there (the receive's own cost, tick-sampled): {p['softirq_pct_cpu']:.1f} % of a core")
    print()
if summary["scale"]:
    print("class scaling: line 100gbit, the daemon flat out; RSS with a 128 MiB buffer")
    print(f"  {'classes':>8} {'backlogged':>10} {'Mpps':>7} {'daemon %':>9} {'RSS kB':>9} "
          f"{'attach s':>9} {'class set s':>11} {'re-attach s':>11} {'detach s':>9}")
    for s in summary["scale"]:
        print(f"  {s['classes']:>8} {s.get('backlogged', 0):>10} {s.get('fps', 0) / 1e6:>7.3f} "
              f"{s.get('daemon_cpu_pct', 0):>9.0f} {s.get('rss', {}).get('VmRSS', 0):>9} "
              f"{s.get('attach_s', 0):>9.2f} {s.get('class_set_s', 0):>11.2f} "
              f"{s.get('reattach_s', 0):>11.2f} {s.get('detach_s', 0):>9.2f}")
    sc = [s for s in summary["scale"] if s.get("rss")]
    if len(sc) >= 2:
        a, z = sc[0], sc[-1]
        per = (z["rss"]["VmRSS"] - a["rss"]["VmRSS"]) * 1024 / (z["classes"] - a["classes"])
        print(f"  RSS per class: {per:.0f} bytes ({a['classes']} -> {z['classes']} classes)")
    print()
print(up.strip())
PY
