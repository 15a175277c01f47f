"""The PostgreSQL partition adapter (asyncio API): pgque.partition's dedup window, persisted slot
count and key lock, through the statements of ``partition_queries.sql`` (shared-sql) and a
transaction-scoped advisory lock.

Registered in ``pgque.partition_adapters`` for
:class:`~pgque.postgres_async.AsyncPostgresTransport`.
"""

# The source of its blocking twin in pgque-postgres (tools/async_to_sync.py).  # async-only

from __future__ import annotations

import threading
import weakref
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from pgque.core.driver import Publication
from pgque.core.errors import ConfigurationError
from pgque.core.partition_base import AsyncPartitionAdapterBase, Grant
from pgque.postgres_async._transport import AsyncPostgresTransport

__all__ = ["AsyncPostgresPartitionAdapter"]


class AsyncPostgresPartitionAdapter(AsyncPartitionAdapterBase):
    """The partition adapter of :class:`AsyncPostgresTransport`: server-side functions for the
    dedup window and the slot count, and the Exclusive tier's key lock as an advisory lock
    that lives exactly as long as its transaction, on a connection of *lock_pool* (a psycopg
    pool) or else of the transport's own source.
    """

    name = "postgresql"
    key_locks = True

    def __init__(self, transport: AsyncPostgresTransport, *, lock_pool: Any = None) -> None:
        super().__init__(transport, lock_pool=lock_pool)
        self._driver = transport.driver
        self._lock_pool = lock_pool

    async def _row(self, name: str, **params: Any) -> Any:
        return (await self._driver.rows(name, {"queue": self.queue, **params}))[0]

    async def publish_dedup(
        self, item: Publication, priority: int, key: str, ttl: float, now: float | None
    ) -> tuple[int, bool]:
        message_id, deduped = await self._row(
            "publish_dedup",
            group_id=item.group_id,
            event=item.text,
            priority=priority,
            dedup_key=key,
            ttl=ttl,
            now=now,
        )
        return int(message_id), bool(deduped)

    async def ensure_slots(self, slots: int) -> int:
        return int((await self._row("partition_slots", slots=slots, now=self._clock()))[0])

    async def reset_slots(self) -> bool:
        return bool((await self._row("partition_reset_slots"))[0])

    async def purge(self) -> None:
        await self._row("partition_purge")

    def check_concurrency(self, concurrency: int) -> None:
        size = getattr(self._lock_pool, "max_size", None)
        if isinstance(size, int) and size < concurrency:
            raise ConfigurationError(
                f"the Exclusive tier with concurrency={concurrency} holds one lock_pool "
                f"connection per handler, but the lock_pool has max_size={size}: a handler "
                "would time out waiting for one. Size the lock_pool for the concurrency"
            )
        if concurrency > 1 and self._lock_pool is None and self._driver.conn is not None:
            raise ConfigurationError(
                f"the Exclusive tier with concurrency={concurrency} needs a database session "
                "per handler, but this transport sits on one injected connection: its "
                "handlers' lock transactions would share it (the advisory lock is re-entrant "
                "within a session), so two of them could hold one key. Pass lock_pool=<a "
                "psycopg pool>, open the transport on a DSN or a pool, or use concurrency=1"
            )

    def claim_lock_session(self, consumer: object) -> None:
        conn = self._driver.conn
        if self._lock_pool is not None or conn is None:
            return
        with _LOCKING_GUARD:
            users = _SESSION_USERS.setdefault(conn, weakref.WeakSet())
            if any(user is not consumer for user in users):
                raise ConfigurationError(
                    "another Exclusive consumer already takes its key locks on this "
                    "transport's one injected connection: two consumers would share its "
                    "session (the advisory lock is re-entrant within it), so both could hold "
                    "one key. Give each consumer its own transport or a lock_pool, or open the "
                    "transport on a DSN or a pool"
                )
            users.add(consumer)

    def free_lock_session(self, consumer: object) -> None:
        conn = self._driver.conn
        with _LOCKING_GUARD:
            users = None if conn is None else _SESSION_USERS.get(conn)
            if users is not None:
                users.discard(consumer)

    @asynccontextmanager
    async def key_lock(self, key: str, ttl: float) -> AsyncIterator[Grant | None]:
        # The lock lives exactly as long as this transaction: COMMIT or ROLLBACK releases it,
        # so a pooler that hands the connection to someone else afterwards hands over nothing.
        self.transport._check_open()
        source = self._driver if self._lock_pool is None else self._lock_pool
        async with source.connection() as conn:
            with _sole_lock_transaction(conn):
                async with conn.transaction():
                    rows = await self._driver.on_connection(conn, "try_key_lock", {"key": key})
                    yield Grant(connection=conn) if rows[0][0] else None


#: id() of every connection inside a key lock's transaction now (each one is alive meanwhile).
_LOCKING: set[int] = set()
_LOCKING_GUARD = threading.Lock()
#: The Exclusive consumers that take key locks on each injected connection's one session
#: (weak both ways: a connection or consumer that is gone frees its place).
_SESSION_USERS: weakref.WeakKeyDictionary[Any, weakref.WeakSet[object]] = (
    weakref.WeakKeyDictionary()
)


@contextmanager
def _sole_lock_transaction(conn: Any) -> Iterator[None]:
    """Mark *conn* as carrying a key lock's transaction for the block.

    A second lock transaction begun on the same connection would be a savepoint of the first,
    and the advisory lock is re-entrant within a session: both would hold their keys. Raises
    ConfigurationError instead, before anything runs on the connection.
    """
    with _LOCKING_GUARD:
        if id(conn) in _LOCKING:
            raise ConfigurationError(
                "a key lock's transaction is already open on this connection: two lock "
                "holders cannot share one session (the advisory lock is re-entrant within "
                "it). Give each consumer its own transport or lock_pool, or use concurrency=1"
            )
        _LOCKING.add(id(conn))
    try:
        yield
    finally:
        with _LOCKING_GUARD:
            _LOCKING.discard(id(conn))
