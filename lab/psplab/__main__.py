"""The pspxdp lab driver: `python3 -m psplab` with lab/ on PYTHONPATH, as
lab/lab.sh runs it. See lab/lab.sh --help."""
import argparse
import dataclasses
import json
import os
import shlex
import shutil
import sys
import tempfile
import time
from pathlib import Path

from . import cluster, experiments, report
from .cli import Parser, guarded, number_in, rate
from .context import RunContext
from .net import Lab
from .units import parse_rate_bps

HERE = Path(__file__).resolve().parent.parent  # lab/


def experiment_list(text: str) -> list[str]:
    names = text.split(",")
    for n in names:
        if n not in experiments.ALL:
            raise argparse.ArgumentTypeError(f'unknown experiment "{n}" ({", ".join(experiments.ALL)})')
    return names


def parse_args() -> argparse.Namespace:
    ap = Parser(prog="lab/lab.sh", description=(
        "pspxdp beside tbf, htb and no shaping, on one veth wire between network namespaces. "
        "Default: the quick set (side by side; TCP through the bottleneck at two FIFO sizes). "
        "--full: every experiment (rate sweep, five classes, 96 flows, side by side, TCP at five "
        "FIFO sizes). Tables on stdout, results (CSV, PNG, README.md with the machine and the "
        "command) under --out/<date>-<what>/."))
    ap.add_argument("--full", action="store_true", help="run every experiment, longer")
    ap.add_argument("--only", type=experiment_list,
                    help="comma-separated experiments: " + ",".join(experiments.ALL))
    ap.add_argument("--line-rate", type=rate, default="1gbit", help="the wire's rate M (default 1gbit)")
    ap.add_argument("--bottleneck", type=rate, default="500mbit",
                    help="the bottleneck's rate B < M (default 500mbit)")
    ap.add_argument("--delay-ms", type=number_in(float, 10.0, 100.0), default=20.0,
                    help="one-way delay added to the return path, 10..100 (default 20: RTT >= 20 ms)")
    ap.add_argument("--seconds", type=number_in(float, 1.0, 60.0), default=None,
                    help="capture length per UDP run (default 2; --full 5)")
    ap.add_argument("--tcp-seconds", type=number_in(int, 1, 600), default=None,
                    help="iperf3 length (default 4; --full 10)")
    ap.add_argument("--daemon-rt", type=number_in(int, 0, 99), default=0, metavar="PRIO",
                    help="run pspxdp's daemon SCHED_FIFO at PRIO (default 0: as attach schedules it, "
                    "SCHED_DEADLINE, what users get)")
    # A run is scratch unless published: the committed results the README
    # cites stay as they are (a quick run would overwrite a full one).
    where = ap.add_mutually_exclusive_group()
    where.add_argument("--out", help="results root (default $BUILD_DIR/results, build/results)")
    where.add_argument("--publish", action="store_true",
                       help="write the results under docs/results, the ones the README cites")
    ap.add_argument("--json", action="store_true", help="print every row as one JSON object on stdout "
                    "(tables go to stderr)")
    ap.add_argument("--keep", help="keep the raw files (captures, logs, reports) in this directory")
    ap.add_argument("--check-args", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if not parse_rate_bps(a.bottleneck) < parse_rate_bps(a.line_rate):
        ap.error(f"--bottleneck {a.bottleneck} must be below --line-rate {a.line_rate}")
    return a


def to_json(o: object) -> object:
    if dataclasses.is_dataclass(o) and not isinstance(o, type):
        return dataclasses.asdict(o)
    return str(o)


def main() -> int:
    if sys.argv[1:2] == ["cluster"]:  # the cluster lab: its own options (lab/psplab/cluster.py)
        return cluster.main(sys.argv[2:])
    a = parse_args()
    if a.check_args:  # lab.sh: arguments first, then the prerequisites
        return 0
    build = os.environ.get("BUILD_DIR") or str(HERE.parent / "build")
    t0 = time.monotonic()

    def progress(msg: str) -> None:
        print(f"[{time.monotonic() - t0:6.1f}s] {msg} ...", file=sys.stderr, flush=True)

    command = "lab/lab.sh " + " ".join(shlex.quote(x) for x in sys.argv[1:])
    lab = Lab(os.path.abspath(build))
    out = os.path.abspath(a.out or (str(HERE.parent / "docs" / "results") if a.publish
                                    else f"{build}/results"))
    ctx = RunContext(
        full=a.full,
        seconds=a.seconds if a.seconds is not None else (5.0 if a.full else 2.0),
        tcp_seconds=a.tcp_seconds if a.tcp_seconds is not None else (10 if a.full else 4),
        line_rate=a.line_rate, bottleneck=a.bottleneck, delay_ms=a.delay_ms, daemon_rt=a.daemon_rt,
        pspxdp=os.environ.get("PSPXDP") or f"{build}/user/pspxdp",
        traffic=f"{build}/lab/psp_traffic",
        out=out,
        started=report.now(),
        command=command,
        keep_pcaps=bool(a.keep),
        lab=lab,
        work=tempfile.mkdtemp(prefix="psp-lab."),
        progress=progress,
        summary={"line_rate": a.line_rate, "command": command, "out": out},
    )
    names = a.only or (experiments.FULL if a.full else experiments.QUICK)

    real_stdout = sys.stdout
    if a.json:  # tables to stderr, the JSON alone on stdout
        sys.stdout = sys.stderr

    def body() -> None:
        progress(f"building the topology (namespaces {lab.tag}-s/r/d/l)")
        lab.build_topology()
        for n in names:
            experiments.ALL[n](ctx)

    def cleanup() -> None:
        lab.teardown()
        if a.keep:
            shutil.copytree(ctx.work, a.keep, symlinks=True, dirs_exist_ok=True)
        shutil.rmtree(ctx.work, ignore_errors=True)

    # Bounded in time whatever happens (the full set takes ~15 minutes).
    rc = guarded("lab", body, cleanup, 3600 if a.full else 900)
    print(f"lab: {'done' if rc == 0 else 'incomplete'} in {time.monotonic() - t0:.0f} s; results under "
          f"{ctx.out}", file=sys.stderr)
    if a.json:
        real_stdout.write(json.dumps(ctx.summary, default=to_json) + "\n")
    return rc


if __name__ == "__main__":
    sys.exit(main())
