"""Measuring: the capture on the wire's far end, `pspxdp analyze` (the one
judge for every shaper), CPU, and 10 ms rate bins for the time plots."""
import json
import os
import re
import signal
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scapy.utils import RawPcapReader

from .net import Lab, Ns, became, sh

# `pspxdp analyze -j`'s report, with "by_name": its flows by name.
Report = dict[str, Any]

WIRE_OVERHEAD = 24  # FCS + preamble/SFD + IFG, docs/design.md §2.3


@dataclass
class CaptureReading:
    captured: int | None       # as tcpdump reports them; None if it did not
    capture_drops: int | None
    wire_drops: int = 0        # set by the caller: wire_drops() over the capture


class Capture:
    """tcpdump on RIN in R (or on DEV in NS, DIRECTION "in" or "out"),
    nanosecond timestamps, every frame (PAUSE too)."""

    def __init__(self, lab: Lab, path: str, ns: Ns | None = None, dev: str | None = None,
                 direction: str = "in") -> None:
        self.lab, self.path = lab, path
        self.log = path + ".log"
        self.p = lab.spawn((ns or lab.r).cmd("nice", "-n", "-10", "tcpdump", "-i", dev or lab.rin, "-Q", direction,
                                             "-s", "96", "-B", "524288", "--time-stamp-precision=nano", "-w", path),
                           err_path=self.log)
        # tcpdump is capturing once it says "listening"
        became(lambda: "listening" in Path(self.log).read_text(), 2.5)

    def stop(self) -> CaptureReading:
        self.p.send_signal(signal.SIGINT)
        self.lab.reap(self.p, 10)
        text = Path(self.log).read_text()
        m = re.search(r"(\d+) packets? dropped by kernel", text)
        c = re.search(r"(\d+) packets? captured", text)
        return CaptureReading(captured=int(c.group(1)) if c else None,
                              capture_drops=int(m.group(1)) if m else None)


@dataclass
class CpuReading:
    """Cores busy over the interval (1.0 = one core)."""
    kernel_cores: float
    user_cores: float
    machine_cores: float
    seconds: float


class Cpu:
    """CPU over an interval, in cores (1.0 = one core busy): the kernel's
    time machine-wide (system + irq + softirq: where packets are moved,
    whoever's they are) plus the user time of the lab's own processes (the
    pacer daemon, senders, sinks). Other work on the machine is mostly user
    time (compilers) and stays out; what kernel time it adds is measured
    idle first (idle_cpu) and subtracted by the caller."""

    @staticmethod
    def _stat() -> tuple[int, int]:
        v = list(map(int, Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]))
        return v[2] + v[5] + v[6], sum(v)  # system + irq + softirq, all

    @staticmethod
    def _user(pid: int) -> int | None:
        try:
            return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[11])
        except (OSError, IndexError, TypeError, ValueError):
            return None

    def __init__(self, pids: Iterable[int | None] = ()) -> None:
        self.pids = [p for p in pids if p]
        self.t0 = time.monotonic()
        self.k0, self.a0 = self._stat()
        self.u0 = {p: self._user(p) for p in self.pids}

    def stop(self) -> CpuReading:
        dt = time.monotonic() - self.t0
        k1, a1 = self._stat()
        ncpu = os.cpu_count() or 1
        hz = os.sysconf("SC_CLK_TCK")
        kernel = (k1 - self.k0) / max(1, a1 - self.a0) * ncpu
        user = 0.0
        for p, u0 in self.u0.items():
            u1 = self._user(p)
            if u0 is not None and u1 is not None:
                user += (u1 - u0) / hz / dt
        return CpuReading(kernel_cores=kernel, user_cores=user, machine_cores=kernel + user, seconds=dt)


def wire_drops(lab: Lab) -> int:
    """Frames lost on the wire itself, before the capture sees them: the
    sending veth's tx drops (the receiving side's backlog was full). A lost
    PAUSE frame would shorten the byte clock, a lost real frame the measured
    rate: a capture is complete only when this stays 0 over a run. (The
    receiving veth's rx drops are no loss: every PAUSE frame is counted there
    after the capture saw it, the stack has no handler for 0x8808.)"""
    d = json.loads(lab.s.run("ip", "-s", "-j", "link", "show", lab.dev))[0]["stats64"]
    dropped: int = d["tx"]["dropped"]
    return dropped


