"""Unit tests of bench/hwbench/report.py: the number formats and cells of the tables, the
README block, and the tables of committed runs recomputed from their raw figures exactly as
they were written (a change to how the tables read must be deliberate: it shows here)."""

from __future__ import annotations

import json
import unittest

from hwbench.figures import Metric, tables
from hwbench.plans import plan_from_json
from hwbench.records import Results
from hwbench.report import NOTES, cell, fmt, markdown, ratio_cell, readme_with_latest
from test_records import RESULTS

# Runs whose .md the current tables reproduce: the latest full run, and a txn-only run.
REPRODUCED = ("2026-11-29-155505", "2026-12-02-txn")


class Cells(unittest.TestCase):
    def test_numbers_keep_three_significant_digits_or_are_whole(self):
        for value, text in ((None, "—"), (2361.4, "2,361"), (2361.0, "2,361"), (155.4, "155"),
                            (55.44, "55.4"), (6.874, "6.87"), (0.07083, "0.0708"), (0.0, "0"),
                            (-12.34, "-12.3")):
            with self.subTest(value=value):
                self.assertEqual(fmt(value), text)

    def test_a_cell_is_the_median_and_the_range(self):
        self.assertEqual(cell([]), "—")
        self.assertEqual(cell(None), "—")
        self.assertEqual(cell([6.874]), "6.87")
        self.assertEqual(cell([3.0, 1.5, 2.25]), "2.25 (1.50–3)")

    def test_the_ratio_is_marked_when_more_than_5_percent_off(self):
        def ratio(hw: float, kafka: float, better: str) -> str:
            return ratio_cell(Metric("k", "s", "l", "u", better,
                                     {"highwater": [hw], "kafka": [kafka]}))
        self.assertEqual(ratio(2.0, 1.0, "higher"), "2.00× ✓")
        self.assertEqual(ratio(2.0, 1.0, "lower"), "2.00× ✗")
        self.assertEqual(ratio(1.04, 1.0, "lower"), "1.04×")
        self.assertEqual(ratio(1.0, 0.0, "lower"), "—")


class Readme(unittest.TestCase):
    def test_the_block_between_the_markers_is_replaced(self):
        text = ("intro\n<!-- bench:latest:begin -->\nold\n<!-- bench:latest:end -->\nrest\n")
        table = "# title\n\n- a note\n\n## Broker\n\n| a |\n"
        new = readme_with_latest(text, table, "2026-12-03")
        self.assertTrue(new.startswith("intro\n<!-- bench:latest:begin -->\nFrom [`results/"
                                       "2026-12-03.md`](results/2026-12-03.md)"))
        self.assertIn("- a note\n\n#### Broker\n\n| a |\n<!-- bench:latest:end -->\nrest\n", new)
        self.assertNotIn("old", new)
        self.assertNotIn("# title", new)
        self.assertIsNone(readme_with_latest("no markers\n", table, "x"))


class CommittedRuns(unittest.TestCase):
    def test_their_tables_come_out_as_written(self):
        for stem in REPRODUCED:
            with self.subTest(run=stem):
                results = Results.from_json(json.loads((RESULTS / f"{stem}.json").read_text()))
                results.notes = NOTES
                plan = plan_from_json(results.meta.plan)
                self.assertEqual(markdown(results, tables(results, plan), plan),
                                 (RESULTS / f"{stem}.md").read_text())


if __name__ == "__main__":
    unittest.main()
