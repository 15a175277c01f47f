"""Fairness keys on PostgreSQL: what the conformance suite cannot show.

Two claimers of one capped key are serialised on the queue's fairness row (the second is seen
waiting in ``pg_stat_activity`` and then respects the cap); an expired lease frees its slot on
the server's clock; a database migrated from version 16 keeps its groups, in the default key;
and the keyed claim walks indexes only, at 10,000 keys and 100,000 groups.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from pg_interleave import Holder, start

from pgque.conformance.plans import describe, explaining, nodes
from pgque.core import Event, InMemoryTransport
from pgque.postgres import PostgresTransport, install_schema
from pgque.postgres._sql import migrations

CLAIM_SQL = (
    "SELECT group_id FROM pgque_fifo.pgque_claim_v2(%s, %s, 30, 0, NULL, 'dead_letter', %s,"
    " NULL::float8)"
)


def _key_of(group_id: str) -> str:
    return group_id.rsplit("-", 1)[0]


def test_two_claimers_never_exceed_a_cap(
    transport_factory: Callable[..., PostgresTransport], postgres_url: str
) -> None:
    """The first claim holds the queue's fairness row until it commits; the second waits on
    that lock, then counts the first one's lease among the key's live leases."""
    t = transport_factory()
    t.set_key_policy("capped", max_in_flight=1)
    for i in range(3):
        t.publish(f"capped-{i}", Event(kind="job"), fairness_key="capped")
    t.publish("free-0", Event(kind="job"), fairness_key="free")
    with Holder(postgres_url) as holder:
        first = [row[0] for row in holder.execute(CLAIM_SQL, (t.queue, 5, "first"))]
        assert sorted(_key_of(g) for g in first) == ["capped", "free"]
        second = start(postgres_url, lambda other: other.claim_many(5), queue=t.queue)
        blockers = second.wait_blocked()  # seen waiting on a lock in pg_stat_activity
        assert holder.pid in blockers
        waiting = holder.execute(
            "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (second.pid,)
        )
        assert waiting == [("Lock",)]
        holder.commit()
        leases = second.result()
    # The capped key's one slot is the first claim's: the second leases nothing of it.
    assert [lease.group_id for lease in leases] == []
    listing = t.keys()
    [capped] = [k for k in listing if k.key == "capped"]
    assert (capped.in_flight, capped.groups) == (1, 3)


def test_a_claim_that_waited_for_the_clock_row_times_its_leases_after_the_wait(
    transport_factory: Callable[..., PostgresTransport], postgres_url: str
) -> None:
    """A keyed claim reads the server's time once the queue's clock row is its own: a claim
    that waited a second for it neither counts live leases nor charges tokens nor times its
    leases as of before the wait (they would expire a second early)."""
    t = transport_factory()
    t.publish("tenant-0", Event(kind="job"), fairness_key="tenant")
    with Holder(postgres_url) as holder:
        holder.execute(
            "SELECT clock FROM pgque_fifo.fair_queues WHERE queue = %s FOR UPDATE", (t.queue,)
        )
        waiter = start(postgres_url, lambda other: other.claim_many(1, 30.0), queue=t.queue)
        assert holder.pid in waiter.wait_blocked()  # seen waiting on the clock row
        time.sleep(1.0)
        [(released,)] = holder.execute(
            "SELECT extract(epoch FROM clock_timestamp())::double precision"
        )
        holder.commit()
        [lease] = waiter.result()
    assert lease.expires_at >= released + 30.0


def test_an_expired_lease_frees_its_slot_on_the_servers_clock(
    transport_factory: Callable[..., PostgresTransport],
) -> None:
    t = transport_factory()
    t.set_key_policy("capped", max_in_flight=1)
    for i in range(2):
        t.publish(f"capped-{i}", Event(kind="job"), fairness_key="capped")
    held = t.claim(visibility=3)
    assert held is not None
    assert t.claim(visibility=3) is None  # at the cap
    info = t.key_info("capped")
    assert info is not None
    assert info.in_flight == 1
    # The holder "died": nobody settles, and the lease runs out on the server's clock.
    while t._postgres.server_time() <= held.expires_at:
        time.sleep(0.1)
    info = t.key_info("capped")
    assert info is not None
    assert info.in_flight == 0  # counted from live leases: nothing to give back
    again = t.claim(visibility=30)
    assert again is not None
    assert again.group_id != held.group_id
    assert t.claim() is None


def test_a_claim_timed_before_the_last_one_earns_no_tokens_twice(
    transport_factory: Callable[..., PostgresTransport],
) -> None:
    # Two claimers take their "now" before waiting for the queue's clock row, so the one that
    # commits second may carry the earlier time. Its charge must not move the bucket's time
    # back: the interval between the two would then be refilled a second time. With a rate of
    # 1 claim a second and a burst of 2, three claims at one instant get 2 messages, never 3.
    now = [1_000.0]
    t = transport_factory(clock=lambda: now[0])
    t.set_key_policy("metered", rate=1, per=1, burst=2)
    for i in range(4):
        t.publish(f"metered-{i}", Event(kind="job"), fairness_key="metered")
    assert t.claim() is not None  # at 1,000: a token of 2 left
    now[0] = 999.0  # the second claimer's earlier "now"
    assert t.claim() is not None  # the last token
    now[0] = 1_000.0
    assert t.claim() is None  # no time has passed since the first claim: no token
    now[0] = 1_001.0
    assert t.claim() is not None  # one second: one token


def test_migrating_from_16_puts_the_existing_groups_in_the_default_key(
    scratch_db: Callable[[], str],
) -> None:
    url = scratch_db()
    with psycopg.connect(url, autocommit=True) as conn:
        for migration in migrations():
            if migration.version <= 16:
                conn.execute(migration.sql)
        for group in ("a", "b"):
            conn.execute(
                "SELECT pgque_fifo.pgque_publish_v1('q', %s, %s, 0, NULL)",
                (group, Event(kind="old").to_json()),
            )
        leased = conn.execute(CLAIM_SQL, ("q", 1, "old")).fetchall()
        assert leased == [("a",)]
        assert install_schema(conn) == migrations()[-1].version  # 17 and every later one
        t = PostgresTransport(conn, queue="q", setup=False)
        assert [t.group(g).fairness_key for g in ("a", "b")] == [None, None]  # type: ignore[union-attr]
        [default] = t.keys()
        assert (default.key, default.groups, default.messages, default.in_flight) == ("", 2, 2, 1)
        # The queue takes a key next to them: the default key competes like any key.
        for i in range(2):
            t.publish(f"t-{i}", Event(kind="new"), fairness_key="t")
        listing = t.keys()
        assert [k.key for k in listing] == ["", "t"]
        served = [_key_of(lease.group_id) for lease in t.claim_many(3)]
        assert sorted(served) == ["b", "t", "t"]


# -- the plan at many keys -------------------------------------------------------------------

KEYS = 10_000
GROUPS_PER_KEY = 10

MAKE_GROUPS = """
INSERT INTO pgque_fifo.groups (queue, group_id, priority, fkey)
SELECT %(queue)s, 'k' || (i %% %(keys)s) || '-' || i, 0, 'k' || (i %% %(keys)s)
  FROM generate_series(1, %(n)s) AS i
