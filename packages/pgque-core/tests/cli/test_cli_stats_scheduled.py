"""``pgque stats`` shows scheduled messages: the count and when the next one is due."""

from __future__ import annotations

from rich.console import Console

from pgque.core import QueueStats
from pgque.core.cli._ops import _stats_table, stats_json

DUE = 1_800_000_000.0


def _stats(**changes: object) -> QueueStats:
    base = QueueStats(
        groups=0,
        messages=0,
        in_flight=0,
        parked=0,
        blocked=0,
        dead_letters=0,
        oldest_age_s=None,
    )
    return base.model_copy(update=changes)


def test_stats_json_gives_the_next_due_time_in_utc() -> None:
    out = stats_json("orders", _stats(scheduled=2, next_due_at=DUE))
    assert out["scheduled"] == 2
    assert out["next_due_at"] == "2027-01-15T08:00:00.000000+00:00"
    empty = stats_json("orders", _stats())
    assert (empty["scheduled"], empty["next_due_at"]) == (0, None)


def test_stats_table_has_scheduled_rows() -> None:
    console = Console(width=200, record=True)
    console.print(_stats_table(_stats(scheduled=3, next_due_at=DUE), "orders", "memory://"))
    text = console.export_text()
    scheduled = next(line for line in text.splitlines() if line.strip().startswith("scheduled"))
    assert "3" in scheduled
    due = next(line for line in text.splitlines() if line.strip().startswith("next due"))
    assert "2027-01-15T08:00:00Z" in due  # tables: to the second, "Z"
