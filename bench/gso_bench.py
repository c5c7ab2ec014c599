#!/usr/bin/env python3
"""bench/run_gso.sh's Python: one run's row (iperf3's figures and the class's
drops and GSO hand-over, as one JSON line) and the table.

  gso_bench.py row OUT SHAPER RATE    OUT.iperf (iperf3 -J), OUT.s0/.s1
      (status -j before and after; none for htb)
  gso_bench.py report ROWS SECONDS
"""
import json
import os
import sys
from typing import Any

from psplab.cli import Sub, subcommands

Json = dict[str, Any]


def row(out: str, shaper: str, rate: str) -> Json:
    r: Json = {"shaper": shaper, "rate": rate}
    try:
        with open(f"{out}.iperf") as f:
            ip = json.load(f)["end"]
        r["mbit"] = ip["sum_received"]["bits_per_second"] / 1e6
        r["retr"] = ip["sum_sent"].get("retransmits", 0)
        rtts = [s["sender"]["mean_rtt"] for s in ip["streams"] if "mean_rtt" in s.get("sender", {})]
        if rtts:
            r["rtt_ms"] = rtts[0] / 1000
    except (OSError, ValueError, KeyError):
        pass
    if os.path.exists(f"{out}.s1"):
        with open(f"{out}.s0") as f0, open(f"{out}.s1") as f1:
            c0, c1 = (next(x for x in json.load(f)["classes"] if x["class"] == "1:1") for f in (f0, f1))
        for k in ("drop_limit", "drop_aqm", "drop_overflow", "tc_packets", "tc_frames"):
            r[k] = c1[k] - c0[k]
    return r


def report(rows_path: str, secs: str) -> None:
    with open(rows_path) as fh:
        rows = [json.loads(line) for line in fh]
    print(f"\nOne local TCP flow (cubic, ECN off, GSO on) for {secs} s through a class with limit 10ms (real time)")
    print(f"{'rate':7} {'shaper':6} {'Mbit/s':>7} {'retr':>6} {'rtt ms':>7} {'limit':>6} {'aqm':>6} {'frames/pkt':>10}")
    for r in rows:
        def f(k: str, fmt: str, r: Json = r) -> str:
            return str(fmt % r[k]) if k in r else "-"
        fpp = f"{r['tc_frames'] / r['tc_packets']:10.1f}" if r.get("tc_packets") else f"{'-':>10}"
        print(f"{r['rate']:7} {r['shaper']:6} {f('mbit', '%7.1f')} {f('retr', '%6d')} {f('rtt_ms', '%7.2f')} "
              f"{f('drop_limit', '%6d')} {f('drop_aqm', '%6d')} {fpp}")


def main(argv: list[str]) -> int:
    return subcommands(__doc__, argv, {
        "row": Sub(("OUT", "SHAPER", "RATE"), lambda out, shaper, rate: print(json.dumps(row(out, shaper, rate)))),
        "report": Sub(("ROWS", "SECONDS"), report),
    })


if __name__ == "__main__":
    sys.exit(main(sys.argv))
