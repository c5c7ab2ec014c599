"""bench/run_flows.sh's figures: one row per measured run (`row`), and the
tables, CSV and latency CDF of every row in a results directory (`report`).

A results directory keeps its rows (rows.jsonl) across runs: a run adds its
rows and replaces an earlier row of the same key (classes, clock, shaper,
ECN, bulk flows), so the benchmark can run in short chunks (one --flows
value at a time, each under the measurement lock) and still publish one
report. Each row carries its own date, command, seconds and machine load."""
import argparse
import csv
import json
import math
import os
import re
import statistics
import sys
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from psplab import report  # lab/netns.sh puts lab/ on PYTHONPATH

SHAPERS = ("flows", "fifo", "htb")  # the column order of every table
CLOCKS = ("none", "byte")
# One colour per shaper in every panel; the byte clock dashed.
COLOURS = {("flows", "none"): "tab:blue", ("flows", "byte"): "tab:blue", ("fifo", "none"): "tab:red",
           ("fifo", "byte"): "tab:red", ("htb", "none"): "tab:purple", ("htb", "byte"): "tab:purple"}


@dataclass
class Row:
    classes: int  # 1: one 100 Mbit/s class; 10: ten of 10 Mbit/s
    clock: str  # pspxdp's --clock: none (clockless) or byte (gap frames); htb: none
    shaper: str  # flows, fifo (pspxdp flows off) or htb
    ecn: int  # the sender's net.ipv4.tcp_ecn
    bulk: int  # bulk TCP flows in the sparse flow's class
    seconds: int
    date: str
    command: str
    load_before: str
    load_after: str
    class_rate_mbit: float
    ping_idle_ms: float | None = None
    rr_idle_ms: float | None = None
    ping_lost: int = 0
    ping: list[float] = field(default_factory=list)  # added latency per ping, ms
    rr: list[float] = field(default_factory=list)  # added latency per 100-byte transaction, ms
    goodput_mbit: float | None = None  # the bulk flows' sum (receiver)
    jain: float | None = None  # Jain's index of their per-flow goodputs
    rtt_mean_ms: float | None = None  # mean over the flows of the sender's mean RTT
    rtt_worst_ms: float | None = None  # the largest flow's mean RTT
    retransmits: int | None = None
    class_mbit: float | None = None  # the class's sent L2 bytes with FCS over the interval
    rate_err_pct: float | None = None
    rate_err_bound_pct: float | None = None  # half the two counter reads' durations, over the interval
    drops: int | None = None  # every drop the shaper counted for the class
    drop_limit: int | None = None
    drop_aqm: int | None = None
    drop_overflow: int | None = None
    ce_marked: int | None = None
    passed_unpaced: int | None = None  # pspxdp: tc_passed (classified but not paced)
    late_lost_pct: float | None = None  # pspxdp clockless: late_lost_ns over the interval (the rate it cost)

    def key(self) -> tuple[int, str, str, int, int]:
        return (self.classes, self.clock, self.shaper, self.ecn, self.bulk)

    def variant(self) -> str:
        """The column a row goes in: the shaper, and the clock if not clockless."""
        return self.shaper if self.clock == "none" else f"{self.shaper} byte clock"


def quantile(xs: Sequence[float], p: float) -> float | None:
    """The p-quantile of sorted xs (the sample at rank floor(p * n))."""
    return xs[min(len(xs) - 1, int(p * len(xs)))] if xs else None


def read_ping(path: str) -> list[tuple[float, float, int]]:
    """`ping -D` replies: (send time s, RTT ms, icmp_seq); the send time is the reply's less the RTT."""
    out = []
    with open(path) as f:
        for line in f:
            m = re.match(r"\[([\d.]+)\].*icmp_seq=(\d+).* time=([\d.]+) ms", line)
            if m:
                rtt = float(m.group(3))
                out.append((float(m.group(1)) - rtt / 1000, rtt, int(m.group(2))))
    return out


def read_rr(path: str) -> list[tuple[float, float]]:
    """lab/psp_rr.py client's lines: (send time s, RTT ms)."""
    with open(path) as f:
        return [(float(a), float(b)) for a, b in (line.split() for line in f if line.strip())]


def snapshot_times(prefix: str) -> list[tuple[float, float]]:
    """Each counter snapshot's (before, after) the call that read it."""
    out = []
    for i in (0, 1):
        with open(f"{prefix}.{i}.t") as f:
            a, b = (float(x) for x in f.read().split())
            out.append((a, b))
    return out