"""
MAKE_MESSAGES = """
INSERT INTO pgque_fifo.messages (queue, group_id, event, enqueued_at, fkey)
SELECT %(queue)s, 'k' || (i %% %(keys)s) || '-' || i, %(event)s, %(now)s, 'k' || (i %% %(keys)s)
  FROM generate_series(1, %(n)s) AS i
"""


def _scans(plan: dict[str, Any]) -> list[tuple[str, str | None]]:
    return [(n["Node Type"], n.get("Index Name")) for n in nodes(plan)]


def test_the_keyed_claim_walks_indexes_only(postgres_url: str) -> None:
    """At 10,000 keys and 100,000 groups (made in a transaction rolled back after), every
    statement of a claim_many(32) is an index walk: the keys in claim order (fair_keys_rank), a
    key's next group (groups_key); no sequential scan and no sort, custom or generic plans."""
    queue = f"t_{uuid.uuid4().hex[:24]}"
    with psycopg.connect(postgres_url) as conn:
        now = conn.execute("SELECT extract(epoch FROM clock_timestamp())::float8").fetchone()
        assert now is not None
        params = {
            "queue": queue,
            "keys": KEYS,
            "n": KEYS * GROUPS_PER_KEY,
            "now": now[0],
            "event": Event(kind="x").to_json(),
        }
        conn.execute(MAKE_GROUPS, params)  # the trigger makes the queue and its keys known
        conn.execute(MAKE_MESSAGES, params)
        conn.execute("ANALYZE pgque_fifo.groups")
        conn.execute("ANALYZE pgque_fifo.fair_keys")
        plans = explaining(conn)
        # Without policies a key and its next group come from one statement; with one (a
        # default weight), the key's policy, then its next group, each from its own.
        for policies in (False, True):
            if policies:
                conn.execute(
                    "SELECT pgque_fifo.pgque_set_key_policy_v1(%s, NULL, 1, NULL, NULL, 1, NULL)",
                    (queue,),
                )
            for mode in ("force_custom_plan", "force_generic_plan"):
                conn.execute(f"SET plan_cache_mode = {mode}")
                plans.clear()
                rows = conn.execute(CLAIM_SQL, (queue, 32, None)).fetchall()
                assert len({_key_of(r[0]) for r in rows}) == 32  # one group of 32 keys each
                walks = [p for p in plans if "ORDER BY k.finish, k.fkey" in p["Query Text"]]
                probes = [
                    p
                    for p in plans
                    if "FROM pgque_fifo.groups g" in p["Query Text"]
                    and "ORDER BY COALESCE(g.until, 0), g.group_id" in p["Query Text"]
                ]
                assert walks
                assert probes
                for plan in walks:
                    indexes = {name for node, name in _scans(plan) if node.startswith("Index")}
                    assert "fair_keys_rank" in indexes, describe(plan)
                for plan in probes:
                    assert ("Index Scan", "groups_key") in _scans(plan), describe(plan)
                # A charge probes the keys it charges, never reads the queue's every key.
                charges = [p for p in plans if "UPDATE pgque_fifo.fair_keys" in p["Query Text"]]
                assert charges
                for plan in charges:
                    reads = {s for s in _scans(plan) if s[0] != "ModifyTable"}
                    assert reads == {("Index Scan", "fair_keys_pkey")}, describe(plan)
                for plan in plans:
                    types = [node for node, _ in _scans(plan)]
                    assert "Seq Scan" not in types, describe(plan)
                    assert "Sort" not in types, describe(plan)
        conn.rollback()


