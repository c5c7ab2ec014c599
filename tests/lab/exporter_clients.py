#!/usr/bin/env python3
"""Slow, idle and greedy clients against `pspxdp exporter` (run by
tests/lab/test_exporter.sh inside the lab's namespace), while scrapes must
answer. Prints "ok   - WHAT" / "FAIL - WHAT" lines (psp_verdict counts them).

  exporter_clients.py HOST PORT DEV

The held connections: idle (connected, nothing sent), half a request,
trickling (one byte every 300 ms), keep-alive (one request answered, the
connection kept open). With all of them open, every scrape answers within
SCRAPE_BOUND_S: the exporter serves connections side by side. Then the
exporter closes each held connection by its request deadline (3 s; judged
with a generous CLOSE_BOUND_S), and a flood past its connection cap is
answered 503 at once while the scrapes come back once the flood goes.
Every wait is a condition polled against a deadline; nothing sleeps for a
fixed time.
"""

import socket
import sys
import threading
import time
from dataclasses import dataclass, field

from psplab.net import became

SCRAPE_BOUND_S = 1.0  # a scrape while clients hold connections: answered within this
CLOSE_BOUND_S = 10.0  # the exporter closes a held connection within this (its rule: 3 s)
MAX_CONNECTIONS = 32  # the exporter's cap (cmd_exporter.cpp kMaxConnections)
REQUEST = b"GET /metrics HTTP/1.1\r\nHost: lab\r\n\r\n"
TRICKLE_EVERY_S = 0.3

FAILS = 0


def check(what: str, ok: bool, detail: str = "") -> bool:
    global FAILS
    print(("ok   - " if ok else "FAIL - ") + what)
    if not ok:
        FAILS += 1
        if detail:
            print(f"     {detail}")
    return ok


@dataclass
class Held:
    """A connection a client holds open: its kind, socket and what it read."""

    kind: str
    sock: socket.socket
    got: bytes = b""
    closed_after_s: float | None = None
    sent: int = 0
    opened: float = field(default_factory=time.monotonic)

    def is_open(self) -> bool:
        """Reads what has arrived; notes when the exporter closed it."""
        if self.closed_after_s is not None:
            return False
        try:
            while True:
                data = self.sock.recv(65536)
                if not data:
                    break
                self.got += data
        except BlockingIOError:
            return True
        except OSError:  # reset
            pass
        self.closed_after_s = time.monotonic() - self.opened
        return False


def connect(host: str, port: int, kind: str) -> Held:
    s = socket.create_connection((host, port), timeout=CLOSE_BOUND_S)
    h = Held(kind, s)
    if kind == "half":
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: la")
    elif kind == "keep-alive":
        s.sendall(REQUEST)  # HTTP/1.1: keep-alive unless closed
    s.setblocking(False)
    return h


def scrape(host: str, port: int, dev: str) -> str:
    """One GET /metrics within SCRAPE_BOUND_S: "" if answered 200 with DEV's
    pspxdp_pacer_alive, else what went wrong."""
    deadline = time.monotonic() + SCRAPE_BOUND_S
    try:
        with socket.create_connection((host, port), timeout=SCRAPE_BOUND_S) as s:
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: lab\r\nConnection: close\r\n\r\n")
            got = b""
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    return f"no whole answer within {SCRAPE_BOUND_S} s ({len(got)} bytes)"
                s.settimeout(left)
                data = s.recv(65536)
                if not data:
                    break
                got += data
    except OSError as e:
        return f"{type(e).__name__}: {e}"
    head = got.split(b"\r\n", 1)[0].decode(errors="replace")
    if not head.startswith("HTTP/1.1 200"):
        return f"answered {head!r}"
    if f'pspxdp_pacer_alive{{dev="{dev}"}}'.encode() not in got:
        return "answered 200 without pspxdp_pacer_alive"
    return ""