def window(prefix: str, stats_interval: bool = False) -> tuple[float, float]:
    """The interval between the two counter snapshots, each at the middle of its call; with
    stats_interval the second is `pspxdp stats --interval`, whose call spans the interval: it ends
    when that call does."""
    (a0, b0), (a1, b1) = snapshot_times(prefix)
    return (a0 + b0) / 2, b1 if stats_interval else (a1 + b1) / 2


def added(samples: Iterable[float], idle: float | None) -> list[float]:
    """Latency beyond the idle median (the shaper's empty-queue path), sorted; >= 0."""
    return sorted(max(0.0, s - (idle or 0.0)) for s in samples)


def load_json(path: str) -> Any:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def class_counters(status: Any, name: str) -> dict[str, int]:
    for c in status.get("classes", []) if status else []:
        if c.get("class") == name:
            return {k: v for k, v in c.items() if isinstance(v, int)}
    return {}


def htb_class(path: str, name: str) -> dict[str, int]:
    """Class NAME's counters in `tc -s class show` (iproute2 6.1 prints htb classes as text even with -j)."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        return {}
    m = re.search(rf"^class htb {re.escape(name)} .*?\n\s*Sent (\d+) bytes (\d+) pkt", text, re.M)
    return {"bytes": int(m.group(1)), "packets": int(m.group(2))} if m else {}


def htb_root_drops(stats: Any) -> int:
    # The root htb counts every drop of its leaves (their own counters count them again).
    return sum(q.get("drops", 0) for q in stats or [] if q.get("root"))


def make_row(a: argparse.Namespace) -> Row:
    out = a.prefix
    row = Row(classes=a.classes, clock=a.clock, shaper=a.shaper, ecn=a.ecn, bulk=a.bulk, seconds=a.seconds,
              date=a.date, command=a.command, load_before=a.load_before, load_after=a.load_after,
              class_rate_mbit=a.class_rate_mbit)
    stats_interval = a.shaper != "htb"

    def inside(prefix: str, stats: bool) -> tuple[list[float], list[float], int]:
        """The probes sent in prefix's interval: ping RTTs, transaction RTTs, pings lost."""
        w0, w1 = window(prefix, stats)
        ping = [p for p in read_ping(f"{prefix}.ping") if w0 <= p[0] <= w1]
        seqs = [p[2] for p in ping]
        lost = max(seqs) - min(seqs) + 1 - len(set(seqs)) if seqs else 0  # gaps between the first and last
        return [p[1] for p in ping], [t for sent, t in read_rr(f"{prefix}.rr") if w0 <= sent <= w1], lost
    idle_ping, idle_rr, _ = inside(a.idle, False)
    row.ping_idle_ms = statistics.median(idle_ping) if idle_ping else None
    row.rr_idle_ms = statistics.median(idle_rr) if idle_rr else None
    ping, rr, row.ping_lost = inside(out, stats_interval)
    row.ping = [round(x, 4) for x in added(ping, row.ping_idle_ms)]
    row.rr = [round(x, 4) for x in added(rr, row.rr_idle_ms)]
    ip = load_json(f"{out}.iperf")
    try:
        end = ip["end"]
        streams = end["streams"]
        bps = [s["receiver"]["bits_per_second"] for s in streams]
        row.goodput_mbit = sum(bps) / 1e6
        row.jain = sum(bps) ** 2 / (len(bps) * sum(b * b for b in bps)) if any(bps) else None
        rtts = [s["sender"]["mean_rtt"] / 1000 for s in streams]
        row.rtt_mean_ms, row.rtt_worst_ms = statistics.mean(rtts), max(rtts)
        row.retransmits = end["sum_sent"].get("retransmits")
    except (TypeError, KeyError, ZeroDivisionError, statistics.StatisticsError):
        pass
    w0, w1 = window(out, stats_interval)
    dt = w1 - w0
    if a.shaper == "htb":
        c0, c1 = (htb_class(f"{out}.{i}.c", "1:1") for i in (0, 1))
        q0, q1 = (load_json(f"{out}.{i}.q") for i in (0, 1))
        if c0 and c1:
            # htb counts skb bytes (no FCS) and GSO segments as packets: + 4 bytes a frame.
            sent = (c1["bytes"] - c0["bytes"]) + 4 * (c1["packets"] - c0["packets"])
            row.class_mbit = sent * 8 / dt / 1e6
        row.drops = row.drop_limit = htb_root_drops(q1) - htb_root_drops(q0)
    else:
        # 0: `status` before the interval; 1: `stats --interval`, the counters at its end and
        # the class's rate over it, both ends read in one process (no call time in the interval).
        s0, s1 = (load_json(f"{out}.{i}.s") for i in (0, 1))
        d = {k: v - class_counters(s0, "1:1").get(k, 0) for k, v in class_counters(s1, "1:1").items()}
        if d:
            c1 = next(c for c in s1["classes"] if c["class"] == "1:1")
            dt = s1["interval_ns"] / 1e9
            row.class_mbit = c1["measured_rate_bps"] / 1e6
            row.drop_limit, row.drop_aqm = d.get("drop_limit"), d.get("drop_aqm")
            row.drop_overflow, row.ce_marked = d.get("drop_overflow"), d.get("ce_marked")
            # Every class's drops: a neighbour class's overflow is this run's too.
            row.drops = sum(v - class_counters(s0, c["class"]).get(k, 0)
                            for c in (s1 or {}).get("classes", []) for k, v in c.items()
                            if k.startswith("drop_") and isinstance(v, int))
            row.passed_unpaced = d.get("tc_passed")
            # late_lost_ns over the whole snapshot-to-snapshot time: a share, so the interval's length matters little.
            row.late_lost_pct = d.get("late_lost_ns", 0) / 1e9 / (w1 - w0) * 100
    if row.class_mbit is not None:
        row.rate_err_pct = (row.class_mbit - a.class_rate_mbit) / a.class_rate_mbit * 100
        if a.shaper == "htb":
            # A snapshot is read somewhere within its call: the interval is known to half their durations.
            row.rate_err_bound_pct = sum(b - a for a, b in snapshot_times(out)) / 2 / dt * 100
    return row


