"""One measured run: a shaper on the wire, UDP flows through it, the capture
judged by `pspxdp analyze`; and one TCP run through the bottleneck."""
import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from . import measure
from .cluster_capture import frames, replay, tbf_queue
from .context import RunContext
from .flow import Flow
from .measure import Capture, CaptureReading, CpuReading, Report
from .net import became, load_json, wait_until
from .shapers import ONE_FRAME_BUCKET, Shaper, ShaperCounters
from .units import parse_rate_bps


@dataclass
class UdpRun:
    """One run_udp: the analyzer's reports by (clock, window) and every
    counter; per-flow figures by flow name."""
    shaper: str
    flows: list[Flow]
    reports: dict[tuple[str, int], Report]
    cpu: CpuReading
    capture: CaptureReading
    counters: ShaperCounters
    sent: int | None
    # the share of the capture's time the wire idled while pspxdp had a
    # class backlogged (its daemon late): why its real-time rate falls short
    late_share: float | None
    blocked_total: int | None
    blocked: dict[str, int | None]
    offered_bps: dict[str, float]
    received: dict[str, int | None]
    send_errors: int | None


@dataclass
class FlowRow:
    """The side-by-side figures of one flow on one clock (see flow_rows)."""
    backlogged: bool | None
    shaper: str
    flow: str
    clock: str
    target_bps: int
    offered: str
    offered_bps: float | None
    frames: int
    mean_bps: float
    error_pct: float
    burst_mean_mtu: float | None
    burst_target_mtu: float | None
    rate1_max_bps: float | None
    rate1_min_bps: float | None
    rate1_mean_bps: float | None
    rate10_max_bps: float | None
    lost: int
    marks: int | None
    lost_flow: int | None
    unpaced: int | None
    daemon_late_pct: float | None
    blocked: int | None
    received: int | None
    capture_drops: int | None
    wire_drops: int
    cpu_cores: float
    cpu_pct_per_gbit: float | None
    gap_share: float | None


@dataclass
class TcpRow:
    shaper: str
    fifo_bytes: int
    bottleneck_bps: int
    throughput_bps: float | None
    retransmits: int | None
    # the sender's smoothed RTT (iperf3): queueing in the shaper (and the
    # FIFO) shows here
    mean_rtt_ms: float | None
    max_rtt_ms: float | None
    bottleneck_drops: int
    shaper_drops: int
    shaper_marks: int | None
    unpaced: int | None
    cpu_cores: float
    error: str | None
    rtt_ms: float | None = None  # the path's, by ping before the runs
    # What the shaper sent, apart from what the emulated bottleneck did with
    # it: the arrivals at the bottleneck (captured in R) replayed through an
    # ideal drop-tail FIFO of the same size draining at exactly B
    # (cluster_capture.replay), and the bottleneck's own departure stalls
    # (gaps over 100 us while it held more than a frame; tbf_queue).
    ideal_fifo_drops: int | None = None
    bottleneck_stalls: int | None = None
    bottleneck_max_stall_ms: float | None = None
    capture_drops: int | None = None  # tcpdump's, both captures: the replay holds when 0


