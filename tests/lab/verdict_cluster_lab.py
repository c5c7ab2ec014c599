#!/usr/bin/env python3
"""test_cluster_lab's verdict on `python3 -m psplab cluster --quick --json`:
what ran, and the deterministic part of each experiment (accounting, the
checker's verdicts, the simulation); real-time figures are printed.

  verdict_cluster_lab.py SUMMARY_JSON RESULTS_DIR
"""
import glob
import sys

from verdict import Json, check, load


def judge(d: Json, res: str) -> None:
    pair = d.get("pair", [])
    combos = sorted({r["combo"] for r in pair})
    check(f"2-to-2: the shaper pairs ran ({', '.join(combos)})",
          len(combos) >= 2 and len(pair) == 2 * len(combos))
    for r in pair:
        print(f"     2-to-2 {r['combo']}, host {r['host']} ({r['shaper']}): {r['both_on_bps']/1e6:.1f} Mbit/s "
              f"while both on, {r['retransmits']} retransmits, bottleneck drops {r['bottleneck_drops']}")
        check(f"2-to-2 {r['combo']}, host {r['host']}: data through", r["mean_bps"] > 0)
        if r["shaper"] == "pspxdp":
            check(f"2-to-2 {r['combo']}, host {r['host']}: pspxdp's counters account for every frame",
                  r["accounted"] is True)
    a2a = d.get("alltoall", [])
    check(f"all-to-all: {len(a2a)} shapers ran ({', '.join(r['shaper'] for r in a2a)})", len(a2a) >= 2)
    for r in a2a:
        print(f"     all-to-all {r['shaper']}: {r['mean_s']:.2f} s per round {r['completion_s']}, bottleneck "
              f"drops {r['bottleneck_drops']}, retransmits {r['retransmits']}")
        check(f"all-to-all {r['shaper']}: every round complete, every byte delivered (no sender error)",
              r["sender_errors"] == 0 and len(r["completion_s"]) == r["rounds"])
        if r["shaper"].startswith("pspxdp"):
            check(f"all-to-all {r['shaper']}: pspxdp's counters account for every frame on every host",
                  r["accounted"] is True)
    dyn = d.get("dynamic", {})
    if "skipped" in dyn:
        print(f"skip - pspxdp group (dynamic): {dyn['skipped']}")
    else:
        print(f"     dynamic: {dyn.get('verdict')}, bottleneck drops {dyn.get('bottleneck_drops')}")
        for r in dyn.get("changes", []):
            print(f"     dynamic t={r['t_s']} s {r['change']}: converged {r['converge_ms']} ms, utilisation "
                  f"{r['utilisation']}, fairness {r['fairness']}")
        check(f"pspxdp group: the checker's verdict over every host's applied-rate log: "
              f"{dyn.get('violations')} violations", dyn.get("violations") == 0)
        check("pspxdp group: pspxdp's counters account for every frame on every host", dyn.get("accounted") is True)
    for r in a2a:
        if r["violations"] is not None:
            check(f"all-to-all {r['shaper']}: the checker's verdict: {r['violations']} violations",
                  r["violations"] == 0)
    scale = [r for r in d.get("scale", []) if not r.get("estimated")]
    check(f"scale: the simulation ran at {[r['hosts'] for r in scale]} hosts", len(scale) >= 2)
    for r in scale:
        print(f"     scale {r['hosts']} hosts: {r['writes_per_s']:.1f} etcd writes/s, converge p95 "
              f"{r['converge_p95_ms']} ms, allocate() {r['allocate_us']:.0f} us")
        check(f"scale {r['hosts']} hosts: 0 violations of the budget ({r['violations']}), every step "
              f"converged ({r['steps']} steps)", r["violations"] == 0 and r["converge_max_ms"] is not None)
    pngs, readmes = glob.glob(f"{res}/cluster-*/*.png"), glob.glob(f"{res}/cluster-*/README.md")
    check(f"results written: {len(pngs)} plots, {len(readmes)} README.md", len(pngs) >= 3 and len(readmes) >= 3)


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    judge(load(argv[1]), argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
