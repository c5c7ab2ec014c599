"""The cluster lab (docs/design.md §11.9): the paper's cluster experiments,
N hosts sharing one bottleneck, side by side.

    python3 -m psplab cluster [--quick] [--only pair,alltoall,scale] [--publish]

- pair: paper §5.3, 2-to-2: two hosts' TCP flows at 200 Mbit/s each through
  B = 500 Mbit/s with a 32 KB FIFO, the second starting 5 s after the first;
  pspxdp+pspxdp, tbf+tbf and the two mixes: rates per second, totals,
  bottleneck drops.
- alltoall: MPI_Alltoall's pattern (the paper's ref. 7, NAS IS): N hosts each
  send X MB to every other host's receiver through the bottleneck, repeated:
  completion time per round and bottleneck drops for no shaping, tbf at B/N
  per host and pspxdp at B/N per host.
- uneven: phase A, 3 hosts in one pspxdp group (budget 300 Mbit/s) offered
  UDP at 250/150/20 Mbit/s, then 160/120/20: each host's frames captured
  at R's ingress and summed per 0.1 s against weighted max-min, the time to
  within 5 %, `pspxdp group check`, etcd writes per host per second.
- scale: a 1,000-host estimate from the cluster simulation (lab/psp_cluster_scale).

pspxdp runs on each host's veth in its clockless mode (`--clock none`):
frames leave at their real-time due times, with no gap frames; on a veth
that is the real-time mode (there is no NIC whose byte clock could be
judged). Every figure here is real time on a 2-core VM shared with other
work: the tables print them, the tests (tests/lab/test_cluster_lab.sh)
assert only what is deterministic.

Results: tables on stdout; CSV, PNG and README.md under a scratch directory
(printed) unless --publish (docs/results/cluster-*/) or --out DIR.
"""
import argparse
import datetime
import json
import os
import shlex
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict

from . import report
from .cli import Parser, guarded, number_in, rate
from .cluster_experiments import alltoall, dynamic, pair, scale, uneven
from .cluster_hosts import HERE, Options
from .cluster_net import ClusterNet
from .units import parse_rate_bps

NETWORK = {"pair": pair, "alltoall": alltoall, "dynamic": dynamic, "uneven": uneven}
ALL = [*NETWORK, "scale"]
DEFAULT = [x for x in ALL if x != "uneven"]  # uneven: with --only


# --- the command --------------------------------------------------------------------

def parse(argv: Sequence[str], started: datetime.datetime) -> argparse.Namespace:
    ap = Parser(prog="python3 -m psplab cluster", description=(
        "The paper's cluster experiments: N hosts (network namespaces), each paced by its own pspxdp or "
        "shaped by tbf, through one drop-tail bottleneck. Tables on stdout; CSV, plots and README.md under "
        "a scratch directory unless --publish (docs/results/cluster-*/) or --out."))
    ap.add_argument("--quick", action="store_true", help="the CI form: shorter runs, fewer rounds (< 3 min)")
    ap.add_argument("--only", help="comma-separated: " + ",".join(ALL) + " (default: all but uneven)")
    ap.add_argument("--hosts", type=number_in(int, 4, 8), default=4, help="all-to-all hosts (4..8, default 4)")
    ap.add_argument("--line-rate", type=rate, default="1gbit", help="each host's NIC (default 1gbit)")
    ap.add_argument("--bottleneck", type=rate, default="500mbit", help="B (default 500mbit)")
    ap.add_argument("--fifo", type=number_in(int, 4096, 64 << 20), default=32 << 10,
                    help="the bottleneck FIFO in bytes (default 32768)")
    ap.add_argument("--window", type=number_in(int, 1514, 64 << 20), metavar="BYTES",
                    help="pspxdp attach --window (how far a pacer's schedule may run ahead of real time; "
                         "default half the FIFO)")
    ap.add_argument("--ce-threshold", metavar="TIME",
                    help="pspxdp's classes mark CE past TIME of sojourn (default: pspxdp's, 4ms); a CUBIC "
                         "sender (cut to 0.7) keeps its rate if TIME >= 0.43 x RTT")
    ap.add_argument("--budget", type=rate, help="the pspxdp group's budget (default: B; below B leaves the "
                    "pacers' real-time jitter room in the FIFO)")
    ap.add_argument("--delay-ms", type=number_in(float, 10.0, 100.0), default=20.0,
                    help="one-way delay of the ACKs' path (default 20: RTT >= 20 ms)")
    ap.add_argument("--daemon-rt", type=number_in(int, 0, 99), default=0, metavar="PRIO",
                    help="pspxdp's daemons SCHED_FIFO at PRIO (default 0: as attach schedules them, "
                    "SCHED_DEADLINE)")
    ap.add_argument("--capture", action="store_true",
                    help="pair: capture (tcpdump in R) each host's arrivals at the bottleneck and the tbf's "
                         "departures, replay them through an ideal FIFO and print where the drops come from")
    ap.add_argument("--publish", action="store_true", help="write the results to docs/results/cluster-*/")
    ap.add_argument("--out", help="results root (default: a new scratch directory under /tmp)")
    ap.add_argument("--json", action="store_true", help="every row as one JSON object on stdout")
    a = ap.parse_args(argv)
    if a.only:
        for x in a.only.split(","):
            if x not in ALL:
                ap.error(f'--only: unknown experiment "{x}" ({", ".join(ALL)})')
    if a.publish and a.out:
        ap.error("--publish and --out: give one")
    if a.budget and parse_rate_bps(a.budget) > parse_rate_bps(a.bottleneck):
        ap.error(f"--budget {a.budget} must be at most --bottleneck {a.bottleneck}")
    if not parse_rate_bps(a.bottleneck) < parse_rate_bps(a.line_rate):
        ap.error(f"--bottleneck {a.bottleneck} must be below --line-rate {a.line_rate}")
    return a


