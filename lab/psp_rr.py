"""A TCP request/response probe: a sparse flow for bench/run_flows.sh.

  psp_rr.py server ADDR PORT --seconds S
      echoes every SIZE-byte request on each connection, one connection
      after another, for at most S seconds
  psp_rr.py client ADDR PORT --seconds S [--size 100] [--interval-ms 10] --out FILE
      one persistent connection (Nagle off): a SIZE-byte request every
      interval, the next as soon as the reply is in if a transaction took
      longer (closed loop, as netperf's TCP_RR, but paced), for S seconds or
      until SIGTERM/SIGINT. FILE: one line per transaction, "SENT_S RTT_MS",
      SENT_S the request's send time (Unix seconds, the clock `date +%s.%N`
      and `ping -D` print), written as it completes (line buffered: a killed
      client leaves every finished transaction in FILE).

RTT_MS ends at the kernel's receive time of the reply (SO_TIMESTAMPNS, as
ping's), not when this process got the CPU back: on a loaded machine the
wake-up of a Python process is milliseconds of noise that is not the path's.

The connection is made before the first timed request, so a shaper's
queue delays the requests, not the handshake. Not Debian's sockperf: it
sends warm-up messages through the queue first and stamps its log on its
own clock, so its samples cannot be put in the interval the bulk flows ran.
"""
import argparse
import signal
import socket
import struct
import sys
import time
from types import FrameType

# asm-generic/socket.h (x86-64, arm64): Python's socket module does not name it.
SO_TIMESTAMPNS = 35
TIMESPEC = struct.Struct("qq")


class Stop(Exception):
    """SIGTERM or SIGINT: finish the way --seconds does."""


def on_signal(_sig: int, _frame: FrameType | None) -> None:
    raise Stop


def recv_exactly(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise ConnectionError("the peer closed the connection")
        data += chunk
    return data


def recv_stamped(conn: socket.socket, size: int) -> float | None:
    """Reads exactly size bytes; the kernel's receive time (Unix seconds) of the last of them."""
    got, stamp = 0, None
    while got < size:
        data, anc, _flags, _addr = conn.recvmsg(size - got, socket.CMSG_SPACE(TIMESPEC.size))
        if not data:
            raise ConnectionError("the peer closed the connection")
        got += len(data)
        for level, kind, raw in anc:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(raw) >= TIMESPEC.size:
                sec, nsec = TIMESPEC.unpack_from(raw)
                stamp = sec + nsec / 1e9
    return stamp


def serve(addr: str, port: int, size: int, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    with socket.create_server((addr, port), reuse_port=False) as srv:
        while (left := deadline - time.monotonic()) > 0:
            srv.settimeout(left)
            try:
                conn, _ = srv.accept()
            except TimeoutError:
                return
            with conn:
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                conn.settimeout(max(0.1, deadline - time.monotonic()))
                try:
                    while True:
                        conn.sendall(recv_exactly(conn, size))
                except (ConnectionError, TimeoutError):
                    pass  # the client is done (or gone): the next one


def probe(addr: str, port: int, size: int, interval_s: float, seconds: float, out: str) -> None:
    request = b"r" * size
    with socket.create_connection((addr, port), timeout=seconds + 30) as conn, \
            open(out, "w", buffering=1) as f:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        end = time.monotonic() + seconds
        due = time.monotonic()
        while due < end:
            time.sleep(max(0.0, due - time.monotonic()))
            sent, t0 = time.time(), time.perf_counter()
            conn.sendall(request)
            stamp = recv_stamped(conn, size)
            rtt_s = stamp - sent if stamp is not None else time.perf_counter() - t0
            f.write(f"{sent:.6f} {rtt_s * 1000:.4f}\n")
            # Paced, not bursting to catch up: a late transaction moves the schedule.
            due = max(due + interval_s, time.monotonic())


def main() -> None:
    p = argparse.ArgumentParser(prog="psp_rr.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("role", choices=("server", "client"))
    p.add_argument("addr")
    p.add_argument("port", type=int)
    p.add_argument("--seconds", type=float, required=True)
    p.add_argument("--size", type=int, default=100)
    p.add_argument("--interval-ms", type=float, default=10.0)
    p.add_argument("--out")
    a = p.parse_args()
    if not 0 < a.seconds <= 3600:
        p.error("--seconds: 0..3600")
    if not 1 <= a.size <= 65536:
        p.error("--size: 1..65536 bytes")
    if a.role == "client" and not a.out:
        p.error("client: --out FILE")
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        if a.role == "server":
            serve(a.addr, a.port, a.size, a.seconds)
        else:
            probe(a.addr, a.port, a.size, a.interval_ms / 1000, a.seconds, a.out)
    except Stop:
        pass
    except OSError as e:
        sys.exit(f"psp_rr.py {a.role}: {e}")


if __name__ == "__main__":
    main()
