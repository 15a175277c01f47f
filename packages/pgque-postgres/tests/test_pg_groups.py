"""Groups as first-class objects on PostgreSQL (issue 14): pause, resume, group pages, release,
recorded errors, in-place redrive, dead-letter paging and deletion.

The semantics are the contract's (the conformance suite checks them on every backend); these
tests look at what is PostgreSQL's own: the rows behind a state (drained and paused rows), the
server's clock, the fencing by the leased message id, and the upgrade of a lease out.
"""

from __future__ import annotations

from collections.abc import Callable

import psycopg
import pytest

from pgque.core import ErrorInfo, Event, GroupInfo, InvalidInput, connect
from pgque.core.validation import DEFAULT_MAX_ATTEMPTS
from pgque.postgres import PostgresTransport, install_schema
from pgque.postgres._sql import migrations

Make = Callable[..., PostgresTransport]
Raw = psycopg.Connection[tuple[object, ...]]


class Clock:
    """A clock the test moves by hand."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _info(transport: PostgresTransport, group_id: str) -> GroupInfo:
    info = transport.group(group_id)
    assert info is not None, f"no group {group_id!r}"
    return info


# -- defaults ---------------------------------------------------------------------------------


def test_max_attempts_defaults_to_the_core_default_and_none_means_unlimited(
    transport_factory: Make, postgres_url: str
) -> None:
    transport = transport_factory()
    assert transport.max_attempts == DEFAULT_MAX_ATTEMPTS == 10
    assert transport.on_exhausted == "dead_letter"
    assert transport_factory(max_attempts=None).max_attempts is None
    sep = "&" if "?" in postgres_url else "?"
    with connect(f"{postgres_url}{sep}queue=t_defaults&max_attempts=none") as unlimited:
        assert unlimited.max_attempts is None
    with connect(f"{postgres_url}{sep}queue=t_defaults") as default:
        assert default.max_attempts == 10


def test_the_tenth_delivery_is_the_last_by_default(transport_factory: Make) -> None:
    transport = transport_factory()
    transport.publish("g", Event(kind="poison"))
    for attempt in range(1, 11):
        lease = transport.claim()
        assert lease is not None
        assert lease.attempt == attempt
        assert transport.nack(lease, error=ValueError(f"bad {attempt}"))
    assert transport.claim() is None
    (dead,) = transport.dead_letters()
    assert dead.reason == "max_attempts (10) exhausted"
    assert dead.error is not None
    assert (dead.error.type, dead.error.message) == ("ValueError", "bad 10")


# -- pause and resume --------------------------------------------------------------------------


def test_pausing_a_group_that_does_not_exist_creates_it_paused_and_empty(
    transport_factory: Make, raw: Raw
) -> None:
    transport = transport_factory()
    assert transport.group("tenant") is None
    assert transport.pause("tenant") is True
    assert transport.pause("tenant") is False
    info = _info(transport, "tenant")
    assert (info.state, info.depth, info.priority, info.head_message_id) == ("paused", 0, 0, None)
    stats = transport.stats()
    assert (stats.groups, stats.paused, stats.messages) == (1, 1, 0)
    # A publish into the empty paused group sets its priority; claims pass it over.
    transport.publish("tenant", Event(kind="a"), priority=3)
    transport.publish("tenant", Event(kind="b"), priority=1)
    assert transport.claim() is None
    info = _info(transport, "tenant")
    assert (info.state, info.depth, info.priority) == ("paused", 2, 3)
    assert transport.resume("tenant") is True
    assert transport.resume("tenant") is False
    lease = transport.claim(min_priority=3)
    assert lease is not None
    assert (lease.event.kind, lease.priority) == ("a", 3)
    row = raw.execute(
        "SELECT priority, drained, paused FROM pgque_fifo.groups WHERE queue = %s",
        [transport.queue],
    ).fetchone()
    assert row == (3, False, False)


def test_a_lease_out_finishes_normally_and_a_drained_paused_group_is_kept(
    transport_factory: Make,
) -> None:
    transport = transport_factory()
    transport.publish("g", Event(kind="one"), priority=2)
    transport.publish("g", Event(kind="two"), priority=2)
    lease = transport.claim(holder="host:1:0")
    assert lease is not None
    assert transport.pause("g") is True
    info = _info(transport, "g")
    assert (info.state, info.lease_holder, info.depth) == ("paused", "host:1:0", 2)
    assert transport.extend(lease, 60) is not None
    assert transport.nack(lease)
    assert transport.claim() is None  # paused: the nack did not make it claimable
    assert transport.resume("g")
    lease = transport.claim()
    assert lease is not None
    assert lease.event.kind == "one"
    assert transport.pause("g")
    assert transport.ack(lease)
    lease_two = transport.claim()
    assert lease_two is None
    assert transport.resume("g")
    lease_two = transport.claim()
    assert lease_two is not None
    assert lease_two.event.kind == "two"
    assert transport.pause("g")
    assert transport.ack(lease_two)  # the last message: the paused group is kept
    info = _info(transport, "g")
    assert (info.state, info.depth, info.priority, info.head_message_id) == ("paused", 0, 2, None)
    assert transport.stats().groups == 1
    # A publish into the kept, empty group sets its priority again.
    transport.publish("g", Event(kind="three"), priority=4)
    assert _info(transport, "g").priority == 4
    assert transport.resume("g")
    lease = transport.claim(min_priority=4)
    assert lease is not None
    assert lease.event.kind == "three"


def test_resuming_an_empty_group_removes_it(transport_factory: Make, raw: Raw) -> None:
    transport = transport_factory()
    assert transport.pause("g")
    assert transport.resume("g")
    assert transport.group("g") is None
    assert transport.stats().groups == 0
    assert raw.execute(
        "SELECT count(*) FROM pgque_fifo.groups WHERE queue = %s", [transport.queue]
    ).fetchone() == (0,)
    assert transport.resume("nothing") is False


def test_pausing_a_blocked_group_shows_paused_and_unblock_keeps_the_pause(
    transport_factory: Make,
) -> None:
    transport = transport_factory(max_attempts=1, on_exhausted="block")
    transport.publish("g", Event(kind="k"))
    lease = transport.claim()
    assert lease is not None
    assert transport.nack(lease, error="boom")
    assert transport.claim() is None  # exhausted: blocked
    info = _info(transport, "g")
    assert info.state == "blocked"
    assert info.last_error is not None
    assert info.last_error.message == "boom"
    assert transport.pause("g")
    assert _info(transport, "g").state == "paused"
    stats = transport.stats()
    assert (stats.paused, stats.blocked) == (1, 0)
    assert transport.unblock("g")
    assert _info(transport, "g").state == "paused"
    assert transport.claim() is None
    assert transport.resume("g")
    lease = transport.claim()
    assert lease is not None
    assert lease.attempt == 1


def test_pausing_a_drained_row_creates_the_group_and_the_publish_in_flight_sets_its_priority(
    transport_factory: Make, postgres_url: str
) -> None:
    # The row of a group that drained while a publish was in flight is no group (it is
    # "drained"); pausing creates the group (priority 0, empty); the publish, when it commits,
    # is a publish into an empty group: it sets the priority.
    transport = transport_factory()
    transport.publish("g", Event(kind="first"))
    lease = transport.claim()
    assert lease is not None
    with psycopg.connect(postgres_url) as conn:
        transport.publish("g", Event(kind="second"), priority=3, connection=conn)
        assert transport.ack(lease)  # drains g under the publish in flight: a drained row
        assert transport.group("g") is None
        assert transport.pause("g")
        info = _info(transport, "g")
        assert (info.state, info.depth, info.priority) == ("paused", 0, 0)
        conn.commit()
    info = _info(transport, "g")
    assert (info.state, info.depth, info.priority) == ("paused", 1, 3)
    assert transport.resume("g")
    lease = transport.claim(min_priority=3)
    assert lease is not None
    assert lease.event.kind == "second"


# -- release -------------------------------------------------------------------------------------


def test_release_does_not_count_the_attempt_and_is_fenced(transport_factory: Make) -> None:
    clock = Clock()
    transport = transport_factory(clock=clock, max_attempts=2)
    transport.publish("g", Event(kind="k"))
    transport.publish("h", Event(kind="k"))
    for _ in range(5):  # more releases than max_attempts: none of them counts
        lease = transport.claim()
        assert lease is not None
        assert lease.attempt == 1
        assert _info(transport, lease.group_id).head_attempts == 1
        assert transport.release(lease)
        assert transport.release(lease) is False  # fenced
        assert transport.ack(lease) is False
        assert _info(transport, lease.group_id).head_attempts == 0
        clock.now += 1
    info = _info(transport, "g")
    assert (info.state, info.lease_holder, info.lease_expires_at) == ("ready", None, None)


def test_release_makes_the_group_claimable_at_once_behind_earlier_served_groups(
    transport_factory: Make,
) -> None:
    clock = Clock()
    transport = transport_factory(clock=clock)
    transport.publish("a", Event(kind="k"))
    transport.publish("b", Event(kind="k"))
    lease = transport.claim(visibility=300)
    assert lease is not None
    assert lease.group_id == "a"
    clock.now += 1
    assert transport.release(lease)
    nxt = transport.claim()
    assert nxt is not None
    assert nxt.group_id == "b"
    again = transport.claim()
    assert again is not None
    assert (again.group_id, again.attempt) == ("a", 1)


# -- errors --------------------------------------------------------------------------------------


def test_nack_records_the_error_and_a_nack_without_error_keeps_it(transport_factory: Make) -> None:
    clock = Clock()
    transport = transport_factory(clock=clock)
    transport.publish("g", Event(kind="k"))
    lease = transport.claim()
    assert lease is not None
    try:
        raise KeyError("sku-1")
    except KeyError as exc:
        caught = exc
    assert transport.nack(lease, delay=5, error=caught)
    info = _info(transport, "g")
    assert info.state == "parked"
    assert info.resume_at == clock.now + 5
    error = info.last_error
    assert error is not None
    assert (error.type, error.message, error.at) == ("KeyError", "'sku-1'", clock.now)
    assert error.traceback is not None
    assert "raise KeyError" in error.traceback
    clock.now += 10
    lease = transport.claim()
    assert lease is not None
    assert transport.nack(lease)
    assert _info(transport, "g").last_error == error
    lease = transport.claim()
    assert lease is not None
    assert transport.dead_letter(lease, "given up")
    (dead,) = transport.dead_letters()
    assert (dead.reason, dead.error) == ("given up", error)


def test_dead_letter_with_an_error_records_that_one(transport_factory: Make) -> None:
    transport = transport_factory()
    transport.publish("g", Event(kind="k"))
    lease = transport.claim()
    assert lease is not None
    assert transport.nack(lease, error="first")
    lease = transport.claim()
    assert lease is not None
    given = ErrorInfo(type="myapp.Rejected", message="no", traceback=None, at=12.5)
    assert transport.dead_letter(lease, "rejected", error=given)
    (dead,) = transport.dead_letters()
    assert dead.error == given


def test_without_an_injected_clock_the_server_stamps_the_error(
    transport_factory: Make, raw: Raw
) -> None:
    transport = transport_factory()
    transport.publish("g", Event(kind="k"))
    lease = transport.claim()
    assert lease is not None
    row = raw.execute("SELECT extract(epoch FROM clock_timestamp())::float8").fetchone()
    assert row is not None
    before = float(str(row[0]))
    assert transport.nack(lease, error="boom")
    error = _info(transport, "g").last_error
    assert error is not None
    assert before <= error.at <= before + 60
    with pytest.raises(InvalidInput):
        transport.nack(lease, error=42)  # type: ignore[arg-type]


def test_a_long_traceback_is_cut_not_refused(transport_factory: Make) -> None:
    transport = transport_factory()
    transport.publish("g", Event(kind="k"))
    lease = transport.claim()
    assert lease is not None
    huge = ErrorInfo(type="E", message="m" * 50_000, traceback="t" * 100_000, at=1.0)
    assert transport.nack(lease, error=huge)
    error = _info(transport, "g").last_error
    assert error is not None
    assert error == huge.bounded()
    assert len(error.message) == 2_000


# -- group info ----------------------------------------------------------------------------------


def test_group_info_follows_the_lease_and_the_clock(transport_factory: Make) -> None:
    clock = Clock()
    transport = transport_factory(clock=clock)
    first = transport.publish("g", Event(kind="a"), priority=1)
    transport.publish("g", Event(kind="b"))
    info = _info(transport, "g")
    assert info == GroupInfo(
        group_id="g",
        state="ready",
        depth=2,
        priority=1,
        head_message_id=first,
        head_enqueued_at=clock.now,
        head_attempts=0,
    )
    lease = transport.claim(visibility=30, holder="box:42:3")
    assert lease is not None
    info = _info(transport, "g")
    assert (info.state, info.lease_holder, info.lease_expires_at) == (
        "leased",
        "box:42:3",
        clock.now + 30,
    )
    assert info.head_attempts == 1
    assert transport.stats().in_flight == 1
    clock.now += 31  # expired, not yet reclaimed: ready, still showing who held it
    info = _info(transport, "g")
    assert (info.state, info.lease_holder) == ("ready", "box:42:3")
    assert transport.stats().in_flight == 0
    with pytest.raises(InvalidInput):
        transport.claim(holder="x" * 201)


def test_groups_pages_in_byte_order_without_gaps_and_skips_drained_rows(
    transport_factory: Make, postgres_url: str
) -> None:
    transport = transport_factory()
    ids = ["b", "a", "Z", "é", "ab", "\u00ff", "\U0001f600", "a b"]
    for group_id in ids:
        transport.publish(group_id, Event(kind="k"))
    expected = sorted(ids, key=lambda g: g.encode("utf-8"))
    seen: list[str] = []
    after: str | None = None
    while page := transport.groups(limit=3, after=after):
        seen += [info.group_id for info in page]
        after = page[-1].group_id
    assert seen == expected
    # A drained row (its group drained under a publish in flight that rolled back) is no group.
    lease = transport.claim()
    assert lease is not None
    with psycopg.connect(postgres_url) as conn:
        transport.publish(lease.group_id, Event(kind="k"), connection=conn)
        assert transport.ack(lease)
        conn.rollback()
    assert lease.group_id not in [info.group_id for info in transport.groups()]
    assert transport.group(lease.group_id) is None
    assert transport.stats().groups == len(ids) - 1


def test_groups_by_state(transport_factory: Make) -> None:
    clock = Clock()
    transport = transport_factory(clock=clock, max_attempts=1, on_exhausted="block")
    for group_id in ("blocked", "leased", "parked", "paused", "ready"):
        transport.publish(group_id, Event(kind="k"))
    leases = {lease.group_id: lease for lease in transport.claim_many(5)}
    assert transport.nack(leases["blocked"])
    assert transport.nack(leases["parked"], delay=100)
    assert transport.release(leases["ready"])
    assert transport.pause("paused")
    assert transport.release(leases["paused"])
    # The next claim blocks "blocked" (its head is exhausted) and leases "ready" again.
    lease = transport.claim()
    assert lease is not None
    assert lease.group_id == "ready"
    assert transport.release(lease)
    for state in ("blocked", "leased", "parked", "paused", "ready"):
        page = transport.groups(state=state)
        assert [(i.group_id, i.state) for i in page] == [(state, state)]
    everything = transport.groups()
    assert [i.group_id for i in everything] == ["blocked", "leased", "parked", "paused", "ready"]
    stats = transport.stats()
    assert (stats.blocked, stats.in_flight, stats.parked, stats.paused, stats.groups) == (
        1,
        1,
        1,
        1,
        5,
    )
    assert transport.groups(state="parked")[0].resume_at == clock.now + 100
    with pytest.raises(InvalidInput):
        transport.groups(state="stuck")  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        transport.groups(limit=1001)


# -- dead letters --------------------------------------------------------------------------------


def _dead(transport: PostgresTransport, group_id: str, kind: str) -> int:
    """Publish, claim and dead-letter one message; return its message id."""
    message_id = transport.publish(group_id, Event(kind=kind))
    while True:
        lease = transport.claim()
        assert lease is not None
        if lease.message_id == message_id:
            assert transport.dead_letter(lease, "bad", error="why")
            return message_id
        assert transport.release(lease)


def test_dead_letters_page_after_an_id_and_delete(transport_factory: Make) -> None:
    transport = transport_factory()
    for n in range(5):
        _dead(transport, f"g{n}", "k")
    dead = transport.dead_letters()
    assert [d.group_id for d in dead] == [f"g{n}" for n in range(5)]
    assert transport.dead_letters(2, after=dead[1].id) == dead[2:4]
    assert transport.dead_letters(after=dead[-1].id) == []
    assert transport.delete_dead_letters([dead[0].id, dead[2].id, 10**15]) == 2
    assert transport.delete_dead_letters([dead[0].id]) == 0
    assert transport.delete_dead_letters([]) == 0
    assert [d.id for d in transport.dead_letters()] == [dead[1].id, dead[3].id, dead[4].id]
    with pytest.raises(InvalidInput):
        transport.delete_dead_letters(None)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        transport.dead_letters(after="1")  # type: ignore[arg-type]


# -- redrive in place ---------------------------------------------------------------------------


def test_redrive_in_place_restores_the_order_with_the_original_ids(transport_factory: Make) -> None:
    transport = transport_factory()
    created = transport.publish("order-1", Event(kind="created"))
    paid = transport.publish("order-1", Event(kind="paid"))
    lease = transport.claim()
    assert lease is not None
    assert lease.event.kind == "created"
    assert transport.nack(lease, error="db down")
    lease = transport.claim()
    assert lease is not None
    assert transport.dead_letter(lease, "gave up")
    shipped = transport.publish("order-1", Event(kind="shipped"))
    assert transport.redrive() == 1
    assert transport.dead_letters() == []
    info = _info(transport, "order-1")
    assert (info.head_message_id, info.head_attempts, info.depth) == (created, 0, 3)
    assert info.last_error is not None
    assert info.last_error.message == "db down"  # the dead letter's error: history kept
    order = []
    while (lease := transport.claim()) is not None:
        order.append((lease.message_id, lease.event.kind, lease.attempt))
        assert transport.ack(lease)
    assert order == [(created, "created", 1), (paid, "paid", 1), (shipped, "shipped", 1)]


def test_redrive_in_place_of_several_dead_letters_of_one_group_and_of_a_gone_group(
    transport_factory: Make,
) -> None:
    transport = transport_factory()
    ids = [transport.publish("g", Event(kind=f"m{n}"), priority=2) for n in range(3)]
    for _ in ids:
        lease = transport.claim()
        assert lease is not None
        assert transport.dead_letter(lease, "bad")
    assert transport.group("g") is None  # all gone: the group no longer exists
    # Redrive the later ones first: order is by message id, whatever the redrive order.
    dead = transport.dead_letters()
    assert transport.redrive([dead[2].id]) == 1
    assert transport.redrive([dead[0].id, dead[1].id]) == 2
    info = _info(transport, "g")
    assert (info.priority, info.depth, info.head_message_id) == (2, 3, ids[0])
    got = []
    while (lease := transport.claim(min_priority=2)) is not None:
        got.append(lease.message_id)
        assert transport.ack(lease)
    assert got == ids


def test_redrive_in_place_keeps_a_paused_groups_pause_and_priority(
    transport_factory: Make,
) -> None:
    transport = transport_factory()
    message_id = transport.publish("g", Event(kind="k"), priority=3)
    lease = transport.claim()
    assert lease is not None
    assert transport.dead_letter(lease, "bad")
    assert transport.pause("g")  # created again, paused, priority 0
    assert transport.redrive() == 1
    info = _info(transport, "g")
    assert (info.state, info.priority, info.head_message_id) == ("paused", 0, message_id)
    # The group has a message now: a publish no longer sets its priority.
    transport.publish("g", Event(kind="later"), priority=4)
    assert _info(transport, "g").priority == 0


def test_a_lease_out_is_not_disturbed_by_a_lower_id_redriven_into_its_group(
    transport_factory: Make,
) -> None:
    transport = transport_factory()
    first = transport.publish("g", Event(kind="first"))
    second = transport.publish("g", Event(kind="second"))
    lease = transport.claim()
    assert lease is not None
    assert transport.dead_letter(lease, "bad")
    lease = transport.claim()
    assert lease is not None
    assert lease.message_id == second
    assert transport.redrive() == 1  # "first" is back, below the leased "second"
    assert _info(transport, "g").head_message_id == first
    assert transport.extend(lease, 30) is not None
    assert transport.nack(lease, error="still failing")
    lease = transport.claim()
    assert lease is not None
    assert (lease.message_id, lease.attempt) == (first, 1)
    assert transport.ack(lease)
    lease = transport.claim()
    assert lease is not None
    assert (lease.message_id, lease.attempt) == (second, 2)
    assert transport.ack(lease)


def test_redrive_not_in_place_publishes_at_the_tail_with_a_new_id(transport_factory: Make) -> None:
    transport = transport_factory()
    first = transport.publish("g", Event(kind="first"))
    lease = transport.claim()
    assert lease is not None
    assert transport.dead_letter(lease, "bad")
    later = transport.publish("g", Event(kind="later"))
    assert transport.redrive(in_place=False) == 1
    kinds = []
    while (lease := transport.claim()) is not None:
        kinds.append(lease.event.kind)
        assert lease.message_id not in (first,)
        assert transport.ack(lease)
    assert kinds == ["later", "first"]
    assert later > first


# -- upgrade -------------------------------------------------------------------------------------


def test_a_lease_taken_before_the_upgrade_is_still_held_after_it(
    scratch_db: Callable[[], str],
) -> None:
    url = scratch_db()
    with psycopg.connect(url, autocommit=True) as conn:
        for migration in migrations():
            if migration.version < 8:
                conn.execute(migration.sql)
        conn.execute("SELECT pgque_fifo.pgque_publish_v1('q', 'g', '{\"kind\": \"a\"}', 0, 1)")
        conn.execute("SELECT pgque_fifo.pgque_publish_v1('q', 'g', '{\"kind\": \"b\"}', 0, 1)")
        row = conn.execute(
            "SELECT group_id, message_id, token FROM"
            " pgque_fifo.pgque_claim_v1('q', 1, 30, 0, NULL, 'dead_letter', 2)"
        ).fetchone()
        assert row is not None
        install_schema(conn)
        transport = PostgresTransport(conn, queue="q", setup=False, clock=lambda: 3.0)
        info = transport.group("g")
        assert info is not None
        assert info.state == "leased"
        # The previous release's worker acks through v1 and its lease is still held.
        acked = conn.execute(
            "SELECT pgque_fifo.pgque_ack_v1('q', %s, %s, %s, 3)", [row[0], row[1], row[2]]
        ).fetchone()
        assert acked == (True,)
        lease = transport.claim()
        assert lease is not None
        assert lease.event.kind == "b"
