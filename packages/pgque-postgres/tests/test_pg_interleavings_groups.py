"""The operations of issue 14 meeting others at one chosen moment (harness: pg_interleave).

In-place redrive against a publish into the same group (both orders, commit and rollback),
pause against a claim (both orders) and against a publish creating the group, resume against a
publish in flight, release against an ack of the same lease and against a claim re-leasing it,
delete_dead_letters against a redrive of the same dead letters. docs/postgres.md (the pairwise
review) names the test of each pair.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import psycopg
import pytest
from pg_interleave import Holder, start

from pgque.core import Event
from pgque.postgres import PostgresTransport

Make = Callable[..., PostgresTransport]
Raw = psycopg.Connection[tuple[object, ...]]


@pytest.fixture
def outbox(postgres_url: str) -> Iterator[Callable[[], Raw]]:
    """Return ``make()``: a connection in an open transaction (rolled back and closed after)."""
    opened: list[Raw] = []

    def make() -> Raw:
        conn: Raw = psycopg.connect(postgres_url)
        conn.execute("SET lock_timeout = '15s'")
        opened.append(conn)
        return conn

    yield make
    for conn in opened:
        conn.close()


def _drain(transport: PostgresTransport) -> list[tuple[int, str, int]]:
    """Claim and ack until nothing is left; return (message id, kind, priority) in order."""
    out: list[tuple[int, str, int]] = []
    while (lease := transport.claim()) is not None:
        out.append((lease.message_id, lease.event.kind, lease.priority))
        assert transport.ack(lease)
    return out


def _dead_letter(transport: PostgresTransport, group_id: str, kind: str, priority: int) -> int:
    """Publish into an otherwise empty queue, claim, dead-letter; return the message id."""
    message_id = transport.publish(group_id, Event(kind=kind), priority=priority)
    lease = transport.claim()
    assert lease is not None
    assert lease.message_id == message_id
    assert transport.dead_letter(lease, "bad")
    return message_id


# -- in-place redrive x publish ------------------------------------------------------------------


@pytest.mark.parametrize("commit", [True, False], ids=["publish-commits", "publish-rolls-back"])
def test_an_in_place_redrive_waits_for_a_publish_in_flight_into_its_group(
    transport_factory: Make, outbox: Callable[[], Raw], postgres_url: str, commit: bool
) -> None:
    # The group is gone; a transactional publish is creating it (priority 4) when the redrive
    # comes: the redrive queues behind the publish on the group's lock. If the publish commits
    # the group exists and keeps its priority; if it rolls back the redrive creates the group
    # with the dead letter's priority (2). Either way the redriven message, with its original
    # (lower) id, is delivered first.
    transport = transport_factory()
    dead_id = _dead_letter(transport, "g", "created", priority=2)
    assert transport.group("g") is None
    conn = outbox()
    published = transport.publish("g", Event(kind="shipped"), priority=4, connection=conn)
    redrive = start(postgres_url, lambda t: t.redrive(), queue=transport.queue)
    assert redrive.wait_blocked() == [conn.info.backend_pid]
    if commit:
        conn.commit()
    else:
        conn.rollback()
    assert redrive.result() == 1
    if commit:
        assert _drain(transport) == [(dead_id, "created", 4), (published, "shipped", 4)]
    else:
        assert _drain(transport) == [(dead_id, "created", 2)]
    assert transport.stats().groups == 0


def test_a_publish_into_a_group_an_in_place_redrive_holds_waits_and_lands_behind_it(
    transport_factory: Make, postgres_url: str, raw: Raw
) -> None:
    transport = transport_factory()
    dead_id = _dead_letter(transport, "g", "created", priority=1)
    later = transport.publish("g", Event(kind="paid"))
    (dead,) = transport.dead_letters()
    with Holder(postgres_url) as holder:
        # The redrive holds g's lock and row and waits for the dead letter row.
        holder.execute("SELECT 1 FROM pgque_fifo.dead_letters WHERE id = %s FOR UPDATE", [dead.id])
        redrive = start(postgres_url, lambda t: t.redrive(), queue=transport.queue)
        redrive.wait_blocked()
        publish = start(
            postgres_url, lambda t: t.publish("g", Event(kind="shipped")), queue=transport.queue
        )
        assert publish.wait_blocked() == [redrive.pid]
        holder.rollback()
        assert redrive.result() == 1
        shipped = publish.result()
    assert dead_id < later < shipped
    assert _drain(transport) == [
        (dead_id, "created", 0),
        (later, "paid", 0),
        (shipped, "shipped", 0),
    ]
    empty = raw.execute(
        "SELECT count(*) FROM pgque_fifo.groups WHERE queue = %s", [transport.queue]
    ).fetchone()
    assert empty == (0,)


def test_an_in_place_redrive_into_a_drained_row_with_a_committed_message_keeps_its_priority(
    transport_factory: Make, outbox: Callable[[], Raw]
) -> None:
    # g drained under a publish in flight (priority 3) that then committed: the row is drained
    # and holds that message; the group is the one the publish made (priority 3, never served).
    # A dead letter of priority 1 redriven in place lands below that message, but the group's
    # priority is the publish's, not the (now lowest) redriven message's.
    transport = transport_factory()
    dead_id = _dead_letter(transport, "g", "old", priority=1)
    transport.publish("g", Event(kind="first"))
    lease = transport.claim()
    assert lease is not None
    conn = outbox()
    transport.publish("g", Event(kind="second"), priority=3, connection=conn)
    assert transport.ack(lease)  # drains g while the publish is in flight
    conn.commit()
    info = transport.group("g")
    assert info is not None
    assert (info.priority, info.depth) == (3, 1)
    assert transport.redrive() == 1
    info = transport.group("g")
    assert info is not None
    assert (info.priority, info.depth, info.head_message_id) == (3, 2, dead_id)
    leased = transport.claim(min_priority=3)
    assert leased is not None
    assert (leased.message_id, leased.priority) == (dead_id, 3)


# -- pause x claim -------------------------------------------------------------------------------


def test_a_pause_waits_for_a_claim_holding_the_group_and_no_lease_follows_it(
    transport_factory: Make, postgres_url: str
) -> None:
    # The claim has locked g's row and is leasing its head when the pause comes: the pause
    # waits for the claim (whose lease was granted first), then returns True, and from then on
    # no claim leases g; the lease out finishes normally.
    transport = transport_factory()
    first = transport.publish("g", Event(kind="one"))
    transport.publish("g", Event(kind="two"))
    with Holder(postgres_url) as holder:
        holder.lock_message(first, "FOR SHARE")  # the claim's attempts update must wait
        claim = start(postgres_url, lambda t: t.claim(holder="w1"), queue=transport.queue)
        claim.wait_blocked()
        pause = start(postgres_url, lambda t: t.pause("g"), queue=transport.queue)
        assert pause.wait_blocked() == [claim.pid]
        holder.rollback()
        lease = claim.result()
        assert pause.result() is True
    assert lease is not None
    assert lease.message_id == first
    info = transport.group("g")
    assert info is not None
    assert (info.state, info.lease_holder) == ("paused", "w1")
    assert transport.claim() is None
    assert transport.ack(lease)
    assert transport.claim() is None
    info = transport.group("g")
    assert info is not None
    assert (info.state, info.depth) == ("paused", 1)


def test_a_claim_passes_over_a_group_whose_pause_is_in_flight_and_after_it_commits(
    transport_factory: Make, postgres_url: str
) -> None:
    # The pause holds g's row (not yet committed): claims skip the row without waiting; once
    # the pause commits g is in no claim index. h is claimed meanwhile.
    transport = transport_factory()
    transport.publish("g", Event(kind="g"))
    transport.publish("h", Event(kind="h"))
    with Holder(postgres_url) as holder:
        paused = holder.execute("SELECT pgque_fifo.pgque_pause_v1(%s, 'g')", [transport.queue])
        assert paused == [(True,)]
        lease = transport.claim()
        assert lease is not None
        assert lease.group_id == "h"
        assert transport.claim() is None
        holder.commit()
        assert transport.claim() is None
        assert transport.ack(lease)
        assert transport.claim() is None
    assert transport.resume("g")
    again = transport.claim()
    assert again is not None
    assert again.group_id == "g"


@pytest.mark.parametrize("commit", [True, False], ids=["publish-commits", "publish-rolls-back"])
def test_a_pause_of_a_group_a_publish_is_creating_waits_for_that_publish(
    transport_factory: Make, outbox: Callable[[], Raw], postgres_url: str, commit: bool
) -> None:
    transport = transport_factory()
    conn = outbox()
    transport.publish("g", Event(kind="k"), priority=2, connection=conn)  # inserts g's row
    pause = start(postgres_url, lambda t: t.pause("g"), queue=transport.queue)
    assert pause.wait_blocked() == [conn.info.backend_pid]  # on the row's unique key
    if commit:
        conn.commit()
    else:
        conn.rollback()
    assert pause.result() is True
    info = transport.group("g")
    assert info is not None
    expected = ("paused", 1, 2) if commit else ("paused", 0, 0)
    assert (info.state, info.depth, info.priority) == expected
    assert transport.claim() is None


# -- resume x publish ----------------------------------------------------------------------------


@pytest.mark.parametrize("commit", [True, False], ids=["publish-commits", "publish-rolls-back"])
def test_resuming_an_empty_group_under_a_publish_in_flight_leaves_what_a_drain_leaves(
    transport_factory: Make, outbox: Callable[[], Raw], raw: Raw, commit: bool
) -> None:
    # resume removes an empty paused group; a publish in flight holds the row, so resume
    # cannot delete it (it never waits for a publisher) and marks it drained: if the publish
    # commits its message makes a new group with its own priority, else nothing is left.
    transport = transport_factory()
    assert transport.pause("g")
    conn = outbox()
    transport.publish("g", Event(kind="k"), priority=3, connection=conn)
    assert transport.resume("g") is True  # did not wait
    assert transport.group("g") is None
    if commit:
        conn.commit()
        info = transport.group("g")
        assert info is not None
        assert (info.state, info.priority, info.depth) == ("ready", 3, 1)
        lease = transport.claim(min_priority=3)
        assert lease is not None
        assert lease.priority == 3
        assert transport.ack(lease)
    else:
        conn.rollback()
        assert transport.group("g") is None
        assert transport.claim() is None  # the claim that reaches the empty row deletes it
    assert transport.stats().groups == 0
    rows = raw.execute(
        "SELECT count(*) FROM pgque_fifo.groups WHERE queue = %s", [transport.queue]
    ).fetchone()
    assert rows == (0,)


# -- release ---------------------------------------------------------------------------------------


def test_release_and_an_ack_of_the_same_lease_one_wins(
    transport_factory: Make, postgres_url: str
) -> None:
    transport = transport_factory()
    message_id = transport.publish("g", Event(kind="k"))
    lease = transport.claim()
    assert lease is not None
    with Holder(postgres_url) as holder:
        holder.lock_message(message_id, "FOR SHARE")  # the release's attempts update waits
        release = start(postgres_url, lambda t: t.release(lease), queue=transport.queue)
        release.wait_blocked()
        ack = start(postgres_url, lambda t: t.ack(lease), queue=transport.queue)
        assert ack.wait_blocked() == [release.pid]
        holder.rollback()
        assert release.result() is True
        assert ack.result() is False  # fenced: the release ended the lease
    again = transport.claim()
    assert again is not None
    assert (again.message_id, again.attempt) == (message_id, 1)
    assert transport.ack(again)


def test_a_release_of_an_expired_lease_loses_to_the_claim_that_re_leases_it(
    transport_factory: Make, postgres_url: str
) -> None:
    clock_now = [1_000.0]
    transport = transport_factory(clock=lambda: clock_now[0])
    message_id = transport.publish("g", Event(kind="k"))
    stale = transport.claim(visibility=10)
    assert stale is not None
    clock_now[0] += 11  # expired; not yet reclaimed, so still held
    now = clock_now[0]
    with Holder(postgres_url) as holder:
        holder.lock_message(message_id, "FOR SHARE")
        claim = start(
            postgres_url, lambda t: t.claim(visibility=30), queue=transport.queue, clock=lambda: now
        )
        claim.wait_blocked()  # holding g's row, re-leasing its head
        release = start(
            postgres_url, lambda t: t.release(stale), queue=transport.queue, clock=lambda: now
        )
        assert release.wait_blocked() == [claim.pid]
        holder.rollback()
        fresh = claim.result()
        assert release.result() is False
    assert fresh is not None
    assert (fresh.message_id, fresh.attempt) == (message_id, 2)
    info = transport.group("g")
    assert info is not None
    assert (info.state, info.head_attempts) == ("leased", 2)
    assert transport.ack(fresh)


# -- dead letters --------------------------------------------------------------------------------


def test_deleting_dead_letters_a_redrive_is_taking_deletes_none_of_them(
    transport_factory: Make, postgres_url: str
) -> None:
    transport = transport_factory()
    dead_id = _dead_letter(transport, "g", "k", priority=0)
    (dead,) = transport.dead_letters()
    with Holder(postgres_url) as holder:
        holder.execute("SELECT 1 FROM pgque_fifo.dead_letters WHERE id = %s FOR UPDATE", [dead.id])
        redrive = start(postgres_url, lambda t: t.redrive(), queue=transport.queue)
        redrive.wait_blocked()
        delete = start(
            postgres_url, lambda t: t.delete_dead_letters([dead.id]), queue=transport.queue
        )
        delete.wait_blocked()
        holder.rollback()
        assert redrive.result() == 1
        assert delete.result() == 0
    assert transport.dead_letters() == []
    assert _drain(transport) == [(dead_id, "k", 0)]
