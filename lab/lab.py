"""The pspxdp lab driver (run it through lab/lab.sh). See lab/lab.sh --help."""
import argparse
import json
import os
import shlex
import signal
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no __pycache__ left in the checkout (run as root)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from psplab import experiments, report  # noqa: E402
from psplab.net import Lab  # noqa: E402
from psplab.shapers import rate_bps  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


class Ctx:
    pass


class Parser(argparse.ArgumentParser):
    def error(self, message):  # one line naming the offending word, exit 2
        print(f"lab: {message}", file=sys.stderr)
        sys.exit(2)


def main():
    ap = Parser(prog="lab/lab.sh", description=(
        "pspxdp beside tbf, htb and no shaping, on one veth wire between network namespaces. "
        "Default: the quick set (side by side; TCP through the bottleneck at two FIFO sizes). "
        "--full: every experiment (rate sweep, five classes, 96 flows, side by side, TCP at five "
        "FIFO sizes). Tables on stdout, results (CSV, PNG, README.md with the machine and the "
        "command) under --out/<date>-<what>/."))
    ap.add_argument("--full", action="store_true", help="run every experiment, longer")
    ap.add_argument("--only", help="comma-separated experiments: " + ",".join(experiments.ALL))
    ap.add_argument("--line-rate", default="1gbit", help="the wire's rate M (default 1gbit)")
    ap.add_argument("--bottleneck", default="500mbit", help="the bottleneck's rate B < M (default 500mbit)")
    ap.add_argument("--delay-ms", type=float, default=20.0,
                    help="one-way delay added to the return path, 10..100 (default 20: RTT >= 20 ms)")
    ap.add_argument("--seconds", type=float, default=None,
                    help="capture length per UDP run (default 2; --full 5)")
    ap.add_argument("--tcp-seconds", type=int, default=None, help="iperf3 length (default 4; --full 10)")
    ap.add_argument("--daemon-rt", type=int, default=10, metavar="PRIO",
                    help="run pspxdp's daemon SCHED_FIFO at PRIO (default 10; 0: normal priority, "
                    "it then stalls on a busy machine and TC passes frames unpaced)")
    ap.add_argument("--out", default=os.path.join(HERE, "..", "docs", "results"),
                    help="results root (default docs/results)")
    ap.add_argument("--json", action="store_true", help="print every row as one JSON object on stdout "
                    "(tables go to stderr)")
    ap.add_argument("--keep", help="keep the raw files (captures, logs, reports) in this directory")
    ap.add_argument("--check-args", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    try:
        rate_bps(a.line_rate), rate_bps(a.bottleneck)
    except ValueError as e:
        print(f"lab: {e}", file=sys.stderr)
        return 2
    if not rate_bps(a.bottleneck) < rate_bps(a.line_rate):
        print(f"lab: --bottleneck {a.bottleneck} must be below --line-rate {a.line_rate}", file=sys.stderr)
        return 2
    if not 10 <= a.delay_ms <= 100:
        print(f"lab: --delay-ms {a.delay_ms}: expected 10..100", file=sys.stderr)
        return 2
    names = a.only.split(",") if a.only else (experiments.FULL if a.full else experiments.QUICK)
    for n in names:
        if n not in experiments.ALL:
            print(f"lab: --only: unknown experiment \"{n}\" ({', '.join(experiments.ALL)})", file=sys.stderr)
            return 2
    seconds = a.seconds or (5.0 if a.full else 2.0)
    if not 1 <= seconds <= 60:
        print(f"lab: --seconds {seconds}: expected 1..60", file=sys.stderr)
        return 2

    if a.check_args:  # lab.sh: arguments first, then the prerequisites
        return 0
    build = os.environ.get("BUILD_DIR") or os.path.join(HERE, "..", "build")
    ctx = Ctx()
    ctx.full, ctx.seconds = a.full, seconds
    ctx.tcp_seconds = a.tcp_seconds or (10 if a.full else 4)
    ctx.line_rate, ctx.bottleneck, ctx.delay_ms = a.line_rate, a.bottleneck, a.delay_ms
    ctx.daemon_rt = a.daemon_rt
    ctx.pspxdp = os.environ.get("PSPXDP") or f"{build}/user/pspxdp"
    ctx.traffic = f"{build}/lab/psp_traffic"
    ctx.out = os.path.abspath(a.out)
    ctx.started = report.now()
    ctx.command = "lab/lab.sh " + " ".join(shlex.quote(x) for x in sys.argv[1:])
    ctx.keep_pcaps = bool(a.keep)
    ctx.summary = {"line_rate": a.line_rate, "command": ctx.command}
    t0 = time.monotonic()
    steps = {"n": 0}

    def progress(msg):
        steps["n"] += 1
        print(f"[{time.monotonic() - t0:6.1f}s] {msg} ...", file=sys.stderr, flush=True)
    ctx.progress = progress

    if a.json:  # tables to stderr, the JSON alone on stdout
        real_stdout = sys.stdout
        sys.stdout = sys.stderr

    def on_signal(sig, _frame):
        raise KeyboardInterrupt(f"signal {sig}")
    signal.signal(signal.SIGTERM, on_signal)
    # Bounded in time whatever happens (the full set takes ~15 minutes).
    signal.signal(signal.SIGALRM, on_signal)
    signal.alarm(3600 if a.full else 900)

    ctx.work = tempfile.mkdtemp(prefix="psp-lab.")
    lab = Lab(os.path.abspath(build))
    ctx.lab = lab
    rc = 0
    try:
        progress(f"building the topology (namespaces {lab.tag}-s/r/d/l)")
        lab.build_topology()
        for n in names:
            experiments.ALL[n](ctx)
    except KeyboardInterrupt as e:
        print(f"lab: stopped ({e})", file=sys.stderr)
        rc = 130
    except Exception as e:  # noqa: BLE001 - report, clean up, fail
        import traceback
        traceback.print_exc()
        print(f"lab: failed: {e}", file=sys.stderr)
        rc = 1
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        lab.teardown()
        if a.keep:
            os.makedirs(a.keep, exist_ok=True)
            os.system(f"cp -a {shlex.quote(ctx.work)}/. {shlex.quote(a.keep)}/")
        os.system(f"rm -rf {shlex.quote(ctx.work)}")
    print(f"lab: {'done' if rc == 0 else 'incomplete'} in {time.monotonic() - t0:.0f} s; results under "
          f"{ctx.out}", file=sys.stderr)
    if a.json:
        def enc(o):
            return o.__dict__ if hasattr(o, "__dict__") else str(o)
        real_stdout.write(json.dumps(ctx.summary, default=enc) + "\n")
    return rc


if __name__ == "__main__":
    sys.exit(main())
