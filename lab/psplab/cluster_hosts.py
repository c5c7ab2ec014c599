"""The cluster lab's run options and what paces one host: pspxdp (alone or
as a group member, its agent), tbf or nothing on each host's veth; the
group's state and its rate logs (lab/psplab/cluster.py runs the lab)."""
import contextlib
import datetime
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .cluster_net import ETCD_PORTS, ClusterNet
from .net import sh
from .report import Results
from .shapers import SHAPER_QUEUE, TYPICAL_BUCKET, WIRE_BUCKET, WIRE_QUEUE, Pspxdp

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