def read_rows(path: Path) -> list[Row]:
    if not path.exists():
        return []
    names = {f.name for f in fields(Row)}
    with path.open() as f:
        return [Row(**{k: v for k, v in json.loads(line).items() if k in names}) for line in f if line.strip()]


def merge(path: Path, new: list[Row]) -> list[Row]:
    """The directory's rows with new ones in, an earlier row of the same key replaced."""
    rows = {r.key(): r for r in read_rows(path)}
    rows.update({r.key(): r for r in new})
    order = sorted(rows.values(), key=lambda r: (r.classes, CLOCKS.index(r.clock), SHAPERS.index(r.shaper),
                                                 r.ecn, r.bulk))
    with path.open("w") as f:
        for r in order:
            f.write(json.dumps(asdict(r)) + "\n")
    return order


def fmt(v: float | None, spec: str = ".2f") -> str:
    if v is None or math.isnan(v):
        return "-"
    return f"{v:,{spec}}" if abs(v) >= 1000 else format(v, spec)


def three(xs: Sequence[float]) -> str:
    # A closed-loop probe behind a queue of seconds completes few transactions: say how few.
    few = f" (n={len(xs)})" if len(xs) < 100 else ""
    return " / ".join(fmt(quantile(xs, p)) for p in (0.5, 0.99)) + f" / {fmt(xs[-1] if xs else None)}{few}"


def latency_tables(rows: list[Row]) -> list[report.Table]:
    tables = []
    for classes in sorted({r.classes for r in rows}):
        rs = [r for r in rows if r.classes == classes]
        variants = list(dict.fromkeys(r.variant() for r in sorted(rs, key=lambda r: (
            SHAPERS.index(r.shaper), CLOCKS.index(r.clock)))))
        where = ("one 100 Mbit/s class" if classes == 1 else
                 f"class 1:1 of {classes} classes of {rs[0].class_rate_mbit:g} Mbit/s")
        for probe, what in (("ping", "a ping every 10 ms"), ("rr", "a 100-byte TCP request/response every 10 ms")):
            t = report.Table(f"{what} through {where} beside bulk TCP: added latency ms, p50 / p99 / max",
                             ["bulk flows, ECN", *variants])
            for bulk, ecn in sorted({(r.bulk, r.ecn) for r in rs}, key=lambda k: (k[1], k[0])):
                cells = []
                for v in variants:
                    r = next((r for r in rs if r.variant() == v and (r.bulk, r.ecn) == (bulk, ecn)), None)
                    cells.append(three(getattr(r, probe)) if r and getattr(r, probe) else "-")
                t.add(f"{bulk}, {'on' if ecn else 'off'}", *cells)
            tables.append(t)
    return tables


