"""psplab's TCP experiment says when its figures differ from the README's
table (its source CSV) and why: the load, the emulated bottleneck's stalls,
and the ideal FIFO's drops of the same arrivals."""

import unittest

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


if __name__ == "__main__":
    unittest.main()
