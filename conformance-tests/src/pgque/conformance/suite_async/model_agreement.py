"""The model comparison: random programs on the transport and on QueueModel agree."""

# The source of its blocking twin (tools/async_to_sync.py).  # async-only

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, given, settings

from pgque.conformance._harness_async import AsyncHarness
from pgque.conformance._program import (
    GROUPS,
    SCHEDULING_OPS,
    Op,
    Policy,
    dead_view,
    event_for,
    group_view,
    lease_view,
    policies,
    programs,
    scheduled_view,
    stats_view,
)
from pgque.conformance.clock import FakeClock
from pgque.core import (
    AsyncTransport,
    DeadLetter,
    Event,
    Lease,
    QueueModel,
    Settlement,
)
from pgque.core.validation import check_error, check_settlements

#: Examples of the model-agreement property test (raise it for a soak run).
EXAMPLES_ENV = "PGQUE_CONFORMANCE_EXAMPLES"


# -- the model agrees ----------------------------------------------------------------------


def _settlement(lease: Lease, outcome: str, delay: float, error: Any) -> Settlement:
    """Return the settlement a program step names (a reason only for a dead letter)."""
    if outcome == "ack":
        return Settlement.ack(lease)
    if outcome == "nack":
        return Settlement.nack(lease, delay=delay, error=error)
    if outcome == "release":
        return Settlement.release(lease)
    return Settlement.dead_letter(lease, "program", error=error)


def _ids_at(dead: list[DeadLetter], indices: tuple[int, ...]) -> list[int]:
    """Return the ids of the dead letters at *indices*; -1 (never an id) for a missing one."""
    return [dead[i].id if 0 <= i < len(dead) else -1 for i in indices]


