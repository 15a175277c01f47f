"""Job history on PostgreSQL: what the conformance suite cannot show.

Records go to day partitions of ``pgque_fifo.history`` that maintenance creates ahead and drops
once every queue lets them go (a duration passed, or a row cap met by newer records), never a
big DELETE; maintenance that cannot get its lock (a settlement in flight holds the table) gives
up after lock_timeout instead of stalling the settlements queued behind it. Each test runs on a
database of its own: partitions are shared by every queue of a database.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import psycopg
from pg_interleave import Holder

from pgque.core import Event
from pgque.postgres import PostgresTransport

DAY = 86_400
#: 2000-01-01: a day long before any real record, so real days never count as past.
DAY0 = 10_957


def _days(url: str) -> list[int]:
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
            " WHERE i.inhparent = 'pgque_fifo.history'::regclass ORDER BY 1"
        ).fetchall()
    return sorted(int(name[len("history_d") :]) for (name,) in rows if name != "history_default")


def _partition_of(url: str, message_id: int) -> str:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT tableoid::regclass::text FROM pgque_fifo.history WHERE message_id = %s",
            (message_id,),
        ).fetchone()
    assert row is not None
    return str(row[0])


def _settle_one(t: PostgresTransport, group: str) -> int:
    message_id = t.publish(group, Event(kind="job"))
    lease = t.claim()
    assert lease is not None
    assert t.ack(lease)
    return message_id


def test_days_are_made_ahead_and_dropped_after_the_retention(
    scratch_db: Callable[[], str],
) -> None:
    url = scratch_db()
    clock = [DAY0 * DAY + 3600.0]
    with PostgresTransport.from_dsn(url, queue="q", clock=lambda: clock[0], history="1d") as t:
        assert _days(url) == [DAY0, DAY0 + 1, DAY0 + 2]
        message_id = _settle_one(t, "g")
        assert _partition_of(url, message_id) == f"pgque_fifo.history_d{DAY0}"
        clock[0] += 3 * DAY
        t.set_history("1d")  # keeps the partitions at the new day
        assert _days(url) == [DAY0 + 3, DAY0 + 4, DAY0 + 5]
        assert t.history() == []


def test_a_row_cap_drops_a_day_once_newer_records_hold_the_cap(
    scratch_db: Callable[[], str],
) -> None:
    url = scratch_db()
    clock = [DAY0 * DAY + 3600.0]
    with PostgresTransport.from_dsn(url, queue="q", clock=lambda: clock[0], history="2") as t:
        _settle_one(t, "a")
        clock[0] += DAY
        _settle_one(t, "b")
        clock[0] += DAY
        t.set_history("2")
        assert _days(url)[0] == DAY0  # one newer record: day 0 stays
        _settle_one(t, "c")
        clock[0] += DAY
        t.set_history("2")
        assert _days(url)[0] == DAY0 + 1  # two newer records: day 0 went, day 1 stays
        assert [r.group_id for r in t.history()] == ["c", "b"]


def test_a_queue_with_a_longer_retention_keeps_a_shared_day(
    scratch_db: Callable[[], str],
) -> None:
    url = scratch_db()
    clock = [DAY0 * DAY + 3600.0]

    def now() -> float:
        return clock[0]

    with (
        PostgresTransport.from_dsn(url, queue="short", clock=now, history="1d") as short,
        PostgresTransport.from_dsn(url, queue="long", clock=now, history="7d") as long,
    ):
        _settle_one(short, "s")
        _settle_one(long, "l")
        clock[0] += 3 * DAY
        short.set_history("1d")
        assert _days(url)[0] == DAY0
        assert short.history() == []  # past its own retention: never returned
        assert [r.group_id for r in long.history()] == ["l"]


def test_maintenance_gives_up_its_lock_wait_and_comes_back(
    scratch_db: Callable[[], str],
) -> None:
    """A transaction holding the history table (a settle_in in flight) keeps maintenance from
    creating a day: it waits lock_timeout, gives up, and the next call does it."""
    url = scratch_db()
    clock = [DAY0 * DAY + 3600.0]
    with PostgresTransport.from_dsn(url, queue="q", clock=lambda: clock[0], history="7d") as t:
        clock[0] += 5 * DAY
        with Holder(url) as holder:
            holder.execute("LOCK TABLE pgque_fifo.history IN ROW EXCLUSIVE MODE")
            started = time.monotonic()
            t.set_history("7d")
            waited = time.monotonic() - started
            assert DAY0 + 5 not in _days(url)
            holder.commit()
        assert waited < 5.0
        t.set_history("7d")
        assert DAY0 + 5 in _days(url)
