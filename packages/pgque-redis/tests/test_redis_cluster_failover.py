"""A Redis Cluster primary killed (SIGKILL) while a Worker drains its queue: its replica takes
over, nothing is lost and nothing is acked twice, because every write waited for a replica
(``wait_replicas``, 1 by default on a cluster URL).

Each test starts a cluster of its own: it kills nodes.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from pgque.conformance.servers.redis_cluster import RedisClusterServer
from pgque.core import ConnectionLost, Event, Worker
from pgque.core.models import Lease, Settlement, SettleResult
from pgque.redis import RedisTransport

pytestmark = pytest.mark.timeout(120)


class _Recording(RedisTransport):
    """A transport that records the leases whose ack returned True (``acked``), and those of
    acks that raised ConnectionLost with ``maybe_applied`` (``maybe``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.acked: list[tuple[str, int]] = []
        self.maybe: set[tuple[str, int]] = set()
        self._lock = threading.Lock()

    def _record(self, leases: Sequence[Lease], results: Sequence[bool] | None) -> None:
        with self._lock:
            if results is None:
                self.maybe |= {(x.group_id, x.message_id) for x in leases}
                return
            self.acked += [
                (x.group_id, x.message_id) for x, ok in zip(leases, results, strict=True) if ok
            ]

    def ack_many(self, leases: Sequence[Lease]) -> list[bool]:
        try:
            results = super().ack_many(leases)
        except ConnectionLost as exc:
            if exc.maybe_applied:
                self._record(leases, None)
            raise
        self._record(leases, results)
        return results

    def settle_and_claim(
        self, settlements: Sequence[Settlement], n: int, visibility: float = 30.0, **kw: Any
    ) -> SettleResult:
        acks = [s.lease for s in settlements if s.outcome == "ack"]
        try:
            result = super().settle_and_claim(settlements, n, visibility, **kw)
        except ConnectionLost as exc:
            if exc.maybe_applied:
                self._record(acks, None)
            raise
        oks = [ok for s, ok in zip(settlements, result.settled, strict=True) if s.outcome == "ack"]
        self._record(acks, oks)
        return result


@pytest.fixture
def cluster() -> Iterator[RedisClusterServer]:
    with RedisClusterServer() as started:
        yield started


def test_a_primary_killed_during_a_drain_loses_nothing_and_acks_nothing_twice(
    cluster: RedisClusterServer,
) -> None:
    queue = f"f_{uuid.uuid4().hex[:16]}"
    # Retries long enough to outlast the failover (node timeout 1 s, then the election).
    url = f"{cluster.url}?queue={queue}&retries=20&retry_backoff=0.1"
    published: dict[str, list[int]] = {}
    with RedisTransport(url) as producer:
        for i in range(300):
            group = f"g{i % 20}"
            published.setdefault(group, []).append(producer.publish(group, Event(kind="k")))
        client: Any = producer.client
        primary = cluster.primary_of(int(client.keyslot(producer.key_prefix)))
    consumer = _Recording(url)
    handled = threading.Event()
    count = [0]

    def handler(_event: Event) -> None:
        time.sleep(0.005)
        count[0] += 1
        if count[0] == 100:
            handled.set()

    worker = Worker(consumer, handler, concurrency=4, visibility=3.0, shutdown_grace=1.0)
    runner = threading.Thread(target=worker.run, kwargs={"install_signal_handlers": False})
    runner.start()
    try:
        assert handled.wait(60), "the worker did not get going"
        cluster.kill(primary)  # mid-drain: a third of the messages handled
        cluster.wait_failover(primary, timeout=60)
        # Its replica took over alone: a write it cannot copy anywhere is not confirmed (a
        # ConnectionLost with maybe_applied) until the killed node is back, as its replica.
        cluster.restart(primary)
        deadline = time.monotonic() + 60
        total = sum(len(ids) for ids in published.values())
        while len(set(consumer.acked) | consumer.maybe) < total and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        worker.stop()
        runner.join(30)
    assert len(consumer.acked) == len(set(consumer.acked))  # nothing acked twice
    everything = {(group, i) for group, ids in published.items() for i in ids}
    assert everything == set(consumer.acked) | consumer.maybe  # nothing lost
    acked: dict[str, list[int]] = {}
    for group, message_id in consumer.acked:
        acked.setdefault(group, []).append(message_id)
    assert all(ids == sorted(ids) for ids in acked.values())  # each group in order
    with RedisTransport(url) as check:
        stats = check.stats()
        assert (stats.messages, stats.dead_letters) == (0, 0)
        check.purge()
    consumer.close()


def test_a_write_no_replica_confirms_says_it_may_be_lost(cluster: RedisClusterServer) -> None:
    queue = f"f_{uuid.uuid4().hex[:16]}"
    url = f"{cluster.url}?queue={queue}&wait_timeout=1"
    with RedisTransport(url) as transport:
        transport.publish("g", Event(kind="k"))  # one replica confirms
        client: Any = transport.client
        primary = cluster.primary_of(int(client.keyslot(transport.key_prefix)))
        (replica,) = cluster.replicas_of()[primary]
        cluster.kill(replica)
        start = time.monotonic()
        with pytest.raises(ConnectionLost, match="replica") as caught:
            transport.publish("g", Event(kind="k"))
        assert caught.value.maybe_applied
        assert time.monotonic() - start < 5.0
        assert transport.stats().messages == 2  # applied on the primary, not confirmed
    with RedisTransport(f"{url}&wait_replicas=0") as relaxed:
        assert relaxed.publish("g", Event(kind="k")) == 3  # no wait asked: no error
        relaxed.purge()
