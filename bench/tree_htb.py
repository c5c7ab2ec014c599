#!/usr/bin/env python3
"""bench/run_tree_htb.sh's trees, their ideal allocation and the report:
pspxdp's class tree (design §3.12) beside htb with the same classes, rates,
ceils and prios on the same kind of veth, the same offered load, one sender
process per subscriber.

  tree_htb.py pspxdp-classes CASE [--leaf-limit TIME]
                                      `pspxdp class set` arguments, one class a line
  tree_htb.py pspxdp-filters CASE     `pspxdp filter add --file -` lines
  tree_htb.py tc CASE DEV             tc commands (qdisc, classes, filters), one a line
  tree_htb.py leaves CASE             the leaves' class ids, space-separated
  tree_htb.py dsts CASE NET           the destination addresses the senders use
  tree_htb.py senders CASE NET PHASE_S
      one sender process a line: "PORT psp_traffic-send-arguments..."
  tree_htb.py report --results ROOT --phase S --command CMD --load-before L --load-after L
                     --pspxdp BIN [--tree RUN=PREFIX...] [--prio RUN=PREFIX...]
      RUN: SHAPER/CLOCK (pspxdp/byte, pspxdp/none, htb/none; the priority case also bare/none);
      PREFIX.pcap: the capture at the far end; PREFIX.send.PORT.json: each sender's report;
      PREFIX.net (tree case): the wire's /24, its sites' addresses;
      PREFIX.sink.json (priority case): the stamped sink's report.
  tree_htb.py selfcheck               the analysis on a synthetic trace (tests/CMakeLists.txt)

CASE "tree": the ISP tree scaled to 2 cores. A 400 Mbit/s root (1:1) on a
1 Gbit/s line; 4 sites 1:10..1:40 of rate 80 ceil 160 (the goal's 200/400 of
1 Gbit/s, times 0.4); 5 subscribers each of rate 16 ceil 48 (5 x 16 = the
site's rate, as the goal's 25 x 8). Subscribers 1-3 of each site offer
60 Mbit/s (1.25 x ceil), 4 and 5 stay idle (their guarantee is spare).
Three phases of PHASE_S seconds: all 12 on; site 1:40's three off (the
others borrow); site 1:40's back (they give back).

CASE "prio": Cilium's "priorities inside a limit": 1:1 rate = ceil
100 Mbit/s; under it 1:10 (prio 0, rate 10 ceil 100) carries a stamped
1 Mbit/s flow of 200-byte datagrams, 1:20 (prio 1, rate 10 ceil 100) a
stamped bulk flow offered 150 Mbit/s.
"""
import argparse
import bisect
import itertools
import json
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from psplab import report  # lab/netns.sh (and ctest) put lab/ on PYTHONPATH
from psplab.measure import WIRE_OVERHEAD, analyze, read_pcap

LINE_BPS = 1_000_000_000
MBIT = 1_000_000
PHASES = 3
PAYLOAD = 1472  # the tree's and the bulk flow's UDP payload
SMALL_PAYLOAD = 200  # the priority case's latency flow
FRAME_L2 = PAYLOAD + 42 + 4  # what a class rate counts per datagram (FCS included)


@dataclass(frozen=True)
class Cls:
    classid: str
    parent: str | None
    rate_bps: int
    ceil_bps: int
    prio: int
    port: int | None = None  # leaves: the UDP destination port classified to it
    host: int = 2  # leaves: the last byte of the destination address (a site's own: analyze selects by it)
    offered_bps: int = 0  # leaves: what the sender offers while on
    on: tuple[bool, ...] = (True,) * PHASES  # leaves: on in each phase
    payload: int = PAYLOAD
    start_s: float = 0.0  # leaves: the sender starts this late (the priority case's latency flow)
    stamp: bool = False  # leaves: stamped datagrams (the sink's one-way delay)


def isp_tree() -> list[Cls]:
    t = [Cls("1:1", None, 400 * MBIT, 400 * MBIT, 0)]
    for site in (1, 2, 3, 4):
        sid = f"1:{site}0"
        t.append(Cls(sid, "1:1", 80 * MBIT, 160 * MBIT, 0))
        for sub in (1, 2, 3, 4, 5):
            busy = sub <= 3
            on = (busy, busy and site != 4, busy)
            t.append(Cls(f"1:{site}{sub}", sid, 16 * MBIT, 48 * MBIT, 0, port=5000 + site * 10 + sub,
                         host=10 + site, offered_bps=60 * MBIT if busy else 0, on=on))
    return t


def prio_tree() -> list[Cls]:
    return [Cls("1:1", None, 100 * MBIT, 100 * MBIT, 0),
            Cls("1:10", "1:1", 10 * MBIT, 100 * MBIT, 0, port=6001, offered_bps=1 * MBIT,
                payload=SMALL_PAYLOAD, start_s=1.0, stamp=True),
            Cls("1:20", "1:1", 10 * MBIT, 100 * MBIT, 1, port=6002, offered_bps=150 * MBIT, stamp=True)]


CASES = {"tree": isp_tree, "prio": prio_tree}


