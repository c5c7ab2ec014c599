#!/usr/bin/env python3
"""bench/run_tree_htb.sh's tree, its ideal allocation and its report: pspxdp's
class tree (design §3.12) beside htb with the same classes, rates, ceils and
prios on the same veth, the same offered load, one demand change.

  tree_htb.py pspxdp-classes     `pspxdp class set` arguments, one class a line
  tree_htb.py pspxdp-filters     `pspxdp filter add --file -` lines
  tree_htb.py tc DEV             tc commands (qdisc, classes, filters), one a line
  tree_htb.py flows DST PHASE_S  the sender's --flow arguments
  tree_htb.py report --results ROOT --phase S --command CMD --load-before L --load-after L
                     --pspxdp BIN RUN=PREFIX...
      PREFIX.pcap: the capture at the far end; PREFIX.send.json: psp_traffic's report.

The tree is the ISP tree of a root, sites and subscribers scaled to what 2
cores can offer: a 400 Mbit/s root on a 1 Gbit/s line, 2 sites of rate 150
ceil 300, each with 3 subscribers of rate 30 ceil 120 (the third at prio 1),
each subscriber offered 100 Mbit/s; after PHASE_S seconds the second site's
subscribers stop (the demand change).
"""
import argparse
import bisect
import itertools
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "lab"))
from psplab import report  # lab/ is not on sys.path by default: the line above puts it there
from psplab.measure import WIRE_OVERHEAD, analyze, read_pcap

LINE_BPS = 1_000_000_000
MBIT = 1_000_000


@dataclass(frozen=True)
class Cls:
    classid: str
    parent: str | None
    rate_bps: int
    ceil_bps: int
    prio: int
    port: int | None = None  # leaves: the UDP destination port classified to it
    offered_bps: int = 0  # leaves: what the sender offers
    stops: bool = False  # leaves: the sender stops it after the first phase

    @property
    def name(self) -> str:
        return f"{self.classid} (site {self.parent})" if self.port else self.classid


def build_tree() -> list[Cls]:
    t = [Cls("1:1", None, 400 * MBIT, 400 * MBIT, 0)]
    for site in (1, 2):
        sid = f"1:{site}0"
        t.append(Cls(sid, "1:1", 150 * MBIT, 300 * MBIT, 0))
        for sub in (1, 2, 3):
            t.append(Cls(f"1:{site}{sub}", sid, 30 * MBIT, 120 * MBIT, 1 if sub == 3 else 0,
                         port=5000 + site * 10 + sub, offered_bps=100 * MBIT, stops=site == 2))
    return t


TREE = build_tree()
LEAVES = [c for c in TREE if c.port is not None]


def children(parent: str | None) -> list[Cls]:
    return [c for c in TREE if c.parent == parent]


def demand_of(c: Cls, demand: dict[str, float]) -> float:
    """What c's subtree can use: a leaf's demand, an inner class's children's, capped by ceil."""
    kids = children(c.classid)
    d = demand.get(c.classid, 0.0) if not kids else sum(demand_of(k, demand) for k in kids)
    return min(float(c.ceil_bps), d)


def allocate(demand: dict[str, float]) -> dict[str, float]:
    """The rules of design §3.12 as a water-filling, node by node from the wire
    down: each child its rate (up to its demand), then the spare to the lower
    prio first, within a prio x_c = min(D_c, lambda * r_c), D_c its demand
    capped by its ceil. htb's rules give the same on this tree."""
    out: dict[str, float] = {}

    def share(amount: float, kids: list[Cls]) -> None:
        d = {k.classid: demand_of(k, demand) for k in kids}
        x = {k.classid: min(float(k.rate_bps), d[k.classid]) for k in kids}
        spare = amount - sum(x.values())
        for prio in sorted({k.prio for k in kids}):
            group = [k for k in kids if k.prio == prio]
            base = dict(x)

            def given(lam: float, group: list[Cls] = group, base: dict[str, float] = base) -> float:
                return sum(min(d[k.classid], max(base[k.classid], lam * k.rate_bps)) - base[k.classid]
                           for k in group)
            lo, hi = 0.0, float(LINE_BPS)
            want = min(spare, given(hi))
            for _ in range(100):
                mid = (lo + hi) / 2
                lo, hi = (mid, hi) if given(mid) < want else (lo, mid)
            for k in group:
                x[k.classid] = min(d[k.classid], max(base[k.classid], hi * k.rate_bps))
            spare -= sum(x[k.classid] - base[k.classid] for k in group)
        for k in kids:
            out[k.classid] = x[k.classid]
            share(x[k.classid], children(k.classid))

    share(float(LINE_BPS), children(None))
    return out


