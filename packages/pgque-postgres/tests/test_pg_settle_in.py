"""settle_in on PostgreSQL: the caller's writes and the settlement commit together, the group
is held past its lease's expiry, and a lost lease is refused before any write."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
import sqlalchemy
from sqlalchemy.orm import Session

from pgque.core import App, Event, Lease, LeaseLost, RetryPolicy
from pgque.postgres import PostgresTransport

Make = Callable[..., PostgresTransport]


@pytest.fixture
def table(postgres_url: str) -> str:
    name = f"effects_{time.monotonic_ns()}"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {name} (message_id bigint PRIMARY KEY)")
    return name


def _rows(postgres_url: str, table: str) -> list[int]:
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        return [row[0] for row in conn.execute(f"SELECT message_id FROM {table} ORDER BY 1")]


def test_the_callers_write_and_the_ack_commit_together(
    transport_factory: Make, postgres_url: str, table: str
) -> None:
    transport = transport_factory()
    transport.publish("g", Event(kind="k"))
    lease = transport.claim() or pytest.fail("nothing claimed")
    with psycopg.connect(postgres_url) as conn:
        with transport.settle_in(lease, conn) as tx:
            assert tx.connection is conn
            conn.execute(f"INSERT INTO {table} VALUES (%s)", (lease.message_id,))
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    assert _rows(postgres_url, table) == [lease.message_id]
    assert transport.stats().messages == 0


def test_an_exception_keeps_neither_the_write_nor_the_ack(
    transport_factory: Make, postgres_url: str, table: str
) -> None:
    transport = transport_factory()
    transport.publish("g", Event(kind="k"))
    lease = transport.claim() or pytest.fail("nothing claimed")

    def handler(conn: psycopg.Connection[tuple[object, ...]]) -> None:
        with transport.settle_in(lease, conn):
            conn.execute(f"INSERT INTO {table} VALUES (%s)", (lease.message_id,))
            raise ZeroDivisionError("the handler failed after its write")

    with psycopg.connect(postgres_url) as conn, pytest.raises(ZeroDivisionError):
        handler(conn)
    assert _rows(postgres_url, table) == []
    assert transport.stats().messages == 1
    assert transport.ack(lease)


def test_the_group_is_held_past_the_leases_expiry_while_the_block_is_open(
    transport_factory: Make, postgres_url: str, table: str
) -> None:
    """A second claimer finds nothing while the block is open, though the lease expired: the
    block's transaction holds the group's row, and claims skip locked rows."""
    transport = transport_factory()
    other = transport_factory(queue=transport.queue)
    transport.publish("g", Event(kind="k"))
    lease = transport.claim(visibility=0.2) or pytest.fail("nothing claimed")
    with psycopg.connect(postgres_url) as conn, transport.settle_in(lease, conn):
        deadline = lease.expires_at + 0.3
        while time.time() < deadline:  # the lease's expiry passes by the server's clock too
            time.sleep(0.05)
        assert other.claim() is None  # the expired group is not taken
        # The worker's renewal meanwhile needs no round trip (it would wait for the row).
        renewed = transport.extend(lease, 30.0)
        assert renewed is not None
        conn.execute(f"INSERT INTO {table} VALUES (%s)", (lease.message_id,))
    assert other.claim() is None  # settled: nothing left
    assert transport.ack(lease)  # the worker's ack afterwards: settled once, answered True
    assert _rows(postgres_url, table) == [lease.message_id]


def test_a_lost_lease_is_refused_before_any_write(
    transport_factory: Make, postgres_url: str
) -> None:
    transport = transport_factory()
    other = transport_factory(queue=transport.queue)
    transport.publish("g", Event(kind="k"))
    lost = transport.claim(visibility=0.1) or pytest.fail("nothing claimed")
    time.sleep(0.3)
    taken = other.claim() or pytest.fail("the expired group was not claimed again")
    with psycopg.connect(postgres_url) as conn:
        with pytest.raises(LeaseLost), transport.settle_in(lost, conn):
            pytest.fail("the block must not run")
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    assert other.ack(taken)


def test_inside_an_open_transaction_it_is_a_savepoint(
    transport_factory: Make, postgres_url: str, table: str
) -> None:
    transport = transport_factory()
    transport.publish("g", Event(kind="k"))
    lease = transport.claim() or pytest.fail("nothing claimed")
    with psycopg.connect(postgres_url) as conn:
        with conn.transaction(force_rollback=True):
            with transport.settle_in(lease, conn):
                conn.execute(f"INSERT INTO {table} VALUES (%s)", (lease.message_id,))
            # The outer transaction rolls back: the ack and the write with it.
    assert _rows(postgres_url, table) == []
    assert transport.stats().messages == 1
    assert transport.ack(lease)


def test_without_a_connection_the_transports_own_is_lent(
    transport_factory: Make, postgres_url: str, table: str
) -> None:
    transport = transport_factory()
    transport.publish("g", Event(kind="k"))
    lease = transport.claim() or pytest.fail("nothing claimed")
    with transport.settle_in(lease) as tx:
        tx.connection.execute(f"INSERT INTO {table} VALUES (%s)", (lease.message_id,))
    assert _rows(postgres_url, table) == [lease.message_id]
    assert transport.stats().messages == 0


def test_a_sqlalchemy_session_settles_with_its_orm_writes(
    transport_factory: Make, postgres_url: str, table: str
) -> None:
    transport = transport_factory()
    transport.publish("g", Event(kind="k"))
    lease = transport.claim() or pytest.fail("nothing claimed")
    engine = sqlalchemy.create_engine(
        "postgresql+psycopg://", creator=lambda: psycopg.connect(postgres_url)
    )
    try:
        with Session(engine) as session, session.begin():
            session.execute(sqlalchemy.text(f"INSERT INTO {table} VALUES ({lease.message_id})"))
            with transport.settle_in(lease, session):
                pass
        assert _rows(postgres_url, table) == [lease.message_id]
        assert transport.stats().messages == 0
    finally:
        engine.dispose()


def test_a_second_claimer_never_waits_on_the_held_group(
    transport_factory: Make, postgres_url: str
) -> None:
    """Claims skip the held row at once (SKIP LOCKED): a claim from another thread returns
    within its own round trip while the block stays open."""
    transport = transport_factory()
    other = transport_factory(queue=transport.queue)
    transport.publish("g", Event(kind="k"))
    transport.publish("h", Event(kind="k"))
    lease = transport.claim() or pytest.fail("nothing claimed")
    got: list[str] = []
    with psycopg.connect(postgres_url) as conn, transport.settle_in(lease, conn):
        worker = threading.Thread(
            target=lambda: got.extend(x.group_id for x in other.claim_many(10))
        )
        worker.start()
        worker.join(timeout=10)
        assert not worker.is_alive()
    assert got == ["h"]


def test_a_task_taking_connection_writes_and_acks_in_one_transaction(
    transport_factory: Make, postgres_url: str, table: str
) -> None:
    transport = transport_factory()
    app = App(transport)
    calls: list[int] = []

    @app.task(group="order-{order_id}", kind="record")
    def record(order_id: int, lease: Lease, connection: psycopg.Connection[Any]) -> None:
        calls.append(lease.attempt)
        connection.execute(f"INSERT INTO {table} VALUES (%s)", (lease.message_id,))
        if order_id == 2 and lease.attempt == 1:
            raise RuntimeError("fails after its write, once")

    ids = record.defer_many([{"order_id": 1}, {"order_id": 2}])
    app.worker(retry=RetryPolicy(base=0, jitter=0)).run(
        stop_when_idle=True, install_signal_handlers=False
    )
    # Order 2's first run wrote and failed: its write rolled back with it, the retry's stayed.
    assert _rows(postgres_url, table) == sorted(ids)
    assert sorted(calls) == [1, 1, 2]
    assert transport.stats().messages == 0


def _round_trips(trace: str) -> list[str]:
    """The client's messages that wait for the server's answer, from a libpq trace: each
    simple Query and each Sync (the end of an extended-protocol exchange)."""
    out = []
    for line in trace.splitlines():
        fields = line.split("\t")
        if len(fields) >= 3 and fields[0] == "F" and fields[2].split(" ")[0] in ("Query", "Sync"):
            out.append(" ".join(fields[2:]))
    return out


def test_settle_in_costs_one_round_trip_beyond_the_transaction_and_the_ack(
    transport_factory: Make, postgres_url: str, tmp_path: Any
) -> None:
    # The caller's connection, traced by libpq: an empty block costs BEGIN and COMMIT (which
    # the caller's own transaction costs anyway), the ack (which a worker's own ack costs on
    # another connection) and one more, the entry's lock on the lease. Nothing else.
    transport = transport_factory()
    transport.publish("g", Event(kind="k"))
    lease = transport.claim() or pytest.fail("nothing claimed")
    trace_file = tmp_path / "trace.txt"
    with psycopg.connect(postgres_url) as conn, open(trace_file, "w") as out:
        conn.execute("SELECT 1")  # connected and warm: the trace starts after this
        conn.rollback()
        conn.pgconn.trace(out.fileno())
        conn.pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS)
        with transport.settle_in(lease, conn):
            pass
        conn.pgconn.untrace()
    trips = _round_trips(trace_file.read_text())
    assert len(trips) == 4, trips
    assert "BEGIN" in trips[0], trips
    assert "COMMIT" in trips[-1], trips
    assert transport.stats().messages == 0
