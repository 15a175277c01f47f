"""Helpers the conformance tests share (not tests, not fixtures)."""

# The source of its blocking twin (tools/async_to_sync.py).  # async-only

from __future__ import annotations

from typing import Any

from pgque.core import (
    AsyncTransport,
    DeadLetter,
    Event,
    GroupInfo,
    Lease,
    QueueStats,
)

# -- helpers -------------------------------------------------------------------------------


def _ev(n: Any = 0, kind: str = "test") -> Event:
    return Event(kind=kind, data={"n": n})


def _n(lease: Lease | None) -> Any:
    assert lease is not None
    assert isinstance(lease.event.data, dict)
    return lease.event.data["n"]


async def _claim(transport: AsyncTransport, visibility: float = 60.0, **kw: Any) -> Lease:
    lease = await transport.claim(visibility, **kw)
    assert lease is not None, "expected a deliverable message"
    return lease


async def _info(transport: AsyncTransport, group_id: str) -> GroupInfo:
    """Return ``group(group_id)``, which must exist."""
    info = await transport.group(group_id)
    assert info is not None
    return info


async def _drain(transport: AsyncTransport) -> list[tuple[str, Any]]:
    """Claim and ack until nothing is deliverable; return (group, n) in delivery order."""
    out: list[tuple[str, Any]] = []
    for _ in range(100_000):
        lease = await transport.claim(60.0)
        if lease is None:
            return out
        assert await transport.ack(lease)
        out.append((lease.group_id, _n(lease)))
    raise AssertionError("the queue never drained")


def _comparable(stats: QueueStats) -> QueueStats:
    # The age moves with a real clock; everything else must not change on refused input.
    return stats.model_copy(update={"oldest_age_s": None})


async def _snapshot(transport: AsyncTransport) -> tuple[QueueStats, list[DeadLetter]]:
    return _comparable(await transport.stats()), await transport.dead_letters(1000)


async def _empty_stats_ok(transport: AsyncTransport) -> None:
    stats = await transport.stats()
    assert (stats.groups, stats.messages, stats.in_flight, stats.parked, stats.blocked) == (
        0,
        0,
        0,
        0,
        0,
    )
    assert stats.oldest_age_s is None
    assert stats.next_resume_at is None
