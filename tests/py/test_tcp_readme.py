"""psplab's TCP experiment says when its figures differ from the README's
table (its source CSV) and why: the load, the emulated bottleneck's stalls,
and the ideal FIFO's drops of the same arrivals."""

import os
import struct
import tempfile
import unittest

from psplab.cluster_capture import frames
from psplab.experiments import README_TCP, readme_differences
from psplab.run import TcpRow


def row(shaper: str, fifo: int, mbit: float, drops: int, ideal: int | None, stalls: int | None,
        stall_ms: float | None) -> TcpRow:
    return TcpRow(shaper=shaper, fifo_bytes=fifo, bottleneck_bps=500_000_000, throughput_bps=mbit * 1e6,
                  retransmits=0, mean_rtt_ms=20.0, max_rtt_ms=21.0, bottleneck_drops=drops, shaper_drops=0,
                  shaper_marks=0, unpaced=0, cpu_cores=1.0, error=None, ideal_fifo_drops=ideal,
                  bottleneck_stalls=stalls, bottleneck_max_stall_ms=stall_ms, capture_drops=0)


class ReadmeDifferencesTest(unittest.TestCase):
    def setUp(self) -> None:
        if not (README_TCP / "tcp.csv").exists():
            self.skipTest(f"{README_TCP}/tcp.csv not in this checkout")

    def test_drops_where_the_readme_has_none_are_explained(self) -> None:
        # the README's clockless row at 16 KB: 373 Mbit/s, 0 drops
        got = readme_differences([row("pspxdp-clockless", 16 << 10, 260.6, 4571, 12, 88, 2.4)], 1.3, 1.9)
        self.assertEqual(len(got), 1)
        d = got[0]
        self.assertIn("16 KB, pspxdp-clockless: 261 Mbit/s, 4571 bottleneck drops", d)
        self.assertIn("the README: 373 Mbit/s, 0 drops", d)
        self.assertIn("load average 1.3 -> 1.9", d)
        self.assertIn("stalled 88 times over 100 us, up to 2.40 ms", d)
        self.assertIn("holds 0.26 ms at B", d)
        self.assertIn("an ideal FIFO drops 12 of the same arrivals, so 4559 of the 4571", d)

    def test_figures_like_the_readme_say_nothing(self) -> None:
        self.assertEqual(readme_differences([row("pspxdp-clockless", 16 << 10, 370.0, 0, 0, 0, 0.0)], 1.0, 1.0),
                         [])
        # drops where the README has drops too, throughput within 10 %
        self.assertEqual(readme_differences([row("none", 16 << 10, 120.0, 9000, 8000, 3, 0.5)], 1.0, 1.0), [])

    def test_a_slower_run_is_reported(self) -> None:
        got = readme_differences([row("tbf-tight", 16 << 10, 200.0, 0, 0, None, None)], 2.0, 2.0)
        self.assertEqual(len(got), 1)
        self.assertIn("200 Mbit/s", got[0])
        self.assertNotIn("stalled", got[0])


def pcap(path: str, packets: list[bytes]) -> None:
    """A nanosecond pcap of whole Ethernet frames, 1 us apart."""
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 65535, 1))
        for i, p in enumerate(packets):
            f.write(struct.pack("<IIII", 0, i * 1000, len(p), len(p)) + p)


class ArrivalsTest(unittest.TestCase):
    def test_pause_gap_frames_are_not_arrivals(self) -> None:
        mac = b"\x02" * 12
        tcp = mac + b"\x08\x00" + bytes([0x45, 0, 0x05, 0xDC]) + bytes(5) + b"\x06" + bytes(10) \
            + struct.pack("!HH", 40000, 5201) + bytes(1514 - 38)
        pause = mac + b"\x88\x08" + bytes(1514 - 14)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "a.pcap")
            pcap(path, [tcp, pause, tcp])
            self.assertEqual(len(frames(path)), 3)  # every big frame
            self.assertEqual(frames(path, 5201), [(0, 1514), (2000, 1514)])


if __name__ == "__main__":
    unittest.main()
