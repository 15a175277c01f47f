"""The pairwise interleaving review of the Redis transport (issue 11): for every pair of
operations, what can happen if the other one runs "in between", and the test that covers it.

Every operation of the transport is ONE Lua script call (``EVALSHA``; after ``NOSCRIPT``,
``SCRIPT LOAD`` and the same ``EVALSHA`` again, the first having run nothing). Redis runs one
script at a time, so two operations never interleave inside one another: each pair has
exactly two outcomes, A-then-B and B-then-A, and each must be the reference model's.
``test_every_operation_is_one_round_trip`` checks the "one script" claim for each operation;
the model-based fuzzer (test_redis_fuzz.py) and the conformance suite check the outcomes. The
places where an operation is NOT one script are listed first.

Not one script (where another client can run between two calls): operation and its calls,
what could happen in between, and the test covering it.

- ``claim_many`` meeting heads that are JSON but no valid Event (text that is not JSON, a
  list element that is no message id and a purged message are dealt with inside the claim
  script): claim; dead_letter per bad head; claim again (at most 4 rounds)
  between: (a) a first-round lease expires before the next round, which leases its group again:
    two leases of one group in one answer, or (max_attempts) a second attempt counted and the
    head buried or blocked as exhausted while the caller holds the first lease -- FIXED, later
    rounds get the groups this call took and skip them untouched;
    (b) a bad head's lease expires and another worker claims it before our dead_letter: ours is
    fenced (0), theirs buries it; (c) anything else: ordinary claims see it
  covered by: test_claim_rounds_never_return_two_leases_of_one_group,
    test_claim_rounds_never_spend_a_lease_the_caller_holds; test_undecodable.py
- ``groups(state=...)`` of a state without an index of its own (ready, leased, parked):
  groups script calls, each examining at most GROUPS_SCAN_BUDGET ids after the last one the
  previous call examined, until the page is full or the index ends
  between: anything; a group is judged by the call that examines it, at that call's "now",
    and ids only grow along the page, so no group is listed twice; a group that exists and is
    in that state throughout is listed (one created behind the cursor is not, as with any
    keyset page)
  covered by: test_groups_paging.py::test_a_state_page_is_built_in_bounded_script_calls;
    conformance paging while groups are created and drained
- ``wait_for_messages``: SUBSCRIBE, then read
  between: a publish before the subscription is not heard, so the first wait returns True at
    once
  covered by: test_wake.py
- any write whose reply was lost: not repeated
  between: the script may or may not have run; ConnectionLost says so; fencing makes a repeated
    ack a no-op
  covered by: test_errors.py::test_write_cut_mid_command_is_not_repeated

One script each: the pairs (same group unless said) whose two orders differ in a way worth
naming, what could happen, and the test covering it.

- publish x ack that drains the group
  could happen: before: the drain sees the message and keeps the group; after: the drain deleted
    the group's keys and ready entry, and the publish makes a fresh, never-served group at its
    own priority (no orphan, no phantom)
  covered by: conformance test_priority_resets_after_drain, test_concurrent_drain_threads
- publish x claim (the group is leased)
  could happen: the lease and its score stay; a lost ready entry is put back at the lease's end
  covered by: conformance test_publish_into_in_flight_group_keeps_lease;
    test_ready_heal.py::test_healing_never_frees_a_leased_group
- publish x nack with delay (the group is parked)
  could happen: the park stays
  covered by: conformance test_publish_into_parked_group_keeps_park;
    test_ready_heal.py::test_healing_never_unparks_a_group
- publish x a claim that blocks an exhausted head
  could happen: the group stays out of the ready sets until unblock
  covered by: test_ready_heal.py::test_healing_never_unblocks_a_group
- publish x a ready entry deleted from outside (eviction, ZREM, DEL r<n>)
  could happen: the group was stranded forever -- FIXED: ZADD NX at the kept score; healthy
    groups keep their place
  covered by: test_ready_heal.py
- publish_many x anything
  could happen: one script for the whole batch: all or nothing, in order
  covered by: test_every_operation_is_one_round_trip
- claim x claim
  could happen: distinct groups; the second sees the first's leases
  covered by: conformance test_one_lease_per_group, test_concurrent_drain_threads
- ack / nack / extend / dead_letter x expiry and re-claim
  could happen: token and head are checked inside the script: the stale call is fenced
  covered by: conformance test_stale_ack_is_fenced, test_stale_nack_is_fenced,
    test_stale_extend_is_fenced, test_stale_dead_letter_is_fenced
- ack x ack of one lease (a retry after a lost reply)
  could happen: the second returns False
  covered by: pgque-core
    test_worker_reconnect.py::test_an_ack_applied_but_unanswered_is_not_applied_twice
- nack without delay x claim
  could happen: claimable at once, behind the groups waiting since before
  covered by: conformance (fuzz against the model: test_redis_fuzz.py)
- dead_letter x redrive
  could happen: in place, the dead letter goes back under its own id into the group's sorted
    set; at the tail (in_place=False), through the same append as publish
  covered by: conformance redrive tests; test_group_ops.py
- redrive in place x a lease out on a later message of the group
  could happen: the lease is fenced by (token, message id), not by the head: its ack, nack,
    extend, release and dead_letter act on its own message; the next claim delivers the
    redriven (lowest) id
  covered by: test_group_ops.py::
    test_redrive_in_place_goes_ahead_of_later_messages_while_a_lease_finishes
- redrive in place x publish into the same group
  could happen: either order leaves the group ordered by id: the redriven id is older
  covered by: test_group_ops.py::test_redrive_and_a_publish_give_one_order_whichever_runs_first
- pause x claim
  could happen: before: the claim leases the head, and the lease finishes normally; after: the
    group is in no ready set, so no claim sees it (and exhaustion is not applied)
  covered by: conformance pause tests; test_group_ops.py::
    test_pause_holds_an_exhausted_head_and_lets_a_lease_finish
- pause / resume x ack that drains the group
  could happen: a paused group is kept without messages; resume removes it
  covered by: test_group_keys.py::test_a_drained_paused_group_keeps_only_its_hash_and_index_entries
- release x claim
  could happen: the released group is claimable at once; the attempt is taken back
  covered by: test_group_ops.py::test_release_never_spends_an_attempt
- redrive x redrive of one dead letter
  could happen: the second finds it gone: republished once
  covered by: test_two_redrives_of_one_dead_letter_republish_it_once
- unblock x unblock / claim
  could happen: the second unblock returns False
  covered by: conformance test_unblock_of_unblocked_group_is_false
- purge x claim, then a settle of that lease
  could happen: the settle finds the group gone: fenced (False / None), nothing comes back
  covered by: test_purge_between_claim_and_settle_fences_the_lease
- purge x publish
  could happen: before: purged; after: a fresh group, ids still growing
  covered by: test_purge_between_claim_and_settle_fences_the_lease
- stats / dead_letters x anything
  could happen: a consistent snapshot (one script)
  covered by: test_every_operation_is_one_round_trip

Known and left open: ``purge`` finds groups through the ``groups`` index, the ready sets and
the blocked and paused indexes, so only a group whose every entry was deleted from outside
keeps its message set and hash until its next publish heals it; purge never scans the whole
keyspace. The purged ids left in such a set have no stored event, and claim drops them as gone
(not as undecodable dead letters): covered by test_undecodable.py::
test_purged_messages_of_a_stranded_group_do_not_come_back_as_dead_letters.
Tier A locks, dedup and slot counts (the partition layer's multi-call paths) are reviewed in
pgque-partition's test_partition_interleavings.py.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any, cast

import pytest
import redis

from pgque.core import Event, Settlement
from pgque.redis import RedisTransport
from pgque.redis._scripts import load_scripts


class SteppingClock:
    """An injected clock that moves *step* seconds at every reading: each script call of one
    transport method sees a later time than the one before."""

    def __init__(self, start: float = 1_800_000_000.0, step: float = 10.0) -> None:
        self._times = itertools.count()
        self._start, self._step = start, step

    def __call__(self) -> float:
        return self._start + next(self._times) * self._step


def test_claim_rounds_never_return_two_leases_of_one_group(
    transport_factory: Callable[..., RedisTransport], raw_client: redis.Redis
) -> None:
    """claim_many claims again for the places undecodable heads took; if the first round's
    leases have expired by the next round (a short visibility), a group must not come back a
    second time in the same answer: the earlier lease is fenced out, only the later is held."""
    transport = transport_factory(clock=SteppingClock())
    transport.publish("a", Event(kind="a"))
    bad = transport.publish("b", Event(kind="b"))
    raw_client.hset(transport.key_prefix + "msg", str(bad), b"{not json")
    leases = transport.claim_many(5, visibility=5.0)  # each later script call is 10 s later
    groups = [lease.group_id for lease in leases]
    assert groups == ["a"]
    assert transport.ack(leases[0])  # the one lease returned is the one held


@pytest.mark.parametrize("body", [b"{not json", b'{"kind": ""}'], ids=["not-json", "not-event"])
@pytest.mark.parametrize("on_exhausted", ["dead_letter", "block"])
def test_claim_rounds_never_spend_a_lease_the_caller_holds(
    transport_factory: Callable[..., RedisTransport],
    raw_client: redis.Redis,
    on_exhausted: str,
    body: bytes,
) -> None:
    """With max_attempts=1, a later claim round that reached a group leased by an earlier
    round (its lease expired meanwhile) would count a second attempt and bury or block its
    head as exhausted, though the caller holds the first lease and the message never ran.
    The later rounds skip the groups this call leased, without touching them."""
    transport = transport_factory(clock=SteppingClock(), max_attempts=1, on_exhausted=on_exhausted)
    transport.publish("a", Event(kind="a"))
    bad = transport.publish("b", Event(kind="b"))
    raw_client.hset(transport.key_prefix + "msg", str(bad), body)
    leases = transport.claim_many(5, visibility=5.0)  # each later script call is 10 s later
    assert [lease.group_id for lease in leases] == ["a"]
    assert leases[0].attempt == 1
    assert transport.ack(leases[0])  # the lease returned is held: the message was not spent
    assert [letter.group_id for letter in transport.dead_letters()] == ["b"]
    stats = transport.stats()
    assert (stats.groups, stats.messages, stats.blocked) == (0, 0, 0)


class CountingClient(redis.Redis):
    """A real redis-py client that counts its round trips (commands sent)."""

    sent = 0

    def execute_command(self, *args: Any, **options: Any) -> Any:
        self.sent += 1
        return super().execute_command(*args, **options)  # type: ignore[no-untyped-call]


def test_every_operation_is_one_round_trip(redis_url: str, new_queue: Callable[[], str]) -> None:
    """Each operation is one script call, so no other client can run between two of its steps
    (scripts are loaded first, so no NOSCRIPT reload is counted)."""
    client = cast(CountingClient, CountingClient.from_url(redis_url))
    transport = RedisTransport(client=client, queue=new_queue(), max_attempts=1)
    try:
        for script in load_scripts().values():
            client.script_load(script.text)
        transport._store_origin()  # learnt once per transport (its first lease needs it)

        def one_trip(name: str, step: Callable[[], Any]) -> Any:
            client.sent = 0
            result = step()
            assert client.sent == 1, name
            return result

        one_trip("publish", lambda: transport.publish("g", Event(kind="k")))
        one_trip("publish_many", lambda: transport.publish_many([("g", Event(kind="k"))] * 3))
        (lease,) = one_trip("claim_many", lambda: transport.claim_many(5))
        one_trip("extend", lambda: transport.extend(lease, 30))
        one_trip("nack", lambda: transport.nack(lease))
        one_trip("claim", transport.claim)
        one_trip("stats", transport.stats)
        one_trip("dead_letters", transport.dead_letters)
        one_trip("redrive", transport.redrive)
        one_trip("purge", transport.purge)
        transport.publish("h", Event(kind="k"))
        (first,) = transport.claim_many(1)
        one_trip("ack_many", lambda: transport.ack_many([first]))
        one_trip("unblock", lambda: transport.unblock("h"))
        transport.publish("h", Event(kind="k"))
        (second,) = transport.claim_many(1)
        assert one_trip("dead_letter", lambda: transport.dead_letter(second, "r")) is True
        one_trip("delete_dead_letters", lambda: transport.delete_dead_letters([1]))
        transport.publish("h", Event(kind="k"))
        (third,) = one_trip("claim_many holder", lambda: transport.claim_many(1, holder="x"))
        assert one_trip("release", lambda: transport.release(third)) is True
        one_trip("pause", lambda: transport.pause("h"))
        one_trip("group", lambda: transport.group("h"))
        one_trip("groups", transport.groups)
        one_trip("groups paused", lambda: transport.groups(state="paused"))
        one_trip("resume", lambda: transport.resume("h"))
        (fourth,) = transport.claim_many(1)
        one_trip("nack error", lambda: transport.nack(fourth, error=ValueError("x")))
        transport.publish("j", Event(kind="k"))
        (fifth,) = transport.claim_many(1)
        transport.publish("i", Event(kind="k"))
        settled = one_trip(
            "settle_and_claim",
            lambda: transport.settle_and_claim(
                [Settlement.nack(fifth, error="x"), Settlement.ack(fifth)], 2, holder="y"
            ),
        )
        assert settled.settled == [True, False]
        assert sorted(lease.group_id for lease in settled.leases) == ["i"]
        one_trip("settle_and_claim claim only", lambda: transport.settle_and_claim([], 1))
    finally:
        transport.close()
        client.close()


def test_purge_between_claim_and_settle_fences_the_lease(
    transport_factory: Callable[..., RedisTransport],
) -> None:
    transport = transport_factory()
    first = transport.publish("g", Event(kind="k"))
    transport.publish("g", Event(kind="k"))
    lease = transport.claim()
    assert lease is not None
    transport.purge()
    assert transport.extend(lease, 30) is None
    assert transport.nack(lease) is False
    assert transport.dead_letter(lease, "late") is False
    assert transport.ack(lease) is False
    stats = transport.stats()
    assert (stats.groups, stats.messages, stats.in_flight, stats.dead_letters) == (0, 0, 0, 0)
    # A publish after the purge makes a fresh group; ids keep growing.
    later = transport.publish("g", Event(kind="k"))
    assert later > first + 1
    again = transport.claim()
    assert again is not None
    assert (again.message_id, again.attempt) == (later, 1)


def test_two_redrives_of_one_dead_letter_republish_it_once(
    transport_factory: Callable[..., RedisTransport],
) -> None:
    transport = transport_factory()
    transport.publish("g", Event(kind="k"))
    lease = transport.claim()
    assert lease is not None
    assert transport.dead_letter(lease, "r")
    (letter,) = transport.dead_letters()
    assert transport.redrive([letter.id]) == 1
    assert transport.redrive([letter.id]) == 0
    assert transport.redrive() == 0
    assert transport.stats().messages == 1
