"""The asyncio PostgreSQL transport: the front door over :class:`AsyncPostgresDriver`."""

# This file is the source of its blocking twin (tools/async_to_sync.py).  # async-only

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from pgque.core.client import (
    AsyncBrowseClient,
    AsyncClient,
    AsyncFairnessClient,
    AsyncHistoryClient,
    AsyncOutboxClient,
    AsyncSettleInClient,
    AsyncStoreClient,
    AsyncWakeupsClient,
    AsyncWorkersClient,
)
from pgque.core.connecting import connect_timeout_of
from pgque.core.errors import InvalidInput
from pgque.core.history import HistoryRetention
from pgque.core.transport_options import OnExhausted, TransportOptions
from pgque.core.urls import mask_dsn
from pgque.core.validation import DEFAULT_MAX_ATTEMPTS, DEFAULT_MAX_EVENT_BYTES
from pgque.postgres_async._driver import (
    _CAPABILITIES,
    ORIGIN,
    AsyncPostgresDriver,
    check_listen_url,
)

__all__ = ["AsyncPostgresTransport", "ORIGIN"]


def _size(value: object, name: str, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise InvalidInput(f"{name} must be an int >= {least}, not {value!r}")
    return value


class AsyncPostgresTransport(
    AsyncSettleInClient[AsyncConnection[Any]],
    AsyncOutboxClient,
    AsyncBrowseClient,
    AsyncWorkersClient,
    AsyncHistoryClient,
    AsyncFairnessClient,
    AsyncWakeupsClient,
    AsyncStoreClient,
):
    """A per-group FIFO queue in PostgreSQL (asyncio API); the options shared by every
    transport (*queue*, *max_attempts*, *on_exhausted*, *clock*, *max_event_bytes*, *history*)
    are :class:`~pgque.core.transport_options.TransportOptions`.

    *source* is a DSN (a pool of autocommit connections opens on first use, or eagerly with
    retries by :meth:`from_dsn`), or an ``AsyncConnectionPool`` or ``AsyncConnection`` you own
    (never closed here). Every operation is one call of a server-side function. ``setup=True``
    installs or migrates the schema on open; otherwise a missing or old one raises
    SchemaMismatch. Opening a DSN retries a server that is down or starting until
    *connect_timeout* (alias *timeout*, default 10 s), then raises ConnectionLost; with
    ``retry_refused=False`` a refused connection fails at once (one-shot tools). Once open, the
    pool reconnects a lost connection.

    Behind a transaction-mode pooler (PgBouncer before 1.21) open it with
    ``prepared_statements=False``, and give *listen_url*, the server's direct
    ``postgresql://`` URL for the LISTEN of :meth:`wait_for_messages` (default the transport's
    own source), since a LISTEN through such a pooler is never heard (docs/postgres.md).

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
