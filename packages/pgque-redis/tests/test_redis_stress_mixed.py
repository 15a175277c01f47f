"""The mixed stress run (pgque.conformance.stress) on Redis: 8 threads mixing every operation,
deduplicated publishes and Tier A key locks, about 20 s; then no orphan, phantom group, loss,
duplicate or FIFO break."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import Any

import pytest

from pgque.conformance.stress import StressHooks, run_stress
from pgque.core import Event
from pgque.partition import KeyedPublisher, Ordered
from pgque.redis import RedisTransport


@pytest.fixture
def queues(redis_url: str) -> Iterator[tuple[RedisTransport, RedisTransport]]:
    name = f"stress_{uuid.uuid4().hex[:12]}"
    main = RedisTransport(redis_url, queue=name, max_attempts=5, on_exhausted="block")
    scratch = RedisTransport(redis_url, queue=f"{name}_s")
    yield main, scratch
    for transport in (main, scratch):
        transport.purge()
        transport.close()


def test_mixed_operations_keep_every_promise(
    queues: tuple[RedisTransport, RedisTransport],
) -> None:
    main, scratch = queues
    publisher = KeyedPublisher(main, tier=Ordered(), dedup_ttl=600)

    def dedup_send(group: str, event: Event, key: str) -> tuple[int, bool, str]:
        partition_key = group.removeprefix("k:")
        message_id, deduped = publisher.send(
            event.kind, event.data, partition_key=partition_key, dedup_key=key
        )
        return message_id, deduped, publisher.group_for(partition_key)

    def key_lock(key: str) -> AbstractContextManager[Any]:
        return publisher.backend.key_lock(key, 5.0)

    report = run_stress(
        main, scratch, hooks=StressHooks(dedup_send=dedup_send, key_lock=key_lock), seconds=20.0
    )
    report.check()
    for op in ("publish", "claim", "dedup", "redrive", "unblock", "scratch", "key_lock"):
        assert report.ops[op] > 10, report.ops
    assert len(report.committed) > 500
