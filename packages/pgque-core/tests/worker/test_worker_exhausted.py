"""A message whose last attempt fails is counted by how it ends (issue 29, B).

With ``on_exhausted="dead_letter"`` the transport dead-letters it at the next claim: the
worker's report counts it ``dead_lettered``, not ``retried``; with ``"block"`` it stays at
its group's head, to be delivered again once unblocked: ``retried``. The same on memory, the
test PostgreSQL and the test Redis, with both runners; the report always adds up.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from _worker_helpers import KINDS, adds_up

from pgque.core import (
    AsyncWorker,
    Event,
    RetryPolicy,
    Worker,
    WorkerReport,
    connect,
    connect_async,
)

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(params=["memory", "postgres", "redis"])
def url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A URL of a fresh queue on each backend (a named memory store stands in for a server)."""
    queue = f"exhausted_{uuid.uuid4().hex[:10]}"
    if request.param == "memory":
        yield f"memory://{queue}?queue={queue}"
        return
    base = str(request.getfixturevalue(f"{request.param}_url"))
    sep = "&" if "?" in base else "?"
    yield f"{base}{sep}queue={queue}"
    with connect(f"{base}{sep}queue={queue}") as transport:
        transport.purge()  # type: ignore[attr-defined]


def fails_first(event: Event) -> None:
    if event.data == 0:
        raise RuntimeError("always")


async def fails_first_async(event: Event) -> None:
    fails_first(event)


def _drain(kind: str, url: str, options: dict[str, Any], **worker: Any) -> WorkerReport:
    retry = RetryPolicy(base=0.0, jitter=0.0)
    if kind == "sync":
        with connect(url, **options) as transport:
            return Worker(
                transport, fails_first, retry=retry, idle_backoff=(0.01, 0.05), **worker
            ).run(stop_when_idle=True)

    async def main() -> WorkerReport:
        async with connect_async(url, **options) as transport:
            runner = AsyncWorker(
                transport, fails_first_async, retry=retry, idle_backoff=(0.01, 0.05), **worker
            )
            return await runner.run(stop_when_idle=True)

    return asyncio.run(main())


def _publish(url: str, options: dict[str, Any]) -> Any:
    transport = connect(url, **options)
    transport.publish_many([("g", Event(kind="k", data=n)) for n in range(2)])
    return transport


@pytest.mark.parametrize("kind", KINDS)
def test_the_last_failed_attempt_counts_as_dead_lettered(kind: str, url: str) -> None:
    options = {"max_attempts": 2, "on_exhausted": "dead_letter"}
    with _publish(url, options) as transport:
        report = _drain(kind, url, options)
        (letter,) = transport.dead_letters()
        assert letter.reason == "max_attempts (2) exhausted"
        assert transport.stats().messages == 0
    assert (report.claimed, report.acked, report.retried, report.dead_lettered) == (3, 1, 1, 1)
    assert report.as_dict()["dead_lettered"] == 1
    assert adds_up(report)


@pytest.mark.parametrize("kind", KINDS)
def test_the_last_timed_out_attempt_counts_as_dead_lettered(kind: str, url: str) -> None:
    options = {"max_attempts": 1, "on_exhausted": "dead_letter"}

    with connect(url, **options) as transport:
        transport.publish("slow", Event(kind="k", data="slow"))
        if kind == "sync":
            report = Worker(
                transport, lambda _e: time.sleep(1.0), hard_timeout=0.2, idle_backoff=(0.01, 0.05)
            ).run(stop_when_idle=True)
        else:

            async def slow(_event: Event) -> None:
                await asyncio.sleep(1.0)

            async def main() -> WorkerReport:
                async with connect_async(url, **options) as atransport:
                    runner = AsyncWorker(
                        atransport, slow, hard_timeout=0.2, idle_backoff=(0.01, 0.05)
                    )
                    return await runner.run(stop_when_idle=True)

            report = asyncio.run(main())
        assert len(transport.dead_letters()) == 1
    assert (report.claimed, report.timed_out, report.dead_lettered) == (1, 1, 1)
    assert adds_up(report)


@pytest.mark.parametrize("kind", KINDS)
def test_block_counts_the_last_failed_attempt_as_retried(kind: str, url: str) -> None:
    options = {"max_attempts": 2, "on_exhausted": "block"}
    with _publish(url, options) as transport:
        report = _drain(kind, url, options)
        assert transport.stats().blocked == 1
        assert transport.dead_letters() == []
    assert (report.claimed, report.acked, report.retried, report.dead_lettered) == (2, 0, 2, 0)
    assert adds_up(report)
