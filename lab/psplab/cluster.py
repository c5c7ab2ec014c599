"""The cluster lab (docs/design.md §11.9): the paper's cluster experiments,
N hosts sharing one bottleneck, side by side.

    python3 -m psplab cluster [--quick] [--only pair,alltoall,scale] [--publish]

- pair: paper §5.3, 2-to-2: two hosts' TCP flows at 200 Mbit/s each through
  B = 500 Mbit/s with a 32 KB FIFO, the second starting 5 s after the first;
  pspxdp+pspxdp, tbf+tbf and the two mixes: rates per second, totals,
  bottleneck drops.
- alltoall: MPI_Alltoall's pattern (the paper's ref. 7, NAS IS): N hosts each
  send X MB to every other host's receiver through the bottleneck, repeated:
  completion time per round and bottleneck drops for no shaping, tbf at B/N
  per host and pspxdp at B/N per host.
- scale: a 1,000-host estimate from the cluster simulation (lab/psp_cluster_scale).

pspxdp runs on each host's veth in its clockless mode (`--clock none`):
frames leave at their real-time due times, with no gap frames; on a veth
that is the real-time mode (there is no NIC whose byte clock could be
judged). Every figure here is real time on a 2-core VM shared with other
work: the tables print them, the tests (tests/lab/test_cluster_lab.sh)
assert only what is deterministic.

Results: tables on stdout; CSV, PNG and README.md under a scratch directory
(printed) unless --publish (docs/results/cluster-*/) or --out DIR.
"""
import argparse
import contextlib
import datetime
import itertools
import json
import math
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from . import cluster_capture, report
from .cluster_net import ETCD_PORTS, ClusterNet
from .net import load_json, sh
from .report import Results, Table, num
from .shapers import SHAPER_QUEUE, TYPICAL_BUCKET, WIRE_BUCKET, WIRE_QUEUE, Pspxdp
from .units import fmt_rate, parse_rate_bps

HERE = Path(__file__).resolve().parent.parent  # lab/
SINK_PORT = 7000
CLASSID = "1:1"
CONTROL_CLASSID = "1:2"  # the group agent's etcd traffic (a normal class: unpaced)


@dataclass
class Options:
    quick: bool
    hosts: int
    line_rate: str
    bottleneck: str
    fifo_bytes: int
    delay_ms: float
    daemon_rt: int
    build: str
    out: str
    command: str
    started: datetime.datetime
    work: str
    progress: Callable[[str], None]
    summary: dict[str, object] = field(default_factory=dict)
    etcd: str | None = None  # etcd's client URL once started (the group runs)
    budget: str | None = None  # the group's budget; None: B
    ce_threshold: str | None = None  # the paced classes' ce_threshold; None: pspxdp's default
    window: int | None = None  # pspxdp attach --window; None: half the FIFO
    capture: bool = False  # pair: capture R's arrivals and the tbf's departures (cluster_capture)

    @property
    def group_budget(self) -> str:
        return self.budget or self.bottleneck

    @property
    def pspxdp(self) -> str:
        return os.environ.get("PSPXDP") or f"{self.build}/user/pspxdp"


class ClusterResults(Results):
    """docs/results/cluster-WHAT/ (no date: the cluster lab's files are one set)."""

    def __init__(self, opt: Options, what: str) -> None:
        super().__init__(opt.out, f"cluster-{what}", opt.command, opt.started)
        with contextlib.suppress(OSError):  # Results made the dated directory: not ours
            os.rmdir(self.dir)
        self.dir = os.path.join(opt.out, f"cluster-{what}")
        os.makedirs(self.dir, exist_ok=True)
        self.what = f"cluster lab: {what}"


# --- what paces one host ------------------------------------------------------

@dataclass
class HostCounters:
    """pspxdp's class on one host (None for tc): every frame TC handed it,
    taken, sent, dropped; tc: the qdiscs' drops."""
    shaper: str
    drops: int
    tc_frames: int | None = None
    rx_frames: int | None = None
    tx_frames: int | None = None
    backlog_frames: int | None = None
    lost_in_rings: int | None = None
    passed: int | None = None
    accounting_failures: int | None = None

    @property
    def accounted(self) -> bool | None:
        """pspxdp: every frame the class took was sent, dropped (counted) or is
        still queued, and every frame TC handed it was taken, lost in the
        rings (counted) or passed unpaced (counted)."""
        if self.rx_frames is None or self.tx_frames is None or self.tc_frames is None:
            return None
        return (self.rx_frames == self.tx_frames + self.drops + (self.backlog_frames or 0)
                and self.tc_frames <= self.rx_frames + (self.lost_in_rings or 0) + (self.passed or 0)
                and not self.accounting_failures)


