"""The reference model's rules, checked directly (the conformance suite checks the transports)."""

from __future__ import annotations

import itertools

from pgque.core import Event, QueueModel

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
