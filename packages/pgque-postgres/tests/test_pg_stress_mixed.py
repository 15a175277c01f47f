"""The mixed stress run (pgque.conformance.stress) on PostgreSQL: 8 threads mixing every
operation, transactional publishes that commit or roll back, deduplicated publishes and Tier A
key locks, about 20 s; then no deadlock, orphan, phantom group, loss, duplicate or FIFO break.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any

import psycopg
import pytest

from pgque.conformance.stress import StressHooks, run_stress
from pgque.core import Event
from pgque.partition import KeyedPublisher, Ordered
from pgque.postgres import PostgresTransport


@pytest.fixture
def queues(postgres_url: str) -> Iterator[tuple[PostgresTransport, PostgresTransport]]:
    name = f"stress_{uuid.uuid4().hex[:12]}"
    main = PostgresTransport.from_dsn(
        postgres_url, queue=name, max_attempts=5, on_exhausted="block", max_size=12
    )
    scratch = PostgresTransport.from_dsn(postgres_url, queue=f"{name}_s", max_size=4)
    yield main, scratch
    for transport in (main, scratch):
        transport.purge()
        transport.close()


def test_mixed_operations_keep_every_promise(
    postgres_url: str, queues: tuple[PostgresTransport, PostgresTransport]
) -> None:
    main, scratch = queues
    publisher = KeyedPublisher(main, tier=Ordered(), dedup_ttl=600)

    def tx_publish(items: Sequence[tuple[str, Event]], commit: bool) -> list[int] | None:
        with psycopg.connect(postgres_url) as conn:
            ids = [main.publish(g, e, connection=conn) for g, e in items]
            if commit:
                conn.commit()
                return ids
            conn.rollback()
            return None

    def dedup_send(group: str, event: Event, key: str) -> tuple[int, bool, str]:
        partition_key = group.removeprefix("k:")
        message_id, deduped = publisher.send(
            event.kind, event.data, partition_key=partition_key, dedup_key=key
        )
        return message_id, deduped, publisher.group_for(partition_key)

    def key_lock(key: str) -> AbstractContextManager[Any]:
        return publisher.backend.key_lock(key, 5.0)

    report = run_stress(
        main,
        scratch,
        hooks=StressHooks(tx_publish=tx_publish, dedup_send=dedup_send, key_lock=key_lock),
        seconds=20.0,
    )
    report.check()
    # The run did exercise the mix: a silent no-op run must not pass.
    for op in ("publish", "claim", "tx_publish", "dedup", "redrive", "unblock", "scratch"):
        assert report.ops[op] > 10, report.ops
    assert report.ops["key_lock"] > 10, report.ops
    assert len(report.committed) > 500