@dataclass
class Tree:
    classes: list[Cls]

    @property
    def leaves(self) -> list[Cls]:
        return [c for c in self.classes if c.port is not None]

    @property
    def inner(self) -> list[Cls]:
        return [c for c in self.classes if c.port is None]

    def children(self, parent: str | None) -> list[Cls]:
        return [c for c in self.classes if c.parent == parent]

    def leaves_under(self, k: Cls) -> list[Cls]:
        kids = self.children(k.classid)
        return [k] if not kids else [x for c in kids for x in self.leaves_under(c)]

    def demand(self, phase: int) -> dict[str, float]:
        return {c.classid: float(c.offered_bps) if c.on[phase] else 0.0 for c in self.leaves}

    def demand_of(self, c: Cls, demand: dict[str, float]) -> float:
        """What c's subtree can use: a leaf's demand, an inner class's children's, capped by ceil."""
        kids = self.children(c.classid)
        d = demand.get(c.classid, 0.0) if not kids else sum(self.demand_of(k, demand) for k in kids)
        return min(float(c.ceil_bps), d)

    def allocate(self, demand: dict[str, float]) -> dict[str, float]:
        """The rules of design §3.12 as a water-filling, node by node from the
        wire down: each child its rate (up to its demand), then the spare to
        the lower prio first, within a prio x_c = min(D_c, lambda * r_c), D_c
        its demand capped by its ceil. htb's rules give the same on these
        trees. Inner classes get what their subtree is given."""
        out: dict[str, float] = {}

        def share(amount: float, kids: list[Cls]) -> None:
            d = {k.classid: self.demand_of(k, demand) for k in kids}
            x = {k.classid: min(float(k.rate_bps), d[k.classid]) for k in kids}
            spare = amount - sum(x.values())
            for prio in sorted({k.prio for k in kids}):
                group = [k for k in kids if k.prio == prio]
                base = dict(x)

                def given(lam: float, group: list[Cls] = group, base: dict[str, float] = base) -> float:
                    return sum(min(d[k.classid], max(base[k.classid], lam * k.rate_bps)) - base[k.classid]
                               for k in group)
                lo, hi = 0.0, float(LINE_BPS)
                want = min(max(spare, 0.0), given(hi))
                for _ in range(100):
                    mid = (lo + hi) / 2
                    lo, hi = (mid, hi) if given(mid) < want else (lo, mid)
                for k in group:
                    x[k.classid] = min(d[k.classid], max(base[k.classid], hi * k.rate_bps))
                spare -= sum(x[k.classid] - base[k.classid] for k in group)
            for k in kids:
                out[k.classid] = x[k.classid]
                share(x[k.classid], self.children(k.classid))

        share(float(LINE_BPS), self.children(None))
        return out


def tree_of(case: str) -> Tree:
    return Tree(CASES[case]())


def mbit_word(bps: int) -> str:
    return f"{bps // MBIT}mbit"


def pspxdp_classes(t: Tree, leaf_limit: str = "") -> list[str]:
    """leaf_limit: a `limit` for the leaves (e.g. 50ms); empty: the default."""
    out = []
    for c in t.classes:
        parent = f"parent {c.parent} " if c.parent else ""
        limit = f" limit {leaf_limit}" if leaf_limit and c.port is not None else ""
        out.append(f"{c.classid} {parent}rate {mbit_word(c.rate_bps)} ceil {mbit_word(c.ceil_bps)} "
                   f"prio {c.prio} flows off{limit}")
    return out


def pspxdp_filters(t: Tree) -> list[str]:
    return [f"pref 10 proto udp dport {c.port} classid {c.classid}" for c in t.leaves]


def tc_commands(t: Tree, dev: str, quantum: int = 0) -> list[str]:
    """stab overhead 4: htb then counts the FCS, as pspxdp's rates do. Default
    buckets (burst, cburst) and, unless given, quantum: what tc picks for the
    rates (rate / r2q: 200,000 bytes, htb's cap, for these classes)."""
    out = [f"qdisc replace dev {dev} root handle 1: stab overhead 4 htb"]
    q = f" quantum {quantum}" if quantum else ""
    for c in t.classes:
        out.append(f"class add dev {dev} parent {c.parent or '1:'} classid {c.classid} htb "
                   f"rate {mbit_word(c.rate_bps)} ceil {mbit_word(c.ceil_bps)} prio {c.prio}{q}")
    out += [f"filter add dev {dev} parent 1: protocol ip prio 1 u32 match ip protocol 17 0xff "
            f"match ip dport {c.port} 0xffff flowid {c.classid}" for c in t.leaves]
    return out


def dst(net: str, c: Cls) -> str:
    return f"{net}.{c.host}"


def on_spans(c: Cls) -> list[tuple[int, int]]:
    """The leaf's runs of phases it is on: [(first, end)), in phases."""
    spans, i = [], 0
    while i < PHASES:
        if c.on[i]:
            j = i
            while j < PHASES and c.on[j]:
                j += 1
            spans.append((i, j))
            i = j
        else:
            i += 1
    return spans


def senders(t: Tree, net: str, phase_s: float) -> list[str]:
    """One psp_traffic process per leaf that is ever on: its flows (one per run
    of phases it is on, to the same port) and its payload size."""
    out = []
    for c in t.leaves:
        spans = on_spans(c)
        if not spans or not c.offered_bps:
            continue
        args = []
        for a, b in spans:
            start = max(a * phase_s, c.start_s)
            when = "" if (start, b) == (0, PHASES) else f":{start:g}:{b * phase_s:g}"
            args.append(f"--flow {dst(net, c)}:{c.port}:{c.offered_bps / MBIT:g}mbit{when}")
        out.append(f"{c.port} {' '.join(args)} --size {c.payload}{' --stamp' if c.stamp else ''}")
    return out


# --- reading a run --------------------------------------------------------

BIN_S = 0.050  # the plot's bins and the step-response windows


