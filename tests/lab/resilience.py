#!/usr/bin/env python3
"""test_lab_resilience's Python: JSON fields, the clock and the kill, and the
figures of the TCP and kill runs (its UDP receiver is udp.py).

  resilience.py class STATUS CLASSID KEY     the class's KEY in a status -j
  resilience.py tc STATUS KEY                status -j's tc KEY
  resilience.py kept STATUS                  exit 0 if 1:1 runs at 200 Mbit/s
      and 1:2 at 5 Mbit/s (the classes kept across a crash)
  resilience.py now                          CLOCK_MONOTONIC, seconds
  resilience.py kill PID                     SIGKILLs PID, prints when (monotonic)
  resilience.py ms T0 T1                     (T1 - T0) in ms
  resilience.py tcp IPERF3 T0 T1 L0 L1 RATE_BPS
      one line: goodput, L2 rate, class drops, frames, retransmits, ring full,
      TC passed, TC errors, XDP no socket, pacer veth drops, mean RTT, stale
  resilience.py arrivals ARRIVALS T_KILL T_REATTACH T_REATTACHED RATE_BPS
      one line: the largest arrival gap and when the stream was back (ms),
      the L2 rates paced before the kill, unpaced after it, paced after the
      re-attach, and the datagrams received
"""
import itertools
import os
import signal
import sys
import time
from typing import Any

from udp import l2_bits
from verdict import Json, load

from psplab.cli import Sub, subcommands


def class_of(status: Json, cid: str) -> Json:
    c: Json = next(c for c in status["classes"] if c["class"] == cid)
    return c


def kept(path: str) -> bool:
    d = load(path)
    c = {c["class"]: c for c in d["classes"] if c["kind"] in ("paced", "normal")}
    ok = c["1:1"]["rate_bps"] == 200000000 and c["1:2"]["rate_bps"] == 5000000
    if not ok:
        print(c, file=sys.stderr)
    return bool(ok)


def drops_of(c: Json) -> int:
    return sum(v for k, v in c.items() if k.startswith("drop_"))


def tcp(ip: Json, t0: Json, t1: Json, l0: list[Json], l1: list[Json]) -> str:
    recv_bps = ip["end"]["sum_received"]["bits_per_second"]
    retr = ip["end"]["sum_sent"].get("retransmits", 0)
    mss = 1448  # TCP payload per 1514-byte frame (timestamps on)
    # The class rate counts L2 bytes + FCS: a full frame is 1518 B for 1448 B of
    # payload, so goodput at exactly the class rate is rate * 1448 / 1518.
    l2 = recv_bps * 1518 / mss
    c0, c1 = class_of(t0, "1:1"), class_of(t1, "1:1")
    drops = drops_of(c1) - drops_of(c0)
    frames = c1["tx_frames"] - c0["tx_frames"]
    kern = (t1["daemon"] or {}).get("socket_ring_full", 0) - (t0["daemon"] or {}).get("socket_ring_full", 0)
    passed = c1["tc_passed"] - c0["tc_passed"]  # went around the pacer (fail-open)

    def d(part: str, k: str) -> Any:
        return t1[part][k] - t0[part][k]
    tc_err = d("tc", "redirect_err") + d("tc", "no_slot")
    stale = d("tc", "pacer_dead")  # passed because the heartbeat was stale
    xdp_nosock = d("xdp", "no_socket")

    # Drops between TC and the sockets, counted by the kernel on the pacer veths.
    def veth_drops(links: list[Json]) -> int:
        a, b = t1["pacer_veth"]
        st = {link["ifname"]: link["stats64"] for link in links}
        return int(st[a]["tx"]["dropped"] + st[b]["rx"]["dropped"]) if a in st and b in st else 0
    veth = veth_drops(l1) - veth_drops(l0)
    rtt = ip["end"]["streams"][0]["sender"].get("mean_rtt", 0) / 1000  # ms: TCP's view of the queue
    return (f"{recv_bps:.0f} {l2:.0f} {drops} {frames} {retr} {kern} {passed} {tc_err} {xdp_nosock} {veth} "
            f"{rtt:.1f} {stale}")


def arrivals(path: str, kill: float, re0: float, re1: float) -> str:
    with open(path) as f:
        rows = [line.split() for line in f]
    ts = [float(t) for t, _ in rows]
    ln = [int(n) for _, n in rows]

    def l2_bps(a: float, b: float) -> float:  # L2 bits (+FCS, as the class counts them) arriving in [a, b)
        bits = sum(l2_bits(n) for t, n in zip(ts, ln, strict=True) if a <= t < b)
        return bits / (b - a)
    # The largest arrival gap from 0.5 s before the kill to 1.5 s after it, and
    # when the stream was back: the first arrival after that gap.
    win = [t for t in ts if kill - 0.5 <= t <= kill + 1.5]
    gap, resumed = 0.0, None
    for a, b in itertools.pairwise(win):
        if b - a > gap:
            gap, resumed = b - a, b
    after_kill = [t for t in ts if t > kill]
    first_after = after_kill[0] - kill if after_kill else 99
    resume_ms = (resumed - kill) * 1000 if resumed and resumed > kill else first_after * 1000
    paced_before = l2_bps(kill - 1.2, kill - 0.2)
    unpaced = l2_bps(kill + 0.5, min(kill + 1.5, re0))
    paced_after = l2_bps(re1 + 0.5, re1 + 2.5)
    return f"{gap*1000:.1f} {resume_ms:.1f} {paced_before:.0f} {unpaced:.0f} {paced_after:.0f} {len(ts)}"


def kill(pid: str) -> None:
    t = time.monotonic()
    os.kill(int(pid), signal.SIGKILL)
    print(f"{t:.6f}")


def main(argv: list[str]) -> int:
    return subcommands(__doc__, argv, {
        "class": Sub(("STATUS", "CLASS", "FIELD"), lambda st, cid, field: print(class_of(load(st), cid)[field])),
        "tc": Sub(("STATUS", "FIELD"), lambda st, field: print(load(st)["tc"][field])),
        "kept": Sub(("STATUS",), lambda st: 0 if kept(st) else 1),
        "now": Sub((), lambda: print(f"{time.monotonic():.6f}")),
        "kill": Sub(("PID",), kill),
        "ms": Sub(("T0", "T1"), lambda t0, t1: print(f"{(float(t1) - float(t0)) * 1000:.0f}")),
        "tcp": Sub(("IPERF3", "T0", "T1", "L0", "L1"),
                   lambda *files: print(tcp(*(load(f) for f in files)))),
        "arrivals": Sub(("ARRIVALS", "T_KILL", "T_REATTACH", "T_REATTACHED"),
                        lambda path, k, r0, r1: print(arrivals(path, float(k), float(r0), float(r1)))),
    })


if __name__ == "__main__":
    sys.exit(main(sys.argv))
