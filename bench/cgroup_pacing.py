#!/usr/bin/env python3
"""bench/run_cgroup_pacing.sh's Python: one table row from two samples.

  cgroup_pacing.py row A B LABEL
      A, B: samples "t_ns tx_bytes peer_rx_bytes", B after A
"""
import sys

from psplab.cli import Sub, subcommands


def row(a_sample: str, b_sample: str, label: str) -> str:
    a = [int(x) for x in a_sample.split()]
    b = [int(x) for x in b_sample.split()]
    dt = (b[0] - a[0]) / 1e9
    tx = (b[1] - a[1]) * 8 / dt / 1e6
    rx = (b[2] - a[2]) * 8 / dt / 1e6
    return f"| {label:<44} | {dt:6.2f} | {tx:12.3f} | {rx:14.3f} |"


def main(argv: list[str]) -> int:
    return subcommands(__doc__, argv, {
        "row": Sub(("BEFORE", "AFTER", "LABEL"), lambda a, b, label: print(row(a, b, label))),
    })


if __name__ == "__main__":
    sys.exit(main(sys.argv))
