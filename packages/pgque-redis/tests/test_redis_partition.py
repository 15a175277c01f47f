"""The Redis partition adapter (pgque.partition's dedup window, slot count and key locks on
Redis), tested on the adapter itself: the scripts it sends, and a lost unlock.

The partition layer's behaviour over this adapter is pgque-partition's tests (``nox -s
partition``); this file covers what lives here with the adapter's code.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, cast

import pytest
import redis

from pgque.core.partition_base import Grant
from pgque.redis import RedisPartitionAdapter, RedisTransport
from pgque.redis._scripts import load_scripts, partition_script

LUA = Path(__file__).resolve().parents[1] / "src" / "pgque" / "redis" / "lua"

#: The libraries a deduplicated publish runs first (lua/lib/), those of a plain publish.
PUBLISH_LIBRARIES = (
    "keys",
    "refusals",
    "clock",
    "store",
    "wakeups",
    "messages",
    "fairness",
    "groups",
    "enqueue",
)


@pytest.mark.parametrize(
    "name", ["lock", "unlock", "slots", "reset_slots", "purge", "publish_dedup"]
)
def test_partition_scripts_are_the_package_files_verbatim(name: str) -> None:
    own = (LUA / "partition" / f"{name}.lua").read_text(encoding="utf-8")
    libraries = [
        (LUA / "lib" / f"{lib}.lua").read_text(encoding="utf-8") for lib in PUBLISH_LIBRARIES
    ]
    # A deduplicated publish is the very same append as a plain one: on the queue's keys, after
    # the same libraries; the others run alone.
    wanted = "\n".join([*libraries, own]) if name == "publish_dedup" else own
    assert partition_script(name).text == wanted


def test_a_deduplicated_publish_runs_the_libraries_of_a_plain_one() -> None:
    publish = load_scripts()["publish"].text
    dedup = partition_script("publish_dedup").text
    own = (LUA / "publish.lua").read_text(encoding="utf-8")
    assert publish.endswith(own)
    assert dedup.startswith(publish[: -len(own)])


class FailingUnlock(redis.Redis):
    """A real redis-py client whose connection drops when it sends the key-unlock script
    (after the handler ran): the lock stays until its TTL."""

    unlock_sha = ""

    def execute_command(self, *args: Any, **options: Any) -> Any:
        if args[:2] == ("EVALSHA", self.unlock_sha):
            raise redis.ConnectionError("Connection reset by peer (injected into unlock)")
        return super().execute_command(*args, **options)  # type: ignore[no-untyped-call]


@pytest.fixture
def failing_unlock(
    redis_url: str, new_queue: Callable[[], str]
) -> Iterator[tuple[RedisTransport, str]]:
    """A transport on a fresh queue whose client loses every key-unlock script it sends."""
    queue = new_queue()
    client = cast(FailingUnlock, FailingUnlock.from_url(redis_url))
    client.unlock_sha = partition_script("unlock").sha
    transport = RedisTransport(client=client, queue=queue)
    try:
        yield transport, queue
    finally:
        transport.close()
        client.close()


def _take(
    adapter: RedisPartitionAdapter, key: str, ttl: float, deadline: float
) -> AbstractContextManager[Grant | None]:
    """Enter *key*'s lock, trying again until it is granted; return the entered lock."""
    while True:
        lock = adapter.key_lock(key, ttl)
        if lock.__enter__() is not None:
            return lock
        lock.__exit__(None, None, None)
        assert time.monotonic() < deadline, "the lock was never granted"
        time.sleep(0.005)


def test_a_lost_unlock_does_not_fail_a_handler_that_ran(
    failing_unlock: tuple[RedisTransport, str],
) -> None:
    """The handler finished; only the unlock's reply was lost. Failing the call would make the
    worker retry, running the finished handler again. The lock ends with its TTL instead."""
    transport, queue = failing_unlock
    adapter = RedisPartitionAdapter(transport)
    ran = []
    with adapter.key_lock(queue, 0.2) as grant:
        assert grant is not None
        ran.append(grant.epoch)
    assert len(ran) == 1
    with adapter.key_lock(queue, 30.0) as grant:
        assert grant is None  # still locked: the unlock never happened
    lock = _take(adapter, queue, 30.0, time.monotonic() + 10)  # free again once the TTL ran out
    lock.__exit__(None, None, None)
