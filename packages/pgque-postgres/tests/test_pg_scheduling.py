"""Scheduled messages on PostgreSQL: transactions, concurrent claimers, plans (issue 17).

The semantics every backend shares are in the conformance suite (scheduling); these tests are
about what only PostgreSQL has: a delayed publish inside the caller's transaction, two claimers
racing to let one due message into its group (forced interleavings, see pg_interleave), and
the plans that keep a claim cheap however many messages wait.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from pg_interleave import Holder, start

from pgque.conformance.plans import (
    Plan,
    analyze_as_empty,
    describe,
    explain,
    explaining,
    index_scans,
    nodes,
    seq_scans,
)
from pgque.core import Event
from pgque.postgres import PostgresTransport

Conn = psycopg.Connection[tuple[Any, ...]]

#: A claim of one message as the Python code sends it, on a holder's session.
_CLAIM = """
SELECT message_id FROM pgque_fifo.pgque_claim_v2(%s, 1, 30, 0, NULL, 'dead_letter', NULL, %s)
"""


@pytest.fixture
def queue(janitor: Callable[[str], None]) -> Iterator[str]:
    """Return a fresh queue name, purged at teardown."""
    name = f"s_{uuid.uuid4().hex[:24]}"
    yield name
    janitor(name)


def _at(clock: list[float]) -> Callable[[], float]:
    return lambda: clock[0]


def _copies(raw: Conn, message_id: int) -> tuple[int, int]:
    """How many rows of *message_id* there are in messages and in scheduled."""
    row = raw.execute(
        "SELECT (SELECT count(*) FROM pgque_fifo.messages WHERE id = %(id)s),"
        " (SELECT count(*) FROM pgque_fifo.scheduled WHERE id = %(id)s)",
        {"id": message_id},
    ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def test_a_delayed_publish_in_a_rolled_back_transaction_is_never_scheduled(
    postgres_url: str, raw: Conn, queue: str
) -> None:
    with psycopg.connect(postgres_url) as conn:
        transport = PostgresTransport(conn, queue=queue, setup=False)
        with conn.transaction(force_rollback=True):
            message_id = transport.publish("g", Event(kind="later"), delay=60, connection=conn)
            # Inside the transaction it is scheduled (its own session sees it).
            assert [m.id for m in transport.scheduled()] == [message_id]
    assert _copies(raw, message_id) == (0, 0)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        assert PostgresTransport(conn, queue=queue, setup=False).stats().scheduled == 0


def test_a_delayed_publish_in_a_committed_transaction_is_scheduled_with_the_rest(
    postgres_url: str, raw: Conn, queue: str
) -> None:
    with psycopg.connect(postgres_url) as conn:
        transport = PostgresTransport(conn, queue=queue, setup=False)
        with conn.transaction():
            now_id = transport.publish("g", Event(kind="now"), connection=conn)
            later = transport.publish_many(
                [("g", Event(kind="a")), ("h", Event(kind="b"))], delay=60, connection=conn
            )
            # Not visible to another session before the commit.
            with psycopg.connect(postgres_url, autocommit=True) as other:
                assert PostgresTransport(other, queue=queue, setup=False).scheduled() == []
    assert now_id < later[0] < later[1]
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        listed = PostgresTransport(conn, queue=queue, setup=False).scheduled()
    assert [(m.id, m.group_id, m.kind) for m in listed] == [
        (later[0], "g", "a"),
        (later[1], "h", "b"),
    ]


def test_a_second_claimer_never_lets_in_what_the_first_is_letting_in(
    postgres_url: str, raw: Conn, queue: str
) -> None:
    clock = [1000.0]
    producer = PostgresTransport(raw, queue=queue, setup=False, clock=_at(clock))
    due_id = producer.publish("g", Event(kind="due"), delay=10)
    with Holder(postgres_url) as first:
        # The first claimer lets the message in and leases it, and has not committed yet.
        assert first.execute(_CLAIM, (queue, 1011.0)) == [(due_id,)]
        # The second finds the group's lock taken: it neither waits nor moves it again.
        second = start(postgres_url, lambda t: t.claim(), queue=queue, clock=lambda: 1011.0)
        assert second.result() is None
        first.commit()
    assert _copies(raw, due_id) == (1, 0)


def test_a_claimer_waiting_on_a_locked_scheduled_row_moves_it_once_and_others_pass(
    postgres_url: str, raw: Conn, queue: str
) -> None:
    clock = [1000.0]
    producer = PostgresTransport(raw, queue=queue, setup=False, clock=_at(clock))
    due_id = producer.publish("g", Event(kind="due"), delay=10)
    with Holder(postgres_url) as holder:
        # As a cancel in flight holds it.
        assert holder.execute(
            "SELECT 1 FROM pgque_fifo.scheduled WHERE id = %s FOR UPDATE", (due_id,)
        )
        first = start(postgres_url, lambda t: t.claim(), queue=queue, clock=lambda: 1011.0)
        first.wait_blocked()  # it holds the group's lock and waits for the row
        second = start(postgres_url, lambda t: t.claim(), queue=queue, clock=lambda: 1011.0)
        assert second.result() is None  # it does not wait: the group's lock is taken
        holder.rollback()
    lease = first.result()
    assert lease is not None
    assert lease.message_id == due_id
    assert _copies(raw, due_id) == (1, 0)


def test_a_cancel_waits_for_a_claim_letting_the_message_in_and_then_finds_it_due(
    postgres_url: str, raw: Conn, queue: str
) -> None:
    clock = [1000.0]
    producer = PostgresTransport(raw, queue=queue, setup=False, clock=_at(clock))
    due_id = producer.publish("g", Event(kind="due"), delay=10)
    with Holder(postgres_url) as claimer:
        assert claimer.execute(_CLAIM, (queue, 1011.0)) == [(due_id,)]
        # By this cancel's clock the message is not due yet, but a claim is moving it in.
        cancel = start(postgres_url, lambda t: t.cancel(due_id), queue=queue, clock=lambda: 1005.0)
        cancel.wait_blocked()
        claimer.commit()
    assert cancel.result() is False
    assert _copies(raw, due_id) == (1, 0)


def _node_types(plan: Plan) -> list[str]:
    return [node["Node Type"] for node in nodes(plan)]


def test_the_due_probe_and_the_group_head_are_index_scans_with_many_scheduled(
    raw: Conn, queue: str
) -> None:
    raw.execute(
        "INSERT INTO pgque_fifo.scheduled (id, queue, group_id, event, priority, due_at,"
        " enqueued_at)"
        " SELECT nextval(pg_get_serial_sequence('pgque_fifo.messages', 'id')), %s,"
        " 'g' || (i %% 100), '{}', 0, 10000 + i, 0 FROM generate_series(1, 20000) AS i",
        (queue,),
    )
    raw.execute(
        "INSERT INTO pgque_fifo.messages (queue, group_id, event, enqueued_at)"
        " SELECT %s, 'g' || (i %% 100), '{}', 0 FROM generate_series(1, 20000) AS i",
        (queue,),
    )
    raw.execute("ANALYZE pgque_fifo.scheduled")
    raw.execute("ANALYZE pgque_fifo.messages")
    # What pgque_promote_v1 runs first on every claim. Nothing due: one descent of the index
    # (a handful of pages, however many rows wait).
    probe = (
        "SELECT s.group_id FROM pgque_fifo.scheduled s WHERE s.queue = %s AND s.due_at <= %s"
        " ORDER BY s.due_at, s.id LIMIT 1000"
    )
    idle = explain(raw, probe, (queue, 5000.0))
    assert "scheduled_due" in index_scans(idle), describe(idle)
    assert seq_scans(idle) == [], describe(idle)
    run = explain(raw, probe, (queue, 5000.0), analyze=True)
    hits = [int(node.get("Shared Hit Blocks", 0)) for node in nodes(run)]
    assert 0 < max(hits) <= 8, describe(run)
    # Many due: the index gives the order, the limit stops the scan (no sort of what is due).
    busy = explain(raw, probe, (queue, 1e12))
    assert "scheduled_due" in index_scans(busy), describe(busy)
    assert "Sort" not in _node_types(busy), describe(busy)
    # What pgque_join_due_v1 runs first on every publish.
    group = explain(
        raw,
        "SELECT 1 FROM pgque_fifo.scheduled s WHERE s.queue = %s AND s.group_id = %s"
        " AND s.due_at <= %s",
        (queue, "g1", 5000.0),
    )
    assert "scheduled_group" in index_scans(group), describe(group)
    assert seq_scans(group) == [], describe(group)
    # The head of a group, in position order (pgque_lease_group_v3).
    head = explain(
        raw,
        "SELECT m.id FROM pgque_fifo.messages m WHERE m.queue = %s AND m.group_id = %s"
        " ORDER BY COALESCE(m.seq, m.id) LIMIT 1",
        (queue, "g1"),
    )
    assert "messages_head" in index_scans(head), describe(head)
    assert "Sort" not in _node_types(head), describe(head)


def test_a_message_that_joined_late_is_behind_earlier_ones_in_every_view(
    raw: Conn, queue: str
) -> None:
    clock = [0.0]
    transport = PostgresTransport(raw, queue=queue, setup=False, clock=_at(clock))
    late = transport.publish("g", Event(kind="S"), delay=10)
    clock[0] = 5.0
    first = transport.publish("g", Event(kind="A"))
    clock[0] = 11.0
    info = transport.group("g")  # lets S in: behind A, its enqueue time the due time
    assert info is not None
    assert info.depth == 2
    assert info.head_message_id == first
    row = raw.execute(
        "SELECT seq, enqueued_at FROM pgque_fifo.messages WHERE id = %s", (late,)
    ).fetchone()
    assert row is not None
    assert row[0] is not None
    assert row[0] > first
    assert row[1] == 10.0
    lease = transport.claim()
    assert lease is not None
    assert lease.message_id == first
    assert transport.ack(lease)
    lease = transport.claim()
    assert lease is not None
    assert lease.message_id == late


def test_a_queue_holding_only_scheduled_messages_is_listed_and_shown(raw: Conn, queue: str) -> None:
    transport = PostgresTransport(raw, queue=queue, setup=False)
    assert queue not in transport.queues()
    message_id = transport.publish("g", Event(kind="later"), delay=60)
    assert queue in transport.queues()
    # The operator view shows it too.
    row = raw.execute(
        "SELECT messages, scheduled, next_due_at IS NOT NULL FROM pgque_fifo.queue_stats"
        " WHERE queue = %s",
        (queue,),
    ).fetchone()
    assert row == (0, 1, True)
    assert transport.cancel(message_id)
    assert queue not in transport.queues()


def test_an_in_place_redrive_puts_a_message_that_joined_late_back_in_its_place(
    raw: Conn, queue: str
) -> None:
    clock = [0.0]
    transport = PostgresTransport(raw, queue=queue, setup=False, clock=_at(clock))
    late = transport.publish("g", Event(kind="S"), delay=10)
    clock[0] = 5.0
    first = transport.publish("g", Event(kind="A"))
    clock[0] = 11.0
    after = transport.publish("g", Event(kind="B"))  # S joins first: A, S, B
    for expected in (first, late):
        lease = transport.claim()
        assert lease is not None
        assert lease.message_id == expected
        assert transport.dead_letter(lease, "bad")
    assert transport.redrive() == 2
    # Both back under their ids and in their places: S behind A (its position, not its older
    # id, which would put it first) and ahead of B.
    order = []
    while (lease := transport.claim()) is not None:
        order.append(lease.message_id)
        assert transport.ack(lease)
    assert order == [first, late, after]


def test_a_group_made_by_a_due_message_has_its_priority_when_a_publish_lets_it_in(
    raw: Conn, queue: str
) -> None:
    clock = [0.0]
    transport = PostgresTransport(raw, queue=queue, setup=False, clock=_at(clock))
    late = transport.publish_many([("d", Event(kind="S"))], priority=3, delay=1)
    clock[0] = 11.0
    after = transport.publish("d", Event(kind="B"), priority=0)
    info = transport.group("d")
    assert info is not None
    assert info.priority == 3  # the group the due message made at t=1, before this publish
    assert info.head_message_id == late[0]
    assert info.depth == 2
    assert after > late[0]


_TICK = """
SELECT pgque_fifo.pgque_publish_tick_v2(%s, 'every-second', %s, 'g', '{"kind": "tick"}', 0, NULL,
                                        NULL)
