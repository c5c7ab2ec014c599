#!/usr/bin/env python3
"""test_cli's Python: the JSON keys and the pinned maps' fields against the
documented ones, the 10,000-class configuration, and two JSON checks.
Each check prints what differs and exits 1 when something does.

  cli_checks.py keys KEYS STATS_JSON STATUS_JSON SENT
      KEYS: `pspxdp stats --keys`; the key sets of stats -j and status -j
      are exactly the documented ones, the numbers raw (1:1's configuration,
      its tc_packets SENT)
  cli_checks.py maps PINS DESIGN
      every pinned map has a row in design §1.8's map table, and bpftool
      dumps it with those key and value fields (BTF, enum names)
  cli_checks.py big-conf FILE         10,000 classes and 10,000 filters
  cli_checks.py status-object FILE    a JSON object with "attached" (any bytes)
  cli_checks.py paced-within          stdin: show -j; paced_bps <= line_rate_bps
"""
import json
import os
import re
import subprocess
import sys
from typing import Any

from verdict import load

from psplab.cli import Sub, subcommands


def keys(keys_path: str, stats_path: str, status_path: str, sent: int) -> list[str]:
    doc: dict[str, set[str]] = {}
    with open(keys_path) as f:
        for line in f:
            m = re.match(r"\| (\S+) \| `([^`]+)` \|", line)
            if m:
                doc.setdefault(m.group(1), set()).add(m.group(2))
    stats, status = load(stats_path), load(status_path)
    bad: list[str] = []

    def same(what: str, got: Any, want: set[str]) -> None:
        if set(got) != want:
            bad.append(f"{what}: undocumented {sorted(set(got) - want)}, missing {sorted(want - set(got))}")
    same("stats", stats, doc["top"])
    same("status", status, doc["top"] | doc["status"] - {"error"})
    if not stats["classes"]:
        return ["no classes"]
    for c in stats["classes"]:
        same("classes[] " + c["class"], c, doc["classes[]"])
    for o in ("daemon", "tc", "xdp"):
        same(o, stats[o], doc[o])
    # Raw numbers, units in the keys.
    c = {c["class"]: c for c in stats["classes"]}["1:1"]
    if c["rate_bps"] != 300000000 or c["limit_bytes"] != 65536 or c["ce_threshold_ns"] != 2000000:
        bad.append(f"1:1 config {c}")
    if c["tc_packets"] != sent:
        bad.append(f"1:1 tc_packets {c['tc_packets']} != {sent} sent")
    if not isinstance(c["measured_rate_bps"], int):
        bad.append("measured_rate_bps not a number")
    return bad


def map_fields(m: str, key: Any, value: Any, want_key: set[str], want_value: set[str]) -> list[str]:
    bad = []
    if isinstance(key, dict) and set(key) != want_key:
        bad.append(f"{m}: key fields {sorted(key)} != design {sorted(want_key)}")
    if isinstance(value, dict) and set(value) != want_value:
        bad.append(f"{m}: value fields {sorted(value)} != design {sorted(want_value)}")
    for v in (key, value):
        if isinstance(v, dict):
            for f, x in v.items():
                if isinstance(x, dict) and set(x) == {"minor", "major"}:
                    continue
                if f in ("kind", "state") and not str(x).startswith("PSPXDP_"):
                    bad.append(f"{m}: {f} is {x}, not an enum name")
    if m == "class_config" and (not isinstance(key, dict) or set(key) != {"minor", "major"}):
        bad.append("class_config key is not {minor, major}")
    return bad


def maps(pins: str, design: str) -> list[str]:
    rows: dict[str, tuple[set[str], set[str]]] = {}
    with open(design) as f:
        text = f.read()
    table = text.split("<!-- pinned maps -->")[1].split("<!-- end of pinned maps -->")[0]
    for line in table.splitlines():
        cols = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cols) != 5 or not cols[0].startswith("`"):
            continue
        for name in re.findall(r"`([^`]+)`", cols[0]):
            rows[name] = (set(re.findall(r"`([^`]+)`", cols[3])), set(re.findall(r"`([^`]+)`", cols[4])))
    bad = []
    for m in sorted(os.listdir(pins)):
        if m not in rows:
            bad.append(f"{m}: no row in design §1.8's map table")
            continue
        if m == "xsks_map":
            continue  # the kernel does not return sockets
        out = subprocess.run(["bpftool", "-j", "map", "dump", "pinned", f"{pins}/{m}"], capture_output=True,
                             text=True, check=False)
        entries = json.loads(out.stdout or "[]")
        if not entries:
            bad.append(f"{m}: empty, cannot see its fields")
            continue
        e = entries[0].get("formatted")
        if not e:
            bad.append(f"{m}: no BTF (bpftool prints hex bytes only)")
            continue
        value = e["value"] if "value" in e else e["values"][0]["value"]
        bad += map_fields(m, e["key"], value, *rows[m])
    return bad


def big_conf(path: str) -> None:
    lines = (["line-rate 1Gbit"] + [f"class 1:{i:x} 10kbit" for i in range(1, 10001)]
             + ["class 1:ffff normal", "default 1:ffff"])
    lines += [f"filter dst 10.{100 + i // 65536}.{i // 256 % 256}.{i % 256}/32 classid 1:{i:x}"
              for i in range(1, 10001)]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def report(bad: list[str]) -> int:
    print("\n".join(bad))
    return 1 if bad else 0


def status_object(path: str) -> int:
    with open(path, encoding="utf-8", errors="replace") as f:
        d = json.load(f)
    return 0 if isinstance(d, dict) and "attached" in d else 1


def paced_within() -> int:
    d = json.load(sys.stdin)
    ok = d["paced_bps"] <= d["line_rate_bps"]
    if not ok:
        print(d["paced_bps"], file=sys.stderr)
    return 0 if ok else 1


def main(argv: list[str]) -> int:
    return subcommands(__doc__, argv, {
        "keys": Sub(("KEYS", "STATS", "STATUS", "SENT"), lambda k, st, su, sent: report(keys(k, st, su, int(sent)))),
        "maps": Sub(("PINS", "DESIGN"), lambda pins, design: report(maps(pins, design))),
        "big-conf": Sub(("PATH",), big_conf),
        "status-object": Sub(("PATH",), status_object),
        "paced-within": Sub((), paced_within),
    })


if __name__ == "__main__":
    sys.exit(main(sys.argv))
