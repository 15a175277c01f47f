"""Counters: ``stats()`` agrees with a full recount from the listings (``groups()`` by state,
``dead_letters()``, ``scheduled()``, ``messages()`` where browsing is declared) after a random
but seeded sequence of every operation that moves a group between states, checked again and
again along the way. However a backend keeps its counts (scans, or counters its writes keep),
they must count what the listings show."""

# The source of its blocking twin (tools/async_to_sync.py).  # async-only

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field

import pytest

from pgque.conformance._harness_async import AsyncHarness
from pgque.conformance.suite_async._helpers import _ev
from pgque.core import (
    AsyncSupportsBrowse,
    AsyncSupportsPurge,
    AsyncTransport,
    GroupInfo,
    GroupStateName,
    Lease,
)
from pgque.core.models import GROUP_STATES

#: The groups a sequence works on: few, so that operations meet on the same groups.
_GROUPS = tuple(f"c{n}" for n in range(7))
#: Steps of one sequence, and how often stats() is compared with a recount.
_STEPS = 150
_CHECK_EVERY = 6
#: Page size of every listing: small, so that paging is exercised.
_PAGE = 3


# -- the recount ---------------------------------------------------------------------------


async def _groups(t: AsyncTransport, state: GroupStateName | None = None) -> list[GroupInfo]:
    out: list[GroupInfo] = []
    after: str | None = None
    while page := await t.groups(state=state, limit=_PAGE, after=after):
        out.extend(page)
        after = page[-1].group_id
    return out


async def _dead_ids(t: AsyncTransport) -> list[int]:
    out: list[int] = []
    after: int | None = None
    while page := await t.dead_letters(_PAGE, after=after):
        out.extend(dead.id for dead in page)
        after = page[-1].id
    return out


async def _scheduled(t: AsyncTransport) -> list[tuple[int, float]]:
    """The scheduled messages not due yet: (id, due time)."""
    out: list[tuple[int, float]] = []
    after: int | None = None
    while page := await t.scheduled(limit=_PAGE, after=after):
        out.extend((msg.id, msg.due_at) for msg in page)
        after = page[-1].id
    return out


async def _depth(t: AsyncSupportsBrowse, group_id: str) -> int:
    """How many messages messages() lists for *group_id* (its head first)."""
    count = 0
    after: int | None = None
    while True:
        page = await t.messages(group_id=group_id, limit=_PAGE, after=after)
        count += len(page.items)
        if page.next_after is None:
            return count
        after = page.next_after


async def _agree(harness: AsyncHarness, t: AsyncTransport, where: str) -> None:
    """Compare stats() with a full recount from the listings; fail naming *where*."""
    stats = await t.stats()
    groups = await _groups(t)
    states = Counter(g.state for g in groups)
    for state in GROUP_STATES:
        listed = [g.group_id for g in await _groups(t, state)]
        assert listed == [g.group_id for g in groups if g.state == state], (where, state)
    if isinstance(t, AsyncSupportsBrowse) and harness.capabilities.browse:
        for g in groups:
            assert await _depth(t, g.group_id) == g.depth, (where, g.group_id)
    dead = await _dead_ids(t) if harness.capabilities.dead_letters else []
    scheduled = await _scheduled(t) if harness.capabilities.scheduling else []
    resumes = [g.resume_at for g in groups if g.state == "parked" and g.resume_at is not None]
    heads = [g.head_enqueued_at for g in groups if g.head_enqueued_at is not None]
    recount = {
        "groups": len(groups),
        "messages": sum(g.depth for g in groups),
        "in_flight": states["leased"],
        "parked": states["parked"],
        "blocked": states["blocked"],
        "paused": states["paused"],
        "dead_letters": len(dead),
        "scheduled": len(scheduled),
    }
    counted = {name: getattr(stats, name) for name in recount}
    assert counted == recount, where
    _same_time(stats.next_resume_at, min(resumes, default=None), where, "next_resume_at")
    _same_time(stats.next_due_at, min((due for _, due in scheduled), default=None), where, "due")
    oldest = min(heads, default=None)
    if oldest is None or stats.oldest_age_s is None:
        assert (stats.oldest_age_s is None) == (oldest is None), where
    elif harness.fake_time:
        assert stats.oldest_age_s == pytest.approx(harness.now() - oldest, abs=1e-3), where
    # Nothing changed meanwhile: a second snapshot is the first (its age aside).
    again = await t.stats()
    if not harness.fake_time:
        stats = stats.model_copy(update={"oldest_age_s": None})
        again = again.model_copy(update={"oldest_age_s": None})
    assert again == stats, where


