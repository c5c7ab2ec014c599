"""psplab's output a reader meets: a table's notes wrap to a terminal's
width (one line ran to 364 characters), and the side-by-side plot's x
labels do not run into each other."""

import dataclasses
import itertools
import unittest
from typing import Any

from psplab.experiments import SIDE_SHAPERS_ONE, SideRow, side_figure
from psplab.report import NOTE_WIDTH, Table


def side_row(shaper: str, clock: str) -> SideRow:
    values: dict[str, Any] = {}
    for f in dataclasses.fields(SideRow):
        values[f.name] = 0
    values.update(shaper=shaper, clock=clock, scenario="one flow", flow="f", offered="650mbit",
                  target_bps=500_000_000, burst_target_mtu=3.0, rate10_max_bps=6e8)
    return SideRow(**values)


class ReportTest(unittest.TestCase):
    def test_notes_wrap(self) -> None:
        t = Table("title", ["a", "b"], ["word " * 80, "short"])
        t.add("x", "1")
        notes = t.text().splitlines()[3:]
        self.assertGreater(len(notes), 4)
        self.assertTrue(all(len(line) <= NOTE_WIDTH for line in notes), notes)
        self.assertTrue(notes[0].startswith("  note: word"))
        self.assertEqual(notes[-1], "  note: short")

    def test_side_plot_labels_do_not_collide(self) -> None:
        rows = [side_row(s, c) for s in SIDE_SHAPERS_ONE for c in ("byte", "real")
                if c == "real" or s == "pspxdp"]
        fig = side_figure(rows)
        fig.set_dpi(110)  # Results.save's
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        for ax in fig.axes:
            boxes = sorted((t.get_window_extent(renderer) for t in ax.get_xticklabels() if t.get_text()),
                           key=lambda b: float(b.x0))
            self.assertEqual(len(boxes), len(rows))
            # a visible space between neighbours, not just no overlap
            for a, b in itertools.pairwise(boxes):
                self.assertGreaterEqual(b.x0 - a.x1, 4, f"x labels touch: {a} and {b}")


if __name__ == "__main__":
    unittest.main()