def mbit_word(bps: int) -> str:
    return f"{bps // MBIT}mbit"


def pspxdp_classes() -> list[str]:
    out = []
    for c in TREE:
        parent = f"parent {c.parent} " if c.parent else ""
        out.append(f"{c.classid} {parent}rate {mbit_word(c.rate_bps)} ceil {mbit_word(c.ceil_bps)} "
                   f"prio {c.prio} flows off")
    return out


def pspxdp_filters() -> list[str]:
    return [f"pref 10 proto udp dport {c.port} classid {c.classid}" for c in LEAVES]


def tc_commands(dev: str) -> list[str]:
    # stab overhead 4: htb then counts the FCS, as pspxdp's rates do. Default
    # buckets (burst, cburst, quantum): what tc picks for the rates.
    out = [f"qdisc replace dev {dev} root handle 1: stab overhead 4 htb"]
    for c in TREE:
        out.append(f"class add dev {dev} parent {c.parent or '1:'} classid {c.classid} htb "
                   f"rate {mbit_word(c.rate_bps)} ceil {mbit_word(c.ceil_bps)} prio {c.prio}")
    out += [f"filter add dev {dev} parent 1: protocol ip prio 1 u32 match ip protocol 17 0xff "
            f"match ip dport {c.port} 0xffff flowid {c.classid}" for c in LEAVES]
    return out


def flows(dst: str, phase_s: float) -> list[str]:
    out = []
    for c in LEAVES:
        stop = f":0:{phase_s:g}" if c.stops else ""
        out += ["--flow", f"{dst}:{c.port}:{mbit_word(c.offered_bps)}{stop}"]
    return out


@dataclass
class Leaf:
    shaper: str
    leaf: str
    prio: int
    ideal1: float
    got1: float
    ideal2: float
    got2: float
    burst1_mtu: float | None
    burst2_mtu: float | None
    borrow_ms: float | None  # site 1:10's leaves: from the sender's stop of 1:20's to their second-phase share
    drained_ms: float | None  # site 1:20's leaves: their last frame after the sender stopped them
    offered: float | None


BIN_S = 0.050  # the plot's bins and the borrow time's resolution


def phase_pcap(src: str, dst: str, t0_ns: int, t1_ns: int) -> None:
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
    Path(dst).write_bytes(bytes(out))


Frames = dict[int, list[tuple[int, int]]]  # by port: (time ns, L2 bytes with FCS)


def landmarks(frames: Frames) -> tuple[int, int, int]:
    """The first frame, the demand change (site 1:20's last frame) and site 1:10's last frame."""
    def last(stops: bool) -> int:
        return max(frames[c.port][-1][0] for c in LEAVES if c.stops == stops and c.port and frames[c.port])
    return min(f[0][0] for f in frames.values() if f), last(True), last(False)