def main(argv: Sequence[str]) -> int:
    started = report.now()
    a = parse(argv, started)
    build = os.environ.get("BUILD_DIR") or str(HERE.parent / "build")
    t0 = time.monotonic()

    def progress(msg: str) -> None:
        print(f"[{time.monotonic() - t0:6.1f}s] {msg} ...", file=sys.stderr, flush=True)

    out = (str(HERE.parent / "docs" / "results") if a.publish else
           a.out or tempfile.mkdtemp(prefix="psp-cluster-results."))
    names = a.only.split(",") if a.only else DEFAULT
    opt = Options(quick=a.quick, hosts=a.hosts, line_rate=a.line_rate, bottleneck=a.bottleneck,
                  fifo_bytes=a.fifo, delay_ms=a.delay_ms, daemon_rt=a.daemon_rt, build=os.path.abspath(build),
                  out=os.path.abspath(out), command="python3 -m psplab cluster " + " ".join(map(shlex.quote, argv)),
                  started=started, work=tempfile.mkdtemp(prefix="psp-cluster."), progress=progress,
                  budget=a.budget, ce_threshold=a.ce_threshold, window=a.window,
                  capture=a.capture)
    real_stdout = sys.stdout
    if a.json:
        sys.stdout = sys.stderr

    net = ClusterNet(opt.build, max(opt.hosts, 2)) if any(x in NETWORK for x in names) else None

    def body() -> None:
        if net:
            progress(f"building the topology ({net.n} hosts, namespaces {net.tag}-*)")
            net.build_topology()
            net.start_delay(opt.delay_ms, 1700, os.path.join(opt.work, "delay.json"))
        for x in names:
            if x in NETWORK:
                assert net
                NETWORK[x](net, opt)
            else:
                scale(net, opt)

    def cleanup() -> None:
        if net:
            opt.summary["delay_line"] = net.stop_delay()
            net.teardown()
        if os.environ.get("PSP_KEEP"):  # as lab/netns.sh: kept for a look at what went wrong
            print(f"cluster lab: kept {opt.work}", file=sys.stderr)
        else:
            shutil.rmtree(opt.work, ignore_errors=True)

    rc = guarded("cluster lab", body, cleanup, 600 if a.quick else 1800)
    print(f"cluster lab: {'done' if rc == 0 else 'incomplete'} in {time.monotonic() - t0:.0f} s; results "
          f"under {opt.out}", file=sys.stderr)
    if a.json:
        real_stdout.write(json.dumps(opt.summary, default=lambda o: asdict(o)) + "\n")
    return rc
