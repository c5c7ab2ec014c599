"""The cluster lab's network: N hosts, one router, one bottleneck.

    H0 --wire--\\                                   /-- receiver .10
    H1 --wire---> R (router) --bottleneck--> D (receivers) .11, .12 ...
    ...        /   ^                           |
    Hn-1 -----/    \\--- RRET <-- L (delay) <-- DRET   (the ACKs' way back)

- every host Hi is a namespace with its own veth to R (its "NIC"): what
  pspxdp paces (one `pspxdp attach` per host) or tbf shapes;
- the bottleneck is a drop-tail FIFO: tbf on R's ROUT at rate B with a
  one-frame bucket and limit = the FIFO's size in bytes;
- D holds one receiver address per host (10.84.200.10 + i);
- the ACKs go back D -> L -> R -> Hi through the delay line (psp_delay in
  L, a fixed one-way delay: RTT >= 20 ms), then R routes each to its host's
  wire: the forward path stays pure kernel.

Names start with c4 (this lab's prefix) and carry the run's pid. Everything
is removed by teardown(), also after a failure.
"""
import json
from typing import Any

from .net import Lab, Ns, became, load_json
from .shapers import ONE_FRAME_BUCKET

NET = "10.84"
ETCD_IP = f"{NET}.250.1"   # etcd in R, on its loopback: every host routes to it
ETCD_PORTS = (23810, 23811)  # client, peer: the cluster lab's (c4) range


