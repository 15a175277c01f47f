"""Job history on PostgreSQL: what the conformance suite cannot show.

Records go to day partitions of ``pgque_fifo.history`` that maintenance creates ahead (a table
attached to the parent) and empties once every queue lets them go (a duration passed, or a row
cap met by newer records) with TRUNCATE, never a big DELETE; the emptied days are dropped
together once 31 have gathered. No step but that DROP takes a lock a settlement waits for, and
the DROP waits at most 5 ms; maintenance that cannot get its lock gives up after lock_timeout
and comes back. Each test runs on a database of its own: partitions are shared by every queue
of a database.
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


#: What a settlement in flight has done to the history table (its transaction still open).
_IN_FLIGHT = (
    "INSERT INTO pgque_fifo.history (queue, message_id, group_id, kind, outcome, attempt,"
    " finished_at) VALUES ('other', 1, 'g', 'k', 'acked', 1, %s)"
)


def _days(url: str) -> list[int]:
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
            " WHERE i.inhparent = 'pgque_fifo.history'::regclass ORDER BY 1"
        ).fetchall()
    return sorted(int(name[len("history_d") :]) for (name,) in rows if name != "history_default")


def _days_with_records(url: str) -> list[int]:
    with psycopg.connect(url, autocommit=True) as conn:
        return [
            day
            for day in _days(url)
            if conn.execute(f"SELECT EXISTS (SELECT 1 FROM pgque_fifo.history_d{day})").fetchone()
            == (True,)
        ]


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


def test_days_are_made_ahead_and_emptied_after_the_retention(
    scratch_db: Callable[[], str],
) -> None:
    url = scratch_db()
    clock = [DAY0 * DAY + 3600.0]
    with PostgresTransport.from_dsn(url, queue="q", clock=lambda: clock[0], history="1d") as t:
        assert _days(url) == [DAY0, DAY0 + 1, DAY0 + 2]
        message_id = _settle_one(t, "g")
        assert _partition_of(url, message_id) == f"pgque_fifo.history_d{DAY0}"
        assert _days_with_records(url) == [DAY0]
        clock[0] += 3 * DAY
        t.set_history("1d")  # keeps the partitions at the new day
        assert _days(url) == [DAY0 + i for i in range(6)]  # the emptied days wait for a DROP
        assert _days_with_records(url) == []
        assert t.history() == []


def test_emptied_days_are_dropped_together_once_31_have_gathered(
    scratch_db: Callable[[], str],
) -> None:
    url = scratch_db()
    clock = [DAY0 * DAY + 3600.0]
    with PostgresTransport.from_dsn(url, queue="q", clock=lambda: clock[0], history="1d") as t:
        for _ in range(31):  # a record a day, days 0 to 30
            _settle_one(t, "g")
            clock[0] += DAY
            t.set_history("1d")
        # Day 31 now: days 0-29 emptied (past the retention), day 30 yesterday's, 31-33 ahead.
        assert _days(url) == [DAY0 + i for i in range(34)]
        assert _days_with_records(url) == [DAY0 + 30]
        _settle_one(t, "g")
        clock[0] += DAY
        t.set_history("1d")  # day 30 emptied: 31 emptied days by the next run
        assert len(_days(url)) == 35
        clock[0] += DAY
        t.set_history("1d")  # the 31 emptied days and the empty day 32 go in one DROP
        assert _days(url) == [DAY0 + 31, DAY0 + 33, DAY0 + 34, DAY0 + 35]
        assert _days_with_records(url) == []  # day 31 emptied by the same run, dropped later


def test_the_drop_of_emptied_days_waits_at_most_5_ms_behind_a_settlement(
    scratch_db: Callable[[], str],
) -> None:
    """The monthly DROP needs the parent table alone: behind a settlement in flight (which
    holds it for writing) it gives up at once, so the settlements after it never queue."""
    url = scratch_db()
    clock = [DAY0 * DAY + 3600.0]
    with PostgresTransport.from_dsn(url, queue="q", clock=lambda: clock[0], history="1d") as t:
        for _ in range(30):  # a day made each day, none ever holding a record
            clock[0] += DAY
            t.set_history("1d")
        assert len(_days(url)) == 30 + 3  # 30 empty past days: not yet a month's worth
        clock[0] += DAY
        with Holder(url) as holder:
            holder.execute(_IN_FLIGHT, ((DAY0 + 31) * DAY,))  # a settlement of day 31
            started = time.monotonic()
            t.set_history("1d")
            waited = time.monotonic() - started
            assert len(_days(url)) == 31 + 3  # 31 empty past days, but the DROP gave up
            holder.commit()
        assert waited < 0.2  # not the 200 ms of lock_timeout: the DROP's own 5 ms
        t.set_history("1d")
        assert _days(url) == [DAY0 + 31 + i for i in range(3)]  # day 31 holds the record


def test_a_prune_never_holds_up_a_settlement(scratch_db: Callable[[], str]) -> None:
    """Emptying a past day locks that day's partition alone: a settlement, which writes
    today's, goes on while another transaction holds the past day as a prune does; and a
    settlement in flight does not keep maintenance from emptying a day or making one."""
    url = scratch_db()
    clock = [DAY0 * DAY + 3600.0]
    with PostgresTransport.from_dsn(url, queue="q", clock=lambda: clock[0], history="1d") as t:
        _settle_one(t, "old")
        clock[0] += 3 * DAY
        t.set_history("1d")
        with Holder(url, timeout=5.0) as holder:
            holder.execute(f"LOCK TABLE pgque_fifo.history_d{DAY0} IN ACCESS EXCLUSIVE MODE")
            message_id = _settle_one(t, "new")  # would wait 5 s and fail if it needed the day
            holder.commit()
        assert _partition_of(url, message_id) == f"pgque_fifo.history_d{DAY0 + 3}"
        _settle_one(t, "another")
        clock[0] += 3 * DAY
        with Holder(url) as holder:
            # A settlement in flight: it holds the parent and a day's partition for writing.
            holder.execute(_IN_FLIGHT, ((DAY0 + 5) * DAY,))
            started = time.monotonic()
            t.set_history("1d")
            waited = time.monotonic() - started
            assert DAY0 + 3 not in _days_with_records(url)  # emptied meanwhile
            assert DAY0 + 8 in _days(url)  # and a day made ahead
            holder.commit()
        assert waited < 0.2


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
        assert _days_with_records(url)[0] == DAY0  # one newer record: day 0 stays
        _settle_one(t, "c")
        clock[0] += DAY
        t.set_history("2")
        assert _days_with_records(url)[0] == DAY0 + 1  # two newer: day 0 went, day 1 stays
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
        assert _days_with_records(url)[0] == DAY0
        assert short.history() == []  # past its own retention: never returned
        assert [r.group_id for r in long.history()] == ["l"]


def test_maintenance_gives_up_its_lock_wait_and_comes_back(
    scratch_db: Callable[[], str],
) -> None:
    """A transaction holding the history table against DDL (another maintenance in flight)
    keeps maintenance from making a day: it waits lock_timeout, gives up, and the next call
    does it."""
    url = scratch_db()
    clock = [DAY0 * DAY + 3600.0]
    with PostgresTransport.from_dsn(url, queue="q", clock=lambda: clock[0], history="7d") as t:
        clock[0] += 5 * DAY
        with Holder(url) as holder:
            holder.execute("LOCK TABLE pgque_fifo.history IN SHARE UPDATE EXCLUSIVE MODE")
            started = time.monotonic()
            t.set_history("7d")
            waited = time.monotonic() - started
            assert DAY0 + 5 not in _days(url)
            holder.commit()
        assert waited < 5.0
        t.set_history("7d")
        assert DAY0 + 5 in _days(url)
