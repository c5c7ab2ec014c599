#!/usr/bin/env python3
"""bench/run_dp_bench.sh's Python: the sampler (counters over one interval,
as one JSON line) and the report (medians over rounds, as tables or JSON).

  dp_bench.py sample NS DEV PID SECONDS PSPXDP LABEL [EXTRA_JSON]
      (PEER_NS, PEER_DEV: the veth peer whose received frames are counted)
  dp_bench.py rss PID                 the task's VmRSS and VmHWM, kB, as JSON
  dp_bench.py kind FILE KIND          FILE's JSON object with "kind": KIND, one line
  dp_bench.py steer-mask NCPU CPU     every core but CPU as the kernel's cpumask
  dp_bench.py since T0                seconds since the epoch time T0, "%.3f"
  dp_bench.py report RESULTS JSON(0|1) CPU UPTIME FLOWS PORTS [TREE_DEPTH]
"""
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

from psplab.cli import Sub, subcommands

Json = dict[str, Any]


def link_stats(ns: str, dev: str) -> Json:  # the device's stats64 (rx, tx) in namespace ns
    out = subprocess.run(["ip", "-n", ns, "-s", "-j", "link", "show", dev],
                         capture_output=True, text=True, check=True).stdout
    return dict(json.loads(out)[0]["stats64"])


def link_tx(ns: str, dev: str) -> tuple[int, int]:
    tx = link_stats(ns, dev)["tx"]
    return tx["packets"], tx["bytes"]


def link_rx_packets(ns: str | None, dev: str | None) -> int:
    return int(link_stats(ns, dev)["rx"]["packets"]) if ns and dev else 0


def run_ns(pid: int) -> int:  # the task's time on a CPU, ns (exact, where utime/stime are ticks)
    if not pid:
        return 0
    with open(f"/proc/{pid}/schedstat") as f:
        return int(f.read().split()[0])


def stat_fields(pid: int) -> list[str]:  # /proc/PID/stat's fields after the command name (field 3 on)
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()


def watch_cpu(pid: int, seconds: float) -> dict[str, float]:
    """Sleeps SECONDS; where the task was seen (/proc/PID/stat processor), share per CPU.
    A deadline daemon is never pinned: which core it shares decides what it gets."""
    seen: dict[str, int] = {}
    end = time.monotonic() + seconds
    while True:
        left = end - time.monotonic()
        if left <= 0:
            break
        if pid:
            try:
                c = stat_fields(pid)[36]  # processor
                seen[c] = seen.get(c, 0) + 1
            except OSError:
                pass
        time.sleep(min(left, 0.05))
    n = sum(seen.values())
    return {c: k / n for c, k in sorted(seen.items())} if n else {}


def proc_ticks(pid: int) -> tuple[int, int]:
    if not pid:
        return 0, 0
    fields = stat_fields(pid)
    return int(fields[11]), int(fields[12])  # utime, stime


def cpu_ticks() -> tuple[tuple[int, int], dict[str, tuple[int, int, int, int]]]:
    """The machine's busy and total ticks (/proc/stat's cpu line), and per CPU: busy and
    softirq ticks, NET_RX raised (/proc/softirqs), frames the CPU's receive processed
    (/proc/net/softnet_stat: column 0, and its CPU in column 12)."""
    busy: dict[str, int] = {}
    soft: dict[str, int] = {}
    machine = (0, 0)
    with open("/proc/stat") as f:
        for line in f:
            w = line.split()
            if not w[0].startswith("cpu"):
                continue
            v = [int(x) for x in w[1:]]
            if w[0] == "cpu":
                machine = (sum(v) - v[3] - v[4], sum(v))  # idle and iowait are not busy
            else:
                busy[w[0][3:]], soft[w[0][3:]] = sum(v) - v[3] - v[4], v[6]
    net_rx: dict[str, int] = {}
    with open("/proc/softirqs") as f:
        cols = [c[3:] for c in f.readline().split()]
        for line in f:
            w = line.split()
            if w[0] == "NET_RX:":
                net_rx = dict(zip(cols, (int(x) for x in w[1:]), strict=False))
    done: dict[str, int] = {}
    with open("/proc/net/softnet_stat") as f:
        for i, line in enumerate(f):
            w = line.split()
            done[str(int(w[12], 16)) if len(w) > 12 else str(i)] = int(w[0], 16)
    return machine, {c: (busy[c], soft[c], net_rx.get(c, 0), done.get(c, 0)) for c in busy}


