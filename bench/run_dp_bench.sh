#!/usr/bin/env bash
# The data-path benchmark: frames per second the pacer daemon emits (real +
# PAUSE gap frames) on one core, against a bare AF_XDP TX loop on the same
# veth in the same run; the daemon's CPU per paced Gbit/s; its memory (RSS)
# with 8 and with 256 classes. A benchmark prints figures, it is not a test:
# it never fails on a figure, only when it cannot run.
#
#   sudo bench/run_dp_bench.sh [--seconds S] [--repeat N] [--cpu C] [--json]
#                              [--max-rate RATE] [--max-offer RATE]
#                              [--max-window BYTES] [--no-rss] [--keep DIR]
#
#   --seconds S       length of each measured interval (default 3, 1..30)
#   --repeat N        repeats of the bare/daemon/CPU rounds; medians are
#                     reported (default 3, 1..10)
#   --cpu C           the one core the bare loop and the daemon are pinned to
#                     (default 1); the traffic senders run on the other cores
#   --max-rate RATE   the backlogged class's rate in the max-fps run (default
#                     4gbit of a 100gbit line: 4 % of the wire bytes are real
#                     frames, the rest gap frames)
#   --max-offer RATE  what is offered to that class (default 1500mbit)
#   --max-window B    attach --window for the max-fps run (default: attach's,
#                     64 KiB: at 100 Gbit/s that is ~43 frames per clock
#                     reading, so the daemon runs one loop pass per ~43
#                     frames; a deeper window shows the loop's cost per pass)
#   --json            one JSON object on stdout instead of the table
#   --keep DIR        keep the logs and the raw samples in DIR
#
# Needs root, a build (BUILD_DIR, default build/; `ninja -C build` builds
# bench_dp_txloop), python3, ip, taskset. Everything it creates lives in two
# network namespaces psp-bdp$$-s / -d joined by one veth "wire" (bdp$$a ->
# bdp$$b), and is removed on exit, even on failure; a watchdog ends the run
# after 15 minutes. Nothing touches the machine's own interfaces.
#
# What is measured, per round (rounds interleave, so load from elsewhere on
# the machine hits both sides alike):
#  1. bare: bench_dp_txloop on the wire veth, pinned to C: PAUSE frames of
#     1514 B and of 60 B, tight loop, kicks, completions. Mpps.
#  2. daemon max: `pspxdp attach DEV --line-rate 100gbit`, daemon pinned to C
#     (taskset on its pid), one paced class offered more than its rate. The
#     wire position at 100 Gbit/s runs away from anything the daemon can
#     emit, so it never waits: it emits as fast as it can, mostly 1514-byte
#     gaps (the bare loop's 1514 B case is the reference). Frames counted on
#     the veth (tx_packets over the interval). ratio = daemon / bare 1514,
#     the mean of the round's bare runs just before and just after it.
#     The real frames go to a MAC nobody has (static neighbour), so the
#     receiving veth drops them as early as it drops the PAUSE frames: the
#     receiver's cost, which lands on the daemon's core (veth delivers in the
#     sender's context), is the same per frame on both sides.
#  3. CPU per paced Gbit/s: line rate 1gbit, class 500mbit offered 650mbit;
#     daemon CPU from /proc/PID/stat (utime+stime) over the interval divided
#     by the class's paced rate (its L2 bytes incl. FCS, from pspxdp status).
#     Twice: the default daemon (sleeps through waits > 50 us while a batch
#     ahead of the wire) and one restarted with --sleep-min-us 0 (spins
#     whenever backlogged).
#  4. RSS: attach --queues 8 / 256, then N-1 paced classes (1:1..) plus the
#     default normal class 1:ffff = N classes on N queues, one UDP port per
#     class, every class offered more than its rate. VmRSS / VmHWM at start,
#     after the traffic, and the UMEM size the daemon logged.
set -u

usage() { sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; }