def bulk_tables(rows: list[Row]) -> list[report.Table]:
    tables = []
    for classes in sorted({r.classes for r in rows}):
        rs = [r for r in rows if r.classes == classes]
        t = report.Table(
            f"the bulk flows ({'one' if classes == 1 else f'class 1:1 of {classes}'} "
            f"{rs[0].class_rate_mbit:g} Mbit/s class{'' if classes == 1 else 'es'}): fairness, rate, RTT, drops",
            ["shaper", "ECN", "bulk", "s", "goodput Mbit/s", "Jain", "class Mbit/s", "rate err %", "±", "late lost %",
             "RTT mean ms", "RTT worst flow ms", "retransmits", "drops", "limit", "aqm", "overflow", "CE", "unpaced",
             "ping lost"])
        for r in sorted(rs, key=lambda r: (r.ecn, r.bulk, SHAPERS.index(r.shaper), CLOCKS.index(r.clock))):
            t.add(r.variant(), "on" if r.ecn else "off", r.bulk, r.seconds, fmt(r.goodput_mbit, ".1f"),
                  fmt(r.jain, ".4f"), fmt(r.class_mbit, ".2f"), fmt(r.rate_err_pct, "+.2f"),
                  fmt(r.rate_err_bound_pct, ".2f"),
                  fmt(r.late_lost_pct, ".2f"), fmt(r.rtt_mean_ms),
                  fmt(r.rtt_worst_ms), fmt(r.retransmits, "d"), fmt(r.drops, "d"), fmt(r.drop_limit, "d"),
                  fmt(r.drop_aqm, "d"), fmt(r.drop_overflow, "d"), fmt(r.ce_marked, "d"),
                  fmt(r.passed_unpaced, "d"), r.ping_lost)
        tables.append(t)
    return tables


NOTES = [
    "added latency: the probe's round trip less its idle median on the same shaper (the reply path is not "
    "shaped), for the probes sent in the measured interval (after the bulk flows' first second, while they "
    "run); the ping (ICMP, 84 bytes, every 10 ms) and the request/response (lab/psp_rr.py: a 100-byte "
    "request and a 100-byte reply every 10 ms on one persistent TCP connection, Nagle off, closed loop: a "
    "transaction that takes longer delays the next) run at the same time; ping lost: replies missing between "
    "the first and last of the interval; (n=): fewer than 100 samples in the interval: behind a queue of "
    "seconds the closed-loop probe completes few, and ping sends less when its replies are that late",
    "bulk: iperf3 -P N -C cubic for the run's seconds after a 1 s omitted start; goodput and Jain's index from "
    "the receiver's per-stream bytes; RTT: the sender's mean smoothed RTT per flow (iperf3 -J mean_rtt)",
    "class Mbit/s: the class's sent L2 bytes with FCS over the interval while the bulk flows run (pspxdp: "
    "tx_bytes, `pspxdp stats --interval`, both ends read in one process; htb: class bytes + 4 a frame from "
    "two `tc -s class show` calls, ± what their timing leaves uncertain); rate err against the class rate",
    "drops: every drop counter of the shaper (pspxdp: drop_* of every class; htb: its root qdisc); limit: "
    "class limit (pspxdp drop_limit, htb's pfifo), aqm: CoDel drops, CE: ECN marks; unpaced: tc_passed",
    "late lost: pspxdp clockless gives up real time a late wake-up exceeded the class's burst bound by "
    "(late_lost_ns, over the interval): on a loaded machine the class is short of its rate by that much",
    "flows: pspxdp class flows on (the default); fifo: flows off; htb: htb rate = ceil with its default "
    "pfifo leaf (this kernel has no fq_codel); byte clock: attach --clock byte (gap frames on the wire), "
    "else clockless (the veth default)",
    report.REAL_TIME_NOTE,
]


