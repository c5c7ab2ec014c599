"""`cluster --capture`: where the bottleneck's drops come from (design
§11.9).

During a pair run, tcpdump in R captures (nanosecond timestamps, headers
only) each host's frames as R receives them (the ingress of R's end of the
host's veth: stamped when R's softirq takes the frame, which is the moment it
reaches the bottleneck's tbf, in the same softirq) and what the tbf lets out
(ROUT's egress, stamped after the dequeue). From them:

- replay: the merged arrivals through an ideal drop-tail FIFO of the same
  size draining at exactly B (tbf with a one-frame bucket: a frame leaves at
  max(its arrival, the previous departure + its length / B)): its drops and
  its largest backlog, and the largest backlog of an unbounded queue (the
  arrivals' burstiness at B: max over any window of arrived - B x window).
  If the ideal FIFO drops about as much as the tbf did, the arrival process
  explains the drops; if it drops nothing, the tbf's own draining does.
- the tbf's real queue: arrived - departed bytes over the run (both captures
  stamped with the same clock), its maximum, and the longest pauses of its
  departures while it held a backlog.
- per host, `pspxdp analyze --real-time` of its own arrivals at its rate:
  the largest burst (MTU) a queue draining at the host's rate would hold,
  i.e. what the pacer released beyond its rate as R saw it.
"""
import collections
import contextlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass

from .cluster_net import ClusterNet
from .measure import Capture, CaptureReading, analyze, read_pcap
from .report import Table
from .units import parse_rate_bps


@dataclass
class Replay:
    frames: int
    drops: int                 # the ideal drop-tail FIFO's
    max_backlog_bytes: int     # the ideal FIFO's largest backlog
    unbounded_max_bytes: int   # max over windows of arrived - B x window


