"""groups() on Redis: byte order through the ``groups`` index (ZRANGEBYLEX), keyset paging,
paused and blocked pages straight from their own indexes, and a page of another state built
by script calls that each examine at most GROUPS_SCAN_BUDGET groups."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import redis

from pgque.conformance.clock import FakeClock
from pgque.core import Event, InvalidInput
from pgque.redis import AsyncRedisTransport, RedisTransport
from pgque.redis import _driver_sync as sync_module
from pgque.redis._replies import text

HOSTILE_ORDER = ["a", "B", "é", "z", "ä", "Z", "\U0001f600", "ab", "a b", "\x7f", "日本"]


class Counted:
    """Counts the groups script calls of one transport (a wrapper of its real _run)."""

    def __init__(self, transport: RedisTransport) -> None:
        self.calls = 0
        self._run = transport.driver._run
        transport.driver._run = self  # type: ignore[method-assign]

    def __call__(self, name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "groups":
            self.calls += 1
        return self._run(name, *args, **kwargs)


def test_groups_come_in_utf8_byte_order_and_page_by_key(
    transport_factory: Callable[..., RedisTransport],
) -> None:
    transport = transport_factory()
    for group in HOSTILE_ORDER:
        transport.publish(group, Event(kind="k"))
    expected = sorted(HOSTILE_ORDER, key=lambda g: g.encode("utf-8"))
    assert [info.group_id for info in transport.groups()] == expected
    seen: list[str] = []
    after: str | None = None
    while page := transport.groups(limit=3, after=after):
        assert len(page) <= 3
        seen += [info.group_id for info in page]
        after = page[-1].group_id
    assert seen == expected
    assert [info.group_id for info in transport.groups(after="a")] == expected[
        expected.index("a") + 1 :
    ]
    assert transport.groups(after="\U0010ffff") == []


def test_bad_page_arguments_are_refused_before_any_io() -> None:
    offline = RedisTransport("redis://127.0.0.1:9/0", retries=0)
    for kwargs in ({"limit": 0}, {"limit": 1001}, {"state": "gone"}, {"after": 7}):
        with pytest.raises(InvalidInput):
            offline.groups(**kwargs)
    offline.close()


def test_a_state_page_is_built_in_bounded_script_calls(
    transport_factory: Callable[..., RedisTransport], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sync_module, "GROUPS_SCAN_BUDGET", 3)
    transport = transport_factory(clock=FakeClock())
    groups = [f"g{i:02}" for i in range(20)]
    for group in groups:
        transport.publish(group, Event(kind="k"))
    parked = ["g00", "g07", "g19"]
    for lease in transport.claim_many(20):
        assert transport.nack(lease, delay=100 if lease.group_id in parked else 0)
    counted = Counted(transport)
    assert [info.group_id for info in transport.groups(state="parked")] == parked
    assert counted.calls == 7  # 20 groups, 3 examined per call
    counted.calls = 0
    assert [info.group_id for info in transport.groups(state="parked", limit=2)] == parked[:2]
    assert counted.calls == 3  # stops once the page is full
    counted.calls = 0
    assert [info.group_id for info in transport.groups(state="parked", after="g07")] == ["g19"]
    assert counted.calls == 5  # 12 groups after g07: 4 full calls, one that finds the end
    counted.calls = 0
    ready = transport.groups(state="ready", limit=5)
    assert [info.group_id for info in ready] == ["g01", "g02", "g03", "g04", "g05"]
    assert counted.calls == 2


def test_one_script_call_examines_at_most_its_budget(
    transport_factory: Callable[..., RedisTransport],
) -> None:
    transport = transport_factory()
    for i in range(10):
        transport.publish(f"g{i}", Event(kind="k"))
    reply = transport.driver._run("groups", None, "parked", 5, "-", 4, repeatable=True)
    assert [text(v) for v in reply] == ["0", "g3"]  # nothing parked among g0..g3
    reply = transport.driver._run("groups", None, "parked", 5, "(g3", 100, repeatable=True)
    assert [text(v) for v in reply] == ["1", "g9"]  # the index ended


def test_paused_and_blocked_pages_come_from_their_own_indexes(
    transport_factory: Callable[..., RedisTransport], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sync_module, "GROUPS_SCAN_BUDGET", 2)
    transport = transport_factory(max_attempts=1, on_exhausted="block")
    for i in range(30):
        transport.publish(f"g{i:02}", Event(kind="k"))
    for group in ("g03", "g17", "g29"):
        assert transport.pause(group)
    lease = transport.claim()
    assert lease is not None
    assert lease.group_id == "g00"
    assert transport.nack(lease)
    assert transport.claim_many(30) != []  # blocks g00, leases the others
    counted = Counted(transport)
    assert [i.group_id for i in transport.groups(state="paused")] == ["g03", "g17", "g29"]
    assert counted.calls == 2  # the paused index holds 3 ids, 2 per call
    counted.calls = 0
    assert [i.group_id for i in transport.groups(state="blocked")] == ["g00"]
    assert counted.calls == 1


def test_a_group_id_that_is_not_utf8_is_listed_escaped(
    transport_factory: Callable[..., RedisTransport], raw_client: redis.Redis
) -> None:
    transport = transport_factory()
    p = transport.key_prefix.encode()
    transport.publish("z", Event(kind="k"))
    raw_client.hset(p + b"g:\xffg", mapping={"prio": "0", "at": "0", "paused": "1"})
    raw_client.zadd(p + b"groups", {b"\xffg": 0})
    raw_client.zadd(p + b"paused", {b"\xffg": 0})
    assert [i.group_id for i in transport.groups()] == ["z", "\\xffg"]
    assert [i.group_id for i in transport.groups(state="paused", limit=1)] == ["\\xffg"]


@pytest.mark.asyncio
async def test_async_groups_page_and_filter(redis_url: str, new_queue: Callable[[], str]) -> None:
    async with AsyncRedisTransport(redis_url, queue=new_queue()) as transport:
        for group in ("c", "a", "b"):
            await transport.publish(group, Event(kind="k"))
        assert await transport.pause("b")
        page = await transport.groups(limit=2)
        assert [info.group_id for info in page] == ["a", "b"]
        page = await transport.groups(after="b")
        assert [info.group_id for info in page] == ["c"]
        paused = await transport.groups(state="paused")
        assert [(info.group_id, info.depth) for info in paused] == [("b", 1)]
        info = await transport.group("a")
        assert info is not None
        assert info.state == "ready"
        assert await transport.group("missing") is None