@dataclass
class Trace:
    """One capture, on the clock it is judged on: per port the frames' times
    (ns since the capture's first frame; byte clock: the wire bytes of every
    frame before it over the line rate) and L2 bytes with FCS, and each
    frame's real time for cutting phases."""
    clock: str
    times: dict[int, list[int]]
    l2: dict[int, list[int]]
    real_ns: list[int] = field(default_factory=list)  # every frame's capture time
    clock_ns: list[int] = field(default_factory=list)  # every frame's time on this clock
    first_real_ns: int = 0

    def at(self, real_ns: int) -> int:
        """The clock's time at a real time (the next frame's)."""
        i = min(bisect.bisect_left(self.real_ns, real_ns), len(self.clock_ns) - 1)
        return self.clock_ns[i] if self.clock_ns else 0


def make_trace(frames: Sequence[tuple[int, int, int | None]], clock: str, origin_port: int | None = None) -> Trace:
    """frames: (capture ns, wire bytes, port or None) as read_pcap yields them.
    Real time counts from the first frame of origin_port (default: of any
    port: the senders' start), the byte clock from the capture's first frame."""
    tr = Trace(clock, {}, {})
    pos_bytes = 0
    t0 = next((t for t, _, port in frames if port is not None and origin_port in (None, port)),
              frames[0][0] if frames else 0)
    tr.first_real_ns = t0
    for t, wire, port in frames:
        now = t - t0 if clock != "byte" else pos_bytes * 8 * 1_000_000_000 // LINE_BPS
        tr.real_ns.append(t)
        tr.clock_ns.append(now)
        if port is not None:
            tr.times.setdefault(port, []).append(now)
            tr.l2.setdefault(port, []).append(wire - WIRE_OVERHEAD + 4)
        pos_bytes += wire
    return tr


class Rates:
    """Window rates per port by bisect over prefix sums."""

    def __init__(self, tr: Trace) -> None:
        self.tr = tr
        self.before = {p: list(itertools.accumulate(v, initial=0)) for p, v in tr.l2.items()}

    def rate(self, port: int, w: tuple[int, int]) -> float:
        times = self.tr.times.get(port, [])
        if w[1] <= w[0] or not times:
            return 0.0
        i, j = bisect.bisect_left(times, w[0]), bisect.bisect_left(times, w[1])
        return (self.before[port][j] - self.before[port][i]) * 8 / ((w[1] - w[0]) / 1e9)

    def step(self, port: int, t_from: int, t_end: int, old: float, new: float, within: float) -> float | None:
        """ms from t_from to the centre of the first BIN_S window (1 ms steps,
        the first centred on t_from) whose rate is halfway from the old share
        to the new (within 0.5) or within `within` of the new share (below
        0.5, e.g. 0.1: 10 %). A step at t_from is halfway at 0."""
        if old == new:
            return None
        target = new + (old - new) * within if within >= 0.5 else None
        half = int(BIN_S * 1e9) // 2
        t = t_from - half
        while t + 2 * half <= t_end:
            r = self.rate(port, (t, t + int(BIN_S * 1e9)))
            near = abs(r - new) <= within * new
            if (near if target is None else r >= target if new > old else r <= target):
                return (t + half - t_from) / 1e6
            t += 1_000_000
        return None


def burst_slice(src: str, dst_path: str, t0_ns: int, t1_ns: int) -> None:
    """The frames of the capture src stamped in [t0, t1) as a pcap of their own."""
    data = Path(src).read_bytes()
    out = bytearray(data[:24])
    scale = 1 if int.from_bytes(data[:4], "little") == 0xA1B23C4D else 1000
    off = 24
    while off + 16 <= len(data):
        sec = int.from_bytes(data[off:off + 4], "little")
        frac = int.from_bytes(data[off + 4:off + 8], "little")
        incl = int.from_bytes(data[off + 8:off + 12], "little")
        t = sec * 1_000_000_000 + frac * scale
        if t0_ns <= t < t1_ns:
            out += data[off:off + 16 + incl]
        off += 16 + incl
    Path(dst_path).write_bytes(bytes(out))


@dataclass
class Offer:
    """A leaf's sender: what entered the shaper while the leaf was on, and
    the sends the shaper refused by back pressure (a full socket: the leaf
    was backlogged)."""
    sent_mbit: float
    blocked: int


def read_offers(prefix: str, t: Tree, phase_s: float) -> dict[int, Offer]:
    out: dict[int, Offer] = {}
    for c in t.leaves:
        assert c.port is not None
        path = Path(f"{prefix}.send.{c.port}.json")
        if not path.exists():
            continue
        d = json.loads(path.read_text())
        on_s = sum(b - a for a, b in on_spans(c)) * phase_s
        out[c.port] = Offer(sum(f["sent_bits"] for f in d["flows"]) / on_s / MBIT,
                            sum(int(f["blocked"]) for f in d["flows"]))
    return out


def capture_drops(prefix: str) -> int | None:
    p = Path(f"{prefix}.tcpdump")
    m = re.search(r"(\d+) packets? dropped by kernel", p.read_text()) if p.exists() else None
    return int(m.group(1)) if m else None


# --- the tree case ----------------------------------------------------------


@dataclass
class ClassRow:
    run: str
    clock: str
    classid: str
    level: str  # root, site, leaf
    ceil_mbit: float
    ideal: list[float]
    got: list[float]
    burst_mean: list[float | None]
    burst_ceil: list[float | None]
    offered_mbit: float | None = None
    blocked: int | None = None
    flag: str = ""
    borrow_half_ms: float | None = None  # change 1 (site 1:40 idle), from its senders' stop
    borrow_settle_ms: float | None = None
    idle_half_ms: float | None = None  # change 1, from site 1:40's last frame (its backlog drained)
    back_half_ms: float | None = None  # change 2 (site 1:40 back)
    back_settle_ms: float | None = None
    drained_ms: float | None = None  # site 1:40's leaves: their last frame after their senders stopped


