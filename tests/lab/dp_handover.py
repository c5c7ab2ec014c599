#!/usr/bin/env python3
"""test_dp_handover's figures.

  dp_handover.py TMP      TMP/status.json and TMP/cap.pcap (classic pcap,
      Ethernet): what TC handed over and the pacer took, what the wire
      carried, and a RESULT line: tc_packets tc_frames rx_frames
      unknown_class drop_invalid kernel_drops captured not_for_receiver
      longest long_frames tc_passed
"""
import sys

from verdict import load

from psplab.measure import pcap_frames


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    tmp = argv[1]
    st = load(f"{tmp}/status.json")
    c = next(c for c in st["classes"] if c["class"] == "1:1")
    d = st["daemon"]
    frames_seen, longest, pauses, long_frames = 0, 0, 0, 0
    bad: list[str] = []
    peer_mac = None
    for f in pcap_frames(f"{tmp}/cap.pcap"):  # Ethernet
        pkt = f.head
        frames_seen += 1
        longest = max(longest, f.length)
        long_frames += f.length > 1514
        dst, ethertype = pkt[:6], int.from_bytes(pkt[12:14], "big")
        if dst == bytes.fromhex("0180c2000001") and ethertype == 0x8808:
            pauses += 1
            continue
        if peer_mac is None and ethertype == 0x0800:
            peer_mac = dst
        if dst != peer_mac or ethertype not in (0x0800, 0x0806):
            bad.append(pkt[:16].hex())
    print(f"segments: TC {c['tc_packets']} packets -> {c['tc_frames']} frames; pacer took "
          f"{c['rx_frames']}, sent {c['tx_frames']}; unknown tags {d['unknown_class']}, "
          f"invalid {c['drop_invalid']}, kernel drops {d['socket_ring_full'] + d['socket_fill_empty']}")
    print(f"capture: {frames_seen} frames ({pauses} PAUSE), longest {longest} B ({long_frames} over 1514 B; "
          f"TC passed {c['tc_passed']} packets unpaced), {len(bad)} not "
          f"addressed to the receiver{': ' + ', '.join(bad[:3]) if bad else ''}")
    print("RESULT", c["tc_packets"], c["tc_frames"], c["rx_frames"], d["unknown_class"],
          c["drop_invalid"], d["socket_ring_full"] + d["socket_fill_empty"], frames_seen, len(bad), longest,
          long_frames, c["tc_passed"])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