def cdf_plot(rows: list[Row], res_dir: Path) -> str | None:
    """The sparse flow's added latency CDF at the largest bulk count, per shaper: FIFO vs flows (vs htb)."""
    if not rows:
        return None
    plt = report.pyplot()
    settings = sorted({(r.classes, probe) for r in rows for probe in ("ping", "rr")})
    fig, axes = plt.subplots(len(settings), 2, figsize=(11, 3.4 * len(settings)), squeeze=False)
    for i, (classes, probe) in enumerate(settings):
        for j, ecn in enumerate((0, 1)):
            ax = axes[i][j]
            rs = [r for r in rows if r.classes == classes and r.ecn == ecn and getattr(r, probe)]
            if not rs:
                ax.set_visible(False)
                continue
            bulk = max(r.bulk for r in rs)
            for r in sorted((r for r in rs if r.bulk == bulk),
                            key=lambda r: (SHAPERS.index(r.shaper), CLOCKS.index(r.clock))):
                xs = [max(x, 0.01) for x in getattr(r, probe)]
                ax.step(xs, [(k + 1) / len(xs) for k in range(len(xs))], where="post", label=r.variant(),
                        color=COLOURS[(r.shaper, r.clock)], linestyle="-" if r.clock == "none" else "--")
            ax.set_xscale("log")
            ax.set_xlim(0.01, 20000)
            ax.set_ylim(0, 1.01)
            ax.grid(True, which="both", alpha=0.3)
            ax.set_xlabel("added latency, ms (0.01: none)")
            ax.set_ylabel("fraction")
            name = "ping" if probe == "ping" else "100-byte TCP request/response"
            ax.set_title(f"{name}, {classes} class{'es' if classes > 1 else ''}, {bulk} bulk flows, "
                         f"ECN {'on' if ecn else 'off'}", fontsize=9)
            ax.legend(fontsize=8)
    fig.tight_layout()
    path = res_dir / "flows-cdf.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path.name


def write_report(res_dir: Path, rows: list[Row], plot: bool) -> None:
    tables = latency_tables(rows) + bulk_tables(rows)
    for t in tables:
        print(t.text())
        print()
    flat = [{k: v for k, v in asdict(r).items() if k not in ("ping", "rr")} |
            {f"{p}_{q}": quantile(getattr(r, p), x) for p in ("ping", "rr")
             for q, x in (("p50", 0.5), ("p99", 0.99), ("max", 1.0))} for r in rows]
    with (res_dir / "flows.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, list(flat[0]))
        w.writeheader()
        w.writerows(flat)
    png = cdf_plot(rows, res_dir) if plot else None
    with (res_dir / "README.md").open("w") as f:
        f.write("# flows inside a class (docs/design.md §1.5): a sparse flow beside bulk TCP\n\n")
        f.write(f"- machine: {report.machine()}\n")
        f.write("- runs (UTC; load average over 1 minute before and after each row, lowest..highest):\n")
        for command in dict.fromkeys(r.command for r in sorted(rows, key=lambda r: r.date)):
            rs = [r for r in rows if r.command == command]
            loads = [float(x.split()[0]) for r in rs for x in (r.load_before, r.load_after)]
            f.write(f"  - `{command}`: {min(r.date for r in rs)} .. {max(r.date for r in rs)}, {len(rs)} rows, "
                    f"load {min(loads):.2f}..{max(loads):.2f}\n")
        f.write("- wire: the lab's 1 Gbit/s veth between two network namespaces (attach --line-rate 1gbit)\n\n")
        for t in tables:
            f.write(t.markdown() + "\n\n")
        f.write("\n".join(f"- {n}" for n in NOTES) + "\n\n")
        if png:
            f.write(f"![{png}]({png})\n\n")
        f.write("Files: flows.csv (one line per run), rows.jsonl (with every sample)"
                + (f", {png}" if png else "") + "\n")
    print(f"results: {res_dir}/README.md")


def main() -> None:
    p = argparse.ArgumentParser(prog="flows_report.py", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("row", help="one run's row as JSON on stdout")
    r.add_argument("prefix")
    r.add_argument("--idle", required=True)
    for name in ("classes", "ecn", "bulk", "seconds"):
        r.add_argument(f"--{name}", type=int, required=True)
    r.add_argument("--class-rate-mbit", type=float, required=True)
    for name in ("clock", "shaper", "date", "command", "load-before", "load-after"):
        r.add_argument(f"--{name}", required=True)
    rep = sub.add_parser("report", help="merge rows into DIR/rows.jsonl; tables, CSV, plot, README.md")
    rep.add_argument("dir")
    rep.add_argument("--add", help="a file of new rows (JSON lines)")
    rep.add_argument("--no-plot", action="store_true")
    a = p.parse_args()
    if a.cmd == "row":
        print(json.dumps(asdict(make_row(a))))
        return
    res_dir = Path(a.dir)
    os.makedirs(res_dir, exist_ok=True)
    new = read_rows(Path(a.add)) if a.add else []
    rows = merge(res_dir / "rows.jsonl", new)
    if not rows:
        sys.exit(f"flows_report: no rows in {res_dir}")
    write_report(res_dir, rows, not a.no_plot)


if __name__ == "__main__":
    main()