def err(got: float, ideal: float) -> str:
    return f"{(got - ideal) / ideal * 100:+.1f}" if ideal else "-"  # no share: "got" says what leaked


def steady(tr: Trace, t0_real: int, phase_s: float, i: int) -> tuple[int, int]:
    """Phase i's steady part on the trace's clock: 1 s after its start to 0.25 s before its end."""
    a = t0_real + int((i * phase_s + 1.0) * 1e9)
    b = t0_real + int(((i + 1) * phase_s - 0.25) * 1e9)
    return tr.at(a), tr.at(b)


def selectors(t: Tree, net: str) -> list[list[tuple[str, str, str]]]:
    """analyze's flows for each level (a frame belongs to the first flow it
    matches, so one call per level): leaves by port, sites by their address,
    the root: every UDP frame. Targets: each class's ceil."""
    leaves = [(c.classid, f"proto udp dport {c.port}", mbit_word(c.ceil_bps)) for c in t.leaves]
    levels = [leaves]
    sites = [c for c in t.inner if c.parent is not None]
    if sites:
        levels.append([(c.classid, f"proto udp dst {net}.{t.leaves_under(c)[0].host}/32",
                        mbit_word(c.ceil_bps)) for c in sites])
    levels += [[(c.classid, "proto udp", mbit_word(c.ceil_bps)) for c in t.inner if c.parent is None]]
    return levels


def analyse_tree(run: str, prefix: str, pspxdp: str, phase_s: float) -> tuple[list[ClassRow], Trace, str]:
    t = tree_of("tree")
    net = Path(f"{prefix}.net").read_text().strip()  # the wire's /24: the sites' addresses
    clock = "byte" if run.endswith("/byte") else "real"
    ports = {c.port for c in t.leaves if c.port is not None}
    frames = list(read_pcap(f"{prefix}.pcap", ports))
    tr = make_trace(frames, clock)
    real = tr.first_real_ns
    rates = Rates(tr)
    ideal = [t.allocate(t.demand(i)) for i in range(PHASES)]
    windows = [steady(tr, real, phase_s, i) for i in range(PHASES)]
    # Bursts per phase and level: `pspxdp analyze` of the phase's steady part.
    bursts: list[dict[str, tuple[float | None, float | None]]] = []
    for i in range(PHASES):
        a = real + int((i * phase_s + 1.0) * 1e9)
        b = real + int(((i + 1) * phase_s - 0.25) * 1e9)
        cut = f"{prefix}.phase{i + 1}.pcap"
        burst_slice(f"{prefix}.pcap", cut, a, b)
        found: dict[str, tuple[float | None, float | None]] = {}
        for flows in selectors(t, net):
            rep = analyze(pspxdp, cut, flows, clock, mbit_word(LINE_BPS))
            for name, f in rep["by_name"].items():
                if f.get("frames"):
                    found[name] = (f.get("max_burst_mtu"), f.get("max_burst_at_target_mtu"))
        bursts.append(found)
    offers = read_offers(prefix, t, phase_s)
    change1, change2 = tr.at(real + int(phase_s * 1e9)), tr.at(real + int(2 * phase_s * 1e9))
    end = tr.at(real + int(3 * phase_s * 1e9))
    # Site 1:40's last frame in phase 2: from then on its site is idle at the wire.
    idle = max((ts[k] for c in t.leaves if not c.on[1] and c.port is not None
                for ts in [tr.times.get(c.port, [])]
                for k in [bisect.bisect_left(ts, change2) - 1] if k >= 0 and ts[k] >= change1), default=change1)
    rows = []
    for c in t.classes:
        leaves = [x for x in t.leaves_under(c) if x.offered_bps]
        if not leaves:
            continue  # never on: nothing to judge
        ports_of = [x.port for x in leaves if x.port is not None]
        got = [sum(rates.rate(p, w) for p in ports_of) for w in windows]
        level = "leaf" if c.port else ("site" if c.parent else "root")
        row = ClassRow(run.split("/")[0], clock, c.classid, level, c.ceil_bps / MBIT,
                       [ideal[i][c.classid] / MBIT for i in range(PHASES)], [g / MBIT for g in got],
                       [bursts[i].get(c.classid, (None, None))[0] for i in range(PHASES)],
                       [bursts[i].get(c.classid, (None, None))[1] for i in range(PHASES)])
        if c.port is not None:
            o = offers.get(c.port)
            if o:
                row.offered_mbit, row.blocked = o.sent_mbit, o.blocked
                # Short: the shaper was offered less than the leaf's largest share
                # and never pushed back: the leaf may not have been backlogged.
                most = max(row.ideal[i] for i in range(PHASES) if c.on[i])
                row.flag = "held" if o.blocked else "" if o.sent_mbit >= 1.02 * most else "SHORT"
            i1, i2 = ideal[0][c.classid], ideal[1][c.classid]
            if i1 != i2 and c.on[1]:
                row.borrow_half_ms = rates.step(c.port, change1, change2, i1, i2, 0.5)
                row.borrow_settle_ms = rates.step(c.port, change1, change2, i1, i2, 0.1)
                row.idle_half_ms = rates.step(c.port, idle, change2, i1, i2, 0.5)
            i3 = ideal[2][c.classid]
            if i2 != i3:
                row.back_half_ms = rates.step(c.port, change2, end, i2, i3, 0.5)
                row.back_settle_ms = rates.step(c.port, change2, end, i2, i3, 0.1)
            times = tr.times.get(c.port, [])
            if not c.on[1] and times:
                k = bisect.bisect_left(times, change2) - 1
                if k >= 0 and times[k] >= change1:
                    row.drained_ms = (times[k] - change1) / 1e6
        rows.append(row)
    note = ""
    if clock == "byte":
        # The same capture in real time: what the daemon's timing delivered.
        rt = make_trace(frames, "real")
        rr = Rates(rt)
        root = [sum(rr.rate(p, steady(rt, rt.first_real_ns, phase_s, i)) for p in ports) / MBIT
                for i in range(PHASES)]
        note = (f"{label(run)} seen in real time: the root got {' / '.join(f'{x:.1f}' for x in root)} Mbit/s "
                "in phases 1 / 2 / 3 (ideal 400)")
    return rows, tr, note


