#!/usr/bin/env python3
"""bench/run_dp_realtime.sh's Python: one set-up's sample (the classes'
real-time rates and backlogs, the daemon's losses and CPU over SECONDS, as
one JSON line) and the tables over every sample.

  dp_realtime.py sample NSENTER PSPXDP DEV SECONDS TABLE LABEL MODE HOG(0|1) PID
      NSENTER: the command prefix that enters DEV's namespace (one string)
  dp_realtime.py report RESULTS JSON(0|1) UPTIME RATES
"""
import json
import os
import shlex
import subprocess
import sys
import time
from typing import Any

from psplab.cli import Sub, subcommands

Json = dict[str, Any]


def sample(ns: list[str], pspxdp: str, dev: str, secs: float, table: str, label: str, mode: str, hog: bool,
           pid: int) -> Json:
    hz = os.sysconf("SC_CLK_TCK")

    def st() -> Json:
        out = subprocess.run([*ns, pspxdp, "status", dev, "-j"], capture_output=True, text=True, timeout=10,
                             check=False).stdout
        d: Json = json.loads(out)
        return d

    def ticks() -> int:  # the daemon's utime + stime, every thread
        with open(f"/proc/{pid}/stat") as fh:
            f = fh.read().rsplit(")", 1)[1].split()
        return int(f[11]) + int(f[12])
    s0, t0, k0 = st(), time.monotonic(), ticks()
    low: dict[str, int] = {}
    while time.monotonic() - t0 < secs:
        time.sleep(0.2)  # the sampling interval of the backlogs
        for c in st()["classes"]:
            low[c["class"]] = min(low.get(c["class"], 1 << 62), c["backlog_frames"])
    s1, t1, k1 = st(), time.monotonic(), ticks()
    dt = t1 - t0
    c0 = {c["class"]: c for c in s0["classes"]}
    rows = []
    for c in s1["classes"]:
        if not c["rate_bps"]:
            continue
        rt = (c["tx_bytes"] - c0[c["class"]]["tx_bytes"]) * 8 / dt
        rows.append({"class": c["class"], "target_bps": c["rate_bps"], "real_time_bps": rt,
                     "pct": rt / c["rate_bps"] * 100, "min_backlog": low.get(c["class"], 0)})
    d0, d1 = s0["daemon"], s1["daemon"]
    return {"table": table, "setup": label, "mode": mode, "hog": hog, "seconds": dt,
            "underrun_pct": (d1["underrun_bytes"] - d0["underrun_bytes"]) * 8 / 1e9 / dt * 100,
            "lost_pct": (d1["lost_wire_ns"] - d0["lost_wire_ns"]) / 1e9 / dt * 100,
            "tc_passed": sum(c["tc_passed"] - c0[c["class"]]["tc_passed"] for c in s1["classes"]),
            "pacer_dead": s1["tc"]["pacer_dead"] - s0["tc"]["pacer_dead"],
            "daemon_cpu_pct": (k1 - k0) / hz / dt * 100,
            "classes": rows}


def cell(r: Json | None) -> str:
    return f"{r['daemon_cpu_pct']:5.1f} % ({r['classes'][0]['pct']:6.2f} %)" if r else "-"


def report(results: str, as_json: bool, up: str, rates: str) -> None:
    with open(results) as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    if as_json:
        print(json.dumps({"uptime": up.strip(), "setups": rows}))
        return
    busy = [r for r in rows if r["table"] == "busy"]
    if busy:
        print(f"busy host: classes of {'/'.join(rates.split())} Mbit/s offered 1.3x, 1 Gbit/s "
              "veth, real time (wall clock) over each interval")
        print(f"{'clock':9} {'hog':4} {'set-up':22} {'underrun %':>10} {'lost %':>7} {'unpaced':>8} "
              f"{'CPU %':>6}  real-time rate % of target (min backlog)")
        for r in busy:
            cl = "  ".join(f"{c['class']} {c['pct']:6.2f} ({c['min_backlog']})" for c in r["classes"])
            print(f"{r['mode']:9} {'yes' if r['hog'] else 'no':4} {r['setup']:22} {r['underrun_pct']:>10.2f} "
                  f"{r['lost_pct']:>7.2f} {r['tc_passed'] + r['pacer_dead']:>8} {r['daemon_cpu_pct']:>6.1f}  {cl}")
        print("unpaced: tc_passed + pacer_dead; CPU: the daemon's, % of one core")
    cpu = [r for r in rows if r["table"] == "cpu"]
    if cpu:
        print("\ndaemon CPU, one class offered 1.3x its rate, no hog")
        print(f"{'clock':9} {'rate':>9} {'--sched normal':>22} {'default (deadline)':>22}")
        by: dict[tuple[str, int], dict[str, Json]] = {}
        for r in cpu:
            by.setdefault((r["mode"], r["classes"][0]["target_bps"]), {})[r["setup"]] = r
        for (mode, bps), v in by.items():
            print(f"{mode:9} {bps / 1e6:>5.0f} Mb/s {cell(v.get('--sched normal')):>22} "
                  f"{cell(v.get('default')):>22}")
        print("cells: the daemon's CPU, % of one core (the class's real-time rate, % of target)")
    print(up.strip())


def main(argv: list[str]) -> int:
    return subcommands(__doc__, argv, {
        "sample": Sub(("NS", "PSPXDP", "DEV", "SECONDS", "TABLE", "LABEL", "MODE", "HOG", "PID"),
                      lambda n, p, d, s, t, label, mode, hog, pid: print(json.dumps(
                          sample(shlex.split(n), p, d, float(s), t, label, mode, hog == "1", int(pid))))),
        "report": Sub(("RESULTS", "JSON", "LOAD", "RATES"), lambda r, j, load, rates: report(r, j == "1", load, rates)),
    })


if __name__ == "__main__":
    sys.exit(main(sys.argv))
