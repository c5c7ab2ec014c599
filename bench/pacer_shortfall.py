#!/usr/bin/env python3
"""Where a clockless pacer's rate goes when several pacing daemons share the
machine (docs/results/2026-11-28-pacer-shortfall-under-load).

For each N of --hosts: N wires (veths between namespaces of their own),
each paced by its own `pspxdp attach --clock none` (one daemon each), one
class at --rate, the default class; on each a bounded UDP sender
(lab/psp_traffic, 1472-byte payloads, nice -10 as the cluster lab's) offers
--offer, so the class stays backlogged. --router: the wires end in one
router that forwards them to a receiver through a tbf at the sum of the
rates (the cluster lab's topology); --judge: a tcpdump on each wire's far
end (the cluster lab's judge, nice -10); --readers: on each wire a
reader of the counters as a cluster agent reads them (SCHED_FIFO 5,
`pspxdp stats --watch 0.1`: 20 reads a second). Over the window (from 1.5 s
after the senders start to 0.5 s before they stop) it prints per host:

  delivered   the far end's kernel counters (rx bytes + 4 per frame: what
              the class's rate counts, max(L, 60) + 4), and its shortfall
              against the rate, %
  tx          what the daemon counted sent (tx_bytes)
  late lost   the class's late_lost_ns: real time given up because a late
              wake-up exceeded its burst bound, % of the window
  empty       the class's empty_ns: its queue empty after its rate would
              have let it send (the sender's), % of the window
  late        the daemon's late wake-ups (count, and late_ns % of the window)
  lateness    the daemon's release lateness, p50/p99 (status; its whole run)
  drops       the class's drops (every drop_* counter: at its limit with a
              backlogged class) and the socket rings' losses; unpaced: the
              class's tc_passed (frames TC passed because the daemon was
              taken for dead)
  daemon CPU  the daemon's utime + stime, % of one core

and per N the machine's busy CPU (% of all cores) and its CPU pressure (PSI:
the share of the window in which some task waited for a CPU).

  pacer_shortfall.py run [--hosts "1 2 3"] [--rate 140mbit] [--offer 200mbit]
      [--seconds 8] [--line-rate 1gbit] [--attach "ARGS"] [--router] [--judge] [--readers] [--json]

A benchmark: it prints figures and fails only when it cannot run. On the
shared VM run it under /work/wt/measure (bench/run_pacer_shortfall.sh
records the load): real-time figures on a shared 2-core VM are noisy.
"""
import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from psplab.cli import Parser, guarded, number_in, rate
from psplab.net import Lab, sh, wait_until
from psplab.report import Table
from psplab.shapers import Pspxdp
from psplab.units import parse_rate_bps

HERE = Path(__file__).resolve().parent
PORT = 7200
CLASSID = "1:1"
WARMUP_S = 1.5  # the window starts this long after the senders
TAIL_S = 0.5    # and ends this long before they stop


@dataclass
class Snap:
    """One host's counters at t (CLOCK_MONOTONIC s)."""
    t: float
    rx_bytes: int
    rx_frames: int
    tx_bytes: int
    late_lost_ns: int
    empty_ns: int
    drops: int
    rings: int
    passed: int
    late_wakeups: int
    late_ns: int
    cpu_ticks: int
    lateness_p50_ns: int
    lateness_p99_ns: int


@dataclass
class MachineSnap:
    t: float
    busy: int   # jiffies, all cores
    total: int
    cpu_some_us: int  # PSI: time at least one task waited for a CPU


@dataclass
class Row:
    n: int
    host: int
    rate_bps: int
    delivered_bps: float
    shortfall_pct: float
    tx_bps: float
    late_lost_pct: float
    empty_pct: float
    late_wakeups: int
    late_pct: float
    lateness_p50_us: float
    lateness_p99_us: float
    drops: int
    ring_drops: int
    unpaced: int
    daemon_cpu_pct: float
    machine_busy_pct: float
    cpu_pressure_pct: float
    sender_bps: float
    sched: str
    extra: dict[str, Any] = field(default_factory=dict)


