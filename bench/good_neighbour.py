#!/usr/bin/env python3
"""bench/run_good_neighbour.sh's Python: the CPU-bound job, one set-up's
result (one JSON line) and the table over every result.

  good_neighbour.py job
      a fixed amount of work; prints its wall-clock seconds
  good_neighbour.py row SRV CLI LABEL MODE RATE ALONE BUSY RCVBUF K0 K1 T0 T1 HZ
      SRV, CLI: iperf3 -J of the server and the client; RATE: Mbit/s;
      ALONE, BUSY: the job's seconds alone and beside the traffic; RCVBUF:
      the receiver's UdpRcvbufErrors over the run; K0, K1: the daemon's
      utime + stime ticks (0: no daemon); T0, T1: the sender's start and
      end (s); HZ: ticks per second
  good_neighbour.py report RESULTS JSON(0|1) UPTIME_BEFORE UPTIME_AFTER
"""
import json
import sys
import time
from typing import Any

from psplab.cli import Sub, subcommands

Json = dict[str, Any]
WIRE = 1472 + 8 + 20 + 14 + 4  # a datagram's L2 bytes with FCS


def job() -> str:
    t = time.perf_counter()
    s = 0
    for i in range(30_000_000):
        s += i ^ (i >> 3)
    return f"{time.perf_counter() - t:.4f}"


def load(path: str) -> Json:
    """iperf3 -J's JSON after whatever it printed before it; {} if none."""
    with open(path) as fh:
        text = fh.read()
    try:
        d: Json = json.loads(text[text.find("{"):])
    except ValueError:
        return {}
    return d


def row(srv_f: str, cli_f: str, label: str, mode: str, rate: str, alone: float, busy: float, rcvbuf: int,
        k0: int, k1: int, t0: float, t1: float, hz: int) -> Json:
    srv, cli = load(srv_f), load(cli_f)
    s = srv.get("end", {}).get("sum", {})
    secs = s.get("seconds") or 1
    got = s.get("packets", 0) - s.get("lost_packets", 0)
    sent = cli.get("end", {}).get("sum_sent", {})
    return {
        "setup": label, "mode": mode, "rate_mbit": int(rate),
        "rx_l2_bps": got * WIRE * 8 / secs, "rx_pct": got * WIRE * 8 / secs / (int(rate) * 1e6) * 100,
        "lost_pct": s.get("lost_percent", 0), "rcvbuf_errors": rcvbuf,
        "sent_pct": sent.get("bits_per_second", 0) / (int(rate) * 1e6) * 100,
        "job_alone_s": alone, "job_s": busy, "job_loss_pct": (busy / alone - 1) * 100,
        "daemon_cpu_pct": (k1 - k0) / hz / (t1 - t0) * 100 if k1 else None}


def report(results: str, as_json: bool, up0: str, up1: str) -> None:
    with open(results) as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    if as_json:
        print(json.dumps({"uptime_before": up0.strip(), "uptime_after": up1.strip(), "setups": rows}))
        return
    print("good neighbour: iperf3 UDP at the class's rate to a receiver on the same host, a CPU-bound job beside")
    print(f"{'clock':9} {'rate':>5} {'set-up':26} {'receiver %':>10} {'lost %':>7} {'rcvbuf':>7} "
          f"{'sender %':>8} {'job loss %':>10} {'daemon CPU %':>12}")
    for r in rows:
        cpu = "-" if r["daemon_cpu_pct"] is None else f"{r['daemon_cpu_pct']:.1f}"
        print(f"{r['mode']:9} {r['rate_mbit']:>5} {r['setup']:26} {r['rx_pct']:>10.1f} {r['lost_pct']:>7.1f} "
              f"{r['rcvbuf_errors']:>7} {r['sent_pct']:>8.1f} {r['job_loss_pct']:>10.1f} {cpu:>12}")
    print("receiver %: L2 bytes (FCS) of the datagrams received, % of the class rate; rcvbuf: the "
          "receiver's UdpRcvbufErrors; sender %: iperf3's sent payload, % of the offered rate; "
          "job loss: its time against the job alone, %")
    print("before:", up0.strip())
    print("after: ", up1.strip())


def main(argv: list[str]) -> int:
    def one_row(*a: str) -> None:
        print(json.dumps(row(a[0], a[1], a[2], a[3], a[4], float(a[5]), float(a[6]), int(a[7]), int(a[8]),
                             int(a[9]), float(a[10]), float(a[11]), int(a[12]))))
    return subcommands(__doc__, argv, {
        "job": Sub((), lambda: print(job())),
        "row": Sub(("SERVER_JSON", "CLIENT_JSON", "LABEL", "MODE", "RATE", "ALONE", "BUSY", "RCVBUF_ERRORS",
                    "K0", "K1", "T0", "T1", "HZ"), one_row),
        "report": Sub(("RESULTS", "JSON", "LOAD0", "LOAD1"), lambda r, j, l0, l1: report(r, j == "1", l0, l1)),
    })


if __name__ == "__main__":
    sys.exit(main(sys.argv))