def daemon_stats(dev: str) -> dict[str, int]:
    out = subprocess.run(["bpftool", "-j", "map", "lookup", "pinned",
                          f"/sys/fs/bpf/pspxdp/{dev}/daemon_stats", "key", "0", "0", "0", "0"],
                         capture_output=True, text=True, timeout=10).stdout
    try:
        return dict(json.loads(out)["formatted"]["value"])
    except (ValueError, KeyError):
        return {}


def class_tx_bytes(ns: str, pspxdp: str, dev: str, cid: str) -> int:
    out = subprocess.run(["nsenter", f"--net=/run/netns/{ns}", pspxdp, "status", dev, "-j"],
                         capture_output=True, text=True, timeout=20).stdout
    try:
        return sum(int(c["tx_bytes"]) for c in json.loads(out)["classes"] if c["class"] == cid)
    except (ValueError, KeyError):
        return 0


def rss(pid: int) -> dict[str, int]:
    if not pid:
        return {}
    r: dict[str, int] = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM"):
                r[k] = int(v.split()[0])
    return r


Reading = tuple[float, int, int, int, int, int, int, dict[str, tuple[int, int, int, int]], int, int]


def reading(ns: str, dev: str, pid: int, peer_ns: str | None, peer: str | None) -> Reading:
    """The counters at one end of an interval: the time; DEV's TX packets and
    bytes; the daemon's utime and stime; the machine's busy and total ticks
    and the per-CPU ones (cpu_ticks); the daemon's run time; the peer's RX
    packets."""
    t = time.monotonic()
    p, b = link_tx(ns, dev)
    u, k = proc_ticks(pid)
    (m, a), q = cpu_ticks()
    return t, p, b, u, k, m, a, q, run_ns(pid), link_rx_packets(peer_ns, peer)


def sample(ns: str, dev: str, pid_arg: str, seconds: float, pspxdp: str, label: str, extra: str) -> None:
    hz = os.sysconf("SC_CLK_TCK")
    peer_ns, peer = os.environ.get("PEER_NS"), os.environ.get("PEER_DEV")
    pid = int(pid_arg) if pid_arg else 0
    paced = label.startswith("cpu_pspxdp")  # one class, 1:1: its own byte count
    d0 = daemon_stats(dev) if pid else {}
    # The class's bytes over the status calls' own midpoints: a call takes
    # tens of ms, which over the interval's dt alone read as rate (+2.6 %
    # at 1 s, seen).
    s0 = time.monotonic()
    c0 = class_tx_bytes(ns, pspxdp, dev, "1:1") if paced else 0
    s0 = (s0 + time.monotonic()) / 2
    t0, p0, b0, u0, k0, m0, a0, q0, n0, x0 = reading(ns, dev, pid, peer_ns, peer)
    on_cpus = watch_cpu(pid, seconds)
    t1, p1, b1, u1, k1, m1, a1, q1, n1, x1 = reading(ns, dev, pid, peer_ns, peer)
    d1 = daemon_stats(dev) if pid else {}
    s1 = time.monotonic()
    c1 = class_tx_bytes(ns, pspxdp, dev, "1:1") if paced else 0
    s1 = (s1 + time.monotonic()) / 2
    dt = t1 - t0

    def dd(k: str) -> int:
        return d1.get(k, 0) - d0.get(k, 0)
    real = dd("wire_frames")
    r: Json = {"kind": label, "seconds": dt, "tx_packets": p1 - p0, "fps": (p1 - p0) / dt,
         # DEV's L2 bytes with FCS: what a class rate counts (real frames only
         # without the daemon; with it, real = wire_frames' share below)
         "dev_l2_gbit": ((b1 - b0) + 4 * (p1 - p0)) * 8 / dt / 1e9,
         "daemon_cpu_pct": (u1 - u0 + k1 - k0) / hz / dt * 100,
         "daemon_user_pct": (u1 - u0) / hz / dt * 100,
         "daemon_run_pct": (n1 - n0) / 1e9 / dt * 100,
         "peer_rx_fps": (x1 - x0) / dt,
         "daemon_on_cpus": on_cpus,
         "machine_cpu_pct": (m1 - m0) / (a1 - a0) * 100 * (os.cpu_count() or 1) if a1 > a0 else 0,
         "real_fps": real / dt,
         "paced_gbit": (c1 - c0) * 8 / (s1 - s0) / 1e9,
         "kicks_per_frame": dd("kicks") / (p1 - p0) if p1 > p0 else None,
         "underrun_s": dd("underrun_bytes") * 8 / 1e9 / dt if pid else None,
         "rss": rss(pid),
         # where the veth peer's receive ran (the split, --steer-rx)
         "per_cpu": {c: {"busy_pct": (q1[c][0] - q0[c][0]) / hz / dt * 100,
                         "softirq_pct": (q1[c][1] - q0[c][1]) / hz / dt * 100,
                         "net_rx_per_s": (q1[c][2] - q0[c][2]) / dt,
                         "rx_frames_per_s": (q1[c][3] - q0[c][3]) / dt} for c in q1 if c in q0}}
    r.update(json.loads(extra))
    print(json.dumps(r))


