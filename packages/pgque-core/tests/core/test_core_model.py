"""The reference model's rules, checked directly (the conformance suite checks the transports)."""

from __future__ import annotations

import itertools
import typing

from pgque.core import ErrorInfo, Event, QueueModel

T0 = 1_000.0


def _model(**options: object) -> QueueModel:
    counter = itertools.count(1)
    return QueueModel(new_token=lambda: f"t{next(counter)}", **options)  # type: ignore[arg-type]


def _json(n: int) -> str:
    return Event(kind="k", data={"n": n}).to_json()


def test_tokens_come_from_the_injected_factory() -> None:
    model = _model()
    model.publish("g", _json(1), 0, T0)
    lease = model.claim(T0, 30.0, 0)
    assert lease is not None
    assert lease.token == "t1"
    assert lease.expires_at == T0 + 30.0
    assert (lease.queue, lease.origin) == ("default", "model")


def test_claim_order_is_until_then_code_point() -> None:
    model = _model()
    for group in ["é", "a", "B", "b"]:
        model.publish(group, _json(0), 0, T0)
        model.publish(group, _json(1), 0, T0)
    leases = model.claim_many(10, T0, 30.0, 0)
    assert [lease.group_id for lease in leases] == ["B", "a", "b", "é"]
    for offset, lease in zip([3.0, 1.0, 2.0, 4.0], leases, strict=True):
        assert model.ack(lease, T0 + offset)
    later = model.claim_many(10, T0 + 10, 30.0, 0)
    assert [lease.group_id for lease in later] == ["a", "b", "B", "é"]


def test_exhausted_heads_are_buried_within_one_claim() -> None:
    model = _model(max_attempts=1)
    for n in range(3):
        model.publish("g", _json(n), 0, T0)
    for _ in range(2):
        lease = model.claim(T0, 1.0, 0)
        assert lease is not None
        assert model.nack(lease, T0, 0.0)
        # The next claim buries the exhausted head and leases the following message.
    lease = model.claim(T0, 1.0, 0)
    assert lease is not None
    assert lease.event.data == {"n": 2}
    assert [d.event.data for d in model.dead_letters(10)] == [{"n": 0}, {"n": 1}]


def test_claim_policy_can_be_overridden_per_call() -> None:
    model = _model(max_attempts=1)
    model.publish("g", _json(0), 0, T0)
    lease = model.claim(T0, 1.0, 0)
    assert lease is not None
    assert model.nack(lease, T0, 0.0)
    again = model.claim(T0, 1.0, 0, max_attempts=None)
    assert again is not None
    assert again.attempt == 2
    assert model.nack(again, T0, 0.0)
    assert model.claim(T0, 1.0, 0, on_exhausted="block") is None
    assert model.groups["g"].blocked


def test_stats_at_a_point_in_time() -> None:
    model = _model()
    model.publish("a", _json(0), 0, T0)
    model.publish("b", _json(1), 0, T0 + 5)
    lease = model.claim(T0 + 10, 10.0, 0)
    assert lease is not None
    assert model.nack(lease, T0 + 10, 7.0)
    stats = model.stats(T0 + 12)
    assert (stats.groups, stats.messages, stats.parked, stats.in_flight) == (2, 2, 1, 0)
    assert stats.oldest_age_s == 12.0
    assert stats.next_resume_at == T0 + 17
    assert model.stats(T0 + 17).parked == 0


def test_unblock_of_unknown_group() -> None:
    assert _model().unblock("nobody", T0, False) is False


def test_redrive_ignores_unknown_ids() -> None:
    model = _model()
    model.publish("g", _json(0), 3, T0)
    lease = model.claim(T0, 1.0, 0)
    assert lease is not None
    assert model.dead_letter(lease, T0, "r")
    assert model.redrive([99, 100], T0) == 0
    assert model.redrive([1, 1], T0) == 1
    assert model.groups["g"].priority == 3


# -- issue 14: holds, release, errors, ordered redrive ---------------------------------------


def test_default_limit_is_ten() -> None:
    assert QueueModel().max_attempts == 10


def test_the_exhaustion_reason_names_the_limit_in_effect() -> None:
    model = _model(max_attempts=5)
    model.publish("g", _json(0), 0, T0)
    lease = model.claim(T0, 1.0, 0)
    assert lease is not None
    assert model.nack(lease, T0, 0.0, ErrorInfo.capture("why", T0))
    assert model.claim(T0, 1.0, 0, max_attempts=1) is None
    [dead] = model.dead_letters(10)
    assert dead.reason == "max_attempts (1) exhausted"
    assert dead.error is not None
    assert dead.error.message == "why"


