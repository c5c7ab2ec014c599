#!/usr/bin/env python3
"""Counters for the soak: one JSON snapshot of everything that counts a frame
on its way from the senders to the sinks, and the balance between two.

  account.py snap DEV SRC_NS DST_NS > snap.json
  account.py balance before.json after.json sent.json... -- sink.json
      prints the balance; exit 1 if frames went missing uncounted
  account.py drain-seconds    stdin: status -j; how long the pacer may take
      to drain: its longest backlog in time at its class's rate, + 5 s
  account.py classes          stdin: status -j; each class's state and
      counts, and the daemon's losses, one line each (why it did not drain)

Counted drops are read from the pins by their BTF names (bpftool): the
pacer's per-class drop_* counters, the daemon's device-wide ones
(died_in_rings, socket_ring_full, ...), XDP's no_socket, plus the pacer
veths' and the receiver's kernel counters."""
import json
import math
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

PIN = "/sys/fs/bpf/pspxdp/"


def load(path: str) -> Any:
    with open(path) as f:
        return json.load(f)


def bpftool_dump(dev: str, name: str) -> list[dict[str, Any]]:
    """The pinned map's entries; none if it is not there (a missing pin
    counts nothing)."""
    try:
        out = subprocess.run(["bpftool", "-j", "map", "dump", "pinned", PIN + dev + "/" + name],
                             capture_output=True, text=True, timeout=10)
        entries = json.loads(out.stdout) if out.returncode == 0 else []
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return []
    return entries if isinstance(entries, list) else []


def values(entries: list[dict[str, Any]]) -> Iterator[tuple[Any, Any]]:
    """Every formatted value (per-CPU values summed) of a bpftool dump."""
    for e in entries:
        f = e.get("formatted", e)
        if "values" in f:  # per-CPU
            total: dict[str, int] = {}
            for v in f["values"]:
                val = v.get("value")
                if isinstance(val, dict):
                    for k, x in val.items():
                        if isinstance(x, int):
                            total[k] = total.get(k, 0) + x
                elif isinstance(val, int):
                    total["value"] = total.get("value", 0) + val
            yield f.get("key"), total
        else:
            yield f.get("key"), f.get("value")


# Pacer counters that mean "a frame the pacer took in and did not send".
DROP_FIELDS = {"drop_limit", "drop_overflow", "drop_deleted", "drop_shutdown",
               "drop_died", "drop_invalid", "drop_aqm"}
# (daemon_stats.no_socket mirrors xdp_stats.no_socket: counted once, from XDP.)
DAEMON_DROP_FIELDS = {"socket_ring_full", "socket_fill_empty", "unknown_class", "died_in_rings"}


def snap(dev: str, src: str, dst: str) -> dict[str, int]:
    s = {"pacer_drops": 0, "daemon_drops": 0, "xdp_no_socket": 0, "accounting_failures": 0}
    for _, v in values(bpftool_dump(dev, "pacer_stats")):
        if isinstance(v, dict):
            s["pacer_drops"] += sum(x for k, x in v.items() if k in DROP_FIELDS and isinstance(x, int))
    for _, v in values(bpftool_dump(dev, "daemon_stats")):
        if isinstance(v, dict):
            s["daemon_drops"] += sum(x for k, x in v.items() if k in DAEMON_DROP_FIELDS)
            s["accounting_failures"] += v.get("accounting_failures", 0)
    for _, v in values(bpftool_dump(dev, "xdp_stats")):
        if isinstance(v, dict):
            s["xdp_no_socket"] += v.get("no_socket", 0)
    links = json.loads(subprocess.run(["ip", "-n", src, "-s", "-j", "link", "show"],
                                      capture_output=True, text=True).stdout or "[]")
    # Transmit drops of every veth on the sending side: into the pacer veth
    # (its peer's queue full) and onto the wire (the receiver's backlog
    # full). Not the receive drops of the pacer's b end: those are frames
    # XDP could not hand to a socket, which the socket counters (pacer
    # drops) have already counted.
    s["veth_drops"] = sum(link["stats64"]["tx"]["dropped"] for link in links)
    snmp = subprocess.run(["ip", "netns", "exec", dst, "cat", "/proc/net/snmp"],
                          capture_output=True, text=True).stdout.splitlines()

    def table(proto: str) -> dict[str, int]:
        rows = [line.split()[1:] for line in snmp if line.startswith(proto + ":")]
        return dict(zip(rows[0], map(int, rows[1]), strict=True)) if len(rows) == 2 else {}

    u, ip = table("Udp"), table("Ip")
    # The receiving host's own drops: socket buffer and checksum errors
    # (InErrors holds both), IP header/address errors and discards.
    s["rcv_drops"] = u.get("InErrors", 0) + ip.get("InHdrErrors", 0) + \
        ip.get("InAddrErrors", 0) + ip.get("InDiscards", 0)
    # Frames that reached the receiver after its sink had closed (a backlog
    # still draining): delivered, not lost.
    s["rcv_late"] = u.get("NoPorts", 0)
    return s


COUNTED = ["pacer_drops", "daemon_drops", "xdp_no_socket", "veth_drops", "rcv_drops", "rcv_late"]



def balance(before: str, after: str, senders: list[str], sinks: list[str]) -> int:
    sent = sum(load(f)["sent"] for f in senders)
    got = sum(p["datagrams"] for f in sinks for p in load(f).values())
    b, a = load(before), load(after)
    counted = {k: a.get(k, 0) - b.get(k, 0) for k in COUNTED}
    missing: int = sent - got - sum(counted.values())
    per_port: dict[str, list[int]] = {}
    for f in senders:
        port = f.rsplit(".", 1)[1]
        per_port[port] = [load(f)["sent"], 0]
    for f in sinks:
        for port, p in load(f).items():
            per_port.setdefault(port, [0, 0])[1] = p["datagrams"]
    print(json.dumps({"sent": sent, "received": got, "counted_drops": counted,
                      "per_port_sent_received": per_port,
                      "uncounted": missing,
                      "accounting_failures": a.get("accounting_failures", 0)}))
    return missing


def drain_seconds(d: dict[str, Any]) -> int:
    seconds = [c["backlog_bytes"] * 8 / c["rate_bps"] for c in d["classes"] if c.get("rate_bps")]
    return 5 + math.ceil(float(max([*seconds, 0])))


def classes(d: dict[str, Any]) -> None:
    for c in d["classes"]:
        print("     ", c["class"], c["state"], "backlog", c["backlog_frames"], "rx", c["rx_frames"], "tc",
              c["tc_frames"], "passed", c["tc_passed"])
    print("     ", {k: d["daemon"][k] for k in ("rx_frames", "socket_ring_full", "socket_fill_empty",
                                                 "died_in_rings")}, d["xdp"])


if __name__ == "__main__":
    if sys.argv[1] == "snap":
        print(json.dumps(snap(*sys.argv[2:5])))
    elif sys.argv[1] == "drain-seconds":
        print(drain_seconds(json.load(sys.stdin)))
    elif sys.argv[1] == "classes":
        classes(json.load(sys.stdin))
    else:
        args = sys.argv[2:]
        cut = args.index("--")
        missing = balance(args[0], args[1], args[2:cut], args[cut + 1:])
        sys.exit(0 if missing == 0 else 1)