# --- the priority case ------------------------------------------------------


@dataclass
class PrioRow:
    run: str
    clock: str
    owd_p50_us: float | None
    owd_p99_us: float | None
    added_p50_us: float | None
    added_p99_us: float | None
    latency_lost: int | None
    latency_mbit: float
    bulk_mbit: float
    spare_mbit: float
    bulk_take_pct: float | None


def analyse_prio(run: str, prefix: str, seconds: float) -> PrioRow:
    """RUN: SHAPER/CLOCK, SHAPER/CLOCK/alone (no bulk) or bare/none (no shaper, no bulk)."""
    t = tree_of("prio")
    lat, bulk = t.leaves
    assert lat.port is not None and bulk.port is not None
    frames = list(read_pcap(f"{prefix}.pcap", {lat.port, bulk.port}))
    tr = make_trace(frames, "real", origin_port=lat.port)
    rates = Rates(tr)
    # From 0.5 s after the latency flow's first frame to 0.25 s before it stops.
    w = (int(0.5e9), int((seconds - lat.start_s - 0.25) * 1e9))
    sink = json.loads(Path(f"{prefix}.sink.json").read_text())
    ls = sink.get(str(lat.port), {})
    lat_bps, bulk_bps = rates.rate(lat.port, w), rates.rate(bulk.port, w)
    with_bulk = not run.startswith("bare/") and not run.endswith("/alone")
    spare = t.classes[0].ceil_bps - lat_bps if with_bulk else 0.0
    return PrioRow(run, "byte" if "/byte" in run else "real",
                   ls.get("owd_p50_us"), ls.get("owd_p99_us"), None, None, ls.get("lost"),
                   lat_bps / MBIT, bulk_bps / MBIT, spare / MBIT,
                   bulk_bps / spare * 100 if spare else None)


# --- the report -------------------------------------------------------------


RUN_WORDS = {"pspxdp/byte": "pspxdp attach --line-rate 1gbit --clock byte --gap-horizon inf (gap frames)",
             "pspxdp/none": "pspxdp attach --line-rate 1gbit --clock none (clockless, a veth's default)",
             "htb/none": "htb, the same classes via tc (real time only: a qdisc has no byte clock), tc's "
                         "default quantum (rate / r2q, here 200,000 bytes: 130 full frames a turn)",
             "htbq/none": "(tree case) htb again with `quantum 1514` on every class: one frame a turn",
             "bare/none": "no shaper, the latency flow alone (the wire's own delay)",
             "SHAPER/CLOCK/alone": "(priority case) that shaper and tree, the latency flow without the bulk"}


def label(run: str) -> str:
    base = run.removesuffix("/alone")
    word = {"pspxdp/byte": "pspxdp byte", "pspxdp/none": "pspxdp clockless", "htb/none": "htb",
            "htbq/none": "htb quantum 1514", "bare/none": "bare"}.get(base, base)
    return word + (", alone" if run.endswith("/alone") else "")


def tree_tables(rows: list[ClassRow]) -> list[report.Table]:
    phases = ("1 all on", "2 site 1:40 idle", "3 site 1:40 back")
    rate = report.Table(
        "Tree: rate per class (Mbit/s, L2 + FCS, steady part of each phase) against the ideal",
        ["shaper", "clock", "class", "level", "offered", "flag",
         "ideal 1", "got 1", "err 1 %", "ideal 2", "got 2", "err 2 %", "ideal 3", "got 3", "err 3 %"],
        [f"phases: {', '.join(phases)}; steady part: 1 s after the phase's start to 0.25 s before its end.",
         "ideal: the water-filling of the rules (rate, then the spare by prio, then in proportion to rate, "
         "capped by ceil and demand); htb's rules give the same on this tree. An inner class's got: the "
         "sum of its leaves.",
         "offered: what the leaf's own sender put into the shaper while on (Mbit/s; asked 60). htb holds a "
         "sender back by its socket buffer (blocked sends: the leaf was backlogged); pspxdp takes every "
         "datagram and drops beyond the class limit. flag held: the sender was blocked (backlogged); "
         "SHORT: offered under 1.02 x the leaf's largest "
         "share and never blocked: its demand may have fallen short, its row is no test of the shaper.",
         "clock byte: positions counted in wire bytes (gap frames included) over 1 Gbit/s at the far end; "
         "real: capture timestamps."])
    burst = report.Table(
        "Tree: largest burst per class (MTU = 1518 B) at its mean rate and at its ceil, per phase",
        ["shaper", "clock", "class", "level", "ceil", "@mean 1", "@mean 2", "@mean 3", "@ceil 1", "@ceil 2",
         "@ceil 3"],
        ["@mean: the largest queue at a server draining at the class's mean rate over the phase's steady "
         "part (the paper's figure; precise pacing keeps it within 2 MTU); @ceil: at the class's ceil "
         "(a site's and the root's own limit; sites run above their rate, so at the rate it has no bound).",
         "inner classes: a site is its leaves' frames (selected by the site's destination address), the "
         "root every UDP frame; `pspxdp analyze`, the same judge for every shaper.",
         report.BYTE_CLOCK_NOTE, report.REAL_TIME_NOTE])
    step = report.Table(
        "Tree: time to borrow (site 1:40 goes idle) and to give back (it returns), per leaf (ms)",
        ["shaper", "clock", "leaf", "borrow ½", "borrow ±10%", "idle→½", "back ½", "back ±10%", "drained"],
        ["from the demand change at the sender (t0 + phase, t0 = the capture's first leaf frame) to the first "
         f"{BIN_S * 1000:.0f} ms window's centre (1 ms steps) whose rate is halfway from the old share to the "
         "new (½: a clean step reads 0), or within 10 % of the new share (±10%: a clean step reads 15); '-' "
         "where the share does not change or never got there.",
         "drained: site 1:40's leaves' last frame after their senders stopped (their backlog in the shaper "
         "drains: the others borrow only then); idle→½: borrow ½ counted from site 1:40's last frame.",
         "byte clock: the change's time is the byte position of the frame at that real time."])
    for r in rows:
        who = label(f"{r.run}/{'byte' if r.clock == 'byte' else 'none'}")
        rate.add(who, r.clock, r.classid, r.level, report.num(r.offered_mbit, "{:.1f}"), r.flag or "",
                 *itertools.chain.from_iterable((f"{r.ideal[i]:.1f}", f"{r.got[i]:.1f}", err(r.got[i], r.ideal[i]))
                                                for i in range(PHASES)))
        burst.add(who, r.clock, r.classid, r.level, f"{r.ceil_mbit:.0f}",
                  *(report.num(b, "{:.1f}") for b in r.burst_mean), *(report.num(b, "{:.1f}") for b in r.burst_ceil))
        if r.level == "leaf":
            step.add(who, r.clock, r.classid, *(report.num(x, "{:.0f}") for x in (
                r.borrow_half_ms, r.borrow_settle_ms, r.idle_half_ms, r.back_half_ms, r.back_settle_ms,
                r.drained_ms)))
    return [rate, burst, step]


