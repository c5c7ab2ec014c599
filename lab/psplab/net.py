"""The lab's network: namespaces, veths, processes, and their removal.

Topology (every name carries the run's pid, so parallel runs never collide):

    S (sender) --wire--> R (router) --bottleneck--> D (receivers)
      DEV ................ RIN   ROUT ................ DIN
      SRET <-- L (delay line) <-------------------- DRET

- the wire DEV -> RIN is what pspxdp paces, or tc shapes; the capture is
  taken on RIN (PAUSE gap frames included);
- the bottleneck is a tbf on ROUT (rate B, a one-frame bucket, limit = the
  FIFO's size in bytes): a drop-tail FIFO served at B;
- the return path D -> S (ACKs) goes through the delay line in L: a separate
  veth pair, so the forward (data) path stays pure kernel and the delay line
  handles only ACKs (a few per data frame, at a small fraction of the data
  rate: cheap and accurate).

Everything the lab starts is recorded here and removed by Lab.teardown(),
which the driver runs on exit, error or signal.
"""
import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

NET = "10.80"  # 10.80.0.0/24 wire, .1 router-receivers, .2 D-L, .3 L-S

Arg = str | int | float  # a command's word; str()ed


def sh(argv: Sequence[Arg], check: bool = True, timeout: float = 60, capture: bool = True) -> str:
    words = [str(a) for a in argv]
    r = subprocess.run(words, capture_output=capture, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(words)}: exit {r.returncode}: "
                           f"{(r.stderr or '').strip()[:400]}")
    return r.stdout if capture else ""


def load_json(path: str) -> dict[str, Any]:
    """A program's JSON report, or {} if it wrote none (or not whole)."""
    try:
        with open(path) as f:
            d = json.load(f)
    except (OSError, ValueError):
        return {}
    return d if isinstance(d, dict) else {}


def became(ready: Callable[[], bool], seconds: float, every_s: float = 0.05) -> bool:
    """Polls ready() every every_s until it holds (True) or `seconds` have
    passed (False): a wait for a condition, never a fixed time."""
    deadline = time.monotonic() + seconds
    while not ready():
        if time.monotonic() > deadline:
            return False
        time.sleep(every_s)
    return True


def wait_until(what: str, ready: Callable[[], bool], seconds: float = 10) -> None:
    """became(), or RuntimeError naming what after `seconds`."""
    if not became(ready, seconds):
        raise RuntimeError(f"{what}: not within {seconds:g} s")


class Ns:
    def __init__(self, name: str) -> None:
        self.name = name

    def cmd(self, *argv: Arg) -> list[str]:
        # nsenter keeps the mount namespace: bpffs pins stay visible
        # (ip netns exec remounts /sys and hides them).
        return ["nsenter", f"--net=/run/netns/{self.name}", *map(str, argv)]

    def run(self, *argv: Arg, check: bool = True, timeout: float = 60) -> str:
        return sh(self.cmd(*argv), check=check, timeout=timeout)

    def sysctl(self, key: str, value: Arg) -> None:
        self.run("sysctl", "-qw", f"{key}={value}")

    def mac(self, dev: str) -> str:
        address: str = json.loads(self.run("ip", "-j", "link", "show", dev))[0]["address"]
        return address

    def udp_bound(self, ports: Sequence[int]) -> bool:
        """Every one of ports has a UDP socket bound to it here."""
        lines = self.run("ss", "-Hlun", check=False).splitlines()
        bound = {int(w[3].rsplit(":", 1)[1]) for w in (line.split() for line in lines)
                 if len(w) > 3 and w[3].rsplit(":", 1)[-1].isdigit()}
        return set(ports) <= bound

    def packet_sockets(self, pid: int) -> int:
        """The AF_PACKET sockets process pid holds here."""
        return self.run("ss", "-Hp", "-0", check=False).count(f"pid={pid},")


