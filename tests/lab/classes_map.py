#!/usr/bin/env python3
"""test_classes_map's judge: the `classes` map (bpftool's view) against
`stats -j`. Each subcommand prints what differs and exits 1 when something
does.

  classes_map.py agree PIN STATS_JSON [quiet]
      every class of stats -j has one entry, every counter equal, the tree
      (prio, parent, ceil_bps) as class_config has it, and every per-class
      counter of stats -j in the map
  classes_map.py lookup ONE_JSON STATS_JSON MINOR TX_FRAMES
      a `bpftool -j map lookup` answer is class 1:MINOR with TX_FRAMES sent,
      as stats -j says
  classes_map.py entries PIN
      prints how many entries bpftool dumps
"""
import json
import subprocess
import sys
from typing import Any

from verdict import figure, load

from psplab.cli import Sub, subcommands

# The map's own fields; everything else is a counter named as stats -j names it.
HEADER = ("updated_ns", "rate_bps", "kind", "state", "slot", "reserved", "prio", "parent", "ceil_bps")
# stats -j's numbers that are configuration, not counters (the map carries
# rate_bps, slot and the tree in its header).
CONFIG = ("rate_bps", "slot", "limit_bytes", "limit_ns", "ce_threshold_ns", "burst_bytes", "burst_mtus",
          "measured_rate_bps", "ceil_bps", "prio")


def dump(pin: str) -> list[dict[str, Any]]:
    out = subprocess.run(["bpftool", "-j", "map", "dump", "pinned", pin], capture_output=True, text=True,
                         check=True)
    entries: list[dict[str, Any]] = json.loads(out.stdout)
    return entries


def classid(k: dict[str, int]) -> str:
    return f"{k['major']:x}:{k['minor']:x}"


def agree(pin: str, stats_path: str) -> list[str]:
    got = {classid(e["formatted"]["key"]): e["formatted"]["value"] for e in dump(pin)}
    want = {c["class"]: c for c in load(stats_path)["classes"]}
    bad = []
    if set(got) != set(want):
        bad.append(f"map classes {sorted(got)} != stats -j {sorted(want)}")
    counters: list[str] | None = None
    for name, v in got.items():
        c = want.get(name)
        if c is None:
            continue
        counters = [k for k in v if k not in HEADER]
        for k in counters:
            if k not in c:
                bad.append(f"{name}: {k} is not a stats -j key")
            elif v[k] != c[k]:
                bad.append(f"{name}: {k} map {v[k]} != stats -j {c[k]}")
        for k in ("slot", "rate_bps", "prio"):
            if v[k] != c[k]:
                bad.append(f"{name}: {k} map {v[k]} != stats -j {c[k]}")
        # stats -j gives the ceil in force (the rate when none is set), the map class_config's.
        if (v["ceil_bps"] or v["rate_bps"]) != c["ceil_bps"]:
            bad.append(f"{name}: ceil_bps map {v['ceil_bps']} != stats -j {c['ceil_bps']}")
        parent = classid(v["parent"]) if v["parent"]["major"] else ""
        if parent != c["parent"]:
            bad.append(f"{name}: parent map {parent!r} != stats -j {c['parent']!r}")
        if not str(v["state"]).startswith("PSPXDP_SLOT_"):
            bad.append(f"{name}: state {v['state']} not an enum name")
    # Every per-class counter stats -j has is in the map.
    if counters is not None:
        one = want["1:1"]
        missing = [k for k in one if isinstance(one[k], int) and not isinstance(one[k], bool)
                   and k not in counters and k not in CONFIG]
        if missing:
            bad.append(f"stats -j counters not in the map: {missing}")
    return bad


def lookup(one_path: str, stats_path: str, minor: int, tx_frames: int) -> list[str]:
    e = load(one_path)["formatted"]
    s = {c["class"]: c for c in load(stats_path)["classes"]}[f"1:{minor:x}"]
    bad = []
    if e["key"] != {"minor": minor, "major": 1}:
        bad.append(f"key {e['key']} is not 1:{minor:x}")
    if not e["value"]["tx_frames"] == s["tx_frames"] == tx_frames:
        bad.append(f"tx_frames map {e['value']['tx_frames']}, stats -j {s['tx_frames']}, sent {tx_frames}")
    return bad


def shown(bad: list[str]) -> int:
    """Each disagreement as a figure; the exit status: 1 if any."""
    for line in bad:
        figure(line)
    return 1 if bad else 0


def main(argv: list[str]) -> int:
    return subcommands(__doc__, argv, {
        "agree": Sub(("PIN", "STATS", "QUIET"), lambda pin, stats, quiet=None:
                     (1 if agree(pin, stats) else 0) if quiet else shown(agree(pin, stats)), optional=1),
        "lookup": Sub(("ONE", "STATS", "MINOR", "TX_FRAMES"),
                      lambda one, stats, minor, tx: shown(lookup(one, stats, int(minor), int(tx)))),
        "entries": Sub(("PIN",), lambda pin: print(len(dump(pin)))),
    })


if __name__ == "__main__":
    sys.exit(main(sys.argv))
