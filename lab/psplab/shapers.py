"""What shapes the wire: pspxdp (through its CLI only), tbf, htb, nothing.

Every shaper puts the same flows on the same wire; the driver measures them
all the same way. The tc shapers sit under a model of the wire itself: a
root tbf at the line rate M (a NIC serialising at M: a veth has no rate,
without it an unshaped or tbf burst would leave at memory speed). Its bucket
is pspxdp's default window, 64 KiB: both are timer wires on this VM and may
catch up that much after a late wake-up (a one-frame bucket loses every late
timer's time: it carried only ~60 % of M here). pspxdp needs no model: its
daemon keeps the veth at M itself (never more than its window ahead of real
time, docs/design.md §4).
"""
import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from .context import RunContext
from .flow import Flow
from .net import Lab, Ns, sh

# tc rounds a bucket to its clock ticks: at 1 Gbit/s 2000 B is the smallest
# bucket that holds a full 1514-B frame (1514 or 1600 become 1500: every
# full frame dropped). "One MTU" below means this.
ONE_FRAME_BUCKET = 2000
TYPICAL_BUCKET = 32 * 1024  # docs/design.md §9.7; tbf/htb configurations seen in the wild
WIRE_QUEUE = 1000 * 1514    # the modelled NIC's queue: txqueuelen 1000 full frames
WIRE_BUCKET = 65536         # = pspxdp attach's default --window
SHAPER_QUEUE = 256 * 1024   # tbf's own queue (limit) in front of the wire


@dataclass
class ClassCounters:
    tx_frames: int
    tx_bytes: int
    drops: int    # every drop_* cause
    marks: int
    passed: int   # classified but passed unpaced (fail-open)
    backlog: int


@dataclass
class PspxdpCounters:
    daemon_pid: int | None
    classes: dict[str, ClassCounters]
    lost_in_rings: int
    underrun_bytes: int


@dataclass
class ShaperCounters:
    """drops: frames the shaper dropped; marks: ECN marks, None where it
    cannot mark; the rest pspxdp's only (None for tc)."""
    drops: int
    marks: int | None
    lost_in_rings: int | None = None
    underrun_bytes: int | None = None  # wire byte times its daemon was late
    passed: int | None = None
    per_flow: dict[str, int] = field(default_factory=dict)  # drops by flow name


class Pspxdp:
    """pspxdp through its command line. counters() is the one place that
    reads its counters: a CLI change touches that function only."""

    def __init__(self, binary: str, ns: Ns, dev: str) -> None:
        self.bin, self.ns, self.dev = binary, ns, dev

    def run(self, *args: str | int, timeout: float = 60) -> str:
        return self.ns.run(self.bin, *args, timeout=timeout)

    def attach(self, line_rate: str, extra: Sequence[str] = ()) -> None:
        args = ["attach", self.dev, "--line-rate", line_rate]
        # The lab judges pspxdp on the byte clock of its gap frames, which
        # is the wire's time only where gap frames fill every idle byte: the
        # paper's rule (--gap-horizon inf). A veth would otherwise get the
        # clockless mode (--clock auto), and the default 50 us horizon lets
        # the wire idle between slow classes' frames (docs/design.md §4.5).
        if "--clock" not in extra:
            args += ["--clock", "byte"]
        if "--gap-horizon" not in extra:
            args += ["--gap-horizon", "inf"]
        self.run(*args, *extra, timeout=120)

    def class_set(self, cid: str, rate: str, *extra: str) -> None:
        self.run("class", "set", self.dev, cid, rate, *extra)

    def class_del(self, cid: str) -> None:
        self.run("class", "del", self.dev, cid)

    def filter_port(self, proto: str, port: int, cid: str) -> None:
        self.run("filter", "add", self.dev, "proto", proto, "dport", port, "classid", cid)

    def filter_del_port(self, proto: str, port: int) -> None:
        self.run("filter", "del", self.dev, "proto", proto, "dport", port)

    def detach(self) -> None:
        self.run("detach", self.dev, timeout=120)

    def counters(self) -> PspxdpCounters:
        """From `pspxdp status -j` (the keys `pspxdp stats --keys` lists)."""
        d = json.loads(self.run("status", self.dev, "-j"))
        classes = {}
        for c in d.get("classes", []):
            classes[c["class"]] = ClassCounters(
                tx_frames=c["tx_frames"], tx_bytes=c["tx_bytes"],
                drops=sum(v for k, v in c.items() if k.startswith("drop_")),
                marks=c["ce_marked"],
                # classified but passed unpaced: the pacer was taken for dead
                # (fail-open: a daemon stalled past the heartbeat timeout)
                passed=c["tc_passed"],
                backlog=c["backlog_frames"],
            )
        # Frames lost inside pspxdp but no class's: its sockets' rings
        # (kernel: ring full, no free frame to fill) and frames on a queue
        # without a socket (XDP).
        dm = d.get("daemon") or {}
        rings = (dm.get("socket_ring_full", 0) + dm.get("socket_fill_empty", 0)
                 + (d.get("xdp") or {}).get("no_socket", 0))
        return PspxdpCounters(daemon_pid=d.get("daemon_pid") or None, classes=classes,
                              lost_in_rings=rings,
                              # byte times the wire idled although a class was backlogged
                              underrun_bytes=dm.get("underrun_bytes", 0))