def run_udp(ctx: RunContext, shaper: Shaper, flows: list[Flow], seconds: float, warmup: float = 1.0,
            size: int = 1472, tag: str = "run", tail: float = 0.5, windows: Sequence[int] = (1, 10)) -> UdpRun:
    """Offers flows for warmup + seconds + tail; captures `seconds` after the
    warm-up (the shapers' queues are full by then: the backlogged case the
    paper measures). Returns the analyzer's reports and every counter."""
    lab, work = ctx.lab, ctx.work
    base = os.path.join(work, tag)
    total = warmup + seconds + tail
    shaper.setup(flows)
    try:
        ports = sorted({f.port for f in flows})
        sink = lab.spawn(lab.d.cmd("nice", "-n", "-10", ctx.traffic, "sink", ",".join(map(str, ports)),
                                   "--seconds", f"{total + 2:.1f}"), out_path=base + ".sink.json")
        wait_until(f"the sink bound UDP ports {ports}", lambda: lab.d.udp_bound(ports))
        # One sender process per receiver (at most 6 flows each): a single
        # process could not offer ~1 Gbit/s on this 2-core machine. The
        # load generators run at nice -10 (the capture too): on a machine
        # shared with other work they must not starve, or a class runs
        # empty and what is judged is the sender, not the shaper. The
        # shapers run as they would (pspxdp's daemon as attach schedules it).
        senders = []
        by_dst: dict[str, list[Flow]] = {}
        for f in flows:
            by_dst.setdefault(f.dst, []).append(f)
        for i, group in enumerate(by_dst.values()):
            args: list[str | int] = ["nice", "-n", "-10", ctx.traffic, "send", "--size", size,
                                     "--seconds", f"{total:.2f}"]
            for f in group:
                args += ["--flow", f.spec()]
            senders.append(lab.spawn(lab.s.cmd(*args), out_path=f"{base}.send{i}.json",
                                     err_path=f"{base}.send{i}.err"))
        time.sleep(warmup)
        wire0 = measure.wire_drops(lab)
        late0 = shaper.counters().underrun_bytes
        cap = measure.Capture(lab, base + ".pcap")
        cpu = measure.Cpu([shaper.daemon_pid, sink.pid] + [p.pid for p in senders])
        time.sleep(seconds)
        cpu_r = cpu.stop()
        late1 = shaper.counters().underrun_bytes
        cap_r = cap.stop()
        cap_r.wire_drops = measure.wire_drops(lab) - wire0
        for p in senders:
            lab.reap(p, total + 10)
        lab.reap(sink, total + 10)
        counters = shaper.counters()
    finally:
        shaper.teardown()
    recv = load_json(base + ".sink.json")
    send: dict[str, Any] = {"sent": 0, "blocked": 0, "errors": 0, "flows": []}
    for i in range(len(senders)):
        one = load_json(f"{base}.send{i}.json")
        for k in ("sent", "blocked", "errors"):
            send[k] += one.get(k, 0)
        for rec in one.get("flows", []):
            rec["seconds"] = one.get("seconds", total)
        send["flows"] += one.get("flows", [])
    # What each sender really offered (a busy machine may not let it): L2
    # bits with FCS over the flow's time on.
    frame_bits = (max(size + 42, 60) + 4) * 8
    offered: dict[str, float] = {}
    for fl in flows:
        mine = next((x for x in send["flows"] if x["flow"] == fl.spec()), None)
        if mine:
            on = (fl.stop or mine["seconds"]) - fl.start
            offered[fl.name] = mine["sent"] * frame_bits / max(on, 1e-9)
    sel = [(f.name, f.selector(), f.rate) for f in flows]
    reports: dict[tuple[str, int], Report] = {}
    for clock in shaper.clocks:
        for n in windows:
            reports[(clock, n)] = measure.analyze(ctx.pspxdp, base + ".pcap", sel, clock,
                                                  ctx.line_rate, n)
    if not ctx.keep_pcaps:
        os.unlink(base + ".pcap")
    blocked = {x["flow"]: x["blocked"] for x in send["flows"]}
    return UdpRun(
        shaper=shaper.name, flows=flows, reports=reports, cpu=cpu_r, capture=cap_r,
        counters=counters, sent=send.get("sent"),
        late_share=(None if late0 is None or late1 is None else
                    (late1 - late0) * 8 / parse_rate_bps(ctx.line_rate) / cpu_r.seconds),
        blocked_total=send.get("blocked"),
        blocked={f.name: blocked.get(f.spec()) for f in flows},
        offered_bps=offered,
        received={f.name: recv.get(str(f.port), {}).get("datagrams") for f in flows},
        send_errors=send.get("errors"),
    )


def flow_rows(ctx: RunContext, result: UdpRun, idle_cores: float) -> list[FlowRow]:
    """The side-by-side figures of one run, one row per (flow, clock)."""
    rows = []
    reps = result.reports
    clocks = sorted({c for c, _ in reps}, key=lambda c: c != "byte")
    real1 = reps[("real", 1)]
    paced_gbit = sum(real1["by_name"].get(f.name, {}).get("mean_rate_bps", 0) for f in result.flows) / 1e9
    # Other work's kernel time varies too: a difference below 0 is noise.
    cores = max(0.0, result.cpu.machine_cores - idle_cores)
    line = parse_rate_bps(ctx.line_rate)
    late_share = result.late_share
    for f in result.flows:
        for clock in clocks:
            r1 = reps[(clock, 1)]["by_name"].get(f.name, {})
            r10 = reps.get((clock, 10), {}).get("by_name", {}).get(f.name, {})
            mean = r1.get("mean_rate_bps") or 0
            rows.append(FlowRow(
                # Backlogged throughout: only then is the mean the shaper's (a
                # sender that cannot offer the load on a busy machine empties
                # the class, and one missed slot costs a whole interval).
                # On the byte clock a backlogged class's frames are one
                # interval I = w*M/r apart, give or take two full frames of
                # other classes' blocking (w = 1538 B): no interval longer
                # than I + 2w, i.e. rate per 1 packet >= r * M / (M + 2r).
                backlogged=(None if clock != "byte" else
                            (r1.get("rate_n_min_bps") or 0) >=
                            f.rate_bps * line / (line + 2 * f.rate_bps)),
                shaper=result.shaper, flow=f.name, clock=clock,
                target_bps=f.rate_bps, offered=f.offered,
                offered_bps=result.offered_bps.get(f.name), frames=r1.get("frames", 0),
                mean_bps=mean, error_pct=(mean - f.rate_bps) / f.rate_bps * 100,
                burst_mean_mtu=r1.get("max_burst_mtu"),
                burst_target_mtu=r1.get("max_burst_at_target_mtu"),
                rate1_max_bps=r1.get("rate_n_max_bps"), rate1_min_bps=r1.get("rate_n_min_bps"),
                rate1_mean_bps=r1.get("rate_n_mean_bps"),
                rate10_max_bps=r10.get("rate_n_max_bps"),
                lost=result.counters.drops, marks=result.counters.marks,
                lost_flow=result.counters.per_flow.get(f.name),
                unpaced=result.counters.passed,
                daemon_late_pct=None if late_share is None else late_share * 100,
                blocked=result.blocked.get(f.name), received=result.received.get(f.name),
                capture_drops=result.capture.capture_drops,
                wire_drops=result.capture.wire_drops,
                cpu_cores=cores,
                cpu_pct_per_gbit=cores * 100 / paced_gbit if paced_gbit > 0 else None,
                gap_share=reps[(clock, 1)].get("gap_share"),
            ))
    return rows