SECS=3
REPEAT=3
CPU=1
JSON=0
MAX_RATE=4gbit
MAX_OFFER=1500mbit
MAX_WINDOW=
RSS=1
KEEP=
while (($#)); do
    case $1 in
    --seconds) SECS=${2:?}; shift 2 ;;
    --repeat) REPEAT=${2:?}; shift 2 ;;
    --cpu) CPU=${2:?}; shift 2 ;;
    --max-rate) MAX_RATE=${2:?}; shift 2 ;;
    --max-offer) MAX_OFFER=${2:?}; shift 2 ;;
    --max-window) MAX_WINDOW=${2:?}; shift 2 ;;
    --no-rss) RSS=0; shift ;;
    --json) JSON=1; shift ;;
    --keep) KEEP=${2:?}; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "run_dp_bench: unknown argument \"$1\"" >&2; usage >&2; exit 2 ;;
    esac
done
[[ $SECS =~ ^[0-9]+$ ]] && ((SECS >= 1 && SECS <= 30)) || { echo "--seconds: 1..30" >&2; exit 2; }
[[ $REPEAT =~ ^[0-9]+$ ]] && ((REPEAT >= 1 && REPEAT <= 10)) || { echo "--repeat: 1..10" >&2; exit 2; }
NCPU=$(nproc)
[[ $CPU =~ ^[0-9]+$ ]] && ((CPU < NCPU)) || { echo "--cpu: 0..$((NCPU - 1))" >&2; exit 2; }
# The senders' cores: every core but C (on a 1-core machine they share it).
OTHER_CPUS=$(seq -s, 0 $((NCPU - 1)) | tr , '\n' | grep -vx "$CPU" | paste -sd,)
[[ -n $OTHER_CPUS ]] || OTHER_CPUS=$CPU

HERE=$(cd "$(dirname "$0")" && pwd)
BUILD_DIR=${BUILD_DIR:-$HERE/../build}
PSPXDP=${PSPXDP:-$BUILD_DIR/user/pspxdp}
TRAFFIC=${TRAFFIC:-$BUILD_DIR/lab/psp_traffic}
TXLOOP=${TXLOOP:-$BUILD_DIR/bench/bench_dp_txloop}
source "$HERE/../lab/netns.sh"
psp_require run_dp_bench "$PSPXDP" "$TRAFFIC" "$TXLOOP" -- ip taskset python3 nsenter

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
# Bounded in time whatever happens.
(sleep 900 && echo "run_dp_bench: watchdog: 15 minutes, stopping" >&2 && kill -TERM $$) \
    </dev/null >/dev/null 2>&1 &
WATCHDOG=$!

die() { echo "run_dp_bench: $*" >&2; exit 1; }
say() { ((JSON)) || echo "$*" >&2; }

# --- helpers in python: sampling counters, the sender for many ports, report
cat >"$WORK/dp.py" <<'PY'
import json, os, socket, subprocess, sys, time

def link_stats(ns, dev):
    out = subprocess.run(["ip", "-n", ns, "-s", "-j", "link", "show", dev],
                         capture_output=True, text=True, check=True).stdout
    tx = json.loads(out)[0]["stats64"]["tx"]
    return tx["packets"], tx["bytes"]

def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]), int(fields[12])  # utime, stime (fields 14, 15)

def status(nscmd, pspxdp, dev):
    out = subprocess.run(nscmd + [pspxdp, "status", dev, "-j"], capture_output=True,
                         text=True, timeout=10).stdout
    return json.loads(out)

def class_of(st, cid):
    for c in st.get("classes", []):
        if c["class"] == cid:
            return c
    return {}

def synced_status(nscmd, pspxdp, dev, cid):
    # The daemon publishes class counters every 100 ms: wait for a fresh
    # publication so the interval's ends are both "just published".
    st = status(nscmd, pspxdp, dev)
    first = class_of(st, cid).get("tx_frames")
    end = time.monotonic() + 0.3
    while time.monotonic() < end:
        st = status(nscmd, pspxdp, dev)
        if class_of(st, cid).get("tx_frames") != first:
            break
    return st

