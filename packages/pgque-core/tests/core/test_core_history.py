"""The history option and query checks (pgque.core.history): pure, no transport."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from pgque.core import HistoryRecord, HistoryRetention, InvalidInput
from pgque.core.history import (
    HISTORY_OFF,
    check_history_option,
    check_history_query,
    history_option_text,
)


@pytest.mark.parametrize(
    ("text", "keep", "rows"),
    [
        ("7d", 7 * 86_400.0, None),
        ("36h", 36 * 3600.0, None),
        ("90s", 90.0, None),
        ("1.5m", 90.0, None),
        ("1000000", None, 1_000_000),
        ("7d,1000000", 7 * 86_400.0, 1_000_000),
        (" 1000 , 12H ", 12 * 3600.0, 1000),
    ],
)
def test_the_option_reads_a_duration_a_row_cap_or_both(
    text: str, keep: float | None, rows: int | None
) -> None:
    assert check_history_option(text) == HistoryRetention(keep_s=keep, max_rows=rows)


def test_the_option_round_trips_through_its_text() -> None:
    for text in ("7d", "12h", "90m", "45s", "1000000", "7d,1000000", "off"):
        setting = check_history_option(text)
        assert setting is not None
        assert history_option_text(setting) == text
    assert check_history_option(None) is None
    assert check_history_option("OFF") == HISTORY_OFF
    assert check_history_option(timedelta(hours=2)) == HistoryRetention(keep_s=7200.0)


@pytest.mark.parametrize(
    "bad", ["", "7x", "d", "0s", "-1d", "7d,8d", "1,2", "400d", "0", 7, 1.5, b"7d"]
)
def test_a_bad_option_is_refused_naming_what_is_accepted(bad: object) -> None:
    with pytest.raises(InvalidInput, match="history"):
        check_history_option(bad)


def test_a_retention_needs_a_bound() -> None:
    with pytest.raises(InvalidInput, match="needs a duration"):
        HistoryRetention()
    assert HistoryRetention(keep_s=60).oldest_kept(1000.0) == 940.0
    assert HistoryRetention(max_rows=5).oldest_kept(1000.0) is None


def test_a_query_matches_every_filter_given() -> None:
    record = HistoryRecord(
        id=7,
        message_id=3,
        group_id="g",
        kind="k",
        outcome="acked",
        attempt=1,
        finished_at=100.0,
    )
    assert check_history_query().matches(record)
    assert check_history_query(group="g", kind="k", outcome="acked", message_id=3).matches(record)
    assert not check_history_query(group="h").matches(record)
    assert not check_history_query(outcome="nacked").matches(record)
    assert check_history_query(since=100.0).matches(record)
    assert not check_history_query(since=100.5).matches(record)
    assert check_history_query(after=8).matches(record)
    assert not check_history_query(after=7).matches(record)
    aware = datetime.fromtimestamp(50.0, tz=timezone.utc)
    assert check_history_query(since=aware).since == 50.0
    assert record.duration is None
    assert record.model_copy(update={"started_at": 98.5}).duration == 1.5
