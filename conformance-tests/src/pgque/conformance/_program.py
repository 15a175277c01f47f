"""Random operation programs for the model-agreement property test (shared by both flavours).

A program is a list of :class:`Op`. Leases are referred to by their distance from the newest
lease obtained so far (modulo their number), so a program can replay stale leases and test
fencing.
The suite runs the same program against a transport and :class:`pgque.core.QueueModel` and
compares what is observable: group ids, event ids, attempts, priorities, expiry times, results,
stats, dead letters with their errors and every field of ``group()`` / ``groups()``, but
neither tokens nor message ids (stores may number them differently; the order of ids within a
queue is what in-place redrive keeps, and that is compared through what is delivered).

Operation shapes (``Op.args``): ``publish (group, priority)``, ``publish_many (groups,
priority)``, ``claim (visibility, min_priority, holder)``, ``claim_many (n, visibility,
min_priority, holder)``, ``ack (ref)``, ``ack_many (refs)``, ``nack (ref, delay, error)``,
``extend (ref, visibility)``, ``release (ref)``, ``dead_letter (ref, error)``, ``redrive
(indices or None, in_place)``, ``delete_dead_letters (indices)``, ``unblock (group,
drop_head)``, ``pause (group)``, ``resume (group)``, ``group (group)``, ``oldest_groups
(state, limit)``, ``groups (state, limit, after)``, ``advance (seconds)``, ``stats ()``,
``dead_letters (after index or None)``. A *group* is an index into the program's group ids;
an ``after`` of ``groups`` is None or ``(index, past)``: that group id, or just past it when
*past*. With ``scheduling``: ``schedule (group, priority, delay)`` and ``schedule_many
(groups, priority, delay)`` (a
publish with a delay, 0 included), ``cancel (ref)`` (*ref* counts back from the newest
scheduled id, as lease references do), ``scheduled (limit)``. ``settle_and_claim
(settlements, n, visibility, min_priority, holder)`` settles each ``(ref, outcome, delay,
error)`` (*outcome* one of :data:`OUTCOMES`; *delay* applies to a nack, *error* to a nack or a
dead letter) and claims up to *n* (0 included).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from pgque.core import (
    DeadLetter,
    ErrorInfo,
    Event,
    GroupInfo,
    Lease,
    QueueStats,
    ScheduledMessage,
)
from pgque.core.transport_options import OnExhausted

__all__ = [
    "GROUPS",
    "Op",
    "Policy",
    "programs",
    "policies",
    "lease_view",
    "dead_view",
    "stats_view",
    "group_view",
    "scheduled_view",
    "SCHEDULING_OPS",
    "error_view",
    "event_for",
    "ERRORS",
    "HOLDERS",
    "raised",
    "OUTCOMES",
    "settlement_specs",
]

#: Few groups, so programs collide on groups and exercise fencing and round-robin ties.
GROUPS = ("a", "b", "c", "d")


@dataclass(frozen=True)
class Op:
    """One step of a program: ``name`` and its arguments."""

    name: str
    args: tuple[Any, ...] = ()


@dataclass(frozen=True)
class Policy:
    """The transport options a program runs under."""

    max_attempts: int | None
    on_exhausted: OnExhausted


def raised(exc: BaseException) -> BaseException:
    """Return *exc* after raising and catching it, so it carries a traceback."""
    try:
        raise exc
    except BaseException as caught:
        return caught


#: What a nack or dead_letter of a program records: nothing, text, an exception, a record.
ERRORS: tuple[Any, ...] = (
    None,
    "timeout",
    "bad sku",
    raised(ValueError("boom")),
    ErrorInfo(type="myapp.Declined", message="card", traceback="tb", at=5.0),
)
#: The outcomes a ``settle_and_claim`` step draws from (``Settlement``'s).
OUTCOMES: tuple[str, ...] = ("ack", "nack", "release", "dead_letter")

#: The holders claims of a program name.
HOLDERS: tuple[str | None, ...] = (None, "host:1:0", "host:2:1")

_group = st.integers(0, len(GROUPS) - 1)
_priority = st.integers(0, 4)
_seconds = st.sampled_from([0.0, 1.0, 5.0, 10.0])
_visibility = st.sampled_from([1.0, 5.0, 10.0])
#: Counted from the newest lease back, so most references hit a lease that is still held.
_lease_ref = st.integers(0, 3) | st.integers(0, 1_000)
_error = st.sampled_from(ERRORS)
_holder = st.sampled_from(HOLDERS)
_state = st.sampled_from([None, None, "ready", "leased", "parked", "blocked", "paused"])
_after = st.none() | st.tuples(_group, st.booleans())

_publish = st.builds(lambda g, p: Op("publish", (g, p)), _group, _priority)
_claim = st.builds(
    lambda v, p, h: Op("claim", (v, p, h)), _visibility, st.sampled_from([0, 0, 0, 2, 4]), _holder
)
_extend = st.builds(lambda i, v: Op("extend", (i, v)), _lease_ref, _visibility)
_nack = st.builds(lambda i, d, e: Op("nack", (i, d, e)), _lease_ref, _seconds, _error)


def settlement_specs(
    refs: st.SearchStrategy[int],
    delays: st.SearchStrategy[float],
    errors: st.SearchStrategy[Any],
    max_size: int = 4,
) -> st.SearchStrategy[tuple[tuple[int, str, float, Any], ...]]:
    """Return ``(ref, outcome, delay, error)`` tuples for a ``settle_and_claim`` step."""
    spec = st.tuples(refs, st.sampled_from(OUTCOMES), delays, errors)
    return st.lists(spec, max_size=max_size).map(tuple)


_delay = st.sampled_from([0.0, 0.5, 1.0, 5.0, 10.0])
_schedule = st.builds(lambda g, p, d: Op("schedule", (g, p, d)), _group, _priority, _delay)

#: The operations that need ``Capabilities.scheduling`` (skipped on other transports).
SCHEDULING_OPS = frozenset({"schedule", "schedule_many", "cancel", "scheduled"})

_settle_and_claim = st.builds(
    lambda s, n, v, p, h: Op("settle_and_claim", (s, n, v, p, h)),
    settlement_specs(_lease_ref, _seconds, _error),
    st.integers(0, 4),
    _visibility,
    st.sampled_from([0, 0, 2]),
    _holder,
)

# Listed twice: the common path (publish, claim, settle) should dominate a program.
_ops: st.SearchStrategy[Op] = st.one_of(
    _publish,
    _publish,
    _claim,
    _claim,
    _extend,
    _nack,
    _settle_and_claim,
    _settle_and_claim,
    st.builds(
        lambda gs, p: Op("publish_many", (tuple(gs), p)),
        st.lists(_group, min_size=1, max_size=4),
        _priority,
    ),
    st.builds(
        lambda n, v, p, h: Op("claim_many", (n, v, p, h)),
        st.integers(1, 5),
        _visibility,
        st.sampled_from([0, 0, 2]),
        _holder,
    ),
    st.builds(lambda i: Op("ack", (i,)), _lease_ref),
    st.builds(lambda ids: Op("ack_many", (tuple(ids),)), st.lists(_lease_ref, max_size=3)),
    _nack,
    _extend,
    st.builds(lambda i: Op("release", (i,)), _lease_ref),
    st.builds(lambda i, e: Op("dead_letter", (i, e)), _lease_ref, _error),
    st.builds(
        lambda ids, p: Op("redrive", (None if ids is None else tuple(ids), p)),
        st.none() | st.lists(st.integers(-1, 6), max_size=3),
        st.booleans(),
    ),
    st.builds(
        lambda ids: Op("delete_dead_letters", (tuple(ids),)),
        st.lists(st.integers(-1, 6), max_size=2),
    ),
    st.builds(lambda g, d: Op("unblock", (g, d)), _group, st.booleans()),
    st.builds(lambda g: Op("pause", (g,)), _group),
    st.builds(lambda g: Op("resume", (g,)), _group),
    st.builds(lambda g: Op("group", (g,)), _group),
    st.builds(
        lambda s, n, a: Op("groups", (s, n, a)), _state, st.sampled_from([1, 2, 100]), _after
    ),
    st.builds(lambda s, n: Op("oldest_groups", (s, n)), _state, st.sampled_from([1, 2, 100])),
    st.builds(lambda s: Op("advance", (s,)), st.sampled_from([0.5, 1.0, 3.0, 6.0, 11.0])),
    _schedule,
    st.builds(
        lambda gs, p, d: Op("schedule_many", (tuple(gs), p, d)),
        st.lists(_group, min_size=1, max_size=3),
        _priority,
        _delay,
    ),
    st.builds(lambda i: Op("cancel", (i,)), _lease_ref),
    st.builds(lambda n: Op("scheduled", (n,)), st.sampled_from([1, 2, 100])),
    st.just(Op("stats")),
    st.builds(lambda k: Op("dead_letters", (k,)), st.none() | st.integers(0, 3)),
)


def programs(max_size: int = 50) -> st.SearchStrategy[list[Op]]:
    """Return a strategy for programs of up to *max_size* operations."""
    return st.lists(_ops, min_size=20, max_size=max_size)


def policies() -> st.SearchStrategy[Policy]:
    """Return a strategy for ``max_attempts`` / ``on_exhausted`` combinations."""
    return st.builds(
        Policy,
        st.sampled_from([None, 1, 2, 3]),
        st.sampled_from(["dead_letter", "block"]),
    )


def event_for(step: int, index: int = 0) -> Event:
    """Return the event published by step *step* (its id names the step, so it is unique)."""
    return Event(id=f"e{step}-{index}", kind="program", data={"step": step, "index": index})


def lease_view(lease: Lease | None) -> tuple[Any, ...] | None:
    """Return what two stores must agree on about a lease."""
    if lease is None:
        return None
    return (
        lease.group_id,
        lease.event.id,
        lease.priority,
        lease.attempt,
        round(lease.expires_at, 3),
    )


def error_view(error: ErrorInfo | None) -> tuple[Any, ...] | None:
    """Return what two stores must agree on about a recorded error."""
    if error is None:
        return None
    return (error.type, error.message, error.traceback, round(error.at, 3))


def dead_view(dead: DeadLetter) -> tuple[Any, ...]:
    """Return what two stores must agree on about a dead letter."""
    return (
        dead.group_id,
        dead.event.id,
        dead.priority,
        dead.attempts,
        dead.reason,
        round(dead.failed_at, 3),
        error_view(dead.error),
    )


def _ms(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def group_view(info: GroupInfo | None) -> tuple[Any, ...] | None:
    """Return what two stores must agree on about a group (its head's id only as present)."""
    if info is None:
        return None
    return (
        info.group_id,
        info.state,
        info.depth,
        info.priority,
        info.head_message_id is None,
        _ms(info.head_enqueued_at),
        info.head_attempts,
        _ms(info.lease_expires_at),
        info.lease_holder,
        _ms(info.resume_at),
        error_view(info.last_error),
    )


def stats_view(stats: QueueStats) -> tuple[Any, ...]:
    """Return the stats two stores must agree on (times rounded to the millisecond)."""
    return (
        stats.groups,
        stats.messages,
        stats.in_flight,
        stats.parked,
        stats.blocked,
        stats.paused,
        stats.dead_letters,
        None if stats.oldest_age_s is None else round(stats.oldest_age_s, 3),
        None if stats.next_resume_at is None else round(stats.next_resume_at, 3),
        stats.scheduled,
        None if stats.next_due_at is None else round(stats.next_due_at, 3),
    )


def scheduled_view(message: ScheduledMessage) -> tuple[Any, ...]:
    """Return what two stores must agree on about a scheduled message (not its id)."""
    return (
        message.group_id,
        message.kind,
        message.priority,
        round(message.due_at, 3),
        round(message.enqueued_at, 3),
    )
