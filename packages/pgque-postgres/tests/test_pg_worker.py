"""The worker on PostgreSQL: its connections are terminated mid-run (pg_terminate_backend),
and every message is still processed, in order per group, each ack taking effect once."""

from __future__ import annotations

import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from pgque.core import Event, Lease, Settlement, SettleResult, Worker
from pgque.postgres import PostgresTransport

pytestmark = pytest.mark.timeout(60)


class _AckRecorder:
    """Wrap a transport and remember every ack that took effect."""

    def __init__(self, inner: PostgresTransport) -> None:
        self.inner = inner
        self.lock = threading.Lock()
        self.acked: list[int] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def ack(self, lease: Lease) -> bool:
        done = self.inner.ack(lease)
        if done:
            with self.lock:
                self.acked.append(lease.message_id)
        return done

    def settle_and_claim(
        self, settlements: Sequence[Settlement], n: int, *args: Any, **kwargs: Any
    ) -> SettleResult:
        """The worker's fused call: the acks in it that took effect are remembered too."""
        result = self.inner.settle_and_claim(settlements, n, *args, **kwargs)
        with self.lock:
            self.acked.extend(
                item.lease.message_id
                for item, done in zip(settlements, result.settled, strict=True)
                if done and item.outcome == "ack"
            )
        return result


class _Killer:
    """Terminate the backends of one application name every *every* seconds, *rounds* times."""

    def __init__(self, url: str, application: str, every: float, rounds: int) -> None:
        self.url, self.application, self.every, self.rounds = url, application, every, rounds
        self.killed = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with psycopg.connect(self.url, autocommit=True) as conn:
            for _ in range(self.rounds):
                if self.stop.wait(self.every):
                    return
                rows = conn.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE application_name = %s AND pid <> pg_backend_pid()",
                    [self.application],
                ).fetchall()
                self.killed += sum(1 for (ok,) in rows if ok)


@pytest.fixture
def worker_queue(postgres_url: str, janitor: Callable[[str], None]) -> Iterator[tuple[str, str]]:
    """Return (dsn with a unique application name, fresh queue name); purge it afterwards."""
    application = f"pgque_w_{uuid.uuid4().hex[:12]}"
    queue = f"t_{uuid.uuid4().hex[:24]}"
    yield make_conninfo(postgres_url, application_name=application), queue
    janitor(queue)


def test_worker_survives_terminated_backends(
    postgres_url: str, worker_queue: tuple[str, str]
) -> None:
    dsn, queue = worker_queue
    application = psycopg.conninfo.conninfo_to_dict(dsn)["application_name"]
    groups, per_group = 12, 8
    with PostgresTransport.from_dsn(postgres_url, queue=queue, max_size=1) as publisher:
        publisher.publish_many(
            [
                (f"g{g:02d}", Event(kind="k", data={"i": i}))
                for i in range(per_group)
                for g in range(groups)
            ]
        )
    transport = PostgresTransport.from_dsn(dsn, queue=queue, min_size=1, max_size=4, timeout=10)
    recorder = _AckRecorder(transport)
    lock = threading.Lock()
    handled: dict[str, list[int]] = defaultdict(list)

    def handler(event: Event, lease: Lease) -> None:
        time.sleep(0.02)
        with lock:
            handled[lease.group_id].append(event.data["i"])  # type: ignore[arg-type, call-overload, index]

    killer = _Killer(postgres_url, str(application), every=0.1, rounds=10)
    worker = Worker(
        recorder,
        handler,
        concurrency=3,
        visibility=1.0,
        idle_backoff=(0.01, 0.1),
        reconnect_backoff=(0.02, 0.2),
    )
    killer.thread.start()
    try:
        report = worker.run(stop_when_idle=True, install_signal_handlers=False)
    finally:
        killer.stop.set()
        killer.thread.join(5)
        transport.close()
    print(f"killed {killer.killed} backends; {report}")
    assert killer.killed > 0
    assert report.errors > 0  # the terminations were felt ...
    total = groups * per_group
    # ... and yet nothing was lost, and no ack took effect twice
    assert sorted(recorder.acked) == sorted(set(recorder.acked))
    assert len(recorder.acked) == total
    for seq in handled.values():
        assert sorted(set(seq)) == list(range(per_group))
        firsts = list(dict.fromkeys(seq))
        assert firsts == sorted(firsts)  # redelivery repeats, never skips ahead
    with PostgresTransport.from_dsn(postgres_url, queue=queue, max_size=1) as check:
        stats = check.stats()
    assert (stats.messages, stats.groups) == (0, 0)
