"""``pgque demo`` end to end on every backend (small workloads), and its checks on bad records."""

from __future__ import annotations

import subprocess
from collections.abc import Callable

import pytest

from pgque.core.cli._demo_checks import Workload, analyse
from pgque.core.cli._demo_types import HandledRecord, SettledRecord

Run = Callable[..., subprocess.CompletedProcess[str]]

CHECKS = [
    "every event exactly once",
    "FIFO within each group",
    "one worker per group",
    "round-robin fairness",
    "priorities kept",
    "no redelivery",
]


def _assert_passed(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASSED" in result.stdout
    assert "FAIL" not in result.stdout
    for check in CHECKS:
        assert check in result.stdout
    assert "events/s" in result.stdout


def test_demo_on_memory_uses_threads(pgque: Run) -> None:
    result = pgque(
        "demo",
        "--url",
        "memory://",
        "--groups",
        "8",
        "--events",
        "300",
        "--workers",
        "3",
        "--seed",
        "1",
    )
    _assert_passed(result)
    assert "threads" in " ".join(result.stderr.split())


def test_demo_on_postgres_uses_processes(pgque: Run, postgres_url: str) -> None:
    result = pgque(
        "demo",
        "--url",
        postgres_url,
        "--groups",
        "6",
        "--events",
        "150",
        "--workers",
        "2",
        "--seed",
        "2",
    )
    _assert_passed(result)
    assert "worker processes" in " ".join(result.stderr.split())  # rich may wrap the line


def test_demo_on_redis_uses_processes(pgque: Run, redis_url: str) -> None:
    result = pgque(
        "demo",
        "--url",
        redis_url,
        "--groups",
        "6",
        "--events",
        "150",
        "--workers",
        "2",
        "--seed",
        "3",
    )
    _assert_passed(result)


def test_demo_refuses_fewer_events_than_groups(pgque: Run, error_line: Callable[..., str]) -> None:
    assert "--events" in error_line(
        pgque("demo", "--url", "memory://", "--groups", "5", "--events", "2")
    )


# The checks themselves, on records that break each guarantee.


def _workload(counts: dict[str, int]) -> Workload:
    return Workload(counts=counts, priorities=dict.fromkeys(counts, 1), published_by={})


def _record(
    group: str, seq: int, enter: int, exit_: int, *, attempt: int = 1, priority: int = 1
) -> HandledRecord:
    claimed = 1000.0 + enter / 1e9
    return (group, seq, seq + 1, attempt, priority, claimed, enter, exit_, enter, 1000.0, "w")


def _verdicts(handled: list[HandledRecord], counts: dict[str, int]) -> dict[str, bool | None]:
    settled: list[SettledRecord] = [
        (r[0], r[2], "acked", int((1000.0 + r[7] / 1e9) * 1e9)) for r in handled
    ]
    analysis = analyse(handled, settled, _workload(counts), slots=2, fairness_checkable=True)
    return {check.name: check.ok for check in analysis.checks}


def test_checks_pass_on_a_clean_run() -> None:
    handled = [
        _record("a", 0, 0, 10),
        _record("b", 0, 5, 15),
        _record("a", 1, 20, 30),
        _record("b", 1, 25, 35),
    ]
    assert all(_verdicts(handled, {"a": 2, "b": 2}).values())


def test_checks_catch_a_lost_and_a_duplicate_event() -> None:
    verdicts = _verdicts([_record("a", 0, 0, 10), _record("a", 0, 20, 30)], {"a": 2})
    assert verdicts["every event exactly once"] is False


def test_checks_catch_out_of_order_delivery() -> None:
    verdicts = _verdicts([_record("a", 1, 0, 10), _record("a", 0, 20, 30)], {"a": 2})
    assert verdicts["FIFO within each group"] is False


def test_checks_catch_two_handlers_in_one_group() -> None:
    verdicts = _verdicts([_record("a", 0, 0, 30), _record("a", 1, 20, 40)], {"a": 2})
    assert verdicts["one worker per group"] is False


def test_checks_catch_a_starved_group() -> None:
    # Group a is ready again at t=10 but the other groups are served 30 times first.
    handled = [_record("a", 0, 0, 10)]
    handled += [_record(f"g{i}", 0, 11 + i, 11 + i) for i in range(30)]
    handled.append(_record("a", 1, 100, 110))
    counts = {"a": 2, **{f"g{i}": 1 for i in range(30)}}
    assert _verdicts(handled, counts)["round-robin fairness"] is True  # 30 <= 31 - 1 + 2
    handled = [_record("a", 0, 0, 10)]
    handled += [_record("b", i, 11 + 2 * i, 12 + 2 * i) for i in range(30)]
    handled.append(_record("a", 1, 100, 110))
    assert _verdicts(handled, {"a": 2, "b": 30})["round-robin fairness"] is False


def test_checks_catch_a_wrong_priority_and_a_redelivery() -> None:
    verdicts = _verdicts([_record("a", 0, 0, 10, attempt=2, priority=4)], {"a": 1})
    assert verdicts["priorities kept"] is False
    assert verdicts["no redelivery"] is False


@pytest.mark.parametrize("q", [50, 99])
def test_percentile_nearest_rank(q: int) -> None:
    from pgque.core.cli._demo_checks import percentile

    values = [float(i) for i in range(1, 101)]
    assert percentile(values, q) == float(q)
