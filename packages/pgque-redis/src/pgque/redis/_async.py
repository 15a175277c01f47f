"""The asyncio Redis transport: the front door over :class:`AsyncRedisDriver`."""

# This file is the source of its blocking twin, _sync.py (tools/async_to_sync.py).  # async-only

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from pgque.core.client import (
    AsyncBrowseClient,
    AsyncClient,
    AsyncFairnessClient,
    AsyncHistoryClient,
    AsyncStoreClient,
    AsyncWakeupsClient,
    AsyncWorkersClient,
)
from pgque.core.history import HistoryRetention
from pgque.core.transport_options import OnExhausted
from pgque.redis._backend import CAPABILITIES
from pgque.redis._driver_async import AsyncRedisDriver
from pgque.redis._options import NOT_GIVEN, NotGiven, resolve_options

__all__ = ["AsyncRedisTransport"]


class AsyncRedisTransport(
    AsyncBrowseClient,
    AsyncWorkersClient,
    AsyncHistoryClient,
    AsyncFairnessClient,
    AsyncWakeupsClient,
    AsyncStoreClient,
):
    """A per-group FIFO queue in Redis (asyncio API); the options shared by every transport
    are :class:`~pgque.core.transport_options.TransportOptions`.

    Give a URL (``redis://``, ``rediss://`` for TLS, ``unix://``; ``redis+cluster://host:port,
    host:port/`` or ``rediss+cluster://`` naming a Redis Cluster's seed nodes) or an injected
    ``client`` (``redis.asyncio.Redis`` or ``RedisCluster``; it stays yours to close). pgque's
    options may come from the URL's query (``?queue=orders&retries=5``); keywords win over
    them, and the other query options go to redis-py.

    Every operation is one Lua script, atomic, one round trip (a :meth:`groups` page of the
    ready, leased or parked state takes one per 500 groups it passes over; :meth:`stats`,
    :meth:`group`, :meth:`groups` and :meth:`scheduled` one more per thousand due scheduled
    messages beyond the first thousand). Time is the server's ``TIME``. A failure to connect
    is retried ``retries`` times with a doubling pause from ``retry_backoff`` seconds, then
    raised as ConnectionLost (at once for a refused connection with ``retry_refused=False``);
    so is a connection lost mid-command for reads, while a write whose outcome is unknown
    raises ConnectionLost at once rather than risk applying it twice.

    On a Redis Cluster every script goes to the node of the queue's slot with the client's
    own retries off (redirects are followed; a script is never resent after it may have run),
    wake-ups use sharded pub/sub, and a call refused while the queue's slot migrates raises
    QueueMoving (nothing changed). Every write but a claim waits for ``wait_replicas``
    replicas (``WAIT``, up to ``wait_timeout`` seconds; default 1 on a cluster URL, else 0)
    and raises ConnectionLost (``maybe_applied``) when fewer confirm it.

    *history* (or the URL's ``?history=7d``) stores the queue's job history setting when the
    transport opens (``"7d"``, ``"1000000"`` rows, ``"7d,1000000"``, ``"off"``): records go to
    a capped stream of the queue, appended by the script of each settlement (docs/history.md).

    Raises ConfigurationError for a bad URL or option, InvalidInput for a bad queue name,
    ``max_attempts``, ``on_exhausted`` or ``history``.
    """

    # Not durable: that depends on Redis's AOF settings (see CAPABILITIES).
    CAPABILITIES = CAPABILITIES

    def __init__(
        self,
        url: str | None = None,
        *,
        client: Redis | RedisCluster | None = None,
        queue: str | None = None,
        max_attempts: int | NotGiven | None = NOT_GIVEN,
        on_exhausted: OnExhausted | None = None,
        clock: Callable[[], float] | None = None,
        retries: int | None = None,
        retry_backoff: float | None = None,
        max_event_bytes: int | None = None,
        retry_refused: bool | None = None,
        wait_replicas: int | None = None,
        wait_timeout: float | None = None,
        connect_timeout: float | None = None,
        history: HistoryRetention | timedelta | str | None = None,
    ) -> None:
        options = resolve_options(
            url,
            has_client=client is not None,
            queue=queue,
            max_attempts=max_attempts,
            on_exhausted=on_exhausted,
            clock=clock,
            retries=retries,
            retry_backoff=retry_backoff,
            max_event_bytes=max_event_bytes,
            retry_refused=retry_refused,
            wait_replicas=wait_replicas,
            wait_timeout=wait_timeout,
            connect_timeout=connect_timeout,
            history=history,
        )
        self._redis = AsyncRedisDriver(options, client)
        AsyncClient.__init__(self, self._redis, options.common)

    def _repr_fields(self) -> list[str]:
        return [repr(self._redis.options.masked_url), f"queue={self.queue!r}"]

    @property
    def driver(self) -> AsyncRedisDriver:
        """The driver under this transport: its client, scripts and connection handling."""
        return self._redis

    @property
    def key_prefix(self) -> str:
        """The prefix of every key of this queue, ``{pgque:<queue>}:`` (one Cluster slot)."""
        return self._redis.key_prefix

    @property
    def client(self) -> Redis | RedisCluster:
        """The redis-py client (a cluster URL's is made on first use: ConfigurationError for
        options redis-py refuses)."""
        return self._redis.client

    @property
    def cluster(self) -> bool:
        """Whether this transport talks to a Redis Cluster (a cluster URL or client)."""
        return self._redis.cluster

    async def __aenter__(self) -> AsyncRedisTransport:
        # No I/O: the first operation connects (and learns the store's identity when a
        # lease needs it).
        return self
