"""pgque.redis — the Redis transports of pgque: :class:`RedisTransport` (blocking) and
:class:`AsyncRedisTransport` (asyncio), registered for ``redis://``, ``rediss://``,
``unix://`` and, for a Redis Cluster, ``redis+cluster://`` and ``rediss+cluster://``.

Every operation is one atomic Lua script call (a ``groups(state=...)`` page of a time-bound
state is built by several bounded ones); keys of a queue share the hash tag ``{pgque:<queue>}``
so a queue lives in one Redis Cluster slot; :func:`spread_queue_names` names sub-queues of one
logical queue whose slots cover every primary of a cluster. :class:`RedisPartitionAdapter` and
:class:`AsyncRedisPartitionAdapter` are what pgque.partition uses on them (entry-point group
``pgque.partition_adapters``).
"""

from __future__ import annotations

from typing import Any

from pgque.core.connecting import retries_within
from pgque.core.errors import ConfigurationError
from pgque.core.registry import Backend
from pgque.redis._async import AsyncRedisTransport
from pgque.redis._backend import CAPABILITIES
from pgque.redis._keys import key_prefix
from pgque.redis._options import (
    DEFAULT_RETRY_BACKOFF,
    MAX_RETRY_PAUSE,
    OWN_OPTIONS,
    leftover_options,
)
from pgque.redis._partition_async import AsyncRedisPartitionAdapter
from pgque.redis._partition_sync import RedisPartitionAdapter
from pgque.redis._spread import spread_queue_names
from pgque.redis._sync import RedisTransport

__all__ = [
    "RedisTransport",
    "AsyncRedisTransport",
    "RedisBackend",
    "RedisPartitionAdapter",
    "AsyncRedisPartitionAdapter",
    "CAPABILITIES",
    "key_prefix",
    "spread_queue_names",
]


#: The transports' own keyword options: those a URL may carry, and the clock (tests only).
_OWN = OWN_OPTIONS | {"clock"}


def _own(url: str, options: dict[str, Any]) -> dict[str, Any]:
    """Return pgque's options of *options*; raise ConfigurationError for the others the URL
    does not carry."""
    own = {k: options.pop(k) for k in _OWN if k in options}
    unknown = leftover_options(url, options)
    if unknown:
        names = ", ".join(sorted(unknown))
        raise ConfigurationError(f"unknown option(s) for the Redis transport: {names}")
    return own


def _open(url: str, **options: Any) -> RedisTransport:
    return RedisTransport(url, **_own(url, options))


def _open_async(url: str, **options: Any) -> AsyncRedisTransport:
    return AsyncRedisTransport(url, **_own(url, options))


def _command_options(wait: float, one_shot: bool) -> dict[str, Any]:
    """``Backend.command_options``: the connect timeout *wait*, as many doubling retries as
    add up to it and, when *one_shot*, none for a refused connection."""
    retries = retries_within(wait, DEFAULT_RETRY_BACKOFF, MAX_RETRY_PAUSE)
    options: dict[str, Any] = {"retries": retries}
    if wait > 0:
        options["connect_timeout"] = wait
    if one_shot:
        options["retry_refused"] = False
    return options


#: The entry point of ``redis://``, ``rediss://``, ``unix://``, ``redis+cluster://`` and
#: ``rediss+cluster://`` in ``pgque.transports``.
RedisBackend = Backend(
    package="pgque-redis", open=_open, open_async=_open_async, command_options=_command_options
)