def machine_snap() -> MachineSnap:
    cpu = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    v = [int(x) for x in cpu]
    idle = v[3] + v[4]
    some = Path("/proc/pressure/cpu").read_text().splitlines()[0]
    total = int(some.rsplit("total=", 1)[1])
    return MachineSnap(time.monotonic(), sum(v[:8]) - idle, sum(v[:8]), total)


class Far:
    """Where the wires end: each its own namespace, or (--router) one router
    R that forwards every wire to D through a tbf at the sum of the rates
    (the cluster lab's bottleneck), with a tcpdump judge on each wire's end
    in R (the lab's judge)."""

    def __init__(self, lab: Lab, n: int, a: argparse.Namespace) -> None:
        self.router = a.router
        if not a.router:
            return
        self.r, self.d = lab.netns(f"r{n}"), lab.netns(f"x{n}")
        p = f"pq{lab.pid % 100000}"
        self.rout, self.din = f"{p}o", f"{p}i"
        lab.veth(self.r, self.rout, self.d, self.din)
        self.r.sysctl("net.ipv4.ip_forward", 1)
        self.r.run("ip", "addr", "add", "10.94.200.1/24", "dev", self.rout)
        self.d.run("ip", "addr", "add", "10.94.200.2/24", "dev", self.din)
        self.r.run("ip", "neigh", "replace", "10.94.200.2", "lladdr", self.d.mac(self.din), "dev", self.rout,
                   "nud", "permanent")
        self.d.run("ip", "route", "add", "10.94.0.0/16", "via", "10.94.200.1")
        self.d.run("ip", "neigh", "replace", "10.94.200.1", "lladdr", self.r.mac(self.rout), "dev", self.din,
                   "nud", "permanent")
        bps = n * parse_rate_bps(a.rate)
        self.r.run("tc", "qdisc", "add", "dev", self.rout, "root", "tbf", "rate", f"{bps}bit", "burst", 2000,
                   "limit", 32768)