def sample(ns, dev, pid, seconds, pspxdp, cid, label):
    nscmd = ["nsenter", f"--net=/run/netns/{ns}"]
    hz = os.sysconf("SC_CLK_TCK")
    s0 = synced_status(nscmd, pspxdp, dev, cid)
    t0 = time.monotonic(); p0, b0 = link_stats(ns, dev); u0, k0_ = cpu_ticks(pid)
    time.sleep(seconds)
    s1 = synced_status(nscmd, pspxdp, dev, cid)
    t1 = time.monotonic(); p1, b1 = link_stats(ns, dev); u1, k1_ = cpu_ticks(pid)
    dt = t1 - t0
    k0, k1 = class_of(s0, cid), class_of(s1, cid)
    d0, d1 = s0.get("daemon") or {}, s1.get("daemon") or {}
    frames = k1.get("tx_frames", 0) - k0.get("tx_frames", 0)
    l2 = k1.get("tx_bytes", 0) - k0.get("tx_bytes", 0)
    r = {"kind": label, "seconds": dt, "tx_packets": p1 - p0, "fps": (p1 - p0) / dt,
         "wire_gbit": ((b1 - b0) + 24 * (p1 - p0)) * 8 / dt / 1e9,
         "cpu_pct": (u1 - u0 + k1_ - k0_) / hz / dt * 100,
         "user_pct": (u1 - u0) / hz / dt * 100, "sys_pct": (k1_ - k0_) / hz / dt * 100,
         "class_frames": frames, "class_fps": frames / dt, "paced_gbit": l2 * 8 / dt / 1e9,
         "class_drops": k1.get("drops", 0) - k0.get("drops", 0),
         "class_backlog": k1.get("backlog", 0),
         "kicks": (d1.get("tx", {}).get("kicks", 0) - d0.get("tx", {}).get("kicks", 0)),
         "stats_frames": (d1.get("tx", {}).get("frames", 0) - d0.get("tx", {}).get("frames", 0)),
         "stats_gaps": (d1.get("tx", {}).get("gaps", 0) - d0.get("tx", {}).get("gaps", 0))}
    print(json.dumps(r))

def mem(pid):
    r = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM", "VmSize", "RssAnon", "RssFile", "RssShmem"):
                r[k] = int(v.split()[0])
    return r

def blast(dst, port0, nports, size, pps, seconds):
    # Round robin over nports UDP ports, rate limited, bounded in time.
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
    payload = b"x" * size
    t0 = time.monotonic(); end = t0 + seconds; sent = 0
    while True:
        now = time.monotonic()
        if now >= end:
            break
        due = int((now - t0) * pps)
        if sent >= due:
            time.sleep(0.0005)
            continue
        for _ in range(min(due - sent, 256)):
            try:
                s.sendto(payload, (dst, port0 + sent % nports))
            except OSError:
                pass
            sent += 1
    print(json.dumps({"sent": sent}))

cmd = sys.argv[1]
if cmd == "sample":
    sample(sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5]), sys.argv[6],
           sys.argv[7], sys.argv[8])
elif cmd == "mem":
    print(json.dumps(mem(int(sys.argv[2]))))
elif cmd == "blast":
    blast(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]),
          float(sys.argv[6]), float(sys.argv[7]))
PY

# --- the wire: two namespaces, one veth
psp_make_wire $SRC $DST $DEV $PEER 10.88.0 || die "cannot build the wire"
# The real frames' destination MAC is nobody's: the receiving veth drops them
# (PACKET_OTHERHOST) as early as PAUSE frames, see above.
ip -n $SRC neigh replace 10.88.0.2 lladdr 02:00:00:00:bd:01 dev $DEV nud permanent

daemon_pid() { cat /run/pspxdp/$DEV.pid 2>/dev/null; }

attach() { # attach RATE QUEUES [ATTACH-ARGS...]: attach and pin the daemon to CPU
    $N "$PSPXDP" attach $DEV --line-rate "$1" --queues "$2" "${@:3}" >>"$WORK/attach.log" 2>&1 ||
        die "attach failed: $(tail -5 "$WORK/attach.log")"
    local pid
    pid=$(daemon_pid)
    [[ -n $pid ]] || die "no daemon pid"
    taskset -a -pc "$CPU" "$pid" >/dev/null || die "cannot pin the daemon"
}

