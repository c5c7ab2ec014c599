#!/usr/bin/env python3
"""bench/run_cluster_tree.sh's table: a subtree's bytes against the shares
the group applied (design §11.10).

  cluster_tree.py SAMPLES RATE_LOG

SAMPLES: lines "READ_START_NS READ_END_NS TX_BYTES_A TX_BYTES_B CEIL_BPS"
(counters read between the two times) and "budget NS RATE_BPS". RATE_LOG:
the agent's "REALTIME_NS RATE_BPS" (0 before its first line). Per interval
between two reads: the subtree's bytes, what the applied shares allow over
the interval widened to both reads (from the first read's start to the
second's end: every byte counted between the reads left within it), and the
rate over the reads' midpoints.
"""
import itertools
import sys
from dataclasses import dataclass

from psplab.rate_log import read_rate_log, share_at, share_bytes
from psplab.report import Table


@dataclass
class Sample:
    start_ns: int
    end_ns: int
    tx_bytes: int
    ceil_bps: int




def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    samples: list[Sample] = []
    budgets: list[tuple[int, int]] = []
    with open(argv[1]) as f:
        for line in f:
            w = line.split()
            if w and w[0] == "budget":
                budgets.append((int(w[1]), int(w[2])))
            elif len(w) == 5:
                samples.append(Sample(int(w[0]), int(w[1]), int(w[2]) + int(w[3]), int(w[4])))
    log = read_rate_log(argv[2])
    t0 = samples[0].start_ns
    table = Table("A subtree's bytes against the applied shares",
              ["t (s)", "budget (Mbit/s)", "applied share (Mbit/s)", "1:10 ceil (Mbit/s)", "subtree (Mbit/s)",
               "sent (kB)", "allowed (kB)", "sent / allowed"])
    worst, sent_all, allowed_all = 0.0, 0, 0
    for p, s in itertools.pairwise(samples):
        sent = s.tx_bytes - p.tx_bytes
        allowed = share_bytes(log, p.start_ns, s.end_ns)
        mid = (s.start_ns + s.end_ns - p.start_ns - p.end_ns) / 2
        budget = next((r for t, r in reversed(budgets) if t <= s.end_ns), 300_000_000)
        ratio = sent / allowed if allowed else 0.0
        worst = max(worst, ratio)
        sent_all += sent
        allowed_all += allowed
        table.add(f"{(s.end_ns - t0) / 1e9:.1f}", f"{budget / 1e6:.0f}", f"{share_at(log, s.end_ns) / 1e6:.1f}",
              f"{s.ceil_bps / 1e6:.1f}", f"{sent * 8e3 / mid:.1f}", f"{sent / 1e3:.0f}", f"{allowed / 1e3:.0f}",
              f"{100 * ratio:.1f} %")
    print(table.markdown())
    print(f"\nwhole run: sent {sent_all / 1e6:.2f} MB, the applied shares allowed"
          f" {allowed_all / 1e6:.2f} MB ({100 * sent_all / max(1, allowed_all):.1f} %);"
          f" largest interval {100 * worst:.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
