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


def seconds(a_ns: str, b_ns: str) -> float:
    return (int(b_ns) - int(a_ns)) / 1e9


def read_rate_log(path: str) -> list[tuple[int, int]]:
    """An agent's rate log: (REALTIME_NS, RATE_BPS) per line."""
    with open(path) as f:
        return [(int(t), int(r)) for t, r in (line.split() for line in f if line.strip())]


def share_bytes(log: list[tuple[int, int]], a_ns: int, b_ns: int) -> int:
    """Bytes the rates of a rate log (0 before its first line) allow from A to B."""
    total, rate, at = 0, 0, a_ns
    for t, r in [*log, (b_ns, 0)]:
        if t > at:
            end = min(t, b_ns)
            total += rate * (end - at)
            at = end
        if t >= b_ns:
            break
        rate = r
    return total // 8 // 1_000_000_000


def main(argv: list[str]) -> int:
    cmd, a = (argv[1], argv[2:]) if len(argv) > 1 else ("", [])
    if cmd == "etcd-status" and len(a) == 1:
        d = json.load(sys.stdin)
        print(d["header"]["member_id"] if a[0] == "id" else d["leader"])
    elif cmd == "revision" and not a:
        print(json.load(sys.stdin)["header"]["revision"])
    elif cmd == "state" and len(a) == 1:
        s = json.load(sys.stdin)["groups"][0]
        return 0 if eval(a[0], {"s": s}) else 1
    elif cmd == "rate" and not a:
        print(next(c["rate_bps"] for c in json.load(sys.stdin)["classes"] if c["class"] == "1:1"))
    elif cmd in ("within", "after") and len(a) == 3:
        d = seconds(a[0], a[1])
        print(f"     {d:.3f} s")
        return 0 if (d <= float(a[2]) if cmd == "within" else d >= float(a[2])) else 1
    elif cmd == "seconds" and len(a) == 2:
        print(f"{seconds(a[0], a[1]):.3f}")
    elif cmd == "writes" and len(a) == 3:
        w, s = int(a[1]) - int(a[0]), max(1, int(a[2]))
        print(f"     etcd writes: {w} in {s} s with 3 hosts and every fault above: {w / s / 3:.2f}/s per host")
    elif cmd == "share-bytes" and len(a) == 3:
        print(share_bytes(read_rate_log(a[0]), int(a[1]), int(a[2])))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
