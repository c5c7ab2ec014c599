#!/usr/bin/env python3
"""bench/run_tree_share.sh's Python: each child's tx_bytes and drops over
the run, from the stats before and after the sender.

  tree_share.py STATS0 STATS1
      STATS0, STATS1: `pspxdp stats DEV -j` before and after the sender
"""
import json
import sys
from typing import Any

Json = dict[str, Any]


def load(path: str) -> Json:
    with open(path) as fh:
        d: Json = json.load(fh)
    return d


def cls(d: Json, k: str) -> Json:
    c: Json = next(x for x in d["classes"] if x["class"] == k)
    return c


def drops(c: Json) -> int:
    return sum(v for n, v in c.items() if n.startswith("drop_"))


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    a, b = load(argv[1]), load(argv[2])
    for k in ("1:10", "1:20"):
        print(k, "tx_bytes", cls(b, k)["tx_bytes"] - cls(a, k)["tx_bytes"],
              "drops", drops(cls(b, k)) - drops(cls(a, k)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
