#!/usr/bin/env python3
"""test_dp_restart's figures.

  dp_restart.py link-drops            stdin: `ip -s -j link show`'s output
      (one JSON array per line); prints the rx + tx drops of every link
  dp_restart.py verdict TMP VETH_DROPS
      TMP/status.json, send.json, sink.json, nstat.txt: what was sent, where
      each datagram went, and a RESULT line: sent, accounted, restarts,
      drop_died, died_in_rings, accounting_failures
"""
import json
import sys

from verdict import load

from psplab.cli import Sub, subcommands


def link_drops(text: str) -> int:
    total = 0
    for line in text.split("\n"):
        if not line.strip():
            continue
        for link in json.loads(line):
            s = link.get("stats64", {})
            total += s.get("rx", {}).get("dropped", 0) + s.get("tx", {}).get("dropped", 0)
    return total


def verdict(tmp: str, veth: int) -> None:
    st = load(f"{tmp}/status.json")
    sent = load(f"{tmp}/send.json")["sent"]
    received = load(f"{tmp}/sink.json")["5002"]["datagrams"]
    nstat: dict[str, int] = {}
    with open(f"{tmp}/nstat.txt") as f:
        for line in f:
            p = line.split()
            if len(p) >= 2 and p[0].startswith("Udp"):
                nstat[p[0]] = int(p[1])
    rcv = nstat.get("UdpRcvbufErrors", 0) + nstat.get("UdpInErrors", 0)
    c = next(c for c in st["classes"] if c["class"] == "1:1")
    d = st["daemon"]
    drops = {k: c[k] for k in c if k.startswith("drop_") and k != "drops"}
    kernel = {k: d[k] for k in ("socket_ring_full", "socket_fill_empty", "died_in_rings", "unknown_class")}
    kernel["xdp_no_socket"] = st["xdp"]["no_socket"]
    accounted = received + rcv + sum(drops.values()) + sum(kernel.values()) + veth
    print(f"sent {sent} received {received} receiver drops {rcv} veth drops {veth}")
    print(f"class 1:1 drops {drops}")
    print(f"daemon {kernel} restarts {d['restarts']}")
    print(f"accounted {accounted}, unaccounted {sent - accounted}")
    print(f"RESULT {sent} {accounted} {d['restarts']} {c['drop_died']} {d['died_in_rings']} "
          f"{d['accounting_failures']}")


def main(argv: list[str]) -> int:
    return subcommands(__doc__, argv, {
        "link-drops": Sub((), lambda: print(link_drops(sys.stdin.read()))),
        "verdict": Sub(("TMP", "VETH_DROPS"), lambda tmp, veth: verdict(tmp, int(veth))),
    })


if __name__ == "__main__":
    sys.exit(main(sys.argv))