class Shaper:
    """name: the row's label; clock: which clocks the capture can be judged
    on ("byte" needs gap frames: pspxdp only)."""
    name = "?"
    clocks: tuple[str, ...] = ("real",)
    daemon_pid: int | None = None

    def __init__(self, lab: Lab, line_rate: str) -> None:
        self.lab, self.line_rate = lab, line_rate

    def describe(self, flows: Sequence[Flow]) -> str:
        raise NotImplementedError

    def setup(self, flows: Sequence[Flow], proto: str = "udp") -> None:
        raise NotImplementedError

    def counters(self) -> ShaperCounters:
        raise NotImplementedError

    def teardown(self) -> None:
        raise NotImplementedError


class TcShaper(Shaper):
    """kind: none | tbf-tight | tbf-typical | htb (one class per flow, u32)."""

    def __init__(self, lab: Lab, line_rate: str, kind: str, rate: str | None = None) -> None:
        super().__init__(lab, line_rate)
        self.kind, self.rate = kind, rate
        self.name = kind

    def tc(self, *args: str | int) -> None:
        self.lab.s.run("tc", *args)

    def describe(self, flows: Sequence[Flow]) -> str:
        wire = (f"root tbf rate {self.line_rate} burst {WIRE_BUCKET} limit {WIRE_QUEUE} "
                f"(the wire at M)")
        if self.kind == "none":
            return wire
        if self.kind.startswith("tbf"):
            b = ONE_FRAME_BUCKET if self.kind == "tbf-tight" else TYPICAL_BUCKET
            return f"{wire} + tbf rate {self.rate or flows[0].rate} burst {b} limit {SHAPER_QUEUE}"
        return f"{wire} + htb, one class per flow (rate = ceil = target, default burst), u32 on dport"

    def setup(self, flows: Sequence[Flow], proto: str = "udp") -> None:
        dev = self.lab.dev
        self.tc("qdisc", "add", "dev", dev, "root", "handle", "1:", "tbf", "rate", self.line_rate,
                "burst", WIRE_BUCKET, "limit", WIRE_QUEUE)
        if self.kind.startswith("tbf"):
            if len(flows) != 1 and not self.rate:
                raise ValueError("tbf shapes one aggregate: one flow, or give its rate")
            b = ONE_FRAME_BUCKET if self.kind == "tbf-tight" else TYPICAL_BUCKET
            self.tc("qdisc", "add", "dev", dev, "parent", "1:1", "handle", "10:", "tbf", "rate",
                    self.rate or flows[0].rate, "burst", b, "limit", SHAPER_QUEUE)
        elif self.kind == "htb":
            self.tc("qdisc", "add", "dev", dev, "parent", "1:1", "handle", "10:", "htb", "default", "0")
            for i, f in enumerate(flows, 1):
                cid = f"10:{i:x}"
                self.tc("class", "add", "dev", dev, "parent", "10:", "classid", cid, "htb", "rate",
                        f.rate, "ceil", f.rate)
                self.tc("filter", "add", "dev", dev, "parent", "10:", "protocol", "ip", "prio", "1",
                        "u32", "match", "ip", "dport", f.port, "0xffff", "flowid", cid)
        elif self.kind != "none":
            raise ValueError(f"unknown shaper {self.kind}")

    def counters(self) -> ShaperCounters:
        q = json.loads(self.lab.s.run("tc", "-s", "-j", "qdisc", "show", "dev", self.lab.dev))
        return ShaperCounters(drops=sum(x.get("drops", 0) for x in q), marks=None)

    def teardown(self) -> None:
        self.lab.s.run("tc", "qdisc", "del", "dev", self.lab.dev, "root", check=False)