def prio_table(rows: list[PrioRow]) -> report.Table:
    base = next((r for r in rows if r.run.startswith("bare/")), None)
    t = report.Table(
        "Priority inside a limit: prio-0 latency flow beside prio-1 bulk under one 100 Mbit/s parent",
        ["shaper", "clock", "owd p50 µs", "owd p99 µs", "added p50 µs", "added p99 µs", "lat lost",
         "lat Mbit/s", "bulk Mbit/s", "spare Mbit/s", "bulk take %"],
        ["1:1 rate = ceil 100mbit; 1:10 prio 0 rate 10mbit ceil 100mbit: 1 Mbit/s of 200-byte stamped "
         "datagrams (about 500 a second); 1:20 prio 1 rate 10mbit ceil 100mbit: bulk offered 150 Mbit/s.",
         "owd: one-way delay of the latency flow, sender's CLOCK_REALTIME at send to the sink's kernel "
         "receive stamp (same host), its whole run (it starts 1 s after the bulk); added: minus the bare "
         "wire's (no shaper, the latency flow alone) at the same percentile. 'alone': the same shaper and "
         "tree without the bulk flow: what the shaper's path adds by itself, the rest is the bulk's doing.",
         "spare: the parent's 100 Mbit/s minus what the latency class took; bulk take: the bulk class's "
         "rate over that (100 % = it got all the spare). Rates from the capture, from 0.5 s after the "
         "latency flow's first frame to 0.25 s before it stops.",
         "all in real time (the byte clock row is the daemon in gap-frame mode, its delays still measured in "
         "real time), " + report.REAL_TIME_NOTE])
    for r in rows:
        if base and r is not base:
            if r.owd_p50_us is not None and base.owd_p50_us is not None:
                r.added_p50_us = r.owd_p50_us - base.owd_p50_us
            if r.owd_p99_us is not None and base.owd_p99_us is not None:
                r.added_p99_us = r.owd_p99_us - base.owd_p99_us
        t.add(label(r.run), r.clock,
              report.num(r.owd_p50_us, "{:.0f}"), report.num(r.owd_p99_us, "{:.0f}"),
              report.num(r.added_p50_us, "{:.0f}"), report.num(r.added_p99_us, "{:.0f}"),
              report.num(r.latency_lost, "{}"), f"{r.latency_mbit:.2f}", f"{r.bulk_mbit:.1f}",
              f"{r.spare_mbit:.1f}" if r.spare_mbit else "-", report.num(r.bulk_take_pct, "{:.1f}"))
    return t