detach() { # (detach removes the daemon's log: keep a copy, then the shutdown's lines)
    cp /run/pspxdp/$DEV.log "$WORK/daemon.tmp" 2>/dev/null
    local t0=$SECONDS
    $N "$PSPXDP" detach $DEV >>"$WORK/attach.log" 2>&1
    echo "detach took $((SECONDS - t0)) s" >>"$WORK/attach.log"
    cat "$WORK/daemon.tmp" >>"$WORK/daemon.log" 2>/dev/null
    sleep 0.3 # the TX socket's queue is released asynchronously
}

bare() { # bare LEN
    local i
    for i in 1 2 3 4 5; do
        if $N taskset -c "$CPU" "$TXLOOP" $DEV --seconds "$SECS" --len "$1" --cpu "$CPU" --json \
            >"$WORK/bare.json" 2>"$WORK/bare.err"; then
            python3 -c "import json,sys; d=json.load(open(sys.argv[1])); d['kind']='bare$1'; print(json.dumps(d))" \
                "$WORK/bare.json" >>"$RESULTS"
            return 0
        fi
        sleep 0.5 # EBUSY: the previous socket on queue 0 is still going away
    done
    die "bare loop failed: $(cat "$WORK/bare.err")"
}

sender() { # sender PORT RATE SECONDS: psp_traffic on the other cores
    $N taskset -c "$OTHER_CPUS" "$TRAFFIC" send 10.88.0.2 "$1" --rate "$2" --size 1472 \
        --seconds "$3" >/dev/null 2>>"$WORK/sender.err" &
    PIDS+=($!)
    SENDER=$!
}

sample() { # sample LABEL: one interval on the running daemon, class 1:1
    python3 "$WORK/dp.py" sample $SRC $DEV "$(daemon_pid)" "$SECS" "$PSPXDP" 1:1 "$1" >>"$RESULTS" ||
        die "sampling failed"
}

say "pspxdp data-path benchmark: $REPEAT rounds of ${SECS}s, pinned to CPU $CPU (senders on $OTHER_CPUS); $(uptime)"
for ((r = 1; r <= REPEAT; r++)); do
    say "round $r/$REPEAT: bare loop 1514 B, 60 B"
    bare 1514
    bare 60

    say "round $r/$REPEAT: daemon at its maximum (line 100gbit, class $MAX_RATE offered $MAX_OFFER)"
    attach 100gbit 8 ${MAX_WINDOW:+--window "$MAX_WINDOW"}
    $N "$PSPXDP" class set $DEV 1:1 "$MAX_RATE" >/dev/null || die "class set failed"
    $N "$PSPXDP" filter add $DEV proto udp dport 5001 classid 1:1 >/dev/null || die "filter failed"
    sender 5001 "$MAX_OFFER" $((SECS + 4))
    sleep 1.5 # the class's ring fills: backlogged from here on
    sample daemon_max
    kill $SENDER 2>/dev/null; wait $SENDER 2>/dev/null
    detach
    # The bare loop again: the round's reference is the mean of before and
    # after, so drift in what else the machine does cancels out.
    bare 1514

    say "round $r/$REPEAT: CPU per paced Gbit/s (line 1gbit, class 500mbit offered 650mbit)"
    attach 1gbit 8
    $N "$PSPXDP" class set $DEV 1:1 500mbit >/dev/null || die "class set failed"
    $N "$PSPXDP" filter add $DEV proto udp dport 5001 classid 1:1 >/dev/null || die "filter failed"
    sender 5001 650mbit $((2 * SECS + 8))
    sleep 1.5
    sample cpu_default
    # The same with a daemon that spins whenever backlogged: stop the
    # one attach started (by its pid) and run one by hand, pinned alike.
    pid=$(daemon_pid)
    kill -TERM "$pid"
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    $N taskset -c "$CPU" "$PSPXDP" daemon $DEV --sleep-min-us 0 >>"$WORK/daemon-spin.log" 2>&1 &
    PIDS+=($!)
    for _ in $(seq 50); do [[ $(daemon_pid) == "$!" ]] && break; sleep 0.1; done
    [[ $(daemon_pid) == "$!" ]] || die "the spinning daemon did not start: $(tail -3 "$WORK/daemon-spin.log")"
    sleep 1.5
    sample cpu_spin
    kill $SENDER 2>/dev/null; wait $SENDER 2>/dev/null
    detach