class Host:
    """One wire: namespace pq..-s<i> (the sender, DEV) to its far end (a
    namespace of its own, or the router R)."""

    def __init__(self, lab: Lab, i: int, a: argparse.Namespace, far: Far) -> None:
        self.i, self.a = i, a
        p = f"pq{lab.pid % 100000}"
        self.dev, self.peer = f"{p}a{i}", f"{p}b{i}"
        self.net = f"10.94.{i}"
        self.s = lab.netns(f"s{i}")
        self.d = far.r if far.router else lab.netns(f"d{i}")
        self.own = [self.s] if far.router else [self.s, self.d]
        lab.veth(self.s, self.dev, self.d, self.peer)
        self.s.run("ip", "addr", "add", f"{self.net}.1/24", "dev", self.dev)
        self.d.run("ip", "addr", "add", f"{self.net}.2/24", "dev", self.peer)
        self.s.run("ip", "neigh", "replace", f"{self.net}.2", "lladdr", self.d.mac(self.peer), "dev",
                   self.dev, "nud", "permanent")
        self.dst = f"{self.net}.2"
        if far.router:
            self.dst = "10.94.200.2"
            self.s.run("ip", "route", "add", "10.94.200.0/24", "via", f"{self.net}.2")
            self.d.run("ip", "neigh", "replace", f"{self.net}.1", "lladdr", self.s.mac(self.dev), "dev",
                       self.peer, "nud", "permanent")
        self.p = Pspxdp(a.pspxdp, self.s, self.dev)
        self.pid = 0
        self.sched = "?"

    def attach(self, lab: Lab) -> None:
        lab.pspxdp_devs.append((self.s, self.dev))
        self.p.attach(self.a.line_rate, ("--clock", "none", *shlex.split(self.a.attach)))
        self.p.class_set(CLASSID, self.a.rate)
        self.p.run("default", self.dev, CLASSID)
        st = json.loads(self.p.run("status", self.dev, "-j"))
        self.pid = int(st.get("daemon_pid") or 0)
        sc = st.get("scheduling") or {}
        self.sched = (f"{sc.get('policy', '?')} {sc.get('runtime_ns', 0) // 1000}/{sc.get('period_ns', 0) // 1000} us"
                      if sc.get("policy") == "deadline" else f"{sc.get('policy', '?')} {sc.get('priority', '')}")

    def snap(self) -> Snap:
        t = time.monotonic()
        link = json.loads(self.d.run("ip", "-s", "-j", "link", "show", self.peer))[0]["stats64"]["rx"]
        st = json.loads(self.p.run("status", self.dev, "-j"))
        c = next(x for x in st["classes"] if x["class"] == CLASSID)
        dm = st.get("daemon") or {}
        stat = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return Snap(t=t, rx_bytes=int(link["bytes"]), rx_frames=int(link["packets"]),
                    tx_bytes=c["tx_bytes"], late_lost_ns=c["late_lost_ns"], empty_ns=c["empty_ns"],
                    drops=sum(v for k, v in c.items() if k.startswith("drop_")),
                    rings=dm.get("socket_ring_full", 0) + dm.get("socket_fill_empty", 0),
                    passed=c["tc_passed"],
                    late_wakeups=dm.get("late_wakeups", 0), late_ns=dm.get("late_ns", 0),
                    cpu_ticks=int(stat[11]) + int(stat[12]),
                    lateness_p50_ns=int(st.get("lateness_p50_ns") or 0),
                    lateness_p99_ns=int(st.get("lateness_p99_ns") or 0))

    def sender(self, lab: Lab, seconds: float, out: str) -> "subprocess.Popen[bytes]":
        return lab.spawn(self.s.cmd("nice", "-n", "-10", self.a.traffic, "send", self.dst, PORT,
                                    "--rate", self.a.offer, "--size", 1472, "--seconds", seconds), out)

    def judge(self, lab: Lab) -> None:
        err = os.path.join(lab_work(lab), f"tcpdump{self.i}.err")
        p = lab.spawn(self.d.cmd("nice", "-n", "-10", "tcpdump", "-i", self.peer, "-Q", "in", "-s", "96", "-B",
                                 "524288",
                                 "--time-stamp-precision=nano", "-w", "/dev/null"), err_path=err)
        wait_until(f"tcpdump on {self.peer}",
                   lambda: p.poll() is not None or "listening" in Path(err).read_text(errors="replace"))

    def reader(self, lab: Lab) -> None:
        """What a cluster agent does to the counters (it samples its class
        every 25 ms, SCHED_FIFO 5): `pspxdp stats --watch 0.1` reads them
        twice per print, 20 times a second."""
        lab.spawn(self.s.cmd("chrt", "-f", "5", self.a.pspxdp, "stats", self.dev, "-j", "--watch", "0.1"))

    def detach(self, lab: Lab) -> None:
        self.p.detach()
        lab.pspxdp_devs.remove((self.s, self.dev))


def lab_work(lab: Lab) -> str:
    return f"/tmp/{lab.tag}"


def rows_for(n: int, hosts: Sequence[Host], s0: Sequence[Snap], s1: Sequence[Snap], m0: MachineSnap,
             m1: MachineSnap, senders: Sequence[dict[str, Any]], a: argparse.Namespace) -> list[Row]:
    hz = os.sysconf("SC_CLK_TCK")
    r = parse_rate_bps(a.rate)
    mt = m1.t - m0.t
    busy = (m1.busy - m0.busy) / max(1, m1.total - m0.total) * 100
    pressure = (m1.cpu_some_us - m0.cpu_some_us) / 1e6 / mt * 100
    out = []
    for h, x, y, snd in zip(hosts, s0, s1, senders, strict=True):
        dt = y.t - x.t
        ns = dt * 1e9
        delivered = ((y.rx_bytes - x.rx_bytes) + 4 * (y.rx_frames - x.rx_frames)) * 8 / dt
        out.append(Row(
            n=n, host=h.i, rate_bps=r, delivered_bps=delivered, shortfall_pct=(1 - delivered / r) * 100,
            tx_bps=(y.tx_bytes - x.tx_bytes) * 8 / dt,
            late_lost_pct=(y.late_lost_ns - x.late_lost_ns) / ns * 100,
            empty_pct=(y.empty_ns - x.empty_ns) / ns * 100, late_wakeups=y.late_wakeups - x.late_wakeups,
            late_pct=(y.late_ns - x.late_ns) / ns * 100,
            lateness_p50_us=y.lateness_p50_ns / 1e3, lateness_p99_us=y.lateness_p99_ns / 1e3,
            drops=y.drops - x.drops, ring_drops=y.rings - x.rings, unpaced=y.passed - x.passed,
            daemon_cpu_pct=(y.cpu_ticks - x.cpu_ticks) / hz / dt * 100, machine_busy_pct=busy,
            cpu_pressure_pct=pressure,
            sender_bps=float(snd.get("offered_bps", 0)), sched=h.sched))
    return out