def plot(res: report.Results, traces: dict[str, Trace], phase_s: float) -> None:
    t = tree_of("tree")
    plt = report.pyplot()
    fig, axes = plt.subplots(len(traces), 1, figsize=(10, 3.4 * len(traces)), sharex=True, squeeze=False)
    ideal = [t.allocate(t.demand(i)) for i in range(PHASES)]
    # The busy subscribers of a site that stays (1:10) and of the one that goes idle (1:40).
    shown = [c for c in t.leaves if c.offered_bps and c.parent in ("1:10", "1:40")]
    colours = ["tab:blue", "tab:cyan", "tab:purple", "tab:red", "tab:orange", "tab:olive"]
    for ax, (run, tr) in zip((a[0] for a in axes), traces.items(), strict=True):
        for c, col in zip(shown, colours, strict=True):
            assert c.port is not None
            bins: dict[int, int] = {}
            for when, n in zip(tr.times.get(c.port, []), tr.l2.get(c.port, []), strict=True):
                k = int(when / 1e9 / BIN_S)
                bins[k] = bins.get(k, 0) + n
            hi = max(bins, default=0)
            ax.plot([i * BIN_S for i in range(hi + 1)], [bins.get(i, 0) * 8 / BIN_S / 1e6 for i in range(hi + 1)],
                    color=col, lw=1, label=f"{c.classid} (site {c.parent})")
            edges = [tr.at(tr.first_real_ns + int(i * phase_s * 1e9)) / 1e9 for i in range(PHASES + 1)]
            ax.step(edges, [ideal[min(i, PHASES - 1)][c.classid] / 1e6 for i in range(PHASES + 1)],
                    where="post", color=col, lw=0.8, ls="--")
        ax.set_title(f"{label(run)} ({'byte clock' if tr.clock == 'byte' else 'real time'}): the busy "
                     f"subscribers of sites 1:10 and 1:40, {BIN_S * 1000:.0f} ms bins (dashed: ideal)")
        ax.set_ylabel("Mbit/s (L2 + FCS)")
        ax.set_ylim(0, 70)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, ncol=6, loc="upper left")
    axes[-1][0].set_xlabel(f"s since the first frame (site 1:40 idle from {phase_s:g} s to {2 * phase_s:g} s "
                           "at the sender)")
    res.save(fig, "rate-over-time.png")


def do_report(a: argparse.Namespace) -> None:
    what = "tree-vs-htb-fair" + (f"-limit-{a.leaf_limit}" if a.leaf_limit else "") + ("-spin" if a.spin else "")
    res = report.Results(a.results, what, a.command, report.now())
    rows: list[ClassRow] = []
    traces: dict[str, Trace] = {}
    drops: list[str] = []
    notes: list[str] = []
    for spec in a.tree:
        run, prefix = spec.split("=", 1)
        got, tr, note = analyse_tree(run, prefix, a.pspxdp, a.phase)
        if note:
            notes.append(note)
        rows += got
        traces[run] = tr
        drops.append(f"{label(run)} {report.num(capture_drops(prefix), '{}')}")
    tables = tree_tables(rows) if rows else []
    prio_rows = []
    for spec in a.prio:
        run, prefix = spec.split("=", 1)
        prio_rows.append(analyse_prio(run, prefix, a.prio_seconds))
        drops.append(f"prio {label(run)} {report.num(capture_drops(prefix), '{}')}")
    if prio_rows:
        tables.append(prio_table(prio_rows))
    for t in tables:
        res.table(t)
    print(f"capture drops (tcpdump): {', '.join(drops)}")
    for n in notes:
        print(n)
    res.csv("classes.csv", report.as_dicts(rows))
    res.csv("priority.csv", report.as_dicts(prio_rows))
    if traces:
        plot(res, traces, a.phase)
    tree = "\n".join(f"    pspxdp class set DEV {line}" for line in pspxdp_classes(tree_of("tree"), a.leaf_limit))
    prio = "\n".join(f"    pspxdp class set DEV {line}" for line in pspxdp_classes(tree_of("prio")))
    runs = "\n".join(f"- {label(r)}: {w}" + (" --spin" if a.spin and r.startswith("pspxdp") else "")
                     for r, w in RUN_WORDS.items())
    res.finish(f"""Question: on the same tree and the same offered load (one sender process
per subscriber), how close do pspxdp's class tree (design §3.12) and
Linux htb come to the ideal allocation per class, how bursty is each level,
how fast do leaves borrow and give back when a site's demand goes and
returns; and does a prio-0 class keep its latency beside prio-1 bulk
under one limit?

- Load (`uptime`) before: {a.load_before}; after: {a.load_after}.
- Capture drops (tcpdump, a lost gap frame shortens the byte clock): {', '.join(drops)}.
{"".join(f"- {n}." + chr(10) for n in notes)}- Noisy: real-time figures on a shared 2-vCPU VM, other work around it.

The tree is the goal's (a 1 Gbit/s wire, 4 sites of `rate 200mbit ceil
400mbit`, 25 subscribers each of `rate 8mbit ceil 50mbit`) scaled to what
2 cores can offer and capture beside the pacer's daemon (about one core):
every rate times 0.4 under a root class of 400 Mbit/s on the 1 Gbit/s line
(depth 3: root, 4 sites, subscribers), 5 subscribers per site instead of
25 (16 Mbit/s each, so that they sum to the site's rate as 25 x 8 = 200
does; ceil 48 = 3 x rate where the goal's is 6.25 x), 3 of them busy per
site, 2 idle (their guarantee is spare). Each busy subscriber has its own
`psp_traffic` process offering 60 Mbit/s (1.25 x its ceil) of 1472-byte
datagrams while on: 720 Mbit/s offered in all. Three phases of
{a.phase:g} s: (1) all 12 on; (2) site 1:40's three off: the other sites
borrow what it leaves; (3) they come back: the others give back. The
frames go to a MAC address nobody has (static neighbours): the far end's
capture sees them, then the stack drops them: the far end's receive, which
a veth runs on the sending CPU (with htb as its qdisc, the senders' own),
is a capture and an early drop, no UDP sink. The earlier run
(docs/results/2026-11-28-tree-vs-htb) had one sender thread for all
leaves and a sink, and htb's leaves were short of their load.

Run as root from the checkout under /work/wt/measure (about 3 minutes).
Runs (each on a fresh attach; htb on its own namespace pair):

{runs}

The tree (pspxdp's words; htb's are the same numbers, `stab overhead 4`
so it counts the FCS as pspxdp does, default burst/cburst/quantum, u32 on
the port):

{tree}

The priority case:

{prio}
""")


# --- the self-check ---------------------------------------------------------


