"""Two operations meeting at one chosen moment, forced with the harness in pg_interleave.

Each test holds the lock that the next statement of one operation needs, waits until that
backend is seen waiting in pg_stat_activity, runs the other operation "between the two
statements", then lets go. The table in docs/postgres.md (the pairwise review) names the test
that covers each pair.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import psycopg
import pytest
from pg_interleave import Holder, start, start_on

from pgque.core import Event, RetryableConflict
from pgque.core.queue_model import QueueModel
from pgque.postgres import PostgresTransport

Make = Callable[..., PostgresTransport]
Raw = psycopg.Connection[tuple[object, ...]]

ORPHANS = """
SELECT count(*) FROM pgque_fifo.messages m
 WHERE m.queue = %(q)s
   AND NOT EXISTS (SELECT 1 FROM pgque_fifo.groups g
                    WHERE g.queue = m.queue AND g.group_id = m.group_id)
"""
EMPTY_GROUPS = """
SELECT count(*) FROM pgque_fifo.groups g
 WHERE g.queue = %(q)s
   AND NOT EXISTS (SELECT 1 FROM pgque_fifo.messages m
                    WHERE m.queue = g.queue AND m.group_id = g.group_id)
"""


def _count(raw: Raw, query: str, queue: str) -> int:
    row = raw.execute(query, {"q": queue}).fetchone()
    assert row is not None
    return int(str(row[0]))


def _drain(transport: PostgresTransport) -> list[tuple[str, str]]:
    """Claim and ack until nothing is left; return (group, kind) in delivery order."""
    out: list[tuple[str, str]] = []
    while (lease := transport.claim()) is not None:
        out.append((lease.group_id, lease.event.kind))
        assert transport.ack(lease)
    return out


@pytest.fixture
def outbox(postgres_url: str) -> Iterator[Callable[[], psycopg.Connection[tuple[object, ...]]]]:
    """Return ``make()``: a connection in an open transaction (rolled back and closed after)."""
    opened: list[psycopg.Connection[tuple[object, ...]]] = []

    def make() -> psycopg.Connection[tuple[object, ...]]:
        conn: psycopg.Connection[tuple[object, ...]] = psycopg.connect(postgres_url)
        conn.execute("SET lock_timeout = '15s'")
        opened.append(conn)
        return conn

    yield make
    for conn in opened:
        conn.close()


# -- a publish in flight while the group drains ---------------------------------------------


def test_rolled_back_publish_that_raced_a_draining_ack_leaves_no_phantom_group(
    transport_factory: Make, outbox: Callable[[], Raw], raw: Raw
) -> None:
    transport = transport_factory()
    transport.publish("g", Event(kind="first"))
    lease = transport.claim()
    assert lease is not None
    conn = outbox()
    transport.publish("g", Event(kind="second"), connection=conn)  # holds g's row
    assert transport.ack(lease)  # drains g while the publish is in flight; never waits
    conn.rollback()
    stats = transport.stats()
    assert (stats.groups, stats.messages) == (0, 0)
    # The model: g does not exist, so the next publish creates it afresh (priority 4, never
    # served): it is claimable with min_priority=4 and comes before h, which is also new.
    transport.publish("h", Event(kind="h"), priority=4)
    transport.publish("g", Event(kind="urgent"), priority=4)
    leased = transport.claim(min_priority=4)
    assert leased is not None
    assert (leased.group_id, leased.event.kind, leased.priority) == ("g", "urgent", 4)
    assert transport.ack(leased)
    assert _drain(transport) == [("h", "h")]
    assert _count(raw, EMPTY_GROUPS, transport.queue) == 0


Drain = Callable[[PostgresTransport], Callable[[], None]]


def _by_dead_letter(transport: PostgresTransport) -> Callable[[], None]:
    lease = transport.claim()
    assert lease is not None
    return lambda: _check(transport.dead_letter(lease, "bad"))


def _by_claim_burying_the_exhausted_head(transport: PostgresTransport) -> Callable[[], None]:
    # max_attempts=1: the nacked head is exhausted when the next claim reaches it.
    lease = transport.claim()
    assert lease is not None
    assert transport.nack(lease)
    return lambda: _check(transport.claim() is None)


def _by_unblock_dropping_the_head(transport: PostgresTransport) -> Callable[[], None]:
    lease = transport.claim()
    assert lease is not None
    assert transport.nack(lease)
    assert transport.claim() is None  # exhausted under "block": the group is blocked
    return lambda: _check(transport.unblock("g", drop_head=True))


def _check(ok: bool) -> None:
    assert ok


@pytest.mark.parametrize(
    ("options", "prepare"),
    [
        ({}, _by_dead_letter),
        ({"max_attempts": 1}, _by_claim_burying_the_exhausted_head),
        ({"max_attempts": 1, "on_exhausted": "block"}, _by_unblock_dropping_the_head),
    ],
    ids=["dead_letter", "claim-buries-exhausted-head", "unblock-drop-head"],
)
def test_every_drain_under_an_in_flight_publish_that_rolls_back_leaves_no_phantom(
    transport_factory: Make,
    outbox: Callable[[], Raw],
    raw: Raw,
    options: dict[str, object],
    prepare: Drain,
) -> None:
    transport = transport_factory(**options)
    transport.publish("g", Event(kind="first"))
    drain = prepare(transport)
    conn = outbox()
    transport.publish("g", Event(kind="second"), connection=conn)
    drain()  # drains g while the publish is in flight
    conn.rollback()
    assert transport.stats().groups == 0
    transport.publish("h", Event(kind="h"), priority=4)
    transport.publish("g", Event(kind="again"), priority=4)
    leased = transport.claim(min_priority=4)
    assert leased is not None
    assert (leased.group_id, leased.priority) == ("g", 4)
    assert transport.ack(leased)
    assert _drain(transport) == [("h", "h")]
    assert _count(raw, EMPTY_GROUPS, transport.queue) == 0


def test_an_ack_racing_a_second_ack_of_the_same_lease_leaves_no_phantom(
    transport_factory: Make, postgres_url: str, raw: Raw
) -> None:
    # The second ack waits for the group row (its token still matches) while the first,
    # delayed on the message row, drains the group: the drain's FOR UPDATE SKIP LOCKED upgrades
    # a lock the first ack already holds, so the waiter does not make it skip the row.
    transport = transport_factory()
    message_id = transport.publish("g", Event(kind="only"))
    lease = transport.claim()
    assert lease is not None
    with Holder(postgres_url) as holder:
        holder.lock_message(message_id, "FOR KEY SHARE")  # the ack's DELETE must wait
        first = start(postgres_url, lambda t: t.ack(lease), queue=transport.queue)
        first.wait_blocked()
        second = start(postgres_url, lambda t: t.ack(lease), queue=transport.queue)
        assert second.wait_blocked() == [first.pid]
        holder.rollback()
        assert sorted([first.result(), second.result()]) == [False, True]
    assert transport.stats().groups == 0
    transport.publish("h", Event(kind="h"))
    transport.publish("g", Event(kind="g"))
    assert [g for g, _k in _drain(transport)] == ["g", "h"]
    assert _count(raw, EMPTY_GROUPS, transport.queue) == 0


def test_committed_publish_into_a_group_drained_meanwhile_gets_a_fresh_group(
    transport_factory: Make, outbox: Callable[[], Raw]
) -> None:
    # The model orders the publish at its commit, after the ack drained g: g is created then,
    # with the publish's priority and never served.
    transport = transport_factory()
    transport.publish("g", Event(kind="first"), priority=0)
    lease = transport.claim()
    assert lease is not None
    conn = outbox()
    transport.publish("g", Event(kind="second"), priority=3, connection=conn)
    assert transport.ack(lease)
    transport.publish("h", Event(kind="h"), priority=3)
    conn.commit()
    leased = transport.claim(min_priority=3)
    assert leased is not None
    assert (leased.group_id, leased.event.kind, leased.priority) == ("g", "second", 3)


def test_claim_that_finds_a_group_empty_while_a_publish_is_in_flight_serves_it_like_the_model(
    transport_factory: Make, outbox: Callable[[], Raw]
) -> None:
    transport = transport_factory()
    model = QueueModel()
    transport.publish("g", Event(kind="first"))
    lease = transport.claim()
    assert lease is not None
    conn = outbox()
    transport.publish("g", Event(kind="second"), connection=conn)
    assert transport.ack(lease)
    assert transport.claim() is None  # reaches g's row and finds no committed message
    transport.publish("h", Event(kind="h"))
    conn.commit()
    # The model: g was drained by the ack; the publish created it at its commit, never served.
    model.publish("h", Event(kind="h").to_json(), 0, 1.0)
    model.publish("g", Event(kind="second").to_json(), 0, 2.0)
    expected = model.claim(3.0, 30.0, 0)
    assert expected is not None
    leased = transport.claim()
    assert leased is not None
    assert leased.group_id == expected.group_id == "g"


# -- purge -----------------------------------------------------------------------------------


def test_purge_racing_a_publish_orphans_no_message(
    transport_factory: Make, outbox: Callable[[], Raw], postgres_url: str, raw: Raw
) -> None:
    transport = transport_factory()
    transport.publish("g", Event(kind="first"))
    conn = outbox()
    transport.publish("g", Event(kind="second"), connection=conn)  # holds g's row
    purge = start(postgres_url, lambda t: t.purge(), queue=transport.queue)
    purge.wait_blocked()
    conn.commit()
    purge.result()
    assert _count(raw, ORPHANS, transport.queue) == 0
    stats = transport.stats()
    assert stats.messages == len(_drain(transport))
    assert transport.stats().messages == 0


def test_purge_racing_an_outbox_publish_many_keeps_the_batch_whole_or_not_at_all(
    transport_factory: Make, outbox: Callable[[], Raw], postgres_url: str, raw: Raw
) -> None:
    # The batch goes into an existing group (b) and a new one (a). A purge that only locks the
    # rows it can see deleted b's half and kept a's: no serial order gives that.
    transport = transport_factory()
    transport.publish("b", Event(kind="old-b"))
    conn = outbox()
    transport.publish_many(
        [("a", Event(kind="new-a")), ("b", Event(kind="new-b"))], connection=conn
    )
    purge = start(postgres_url, lambda t: t.purge(), queue=transport.queue)
    purge.wait_blocked()
    conn.commit()
    purge.result()
    assert _count(raw, ORPHANS, transport.queue) == 0
    assert sorted(_drain(transport)) in ([], [("a", "new-a"), ("b", "new-b")])


def test_purge_and_a_claim_do_not_deadlock(
    transport_factory: Make, postgres_url: str, raw: Raw
) -> None:
    # The claim locks rows b and a (claim order: b never served, a served), then updates their
    # heads, b's first (the holder makes it wait there). A purge that deleted messages before
    # locking any group row took a's head and queued behind the claim for b's; the claim then
    # waited for a's head: a cycle. That needs the purge to reach a's head first, in the heap
    # (a sequential scan) as in the index (queue, group_id, id): the setup checks the heap.
    transport = transport_factory()
    for _attempt in range(10):
        _a0, a1_id, b_id = transport.publish_many(
            [("a", Event(kind="a0")), ("a", Event(kind="a1")), ("b", Event(kind="b0"))]
        )
        heap = raw.execute(
            "SELECT id FROM pgque_fifo.messages WHERE id = ANY (%s) ORDER BY ctid",
            ([a1_id, b_id],),
        ).fetchall()
        if heap == [(a1_id,), (b_id,)]:
            break
        transport.purge()
    else:
        pytest.fail("could not place a's head before b's in the heap")
    first = transport.claim()
    assert first is not None
    assert first.group_id == "a"
    assert transport.ack(first)
    with Holder(postgres_url) as holder:
        holder.lock_message(b_id)
        claim = start(postgres_url, lambda t: t.claim_many(2), queue=transport.queue)
        claim.wait_blocked()
        purge = start(postgres_url, lambda t: t.purge(), queue=transport.queue)
        purge.wait_blocked()
        holder.rollback()
        leases = claim.result()
        purge.result()
    assert sorted(lease.group_id for lease in leases) == ["a", "b"]
    assert _count(raw, ORPHANS, transport.queue) == 0
    assert transport.stats().messages == 0


# -- redrive ---------------------------------------------------------------------------------


def _dead_letter(transport: PostgresTransport, group_id: str, kind: str) -> None:
    transport.publish(group_id, Event(kind=kind))
    lease = transport.claim()
    assert lease is not None
    assert lease.group_id == group_id
    assert transport.dead_letter(lease, "test")


#: Both kinds of redrive (pgque_redrive_v3): in place and at the tail.
IN_PLACE = pytest.mark.parametrize("in_place", [True, False], ids=["in-place", "tail"])


@IN_PLACE
def test_redrive_and_publish_many_do_not_deadlock(
    transport_factory: Make, postgres_url: str, in_place: bool
) -> None:
    # Dead letters of b then a: a redrive in dead-letter id order locked b, then a;
    # publish_many locks a, then b.
    transport = transport_factory()
    _dead_letter(transport, "b", "dead-b")
    _dead_letter(transport, "a", "dead-a")
    transport.publish("b", Event(kind="b-live"))  # b's row exists, so the holder can lock it
    with Holder(postgres_url) as holder:
        holder.lock_group(transport.queue, "b")
        redrive = start(postgres_url, lambda t: t.redrive(in_place=in_place), queue=transport.queue)
        redrive.wait_blocked()
        batch = start(
            postgres_url,
            lambda t: t.publish_many([("a", Event(kind="many-a")), ("b", Event(kind="many-b"))]),
            queue=transport.queue,
        )
        batch.wait_blocked()
        holder.rollback()
        assert redrive.result() == 2
        assert len(batch.result()) == 2
    delivered = _drain(transport)
    by_group = {g: [k for gg, k in delivered if gg == g] for g in ("a", "b")}
    assert by_group["a"] == ["dead-a", "many-a"]
    if in_place:  # dead-b has its original id, below b-live's
        assert by_group["b"] == ["dead-b", "b-live", "many-b"]
    else:
        assert by_group["b"] == ["b-live", "dead-b", "many-b"]


@IN_PLACE
def test_two_redrives_do_not_deadlock(
    transport_factory: Make, postgres_url: str, in_place: bool
) -> None:
    transport = transport_factory()
    _dead_letter(transport, "b", "b1")
    _dead_letter(transport, "a", "a1")
    _dead_letter(transport, "a", "a2")
    _dead_letter(transport, "b", "b2")
    ids = [d.id for d in transport.dead_letters()]
    transport.publish("b", Event(kind="b-live"))
    with Holder(postgres_url) as holder:
        holder.lock_group(transport.queue, "b")
        first = start(
            postgres_url, lambda t: t.redrive(ids[:2], in_place=in_place), queue=transport.queue
        )
        first.wait_blocked()
        second = start(
            postgres_url, lambda t: t.redrive(ids[2:], in_place=in_place), queue=transport.queue
        )
        second.wait_blocked()
        holder.rollback()
        assert first.result() == 2
        assert second.result() == 2
    delivered = _drain(transport)
    assert [k for g, k in delivered if g == "a"] == ["a1", "a2"]
    expected_b = ["b1", "b2", "b-live"] if in_place else ["b-live", "b1", "b2"]
    assert [k for g, k in delivered if g == "b"] == expected_b


@IN_PLACE
def test_redrive_racing_a_redrive_of_the_same_dead_letters_publishes_each_once(
    transport_factory: Make, postgres_url: str, raw: Raw, in_place: bool
) -> None:
    transport = transport_factory()
    _dead_letter(transport, "a", "a1")
    _dead_letter(transport, "b", "b1")
    transport.publish("a", Event(kind="a-live"))
    with Holder(postgres_url) as holder:
        holder.lock_group(transport.queue, "a")
        first = start(postgres_url, lambda t: t.redrive(in_place=in_place), queue=transport.queue)
        first.wait_blocked()
        second = start(postgres_url, lambda t: t.redrive(in_place=in_place), queue=transport.queue)
        second.wait_blocked()
        holder.rollback()
        assert first.result() + second.result() == 2
    assert sorted(_drain(transport)) == [("a", "a-live"), ("a", "a1"), ("b", "b1")]
    assert _count(raw, EMPTY_GROUPS, transport.queue) == 0
    assert transport.stats().groups == 0


# -- dedup publish ---------------------------------------------------------------------------

DEDUP = """
SELECT message_id, deduped FROM pgque_fifo.pgque_publish_dedup_v1(
    %(q)s, %(g)s, %(e)s, 0, %(k)s, %(ttl)s::double precision, %(now)s::double precision)
