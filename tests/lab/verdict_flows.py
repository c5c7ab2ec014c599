#!/usr/bin/env python3
"""test_flows' verdict on its final status -j: the classes with flow queues
(DRR, CoDel) and without, and the TCP classes' GSO hand-over.

  verdict_flows.py STATUS_JSON
      "SKIP ..." alone when the sender could not overload 1:1 and 1:2,
      else the checks
"""
import sys

from verdict import check, figure, load

DROPS = ("drop_limit", "drop_overflow", "drop_deleted", "drop_shutdown", "drop_died", "drop_invalid",
         "drop_aqm")


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    d = load(argv[1])
    c = {x["class"]: x for x in d["classes"]}
    # What 50 Mbit/s sends in 1.5 s, in frames of 1200 + 42 + 4 bytes.
    sendable = 50e6 * 1.5 / 8 / 1246
    for name in ("1:1", "1:2"):
        if c[name]["tc_frames"] < 2 * sendable:
            print(f"SKIP {name} offered {c[name]['tc_frames']} frames, under twice its rate's "
                  f"{sendable:.0f}: the sender could not overload it")
            return 0
    for name, x in sorted(c.items()):
        lost = sum(x[k] for k in DROPS)
        figure(f"{name}: rx {x['rx_frames']} tx {x['tx_frames']} "
               + " ".join(f"{k} {x[k]}" for k in DROPS if x[k])
               + f" new_flows {x['new_flows']} active_flows {x['active_flows']}")
        check(f"{name}: rx = tx + drops", x["rx_frames"] == x["tx_frames"] + lost)
        check(f"{name}: idle, no flow left (flows, sparse, bulk 0)",
              x["active_flows"] == 0 and x["sparse_flows"] == 0 and x["bulk_flows"] == 0)
    on, off = c["1:1"], c["1:2"]
    check("1:1 (flows on): each of 4 flows new at least once", on["new_flows"] >= 4)
    check("1:1 (flows on): CoDel dropped from the standing queue", on["drop_aqm"] > 0)
    check("1:2 (flows off): no flow, no CoDel", off["new_flows"] == 0 and off["drop_aqm"] == 0)
    check("1:2 (flows off): its excess met its limit or the buffer",
          off["drop_limit"] + off["drop_overflow"] > 0)
    for name in ("1:3", "1:4"):
        x = c[name]
        check(f"{name} (TCP, limit 10ms): handed over as GSO packets "
              f"({x['tc_frames']} frames in {x['tc_packets']} packets)",
              x["tc_packets"] > 0 and x["tc_frames"] > x["tc_packets"])
        check(f"{name}: nothing left queued", x["backlog_frames"] == 0)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