def test_a_keyed_publish_writes_each_new_group_row_once(postgres_url: str) -> None:
    """A new group's row is inserted with the publish's key, not inserted under the default key
    and then updated: such an update left a dead row version in groups_key's range of the key
    '', which every keyed claim of the queue walks first (it is first in claim order), until a
    vacuum. The transaction's own table counters show the writes; a publish into a group with
    messages writes no group row either."""
    queue = f"t_{uuid.uuid4().hex[:24]}"
    event = Event(kind="x").to_json()
    counts = (
        "SELECT n_tup_ins, n_tup_upd FROM pg_stat_xact_user_tables"
        " WHERE relid = 'pgque_fifo.groups'::regclass"
    )
    with psycopg.connect(postgres_url) as conn:
        conn.execute(
            "SELECT pgque_fifo.pgque_publish_many_v2(%s, %s, %s, 0, 'tenant', NULL)",
            (queue, ["a", "b", "c"], [event] * 3),
        )
        conn.execute(
            "SELECT pgque_fifo.pgque_publish_v2(%s, 'd', %s, 0, 'other', NULL)", (queue, event)
        )
        assert conn.execute(counts).fetchone() == (4, 0)
        conn.execute(
            "SELECT pgque_fifo.pgque_publish_v2(%s, 'a', %s, 0, 'other', NULL)", (queue, event)
        )
        assert conn.execute(counts).fetchone() == (4, 0)  # a has messages: it keeps its key
        rows = conn.execute(
            "SELECT group_id, fkey FROM pgque_fifo.groups WHERE queue = %s ORDER BY group_id",
            (queue,),
        ).fetchall()
        assert rows == [("a", "tenant"), ("b", "tenant"), ("c", "tenant"), ("d", "other")]
        keys = conn.execute(
            "SELECT fkey FROM pgque_fifo.fair_keys WHERE queue = %s ORDER BY fkey", (queue,)
        ).fetchall()
        assert keys == [("",), ("other",), ("tenant",)]  # the trigger saw the inserts
        conn.rollback()