def _same_time(got: float | None, want: float | None, where: str, name: str) -> None:
    if want is None:
        assert got is None, (where, name)
    else:
        assert got == pytest.approx(want, abs=1e-3), (where, name)


# -- the sequence --------------------------------------------------------------------------


@dataclass
class _Run:
    """One seeded sequence: its transport, random source, time unit and leases out."""

    harness: AsyncHarness
    t: AsyncTransport
    rng: random.Random
    leases: list[Lease] = field(default_factory=list)
    purged: bool = False
    n: int = 0

    @property
    def u(self) -> float:
        return self.harness.unit

    def time(self, short: float) -> float:
        """*short* units with an injected clock (time moves by hand); else an hour, so that
        nothing expires while a real clock runs the sequence."""
        return short * self.u if self.harness.fake_time else 3600.0

    def group(self) -> str:
        return self.rng.choice(_GROUPS)

    def take_lease(self) -> Lease | None:
        if not self.leases:
            return None
        return self.leases.pop(self.rng.randrange(len(self.leases)))

    def ops(self) -> list[str]:
        caps = self.harness.capabilities
        names = ["publish"] * 5 + ["claim"] * 4 + ["ack"] * 2 + ["nack"] * 2
        names += ["release", "extend", "pause", "resume", "retry_now"]
        if caps.dead_letters:
            names += ["dead_letter", "redrive", "unblock", "delete_dead"]
        if caps.scheduling:
            names += ["schedule", "schedule", "cancel"]
        if caps.injected_clock:
            names += ["advance", "advance"]
        if caps.purge and isinstance(self.t, AsyncSupportsPurge):
            names += ["purge"]
        return names

    async def step(self, op: str) -> None:
        t, rng, caps = self.t, self.rng, self.harness.capabilities
        self.n += 1
        if op == "publish":
            prio = rng.randrange(3) if caps.priorities else 0
            await t.publish(self.group(), _ev(self.n), priority=prio)
        elif op == "schedule":
            await t.publish(self.group(), _ev(self.n), delay=self.time(rng.choice((1, 3))))
        elif op == "claim":
            got = await t.claim_many(rng.randrange(1, 4), self.time(rng.choice((1, 4))))
            self.leases.extend(got)
        elif op in ("ack", "nack", "release", "dead_letter", "extend"):
            lease = self.take_lease()
            if lease is None:
                return
            if op == "ack":
                await t.ack(lease)
            elif op == "nack":
                await t.nack(lease, delay=rng.choice((0.0, self.time(2))))
            elif op == "release":
                await t.release(lease)
            elif op == "dead_letter":
                await t.dead_letter(lease, "counted")
            else:
                renewed = await t.extend(lease, self.time(rng.choice((1, 3))))
                if renewed is not None:
                    self.leases.append(renewed)
        elif op == "pause":
            await t.pause(self.group())
        elif op == "resume":
            await t.resume(self.group())
        elif op == "retry_now":
            await t.retry_now(self.group())
        elif op == "unblock":
            await t.unblock(self.group(), drop_head=rng.random() < 0.3)
        elif op in ("redrive", "delete_dead"):
            ids = await _dead_ids(t)
            some = rng.sample(ids, k=min(len(ids), rng.randrange(1, 3)))
            if op == "delete_dead":
                await t.delete_dead_letters(some)
            else:
                await t.redrive(some, in_place=rng.random() < 0.7, retry_now=rng.random() < 0.3)
        elif op == "cancel":
            scheduled = await _scheduled(t)
            if scheduled:
                await t.cancel(rng.choice(scheduled)[0])
        elif op == "advance":
            await self.harness.advance(rng.choice((0.5, 1.0, 2.5)) * self.u)
        elif op == "purge" and not self.purged and rng.random() < 0.3:
            # At most once a sequence: it empties everything the sequence built.
            assert isinstance(t, AsyncSupportsPurge)
            await t.purge()
            self.leases.clear()
            self.purged = True


@pytest.mark.parametrize("seed", [3, 17, 2024])
async def test_stats_agree_with_a_full_recount_after_random_operations(
    harness: AsyncHarness, seed: int
) -> None:
    await harness.open()
    caps = harness.capabilities
    options = {"max_attempts": 3, "on_exhausted": "block"} if caps.dead_letters else {}
    run = _Run(harness, await harness.make(**options), random.Random(seed))
    ops = run.ops()
    for i in range(_STEPS):
        op = run.rng.choice(ops)
        await run.step(op)
        if i % _CHECK_EVERY == _CHECK_EVERY - 1:
            await _agree(harness, run.t, f"seed {seed}, after step {i} ({op})")
    await _agree(harness, run.t, f"seed {seed}, at the end")


__all__ = [name for name in dict(globals()) if name.startswith("test_")]