"""


@pytest.mark.parametrize("first_commits", [True, False])
def test_of_two_publishers_of_one_tick_exactly_one_appends(
    postgres_url: str, raw: Conn, queue: str, first_commits: bool
) -> None:
    with Holder(postgres_url) as first:
        (taken,) = first.execute(_TICK, (queue, 60.0))
        assert taken[0] is not None
        second = start(
            postgres_url,
            lambda t: t.publish_tick("every-second", 60.0, "g", Event(kind="tick")),
            queue=queue,
        )
        second.wait_blocked()  # on the tick row the first one wrote
        if first_commits:
            first.commit()
        else:
            first.rollback()
    result = second.result()
    if first_commits:
        assert result is None
    else:
        assert result is not None
    transport = PostgresTransport(raw, queue=queue, setup=False)
    assert transport.stats().messages == 1
    assert transport.last_tick("every-second") == 60.0


def test_scheduling_calls_prepare_nothing_with_prepared_statements_off(postgres_url: str) -> None:
    # What runs behind PgBouncer in transaction mode: no statement may stay prepared on a
    # server connection. psycopg prepares a statement on its sixth run unless told not to.
    queue = f"s_{uuid.uuid4().hex[:24]}"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        transport = PostgresTransport(conn, queue=queue, setup=False, prepared_statements=False)
        try:
            for n in range(7):
                message_id = transport.publish("g", Event(kind="later"), delay=60)
                assert transport.publish_many([("g", Event(kind="k"))], delay=60)
                assert transport.scheduled(limit=1)
                assert transport.cancel(message_id)
                assert transport.publish_tick("e", float(n), "g", Event(kind="t")) is not None
                assert transport.last_tick("e") == float(n)
                assert transport.stats().scheduled == n + 1
                assert transport.wait_for_messages(0) in (True, False)
                lease = transport.claim()
                assert lease is not None
                assert transport.ack(lease)
            row = conn.execute("SELECT count(*) FROM pg_prepared_statements").fetchone()
            assert row == (0,)
        finally:
            transport.purge()


def _stuck_behind_a_held_group(raw: Conn, queue: str) -> tuple[list[int], int]:
    """Schedule 1,000 messages into g and then one into h, all due by 1011."""
    producer = PostgresTransport(raw, queue=queue, setup=False, clock=lambda: 1000.0)
    many = producer.publish_many([("g", Event(kind="g"))] * 1000, delay=10)
    lone = producer.publish("h", Event(kind="h"), delay=10)
    return many, lone


def test_a_group_whose_lock_is_held_does_not_hide_the_due_messages_of_others(
    postgres_url: str, raw: Conn, queue: str
) -> None:
    many, lone = _stuck_behind_a_held_group(raw, queue)
    with Holder(postgres_url) as publisher:
        # As a transactional publish into g left open holds it.
        publisher.lock_group_advisory(queue, "g")
        claim = start(postgres_url, lambda t: t.claim(), queue=queue, clock=lambda: 1011.0)
        lease = claim.result()
        assert lease is not None
        assert (lease.group_id, lease.message_id) == ("h", lone)
        assert _copies(raw, many[0]) == (0, 1)  # g's wait for its publisher
        publisher.rollback()
    claimer = PostgresTransport(raw, queue=queue, setup=False, clock=lambda: 1011.0)
    lease = claimer.claim()
    assert lease is not None
    assert lease.message_id == many[0]


def test_an_idle_waiter_backs_off_while_the_only_due_messages_are_in_a_held_group(
    postgres_url: str, raw: Conn, queue: str
) -> None:
    _stuck_behind_a_held_group(raw, queue)
    waiter = PostgresTransport.from_dsn(
        postgres_url, queue=queue, setup=False, clock=lambda: 1011.0, min_size=1, max_size=1
    )
    with Holder(postgres_url) as publisher, waiter:
        publisher.lock_group_advisory(queue, "h")
        publisher.lock_group_advisory(queue, "g")
        claims = 0
        began = time.monotonic()
        while time.monotonic() - began < 1.5:
            if waiter.wait_for_messages(1.0):
                assert waiter.claim() is None
                claims += 1
        # A 20 ms floor would run some 75 claims; the back-off doubles up to 1 s.
        assert 2 <= claims <= 10


def test_a_claim_does_not_wait_when_a_due_group_row_has_an_update_chain_to_follow(
    postgres_url: str, raw: Conn, queue: str
) -> None:
    producer = PostgresTransport(raw, queue=queue, setup=False, clock=lambda: 1000.0)
    producer.pause("g")  # g has a row
    producer.publish("g", Event(kind="g"), delay=10)
    lone = producer.publish("h", Event(kind="h"), delay=10)
    with Holder(postgres_url) as other:
        # A no-key update leaves the row open to FOR KEY SHARE, but its new version is locked
        # FOR UPDATE: SKIP LOCKED does not apply while following the update chain.
        other.execute(
            "UPDATE pgque_fifo.groups SET priority = priority WHERE queue = %s AND group_id = 'g'"
            " RETURNING 1",
            (queue,),
        )
        other.lock_group(queue, "g", "FOR UPDATE")
        claim = start(postgres_url, lambda t: t.claim(), queue=queue, clock=lambda: 1011.0)
        lease = claim.result(timeout=5)
        assert lease is not None
        assert lease.message_id == lone


def test_a_claim_lets_in_a_bounded_batch_of_one_group_and_a_publish_the_rest(
    raw: Conn, queue: str
) -> None:
    producer = PostgresTransport(raw, queue=queue, setup=False, clock=lambda: 1000.0)
    due = producer.publish_many([("g", Event(kind="due"))] * 1500, delay=10)
    # A claim's promotion moves at most its limit of rows, the first in (due_at, id) order.
    row = raw.execute("SELECT pgque_fifo.pgque_promote_v1(%s, 1000, 1011)", (queue,)).fetchone()
    assert row == (1000,)
    assert _copies(raw, due[999]) == (1, 0)
    assert _copies(raw, due[1000]) == (0, 1)
    # An append lets every remaining due message in first.
    later = PostgresTransport(raw, queue=queue, setup=False, clock=lambda: 1011.0)
    last = later.publish("g", Event(kind="after"))
    order = raw.execute(
        "SELECT id FROM pgque_fifo.messages WHERE queue = %s ORDER BY COALESCE(seq, id)", (queue,)
    ).fetchall()
    assert [r[0] for r in order] == [*due, last]


def test_a_partition_slot_count_is_not_reset_while_messages_are_scheduled(
    raw: Conn, queue: str
) -> None:
    slots = raw.execute("SELECT pgque_fifo.pgque_partition_slots_v1(%s, 8, NULL)", (queue,))
    assert slots.fetchone() == (8,)
    producer = PostgresTransport(raw, queue=queue, setup=False)
    later = producer.publish("p3", Event(kind="later"), delay=60)
    reset = "SELECT pgque_fifo.pgque_partition_reset_slots_v1(%s)"
    # Published under 8 slots, it would join under another count after a reset.
    assert raw.execute(reset, (queue,)).fetchone() == (False,)
    assert producer.cancel(later) is True
    assert raw.execute(reset, (queue,)).fetchone() == (True,)


_BAD_DELAYS = [float("nan"), float("inf"), float("-inf"), -1.0, 0.0, 366 * 24 * 3600.0 + 1]


@pytest.mark.parametrize("delay", _BAD_DELAYS)
def test_the_schedule_entry_points_refuse_a_bad_delay_from_a_sql_caller(
    raw: Conn, queue: str, delay: float
) -> None:
    calls: list[tuple[str, tuple[Any, ...]]] = [
        (
            "SELECT pgque_fifo.pgque_schedule_v2(%s, 'g', '{}', 0, %s, NULL, 1000)",
            (queue, delay),
        ),
        (
            "SELECT pgque_fifo.pgque_schedule_many_v2(%s, '{g}', '{\"{}\"}', 0, %s, NULL, 1000)",
            (queue, delay),
        ),
    ]
    for query, params in calls:
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="delay"):
            raw.execute(query, params)
    assert raw.execute(
        "SELECT count(*) FROM pgque_fifo.scheduled WHERE queue = %s", (queue,)
    ).fetchone() == (0,)


@pytest.mark.parametrize("now", [float("nan"), float("inf"), float("-inf")])
def test_the_schedule_entry_points_refuse_a_due_time_that_is_not_finite(
    raw: Conn, queue: str, now: float
) -> None:
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="due time"):
        raw.execute(
            "SELECT pgque_fifo.pgque_schedule_v2(%s, 'g', '{}', 0, 10, NULL, %s)", (queue, now)
        )


@pytest.mark.parametrize("tick", [float("nan"), float("inf"), float("-inf"), -1.0, None])
def test_publish_tick_refuses_a_bad_tick_from_a_sql_caller(
    raw: Conn, queue: str, tick: float | None
) -> None:
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="tick"):
        raw.execute(
            "SELECT pgque_fifo.pgque_publish_tick_v2(%s, 'e', %s, 'g', '{}', 0, NULL, NULL)",
            (queue, tick),
        )


@pytest.mark.parametrize("limit", [None, 0, -1, 1001])
def test_scheduled_refuses_a_bad_limit_from_a_sql_caller(
    raw: Conn, queue: str, limit: int | None
) -> None:
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="limit"):
        raw.execute(
            "SELECT * FROM pgque_fifo.pgque_scheduled_v1(%s, %s, NULL, NULL)", (queue, limit)
        )


def test_group_and_groups_do_not_fail_in_a_read_only_transaction(
    postgres_url: str, raw: Conn, queue: str
) -> None:
    producer = PostgresTransport(raw, queue=queue, setup=False, clock=lambda: 1000.0)
    producer.publish("g", Event(kind="now"))
    producer.publish("g", Event(kind="due"), delay=10)
    producer.publish("h", Event(kind="due"), delay=10)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("SET default_transaction_read_only = on")
        reader = PostgresTransport(conn, queue=queue, setup=False, clock=lambda: 1011.0)
        # As on a replica: a due message shows once a writer moved it in.
        info = reader.group("g")
        assert info is not None
        assert info.depth == 1
        assert reader.group("h") is None
        assert [g.group_id for g in reader.groups()] == ["g"]
    assert raw.execute(
        "SELECT count(*) FROM pgque_fifo.scheduled WHERE queue = %s", (queue,)
    ).fetchone() == (2,)


def test_group_and_groups_do_not_wait_for_a_publish_holding_the_group(
    postgres_url: str, raw: Conn, queue: str
) -> None:
    producer = PostgresTransport(raw, queue=queue, setup=False, clock=lambda: 1000.0)
    producer.publish("g", Event(kind="now"))
    producer.publish("g", Event(kind="due"), delay=10)
    with Holder(postgres_url) as publisher:
        publisher.lock_group_advisory(queue, "g")
        one = start(postgres_url, lambda t: t.group("g"), queue=queue, clock=lambda: 1011.0)
        info = one.result(timeout=5)
        assert info is not None
        assert info.depth == 1  # the publish lets it in
        every = start(postgres_url, lambda t: t.groups(), queue=queue, clock=lambda: 1011.0)
        assert [g.depth for g in every.result(timeout=5)] == [1]
    info = PostgresTransport(raw, queue=queue, setup=False, clock=lambda: 1011.0).group("g")
    assert info is not None
    assert info.depth == 2


def test_ids_are_drawn_from_the_named_sequence_without_a_catalog_lookup(raw: Conn) -> None:
    row = raw.execute("SELECT pg_get_serial_sequence('pgque_fifo.messages', 'id')").fetchone()
    assert row == ("pgque_fifo.messages_id_seq",)
    looked_up = raw.execute(
        "SELECT p.proname FROM pg_proc p WHERE p.pronamespace = 'pgque_fifo'::regnamespace"
        " AND p.prosrc LIKE '%%pg_get_serial_sequence%%' ORDER BY 1"
    ).fetchall()
    assert looked_up == []


@pytest.mark.parametrize("scheduled", [20000, 0], ids=["20000-waiting", "analyzed-empty"])
def test_the_probes_of_a_claim_and_a_publish_stay_index_scans_in_generic_plans(
    postgres_url: str, raw: Conn, queue: str, scheduled: int
) -> None:
    """PL/pgSQL plans a function's statements once for any parameters after a few calls (a
    generic plan): the "anything due?" probes must then still descend the index, not read the
    table (a claim paid a sequential scan of 1,000,000 scheduled rows that way). With the
    statistics of an empty table (what autovacuum records on a fresh database) the planner
    prefers a sequential scan, and a session keeps that plan as the table fills."""
    raw.execute(
        "INSERT INTO pgque_fifo.scheduled (id, queue, group_id, event, priority, due_at,"
        " enqueued_at)"
        " SELECT nextval('pgque_fifo.messages_id_seq'::regclass), %s,"
        " 'g' || (i %% 100), '{}', 0, 1e9 + i, 0 FROM generate_series(1, %s) AS i",
        (queue, scheduled),
    )
    if scheduled == 0:
        analyze_as_empty(raw, "pgque_fifo.scheduled")
    else:
        raw.execute("ANALYZE pgque_fifo.scheduled")
    other = queue + "_other"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        plans = explaining(conn)
        conn.execute("SET plan_cache_mode = force_generic_plan")
        for target in (queue, other):
            conn.execute(
                "SELECT pgque_fifo.pgque_publish_v2(%s, 'g1', '{}', 0, NULL, NULL)", (target,)
            ).fetchall()
            conn.execute(_CLAIM, (target, None)).fetchall()
            conn.execute(
                "SELECT * FROM pgque_fifo.pgque_next_due_v1(%s, NULL)", (target,)
            ).fetchall()
    assert any("pgque_fifo.scheduled" in p["Query Text"] for p in plans), describe(plans)
    assert "scheduled" not in seq_scans(plans), describe(p for p in plans if seq_scans(p))
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("SELECT pgque_fifo.pgque_purge_v1(%s)", (other,))
