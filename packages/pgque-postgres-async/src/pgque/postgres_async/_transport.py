"""The asyncio PostgreSQL transport: the front door over :class:`AsyncPostgresDriver`."""

# This file is the source of its blocking twin (tools/async_to_sync.py).  # async-only

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import Any

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from pgque.core.client import (
    AsyncClient,
    AsyncFairnessClient,
    AsyncHistoryClient,
    AsyncStoreClient,
    AsyncWakeupsClient,
    AsyncWorkersClient,
)
from pgque.core.connecting import connect_timeout_of
from pgque.core.driver import Publication
from pgque.core.errors import InvalidInput
from pgque.core.history import HistoryRetention
from pgque.core.models import Event, Lease
from pgque.core.tracing import traced_publish
from pgque.core.transport_options import OnExhausted, TransportOptions
from pgque.core.urls import mask_dsn
from pgque.core.validation import DEFAULT_MAX_ATTEMPTS, DEFAULT_MAX_EVENT_BYTES
from pgque.postgres_async._driver import (
    _CAPABILITIES,
    ORIGIN,
    AsyncPostgresDriver,
    check_listen_url,
)
from pgque.postgres_async._settle_in import AsyncSettleIn

__all__ = ["AsyncPostgresTransport", "ORIGIN"]


def _size(value: object, name: str, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise InvalidInput(f"{name} must be an int >= {least}, not {value!r}")
    return value


class AsyncPostgresTransport(
    AsyncWorkersClient,
    AsyncHistoryClient,
    AsyncFairnessClient,
    AsyncWakeupsClient,
    AsyncStoreClient,
):
    """A per-group FIFO queue in PostgreSQL (asyncio API).

    *source* is a DSN (the transport opens its own pool of autocommit connections on first use
    or when entered as a context manager; see :meth:`from_dsn` to open it eagerly with
    retries), an ``AsyncConnectionPool`` or an ``AsyncConnection`` you own (the transport never
    closes those). *max_event_bytes* caps one event's JSON text (default 8 MiB); a larger publish is
    refused with InvalidInput before any I/O. With ``setup=True`` the schema is installed or
    migrated on open; otherwise a missing or old schema raises SchemaMismatch. Every operation
    is one call of a server-side function, one round trip, judged by the server's clock unless
    *clock* is given (tests). Opening a DSN gives up with ConnectionLost after the connect
    timeout, *connect_timeout* (alias *timeout*; default 10 s), retrying until then a server
    that is down or starting, whatever the failure (refused, unreachable, a server that never
    answers); with ``retry_refused=False`` a refused connection (nothing listens) fails at once
    and only a server that answers "starting up" is waited for (one-shot tools). The timeout
    bounds opening only: once open, a lost connection is reconnected by the pool.

    Behind a pooler in transaction mode (PgBouncer before 1.21, which cannot keep a client's
    prepared statements), open it with ``prepared_statements=False``: no statement is prepared
    on the server. *listen_url* is the libpq connection string (a ``postgresql://`` URL) of
    the connection :meth:`wait_for_messages` LISTENs on, default the transport's own source;
    behind a transaction-mode pooler give it the server's direct address, since a LISTEN
    through such a pooler is never heard (docs/postgres.md, "Behind PgBouncer").

    *history* stores the queue's job history setting when the transport opens (``"7d"``,
    ``"1000000"`` rows, ``"7d,1000000"``, ``"off"``; docs/history.md).

    Raises InvalidInput for invalid options.
    """

    CAPABILITIES = _CAPABILITIES

    def __init__(
        self,
        source: str | AsyncConnection[Any] | AsyncConnectionPool[Any],
        *,
        queue: str = "default",
        max_attempts: int | None = DEFAULT_MAX_ATTEMPTS,
        on_exhausted: OnExhausted = "dead_letter",
        clock: Callable[[], float] | None = None,
        setup: bool = True,
        min_size: int = 1,
        max_size: int = 10,
        timeout: float | None = None,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
        retry_refused: bool = True,
        prepared_statements: bool = True,
        listen_url: str | None = None,
        connect_timeout: float | None = None,
        history: HistoryRetention | timedelta | str | None = None,
    ) -> None:
        options = TransportOptions(
            queue=queue,
            max_attempts=max_attempts,
            on_exhausted=on_exhausted,
            clock=clock,
            max_event_bytes=max_event_bytes,
            history=history,  # type: ignore[arg-type]  # checked into a setting
        )
        if _size(max_size, "max_size", 1) < _size(min_size, "min_size", 0):
            raise InvalidInput(f"max_size ({max_size}) must be >= min_size ({min_size})")
        if not isinstance(prepared_statements, bool):
            raise InvalidInput(f"prepared_statements must be a bool, not {prepared_statements!r}")
        self._postgres = AsyncPostgresDriver(
            source,
            options,
            setup=bool(setup),
            min_size=min_size,
            max_size=max_size,
            timeout=connect_timeout_of(timeout, connect_timeout),
            retry_refused=bool(retry_refused),
            prepared_statements=prepared_statements,
            listen_url=check_listen_url(listen_url),
        )
        AsyncClient.__init__(self, self._postgres, options)

    @classmethod
    async def from_dsn(
        cls, dsn: str, *, timeout: float | None = None, **options: Any
    ) -> AsyncPostgresTransport:
        """Open a transport on *dsn*, retrying while the server starts, for up to the connect
        timeout (*timeout* or ``connect_timeout``, default 10 s).

        *options* are those of the constructor. Raises ConnectionLost if the server cannot be
        reached in time, SchemaMismatch if the schema is missing and ``setup=False``.
        """
        transport = cls(dsn, timeout=timeout, **options)
        try:
            await transport.open()
        except BaseException:
            await transport.close()
            raise
        return transport

    @property
    def driver(self) -> AsyncPostgresDriver:
        """The driver under this transport: its connection source (``driver.connection()``)."""
        return self._postgres

    def _repr_fields(self) -> list[str]:
        dsn = self._postgres.dsn
        return [f"queue={self.queue!r}", f"source={mask_dsn(dsn) if dsn else 'injected'!r}"]

    def settle_in(self, lease: Lease, connection: Any = None) -> AsyncSettleIn:
        """Settle *lease* in a transaction on *connection*, with the block's writes on it.

        ``async with transport.settle_in(lease, conn) as tx:`` opens a transaction on *conn*
        (a psycopg connection, or a SQLAlchemy session or connection on psycopg 3; the
        transport's own pool lends one when None, as ``tx.connection``), or a savepoint inside
        one already open. On a clean exit the lease is acked in it, unless ``tx.nack(delay=,
        error=)``, ``tx.dead_letter(reason)`` or ``tx.release()`` chose another settlement;
        an exception rolls it all back and propagates, the lease unsettled. While the
        transaction is open no claim takes the group, even past the lease's expiry. Raises
        LeaseLost on entry for a lease no longer the group's (nothing written), InvalidInput
        for a bad lease or connection. See docs/transactions.md.
        """
        checked = self._lease(lease)
        return AsyncSettleIn(self._postgres, checked, connection, self._settlements, self._now)

    @traced_publish
    async def publish(
        self,
        group_id: str,
        event: Event,
        *,
        priority: int = 0,
        delay: float = 0.0,
        fairness_key: str | None = None,
        connection: AsyncConnection[Any] | Any | None = None,
    ) -> int:
        """Append *event* to *group_id*'s tail and return its message id.

        As :meth:`AsyncTransport.publish`; with *connection*, the publish runs on that
        connection inside its open transaction (the transactional outbox): a rollback drops
        the message, a commit publishes (or schedules) it. *connection* is a psycopg
        connection, or a SQLAlchemy session or connection whose driver is psycopg 3.
        A *fairness_key* raises ConfigurationError: PostgreSQL does not support fairness keys
        yet (docs/fairness.md).
        Raises InvalidInput for a bad group id, priority, delay, event or connection.
        """
        batch, checked_priority, wait = self._checked_one(
            group_id, event, priority, delay, fairness_key
        )
        return (await self._append(batch, checked_priority, wait, connection))[0]

    @traced_publish
    async def publish_many(
        self,
        items: Iterable[tuple[str, Event]],
        *,
        priority: int = 0,
        delay: float = 0.0,
        fairness_key: str | None = None,
        connection: AsyncConnection[Any] | Any | None = None,
    ) -> list[int]:
        """Append many (group_id, event) pairs atomically, in order; return their ids.

        *connection* joins the caller's transaction as for :meth:`publish`.
        """
        batch, checked_priority, wait = self._checked_batch(items, priority, delay, fairness_key)
        if not batch:
            return []
        return await self._append(batch, checked_priority, wait, connection)

    async def _append(
        self,
        batch: list[Publication],
        priority: int,
        delay: float,
        connection: AsyncConnection[Any] | Any | None,
    ) -> list[int]:
        if connection is None:
            return await self._postgres.publish(batch, priority, delay, self._now())
        name, params = self._postgres.publish_statement(batch, priority, delay, self._now())
        rows = await self._postgres.on_connection(connection, name, params)
        return self._postgres.published(name, rows[0][0])
