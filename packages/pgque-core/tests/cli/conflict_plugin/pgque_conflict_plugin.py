"""A test-only pgque backend for the ``conflict://`` scheme, loaded by the real console script.

It opens the transport of ``PGQUE_CONFLICT_TARGET`` (a real queue URL) and makes the first
``PGQUE_CONFLICT_TIMES`` calls of every operation raise RetryableConflict before they reach
the target, as a server rolls back a deadlocked call whole. The CLI tests register it with a
generated ``.dist-info`` on ``PYTHONPATH`` (see test_cli_conflicts.py).
"""

from __future__ import annotations

import os
from typing import Any

from pgque.core.errors import RetryableConflict
from pgque.core.registry import Backend, connect

OPERATIONS = frozenset(
    {
        "publish",
        "publish_many",
        "stats",
        "dead_letters",
        "redrive",
        "unblock",
        "purge",
        "group",
        "groups",
        "pause",
        "resume",
        "delete_dead_letters",
    }
)


class ConflictingTransport:
    """Delegate to *inner*, raising RetryableConflict on the first *times* calls of each op."""

    def __init__(self, inner: Any, times: int) -> None:
        self._inner = inner
        self._left = dict.fromkeys(OPERATIONS, times)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name not in OPERATIONS:
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            if self._left[name] > 0:
                self._left[name] -= 1
                raise RetryableConflict(f"deadlock detected (injected into {name})")
            return attr(*args, **kwargs)

        return call

    def __enter__(self) -> ConflictingTransport:
        return self

    def __exit__(self, *exc: object) -> None:
        self._inner.close()


def _open(url: str, **options: Any) -> Any:
    inner = connect(os.environ["PGQUE_CONFLICT_TARGET"], **options)
    return ConflictingTransport(inner, int(os.environ.get("PGQUE_CONFLICT_TIMES", "0")))


ConflictBackend = Backend(package="pgque-conflict-plugin", open=_open)
