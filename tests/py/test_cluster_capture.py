"""psplab.cluster_capture's replay and queue rebuild against hand-worked
arrivals: what `cluster --capture` concludes from (design §11.9) rests on
them."""

import unittest

from psplab.cluster_capture import replay, tbf_queue

B = 500_000_000
FIFO = 32 << 10
FRAME = 1514
TX_NS = FRAME * 8 * 1_000_000_000 // B  # 24,224 ns at B


class ReplayTest(unittest.TestCase):
    def test_two_paced_hosts_below_b_never_queue(self) -> None:
        # 2 x 200 Mbit/s, each frame 60.56 us after the last, the hosts interleaved
        gap = FRAME * 8 * 1_000_000_000 // 200_000_000
        a = sorted([(i * gap, FRAME) for i in range(5000)] + [(i * gap + gap // 2, FRAME) for i in range(5000)])
        r = replay(a, B, FIFO)
        self.assertEqual((r.frames, r.drops), (10000, 0))
        self.assertEqual(r.max_backlog_bytes, FRAME)
        self.assertEqual(r.unbounded_max_bytes, FRAME)

    def test_a_burst_larger_than_the_fifo_drops_the_excess(self) -> None:
        # 30 frames at once: the first leaves at once (one-frame bucket),
        # 21 fit in 32 KB, 8 are dropped; the unbounded queue holds all 30
        a = [(0, FRAME)] * 30 + [(10**9, FRAME)]
        r = replay(a, B, FIFO)
        self.assertEqual(r.drops, 8)
        self.assertEqual(r.max_backlog_bytes, 21 * FRAME)
        self.assertEqual(r.unbounded_max_bytes, 30 * FRAME)

    def test_a_stall_in_the_departures_is_counted_and_the_queue_capped(self) -> None:
        # 10 frames arrive at once; the tbf sends one, pauses 500 us, sends the rest at B
        a = [(0, FRAME)] * 10
        d = [(0, FRAME)] + [(500_000 + i * TX_NS, FRAME) for i in range(9)]
        q = tbf_queue(a, d, FIFO)
        self.assertEqual(q.departures, 10)
        self.assertEqual(q.stalls_over_100us, 1)
        self.assertEqual(q.max_stall_us, 500.0)
        self.assertEqual(q.max_backlog_bytes, 10 * FRAME)
        self.assertEqual(tbf_queue([(0, FRAME)] * 30, [(0, FRAME), (10**6, FRAME)], FIFO).max_backlog_bytes,
                         FIFO)


if __name__ == "__main__":
    unittest.main()