def analyse(shaper: str, prefix: str, pspxdp: str, phase_s: float) -> tuple[list[Leaf], Frames]:
    ports = {c.port for c in LEAVES if c.port is not None}
    frames: Frames = {p: [] for p in ports}
    for t, wire, port in read_pcap(f"{prefix}.pcap", ports):
        if port is not None:
            frames[port].append((t, wire - WIRE_OVERHEAD + 4))  # L2 with FCS: what a class rate counts
    first, t_change, t_end = landmarks(frames)
    # The steady part of each phase: 1 s after its start to 0.25 s before its end.
    w1 = (first + 1_000_000_000, t_change - 250_000_000)
    w2 = (t_change + 1_000_000_000, t_end - 250_000_000)
    a1 = allocate({c.classid: float(c.offered_bps) for c in LEAVES})
    a2 = allocate({c.classid: 0.0 if c.stops else float(c.offered_bps) for c in LEAVES})

    # Per port: the frames' times and the bytes before each (bisect, not a scan per window).
    times = {p: [t for t, _ in f] for p, f in frames.items()}
    before = {p: list(itertools.accumulate((n for _, n in f), initial=0)) for p, f in frames.items()}

    def rate(port: int, w: tuple[int, int]) -> float:
        i, j = bisect.bisect_left(times[port], w[0]), bisect.bisect_left(times[port], w[1])
        return (before[port][j] - before[port][i]) * 8 / ((w[1] - w[0]) / 1e9) if w[1] > w[0] else 0.0

    bursts: list[dict[str, float | None]] = []
    for i, w in enumerate((w1, w2)):
        cut = f"{prefix}.phase{i + 1}.pcap"
        phase_pcap(f"{prefix}.pcap", cut, *w)
        rep = analyze(pspxdp, cut, [(c.classid, f"proto udp dport {c.port}", "") for c in LEAVES], "real",
                      mbit_word(LINE_BPS))
        bursts.append({n: f.get("max_burst_mtu") for n, f in rep["by_name"].items()})
    sent: dict[int, float] = {}
    if os.path.exists(f"{prefix}.send.json"):
        with open(f"{prefix}.send.json") as fh:
            for f in json.load(fh)["flows"]:
                port = int(f["flow"].split(":")[1])
                c = next(x for x in LEAVES if x.port == port)
                sent[port] = f["sent_bits"] / (phase_s if c.stops else 2 * phase_s)
    # The demand change at the source: the sender started about when the
    # first frame arrived and stops site 1:20's flows phase_s later; their
    # backlogs in the shaper drain after that (drained_ms).
    t_stop = first + int(phase_s * 1e9)
    rows = []
    for c in LEAVES:
        assert c.port is not None
        borrow = None
        drained = (frames[c.port][-1][0] - t_stop) / 1e6 if c.stops and frames[c.port] else None
        if not c.stops and a2[c.classid] > a1[c.classid]:
            # The first BIN_S window from the change on whose rate is at least
            # halfway from the first phase's share to the second's.
            half = (a1[c.classid] + a2[c.classid]) / 2
            t = t_stop
            while t < t_end:
                if rate(c.port, (t, t + int(BIN_S * 1e9))) >= half:
                    borrow = (t - t_stop) / 1e6
                    break
                t += 1_000_000  # 1 ms steps
        rows.append(Leaf(shaper, c.classid, c.prio, a1[c.classid], rate(c.port, w1), a2[c.classid],
                         rate(c.port, w2), bursts[0].get(c.classid), bursts[1].get(c.classid), borrow,
                         drained, sent.get(c.port)))
    return rows, frames


def err(got: float, ideal: float) -> str:
    return f"{(got - ideal) / ideal * 100:+.1f}" if ideal else "-"  # no share: "got" says what leaked


def plot(res: report.Results, runs: dict[str, Frames], phase_s: float) -> None:
    plt = report.pyplot()
    fig, axes = plt.subplots(len(runs), 1, figsize=(10, 3.6 * len(runs)), sharex=True, squeeze=False)
    a1 = allocate({c.classid: float(c.offered_bps) for c in LEAVES})
    a2 = allocate({c.classid: 0.0 if c.stops else float(c.offered_bps) for c in LEAVES})
    colours = ["tab:blue", "tab:green", "tab:cyan", "tab:red", "tab:orange", "tab:pink"]
    for ax, (shaper, frames) in zip((a[0] for a in axes), runs.items(), strict=True):
        first, change, end = landmarks(frames)
        t_change, t_end = (change - first) / 1e9, (end - first) / 1e9
        for c, col in zip(LEAVES, colours, strict=True):
            assert c.port is not None
            bins: dict[int, int] = {}
            for t, n in frames[c.port]:
                k = int((t - first) / 1e9 / BIN_S)
                bins[k] = bins.get(k, 0) + n
            hi = max(bins, default=0)
            ax.plot([i * BIN_S for i in range(hi + 1)], [bins.get(i, 0) * 8 / BIN_S / 1e6 for i in range(hi + 1)],
                    color=col, lw=1, label=f"{c.classid} prio {c.prio}")
            ax.step([0, t_change, t_end], [a1[c.classid] / 1e6, a2[c.classid] / 1e6, a2[c.classid] / 1e6],
                    where="post", color=col, lw=0.8, ls="--")
        ax.set_title(f"{shaper}: per-leaf rate in {BIN_S * 1000:.0f} ms bins "
                     "(dashed: ideal, changing at site 1:20's last frame)")
        ax.set_ylabel("Mbit/s (L2 + FCS)")
        ax.set_ylim(0, 130)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, ncol=6, loc="upper left")
    axes[-1][0].set_xlabel("s since the first frame (site 1:20's subscribers stop at the sender after "
                           f"{phase_s:g} s)")
    res.save(fig, "rate-over-time.png")