class HostShaper:
    """none | tbf | pspxdp on host i's veth. tc rows sit under a model of the
    host's NIC (a root tbf at the line rate M, as the one-host lab): a veth has
    no rate and would send an unshaped burst at memory speed."""

    def __init__(self, net: ClusterNet, opt: Options, i: int, kind: str, rate: str | None,
                 group: str | None = None) -> None:
        """kind group: rate is the host's floor, group the group's name."""
        self.net, self.opt, self.i, self.kind, self.rate, self.group = net, opt, i, kind, rate, group
        self.agent: subprocess.Popen[bytes] | None = None
        self.rate_log = os.path.join(opt.work, f"{group}-h{i}.rates")
        self.ns, self.dev = net.hosts[i], net.host_devs[i]
        self.p = Pspxdp(opt.pspxdp, self.ns, self.dev)
        self.window = opt.window or max(opt.fifo_bytes // 2, 1514)

    def describe(self) -> str:
        if self.kind == "group":
            return (f"as pspxdp, the class driven by pspxdp group join --budget {self.opt.group_budget} "
                    f"--floor {self.rate} (one etcd member in the router's namespace)")
        if self.kind == "pspxdp":
            return (f"pspxdp attach --line-rate {self.opt.line_rate} --clock none --window {self.window} "
                    f"(clockless: real-time due times, no gap frames; at most half the FIFO at once after a "
                    f"late wake-up), one class {CLASSID} at the host's rate, the default class"
                    + (f", ce_threshold {self.opt.ce_threshold}" if self.opt.ce_threshold else ""))
        wire = f"root tbf rate {self.opt.line_rate} burst {WIRE_BUCKET} limit {WIRE_QUEUE} (the NIC at M)"
        if self.kind == "tbf":
            return f"{wire} + tbf rate R burst {TYPICAL_BUCKET} limit {SHAPER_QUEUE}"
        return wire

    def setup(self) -> None:
        if self.kind in ("pspxdp", "group"):
            assert self.rate
            self.net.pspxdp_devs.append((self.ns, self.dev))
            # --window: how far a late daemon may catch up at once, i.e. its
            # largest burst; half the FIFO, or a wake-up after a stall on
            # this shared VM overflows it (the default on a veth is 64 KiB).
            self.p.attach(self.opt.line_rate, ("--clock", "none", "--window", str(self.window)))
            self.p.class_set(CLASSID, self.rate,
                             *(("ce_threshold", self.opt.ce_threshold) if self.opt.ce_threshold else ()))
            self.p.run("default", self.dev, CLASSID)
            pid = json.loads(self.p.run("status", self.dev, "-j")).get("daemon_pid")
            if self.opt.daemon_rt and pid:
                # --daemon-rt: SCHED_FIFO in place of attach's deadline policy
                sh(["chrt", "-a", "-f", "-p", str(self.opt.daemon_rt), str(pid)])
            if self.kind == "group":
                assert self.opt.etcd and self.group
                # The agent's own requests to etcd go by an unpaced class: in
                # the class the group drives they would wait behind (or be
                # held at 0 with) the traffic whose rate they decide.
                self.p.class_set(CONTROL_CLASSID, "normal")
                self.p.filter_port("tcp", ETCD_PORTS[0], CONTROL_CLASSID)
                # setpriv --pdeathsig: should this lab die without its
                # cleanup (SIGKILL), the agent gets SIGTERM and leaves, and its
                # watchdog follows it; nsenter and setpriv exec, so the agent
                # is our child.
                # Real-time (SCHED_FIFO 5), as etcd is: an agent starved of CPU
                # misses its keep-alives and falls to its floor.
                self.agent = self.net.spawn(self.ns.cmd(
                    "setpriv", "--pdeathsig", "TERM", "chrt", "-f", "5", self.opt.pspxdp, "group", "join",
                    self.dev, "--etcd", self.opt.etcd, "--group", self.group,
                    "--budget", self.opt.group_budget, "--class", CLASSID, "--floor", self.rate, "--name",
                    f"h{self.i}", "--log", self.rate_log), err_path=self.rate_log + ".err")
            return
        self.ns.run("tc", "qdisc", "add", "dev", self.dev, "root", "handle", "1:", "tbf", "rate",
                    self.opt.line_rate, "burst", WIRE_BUCKET, "limit", WIRE_QUEUE)
        if self.kind == "tbf":
            assert self.rate
            self.ns.run("tc", "qdisc", "add", "dev", self.dev, "parent", "1:1", "handle", "10:", "tbf",
                        "rate", self.rate, "burst", TYPICAL_BUCKET, "limit", SHAPER_QUEUE)
        elif self.kind != "none":
            raise ValueError(f"unknown shaper {self.kind}")

    def counters(self) -> HostCounters:
        if self.kind not in ("pspxdp", "group"):
            q = json.loads(self.ns.run("tc", "-s", "-j", "qdisc", "show", "dev", self.dev))
            return HostCounters(self.kind, drops=sum(x.get("drops", 0) for x in q))
        d = json.loads(self.p.run("status", self.dev, "-j"))
        c = next(x for x in d["classes"] if x["class"] == CLASSID)
        dm, xdp = d.get("daemon") or {}, d.get("xdp") or {}
        return HostCounters(
            self.kind, drops=sum(v for k, v in c.items() if k.startswith("drop_")),
            tc_frames=c["tc_frames"], rx_frames=c["rx_frames"], tx_frames=c["tx_frames"],
            backlog_frames=c["backlog_frames"],
            lost_in_rings=(dm.get("socket_ring_full", 0) + dm.get("socket_fill_empty", 0)
                           + dm.get("died_in_rings", 0) + xdp.get("no_socket", 0)),
            passed=c["tc_passed"], accounting_failures=dm.get("accounting_failures", 0))

    def settle(self, seconds: float = 5.0) -> HostCounters:
        """The counters once the class's backlog drained (bounded wait)."""
        deadline = time.monotonic() + seconds
        c = self.counters()
        while c.backlog_frames and time.monotonic() < deadline:
            time.sleep(0.05)
            c = self.counters()
        return c

    def teardown(self) -> None:
        if self.agent:
            # SIGTERM: the agent lowers to 0, leaves the roster, revokes its lease
            # (SIGCONT first: a stopped agent would not see it)
            self.agent.send_signal(signal.SIGCONT)
            self.agent.send_signal(signal.SIGTERM)
            self.net.reap(self.agent, 10)
            self.agent = None
            left = agent_pids(self.group or "", self.dev)
            for pid in left:  # its watchdog, had it outlived the agent
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            if left:
                raise RuntimeError(f"host {self.i}: the agent's processes {left} outlived it (killed)")
        if self.kind in ("pspxdp", "group"):
            self.p.detach()
            # what the agent leaves of itself (its lock file) goes with the device
            for f in Path("/run/pspxdp").glob(f"{self.dev}.group-*"):
                f.unlink(missing_ok=True)
            self.net.pspxdp_devs.remove((self.ns, self.dev))
        else:
            self.ns.run("tc", "qdisc", "del", "dev", self.dev, "root", check=False)


@contextlib.contextmanager
def shaped(net: ClusterNet, opt: Options, plan: Sequence[tuple[str, str | None]],
           group: str | None = None) -> Iterator[list[HostShaper]]:
    """Host i shaped by plan[i] = (kind, rate) for the duration; a group's
    members all joined and the first epoch settled before it yields."""
    shapers = [HostShaper(net, opt, i, kind, rate, group) for i, (kind, rate) in enumerate(plan)]
    done: list[HostShaper] = []
    try:
        for s in shapers:
            s.setup()
            done.append(s)
        if group:
            try:
                wait_settled(net, opt, group, len(shapers))
            except RuntimeError as e:
                errs = [Path(s.rate_log + ".err").read_text().strip()[-300:] for s in shapers
                        if Path(s.rate_log + ".err").exists()]
                raise RuntimeError(f"{e}; the agents said: {errs}") from None
        yield shapers
    finally:
        for s in reversed(done):
            s.teardown()


def agent_pids(group: str, dev: str) -> list[int]:
    """The processes of `pspxdp group join DEV ... --group GROUP` (the agent
    and its watchdog, a fork with the same command line) still running."""
    out = []
    for d in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError):
            argv = (d / "cmdline").read_bytes().split(b"\0")
            words = [w.decode(errors="replace") for w in argv]
            if "join" in words and dev in words and "--group" in words and \
                    words[words.index("--group") + 1:][:1] == [group]:
                out.append(int(d.name))
    return out


def group_show(net: ClusterNet, opt: Options, group: str) -> dict[str, Any]:
    """`pspxdp group show -j` (from R, beside etcd); {} if it cannot answer."""
    out = net.r.run(opt.pspxdp, "group", "show", group, "--etcd", opt.etcd or "", "-j", check=False, timeout=10)
    try:
        d = json.loads(out)
    except ValueError:
        return {}
    return d if isinstance(d, dict) else {}