def test_a_lease_is_fenced_by_token_and_message_id() -> None:
    model = _model()
    for n in range(3):
        model.publish("g", _json(n), 0, T0)
    first = model.claim(T0, 30.0, 0)
    assert first is not None
    assert model.dead_letter(first, T0, "x")
    second = model.claim(T0, 30.0, 0)
    assert second is not None
    assert model.redrive(None, T0) == 1
    # The group's lowest id is now the redriven message; the lease still names its own.
    forged = second.model_copy(update={"message_id": first.message_id})
    assert model.ack(forged, T0) is False
    assert model.release(forged, T0) is False
    assert model.ack(second, T0) is True
    back = model.claim(T0, 30.0, 0)
    assert back is not None
    assert (back.message_id, back.attempt) == (first.message_id, 1)


def test_a_redriven_message_is_enqueued_at_the_redrive() -> None:
    model = _model()
    model.publish("g", _json(0), 0, T0)
    model.publish("g", _json(1), 0, T0 + 1)
    lease = model.claim(T0 + 2, 30.0, 0)
    assert lease is not None
    assert model.dead_letter(lease, T0 + 2, "x")
    assert model.redrive(None, T0 + 10) == 1
    info = model.group("g", T0 + 20)
    assert info is not None
    assert info.head_message_id == lease.message_id
    assert info.head_enqueued_at == T0 + 10
    # The oldest message of the queue is the one behind the redriven head.
    assert model.stats(T0 + 20).oldest_age_s == 19.0
    again = model.claim(T0 + 20, 30.0, 0)
    assert again is not None
    assert model.ack(again, T0 + 20)
    assert model.stats(T0 + 20).oldest_age_s == 19.0
    assert model.groups["g"].redriven == 0


def test_in_place_redrive_keeps_an_empty_paused_groups_priority() -> None:
    model = _model()
    model.publish("g", _json(0), 3, T0)
    lease = model.claim(T0, 30.0, 0)
    assert lease is not None
    assert model.dead_letter(lease, T0, "x")
    assert model.pause("g")
    assert model.redrive(None, T0) == 1
    assert model.groups["g"].priority == 0
    assert model.resume("g")
    assert model.claim(T0, 30.0, 1) is None


def test_a_tail_redrive_into_an_empty_paused_group_sets_its_priority() -> None:
    model = _model()
    model.publish("g", _json(0), 3, T0)
    lease = model.claim(T0, 30.0, 0)
    assert lease is not None
    assert model.dead_letter(lease, T0, "x")
    assert model.pause("g")
    assert model.redrive(None, T0, in_place=False) == 1
    assert model.groups["g"].priority == 3


def test_release_never_takes_attempts_below_zero() -> None:
    model = _model()
    model.publish("g", _json(0), 0, T0)
    lease = model.claim(T0, 30.0, 0)
    assert lease is not None
    assert model.unblock("g", T0, False) is False
    model.groups["g"].messages[0].attempts = 0  # as if an operator reset it meanwhile
    assert model.release(lease, T0)
    assert model.groups["g"].messages[0].attempts == 0


def test_groups_page_in_code_point_order_with_state() -> None:
    model = _model()
    for group in ["é", "a", "B", "b"]:
        model.publish(group, _json(0), 0, T0)
    assert model.pause("c")
    page = model.groups_page(T0, None, 10, None)
    assert [g.group_id for g in page] == ["B", "a", "b", "c", "é"]
    assert [g.group_id for g in model.groups_page(T0, "paused", 10, None)] == ["c"]
    assert [g.group_id for g in model.groups_page(T0, None, 2, "a")] == ["b", "c"]
    assert model.stats(T0).paused == 1


def _n_of(model: QueueModel, now: float) -> list[int]:
    """Claim and ack until nothing is deliverable; return the events' n in order."""
    out: list[int] = []
    while (lease := model.claim(now, 30.0, 0)) is not None:
        assert isinstance(lease.event.data, dict)
        n = lease.event.data["n"]
        assert isinstance(n, int)
        out.append(n)
        assert model.ack(lease, now)
    return out