done

if ((RSS)); then
    for q in 8 256; do
        say "memory: $q classes on $q queues (line 1gbit)"
        attach 1gbit $q
        pid=$(daemon_pid)
        rate=$((q <= 8 ? 10 : 1))mbit
        for ((k = 1; k < q; k++)); do
            cid=$(printf '1:%x' $k)
            $N "$PSPXDP" class set $DEV "$cid" $rate >/dev/null || die "class set $cid failed"
            $N "$PSPXDP" filter add $DEV proto udp dport $((6000 + k)) classid "$cid" >/dev/null ||
                die "filter for $cid failed"
        done
        sleep 0.5
        start=$(python3 "$WORK/dp.py" mem "$pid")
        st=$($N "$PSPXDP" status $DEV -j)
        # Every class offered more than its rate (round robin over its ports).
        $N taskset -c "$OTHER_CPUS" python3 "$WORK/dp.py" blast 10.88.0.2 6001 $((q - 1)) 1400 30000 \
            $((SECS + 2)) >"$WORK/blast.json" &
        PIDS+=($!)
        blast=$!
        sleep 1
        mid=$(python3 "$WORK/dp.py" mem "$pid")
        wait $blast
        sleep 0.3
        after=$(python3 "$WORK/dp.py" mem "$pid")
        st2=$($N "$PSPXDP" status $DEV -j)
        umem=$(grep -o '[0-9]* queues x [0-9]* frames of [0-9]* B' /run/pspxdp/$DEV.log | tail -1)
        python3 - "$q" "$start" "$mid" "$after" "$umem" "$st" "$st2" >>"$RESULTS" <<'PY'
import json, sys
q, start, mid, after, umem = int(sys.argv[1]), *map(json.loads, sys.argv[2:5]), sys.argv[5]
st, st2 = json.loads(sys.argv[6]), json.loads(sys.argv[7])
parts = umem.split()
umem_bytes = int(parts[0]) * int(parts[3]) * int(parts[6]) if len(parts) >= 7 else None
served = [c for c in st2.get("classes", []) if c.get("queue")]
print(json.dumps({"kind": "rss", "classes": q, "served": len(served),
                  "configured": len(st2.get("classes", [])),
                  "umem": umem, "umem_bytes": umem_bytes,
                  "start": start, "during": mid, "after": after,
                  "tx_frames": sum(c.get("tx_frames", 0) for c in served),
                  "backlogged": sum(1 for c in served if c.get("backlog", 0) > 0),
                  "drops": sum(c.get("drops", 0) for c in served)}))
PY
        detach
    done
fi

# --- report: medians over rounds
python3 - "$RESULTS" "$JSON" "$CPU" "$(uptime)" "${MAX_WINDOW:-65536}" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
as_json, cpu, up, window = sys.argv[2] == "1", int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
def med(kind, key):
    v = [r[key] for r in rows if r["kind"] == kind]
    return statistics.median(v) if v else None
def all_of(kind, key):
    return [r[key] for r in rows if r["kind"] == kind]
