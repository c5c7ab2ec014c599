#!/usr/bin/env python3
"""test_lab_delay's verdict on its two runs of the delay line (lab/psp_delay):
accuracy (probes through 20 ms) and memory (a flood into a 64 KiB buffer).

  verdict_lab_delay.py TMP
      TMP/NAME.delay.json, NAME.sink.json, NAME.send.json for NAME acc and
      mem, and TMP/mem.hwm (the delay line's VmHWM, kB)
"""
import sys
from typing import Any

from verdict import check, load


def run(tmp: str, n: str) -> tuple[Any, Any, Any]:
    return load(f"{tmp}/{n}.delay.json"), load(f"{tmp}/{n}.sink.json")["7001"], load(f"{tmp}/{n}.send.json")


def judge(tmp: str) -> None:
    d, s, t = run(tmp, "acc")
    setting_us = d["delay_ns"] / 1e3
    err50 = s["owd_p50_us"] - setting_us
    print(f"  accuracy: delay {setting_us/1e3:.0f} ms, {s['owd_samples']} probes: one-way delay - setting: "
          f"median {err50:+.1f} us, mean {s['owd_mean_us'] - setting_us:+.1f} us, "
          f"p99 {s['owd_p99_us'] - setting_us:+.1f} us, max {s['owd_max_us'] - setting_us:+.1f} us; "
          f"min {s['owd_min_us'] - setting_us:+.1f} us")
    print(f"  the delay line's own lateness (send time - due): mean {d['late_mean_us']:.1f} us, "
          f"p50 <= {d['late_p50_us']:.0f} us, p99 <= {d['late_p99_us']:.0f} us, max {d['late_max_us']:.0f} us")
    check(f"probes went through: sent {t['sent']}, received {s['datagrams']}",
          t["sent"] > 1000 and s["datagrams"] == t["sent"])
    check(f"never early: min one-way delay {s['owd_min_us']:.1f} us >= setting", s["owd_min_us"] >= setting_us - 1)
    check(f"no reorder ({s['reordered']}), no loss ({s['lost']}) through the delay line",
          s["reordered"] == 0 and s["lost"] == 0)
    check("no drop counted by the delay line: " + ", ".join(f"{k} {d[k]}" for k in
          ("drop_buffer_full", "drop_too_big", "send_errors", "drop_socket")),
          d["drop_buffer_full"] == d["drop_too_big"] == d["send_errors"] == d["drop_socket"] == 0)

    d, s, t = run(tmp, "mem")
    with open(f"{tmp}/mem.hwm") as f:
        hwm = int(f.read().strip() or 0)
    dropped = d["drop_buffer_full"] + d["drop_too_big"] + d["send_errors"] + d["drop_socket"] + d["queued_at_exit"]
    print(f"  flood: sent {t['sent']}, delay line received {d['received']} (+{d['drop_socket']} dropped by its "
          f"socket), forwarded {d['forwarded']}, buffer full {d['drop_buffer_full']}; sink got {s['datagrams']}; "
          f"queue max {d['max_queue_bytes']} B of {d['buffer_bytes']}; VmHWM {hwm} kB")
    check(f"the buffer overflowed and counted it ({d['drop_buffer_full']} dropped)", d["drop_buffer_full"] > 0)
    check(f"the queue never held more than the buffer ({d['max_queue_bytes']} <= {d['buffer_bytes']})",
          d["max_queue_bytes"] <= d["buffer_bytes"])
    check(f"resident memory bounded: VmHWM {hwm} kB <= 16 MiB", 0 < hwm <= 16 * 1024)
    check(f"every frame accounted: received {d['received']} + socket drops {d['drop_socket']} = "
          f"forwarded {d['forwarded']} + dropped {dropped - d['drop_socket']}",
          d["received"] + d["drop_socket"] == d["forwarded"] + dropped)
    check(f"every datagram sent reached the sink or a drop counter: sent {t['sent']} = received "
          f"{s['datagrams']} + dropped {dropped}", t["sent"] == s["datagrams"] + dropped)
    check(f"no reorder under overflow ({s['reordered']})", s["reordered"] == 0)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    judge(argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
