"""The tenants scenarios' arithmetic (pgque_bench._shares), checked without a server."""

from __future__ import annotations

import pytest
from pgque_bench._shares import key_counts, rate_report, share_table, worst_burst


def test_share_table_compares_each_keys_share_with_its_weights() -> None:
    table = share_table({"a": 30, "b": 70}, {"a": 1.0, "b": 3.0}, {"a": 5, "b": 1})
    assert table["claims"] == 100
    assert table["keys"]["a"]["share"] == pytest.approx(0.30)
    assert table["keys"]["a"]["expected"] == pytest.approx(0.25)
    assert table["keys"]["a"]["deviation_pct"] == pytest.approx(20.0)
    assert table["keys"]["b"]["deviation_pct"] == pytest.approx(100 * (0.70 / 0.75 - 1))
    assert table["max_deviation_pct"] == pytest.approx(20.0)
    # A key never served is 100% off.
    assert share_table({"a": 10}, {"a": 1, "b": 1}, {"a": 1, "b": 1})["max_deviation_pct"] == 100


def test_key_counts_take_the_group_ids_part_before_the_first_dot() -> None:
    assert key_counts(["a.1", "a.2", "b.1", "c.x.y"]) == {"a": 2, "b": 1, "c": 1}


def test_worst_burst_is_the_largest_window_excess_over_the_rate() -> None:
    assert worst_burst([], 10.0) == 0
    assert worst_burst([0.0], 10.0) == 1
    # Evenly spaced at the rate: every window holds one more than its length earns.
    assert worst_burst([i / 10 for i in range(50)], 10.0) == pytest.approx(1.0)
    # Five at once in the middle of a paced run: that window holds five.
    times = [i / 10 for i in range(20)] + [1.05] * 5
    assert worst_burst(times, 10.0) == pytest.approx(6.0, abs=0.51)
    assert worst_burst(list(reversed(times)), 10.0) == worst_burst(times, 10.0)


def test_rate_report_leaves_out_the_first_burst() -> None:
    times = {"k": [0.0] * 5 + [0.1 * i for i in range(1, 101)]}  # burst 5, then 10/s for 10 s
    report = rate_report(times, {"k": (10.0, 1.0, 5)}, 10.0)
    row = report["keys"]["k"]
    assert row["count"] == 105
    assert row["steady_per_s"] == pytest.approx(10.0)
    assert row["deviation_pct"] == pytest.approx(0.0)
    # The burst at 0 and the token earned by 0.1: six in 0.1 s, five beyond what it earns.
    assert row["worst_window"] == pytest.approx(5.0, abs=0.01)
    assert report["max_excess"] == pytest.approx(0.0, abs=0.01)
    slow = rate_report({"k": [0.0] * 5}, {"k": (10.0, 1.0, 5)}, 10.0)
    assert slow["max_deviation_pct"] == pytest.approx(100.0)