def do_report(a: argparse.Namespace) -> None:
    started = report.now()
    res = report.Results(a.results, "tree-vs-htb", a.command, started)
    rows: list[Leaf] = []
    runs: dict[str, Frames] = {}
    for spec in a.runs:
        shaper, prefix = spec.split("=", 1)
        got, frames = analyse(shaper, prefix, a.pspxdp, a.phase)
        rows += got
        runs[shaper] = frames
    t = report.Table(
        "Per leaf: rate (Mbit/s, L2 + FCS, steady part of each phase) against the ideal, "
        "burstiness at the leaf's mean rate (MTU, real time), time to borrow",
        ["shaper", "leaf", "prio", "offered", "ideal 1", "got 1", "err 1 %", "ideal 2", "got 2", "err 2 %",
         "burst 1", "burst 2", "borrow ms", "drained ms"],
        [f"phase 1: all 6 subscribers offered 100 Mbit/s; phase 2: site 1:20's stop. Steady part: from 1 s "
         f"after the phase's start to 0.25 s before its end ({a.phase:g} s phases).",
         "ideal: the water-filling of the rules (rate, then the spare by prio, then in proportion to rate, "
         "capped by ceil and demand); htb's rules give the same on this tree.",
         "drained ms: site 1:20's leaves' last frame at the far end after the sender stopped them (their "
         "backlog in the shaper drains).",
         "borrow ms: from the sender's stop of site 1:20's flows to the first 50 ms window (1 ms steps) in which "
         "the leaf gets at least halfway from its phase-1 share to its phase-2 share.",
         "offered: what the sender reached while the flow was on (Mbit/s).",
         report.REAL_TIME_NOTE])
    for r in rows:
        t.add(r.shaper, r.leaf, r.prio, report.mbit(r.offered, 1), report.mbit(r.ideal1, 1), report.mbit(r.got1, 1),
              err(r.got1, r.ideal1), report.mbit(r.ideal2, 1), report.mbit(r.got2, 1),
              err(r.got2, r.ideal2),
              report.num(r.burst1_mtu, "{:.1f}"), report.num(r.burst2_mtu, "{:.1f}"),
              report.num(r.borrow_ms, "{:.0f}"), report.num(r.drained_ms, "{:.0f}"))
    res.table(t)
    res.csv("leaves.csv", report.as_dicts(rows))
    plot(res, runs, a.phase)
    tree = "\n".join(f"    pspxdp class set DEV {line}" for line in pspxdp_classes())
    res.finish(f"""Question: on the same tree and the same offered load, in real time on the
lab's veth (pspxdp clockless), how close do pspxdp's class tree (design
§3.12) and Linux htb come to the ideal allocation per leaf, how bursty is
each leaf, and how fast do the remaining leaves borrow when demand changes?

- Clock: real time (capture timestamps at the far end of a veth; pspxdp
  attached with `--line-rate 1gbit`, clockless, the default on a veth).
  Noisy: a shared 2-vCPU VM, other work around it.
- Load (`uptime`) before: {a.load_before}; after: {a.load_after}.
- Scaled down from the ISP tree (thousands of subscribers) to what 2 cores
  can offer and capture: a 400 Mbit/s root on a 1 Gbit/s line, 2 sites,
  3 subscribers each, 600 Mbit/s offered (1472-byte UDP payloads).
- htb: the same classes, rates, ceils and prios via tc on the same kind of
  veth in a fresh namespace pair, `stab overhead 4` (counts the FCS as
  pspxdp does), default burst/cburst/quantum; u32 filters on the port.

The tree (pspxdp's words; htb's are the same numbers):

{tree}
""")


def main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("pspxdp-classes")
    sub.add_parser("pspxdp-filters")
    tc = sub.add_parser("tc")
    tc.add_argument("dev")
    fl = sub.add_parser("flows")
    fl.add_argument("dst")
    fl.add_argument("phase", type=float)
    rp = sub.add_parser("report")
    rp.add_argument("--results", required=True)
    rp.add_argument("--phase", type=float, required=True)
    rp.add_argument("--command", required=True)
    rp.add_argument("--load-before", required=True)
    rp.add_argument("--load-after", required=True)
    rp.add_argument("--pspxdp", required=True)
    rp.add_argument("runs", nargs="+", help="SHAPER=PREFIX")
    a = p.parse_args(argv)
    lines: list[str] = []
    if a.cmd == "pspxdp-classes":
        lines = pspxdp_classes()
    elif a.cmd == "pspxdp-filters":
        lines = pspxdp_filters()
    elif a.cmd == "tc":
        lines = tc_commands(a.dev)
    elif a.cmd == "flows":
        lines = flows(a.dst, a.phase)
    else:
        do_report(a)
    for line in lines:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