def wait_settled(net: ClusterNet, opt: Options, group: str, members: int, seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    d: dict[str, Any] = {}
    while time.monotonic() < deadline:
        d = group_show(net, opt, group)
        live = [m for m in d.get("members", []) if m.get("live") == "yes"]
        if len(live) == members and d.get("settled") and d.get("epoch", 0) > 0:
            return
        time.sleep(0.1)
    raise RuntimeError(f"group {group}: {members} members did not join and settle within {seconds:g} s "
                       f"(group show: {json.dumps(d)[:300]})")


@dataclass
class Verdict:
    """`pspxdp group check`: the rate logs replayed against the budget."""
    violations: int
    line: str


def check_logs(opt: Options, shapers: Sequence[HostShaper]) -> Verdict:
    logs = [s.rate_log for s in shapers if s.kind == "group"]
    r = subprocess.run([opt.pspxdp, "group", "check", "--budget", opt.group_budget, *logs],
                       capture_output=True, text=True, timeout=60)
    last = (r.stdout.strip().splitlines() or [r.stderr.strip()])[-1]
    n = int(last.rsplit(":", 1)[1].split()[0]) if r.returncode in (0, 1) and "violations" in last else -1
    return Verdict(violations=n, line=last)


def read_rate_log(path: str) -> list[tuple[float, int]]:
    """(CLOCK_REALTIME seconds, rate bit/s) per line of an agent's log."""
    out = []
    with contextlib.suppress(OSError), open(path) as f:
        for line in f:
            w = line.split()
            if len(w) >= 2 and w[0].isdigit() and w[1].isdigit():
                out.append((int(w[0]) / 1e9, int(w[1])))
    return out


def group_available(opt: Options) -> bool:
    """This build has `pspxdp group` (cluster mode) and etcd is installed."""
    r = subprocess.run([opt.pspxdp, "group", "--help"], capture_output=True, timeout=10)
    return r.returncode == 0 and subprocess.run(["which", "etcd"], capture_output=True).returncode == 0


# --- traffic -----------------------------------------------------------------

def traffic_cmd(*args: str | int | float) -> list[str]:
    return ["env", f"PYTHONPATH={HERE}", sys.executable, "-m", "psplab.cluster_traffic", *map(str, args)]


@contextlib.contextmanager
def sink(net: ClusterNet, opt: Options, tag: str, seconds: float) -> Iterator[str]:
    """The receivers' sink for the duration; yields its report's path (read
    once the block ends)."""
    path = os.path.join(opt.work, f"{tag}.sink.json")
    log = path + ".log"
    p = net.spawn(net.d.cmd("nice", "-n", "-10", *traffic_cmd("sink", "--port", SINK_PORT, "--seconds",
                                                              seconds, "--out", path)), out_path=log)
    for _ in range(100):
        if Path(log).exists() and "listening" in Path(log).read_text():
            break
        time.sleep(0.05)
    try:
        yield path
    finally:
        p.send_signal(signal.SIGTERM)
        net.reap(p, 10)


class WireSampler:
    """Every host's wire bytes (ClusterNet.wire_bytes) 4 times a second, with
    the time each was read: the per-second rates of the plots. The sink's
    bins would show when a starved sink got to read, not when the data came."""

    def __init__(self, net: ClusterNet) -> None:
        self.net = net
        self.samples: list[tuple[float, list[int]]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        while not self.stop.is_set():
            before = time.time()
            counts = self.net.wire_bytes()
            self.samples.append(((before + time.time()) / 2, counts))
            self.stop.wait(0.25)

    def __enter__(self) -> "WireSampler":
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        self.thread.join(5)

    def per_second(self, host: int, t_start: float, seconds: int) -> list[float]:
        """bit/s each second from t_start, the counter interpolated in time."""
        pts = [(t, b[host]) for t, b in self.samples]

        def at(t: float) -> float:
            if not pts:
                return 0.0
            if t <= pts[0][0]:
                return float(pts[0][1])
            for (ta, ba), (tb, bb) in itertools.pairwise(pts):
                if ta <= t <= tb:
                    return ba + (bb - ba) * (t - ta) / max(tb - ta, 1e-9)
            return float(pts[-1][1])
        return [(at(t_start + s + 1) - at(t_start + s)) * 8 for s in range(seconds)]


def senders(net: ClusterNet, opt: Options, tag: str, jobs: Sequence[tuple[int, list[str], int, float, float]],
            timeout: float) -> list[dict[str, Any]]:
    """jobs: (host, destinations, bytes per destination or 0, seconds,
    start_at); runs them all, returns their reports in order."""
    procs = []
    for k, (host, dsts, nbytes, seconds, start_at) in enumerate(jobs):
        path = os.path.join(opt.work, f"{tag}.send{k}.json")
        cmd = net.hosts[host].cmd("nice", "-n", "-10", *traffic_cmd(
            "send", "--to", ",".join(dsts), "--port", SINK_PORT, "--bytes", nbytes, "--seconds", seconds,
            "--start-at", f"{start_at:.6f}", "--out", path))
        procs.append((net.spawn(cmd, err_path=path + ".err"), path))
    for p, _ in procs:
        net.reap(p, timeout)
    return [load_json(path) for _, path in procs]


# --- 1. paper §5.3, 2-to-2 ------------------------------------------------------

@dataclass
class PairRow:
    combo: str
    host: int
    shaper: str
    target_bps: int
    start_s: float
    mean_bps: float          # over the host's time on, after its first second
    both_on_bps: float       # over the seconds both flows were on
    retransmits: int
    shaper_drops: int
    bottleneck_drops: int    # the run's, both hosts'
    accounted: bool | None
    unpaced: int | None      # frames pspxdp's TC passed unpaced (fail-open: its daemon stalled)


def per_second(report: dict[str, Any], src: str, t_start: float, seconds: int) -> list[float]:
    """bit/s per second of the sink's bins for src, from CLOCK_REALTIME t_start."""
    bins: list[int] = report.get("by_src", {}).get(src, [])
    bin_s: float = report.get("bin_s", 0.1)
    per = round(1 / bin_s)
    first = round((t_start - report.get("t0", t_start)) / bin_s)
    out = []
    for s in range(seconds):
        lo = first + s * per
        out.append(sum(bins[max(lo, 0):max(lo + per, 0)]) * 8.0)
    return out


def pair(net: ClusterNet, opt: Options) -> None:
    res = ClusterResults(opt, "pair")
    rate, second_at = "200mbit", 5
    total = 8 if opt.quick else 20
    combos = [("pspxdp", "pspxdp"), ("tbf", "tbf"), ("pspxdp", "tbf"), ("tbf", "pspxdp")]
    if opt.quick:  # the CI form: the paper's two pure pairs
        combos = combos[:2]
    rtt = net.rtt_ms()
    rows: list[PairRow] = []
    capture_rows: list[cluster_capture.CaptureRow] = []
    cpu_tables: list[tuple[str, Table]] = []
    series: dict[str, list[list[float]]] = {}
    for combo in combos:
        name = "+".join(combo)
        opt.progress(f"2-to-2 (§5.3): {name}, {total} s")
        net.set_bottleneck(opt.bottleneck, opt.fifo_bytes)
        retx0 = [net.retransmits(i) for i in range(2)]
        with shaped(net, opt, [(combo[0], rate), (combo[1], rate)]) as sh_, \
                sink(net, opt, f"pair-{name}", total + 30) as sink_path, WireSampler(net) as wire:
            cap = cluster_capture.PairCapture(net, os.path.join(res.dir, f"capture-{name}"), 2) \
                if opt.capture else None
            t0 = time.time() + 1.0
            jobs = [(0, [net.receivers[0]], 0, float(total), t0),
                    (1, [net.receivers[1]], 0, float(total - second_at), t0 + second_at)]
            sent = senders(net, opt, f"pair-{name}", jobs, total + 60)
            counters = [s.settle() for s in sh_]
            readings = cap.stop() if cap else []
            if cap:  # the pacers' own view of their release times: lateness, late_lost
                for i, s in enumerate(sh_):
                    if s.kind == "pspxdp":
                        with open(os.path.join(cap.dir, f"status-h{i}.json"), "w") as f:
                            f.write(s.p.run("status", s.dev, "-j"))
        bn = net.bottleneck()
        if cap:
            opt.progress(f"2-to-2 (§5.3): {name}, analysing the captures")
            crow = cluster_capture.analyse(opt.pspxdp, cap, readings, name, rate, opt.bottleneck,
                                           opt.fifo_bytes, bn["drops"])
            capture_rows.append(crow)
            cpu_tables.append((name, cluster_capture.cpu_by_command(os.path.join(cap.dir, "top.txt"))))
        rep = load_json(sink_path)
        rates = [per_second(rep, net.host_ips[i], t0, total) for i in range(2)]
        series[name] = [wire.per_second(i, t0, total) for i in range(2)]
        for i in range(2):
            start = 0 if i == 0 else second_at
            on = rates[i][start + 1:]
            both = rates[i][second_at + 1:]
            errs = sent[i].get("errors")
            if errs:
                print(f"  {name} host {i}: sender errors: {errs}", file=sys.stderr)
            rows.append(PairRow(
                combo=name, host=i, shaper=combo[i], target_bps=parse_rate_bps(rate), start_s=start,
                mean_bps=sum(on) / max(len(on), 1), both_on_bps=sum(both) / max(len(both), 1),
                retransmits=net.retransmits(i) - retx0[i], shaper_drops=counters[i].drops,
                bottleneck_drops=bn["drops"], accounted=counters[i].accounted, unpaced=counters[i].passed))
    t = Table(f"Paper §5.3, 2-to-2: two TCP flows paced to {rate} each through a drop-tail FIFO of "
              f"{opt.fifo_bytes >> 10} KB at {opt.bottleneck}, RTT {num(rtt, '{:.1f}')} ms",
              ["hosts", "host", "shaper", "start s", "mean Mbit/s", "both on Mbit/s", "sum both on",
               "retransmits", "shaper drops", "unpaced", "bottleneck drops"],
              [f"host 0 sends for {total} s; host 1 starts {second_at} s later and stops with it; one "
               "TCP flow (cubic) each, to its own receiver behind the bottleneck",
               "mean: received rate (sink, payload bytes) over the host's seconds on, its first second "
               "left out; both on: over the seconds both flows ran (the first left out)",
               "retransmits: the host's TCP RetransSegs; bottleneck drops: the run's (both hosts'); unpaced: "
               "frames pspxdp's TC program passed unpaced because the daemon's heartbeat went stale (fail-open "
               "after a stall of 100 ms: CPU starvation on this shared VM)",
               "the plot: what each host put on its wire per second (the router's counter of the host's veth, "
               "L2 bytes, retransmissions included), read 4 times a second",
               f"tbf: {HostShaper(net, opt, 0, 'tbf', rate).describe()}",
               f"pspxdp: {HostShaper(net, opt, 0, 'pspxdp', rate).describe()}",
               report.REAL_TIME_NOTE])
    for name in dict.fromkeys(r.combo for r in rows):
        sum_both = sum(r.both_on_bps for r in rows if r.combo == name)
        for r in rows:
            if r.combo == name:
                t.add(r.combo if r.host == 0 else "", r.host, r.shaper, r.start_s, f"{r.mean_bps / 1e6:.1f}",
                      f"{r.both_on_bps / 1e6:.1f}", f"{sum_both / 1e6:.1f}" if r.host == 0 else "",
                      r.retransmits, r.shaper_drops, num(r.unpaced, "{}"),
                      r.bottleneck_drops if r.host == 0 else "")
    res.table(t)
    if capture_rows:
        res.table(cluster_capture.table(capture_rows, opt.bottleneck, opt.fifo_bytes))
        res.csv("pair-capture.csv", [asdict(r) for r in capture_rows])
        for name, cpu in cpu_tables:
            cpu.title = f"{name}: {cpu.title}"
            res.table(cpu)
    res.csv("pair.csv", [asdict(r) for r in rows])
    res.csv("pair-per-second.csv", [{"combo": c, "host": i, "second": s, "wire_bps": v}
                                    for c, rr in series.items() for i, ser in enumerate(rr)
                                    for s, v in enumerate(ser)])
    plt = report.pyplot()
    fig, axes = plt.subplots(2, 2, figsize=(11, 6), sharex=True, sharey=True)
    for ax, (name, rr) in zip(axes.flat, series.items(), strict=False):
        for i, ser in enumerate(rr):
            ax.plot(range(len(ser)), [v / 1e6 for v in ser], marker=".", label=f"host {i} ({name.split('+')[i]})")
        ax.plot(range(total), [sum(v) / 1e6 for v in zip(*rr, strict=True)], "k:", lw=1, label="sum")
        ax.axhline(parse_rate_bps(rate) / 1e6, color="tab:red", ls="--", lw=0.8)
        ax.axhline(parse_rate_bps(opt.bottleneck) / 1e6, color="gray", ls="--", lw=0.8)
        ax.set_title(name, fontsize=9)
        ax.legend(fontsize=7)
    for ax in axes[1]:
        ax.set_xlabel("time (s)")
    for ax in axes[:, 0]:
        ax.set_ylabel("on the host's wire, Mbit/s (1 s)")
    fig.suptitle(f"Paper §5.3: 2 x {rate} through {opt.bottleneck}, FIFO {opt.fifo_bytes >> 10} KB, "
                 f"RTT {num(rtt, '{:.0f}')} ms (real time, veths)", fontsize=9)
    res.save(fig, "pair.png")
    res.finish()
    opt.summary["pair"] = rows


# --- 2. all-to-all -------------------------------------------------------------

@dataclass
class AlltoallRow:
    pattern: str
    shaper: str
    hosts: int
    bytes_per_pair: list[int]   # by sending host
    rounds: int
    rate_per_host: str
    completion_s: list[float]
    mean_s: float
    bottleneck_drops: int
    retransmits: int
    shaper_drops: int
    sender_errors: int
    accounted: bool | None
    unpaced: int | None
    violations: int | None = None  # the group's rate logs against the budget


def alltoall_run(net: ClusterNet, opt: Options, pattern: str, sizes: list[int], rounds: int, kind: str,
                 rate: str | None) -> AlltoallRow:
    n = len(sizes)
    group = f"c4a2a{net.pid}{pattern}" if kind == "group" else None
    opt.progress(f"all-to-all ({pattern}): {n} hosts, {[x >> 20 for x in sizes]} MB to each other, "
                 f"{rounds} rounds: {kind}")
    net.set_bottleneck(opt.bottleneck, opt.fifo_bytes)
    retx0 = sum(net.retransmits(i) for i in range(n))
    times: list[float] = []
    errors = 0
    with shaped(net, opt, [(kind, rate)] * n, group) as sh_, sink(net, opt, f"a2a-{pattern}-{kind}", 600):
        for k in range(rounds):
            t0 = time.time() + 0.5
            jobs = [(i, [net.receivers[j] for j in range(n) if j != i], sizes[i], 300.0, t0) for i in range(n)]
            sent = senders(net, opt, f"a2a-{pattern}-{kind}-{k}", jobs, 320)
            errors += sum(len(s.get("errors") or []) for s in sent)
            times.append(max(s.get("end", t0 + 300) for s in sent) - t0)
        counters = [s.settle() for s in sh_]
    verdict = check_logs(opt, sh_) if group else None
    bn = net.bottleneck()
    acc = [c.accounted for c in counters]
    return AlltoallRow(
        pattern=pattern, shaper=kind if kind != "group" else "pspxdp group", hosts=n, bytes_per_pair=sizes,
        rounds=rounds, rate_per_host=f"dynamic (floor {rate})" if kind == "group" else rate or "-",
        completion_s=[round(x, 3) for x in times], mean_s=sum(times) / len(times),
        bottleneck_drops=bn["drops"], retransmits=sum(net.retransmits(i) for i in range(n)) - retx0,
        shaper_drops=sum(c.drops for c in counters), sender_errors=errors,
        accounted=None if None in acc else all(acc),
        unpaced=None if kind in ("none", "tbf") else sum(c.passed or 0 for c in counters),
        violations=verdict.violations if verdict else None)


def alltoall(net: ClusterNet, opt: Options) -> None:
    res = ClusterResults(opt, "alltoall")
    n = opt.hosts
    mb = 1 if opt.quick else 8
    rounds = 2 if opt.quick else 5
    share = fmt_rate(parse_rate_bps(opt.bottleneck) // n)
    floor = fmt_rate(parse_rate_bps(opt.bottleneck) // (4 * n))
    group = group_available(opt)
    if group and not opt.etcd:
        opt.etcd = net.start_etcd(os.path.join(opt.work, "etcd"), os.path.join(opt.work, "etcd.log"))
    patterns = {"even": [mb << 20] * n, "uneven": [(4 * mb) << 20] + [mb << 20] * (n - 1)}
    if opt.quick:
        del patterns["uneven"]
    rows: list[AlltoallRow] = []
    for pattern, sizes in patterns.items():
        configs: list[tuple[str, str | None]] = [("none", None), ("tbf", share), ("pspxdp", share)]
        if opt.quick:  # the CI form (tbf is in the 2-to-2)
            del configs[1]
        if group:
            configs.append(("group", floor))
        for kind, rate in configs:
            rows.append(alltoall_run(net, opt, pattern, sizes, rounds, kind, rate))
    bps = parse_rate_bps(opt.bottleneck)
    t = Table(f"All-to-all (MPI_Alltoall's pattern): {n} hosts each send X MB to every other host's receiver "
              f"through {opt.bottleneck}, FIFO {opt.fifo_bytes >> 10} KB, {rounds} rounds",
              ["pattern", "shaper", "rate per host", "completion s (mean)", "min", "max", "speed-up vs none",
               "bottleneck drops", "retransmits", "shaper drops", "unpaced", "violations"],
              [f"even: X = {mb} MB from every host; uneven: host 0 sends {4 * mb} MB to each, the others {mb} MB",
               "completion: from the common start to the last receiver's last byte (the sink's close), per "
               "round; each round opens a TCP connection per pair (the handshake and slow start are in the time)",
               f"rate per host: B/N; tbf and none under a model of the host's NIC at {opt.line_rate}; pspxdp "
               f"group: the hosts share B through etcd, floor B/(4N) each",
               "violations: `pspxdp group check` over the agents' applied-rate logs (the sum of the rates "
               "applied above the budget at any instant)",
               "group rows: " + ("run" if group else "not run: this build has no `pspxdp group` or no etcd"),
               report.REAL_TIME_NOTE])
    for pattern in patterns:
        pr = [r for r in rows if r.pattern == pattern]
        ideal = sum(sizes_ * (n - 1) for sizes_ in pr[0].bytes_per_pair) * 8 / bps
        t.notes.insert(1 + list(patterns).index(pattern),
                       f"{pattern}: the bottleneck alone needs {ideal:.2f} s for the payload")
        for r in pr:
            t.add(pattern, r.shaper, r.rate_per_host, f"{r.mean_s:.2f}", f"{min(r.completion_s):.2f}",
                  f"{max(r.completion_s):.2f}", f"{pr[0].mean_s / r.mean_s:.2f}x", r.bottleneck_drops,
                  r.retransmits, r.shaper_drops, num(r.unpaced, "{}"), num(r.violations, "{}"))
    res.table(t)
    res.csv("alltoall.csv", [asdict(r) for r in rows])
    plt = report.pyplot()
    fig, axes_ = plt.subplots(1, len(patterns), figsize=(5.5 * len(patterns), 4), sharey=True, squeeze=False)
    axes = axes_[0]
    for ax, pattern in zip(axes, patterns, strict=True):
        pr = [r for r in rows if r.pattern == pattern]
        for k, r in enumerate(pr):
            ax.plot([k] * len(r.completion_s), r.completion_s, "k.", alpha=0.6)
            ax.bar(k, r.mean_s, alpha=0.5, label=f"{r.shaper}: {r.bottleneck_drops} drops")
        ideal = sum(x * (n - 1) for x in pr[0].bytes_per_pair) * 8 / bps
        ax.axhline(ideal, color="k", ls=":", lw=1, label="payload / B")
        ax.set_xticks(range(len(pr)), [r.shaper for r in pr], fontsize=8)
        ax.set_title(f"{pattern}: {[x >> 20 for x in pr[0].bytes_per_pair]} MB per pair", fontsize=9)
        ax.legend(fontsize=7)
    axes[0].set_ylabel("completion time per round (s)")
    fig.suptitle(f"All-to-all, {n} hosts through {opt.bottleneck}, FIFO {opt.fifo_bytes >> 10} KB "
                 "(real time, veths)", fontsize=9)
    res.save(fig, "alltoall.png")
    res.finish()
    opt.summary["alltoall"] = rows


# --- 3. uneven, changing demand (pspxdp group) --------------------------------

@dataclass
class ChangeRow:
    """One change of demand: when, what, how long the applied rates took to
    settle, and the bottleneck's use and the fairness until the next."""
    t_s: float
    change: str
    backlogged: int
    converge_ms: float | None    # to the last applied-rate change before the next change
    utilisation: float | None    # of B (L2 estimate), the seconds after the first
    fairness: float | None       # Jain's index over the backlogged hosts' received rates


def jain(xs: Sequence[float]) -> float | None:
    return (sum(xs) ** 2 / (len(xs) * sum(x * x for x in xs))) if xs and any(xs) else None


def dynamic(net: ClusterNet, opt: Options) -> None:
    if not group_available(opt):
        print("cluster lab: dynamic skipped: this build has no `pspxdp group` (or etcd is missing)",
              file=sys.stderr)
        opt.summary["dynamic"] = {"skipped": "no pspxdp group"}
        return
    res = ClusterResults(opt, "dynamic")
    if not opt.etcd:
        opt.etcd = net.start_etcd(os.path.join(opt.work, "etcd"), os.path.join(opt.work, "etcd.log"))
    n = net.n
    bps = parse_rate_bps(opt.bottleneck)
    # An idle member's floor stays reserved (a host cut off from etcd may
    # pace at it), so the busy hosts can use at most B less the idle floors:
    # B/(20N) each keeps that loss within 5 % of B.
    floor = fmt_rate(bps // (20 * n))
    unit = 2 if opt.quick else 5
    # host i sends from on[i] to off[i] (in units, N = 4): 0-8, 1-7, 2-6, 3-5
    on = [(i * unit, (2 * n - i) * unit) for i in range(n)]
    total = 2 * n * unit
    group = f"c4dyn{net.pid}"
    opt.progress(f"uneven, changing demand: {n} hosts in group {group}, {total} s")
    net.set_bottleneck(opt.bottleneck, opt.fifo_bytes)
    shows: list[tuple[float, dict[str, Any]]] = []
    with shaped(net, opt, [("group", floor)] * n, group) as sh_, \
            sink(net, opt, "dynamic", total + 40) as sink_path, WireSampler(net) as wire:
        t0 = time.time() + 1.0
        jobs = [(i, [net.receivers[i]], 0, float(off - start), t0 + start) for i, (start, off) in enumerate(on)]
        procs = []
        for k, (host, dsts, _nb, secs, at) in enumerate(jobs):
            path = os.path.join(opt.work, f"dyn.send{k}.json")
            procs.append(net.spawn(net.hosts[host].cmd("nice", "-n", "-10", *traffic_cmd(
                "send", "--to", ",".join(dsts), "--port", SINK_PORT, "--seconds", secs, "--start-at",
                f"{at:.6f}", "--out", path)), err_path=path + ".err"))
        while time.time() < t0 + total + 1:  # the allocation as etcd shows it, 4 times a second
            shows.append((time.time(), group_show(net, opt, group)))
            time.sleep(0.25)
        for p in procs:
            net.reap(p, 60)
        counters = [s.settle() for s in sh_]
    verdict = check_logs(opt, sh_)
    bn = net.bottleneck()
    rep = load_json(sink_path)
    rates = [per_second(rep, net.host_ips[i], t0, total) for i in range(n)]
    wires = [wire.per_second(i, t0, total) for i in range(n)]
    logs = [read_rate_log(s.rate_log) for s in sh_]
    # Changes: every start and stop.
    events = sorted({(start, f"h{i} starts") for i, (start, _) in enumerate(on)}
                    | {(off, f"h{i} stops") for i, (_, off) in enumerate(on) if off < total})
    rows: list[ChangeRow] = []
    l2 = 1514 / 1448  # the bottleneck counts L2 bytes of full frames; the sink, TCP payload
    for k, (t, what) in enumerate(events):
        t_next = events[k + 1][0] if k + 1 < len(events) else total
        busy = [i for i, (a, b) in enumerate(on) if a <= t < b]
        last = max((x for log in logs for x, _ in log if t0 + t <= x < t0 + t_next), default=None)
        span = range(t + 1, t_next)
        util = [sum(rates[i][s] for i in range(n)) * l2 / bps for s in span]
        fair = [f for s in span if (f := jain([wires[i][s] for i in busy])) is not None]
        rows.append(ChangeRow(t_s=t, change=what, backlogged=len(busy),
                              converge_ms=None if last is None else (last - t0 - t) * 1e3,
                              utilisation=sum(util) / len(util) if util else None,
                              fairness=min(fair) if fair else None))
    t_ = Table(f"Uneven, changing demand: {n} hosts in one pspxdp group sharing {opt.bottleneck} (FIFO "
               f"{opt.fifo_bytes >> 10} KB), bulk TCP flows starting and stopping",
               ["t s", "change", "backlogged", "converged ms", "utilisation of B", "fairness (min)"],
               [f"host i sends from {unit}i s to {unit}(2N-i) s; floor B/(20N) = {floor} each; one etcd member; "
                f"the group's budget {opt.group_budget}",
                "converged: from the change to the last applied-rate change (the agents' logs) before the next "
                "change; none: no rate moved",
                "utilisation: received payload x 1514/1448 (full frames) over B, mean over the seconds after "
                "the first; fairness: Jain's index of the backlogged hosts' rates on their wires, the worst "
                "second",
                f"bottleneck: {bn['drops']} drops over the run; pspxdp group check: {verdict.line}",
                f"shaper drops (pspxdp's classes): {sum(c.drops for c in counters)}; counters account for "
                f"every frame: {all(c.accounted for c in counters)}",
                report.REAL_TIME_NOTE])
    for r in rows:
        t_.add(r.t_s, r.change, r.backlogged, num(r.converge_ms, "{:.0f}"),
               num(None if r.utilisation is None else r.utilisation * 100, "{:.1f}%"), num(r.fairness, "{:.3f}"))
    res.table(t_)
    res.csv("dynamic-changes.csv", [asdict(r) for r in rows])
    res.csv("dynamic-applied.csv", [{"host": i, "t_s": round(x - t0, 3), "rate_bps": v}
                                    for i, log in enumerate(logs) for x, v in log])
    res.csv("dynamic-per-second.csv", [{"host": i, "second": s, "received_bps": v, "wire_bps": wires[i][s]}
                                       for i, ser in enumerate(rates) for s, v in enumerate(ser)])
    alloc_pts: dict[str, list[tuple[float, float]]] = {}
    for x, d in shows:
        for m in d.get("members", []):
            a = m.get("allocation_bps")
            if isinstance(a, (int, float)):
                alloc_pts.setdefault(str(m.get("host")), []).append((x - t0, a / 1e6))
    res.csv("dynamic-allocation.csv", [{"host": h, "t_s": round(x, 3), "allocation_mbps": y}
                                       for h, pts in alloc_pts.items() for x, y in pts])
    plt = report.pyplot()
    fig, ax = plt.subplots(2, 1, figsize=(10, 7), sharex=True)
    for i, log in enumerate(logs):
        if log:
            xs = [x - t0 for x, _ in log] + [total]
            ys = [v / 1e6 for _, v in log] + [log[-1][1] / 1e6]
            line = ax[0].step(xs, ys, where="post", label=f"h{i} applied")[0]
            pts = alloc_pts.get(f"h{i}", [])
            ax[0].plot([p[0] for p in pts], [p[1] for p in pts], ".", ms=3, color=line.get_color(),
                       label=f"h{i} allocation (etcd)")
        ax[1].plot([s + 0.5 for s in range(total)], [v / 1e6 for v in wires[i]], marker=".", label=f"h{i}")
    ax[1].plot([s + 0.5 for s in range(total)], [sum(v) / 1e6 for v in zip(*wires, strict=True)], "k:",
               label="sum")
    for a in ax:
        a.axhline(bps / 1e6, color="gray", ls="--", lw=0.8)
        a.legend(fontsize=7, ncol=4)
        for t, _ in events:
            a.axvline(t, color="gray", lw=0.5, alpha=0.5)
    ax[0].set_ylabel("rate (Mbit/s)")
    ax[0].set_xlim(-1, total + 1)
    ax[1].set_ylabel("on the host's wire, Mbit/s (1 s)")
    ax[1].set_xlabel("time (s)")
    fig.suptitle(f"pspxdp group: {n} hosts share {opt.bottleneck}, FIFO {opt.fifo_bytes >> 10} KB "
                 f"(real time, veths); {verdict.line}", fontsize=9)
    res.save(fig, "dynamic.png")
    res.finish()
    opt.summary["dynamic"] = {"changes": rows, "violations": verdict.violations, "verdict": verdict.line,
                              "bottleneck_drops": bn["drops"],
                              "accounted": all(c.accounted for c in counters)}


# --- 3. 1,000 hosts: the simulation ------------------------------------------------

def extrapolate(rows: Sequence[dict[str, Any]], key: str, n: int) -> float | None:
    """key at n hosts by the power law fitted (least squares, log-log) to
    the simulated groups of 30 hosts and more."""
    pts = [(math.log(r["hosts"]), math.log(r[key])) for r in rows if r.get(key) and r["hosts"] >= 30]
    if len(pts) < 2:
        return None
    mx, my = sum(x for x, _ in pts) / len(pts), sum(y for _, y in pts) / len(pts)
    k = sum((x - mx) * (y - my) for x, y in pts) / sum((x - mx) ** 2 for x, _ in pts)
    return float(math.exp(my + k * (math.log(n) - mx)))


def scale(_net: ClusterNet | None, opt: Options) -> None:
    res = ClusterResults(opt, "scale")
    binary = f"{opt.build}/lab/psp_cluster_scale"
    sizes, target = ("10,30,60", 1000) if opt.quick else ("10,30,100,150", 1000)
    opt.progress(f"scale: the cluster simulation at {sizes} hosts, allocate() at {target}")
    d = json.loads(sh([binary, "--hosts", sizes, "--allocate-only", target, "--seconds", 10 if opt.quick else 15],
                      timeout=1800))
    rows: list[dict[str, Any]] = d["rows"]
    est: dict[str, Any] = {"hosts": target, "estimated": True,
                           "allocate_us": d["allocate_only"][0]["allocate_us"]}
    for key in ("writes_per_s", "converge_p50_ms", "converge_p95_ms", "converge_max_ms"):
        est[key] = extrapolate(rows, key, target)
    est["sim_cpu_s"] = None
    est["writes_per_s_per_host"] = (est["writes_per_s"] or 0) / target
    est["keepalives_per_s"] = rows[-1]["keepalives_per_s"] * target / rows[-1]["hosts"]
    t = Table("A group of N hosts in the cluster simulation (user/cluster/simulation): etcd load, "
              "convergence, allocation CPU",
              ["hosts", "etcd writes/s", "per host", "keep-alives/s", "converge p50 ms", "p95 ms", "max ms",
               "violations", "allocate() us", "sim CPU s"],
              [d["note"],
               f"{target} (estimate): writes/s and convergence extrapolated by the power law fitted to the "
               "simulated groups of 30 hosts and more (the simulation's own cost grows as N^3: every write is "
               f"a view to each of N hosts, each reading N records); allocate() measured at {target} members",
               "the model etcd has no write limit: a real etcd serialises an epoch's N acks (etcd's own "
               "benchmark: ~10,000s of small writes/s on SSDs), which adds N / (its rate) to convergence"])
    for r in [*rows, est]:
        t.add(f"{r['hosts']}" + (" (estimate)" if r.get("estimated") else ""), num(r["writes_per_s"], "{:.1f}"),
              num(r["writes_per_s_per_host"], "{:.2f}"), f"{r['keepalives_per_s']:.0f}",
              num(r["converge_p50_ms"], "{:.0f}"), num(r["converge_p95_ms"], "{:.0f}"),
              num(r["converge_max_ms"], "{:.0f}"), r.get("violations", "-"), f"{r['allocate_us']:.0f}",
              num(r["sim_cpu_s"], "{:.1f}"))
    res.table(t)
    res.csv("scale.csv", [*rows, est])
    plt = report.pyplot()
    fig, ax = plt.subplots(1, 2, figsize=(10, 4))
    hs = [r["hosts"] for r in rows]
    ax[0].plot(hs, [r["writes_per_s"] for r in rows], "o-", label="writes/s (puts, CAS), simulated")
    ax[0].plot([hs[-1], target], [rows[-1]["writes_per_s"], est["writes_per_s"]], "o:", color="tab:blue",
               mfc="none", label="extrapolated")
    ax[0].plot([*hs, target], [r["keepalives_per_s"] for r in rows] + [est["keepalives_per_s"]], "x--",
               label="keep-alives/s")
    ax[0].set_ylabel("per second, whole group")
    ax[1].plot(hs, [r["converge_p95_ms"] or 0 for r in rows], "o-", label="convergence p95 (ms), simulated")
    ax[1].plot([hs[-1], target], [rows[-1]["converge_p95_ms"] or 0, est["converge_p95_ms"] or 0], "o:",
               color="tab:blue", mfc="none", label="extrapolated")
    ax[1].plot([*hs, target], [r["allocate_us"] / 1000 for r in rows] + [est["allocate_us"] / 1000], "x--",
               label="one allocate() (ms CPU)")
    for a in ax:
        a.set_xscale("log")
        a.set_yscale("log")
        a.set_xlabel("hosts in the group")
        a.legend(fontsize=8)
    fig.suptitle("Cluster mode at scale, simulated (one model etcd, delays 1-20 ms one way)", fontsize=9)
    res.save(fig, "scale.png")
    res.finish()
    opt.summary["scale"] = [*rows, est]


NETWORK = {"pair": pair, "alltoall": alltoall, "dynamic": dynamic}
ALL = [*NETWORK, "scale"]


# --- the command --------------------------------------------------------------------

def parse(argv: Sequence[str], started: datetime.datetime) -> argparse.Namespace:
    from .__main__ import Parser, number_in, rate
    ap = Parser(prog="python3 -m psplab cluster", description=(
        "The paper's cluster experiments: N hosts (network namespaces), each paced by its own pspxdp or "
        "shaped by tbf, through one drop-tail bottleneck. Tables on stdout; CSV, plots and README.md under "
        "a scratch directory unless --publish (docs/results/cluster-*/) or --out."))
    ap.add_argument("--quick", action="store_true", help="the CI form: shorter runs, fewer rounds (< 3 min)")
    ap.add_argument("--only", help="comma-separated: " + ",".join(ALL))
    ap.add_argument("--hosts", type=number_in(int, 4, 8), default=4, help="all-to-all hosts (4..8, default 4)")
    ap.add_argument("--line-rate", type=rate, default="1gbit", help="each host's NIC (default 1gbit)")
    ap.add_argument("--bottleneck", type=rate, default="500mbit", help="B (default 500mbit)")
    ap.add_argument("--fifo", type=number_in(int, 4096, 64 << 20), default=32 << 10,
                    help="the bottleneck FIFO in bytes (default 32768)")
    ap.add_argument("--window", type=number_in(int, 1514, 64 << 20), metavar="BYTES",
                    help="pspxdp attach --window (how far a pacer's schedule may run ahead of real time; "
                         "default half the FIFO)")
    ap.add_argument("--ce-threshold", metavar="TIME",
                    help="pspxdp's classes mark CE past TIME of sojourn (default: pspxdp's, 4ms); a CUBIC "
                         "sender (cut to 0.7) keeps its rate if TIME >= 0.43 x RTT")
    ap.add_argument("--budget", type=rate, help="the pspxdp group's budget (default: B; below B leaves the "
                    "pacers' real-time jitter room in the FIFO)")
    ap.add_argument("--delay-ms", type=number_in(float, 10.0, 100.0), default=20.0,
                    help="one-way delay of the ACKs' path (default 20: RTT >= 20 ms)")
    ap.add_argument("--daemon-rt", type=number_in(int, 0, 99), default=0, metavar="PRIO",
                    help="pspxdp's daemons SCHED_FIFO at PRIO (default 0: as attach schedules them, "
                    "SCHED_DEADLINE)")
    ap.add_argument("--capture", action="store_true",
                    help="pair: capture (tcpdump in R) each host's arrivals at the bottleneck and the tbf's "
                         "departures, replay them through an ideal FIFO and print where the drops come from")
    ap.add_argument("--publish", action="store_true", help="write the results to docs/results/cluster-*/")
    ap.add_argument("--out", help="results root (default: a new scratch directory under /tmp)")
    ap.add_argument("--json", action="store_true", help="every row as one JSON object on stdout")
    a = ap.parse_args(argv)
    if a.only:
        for x in a.only.split(","):
            if x not in ALL:
                ap.error(f'--only: unknown experiment "{x}" ({", ".join(ALL)})')
    if a.publish and a.out:
        ap.error("--publish and --out: give one")
    if a.budget and parse_rate_bps(a.budget) > parse_rate_bps(a.bottleneck):
        ap.error(f"--budget {a.budget} must be at most --bottleneck {a.bottleneck}")
    if not parse_rate_bps(a.bottleneck) < parse_rate_bps(a.line_rate):
        ap.error(f"--bottleneck {a.bottleneck} must be below --line-rate {a.line_rate}")
    return a


def main(argv: Sequence[str]) -> int:
    started = report.now()
    a = parse(argv, started)
    build = os.environ.get("BUILD_DIR") or str(HERE.parent / "build")
    t0 = time.monotonic()

    def progress(msg: str) -> None:
        print(f"[{time.monotonic() - t0:6.1f}s] {msg} ...", file=sys.stderr, flush=True)

    out = (str(HERE.parent / "docs" / "results") if a.publish else
           a.out or tempfile.mkdtemp(prefix="psp-cluster-results."))
    names = a.only.split(",") if a.only else ALL
    opt = Options(quick=a.quick, hosts=a.hosts, line_rate=a.line_rate, bottleneck=a.bottleneck,
                  fifo_bytes=a.fifo, delay_ms=a.delay_ms, daemon_rt=a.daemon_rt, build=os.path.abspath(build),
                  out=os.path.abspath(out), command="python3 -m psplab cluster " + " ".join(map(shlex.quote, argv)),
                  started=started, work=tempfile.mkdtemp(prefix="psp-cluster."), progress=progress,
                  budget=a.budget, ce_threshold=a.ce_threshold, window=a.window,
                  capture=a.capture)
    real_stdout = sys.stdout
    if a.json:
        sys.stdout = sys.stderr

    net = ClusterNet(opt.build, max(opt.hosts, 2)) if any(x in NETWORK for x in names) else None

    def body() -> None:
        if net:
            progress(f"building the topology ({net.n} hosts, namespaces {net.tag}-*)")
            net.build_topology()
            net.start_delay(opt.delay_ms, 1700, os.path.join(opt.work, "delay.json"))
        for x in names:
            if x in NETWORK:
                assert net
                NETWORK[x](net, opt)
            else:
                scale(net, opt)

    def cleanup() -> None:
        if net:
            opt.summary["delay_line"] = net.stop_delay()
            net.teardown()
        if os.environ.get("PSP_KEEP"):  # as lab/netns.sh: kept for a look at what went wrong
            print(f"cluster lab: kept {opt.work}", file=sys.stderr)
        else:
            shutil.rmtree(opt.work, ignore_errors=True)

    from .__main__ import guarded
    rc = guarded("cluster lab", body, cleanup, 600 if a.quick else 1800)
    print(f"cluster lab: {'done' if rc == 0 else 'incomplete'} in {time.monotonic() - t0:.0f} s; results "
          f"under {opt.out}", file=sys.stderr)
    if a.json:
        real_stdout.write(json.dumps(opt.summary, default=lambda o: asdict(o)) + "\n")
    return rc
