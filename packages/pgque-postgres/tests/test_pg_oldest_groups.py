"""oldest_groups() on PostgreSQL: the walk of messages_enqueued stays index scans in the
function's generic plans, reads a stuck group's backlog once, and takes no lock."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import psycopg
import pytest

from pgque.conformance.plans import (
    Plan,
    analyze_as_empty,
    describe,
    explaining,
    index_scans,
    rows_read,
    seq_scans,
)
from pgque.postgres import PostgresTransport

Conn = psycopg.Connection[tuple[object, ...]]

_FILL = (
    "INSERT INTO pgque_fifo.messages (queue, group_id, event, enqueued_at)"
    " SELECT %s, %s || (i %% %s), '{}', %s + i FROM generate_series(1, %s) AS i"
)


@pytest.fixture
def queue(janitor: Callable[[str], None]) -> Iterator[str]:
    name = f"o_{uuid.uuid4().hex[:24]}"
    yield name
    janitor(name)


def _fill(raw: Conn, queue: str, prefix: str, groups: int, start: float, rows: int) -> None:
    """*rows* messages over *groups* groups named prefix0.., enqueued 1 s apart from *start*."""
    raw.execute(_FILL, (queue, prefix, groups, start, rows))
    raw.execute(
        "INSERT INTO pgque_fifo.groups (queue, group_id, priority)"
        " SELECT DISTINCT queue, group_id, 0 FROM pgque_fifo.messages WHERE queue = %s"
        " ON CONFLICT DO NOTHING",
        (queue,),
    )


def _plans(url: str, queue: str, state: str | None, *, analyze: bool = False) -> list[Plan]:
    """The plans of every statement of oldest_groups(limit=10), called three times in
    generic-plan mode (or once, with actual row counts, with *analyze*)."""
    with psycopg.connect(url, autocommit=True) as conn:
        plans = explaining(conn, analyze=analyze)
        conn.execute("SET plan_cache_mode = force_generic_plan")
        for _ in range(1 if analyze else 3):
            conn.execute(
                "SELECT * FROM pgque_fifo.pgque_oldest_groups_v1(%s, %s, 10, NULL)", (queue, state)
            ).fetchall()
    return plans


@pytest.mark.parametrize("state", [None, "ready", "blocked", "paused", "leased", "parked"])
def test_every_state_reads_indexes_in_generic_plans(
    postgres_url: str, raw: Conn, queue: str, state: str | None
) -> None:
    _fill(raw, queue, "g", 5000, 1e9, 20000)
    raw.execute("ANALYZE pgque_fifo.messages")
    raw.execute("ANALYZE pgque_fifo.groups")
    analyze_as_empty(raw, "pgque_fifo.scheduled")  # as on a fresh database
    plans = _plans(postgres_url, queue, state)
    assert any("pgque_fifo.messages" in plan["Query Text"] for plan in plans)
    assert seq_scans(plans) == [], describe(p for p in plans if seq_scans(p))
    if state in (None, "ready"):
        assert "messages_enqueued" in index_scans(plans)


def test_a_stuck_backlog_is_read_once_not_once_per_head(
    postgres_url: str, raw: Conn, queue: str
) -> None:
    """20,000 old messages of one group, then 200 groups: ten heads read the backlog once."""
    _fill(raw, queue, "stuck", 1, 1e9, 20000)
    _fill(raw, queue, "g", 200, 2e9, 200)
    raw.execute("ANALYZE pgque_fifo.messages")
    with PostgresTransport.from_dsn(postgres_url, queue=queue, setup=False) as transport:
        got = transport.oldest_groups(limit=10)
    assert [g.group_id for g in got] == ["stuck0"] + [f"g{n}" for n in range(1, 10)]
    plans = _plans(postgres_url, queue, None, analyze=True)
    read = rows_read(plans, "messages_enqueued")
    # Once: the backlog (20,000) and a few entries per head; once per head would be 200,000.
    assert 20_000 <= read < 21_000, read
