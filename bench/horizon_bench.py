#!/usr/bin/env python3
"""bench/run_horizon.sh's Python: one run's row (as one JSON line) and the
tables over every row.

  horizon_bench.py row OUT TABLE MODE LOAD T0 T1 C0 C1 K0 K1 PID SEND_SECONDS
      OUT.{real,byte}.json (pspxdp analyze), OUT.s0/.s1 (status -j, with a
      daemon), OUT.send.json (psp_traffic); T: epoch seconds, C: the
      daemon's CPU ticks, K: "kernel total" ticks of the machine
  horizon_bench.py report ROWS
"""
import json
import os
import statistics
import sys
from typing import Any

from psplab.cli import Sub, subcommands
from psplab.report import Table

Json = dict[str, Any]


def load(path: str) -> Any:
    with open(path) as fh:
        return json.load(fh)


def f(v: Any, fmt: str) -> str:
    return "-" if v is None else format(v, fmt)


def flow_port(spec: str) -> int:  # DST:PORT:..., DST an IPv6 address in brackets
    spec = spec.split(",")[0]
    return int((spec.split("]:", 1)[1] if spec.startswith("[") else spec.split(":", 1)[1]).split(":")[0])


def make_row(out: str, table: str, mode: str, load_name: str, t0: float, t1: float, c0: int, c1: int,
             k0_text: str, k1_text: str, pid: int, send_s: float) -> Json:
    k0 = [int(x) for x in k0_text.split()]
    k1 = [int(x) for x in k1_text.split()]
    dt, hz, ncpu = t1 - t0, os.sysconf("SC_CLK_TCK"), os.cpu_count() or 1
    real, byte = load(f"{out}.real.json"), load(f"{out}.byte.json")
    row: Json = {"table": table, "mode": mode, "load": load_name, "seconds": round(dt, 2)}
    row["daemon_cpu_pct"] = (c1 - c0) / hz / dt * 100 if pid else None
    kernel = (k1[0] - k0[0]) / max(1, k1[1] - k0[1]) * ncpu
    # The daemon's stime is in kernel already; close enough.
    row["machine_cores"] = kernel + ((c1 - c0) / hz / dt if pid else 0)
    if pid:
        s0, s1 = (load(f"{out}.s{i}")["daemon"] for i in (0, 1))
        d = {k: s1[k] - s0[k] for k in s1}
        row["pause_per_s"] = d["gap_frames"] / dt
        row["pause_share"] = d["gap_bytes"] / max(1, d["gap_bytes"] + d["wire_frame_bytes"] + d["planned_idle_bytes"])
        row["late_wakeups"] = d["late_wakeups"]
        row["underruns"] = d["underruns"]
        # Over the measured interval only: what the class lost before (the
        # backlog building up, the capture starting) is not in the rates either.
        lost0 = {c["class"]: c.get("late_lost_ns", 0) for c in load(f"{out}.s0")["classes"]}
        s1c = load(f"{out}.s1")["classes"]
        row["late_lost_ns"] = sum(c.get("late_lost_ns", 0) - lost0.get(c["class"], 0) for c in s1c)
        row["late_max_ns"] = s1["late_max_ns"]
    else:
        row["pause_per_s"] = row["pause_share"] = row["late_wakeups"] = row["underruns"] = None
        row["late_lost_ns"] = None
    # What the sender managed to offer per flow (a busy machine's sender may
    # fall short: such a class is not backlogged and its rate is the sender's).
    try:
        sent = {flow_port(f["flow"]): f["sent_bits"] for f in load(f"{out}.send.json")["flows"]}
    except (OSError, ValueError, KeyError, IndexError):
        sent = {}
    classes = []
    for f in real["flows"]:
        if f["name"] == "other" or not f.get("target_bps"):
            continue
        port = int(f["name"][1:])
        b = next(x for x in byte["flows"] if x["name"] == f["name"])
        offered = sent.get(port, 0) / send_s if sent else None
        classes.append({"target": f["target_bps"], "offered": offered, "got": f["mean_rate_bps"] or 0,
                        "err": ((f["mean_rate_bps"] or 0) - f["target_bps"]) / f["target_bps"] * 100,
                        "err_byte": ((b["mean_rate_bps"] or 0) - f["target_bps"]) / f["target_bps"] * 100,
                        "real": f["max_burst_at_target_mtu"] or 0, "byte": b["max_burst_at_target_mtu"] or 0})
    row["classes"] = classes
    # Judged: the classes whose sender offered at least their rate.
    # (Table B: all; a tc shaper's backpressure makes the sender's count its rate.)
    judged = [c for c in classes if table != "A" or c["offered"] is None or c["offered"] >= c["target"]]
    row["judged"] = f"{len(judged)}/{len(classes)}"
    row["burst_real_mtu"] = max((c["real"] for c in judged), default=None)
    row["burst_byte_mtu"] = max((c["byte"] for c in judged), default=None)
    row["rate_err_pct"] = max((c["err"] for c in judged), key=abs, default=None)
    row["rate_err_byte_pct"] = max((c["err_byte"] for c in judged), key=abs, default=None)
    row["capture_drops"] = real["capture_drops"]
    return row