class PspxdpShaper(Shaper):
    name = "pspxdp"
    clocks: tuple[str, ...] = ("byte", "real")

    def __init__(self, lab: Lab, line_rate: str, extra: Sequence[str] = (), rt_priority: int = 0) -> None:
        super().__init__(lab, line_rate)
        self.p = Pspxdp(f"{lab.build}/user/pspxdp", lab.s, lab.dev)
        self.extra = extra
        self.rt_priority = rt_priority
        self.cids: list[tuple[str, str]] = []  # (class id, flow name)

    def describe(self, flows: Sequence[Flow]) -> str:
        rt = (f"; daemon SCHED_FIFO {self.rt_priority} (chrt -a -f -p)" if self.rt_priority else
              "; daemon as attach schedules it (SCHED_DEADLINE)")
        mode = " ".join(self.extra) if self.extra else "--clock byte --gap-horizon inf"
        return (f"pspxdp attach --line-rate {self.line_rate} {mode}, one paced class per flow, "
                f"filter on dport{rt}")

    def setup(self, flows: Sequence[Flow], proto: str = "udp") -> None:
        self.lab.pspxdp_devs.append((self.lab.s, self.lab.dev))
        self.p.attach(self.line_rate, self.extra)
        for i, f in enumerate(flows, 1):
            cid = f"1:{i:x}"
            self.p.class_set(cid, f.rate)
            self.p.filter_port(proto, f.port, cid)
            self.cids.append((cid, f.name))
        self.daemon_pid = self.p.counters().daemon_pid
        if self.rt_priority and self.daemon_pid:
            # --daemon-rt: SCHED_FIFO in place of attach's deadline policy
            # (design §4.4: the fair server then stops a daemon that takes
            # its CPU whole for 50 ms at once).
            sh(["chrt", "-a", "-f", "-p", str(self.rt_priority), str(self.daemon_pid)])

    def counters(self) -> ShaperCounters:
        all_ = self.p.counters()
        c = all_.classes
        mine = {name: c[cid] for cid, name in self.cids if cid in c}
        return ShaperCounters(drops=sum(x.drops for x in mine.values()) + all_.lost_in_rings,
                              lost_in_rings=all_.lost_in_rings, underrun_bytes=all_.underrun_bytes,
                              marks=sum(x.marks for x in mine.values()),
                              passed=sum(x.passed for x in mine.values()),
                              per_flow={name: x.drops for name, x in mine.items()})

    def teardown(self) -> None:
        self.p.detach()
        self.lab.pspxdp_devs.remove((self.lab.s, self.lab.dev))
        self.cids = []


def make(ctx: RunContext, name: str, rate: str | None = None) -> Shaper:
    """pspxdp: the paper's rule on the byte clock (gap frames fill the wire,
    judged on both clocks); pspxdp-clockless: what a veth gets by default,
    frames released at their real-time due times, no gap frames (judged in
    real time only); else a tc shaper."""
    lab, line_rate = ctx.lab, ctx.line_rate
    if name == "pspxdp":
        return PspxdpShaper(lab, line_rate, rt_priority=ctx.daemon_rt)
    if name == "pspxdp-clockless":
        clockless = PspxdpShaper(lab, line_rate, extra=("--clock", "none"), rt_priority=ctx.daemon_rt)
        clockless.name, clockless.clocks = name, ("real",)
        return clockless
    return TcShaper(lab, line_rate, name, rate)
