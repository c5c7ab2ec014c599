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
    cmd, a = (argv[1], argv[2:]) if len(argv) > 1 else ("", [])
    if cmd == "recv" and len(a) in (2, 3):
        recv(int(a[0]), float(a[1]), a[2] if len(a) == 3 else None)
    elif cmd == "send" and len(a) in (4, 5, 6):
        send(a[0], int(a[1]), int(a[2]), int(a[3]), float(a[4]) if len(a) > 4 else 0.0,
             int(a[5], 0) if len(a) == 6 else 0)
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