def run_tcp(ctx: RunContext, shaper: Shaper, fifo_bytes: int, bottleneck: str, seconds: int, ecn: bool = False,
            tag: str = "tcp") -> TcpRow:
    """One iperf3 flow S -> D through the wire (shaped by shaper at the
    bottleneck's rate) and the bottleneck (tbf rate B, one-frame bucket,
    limit = the FIFO). The delay line must already run on the return path."""
    lab, work = ctx.lab, ctx.work
    base = os.path.join(work, tag)
    lab.r.run("tc", "qdisc", "replace", "dev", lab.rout, "root", "tbf", "rate", bottleneck, "burst",
              ONE_FRAME_BUCKET, "limit", fifo_bytes)
    lab.s.sysctl("net.ipv4.tcp_ecn", 1 if ecn else 2)
    flow = Flow("tcp", lab.ip_d, 5201, bottleneck, "-")
    shaper.setup([flow], proto="tcp")
    # The frames as they reach the bottleneck (R's ingress) and as it lets
    # them out (ROUT's egress, after the tbf's dequeue).
    caps = [Capture(lab, base + ".arrivals.pcap", lab.r, lab.rin, "in"),
            Capture(lab, base + ".departures.pcap", lab.r, lab.rout, "out")]
    readings: list[CaptureReading] = []
    try:
        server = lab.spawn(lab.d.cmd("nice", "-n", "-10", "iperf3", "-s", "-1", "-p", 5201),
                           out_path=base + ".server.log")
        # The client only once the server listens (on a busy machine 0.3 s
        # was not always enough: "connection refused").
        became(lambda: ":5201" in lab.d.run("ss", "-Hltn", check=False), 5)
        cpu = measure.Cpu([shaper.daemon_pid, server.pid])
        client = lab.spawn(lab.s.cmd("nice", "-n", "-10", "iperf3", "-c", lab.ip_d, "-p", 5201, "-t", seconds,
                                     "-J"),
                           out_path=base + ".iperf.json", err_path=base + ".iperf.err")
        lab.reap(client, seconds + 30)
        cpu_r = cpu.stop()
        lab.reap(server, 10)
        counters = shaper.counters()
    finally:
        readings = [c.stop() for c in caps]
        shaper.teardown()
    arrivals, departures = frames(caps[0].path, 5201), frames(caps[1].path, 5201)
    if not ctx.keep_pcaps:
        for c in caps:
            os.remove(c.path)
    b = parse_rate_bps(bottleneck)
    ideal = replay(arrivals, b, fifo_bytes) if arrivals else None
    tbf = tbf_queue(arrivals, departures, fifo_bytes) if arrivals and departures else None
    q = json.loads(lab.r.run("tc", "-s", "-j", "qdisc", "show", "dev", lab.rout))
    lab.r.run("tc", "qdisc", "del", "dev", lab.rout, "root", check=False)
    ip = load_json(base + ".iperf.json")
    end = ip.get("end", {})
    sent, rcvd = end.get("sum_sent", {}), end.get("sum_received", {})
    snd = (end.get("streams") or [{}])[0].get("sender", {})
    return TcpRow(
        shaper=shaper.name + ("+ecn" if ecn else ""), fifo_bytes=fifo_bytes,
        bottleneck_bps=parse_rate_bps(bottleneck),
        throughput_bps=rcvd.get("bits_per_second"), retransmits=sent.get("retransmits"),
        # iperf3 gives us
        mean_rtt_ms=snd["mean_rtt"] / 1e3 if "mean_rtt" in snd else None,
        max_rtt_ms=snd["max_rtt"] / 1e3 if "max_rtt" in snd else None,
        bottleneck_drops=sum(x.get("drops", 0) for x in q),
        shaper_drops=counters.drops, shaper_marks=counters.marks,
        unpaced=counters.passed,
        cpu_cores=cpu_r.machine_cores, error=ip.get("error"),
        ideal_fifo_drops=ideal.drops if ideal else None,
        bottleneck_stalls=tbf.stalls_over_100us if tbf else None,
        bottleneck_max_stall_ms=tbf.max_stall_us / 1000 if tbf else None,
        capture_drops=sum(r.capture_drops or 0 for r in readings),
    )