def run_n(lab: Lab, n: int, a: argparse.Namespace, say: Any) -> list[Row]:
    hosts: list[Host] = []
    try:
        far = Far(lab, n, a)
        hosts = [Host(lab, i, a, far) for i in range(n)]
        for h in hosts:
            h.attach(lab)
        if a.judge:
            for h in hosts:
                h.judge(lab)
        if a.readers:
            for h in hosts:
                h.reader(lab)
        outs = [os.path.join(lab_work(lab), f"send{n}-{h.i}.json") for h in hosts]
        t0 = time.monotonic()
        procs = [h.sender(lab, a.seconds, o) for h, o in zip(hosts, outs, strict=True)]
        time.sleep(max(0.0, t0 + WARMUP_S - time.monotonic()))
        m0 = machine_snap()
        s0 = [h.snap() for h in hosts]
        time.sleep(max(0.0, t0 + a.seconds - TAIL_S - time.monotonic()))
        s1 = [h.snap() for h in hosts]
        m1 = machine_snap()
        for p in procs:
            lab.reap(p, a.seconds + 20)
        senders = []
        for o in outs:
            try:
                senders.append(json.loads(Path(o).read_text()))
            except (OSError, ValueError):
                senders.append({})
        rows = rows_for(n, hosts, s0, s1, m0, m1, senders, a)
        say(f"N={n}: " + ", ".join(f"h{r.host} {r.delivered_bps / 1e6:.1f}" for r in rows) + " Mbit/s")
        return rows
    finally:
        for h in hosts:
            if (h.s, h.dev) in lab.pspxdp_devs:
                h.detach(lab)
        for p in lab.procs:  # the judges
            if p.poll() is None:
                p.terminate()
        for p in lab.procs:
            lab.reap(p, 5)
        lab.procs = []
        for ns in reversed(list(lab.namespaces)):  # the namespaces go; their veths with them
            subprocess.run(["ip", "netns", "del", ns.name], capture_output=True)
            lab.namespaces.remove(ns)


def table(rows: Sequence[Row], a: argparse.Namespace, up0: str, up1: str) -> Table:
    t = Table(f"Clockless pacers sharing the machine: one class at {a.rate} per daemon, offered {a.offer} UDP, "
              f"{a.seconds:g} s (window {a.seconds - WARMUP_S - TAIL_S:g} s)",
              ["N", "host", "delivered Mbit/s", "shortfall %", "tx Mbit/s", "late lost %", "empty %",
               "late wake-ups", "late_ns %", "lateness p50/p99 us", "drops", "ring drops", "unpaced",
               "daemon CPU %",
               "machine busy %", "CPU pressure %", "sender Mbit/s"],
              [f"attach --line-rate {a.line_rate} --clock none {a.attach}".rstrip()
               + f"; scheduling: {rows[0].sched if rows else '?'}"
               + ("; the wires end in one router, a tbf at the sum of the rates to a receiver" if a.router else "")
               + ("; a tcpdump judge (nice -10) on each wire's far end" if a.judge else "")
               + ("; a reader of the counters per wire (chrt -f 5 pspxdp stats --watch 0.1)" if a.readers else ""),
               "delivered: the far end's rx bytes + 4 per frame (max(L, 60) + 4, what the rate counts); "
               "late lost: the class's late_lost_ns, % of the window; empty: its empty_ns (the sender's); "
               "late_ns: the daemon's wake-ups later than their slack, summed; lateness: its release "
               "lateness histogram (status), the daemon's whole run",
               "CPU pressure: /proc/pressure/cpu some, % of the window a task waited for a CPU; sender: what "
               "psp_traffic sent, L2 with FCS",
               f"before: {up0.strip()}", f"after: {up1.strip()}",
               "real time on a shared 2-core VM: noisy"])
    for r in rows:
        t.add(r.n, f"h{r.host}", f"{r.delivered_bps / 1e6:.2f}", f"{r.shortfall_pct:.2f}",
              f"{r.tx_bps / 1e6:.2f}", f"{r.late_lost_pct:.2f}", f"{r.empty_pct:.2f}", r.late_wakeups,
              f"{r.late_pct:.2f}", f"{r.lateness_p50_us:.0f}/{r.lateness_p99_us:.0f}", r.drops, r.ring_drops,
              r.unpaced, f"{r.daemon_cpu_pct:.1f}",
              f"{r.machine_busy_pct:.0f}", f"{r.cpu_pressure_pct:.0f}", f"{r.sender_bps / 1e6:.1f}")
    return t


