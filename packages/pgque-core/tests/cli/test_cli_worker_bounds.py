"""The ranges of ``pgque worker``'s flags are those of the options they set: each flag takes
exactly what :class:`WorkerOptions` (or :class:`RetryPolicy`, for ``--retry-*``) takes, no
more and no less, so the two cannot drift apart again (the flag said 1..1024 concurrent
handlers where the option took 10,000)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import click
import pytest

from pgque.core.cli._worker_cmd import worker
from pgque.core.errors import InvalidInput
from pgque.core.worker import RetryPolicy, WorkerOptions

#: Every bounded flag of ``pgque worker`` that sets a worker option: its parameter name ->
#: (the option it sets, how the flag's value becomes the option's).
WORKER_FLAGS: dict[str, tuple[str, Callable[[float], Any]]] = {
    "concurrency": ("concurrency", int),
    "visibility": ("visibility", float),
    "batch_size": ("batch_size", int),
    "min_priority": ("min_priority", int),
    "hard_timeout": ("hard_timeout", lambda v: v or None),  # 0: no limit
    "warn_after": ("warn_after", float),
    "shutdown_grace": ("shutdown_grace", float),
    "heartbeat_every": ("heartbeat_every", float),
}
RETRY_FLAGS = {
    "retry_base": "base",
    "retry_factor": "factor",
    "retry_max_delay": "max_delay",
    "retry_jitter": "jitter",
}
#: Bounded flags that set no worker option (the supervisor's processes, the metrics port, the
#: connect timeout): not checked here.
OTHER_FLAGS = {"processes", "prometheus_port", "connect_timeout"}


def _ranges() -> dict[str, click.IntRange | click.FloatRange]:
    return {
        param.name: param.type
        for param in worker.params
        if param.name is not None and isinstance(param.type, (click.IntRange, click.FloatRange))
    }


def _worker_accepts(option: str, value: Any) -> bool:
    try:
        WorkerOptions(**{option: value, "name": "bounds"})
    except InvalidInput:
        return False
    return True


def _policy_accepts(field: str, value: float) -> bool:
    try:
        RetryPolicy(**{field: value})
    except InvalidInput:
        return False
    return True


def _check(kind: click.IntRange | click.FloatRange, accepts: Callable[[float], bool]) -> None:
    """The option takes every edge of the flag's range and refuses what lies just beyond."""
    integer = isinstance(kind, click.IntRange)

    def below(x: float) -> float:
        return x - 1 if integer else math.nextafter(x, -math.inf)

    def above(x: float) -> float:
        return x + 1 if integer else math.nextafter(x, math.inf)

    assert kind.min is not None
    if kind.min_open:
        assert not accepts(kind.min)
        assert accepts(above(kind.min))
    else:
        assert accepts(kind.min)
        assert not accepts(below(kind.min))
    if kind.max is None:
        assert accepts(1e300), "the flag has no upper bound, so the option must have none"
    else:
        assert not kind.max_open
        assert accepts(kind.max)
        assert not accepts(above(kind.max))


def test_every_bounded_flag_is_checked() -> None:
    assert set(_ranges()) == set(WORKER_FLAGS) | set(RETRY_FLAGS) | OTHER_FLAGS


@pytest.mark.parametrize("flag", sorted(WORKER_FLAGS))
def test_a_worker_flag_takes_what_its_option_takes(flag: str) -> None:
    option, convert = WORKER_FLAGS[flag]
    _check(_ranges()[flag], lambda value: _worker_accepts(option, convert(value)))


@pytest.mark.parametrize("flag", sorted(RETRY_FLAGS))
def test_a_retry_flag_takes_what_the_retry_policy_takes(flag: str) -> None:
    field = RETRY_FLAGS[flag]
    _check(_ranges()[flag], lambda value: _policy_accepts(field, float(value)))


def test_concurrency_reaches_the_options_limit() -> None:
    kind = _ranges()["concurrency"]
    assert (kind.min, kind.max) == (1, 10_000)