def idle_cpu(seconds: float = 1.0) -> float:
    """The machine's kernel time without the lab (other work on it):
    subtracted from a row's figure, reported beside it."""
    c = Cpu()
    time.sleep(seconds)
    return c.stop().kernel_cores


def analyze(pspxdp: str, pcap: str, flows: Iterable[tuple[str, str, str]], clock: str, line_rate: str,
            window: int = 1) -> Report:
    """`pspxdp analyze` JSON, flows by name: [(name, selector, target_rate)]."""
    args = [pspxdp, "analyze", pcap, "-j", "--window", str(window)]
    args += ["--line-rate", line_rate] if clock == "byte" else ["--real-time"]
    for name, sel, target in flows:
        args += ["--flow", f"{name}={sel}"]
        if target:
            args += ["--target", f"{name}={target}"]
    d: Report = json.loads(sh(args, timeout=600))
    d["by_name"] = {f["name"]: f for f in d["flows"]}
    return d


@dataclass(frozen=True)
class Frame:
    time_ns: int   # capture timestamp
    length: int    # the frame's length on the wire, L2 without FCS (tcpdump keeps only its head)
    head: bytes    # what the capture kept of it


def pcap_frames(path: str) -> Iterator[Frame]:
    """Every frame of a pcap (scapy's reader, nanosecond or microsecond)."""
    reader = RawPcapReader(path)
    try:
        scale = 1 if reader.nano else 1000
        for head, meta in reader:
            yield Frame(meta.sec * 1_000_000_000 + meta.usec * scale, meta.wirelen, head)
    finally:
        reader.close()


def read_pcap(path: str, port_of_interest: set[int],
              overhead: int = WIRE_OVERHEAD) -> Iterator[tuple[int, int, int | None]]:
    """Yields (time_ns, wire_bytes, dport or None) for every frame of a
    pcap; dport only for IPv4 UDP/TCP frames whose port is in
    port_of_interest; wire_bytes: the L2 length (at least 60) plus
    overhead (0: the length a qdisc accounts). The byte clock itself is `pspxdp analyze`'s; this is
    only for the 10 ms bins of the time plots."""
    for f in pcap_frames(path):
        pkt, port = f.head, None
        if len(pkt) >= 38 and pkt[12:14] == b"\x08\x00" and pkt[23] in (6, 17):
            ihl = (pkt[14] & 0x0F) * 4
            if len(pkt) >= 14 + ihl + 4:
                p = int.from_bytes(pkt[14 + ihl + 2:14 + ihl + 4], "big")
                if p in port_of_interest:
                    port = p
        yield f.time_ns, max(f.length, 60) + overhead, port


Series = dict[int, tuple[list[float], list[float]]]  # by port: (bin start s, bit/s)


def rate_bins(path: str, ports: Sequence[int], line_rate_bps: int, bin_s: float = 0.010) -> tuple[Series, Series]:
    """Per port: L2 rate (FCS included) in bins of bin_s, on the real clock
    (capture time) and on the byte clock (wire bytes of all frames so far
    over the line rate; the idle wire does not advance it)."""
    real: dict[int, dict[int, int]] = {p: {} for p in ports}
    byte: dict[int, dict[int, int]] = {p: {} for p in ports}
    t0 = None
    clock_bytes = 0
    for t, wire, port in read_pcap(path, set(ports)):
        if t0 is None:
            t0 = t
        if port is not None:
            l2 = wire - WIRE_OVERHEAD + 4
            rb = int((t - t0) / 1e9 / bin_s)
            bb = int(clock_bytes * 8 / line_rate_bps / bin_s)
            real[port][rb] = real[port].get(rb, 0) + l2
            byte[port][bb] = byte[port].get(bb, 0) + l2
        clock_bytes += wire

    def series(d: dict[int, dict[int, int]]) -> Series:
        out: Series = {}
        for p, bins in d.items():
            if not bins:
                out[p] = ([], [])
                continue
            hi = max(bins)
            xs = [i * bin_s for i in range(hi + 1)]
            out[p] = (xs, [bins.get(i, 0) * 8 / bin_s for i in range(hi + 1)])
        return out

    return series(real), series(byte)