def f(v: Any, fmt: str) -> str:
    return "-" if v is None else fmt.format(v)


def report(results: str, as_json: bool, cpu: int, up: str, flows: str, ports: int, depth: int = 1) -> None:
    with open(results) as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    def of(kind: str, key: str) -> list[Any]:
        return [r[key] for r in rows if r["kind"] == kind and r.get(key) is not None]
    def med(kind: str, key: str) -> Any:
        v = of(kind, key)
        return statistics.median(v) if v else None
    def median(v: list[Any]) -> Any:
        v = [x for x in v if x is not None]
        return statistics.median(v) if v else None
    def rounds(kind: str) -> list[float]:  # the mean of before/after the daemon, each round
        v = of(kind, "fps")
        return [(v[2 * i] + v[2 * i + 1]) / 2 for i in range(len(v) // 2)]
    d, b32 = of("daemon_max", "fps"), rounds("bare1514")
    budget = next((r["budget"] for r in rows if r["kind"].startswith("bare1514b")), 32)
    b = rounds(f"bare1514b{budget}") if budget != 32 else b32  # like for like: the daemon's budget
    ratios = [x / y for x, y in zip(d, b, strict=False) if y]
    ratios32 = [x / y for x, y in zip(d, b32, strict=False) if y]
    idle = med("idle", "machine_cpu_pct") or 0

    # Part 2: one row per (shaper, clock, variant, rate), medians over rounds.
    def paced(r: Json) -> float:  # Gbit/s: the class's own bytes (pspxdp), DEV's L2 bytes (qdiscs)
        return float(r["paced_gbit"] if r["kind"].startswith("cpu_pspxdp") else r["dev_l2_gbit"])
    idle_of = {r["round"]: r["machine_cpu_pct"] for r in rows if r["kind"] == "idle" and "round" in r}
    def per_gbit(r: Json) -> float | None:  # machine CPU % (net of the round's idle baseline) per paced Gbit/s
        return float(r["machine_cpu_pct"] - idle_of.get(r["round"], idle)) / paced(r) if paced(r) > 0 else None
    def samples(kind: str, rate: int, clock: str | None = None) -> list[Json]:
        return [r for r in rows if r["kind"] == kind and r.get("rate_mbit") == rate
                and (clock is None or r.get("clock") == clock)]
    tbf_per = {(r["round"], r["rate_mbit"]): per_gbit(r) for r in rows if r["kind"] == "cpu_tbf"}
    def others_pct(r: Json, key: str) -> float:
        return float(sum(v[key] for c, v in r.get("per_cpu", {}).items() if int(c) != cpu))
    def summarise(kind: str, rate: int, clock: str | None) -> Json | None:
        s = samples(kind, rate, clock)
        if not s:
            return None
        vs = [p / t for r in s if (p := per_gbit(r)) is not None and (t := tbf_per.get((r["round"], rate)))]
        p = median([per_gbit(r) for r in s])
        ours = kind.startswith("cpu_pspxdp")

        def here(r: Json, key: str) -> Any:
            return r.get("per_cpu", {}).get(str(cpu), {}).get(key)
        return {"rate_mbit": rate, "offered_mbit": s[0]["offered_mbit"], "rounds": len(s),
                "paced_gbit": median([paced(r) for r in s]),
                "machine_cpu_pct": median([r["machine_cpu_pct"] for r in s]),
                "machine_cpu_pct_per_gbit": p,
                "cores_per_gbit": p / 100 if p is not None else None,
                "daemon_cpu_pct": median([r["daemon_cpu_pct"] for r in s]) if ours else None,
                "daemon_user_pct": median([r["daemon_user_pct"] for r in s]) if ours else None,
                "daemon_run_pct": median([r.get("daemon_run_pct") for r in s]) if ours else None,
                "fps": median([r["fps"] for r in s]),
                "peer_rx_fps": median([r.get("peer_rx_fps") for r in s]),
                "vs_tbf": median(vs),
                # per round: the paced Mbit/s and the core the daemon was seen on most
                "per_round": [{"round": r["round"], "paced_mbit": paced(r) * 1e3,
                               "daemon_on_cpus": r.get("daemon_on_cpus", {})} for r in s],
                # where the softirq work ran: the daemon's core and the others
                "softirq_pct_cpu": median([here(r, "softirq_pct") for r in s]),
                "softirq_pct_others": median([others_pct(r, "softirq_pct") for r in s]),
                "net_rx_per_s_cpu": median([here(r, "net_rx_per_s") for r in s]),
                "net_rx_per_s_others": median([others_pct(r, "net_rx_per_s") for r in s]),
                "rx_frames_per_s_cpu": median([here(r, "rx_frames_per_s") for r in s]),
                "rx_frames_per_s_others": median([others_pct(r, "rx_frames_per_s") for r in s]),
                "busy_pct_cpu": median([here(r, "busy_pct") for r in s])}
    rates = sorted({r["rate_mbit"] for r in rows if "rate_mbit" in r})
    cpu_rows: list[Json] = []
    split: list[Json] = []
    for rate in rates:
        for kind, clock, shaper, variant in (
                ("cpu_pspxdp", "byte", "pspxdp", "default"), ("cpu_pspxdp_spin", "byte", "pspxdp", "spin"),
                ("cpu_pspxdp", "none", "pspxdp", "default"), ("cpu_pspxdp_spin", "none", "pspxdp", "spin"),
                ("cpu_tbf", None, "tbf", "burst 32kb"), ("cpu_htb", None, "htb", "burst 32kb")):
            row = summarise(kind, rate, clock)
            if row:
                cpu_rows.append({**row, "shaper": shaper, "clock": clock, "variant": variant})
        for clock in ("byte", "none"):
            pinned, steered = (summarise(k, rate, clock) for k in ("cpu_pspxdp_pinned", "cpu_pspxdp_steered"))
            if pinned is not None and steered is not None:
                split.append({"rate_mbit": rate, "clock": clock, "pinned": pinned, "steered": steered,
                              "daemon_run_pct_moved": pinned["daemon_run_pct"] - steered["daemon_run_pct"],
                              # the check that RPS moved the receive, whatever the daemon's CPU did:
                              # C's receive processed fewer frames, the other cores' more
                              "steer_moved_rx":
                                  (steered["rx_frames_per_s_others"] or 0) > (pinned["rx_frames_per_s_others"] or 0)
                                  and (steered["rx_frames_per_s_cpu"] or 0) < (pinned["rx_frames_per_s_cpu"] or 0)})
    # The first report's shape: the byte clock's rows at the highest rate, keyed by kind.
    top = rates[-1] if rates else None
    legacy: dict[str, Json] = {}
    for kind in ("cpu_pspxdp", "cpu_pspxdp_spin", "cpu_tbf", "cpu_htb"):
        top_row = summarise(kind, top, "byte" if kind.startswith("cpu_pspxdp") else None) if top else None
        legacy[kind] = {k: (top_row or {}).get(k) for k in ("paced_gbit", "machine_cpu_pct", "daemon_cpu_pct",
                                                      "machine_cpu_pct_per_gbit")}
    scale: dict[int, Json] = {}
    for r in rows:
        if r["kind"] in ("scale", "scale_times"):
            scale.setdefault(r["classes"], {}).update(r)
    summary: Json = {"daemon_core": cpu, "uptime": up.strip(), "idle_machine_cpu_pct": idle,
               "flows": flows, "ports": ports, "tree_depth": depth,
               "tx_budget": budget,
               "bare_1514_mpps": statistics.median(b) / 1e6 if b else None,
               "bare_1514_default_budget_mpps": statistics.median(b32) / 1e6 if b32 else None,
               "bare_60_mpps": (med("bare60", "fps") or 0) / 1e6,
               "daemon_mpps": (med("daemon_max", "fps") or 0) / 1e6,
               "ratio": statistics.median(ratios) if ratios else None, "ratios": ratios,
               "ratio_default_budget": statistics.median(ratios32) if ratios32 else None,
               "target_ratio": 0.95, "daemon_max_cpu_pct": med("daemon_max", "daemon_cpu_pct"),
               "daemon_max_kicks_per_frame": med("daemon_max", "kicks_per_frame"),
               "cpu": legacy, "cpu_rows": cpu_rows, "cpu_split": split,
               "scale": [scale[k] for k in sorted(scale)],
               "samples": rows}
    if as_json:
        print(json.dumps(summary))
        return

    if d or b32:
        print(f"pspxdp data path, one core (CPU {cpu}), veth, copy-mode AF_XDP; medians of {len(b)} rounds; "
              f"classes with flows {flows}, {ports} UDP flow(s) offered")
        if depth > 1:
            print(f"the flat-out class is the leaf 1:{depth} of a tree of depth {depth} (rate 2gbit ceil 4gbit "
                  "under 1:1 at 4gbit): half its frames guaranteed, half borrowed")
        print(f"{'':36} {'Mpps':>8}  per round")
        print(f"{'bare AF_XDP TX loop, 1514 B':36} {f(summary['bare_1514_default_budget_mpps'], '{:.3f}'):>8}  "
              + " ".join(f"{x/1e6:.3f}" for x in b32) + "  (mean of before/after the daemon; 32 a kick)")
        if budget != 32:
            print(f"{f'  the same, {budget} a kick as the daemon':36} {f(summary['bare_1514_mpps'], '{:.3f}'):>8}  "
                  + " ".join(f"{x/1e6:.3f}" for x in b))
        print(f"{'bare AF_XDP TX loop, 60 B':36} {f(summary['bare_60_mpps'], '{:.3f}'):>8}")
        print(f"{'daemon flat out, real + gap frames':36} {f(summary['daemon_mpps'], '{:.3f}'):>8}  "
              + " ".join(f"{x/1e6:.3f}" for x in d))
        print(f"{f'ratio daemon / bare, {budget} a kick (>= 0.95)':36} {f(summary['ratio'], '{:.3f}'):>8}  "
              + " ".join(f"{x:.3f}" for x in ratios))
        if budget != 32:
            print(f"{'  against the bare loop at 32 a kick':36} "
                  f"{f(summary['ratio_default_budget'], '{:.3f}'):>8}  " + " ".join(f"{x:.3f}" for x in ratios32))
        print(f"  daemon: {f(summary['daemon_max_cpu_pct'], '{:.0f}')}% CPU, "
              f"{f(summary['daemon_max_kicks_per_frame'], '{:.3f}')} kicks per frame")
        print()
    names = {("byte", "default"): "pspxdp byte clock", ("byte", "spin"): "pspxdp byte clock --spin",
             ("none", "default"): "pspxdp clockless", ("none", "spin"): "pspxdp clockless --spin"}
    if cpu_rows:
        print(f"CPU per paced Gbit/s: line 1gbit, one class at R offered min(1.3 R, R + 200); medians of "
              f"{max(r['rounds'] for r in cpu_rows)} rounds; machine = busy % of all cores; cores/Gbit net of "
              f"each round's idle baseline (median {idle:.0f}%); pspxdp as attach starts it (--sched deadline)")
        print(f"  {'R Mbit/s':>8}  {'shaper':26} {'paced Mbit/s':>12} {'frames/s':>8} {'machine %':>9} "
              f"{'cores/Gbit':>10} {'daemon %':>8} {'vs tbf':>6}  per round: Mbit/s @ the daemon's core")
        for s in cpu_rows:
            what = names.get((s["clock"], s["variant"]), f"{s['shaper']} {s['variant']}")
            print(f"  {s['rate_mbit']:>8}  {what:26} {f(s['paced_gbit'] and s['paced_gbit'] * 1e3, '{:.1f}'):>12} "
                  f"{f(s['fps'], '{:.0f}'):>8} {f(s['machine_cpu_pct'], '{:.0f}'):>9} "
                  f"{f(s['cores_per_gbit'], '{:.2f}'):>10} {f(s['daemon_run_pct'], '{:.1f}'):>8} "
                  f"{f(s['vs_tbf'], '{:.2f}'):>6}  " + " ".join(
                      f"{x['paced_mbit']:.1f}" + (f"@{max(x['daemon_on_cpus'], key=x['daemon_on_cpus'].get)}"
                                                  if x["daemon_on_cpus"] else "") for x in s["per_round"]))
        print("  frames/s: on DEV (real + gap frames); daemon %: its time on a CPU (schedstat), the peer's "
              "receive included; vs tbf: cores/Gbit over tbf's, same rate and round")
        print()
    if split:
        print(f"The split: the daemon SCHED_FIFO pinned to CPU {cpu}; the veth peer's receive on its core "
              f"(inside its sendto()), or steered by RPS to the other cores; per core: softirq %, "
              f"frames received (softnet_stat)")
        print(f"  {'R Mbit/s':>8}  {'clock':9} {'peer rx':8} {'rx fr/s':>8} {'daemon %':>8} {'user %':>6} "
              f"{'machine %':>9} {'cores/Gbit':>10} {'softirq % C':>11} {'others':>6} {'rx fr/s C':>9} {'others':>8}")
        for s in split:
            for label, x in (("on C", s["pinned"]), ("steered", s["steered"])):
                print(f"  {s['rate_mbit']:>8}  {'byte' if s['clock'] == 'byte' else 'clockless':9} {label:8} "
                      f"{f(x['peer_rx_fps'], '{:.0f}'):>8} "
                      f"{f(x['daemon_run_pct'], '{:.1f}'):>8} {f(x['daemon_user_pct'], '{:.1f}'):>6} "
                      f"{f(x['machine_cpu_pct'], '{:.0f}'):>9} {f(x['cores_per_gbit'], '{:.2f}'):>10} "
                      f"{f(x['softirq_pct_cpu'], '{:.1f}'):>11} {f(x['softirq_pct_others'], '{:.1f}'):>6} "
                      f"{f(x['rx_frames_per_s_cpu'], '{:.0f}'):>9} {f(x['rx_frames_per_s_others'], '{:.0f}'):>8}")
        for s in split:
            p, q = s["pinned"], s["steered"]
            print(f"  {s['rate_mbit']} Mbit/s {'byte clock' if s['clock'] == 'byte' else 'clockless'}: the steer "
                  + ("moved" if s["steer_moved_rx"] else "did NOT move")
                  + f" the receive: frames/s received on CPU {cpu} {p['rx_frames_per_s_cpu']:.0f} -> "
                  f"{q['rx_frames_per_s_cpu']:.0f}, on the others {p['rx_frames_per_s_others']:.0f} -> "
                  f"{q['rx_frames_per_s_others']:.0f}, NET_RX raised on CPU {cpu} {p['net_rx_per_s_cpu']:.0f} -> "
                  f"{q['net_rx_per_s_cpu']:.0f}/s "
                  f"(the peer received {q['peer_rx_fps']:.0f} frames/s); the daemon: "
                  f"{p['daemon_run_pct']:.1f} % of a CPU with the receive on its core, "
                  f"{q['daemon_run_pct']:.1f} % with it steered away; softirq time on CPU {cpu} with the "
                  f"receive there (the receive's own cost, tick-sampled): {p['softirq_pct_cpu']:.1f} % of a core")
        print()
    if summary["scale"]:
        print("class scaling: line 100gbit, the daemon flat out; RSS with a 128 MiB buffer")
        print(f"  {'classes':>8} {'backlogged':>10} {'Mpps':>7} {'daemon %':>9} {'RSS kB':>9} "
              f"{'attach s':>9} {'class set s':>11} {'re-attach s':>11} {'detach s':>9}")
        for s in summary["scale"]:
            print(f"  {s['classes']:>8} {s.get('backlogged', 0):>10} {s.get('fps', 0) / 1e6:>7.3f} "
                  f"{s.get('daemon_cpu_pct', 0):>9.0f} {s.get('rss', {}).get('VmRSS', 0):>9} "
                  f"{s.get('attach_s', 0):>9.2f} {s.get('class_set_s', 0):>11.2f} "
                  f"{s.get('reattach_s', 0):>11.2f} {s.get('detach_s', 0):>9.2f}")
        sc = [s for s in summary["scale"] if s.get("rss")]
        if len(sc) >= 2:
            a, z = sc[0], sc[-1]
            per = (z["rss"]["VmRSS"] - a["rss"]["VmRSS"]) * 1024 / (z["classes"] - a["classes"])
            print(f"  RSS per class: {per:.0f} bytes ({a['classes']} -> {z['classes']} classes)")
        print()
    print(up.strip())


def steer_mask(n: int, c: int) -> str:
    h = f"{((1 << n) - 1) & ~(1 << c):x}"
    h = h.zfill((len(h) + 7) // 8 * 8)
    return ",".join(h[i:i + 8] for i in range(0, len(h), 8))


def kind(path: str, name: str) -> None:
    with open(path) as fh:
        d = json.load(fh)
    d["kind"] = name
    print(json.dumps(d))


def main(argv: list[str]) -> int:
    return subcommands(__doc__, argv, {
        "sample": Sub(("NS", "DEV", "PID", "SECONDS", "PSPXDP", "LABEL", "EXTRA"),
                      lambda ns, dev, pid, s, pspxdp, label, extra="{}": sample(ns, dev, pid, float(s), pspxdp, label,
                                                                                 extra),
                      optional=1),
        "rss": Sub(("PID",), lambda pid: print(json.dumps(rss(int(pid))))),
        "kind": Sub(("FILE", "KIND"), kind),
        "steer-mask": Sub(("CPUS", "CPU"), lambda n, c: print(steer_mask(int(n), int(c)))),
        "since": Sub(("T0",), lambda t0: print(f"{time.time() - float(t0):.3f}")),
        "report": Sub(("RESULTS", "JSON", "CPU", "UPTIME", "FLOWS", "PORTS", "TREE_DEPTH"),
                      lambda r, j, cpu, up, flows, ports, depth="1": report(r, j == "1", int(cpu), up, flows,
                                                                             int(ports), int(depth)),
                      optional=1),
    })


if __name__ == "__main__":
    sys.exit(main(sys.argv))
