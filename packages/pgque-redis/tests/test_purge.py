"""purge in calls of bounded size (lua/purge.lua): a script blocks Redis while it runs, and one
pass over a queue of a million groups ran past Redis's script time limit, so every other client
was answered BUSY. Each call deletes about its budget of items (groups, messages, dead letters,
scheduled messages) and says whether it finished; between two calls the queue is whole (every
index lists only what exists), and what is published meanwhile goes too."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import redis

from pgque.core import Event
from pgque.redis import RedisTransport
from pgque.redis._driver_sync import PURGE_BUDGET
from pgque.redis._replies import text


def _members(raw: redis.Redis, key: str) -> list[str]:
    return [text(m) for m in raw.zrange(key, 0, -1)]


def _fill(transport: RedisTransport) -> None:
    """Plain and keyed groups, a deep group, a leased one, a paused empty one, a blocked one,
    dead letters, scheduled messages and a key policy."""
    transport.set_key_policy("kept", weight=2)
    for n in range(4):
        transport.publish(f"plain-{n}", Event(kind="job"))
        transport.publish(f"a-{n}", Event(kind="job"), fairness_key="a")
    for n in range(9):
        transport.publish("deep", Event(kind=str(n)), fairness_key="b")
    transport.publish("blocked", Event(kind="job"), fairness_key="c")
    transport.pause("paused")
    for n in range(3):
        transport.publish(f"later-{n}", Event(kind="job"), delay=3600, fairness_key="a")
    for lease in transport.claim_many(20):
        if lease.group_id == "a-0":
            assert transport.dead_letter(lease, "dead")
        elif lease.group_id == "blocked":
            assert transport.nack(lease)  # max_attempts=1: its next claim blocks it
        elif lease.group_id != "plain-0":  # plain-0 stays leased
            assert transport.release(lease)
    assert transport.claim_many(20)  # "blocked" exhausted: blocked now
    assert transport.stats().blocked == 1


def _items(raw: redis.Redis, p: str) -> int:
    """Groups, messages, dead letters and scheduled messages the queue holds."""
    groups = {text(k)[len(p) + 2 :] for k in raw.scan_iter(match=p + "g:*")}
    messages = sum(int(raw.zcard(p + "q:" + g)) for g in groups)
    return len(groups) + messages + int(raw.zcard(p + "dead")) + int(raw.zcard(p + "sched"))


def _check_whole(raw: redis.Redis, p: str) -> None:
    """Every index of the queue lists only what exists (keys.lua's invariant)."""
    for gid in _members(raw, p + "groups"):
        assert raw.exists(p + "g:" + gid), gid
        indexes = [*(f"r{t}" for t in range(5)), "blocked", "paused"]
        listed = [i for i in indexes if raw.zscore(p + i, gid) is not None]
        assert len(listed) == 1, (gid, listed)
        ids = _members(raw, p + "q:" + gid)
        assert all(raw.hexists(p + "msg", i) for i in ids), gid
        assert (raw.zscore(p + "heads", gid) is not None) == bool(ids), gid
    for index in (*(f"r{t}" for t in range(5)), "blocked", "paused", "heads"):
        for gid in _members(raw, p + index):
            assert raw.zscore(p + "groups", gid) is not None, (index, gid)
    for fk in _members(raw, p + "kq"):
        assert raw.zcard(p + "kr:" + fk) > 0, fk
    for key in raw.scan_iter(match=p + "k[rgl]:*"):
        fk = text(key)[len(p) + 3 :]
        for gid in _members(raw, text(key)):
            assert text(raw.hget(p + "g:" + gid, "fk") or b"") == fk, (text(key), gid)
    for key in _members(raw, p + "sched"):
        gid = text(raw.hget(p + "s:" + key, "g"))
        assert raw.zscore(p + "sq:" + gid, key) is not None, key


def _left(raw: redis.Redis, p: str) -> set[str]:
    return {text(k)[len(p) :] for k in raw.scan_iter(match=p + "*")}


def test_a_purge_runs_in_calls_of_its_budget_and_leaves_the_queue_whole_between_them(
    transport_factory: Callable[..., RedisTransport], raw_client: redis.Redis
) -> None:
    transport = transport_factory(max_attempts=1, on_exhausted="block")
    _fill(transport)
    p = transport.key_prefix
    held = [lease for lease in transport.claim_many(5) if lease.group_id.startswith("a-")]
    budget = 3
    items = _items(raw_client, p)
    replies: list[int] = []
    while True:
        replies.append(int(transport.driver._run("purge", None, budget)))
        if replies[-1]:
            break
        left = _items(raw_client, p)
        assert items - budget - 1 <= left < items  # progress, and about the budget at most
        items = left
        _check_whole(raw_client, p)
        if len(replies) == 3:
            # Published between two calls: purged too, by a later call.
            transport.publish("meanwhile", Event(kind="job"), fairness_key="late")
            items = _items(raw_client, p)
    assert len(replies) > 3  # (each call's bound is checked above)
    assert replies[:-1] == [0] * (len(replies) - 1)
    assert _left(raw_client, p) == {"meta", "seq", "dseq", "kp", "kall"}
    assert _members(raw_client, p + "kall") == ["kept"]
    stats = transport.stats()
    assert (stats.groups, stats.messages, stats.dead_letters, stats.in_flight) == (0, 0, 0, 0)
    assert not any(transport.ack(lease) for lease in held)  # fenced: their groups are gone
    # The queue serves on; ids keep growing.
    later = transport.publish("g", Event(kind="new"), fairness_key="a")
    lease = transport.claim()
    assert lease is not None
    assert (lease.group_id, lease.message_id) == ("g", later)


def test_a_purge_in_calls_leaves_what_one_call_leaves(
    transport_factory: Callable[..., RedisTransport], raw_client: redis.Redis
) -> None:
    small = transport_factory(max_attempts=1, on_exhausted="block")
    whole = transport_factory(max_attempts=1, on_exhausted="block")
    _fill(small)
    _fill(whole)
    assert int(whole.driver._run("purge", None, 10**6)) == 1
    small.driver.purge(budget=1)
    assert _left(raw_client, small.key_prefix) == _left(raw_client, whole.key_prefix)


class CountingClient(redis.Redis):
    """A real redis-py client that counts its round trips (commands sent)."""

    calls = 0

    def execute_command(self, *args: Any, **options: Any) -> Any:
        self.calls += 1
        return super().execute_command(*args, **options)  # type: ignore[no-untyped-call]


def test_purge_of_a_queue_past_the_budget_takes_several_calls(
    redis_url: str, new_queue: Callable[[], str], raw_client: redis.Redis
) -> None:
    client = cast(CountingClient, CountingClient.from_url(redis_url))
    transport = RedisTransport(client=client, queue=new_queue())
    try:
        groups = PURGE_BUDGET * 3 // 2
        for start in range(0, groups, 500):
            transport.publish_many(
                [(f"g{n}", Event(kind="job")) for n in range(start, start + 500)],
                fairness_key="k",
            )
        transport.stats()  # scripts loaded, the store known: only the purge is counted below
        client.calls = 0
        transport.purge()
        assert client.calls >= 3  # 2 x groups items, PURGE_BUDGET each at most
        assert _left(raw_client, transport.key_prefix) == {"meta", "seq"}
    finally:
        transport.close()
        client.close()