def replay(arrivals: Sequence[tuple[int, int]], rate_bps: int, fifo_bytes: int) -> Replay:
    """Arrivals (time_ns, qdisc bytes), sorted, through an ideal FIFO at rate_bps."""
    queue: collections.deque[tuple[int, int]] = collections.deque()  # (departure ns, bytes) not yet left
    backlog = drops = max_backlog = 0
    last_dep = -(1 << 62)
    free_dep = -(1 << 62)  # the unbounded queue's last departure
    unbounded = 0
    for t, n in arrivals:
        tx = n * 8 * 1_000_000_000 // rate_bps
        free_dep = max(t, free_dep) + tx
        # unbounded backlog on this arrival, in bytes: what is still to leave
        unbounded = max(unbounded, (free_dep - t) * rate_bps // 8_000_000_000)
        while queue and queue[0][0] <= t:
            backlog -= queue.popleft()[1]
        if backlog + n > fifo_bytes:
            drops += 1
            continue
        last_dep = max(t, last_dep + tx)
        queue.append((last_dep, n))
        backlog += n
        max_backlog = max(max_backlog, backlog)
    return Replay(len(arrivals), drops, max_backlog, unbounded)


@dataclass
class TbfQueue:
    departures: int
    max_backlog_bytes: int     # arrived - departed, at its largest
    stalls_over_100us: int     # departure gaps > 100 us with a backlog ≥ one frame
    max_stall_us: float


def tbf_queue(arrivals: Sequence[tuple[int, int]], departures: Sequence[tuple[int, int]],
              fifo_bytes: int) -> TbfQueue:
    """The real queue from both captures. A dropped frame never leaves, so
    arrived - departed overcounts after a drop by the dropped bytes: those
    are taken out when the difference would exceed the FIFO (the tbf cannot
    hold more), which is where the drops happened."""
    # only while both sides were captured: an arrival whose departure the
    # capture missed would stay in the count (a departure without its
    # arrival only meets the floor at 0)
    lo = max(arrivals[0][0], departures[0][0]) if arrivals and departures else 0
    hi = departures[-1][0] if departures else 0
    events = sorted([(t, n) for t, n in arrivals if lo <= t <= hi] + [(t, -n) for t, n in departures if lo <= t])
    q = mx = stalls = 0
    max_stall = 0
    prev_dep: int | None = None
    for t, n in events:
        if n < 0:
            if prev_dep is not None and q >= 1514 - n and t - prev_dep > 100_000:
                stalls += 1
                max_stall = max(max_stall, t - prev_dep)
            prev_dep = t
        q = min(max(q + n, 0), fifo_bytes)
        mx = max(mx, q)
    return TbfQueue(len(departures), mx, stalls, max_stall / 1000)


class PairCapture:
    """The captures of one pair run in R: each host's arrivals, the tbf's departures."""

    def __init__(self, net: ClusterNet, directory: str, hosts: int) -> None:
        os.makedirs(directory, exist_ok=True)
        self.net, self.dir = net, directory
        self.paths = [os.path.join(directory, f"arrivals-h{i}.pcap") for i in range(hosts)]
        self.out_path = os.path.join(directory, "departures.pcap")
        self.caps = [Capture(net, p, net.r, net.router_devs[i], "in") for i, p in enumerate(self.paths)]
        self.caps.append(Capture(net, self.out_path, net.r, net.rout, "out"))
        # CPU per process (threads: the softirq threads, the daemons, the delay line) while it runs
        self.top = net.spawn(["top", "-b", "-H", "-d", "2", "-n", "5", "-w", "200"],
                             out_path=os.path.join(directory, "top.txt"))

    def stop(self) -> list[CaptureReading]:
        self.net.reap(self.top, 25)
        return [c.stop() for c in self.caps]


HEADERS = 66   # Ethernet + IPv4 + TCP with timestamps: what each segment repeats
MSS = 1448


def frames(path: str, port: int | None = None) -> list[tuple[int, int]]:
    """(time_ns, qdisc bytes) of the data frames (tbf accounts the L2 length).
    A GSO super-packet (tbf on the host's veth passes TCP's 64 KB sends
    whole; the bottleneck's tbf segments it and queues each segment) counts
    as its segments, all arriving at once. With port: only IPv4 TCP/UDP
    frames to it (a pspxdp wire also carries PAUSE gap frames, up to MTU
    size, which R takes but never queues)."""
    out: list[tuple[int, int]] = []
    for t, n, p in read_pcap(path, {port} if port is not None else set(), overhead=0):
        if n <= 100 or (port is not None and p != port):  # not data: SYN, FIN, pure ACKs; gaps
            continue
        k = -(-(n - HEADERS) // MSS)
        out += [(t, (n - HEADERS) // k + HEADERS)] * k
    return out


@dataclass
class CaptureRow:
    combo: str
    host_rates: str
    tbf_drops: int             # the bottleneck's counter over the run
    capture_drops: int         # tcpdump's, all captures: the figures hold when 0
    arrived: int
    departed: int
    replay_drops: int
    replay_max_kb: float
    unbounded_max_kb: float
    tbf_max_kb: float
    tbf_stalls_over_100us: int
    tbf_max_stall_us: float
    host_burst_mtu: list[float]      # per host, pspxdp analyze at the host's rate (frames + 24 B each)
    host_rate_mbps: list[float]      # per host, analyze's mean over the capture


def analyse(pspxdp: str, cap: PairCapture, readings: Sequence[CaptureReading], combo: str,
            host_rate: str, bottleneck: str, fifo_bytes: int, tbf_drops: int) -> CaptureRow:
    per_host = [frames(p) for p in cap.paths]
    arrivals = sorted(x for h in per_host for x in h)
    departures = frames(cap.out_path)
    b = parse_rate_bps(bottleneck)
    r = replay(arrivals, b, fifo_bytes)
    q = tbf_queue(arrivals, departures, fifo_bytes)
    bursts, rates = [], []
    for i, p in enumerate(cap.paths):
        rep = analyze(pspxdp, p, [(f"h{i}", f"src {cap.net.host_ips[i]}", host_rate)], "real", "1gbit")
        f = rep["by_name"][f"h{i}"]
        with open(p + ".analyze.json", "w") as out:
            json.dump(rep, out, indent=1)
        bursts.append(float(f.get("max_burst_at_target_mtu") or 0))
        rates.append(float(f.get("mean_rate_bps", 0)) / 1e6)
    return CaptureRow(combo=combo, host_rates=host_rate, tbf_drops=tbf_drops,
                      capture_drops=sum(x.capture_drops or 0 for x in readings), arrived=len(arrivals),
                      departed=len(departures), replay_drops=r.drops, replay_max_kb=r.max_backlog_bytes / 1024,
                      unbounded_max_kb=r.unbounded_max_bytes / 1024, tbf_max_kb=q.max_backlog_bytes / 1024,
                      tbf_stalls_over_100us=q.stalls_over_100us, tbf_max_stall_us=q.max_stall_us,
                      host_burst_mtu=bursts, host_rate_mbps=rates)




def table(rows: Sequence[CaptureRow], bottleneck: str, fifo_bytes: int) -> Table:
    t = Table(f"Where the bottleneck's drops come from: the arrivals at R replayed through an ideal "
              f"{fifo_bytes >> 10} KB FIFO at {bottleneck}",
              ["hosts", "tbf drops", "replay drops", "replay max KB", "unbounded max KB", "tbf queue max KB",
               "tbf stalls > 100 us", "longest stall us", "host burst MTU", "host Mbit/s", "frames in/out",
               "capture drops"],
              ["arrivals: tcpdump -Q in on R's end of each host's veth (stamped as R's softirq takes the frame, "
               "the moment it reaches the tbf); departures: -Q out on ROUT, after the tbf",
               "replay: the merged arrivals through a drop-tail FIFO of the same size draining at exactly B "
               "(one-frame bucket); unbounded: the same without a limit, its largest backlog = max over any "
               "window of arrived - B x window",
               "tbf queue: arrived - departed from the two captures (capped at the FIFO); stalls: departure "
               "gaps over 100 us while it held more than a frame",
               "host burst: pspxdp analyze --real-time of the host's own arrivals at its rate (the largest "
               "queue at a server draining at that rate, in MTU): what the pacer released beyond its rate, "
               "as R received it",
               "capture drops: tcpdump's own (the figures hold when 0)"])
    for r in rows:
        t.add(r.combo, r.tbf_drops, r.replay_drops, f"{r.replay_max_kb:.1f}", f"{r.unbounded_max_kb:.1f}",
              f"{r.tbf_max_kb:.1f}", r.tbf_stalls_over_100us, f"{r.tbf_max_stall_us:.0f}",
              " / ".join(f"{x:.1f}" for x in r.host_burst_mtu), " / ".join(f"{x:.0f}" for x in r.host_rate_mbps),
              f"{r.arrived}/{r.departed}", r.capture_drops)
    return t


def cpu_by_command(top_path: str, n: int = 10) -> Table:
    """`top -b -H`'s samples after the first (which covers no interval):
    mean %CPU (100 = one core) per command name, the busiest n, and the
    machine's split (user, system, softirq, idle) from the summary lines."""
    samples: list[dict[str, float]] = []
    split: list[dict[str, float]] = []
    with open(top_path) as f:
        for line in f:
            if line.startswith("top - "):
                samples.append({})
            elif line.startswith("%Cpu(s):"):
                split.append({k: float(v) for v, k in (x.split() for x in line[8:].split(","))})
            elif samples and line.strip() and line.split()[0].isdigit():
                w = line.split()
                with contextlib.suppress(ValueError, IndexError):
                    samples[-1][w[11]] = samples[-1].get(w[11], 0.0) + float(w[8])
    samples, split = samples[1:], split[1:]
    total: dict[str, float] = collections.defaultdict(float)
    for s in samples:
        for k, v in s.items():
            total[k] += v / max(len(samples), 1)
    mean = {k: sum(s.get(k, 0.0) for s in split) / max(len(split), 1) for k in ("us", "sy", "si", "id")}
    t = Table(f"CPU while the run was captured (top -H, {len(samples)} samples of 2 s; 100 % = one of "
              f"{os.cpu_count()} cores)", ["thread (command)", "mean %CPU"],
              [f"machine: user {mean['us']:.0f} %, system {mean['sy']:.0f} %, softirq {mean['si']:.0f} %, "
               f"idle {mean['id']:.0f} % (of all cores); softirq run in a process's context counts as that "
               "process's system time"])
    for k, v in sorted(total.items(), key=lambda kv: -kv[1])[:n]:
        t.add(k, f"{v:.1f}")
    return t