# -- the keys of a claim_many, in one walk --------------------------------------------------


def test_a_claim_without_policies_reads_and_charges_its_keys_in_one_statement_each(
    transport_factory: Callable[..., PostgresTransport], raw: psycopg.Connection[Any]
) -> None:
    """A claim_many(32) over 40 keys of one group each, without policies: the keys and their
    groups come from one walk, and the 32 charges are written by one statement, not one of
    each per lease."""
    t = transport_factory()
    for k in range(40):
        t.publish(f"k{k:02d}-0", Event(kind="x"), fairness_key=f"k{k:02d}")
    plans = explaining(raw)
    rows = raw.execute(CLAIM_SQL, (t.queue, 32, None)).fetchall()
    assert [r[0] for r in rows] == [f"k{k:02d}-0" for k in range(32)]
    walks = [p for p in plans if "ORDER BY k.finish, k.fkey" in p["Query Text"]]
    charges = [p for p in plans if "UPDATE pgque_fifo.fair_keys" in p["Query Text"]]
    assert (len(walks), len(charges)) == (1, 1)


@pytest.mark.parametrize("seed", [*range(6), 17])
def test_batched_claims_serve_the_keys_as_the_model_does(
    transport_factory: Callable[..., PostgresTransport], seed: int
) -> None:
    """Random keys of uneven sizes, some coming late (a late key starts at the clock, so it
    can come back before keys of a higher finish tag within one claim), groups of one to three
    messages, and heads nacked once, so exhausted when claimed again (max_attempts 1: a group
    that leases nothing mid-batch): every claim_many leases the groups the in-memory model
    leases, in its order."""
    now = 1_769_860_800.0
    rng = random.Random(seed)
    names = ["", "0", "a", "b", "c", "d", "e", "z"]
    script = [
        (r, rng.choice(names) or None, rng.randint(1, 4), rng.randint(1, 3)) for r in range(8)
    ]
    sizes = [rng.randint(1, 9) for _ in range(14)]
    nacks = [rng.random() < 0.3 for _ in range(14)]
    served: dict[str, list[list[str]]] = {}
    pg = transport_factory(clock=lambda: now, max_attempts=1)
    model = InMemoryTransport(clock=lambda: now, max_attempts=1)
    for name, t in (("pg", pg), ("model", model)):
        rounds: list[list[str]] = []
        for r, n in enumerate(sizes):
            for at, key, groups, each in script:
                if at * 2 == r:
                    for g in range(groups):
                        group = f"{key or 'nokey'}-{at}-{g}"
                        t.publish_many(
                            [(group, Event(kind="x", data=i)) for i in range(each)],
                            fairness_key=key,
                        )
            leases = t.claim_many(n)
            rounds.append([lease.group_id for lease in leases])
            if nacks[r] and leases:
                assert t.nack(leases[0])
                leases = leases[1:]
            assert all(t.ack_many(leases))
        served[name] = rounds
    assert served["pg"] == served["model"]