class ClusterNet(Lab):
    hosts: list[Ns]

    def __init__(self, build: str, n_hosts: int) -> None:
        super().__init__(build, tag=None)
        self.tag = f"c4-lab{self.pid}"
        self.n = n_hosts
        p = f"c4{self.pid % 1000000}"
        self.host_devs = [f"{p}h{i}" for i in range(n_hosts)]  # the hosts' NICs
        self.router_devs = [f"{p}r{i}" for i in range(n_hosts)]
        self.rout, self.din = p + "o", p + "i"
        self.dret, self.lin, self.lout, self.rret = p + "x", p + "y", p + "z", p + "k"
        self.host_ips = [f"{NET}.{i}.1" for i in range(n_hosts)]
        self.receivers = [f"{NET}.200.{10 + i}" for i in range(n_hosts)]

    def build_topology(self, receivers: int = 0) -> None:
        self.r, self.d, self.l = (self.netns(x) for x in "rdl")
        self.hosts = [self.netns(f"h{i}") for i in range(self.n)]
        r, d, l = self.r, self.d, self.l  # noqa: E741 - the topology's letters
        r.sysctl("net.ipv4.ip_forward", 1)
        self.veth(r, self.rout, d, self.din)
        self.veth(d, self.dret, l, self.lin)
        self.veth(l, self.lout, r, self.rret)
        r.run("ip", "addr", "add", f"{NET}.200.1/24", "dev", self.rout)
        d.run("ip", "addr", "add", f"{NET}.200.2/24", "dev", self.din)
        for a in self.receivers:
            d.run("ip", "addr", "add", f"{a}/32", "dev", self.din)
        mac_din, mac_rout = d.mac(self.din), r.mac(self.rout)
        for a in [f"{NET}.200.2", *self.receivers]:
            r.run("ip", "neigh", "replace", a, "lladdr", mac_din, "dev", self.rout, "nud", "permanent")
        d.run("ip", "neigh", "replace", f"{NET}.200.1", "lladdr", mac_rout, "dev", self.din, "nud", "permanent")
        # D's way back to every host: the delay line (L forwards by MAC to
        # RRET, R routes). Checksums complete before L copies the frames.
        d.run("ip", "route", "add", f"{NET}.0.0/17", "dev", self.dret)
        d.run("ethtool", "-K", self.dret, "tx", "off")
        mac_lin = l.mac(self.lin)
        for i, h in enumerate(self.hosts):
            hd, rd = self.host_devs[i], self.router_devs[i]
            self.veth(h, hd, r, rd)
            h.run("ip", "addr", "add", f"{self.host_ips[i]}/24", "dev", hd)
            r.run("ip", "addr", "add", f"{NET}.{i}.2/24", "dev", rd)
            h.run("ip", "route", "add", f"{NET}.200.0/24", "via", f"{NET}.{i}.2", "dev", hd)
            h.run("ip", "route", "add", f"{NET}.250.0/24", "via", f"{NET}.{i}.2", "dev", hd)
            h.run("ip", "neigh", "replace", f"{NET}.{i}.2", "lladdr", r.mac(rd), "dev", hd, "nud", "permanent")
            r.run("ip", "neigh", "replace", self.host_ips[i], "lladdr", h.mac(hd), "dev", rd, "nud", "permanent")
            d.run("ip", "neigh", "replace", self.host_ips[i], "lladdr", mac_lin, "dev", self.dret,
                  "nud", "permanent")
        # The ACKs arrive on RRET, not on the host's wire: no reverse-path filter.
        for ns in (r, d, *self.hosts):
            for dev in ("all", "default"):
                ns.sysctl(f"net.ipv4.conf.{dev}.rp_filter", 0)
        r.sysctl(f"net.ipv4.conf.{self.rret}.rp_filter", 0)
        # TCP windows for a bandwidth-delay product of up to 1 Gbit/s x 200 ms.
        for ns in (d, *self.hosts):
            ns.sysctl("net.core.rmem_max", 64 << 20)
            ns.sysctl("net.core.wmem_max", 64 << 20)
            ns.sysctl("net.ipv4.tcp_rmem", f"4096 131072 {64 << 20}")
            ns.sysctl("net.ipv4.tcp_wmem", f"4096 131072 {64 << 20}")
        # The senders ask for ECN: pspxdp's classes mark CE on a frame joining
        # a backlog longer than ce_threshold (4 ms): TCP slows down before
        # the class limit drops (tbf and the bottleneck never mark).
        for h in self.hosts:
            h.sysctl("net.ipv4.tcp_ecn", 1)
        for i, h in enumerate(self.hosts):
            h.run("ping", "-c1", "-W2", f"{NET}.{i}.2")

    def delay_dst_mac(self) -> str:
        """The delay line sends the ACKs to R's RRET (R routes them on)."""
        return self.r.mac(self.rret)

    def start_etcd(self, data_dir: str, log_path: str) -> str:
        """One etcd member (Debian's etcd-server) in R: the hosts reach it
        over their own wires (a few small requests a second, paced with the
        rest). Returns its client URL once it answers."""
        self.r.run("ip", "addr", "add", f"{ETCD_IP}/32", "dev", "lo")  # this kernel has no dummy devices
        client, peer = (f"http://{ETCD_IP}:{p}" for p in ETCD_PORTS)
        # Real-time (SCHED_FIFO 5, below the pacing daemons' 10, above the
        # senders): at nice 0 on this loaded 2-core machine etcd answered
        # keep-alives and writes past their 500 ms timeout, the leases'
        # deadlines passed and the watchdogs put the hosts at their floors
        # over and over (what the dynamic run measured).
        self.spawn(self.r.cmd("chrt", "-f", "5", "etcd", "--name", "c4lab", "--data-dir", data_dir,
                              "--listen-client-urls", client,
                              "--advertise-client-urls", client, "--listen-peer-urls", peer,
                              "--initial-advertise-peer-urls", peer, "--initial-cluster", f"c4lab={peer}",
                              "--log-level", "warn"), err_path=log_path)
        if became(lambda: '"true"' in self.r.run("curl", "-fsS", "-m", "1", f"{client}/health", check=False), 10):
            return client
        raise RuntimeError(f"etcd did not answer on {client} within 10 s (its log: {log_path})")

    def rtt_ms(self, host: int = 0) -> float | None:
        out = self.hosts[host].run("ping", "-c", "5", "-i", "0.2", "-q", self.receivers[0], check=False)
        for line in out.splitlines():
            if "min/avg" in line:
                return float(line.split("=")[1].split("/")[1])
        return None

    # --- the bottleneck
    def set_bottleneck(self, rate: str, fifo_bytes: int) -> None:
        """A fresh drop-tail FIFO (its counters at 0: a replace by the same
        kind would keep them)."""
        self.r.run("tc", "qdisc", "del", "dev", self.rout, "root", check=False)
        self.r.run("tc", "qdisc", "add", "dev", self.rout, "root", "tbf", "rate", rate, "burst",
                   ONE_FRAME_BUCKET, "limit", fifo_bytes)

    def bottleneck(self) -> dict[str, int]:
        q: list[dict[str, Any]] = json.loads(self.r.run("tc", "-s", "-j", "qdisc", "show", "dev", self.rout))
        return {"drops": sum(x.get("drops", 0) for x in q), "packets": sum(x.get("packets", 0) for x in q),
                "bytes": sum(x.get("bytes", 0) for x in q)}

    def wire_bytes(self) -> list[int]:
        """Bytes each host has put on its wire so far (R's rx counter of the
        host's veth: the kernel's, exact whenever it is read)."""
        links = {x["ifname"]: x for x in json.loads(self.r.run("ip", "-s", "-j", "link", "show"))}
        return [int(links[d]["stats64"]["rx"]["bytes"]) for d in self.router_devs]

    def retransmits(self, host: int) -> int:
        """The host's TCP RetransSegs (its own namespace's counter)."""
        lines = [x.split() for x in self.hosts[host].run("cat", "/proc/net/snmp").splitlines()
                 if x.startswith("Tcp:")]
        return int(lines[1][lines[0].index("RetransSegs")])


__all__ = ["ClusterNet", "load_json"]