def run(argv: Sequence[str]) -> int:
    ap = Parser(prog="pacer_shortfall.py run", description=__doc__,
                formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", default="1 2 3", help='the Ns, e.g. "1 2 3" (1..4 each)')
    ap.add_argument("--rate", type=rate, default="140mbit")
    ap.add_argument("--offer", type=rate, default="200mbit")
    ap.add_argument("--seconds", type=number_in(float, 3.0, 30.0), default=8.0)
    ap.add_argument("--line-rate", type=rate, default="1gbit")
    ap.add_argument("--attach", default="", help="more pspxdp attach arguments, e.g. \"--sched fifo\"")
    ap.add_argument("--judge", action="store_true", help="a tcpdump on each far end (the cluster lab's judge)")
    ap.add_argument("--router", action="store_true",
                    help="the wires end in one router forwarding to a receiver through a tbf at the sum of the "
                         "rates (the cluster lab's topology)")
    ap.add_argument("--readers", action="store_true",
                    help="on each wire a reader of the counters as a cluster agent's (SCHED_FIFO 5, "
                         "pspxdp stats --watch 0.1)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    try:
        ns_ = [int(x) for x in a.hosts.split()]
    except ValueError:
        ap.error(f'--hosts "{a.hosts}": whole numbers 1..4')
    if not ns_ or any(not 1 <= x <= 4 for x in ns_):
        ap.error(f'--hosts "{a.hosts}": whole numbers 1..4')
    build = os.environ.get("BUILD_DIR") or str(HERE.parent / "build")
    a.pspxdp = os.environ.get("PSPXDP") or f"{build}/user/pspxdp"
    a.traffic = os.environ.get("TRAFFIC") or f"{build}/lab/psp_traffic"
    lab = Lab(build, tag=f"pq-sf{os.getpid()}")
    os.makedirs(lab_work(lab), exist_ok=True)
    up0 = sh(["uptime"])
    rows: list[Row] = []

    def say(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    def body() -> None:
        for n in ns_:
            rows.extend(run_n(lab, n, a, say))

    def cleanup() -> None:
        lab.teardown()
        subprocess.run(["rm", "-rf", lab_work(lab)], capture_output=True)

    rc = guarded("pacer_shortfall", body, cleanup, int(len(ns_) * (a.seconds + 60)))
    up1 = sh(["uptime"])
    if a.json:
        print(json.dumps({"uptime_before": up0.strip(), "uptime_after": up1.strip(),
                          "rows": [asdict(r) for r in rows]}))
    elif rows:
        print(table(rows, a, up0, up1).text())
        print()
        print(table(rows, a, up0, up1).markdown())
    return rc


def main(argv: list[str]) -> int:
    if len(argv) > 1 and argv[1] == "run":
        return run(argv[2:])
    print(__doc__ if len(argv) > 1 and argv[1] in ("-h", "--help") else
          "usage: pacer_shortfall.py run [options] (--help)", file=sys.stderr)
    return 0 if len(argv) > 1 and argv[1] in ("-h", "--help") else 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
