"""Property-based fuzzing of a transport against the reference model, with hostile inputs.

The suite's model-agreement test runs programs over four tame group ids. This module runs the
same program runner with what an attacker or a careless caller would send: group ids drawn from
all of Unicode (no NUL, no lone surrogates: those are refused) and from SQL, PL/pgSQL, Lua and
Redis metacharacters; event kinds, headers and payloads of the same kind; every priority and
priority floor; delays and visibilities with millisecond fractions; holders and recorded
errors of hostile text; settle_and_claim with up to six settlements of every outcome and
n from 0 to 6; max_attempts from 1 to 5 under both exhaustion policies. Every lease
handed out must carry exactly the event that was published, and the transport must agree with
:class:`pgque.core.QueueModel` step by step.

Enable it in a backend's test module with ``from pgque.conformance.fuzz import *`` and a
``transport_factory`` fixture (the conformance one). ``PGQUE_FUZZ_EXAMPLES`` sets the number
of examples (default 15).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, cast

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pgque.conformance._program import ERRORS, Op, Policy, raised, settlement_specs
from pgque.conformance._types import TransportFactory
from pgque.conformance.clock import FakeClock
from pgque.conformance.suite_sync.model_agreement import _run_program
from pgque.core import Event, Lease, Settlement, SettleResult, Transport

__all__ = [
    "HOSTILE_TEXT",
    "hostile_text",
    "group_id_sets",
    "json_payloads",
    "wide_programs",
    "wide_policies",
    "test_fuzz_transport_agrees_with_model_on_hostile_input",
]

FUZZ_EXAMPLES_ENV = "PGQUE_FUZZ_EXAMPLES"

#: Text that means something to SQL, PL/pgSQL, psycopg, Lua, Redis or a shell.
HOSTILE_TEXT = (
    "'; DROP TABLE pgque_fifo.messages; --",
    "' OR '1'='1",
    "$$; DROP SCHEMA pgque_fifo CASCADE; $$",
    "$tag$",
    "\\",
    "\\'",
    '"',
    "%s",
    "%(queue)s",
    "{}",
    "]]",
    "[[",
    "]] .. redis.call('FLUSHALL') .. [[",
    "redis.call('FLUSHALL')",
    "{pgque:x}",
    "{pgque:default}:msg",
    "*",
    "?",
    "\r\n*1\r\n$8\r\nFLUSHALL\r\n",
    "\t\n\x0b\x0c\r",
    "\x01\x1f\x7f",
    "\u202e\u200b\ufeff",
    "🙂👩\u200d💻",
    "日本語",
    "é" * 40,
)

_unicode = st.characters(exclude_categories=["Cs"], exclude_characters="\x00")


def hostile_text(max_size: int = 24) -> st.SearchStrategy[str]:
    """Return non-empty text: metacharacter samples, arbitrary Unicode, or both joined."""
    free = st.text(_unicode, min_size=1, max_size=max_size)
    sample = st.sampled_from(HOSTILE_TEXT)
    return st.one_of(sample, free, st.builds(lambda a, b: a + b, sample, free))


def group_id_sets(size: int = 4) -> st.SearchStrategy[tuple[str, ...]]:
    """Return *size* distinct group ids of hostile text (each within the 512-byte limit); a
    blank one (white space alone, refused as a group id) gets a letter in front, so the
    hostile white space stays, inside an id."""
    ids = hostile_text().map(lambda text: text if text.strip() else f"g{text}")
    return st.lists(ids, min_size=size, max_size=size, unique=True).map(tuple)


def json_payloads() -> st.SearchStrategy[Any]:
    """Return JSON values: nested lists and objects of hostile strings and extreme numbers."""
    leaves = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**70), 2**70),
        st.floats(allow_nan=False, allow_infinity=False),
        hostile_text(16),
    )
    return st.recursive(
        leaves,
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(hostile_text(8), inner, max_size=3)
        ),
        max_leaves=8,
    )


_group = st.integers(0, 3)
_priority = st.integers(0, 4)
_floor = st.integers(0, 4)
#: Millisecond fractions, zero, and a span that crosses the lease and park times used.
_seconds = st.one_of(st.just(0.0), st.integers(1, 20_000).map(lambda ms: ms / 1000))
_visibility = st.integers(1, 15_000).map(lambda ms: ms / 1000)
_lease_ref = st.integers(0, 3) | st.integers(0, 1_000)

_error = st.one_of(
    st.none(),
    hostile_text(40),
    st.builds(lambda text: raised(RuntimeError(text)), hostile_text(40)),
    st.sampled_from(ERRORS),
)
_holder = st.none() | hostile_text(30)
_state = st.sampled_from([None, "ready", "leased", "parked", "blocked", "paused"])
_after = st.none() | st.tuples(_group, st.booleans())

_ops: st.SearchStrategy[Op] = st.one_of(
    st.builds(lambda g, p: Op("publish", (g, p)), _group, _priority),
    st.builds(lambda g, p: Op("publish", (g, p)), _group, _priority),
    st.builds(lambda v, p, h: Op("claim", (v, p, h)), _visibility, _floor, _holder),
    st.builds(lambda v, p, h: Op("claim", (v, p, h)), _visibility, _floor, _holder),
    st.builds(
        lambda gs, p: Op("publish_many", (tuple(gs), p)),
        st.lists(_group, min_size=1, max_size=5),
        _priority,
    ),
    st.builds(
        lambda n, v, p, h: Op("claim_many", (n, v, p, h)),
        st.integers(1, 6),
        _visibility,
        _floor,
        _holder,
    ),
    st.builds(lambda i: Op("ack", (i,)), _lease_ref),
    st.builds(lambda ids: Op("ack_many", (tuple(ids),)), st.lists(_lease_ref, max_size=4)),
    st.builds(
        lambda s, n, v, p, h: Op("settle_and_claim", (s, n, v, p, h)),
        settlement_specs(_lease_ref, _seconds, _error, max_size=6),
        st.integers(0, 6),
        _visibility,
        _floor,
        _holder,
    ),
    st.builds(lambda i, d, e: Op("nack", (i, d, e)), _lease_ref, _seconds, _error),
    st.builds(lambda i, v: Op("extend", (i, v)), _lease_ref, _visibility),
    st.builds(lambda i: Op("release", (i,)), _lease_ref),
    st.builds(lambda i, e: Op("dead_letter", (i, e)), _lease_ref, _error),
    st.builds(
        lambda ids, p: Op("redrive", (None if ids is None else tuple(ids), p)),
        st.none() | st.lists(st.integers(-1, 8), max_size=3),
        st.booleans(),
    ),
    st.builds(
        lambda ids: Op("delete_dead_letters", (tuple(ids),)),
        st.lists(st.integers(-1, 8), max_size=2),
    ),
    st.builds(lambda g, d: Op("unblock", (g, d)), _group, st.booleans()),
    st.builds(lambda g: Op("pause", (g,)), _group),
    st.builds(lambda g: Op("resume", (g,)), _group),
    st.builds(lambda g: Op("group", (g,)), _group),
    st.builds(
        lambda s, n, a: Op("groups", (s, n, a)), _state, st.sampled_from([1, 3, 1000]), _after
    ),
    st.builds(lambda s: Op("advance", (s,)), _seconds),
    st.just(Op("stats")),
    st.builds(lambda k: Op("dead_letters", (k,)), st.none() | st.integers(0, 4)),
)


def wide_programs(min_size: int = 15, max_size: int = 40) -> st.SearchStrategy[list[Op]]:
    """Return programs over every operation with the wide argument ranges above."""
    return st.lists(_ops, min_size=min_size, max_size=max_size)


def wide_policies() -> st.SearchStrategy[Policy]:
    """Return every ``max_attempts`` from none to 5 under both exhaustion policies."""
    return st.builds(
        Policy,
        st.sampled_from([None, 1, 2, 3, 4, 5]),
        st.sampled_from(["dead_letter", "block"]),
    )


class _Checked:
    """A transport whose leases must carry exactly the event that was published."""

    def __init__(self, inner: Transport, published: dict[str, Event]) -> None:
        self._inner = inner
        self._published = published

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def _check(self, lease: Lease | None) -> Lease | None:
        if lease is not None:
            assert lease.event == self._published[lease.event.id], lease.event.id
        return lease

    def claim(
        self, visibility: float = 30.0, *, min_priority: int = 0, holder: str | None = None
    ) -> Lease | None:
        return self._check(self._inner.claim(visibility, min_priority=min_priority, holder=holder))

    def claim_many(
        self,
        n: int,
        visibility: float = 30.0,
        *,
        min_priority: int = 0,
        holder: str | None = None,
    ) -> list[Lease]:
        leases = self._inner.claim_many(n, visibility, min_priority=min_priority, holder=holder)
        for lease in leases:
            self._check(lease)
        return leases

    def settle_and_claim(
        self,
        settlements: Sequence[Settlement],
        n: int,
        visibility: float = 30.0,
        *,
        min_priority: int = 0,
        holder: str | None = None,
    ) -> SettleResult:
        result = self._inner.settle_and_claim(
            settlements, n, visibility, min_priority=min_priority, holder=holder
        )
        for lease in result.leases:
            self._check(lease)
        return result

    def extend(self, lease: Lease, visibility: float) -> Lease | None:
        return self._check(self._inner.extend(lease, visibility))


@settings(
    max_examples=int(os.environ.get(FUZZ_EXAMPLES_ENV, "15")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    policy=wide_policies(),
    program=wide_programs(),
    groups=group_id_sets(),
    kinds=st.lists(hostile_text(), min_size=1, max_size=4),
    payloads=st.lists(json_payloads(), min_size=1, max_size=6),
    header=hostile_text(12),
)
def test_fuzz_transport_agrees_with_model_on_hostile_input(
    transport_factory: TransportFactory,
    policy: Policy,
    program: list[Op],
    groups: tuple[str, ...],
    kinds: list[str],
    payloads: list[Any],
    header: str,
) -> None:
    clock = FakeClock()
    transport = transport_factory(
        clock=clock, max_attempts=policy.max_attempts, on_exhausted=policy.on_exhausted
    )
    published: dict[str, Event] = {}

    def events(step: int, index: int) -> Event:
        event = Event(
            id=f"e{step}-{index}",
            kind=kinds[(step + index) % len(kinds)],
            data=payloads[(step * 7 + index) % len(payloads)],
            headers={header: header, "n": str(index)},
        )
        published[event.id] = event
        return event

    checked = cast(Transport, _Checked(transport, published))
    try:
        _run_program(checked, clock, policy, program, groups, events)
    finally:
        # One queue per example: release its connections now, not after hundreds of examples.
        transport.close()