"""


def test_two_dedup_publishes_do_not_deadlock(
    transport_factory: Make, postgres_url: str, raw: Raw
) -> None:
    # A dedup publish that reaps expired keys before taking its own keeps the reaped rows
    # locked: a publisher that reaped K1 and takes K2 meets one that reaped K2 and takes K1.
    queue = transport_factory().queue
    event = Event(kind="e").to_json()
    try:
        raw.execute(DEDUP, {"q": queue, "g": "g1", "e": event, "k": "K1", "ttl": 10, "now": 100})
        raw.execute(DEDUP, {"q": queue, "g": "g2", "e": event, "k": "K2", "ttl": 10, "now": 105})
        with Holder(postgres_url) as other:
            # The other publisher, seen between its reap (it took K1, the oldest expired key)
            # and its take of K2.
            assert other.execute("SELECT pgque_fifo.pgque_dedup_reap_v1(%s, 1, 200)", (queue,)) == [
                (1,)
            ]
            with psycopg.connect(postgres_url, autocommit=True) as conn:
                conn.execute("SET lock_timeout = '15s'")
                mine = start_on(
                    conn,
                    lambda c: c.execute(
                        DEDUP, {"q": queue, "g": "g1", "e": event, "k": "K1", "ttl": 10, "now": 200}
                    ).fetchall(),
                    url=postgres_url,
                )
                mine.wait_blocked()
                theirs = start_on(
                    other.conn,
                    lambda c: c.execute(
                        DEDUP, {"q": queue, "g": "g2", "e": event, "k": "K2", "ttl": 10, "now": 200}
                    ).fetchall(),
                    url=postgres_url,
                )
                assert theirs.error() is None
                other.commit()
                rows = mine.result()
        assert rows[0][1] is False
        keys = raw.execute(
            "SELECT dedup_key, expires_at FROM pgque_fifo.dedup_keys WHERE queue = %s ORDER BY 1",
            (queue,),
        ).fetchall()
        assert keys == [("K1", 210.0), ("K2", 210.0)]
    finally:
        raw.execute("SELECT pgque_fifo.pgque_partition_purge_v1(%s)", (queue,))


# -- deadlocks that can still happen by design -----------------------------------------------


def test_opposite_order_outbox_publishes_lose_with_retryable_conflict(
    transport_factory: Make, outbox: Callable[[], Raw], postgres_url: str
) -> None:
    transport = transport_factory()
    first, second = outbox(), outbox()
    transport.publish("a", Event(kind="1a"), connection=first)
    transport.publish("b", Event(kind="2b"), connection=second)
    one = start_on(
        first, lambda c: transport.publish("b", Event(kind="1b"), connection=c), url=postgres_url
    )
    one.wait_blocked()
    two = start_on(
        second, lambda c: transport.publish("a", Event(kind="2a"), connection=c), url=postgres_url
    )
    errors = [one.error(), two.error()]
    lost = [e for e in errors if e is not None]
    assert len(lost) == 1
    assert isinstance(lost[0], RetryableConflict)
    assert "deadlock" in str(lost[0])
    winner = first if errors[0] is None else second
    loser = second if winner is first else first
    loser.rollback()
    winner.commit()
    assert transport.stats().messages == 2


def test_serialization_failure_in_a_repeatable_read_outbox_is_retryable(
    transport_factory: Make, outbox: Callable[[], Raw]
) -> None:
    transport = transport_factory()
    transport.publish("g", Event(kind="first"))
    lease = transport.claim()
    assert lease is not None
    conn = outbox()
    conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
    conn.execute("SELECT 1")  # the snapshot is taken here
    assert transport.ack(lease)  # deletes g's row after that snapshot
    with pytest.raises(RetryableConflict, match="serialize"):
        transport.publish("g", Event(kind="second"), connection=conn)
    conn.rollback()
    transport.publish("g", Event(kind="second"), connection=conn)
    conn.commit()
    assert transport.stats().messages == 1


# -- pairs the review found safe, pinned so they stay so --------------------------------------


def test_a_second_publish_into_a_group_waits_for_the_first_to_commit(
    transport_factory: Make, outbox: Callable[[], Raw], postgres_url: str
) -> None:
    # Otherwise the later id could commit first and a claim lease it ahead of the earlier one.
    transport = transport_factory()
    conn = outbox()
    first = transport.publish("g", Event(kind="first"), connection=conn)
    second = start(
        postgres_url, lambda t: t.publish("g", Event(kind="second")), queue=transport.queue
    )
    second.wait_blocked()
    assert transport.claim() is None  # nothing committed yet
    conn.commit()
    assert second.result() > first
    assert [k for _g, k in _drain(transport)] == ["first", "second"]


def test_two_publish_many_batches_in_opposite_item_orders_do_not_deadlock(
    transport_factory: Make, postgres_url: str
) -> None:
    transport = transport_factory()
    transport.publish("b", Event(kind="b0"))
    with Holder(postgres_url) as holder:
        holder.lock_group(transport.queue, "b")
        one = start(
            postgres_url,
            lambda t: t.publish_many([("b", Event(kind="1b")), ("a", Event(kind="1a"))]),
            queue=transport.queue,
        )
        one.wait_blocked()
        two = start(
            postgres_url,
            lambda t: t.publish_many([("a", Event(kind="2a")), ("b", Event(kind="2b"))]),
            queue=transport.queue,
        )
        two.wait_blocked()
        holder.rollback()
        assert len(one.result()) == len(two.result()) == 2
    delivered = _drain(transport)
    assert [k for g, k in delivered if g == "a"] == ["1a", "2a"]
    assert [k for g, k in delivered if g == "b"] == ["b0", "1b", "2b"]


@IN_PLACE
def test_redrive_and_purge_do_not_deadlock(
    transport_factory: Make, postgres_url: str, raw: Raw, in_place: bool
) -> None:
    transport = transport_factory()
    _dead_letter(transport, "b", "dead-b")
    _dead_letter(transport, "a", "dead-a")
    transport.publish("b", Event(kind="b-live"))
    with Holder(postgres_url) as holder:
        holder.lock_group(transport.queue, "b")
        redrive = start(postgres_url, lambda t: t.redrive(in_place=in_place), queue=transport.queue)
        redrive.wait_blocked()
        purge = start(postgres_url, lambda t: t.purge(), queue=transport.queue)
        assert purge.wait_blocked() == [redrive.pid]
        holder.rollback()
        assert redrive.result() == 2
        purge.result()
    stats = transport.stats()
    assert (stats.groups, stats.messages, stats.dead_letters) == (0, 0, 0)
    assert _count(raw, ORPHANS, transport.queue) == 0


def test_an_ack_that_waits_for_a_purge_is_fenced_afterwards(
    transport_factory: Make, postgres_url: str
) -> None:
    transport = transport_factory()
    message_id = transport.publish("g", Event(kind="only"))
    lease = transport.claim()
    assert lease is not None
    with Holder(postgres_url) as holder:
        holder.lock_message(message_id, "FOR KEY SHARE")  # the purge's DELETE must wait
        purge = start(postgres_url, lambda t: t.purge(), queue=transport.queue)
        purge.wait_blocked()  # holding g's row
        ack = start(postgres_url, lambda t: t.ack(lease), queue=transport.queue)
        assert ack.wait_blocked() == [purge.pid]
        holder.rollback()
        purge.result()
        assert ack.result() is False
    assert transport.stats().messages == 0


def test_reset_slots_waits_for_a_publish_in_flight_and_then_refuses(
    transport_factory: Make, outbox: Callable[[], Raw], postgres_url: str, raw: Raw
) -> None:
    # The emptiness check cannot see an uncommitted message: a reset racing a publish forgot N
    # although the queue was about to hold a message routed with it.
    transport = transport_factory()
    queue = transport.queue
    try:
        raw.execute("SELECT pgque_fifo.pgque_partition_slots_v1(%s, 4, NULL)", (queue,))
        conn = outbox()
        transport.publish("slot-1", Event(kind="e"), connection=conn)
        with psycopg.connect(postgres_url, autocommit=True) as other:
            reset = start_on(
                other,
                lambda c: c.execute(
                    "SELECT pgque_fifo.pgque_partition_reset_slots_v1(%s)", (queue,)
                ).fetchone(),
                url=postgres_url,
            )
            reset.wait_blocked()
            conn.commit()
            assert reset.result() == (False,)
        slots = raw.execute(
            "SELECT slots FROM pgque_fifo.partition_slots WHERE queue = %s", (queue,)
        ).fetchall()
        assert slots == [(4,)]
    finally:
        raw.execute("SELECT pgque_fifo.pgque_partition_purge_v1(%s)", (queue,))


def _take_dead_letter_meanwhile(holder: Holder, dead_id: int) -> None:
    """As another redrive or a purge would: the dead letter is gone once the holder commits."""
    holder.execute("DELETE FROM pgque_fifo.dead_letters WHERE id = %s", (dead_id,))


@IN_PLACE
def test_a_redrive_whose_first_dead_letter_went_elsewhere_gives_the_group_the_next_ones_priority(
    transport_factory: Make, postgres_url: str, in_place: bool
) -> None:
    transport = transport_factory()
    transport.publish("g", Event(kind="urgent"), priority=4)
    lease = transport.claim()
    assert lease is not None
    assert transport.dead_letter(lease, "bad")
    transport.publish("g", Event(kind="normal"), priority=0)
    lease = transport.claim()
    assert lease is not None
    assert transport.dead_letter(lease, "bad")
    urgent, _normal = (d.id for d in transport.dead_letters())
    with Holder(postgres_url) as holder:
        holder.lock_queue(transport.queue)  # the redrive waits before its first group lock
        redrive = start(postgres_url, lambda t: t.redrive(in_place=in_place), queue=transport.queue)
        redrive.wait_blocked()  # it has read both dead letters already
        _take_dead_letter_meanwhile(holder, urgent)
        holder.commit()
        assert redrive.result() == 1
    # The group was created for the priority-4 dead letter, which it did not receive.
    assert transport.claim(min_priority=1) is None
    leased = transport.claim()
    assert leased is not None
    assert (leased.event.kind, leased.priority) == ("normal", 0)


@IN_PLACE
def test_a_redrive_left_with_nothing_to_publish_leaves_no_group_behind(
    transport_factory: Make, postgres_url: str, raw: Raw, in_place: bool
) -> None:
    transport = transport_factory()
    _dead_letter(transport, "g", "dead")
    (dead,) = transport.dead_letters()
    with Holder(postgres_url) as holder:
        holder.lock_queue(transport.queue)
        redrive = start(postgres_url, lambda t: t.redrive(in_place=in_place), queue=transport.queue)
        redrive.wait_blocked()
        _take_dead_letter_meanwhile(holder, dead.id)
        holder.commit()
        assert redrive.result() == 0
    raw_groups = raw.execute(
        "SELECT count(*) FROM pgque_fifo.groups WHERE queue = %s", (transport.queue,)
    ).fetchone()
    assert raw_groups == (0,)


def test_dedup_publishes_inside_callers_transactions_do_not_deadlock_on_a_reaped_key(
    transport_factory: Make, postgres_url: str, raw: Raw
) -> None:
    # T1 and T2 each run two dedup publishes in key byte order inside their own transaction.
    # A reap in T1's first publish used to delete (and so keep locked to T1's commit) the
    # expired key x that T2 then takes, while T1 next takes the key b that T2 already holds:
    # a cycle that key order alone cannot prevent. A reap now runs only when the publish is
    # its own transaction, so T2 takes x over without waiting.
    queue = transport_factory().queue
    event = Event(kind="e").to_json()

    def dedup(group: str, key: str) -> dict[str, object]:
        return {"q": queue, "g": group, "e": event, "k": key, "ttl": 10, "now": 200}

    try:
        raw.execute(DEDUP, {**dedup("g", "x"), "now": 100})  # x expires at 110
        with Holder(postgres_url) as t1, Holder(postgres_url) as t2:
            assert t1.execute(DEDUP, dedup("g1", "a"))[0][1] is False
            assert t2.execute(DEDUP, dedup("g2", "b"))[0][1] is False
            takeover = start_on(
                t2.conn, lambda c: c.execute(DEDUP, dedup("g2", "x")).fetchall(), url=postgres_url
            )
            assert takeover.result(timeout=5)[0][1] is False
            second = start_on(
                t1.conn, lambda c: c.execute(DEDUP, dedup("g1", "b")).fetchall(), url=postgres_url
            )
            second.wait_blocked()  # on the key b that T2 holds: an order, not a cycle
            t2.commit()
            assert second.result()[0][1] is True
            t1.commit()
        keys = raw.execute(
            "SELECT dedup_key FROM pgque_fifo.dedup_keys WHERE queue = %s ORDER BY 1", (queue,)
        ).fetchall()
        assert keys == [("a",), ("b",), ("x",)]
    finally:
        raw.execute("SELECT pgque_fifo.pgque_partition_purge_v1(%s)", (queue,))


def test_partition_purge_deletes_a_key_taken_over_while_it_waited(
    transport_factory: Make, postgres_url: str, raw: Raw
) -> None:
    # The purge waits for a dedup publish that is taking over the expired key k. Deleting by
    # ctid from a subquery that locked the row missed it: the lock follows k to its new
    # version, which the DELETE's snapshot (taken before that commit) cannot see.
    queue = transport_factory().queue
    event = Event(kind="e").to_json()

    def dedup(key: str, now: float) -> dict[str, object]:
        return {"q": queue, "g": "g", "e": event, "k": key, "ttl": 10, "now": now}

    try:
        raw.execute(DEDUP, dedup("j", 100))
        raw.execute(DEDUP, dedup("k", 100))
        with Holder(postgres_url) as taker:
            assert taker.execute(DEDUP, dedup("k", 200))[0][1] is False  # k expired at 110
            with psycopg.connect(postgres_url, autocommit=True) as conn:
                purge = start_on(
                    conn,
                    lambda c: c.execute(
                        "SELECT pgque_fifo.pgque_partition_purge_v1(%s)", (queue,)
                    ).fetchall(),
                    url=postgres_url,
                )
                purge.wait_blocked()
                taker.commit()
                purge.result()
        keys = raw.execute(
            "SELECT dedup_key FROM pgque_fifo.dedup_keys WHERE queue = %s", (queue,)
        ).fetchall()
        assert keys == []
    finally:
        raw.execute("SELECT pgque_fifo.pgque_partition_purge_v1(%s)", (queue,))


def test_a_claim_that_meets_an_update_chain_gives_up_instead_of_closing_a_deadlock(
    transport_factory: Make, postgres_url: str, raw: Raw, outbox: Callable[[], Raw]
) -> None:
    # Group a's row version that the claim's snapshot sees carries the KEY SHARE lock of a
    # publish in flight and an update (an extend) committed after the snapshot. Locking it,
    # PostgreSQL also locks the newer version and waits for its holder even under SKIP LOCKED.
    # The holder (think ack_many: it acked a and now wants b) then waits for b, which the claim
    # locked first: a deadlock. REPEATABLE READ only pins the snapshot, to open the window
    # that a commit landing during a claim's scan opens under READ COMMITTED.
    queue = transport_factory().queue
    q = {"q": queue}
    message_a = raw.execute(
        "SELECT pgque_fifo.pgque_publish_v2(%(q)s, 'a', '{}', 0, NULL, NULL)", q
    ).fetchone()
    raw.execute("SELECT pgque_fifo.pgque_publish_v2(%(q)s, 'b', '{}', 0, NULL, NULL)", q)
    lease = (
        "SELECT token FROM pgque_fifo.pgque_claim_v2(%s, 1, 1, 0, NULL, 'dead_letter', NULL, %s)"
    )
    token_a = raw.execute(lease, (queue, 100.5)).fetchone()  # a: until 101.5
    raw.execute(lease, (queue, 100.0))  # b: until 101, so b comes first in claim order
    assert message_a is not None
    assert token_a is not None
    publish = outbox()
    publish.execute("SELECT pgque_fifo.pgque_publish_v2(%(q)s, 'a', '{}', 0, NULL, NULL)", q)
    with psycopg.connect(postgres_url) as claimer, Holder(postgres_url) as acker:
        claimer.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        claimer.execute("SELECT count(*) FROM pgque_fifo.groups")  # the snapshot
        raw.execute(
            "SELECT pgque_fifo.pgque_extend_v1(%s, 'a', %s, %s, 1, 100.6)",
            (queue, message_a[0], token_a[0]),
        )
        acker.lock_group(queue, "a", "FOR NO KEY UPDATE")
        claim = start_on(
            claimer,
            lambda c: c.execute(
                "SELECT group_id FROM pgque_fifo.pgque_claim_v2(%s, 2, 30, 0, NULL,"
                " 'dead_letter', NULL, 200)",
                (queue,),
            ).fetchall(),
            url=postgres_url,
        )
        leased = claim.result(timeout=5)  # gave the round up instead of waiting for a
        assert leased == []
        acker.lock_group(queue, "b", "FOR NO KEY UPDATE")  # b is free again: no cycle
        acker.rollback()
        claimer.rollback()
    publish.rollback()
    raw.execute("SELECT pgque_fifo.pgque_purge_v1(%s)", (queue,))