def trickle(held: list[Held], stop: threading.Event) -> None:
    """One byte of a request every TRICKLE_EVERY_S to each trickling client
    until the exporter closes it or stop is set."""
    while not stop.wait(TRICKLE_EVERY_S):
        for h in held:
            if h.kind != "trickle" or h.closed_after_s is not None or h.sent >= len(REQUEST):
                continue
            try:
                h.sock.send(REQUEST[h.sent : h.sent + 1])
                h.sent += 1
            except OSError:
                pass  # closed: is_open() notes it


def main() -> int:
    host, port, dev = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    check("a scrape answers with nothing else connected", scrape(host, port, dev) == "")

    kinds = ["idle"] * 8 + ["half"] * 4 + ["trickle"] * 4 + ["keep-alive"] * 4
    held = [connect(host, port, k) for k in kinds]
    stop = threading.Event()
    trickler = threading.Thread(target=trickle, args=(held, stop))
    trickler.start()
    try:
        keep = [h for h in held if h.kind == "keep-alive"]

        def keep_answered() -> bool:
            for h in keep:
                h.is_open()  # reads what arrived
            return all(h.got.startswith(b"HTTP/1.1 200") for h in keep)

        answered = became(keep_answered, SCRAPE_BOUND_S, every_s=0.02)
        check("the keep-alive clients got their answers", answered)
        for i in range(5):
            why = scrape(host, port, dev)
            open_now = sum(1 for h in held if h.is_open())
            check(
                f"scrape {i + 1} answers within {SCRAPE_BOUND_S} s while {len(held)} clients "
                f"hold connections (8 idle, 4 half a request, 4 trickling, 4 keep-alive; "
                f"{open_now} still open)",
                why == "",
                why,
            )

        def all_closed() -> bool:
            return sum(h.is_open() for h in held) == 0  # every one read

        closed = became(all_closed, CLOSE_BOUND_S, every_s=0.02)
        late = [f"{h.kind} open" for h in held if h.closed_after_s is None]
        check(
            f"the exporter closed every held connection within {CLOSE_BOUND_S:.0f} s "
            f"(latest after {max((h.closed_after_s or 0) for h in held):.1f} s)",
            closed,
            ", ".join(late),
        )
        latest = {k: max((h.closed_after_s or 0) for h in held if h.kind == k) for k in dict.fromkeys(kinds)}
        print("     closed at the latest after: " + ", ".join(f"{k} {t:.1f} s" for k, t in latest.items()))
        half = [h for h in held if h.kind == "half"]
        check(
            "... half a request answered 400",
            all(h.got.startswith(b"HTTP/1.1 400") for h in half),
            repr([h.got[:40] for h in half]),
        )
    finally:
        stop.set()
        trickler.join()
        for h in held:
            h.sock.close()

    # A flood past the cap: the connections beyond it are answered 503 and
    # closed at once; the ones within are held until closed here.
    flood = [connect(host, port, "idle") for _ in range(MAX_CONNECTIONS + 8)]
    try:

        def refused_enough() -> bool:
            return sum(1 for h in flood if not h.is_open()) >= 8

        ok = became(refused_enough, SCRAPE_BOUND_S, every_s=0.02)
        refused = [h for h in flood if h.closed_after_s is not None]
        check(
            f"{len(flood)} connections at once: those past the cap of {MAX_CONNECTIONS} "
            f"closed at once ({len(refused)} closed)",
            ok,
        )
        check(
            "... answered 503 too many connections",
            bool(refused) and all(b" 503 " in h.got.split(b"\r\n", 1)[0] for h in refused),
            repr([h.got[:40] for h in refused[:3]]),
        )
    finally:
        for h in flood:
            h.sock.close()
    # The exporter sees the flood's connections end at once (EOF), freeing
    # its threads: scrapes answer again.
    back = became(lambda: scrape(host, port, dev) == "", CLOSE_BOUND_S, every_s=0.02)
    check("once the flood is gone, scrapes answer again", back)
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
