#!/usr/bin/env python3
"""A UDP receiver and sender for the lab tests (test_pacer_e2e,
test_safety_device, test_lab_resilience, test_senders).

  udp.py recv PORT SECONDS [ARRIVALS]
      receives on PORT for SECONDS (8 MiB of socket buffer); prints the
      datagrams received and their L2 rate in bit/s (frames with FCS, first
      to last arrival; 0 under three datagrams); ARRIVALS: one
      "MONOTONIC_TIME LENGTH" line per datagram
  udp.py send ADDR PORT COUNT SIZE [GAP_SECONDS [PRIORITY]]
      COUNT datagrams of SIZE bytes, GAP_SECONDS apart (default 0), from a
      socket of SO_PRIORITY PRIORITY (e.g. 0x10007; default: not set)
"""
import socket
import sys
import time

from psplab.cli import Sub, subcommands


def l2_bits(length: int) -> int:
    """A datagram's frame on the wire as a class rate counts it: L2 with FCS."""
    return (max(length + 42, 60) + 4) * 8


def recv(port: int, seconds: float, arrivals: str | None) -> None:
    got: list[tuple[float, int]] = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        s.bind(("0.0.0.0", port))
        s.settimeout(0.2)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            try:
                n = len(s.recv(65536))
            except TimeoutError:
                continue
            got.append((time.monotonic(), n))
    if arrivals:
        with open(arrivals, "w") as f:
            f.writelines(f"{t:.6f} {n}\n" for t, n in got)
    rate = 0
    if len(got) > 2:
        rate = int(sum(l2_bits(n) for _, n in got[1:]) / (got[-1][0] - got[0][0]))
    print(len(got), rate)


def send(addr: str, port: int, count: int, size: int, gap_s: float, priority: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        if priority:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_PRIORITY, priority)
        for _ in range(count):
            s.sendto(b"x" * size, (addr, port))
            if gap_s:
                time.sleep(gap_s)  # traffic, not a wait


def main(argv: list[str]) -> int:
    return subcommands(__doc__, argv, {
        "recv": Sub(("PORT", "SECONDS", "ARRIVALS"), lambda port, s, arr=None: recv(int(port), float(s), arr),
                    optional=1),
        "send": Sub(("ADDR", "PORT", "COUNT", "SIZE", "GAP_S", "PRIORITY"),
                    lambda addr, port, count, size, gap="0", prio="0": send(addr, int(port), int(count), int(size),
                                                                          float(gap), int(prio, 0)),
                    optional=2),
    })


if __name__ == "__main__":
    sys.exit(main(sys.argv))