async def _run_program(
    transport: AsyncTransport,
    clock: FakeClock,
    policy: Policy,
    program: list[Op],
    groups: tuple[str, ...] = GROUPS,
    events: Callable[[int, int], Event] = event_for,
) -> None:
    """Run *program* on *transport* and on a fresh QueueModel; fail at the first difference.

    *groups* are the group ids the program's group indices name and *events* makes the event
    of step and index: the fuzz tests pass hostile ones (``pgque.conformance.fuzz``).
    """
    model = QueueModel(
        queue=transport.queue,
        origin="model",
        max_attempts=policy.max_attempts,
        on_exhausted=policy.on_exhausted,
    )
    leases: list[tuple[Lease, Lease]] = []
    last_ids: list[int] = []
    #: (transport's id, model's id) of every scheduled message, newest last.
    scheduled_ids: list[tuple[int, int]] = []
    scheduling = transport.capabilities.scheduling

    def pick(ref: int) -> tuple[Lease, Lease] | None:
        return leases[-1 - ref % len(leases)] if leases else None

    def keep(got: list[Lease], want: list[Lease]) -> None:
        assert [lease_view(x) for x in got] == [lease_view(x) for x in want]
        leases.extend(zip(got, want, strict=True))

    def after_of(spec: tuple[int, bool] | None) -> str | None:
        if spec is None:
            return None
        index, past = spec
        return groups[index] + "\x01" if past else groups[index]

    for step, op in enumerate(program):
        now = clock()
        where = f"step {step}: {op}"
        if op.name in SCHEDULING_OPS and not scheduling:
            continue
        if op.name == "publish":
            group, priority = op.args
            event = events(step, 0)
            message_id = await transport.publish(groups[group], event, priority=priority)
            model.publish(groups[group], event.to_json(), priority, now)
            last_ids.append(message_id)
        elif op.name == "publish_many":
            refs, priority = op.args
            items = [(groups[g], events(step, i)) for i, g in enumerate(refs)]
            ids = await transport.publish_many(items, priority=priority)
            for g, event in items:
                model.publish(g, event.to_json(), priority, now)
            assert ids == sorted(ids), where
            last_ids.extend(ids)
        elif op.name in {"schedule", "schedule_many"}:
            if op.name == "schedule":
                group, priority, delay = op.args
                items = [(groups[group], events(step, 0))]
                ids = [await transport.publish(*items[0], priority=priority, delay=delay)]
            else:
                refs, priority, delay = op.args
                items = [(groups[g], events(step, i)) for i, g in enumerate(refs)]
                ids = await transport.publish_many(items, priority=priority, delay=delay)
            for (g, event), got_id in zip(items, ids, strict=True):
                text = event.to_json()
                if delay > 0:
                    want_id = model.schedule(g, text, priority, now, now + delay)
                    scheduled_ids.append((got_id, want_id))
                else:
                    model.publish(g, text, priority, now)
            last_ids.extend(ids)
        elif op.name == "cancel":
            if not scheduled_ids:
                continue
            got_id, want_id = scheduled_ids[-1 - op.args[0] % len(scheduled_ids)]
            assert await transport.cancel(got_id) == model.cancel(want_id, now), where
        elif op.name == "scheduled":
            (limit,) = op.args
            got_listed = await transport.scheduled(limit=limit)
            want_listed = model.scheduled_page(now, limit, None)
            assert [scheduled_view(m) for m in got_listed] == [
                scheduled_view(m) for m in want_listed
            ], where
        elif op.name == "claim":
            visibility, min_priority, holder = op.args
            got = await transport.claim(visibility, min_priority=min_priority, holder=holder)
            want = model.claim(now, visibility, min_priority, holder=holder)
            assert lease_view(got) == lease_view(want), where
            if got is not None and want is not None:
                leases.append((got, want))
        elif op.name == "claim_many":
            n, visibility, min_priority, holder = op.args
            got_many = await transport.claim_many(
                n, visibility, min_priority=min_priority, holder=holder
            )
            keep(got_many, model.claim_many(n, now, visibility, min_priority, holder=holder))
        elif op.name == "settle_and_claim":
            specs, n, visibility, min_priority, holder = op.args
            picked = [(pick(ref), outcome, delay, error) for ref, outcome, delay, error in specs]
            chosen = [(pair, o, d, e) for pair, o, d, e in picked if pair is not None]
            fused = await transport.settle_and_claim(
                [_settlement(held, o, d, e) for (held, _), o, d, e in chosen],
                n,
                visibility,
                min_priority=min_priority,
                holder=holder,
            )
            checked = check_settlements(
                [_settlement(shadow, o, d, e) for (_, shadow), o, d, e in chosen],
                model.queue,
                model.origin,
                now,
            )
            shadowed = model.settle_and_claim(
                checked, n, now, visibility, min_priority, holder=holder
            )
            assert fused.settled == shadowed.settled, where
            keep(fused.leases, shadowed.leases)
        elif op.name in {"ack", "nack", "extend", "dead_letter", "release"}:
            pair = pick(op.args[0])
            if pair is None:
                continue
            held, shadow = pair
            if op.name == "ack":
                assert await transport.ack(held) == model.ack(shadow, now), where
            elif op.name == "nack":
                delay, error = op.args[1], op.args[2]
                assert await transport.nack(held, delay=delay, error=error) == model.nack(
                    shadow, now, delay, check_error(error, now)
                ), where
            elif op.name == "extend":
                visibility = op.args[1]
                renewed = await transport.extend(held, visibility)
                expected = model.extend(shadow, now, visibility)
                assert lease_view(renewed) == lease_view(expected), where
                if renewed is not None and expected is not None:
                    leases.append((renewed, expected))
            elif op.name == "release":
                assert await transport.release(held) == model.release(shadow, now), where
            else:
                error = op.args[1]
                assert await transport.dead_letter(held, "program", error=error) == (
                    model.dead_letter(shadow, now, "program", check_error(error, now))
                ), where
        elif op.name == "ack_many":
            pairs = [p for p in (pick(ref) for ref in op.args[0]) if p is not None]
            results = await transport.ack_many([held for held, _ in pairs])
            assert results == [model.ack(shadow, now) for _, shadow in pairs], where
        elif op.name == "redrive":
            indices, in_place = op.args
            if indices is None:
                assert await transport.redrive(None, in_place=in_place) == model.redrive(
                    None, now, in_place
                ), where
            else:
                got_ids = _ids_at(await transport.dead_letters(1000), indices)
                want_ids = _ids_at(model.dead_letters(1000), indices)
                assert await transport.redrive(got_ids, in_place=in_place) == model.redrive(
                    want_ids, now, in_place
                ), where
        elif op.name == "delete_dead_letters":
            (indices,) = op.args
            got_ids = _ids_at(await transport.dead_letters(1000), indices)
            want_ids = _ids_at(model.dead_letters(1000), indices)
            assert await transport.delete_dead_letters(got_ids) == model.delete_dead_letters(
                want_ids
            ), where
        elif op.name == "unblock":
            group, drop_head = op.args
            assert await transport.unblock(groups[group], drop_head=drop_head) == model.unblock(
                groups[group], now, drop_head
            ), where
        elif op.name == "pause":
            (group,) = op.args
            assert await transport.pause(groups[group]) == model.pause(groups[group], now), where
        elif op.name == "resume":
            (group,) = op.args
            assert await transport.resume(groups[group]) == model.resume(groups[group], now), where
        elif op.name == "group":
            (group,) = op.args
            assert group_view(await transport.group(groups[group])) == group_view(
                model.group(groups[group], now)
            ), where
        elif op.name == "groups":
            state, limit, after_spec = op.args
            after = after_of(after_spec)
            got_page = await transport.groups(state=state, limit=limit, after=after)
            want_page = model.groups_page(now, state, limit, after)
            assert [group_view(g) for g in got_page] == [group_view(g) for g in want_page], where
        elif op.name == "oldest_groups":
            state, limit = op.args
            got_oldest = await transport.oldest_groups(state=state, limit=limit)
            want_oldest = model.oldest_groups(now, state, limit)
            assert [group_view(g) for g in got_oldest] == [group_view(g) for g in want_oldest], (
                where
            )
        elif op.name == "advance":
            clock.advance(op.args[0])
        elif op.name == "stats":
            assert stats_view(await transport.stats()) == stats_view(model.stats(now)), where
        elif op.name == "dead_letters":
            (k,) = op.args
            got_dead = await transport.dead_letters(1000)
            want_dead = model.dead_letters(1000)
            if k is not None:
                got_dead = await transport.dead_letters(1000, after=_ids_at(got_dead, (k,))[0])
                want_dead = model.dead_letters(1000, _ids_at(want_dead, (k,))[0])
            assert [dead_view(d) for d in got_dead] == [dead_view(d) for d in want_dead], where
        else:  # pragma: no cover - the strategy makes no other names
            raise AssertionError(f"unknown op {op}")
    assert last_ids == sorted(last_ids)
    now = clock()
    assert stats_view(await transport.stats()) == stats_view(model.stats(now))
    assert [dead_view(d) for d in await transport.dead_letters(1000)] == [
        dead_view(d) for d in model.dead_letters(1000)
    ]
    assert [group_view(g) for g in await transport.groups(limit=1000)] == [
        group_view(g) for g in model.groups_page(now, None, 1000, None)
    ]
    # Finally drain both far in the future: the same messages come out in the same order.
    clock.advance(1000.0)
    now = clock()
    for group_id in groups:
        assert await transport.resume(group_id) == model.resume(group_id, now)
        assert await transport.unblock(group_id) == model.unblock(group_id, now, False)
    while True:
        got_lease = await transport.claim(5.0)
        want_lease = model.claim(now, 5.0, 0)
        assert lease_view(got_lease) == lease_view(want_lease)
        if got_lease is None or want_lease is None:
            break
        assert await transport.ack(got_lease)
        assert model.ack(want_lease, now)
    # What is left (heads a redrive put behind exhausted ones may block again) agrees too.
    assert [group_view(g) for g in await transport.groups(limit=1000)] == [
        group_view(g) for g in model.groups_page(now, None, 1000, None)
    ]


@settings(
    max_examples=int(os.environ.get(EXAMPLES_ENV, "20")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(policy=policies(), program=programs())
async def test_transport_agrees_with_reference_model(
    atransport: AsyncTransport, harness: AsyncHarness, policy: Policy, program: list[Op]
) -> None:
    # The model is one queue: its claim order is round-robin over all groups, its ids global.
    for flag in ("injected_clock", "priorities", "dead_letters", "global_fairness"):
        harness.require(flag)
    clock = FakeClock()
    transport = await harness.make(
        clock=clock, max_attempts=policy.max_attempts, on_exhausted=policy.on_exhausted
    )
    # Closed after each example, not only when the test ends: Hypothesis runs every example
    # (and, when one fails, hundreds while it shrinks) within this one test, and each transport
    # holds server connections.
    try:
        await _run_program(transport, clock, policy, program)
    finally:
        await transport.close()


__all__ = [name for name in dict(globals()) if name.startswith("test_")]
