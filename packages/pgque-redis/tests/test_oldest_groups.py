"""oldest_groups() on Redis: the ``heads`` sorted set (a group scored by its head's enqueue
time) kept by every script that changes a group's messages, scans in budgeted calls that go on
from a (score, id) cursor, and a queue written before that set existed indexed on first use."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import redis

from pgque.conformance.clock import FakeClock
from pgque.core import Event
from pgque.redis import RedisTransport, key_prefix
from pgque.redis import _driver_sync as sync_module


def _ids(transport: RedisTransport, **kwargs: object) -> list[str]:
    return [g.group_id for g in transport.oldest_groups(**kwargs)]  # type: ignore[arg-type]


def _model(transport: RedisTransport) -> list[str]:
    """Every group holding a message by (head enqueue time, id bytes), from group() alone."""
    infos = [transport.group(g.group_id) for g in transport.groups(limit=1000)]
    held = [i for i in infos if i is not None and i.head_enqueued_at is not None]
    held.sort(key=lambda i: (i.head_enqueued_at or 0.0, i.group_id.encode("utf-8")))
    return [i.group_id for i in held]


def test_ties_and_chunks_page_exactly_with_a_tiny_budget(
    transport_factory: Callable[..., RedisTransport], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runs of equal scores longer than a call's budget, cut anywhere: nothing lost or twice."""
    clock = FakeClock()
    transport = transport_factory(clock=clock)
    names = ["b", "a", "é", "Z", "\U0001f600", "a b", "日本", "aa"]
    for round_ in range(3):
        transport.publish_many([(f"{n}{round_}", Event(kind="k")) for n in names])
        clock.advance(1.0)
    transport.publish("a0", Event(kind="k"))  # a second message: a0's head stays the first
    want = _model(transport)
    assert len(want) == 24
    for budget in (1, 2, 3, 5, 64):
        monkeypatch.setattr(sync_module, "GROUPS_SCAN_BUDGET", budget)
        for limit in (1, 7, 8, 9, 24, 1000):
            assert _ids(transport, limit=limit) == want[:limit], (budget, limit)


def test_every_change_of_a_head_moves_its_group(
    transport_factory: Callable[..., RedisTransport], raw_client: redis.Redis
) -> None:
    clock = FakeClock()
    transport = transport_factory(clock=clock, max_attempts=1)
    heads = key_prefix(transport.queue) + "heads"
    for _ in range(2):
        for group in ("x", "y", "z"):
            transport.publish(group, Event(kind="k"))
            clock.advance(1.0)
    assert _ids(transport) == ["x", "y", "z"] == _model(transport)
    leases = {lease.group_id: lease for lease in transport.claim_many(3, 60.0)}
    assert transport.ack(leases["x"])  # x's next head: enqueued after y's and z's first
    assert _ids(transport) == ["y", "z", "x"] == _model(transport)
    assert transport.dead_letter(leases["y"], "bad")
    assert _ids(transport) == ["z", "x", "y"] == _model(transport)
    clock.advance(1.0)
    dead = transport.dead_letters()
    assert transport.redrive([d.id for d in dead]) == 1  # in place: y's head again, enqueued now
    assert _ids(transport) == ["z", "x", "y"] == _model(transport)
    assert transport.release(leases["z"])
    for lease in transport.claim_many(3, 60.0):
        assert transport.ack(lease)
    for lease in transport.claim_many(3, 60.0):
        assert transport.ack(lease)
    assert transport.oldest_groups() == []
    assert raw_client.zcard(heads) == 0


def test_a_queue_written_before_the_heads_set_is_indexed_on_first_use(
    transport_factory: Callable[..., RedisTransport],
    raw_client: redis.Redis,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = FakeClock()
    transport = transport_factory(clock=clock)
    for n in range(30):
        transport.publish(f"g{(n * 7) % 30:02d}", Event(kind="k"))
        clock.advance(0.5)
    want = _model(transport)
    prefix = key_prefix(transport.queue)
    # As an older pgque left it: no heads set, no mark that it is complete.
    raw_client.delete(prefix + "heads", prefix + "heads:ok")
    calls = 0
    real_run = transport.driver._run

    def counted(name: str, *args: object, **kwargs: object) -> object:
        nonlocal calls
        if name == "oldest_groups":
            calls += 1
        return real_run(name, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(transport.driver, "_run", counted)
    monkeypatch.setattr(sync_module, "GROUPS_SCAN_BUDGET", 4)
    assert _ids(transport, limit=1000) == want
    assert calls > 30 // 4  # the index was built by several bounded calls
    assert raw_client.get(prefix + "heads:ok") == b"1"
    assert raw_client.exists(prefix + "heads:at") == 0
    assert raw_client.zcard(prefix + "heads") == 30


def test_purge_clears_the_heads_set(
    transport_factory: Callable[..., RedisTransport], raw_client: redis.Redis
) -> None:
    transport = transport_factory()
    transport.publish("g", Event(kind="k"))
    prefix = key_prefix(transport.queue)
    assert raw_client.zcard(prefix + "heads") == 1
    transport.purge()
    assert raw_client.exists(prefix + "heads", prefix + "heads:ok") == 0
    transport.publish("h", Event(kind="k"))
    assert raw_client.get(prefix + "heads:ok") == b"1"
    assert _ids(transport) == ["h"]
