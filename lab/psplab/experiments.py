"""The paper's experiments (docs/design.md §5) and the side-by-side comparison.
Each writes <results root>/<date>-<what>/ (build/results; docs/results with
--publish) and files its rows in ctx.summary."""
import csv
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from . import measure, shapers
from .context import RunContext
from .flow import Flow
from .report import BYTE_CLOCK_NOTE, REAL_TIME_NOTE, Results, Table, as_dicts, mbit, num, pyplot
from .run import FlowRow, TcpRow, flow_rows, run_tcp, run_udp
from .units import fmt_rate, parse_rate_bps

if TYPE_CHECKING:
    from matplotlib.figure import Figure

MTU_UNIT = 1518  # the analyzer's burst unit at MTU 1500: a full frame's L2 bytes


@dataclass
class SideRow(FlowRow):
    scenario: str


@dataclass
class SweepRow(FlowRow):
    frame_bytes: int


@dataclass
class ManyFlowsRow:
    """One shaper on one clock over every flow of the many-flows run."""
    shaper: str
    clock: str
    flows: int
    mean_bps: float
    min_bps: float
    max_bps: float
    burst_target_max_mtu: float
    burst_mean_max_mtu: float
    lost: int
    cpu_cores: float


def _offer(rate: str) -> str:
    """Offered load: 1.3x the rate, so the shaper is backlogged."""
    return fmt_rate(parse_rate_bps(rate) * 13 // 10)


def _done(ctx: RunContext, res: Results, key: str, rows: Sequence[object], extra: str = "") -> None:
    res.finish(extra)
    ctx.summary[key] = rows


def _yes(v: bool | None) -> str:
    return "-" if v is None else ("yes" if v else "no")


def _clock_label(clock: str) -> str:
    return "byte clock" if clock == "byte" else "real time"


# --- 4. side by side ---------------------------------------------------------

SIDE_SHAPERS_ONE = ["pspxdp", "pspxdp-clockless", "tbf-tight", "tbf-typical", "htb", "none"]
SIDE_SHAPERS_MANY = ["pspxdp", "pspxdp-clockless", "htb", "none"]  # tbf shapes one aggregate only


def side_by_side_table(title: str, rows: Sequence[FlowRow]) -> Table:
    t = Table(title, ["shaper", "clock", "flow", "target", "offered", "measured", "error", "backlogged", "burst@mean",
                      "burst@target", "max rate/1", "max rate/10", "lost", "blocked", "unpaced", "late", "CPU",
                      "CPU/Gbit"],
              notes=[
                  "offered: what the flow's sender managed to send over the whole run (asked: 1.3x "
                  "the target; a busy machine may not let it, blocked sends included in neither)",
                  "backlogged (byte clock only): the class never ran empty, so the measured mean is "
                  "the pacer's; 'no' means frames were missing upstream of the class (its sender, "
                  "or pspxdp's socket rings: see lost)",
                  "rates in Mbit/s (L2 bytes with FCS); bursts in MTU (1518 B) at a server of the "
                  "flow's mean rate (the paper's figure) and of its target rate",
                  "lost: frames the shaper dropped (pspxdp: its classes' drops plus what its sockets' "
                  "rings lost, which no class owns; tc: all its qdiscs); blocked: sends the shaper refused by back "
                  "pressure (a full socket buffer: the kernel qdiscs hold the sender; pspxdp "
                  "holds UDP in its class queue up to the class limit, then drops and counts)",
                  "unpaced: frames pspxdp's TC program passed unpaced because the daemon's "
                  "heartbeat went stale (fail-open after a stall; the daemon runs as attach "
                  "schedules it, SCHED_DEADLINE, unless --daemon-rt)",
                  "late: the share of the capture's time pspxdp's wire idled while a class was "
                  "backlogged (its daemon was late: underruns), which its real-time rate lacks",
                  "CPU: machine-wide cores busy during the capture minus the idle machine's; "
                  "CPU/Gbit: that in % of one core per Gbit/s delivered",
                  REAL_TIME_NOTE, BYTE_CLOCK_NOTE,
                  "pspxdp (gap frames, the paper's rule) in real time is a timer pacer on a "
                  "clockless veth: after a late wake-up its daemon releases up to --window bytes "
                  "at once, so it is burstier than tbf there; on a NIC the byte clock is the "
                  "wire's. pspxdp-clockless is the mode a veth or VM NIC gets by default: no gap "
                  "frames, each frame released at its real-time due time",
              ])
    for r in rows:
        t.add(r.shaper, _clock_label(r.clock), r.flow, mbit(r.target_bps, 0),
              mbit(r.offered_bps, 0), mbit(r.mean_bps), f"{r.error_pct:+.3f}%", _yes(r.backlogged),
              num(r.burst_mean_mtu), num(r.burst_target_mtu), mbit(r.rate1_max_bps, 1), mbit(r.rate10_max_bps, 1),
              r.lost, num(r.blocked, "{}"), num(r.unpaced, "{}"), num(r.daemon_late_pct, "{:.1f}%"),
              num(r.cpu_cores), num(r.cpu_pct_per_gbit, "{:.0f}%"))
    return t


def side_by_side(ctx: RunContext) -> None:
    res = Results(ctx.out, "side-by-side", ctx.command, ctx.started)
    rx = ctx.lab.receivers
    one = [Flow("a", rx[0], 5001, "500mbit", _offer("500mbit"))]
    three = [*one, Flow("b", rx[1], 5002, "250mbit", _offer("250mbit")),
             Flow("c", rx[2], 5003, "50mbit", _offer("50mbit"))]
    scenarios = [("one flow, 500 Mbit/s", one, SIDE_SHAPERS_ONE),
                 ("three flows, 500/250/50 Mbit/s", three, SIDE_SHAPERS_MANY)]
    idle = measure.idle_cpu()
    rows: list[SideRow] = []
    described: dict[str, str] = {}
    for scen, flows, names in scenarios:
        srows = []
        for name in names:
            ctx.progress(f"side by side, {scen}: {name}")
            sh = shapers.make(ctx, name)
            described[name] = sh.describe(flows)
            result = run_udp(ctx, sh, flows, ctx.seconds, tag=f"side-{len(flows)}-{name}")
            srows += [SideRow(**vars(r), scenario=scen) for r in flow_rows(ctx, result, idle)]
        res.table(side_by_side_table(
            f"Side by side: {scen} (each offered 1.3x its rate) on a {ctx.line_rate} wire, "
            f"{ctx.seconds} s captured after 1 s of warm-up", srows))
        rows += srows
    res.csv("side-by-side.csv", as_dicts(rows))
    _plot_side(res, rows)
    setup = "\n".join(f"- {k}: {v}" for k, v in described.items())
    _done(ctx, res, "side_by_side", rows,
          f"Shapers:\n{setup}\n- idle machine before the runs: {idle:.2f} cores of kernel time")


def side_figure(rows: Sequence[SideRow]) -> "Figure":
    """The one-flow bars of side by side. Its x labels (shaper and clock)
    break at the shaper's '-', one word a line: on one line each at 7
    points they ran into each other."""
    plt = pyplot()
    one = [r for r in rows if r.scenario.startswith("one")]
    labels = [f"{r.shaper.replace('-', chr(10))}\n({'byte' if r.clock == 'byte' else 'real'})" for r in one]
    fig, ax = plt.subplots(1, 2, figsize=(11, 4.6))
    burst = [max(r.burst_target_mtu or 0, 0.01) for r in one]
    ax[0].bar(labels, burst, color=["tab:green" if r.shaper == "pspxdp" else "tab:gray" for r in one])
    ax[0].set_yscale("log")
    ax[0].axhline(2, color="tab:red", ls="--", lw=1, label="2 MTU (precise pacing)")
    ax[0].set_ylabel("max burstiness at the target rate (MTU)")
    ax[0].legend(fontsize=8)
    r10 = [(r.rate10_max_bps or 0) / 1e6 for r in one]
    ax[1].bar(labels, r10, color=["tab:green" if r.shaper == "pspxdp" else "tab:gray" for r in one])
    ax[1].axhline(one[0].target_bps / 1e6, color="tab:red", ls="--", lw=1, label="target")
    ax[1].set_ylabel("max rate per 10 packets (Mbit/s)")
    ax[1].set_yscale("log")
    ax[1].legend(fontsize=8)
    for a in ax:
        a.tick_params(axis="x", labelsize=7)
    fig.suptitle("One UDP flow offered 650 Mbit/s, target 500 Mbit/s, 1 Gbit/s veth wire. byte: the "
                 "byte clock (a NIC's view); real: capture times on a veth (timers, not a NIC)",
                 fontsize=9)
    fig.tight_layout()
    return fig


def _plot_side(res: Results, rows: Sequence[SideRow]) -> None:
    res.save(side_figure(rows), "side-by-side.png")


# --- 5. TCP through the bottleneck (paper Table 5) ----------------------------

# The run the README's TCP table quotes (its CSV and README, with the load).
README_TCP = Path(__file__).resolve().parents[2] / "docs" / "results" / "2026-11-25-tcp-bottleneck"


def _load() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def _readme_load() -> str:
    """The load average the README's run recorded, as its README says it."""
    try:
        text = (README_TCP / "README.md").read_text()
    except OSError:
        return "?"
    i = text.find("load average")
    return text[i:text.find("\n", i)].strip() if i >= 0 else "?"


def readme_differences(rows: Sequence[TcpRow], load_before: float, load_after: float) -> list[str]:
    """Where this run's figures differ from the README's (its source CSV):
    drops where the README has none, or under 90 % of its throughput; each
    with what explains it here: the load, the emulated bottleneck's stalls,
    and the ideal FIFO's drops of the same arrivals (drops beyond those are
    the emulation's, not the shaper's)."""
    try:
        with open(README_TCP / "tcp.csv") as f:
            ref = {(r["shaper"], int(r["fifo_bytes"])): r for r in csv.DictReader(f)}
    except OSError:
        return [f"the README's run ({README_TCP}) is not here: nothing to compare"]
    out = []
    for r in rows:
        was = ref.get((r.shaper, r.fifo_bytes))
        if was is None or r.throughput_bps is None:
            continue
        was_mbit, was_drops = float(was["throughput_bps"]) / 1e6, int(was["bottleneck_drops"])
        now_mbit = r.throughput_bps / 1e6
        if not ((was_drops == 0 and r.bottleneck_drops > 0) or now_mbit < 0.9 * was_mbit):
            continue
        why = [f"load average {load_before:.1f} -> {load_after:.1f} here (the README's run: {_readme_load()})"]
        if r.bottleneck_max_stall_ms is not None:
            fifo_ms = r.fifo_bytes * 8 / r.bottleneck_bps * 1e3
            why.append(f"the emulated bottleneck stalled {r.bottleneck_stalls} times over 100 us, up to "
                       f"{r.bottleneck_max_stall_ms:.2f} ms (its {r.fifo_bytes >> 10} KB FIFO holds "
                       f"{fifo_ms:.2f} ms at B)")
        if r.ideal_fifo_drops is not None:
            why.append(f"an ideal FIFO drops {r.ideal_fifo_drops} of the same arrivals, so "
                       f"{max(r.bottleneck_drops - r.ideal_fifo_drops, 0)} of the {r.bottleneck_drops} "
                       f"drops are the emulation's, not what the shaper sent")
        out.append(f"{r.fifo_bytes >> 10} KB, {r.shaper}: {now_mbit:.0f} Mbit/s, {r.bottleneck_drops} "
                   f"bottleneck drops; the README: {was_mbit:.0f} Mbit/s, {was_drops} drops. Why: "
                   + "; ".join(why))
    return out


def tcp(ctx: RunContext) -> None:
    res = Results(ctx.out, "tcp-bottleneck", ctx.command, ctx.started)
    lab = ctx.lab
    fifos = [16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20] if ctx.full else [16 << 10, 1 << 20]
    names = ["pspxdp", "pspxdp+ecn", "pspxdp-clockless", "tbf-tight", "tbf-typical", "none"]
    secs = ctx.tcp_seconds
    lab.start_delay(ctx.delay_ms, len(fifos) * (len(names) + 1) * (secs + 15) + 60,
                    f"{ctx.work}/delay.json")
    ping = lab.s.run("ping", "-c", "5", "-i", "0.2", "-q", lab.ip_d, check=False)
    rtt = None
    for line in ping.splitlines():
        if "min/avg" in line:
            rtt = float(line.split("=")[1].split("/")[1])
    rows: list[TcpRow] = []
    load_before = _load()
    for fifo in fifos:
        for name in names:
            ctx.progress(f"TCP, FIFO {fifo >> 10} KB: {name}")
            sh = shapers.make(ctx, name.split("+")[0], ctx.bottleneck)
            r = run_tcp(ctx, sh, fifo, ctx.bottleneck, secs, ecn=name.endswith("+ecn"),
                        tag=f"tcp-{fifo}-{name}")
            r.rtt_ms = rtt
            rows.append(r)
    delay = lab.stop_delay()
    load_after = _load()
    notes = [
        f"every shaper paces at B = {ctx.bottleneck} exactly: the paper sets the pacer's target rate to "
        "the bottleneck's bandwidth, and so would a user who knows B (a rate below B would leave the "
        "FIFO empty by giving up throughput, and hide what the table is about)",
        "ideal FIFO drops: the frames captured as they reached the bottleneck (tcpdump in R) replayed "
        "through an ideal drop-tail FIFO of the same size draining at exactly B: what the shaper's "
        "output alone costs. bottleneck drops above them are the emulation's: the tbf in a namespace "
        "on a shared VM stalls its departures (stalls: gaps over 100 us while it held more than a "
        "frame, and the longest, from its queue rebuilt as arrived - departed: where it dropped "
        "much and TCP then idled, the rebuild drifts and idle time may count); the captures add "
        "CPU load of their own; PAUSE gap frames (pspxdp, byte clock) are not arrivals: R takes "
        "them, the tbf never queues them",
        f"one iperf3 TCP flow (cubic) for {secs} s; RTT {num(rtt)} ms measured by ping (the "
        f"delay line adds {ctx.delay_ms} ms on the return path); bottleneck: tbf rate "
        f"{ctx.bottleneck}, bucket {shapers.ONE_FRAME_BUCKET} B, limit = FIFO, on the router",
        f"wire: {ctx.line_rate}; tbf rows shape to the bottleneck rate under the wire model "
        f"(root tbf at {ctx.line_rate}); none: the wire model only",
        "RTT: the sender's smoothed RTT (iperf3): what queues in the shaper and the FIFO add "
        "to the path's",
        "shaper drops: pspxdp's class drops (beyond the class limit, default 100 ms at its "
        "rate) or the tc qdiscs' drops; marks: ECN CE marks by the pacer on frames joining a "
        "backlog longer than ce_threshold (default 4 ms); +ecn: the sender negotiates ECN "
        "(net.ipv4.tcp_ecn=1)",
        f"delay line: forwarded {delay.get('forwarded')}, dropped "
        f"{sum(delay.get(k, 0) for k in ('drop_buffer_full', 'drop_too_big', 'send_errors', 'drop_socket'))}, "
        f"lateness mean {num(delay.get('late_mean_us'), '{:.0f}')} us, p99 <= "
        f"{num(delay.get('late_p99_us'), '{:.0f}')} us, max {num(delay.get('late_max_us'), '{:.0f}')} us",
        REAL_TIME_NOTE,
    ]
    t = Table(f"TCP through a drop-tail FIFO at {ctx.bottleneck} (paper Table 5)",
              ["FIFO", "shaper", "throughput Mbit/s", "retransmits", "bottleneck drops",
               "ideal FIFO drops", "stalls (longest ms)", "shaper drops", "marks", "unpaced",
               "RTT mean ms", "RTT max ms", "CPU"], notes)
    for r in rows:
        if r.error:
            t.notes.append(f"{r.fifo_bytes >> 10} KB, {r.shaper}: iperf3 failed: {r.error}")
        if r.capture_drops:
            t.notes.append(f"{r.fifo_bytes >> 10} KB, {r.shaper}: tcpdump dropped {r.capture_drops} "
                           "frames: its ideal FIFO figure is short of them")
        stalls = (f"{r.bottleneck_stalls} ({r.bottleneck_max_stall_ms:.2f})"
                  if r.bottleneck_stalls is not None and r.bottleneck_max_stall_ms is not None else "-")
        t.add(f"{r.fifo_bytes >> 10} KB", r.shaper, mbit(r.throughput_bps, 1),
              num(r.retransmits, "{}"), r.bottleneck_drops, num(r.ideal_fifo_drops, "{}"), stalls,
              r.shaper_drops, num(r.shaper_marks, "{}"), num(r.unpaced, "{}"),
              num(r.mean_rtt_ms, "{:.1f}"), num(r.max_rtt_ms, "{:.1f}"), num(r.cpu_cores))
    differ = readme_differences(rows, load_before, load_after)
    t.notes += [f"differs from the README: {d}" for d in differ]
    res.table(t)
    if differ:
        print(f"{len(differ)} figure(s) differ from the README's TCP table (see the notes above: load, "
              "the bottleneck's stalls, the ideal FIFO)\n")
    res.csv("tcp.csv", as_dicts(rows))
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    for name in dict.fromkeys(r.shaper for r in rows):
        pts = [(r.fifo_bytes >> 10, (r.throughput_bps or 0) / 1e6) for r in rows if r.shaper == name]
        ax.plot(*zip(*pts, strict=True), marker="o", label=name)
    ax.axhline(parse_rate_bps(ctx.bottleneck) / 1e6, color="k", ls=":", lw=1, label="bottleneck B")
    ax.set_xscale("log")
    ax.set_xlabel("bottleneck FIFO (KB)")
    ax.set_ylabel("TCP throughput (Mbit/s)")
    ax.set_title(f"TCP through a drop-tail FIFO at {ctx.bottleneck}, RTT {num(rtt, '{:.0f}')} ms", fontsize=9)
    ax.legend(fontsize=8)
    res.save(fig, "tcp.png")
    _done(ctx, res, "tcp", rows)


# --- 1. rate accuracy sweep (paper Fig. 6) -----------------------------------

def sweep(ctx: RunContext) -> None:
    res = Results(ctx.out, "rate-sweep", ctx.command, ctx.started)
    targets = (["1kbit", "8kbit", "64kbit", "1mbit", "10mbit", "100mbit", "500mbit", "900mbit",
                "980mbit"] if ctx.full else ["64kbit", "10mbit", "500mbit", "900mbit"])
    idle = measure.idle_cpu()
    rows: list[SweepRow] = []
    for target in targets:
        bps = parse_rate_bps(target)
        # ~100 frames/s where the rate allows (the smallest frame below
        # 64 kbit/s), 30 frames at least in the capture.
        size = int(min(1472, max(18, bps / 8 / 100 - 46)))
        fps = bps / ((size + 46) * 8)
        secs = min(20.0, max(ctx.seconds, 30 / fps))
        offered = fmt_rate(min(2 * bps, bps + 200_000_000))
        ctx.progress(f"rate sweep: {target} ({size + 46} B frames, {secs:.0f} s)")
        f = Flow("a", ctx.lab.receivers[0], 5001, target, offered)
        result = run_udp(ctx, shapers.make(ctx, "pspxdp"), [f], secs, size=size,
                         tag=f"sweep-{target}", windows=(1,))
        rows += [SweepRow(**vars(r), frame_bytes=size + 46) for r in flow_rows(ctx, result, idle)]
    t = Table(f"Rate accuracy, one pspxdp class on a {ctx.line_rate} wire (paper Fig. 6)",
              ["target", "clock", "frame B", "frames", "measured", "error", "burst@target", "backlogged",
               "lost"],
              ["measured in Mbit/s of L2 bytes with FCS; each class offered 2x its rate (at most "
               "+200 Mbit/s); backlogged: the class never ran empty (its sender kept up: only then "
               "is the measured mean the pacer's); the single-class ceiling is 1518/1538 of the line rate (987 Mbit/s)",
               REAL_TIME_NOTE, BYTE_CLOCK_NOTE])
    for r in rows:
        t.add(fmt_rate(r.target_bps), _clock_label(r.clock), r.frame_bytes, r.frames,
              f"{r.mean_bps / 1e6:.6f}", f"{r.error_pct:+.4f}%", num(r.burst_target_mtu),
              _yes(r.backlogged), r.lost)
    res.table(t)
    res.csv("rate-sweep.csv", as_dicts(rows))
    plt = pyplot()
    fig, ax = plt.subplots(1, 2, figsize=(10, 4))
    for clock, m in (("byte", "o"), ("real", "x")):
        pts = [(r.target_bps, r.mean_bps, r.error_pct) for r in rows if r.clock == clock]
        ax[0].plot([p[0] for p in pts], [p[1] for p in pts], m, label=_clock_label(clock))
        ax[1].plot([p[0] for p in pts], [p[2] for p in pts], m, label=_clock_label(clock))
    lo, hi = min(r.target_bps for r in rows), max(r.target_bps for r in rows)
    ax[0].plot([lo, hi], [lo, hi], "k:", lw=1, label="measured = target")
    for a in ax:
        a.set_xscale("log")
        a.set_xlabel("target (bit/s)")
        a.legend(fontsize=8)
    ax[0].set_yscale("log")
    ax[0].set_ylabel("measured mean (bit/s)")
    ax[1].set_ylabel("error (%)")
    ax[1].set_yscale("symlog", linthresh=0.01)
    fig.suptitle("pspxdp rate accuracy, one class (real time: veth + daemon timers)", fontsize=9)
    res.save(fig, "rate-sweep.png")
    _done(ctx, res, "rate_sweep", rows)


# --- 2. several classes starting and stopping (paper Fig. 7, Table 4) --------

def classes(ctx: RunContext) -> None:
    res = Results(ctx.out, "classes", ctx.command, ctx.started)
    rx = ctx.lab.receivers
    rates = ["500mbit", "300mbit", "100mbit", "50mbit", "20mbit"]
    step = 0.5 if ctx.full else 0.3
    span = 8.0 if ctx.full else 4.0
    flows = [Flow(f"{parse_rate_bps(r) // 10**6}M", rx[i], 5001 + i, r, _offer(r),
                  start=0.5 + i * step, stop=0.5 + span - i * step) for i, r in enumerate(rates)]
    ctx.progress("several classes: pspxdp, 5 classes starting and stopping")
    keep = ctx.keep_pcaps
    ctx.keep_pcaps = True
    try:
        result = run_udp(ctx, shapers.make(ctx, "pspxdp"), flows, span + 0.4,
                         warmup=0.3, tail=0.2, tag="classes")
    finally:
        ctx.keep_pcaps = keep
    pcap = f"{ctx.work}/classes.pcap"
    real, byte = measure.rate_bins(pcap, [f.port for f in flows], parse_rate_bps(ctx.line_rate))
    rows = flow_rows(ctx, result, 0.0)
    t = Table("Five pspxdp classes starting and stopping (paper Fig. 7, Table 4)",
              ["class", "clock", "frames", "measured", "rate/1 min", "rate/1 mean", "rate/1 max",
               "rate/10 max", "burst@target", "burst@mean", "backlogged"],
              [f"class k starts at 0.5 + {step}k s and stops at {0.5 + span} - {step}k s, offered 1.3x "
               "its rate; measured = L2 bytes over first to last frame (Mbit/s)",
               "rate/n: L2 bytes of n frames over the time from the first to the (n+1)-th",
               REAL_TIME_NOTE, BYTE_CLOCK_NOTE])
    for r in rows:
        t.add(r.flow, _clock_label(r.clock), r.frames, mbit(r.mean_bps, 2),
              mbit(r.rate1_min_bps, 1), mbit(r.rate1_mean_bps, 1), mbit(r.rate1_max_bps, 1),
              mbit(r.rate10_max_bps, 1), num(r.burst_target_mtu), num(r.burst_mean_mtu),
              _yes(r.backlogged))
    res.table(t)
    res.csv("classes.csv", as_dicts(rows))
    bins: list[dict[str, object]] = []
    for clock, series in (("real", real), ("byte", byte)):
        for f in flows:
            for x, y in zip(*series[f.port], strict=True):
                bins.append({"clock": clock, "class": f.name, "t_s": round(x, 3), "rate_bps": y})
    res.csv("classes-10ms-bins.csv", bins)
    plt = pyplot()
    fig, ax = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    for a, (clock, series) in zip(ax, (("byte", byte), ("real", real)), strict=True):
        for f in flows:
            xs, ys = series[f.port]
            a.plot(xs, [y / 1e6 for y in ys], lw=0.8, label=f.name)
        a.set_ylabel("Mbit/s per 10 ms")
        a.set_title(_clock_label(clock) + ("" if clock == "byte" else
                                           " (veth: the daemon's timers, not a NIC)"), fontsize=9)
    ax[0].legend(fontsize=8, ncol=5)
    ax[1].set_xlabel("time (s)")
    res.save(fig, "classes.png")
    _done(ctx, res, "classes", rows)


# --- 3. many flows (paper Table 3) -------------------------------------------

def many_flows(ctx: RunContext) -> None:
    res = Results(ctx.out, "many-flows", ctx.command, ctx.started)
    rx = ctx.lab.receivers
    n_rx, per_rx = (16, 6)
    flows = [Flow(f"f{k}", rx[k // per_rx], 6001 + k, "10mbit", "12mbit") for k in range(n_rx * per_rx)]
    idle = measure.idle_cpu()
    names = ["pspxdp", "htb"] if ctx.full else ["pspxdp"]
    rows: list[FlowRow] = []
    summary: list[ManyFlowsRow] = []
    for name in names:
        ctx.progress(f"many flows: {len(flows)} flows, {per_rx} to each of {n_rx} receivers: {name}")
        result = run_udp(ctx, shapers.make(ctx, name), flows, ctx.seconds,
                         tag=f"many-{name}", windows=(1,))
        fr = flow_rows(ctx, result, idle)
        rows += fr
        for clock in dict.fromkeys(r.clock for r in fr):
            c = [r for r in fr if r.clock == clock]
            means = [r.mean_bps for r in c]
            summary.append(ManyFlowsRow(shaper=name, clock=clock, flows=len(c),
                                        mean_bps=sum(means) / len(means), min_bps=min(means),
                                        max_bps=max(means),
                                        burst_target_max_mtu=max(r.burst_target_mtu or 0 for r in c),
                                        burst_mean_max_mtu=max(r.burst_mean_mtu or 0 for r in c),
                                        lost=c[0].lost, cpu_cores=c[0].cpu_cores))
    t = Table(f"{len(flows)} flows, {per_rx} to each of {n_rx} receivers, 10 Mbit/s each (paper Table 3)",
              ["shaper", "clock", "flows", "mean Mbit/s", "min", "max", "max burst@target",
               "max burst@mean", "lost", "CPU"],
              [f"{n_rx} receiver addresses in one receiver namespace; each flow offered 12 Mbit/s; "
               "one class per flow; min/max over the flows' means; bursts: the worst flow's",
               REAL_TIME_NOTE, BYTE_CLOCK_NOTE])
    for s in summary:
        t.add(s.shaper, _clock_label(s.clock), s.flows, mbit(s.mean_bps), mbit(s.min_bps),
              mbit(s.max_bps), num(s.burst_target_max_mtu), num(s.burst_mean_max_mtu),
              s.lost, num(s.cpu_cores))
    res.table(t)
    res.csv("many-flows.csv", as_dicts(rows))
    res.csv("many-flows-summary.csv", as_dicts(summary))
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 4))
    for (name, clock) in dict.fromkeys((r.shaper, r.clock) for r in rows):
        c = [r for r in rows if r.shaper == name and r.clock == clock]
        ax.plot(range(len(c)), [r.burst_mean_mtu for r in c], ".", label=f"{name} ({_clock_label(clock)})")
    ax.axhline(2, color="tab:red", ls="--", lw=1)
    ax.set_yscale("log")
    ax.set_xlabel("flow")
    ax.set_ylabel("max burstiness at the mean rate (MTU)")
    ax.legend(fontsize=8)
    res.save(fig, "many-flows.png")
    _done(ctx, res, "many_flows", summary)


ALL: dict[str, Callable[[RunContext], None]] = {
    "side-by-side": side_by_side, "tcp": tcp, "sweep": sweep, "classes": classes, "many-flows": many_flows}
QUICK = ["side-by-side", "tcp"]
FULL = ["sweep", "classes", "many-flows", "side-by-side", "tcp"]