class Lab:
    # The namespaces, set by build_topology().
    s: Ns
    r: Ns
    d: Ns
    l: Ns  # noqa: E741 - the topology's letter for the delay line
    receivers: list[str]

    def __init__(self, build: str, tag: str | None = None) -> None:
        self.build = build
        self.pid = os.getpid()
        self.tag = tag or f"psp-lab{self.pid}"
        self.namespaces: list[Ns] = []
        self.procs: list[subprocess.Popen[bytes]] = []
        self.pspxdp_devs: list[tuple[Ns, str]] = []  # (ns, dev) pspxdp is attached to
        p = f"pl{self.pid}"
        self.dev, self.rin, self.rout, self.din = p + "w", p + "r", p + "o", p + "i"
        self.dret, self.lin, self.lout, self.sret = p + "x", p + "y", p + "z", p + "k"
        self.ip_s = f"{NET}.0.1"
        self.ip_r = f"{NET}.0.2"
        self.ip_d = f"{NET}.1.2"
        self.delay: tuple[subprocess.Popen[bytes], str] | None = None

    # --- building
    def netns(self, suffix: str) -> Ns:
        ns = Ns(f"{self.tag}-{suffix}")
        sh(["ip", "netns", "add", ns.name])
        self.namespaces.append(ns)
        ns.run("ip", "link", "set", "lo", "up")
        ns.sysctl("net.ipv6.conf.all.disable_ipv6", 1)
        ns.sysctl("net.ipv6.conf.default.disable_ipv6", 1)
        return ns

    def veth(self, ns_a: Ns, a: str, ns_b: Ns, b: str) -> None:
        ns_a.run("ip", "link", "add", a, "type", "veth", "peer", "name", b, "netns", ns_b.name)
        ns_a.run("ip", "link", "set", a, "up")
        ns_b.run("ip", "link", "set", b, "up")

    def build_topology(self, receivers: int = 16) -> None:
        """receivers: how many receiver addresses D holds (10.80.1.10 ...)."""
        self.s, self.r, self.d, self.l = (self.netns(x) for x in "srdl")
        s, r, d, l = self.s, self.r, self.d, self.l  # noqa: E741 - the topology's letters
        self.veth(s, self.dev, r, self.rin)
        self.veth(r, self.rout, d, self.din)
        self.veth(d, self.dret, l, self.lin)
        self.veth(l, self.lout, s, self.sret)
        s.run("ip", "addr", "add", f"{self.ip_s}/24", "dev", self.dev)
        r.run("ip", "addr", "add", f"{self.ip_r}/24", "dev", self.rin)
        r.run("ip", "addr", "add", f"{NET}.1.1/24", "dev", self.rout)
        d.run("ip", "addr", "add", f"{self.ip_d}/24", "dev", self.din)
        self.receivers = [f"{NET}.1.{10 + i}" for i in range(receivers)]
        for a in self.receivers:
            d.run("ip", "addr", "add", f"{a}/32", "dev", self.din)
        s.run("ip", "route", "add", f"{NET}.1.0/24", "via", self.ip_r, "dev", self.dev)
        r.sysctl("net.ipv4.ip_forward", 1)
        # ACKs reach S on SRET while S's route to D is the wire: asymmetric
        # on purpose, so no reverse-path filter may drop them.
        for ns in (s, r, d):
            for dev in ("all", "default"):
                ns.sysctl(f"net.ipv4.conf.{dev}.rp_filter", 0)
        s.sysctl(f"net.ipv4.conf.{self.sret}.rp_filter", 0)
        # D's way back to S: the delay line (L has no address; it forwards
        # frames by MAC). Checksums must be complete before it copies them.
        d.run("ip", "route", "add", f"{NET}.0.0/24", "dev", self.dret)
        d.run("ethtool", "-K", self.dret, "tx", "off")
        # Static neighbours: no ARP on the wire mid-run.
        d.run("ip", "neigh", "replace", self.ip_s, "lladdr", l.mac(self.lin), "dev", self.dret,
              "nud", "permanent")
        s.run("ip", "neigh", "replace", self.ip_r, "lladdr", r.mac(self.rin), "dev", self.dev,
              "nud", "permanent")
        r.run("ip", "neigh", "replace", self.ip_s, "lladdr", s.mac(self.dev), "dev", self.rin,
              "nud", "permanent")
        mac_din = d.mac(self.din)
        for a in [self.ip_d, *self.receivers]:
            r.run("ip", "neigh", "replace", a, "lladdr", mac_din, "dev", self.rout, "nud", "permanent")
        d.run("ip", "neigh", "replace", f"{NET}.1.1", "lladdr", r.mac(self.rout), "dev", self.din,
              "nud", "permanent")
        # TCP windows for a bandwidth-delay product of up to 500 Mbit/s x
        # 200 ms; ECN answered when asked (the pacer marks, nobody else).
        for ns in (s, d):
            ns.sysctl("net.core.rmem_max", 64 << 20)
            ns.sysctl("net.core.wmem_max", 64 << 20)
            ns.sysctl("net.ipv4.tcp_rmem", f"4096 131072 {64 << 20}")
            ns.sysctl("net.ipv4.tcp_wmem", f"4096 131072 {64 << 20}")
        s.run("ping", "-c1", "-W2", self.ip_r)

    def start_delay(self, delay_ms: float, seconds: float, out_path: str) -> None:
        """The delay line on D -> S (ACKs), delay_ms one way."""
        cmd = self.l.cmd(f"{self.build}/lab/psp_delay", "--in", self.lin, "--out", self.lout,
                         "--dst-mac", self.delay_dst_mac(), "--delay-ms", delay_ms,
                         "--seconds", seconds, "--rt-priority", 50)
        p = self.spawn(cmd, out_path)
        self.delay = (p, out_path)
        # Forwarding once it has its two AF_PACKET sockets (in, out).
        wait_until("the delay line's two packet sockets",
                   lambda: p.poll() is not None or self.l.packet_sockets(p.pid) >= 2)
        if p.poll() is not None:
            raise RuntimeError(f"the delay line exited ({p.returncode}) before it forwarded")

    def delay_dst_mac(self) -> str:
        """Where the delay line sends the ACKs: S's return veth."""
        return self.s.mac(self.sret)

    def stop_delay(self) -> dict[str, Any]:
        if not self.delay:
            return {}
        p, path = self.delay
        self.delay = None
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
        return load_json(path)

    # --- processes
    def spawn(self, cmd: list[str], out_path: str | None = None,
              err_path: str | None = None) -> "subprocess.Popen[bytes]":
        # The child keeps its own copies of the log files: ours close here.
        with contextlib.ExitStack() as logs:
            out: IO[bytes] | int = logs.enter_context(open(out_path, "wb")) if out_path else subprocess.DEVNULL
            err: IO[bytes] | int = logs.enter_context(open(err_path, "wb")) if err_path else subprocess.DEVNULL
            p = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        self.procs.append(p)
        return p

    def reap(self, p: "subprocess.Popen[bytes]", timeout: float) -> None:
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(5)

    # --- removal
    def teardown(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
        for p in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(5)
        here = Path(__file__).resolve().parent.parent
        for ns, dev in self.pspxdp_devs:
            # lab/netns.sh's psp_teardown: detach, the daemon by its pid if
            # detach could not stop it, pins and run files; then namespaces.
            subprocess.run(["bash", "-c", f'source "{here}/netns.sh"; psp_teardown "$@"', "-",
                            f"{self.build}/user/pspxdp", ns.name, "-", dev],
                           capture_output=True, timeout=60)
        for ns in reversed(self.namespaces):
            subprocess.run(["ip", "netns", "del", ns.name], capture_output=True)
        self.namespaces = []