bare60 = med("bare60", "fps")
dmax = med("daemon_max", "fps")
bare1514 = None
# The ratio per round (same round's bare loop), then the median.
b2 = all_of("bare1514", "fps"); d = all_of("daemon_max", "fps")
b = [(b2[2 * i] + b2[2 * i + 1]) / 2 for i in range(len(b2) // 2)]  # before/after each round
ratios = [x / y for x, y in zip(d, b) if y]
ratio = statistics.median(ratios) if ratios else None
bare1514 = statistics.median(b) if b else None
def per_gbit(kind):
    v = [r["cpu_pct"] / r["paced_gbit"] for r in rows if r["kind"] == kind and r["paced_gbit"] > 0]
    return statistics.median(v) if v else None
summary = {
    "cpu": cpu, "uptime": up.strip(), "max_window_bytes": window,
    "bare_1514_mpps": bare1514 and bare1514 / 1e6, "bare_60_mpps": bare60 and bare60 / 1e6,
    "daemon_mpps": dmax and dmax / 1e6, "ratio": ratio, "target_ratio": 0.8,
    "ratios": ratios,
    "daemon_real_fps": med("daemon_max", "class_fps"),
    "daemon_cpu_pct": med("daemon_max", "cpu_pct"),
    "daemon_user_pct": med("daemon_max", "user_pct"),
    "daemon_kicks_per_frame": (lambda v: statistics.median(v) if v else None)(
        [r["kicks"] / r["tx_packets"] for r in rows if r["kind"] == "daemon_max" and r["tx_packets"]]),
    "cpu_spin": {"cpu_pct": med("cpu_spin", "cpu_pct"), "paced_gbit": med("cpu_spin", "paced_gbit"),
                 "cpu_pct_per_gbit": per_gbit("cpu_spin")},
    "cpu_default": {"cpu_pct": med("cpu_default", "cpu_pct"),
                    "paced_gbit": med("cpu_default", "paced_gbit"),
                    "cpu_pct_per_gbit": per_gbit("cpu_default")},
    "rss": [r for r in rows if r["kind"] == "rss"],
    "samples": [r for r in rows if r["kind"] != "rss"],
}
if as_json:
    print(json.dumps(summary))
    sys.exit(0)
f = lambda v, fmt: "-" if v is None else fmt.format(v)
n = len(b)
print(f"pspxdp data path, one core (CPU {cpu}), veth, copy-mode AF_XDP; medians of {n} rounds")
print(f"{'':34} {'Mpps':>8}  per round")
print(f"{'bare AF_XDP TX loop, 1514 B':34} {f(bare1514 and bare1514/1e6, '{:.3f}'):>8}  "
      + " ".join(f"{x/1e6:.3f}" for x in b) + "  (mean of before/after the daemon)")
print(f"{'bare AF_XDP TX loop, 60 B':34} {f(bare60 and bare60/1e6, '{:.3f}'):>8}  "
      + " ".join(f"{x/1e6:.3f}" for x in all_of('bare60', 'fps')))
print(f"{'daemon, real + gap frames':34} {f(dmax and dmax/1e6, '{:.3f}'):>8}  "
      + " ".join(f"{x/1e6:.3f}" for x in d))
print(f"{'ratio daemon / bare 1514 (>= 0.80)':34} {f(ratio, '{:.2f}'):>8}  "
      + " ".join(f"{x:.2f}" for x in ratios))
print(f"  daemon (line rate 100gbit, window {window} B): "
      f"{f(summary['daemon_real_fps'], '{:.0f}')} real frames/s among them, "
      f"{f(summary['daemon_cpu_pct'], '{:.0f}')}% CPU "
      f"({f(summary['daemon_user_pct'], '{:.0f}')}% in user space), "
      f"{f(summary['daemon_kicks_per_frame'], '{:.3f}')} kicks per frame")
print()
print("CPU per paced Gbit/s (line rate 1gbit, one class 500mbit, offered 650mbit)")
for k, what in (("cpu_default", "default daemon (sleeps through waits > 50 us)"),
                ("cpu_spin", "daemon --sleep-min-us 0 (spins)")):
    s = summary[k]
    print(f"  {what:42} {f(s['cpu_pct'], '{:.1f}'):>6}% CPU at {f(s['paced_gbit'], '{:.3f}')} Gbit/s "
          f"= {f(s['cpu_pct_per_gbit'], '{:.0f}')}% CPU per paced Gbit/s")
if summary["rss"]:
    print()
    print("daemon memory (kB)      UMEM                                    "
          "VmRSS start  during  after   VmHWM after  classes served/backlogged")
    for r in summary["rss"]:
        mb = f"{r['umem_bytes']/2**20:.0f} MiB" if r["umem_bytes"] else "?"
        print(f"  {r['classes']:>3} classes          {r['umem'] + ' = ' + mb:40} "
              f"{r['start'].get('VmRSS', 0):>10} {r['during'].get('VmRSS', 0):>7} "
              f"{r['after'].get('VmRSS', 0):>7} {r['after'].get('VmHWM', 0):>12}  "
              f"{r['served']}/{r['backlogged']}")
print(f"\n{up.strip()}")
PY
