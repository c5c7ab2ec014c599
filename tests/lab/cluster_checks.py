#!/usr/bin/env python3
"""tests/lab/cluster_lib.sh's and test_cluster_faults' Python: fields of
etcd's, the agent's and the daemon's JSON, and the time checks.

  cluster_checks.py etcd-status id|leader   stdin: /v3/maintenance/status;
      the member's own id, or the leader's
  cluster_checks.py revision                stdin: a /v3/kv/range answer; its revision
  cluster_checks.py state EXPRESSION        stdin: status -j; exit 0 when the
      expression holds for s, the agent's state (groups[0])
  cluster_checks.py rate                    stdin: class show -j; 1:1's rate_bps
  cluster_checks.py within A_NS B_NS MAX_S  prints B - A in s; exit 0 if <= MAX_S
  cluster_checks.py after A_NS B_NS MIN_S   prints B - A in s; exit 0 if >= MIN_S
  cluster_checks.py seconds A_NS B_NS       B - A in s, "%.3f"
  cluster_checks.py writes REV0 REV1 SECONDS  etcd's writes per second per host (3)
  cluster_checks.py share-bytes LOG A_NS B_NS  bytes the rates of an agent's rate
      log (REALTIME_NS RATE_BPS, 0 before its first line) allow from A to B
"""
import json
import sys

from psplab.cli import Sub, subcommands
from psplab.rate_log import read_rate_log, share_bytes


def seconds(a_ns: str, b_ns: str) -> float:
    return (int(b_ns) - int(a_ns)) / 1e9


def etcd_status(what: str) -> None:
    d = json.load(sys.stdin)
    print(d["header"]["member_id"] if what == "id" else d["leader"])


def elapsed(a_ns: str, b_ns: str, bound_s: str, at_most: bool) -> int:
    d = seconds(a_ns, b_ns)
    print(f"     {d:.3f} s")
    return 0 if (d <= float(bound_s) if at_most else d >= float(bound_s)) else 1


def writes(before: str, after: str, secs: str) -> None:
    w, s = int(after) - int(before), max(1, int(secs))
    print(f"     etcd writes: {w} in {s} s with 3 hosts and every fault above: {w / s / 3:.2f}/s per host")


def main(argv: list[str]) -> int:
    return subcommands(__doc__, argv, {
        "etcd-status": Sub(("id|leader",), etcd_status),
        "revision": Sub((), lambda: print(json.load(sys.stdin)["header"]["revision"])),
        "state": Sub(("EXPR",), lambda expr: 0 if eval(expr, {"s": json.load(sys.stdin)["groups"][0]}) else 1),
        "rate": Sub((), lambda: print(next(c["rate_bps"] for c in json.load(sys.stdin)["classes"]
                                           if c["class"] == "1:1"))),
        "within": Sub(("A_NS", "B_NS", "SECONDS"), lambda a, b, s: elapsed(a, b, s, True)),
        "after": Sub(("A_NS", "B_NS", "SECONDS"), lambda a, b, s: elapsed(a, b, s, False)),
        "seconds": Sub(("A_NS", "B_NS"), lambda a, b: print(f"{seconds(a, b):.3f}")),
        "writes": Sub(("BEFORE", "AFTER", "SECONDS"), writes),
        "share-bytes": Sub(("RATE_LOG", "A_NS", "B_NS"),
                           lambda log, a, b: print(share_bytes(read_rate_log(log), int(a), int(b)))),
    })


if __name__ == "__main__":
    sys.exit(main(sys.argv))
