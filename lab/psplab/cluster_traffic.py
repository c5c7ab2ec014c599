"""The cluster lab's TCP traffic: a sink behind the bottleneck and the hosts'
senders, run as `python3 -m psplab.cluster_traffic sink|send ...` inside the
lab's namespaces (one process per namespace: a socket lives in its
process's network namespace).

- sink: accepts TCP on one port (every receiver address of the receivers'
  namespace), discards what it reads, and counts it in bins of --bin-ms by
  source address (CLOCK_REALTIME, the one clock of every process of the lab);
  on SIGTERM or after --seconds it writes one JSON object.
- send: waits for --start-at (CLOCK_REALTIME), then either keeps one bulk
  flow per destination busy for --seconds (the §5.3 flows), or sends --bytes
  to every destination at once, each closing its half once written and done
  when the sink's close says every byte arrived (one all-to-all round:
  MPI_Alltoall's pattern). Writes one JSON object: start, end, bytes,
  errors; exit 1 when a destination failed (once the object is written).

Bounded: every socket has a timeout, every run --seconds (at most 600).
"""
import argparse
import json
import signal
import socket
import threading
import time
from dataclasses import asdict, dataclass, field
from types import FrameType

CHUNK = 256 * 1024
MAX_SECONDS = 600.0


@dataclass
class SinkReport:
    t0: float                                  # CLOCK_REALTIME of bin 0
    bin_s: float
    by_src: dict[str, list[int]] = field(default_factory=dict)  # bytes per bin
    total_by_src: dict[str, int] = field(default_factory=dict)
    connections: int = 0


@dataclass
class SendReport:
    start: float     # CLOCK_REALTIME
    end: float       # the last destination's last byte acknowledged (or --seconds)
    bytes_sent: int
    errors: list[str]


class Sink:
    def __init__(self, port: int, bin_s: float) -> None:
        self.report = SinkReport(t0=time.time(), bin_s=bin_s)
        self.lock = threading.Lock()
        self.srv = socket.create_server(("0.0.0.0", port), backlog=256, reuse_port=True)
        self.srv.settimeout(0.2)

    def count(self, src: str, n: int) -> None:
        b = int((time.time() - self.report.t0) / self.report.bin_s)
        with self.lock:
            bins = self.report.by_src.setdefault(src, [])
            if len(bins) <= b:
                bins.extend([0] * (b + 1 - len(bins)))
            bins[b] += n
            self.report.total_by_src[src] = self.report.total_by_src.get(src, 0) + n

    def serve_one(self, conn: socket.socket, src: str) -> None:
        buf = bytearray(CHUNK)
        with conn:
            conn.settimeout(MAX_SECONDS)
            try:
                while n := conn.recv_into(buf):
                    self.count(src, n)
            except OSError:
                pass

    def run(self, seconds: float, stop: threading.Event) -> SinkReport:
        deadline = time.monotonic() + seconds
        with self.srv:
            while not stop.is_set() and time.monotonic() < deadline:
                try:
                    conn, (addr, _) = self.srv.accept()
                except TimeoutError:
                    continue
                with self.lock:
                    self.report.connections += 1
                threading.Thread(target=self.serve_one, args=(conn, addr), daemon=True).start()
        with self.lock:
            return SinkReport(**asdict(self.report))


def send_one(dst: str, port: int, nbytes: int, until: float, out: list[int], errors: list[str]) -> None:
    """nbytes > 0: send that many and wait for the sink's close (all
    delivered); else send until `until` (monotonic)."""
    data = memoryview(bytes(CHUNK))
    sent = 0
    try:
        with socket.create_connection((dst, port), timeout=30) as s:
            s.settimeout(MAX_SECONDS)
            while (sent < nbytes) if nbytes else (time.monotonic() < until):
                n = min(CHUNK, nbytes - sent) if nbytes else CHUNK
                s.sendall(data[:n])
                sent += n
            s.shutdown(socket.SHUT_WR)
            while s.recv(4096):  # the sink closes once it read everything
                pass
    except OSError as e:
        errors.append(f"{dst}:{port}: {e}")
    out.append(sent)


def send(dsts: list[str], port: int, nbytes: int, seconds: float, start_at: float) -> SendReport:
    time.sleep(max(0.0, start_at - time.time()))
    start = time.time()
    until = time.monotonic() + seconds
    sent: list[int] = []
    errors: list[str] = []
    threads = [threading.Thread(target=send_one, args=(d, port, nbytes, until, sent, errors)) for d in dsts]
    for t in threads:
        t.start()
    for t in threads:
        t.join(MAX_SECONDS)
    return SendReport(start=start, end=time.time(), bytes_sent=sum(sent), errors=errors)


def main() -> int:
    ap = argparse.ArgumentParser(prog="python3 -m psplab.cluster_traffic")
    sub = ap.add_subparsers(dest="mode", required=True)
    s = sub.add_parser("sink")
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--seconds", type=float, default=60)
    s.add_argument("--bin-ms", type=float, default=100)
    s.add_argument("--out", required=True)
    t = sub.add_parser("send")
    t.add_argument("--to", required=True, help="comma-separated destination addresses")
    t.add_argument("--port", type=int, required=True)
    t.add_argument("--bytes", type=int, default=0, help="per destination; 0: bulk for --seconds")
    t.add_argument("--seconds", type=float, default=10)
    t.add_argument("--start-at", type=float, default=0.0, help="CLOCK_REALTIME to start at")
    t.add_argument("--out", required=True)
    a = ap.parse_args()
    if not 0 < a.seconds <= MAX_SECONDS:
        ap.error(f"--seconds {a.seconds}: expected 0..{MAX_SECONDS:g}")
    result: SinkReport | SendReport
    if a.mode == "sink":
        stop = threading.Event()

        def on_term(_sig: int, _f: FrameType | None) -> None:
            stop.set()
        signal.signal(signal.SIGTERM, on_term)
        signal.signal(signal.SIGINT, on_term)
        sink = Sink(a.port, a.bin_ms / 1000)
        print("listening", flush=True)
        result = sink.run(a.seconds, stop)
    else:
        result = send(a.to.split(","), a.port, a.bytes, a.seconds, a.start_at)
    with open(a.out, "w") as f:
        json.dump(asdict(result), f)
    return 1 if isinstance(result, SendReport) and result.errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
