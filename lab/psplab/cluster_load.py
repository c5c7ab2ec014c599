"""The cluster lab's load: the receivers' sink, the hosts' senders
(lab/psplab/cluster_traffic.py in each namespace) and the wire sampler
behind the per-second plots."""
import contextlib
import itertools
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from .cluster_hosts import HERE, SINK_PORT, Options
from .cluster_net import ClusterNet
from .net import became, load_json

# --- traffic -----------------------------------------------------------------

def traffic_cmd(*args: str | int | float) -> list[str]:
    return ["env", f"PYTHONPATH={HERE}", sys.executable, "-m", "psplab.cluster_traffic", *map(str, args)]


@contextlib.contextmanager
def sink(net: ClusterNet, opt: Options, tag: str, seconds: float) -> Iterator[str]:
    """The receivers' sink for the duration; yields its report's path (read
    once the block ends)."""
    path = os.path.join(opt.work, f"{tag}.sink.json")
    log = path + ".log"
    p = net.spawn(net.d.cmd("nice", "-n", "-10", *traffic_cmd("sink", "--port", SINK_PORT, "--seconds",
                                                              seconds, "--out", path)), out_path=log)
    became(lambda: Path(log).exists() and "listening" in Path(log).read_text(), 5)
    try:
        yield path
    finally:
        p.send_signal(signal.SIGTERM)
        net.reap(p, 10)


class WireSampler:
    """Every host's wire bytes (ClusterNet.wire_bytes) 4 times a second, with
    the time each was read: the per-second rates of the plots. The sink's
    bins would show when a starved sink got to read, not when the data came."""

    def __init__(self, net: ClusterNet) -> None:
        self.net = net
        self.samples: list[tuple[float, list[int]]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        while not self.stop.is_set():
            before = time.time()
            counts = self.net.wire_bytes()
            self.samples.append(((before + time.time()) / 2, counts))
            self.stop.wait(0.25)

    def __enter__(self) -> "WireSampler":
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        self.thread.join(5)

    def per_second(self, host: int, t_start: float, seconds: int) -> list[float]:
        """bit/s each second from t_start, the counter interpolated in time."""
        pts = [(t, b[host]) for t, b in self.samples]

        def at(t: float) -> float:
            if not pts:
                return 0.0
            if t <= pts[0][0]:
                return float(pts[0][1])
            for (ta, ba), (tb, bb) in itertools.pairwise(pts):
                if ta <= t <= tb:
                    return ba + (bb - ba) * (t - ta) / max(tb - ta, 1e-9)
            return float(pts[-1][1])
        return [(at(t_start + s + 1) - at(t_start + s)) * 8 for s in range(seconds)]


def senders(net: ClusterNet, opt: Options, tag: str, jobs: Sequence[tuple[int, list[str], int, float, float]],
            timeout: float) -> list[dict[str, Any]]:
    """jobs: (host, destinations, bytes per destination or 0, seconds,
    start_at); runs them all, returns their reports in order."""
    procs = []
    for k, (host, dsts, nbytes, seconds, start_at) in enumerate(jobs):
        path = os.path.join(opt.work, f"{tag}.send{k}.json")
        cmd = net.hosts[host].cmd("nice", "-n", "-10", *traffic_cmd(
            "send", "--to", ",".join(dsts), "--port", SINK_PORT, "--bytes", nbytes, "--seconds", seconds,
            "--start-at", f"{start_at:.6f}", "--out", path))
        procs.append((net.spawn(cmd, err_path=path + ".err"), path))
    for p, _ in procs:
        net.reap(p, timeout)
    return [load_json(path) for _, path in procs]