def report(rows_path: str) -> None:
    with open(rows_path) as fh:
        rows = [json.loads(line) for line in fh]
    a = [r for r in rows if r["table"] == "A"]
    if a:
        t = Table("A. pspxdp: gap horizon and clockless (1 Gbit/s veth wire; mix: worst class)",
                  ["load", "mode", "daemon CPU %", "PAUSE/s", "PAUSE share", "classes judged", "burst real MTU",
                   "burst byte MTU", "rate err real %", "rate err byte %", "late wake-ups", "underruns"])
        for r in sorted(a, key=lambda r: (r["load"], ["H=inf", "H=50us", "clockless"].index(r["mode"]))):
            t.add(r["load"], r["mode"], f(r["daemon_cpu_pct"], ".1f"), f(r["pause_per_s"], ".0f"),
                  f"{f(r['pause_share'] and r['pause_share'] * 100, '.1f')} %", r["judged"],
                  f(r["burst_real_mtu"], ".2f"), f(r["burst_byte_mtu"], ".2f"), f(r["rate_err_pct"], "+.3f"),
                  f(r["rate_err_byte_pct"], "+.3f"), f(r["late_wakeups"], "d"), f(r["underruns"], "d"))
        print(t.markdown())
        print("\nA, per class: target -> offered by the sender / got (real time), burst real / byte MTU")
        for r in a:
            print(f"  {r['load']:>4} {r['mode']:<10} " + "; ".join(
                f"{c['target']/1e6:.0f} -> {f(c['offered'] and c['offered']/1e6, '.1f')}/{c['got']/1e6:.2f}"
                f" {c['real']:.2f}/{c['byte']:.2f}" for c in r["classes"]))
    b = [r for r in rows if r["table"] == "B"]
    if b:
        t = Table("B. one flow, real time: pspxdp clockless beside tbf and htb (root qdisc of the veth)",
                  ["rate", "shaper", "burst at target (real time) MTU", "rate err %", "machine CPU cores",
                   "daemon CPU %"])
        for r in b:
            t.add(r["load"], r["mode"], f(r["burst_real_mtu"], ".2f"), f(r["rate_err_pct"], "+.3f"),
                  f(r["machine_cores"], ".2f"), f(r["daemon_cpu_pct"], ".1f"))
        print()
        print(t.markdown())
    c = [r for r in rows if r["table"] == "C"]
    if c:
        t = Table("C. the burst bound, one flow, real time, steady state: pspxdp clockless --burst N MTU beside "
                  "tbf burst N MTU",
                  ["bound", "rate", "shaper", "runs", "burst at target MTU", "rate err % worst", "median",
                   "machine CPU cores", "daemon CPU %", "late_lost ms"],
                  ["min..max over the runs; rate err: the worst run's, sign kept, and the median run's"])

        def key(r: Json) -> tuple[int, str, str]:  # bound, rate, shaper
            return int(r["mode"].split()[1]), r["load"], r["mode"].split()[0]
        keys = list(dict.fromkeys(key(r) for r in c))
        def span(values: list[Any], fmt: str) -> str:
            vals = [v for v in values if v is not None]
            if not vals:
                return "-"
            lo, hi = min(vals), max(vals)
            return format(lo, fmt) if format(lo, fmt) == format(hi, fmt) else f"{format(lo, fmt)}..{format(hi, fmt)}"
        for k in keys:
            if k[1] == "mix":
                continue
            rs = [r for r in c if key(r) == k]
            errs = [r["rate_err_pct"] for r in rs if r["rate_err_pct"] is not None]
            worst = max(errs, key=abs, default=None)
            median = statistics.median(errs) if errs else None
            t.add(k[0], k[1], k[2], len(rs), span([r["burst_real_mtu"] for r in rs], ".2f"), f(worst, "+.3f"),
                  f(median, "+.3f"), span([r["machine_cores"] for r in rs], ".2f"),
                  span([r["daemon_cpu_pct"] for r in rs], ".1f"),
                  span([r["late_lost_ns"] and r["late_lost_ns"] / 1e6 for r in rs], ".2f"))
        print()
        print(t.markdown())
        mix = [r for r in c if r["load"] == "mix"]
        if mix:
            t = Table("C, the three-class mix beside a greedy unclassified flow (pspxdp)",
                      ["bound", "runs", "333 Mbit/s", "77 Mbit/s IPv6", "21.5 Mbit/s random sizes", "offered %",
                       "machine CPU cores", "late_lost ms"],
                      ["per class: rate err % worst run / burst MTU max; offered: the least any run's sender "
                       "offered, % of the target"])
            for mtus in sorted({int(r["mode"].split()[1]) for r in mix}):
                rs = [r for r in mix if int(r["mode"].split()[1]) == mtus]
                cells: list[str] = []
                offered: list[float | None] = []
                for target in (333e6, 77e6, 21.5e6):
                    cl = [x for r in rs for x in r["classes"] if abs(x["target"] - target) < 1]
                    w = max((x["err"] for x in cl), key=abs, default=None)
                    burst = max((x["real"] for x in cl), default=None)
                    cells.append(f"{f(w, '+.3f')} % / {f(burst, '.2f')}")
                    offered.append(min((x["offered"] / x["target"] * 100 for x in cl if x["offered"]), default=None))
                cells.append("/".join(f(o, ".0f") for o in offered))
                t.add(mtus, len(rs), *cells, span([r["machine_cores"] for r in rs], ".2f"),
                      span([r["late_lost_ns"] and r["late_lost_ns"] / 1e6 for r in rs], ".2f"))
            print()
            print(t.markdown())
    drops = [r["capture_drops"] for r in rows if r["capture_drops"]]
    if drops:
        print(f"\ncapture drops in some runs: {drops} (those rows' figures are less certain)")


def main(argv: list[str]) -> int:
    def one_row(*a: str) -> None:
        print(json.dumps(make_row(a[0], a[1], a[2], a[3], float(a[4]), float(a[5]), int(a[6]), int(a[7]),
                                  a[8], a[9], int(a[10]), float(a[11]))))
    return subcommands(__doc__, argv, {
        "row": Sub(("OUT", "TABLE", "MODE", "LOAD", "T0", "T1", "C0", "C1", "K0", "K1", "PID", "SEND_S"), one_row),
        "report": Sub(("ROWS",), report),
    })


if __name__ == "__main__":
    sys.exit(main(sys.argv))