def test_a_due_message_is_fenced_by_its_id_out_of_id_order() -> None:
    model = _model()
    scheduled = model.schedule("g", _json(1), 0, T0, T0 + 10)
    model.publish("g", _json(2), 0, T0 + 5)
    first = model.claim(T0 + 11, 30.0, 0)
    assert first is not None
    assert first.message_id > scheduled  # published later, joined earlier
    assert model.ack(first, T0 + 11)
    second = model.claim(T0 + 11, 30.0, 0)
    assert second is not None
    assert second.message_id == scheduled
    assert model.nack(second, T0 + 11, 0.0)
    third = model.claim(T0 + 11, 30.0, 0)
    assert third is not None
    assert model.ack(second, T0 + 11) is False  # the old token is fenced out
    assert model.ack(third, T0 + 11)


def test_in_place_redrive_returns_a_due_message_to_its_join_place() -> None:
    model = _model()
    model.publish("g", _json(1), 0, T0)
    model.schedule("g", _json(2), 0, T0, T0 + 10)
    model.publish("g", _json(3), 0, T0 + 5)
    model.publish("g", _json(4), 0, T0 + 20)
    # g holds 1, 3, 2 (joined at T0 + 10), 4. Deliver 1 and 3, dead-letter 2, redrive it.
    for expected in (1, 3):
        lease = model.claim(T0 + 20, 30.0, 0)
        assert lease is not None
        assert lease.event.data == {"n": expected}
        assert model.ack(lease, T0 + 20)
    lease = model.claim(T0 + 20, 30.0, 0)
    assert lease is not None
    assert lease.event.data == {"n": 2}
    assert model.dead_letter(lease, T0 + 20, "x")
    model.publish("g", _json(5), 0, T0 + 21)
    assert model.redrive(None, T0 + 22) == 1
    assert _n_of(model, T0 + 22) == [2, 4, 5]  # back ahead of 4, where it had joined


def test_every_read_at_a_time_sees_what_is_due_by_then() -> None:
    model = _model()
    assert model.pause("g")
    model.schedule("g", _json(1), 4, T0, T0 + 10)
    # resume at a time when the message is due keeps the group (it has a message now).
    assert model.resume("g", T0 + 10)
    info = model.group("g", T0 + 10)
    assert info is not None
    assert (info.depth, info.priority, info.head_enqueued_at) == (1, 4, T0 + 10)
    stats = model.stats(T0 + 10)
    assert (stats.messages, stats.scheduled, stats.next_due_at) == (1, 0, None)


def test_purge_forgets_scheduled_messages_and_ticks_but_not_ids() -> None:
    model = _model()
    first = model.schedule("g", _json(1), 0, T0, T0 + 10)
    assert model.publish_tick("e", 5.0, "g", _json(2), 0, T0) is not None
    model.purge()
    assert model.stats(T0 + 20).scheduled == 0
    assert model.last_tick("e") is None
    assert model.cancel(first, T0) is False
    assert model.publish("g", _json(3), 0, T0 + 20) > first + 1


class _NoWalk(dict[int, object]):
    """The scheduled messages of a model, refusing to be walked whole."""

    def __iter__(self) -> typing.Iterator[int]:
        raise AssertionError("a page walked every scheduled message")


def test_a_scheduled_page_reads_only_the_ids_of_its_page() -> None:
    """A page is found by bisection in the ids kept in order, never by sorting them all; ids
    cancelled or joined meanwhile are passed over (and dropped)."""
    model = _model()
    ids = [model.schedule("g", _json(i), 0, T0, T0 + 100 + i) for i in range(50)]
    for message_id in ids[10:20]:
        assert model.cancel(message_id, T0)
    model.promote(T0 + 105)  # ids[0] to ids[5] join
    model.pending = _NoWalk(model.pending)  # type: ignore[assignment]
    page = model.scheduled_page(T0 + 105, 5, None)
    assert [m.id for m in page] == [*ids[6:10], ids[20]]
    assert [m.id for m in model.scheduled_page(T0 + 105, 100, ids[20])] == ids[21:]
    assert [m.id for m in model.scheduled_page(T0 + 105, 3, ids[7])] == [ids[8], ids[9], ids[20]]
    assert model.scheduled_page(T0 + 105, 10, ids[-1]) == []
    assert model.cancel(ids[30], T0 + 105)
    assert [m.id for m in model.scheduled_page(T0 + 105, 2, ids[29])] == [ids[31], ids[32]]
