"""The plain parts of the worker: retry maths, backoff, handler inspection, option checks."""

from __future__ import annotations

import functools
import random
from typing import Any

import pytest

from pgque.core import (
    AsyncInMemoryTransport,
    AsyncWorker,
    Event,
    InMemoryTransport,
    InvalidInput,
    Lease,
    Outcome,
    Reject,
    Retry,
    RetryPolicy,
    Worker,
)
from pgque.core.worker import Backoff
from pgque.core.worker._running.handlers import is_async_callable, wants_lease
from pgque.core.worker._settling.decisions import decide


def _lease(attempt: int) -> Lease:
    return Lease(
        group_id="g",
        message_id=1,
        event=Event(kind="k"),
        token="t",
        priority=0,
        attempt=attempt,
        expires_at=0.0,
    )


def test_retry_policy_is_exponential_and_capped() -> None:
    policy = RetryPolicy(base=1.0, factor=2.0, max_delay=10.0, jitter=0.0)
    assert [policy.delay(n) for n in range(1, 7)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    assert policy.delay(0) == 1.0  # below 1 counts as the first attempt
    assert policy.delay(100_000) == 10.0  # no OverflowError for absurd attempts


def test_retry_policy_defaults() -> None:
    policy = RetryPolicy()
    assert (policy.base, policy.factor, policy.max_delay, policy.jitter) == (1.0, 2.0, 300.0, 0.1)
    assert policy.raw_delay(3) == 4.0


def test_retry_policy_jitter_stays_within_its_spread_and_the_cap() -> None:
    policy = RetryPolicy(base=10.0, factor=1.0, max_delay=10.5, jitter=0.1)
    rng = random.Random(1)
    delays = [policy.delay(1, rng) for _ in range(500)]
    assert all(9.0 <= d <= 10.5 for d in delays)
    assert len({round(d, 6) for d in delays}) > 100  # really spread
    assert max(delays) == 10.5  # capped, not 11


@pytest.mark.parametrize(
    "kwargs",
    [
        {"base": -1},
        {"factor": 0.5},
        {"factor": float("inf")},
        {"max_delay": float("nan")},
        {"jitter": 1.5},
        {"jitter": -0.1},
        {"base": "1"},
    ],
)
def test_retry_policy_refuses_bad_values(kwargs: dict[str, Any]) -> None:
    with pytest.raises(InvalidInput):
        RetryPolicy(**kwargs)


def test_backoff_doubles_to_its_bound_and_resets() -> None:
    backoff = Backoff(0.1, 0.5)
    assert [backoff.next() for _ in range(5)] == [0.1, 0.2, 0.4, 0.5, 0.5]
    backoff.reset()
    assert backoff.peek() == 0.1
    with pytest.raises(InvalidInput):
        Backoff(1.0, 0.5)
    with pytest.raises(InvalidInput):
        Backoff(0.0, 1.0)


def test_a_jittered_backoff_waits_between_part_and_all_of_each_step() -> None:
    """Two workers that collided (a deadlock) and back off alike would collide again in step:
    with *jitter* each wait is drawn from ``[(1 - jitter) * step, step]``."""
    steps = [0.1, 0.2, 0.4, 0.5, 0.5, 0.5]
    backoff = Backoff(0.1, 0.5, jitter=0.5, rng=random.Random(7))
    waits = [backoff.next() for _ in range(6)]
    assert all(step * 0.5 <= wait <= step for wait, step in zip(waits, steps, strict=True))
    assert len(set(waits[3:])) == 3  # the same step, three different waits
    again = Backoff(0.1, 0.5, jitter=0.5, rng=random.Random(7))
    assert [again.next() for _ in range(6)] == waits  # a seeded rng repeats itself
    assert again.peek() == 0.5  # the step, before jitter
    for bad in (-0.1, 1.5, True, "0.5"):
        with pytest.raises(InvalidInput):
            Backoff(0.1, 0.5, jitter=bad)  # type: ignore[arg-type]


def test_retry_and_reject_carry_their_decision() -> None:
    assert Retry(2.5).delay == 2.5
    assert Retry().delay is None
    with pytest.raises(InvalidInput):
        Retry(-1)
    assert Reject("bad\x00 data").reason == "bad data"
    assert Reject("").reason == "rejected by handler"
    assert len(Reject("x" * 5000).reason) == 2000


def test_decide_maps_handler_results_to_outcomes() -> None:
    policy = RetryPolicy(base=1.0, jitter=0.0)
    assert decide(None, _lease(1), policy).outcome is Outcome.ACKED
    failed = decide(ValueError("boom"), _lease(3), policy)
    assert (failed.outcome, failed.delay) == (Outcome.RETRIED, 4.0)
    asked = decide(Retry(0.25), _lease(3), policy)
    assert (asked.outcome, asked.delay) == (Outcome.RETRIED, 0.25)
    assert decide(Retry(), _lease(2), policy).delay == 2.0
    rejected = decide(Reject("nope"), _lease(1), policy)
    assert (rejected.outcome, rejected.reason) == (Outcome.DEAD_LETTERED, "nope")


def test_handler_arity_decides_whether_it_gets_the_lease() -> None:
    def one(event: Event) -> None: ...

    def two(event: Event, lease: Lease) -> None: ...

    def star(*args: Any) -> None: ...

    class Handler:
        def __call__(self, event: Event, lease: Lease) -> None: ...

        def method(self, event: Event) -> None: ...

    assert wants_lease(one) is False
    assert wants_lease(two) is True
    assert wants_lease(star) is True
    assert wants_lease(Handler()) is True
    assert wants_lease(Handler().method) is False
    assert wants_lease(functools.partial(two, Event(kind="k"))) is False
    with pytest.raises(InvalidInput):
        wants_lease(lambda: None)
    with pytest.raises(InvalidInput):
        wants_lease(42)  # type: ignore[arg-type]


def test_async_handlers_are_recognised_and_refused_by_the_blocking_worker() -> None:
    async def handler(event: Event) -> None: ...

    class AsyncCallable:
        async def __call__(self, event: Event) -> None: ...

    assert is_async_callable(handler)
    assert is_async_callable(functools.partial(handler))
    assert is_async_callable(AsyncCallable())
    assert not is_async_callable(lambda event: None)
    with pytest.raises(InvalidInput, match="AsyncWorker"):
        Worker(InMemoryTransport(), handler)
    AsyncWorker(AsyncInMemoryTransport(), handler)  # accepted
    AsyncWorker(AsyncInMemoryTransport(), lambda event: None)  # sync handlers too


@pytest.mark.parametrize(
    "options",
    [
        {"concurrency": 0},
        {"concurrency": True},
        {"visibility": 0},
        {"visibility": -1.0},
        {"batch_size": 0},
        {"min_priority": 5},
        {"hard_timeout": 0},
        {"shutdown_grace": -1},
        {"idle_backoff": (0.5, 0.1)},
        {"idle_backoff": (0.1,)},
        {"reconnect_backoff": (0.0, 1.0)},
        {"retry": "fast"},
        {"name": ""},
    ],
)
def test_worker_refuses_bad_options(options: dict[str, Any]) -> None:
    with pytest.raises(InvalidInput):
        Worker(InMemoryTransport(), lambda event: None, **options)
    with pytest.raises(InvalidInput):
        AsyncWorker(AsyncInMemoryTransport(), lambda event: None, **options)


def test_worker_exposes_its_options() -> None:
    worker = Worker(InMemoryTransport(), lambda event: None, visibility=10, name="w1")
    assert worker.name == "w1"
    assert worker.options.visibility == 10.0
    assert worker.options.extend_every == 5.0
    assert worker.options.retry == RetryPolicy()
    assert not worker.running
    assert "w1" in repr(worker)
