"""settle_and_claim on PostgreSQL (pgque_settle_claim_v1, migration 9).

The fenced settle part (a stale token, an expired lease another claim took), distinct groups,
settle only (n=0), claim only, errors recorded as nack and dead_letter record them, release not
counting the attempt, dead letters numbered in list order; the interleavings with a second
session (harness: pg_interleave) and the upgrade from schema 8 with a lease out.
docs/postgres.md (the pairwise review) names the test of each pair.
"""

from __future__ import annotations

from collections.abc import Callable

import psycopg
import pytest
from pg_interleave import Holder, start

from pgque.core import Event, InvalidInput, Settlement
from pgque.postgres import LATEST_VERSION, PostgresTransport, install_schema
from pgque.postgres._sql import migrations

Make = Callable[..., PostgresTransport]


class Clock:
    """A settable clock (epoch seconds) for deterministic expiry."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_settle_only_and_claim_only(transport_factory: Make) -> None:
    transport = transport_factory()
    for group in ("a", "b", "c"):
        transport.publish(group, Event(kind=group))
    claimed = transport.settle_and_claim([], 2)
    assert claimed.settled == []
    assert sorted(lease.group_id for lease in claimed.leases) == ["a", "b"]
    settled = transport.settle_and_claim([Settlement.ack(x) for x in claimed.leases], 0)
    assert settled.settled == [True, True]
    assert settled.leases == []
    assert transport.stats().messages == 1
    assert transport.settle_and_claim([], 0).settled == []


def test_the_claim_leases_distinct_groups_and_may_take_a_group_it_just_freed(
    transport_factory: Make,
) -> None:
    transport = transport_factory()
    for kind in ("a1", "a2", "a3"):
        transport.publish("a", Event(kind=kind))
    transport.publish("b", Event(kind="b1"))
    first = transport.claim()
    assert first is not None
    assert first.group_id == "a"
    result = transport.settle_and_claim([Settlement.ack(first)], 10)
    assert result.settled == [True]
    # b was never served, a was served just now: b first, and never two heads of a.
    assert [(x.group_id, x.event.kind) for x in result.leases] == [("b", "b1"), ("a", "a2")]


def test_a_stale_token_is_fenced_and_does_not_stop_the_claim(transport_factory: Make) -> None:
    transport = transport_factory()
    transport.publish("a", Event(kind="a"))
    transport.publish("b", Event(kind="b"))
    lease = transport.claim()
    assert lease is not None
    forged = lease.model_copy(update={"token": "0" * 32})
    result = transport.settle_and_claim([Settlement.ack(forged)], 5)
    assert result.settled == [False]
    assert [x.group_id for x in result.leases] == ["b"]  # a is still leased
    assert transport.ack(lease)  # the real lease was untouched


def test_an_expired_lease_reclaimed_by_another_claim_is_fenced(transport_factory: Make) -> None:
    clock = Clock()
    transport = transport_factory(clock=clock)
    message_id = transport.publish("a", Event(kind="a"))
    stale = transport.claim(visibility=10)
    assert stale is not None
    clock.now += 11
    fresh = transport.claim(visibility=10)
    assert fresh is not None
    assert fresh.attempt == 2
    result = transport.settle_and_claim(
        [Settlement.ack(stale), Settlement.nack(stale, delay=5), Settlement.release(stale)], 1
    )
    assert result.settled == [False, False, False]
    assert result.leases == []
    info = transport.group("a")
    assert info is not None
    assert info.state == "leased"
    assert info.head_message_id == message_id
    assert transport.ack(fresh)


def test_a_duplicate_lease_in_one_call_settles_once(transport_factory: Make) -> None:
    transport = transport_factory()
    transport.publish("a", Event(kind="a"))
    lease = transport.claim()
    assert lease is not None
    result = transport.settle_and_claim([Settlement.ack(lease), Settlement.ack(lease)], 1)
    assert result.settled == [True, False]
    assert transport.stats().groups == 0


def test_errors_are_recorded_as_nack_and_dead_letter_record_them(transport_factory: Make) -> None:
    clock = Clock()
    transport = transport_factory(clock=clock)
    transport.publish("a", Event(kind="a"))
    transport.publish("b", Event(kind="b"))
    a, b = transport.claim_many(2)
    result = transport.settle_and_claim(
        [
            Settlement.nack(a, delay=60, error=ValueError("bad sku")),
            Settlement.dead_letter(b, "rejected", error="no such customer"),
        ],
        5,
    )
    assert result.settled == [True, True]
    assert result.leases == []  # a is parked, b is gone
    info = transport.group("a")
    assert info is not None
    assert info.state == "parked"
    assert info.resume_at == clock.now + 60
    assert info.last_error is not None
    assert (info.last_error.type, info.last_error.message) == ("ValueError", "bad sku")
    assert info.last_error.at == clock.now
    (dead,) = transport.dead_letters()
    assert (dead.group_id, dead.reason) == ("b", "rejected")
    assert dead.error is not None
    assert dead.error.message == "no such customer"


def test_an_error_without_an_injected_clock_is_stamped_by_the_server(
    transport_factory: Make,
) -> None:
    transport = transport_factory()
    transport.publish("a", Event(kind="a"))
    lease = transport.claim()
    assert lease is not None
    assert transport.settle_and_claim([Settlement.nack(lease, error=KeyError("k"))], 0).settled
    info = transport.group("a")
    assert info is not None
    assert info.last_error is not None
    assert info.last_error.at > 1_000_000_000  # the server's epoch seconds, not 0


def test_release_does_not_count_the_attempt(transport_factory: Make) -> None:
    transport = transport_factory()
    transport.publish("a", Event(kind="a"))
    lease = transport.claim()
    assert lease is not None
    assert lease.attempt == 1
    result = transport.settle_and_claim([Settlement.release(lease)], 1)
    assert result.settled == [True]
    (again,) = result.leases
    assert (again.message_id, again.attempt) == (lease.message_id, 1)


def test_dead_letters_are_numbered_in_list_order(transport_factory: Make) -> None:
    transport = transport_factory()
    for group in ("c", "a", "b"):
        transport.publish(group, Event(kind=group))
    leases = {x.group_id: x for x in transport.claim_many(3)}
    order = ["c", "a", "b"]
    result = transport.settle_and_claim([Settlement.dead_letter(leases[g], "x") for g in order], 0)
    assert result.settled == [True, True, True]
    assert [dead.group_id for dead in transport.dead_letters()] == order


def test_max_attempts_applies_to_the_claim(transport_factory: Make) -> None:
    transport = transport_factory(max_attempts=1)
    transport.publish("a", Event(kind="a1"))
    transport.publish("a", Event(kind="a2"))
    lease = transport.claim()
    assert lease is not None
    result = transport.settle_and_claim([Settlement.nack(lease)], 1)
    assert result.settled == [True]
    assert [x.event.kind for x in result.leases] == ["a2"]
    (dead,) = transport.dead_letters()
    assert dead.reason == "max_attempts (1) exhausted"


def test_invalid_input_is_refused_before_any_io(transport_factory: Make) -> None:
    transport = transport_factory()
    transport.publish("a", Event(kind="a"))
    lease = transport.claim()
    assert lease is not None
    other = transport_factory()
    calls: list[Callable[[], object]] = [
        lambda: transport.settle_and_claim([Settlement.ack(lease)], -1),
        lambda: transport.settle_and_claim([Settlement.ack(lease)], 1, visibility=-1),
        lambda: transport.settle_and_claim([Settlement.ack(lease)], 1, min_priority=9),
        lambda: transport.settle_and_claim([Settlement.ack(lease)], 1, holder="x" * 201),
        lambda: other.settle_and_claim([Settlement.ack(lease)], 1),
        lambda: transport.settle_and_claim([Settlement(lease, "ack", delay=1.0)], 1),
    ]
    for bad in calls:
        with pytest.raises(InvalidInput):
            bad()
    assert transport.ack(lease)  # nothing was settled


def test_an_undecodable_head_is_dead_lettered_through_its_lease(
    transport_factory: Make, raw: psycopg.Connection[tuple[object, ...]]
) -> None:
    transport = transport_factory()
    bad_id = transport.publish("a", Event(kind="a"))
    transport.publish("b", Event(kind="b"))
    raw.execute("UPDATE pgque_fifo.messages SET event = 'not json' WHERE id = %s", [bad_id])
    result = transport.settle_and_claim([], 2)
    assert [x.group_id for x in result.leases] == ["b"]
    (dead,) = transport.dead_letters()
    assert dead.message_id == bad_id
    assert dead.reason.startswith("undecodable event")


# -- interleavings -------------------------------------------------------------------------------


def test_a_fused_call_waits_for_a_session_holding_a_settled_group_then_completes(
    transport_factory: Make, postgres_url: str
) -> None:
    transport = transport_factory()
    transport.publish("a", Event(kind="a1"))
    transport.publish("a", Event(kind="a2"))
    transport.publish("b", Event(kind="b1"))
    lease = transport.claim()
    assert lease is not None
    assert lease.group_id == "a"
    with Holder(postgres_url) as holder:
        holder.lock_group(transport.queue, "a", "FOR NO KEY UPDATE")
        fused = start(
            postgres_url,
            lambda t: t.settle_and_claim([Settlement.ack(lease)], 2),
            queue=transport.queue,
        )
        fused.wait_blocked()  # seen waiting in pg_stat_activity for a's row
        holder.rollback()
        result = fused.result()
    assert result.settled == [True]
    assert [(x.group_id, x.event.kind) for x in result.leases] == [("b", "b1"), ("a", "a2")]


def test_a_fused_call_and_a_claim_many_never_lease_the_same_group(
    transport_factory: Make, postgres_url: str
) -> None:
    transport = transport_factory()
    for group in ("a", "b", "c", "d"):
        transport.publish(group, Event(kind=group))
        transport.publish(group, Event(kind=group + "2"))
    lease = transport.claim()
    assert lease is not None
    assert lease.group_id == "a"
    with Holder(postgres_url) as holder:
        holder.lock_group(transport.queue, "a", "FOR NO KEY UPDATE")
        fused = start(
            postgres_url,
            lambda t: t.settle_and_claim([Settlement.ack(lease)], 10),
            queue=transport.queue,
        )
        fused.wait_blocked()  # holds nothing yet: the settled row comes first
        other = start(postgres_url, lambda t: t.claim_many(10), queue=transport.queue)
        taken = other.result()  # does not wait: b, c, d (a is locked by the holder)
        holder.rollback()
        result = fused.result()
    assert sorted(x.group_id for x in taken) == ["b", "c", "d"]
    assert [x.group_id for x in result.leases] == ["a"]  # nothing else was claimable
    assert result.leases[0].event.kind == "a2"


def test_a_claim_many_holding_groups_is_skipped_by_a_fused_call(
    transport_factory: Make, postgres_url: str
) -> None:
    transport = transport_factory()
    for group in ("a", "b", "c"):
        transport.publish(group, Event(kind=group))
    lease = transport.claim()
    assert lease is not None
    assert lease.group_id == "a"
    # A claim_many that sits holding b (and c) while a fused call runs: the fused call passes
    # over them (SKIP LOCKED) instead of waiting or leasing them too.
    b_head = transport.group("b")
    assert b_head is not None
    assert b_head.head_message_id is not None
    with Holder(postgres_url) as holder:
        holder.lock_message(b_head.head_message_id, "FOR SHARE")  # its attempts update waits
        other = start(postgres_url, lambda t: t.claim_many(10), queue=transport.queue)
        other.wait_blocked()
        fused = start(
            postgres_url,
            lambda t: t.settle_and_claim([Settlement.ack(lease)], 10),
            queue=transport.queue,
        )
        result = fused.result()
        holder.rollback()
        taken = other.result()
    assert result.settled == [True]
    assert {x.group_id for x in result.leases}.isdisjoint({x.group_id for x in taken})
    assert sorted(x.group_id for x in result.leases + taken) == ["b", "c"]


# -- upgrade -------------------------------------------------------------------------------------


def test_a_lease_taken_at_schema_8_is_settled_by_the_fused_call_after_the_upgrade(
    scratch_db: Callable[[], str],
) -> None:
    url = scratch_db()
    with psycopg.connect(url, autocommit=True) as conn:
        for migration in migrations():
            if migration.version < 9:
                conn.execute(migration.sql)
        conn.execute("SELECT pgque_fifo.pgque_publish_v1('q', 'g', '{\"kind\": \"a\"}', 0, 1)")
        conn.execute("SELECT pgque_fifo.pgque_publish_v1('q', 'g', '{\"kind\": \"b\"}', 0, 1)")
        row = conn.execute(
            "SELECT group_id, message_id, token FROM"
            " pgque_fifo.pgque_claim_v2('q', 1, 30, 0, NULL, 'dead_letter', 'old', 2)"
        ).fetchone()
        assert row is not None
        assert install_schema(conn) == LATEST_VERSION
        transport = PostgresTransport(conn, queue="q", setup=False, clock=lambda: 3.0)
        result = conn.execute(
            "SELECT settled, group_id FROM pgque_fifo.pgque_settle_claim_v1("
            "'q', ARRAY['ack'], ARRAY[%s], ARRAY[%s]::bigint[], ARRAY[%s], ARRAY[0.0],"
            " ARRAY[''], ARRAY[NULL]::text[], 1, 30, 0, NULL, 'dead_letter', NULL, 3)",
            [row[0], row[1], row[2]],
        ).fetchall()
        assert result == [([True], None), (None, "g")]
        info = transport.group("g")
        assert info is not None
        assert info.state == "leased"
        assert info.head_attempts == 1
