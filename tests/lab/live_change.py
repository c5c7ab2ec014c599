#!/usr/bin/env python3
"""test_live_change's figures from its capture and status snapshots.

  live_change.py change CAP IPERF3_JSON S0 S1 T1 T1_END T2 T2_END TCPDUMP_LOG W1 W2
      one line: data frames, lost (handed to the pacer, not delivered),
      TCP retransmits, pacer drops, socket ring full, TC passed, capture
      drops, the step times (ms after each command started), the commands'
      durations, the reactions (ms after each wrote class_config; -1 without
      strace), the mean L2 rates (Mbit/s) before, between and after, and the
      frames passed on a stale heartbeat
  live_change.py reloads S0 S1        exit 0 if the daemon re-read its
      configuration at least twice between the snapshots
  live_change.py drained STATUS       exit 0 if class 1:2 is gone or empty
  live_change.py deleted SEND_JSON SINK_JSON STATUS...
      one line: datagrams sent, delivered, the most drops class 1:2 counted,
      its largest backlog
"""
import sys

from verdict import Json, load

from psplab.cli import Sub, subcommands
from psplab.measure import pcap_frames

K = 32  # frames per spacing window: smooths the VM's scheduling jitter


class Capture:
    """The data frames of a classic pcap: arrival times, L2 bytes with FCS."""

    def __init__(self, path: str) -> None:
        self.t: list[float] = []
        self.l2: list[int] = []
        self.delivered = 0
        for f in pcap_frames(path):
            self.delivered += 1
            if f.length < 1000:  # SYN, FIN, window updates: not the data stream
                continue
            self.t.append(f.time_ns / 1e9)
            self.l2.append(max(f.length, 60) + 4)  # what a class's rate counts: L2 bytes with FCS

    def rate(self, i: int, k: int = K) -> float:
        t, l2 = self.t, self.l2
        dt = t[i + k] - t[i]
        return sum(l2[i + 1:i + k + 1]) * 8 / dt if dt > 0 else float("inf")

    def step(self, t_cmd: float, new: float) -> float | None:
        """First frame after the command from which K frames are spaced at the new rate (+-10 %)."""
        t = self.t
        i = next((j for j in range(len(t)) if t[j] >= t_cmd), None)
        while i is not None and i + K < len(t):
            if abs(self.rate(i) / new - 1) <= 0.10:
                return t[i] - t_cmd
            i += 1
        return None

    def mean_rate(self, a: float, b: float) -> float:
        t, l2 = self.t, self.l2
        idx = [j for j in range(len(t)) if a <= t[j] <= b]
        if len(idx) < 2:
            return 0
        return sum(l2[j] for j in idx[1:]) * 8 / (t[idx[-1]] - t[idx[0]])


def class_of(status: Json, cid: str) -> Json:
    c: Json = {c["class"]: c for c in status["classes"]}[cid]
    return c


def ms(x: float | None) -> float:
    return -1 if x is None else x * 1000


def change(argv: list[str]) -> None:
    cap_path, ipf, s0, s1 = argv[:4]
    t1, t1_end, t2, t2_end = (float(x) for x in argv[4:8])
    w1, w2 = (float(x) for x in argv[9:11])
    cap = Capture(cap_path)
    ip = load(ipf)
    retr = ip["end"]["sum_sent"].get("retransmits", 0)
    a, b = load(s0), load(s1)
    c0, c1 = class_of(a, "1:1"), class_of(b, "1:1")
    drops = sum(c1[k] - c0[k] for k in c1 if k.startswith("drop_"))
    ring = (b["daemon"] or {}).get("socket_ring_full", 0) - (a["daemon"] or {}).get("socket_ring_full", 0)
    passed = c1["tc_passed"] - c0["tc_passed"]
    stale = b["tc"]["pacer_dead"] - a["tc"]["pacer_dead"]  # passed because the heartbeat was stale
    handed = c1["tc_frames"] - c0["tc_frames"]  # wire frames TC handed to the pacer for 1:1
    # What arrived: the kernel's count of frames that matched the capture
    # filter on the receiving interface (the capture file may lack the last
    # ones if tcpdump stops before writing them; its drops are reported).
    captured_drops, received = 0, cap.delivered
    with open(argv[8]) as f:
        for line in f:
            if "dropped by kernel" in line:
                captured_drops = int(line.split()[0])
            if "received by filter" in line:
                received = int(line.split()[0])
    captured_drops += received - cap.delivered
    delivered = received
    s1_ms, s2_ms = cap.step(t1, 100e6), cap.step(t2, 300e6)
    # "Between" starts once the first command has returned (its write is in
    # force), not when it started: on a busy 2-core host starting the command
    # alone can take hundreds of ms, all of them still at 300 Mbit/s.
    # From the write: the daemon's reaction alone (-1 without strace).
    r1 = ms(s1_ms + t1 - w1) if w1 and s1_ms is not None else -1
    r2 = ms(s2_ms + t2 - w2) if w2 and s2_ms is not None else -1
    print(len(cap.t), handed - delivered, retr, drops, ring, passed, captured_drops,
          f"{ms(s1_ms):.1f}", f"{ms(s2_ms):.1f}", f"{(t1_end - t1) * 1000:.1f}", f"{(t2_end - t2) * 1000:.1f}",
          f"{r1:.1f}", f"{r2:.1f}",
          f"{cap.mean_rate(t1 - 0.6, t1 - 0.1) / 1e6:.1f}", f"{cap.mean_rate(t1_end + 0.3, t2 - 0.1) / 1e6:.1f}",
          f"{cap.mean_rate(t2 + 0.3, t2 + 0.9) / 1e6:.1f}", stale)


def reloads(s0: str, s1: str) -> bool:
    a, b = (int(load(f)["daemon"]["config_reloads"]) for f in (s0, s1))
    if b < a + 2:
        print(f"config_reloads {a} -> {b}", file=sys.stderr)
    return b >= a + 2


def drained(status: str) -> bool:
    c = [c for c in load(status)["classes"] if c["class"] == "1:2"]
    return not c or c[0]["backlog_frames"] == 0


def deleted(send: str, sink: str, statuses: list[str]) -> None:
    sent = load(send)["sent"]
    got = load(sink)["5002"]["datagrams"]
    backlog, counted = 0, 0
    for f in statuses:
        for c in load(f)["classes"]:
            if c["class"] != "1:2":
                continue
            backlog = max(backlog, c["backlog_frames"])
            counted = max(counted, sum(v for k, v in c.items() if k.startswith("drop_")))
    print(sent, got, counted, backlog)


def main(argv: list[str]) -> int:
    return subcommands(__doc__, argv, {
        "change": Sub(("PCAP", "IPERF3", "S0", "S1", "T1", "T1_END", "T2", "T2_END", "TCPDUMP_LOG", "W1", "W2"),
                      lambda *a: change(list(a))),
        "reloads": Sub(("S0", "S1"), lambda s0, s1: 0 if reloads(s0, s1) else 1),
        "drained": Sub(("STATUS",), lambda st: 0 if drained(st) else 1),
        "deleted": Sub(("SEND", "SINK", "STATUSES"), deleted, more=True),
    })


if __name__ == "__main__":
    sys.exit(main(sys.argv))