def selfcheck() -> int:
    """The analysis on synthetic data, deterministic: the water-filling of
    both trees, the senders' schedule, and rates and step times on a
    synthetic trace (a port at 20 Mbit/s that steps to 40 at 1 s)."""
    fails = 0

    def check(what: str, ok: bool) -> None:
        nonlocal fails
        print(("ok   - " if ok else "FAIL - ") + what)
        fails += not ok

    t = tree_of("tree")
    a = [t.allocate(t.demand(i)) for i in range(PHASES)]
    check("phase 1: each site 100, each busy subscriber 100/3",
          all(abs(a[0][f"1:{s}0"] - 100e6) < 1 and abs(a[0][f"1:{s}1"] - 100e6 / 3) < 1 for s in (1, 2, 3, 4)))
    check("phase 2: site 1:40 idle, the others 400/3 each, their subscribers 400/9",
          abs(a[1]["1:40"]) < 1 and all(abs(a[1][f"1:{s}1"] - 400e6 / 9) < 1 for s in (1, 2, 3)))
    check("phase 3 = phase 1", all(abs(a[2][k] - a[0][k]) < 1 for k in a[0]))
    check("idle subscribers get nothing", all(a[0][f"1:{s}{n}"] == 0 for s in (1, 2, 3, 4) for n in (4, 5)))
    p = tree_of("prio")
    ap = p.allocate(p.demand(0))
    check("prio: latency its demand, bulk the rest of 100", abs(ap["1:10"] - 1e6) < 1 and abs(ap["1:20"] - 99e6) < 1)
    s = senders(t, "10.0.0", 4)
    check("12 senders; site 1:40's off from 4 to 8 s",
          len(s) == 12 and "--flow 10.0.0.14:5041:60mbit:0:4 --flow 10.0.0.14:5041:60mbit:8:12" in s[9])
    # 1500-byte frames every 600 us (20 Mbit/s) for 1 s, then every 300 us.
    frames: list[tuple[int, int, int | None]] = []
    when = 0
    while when < 2_000_000_000:
        frames.append((when, 1500 - 4 + WIRE_OVERHEAD, 7))
        when += 600_000 if when < 1_000_000_000 else 300_000
    rates = Rates(make_trace(frames, "real"))
    check("window rate 20 Mbit/s", abs(rates.rate(7, (0, 900_000_000)) - 20e6) < 0.2e6)
    half = rates.step(7, 900_000_000, 2_000_000_000, 20e6, 40e6, 0.5)
    check(f"halfway 20 -> 40 100 ms after 0.9 s (got {half})", half is not None and 99 <= half <= 101)
    settle = rates.step(7, 900_000_000, 2_000_000_000, 20e6, 40e6, 0.1)
    check(f"within 10 % of 40 about 115 ms after 0.9 s (got {settle})", settle is not None and 110 <= settle <= 120)
    byte = make_trace([(0, 1000, 7), (10, 1000, None), (20, 1000, 7)], "byte")
    check("byte clock: the third frame at 2000 byte times (16 us at 1 Gbit/s)", byte.times[7] == [0, 16_000])
    print(f"{fails} failure(s)")
    return 1 if fails else 0


def main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    pc = sub.add_parser("pspxdp-classes")
    pc.add_argument("case", choices=CASES)
    pc.add_argument("--leaf-limit", default="", help="the leaves' limit, e.g. 50ms")
    for name in ("pspxdp-filters", "leaves"):
        sub.add_parser(name).add_argument("case", choices=CASES)
    tc = sub.add_parser("tc")
    tc.add_argument("case", choices=CASES)
    tc.add_argument("dev")
    tc.add_argument("--quantum", type=int, default=0, help="every class's quantum in bytes (default: tc's)")
    ds = sub.add_parser("dsts")
    ds.add_argument("case", choices=CASES)
    ds.add_argument("net")
    se = sub.add_parser("senders")
    se.add_argument("case", choices=CASES)
    se.add_argument("net")
    se.add_argument("phase", type=float)
    sub.add_parser("selfcheck")
    rp = sub.add_parser("report")
    rp.add_argument("--results", required=True)
    rp.add_argument("--phase", type=float, required=True)
    rp.add_argument("--prio-seconds", type=float, default=6.0)
    rp.add_argument("--command", required=True)
    rp.add_argument("--load-before", required=True)
    rp.add_argument("--load-after", required=True)
    rp.add_argument("--pspxdp", required=True)
    rp.add_argument("--leaf-limit", default="", help="the pspxdp leaves' limit the run used (default: none given)")
    rp.add_argument("--spin", action="store_true", help="pspxdp attached with --spin (busy-polls while backlogged)")
    rp.add_argument("--tree", action="append", default=[], help="SHAPER/CLOCK=PREFIX")
    rp.add_argument("--prio", action="append", default=[], help="SHAPER/CLOCK=PREFIX")
    a = p.parse_args(argv)
    lines: list[str] = []
    if a.cmd == "pspxdp-classes":
        lines = pspxdp_classes(tree_of(a.case), a.leaf_limit)
    elif a.cmd == "pspxdp-filters":
        lines = pspxdp_filters(tree_of(a.case))
    elif a.cmd == "leaves":
        lines = [" ".join(c.classid for c in tree_of(a.case).leaves)]
    elif a.cmd == "tc":
        lines = tc_commands(tree_of(a.case), a.dev, a.quantum)
    elif a.cmd == "dsts":
        lines = sorted({dst(a.net, c) for c in tree_of(a.case).leaves})
    elif a.cmd == "senders":
        lines = senders(tree_of(a.case), a.net, a.phase)
    elif a.cmd == "selfcheck":
        return selfcheck()
    else:
        do_report(a)
    for line in lines:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
